"""Resize actions of the multi-agent env (``resizable=True``, :mod:`hetsched.envs.resizes`)."""

from __future__ import annotations

import numpy as np
import pytest
from env_helpers import TM, TWO_NODES, act, jobs, tiny_env

from hetsched.envs import ClusterParallelEnv, EnvSettings
from hetsched.envs.testing import check_env_suite, small_env_kwargs
from hetsched.sim.workload import Workload


def _grow(env: ClusterParallelEnv, slot: int = 0) -> int:
    """The resize action of resident slot ``slot``."""
    return env.core.resize_offset + slot


def _gpus_of(env: ClusterParallelEnv, job: int) -> int:
    a = env.core.round_allocation()
    return int(a.gpus[a.job == job].sum())


def _two_jobs(later_gpus: int, *, elastic: bool = True, seconds: float = 3600.0) -> Workload:
    """j0 (2 GPUs, elastic up to 4 unless ``elastic=False``) at t=0; j1 at t=120."""
    wl = jobs([2, later_gpus], arrival=[0.0, 120.0], seconds=seconds, elastic=elastic)
    return wl


def test_spaces_grow_by_one_action_per_resident_slot_after_the_evictions() -> None:
    kw = small_env_kwargs()
    plain = ClusterParallelEnv(**kw)
    both = ClusterParallelEnv(**kw, resizable=True, preemptive=True)
    R = plain.settings.resident_slots
    assert both.num_actions == plain.num_actions + 2 * R
    assert both.core.resize_offset == plain.num_actions + R
    assert ClusterParallelEnv(**kw, resizable=True).core.resize_offset == plain.num_actions
    with pytest.raises(ValueError, match="resizable='yes' must be true or false"):
        EnvSettings(resizable="yes")  # type: ignore[arg-type]


def test_resize_doubles_an_elastic_job_on_its_node_when_nothing_waiting_fits_there() -> None:
    env = tiny_env(_two_jobs(4), resizable=True, advance="event")
    env.reset(seed=0)
    g0 = _grow(env)
    assert not env.action_masks()[:, g0:].any()  # nothing runs yet
    obs, *_, infos = env.step(act(env, node_0=1))  # j0 on node_0 (2 of its 4 GPUs)
    assert infos["node_0"]["sim_time_s"] == pytest.approx(120.0)  # j1 (4 GPUs) arrived
    m = env.action_masks()
    assert m[0, 1 : env.core.n_place].any() and m[0, g0] == 0  # node_0 may join j1's gang
    env.step(act(env, node_1=1))  # j1 alone on node_1; nothing else waits
    m = env.action_masks()
    assert m[0, g0] == 1 and m[0, g0 + 1 :].sum() == 0  # node_0: j0 in slot 0 may grow
    assert m[1, g0:].sum() == 0  # node_1's job was placed this round: not resident yet
    free = env.core.free_g.copy()
    res, placed = env.core.resolve_claims(np.array([g0, 0]))  # the step's resolution alone
    assert res.resized_jobs == 1 and placed == 0 and not res.invalid.any()
    a = env.core.round_allocation()
    assert a.gpus[a.job == 0].tolist() == [4] and a.cpus[a.job == 0].tolist() == [16.0]
    assert env.core.free_g.tolist() == [free[0] - 2, free[1]]
    assert env.core.ma.mask[0, g0] == 0  # node_0 is full now


def test_resize_is_illegal_while_a_waiting_job_fits_the_node() -> None:
    env = tiny_env(_two_jobs(2), resizable=True, advance="event")
    env.reset(seed=0)
    env.step(act(env, node_0=1))  # j0 on node_0; j1 (2 GPUs) arrives and fits node_0
    m = env.action_masks()
    assert m[0, 1 : env.core.n_place].any() and m[0, _grow(env)] == 0


