"""The conformance kit's own checks fail on envs that break them (mutants of the real envs)."""

from __future__ import annotations

from typing import Any

import pytest

from hetsched.envs import ClusterCentralEnv, ClusterParallelEnv
from hetsched.envs.testing import check_central_env, check_parallel_env, small_env_kwargs


class _RewardOff(ClusterParallelEnv):
    """Adds 1 to every reward: no longer the sum of its named components."""

    def step(self, actions: Any) -> Any:
        obs, rew, term, trunc, infos = super().step(actions)
        return obs, {a: r + 1.0 for a, r in rew.items()}, term, trunc, infos


class _TeamSplit(ClusterParallelEnv):
    """Gives node_0 a different reward (and keeps its info consistent with it)."""

    def step(self, actions: Any) -> Any:
        obs, rew, term, trunc, infos = super().step(actions)
        a0 = self.possible_agents[0]
        if a0 in rew:
            rew = dict(rew)
            rew[a0] += 1.0
            infos[a0] = dict(infos[a0], reward_conflict=infos[a0]["reward_conflict"] + 1.0)
        return obs, rew, term, trunc, infos


class _InfoMask(ClusterParallelEnv):
    """Reports a mask in ``infos`` that differs from the observation's."""

    def step(self, actions: Any) -> Any:
        obs, rew, term, trunc, infos = super().step(actions)
        for a in infos:
            m = infos[a]["action_mask"].copy()
            m[-1] = 1 - m[-1]
            infos[a] = dict(infos[a], action_mask=m)
        return obs, rew, term, trunc, infos


class _SilentInvalid(ClusterParallelEnv):
    """Never counts an invalid action."""

    def step(self, actions: Any) -> Any:
        obs, rew, term, trunc, infos = super().step(actions)
        return obs, rew, term, trunc, {a: dict(i, invalid_action=0.0) for a, i in infos.items()}


class _CentralRewardOff(ClusterCentralEnv):
    def step(self, action: Any) -> Any:
        obs, r, term, trunc, info = super().step(action)
        return obs, float(r) + 1.0, term, trunc, info


@pytest.mark.parametrize(
    ("cls", "match"),
    [
        (_RewardOff, r"\[mutant\] reward: reward != sum of its components"),
        (_TeamSplit, r"\[mutant\] reward: team reward differs between agents"),
        (_InfoMask, r"\[mutant\] masks: node_0: observation and info masks differ"),
        (_SilentInvalid, r"\[mutant\] invalid_fuzz: malformed actions were not counted invalid"),
    ],
)
def test_parallel_checks_catch_broken_envs(cls: type[ClusterParallelEnv], match: str) -> None:
    kw = small_env_kwargs(num_jobs=6)
    with pytest.raises(AssertionError, match=match):
        check_parallel_env("mutant", lambda: cls(**kw), num_cycles=10, episode_seeds=(0,))


def test_parallel_checks_pass_the_real_env() -> None:
    kw = small_env_kwargs(num_jobs=6)
    done = check_parallel_env("real", lambda: ClusterParallelEnv(**kw), num_cycles=10)
    assert {"reward", "masks", "invalid_action_fuzz", "determinism_full_episode"} <= set(done)


@pytest.mark.filterwarnings("ignore:.*Not able to test alternative render modes")
def test_central_checks_catch_a_broken_reward() -> None:
    kw = small_env_kwargs(num_jobs=6)
    with pytest.raises(AssertionError, match=r"\[mutant\] reward: reward != sum of its components"):
        check_central_env("mutant", lambda: _CentralRewardOff(**kw), sb3=False, episode_seeds=(0,))
    done = check_central_env("real", lambda: ClusterCentralEnv(**kw), sb3=False)
    assert {"reward", "masks", "invalid_action_fuzz", "determinism_full_episode"} <= set(done)
