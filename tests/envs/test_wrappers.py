"""The library-adapting wrappers (no RLlib / TorchRL needed)."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.envs.testing import masked_random_actions, small_env_kwargs
from hetsched.envs.wrappers import DropInfoKeys, MaskKeyWrapper, rllib_env, torchrl_env


def test_rllib_keys_and_float_mask() -> None:
    env = rllib_env(**small_env_kwargs())
    assert isinstance(env, MaskKeyWrapper)
    obs, infos = env.reset(seed=0)
    a0 = env.possible_agents[0]
    assert env.observation_space(a0) is env.observation_space(a0)
    assert set(obs[a0]) == {"observations", "action_mask"}
    assert obs[a0]["action_mask"].dtype == np.float32
    assert env.observation_space(a0).contains(obs[a0])
    rng = np.random.default_rng(0)
    steps = 0
    while env.agents:
        masks = np.stack([obs[a]["action_mask"] for a in env.possible_agents])
        acts = masked_random_actions(masks, rng)
        obs, _, _, _, infos = env.step(dict(zip(env.possible_agents, acts.tolist(), strict=True)))
        assert infos[a0]["invalid_action"] == 0.0
        steps += 1
    assert steps >= 2 and env.state().shape == env.state_space.shape
    assert isinstance(env.render("ansi"), str)
    with pytest.raises(ValueError, match="must differ"):
        MaskKeyWrapper(env.env, obs_key="m", mask_key="m")


def test_torchrl_env_drops_info_mask_only() -> None:
    env = torchrl_env(**small_env_kwargs())
    assert isinstance(env, DropInfoKeys)
    obs, infos = env.reset(seed=0)
    a0 = env.possible_agents[0]
    assert "action_mask" not in infos[a0] and "invalid_action" in infos[a0]
    assert "action_mask" in obs[a0]
    _, _, _, _, infos = env.step(dict.fromkeys(env.possible_agents, 0))
    assert "action_mask" not in infos[a0]
