"""Workload factories: trace loaders and synthetic generators.

Every factory has the signature ``fn(*, throughput, cluster, rng, **own_params) -> Workload``, so
a Hydra preset (``conf/workload/*.yaml``, ``_partial_: true``) fixes ``own_params`` and the
evaluation runner supplies the throughput table, the cluster and a seeded
:class:`numpy.random.Generator`. All randomness comes from ``rng``: the same seed gives the same
workload. Each factory also accepts ``name`` (the workload name used in result tables).

| factory | data | shipped? |
|---|---|---|
| :func:`philly` | Microsoft Philly subset prepared by Pollux (CC-BY-4.0) | yes (``.csv.gz``) |
| :func:`itp` | Microsoft ITP traces (MIT), 7 clusters | yes |
| :func:`csv_trace` | any CSV with arrival, duration and GPU count (ITP column names by default) | -- |
| :func:`alibaba` | Alibaba PAI v2023 "openb" pods (research use only) | no: read by path |
| :func:`pollux_philly` | Pollux OSDI'21 workloads (Apache-2.0) | yes |
| :func:`sia_philly`, :func:`sia_helios`, :func:`sia_newtrace` | Sia SOSP'23 workloads (no licence) | no: read by path |
| :func:`sia_workload` | any file in the Sia/Pollux workload format | -- |
| :func:`gavel_synthetic` | Gavel's job generator (gavel.md section 7) | -- |

Shipped files live under ``hetsched/data/traces/`` (see ``SOURCES.md`` there); the others are
resolved by :func:`hetsched.sim.paths.shared_data` (``$HETSCHED_SHARED_DATA`` or
``<repo>/../shared/data``).

**From a trace job to a simulated job** (Philly, ITP, CSV, Alibaba):

1. *Validation.* Every value is checked; a non-numeric, non-finite, negative or zero duration, a
   GPU count below 1 or not an integer, a duplicated job id, a missing column or an unknown GPU
   type raise :class:`~hetsched.sim.errors.TraceError` naming the file, the line (1-based, the
   header is line 1) and the value. Rows are then sorted by arrival (stable sort).
2. *Explicit filters* (each one a parameter; every excluded or changed job is counted in a log
   line of the ``hetsched.sim.traces`` logger): ``min_duration_s`` / ``max_duration_s`` with
   ``duration_policy`` (``"skip"`` or ``"cap"``; defaults: no limits); ``absent_types``
   (a job whose GPU-type constraint names no type of the cluster: ``"error"`` (default),
   ``"relax"`` = drop the constraint, ``"skip"``); ``max_gpus_policy`` (a job requesting more GPUs
   than the largest pool of one GPU type it may use: ``"error"`` (default), ``"cap"`` = request
   that pool, ``"skip"``). Filters come before the window, so ``num_jobs`` is the final count.
3. *Window*: ``start`` (index into the sorted, filtered jobs) and ``num_jobs`` (``None`` = all);
   with ``busiest=True`` the window is the ``num_jobs`` consecutive jobs (at or after ``start``)
   with the shortest arrival span, i.e. the highest arrival rate (first such window on ties).
4. *Model* (traces have none): :func:`assign_models` with ``model_scheme`` (``"auto"``,
   ``"sia_gputime"``, ``"gavel_uniform"``), drawn from ``rng``.
5. *Work*: ``work = duration * T[model, ref_type, req_gpus]`` (isolated, packed), so a job takes its
   traced duration on its requested GPUs of ``ref_type`` (default ``"v100"``: the one type both the
   Gavel and the Sia profiles measured) and runs faster or slower elsewhere. If the model cannot
   run on ``req_gpus`` GPUs of ``ref_type`` (throughput 0): ``ref_fallback="nearest"`` (default)
   uses the nearest table count ``c`` that runs (in log2 distance, the smaller on ties) scaled
   linearly, ``T[c] * req/c``; ``ref_fallback="error"`` raises naming the job. Jobs capped by
   ``max_gpus_policy="cap"`` get the work of their capped size.
6. *Sizes*: rigid by default (``min_gpus = max_gpus = req_gpus``); ``elastic=True`` gives
   ``min_gpus = 1`` and ``max_gpus = max(req, min(2 * req, largest usable pool))``.
7. *CPU and memory per GPU* (traces other than Alibaba have none): ``cpu_per_gpu`` /
   ``mem_per_gpu`` (``None`` = the Alibaba v2023 per-GPU medians, 9.8 cores and 30 GiB, clipped to
   the cluster's scarcest node ratio ``min(node cpus / node GPUs)`` and ``min(node GiB / node
   GPUs)`` so that a fully packed node can meet every request; pass numbers to override).
8. *Arrivals* are shifted so that the first job arrives at t = 0 (``shift=False`` keeps them).
9. :func:`check_fits`: every job's request fits the largest pool of one GPU type it may use, and
   its model runs there.

Queues: Philly jobs get their virtual cluster (VC), Alibaba pods their QoS class, CSV files an
optional ``queue`` column; otherwise one queue ``"default"``. GPU-type constraints: Alibaba's
``gpu_spec`` and an optional CSV ``gpu_types`` column (``|``-separated catalogue names or
aliases); every other job may use every type.
"""

from __future__ import annotations

import csv
import functools
import io
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.sim import tracecache
from hetsched.sim.catalog import GPU_TYPE_NAMES, canonical_gpu_type
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import HetschedError, TraceError
from hetsched.sim.paths import open_text, shared_data, shipped_data
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

__all__ = [
    "ALIBABA_GPU_MAP",
    "CSV_FIELDS",
    "DEFAULT_CPU_PER_GPU",
    "DEFAULT_MEM_PER_GPU",
    "GAVEL_GPU_TYPES",
    "ITP_CLUSTERS",
    "SIA_INITIAL_BATCH",
    "alibaba",
    "assign_models",
    "check_fits",
    "csv_trace",
    "gavel_synthetic",
    "itp",
    "philly",
    "pollux_philly",
    "reference_work",
    "sia_helios",
    "sia_newtrace",
    "sia_philly",
    "sia_workload",
]

logger = logging.getLogger(__name__)

K = len(GPU_TYPE_NAMES)

#: Alibaba v2023 per-GPU medians of GPU pods' requests (data.md section 3).
DEFAULT_CPU_PER_GPU = 9.8
DEFAULT_MEM_PER_GPU = 30.0

#: Fields :func:`csv_trace` understands, with their default (ITP) column names; ``None`` = optional.
CSV_FIELDS: dict[str, str | None] = {
    "job_id": "job_id",
    "submission_time": "submission_time",
    "duration": "duration",
    "num_gpu": "num_gpu",
    "model": None,
    "batch_size": None,
    "cpu_per_gpu": None,
    "mem_per_gpu": None,
    "queue": None,
    "gpu_types": None,
}

#: The optional fields of :data:`CSV_FIELDS`: read from a column of the same name when
#: ``columns`` does not map them (``columns={field: None}`` ignores such a column).
_OPTIONAL_CSV_FIELDS: tuple[str, ...] = tuple(k for k, v in CSV_FIELDS.items() if v is None)

_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "min": 60.0, "h": 3600.0}

#: Alibaba GPU models -> catalogue types. ``None``: an undisclosed (G2, G3) or uncatalogued (A10)
#: model; a constraint naming one is handled by ``alibaba(unmapped=...)``. Names not listed here
#: go through :func:`hetsched.sim.catalog.canonical_gpu_type` (T4, P100, V100M16, V100M32 ...).
ALIBABA_GPU_MAP: dict[str, str | None] = {"G2": None, "G3": None, "A10": None}

#: Submitted batch size given to jobs of Sia apps when the trace has none: the smallest validated
#: batch size M0 of each app (sia.md section 2.1).
SIA_INITIAL_BATCH: dict[str, int] = {
    "bert": 12, "cifar10": 128, "deepspeech2": 20, "gpt_pmp": 48,
    "imagenet": 200, "ncf": 256, "yolov3": 8,
}  # fmt: skip

#: GPU types Gavel profiled; ``model_scheme="auto"`` picks Gavel job types on clusters of only these.
GAVEL_GPU_TYPES = ("k80", "p100", "v100")

_SIA_INDEX_RANGE = {"philly": 8, "saturn": 10, "newtrace": 10}

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


# ====================================================================== CSV reading
@dataclass
class _Csv:
    """A parsed CSV file: header, string columns and the 1-based line number of each row."""

    path: Path
    header: list[str]
    columns: list[tuple[str, ...]]
    lines: IntArray

    @property
    def label(self) -> str:
        return self.path.name

    @property
    def num_rows(self) -> int:
        return int(len(self.lines))

    def has(self, col: str) -> bool:
        return col in self.header

    def col(self, col: str) -> tuple[str, ...]:
        try:
            return self.columns[self.header.index(col)]
        except ValueError:
            raise TraceError(
                f"{self.label}: missing column {col!r}; the header has {self.header} "
                f"(file {self.path})"
            ) from None

    def error(self, i: int, col: str, value: Any, what: str) -> TraceError:
        return TraceError(f"{self.label}: line {int(self.lines[i])}: {col} = {value!r} {what}")


