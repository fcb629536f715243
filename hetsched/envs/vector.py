"""A thin Stable-Baselines3 ``VecEnv`` over the agents of parallel envs (parameter sharing).

:class:`PettingZooToSB3VecEnv` maps every agent of every wrapped
:class:`~hetsched.envs.cluster_env.ClusterParallelEnv` to one vec-env slot, so one SB3 policy is
trained on all nodes' experience (independent learners with shared parameters). Slot
``e * N + i`` is agent ``possible_agents[i]`` of env ``e``.

* Observations are the agents' flat ``observation`` vectors (the mask is not part of them);
  masks come from ``env_method("action_masks")``, which sb3-contrib's ``MaskablePPO`` calls.
* Rewards are the team reward, given to every slot.
* When an episode ends, every slot of that env is done, its last observation is stored in
  ``infos[i]["terminal_observation"]`` (``"TimeLimit.truncated"`` set for truncation) and the
  env is reset at once without a seed (its generator continues): SB3's auto-reset convention
  (Gymnasium's ``SAME_STEP`` mode).

This replaces SuperSuit (semi-deprecated; its Dict-observation and mask paths are unsupported).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium
import numpy as np
from numpy.typing import NDArray
from stable_baselines3.common.vec_env.base_vec_env import (
    VecEnv,
    VecEnvIndices,
    VecEnvObs,
    VecEnvStepReturn,
)

from hetsched.envs.cluster_env import ClusterParallelEnv


class PettingZooToSB3VecEnv(VecEnv):
    """SB3 vec env whose slots are the agents of one or more parallel envs.

    Args:
        envs: One parallel env or several with identical spaces and agent counts.
        seed: Seed of the first reset (env ``e`` gets ``seed + e``); None: unseeded.
    """

    def __init__(
        self, envs: ClusterParallelEnv | Sequence[ClusterParallelEnv], seed: int | None = None
    ) -> None:
        self.envs: list[ClusterParallelEnv] = (
            [envs] if isinstance(envs, ClusterParallelEnv) else list(envs)
        )
        if not self.envs:
            raise ValueError("PettingZooToSB3VecEnv needs at least one env")
        first = self.envs[0]
        self.agents = list(first.possible_agents)
        self.n_agents = len(self.agents)
        for e in self.envs[1:]:
            if list(e.possible_agents) != self.agents or e.num_actions != first.num_actions:
                raise ValueError("all envs must have the same agents and action space")
        obs_space = first.observation_space(self.agents[0])["observation"]  # type: ignore[index]
        act_space = first.action_space(self.agents[0])
        super().__init__(len(self.envs) * self.n_agents, obs_space, act_space)
        self.render_mode = first.render_mode
        self._seed = seed
        self._actions: NDArray[np.int64] = np.zeros(self.num_envs, dtype=np.int64)
        self._obs = np.zeros((self.num_envs,) + obs_space.shape, dtype=np.float32)
        self._masks = np.ones((self.num_envs, first.num_actions), dtype=bool)

    # ------------------------------------------------------------------ helpers
    def _slots(self, e: int) -> slice:
        return slice(e * self.n_agents, (e + 1) * self.n_agents)

    def _store(self, e: int, obs: dict[str, dict[str, NDArray[Any]]]) -> None:
        sl = self._slots(e)
        self._obs[sl] = np.stack([obs[a]["observation"] for a in self.agents])
        self._masks[sl] = np.stack([obs[a]["action_mask"] for a in self.agents]).astype(bool)

    # ------------------------------------------------------------------ VecEnv API
    def reset(self) -> VecEnvObs:
        """Reset every env (seeded on the first call when a seed was given)."""
        for e, env in enumerate(self.envs):
            s = None if self._seed is None else self._seed + e
            obs, _ = env.reset(seed=s)
            self._store(e, obs)
        self._seed = None
        return self._obs.copy()

    def step_async(self, actions: NDArray[Any]) -> None:
        """Store one action per slot."""
        self._actions = np.asarray(actions, dtype=np.int64).reshape(self.num_envs)

    def step_wait(self) -> VecEnvStepReturn:
        """Step every env with its agents' actions; auto-reset finished envs."""
        rews = np.zeros(self.num_envs, dtype=np.float32)
        dones = np.zeros(self.num_envs, dtype=bool)
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for e, env in enumerate(self.envs):
            sl = self._slots(e)
            acts = dict(zip(self.agents, self._actions[sl].tolist(), strict=True))
            obs, rew, term, trunc, inf = env.step(acts)
            self._store(e, obs)
            a0 = self.agents[0]
            rews[sl] = rew[a0]
            ended = bool(term[a0] or trunc[a0])
            for i, a in enumerate(self.agents):
                d = {k: v for k, v in inf[a].items() if k != "action_mask"}
                if ended:
                    d["terminal_observation"] = self._obs[sl.start + i].copy()
                    d["TimeLimit.truncated"] = bool(trunc[a0] and not term[a0])
                infos[sl.start + i] = d
            if ended:
                dones[sl] = True
                obs, _ = env.reset()
                self._store(e, obs)
        return self._obs.copy(), rews, dones, infos

    def action_masks(self) -> NDArray[np.bool_]:
        """Legal actions of every slot, shape (num_envs, A)."""
        return self._masks.copy()

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            env.close()

    def _indices(self, indices: VecEnvIndices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, int):
            return [indices]
        return list(indices)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """Attribute of the parallel env behind each slot."""
        return [getattr(self.envs[i // self.n_agents], attr_name) for i in self._indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set an attribute on the parallel envs behind the slots."""
        for e in {i // self.n_agents for i in self._indices(indices)}:
            setattr(self.envs[e], attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        """``action_masks`` gives each slot's mask; other methods run on the parallel env."""
        idx = self._indices(indices)
        if method_name == "action_masks":
            return [self._masks[i].copy() for i in idx]
        return [
            getattr(self.envs[i // self.n_agents], method_name)(*method_args, **method_kwargs)
            for i in idx
        ]

    def env_is_wrapped(
        self,
        wrapper_class: type[gymnasium.Wrapper[Any, Any, Any, Any]],
        indices: VecEnvIndices = None,
    ) -> list[bool]:
        """No slot is wrapped."""
        return [False] * len(self._indices(indices))

    def seed(self, seed: int | None = None) -> Sequence[None | int]:
        """Seed the next reset (env ``e`` gets ``seed + e``)."""
        self._seed = seed
        return [None if seed is None else seed + i // self.n_agents for i in range(self.num_envs)]

    def get_images(self) -> Sequence[NDArray[Any] | None]:
        """One rendering per env (``rgb_array`` mode)."""
        out: Iterable[Any] = (env.render() for env in self.envs)
        return [x if isinstance(x, np.ndarray) else None for x in out]
