"""Gymnasium and PettingZoo environments over the hetsched simulator.

Importing ``hetsched`` (or this package) registers

* ``hetsched/Cluster-v0`` with PettingZoo's registry (``pettingzoo.make("parallel", ...)``, when
  the installed PettingZoo has one) -- :class:`ClusterParallelEnv`, one agent per node;
* ``hetsched/ClusterPreempt-v0`` likewise -- the same env with ``preemptive=True``: each agent
  may also evict the running jobs of its node (one action per resident slot);
* ``hetsched/ClusterCentral-v0`` with Gymnasium (``gymnasium.make``) -- :class:`ClusterCentralEnv`,
  one centralised agent.

The plain factories :func:`parallel_env` and :func:`env` (AEC) work with any PettingZoo version.
``gymnasium.make`` and :func:`make_parallel` also take ``scenario=<benchmark scenario>`` and
``runtime_info`` / ``runtime_sigma`` (see :func:`hetsched.envs.presets.make_env`).
Everything under :mod:`hetsched.sim` stays free of RL imports; this package only wraps it.
"""

from __future__ import annotations

from typing import Any

import pettingzoo

from hetsched import GYM_ENTRY_POINTS, PARALLEL_ENTRY_POINTS, register_envs
from hetsched.envs import cluster_env
from hetsched.envs.central_env import ClusterCentralEnv
from hetsched.envs.cluster_env import (
    INFO_KEYS,
    REWARD_KEYS,
    ClusterParallelEnv,
    env,
    parallel_env,
    preempt_env,
    preempt_parallel_env,
    raw_env,
)
from hetsched.envs.core import EnvNotResetError
from hetsched.envs.spaces import ActionCodec, EnvSettings, LevelSets, RewardWeights

#: Multi-agent (PettingZoo parallel) env ids (the table is ``hetsched.PARALLEL_ENTRY_POINTS``).
PARALLEL_ENV_IDS: tuple[str, ...] = tuple(PARALLEL_ENTRY_POINTS)
#: Single-agent (Gymnasium) env ids (the table is ``hetsched.GYM_ENTRY_POINTS``).
GYM_ENV_IDS: tuple[str, ...] = tuple(GYM_ENTRY_POINTS)
#: Parallel id -> (parallel factory, AEC factory) names in ``cluster_env``.
_PARALLEL_ENTRIES: dict[str, tuple[str, str]] = {
    env_id: (par.rsplit(":", 1)[1], aec.rsplit(":", 1)[1])
    for env_id, (par, aec) in PARALLEL_ENTRY_POINTS.items()
}


def make_parallel(env_id: str = "hetsched/Cluster-v0", **kwargs: Any) -> ClusterParallelEnv:
    """Build a registered parallel env by id (through PettingZoo's registry when present)."""
    if env_id not in PARALLEL_ENV_IDS:
        raise ValueError(f"unknown parallel env id {env_id!r}; known: {list(PARALLEL_ENV_IDS)}")
    if {"scenario", "runtime_info", "runtime_sigma"} & set(kwargs):
        from hetsched.envs.presets import make_env

        factory = getattr(cluster_env, _PARALLEL_ENTRIES[env_id][0])
        built = make_env(factory, **kwargs)
        assert isinstance(built, ClusterParallelEnv)
        return built
    mk = getattr(pettingzoo, "make", None)
    if mk is not None:
        out = mk("parallel", env_id, **kwargs)
        return out
    factory = getattr(cluster_env, _PARALLEL_ENTRIES[env_id][0])
    out = factory(**kwargs)
    assert isinstance(out, ClusterParallelEnv)
    return out


register_envs()  # (done by ``import hetsched`` already; kept for an explicit call)

__all__ = [
    "GYM_ENV_IDS",
    "INFO_KEYS",
    "REWARD_KEYS",
    "PARALLEL_ENV_IDS",
    "ActionCodec",
    "ClusterCentralEnv",
    "ClusterParallelEnv",
    "EnvNotResetError",
    "EnvSettings",
    "LevelSets",
    "RewardWeights",
    "env",
    "make_parallel",
    "parallel_env",
    "preempt_env",
    "preempt_parallel_env",
    "raw_env",
    "register_envs",
]
