"""The conformance kit over every registered id, and registration itself."""

from __future__ import annotations

import gymnasium
import numpy as np
import pettingzoo
import pytest

from hetsched.envs import GYM_ENV_IDS, PARALLEL_ENV_IDS, ClusterCentralEnv, ClusterParallelEnv
from hetsched.envs.testing import check_env_suite, masked_random_actions, small_env_kwargs

PZ_CHECKS = {
    "pettingzoo.parallel_api_test",
    "pettingzoo.parallel_seed_test",
    "pettingzoo.api_test(parallel_to_aec)",
    "pettingzoo.state_test",
    "pettingzoo.max_cycles_test",
    "pettingzoo.render_test",
    "determinism_full_episode",
    "invalid_action_fuzz",
}
GYM_CHECKS = {
    "gymnasium.make",
    "gymnasium.check_env",
    "sb3.check_env",
    "determinism_full_episode",
    "invalid_action_fuzz",
}


def test_check_env_suite_over_every_registered_id() -> None:
    report = check_env_suite()
    assert set(report) == {*PARALLEL_ENV_IDS, *GYM_ENV_IDS}
    for env_id in PARALLEL_ENV_IDS:
        assert set(report[env_id]) >= PZ_CHECKS, report[env_id]
    for env_id in GYM_ENV_IDS:
        assert set(report[env_id]) >= GYM_CHECKS, report[env_id]


def test_suite_rejects_unknown_id() -> None:
    with pytest.raises(ValueError, match="unknown env id 'nope/X-v0'"):
        check_env_suite(["nope/X-v0"])


def test_registries_build_the_envs() -> None:
    kw = small_env_kwargs()
    p = pettingzoo.make("parallel", "hetsched/Cluster-v0", **kw)
    assert isinstance(p, ClusterParallelEnv)
    g = gymnasium.make("hetsched/ClusterCentral-v0", **kw)
    assert isinstance(g.unwrapped, ClusterCentralEnv)
    g.close()


def test_determinism_differs_across_seeds() -> None:
    """Same seed: identical episodes; a different seed draws a different workload."""

    def episode(seed: int) -> list[np.ndarray]:
        env = ClusterParallelEnv(**small_env_kwargs())
        obs, _ = env.reset(seed=seed)
        rng = np.random.default_rng(0)
        out = [env.state()]
        while env.agents:
            a = masked_random_actions(env.action_masks(), rng)
            env.step(dict(zip(env.possible_agents, a.tolist(), strict=True)))
            out.append(env.state())
        return out

    a, b, c = episode(1), episode(1), episode(2)
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert len(a) != len(c) or not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))
