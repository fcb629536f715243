"""Thin wrappers that adapt the multi-agent env's observation layout to other libraries.

:class:`MaskKeyWrapper` renames the per-agent observation keys and converts the mask's dtype.
RLlib's action-masking RLModule (new API stack, ``ActionMaskingTorchRLModule``) expects
``Dict({"observations": Box, "action_mask": Box(0, 1, (A,), float32)})`` -- "observations",
plural -- while PettingZoo's convention (and :class:`ClusterParallelEnv`) is
``{"observation": ..., "action_mask": int8}``; :func:`rllib_env` applies it with those
defaults. Dynamics, rewards, infos and ``state()`` pass through unchanged.

:class:`DropInfoKeys` removes info keys. TorchRL's ``PettingZooWrapper`` (0.14) fails at reset
when the mask is both an observation key and an info key (it builds the info spec without
``action_mask`` but only deletes the observation's copy), so :func:`torchrl_env` drops the
info copy; the mask still reaches TorchRL as ``(group, "action_mask")``.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from numpy.typing import NDArray
from pettingzoo.utils.wrappers import BaseParallelWrapper

from hetsched.envs.cluster_env import ClusterParallelEnv

Obs = dict[str, NDArray[Any]]


class MaskKeyWrapper(BaseParallelWrapper[str, Obs, int]):
    """Rename the ``observation`` / ``action_mask`` keys and cast the mask.

    Args:
        env: The multi-agent env (or another parallel wrapper around it).
        obs_key: New key of the feature vector (RLlib: ``"observations"``).
        mask_key: New key of the action mask.
        mask_dtype: dtype of the mask (RLlib takes the log of a float mask).
    """

    def __init__(
        self,
        env: ClusterParallelEnv | BaseParallelWrapper[str, Obs, int],
        *,
        obs_key: str = "observations",
        mask_key: str = "action_mask",
        mask_dtype: type[np.generic] = np.float32,
    ) -> None:
        super().__init__(env)
        if obs_key == mask_key:
            raise ValueError(f"obs_key and mask_key must differ (both {obs_key!r})")
        self.obs_key = obs_key
        self.mask_key = mask_key
        self.mask_dtype = np.dtype(mask_dtype)
        inner = env.observation_space(env.possible_agents[0])
        assert isinstance(inner, gymnasium.spaces.Dict)
        box = inner["observation"]
        n = int(inner["action_mask"].shape[0])  # type: ignore[index]
        space = gymnasium.spaces.Dict(
            {obs_key: box, mask_key: gymnasium.spaces.Box(0, 1, (n,), self.mask_dtype.type)}
        )
        self._spaces = dict.fromkeys(env.possible_agents, space)
        self.possible_agents = list(env.possible_agents)
        self.metadata = env.metadata
        self.render_mode = getattr(env, "render_mode", None)

    @property
    def agents(self) -> list[str]:
        """Live agents of the wrapped env."""
        return list(self.env.agents)

    def observation_space(self, agent: str) -> gymnasium.spaces.Space[Any]:
        """The renamed Dict space (the same object on every call)."""
        return self._spaces[agent]

    def _convert(self, obs: dict[str, Obs]) -> dict[str, Obs]:
        k, mk, dt = self.obs_key, self.mask_key, self.mask_dtype
        return {
            a: {k: o["observation"], mk: o["action_mask"].astype(dt, copy=False)}
            for a, o in obs.items()
        }

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Obs], dict[str, dict[str, Any]]]:
        """Reset the wrapped env and rename its observations."""
        obs, infos = self.env.reset(seed=seed, options=options)
        return self._convert(obs), infos

    def step(
        self, actions: dict[str, int]
    ) -> tuple[
        dict[str, Obs],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        """Step the wrapped env and rename its observations."""
        obs, rew, term, trunc, infos = self.env.step(actions)
        return self._convert(obs), rew, term, trunc, infos

    def render(self, mode: str | None = None) -> Any:
        """Render the wrapped env (RLlib passes a mode argument; it is forwarded)."""
        return (
            self.env.render(mode) if isinstance(self.env, ClusterParallelEnv) else self.env.render()
        )


def rllib_env(**env_kwargs: Any) -> MaskKeyWrapper:
    """A :class:`ClusterParallelEnv` with RLlib's observation keys (wrap it in RLlib's
    ``ParallelPettingZooEnv``)."""
    return MaskKeyWrapper(ClusterParallelEnv(**env_kwargs))


class DropInfoKeys(BaseParallelWrapper[str, Obs, int]):
    """Remove some keys from every agent's infos (everything else passes through).

    Args:
        env: The multi-agent env (or a parallel wrapper around it).
        keys: Info keys to drop.
    """

    def __init__(
        self,
        env: ClusterParallelEnv | BaseParallelWrapper[str, Obs, int],
        keys: tuple[str, ...] = ("action_mask",),
    ) -> None:
        super().__init__(env)
        self.keys = frozenset(keys)
        self.possible_agents = list(env.possible_agents)
        self.metadata = env.metadata
        self.render_mode = getattr(env, "render_mode", None)

    @property
    def agents(self) -> list[str]:
        """Live agents of the wrapped env."""
        return list(self.env.agents)

    def _drop(self, infos: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {a: {k: v for k, v in d.items() if k not in self.keys} for a, d in infos.items()}

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Obs], dict[str, dict[str, Any]]]:
        """Reset the wrapped env; drop the keys from its infos."""
        obs, infos = self.env.reset(seed=seed, options=options)
        return obs, self._drop(infos)

    def step(
        self, actions: dict[str, int]
    ) -> tuple[
        dict[str, Obs],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        """Step the wrapped env; drop the keys from its infos."""
        obs, rew, term, trunc, infos = self.env.step(actions)
        return obs, rew, term, trunc, self._drop(infos)


def torchrl_env(**env_kwargs: Any) -> DropInfoKeys:
    """A :class:`ClusterParallelEnv` ready for TorchRL's ``PettingZooWrapper`` (mask only in
    the observation)."""
    return DropInfoKeys(ClusterParallelEnv(**env_kwargs))
