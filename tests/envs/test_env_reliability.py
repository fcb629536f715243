"""Nothing silent in the envs: stalls truncate with a count of unfinished jobs, handed-out masks
are copies, and stepping before ``reset()`` names the fix."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from env_helpers import act, jobs, tiny_central, tiny_env

from hetsched.envs import ClusterCentralEnv, ClusterParallelEnv, EnvNotResetError
from hetsched.sim.allocation import Allocation


def _parallel(**kw: Any) -> ClusterParallelEnv:
    return tiny_env(jobs([1, 1]), **kw)


def _preempt(**kw: Any) -> ClusterParallelEnv:
    return tiny_env(jobs([1, 1]), preemptive=True, **kw)


def _central(**kw: Any) -> ClusterCentralEnv:
    return tiny_central(jobs([1, 1]), **kw)


# ---------------------------------------------------------------- step() before reset()
@pytest.mark.parametrize("make", [_parallel, _preempt])
def test_multi_agent_step_before_reset_raises_a_one_line_error(make: Any) -> None:
    env = make()
    calls = {
        "step": lambda: env.step(act(env)),
        "step_allocation": lambda: env.step_allocation(Allocation.empty()),
        "state": env.state,
        "action_masks": env.action_masks,
    }
    for name, call in calls.items():
        with pytest.raises(
            EnvNotResetError, match=rf"ClusterParallelEnv\.{name}\(\) called before reset\(\)"
        ) as err:
            call()
        assert "\n" not in str(err.value) and "env.reset(seed=...)" in str(err.value)
    env.reset(seed=0)
    env.step(act(env))  # fine once reset


def test_central_step_before_reset_raises_a_one_line_error() -> None:
    env = _central()
    for name, call in {
        "step": lambda: env.step(0),
        "step_allocation": lambda: env.step_allocation(Allocation.empty()),
        "action_masks": env.action_masks,
    }.items():
        with pytest.raises(
            EnvNotResetError, match=rf"ClusterCentralEnv\.{name}\(\) called before reset\(\)"
        ):
            call()
    assert issubclass(EnvNotResetError, RuntimeError)
    env.reset(seed=0)
    env.step(0)


# ---------------------------------------------------------------- masks are copies
def test_writing_into_handed_out_masks_leaves_the_env_alone() -> None:
    env = tiny_env(jobs([4, 4, 4]))
    obs, infos = env.reset(seed=0)
    before = env.core.ma.mask.copy()
    assert before[:, 1:].any()  # some claims are legal
    # A client "helpfully" edits every mask it was given.
    for a in env.possible_agents:
        obs[a]["action_mask"][:] = 0
        infos[a]["action_mask"][:] = 0
    env.action_masks()[:] = 0
    np.testing.assert_array_equal(env.core.ma.mask, before)
    # The masks of one step are separate arrays: the observation's and the info's.
    obs, infos = env.reset(seed=0)
    obs["node_0"]["action_mask"][1] = 0
    assert infos["node_0"]["action_mask"][1] == before[0, 1]
    # A legal claim is still granted (an edited shared mask would have made it invalid).
    *_, infos = env.step(act(env, node_0=1))
    assert infos["node_0"]["placed"] == 1.0 and infos["node_0"]["invalid_action"] == 0.0


def test_central_masks_are_copies() -> None:
    env = tiny_central(jobs([4, 4]))
    _, info = env.reset(seed=0)
    keep = env.action_masks().copy()
    env.action_masks()[:] = False
    info["action_mask"][:] = 0
    np.testing.assert_array_equal(env.action_masks(), keep)


# ---------------------------------------------------------------- stall detector
@pytest.mark.parametrize("skip_idle", [True, False])
def test_a_policy_that_always_passes_is_truncated_as_stalled(skip_idle: bool) -> None:
    # Before the detector, this ran to max_cycles (one idle round per step) with no count of
    # the jobs left; now it stops after stall_steps steps and says how many jobs never ran.
    env = _parallel(stall_steps=7, max_cycles=500, skip_idle=skip_idle)
    env.reset(seed=0)
    n = 0
    while env.agents:
        _, _, terms, truncs, infos = env.step(act(env))  # every agent passes
        n += 1
    assert n == 7 and truncs["node_0"] and not terms["node_0"]
    info = infos["node_0"]
    assert info["stalled"] == 1.0 and info["unfinished_jobs"] == 2.0
    assert info["no_progress_steps"] == 7.0 and env.core.stall_reason == "no_progress"
    assert env.core.sim is not None and env.core.sim.time > 0  # time did advance each step
    # None switches the detector off: the same policy runs to max_cycles.
    env = _parallel(stall_steps=None, max_cycles=40, skip_idle=skip_idle)
    env.reset(seed=0)
    n = 0
    while env.agents:
        *_, infos = env.step(act(env))
        n += 1
    assert n == 40 and infos["node_0"]["stalled"] == 0.0


def test_central_env_truncates_a_passing_policy() -> None:
    env = _central(stall_steps=5, max_cycles=500)
    env.reset(seed=0)
    n, done, info = 0, False, dict[str, Any]()
    while not done:
        _, _, term, trunc, info = env.step(0)
        done, n = term or trunc, n + 1
    assert n == 5 and trunc and info["stalled"] == 1.0 and info["unfinished_jobs"] == 2.0


def test_running_jobs_are_progress_and_the_count_restarts() -> None:
    # job 0 (10 rounds long) is placed at once; the agents then pass while job 1 could start.
    env = _parallel(stall_steps=4, max_cycles=500)
    env.reset(seed=0)
    *_, infos = env.step(act(env, node_0=1))
    assert infos["node_0"]["placed_jobs"] == 1.0
    counts = []
    while env.agents:
        *_, infos = env.step(act(env))
        counts.append(infos["node_0"]["no_progress_steps"])
    # Zero while job 0 runs (its rounds are progress), then 1, 2, 3, 4 and the truncation.
    assert counts[-4:] == [1.0, 2.0, 3.0, 4.0] and set(counts[:-4]) == {0.0}
    assert len(counts) >= 9 and infos["node_0"]["unfinished_jobs"] == 1.0


@pytest.mark.parametrize("bad", [0, -3, 1.5, True, "10"])
def test_stall_steps_is_validated(bad: Any) -> None:
    with pytest.raises((ValueError, TypeError), match="stall_steps"):
        _parallel(stall_steps=bad)
