"""Warm-starting an eviction head: the teacher's eviction labels (its step 4), eviction-only
behaviour cloning (``bc.evict_only``) and the placement anchor (``bc.anchor``, ``ppo.anchor``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import fast_config, preempt_env, tiny_env, tiny_tm

from hetsched.agents.agent import Acting
from hetsched.agents.config import TrainConfig
from hetsched.agents.driver import TeamEnv
from hetsched.agents.teacher import SJFTeacher
from hetsched.agents.trainer import Trainer


def _preempt_config(steps: int = 0) -> TrainConfig:
    cfg = fast_config(steps=steps)
    cfg.agent.env.preemptive = True
    cfg.agent.env.fungible = False
    return cfg


def _at_arrival(env: TeamEnv, teacher: SJFTeacher) -> None:
    """Reset ``env`` and play the teacher's first step: the long job starts; the next decision
    step is the short job's arrival (helpers.preempt_env)."""
    env.reset(np.random.default_rng(0))
    env.step(teacher.act(env.core))
    core = env.core
    assert core.sim is not None and core.sim.time == pytest.approx(60.0)
    assert core.running().job.tolist() == [0]


def test_teacher_evicts_for_a_short_waiting_job() -> None:
    cfg = _preempt_config()
    tm = tiny_tm()
    env = preempt_env(cfg.agent, tm)
    plain = SJFTeacher(fungible=False)
    evictor = SJFTeacher(fungible=False, evict_ratio=2.5, evict_wait_s=0.0)
    _at_arrival(env, plain)
    core = env.core
    assert plain.act(core).tolist() == [0], "without evict_ratio the teacher never evicts"
    assert evictor.act(core).tolist() == [core.n_place], "evict slot 0 (the 10-hour job)"
    # The 10-hour job has 100x the short job's run time left: a ratio above that spares it,
    # and so does a waiting time the short job has not reached (it waited 0 s).
    assert SJFTeacher(fungible=False, evict_ratio=200.0, evict_wait_s=0.0).act(core)[0] == 0
    assert SJFTeacher(fungible=False, evict_ratio=2.5, evict_wait_s=1.0).act(core)[0] == 0
    # The whole episode under the evicting teacher: the short job does not wait 10 hours.
    _at_arrival(env, evictor)
    while not env.step(evictor.act(env.core)).done:
        pass
    assert core.sim is not None
    fin = core.sim.finish_time
    assert fin[1] < 3600.0 and fin[0] < 36000.0 + 3600.0, fin
    assert env.metrics()["restarts"] > 0


def test_teacher_never_evicts_in_the_plain_env() -> None:
    cfg = fast_config()
    cfg.agent.env.fungible = False
    env = preempt_env(cfg.agent, tiny_tm())  # same jobs, hetsched/Cluster-v0's actions
    evictor = SJFTeacher(fungible=False, evict_ratio=2.5, evict_wait_s=0.0)
    env.reset(np.random.default_rng(0))
    core = env.core
    assert core.n_place == core.n_actions
    while not env.step(evictor.act(core)).done:
        pass
    assert core.sim is not None
    assert core.sim.finish_time[1] > 36000.0, "no eviction: the short job waits"
    assert env.metrics()["restarts"] == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"evict_ratio": 0.0}, "evict_ratio=0.0 must be positive"), ({"evict_wait_s": -1.0}, ">= 0")],
)
def test_teacher_rejects_bad_eviction_settings(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SJFTeacher(**kwargs)  # type: ignore[arg-type]


def test_eviction_only_cloning_teaches_the_head_to_evict(tmp_path: Path) -> None:
    cfg = _preempt_config()
    a = cfg.agent
    a.net.evict_bias = -3.0  # an untrained head evicts rarely (as on a trained network)
    a.teacher.evict_ratio, a.teacher.evict_wait_s = 2.5, 0.0
    b = a.bc
    b.evict_only, b.episodes, b.dagger_rounds, b.dagger_episodes = True, 2, 1, 2
    b.epochs, b.lr = 30, 3e-3
    tm = tiny_tm()
    env = preempt_env(a, tm)
    torch.manual_seed(0)
    tr = Trainer(cfg, tmp_path, throughput=tm, envs=[env])
    teacher = SJFTeacher.for_agent(a)
    _at_arrival(env, teacher)
    n_place = env.core.n_place
    assert Acting(tr.net, a, greedy=True)(env.core)[0] != n_place, "untrained: no eviction"
    tr.run()
    _at_arrival(env, teacher)
    assert Acting(tr.net, a, greedy=True)(env.core)[0] == n_place, "cloned: it evicts"


def test_eviction_only_cloning_needs_the_preemptive_env(tmp_path: Path) -> None:
    cfg = fast_config(steps=0)
    cfg.agent.bc.evict_only = True
    with pytest.raises(ValueError, match="agent.env.preemptive=true"):
        Trainer(cfg, tmp_path, throughput=tiny_tm(), envs=[tiny_env(cfg.agent, tiny_tm())])


def test_anchor_needs_a_reference_network(tmp_path: Path) -> None:
    cfg = fast_config()
    cfg.agent.ppo.anchor = 1.0
    with pytest.raises(ValueError, match="pass init=PATH"):
        Trainer(cfg, tmp_path, throughput=tiny_tm(), envs=[tiny_env(cfg.agent, tiny_tm())])


def _placement_kl(tr: Trainer, env: TeamEnv) -> float:
    """The anchor's KL between the reference and the trained network on the first step."""
    env.reset(np.random.default_rng(0))
    d = Acting(tr.net, tr.conf, greedy=True).step(env.core)
    obs = torch.from_numpy(d["obs"][None]).float()
    mask, adj = torch.from_numpy(d["mask"][None]), torch.from_numpy(d["adj"][None])
    with torch.no_grad():
        logits, _, _ = tr.net(obs, mask, adj)
        return float(tr._anchor_kl(obs, mask, adj, logits))


def test_anchor_keeps_the_placements_near_the_reference(tmp_path: Path) -> None:
    tm = tiny_tm()
    cfg0 = fast_config(steps=0)
    torch.manual_seed(1)
    Trainer(cfg0, tmp_path / "ref", throughput=tm, envs=[tiny_env(cfg0.agent, tm, 2)]).run()
    ref = tmp_path / "ref" / "checkpoints" / "0.pt"
    kls = {}
    for anchor in (0.0, 5.0):
        cfg = fast_config(steps=256, anchor=anchor)
        cfg.init = str(ref)
        env = tiny_env(cfg.agent, tm, 2)
        torch.manual_seed(0)
        tr = Trainer(cfg, tmp_path / f"a{anchor}", throughput=tm, envs=[env])
        if anchor == 0.0:  # no reference without an anchor: measure against a copy of init
            assert tr.ref_net is None and float(tr._anchor_kl(*([torch.zeros(())] * 4))) == 0.0
            tr.ref_net = Trainer(cfg, tmp_path / "r2", throughput=tm, envs=[env]).net
        assert _placement_kl(tr, env) == pytest.approx(0.0, abs=1e-6), "init = reference"
        tr.run()
        kls[anchor] = _placement_kl(tr, env)
    assert kls[0.0] > 0.05, f"PPO should move the free network's placements: {kls}"
    assert kls[5.0] < 0.3 * kls[0.0], f"the anchor should hold them near the reference: {kls}"