def _read_csv(path: Path, required: Sequence[str] = ()) -> _Csv:
    """Read a (possibly gzipped) CSV with a header; blank lines are ignored.

    Parsed files are cached per process (keyed by path, size and modification time), so that a
    runner building one workload per seed parses a large trace once.
    """
    try:
        st = Path(path).stat()
    except FileNotFoundError:
        raise TraceError(f"trace file {path} not found") from None
    tracecache.note_file(str(path), st.st_size, st.st_mtime_ns)
    tab = _read_csv_cached(str(path), st.st_size, st.st_mtime_ns)
    for col in required:
        tab.col(col)
    return tab


@functools.lru_cache(maxsize=8)
def _read_csv_cached(path_str: str, size: int, mtime_ns: int) -> _Csv:
    del size, mtime_ns  # cache key only
    path = Path(path_str)
    try:
        with open_text(path) as f:
            text = f.read()
        records = list(csv.reader(io.StringIO(text)))
        n_phys = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if len(records) == n_phys:  # one record per physical line: line = index + 1
            line_of = range(1, len(records) + 1)
        else:  # quoted fields span lines: let the reader count
            reader = csv.reader(io.StringIO(text))
            records, nums = [], []
            for r in reader:
                records.append(r)
                nums.append(reader.line_num)
            line_of = nums  # type: ignore[assignment]
    except FileNotFoundError:
        raise TraceError(f"trace file {path} not found") from None
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as e:
        raise TraceError(f"{path.name}: cannot read as CSV ({e}) (file {path})") from None
    while records and not records[-1]:
        records.pop()  # trailing blank lines
    if all(records):  # fast path: no blank line inside
        header_at = 0
        rows = records[1:]
        lines = np.asarray(line_of[1 : len(records)], dtype=np.int64)
    else:
        keep = [i for i, r in enumerate(records) if r]
        header_at = keep[0] if keep else 0
        rows = [records[i] for i in keep[1:]]
        lines = np.fromiter((line_of[i] for i in keep[1:]), dtype=np.int64, count=len(rows))
    if not records:
        raise TraceError(f"{path.name}: the file is empty; expected a header line (file {path})")
    header = [h.strip().lstrip("\ufeff") for h in records[header_at]]
    if not rows:
        raise TraceError(f"{path.name}: no data rows after the header (file {path})")
    width = len(header)
    if len(set(map(len, rows))) != 1 or len(rows[0]) != width:
        i = next(i for i, r in enumerate(rows) if len(r) != width)
        raise TraceError(
            f"{path.name}: line {lines[i]} has {len(rows[i])} fields but the header has {width} "
            f"({header})"
        )
    lines.setflags(write=False)
    return _Csv(path, header, list(zip(*rows, strict=True)), lines)


def _floats(tab: _Csv, col: str, *, allow_empty: bool = False) -> FloatArray:
    """A column as float64; empty cells become NaN only if ``allow_empty``."""
    vals = tab.col(col)
    if allow_empty:
        vals = tuple(v if v.strip() else "nan" for v in vals)
    try:
        arr = np.array(vals, dtype=np.float64)
    except ValueError:
        for i, v in enumerate(vals):
            try:
                float(v)
            except ValueError:
                raise tab.error(i, col, v, "is not a number") from None
        raise  # pragma: no cover - numpy and float() disagree
    if not allow_empty:
        bad = ~np.isfinite(arr)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise tab.error(i, col, vals[i], "is not a finite number")
    return arr


