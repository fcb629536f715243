"""Direct moves (``EnvSettings.migrate_direct``): an eviction of a job that could run faster on a
free node moves it there in one action of its own node, before the step's claims."""

from __future__ import annotations

import numpy as np
import pytest
from env_helpers import TM, act, jobs
from test_env_migrate import GANG_FAST, SLOW_FAST

from hetsched.envs import ClusterParallelEnv, EnvSettings
from hetsched.envs.testing import small_env_kwargs


def _waiting_env(direct: bool, compiled: bool = True) -> ClusterParallelEnv:
    """j0 (1 GPU, 2 h on the A100, ~14.6 h on the K80) on the K80 node, j1 (4 GPUs, 10 min) on
    the A100 node, j2 (4 GPUs, 10 min) waiting; returned when j1 has finished."""
    wl = jobs([1, 4, 4], seconds=600.0)
    wl.work[0] *= 12.0
    env = ClusterParallelEnv(
        SLOW_FAST, wl, throughput=TM, levels={"gpu": [1.0], "cpu": [1.0], "mem": [1.0]},
        window=3, preemptive=True, migrate_speedup=1.25, migrate_direct=direct, advance="event",
    )  # fmt: skip
    env.reset(seed=0)
    if not compiled:
        env.core._claims_kernel = None  # the numpy path
    env.step(act(env, node_0=1, node_1=2))  # j0 on the K80, j1 on the A100; j2 waits
    while env.core.free_g[1] < 4:
        env.step(act(env))
    assert env.core.pending.tolist() == [2] and env.core.free_g.tolist() == [3, 4]
    return env


@pytest.mark.parametrize("compiled", [True, False])
def test_a_move_takes_the_fast_node_before_the_claims_of_the_step(compiled: bool) -> None:
    env = _waiting_env(direct=True, compiled=compiled)
    core = env.core
    evict = core.n_place
    # node_0 moves j0 while node_1 claims the waiting j2 (window slot 0) in the same step
    *_, infos = env.step(act(env, node_0=evict, node_1=1))
    assert infos["node_1"]["conflict"] == 1 and infos["node_0"]["conflict"] == 0
    assert infos["node_0"]["evicted_jobs"] == 1 and infos["node_0"]["placed_jobs"] == 0
    assert core.free_g.tolist() == [4, 3]  # j0 runs on the A100 node now
    assert core.pending.tolist() == [2]  # j2 still waits ...
    *_, infos = env.step(act(env, node_0=1))  # ... and takes the K80 node next
    assert infos["node_0"]["placed"] == 1
    while env.agents:
        env.step(act(env))
    assert core.sim is not None
    assert int(core.sim.restarts[0]) == 1  # the move pays one restart
    assert core.sim.finish_time[0] < 3 * 3600.0  # the K80 alone: about 14.6 h


def test_without_direct_moves_the_same_actions_evict_and_the_claim_wins() -> None:
    env = _waiting_env(direct=False)
    env.step(act(env, node_0=env.core.n_place, node_1=1))
    assert env.core.free_g.tolist() == [4, 0]  # j2 took the A100 node ...
    assert 0 in env.core.pending.tolist() and not env.core._placed[0]  # ... and j0 waits


def test_an_eviction_whose_job_cannot_move_stays_an_eviction() -> None:
    wl = jobs([1, 4, 4], [0.0, 0.0, 60.0], seconds=600.0)
    wl.work[:2] *= 12.0  # j1 holds the A100 node for 2 h: j0 has no target
    env = ClusterParallelEnv(
        SLOW_FAST, wl, throughput=TM, levels={"gpu": [1.0], "cpu": [1.0], "mem": [1.0]},
        window=3, preemptive=True, migrate_speedup=1.25, migrate_direct=True, advance="event",
    )  # fmt: skip
    env.reset(seed=0)
    env.step(act(env, node_0=1, node_1=2))
    assert env.core.sim is not None and env.core.sim.time == 60.0  # j2 arrived and waits
    assert env.core.pending.tolist() == [2] and env.core.free_g.tolist() == [3, 0]
    *_, infos = env.step(act(env, node_0=env.core.n_place))
    assert infos["node_0"]["evicted_jobs"] == 1
    assert env.core.pending.tolist() == [0, 2]  # back in the queue, in window order
    assert env.core.free_g.tolist() == [4, 0]


def test_a_gang_moves_whole_to_one_faster_node_in_one_step() -> None:
    wl = jobs([8, 8], seconds=600.0)
    wl.work[0] *= 12.0
    env = ClusterParallelEnv(
        GANG_FAST, wl, throughput=TM, levels={"gpu": [1.0], "cpu": [1.0], "mem": [1.0]},
        window=2, preemptive=True, migrate_speedup=1.25, migrate_gangs=True,
        migrate_direct=True, advance="event",
    )  # fmt: skip
    env.reset(seed=0)
    env.step(act(env, node_0=1, node_1=1, node_2=2))
    assert env.core.free_g.tolist() == [0, 0, 8]
    evict = env.core.n_place
    *_, infos = env.step(act(env, node_0=evict, node_1=evict))  # both name it: it moves once
    assert infos["node_0"]["evicted_jobs"] == 1 and infos["node_0"]["placed_jobs"] == 0
    while env.agents:
        env.step(act(env))
    sim = env.core.sim
    assert sim is not None and int(sim.restarts[0]) == 1  # moved once, as one piece
    assert sim.finish_time[0] < 3 * 3600.0  # 2 h on the A100 node plus the restart


def test_migrate_direct_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="migrate_direct needs migrate_speedup"):
        EnvSettings(preemptive=True, migrate_direct=True)
    with pytest.raises(ValueError, match="migrate_direct does not take migrate_elastic"):
        EnvSettings(
            preemptive=True, migrate_speedup=1.25, migrate_elastic=True, migrate_direct=True
        )


@pytest.mark.parametrize("compiled", [True, False])
def test_random_play_with_direct_moves_keeps_allocations_valid(compiled: bool) -> None:
    kw = small_env_kwargs(migrate_speedup=1.25, migrate_gangs=True, migrate_direct=True)
    env = ClusterParallelEnv(**kw, preemptive=True, validate_allocations=True)
    env.reset(seed=3)
    if not compiled:
        env.core._claims_kernel = None
    rng = np.random.default_rng(0)
    evictions = 0
    while env.agents:
        m = env.action_masks()
        a = (rng.random(m.shape) * m).argmax(1)
        *_, infos = env.step(dict(zip(env.agents, a.tolist(), strict=True)))
        evictions += int(next(iter(infos.values()))["evicted_jobs"])
    assert env.core.sim is not None and env.core.sim.done
    assert evictions > 0  # the play did move or evict jobs
