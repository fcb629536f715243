"""Cores granted above a job's request are lent (``EnvSettings.reclaim_cores``): taken back
while they strand free GPUs that a waiting job fits, given back when the node has them to
spare."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from env_helpers import act, jobs, tiny_env

from hetsched.envs import ClusterParallelEnv, EnvSettings


def _env(reclaim: bool, cores: float = 8.0, second: float = 7200.0) -> ClusterParallelEnv:
    """Job 0 (2 GPUs, 2 h, ``cores`` per GPU; 8 is the node's share) at t=0 and job 1 (1 GPU,
    4 cores, ``second`` s long) at t=600 s; node_0 grants job 0 twice its cores (with 8: all
    32, stranding the node's 2 free GPUs). Returns the env at the round job 1 arrives in."""
    wl = jobs([2, 1], arrival=[0.0, 600.0], seconds=7200.0)
    wl = replace(wl, cpu_per_gpu=np.array([cores, 4.0]), work=wl.work * [1.0, second / 7200.0])
    env = tiny_env(
        wl, window=2, levels={"gpu": [1.0], "cpu": [1.0, 2.0], "mem": [1.0]},
        advance="event", reclaim_cores=reclaim,
    )  # fmt: skip
    env.reset(seed=0)
    twice = int(env.core.codec.encode(0, 0, 1, 0))  # slot 0, 1x GPUs, 2x cores
    env.step(act(env, node_0=twice))
    while env.core.pending.size == 0:  # until job 1 arrives
        env.step(act(env))
    return env


def _held(env: ClusterParallelEnv, job: int) -> float:
    cur = env.core.running()
    return float(cur.cpus[cur.job == job].sum())


@pytest.mark.parametrize("reclaim", [False, True])
def test_a_grant_that_strands_free_gpus_is_taken_back_when_a_job_waits(reclaim: bool) -> None:
    env = _env(reclaim)
    core = env.core
    assert _held(env, 0) == (16.0 if reclaim else 32.0)  # back to the request: 2 GPUs x 8
    assert core.free_c[0] == (16.0 if reclaim else 0.0)
    assert bool(env.action_masks()[0, 1]) == reclaim  # job 1 is claimable only then
    if reclaim:
        *_, infos = env.step(act(env, node_0=1))
        assert infos["node_0"]["placed"] == 1
        assert core.sim is not None and int(core.sim.restarts[0]) == 0  # job 0 kept running


def test_a_grant_is_kept_while_the_free_gpus_have_their_share() -> None:
    env = _env(True, cores=4.0)  # twice 4 cores per GPU: 16 of 32, the free GPUs keep 16
    assert env.core.pending.tolist() == [1]
    assert _held(env, 0) == 16.0 and env.core.free_c[0] == 16.0


def test_a_grant_taken_back_is_given_back_as_far_as_the_free_gpus_leave_cores() -> None:
    # job 0 (2 GPUs, 8 cores per GPU) at 2x cores; job 1 (2 GPUs, 4 per GPU) at t=600 s takes
    # node_0's other 2 GPUs once 16 cores came back; job 2 (4 GPUs) at t=900 s opens a round
    wl = jobs([2, 2, 4], arrival=[0.0, 600.0, 900.0], seconds=7200.0)
    wl = replace(wl, cpu_per_gpu=np.array([8.0, 4.0, 4.0]))
    env = tiny_env(
        wl, window=2, levels={"gpu": [1.0], "cpu": [1.0, 2.0], "mem": [1.0]},
        advance="event", reclaim_cores=True,
    )  # fmt: skip
    env.reset(seed=0)
    env.step(act(env, node_0=int(env.core.codec.encode(0, 0, 1, 0))))
    while env.core.pending.size == 0:
        env.step(act(env))
    assert _held(env, 0) == 16.0  # job 1 waits and fits node_0's free GPUs: 16 came back
    env.step(act(env, node_0=1))  # job 1 on node_0 at 1x: 8 cores, no free GPU left
    while env.core.pending.size == 0:  # until job 2 arrives
        env.step(act(env))
    assert _held(env, 0) == 24.0  # the 8 spare cores are job 0's again (of the 16 it lent)
    assert env.core.free_c[0] == 0.0


def test_the_setting_is_checked() -> None:
    with pytest.raises(ValueError, match="reclaim_cores="):
        EnvSettings(reclaim_cores="yes")  # type: ignore[arg-type]
