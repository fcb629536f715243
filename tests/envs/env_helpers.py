"""Tiny hand-built scenarios for the env tests (known numbers, no presets)."""

from __future__ import annotations

from typing import Any

import numpy as np

from hetsched.envs import ClusterCentralEnv, ClusterParallelEnv
from hetsched.sim.throughput import ThroughputModel, default_throughput
from hetsched.sim.workload import Workload

TM: ThroughputModel = default_throughput()
CIFAR = TM.models.index("cifar10")

#: Two A100 nodes with 4 GPUs each (32 CPUs, 256 GiB per node).
TWO_NODES: dict[str, Any] = {
    "name": "two_a100",
    "nodes": [{"gpu_type": "a100", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 256}],
}


def jobs(
    gpus: list[int],
    arrival: list[float] | None = None,
    *,
    seconds: float = 600.0,
    elastic: bool = False,
) -> Workload:
    """Rigid (or elastic) cifar10 jobs with the given GPU requests, each ``seconds`` long alone."""
    n = len(gpus)
    g = np.asarray(gpus, dtype=np.int64)
    a100 = TM.gpu_types.index("a100")
    rate = TM.isolated(np.full(n, CIFAR), np.full(n, a100), g, g > 4)
    return Workload(
        name="tiny",
        job_id=np.array([f"j{i}" for i in range(n)]),
        arrival=np.asarray(arrival if arrival is not None else [0.0] * n, dtype=np.float64),
        model=np.full(n, CIFAR, dtype=np.int64),
        batch_size=np.full(n, 64, dtype=np.int64),
        work=np.asarray(rate, dtype=np.float64) * seconds,
        req_gpus=g,
        min_gpus=np.maximum(1, g // 2) if elastic else g.copy(),
        max_gpus=g * 2 if elastic else g.copy(),
        cpu_per_gpu=np.full(n, 4.0),
        mem_per_gpu=np.full(n, 16.0),
    )


def tiny_env(wl: Workload, **kw: Any) -> ClusterParallelEnv:
    """The multi-agent env over :data:`TWO_NODES` and ``wl`` (1x levels only by default)."""
    kw.setdefault("levels", {"gpu": [1.0], "cpu": [1.0], "mem": [1.0]})
    kw.setdefault("window", 2)
    return ClusterParallelEnv(TWO_NODES, wl, throughput=TM, **kw)


def tiny_central(wl: Workload, **kw: Any) -> ClusterCentralEnv:
    """The central env over :data:`TWO_NODES` and ``wl``."""
    kw.setdefault("levels", {"gpu": [1.0], "cpu": [1.0], "mem": [1.0]})
    kw.setdefault("window", 2)
    return ClusterCentralEnv(TWO_NODES, wl, throughput=TM, **kw)


def act(env: ClusterParallelEnv, **per_agent: int) -> dict[str, int]:
    """Actions for every agent: the no-op except where given (``node_0=1``)."""
    out = dict.fromkeys(env.possible_agents, 0)
    out.update(per_agent)
    return out
