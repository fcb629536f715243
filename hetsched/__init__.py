"""hetsched: a testbed for scheduling deep-learning training jobs on heterogeneous GPU clusters.

Sub-packages (dependencies point down):

* :mod:`hetsched.agents` -- MAIFS-style networks and trainer (uses envs and sim).
* :mod:`hetsched.envs` -- Gymnasium / PettingZoo adapters over the simulator.
* :mod:`hetsched.baselines` -- fixed scheduling policies (uses sim).
* :mod:`hetsched.sim` -- the numpy cluster simulator (uses nothing of ours).
* :mod:`hetsched.cli` -- the command-line apps (``hetsched-evaluate``, ``hetsched-train``, ...).

Importing the package registers the env ids below with Gymnasium and PettingZoo when those are
installed (entry points are strings: nothing of the envs, and no torch, is imported until an env is
made). The simulator itself imports no RL library.
"""

from __future__ import annotations

from importlib.util import find_spec

__version__ = "0.1.0"

#: Gymnasium (single-agent) env ids and their entry points.
GYM_ENTRY_POINTS: dict[str, str] = {
    "hetsched/ClusterCentral-v0": "hetsched.envs.presets:central_env",
}
#: PettingZoo (multi-agent) env ids and their (parallel, AEC) entry points.
PARALLEL_ENTRY_POINTS: dict[str, tuple[str, str]] = {
    "hetsched/Cluster-v0": (
        "hetsched.envs.cluster_env:parallel_env",
        "hetsched.envs.cluster_env:env",
    ),
    "hetsched/ClusterPreempt-v0": (
        "hetsched.envs.cluster_env:preempt_parallel_env",
        "hetsched.envs.cluster_env:preempt_env",
    ),
}


def register_envs() -> list[str]:
    """Register every env id with the installed RL libraries (idempotent).

    Returns:
        The ids registered (or already registered) in this process; empty when neither
        Gymnasium nor PettingZoo is installed.
    """
    done: list[str] = []
    if find_spec("gymnasium") is not None:
        import gymnasium

        for env_id, entry in GYM_ENTRY_POINTS.items():
            if env_id not in gymnasium.registry:
                gymnasium.register(id=env_id, entry_point=entry, disable_env_checker=False)
            done.append(env_id)
    if find_spec("pettingzoo") is not None:
        import pettingzoo

        reg = getattr(pettingzoo, "register", None)  # PettingZoo versions with a registry
        if reg is not None:
            for env_id, entries in PARALLEL_ENTRY_POINTS.items():
                for kind, entry in zip(("parallel", "aec"), entries, strict=True):
                    if env_id not in getattr(pettingzoo, f"{kind}_registry", {}):
                        reg(kind, env_id, entry)
                done.append(env_id)
    return done


register_envs()

__all__ = ["GYM_ENTRY_POINTS", "PARALLEL_ENTRY_POINTS", "__version__", "register_envs"]
