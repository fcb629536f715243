"""Shared parts of :class:`~hetsched.envs.core.EnvCore`: step records, errors and the state
that its mixins (:mod:`~hetsched.envs.rounds`, :mod:`~hetsched.envs.claims`,
:mod:`~hetsched.envs.evictions`, :mod:`~hetsched.envs.observing`) read and write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.allocation import Allocation
from hetsched.sim.engine import Simulator

if TYPE_CHECKING:
    from hetsched.envs.features import FeatureBuilder, JobTable, MaskArrays, ObsLayout
    from hetsched.envs.presets import WorkloadFactory
    from hetsched.envs.spaces import ActionCodec, EnvSettings
    from hetsched.sim.cluster import Cluster
    from hetsched.sim.faults import FailureSpec
    from hetsched.sim.throughput import ThroughputModel
    from hetsched.sim.workload import Workload

BIG_ROUNDS = 1 << 40
EPS = 1e-9


class EnvNotResetError(RuntimeError):
    """An env method that needs an episode was called before the first ``reset()``."""


class _EnvSimulator(Simulator):
    """A :class:`Simulator` that can skip re-validating allocations the env built itself."""

    trusted: bool = False

    def validate(self, alloc: Allocation) -> None:
        """Validate unless the allocation comes from the env's own (checked) placement."""
        if not self.trusted:
            super().validate(alloc)


@dataclass
class StepStats:
    """Team-level counts and reward parts of one env step."""

    jobs_s: float = 0.0
    rounds: int = 0
    placed: int = 0
    conflicts: int = 0
    gang_failed: int = 0
    invalid: int = 0
    makespan_s: float = 0.0
    terminal: bool = False
    progress_gpu_s: float = 0.0
    evicted: int = 0
    resized: int = 0


@dataclass
class ClaimResult:
    """Per-agent outcome of one decision step, each shape (N,).

    ``evicted`` marks agents whose eviction action took a job off (preemptive envs only);
    ``evicted_jobs`` counts the distinct jobs evicted. ``resized_jobs`` counts the jobs whose
    GPUs a resize action doubled (resizable envs only).
    """

    invalid: NDArray[np.bool_]
    granted: NDArray[np.bool_]
    conflict: NDArray[np.bool_]
    gang_failed: NDArray[np.bool_]
    evicted: NDArray[np.bool_]
    evicted_jobs: int = 0
    resized_jobs: int = 0


class CoreState:
    """The attributes of :class:`~hetsched.envs.core.EnvCore` shared by its mixins (declarations
    only; ``EnvCore.__init__``, ``reset`` and ``_start_round`` set them)."""

    failures: FailureSpec | None
    cluster: Cluster
    workload_source: Workload | WorkloadFactory
    tm: ThroughputModel
    cfg: EnvSettings
    N: int
    K: int
    J: int
    features: FeatureBuilder
    layout: ObsLayout
    codec: ActionCodec
    n_place: int
    n_actions: int
    node_up: NDArray[np.bool_]
    sim: _EnvSimulator | None
    wl: Workload | None
    jt: JobTable | None
    last_alloc: Allocation
    stalled: bool
    stall_reason: str
    no_progress_steps: int
    evict_protected: NDArray[np.bool_] | None
    evicted_this_round: NDArray[np.bool_]
    episode_jobs_s: float
    ma: MaskArrays
    window: NDArray[np.int64]
    slot_ok: NDArray[np.bool_]
    pending: NDArray[np.int64]
    decision_step: int
    refused_step: bool
    free_g: NDArray[np.int64]
    free_c: NDArray[np.float64]
    free_m: NDArray[np.float64]
    _arange_n: NDArray[np.int64]
    _resident_kernel: Any | None
    _engine_compiled: bool
    _claims_kernel: Any | None
    _round_kernel: Any | None
    _head_kernel: Any | None
    _window_kernel: Any | None
    _codec_shape: NDArray[np.int64]
    _rule_code: int
    _n_types: int
    _round_alloc: Allocation | None
    _empty: MaskArrays | None
    _obs_cache: tuple[NDArray[np.float64], NDArray[np.float64]] | None
    _common_cache: NDArray[np.float64] | None
    _any_legal: bool | None
    _evict_map: NDArray[np.int64] | None
    _progress_w: NDArray[np.float64] | None
    _phi: float
    _n_done: int
    _admitted: int
    _pending_stats: StepStats
    _cur: Allocation
    _granted: NDArray[np.float64]
    _new: list[Allocation]
    _placed: NDArray[np.bool_]
    _evicted_n: NDArray[np.int64]
    _count: NDArray[np.int64]
    _n_cur_jobs: int
    _n_new_jobs: int

    if TYPE_CHECKING:  # defined by the mixins

        @property
        def done(self) -> bool: ...

        @property
        def any_legal(self) -> bool: ...

        @property
        def any_action(self) -> bool: ...

        def refresh(self) -> None: ...

        def round_allocation(self) -> Allocation: ...

        def end_decision(self, placed_any: bool, stats: StepStats) -> None: ...

        def take_pending_stats(self, stats: StepStats) -> None: ...

        def release_entries(self, drop: NDArray[np.bool_]) -> Allocation: ...

        def _in_window_order(self, pend: NDArray[np.int64]) -> NDArray[np.int64]: ...

        def _add_entries(
            self,
            jobs: NDArray[np.int64],
            nodes: NDArray[np.int64],
            gpus: NDArray[np.int64],
            cpus: NDArray[np.float64],
            mem: NDArray[np.float64],
        ) -> None: ...

        def _evict(self, agents: NDArray[np.int64], slots: NDArray[np.int64]) -> int: ...

        def _evict_mask(self) -> NDArray[np.int8]: ...

        def _evictable(self) -> NDArray[np.int64]: ...

        def _resize_mask(self, place_mask: NDArray[np.int8]) -> NDArray[np.int8]: ...

        def _with_slot_actions(self, ma: MaskArrays) -> MaskArrays: ...

        def _resize(self, agents: NDArray[np.int64], slots: NDArray[np.int64]) -> int: ...

        @property
        def resize_offset(self) -> int: ...
