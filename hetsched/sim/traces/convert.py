"""The one conversion step from trace jobs to a simulated :class:`~hetsched.sim.workload.Workload`.

A reader parses its file into a :class:`TraceJobs` (one entry per job, with the file line of
each for messages) and calls :func:`convert` with the shared :class:`TraceOptions`; the steps are
those of :mod:`hetsched.sim.traces` (validation, filters, window, models, work, sizes,
resources, arrivals, fit check).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.sim import tracecache
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import TraceError
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.traces.csvio import Table
from hetsched.sim.traces.models import assign_models, batch_sizes, reference_work
from hetsched.sim.traces.options import DEFAULT_CPU_PER_GPU, DEFAULT_MEM_PER_GPU, TraceOptions
from hetsched.sim.workload import Workload

__all__ = ["TraceJobs", "check_fits", "convert", "default_resources", "select_rows"]

logger = logging.getLogger("hetsched.sim.traces")

K = len(GPU_TYPE_NAMES)
IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


@dataclass
class TraceJobs:
    """Trace jobs before conversion (struct-of-arrays, one entry per job, in file order).

    Attributes:
        source: File name used in messages.
        lines: 1-based file line of each job, shape (J,).
        job_id: Job ids, shape (J,).
        arrival: Submission times in seconds, shape (J,).
        duration: Traced durations in seconds, shape (J,); NaN where ``work`` is given.
        gpus: Requested GPUs, shape (J,).
        model: Model indices into the throughput table (``None``: assigned by ``model_scheme``).
        batch_size: Submitted batch sizes (``None``: implied by the model).
        cpu: CPU cores per GPU (``None``: the options' default).
        mem: GiB per GPU (``None``: the options' default).
        queue: Queue names (``None``: one queue ``"default"``).
        allowed: GPU-type constraints, shape (J, number of catalogue types) (``None``: any type).
        work: Total work (``None``: traced duration x reference throughput).
    """

    source: str
    lines: IntArray
    job_id: NDArray[np.str_]
    arrival: FloatArray
    duration: FloatArray
    gpus: IntArray
    model: IntArray | None = None
    batch_size: IntArray | None = None
    cpu: FloatArray | None = None
    mem: FloatArray | None = None
    queue: NDArray[np.str_] | None = None
    allowed: BoolArray | None = None
    work: FloatArray | None = None

    def __len__(self) -> int:
        return int(len(self.arrival))

    def take(self, idx: IntArray | BoolArray | slice) -> TraceJobs:
        """The selected jobs (every array field indexed by ``idx``)."""
        kw: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                kw[f.name] = v[idx]
        return replace(self, **kw)

    def where(self, i: int) -> str:
        """``"<file>: line <n>: job '<id>'"`` for messages about job ``i``."""
        return f"{self.source}: line {int(self.lines[i])}: job {str(self.job_id[i])!r}"


# ====================================================================== rows and values
def select_rows(tab: Table, options: TraceOptions) -> Table:
    """Apply the ``include`` / ``exclude`` row filters to a parsed file (counts are logged).

    Raises:
        TraceError: If a filter names a column the file lacks, or no row is left.
    """
    include, exclude = options.row_filters()
    if not include and not exclude:
        return tab
    keep = np.ones(tab.num_rows, dtype=bool)
    for spec, inside in ((include, True), (exclude, False)):
        for col, values in spec.items():
            hit = np.isin(tab.strings(col), np.array(values, dtype=str))
            mask = hit if inside else ~hit
            what = "not in" if inside else "in"
            _log_dropped(
                tab.label, int((keep & ~mask).sum()), tab.num_rows,
                f"with {col} {what} {list(values)} skipped",
            )  # fmt: skip
            keep &= mask
    if not keep.any():
        raise TraceError(
            f"{tab.label}: no row left after include={options.include!r} and "
            f"exclude={options.exclude!r}; check the column's values"
        )
    if keep.all():
        return tab
    return Table(tab.path, tab.header, [c[keep] for c in tab.columns], tab.lines[keep])


def validate_jobs(jobs: TraceJobs) -> None:
    """Values every trace job must satisfy (before any filter)."""

    def fail(mask: BoolArray, field_: str, values: NDArray[Any], what: str) -> None:
        i = int(np.flatnonzero(mask)[0])
        raise TraceError(f"{jobs.where(i)}: {field_} = {values[i].item()!r} {what}")

    if not np.all(np.isfinite(jobs.arrival)):
        fail(~np.isfinite(jobs.arrival), "submission time", jobs.arrival, "is not finite")
    if jobs.work is None:
        bad = ~np.isfinite(jobs.duration) | (jobs.duration <= 0)
        if bad.any():
            fail(bad, "duration", jobs.duration, "must be a finite number > 0 seconds")
    if np.any(jobs.gpus < 1):
        fail(
            jobs.gpus < 1, "num_gpu", jobs.gpus,
            "must be >= 1 (for CPU-only jobs with 0 GPUs, pass zero_gpus=skip to drop them)",
        )  # fmt: skip
    for name, v in (("cpu_per_gpu", jobs.cpu), ("mem_per_gpu", jobs.mem)):
        if v is not None:
            bad = ~np.isfinite(v) | (v <= 0)
            if bad.any():
                fail(bad, name, v, "must be a finite number > 0")
    if jobs.batch_size is not None and np.any(jobs.batch_size < 0):
        fail(jobs.batch_size < 0, "batch_size", jobs.batch_size, "must be >= 0")
    order = np.argsort(jobs.job_id, kind="stable")
    srt = jobs.job_id[order]
    same = np.flatnonzero(srt[1:] == srt[:-1])
    if same.size:
        i = int(order[same + 1].min())
        first = int(np.flatnonzero(jobs.job_id == jobs.job_id[i])[0])
        raise TraceError(
            f"{jobs.source}: line {int(jobs.lines[i])}: job_id = {str(jobs.job_id[i])!r} "
            f"duplicates line {int(jobs.lines[first])}; job ids must be unique"
        )


# ====================================================================== cluster fit
def _patterns(allowed: BoolArray) -> tuple[BoolArray, IntArray]:
    """The distinct rows of ``allowed`` (U, K) and each job's row among them (J,), so that
    per-type quantities are computed once per pattern rather than in (J, K) temporaries."""
    packed = np.packbits(allowed, axis=1, bitorder="little")
    code = np.zeros(len(allowed), dtype=np.int64)
    for b in range(packed.shape[1]):
        code |= packed[:, b].astype(np.int64) << (8 * b)
    _, first, inv = np.unique(code, return_index=True, return_inverse=True)
    return allowed[first], np.asarray(inv, dtype=np.int64).reshape(-1)


def _type_pools(cluster: Cluster, allowed: BoolArray) -> IntArray:
    """Largest pool of GPUs of one type each job may use, shape (J,)."""
    pats, inv = _patterns(allowed)
    per_type = cluster.gpus_per_type()
    return np.asarray(np.where(pats, per_type[None, :], 0).max(axis=1)[inv], dtype=np.int64)


def default_resources(
    cluster: Cluster, cpu: float | None, mem: float | None
) -> tuple[float, float]:
    """CPU cores and GiB per GPU for jobs without their own: the given values, or the Alibaba
    medians clipped to the cluster's scarcest node ratio."""
    ratio_c = float(np.min(cluster.node_cpus / cluster.node_gpus))
    ratio_m = float(np.min(cluster.node_mem / cluster.node_gpus))
    c = min(DEFAULT_CPU_PER_GPU, ratio_c) if cpu is None else float(cpu)
    g = min(DEFAULT_MEM_PER_GPU, ratio_m) if mem is None else float(mem)
    if not (math.isfinite(c) and c > 0 and math.isfinite(g) and g > 0):
        raise TraceError(f"cpu_per_gpu={cpu!r} and mem_per_gpu={mem!r} must be numbers > 0")
    return c, g


def _oversized(
    cpu: FloatArray, mem: FloatArray, allowed: BoolArray, cluster: Cluster
) -> tuple[int, str, float, float] | None:
    """The first job whose per-GPU CPU or memory request exceeds every node of a GPU type it may
    use (one GPU of it could never get its request): (job, resource, request, largest node)."""
    big_c = np.zeros(K)
    big_m = np.zeros(K)
    np.maximum.at(big_c, cluster.node_type, cluster.node_cpus)
    np.maximum.at(big_m, cluster.node_type, cluster.node_mem)
    pats, inv = _patterns(allowed)
    ok = pats & (cluster.gpus_per_type() > 0)[None, :]
    max_c = np.where(ok, big_c[None, :], 0.0).max(axis=1)[inv]
    max_m = np.where(ok, big_m[None, :], 0.0).max(axis=1)[inv]
    for name, req, cap in (("cpu_per_gpu", cpu, max_c), ("mem_per_gpu", mem, max_m)):
        bad = req > cap
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return i, name, float(req[i]), float(cap[i])
    return None


def _oversized_message(name: str, req: float, cap: float, cluster: Cluster) -> str:
    unit = "CPU cores" if name == "cpu_per_gpu" else "GiB of memory"
    return (
        f"requests {name} = {req:g} {unit} per GPU but the largest node of a GPU type it may use "
        f"in cluster {cluster.name!r} has {cap:g}, so no GPU of it could get its request "
        f"({cluster.describe()}); check the column and its unit, drop it (columns={{{name}: "
        "null}} uses the default) or use a cluster with larger nodes"
    )


def check_fits(
    workload: Workload, cluster: Cluster, throughput: ThroughputModel | None = None
) -> None:
    """Raise if some job can never be placed on ``cluster`` as requested.

    A job must fit in the GPUs of one GPU type it may use (the engine's rule: a gang runs on one
    type), at its requested size ``req_gpus`` -- stricter than the engine's check of ``min_gpus``
    so that rigid policies can place every job too -- and its per-GPU CPU and memory requests
    must each fit in some node of such a type. With ``throughput``, the job's model must also
    run packed at ``req_gpus`` GPUs of some such type.

    Raises:
        TraceError: Naming the job id, its request and the cluster's size.
    """
    wl = workload
    per_type = cluster.gpus_per_type()
    allowed = wl.allowed_types & (per_type > 0)[None, :]
    pool = _type_pools(cluster, allowed)
    need = np.maximum(wl.req_gpus, wl.min_gpus)
    bad = need > pool
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        types = [GPU_TYPE_NAMES[k] for k in np.flatnonzero(wl.allowed_types[i])]
        detail = (
            f"none of its allowed GPU types {types} is in the cluster"
            if pool[i] == 0
            else f"at most {int(pool[i])} GPUs of one GPU type it may use"
        )
        raise TraceError(
            f"workload {wl.name!r}: job {str(wl.job_id[i])!r} requests {int(wl.req_gpus[i])} "
            f"GPUs but cluster {cluster.name!r} has {cluster.num_gpus} GPUs, {detail} "
            f"({cluster.describe()}); use a larger cluster or filter the trace explicitly "
            "(max_gpus_policy='cap' or 'skip', absent_types='relax' or 'skip')"
        )
    over = _oversized(wl.cpu_per_gpu, wl.mem_per_gpu, wl.allowed_types, cluster)
    if over is not None:
        i, name, req, cap = over
        raise TraceError(
            f"workload {wl.name!r}: job {str(wl.job_id[i])!r} (row {i}) "
            + _oversized_message(name, req, cap, cluster)
        )
    if throughput is None:
        return
    if wl.model.max() >= throughput.num_models:
        i = int(np.argmax(wl.model))
        raise TraceError(
            f"workload {wl.name!r}: job {str(wl.job_id[i])!r} has model index {int(wl.model[i])} "
            f"but the throughput table has {throughput.num_models} models"
        )
    pats, pat = _patterns(allowed)
    key = (wl.model * (int(need.max()) + 1) + need) * len(pats) + pat  # one row per combination
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    m, n, a = wl.model[first], need[first], pats[pat[first]]
    t = throughput.isolated(m[:, None], np.arange(K)[None, :], n[:, None], False)
    runs = np.asarray(((t > 0) & a & (per_type[None, :] >= n[:, None])).any(axis=1))
    ok = runs[inv.reshape(-1)]
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise TraceError(
            f"workload {wl.name!r}: job {str(wl.job_id[i])!r} (model "
            f"{throughput.models[wl.model[i]]!r}, {int(need[i])} GPUs) cannot run on any GPU type "
            f"of cluster {cluster.name!r} ({cluster.describe()}): its throughput there is 0"
        )


# ====================================================================== pipeline steps
def _log_dropped(source: str, n: int, total: int, why: str) -> None:
    if n:
        logger.info("%s: %d of %d jobs %s", source, n, total, why)


def _sort(jobs: TraceJobs, policy: str) -> TraceJobs:
    """Stable sort by arrival; ``unsorted`` decides whether an unsorted column is reported."""
    back = np.flatnonzero(np.diff(jobs.arrival) < 0)
    if back.size == 0:
        return jobs
    i = int(back[0])
    msg = (
        f"{jobs.source}: arrivals are not sorted ({back.size} rows arrive before the row above "
        f"them, first line {int(jobs.lines[i + 1])} after line {int(jobs.lines[i])}); "
    )
    if policy == "error":
        raise TraceError(
            msg + "sort the file by arrival, or pass unsorted=warn (or sort) to sort it here; if "
            "the column holds gaps between arrivals, map it as columns.interarrival"
        )
    if policy == "warn":
        logger.warning(
            "%sthe jobs are sorted by arrival. If the column holds gaps between arrivals, map it "
            "as columns.interarrival (csv_trace); unsorted=sort silences this warning",
            msg,
        )
    return jobs.take(np.argsort(jobs.arrival, kind="stable"))


def _duration_filters(jobs: TraceJobs, o: TraceOptions) -> TraceJobs:
    src = jobs.source
    if o.min_duration_s and o.min_duration_s > 0:
        short = jobs.duration < float(o.min_duration_s)
        _log_dropped(src, int(short.sum()), len(jobs), f"shorter than {o.min_duration_s} s skipped")
        jobs = jobs.take(~short)
    if o.max_duration_s is not None:
        lim = float(o.max_duration_s)
        long_ = jobs.duration > lim
        if o.duration_policy == "skip":
            _log_dropped(src, int(long_.sum()), len(jobs), f"longer than {lim} s skipped")
            jobs = jobs.take(~long_)
        elif long_.any():
            logger.info("%s: %d jobs capped to %s s", src, int(long_.sum()), lim)
            jobs = replace(jobs, duration=np.minimum(jobs.duration, lim))
    if len(jobs) == 0:
        raise TraceError(f"{src}: no job left after the duration filters")
    return jobs


def _fit_policies(jobs: TraceJobs, o: TraceOptions, cluster: Cluster, *, errors: bool) -> TraceJobs:
    """``absent_types`` and ``max_gpus_policy``: skip/cap/relax before the window
    (``errors=False``); the ``"error"`` policies on the selected window only (``errors=True``)."""
    src = jobs.source
    per_type = cluster.gpus_per_type()
    if jobs.allowed is not None:
        cons = jobs.allowed
        absent = o.absent_types
        none_here = np.asarray(~(cons & (per_type > 0)[None, :]).any(axis=1), dtype=bool)
        if none_here.any() and (absent == "error") == errors:
            i = int(np.flatnonzero(none_here)[0])
            if absent == "error":
                types = [GPU_TYPE_NAMES[k] for k in np.flatnonzero(cons[i])]
                raise TraceError(
                    f"{jobs.where(i)}: its GPU-type constraint {types} names no type of cluster "
                    f"{cluster.name!r} ({cluster.describe()}); {int(none_here.sum())} jobs are "
                    "affected; pass absent_types='relax' (drop such constraints) or 'skip'"
                )
            if absent == "skip":
                _log_dropped(
                    src, int(none_here.sum()), len(jobs), "whose GPU types are absent skipped"
                )
                jobs = jobs.take(~none_here)
            else:
                logger.info(
                    "%s: %d jobs' GPU-type constraints name no type of the cluster; relaxed",
                    src, int(none_here.sum()),
                )  # fmt: skip
                allowed = cons.copy()
                allowed[none_here] = True
                jobs = replace(jobs, allowed=allowed)
    allowed = jobs.allowed if jobs.allowed is not None else np.ones((len(jobs), K), dtype=bool)
    pool = _type_pools(cluster, allowed & (per_type > 0)[None, :])
    big = jobs.gpus > pool
    mg = o.max_gpus_policy
    if big.any() and (mg == "error") == errors:
        i = int(np.flatnonzero(big)[0])
        if mg == "error":
            raise TraceError(
                f"{jobs.where(i)} requests {int(jobs.gpus[i])} GPUs but cluster {cluster.name!r} "
                f"has {cluster.num_gpus} GPUs, at most {int(pool[i])} of one GPU type the job may "
                f"use ({cluster.describe()}); {int(big.sum())} jobs are affected; pass "
                "max_gpus_policy='cap' or 'skip', or choose another window"
            )
        if mg == "skip":
            _log_dropped(src, int(big.sum()), len(jobs), "larger than the cluster skipped")
            jobs = jobs.take(~big)
        else:
            logger.info(
                "%s: %d jobs requesting more GPUs than one type's pool capped to it",
                src, int(big.sum()),
            )  # fmt: skip
            jobs = replace(jobs, gpus=np.minimum(jobs.gpus, pool))
    if len(jobs) == 0:
        raise TraceError(f"{src}: no job left after the filters")
    return jobs


def _window(jobs: TraceJobs, o: TraceOptions) -> TraceJobs:
    J = len(jobs)
    start = int(o.start)
    if start >= J:
        raise TraceError(f"{jobs.source}: start={start} is outside the {J} (filtered) jobs")
    n = J - start if o.num_jobs is None else int(o.num_jobs)
    n = min(n, J - start)
    lo = start
    if o.busiest and n < J - start:
        t = jobs.arrival
        span = t[start + n - 1 :] - t[start : J - n + 1]
        lo = start + int(np.argmin(span))
        logger.debug(
            "%s: busiest window of %d jobs starts at sorted job %d of %d (arrival span %.0f s)",
            jobs.source, n, lo, J, float(span[lo - start]),
        )  # fmt: skip
    elif n < J:
        logger.debug("%s: jobs %d..%d of %d (sorted by arrival)", jobs.source, lo, lo + n - 1, J)
    return jobs.take(slice(lo, lo + n))


# ====================================================================== the conversion
def convert(
    jobs: TraceJobs,
    options: TraceOptions,
    *,
    name: str,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
) -> Workload:
    """Trace jobs -> a workload: the steps of the :mod:`hetsched.sim.traces` docstring.

    Args:
        jobs: The parsed jobs, in file order.
        options: The shared options.
        name: Workload name.
        throughput: Throughput table (models and work).
        cluster: The simulated cluster (filters, sizes, defaults and the fit check).
        rng: Source of the model draws (``model_scheme``); nothing else is random.

    Raises:
        TraceError: For a bad value, a job that cannot fit, or an empty selection.
    """
    o = options
    if o.zero_gpus == "skip":
        zero = jobs.gpus == 0
        _log_dropped(jobs.source, int(zero.sum()), len(jobs), "with 0 GPUs (CPU-only) skipped")
        jobs = jobs.take(~zero)
        if len(jobs) == 0:
            raise TraceError(f"{jobs.source}: no job left after zero_gpus=skip")
    validate_jobs(jobs)
    jobs = _sort(jobs, o.unsorted)
    jobs = _duration_filters(jobs, o)
    jobs = _fit_policies(jobs, o, cluster, errors=False)
    # Everything above depends only on the file and the options other than the window: loaders
    # wrapped in tracecache.memoised keep it per process, and later calls (another window, another
    # seed) go straight to _window_and_build.
    tracecache.record(jobs, o, name, _window_and_build)
    return _window_and_build(jobs, o, name=name, throughput=throughput, cluster=cluster, rng=rng)


def _window_and_build(
    jobs: TraceJobs,
    o: TraceOptions,
    *,
    name: str,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
) -> Workload:
    """The window (``start``, ``num_jobs``, ``busiest``) of the prepared jobs -> a workload."""
    jobs = _window(jobs, o)
    jobs = _fit_policies(jobs, o, cluster, errors=True)
    return _build(jobs, o, name=name, throughput=throughput, cluster=cluster, rng=rng)


def _build(
    jobs: TraceJobs,
    o: TraceOptions,
    *,
    name: str,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
) -> Workload:
    """The selected jobs -> a workload (models, work, resources): the only use of ``rng``."""
    J = len(jobs)
    if jobs.model is None:
        model = assign_models(
            jobs.duration, jobs.gpus, throughput=throughput, cluster=cluster, rng=rng,
            scheme=o.model_scheme,
        )  # fmt: skip
    else:
        model = jobs.model
    if jobs.work is None:
        work = reference_work(
            jobs.duration, model, jobs.gpus, throughput=throughput, ref_type=o.ref_type,
            fallback=o.ref_fallback, job_id=jobs.job_id, source=jobs.source,
        )  # fmt: skip
    else:
        work = jobs.work
    req = jobs.gpus
    allowed = jobs.allowed if jobs.allowed is not None else np.ones((J, K), dtype=bool)
    if not o.elastic:
        lo, hi = req, req
    elif o.max_gpus_cap is not None:
        lo = np.ones(J, dtype=np.int64)
        hi = np.maximum(req, min(int(o.max_gpus_cap), cluster.num_gpus))
    else:
        pool = _type_pools(cluster, allowed & (cluster.gpus_per_type() > 0)[None, :])
        lo = np.ones(J, dtype=np.int64)
        hi = np.maximum(req, np.minimum(2 * req, pool))
    c_def, m_def = default_resources(cluster, o.cpu_per_gpu, o.mem_per_gpu)
    cpu = jobs.cpu if jobs.cpu is not None else np.full(J, c_def)
    mem = jobs.mem if jobs.mem is not None else np.full(J, m_def)
    over = _oversized(cpu, mem, allowed, cluster)
    if over is not None:
        i, res, val, cap = over
        raise TraceError(f"{jobs.where(i)} " + _oversized_message(res, val, cap, cluster))
    if jobs.queue is not None:
        queue_names, queue = np.unique(jobs.queue, return_inverse=True)
        qn: tuple[str, ...] = tuple(str(q) for q in queue_names)
    else:
        queue, qn = np.zeros(J, dtype=np.int64), ("default",)
    arrival = jobs.arrival - jobs.arrival[0] if o.shift else jobs.arrival
    batch = jobs.batch_size if jobs.batch_size is not None else batch_sizes(throughput, model)
    wl = Workload(
        name=name,
        job_id=jobs.job_id,
        arrival=arrival,
        model=model,
        batch_size=batch,
        work=work,
        req_gpus=req,
        min_gpus=lo,
        max_gpus=hi,
        cpu_per_gpu=cpu,
        mem_per_gpu=mem,
        queue=np.asarray(queue, dtype=np.int64).reshape(-1),
        queue_names=qn,
        allowed_types=allowed,
        trace_duration=jobs.duration,
    )
    check_fits(wl, cluster, throughput)
    return wl
