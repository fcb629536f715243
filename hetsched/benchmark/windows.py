"""Seeded workload windows: each seed draws its own stretch of a trace.

A trace loader of :mod:`hetsched.sim.traces` called with fixed ``start`` / ``busiest`` options
returns the same jobs for every seed. :func:`seeded_windows` wraps such a loader (the
``functools.partial`` a workload preset builds) into a factory that, on every call, draws from
the call's generator:

* **window loaders** (``philly``, ``itp``, ``alibaba``, ``csv_trace``: the options ``start``,
  ``num_jobs``, ``busiest``): a start position uniform over the valid starts of the filtered
  trace, then ``num_jobs`` consecutive jobs from it (``busiest=False``). Jobs larger than one
  GPU type's pool of the cluster are skipped before the window is taken (the loader logs the
  count), so that every start is valid; the model assignment is drawn from the same generator;
* **file loaders** (Sia's and Pollux's workload files, the option ``index``): a file from
  ``indices`` and a start position within it, then ``num_jobs`` consecutive jobs of the file,
  with arrivals shifted to start at 0;
* **generators** (``gavel_synthetic``): drawn from the generator already; passed through.

With ``load`` set, the window's arrival times are rescaled so that its offered load
(:func:`offered_load`) equals ``load``. Every draw comes from the generator the factory is
called with, so the same seed gives the same workload, whoever runs it.

This module depends on :mod:`hetsched.sim` only, so that :mod:`hetsched.envs.presets` can use it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import ConfigError
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.traces import SIA_KINDS, TraceOptions
from hetsched.sim.workload import Workload

WorkloadFactory = Callable[..., Workload]

#: Options that pin a window loader's window; an env preset given one of them keeps it fixed.
PIN_KEYS: tuple[str, ...] = ("start", "busiest", "index")
#: Jobs per window when a window loader's ``num_jobs`` is ``None`` (the whole trace).
DEFAULT_WINDOW_JOBS = 200
#: Fraction of a workload file each window of a file loader takes (the file's jobs x this).
FILE_WINDOW_FRACTION = 0.75
#: File indices of each file loader.
FILE_INDICES: dict[str, tuple[int, ...]] = {
    "sia_philly": tuple(range(1, 9)),
    "sia_helios": tuple(range(1, 11)),
    "sia_newtrace": tuple(range(1, 11)),
    "pollux_philly": tuple(range(1, 9)),
}

_LEN_CACHE: dict[tuple[Any, ...], int] = {}


def _file_set(func: Any, keywords: dict[str, Any]) -> str:
    """The :data:`FILE_INDICES` key of a file loader (``sia_trace`` names its set by ``kind``)."""
    if func.__name__ == "sia_trace":
        return SIA_KINDS[str(keywords.get("kind", "philly"))][3]
    return str(func.__name__)


def loader_kind(factory: Any) -> str:
    """``"window"``, ``"file"`` or ``"generator"``: how :func:`seeded_windows` varies it.

    Raises:
        ValueError: If ``factory`` is not a ``functools.partial`` of a trace loader.
    """
    func = getattr(factory, "func", None)
    if func is None:
        raise ConfigError(
            f"workload factory {factory!r} is not a preset of a trace loader (a functools.partial"
            " of a hetsched.sim.traces function); seeded windows need one"
        )
    params = inspect.signature(func).parameters
    if "index" in params:
        return "file"
    names = set(params)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        names |= {f.name for f in dataclasses.fields(TraceOptions)}  # the shared trace options
    if "start" in names and "num_jobs" in names:
        return "window"
    return "generator"


def best_isolated_s(wl: Workload, throughput: ThroughputModel, cluster: Cluster) -> NDArray[Any]:
    """Each job's run time alone at its request on its fastest allowed type present (s), (J,).

    A job no present type can run at its request gets ``inf``.
    """
    types = np.arange(len(GPU_TYPE_NAMES))
    rate = throughput.isolated(wl.model[:, None], types[None, :], wl.req_gpus[:, None])
    ok = wl.allowed_types & (cluster.gpus_per_type() > 0)[None, :]
    best = np.where(ok, rate, 0.0).max(axis=1)
    with np.errstate(divide="ignore"):
        return np.where(best > 0, wl.work / np.where(best > 0, best, 1.0), np.inf)


def offered_load(wl: Workload, throughput: ThroughputModel, cluster: Cluster) -> float:
    """GPU-seconds the jobs need (alone, at their request, on their fastest type) per GPU-second
    the cluster offers over the arrival span: ``sum(req * t_best) / (gpus * span)``.

    Returns ``inf`` when every job arrives at once (span 0).
    """
    t = best_isolated_s(wl, throughput, cluster)
    need = float(np.sum(wl.req_gpus * np.where(np.isfinite(t), t, 0.0)))
    span = float(wl.arrival[-1] - wl.arrival[0]) if wl.num_jobs else 0.0
    if span <= 0:
        return math.inf
    return need / (cluster.num_gpus * span)


def at_load(wl: Workload, load: float, throughput: ThroughputModel, cluster: Cluster) -> Workload:
    """``wl`` with its arrival times rescaled (about the first) to the offered load ``load``.

    Raises:
        ValueError: If ``load`` is not a positive finite number.
    """
    if not (math.isfinite(load) and load > 0):
        raise ConfigError(f"load={load!r} must be a positive number (offered load, 1.0 = full)")
    rho = offered_load(wl, throughput, cluster)
    if not math.isfinite(rho) or rho <= 0:
        return wl
    t0 = wl.arrival[0]
    return replace(wl, arrival=t0 + (wl.arrival - t0) * (rho / load))


def _cache_key(func: Any, kw: dict[str, Any], cluster: Cluster, tm: ThroughputModel) -> tuple:
    items = tuple(sorted((k, repr(v)) for k, v in kw.items()))
    return (func.__module__, func.__qualname__, items, cluster.name, cluster.num_gpus, id(tm))


def _trace_len(func: Any, kw: dict[str, Any], cluster: Cluster, tm: ThroughputModel) -> int:
    """Jobs of the whole filtered trace (built once per process and options)."""
    key = _cache_key(func, kw, cluster, tm)
    if key not in _LEN_CACHE:
        full = func(
            **{**kw, "start": 0, "num_jobs": None, "busiest": False},
            throughput=tm,
            cluster=cluster,
            rng=np.random.default_rng(0),
        )
        _LEN_CACHE[key] = int(full.num_jobs)
    return _LEN_CACHE[key]


def seeded_windows(
    factory: Any,
    *,
    num_jobs: int | None = None,
    indices: Sequence[int] | None = None,
    load: float | None = None,
    name: str | None = None,
) -> WindowDraw:
    """A factory drawing a new window of ``factory``'s trace from each call's generator.

    Args:
        factory: A workload preset (``functools.partial`` of a :mod:`hetsched.sim.traces`
            loader), as ``conf/workload/<name>.yaml`` builds it.
        num_jobs: Jobs per window; ``None``: the preset's ``num_jobs`` (window loaders; if that
            is ``None`` too, :data:`DEFAULT_WINDOW_JOBS` or the whole trace if shorter), or
            :data:`FILE_WINDOW_FRACTION` of the file (file loaders).
        indices: Files a file loader draws from (default: all of :data:`FILE_INDICES`).
        load: If set, the offered load (:func:`offered_load`) each window is rescaled to.
        name: The workloads' name (default: the loader's).

    Returns:
        ``f(throughput=, cluster=, rng=) -> Workload``.

    Raises:
        ValueError: If ``factory`` is not a trace loader preset, ``num_jobs < 1``, ``load`` is
            not positive, or an index is outside the loader's files.
    """
    kind = loader_kind(factory)
    func = factory.func
    base = dict(factory.keywords)
    if num_jobs is not None and int(num_jobs) < 1:
        raise ConfigError(f"num_jobs={num_jobs!r} must be >= 1")
    if load is not None and not (math.isfinite(float(load)) and float(load) > 0):
        raise ConfigError(f"load={load!r} must be a positive number (offered load, 1.0 = full)")
    files: tuple[int, ...] = ()
    if kind == "file":
        known = FILE_INDICES.get(_file_set(func, base), ())
        files = tuple(int(i) for i in (indices if indices is not None else known))
        bad = [i for i in files if known and i not in known]
        if not files or bad:
            raise ConfigError(
                f"indices={list(files)} for {_file_set(func, base)}: each must be one of "
                f"{list(known)}"
            )

    return WindowDraw(factory, kind, files, num_jobs, load, name)


@dataclasses.dataclass(frozen=True)
class WindowDraw:
    """The factory :func:`seeded_windows` returns (a picklable object, so that envs built on
    it can be sent to worker processes): each call draws a window with the call's generator."""

    factory: Any
    kind: str
    files: tuple[int, ...]
    num_jobs: int | None
    load: float | None
    name: str | None

    def __call__(
        self, *, throughput: ThroughputModel, cluster: Cluster, rng: np.random.Generator
    ) -> Workload:
        """A window (rescaled to the offered load when one is set)."""
        kind, factory, files, num_jobs = self.kind, self.factory, self.files, self.num_jobs
        func, base = factory.func, dict(factory.keywords)
        if kind == "window":
            kw = {k: v for k, v in base.items() if k not in ("start", "num_jobs", "busiest")}
            if kw.get("max_gpus_policy", "error") == "error":
                kw["max_gpus_policy"] = "skip"
            total = _trace_len(func, kw, cluster, throughput)
            want = num_jobs if num_jobs is not None else base.get("num_jobs")
            n = min(int(want) if want is not None else DEFAULT_WINDOW_JOBS, total)
            start = int(rng.integers(0, total - n + 1))
            wl = func(
                **kw, start=start, num_jobs=n, busiest=False,
                throughput=throughput, cluster=cluster, rng=rng,
            )  # fmt: skip
        elif kind == "file":
            index = int(files[int(rng.integers(0, len(files)))])
            whole = func(
                **{**base, "index": index}, throughput=throughput, cluster=cluster, rng=rng
            )
            J = whole.num_jobs
            n = J if J < 2 else max(1, int(round(J * FILE_WINDOW_FRACTION)))
            if num_jobs is not None:
                n = min(int(num_jobs), J)
            start = int(rng.integers(0, J - n + 1))
            wl = whole.subset(slice(start, start + n)).shifted()
        else:
            wl = factory(throughput=throughput, cluster=cluster, rng=rng)
        if self.load is not None:
            wl = at_load(wl, float(self.load), throughput, cluster)
        return replace(wl, name=self.name) if self.name else wl


def env_preset_factory(factory: Any, workload_kwargs: dict[str, Any]) -> Any:
    """The factory an env uses for a workload preset: seeded windows unless the caller pinned
    the window (``start``, ``busiest`` or ``index`` among ``workload_kwargs``) or the preset
    is not a trace loader."""
    if any(k in workload_kwargs for k in PIN_KEYS) or not isinstance(factory, functools.partial):
        return factory
    return seeded_windows(factory)
