"""Workloads: the jobs a simulation replays (struct-of-arrays, sorted by arrival).

Units: times in seconds from the workload start; work in the model's work units (see
:attr:`hetsched.sim.throughput.ThroughputModel.work_unit`); CPU in cores and memory in GiB, both
per GPU.

Trace loaders live in :mod:`hetsched.sim.traces`; they convert a trace's observed duration into
total work through the reference throughput (the job's model on its requested GPUs of the
reference GPU type), so that a job runs for its traced duration on the reference hardware and
faster or slower elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.errors import TraceError


@dataclass
class Workload:
    """A set of J training jobs (struct-of-arrays, sorted by ``arrival``).

    Attributes:
        name: Workload name (used in result tables).
        job_id: Job identifiers from the trace, shape (J,).
        arrival: Submission time in seconds, non-decreasing, shape (J,).
        model: Model index into the throughput table, shape (J,).
        batch_size: Submitted global batch size (metadata; Sia-style policies may use it), (J,).
        work: Total work in the model's work units, > 0, shape (J,).
        req_gpus: Requested GPUs, shape (J,).
        min_gpus: Fewest GPUs the job can run on (== req_gpus for rigid jobs), shape (J,).
        max_gpus: Most GPUs the job can use (== req_gpus for rigid jobs), shape (J,).
        cpu_per_gpu: Requested CPU cores per GPU, shape (J,).
        mem_per_gpu: Requested memory per GPU in GiB, shape (J,).
        queue: Queue / virtual-cluster index per job, shape (J,).
        queue_names: Name of each queue index.
        allowed_types: Whether each job may run on each catalogue GPU type, shape
            (J, len(GPU_TYPE_NAMES)).
        trace_duration: Duration recorded in the trace in seconds (NaN if none), shape (J,).
    """

    name: str
    job_id: NDArray[np.str_]
    arrival: NDArray[np.float64]
    model: NDArray[np.int64]
    batch_size: NDArray[np.int64]
    work: NDArray[np.float64]
    req_gpus: NDArray[np.int64]
    min_gpus: NDArray[np.int64]
    max_gpus: NDArray[np.int64]
    cpu_per_gpu: NDArray[np.float64]
    mem_per_gpu: NDArray[np.float64]
    queue: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    queue_names: tuple[str, ...] = ("default",)
    allowed_types: NDArray[np.bool_] = field(
        default_factory=lambda: np.zeros((0, len(GPU_TYPE_NAMES)), dtype=bool)
    )
    trace_duration: NDArray[np.float64] = field(
        default_factory=lambda: np.zeros(0, dtype=np.float64)
    )

    def __post_init__(self) -> None:
        J = len(self.arrival)
        self.job_id = np.asarray(self.job_id).astype(str, copy=False)
        self.arrival = np.asarray(self.arrival, dtype=np.float64)
        for name, dt in (
            ("model", np.int64), ("batch_size", np.int64), ("req_gpus", np.int64),
            ("min_gpus", np.int64), ("max_gpus", np.int64), ("work", np.float64),
            ("cpu_per_gpu", np.float64), ("mem_per_gpu", np.float64),
        ):  # fmt: skip
            setattr(self, name, np.asarray(getattr(self, name), dtype=dt))
        if len(self.queue) == 0 and J:
            self.queue = np.zeros(J, dtype=np.int64)
        self.queue = np.asarray(self.queue, dtype=np.int64)
        if len(self.allowed_types) == 0 and J:
            self.allowed_types = np.ones((J, len(GPU_TYPE_NAMES)), dtype=bool)
        self.allowed_types = np.asarray(self.allowed_types, dtype=bool)
        if len(self.trace_duration) == 0 and J:
            self.trace_duration = np.full(J, np.nan)
        self.trace_duration = np.asarray(self.trace_duration, dtype=np.float64)
        self.validate()

    @property
    def num_jobs(self) -> int:
        """Number of jobs J."""
        return int(len(self.arrival))

    def validate(self) -> None:
        """Check shapes and values; raise :class:`TraceError` naming the job and field."""
        J = len(self.arrival)
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray) and v.shape[:1] != (J,):
                raise TraceError(
                    f"workload {self.name!r}: field {f.name} has {len(v)} rows, want {J}"
                )
        if self.allowed_types.shape != (J, len(GPU_TYPE_NAMES)):
            raise TraceError(
                f"workload {self.name!r}: allowed_types must be (J, {len(GPU_TYPE_NAMES)})"
            )
        if J == 0:
            raise TraceError(
                f"workload {self.name!r} has no jobs; check the trace window and filters"
            )

        def fail(mask: NDArray[np.bool_], field_name: str, values: NDArray[Any], rule: str) -> None:
            i = int(np.flatnonzero(mask)[0])
            raise TraceError(
                f"workload {self.name!r}: job {str(self.job_id[i])!r} (row {i}) has "
                f"{field_name}={values[i].item()!r} ({rule})"
            )

        bad_arrival = ~np.isfinite(self.arrival) | (self.arrival < 0)
        if bad_arrival.any():
            fail(bad_arrival, "arrival", self.arrival, "must be finite and >= 0 seconds")
        if np.any(np.diff(self.arrival) < 0):
            i = int(np.flatnonzero(np.diff(self.arrival) < 0)[0]) + 1
            raise TraceError(
                f"workload {self.name!r}: arrivals are not sorted at job {str(self.job_id[i])!r} (row {i}); "
                "sort the jobs by arrival time (loaders do this for you)"
            )
        bad_work = ~np.isfinite(self.work) | (self.work <= 0)
        if bad_work.any():
            fail(bad_work, "work", self.work, "must be finite and > 0")
        if np.any(self.min_gpus < 1):
            fail(self.min_gpus < 1, "min_gpus", self.min_gpus, "must be >= 1")
        low = self.req_gpus < self.min_gpus
        if low.any():
            i = int(np.flatnonzero(low)[0])
            fail(low, "req_gpus", self.req_gpus, f"must be >= min_gpus={int(self.min_gpus[i])}")
        high = self.max_gpus < self.req_gpus
        if high.any():
            i = int(np.flatnonzero(high)[0])
            fail(high, "max_gpus", self.max_gpus, f"must be >= req_gpus={int(self.req_gpus[i])}")
        for name in ("cpu_per_gpu", "mem_per_gpu"):
            v = getattr(self, name)
            bad = ~np.isfinite(v) | (v <= 0)
            if bad.any():
                fail(bad, name, v, "must be finite and > 0")
        if np.any(self.model < 0):
            fail(self.model < 0, "model", self.model, "must be a model index >= 0")
        bad_q = (self.queue < 0) | (self.queue >= len(self.queue_names))
        if bad_q.any():
            n_q = len(self.queue_names)
            fail(bad_q, "queue", self.queue, f"must be in 0..{n_q - 1}: len(queue_names)={n_q}")
        none = ~self.allowed_types.any(axis=1)
        if none.any():
            i = int(np.flatnonzero(none)[0])
            raise TraceError(
                f"workload {self.name!r}: job {str(self.job_id[i])!r} (row {i}) may run on no GPU "
                "type (its allowed_types row is all False)"
            )

    def subset(self, index: NDArray[np.integer] | slice, name: str | None = None) -> Workload:
        """A new workload with the selected jobs (order preserved)."""
        kw: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                kw[f.name] = v[index]
        return replace(self, name=name or self.name, **kw)

    def shifted(self) -> Workload:
        """A copy whose first arrival is at t = 0."""
        return replace(self, arrival=self.arrival - self.arrival[0])
