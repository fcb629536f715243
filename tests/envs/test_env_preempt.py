"""Eviction actions of the preemptive multi-agent env (``hetsched/ClusterPreempt-v0``)."""

from __future__ import annotations

import numpy as np
import pettingzoo
import pytest
from env_helpers import TM, TWO_NODES, act, jobs, tiny_central, tiny_env

from hetsched.envs import ClusterParallelEnv, EnvSettings, make_parallel
from hetsched.envs.testing import small_env_kwargs


def _evict(env: ClusterParallelEnv, slot: int = 0) -> int:
    """The eviction action of resident slot ``slot``."""
    return env.core.n_place + slot


def _last_placement(env: ClusterParallelEnv) -> dict[str, int]:
    """Every agent's last legal placement action (no-op when none): never an eviction."""
    m = env.action_masks()[:, : env.core.n_place]
    return {ag: int(np.flatnonzero(m[i])[-1]) for i, ag in enumerate(env.possible_agents)}


def test_spaces_grow_by_one_action_per_resident_slot() -> None:
    kw = small_env_kwargs()
    plain = make_parallel("hetsched/Cluster-v0", **kw)
    pre = make_parallel("hetsched/ClusterPreempt-v0", **kw)
    assert isinstance(pre, ClusterParallelEnv) and pre.settings.preemptive
    R = pre.settings.resident_slots
    assert pre.num_actions == plain.num_actions + R
    a = pre.possible_agents[0]
    assert pre.action_space(a).n == plain.action_space(a).n + R  # type: ignore[attr-defined]
    assert pre.observation_space(a)["action_mask"].shape == (pre.num_actions,)  # type: ignore[index]
    assert pre.observation_space(a)["observation"] == plain.observation_space(a)["observation"]  # type: ignore[index]
    assert isinstance(
        pettingzoo.make("parallel", "hetsched/ClusterPreempt-v0", **kw), ClusterParallelEnv
    )


def test_preempt_id_refuses_preemptive_false_and_settings_check_the_flag() -> None:
    with pytest.raises(ValueError, match="use hetsched/Cluster-v0"):
        make_parallel("hetsched/ClusterPreempt-v0", preemptive=False, **small_env_kwargs())
    with pytest.raises(ValueError, match="preemptive='yes' must be true or false"):
        EnvSettings(preemptive="yes")  # type: ignore[arg-type]


def test_eviction_is_legal_only_for_running_jobs_while_a_job_waits() -> None:
    # j0, j1: 4 GPUs for an hour from t=0; j2: 4 GPUs, arrives at t=120 (a round boundary).
    wl = jobs([4, 4, 4], arrival=[0.0, 0.0, 120.0], seconds=3600.0)
    env = tiny_env(wl, preemptive=True, advance="event")
    obs, _ = env.reset(seed=0)
    ev0 = _evict(env)
    assert not env.action_masks()[:, ev0:].any()  # nothing runs yet
    obs, *_, infos = env.step(act(env, node_0=1, node_1=2))  # j0 on node_0, j1 on node_1
    assert infos["node_0"]["placed"] == 1.0 and infos["node_1"]["placed"] == 1.0
    # Both nodes are full and nothing waits until j2 arrives: the env skips to t=120.
    assert infos["node_0"]["sim_time_s"] == pytest.approx(120.0)
    m = obs["node_0"]["action_mask"]
    assert m[ev0] == 1 and m[ev0 + 1 :].sum() == 0  # one resident job: slot 0 only
    assert obs["node_1"]["action_mask"][ev0] == 1
    plain = tiny_env(wl, advance="event")
    plain.reset(seed=0)
    _, *_, pinfos = plain.step(act(plain, node_0=1, node_1=2))
    # Without eviction actions nothing is legal at t=120: the env jumps to the first completion.
    assert pinfos["node_0"]["sim_time_s"] > 3000.0


def test_evicted_job_waits_again_and_its_room_serves_the_short_job() -> None:
    wl = jobs([4, 4, 4], arrival=[0.0, 0.0, 120.0], seconds=3600.0)
    wl.work[2] = wl.work[2] / 36.0  # j2: 100 s alone
    env = tiny_env(wl, preemptive=True, advance="event", window=3)
    env.reset(seed=0)
    env.step(act(env, node_0=1, node_1=2))
    obs, rew, _, _, infos = env.step(act(env, node_0=_evict(env)))
    i0 = infos["node_0"]
    assert i0["evicted_jobs"] == 1.0 and i0["sim_time_s"] == pytest.approx(120.0)
    assert i0["invalid_action"] == 0.0 and i0["rounds_advanced"] == 0.0  # the round goes on
    core = env.core
    assert core.free_g.tolist() == [4, 0]
    assert core.round_allocation().job.tolist() == [1]
    assert core.window.tolist() == [0, 2, -1]  # j0 waits again, in arrival order
    assert not obs["node_0"]["action_mask"][_evict(env)]  # node_0 holds nothing now
    assert obs["node_0"]["action_mask"][1 + 1] == 1  # slot 1 (j2) fits node_0
    env.step(act(env, node_0=2))  # j2 takes node_0
    while env.agents:
        env.step(_last_placement(env))
    fin = env.sim_result().finish_time
    plain = tiny_env(wl, advance="event", window=3)
    plain.reset(seed=0)
    plain.step(act(plain, node_0=1, node_1=2))
    while plain.agents:
        plain.step(_last_placement(plain))
    pfin = plain.sim_result().finish_time
    assert fin[2] < 400.0 < pfin[2]  # the short job no longer waits for an hour
    assert fin[0] > pfin[0]  # the evicted job pays for it, progress kept: not a fresh start
    assert fin[0] < pfin[0] + 3600.0