def _ints(tab: _Csv, col: str) -> IntArray:
    arr = _floats(tab, col)
    bad = arr != np.round(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise tab.error(i, col, tab.col(col)[i], "is not an integer")
    return arr.astype(np.int64)


def _datetimes(tab: _Csv, col: str) -> FloatArray:
    """Datetime strings (``YYYY-MM-DD HH:MM:SS``) as seconds since the epoch."""
    vals = tab.col(col)
    try:
        arr = np.array(vals, dtype="datetime64[s]")
    except ValueError:
        for i, v in enumerate(vals):
            try:
                np.datetime64(v, "s")
            except ValueError:
                raise tab.error(i, col, v, "is not a date-time (YYYY-MM-DD HH:MM:SS)") from None
        raise  # pragma: no cover
    if np.isnat(arr).any():
        i = int(np.flatnonzero(np.isnat(arr))[0])
        raise tab.error(i, col, vals[i], "is not a date-time (YYYY-MM-DD HH:MM:SS)")
    return arr.astype(np.int64).astype(np.float64)


def _times(tab: _Csv, col: str, scale: float) -> FloatArray:
    """Numbers in ``scale`` seconds, or date-time strings if the first value is one."""
    first = tab.col(col)[0]
    try:
        float(first)
    except ValueError:
        try:
            np.datetime64(first.strip(), "s")
        except ValueError:
            raise tab.error(0, col, first, "is neither a number nor a date-time") from None
        return _datetimes(tab, col)
    return _floats(tab, col) * scale


# ====================================================================== raw jobs
@dataclass
class _Jobs:
    """Trace jobs before conversion (one entry per job; ``lines`` = source line for messages)."""

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

    def __len__(self) -> int:
        return int(len(self.arrival))

    def take(self, idx: IntArray | BoolArray | slice) -> _Jobs:
        kw: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                kw[f.name] = v[idx]
        return replace(self, **kw)

    def where(self, i: int) -> str:
        return f"{self.source}: line {int(self.lines[i])}: job {str(self.job_id[i])!r}"


def _validate_jobs(jobs: _Jobs) -> None:
    """Values every trace job must satisfy (before any filter)."""

    def fail(mask: BoolArray, field_: str, values: NDArray[Any], what: str) -> None:
        i = int(np.flatnonzero(mask)[0])
        raise TraceError(f"{jobs.where(i)}: {field_} = {values[i].item()!r} {what}")

    if not np.all(np.isfinite(jobs.arrival)):
        fail(~np.isfinite(jobs.arrival), "submission time", jobs.arrival, "is not finite")
    bad = ~np.isfinite(jobs.duration) | (jobs.duration <= 0)
    if bad.any():
        fail(bad, "duration", jobs.duration, "must be a finite number > 0 seconds")
    if np.any(jobs.gpus < 1):
        fail(jobs.gpus < 1, "num_gpu", jobs.gpus, "must be >= 1")
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
        later = order[same + 1]
        i = int(later.min())
        first = int(np.flatnonzero(jobs.job_id == jobs.job_id[i])[0])
        raise TraceError(
            f"{jobs.source}: line {int(jobs.lines[i])}: job_id = {str(jobs.job_id[i])!r} "
            f"duplicates line {int(jobs.lines[first])}; job ids must be unique"
        )


def _choice(value: Any, allowed: Sequence[str], param: str) -> str:
    v = str(value)
    if v not in allowed:
        raise TraceError(f"{param}={value!r} is not one of {list(allowed)}")
    return v


def _match_names(value: Any, known: Sequence[str], where: str) -> list[str]:
    """Names requested in a parameter (one or a list). YAML turns hashes such as ``6214e9`` or
    ``103959`` into numbers, so a number matches the known name with the same numeric value."""
    items = [value] if isinstance(value, str | int | float) else list(value)
    out: list[str] = []
    for v in items:
        if str(v) in known:
            out.append(str(v))
            continue
        hits: list[str] = []
        if isinstance(v, int | float) and not isinstance(v, bool):
            for k in known:
                try:
                    if float(k) == float(v):
                        hits.append(k)
                except ValueError:
                    pass
        if len(hits) != 1:
            raise TraceError(
                f"{where}: unknown name {v!r}; known: {list(known)} (quote numeric-looking names "
                "in YAML, e.g. vc: '6214e9')"
            )
        out.append(hits[0])
    return out


# ====================================================================== model assignment
def _model_indices(throughput: ThroughputModel, family: str) -> IntArray:
    return np.array([i for i, f in enumerate(throughput.family) if f == family], dtype=np.int64)


def _require_models(throughput: ThroughputModel, names: Sequence[str], why: str) -> IntArray:
    missing = [n for n in names if n not in throughput.models]
    if missing:
        raise TraceError(
            f"{why} needs models {missing}, which the throughput table does not have "
            f"(it has {list(throughput.models)})"
        )
    return np.array([throughput.models.index(n) for n in names], dtype=np.int64)


def _gavel_types(throughput: ThroughputModel) -> tuple[IntArray, IntArray]:
    """All Gavel job types and the distributed ones (those that run on 2 GPUs of some type)."""
    allm = _model_indices(throughput, "gavel")
    if allm.size == 0:
        raise TraceError(
            "model_scheme 'gavel_uniform' needs Gavel job types (family 'gavel') in the "
            f"throughput table; it has {list(throughput.models)}"
        )
    two = throughput.isolated(allm[:, None], np.arange(len(throughput.gpu_types))[None, :], 2)
    dist = allm[(two > 0).any(axis=1)]
    return allm, dist


def assign_models(
    duration_s: NDArray[np.floating],
    num_gpus: NDArray[np.integer],
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    scheme: str = "auto",
) -> IntArray:
    """Give each trace job a model (index into ``throughput.models``).

    Schemes:

    * ``"sia_gputime"`` -- Sia's mapping of GPU-time ``duration * num_gpus`` (sia.md section 10):
      < 1 h cifar10; [1, 10) h deepspeech2 or bert (50:50); [10, 100) h yolov3; >= 100 h imagenet.
    * ``"gavel_uniform"`` -- uniform over Gavel's 26 job types; a job with more than one GPU draws
      uniformly among the distributed types (those whose throughput on 2 GPUs is positive on some
      type: ResNet-18/50, Transformer, LM), as Gavel's generator redraws until distributed.
    * ``"auto"`` -- ``gavel_uniform`` if every GPU type of the cluster is one Gavel profiled (k80,
      p100, v100), else ``sia_gputime``.

    The random draws have a fixed size (two per job), so the result depends only on the inputs
    and the state of ``rng``.

    Raises:
        TraceError: For an unknown scheme or a table lacking the needed models.
    """
    d = np.asarray(duration_s, dtype=np.float64)
    g = np.asarray(num_gpus, dtype=np.int64)
    scheme = _choice(scheme, ("auto", "sia_gputime", "gavel_uniform"), "model_scheme")
    if scheme == "auto":
        present = {GPU_TYPE_NAMES[k] for k in cluster.types_present}
        scheme = "gavel_uniform" if present <= set(GAVEL_GPU_TYPES) else "sia_gputime"
    u = rng.random(len(d))
    v = rng.random(len(d))
    if scheme == "sia_gputime":
        names = ["cifar10", "deepspeech2", "bert", "yolov3", "imagenet"]
        idx = _require_models(throughput, names, "model_scheme 'sia_gputime'")
        gpu_h = d * g / 3600.0
        pick = np.select(
            [gpu_h < 1.0, gpu_h < 10.0, gpu_h < 100.0],
            [0, np.where(u < 0.5, 1, 2), 3],
            default=4,
        )
        return idx[pick]
    allm, dist = _gavel_types(throughput)
    single = allm[np.minimum((u * len(allm)).astype(np.int64), len(allm) - 1)]
    if dist.size == 0:
        if np.any(g > 1):
            raise TraceError(
                "model_scheme 'gavel_uniform': the throughput table has no distributed Gavel "
                "job type for multi-GPU jobs"
            )
        return single
    multi = dist[np.minimum((v * len(dist)).astype(np.int64), len(dist) - 1)]
    return np.where(g > 1, multi, single)


def _batch_sizes(throughput: ThroughputModel, model: IntArray) -> IntArray:
    """Submitted batch size implied by a model: Gavel's ``(batch size B)``, Sia's M0, else 0."""
    per_model = np.zeros(throughput.num_models, dtype=np.int64)
    for i, name in enumerate(throughput.models):
        m = re.search(r"batch size (\d+)", name)
        if m:
            per_model[i] = int(m.group(1))
        elif name in SIA_INITIAL_BATCH:
            per_model[i] = SIA_INITIAL_BATCH[name]
    return per_model[model]


# ====================================================================== duration -> work
def reference_work(
    duration_s: NDArray[np.floating],
    model: NDArray[np.integer],
    num_gpus: NDArray[np.integer],
    *,
    throughput: ThroughputModel,
    ref_type: str = "v100",
    fallback: str = "nearest",
    job_id: NDArray[np.str_] | None = None,
    source: str = "workload",
) -> FloatArray:
    """Total work of jobs that ran ``duration_s`` on ``num_gpus`` GPUs of ``ref_type``.

    ``work = duration * T[model, ref_type, num_gpus]`` (isolated, packed). Where that throughput is
    0, ``fallback="nearest"`` uses the nearest table count ``c`` with positive throughput (log2
    distance, the smaller count on ties) scaled linearly, ``T[c] * num_gpus / c``;
    ``fallback="error"`` raises.

    Raises:
        TraceError: Naming the job, if its model cannot run on ``ref_type`` at all (or at its
            count with ``fallback="error"``).
    """
    fallback = _choice(fallback, ("nearest", "error"), "ref_fallback")
    try:
        k = throughput.type_index(canonical_gpu_type(ref_type, where="ref_type"))
    except HetschedError as e:
        raise TraceError(f"ref_type={ref_type!r}: {e}") from None
    d = np.asarray(duration_s, dtype=np.float64)
    m = np.asarray(model, dtype=np.int64)
    n = np.asarray(num_gpus, dtype=np.int64)
    t = throughput.isolated(m, k, n, False)
    bad = np.flatnonzero(t <= 0)
    if bad.size:
        levels = throughput.count_levels
        tl = throughput.isolated(m[bad, None], k, levels[None, :], False)  # (B, L)
        ok = tl > 0
        none = ~ok.any(axis=1)
        if fallback == "error" or none.any():
            b = int(np.flatnonzero(none)[0]) if none.any() else 0
            i = int(bad[b])
            jid = f"job {str(job_id[i])!r}" if job_id is not None else f"job {i}"
            why = (
                f"cannot run on any GPU count of {ref_type}"
                if none.any()
                else f"cannot run on {int(n[i])} GPUs of {ref_type}"
            )
            raise TraceError(
                f"{source}: {jid} (model {throughput.models[m[i]]!r}, {int(n[i])} GPUs) {why}, "
                "so its traced duration cannot be converted to work; choose another ref_type"
                + (" or ref_fallback='nearest'" if not none.any() else "")
            )
        dist = np.abs(np.log2(levels)[None, :] - np.log2(n[bad])[:, None])
        dist = np.where(ok, dist, np.inf)
        c = np.argmin(dist, axis=1)  # first minimum = smaller count on ties
        t = t.copy()
        t[bad] = tl[np.arange(bad.size), c] * n[bad] / levels[c]
        logger.info(
            "%s: %d job(s) cannot run on their GPU count of %s; their work uses the nearest "
            "runnable count scaled linearly (ref_fallback='nearest')",
            source, bad.size, ref_type,
        )  # fmt: skip
    return np.asarray(d * t, dtype=np.float64)


# ====================================================================== fitting the cluster
def _type_pools(cluster: Cluster, allowed: BoolArray) -> IntArray:
    """Largest pool of GPUs of one type each job may use, shape (J,)."""
    per_type = cluster.gpus_per_type()
    return np.asarray(np.where(allowed, per_type[None, :], 0).max(axis=1), dtype=np.int64)


def check_fits(
    workload: Workload, cluster: Cluster, throughput: ThroughputModel | None = None
) -> None:
    """Raise if some job can never be placed on ``cluster``.

    A job must fit in the GPUs of one GPU type it may use (the engine's rule: a gang runs on one
    type), at its requested size ``req_gpus`` -- stricter than the engine's check of ``min_gpus``
    so that rigid policies can place every job too. With ``throughput``, the job's model must also
    run packed at ``req_gpus`` GPUs of some such type.

    Raises:
        TraceError: Naming the job id, its GPUs and the cluster's size.
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
    if throughput is None:
        return
    if wl.model.max() >= throughput.num_models:
        i = int(np.argmax(wl.model))
        raise TraceError(
            f"workload {wl.name!r}: job {str(wl.job_id[i])!r} has model index {int(wl.model[i])} "
            f"but the throughput table has {throughput.num_models} models"
        )
    ks = np.arange(len(GPU_TYPE_NAMES))
    t = throughput.isolated(wl.model[:, None], ks[None, :], need[:, None], False)
    ok = ((t > 0) & allowed & (per_type[None, :] >= need[:, None])).any(axis=1)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise TraceError(
            f"workload {wl.name!r}: job {str(wl.job_id[i])!r} (model "
            f"{throughput.models[wl.model[i]]!r}, {int(need[i])} GPUs) cannot run on any GPU type "
            f"of cluster {cluster.name!r} ({cluster.describe()}): its throughput there is 0"
        )


# ====================================================================== common pipeline
@dataclass
class _Opts:
    """Options shared by the trace loaders (see the module docstring)."""

    start: int = 0
    num_jobs: int | None = None
    busiest: bool = False
    model_scheme: str = "auto"
    ref_type: str = "v100"
    ref_fallback: str = "nearest"
    elastic: bool = False
    max_gpus_policy: str = "error"
    absent_types: str = "error"
    cpu_per_gpu: float | None = None
    mem_per_gpu: float | None = None
    min_duration_s: float = 0.0
    max_duration_s: float | None = None
    duration_policy: str = "skip"
    shift: bool = True


def _default_resources(
    cluster: Cluster, cpu: float | None, mem: float | None
) -> tuple[float, float]:
    ratio_c = float(np.min(cluster.node_cpus / cluster.node_gpus))
    ratio_m = float(np.min(cluster.node_mem / cluster.node_gpus))
    c = min(DEFAULT_CPU_PER_GPU, ratio_c) if cpu is None else float(cpu)
    g = min(DEFAULT_MEM_PER_GPU, ratio_m) if mem is None else float(mem)
    if not (math.isfinite(c) and c > 0 and math.isfinite(g) and g > 0):
        raise TraceError(f"cpu_per_gpu={cpu!r} and mem_per_gpu={mem!r} must be numbers > 0")
    return c, g


def _log_dropped(source: str, n: int, total: int, why: str) -> None:
    if n:
        logger.info("%s: %d of %d jobs %s", source, n, total, why)


def _sort_and_filter(jobs: _Jobs, o: _Opts, cluster: Cluster) -> _Jobs:
    """Stable sort by arrival, then the explicit filters of the module docstring (step 2)."""
    jobs = jobs.take(np.argsort(jobs.arrival, kind="stable"))
    src = jobs.source
    policy = _choice(o.duration_policy, ("skip", "cap"), "duration_policy")
    if o.min_duration_s and o.min_duration_s > 0:
        short = jobs.duration < float(o.min_duration_s)
        _log_dropped(src, int(short.sum()), len(jobs), f"shorter than {o.min_duration_s} s skipped")
        jobs = jobs.take(~short)
    if o.max_duration_s is not None:
        lim = float(o.max_duration_s)
        long_ = jobs.duration > lim
        if policy == "skip":
            _log_dropped(src, int(long_.sum()), len(jobs), f"longer than {lim} s skipped")
            jobs = jobs.take(~long_)
        elif long_.any():
            logger.info("%s: %d jobs capped to %s s", src, int(long_.sum()), lim)
            jobs = replace(jobs, duration=np.minimum(jobs.duration, lim))
    if len(jobs) == 0:
        raise TraceError(f"{src}: no job left after the duration filters")
    return _fit_policies(jobs, o, cluster, errors=False)


def _fit_policies(jobs: _Jobs, o: _Opts, cluster: Cluster, *, errors: bool) -> _Jobs:
    """``absent_types`` and ``max_gpus_policy``: skip/cap/relax before the window
    (``errors=False``); the ``"error"`` policies on the selected window only (``errors=True``)."""
    src = jobs.source
    per_type = cluster.gpus_per_type()
    if jobs.allowed is not None:
        cons = jobs.allowed
        absent = _choice(o.absent_types, ("error", "relax", "skip"), "absent_types")
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
    mg = _choice(o.max_gpus_policy, ("error", "cap", "skip"), "max_gpus_policy")
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


def _window(jobs: _Jobs, o: _Opts) -> _Jobs:
    J = len(jobs)
    start = int(o.start)
    if start < 0 or start >= J:
        raise TraceError(f"{jobs.source}: start={start} is outside the {J} (filtered) jobs")
    n = J - start if o.num_jobs is None else int(o.num_jobs)
    if n < 1:
        raise TraceError(f"{jobs.source}: num_jobs={o.num_jobs} must be >= 1")
    n = min(n, J - start)
    lo = start
    if o.busiest and n < J - start:
        t = jobs.arrival
        span = t[start + n - 1 :] - t[start : J - n + 1]
        lo = start + int(np.argmin(span))
        logger.info(
            "%s: busiest window of %d jobs starts at sorted job %d of %d (arrival span %.0f s)",
            jobs.source, n, lo, J, float(span[lo - start]),
        )  # fmt: skip
    elif n < J:
        logger.info("%s: jobs %d..%d of %d (sorted by arrival)", jobs.source, lo, lo + n - 1, J)
    return jobs.take(slice(lo, lo + n))


def _finish(
    jobs: _Jobs,
    o: _Opts,
    *,
    name: str,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
) -> Workload:
    """Steps 2-9 of the module docstring; the selection (steps 2-3) is kept per process for
    loaders wrapped in :func:`hetsched.sim.tracecache.memoised`."""
    jobs = _sort_and_filter(jobs, o, cluster)
    jobs = _window(jobs, o)
    jobs = _fit_policies(jobs, o, cluster, errors=True)
    tracecache.record(jobs, o, name, _build)
    return _build(jobs, o, name=name, throughput=throughput, cluster=cluster, rng=rng)


def _build(
    jobs: _Jobs,
    o: _Opts,
    *,
    name: str,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
) -> Workload:
    """Steps 4-9 of the module docstring, from the selected jobs (the only use of ``rng``)."""
    J = len(jobs)
    if jobs.model is None:
        model = assign_models(
            jobs.duration, jobs.gpus, throughput=throughput, cluster=cluster, rng=rng,
            scheme=o.model_scheme,
        )  # fmt: skip
    else:
        model = jobs.model
    work = reference_work(
        jobs.duration, model, jobs.gpus, throughput=throughput, ref_type=o.ref_type,
        fallback=o.ref_fallback, job_id=jobs.job_id, source=jobs.source,
    )  # fmt: skip
    req = jobs.gpus
    allowed = jobs.allowed if jobs.allowed is not None else np.ones((J, K), dtype=bool)
    if o.elastic:
        pool = _type_pools(cluster, allowed & (cluster.gpus_per_type() > 0)[None, :])
        lo = np.ones(J, dtype=np.int64)
        hi = np.maximum(req, np.minimum(2 * req, pool))
    else:
        lo, hi = req, req
    c_def, m_def = _default_resources(cluster, o.cpu_per_gpu, o.mem_per_gpu)
    cpu = jobs.cpu if jobs.cpu is not None else np.full(J, c_def)
    mem = jobs.mem if jobs.mem is not None else np.full(J, m_def)
    if jobs.queue is not None:
        queue_names, queue = np.unique(jobs.queue, return_inverse=True)
        qn: tuple[str, ...] = tuple(str(q) for q in queue_names)
    else:
        queue, qn = np.zeros(J, dtype=np.int64), ("default",)
    arrival = jobs.arrival - jobs.arrival[0] if o.shift else jobs.arrival
    batch = jobs.batch_size if jobs.batch_size is not None else _batch_sizes(throughput, model)
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


def _user_path(path: str | Path) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        gz = p.with_name(p.name + ".gz")
        if gz.exists():
            return gz
        raise TraceError(
            f"trace file {str(path)!r} not found (relative paths are taken from the current "
            f"directory {Path.cwd()}); pass an absolute path, e.g. workload.path=/abs/file.csv"
        )
    return p


def _data_path(path: str | Path | None, default: str, *, shipped: bool) -> Path:
    """``path`` if given (absolute, or relative to the shared data), else the default file."""
    if path is None:
        return shipped_data(default) if shipped else shared_data(default)
    return shared_data(path)


def _parse_constraint(
    spec: str, where: str, gpu_map: Mapping[str, str | None] | None = None
) -> tuple[BoolArray, bool]:
    """``'A|B'`` -> (allowed mask, whether some model maps to ``None``)."""
    mask = np.zeros(K, dtype=bool)
    unmapped = False
    for part in dict.fromkeys(p.strip() for p in spec.split("|") if p.strip()):
        if gpu_map is not None and part in gpu_map:
            target = gpu_map[part]
            if target is None:
                unmapped = True
                continue
        else:
            target = part
        try:
            mask[GPU_TYPE_NAMES.index(canonical_gpu_type(str(target)))] = True
        except HetschedError as e:
            raise TraceError(f"{where}: gpu type {part!r} in constraint {spec!r}: {e}") from None
    return mask, unmapped


# ====================================================================== loaders
@tracecache.memoised
def csv_trace(
    path: str | Path,
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    columns: Mapping[str, str | None] | None = None,
    time_unit: str = "s",
    name: str | None = None,
    start: int = 0,
    num_jobs: int | None = None,
    busiest: bool = False,
    model_scheme: str = "auto",
    ref_type: str = "v100",
    ref_fallback: str = "nearest",
    elastic: bool = False,
    max_gpus_policy: str = "error",
    absent_types: str = "error",
    cpu_per_gpu: float | None = None,
    mem_per_gpu: float | None = None,
    min_duration_s: float = 0.0,
    max_duration_s: float | None = None,
    duration_policy: str = "skip",
    shift: bool = True,
) -> Workload:
    """A generic CSV trace (one job per row, with a header).

    Args:
        path: The CSV file (``.gz`` read transparently), absolute or relative to the current
            directory.
        columns: Our field -> the file's column name, for the fields of :data:`CSV_FIELDS`.
            Required: ``job_id`` (may be ``None``: ids ``<file>-<line>`` are generated),
            ``submission_time``, ``duration``, ``num_gpu``; their defaults are ITP's names
            ``job_id, submission_time, duration, num_gpu``. Optional: ``model`` (names in the
            throughput table; otherwise :func:`assign_models`), ``batch_size``, ``cpu_per_gpu``
            (cores), ``mem_per_gpu`` (GiB), ``queue``, ``gpu_types`` (``|``-separated catalogue
            types or aliases; empty = any). An optional field that ``columns`` does not map is
            read from a column of its own name if the header has one; map it to ``None`` to
            ignore that column.
        time_unit: Unit of numeric ``submission_time`` and ``duration``: ``s``, ``ms``, ``min``
            or ``h``. A ``submission_time`` column of date-times (``YYYY-MM-DD HH:MM:SS``) is
            detected from its first value.
        name: Workload name (default: the file's stem).
        start, num_jobs, busiest, model_scheme, ref_type, ref_fallback, elastic,
            max_gpus_policy, absent_types, cpu_per_gpu, mem_per_gpu, min_duration_s,
            max_duration_s, duration_policy, shift: see the module docstring.

    Raises:
        TraceError: For a missing column (naming the file, the column and the header) or a bad
            value (naming the file, the line and the value).
    """
    p = _user_path(path)
    scale = _TIME_UNITS.get(str(time_unit))
    if scale is None:
        raise TraceError(f"time_unit={time_unit!r} is not one of {list(_TIME_UNITS)}")
    cols: dict[str, str | None] = dict(CSV_FIELDS)
    if columns is not None:
        unknown = set(columns) - set(CSV_FIELDS)
        if unknown:
            raise TraceError(
                f"columns: unknown field(s) {sorted(unknown)}; known fields: {list(CSV_FIELDS)}"
            )
        cols.update({str(k): (None if v is None else str(v)) for k, v in columns.items()})
    for req in ("submission_time", "duration", "num_gpu"):
        if cols[req] is None:
            raise TraceError(f"columns: field {req!r} is required and cannot be null")
    tab = _read_csv(p, [c for c in cols.values() if c is not None])
    given = set(columns or ())
    for f in _OPTIONAL_CSV_FIELDS:  # an optional field's own name in the header is read
        if f not in given and tab.has(f):
            cols[f] = f
    c_sub, c_dur, c_gpu = str(cols["submission_time"]), str(cols["duration"]), str(cols["num_gpu"])
    if cols["job_id"] is None:
        ids = np.char.add(f"{p.name.split('.')[0]}-", tab.lines.astype(str))
    else:
        ids = np.array([v.strip() for v in tab.col(cols["job_id"])], dtype=str)
    jobs = _Jobs(
        source=p.name,
        lines=tab.lines,
        job_id=ids,
        arrival=_times(tab, c_sub, scale),
        duration=_floats(tab, c_dur) * scale,
        gpus=_ints(tab, c_gpu),
    )
    if cols["model"] is not None:
        col = cols["model"]
        names = tab.col(col)
        model = np.empty(tab.num_rows, dtype=np.int64)
        index = {n: i for i, n in enumerate(throughput.models)}
        for i, v in enumerate(names):
            m = index.get(v.strip())
            if m is None:
                raise tab.error(
                    i, col, v, f"is not a model of the throughput table ({list(throughput.models)})"
                )
            model[i] = m
        jobs.model = model
    if cols["batch_size"] is not None:
        jobs.batch_size = _ints(tab, cols["batch_size"])
    if cols["cpu_per_gpu"] is not None:
        jobs.cpu = _floats(tab, cols["cpu_per_gpu"])
    if cols["mem_per_gpu"] is not None:
        jobs.mem = _floats(tab, cols["mem_per_gpu"])
    if cols["queue"] is not None:
        jobs.queue = np.array([v.strip() or "default" for v in tab.col(cols["queue"])], dtype=str)
    if cols["gpu_types"] is not None:
        col = cols["gpu_types"]
        allowed = np.ones((tab.num_rows, K), dtype=bool)
        cache: dict[str, BoolArray] = {}
        for i, v in enumerate(tab.col(col)):
            if not v.strip():
                continue
            if v not in cache:
                cache[v] = _parse_constraint(v, f"{p.name}: line {int(tab.lines[i])}: {col}")[0]
            allowed[i] = cache[v]
        jobs.allowed = allowed
    _validate_jobs(jobs)
    o = _Opts(
        start=start, num_jobs=num_jobs, busiest=busiest, model_scheme=model_scheme,
        ref_type=ref_type, ref_fallback=ref_fallback, elastic=elastic,
        max_gpus_policy=max_gpus_policy, absent_types=absent_types, cpu_per_gpu=cpu_per_gpu,
        mem_per_gpu=mem_per_gpu, min_duration_s=min_duration_s, max_duration_s=max_duration_s,
        duration_policy=duration_policy, shift=shift,
    )  # fmt: skip
    return _finish(
        jobs, o, name=name or p.name.split(".")[0], throughput=throughput, cluster=cluster, rng=rng
    )


@tracecache.memoised
def philly(
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    path: str | Path | None = None,
    name: str | None = None,
    vc: str | Sequence[str] | None = None,
    start: int = 0,
    num_jobs: int | None = 300,
    busiest: bool = True,
    model_scheme: str = "auto",
    ref_type: str = "v100",
    ref_fallback: str = "nearest",
    elastic: bool = False,
    max_gpus_policy: str = "error",
    cpu_per_gpu: float | None = None,
    mem_per_gpu: float | None = None,
    min_duration_s: float = 0.0,
    max_duration_s: float | None = None,
    duration_policy: str = "skip",
    shift: bool = True,
) -> Workload:
    """The Philly subset prepared by Pollux (82,247 jobs, Sep-Dec 2017; data.md section 2).

    Columns ``timestamp`` (date-time), ``duration`` (s), ``num_gpus``, ``gpu_time``, ``cluster``
    (the virtual cluster, used as the job's queue). Rows are not sorted in the file; they are
    sorted (stably) by timestamp. Job ids are ``philly-<line>``.

    The default is the **busiest window**: the 300 consecutive jobs with the shortest arrival span
    (4.3 minutes, 179 GPU-hours, 1-4 GPUs per job; about three hours of work for 64 GPUs), which
    simulates in seconds. ``busiest=False`` with ``start``/``num_jobs`` selects other windows;
    ``num_jobs=None`` with ``busiest=False`` replays the whole trace (jobs of up to 128 GPUs: pass
    ``max_gpus_policy`` if the cluster is smaller).

    Args:
        path: Another copy of the file (absolute, or relative to the shared data directory);
            ``None`` = the shipped ``hetsched/data/traces/philly/philly_pollux.csv.gz``.
        vc: Keep only these virtual clusters (a hash or a list); the count is logged.
        Others: see the module docstring.
    """
    p = _data_path(path, "traces/philly/philly_pollux.csv", shipped=True)
    tab = _read_csv(p, ["timestamp", "duration", "num_gpus", "cluster"])
    ts = _datetimes(tab, "timestamp")
    vcs = np.array([v.strip() for v in tab.col("cluster")], dtype=str)
    jobs = _Jobs(
        source=p.name,
        lines=tab.lines,
        job_id=np.char.add("philly-", tab.lines.astype(str)),
        arrival=ts - ts.min(),
        duration=_floats(tab, "duration"),
        gpus=_ints(tab, "num_gpus"),
        queue=vcs,
    )
    _validate_jobs(jobs)
    if vc is not None:
        keep = _match_names(vc, sorted(set(vcs.tolist())), f"{p.name}: vc")
        mask = np.isin(vcs, keep)
        _log_dropped(p.name, int((~mask).sum()), len(jobs), f"outside VC(s) {keep} skipped")
        jobs = jobs.take(mask)
    o = _Opts(
        start=start, num_jobs=num_jobs, busiest=busiest, model_scheme=model_scheme,
        ref_type=ref_type, ref_fallback=ref_fallback, elastic=elastic,
        max_gpus_policy=max_gpus_policy, cpu_per_gpu=cpu_per_gpu, mem_per_gpu=mem_per_gpu,
        min_duration_s=min_duration_s, max_duration_s=max_duration_s,
        duration_policy=duration_policy, shift=shift,
    )  # fmt: skip
    return _finish(jobs, o, name=name or "philly", throughput=throughput, cluster=cluster, rng=rng)


#: ITP clusters shipped under ``hetsched/data/traces/itp/``.
ITP_CLUSTERS = ("cluster01", "cluster02", "cluster03", "cluster05", "cluster06", "cluster08",
                "cluster10")  # fmt: skip


def itp(
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    itp_cluster: str = "cluster10",
    path: str | Path | None = None,
    name: str | None = None,
    start: int = 0,
    num_jobs: int | None = None,
    busiest: bool = False,
    model_scheme: str = "auto",
    ref_type: str = "v100",
    ref_fallback: str = "nearest",
    elastic: bool = False,
    max_gpus_policy: str = "error",
    cpu_per_gpu: float | None = None,
    mem_per_gpu: float | None = None,
    min_duration_s: float = 0.0,
    max_duration_s: float | None = None,
    duration_policy: str = "skip",
    shift: bool = True,
) -> Workload:
    """A Microsoft ITP cluster trace (MIT; data.md section 1), shipped.

    Args:
        itp_cluster: Which ITP cluster (``cluster01`` ... ``cluster10``, see
            :data:`ITP_CLUSTERS`; named ``itp_cluster`` because ``cluster`` is the simulated
            cluster). Default ``cluster10``: 260 jobs over 33 days, up to 16 GPUs.
        path: Another file in the ITP format (absolute, or relative to the shared data
            directory); overrides ``itp_cluster``.
        Others: see :func:`csv_trace` and the module docstring.
    """
    if path is None:
        key = str(itp_cluster)
        key = key if key.startswith("cluster") else f"cluster{int(key):02d}"
        if key not in ITP_CLUSTERS:
            raise TraceError(f"itp_cluster={itp_cluster!r} is not one of {list(ITP_CLUSTERS)}")
        p = shipped_data(f"traces/itp/{key}.csv")
    else:
        p = shared_data(path)
        key = p.name.split(".")[0]
    return csv_trace(
        p, throughput=throughput, cluster=cluster, rng=rng, name=name or f"itp_{key}",
        start=start, num_jobs=num_jobs, busiest=busiest, model_scheme=model_scheme,
        ref_type=ref_type, ref_fallback=ref_fallback, elastic=elastic,
        max_gpus_policy=max_gpus_policy, cpu_per_gpu=cpu_per_gpu, mem_per_gpu=mem_per_gpu,
        min_duration_s=min_duration_s, max_duration_s=max_duration_s,
        duration_policy=duration_policy, shift=shift,
    )  # fmt: skip


@tracecache.memoised
def alibaba(
    path: str | Path = "traces/alibaba_v2023/openb_pod_list_gpuspec33.csv",
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    name: str | None = None,
    gpu_spec: bool = True,
    gpu_map: Mapping[str, str | None] | None = None,
    unmapped: str = "relax",
    include_cpu_only: bool = False,
    include_unscheduled: bool = False,
    drop_missing_times: bool = True,
    drop_zero_duration: bool = True,
    fractional_gpu: str = "whole",
    start: int = 0,
    num_jobs: int | None = None,
    busiest: bool = False,
    model_scheme: str = "auto",
    ref_type: str = "v100",
    ref_fallback: str = "nearest",
    elastic: bool = False,
    max_gpus_policy: str = "error",
    absent_types: str = "error",
    min_duration_s: float = 0.0,
    max_duration_s: float | None = None,
    duration_policy: str = "skip",
    shift: bool = True,
) -> Workload:
    """Alibaba PAI v2023 ("openb") pods as jobs (data.md section 3). Research use only: never
    shipped, read by path.

    Columns ``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase,
    creation_time, deletion_time, scheduled_time``. Conversion:

    * job id = pod name; queue = QoS class (LS, BE, Burstable, Guaranteed);
    * duration = ``deletion_time - creation_time`` (the pod's lifetime; pods still running are
      censored at the trace end);
    * ``cpu_per_gpu = cpu_milli / 1000 / num_gpu`` cores, ``mem_per_gpu = memory_mib / 1024 /
      num_gpu`` GiB; a request of 0 (one pod has memory 0) is replaced by the defaults of the
      module docstring, counted in the log;
    * GPU-type constraints from ``gpu_spec`` (``|``-separated, de-duplicated): T4 -> t4, P100 ->
      p100, V100M16/V100M32 -> v100 (:func:`~hetsched.sim.catalog.canonical_gpu_type`); G2 and G3
      (undisclosed models) and A10 (no throughput data) have no catalogue type
      (:data:`ALIBABA_GPU_MAP`); a constraint naming one is handled by ``unmapped``.

    Args:
        path: The pod list, absolute or relative to the shared data directory.
        gpu_spec: Use the ``gpu_spec`` constraints (False: every pod may use every type).
        gpu_map: Overrides of :data:`ALIBABA_GPU_MAP` (Alibaba model -> catalogue type or None).
        unmapped: A constraint naming a model mapped to None: ``"relax"`` (default; the whole
            constraint is dropped, since the unknown model could be any type), ``"error"``,
            ``"skip"`` (exclude the pod).
        include_cpu_only: Must stay False: pods with ``num_gpu = 0`` (1,088) are excluded and
            counted; the simulator schedules GPU jobs only, so True raises if there are any.
        include_unscheduled: Pods without ``scheduled_time`` (pending, never ran; 897) are
            excluded (counted) unless True.
        drop_missing_times: Exclude (count) pods without creation or deletion time; False raises.
        drop_zero_duration: Exclude (count) pods with deletion <= creation; False raises.
        fractional_gpu: Pods sharing a GPU (``gpu_milli < 1000``, 3,078 one-GPU pods):
            ``"whole"`` (default; each takes a whole GPU, as the simulator has no fractional
            GPUs; counted) or ``"skip"``.
        Others: see the module docstring (``absent_types``: a constraint naming only types absent
            from the cluster, e.g. P100 pods on the Sia cluster).
    """
    p = shared_data(path)
    tab = _read_csv(
        p,
        ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "qos", "creation_time",
         "deletion_time", "scheduled_time"] + (["gpu_spec"] if gpu_spec else []),
    )  # fmt: skip
    fractional_gpu = _choice(fractional_gpu, ("whole", "skip"), "fractional_gpu")
    unmapped = _choice(unmapped, ("relax", "error", "skip"), "unmapped")
    src = p.name
    n_all = tab.num_rows
    gpus = _ints(tab, "num_gpu")
    cpu_milli = _floats(tab, "cpu_milli")
    mem_mib = _floats(tab, "memory_mib")
    gpu_milli = _floats(tab, "gpu_milli")
    created = _floats(tab, "creation_time", allow_empty=True)
    deleted = _floats(tab, "deletion_time", allow_empty=True)
    scheduled = np.array([bool(v.strip()) for v in tab.col("scheduled_time")])
    for col, arr in (("num_gpu", gpus), ("cpu_milli", cpu_milli), ("memory_mib", mem_mib),
                     ("gpu_milli", gpu_milli)):  # fmt: skip
        if np.any(arr < 0):
            i = int(np.flatnonzero(arr < 0)[0])
            raise tab.error(i, col, tab.col(col)[i], "must be >= 0")
    keep = np.ones(n_all, dtype=bool)
    cpu_only = gpus == 0
    if cpu_only.any():
        if include_cpu_only:
            i = int(np.flatnonzero(cpu_only)[0])
            raise tab.error(
                i,
                "num_gpu",
                "0",
                "(a CPU-only pod): the simulator schedules GPU jobs only; "
                "keep include_cpu_only=False to exclude such pods",
            )
        _log_dropped(src, int(cpu_only.sum()), n_all, "CPU-only pods (num_gpu=0) excluded")
        keep &= ~cpu_only
    if not include_unscheduled:
        un = keep & ~scheduled
        _log_dropped(src, int(un.sum()), n_all, "never-scheduled pods excluded")
        keep &= ~un
    missing = keep & (~np.isfinite(created) | ~np.isfinite(deleted))
    if missing.any():
        if not drop_missing_times:
            i = int(np.flatnonzero(missing)[0])
            raise tab.error(i, "creation_time/deletion_time", "", "is missing")
        _log_dropped(src, int(missing.sum()), n_all, "pods without creation/deletion time excluded")
        keep &= ~missing
    dur = np.where(keep, deleted - created, 1.0)
    zero = keep & (dur <= 0)
    if zero.any():
        if not drop_zero_duration:
            i = int(np.flatnonzero(zero)[0])
            raise tab.error(i, "deletion_time - creation_time", float(dur[i]), "must be > 0")
        _log_dropped(src, int(zero.sum()), n_all, "pods with zero lifetime excluded")
        keep &= ~zero
    frac = keep & (gpu_milli < 1000)
    if frac.any():
        if fractional_gpu == "skip":
            _log_dropped(src, int(frac.sum()), n_all, "fractional-GPU pods excluded")
            keep &= ~frac
        else:
            logger.info("%s: %d fractional-GPU pods each given a whole GPU", src, int(frac.sum()))
    allowed = np.ones((n_all, K), dtype=bool)
    if gpu_spec:
        gmap = dict(ALIBABA_GPU_MAP)
        if gpu_map is not None:
            gmap.update({str(k): (None if v is None else str(v)) for k, v in gpu_map.items()})
        cache: dict[str, tuple[BoolArray, bool]] = {}
        specs = tab.col("gpu_spec")
        relaxed = 0
        for r in np.flatnonzero(keep):
            i = int(r)
            s = specs[i].strip()
            if not s:
                continue
            if s not in cache:
                cache[s] = _parse_constraint(s, f"{src}: line {int(tab.lines[i])}: gpu_spec", gmap)
            mask, has_unmapped = cache[s]
            if has_unmapped:
                if unmapped == "error":
                    raise tab.error(
                        i,
                        "gpu_spec",
                        s,
                        "names a GPU model without a catalogue type "
                        f"({[k for k, v in gmap.items() if v is None]}); pass gpu_map or "
                        "unmapped='relax'/'skip'",
                    )
                if unmapped == "skip":
                    keep[i] = False
                else:
                    relaxed += 1
                continue
            allowed[i] = mask
        if relaxed:
            logger.info(
                "%s: %d pods' constraints name a model without a catalogue type; relaxed",
                src, relaxed,
            )  # fmt: skip
    ng = np.maximum(gpus, 1).astype(np.float64)
    cpu = cpu_milli / 1000.0 / ng
    mem = mem_mib / 1024.0 / ng
    c_def, m_def = _default_resources(cluster, None, None)
    zc, zm = keep & (cpu <= 0), keep & (mem <= 0)
    if zc.any() or zm.any():
        logger.info(
            "%s: %d pods with a zero CPU and %d with a zero memory request given the defaults "
            "(%.3g cores, %.3g GiB per GPU)", src, int(zc.sum()), int(zm.sum()), c_def, m_def,
        )  # fmt: skip
    cpu = np.where(cpu > 0, cpu, c_def)
    mem = np.where(mem > 0, mem, m_def)
    logger.info("%s: %d of %d pods kept", src, int(keep.sum()), n_all)
    jobs = _Jobs(
        source=src,
        lines=tab.lines,
        job_id=np.array([v.strip() for v in tab.col("name")], dtype=str),
        arrival=np.where(np.isfinite(created), created, 0.0),
        duration=dur,
        gpus=gpus,
        cpu=cpu,
        mem=mem,
        queue=np.array([v.strip() or "default" for v in tab.col("qos")], dtype=str),
        allowed=allowed,
    ).take(keep)
    if len(jobs) == 0:
        raise TraceError(f"{src}: no pod left after the exclusions")
    _validate_jobs(jobs)
    o = _Opts(
        start=start, num_jobs=num_jobs, busiest=busiest, model_scheme=model_scheme,
        ref_type=ref_type, ref_fallback=ref_fallback, elastic=elastic,
        max_gpus_policy=max_gpus_policy, absent_types=absent_types,
        min_duration_s=min_duration_s, max_duration_s=max_duration_s,
        duration_policy=duration_policy, shift=shift,
    )  # fmt: skip
    return _finish(jobs, o, name=name or "alibaba", throughput=throughput, cluster=cluster, rng=rng)


# ====================================================================== Sia / Pollux workloads
@tracecache.memoised_fixed
def sia_workload(
    path: str | Path,
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    name: str | None = None,
    elastic: bool = True,
    max_gpus_cap: int = 64,
    max_gpus_policy: str = "error",
    cpu_per_gpu: float | None = None,
    mem_per_gpu: float | None = None,
    relative_to: str = "cwd",
) -> Workload:
    """A workload file in the Sia/Pollux format ``name,time,application,num_replicas,batch_size``.

    * job id = ``name``; arrival = ``time`` (seconds from the workload start, kept as is);
    * model = ``application``, which must be a Sia app of the throughput table (family ``sia``);
    * work = ``throughput.default_work[model]``: Sia apps complete after ``max_epochs`` epochs,
      whatever the trace says (the files have no duration);
    * ``req_gpus = num_replicas``, ``batch_size`` from the file;
    * ``elastic=True`` (default; Sia and Pollux rescale jobs): ``min_gpus = 1`` and ``max_gpus =
      max(req, min(max_gpus_cap, GPUs of the cluster))``. Sia caps ``max_replicas`` at 64 and at
      ``max_batch // min_local_bsz``; the table keeps no batch limits, so the 64 cap and the
      cluster size are used. ``elastic=False``: rigid at ``num_replicas``.

    ``rng`` is unused (the files fix everything); it is accepted for the factory signature.

    Args:
        path: The file; resolved from the current directory if ``relative_to="cwd"``, from the
            shared data directory if ``"shared"``, or from the shipped data if ``"shipped"``.
        max_gpus_policy: A job requesting more GPUs than one type's pool: ``"error"``, ``"cap"``
            (request the pool) or ``"skip"``.
    """
    del rng
    where = _choice(relative_to, ("cwd", "shared", "shipped"), "relative_to")
    if where == "shared":
        p = shared_data(path)
    elif where == "shipped":
        p = shipped_data(str(path))
    else:
        p = _user_path(path)
    tab = _read_csv(p, ["name", "time", "application", "num_replicas", "batch_size"])
    apps = tab.col("application")
    index = {n: i for i, n in enumerate(throughput.models) if throughput.family[i] == "sia"}
    model = np.empty(tab.num_rows, dtype=np.int64)
    for i, v in enumerate(apps):
        m = index.get(v.strip())
        if m is None:
            raise tab.error(
                i, "application", v, f"is not a Sia app of the throughput table ({sorted(index)})"
            )
        model[i] = m
    work = throughput.default_work[model]
    bad = ~np.isfinite(work) | (work <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise tab.error(i, "application", apps[i], "has no default_work in the throughput table")
    time_s = _floats(tab, "time")
    if np.any(time_s < 0):
        i = int(np.flatnonzero(time_s < 0)[0])
        raise tab.error(i, "time", tab.col("time")[i], "must be >= 0")
    jobs = _Jobs(
        source=p.name,
        lines=tab.lines,
        job_id=np.array([v.strip() for v in tab.col("name")], dtype=str),
        arrival=time_s,
        duration=np.ones(tab.num_rows),
        gpus=_ints(tab, "num_replicas"),
        model=model,
        batch_size=_ints(tab, "batch_size"),
    )
    _validate_jobs(jobs)
    order = np.argsort(jobs.arrival, kind="stable")
    jobs = jobs.take(order)
    work = work[order]
    pool = int(cluster.gpus_per_type().max())
    big = jobs.gpus > pool
    if big.any():
        mg = _choice(max_gpus_policy, ("error", "cap", "skip"), "max_gpus_policy")
        i = int(np.flatnonzero(big)[0])
        if mg == "error":
            raise TraceError(
                f"{jobs.where(i)} requests {int(jobs.gpus[i])} GPUs but cluster {cluster.name!r} "
                f"has {cluster.num_gpus} GPUs, at most {pool} of one GPU type "
                f"({cluster.describe()}); {int(big.sum())} jobs are affected; pass "
                "max_gpus_policy='cap' or 'skip'"
            )
        if mg == "skip":
            _log_dropped(p.name, int(big.sum()), len(jobs), "larger than the cluster skipped")
            jobs, work = jobs.take(~big), work[~big]
        else:
            logger.info("%s: %d jobs capped to %d GPUs", p.name, int(big.sum()), pool)
            jobs = replace(jobs, gpus=np.minimum(jobs.gpus, pool))
    J = len(jobs)
    if J == 0:
        raise TraceError(f"{p.name}: no job left after max_gpus_policy='skip'")
    req = jobs.gpus
    if elastic:
        lo = np.ones(J, dtype=np.int64)
        hi = np.maximum(req, min(int(max_gpus_cap), cluster.num_gpus))
    else:
        lo, hi = req, req
    c_def, m_def = _default_resources(cluster, cpu_per_gpu, mem_per_gpu)
    wl = Workload(
        name=name or p.name.split(".")[0],
        job_id=jobs.job_id,
        arrival=jobs.arrival,
        model=jobs.model if jobs.model is not None else model,
        batch_size=jobs.batch_size if jobs.batch_size is not None else np.zeros(J, np.int64),
        work=work,
        req_gpus=req,
        min_gpus=lo,
        max_gpus=hi,
        cpu_per_gpu=np.full(J, c_def),
        mem_per_gpu=np.full(J, m_def),
    )
    check_fits(wl, cluster, throughput)
    return wl


def _sia_index(index: int, kind: str) -> int:
    n = _SIA_INDEX_RANGE[kind]
    try:
        i = int(index)
    except (TypeError, ValueError):
        raise TraceError(f"index={index!r} must be an integer 1..{n}") from None
    if not 1 <= i <= n:
        raise TraceError(f"index={index!r}: the {kind} workloads are workload-1 .. workload-{n}")
    return i


def pollux_philly(
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    index: int = 1,
    name: str | None = None,
    elastic: bool = True,
    max_gpus_cap: int = 64,
    max_gpus_policy: str = "error",
    cpu_per_gpu: float | None = None,
    mem_per_gpu: float | None = None,
) -> Workload:
    """Pollux OSDI'21 workload ``workload-<index>.csv`` (1..8; 160 jobs over about 8 h; shipped,
    Apache-2.0). Apps include ``ncf``; up to 48 replicas (Pollux's cluster was 64 T4s). See
    :func:`sia_workload`."""
    i = _sia_index(index, "philly")
    p = shipped_data(f"traces/pollux/workload-{i}.csv")
    return sia_workload(
        p, throughput=throughput, cluster=cluster, rng=rng, name=name or f"pollux_philly_{i}",
        elastic=elastic, max_gpus_cap=max_gpus_cap, max_gpus_policy=max_gpus_policy,
        cpu_per_gpu=cpu_per_gpu, mem_per_gpu=mem_per_gpu,
    )  # fmt: skip


def _sia_preset(
    kind: str,
    label: str,
    index: int,
    path: str | Path | None,
    name: str | None,
    kw: dict[str, Any],
) -> Workload:
    i = _sia_index(index, kind)
    p = shared_data(path if path is not None else f"workloads/sia/{kind}/workload-{i}.csv")
    return sia_workload(p, name=name or f"{label}_{i}", **kw)


def sia_philly(
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    index: int = 1,
    path: str | Path | None = None,
    name: str | None = None,
    elastic: bool = True,
    max_gpus_cap: int = 64,
    max_gpus_policy: str = "error",
    cpu_per_gpu: float | None = None,
    mem_per_gpu: float | None = None,
) -> Workload:
    """Sia's Philly workload ``workloads/sia/philly/workload-<index>.csv`` (1..8; 160 jobs, 4-16
    GPUs). Not shipped (no licence): read from the shared data directory, or ``path``."""
    kw = dict(throughput=throughput, cluster=cluster, rng=rng, elastic=elastic,
              max_gpus_cap=max_gpus_cap, max_gpus_policy=max_gpus_policy,
              cpu_per_gpu=cpu_per_gpu, mem_per_gpu=mem_per_gpu)  # fmt: skip
    return _sia_preset("philly", "sia_philly", index, path, name, kw)


def sia_helios(
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    index: int = 1,
    path: str | Path | None = None,
    name: str | None = None,
    elastic: bool = True,
    max_gpus_cap: int = 64,
    max_gpus_policy: str = "error",
    cpu_per_gpu: float | None = None,
    mem_per_gpu: float | None = None,
) -> Workload:
    """Sia's Helios (Saturn) workload ``workloads/sia/saturn/workload-<index>.csv`` (1..10; 160
    jobs over about 8 h). Not shipped: read from the shared data directory, or ``path``."""
    kw = dict(throughput=throughput, cluster=cluster, rng=rng, elastic=elastic,
              max_gpus_cap=max_gpus_cap, max_gpus_policy=max_gpus_policy,
              cpu_per_gpu=cpu_per_gpu, mem_per_gpu=mem_per_gpu)  # fmt: skip
    return _sia_preset("saturn", "sia_helios", index, path, name, kw)


def sia_newtrace(
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    index: int = 1,
    path: str | Path | None = None,
    name: str | None = None,
    elastic: bool = True,
    max_gpus_cap: int = 64,
    max_gpus_policy: str = "error",
    cpu_per_gpu: float | None = None,
    mem_per_gpu: float | None = None,
) -> Workload:
    """Sia's "newtrace" workload ``workloads/sia/newtrace/workload-<index>.csv`` (1..10; 960 jobs
    over 48 h). Not shipped: read from the shared data directory, or ``path``."""
    kw = dict(throughput=throughput, cluster=cluster, rng=rng, elastic=elastic,
              max_gpus_cap=max_gpus_cap, max_gpus_policy=max_gpus_policy,
              cpu_per_gpu=cpu_per_gpu, mem_per_gpu=mem_per_gpu)  # fmt: skip
    return _sia_preset("newtrace", "sia_newtrace", index, path, name, kw)


# ====================================================================== Gavel's generator
def gavel_synthetic(
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    name: str | None = None,
    num_jobs: int = 300,
    jobs_per_hour: float = 3.0,
    multi_gpu: bool = False,
    static: bool = False,
    ref_type: str = "v100",
    max_gpus_policy: str = "error",
    cpu_per_gpu: float | None = None,
    mem_per_gpu: float | None = None,
) -> Workload:
    """Gavel's synthetic workload generator (gavel.md section 7), all randomness from ``rng``.

    Per job: a scale factor ``s`` from ``U ~ U[0,1)``: 1 if U < 0.7, 2 if U <= 0.8, 4 if U <= 0.95,
    else 8 (forced to 1 unless ``multi_gpu``, Gavel's "continuous-single" trace; U is drawn
    anyway); a job type uniform over the 26 Gavel types, over the distributed ones when s > 1;
    a duration on V100 from the "Philly distribution" (with probability 0.8 ``60 *
    10**U(1.5, 3)`` s, else ``60 * 10**U(3, 4)`` s); ``total_steps = duration * T_ref(model, s)``.
    Arrivals are a Poisson process of ``jobs_per_hour`` (exponential gaps of mean ``3600 /
    jobs_per_hour`` s; the first job at t = 0); ``static=True`` makes every job arrive at 0
    (Gavel's makespan experiments).

    Args:
        num_jobs: Number of jobs.
        jobs_per_hour: Arrival rate (Gavel sweeps 0.4-6 jobs/h for single-GPU jobs on 108 GPUs).
        multi_gpu: Draw scale factors 1/2/4/8 at 70/10/15/5 %.
        static: All jobs arrive at t = 0.
        ref_type: The GPU type durations refer to (Gavel: V100).
        max_gpus_policy: ``"error"`` if a scale factor exceeds the cluster's pool of one type,
            or ``"cap"``.
        cpu_per_gpu, mem_per_gpu: See the module docstring.
    """
    J = int(num_jobs)
    if J < 1:
        raise TraceError(f"num_jobs={num_jobs!r} must be >= 1")
    rate = float(jobs_per_hour)
    if not static and not (math.isfinite(rate) and rate > 0):
        raise TraceError(f"jobs_per_hour={jobs_per_hour!r} must be > 0")
    u_scale = rng.random(J)
    scale = np.select([u_scale < 0.7, u_scale <= 0.8, u_scale <= 0.95], [1, 2, 4], default=8)
    if not multi_gpu:
        scale = np.ones(J, dtype=np.int64)
    scale = scale.astype(np.int64)
    allm, dist = _gavel_types(throughput)
    u_type = rng.random(J)
    u_dist = rng.random(J)
    single = allm[np.minimum((u_type * len(allm)).astype(np.int64), len(allm) - 1)]
    if dist.size:
        multi = dist[np.minimum((u_dist * len(dist)).astype(np.int64), len(dist) - 1)]
        model = np.where(scale > 1, multi, single)
    else:
        model = single
    short = rng.random(J) < 0.8
    exp10 = np.where(short, rng.uniform(1.5, 3.0, J), rng.uniform(3.0, 4.0, J))
    duration = 60.0 * 10.0**exp10
    gaps = rng.exponential(3600.0 / rate, J) if not static else np.zeros(J)
    arrival = np.concatenate([[0.0], np.cumsum(gaps[:-1])])
    pool = int(cluster.gpus_per_type().max())
    if np.any(scale > pool):
        mg = _choice(max_gpus_policy, ("error", "cap"), "max_gpus_policy")
        if mg == "error":
            i = int(np.flatnonzero(scale > pool)[0])
            raise TraceError(
                f"gavel_synthetic: job {i} has scale factor {int(scale[i])} but cluster "
                f"{cluster.name!r} has at most {pool} GPUs of one type ({cluster.describe()}); "
                "pass max_gpus_policy='cap' or multi_gpu=false"
            )
        scale = np.minimum(scale, pool)
    work = reference_work(
        duration, model, scale, throughput=throughput, ref_type=ref_type, fallback="error",
        source="gavel_synthetic",
    )  # fmt: skip
    c_def, m_def = _default_resources(cluster, cpu_per_gpu, mem_per_gpu)
    wl = Workload(
        name=name or "gavel_synthetic",
        job_id=np.char.add("gavel-", np.arange(J).astype(str)),
        arrival=arrival,
        model=model,
        batch_size=_batch_sizes(throughput, model),
        work=work,
        req_gpus=scale,
        min_gpus=scale,
        max_gpus=scale,
        cpu_per_gpu=np.full(J, c_def),
        mem_per_gpu=np.full(J, m_def),
        trace_duration=duration,
    )
    check_fits(wl, cluster, throughput)
    return wl
