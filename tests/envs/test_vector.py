"""The SB3 vec-env adapter: slot layout, team reward, masks, auto-reset, the VecEnv methods."""

from __future__ import annotations

import numpy as np
import pytest
from env_helpers import TM, jobs, tiny_env

from hetsched.envs import ClusterParallelEnv
from hetsched.envs.vector import PettingZooToSB3VecEnv


def _first_legal(masks: np.ndarray) -> np.ndarray:
    """Per slot, the highest-index legal action (a placement where there is one)."""
    return np.array([int(np.flatnonzero(m)[-1]) for m in masks], dtype=np.int64)


def test_slots_are_the_agents_of_each_env_in_order() -> None:
    envs = [tiny_env(jobs([4, 2])), tiny_env(jobs([1]))]
    vec = PettingZooToSB3VecEnv(envs, seed=7)
    assert vec.num_envs == 4 and vec.n_agents == 2
    obs = np.asarray(vec.reset())
    for e, wl in enumerate((jobs([4, 2]), jobs([1]))):
        ref = tiny_env(wl)
        ref_obs, _ = ref.reset(seed=7 + e)
        for i, a in enumerate(ref.possible_agents):
            np.testing.assert_array_equal(obs[2 * e + i], ref_obs[a]["observation"])
            np.testing.assert_array_equal(
                vec.action_masks()[2 * e + i], ref_obs[a]["action_mask"].astype(bool)
            )
    assert vec.env_method("action_masks", indices=[1])[0].shape == (envs[0].num_actions,)


def test_team_reward_masks_and_auto_reset_on_termination() -> None:
    vec = PettingZooToSB3VecEnv([tiny_env(jobs([4, 2]))], seed=0)
    first = np.asarray(vec.reset())
    for _ in range(200):
        obs, rew, done, infos = vec.step(_first_legal(vec.action_masks()))
        assert rew[0] == rew[1]  # the team reward in every slot of the env
        assert all("action_mask" not in d for d in infos)
        if done.any():
            break
    else:
        pytest.fail("the episode did not end within 200 steps")
    assert done.all()
    for d in infos:
        assert d["TimeLimit.truncated"] is False
        assert d["terminal_observation"].shape == first.shape[1:]
    # Reset at once, unseeded: the fixed workload starts over from the same state.
    np.testing.assert_array_equal(obs, first)


def test_truncation_is_flagged_for_sb3() -> None:
    vec = PettingZooToSB3VecEnv([tiny_env(jobs([4, 4, 4, 4], arrival=[0, 50, 100, 150]))])
    vec.seed(0)
    vec.reset()
    noop = np.zeros(vec.num_envs, dtype=np.int64)
    vec.set_attr("max_cycles", 2)
    _, _, done, _ = vec.step(noop)
    assert not done.any()
    _, _, done, infos = vec.step(noop)
    assert done.all() and all(d["TimeLimit.truncated"] for d in infos)


def test_attributes_methods_and_errors() -> None:
    envs = [tiny_env(jobs([4])), tiny_env(jobs([2]))]
    vec = PettingZooToSB3VecEnv(envs)
    assert vec.get_attr("num_actions") == [envs[0].num_actions] * 4
    assert vec.get_attr("possible_agents", indices=3)[0] == envs[1].possible_agents
    assert vec.env_is_wrapped(object, indices=[0, 2]) == [False, False]  # type: ignore[arg-type]
    assert vec.seed(10) == [10, 10, 11, 11]
    vec.close()
    with pytest.raises(ValueError, match="needs at least one env"):
        PettingZooToSB3VecEnv([])
    three = ClusterParallelEnv(
        {
            "name": "three",
            "nodes": [{"gpu_type": "a100", "count": 3, "gpus": 4, "cpus": 32, "mem_gib": 256}],
        },
        jobs([4]),
        throughput=TM,
        levels={"gpu": [1.0], "cpu": [1.0], "mem": [1.0]},
        window=2,
    )
    with pytest.raises(ValueError, match="same agents and action space"):
        PettingZooToSB3VecEnv([envs[0], three])
