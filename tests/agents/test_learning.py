"""Learning test: PPO from scratch finds the known best schedule of a tiny instance."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch
from helpers import fast_config, preempt_env, tiny_env, tiny_tm

from hetsched.agents.acting import Acting
from hetsched.agents.checkpoint import load_checkpoint
from hetsched.agents.config import CurriculumItem, MAIFSAgentConf
from hetsched.agents.learner import forward
from hetsched.agents.policy import MAIFSPolicy
from hetsched.agents.rollout import episode_spec, play
from hetsched.agents.trainer import Trainer
from hetsched.sim.engine import SimConfig, Simulator
from hetsched.sim.workload import Workload


def test_ppo_learns_fast_node_and_cpu_level(tmp_path: Path) -> None:
    # 1024 steps: 512 found the fast node but, with some library versions, not yet the CPU level
    # (every torch seed picked 1.0); 1024 find both for every seed tried.
    cfg = fast_config(steps=1024)
    # Passing is part of what is learnt here (the T4 node leaves the job to the A100 node), so
    # the no-op stays legal for every agent (agent.env.work_conserving=false).
    cfg.agent.env.work_conserving = False
    tm = tiny_tm()
    env = tiny_env(cfg.agent, tm)
    tr = Trainer(cfg, tmp_path, throughput=tm, envs=[env])
    torch.manual_seed(0)
    tr.run()
    env.reset(np.random.default_rng(0))
    d = Acting(tr.net, cfg.agent, greedy=True).step(env.core)
    codec = env.core.codec
    a0, a1 = d["actions"].tolist()
    assert a0 == 0, "the T4 node should leave the job to the A100 node"
    k, g, c, m = (int(x[0]) for x in codec.decode([a1]))
    levels = env.core.cfg.levels
    assert (k, levels.gpu[g], levels.cpu[c]) == (0, 1.0, 2.0)
    assert levels.mem[m] >= 1.0  # both memory levels >= the request are optimal


def test_ppo_learns_to_evict_for_a_short_job(tmp_path: Path) -> None:
    """Preemptive env: PPO from scratch finds the one schedule that evicts (helpers.preempt_env)."""
    cfg = fast_config(steps=512)
    cfg.agent.env.preemptive = True
    cfg.agent.env.fungible = False  # one placement action per slot: the test is about eviction
    tm = tiny_tm()
    env = preempt_env(cfg.agent, tm)
    tr = Trainer(cfg, tmp_path, throughput=tm, envs=[env])
    torch.manual_seed(0)
    tr.run()
    assert tr.net.dims.evict_slots == cfg.agent.env.resident_slots
    env.reset(np.random.default_rng(0))
    acting = Acting(tr.net, cfg.agent, greedy=True)
    core = env.core
    actions: list[int] = []
    done = False
    while not done:
        a = acting(core)
        actions.append(int(a[0]))
        done = env.step(a).done
    assert core.n_place in actions, f"the node never evicted (actions {actions})"
    assert core.sim is not None and env.core.all_finished
    fin = core.sim.finish_time
    assert fin[1] < 3600.0, f"the short job waited for the long one (finish times {fin})"
    assert fin[0] < 36000.0 + 3600.0
    # The checkpoint evicts the same way as a scheduler on the simulator (evaluation's path).
    ck = tmp_path / "checkpoints" / f"ppo_{tr.env_steps}.pt"
    assert load_checkpoint(ck)["env_id"] == "hetsched/ClusterPreempt-v0"
    pol = MAIFSPolicy(checkpoint=ck)
    wl = env.core.workload_source
    assert isinstance(wl, Workload)
    pol.reset(core.cluster, wl, tm, np.random.default_rng(0))
    res = Simulator(core.cluster, wl, tm, SimConfig(round_s=60)).run(pol)
    assert np.array_equal(res.finish_time, fin)
    assert res.restarts.tolist() == [1, 0]
    env.reset(np.random.default_rng(0))
    env.step(acting(core))  # the long job starts; the short one arrives
    # One agent, no edge: max-sum takes the ordered decision's greedy action, evictions too.
    maxsum = dataclasses.replace(cfg.agent, conflict="maxsum")
    want = Acting(tr.net, cfg.agent, greedy=True)(core)
    got = Acting(tr.net, maxsum, greedy=True)(core)
    assert want[0] >= core.n_place and np.array_equal(got, want)  # both evict


def test_recorded_log_probs_are_what_the_learner_scores(tmp_path: Path) -> None:
    """PPO's ratio starts at 1: the log-prob recorded for each sampled action equals the one the
    learner computes from the recorded observation, mask and graph. On a real window, ordered
    decisions leave some agents with the no-op legal again after their binding claims were
    taken; a mismatch there once made PPO's ratios meaningless."""
    cfg = fast_config(steps=0)
    cfg.agent = dataclasses.replace(
        cfg.agent,
        curriculum=[CurriculumItem(scenario="philly_sia64_busy", seed_lo=1000, seed_hi=1001)],
    )
    # the shipped recipe's action semantics (conf/agent/maifs.yaml): binding claims
    cfg.agent.env = dataclasses.replace(
        MAIFSAgentConf().env,
        preemptive=True,
        migrate_speedup=1.25,
        wait_below=0.0,
        gang_binding=True,
        window_backfill=8,
    )
    cfg.agent.net.hidden = 32
    cfg.agent.cluster_draw.fraction = 0.0
    torch.manual_seed(0)
    tr = Trainer(cfg, tmp_path)
    spec = episode_spec(0, 0, tr.items, "agent")
    ep = play(tr.envs[spec.item], tr.net, tr.conf, tr.teacher, spec)
    with torch.no_grad():
        f = forward(tr.net, ep, np.arange(ep.length))
    active = f.active.numpy() > 0
    np.testing.assert_allclose(f.taken.numpy()[active], ep.logp[active], atol=1e-4)
