"""The teacher's preemption rule (``evict_ratio``): a job evicted this round is placed after the
other waiting jobs rather than skipped (so it can take a node that frees in the same round, by a
migration say), ``evict_protect`` spares the longest victims, and the rule works with
migrations."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_cluster, make_workload
from helpers import tiny_tm

from hetsched.agents.driver import TeamEnv
from hetsched.agents.teacher import SJFTeacher
from hetsched.envs.spaces import EnvSettings

SETTINGS = EnvSettings(window=4, advance="event", round_s=60, preemptive=True)


def _two_long_one_short(work: tuple[float, float]) -> TeamEnv:
    """Two one-GPU A100 nodes running long jobs 0 and 1 (``work``) from t=0; a short job 2
    arrives at t=60 s and fits nowhere. Returned at the t=60 s round."""
    cl = make_cluster([{"gpu_type": "a100", "count": 2, "gpus": 1, "cpus": 16, "mem_gib": 64}])
    wl = make_workload([0.0, 0.0, 60.0], [work[0], work[1], 600.0], [1, 1, 1])
    env = TeamEnv(cl, wl, tiny_tm(), SETTINGS)
    env.reset(np.random.default_rng(0))
    core = env.core
    env.step(SJFTeacher(min_rel_rate=0.0).act(core))  # jobs 0 and 1 start
    assert core.sim is not None and core.sim.time == 60.0
    assert core.pending.tolist() == [2] and core.free_g.tolist() == [0, 0]
    return env


def test_an_evicted_job_comes_after_the_others_but_still_takes_a_free_node() -> None:
    env = _two_long_one_short((4e6, 4e6))
    core = env.core
    P = core.n_place
    env.step(np.array([P, P]))  # both nodes evict their job: both are free, three jobs wait
    assert core.free_g.tolist() == [1, 1] and sorted(core.pending.tolist()) == [0, 1, 2]
    teacher = SJFTeacher(min_rel_rate=0.0, evict_ratio=2.0, evict_wait_s=0.0)
    actions = teacher.act(core)
    assert (actions > 0).all() and (actions < P).all()  # both nodes claim a job
    claimed = core.window[core.codec.decode(actions)[0]].tolist()
    assert 2 in claimed  # the short job first ...
    assert len(set(claimed)) == 2  # ... and an evicted job on the other node, not skipped


@pytest.mark.parametrize("protect", [None, 0.8])
def test_evict_protect_spares_the_victim_with_the_longest_remaining_time(
    protect: float | None,
) -> None:
    env = _two_long_one_short((8e6, 2e6))  # job 0 has four times job 1's work left
    teacher = SJFTeacher(min_rel_rate=0.0, evict_ratio=2.0, evict_wait_s=0.0, evict_protect=protect)
    actions = teacher.act(env.core)
    P = env.core.n_place
    # without protection the longest job goes; with it, the shorter one is the victim
    assert actions.tolist() == ([P, 0] if protect is None else [0, P])


def test_evictions_and_migrations_together_and_protect_is_checked() -> None:
    t = SJFTeacher(evict_ratio=2.0, migrate_gain_s=300.0, evict_protect=1.0)
    assert t.evict_ratio == 2.0 and t.migrate_gain_s == 300.0
    with pytest.raises(ValueError, match=r"evict_protect=0.0 must lie in \(0, 1\]"):
        SJFTeacher(evict_ratio=2.0, evict_protect=0.0)


def _elastic_over_share() -> TeamEnv:
    """An elastic job (1-8 GPUs, request 4) started alone at 8 GPUs on the only (8-GPU) node; two
    4-GPU jobs arrive at t=60 s, so its share of the cluster falls to 8/3 GPUs. Returned at
    the t=60 s round."""
    cl = make_cluster([{"gpu_type": "a100", "count": 1, "gpus": 8, "cpus": 64, "mem_gib": 512}])
    wl = make_workload(
        [0.0, 60.0, 60.0], [4e6, 6e4, 6e4], [4, 4, 4], elastic=([1, 4, 4], [8, 4, 4])
    )
    env = TeamEnv(cl, wl, tiny_tm(), SETTINGS)
    env.reset(np.random.default_rng(0))
    core = env.core
    env.step(SJFTeacher(min_rel_rate=0.0).act(core))
    assert core.sim is not None and core.sim.time == 60.0
    assert core.free_g.tolist() == [0] and sorted(core.pending.tolist()) == [1, 2]
    assert int(core.running().gpus.sum()) == 8  # started at its share: the whole node
    return env


@pytest.mark.parametrize(("shrink", "evicts"), [(None, False), (1.0, True), (4.0, False)])
def test_shrink_share_evicts_an_elastic_job_above_its_share_while_jobs_wait(
    shrink: float | None, evicts: bool
) -> None:
    env = _elastic_over_share()
    core = env.core
    actions = SJFTeacher(min_rel_rate=0.0, shrink_share=shrink).act(core)
    # 8 GPUs against a share of 8/3: above 1x the share, within 4x it
    assert actions.tolist() == ([core.n_place] if evicts else [0])
    if evicts:
        env.step(actions)
        assert 0 in core.pending.tolist() and core.free_g.tolist() == [8]
        relabel = SJFTeacher(min_rel_rate=0.0, shrink_share=shrink).act(core)
        k, g_lvl = core.codec.decode(relabel)[:2]
        assert core.jt is not None and int(core.window[int(k[0])]) == 0  # long: first again
        assert int(core.jt.gpu_count[0, int(g_lvl[0])]) == 2  # ... within its share this time
    with pytest.raises(ValueError, match="shrink_share=0.5 must be >= 1"):
        SJFTeacher(shrink_share=0.5)


def test_over_share_and_the_shrink_feature_show_a_job_above_its_share() -> None:
    """:func:`over_share` is the elastic job's 8 GPUs over its share of 8/3 (3.0); the agent's
    ``shrink_feature`` shows it in the first resident slot as ``(log2(3) + 4) / 8``."""
    from hetsched.agents.acting import agent_observations, net_dims
    from hetsched.agents.config import AgentEnvConf
    from hetsched.agents.signals import over_share

    env = _elastic_over_share()
    core = env.core
    got = over_share(core)
    assert got[0, 0] == pytest.approx(3.0) and (got[0, 1:] == 0).all()
    obs = agent_observations(core, AgentEnvConf(shrink_feature=True))
    R = core.cfg.resident_slots
    assert obs.shape[1] == core.layout.obs_dim + R
    assert obs[0, -R] == pytest.approx((np.log2(3.0) + 4.0) / 8.0)
    assert (obs[0, -R + 1 :] == 0).all()
    both = agent_observations(core, AgentEnvConf(shrink_feature=True, move_feature=True))
    assert both.shape[1] == core.layout.obs_dim + 2 * R  # slot by slot: move, then shrink
    assert both[0, -2 * R + 1] == obs[0, -R] and both[0, -2 * R] == 0.0
    dims = net_dims(core.layout, core.cfg.levels, preemptive=True, res_extra=1)
    assert dims.obs_dim == obs.shape[1]


def test_evictions_in_a_resizable_env_read_only_the_eviction_actions() -> None:
    """With resize actions appended after the evictions, the eviction-legal view is one column
    per resident slot: an elastic job at 4 of the node's 8 GPUs may be doubled (the waiting
    8-GPU job fits nowhere), and the teacher evicts it for that job, a resize column never
    being read as a resident slot. With shrinks too, the shrink sees the step's evictions as
    actions taken, not as claims."""
    from dataclasses import replace

    from hetsched.agents.signals import legal_evictions

    cl = make_cluster([{"gpu_type": "a100", "count": 1, "gpus": 8, "cpus": 64, "mem_gib": 512}])
    wl = make_workload([0.0, 60.0], [4e6, 6e4], [2, 8], elastic=([1, 8], [8, 8]))
    env = TeamEnv(cl, wl, tiny_tm(), replace(SETTINGS, resizable=True))
    env.reset(np.random.default_rng(0))
    core = env.core
    env.step(SJFTeacher(min_rel_rate=0.0).act(core))
    assert core.sim is not None and core.sim.time == 60.0 and core.free_g.tolist() == [4]
    R = core.cfg.resident_slots
    assert core.ma.mask.shape[1] == core.n_place + 2 * R  # evictions, then resizes
    assert core.ma.mask[0, core.n_place + R] == 1  # doubling the resident job is legal
    assert legal_evictions(core).shape == (core.N, R)
    for shrink in (None, 1.0):
        t = SJFTeacher(min_rel_rate=0.0, evict_ratio=2.0, evict_wait_s=0.0, shrink_share=shrink)
        assert t.act(core).tolist() == [core.n_place]  # the eviction of resident slot 0
