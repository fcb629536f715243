"""The options every trace reader shares: one dataclass, one place for their defaults."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from hetsched.sim.errors import TraceError

__all__ = ["DEFAULT_CPU_PER_GPU", "DEFAULT_MEM_PER_GPU", "TraceOptions", "choice"]

#: Alibaba v2023 per-GPU medians of GPU pods' requests (data.md section 3).
DEFAULT_CPU_PER_GPU = 9.8
DEFAULT_MEM_PER_GPU = 30.0


def choice(value: Any, allowed: Sequence[str], param: str) -> str:
    """``value`` as a string if it is one of ``allowed``, else a :class:`TraceError`."""
    v = str(value)
    if v not in allowed:
        raise TraceError(f"{param}={value!r} is not one of {list(allowed)}")
    return v


def _values(spec: Any, param: str) -> dict[str, tuple[str, ...]]:
    """``{column: value or [values]}`` -> ``{column: (values as stripped strings)}``."""
    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        raise TraceError(
            f"{param}={spec!r} must map column names to a value or a list of values, "
            f"e.g. {param}={{status: [Failed, Killed]}}"
        )
    out: dict[str, tuple[str, ...]] = {}
    for col, vals in spec.items():
        items = [vals] if isinstance(vals, str | int | float | bool) else list(vals)
        if not items:
            raise TraceError(f"{param}: column {col!r} lists no values")
        out[str(col)] = tuple(str(v).strip() for v in items)
    return out


@dataclass(frozen=True)
class TraceOptions:
    """How trace jobs become simulated jobs (the steps of :mod:`hetsched.sim.traces`).

    Every duration-based reader (:func:`~hetsched.sim.traces.csv_trace`, ``philly``, ``itp``,
    ``alibaba``) and the Sia-format reader take these as keyword arguments (a Hydra preset lists
    them flat); a reader may choose other defaults for its own trace (e.g. Philly's busiest
    300-job window), which its docstring states.

    Attributes:
        start: Index of the window's first job in the sorted, filtered jobs.
        num_jobs: Window size (``None`` = every job from ``start``).
        busiest: The window is the ``num_jobs`` consecutive jobs with the shortest arrival span.
        model_scheme: ``"auto"``, ``"sia_gputime"`` or ``"gavel_uniform"`` (traces without a
            model column).
        ref_type: GPU type the traced durations were measured on (work = duration x throughput).
        ref_fallback: A model that cannot run at its count on ``ref_type``: ``"nearest"`` or
            ``"error"``.
        elastic: ``min_gpus = 1`` and ``max_gpus`` above the request (see ``max_gpus_cap``).
        max_gpus_cap: Elastic upper bound ``min(max_gpus_cap, cluster GPUs)``; ``None`` = twice
            the request within one GPU type's pool.
        max_gpus_policy: A job larger than one GPU type's pool: ``"error"``, ``"cap"``, ``"skip"``.
        absent_types: A GPU-type constraint naming no type of the cluster: ``"error"``,
            ``"relax"``, ``"skip"``.
        cpu_per_gpu: Cores per GPU for traces without a CPU column (``None`` = 9.8 clipped to the
            scarcest node ratio).
        mem_per_gpu: GiB per GPU likewise (``None`` = 30 GiB clipped).
        min_duration_s: Drop jobs shorter than this (seconds; 0 = none).
        max_duration_s: Jobs longer than this (seconds; ``None`` = no limit) ...
        duration_policy: ... are ``"skip"``-ped or ``"cap"``-ped.
        shift: Shift arrivals so that the first job arrives at t = 0.
        unsorted: An arrival column that is not in non-decreasing order: ``"warn"`` (sort, and
            log a warning naming the first out-of-order line), ``"sort"`` (sort quietly: for
            traces known to be unsorted) or ``"error"``.
        zero_gpus: Rows with 0 GPUs (CPU-only jobs): ``"error"`` or ``"skip"`` (dropped and
            counted in the log).
        include: Keep only rows whose column holds one of the listed values, e.g.
            ``{status: [Pass]}`` (values compared after stripping blanks; the count of dropped
            rows is logged).
        exclude: Drop rows whose column holds one of the listed values, e.g.
            ``{status: [Failed, Killed]}`` (counted in the log).
    """

    start: int = 0
    num_jobs: int | None = None
    busiest: bool = False
    model_scheme: str = "auto"
    ref_type: str = "v100"
    ref_fallback: str = "nearest"
    elastic: bool = False
    max_gpus_cap: int | None = None
    max_gpus_policy: str = "error"
    absent_types: str = "error"
    cpu_per_gpu: float | None = None
    mem_per_gpu: float | None = None
    min_duration_s: float = 0.0
    max_duration_s: float | None = None
    duration_policy: str = "skip"
    shift: bool = True
    unsorted: str = "warn"
    zero_gpus: str = "error"
    include: Mapping[str, Any] | None = field(default=None)
    exclude: Mapping[str, Any] | None = field(default=None)

    def __post_init__(self) -> None:
        choice(self.model_scheme, ("auto", "sia_gputime", "gavel_uniform"), "model_scheme")
        choice(self.ref_fallback, ("nearest", "error"), "ref_fallback")
        choice(self.max_gpus_policy, ("error", "cap", "skip"), "max_gpus_policy")
        choice(self.absent_types, ("error", "relax", "skip"), "absent_types")
        choice(self.duration_policy, ("skip", "cap"), "duration_policy")
        choice(self.unsorted, ("warn", "sort", "error"), "unsorted")
        choice(self.zero_gpus, ("error", "skip"), "zero_gpus")
        for name in ("cpu_per_gpu", "mem_per_gpu", "max_duration_s"):
            v = getattr(self, name)
            if v is not None and not (_number(v) and math.isfinite(float(v)) and float(v) > 0):
                raise TraceError(f"{name}={v!r} must be a number > 0 (or null for the default)")
        if not (_number(self.min_duration_s) and float(self.min_duration_s) >= 0):
            raise TraceError(f"min_duration_s={self.min_duration_s!r} must be a number >= 0")
        if self.max_gpus_cap is not None and not (
            _integer(self.max_gpus_cap) and int(self.max_gpus_cap) >= 1
        ):
            raise TraceError(f"max_gpus_cap={self.max_gpus_cap!r} must be an integer >= 1")
        if not (_integer(self.start) and int(self.start) >= 0):
            raise TraceError(f"start={self.start!r} must be an integer >= 0")
        if self.num_jobs is not None and not (_integer(self.num_jobs) and int(self.num_jobs) >= 1):
            raise TraceError(f"num_jobs={self.num_jobs!r} must be an integer >= 1 (or null: all)")
        _values(self.include, "include")
        _values(self.exclude, "exclude")

    @classmethod
    def build(cls, options: Mapping[str, Any], **defaults: Any) -> TraceOptions:
        """Options from a reader's keyword arguments over the reader's own defaults.

        Args:
            options: The keyword arguments a caller (or a Hydra preset) passed.
            **defaults: The reader's defaults where they differ from this class's.

        Raises:
            TraceError: Naming an unknown option and listing the known ones.
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TraceError(
                f"unknown trace option(s) {unknown}; the options are {sorted(known)} "
                "(see hetsched.sim.traces.TraceOptions)"
            )
        return cls(**{**defaults, **options})

    def row_filters(self) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
        """``include`` and ``exclude`` as ``{column: (values, ...)}``."""
        return _values(self.include, "include"), _values(self.exclude, "exclude")

    def as_dict(self) -> dict[str, Any]:
        """The options as plain keyword arguments."""
        return asdict(self)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _integer(v: Any) -> bool:
    return _number(v) and float(v) == int(v)
