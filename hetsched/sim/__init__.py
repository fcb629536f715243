"""The numpy cluster simulator: clusters, workloads, throughput model, engine and metrics.

Nothing here imports gymnasium, pettingzoo or torch.
"""

from __future__ import annotations

from hetsched.sim.allocation import Allocation
from hetsched.sim.catalog import GPU_TYPE_NAMES, canonical_gpu_type
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import (
    DONE,
    FUTURE,
    PENDING,
    RUNNING,
    SimConfig,
    SimResult,
    SimState,
    Simulator,
)
from hetsched.sim.errors import (
    AllocationError,
    ClusterSpecError,
    HetschedError,
    SimulationStalledError,
    TraceError,
    UnknownGpuTypeError,
)
from hetsched.sim.metrics import RESULT_COLUMNS, compute_metrics, extended_metrics
from hetsched.sim.throughput import ThroughputModel, default_throughput
from hetsched.sim.workload import Workload

__all__ = [
    "DONE", "FUTURE", "GPU_TYPE_NAMES", "PENDING", "RESULT_COLUMNS", "RUNNING",
    "Allocation", "AllocationError", "Cluster", "ClusterSpecError", "HetschedError",
    "SimConfig", "SimResult", "SimState", "SimulationStalledError", "Simulator",
    "ThroughputModel", "TraceError", "UnknownGpuTypeError", "Workload",
    "canonical_gpu_type", "compute_metrics", "default_throughput", "extended_metrics",
]  # fmt: skip
