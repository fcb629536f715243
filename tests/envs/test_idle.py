"""What kept a fitting waiting job off idle GPUs (hetsched.envs.idle.idle_cause)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from env_helpers import act, jobs, tiny_env

from hetsched.envs.idle import IDLE_CAUSES, idle_cause


def _cause(env, job: int, node: int) -> str:  # type: ignore[no-untyped-def]
    return idle_cause(env.core, np.array([job]), np.array([node]))


def test_window_then_claimable_with_a_backfill_slot() -> None:
    # node_0 takes job 0; jobs 1 and 2 (8 GPUs) cannot run, job 3 (1 GPU) fits node_1.
    for backfill, cause in ((0, "window"), (1, "claimable")):
        env = tiny_env(jobs([4, 8, 8, 1]), window=2, window_backfill=backfill)
        env.reset(seed=0)
        env.step(act(env, node_0=1))
        assert _cause(env, 3, 1) == cause


def test_level_and_cpu_mem() -> None:
    # Elastic job 1 requests 4 GPUs (min 2); with the 1x GPU level only, the 2 GPUs node_0
    # keeps after job 0 fit no level of it, while node_1's 4 do.
    env = tiny_env(jobs([2, 4], elastic=True), window=2)
    env.reset(seed=0)
    env.step(act(env, node_0=1))
    assert _cause(env, 1, 0) == "level" and _cause(env, 1, 1) == "claimable"
    # Job 0 takes node_0's 2 GPUs at twice the cores per GPU (all 32 cores): job 1 fits the
    # node's 2 free GPUs but has no cores there.
    wl = replace(jobs([2, 2]), cpu_per_gpu=np.array([8.0, 4.0]))  # the node's 8 cores per GPU
    env = tiny_env(wl, window=2, levels={"gpu": [1.0], "cpu": [1.0, 2.0], "mem": [1.0]})
    env.reset(seed=0)
    twice = int(env.core.codec.encode(0, 0, 1, 0))  # slot 0, 1x GPUs, 2x cores
    env.step(act(env, node_0=twice))
    assert env.core.free_c[0] == 0 and env.core.free_g[0] == 2
    assert _cause(env, 1, 0) == "cpu_mem"
    # Over several pairs the cause closest to a claim is reported.
    pairs = idle_cause(env.core, np.array([1, 1]), np.array([0, 1]))
    assert pairs == "claimable" and IDLE_CAUSES.index(pairs) == len(IDLE_CAUSES) - 1