def test_evicting_a_gang_frees_every_node_and_counts_it_once() -> None:
    wl = jobs([8, 4], arrival=[0.0, 100.0], seconds=3600.0)
    env = tiny_env(wl, preemptive=True, advance="event")
    env.reset(seed=0)
    env.step(act(env, node_0=1, node_1=1))  # an 8-GPU gang over both nodes
    assert env.core.free_g.tolist() == [0, 0]
    _, _, _, _, infos = env.step(act(env, node_0=_evict(env), node_1=_evict(env)))
    assert infos["node_0"]["evicted_jobs"] == 1.0
    assert env.core.free_g.tolist() == [4, 4] and env.core.round_allocation().size == 0
    assert sorted(env.core.window.tolist()) == [0, 1]


def test_a_policy_that_never_evicts_gets_the_plain_envs_schedule() -> None:
    wl = jobs([4, 2, 8, 4, 2, 2], arrival=[0.0, 0.0, 50.0, 300.0, 900.0, 900.0], seconds=1800.0)
    runs = []
    for pre in (False, True):
        env = tiny_env(wl, preemptive=pre, advance="event", window=3)
        env.reset(seed=0)
        while env.agents:
            env.step(_last_placement(env))
        runs.append(env.sim_result().finish_time)
    assert np.array_equal(runs[0], runs[1])


def test_invalid_evictions_are_counted_and_change_nothing() -> None:
    wl = jobs([4, 4], arrival=[0.0, 100.0], seconds=3600.0)
    env = tiny_env(wl, preemptive=True, advance="event")
    env.reset(seed=0)
    # Nothing runs yet: every eviction is masked, and the out-of-range action is malformed.
    _, _, _, _, infos = env.step(act(env, node_0=_evict(env), node_1=env.num_actions))
    assert infos["node_0"]["invalid_action"] == 1.0 and infos["node_1"]["invalid_action"] == 1.0
    assert infos["node_0"]["evicted_jobs"] == 0.0


def test_cluster_arg_reaches_the_core() -> None:
    env = ClusterParallelEnv(TWO_NODES, jobs([4]), throughput=TM, preemptive=True)
    assert env.core.n_actions == env.core.n_place + env.settings.resident_slots


def test_vector_adapter_and_rllib_wrapper_carry_the_eviction_actions() -> None:
    from hetsched.envs.vector import PettingZooToSB3VecEnv
    from hetsched.envs.wrappers import rllib_env

    wl = jobs([4, 4, 4], arrival=[0.0, 0.0, 120.0], seconds=3600.0)
    env = tiny_env(wl, preemptive=True, advance="event")
    vec = PettingZooToSB3VecEnv([env], seed=0)
    vec.reset()
    assert vec.action_masks().shape == (2, vec.action_space.n)  # type: ignore[attr-defined]
    ev = env.core.n_place  # slot 0's eviction
    vec.step(np.array([1, 2]))  # both jobs start; j2 arrives: evictions become legal
    assert vec.action_masks()[:, ev].all()
    r = rllib_env(cluster=TWO_NODES, workload=wl, throughput=TM, preemptive=True, window=2)
    obs, _ = r.reset(seed=0)
    assert obs["node_0"]["action_mask"].shape == (r.action_space("node_0").n,)  # type: ignore[attr-defined]


def test_central_env_refuses_preemptive_with_a_pointer() -> None:
    with pytest.raises(ValueError, match="use the multi-agent hetsched/ClusterPreempt-v0"):
        tiny_central(jobs([4]), preemptive=True)
    assert tiny_central(jobs([4]), preemptive=False).action_space.n > 1  # type: ignore[attr-defined]


def test_evict_max_masks_a_job_whose_allowance_is_spent() -> None:
    wl = jobs([4, 4, 4, 4], arrival=[0.0, 0.0, 120.0, 600.0], seconds=3600.0)
    wl.work[2] = wl.work[2] / 36.0  # j2: 100 s alone
    env = tiny_env(wl, preemptive=True, advance="event", window=3, evict_max=1)
    env.reset(seed=0)
    env.step(act(env, node_0=1, node_1=2))  # j0 on node_0, j1 on node_1; j2 arrives at 120
    env.step(act(env, node_0=_evict(env)))  # j0 evicted once
    env.step(act(env, node_0=2))  # j2 takes node_0
    while env.core.sim is not None and env.core.sim.time < 600.0:
        env.step(_last_placement(env))  # j2 ends, j0 comes back to node_0; then j3 arrives
    alloc = env.core.round_allocation()
    assert alloc.node[alloc.job == 0].tolist() == [0] and 3 in env.core.window.tolist()
    m = env.action_masks()
    assert m[0, _evict(env)] == 0  # j0 was evicted once: its allowance is spent
    assert m[1, _evict(env)] == 1  # j1 was never evicted
    with pytest.raises(ValueError, match="evict_max=-1 must be an integer >= 0"):
        EnvSettings(evict_max=-1)


def test_make_parallel_builds_each_id_without_pettingzoo_make(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pettingzoo, "make", None)  # an older PettingZoo: the plain factories
    kw = small_env_kwargs()
    assert not make_parallel("hetsched/Cluster-v0", **kw).settings.preemptive
    assert make_parallel("hetsched/ClusterPreempt-v0", **kw).settings.preemptive
    with pytest.raises(ValueError, match="unknown parallel env id"):
        make_parallel("hetsched/Nope-v0", **kw)