@pytest.mark.parametrize("elastic", [False, True])
def test_rigid_jobs_and_jobs_at_their_max_never_grow(elastic: bool) -> None:
    wl = _two_jobs(4, elastic=elastic)
    if elastic:  # j0 may hold at most its request
        wl.max_gpus[0] = wl.req_gpus[0]
    env = tiny_env(wl, resizable=True, advance="event")
    env.reset(seed=0)
    env.step(act(env, node_0=1))
    assert not env.action_masks()[:, _grow(env) :].any()


def test_a_resized_job_finishes_sooner_and_its_restart_is_charged() -> None:
    ends = {}
    for grow in (False, True):
        env = tiny_env(_two_jobs(4), resizable=True, advance="event")
        env.reset(seed=0)
        env.step(act(env, node_0=1))
        env.step(act(env, node_1=1))
        if grow:
            env.step(act(env, node_0=_grow(env)))
        while env.agents:
            env.step(act(env))
        assert env.core.sim is not None
        ends[grow] = float(env.core.sim.finish_time[0])
        assert int(env.core.sim.restarts[0]) == int(grow)
    assert ends[True] < ends[False]


def test_resizes_pass_the_conformance_kit_in_both_multi_agent_ids() -> None:
    kw = small_env_kwargs(resizable=True)
    report = check_env_suite(
        ["hetsched/Cluster-v0", "hetsched/ClusterPreempt-v0"], env_kwargs=kw, sb3=False
    )
    assert all("pettingzoo.parallel_api_test" in v for v in report.values())
    env = ClusterParallelEnv(**kw)
    env.reset(seed=3)
    rng, grown = np.random.default_rng(0), 0
    while env.agents:  # random legal play: resizes happen, allocations stay valid
        m = env.action_masks()
        pick = np.where(m[:, env.core.resize_offset :].any(axis=1), 1, 0)
        a = np.where(pick, env.core.resize_offset + m[:, env.core.resize_offset :].argmax(1), 0)
        a = np.where(pick, a, (rng.random(m.shape) * m).argmax(1))
        *_, infos = env.step(dict(zip(env.agents, a.tolist(), strict=True)))
        grown += int(next(iter(infos.values()))["resized_jobs"]) if infos else 0
    assert grown > 0


def test_a_resize_and_an_eviction_in_one_step_act_on_the_slots_the_agents_saw() -> None:
    # Three 4-GPU A100 nodes. X (6 GPUs, rigid) spans node_0 (4) and node_1 (2); Y (1 GPU,
    # elastic up to 2) and W (1 GPU) follow on node_1 and node_2; Z (8 GPUs) arrives at t=120
    # and fits nowhere, so node_0 may evict X while node_1 may grow Y (its slot 1).
    wl = jobs([6, 1, 1, 8], arrival=[0.0, 0.0, 0.0, 120.0], seconds=3600.0)
    wl.max_gpus[1] = 2
    three = {**TWO_NODES, "nodes": [{**TWO_NODES["nodes"][0], "count": 3}]}
    env = ClusterParallelEnv(
        three, wl, throughput=TM, levels={"gpu": [1.0], "cpu": [1.0], "mem": [1.0]},
        window=4, resizable=True, preemptive=True, advance="event",
    )  # fmt: skip
    env.reset(seed=0)
    env.step(act(env, node_0=1, node_1=1))  # X's gang
    env.step(act(env, node_1=1, node_2=2))  # Y on node_1, then W on node_2
    assert env.core.sim is not None and env.core.sim.time == pytest.approx(120.0)
    m = env.action_masks()
    assert m[0, env.core.n_place] == 1 and m[1, _grow(env) + 1] == 1  # evict X; grow Y
    res, _ = env.core.resolve_claims(np.array([env.core.n_place, _grow(env) + 1, 0]))
    assert res.evicted_jobs == 1 and res.resized_jobs == 1 and not res.invalid.any()
    a = env.core.round_allocation()
    assert dict(zip(a.job.tolist(), a.gpus.tolist(), strict=True)) == {1: 2, 2: 1}
