"""Any CSV trace with one job per row (:func:`csv_trace`), and helpers other readers share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.sim import tracecache
from hetsched.sim.catalog import GPU_TYPE_NAMES, canonical_gpu_type
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import HetschedError, TraceError
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.traces.convert import TraceJobs, convert, select_rows
from hetsched.sim.traces.csvio import Table, read_table, user_path
from hetsched.sim.traces.models import match_models
from hetsched.sim.traces.options import TraceOptions
from hetsched.sim.workload import Workload

__all__ = ["CSV_FIELDS", "TIME_UNITS", "csv_trace", "match_names", "parse_constraint"]

K = len(GPU_TYPE_NAMES)
BoolArray = NDArray[np.bool_]

#: Fields :func:`csv_trace` understands, with their default (ITP) column names; ``None`` = optional.
CSV_FIELDS: dict[str, str | None] = {
    "job_id": "job_id",
    "submission_time": "submission_time",
    "interarrival": None,
    "duration": "duration",
    "num_gpu": "num_gpu",
    "model": None,
    "batch_size": None,
    "cpu_per_gpu": None,
    "mem_per_gpu": None,
    "queue": None,
    "gpu_types": None,
}

#: Optional fields read from a column of the same name when ``columns`` does not map them
#: (``columns={field: None}`` ignores such a column). ``interarrival`` is read only when mapped.
_AUTO_FIELDS: tuple[str, ...] = tuple(
    k for k, v in CSV_FIELDS.items() if v is None and k != "interarrival"
)

#: Units of numeric times: seconds per unit.
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "min": 60.0, "h": 3600.0}


def parse_constraint(
    spec: str, where: str, gpu_map: Mapping[str, str | None] | None = None
) -> tuple[BoolArray, bool]:
    """``'A|B'`` -> (allowed mask over catalogue types, whether some name maps to ``None``)."""
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


def match_names(value: Any, known: Sequence[str], where: str) -> list[str]:
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


def _columns(columns: Mapping[str, str | None] | None) -> dict[str, str | None]:
    """The field -> column mapping: defaults overridden by ``columns``."""
    cols: dict[str, str | None] = dict(CSV_FIELDS)
    if columns is None:
        return cols
    unknown = set(columns) - set(CSV_FIELDS)
    if unknown:
        raise TraceError(
            f"columns: unknown field(s) {sorted(unknown)}; known fields: {list(CSV_FIELDS)}"
        )
    cols.update({str(k): (None if v is None else str(v)) for k, v in columns.items()})
    if cols["interarrival"] is not None:
        if columns.get("submission_time") is not None:
            raise TraceError(
                "columns: map either submission_time (arrival times) or interarrival (gaps "
                "between consecutive arrivals), not both"
            )
        cols["submission_time"] = None
    for req in ("duration", "num_gpu"):
        if cols[req] is None:
            raise TraceError(f"columns: field {req!r} is required and cannot be null")
    if cols["submission_time"] is None and cols["interarrival"] is None:
        raise TraceError(
            "columns: field 'submission_time' is required and cannot be null (or map "
            "interarrival to a column of gaps between arrivals)"
        )
    return cols


def _arrivals(tab: Table, cols: Mapping[str, str | None], scale: float) -> NDArray[np.float64]:
    """Arrival times: the submission column, or the cumulated gaps of the interarrival column."""
    gap_col = cols["interarrival"]
    if gap_col is None:
        return tab.times(str(cols["submission_time"]), scale)
    gaps = tab.floats(gap_col) * scale
    neg = gaps < 0
    if neg.any():
        i = int(np.flatnonzero(neg)[0])
        raise tab.error(i, gap_col, tab.cell(i, gap_col), "is a negative gap between arrivals")
    return np.cumsum(gaps)


def _constraints(tab: Table, col: str) -> BoolArray:
    allowed = np.ones((tab.num_rows, K), dtype=bool)
    specs = tab.strings(col)
    uniq, first = np.unique(specs, return_index=True)
    for j in np.argsort(first):  # in file order, so an error names the first bad line
        spec = str(uniq[j])
        if not spec:
            continue
        rows = np.flatnonzero(specs == spec)
        where = f"{tab.label}: line {int(tab.lines[rows[0]])}: {col}"
        allowed[rows] = parse_constraint(spec, where)[0]
    return allowed


@tracecache.memoised
def csv_trace(
    path: str | Path | None = None,
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    columns: Mapping[str, str | None] | None = None,
    time_unit: str = "s",
    name: str | None = None,
    **options: Any,
) -> Workload:
    """A generic CSV trace (one job per row, with a header).

    Args:
        path: The CSV file (``.gz`` read transparently), absolute or relative to the current
            directory.
        columns: Our field -> the file's column name, for the fields of :data:`CSV_FIELDS`.
            Required: ``job_id`` (may be ``None``: ids ``<file>-<line>`` are generated),
            ``submission_time`` (or ``interarrival``), ``duration``, ``num_gpu``; their defaults
            are ITP's names ``job_id, submission_time, duration, num_gpu``. ``interarrival``
            maps a column of gaps between consecutive arrivals (in file order, the first from
            t = 0), cumulated into arrival times; mapping it replaces ``submission_time``.
            Optional: ``model`` (names in the throughput table, any case; otherwise
            :func:`~hetsched.sim.traces.assign_models`), ``batch_size``, ``cpu_per_gpu`` (cores),
            ``mem_per_gpu`` (GiB), ``queue``, ``gpu_types`` (``|``-separated catalogue types or
            aliases; empty = any). An optional field that ``columns`` does not map is read from
            a column of its own name if the header has one; map it to ``None`` to ignore it.
        time_unit: Unit of numeric times, durations and gaps: ``s``, ``ms``, ``min`` or ``h``. A
            ``submission_time`` column of date-times (``YYYY-MM-DD HH:MM:SS``) is detected from
            its first value.
        name: Workload name (default: the file's stem, so two files get two names).
        **options: The fields of :class:`~hetsched.sim.traces.TraceOptions`.

    Raises:
        TraceError: For a missing path or column (naming the file, the column and the header),
            a bad value (naming the file, the line and the value) or an unknown option.
    """
    if path is None:
        raise TraceError(
            "csv_trace: no trace file given; set the path of the CSV to read, e.g. "
            "workload=csv workload.path=/abs/path/trace.csv"
        )
    o = TraceOptions.build(options)
    p = user_path(path)
    scale = TIME_UNITS.get(str(time_unit))
    if scale is None:
        raise TraceError(f"time_unit={time_unit!r} is not one of {list(TIME_UNITS)}")
    cols = _columns(columns)
    tab = read_table(p, [c for c in cols.values() if c is not None])
    given = set(columns or ())
    for f in _AUTO_FIELDS:  # an optional field's own name in the header is read
        if f not in given and tab.has(f):
            cols[f] = f
    tab = select_rows(tab, o)
    stem = p.name.split(".")[0]
    if cols["job_id"] is None:
        ids = np.char.add(f"{stem}-", tab.lines.astype(str))
    else:
        ids = tab.strings(cols["job_id"])
    jobs = TraceJobs(
        source=p.name,
        lines=tab.lines,
        job_id=ids,
        arrival=_arrivals(tab, cols, scale),
        duration=tab.floats(str(cols["duration"])) * scale,
        gpus=tab.ints(str(cols["num_gpu"])),
    )
    if cols["model"] is not None:
        col = cols["model"]
        model = match_models(tab.strings(col), throughput.models)
        if np.any(model < 0):
            i = int(np.flatnonzero(model < 0)[0])
            raise tab.error(
                i, col, tab.cell(i, col),
                f"is not a model of the throughput table ({list(throughput.models)})",
            )  # fmt: skip
        jobs.model = model
    if cols["batch_size"] is not None:
        jobs.batch_size = tab.ints(cols["batch_size"])
    if cols["cpu_per_gpu"] is not None:
        jobs.cpu = tab.floats(cols["cpu_per_gpu"])
    if cols["mem_per_gpu"] is not None:
        jobs.mem = tab.floats(cols["mem_per_gpu"])
    if cols["queue"] is not None:
        q = tab.strings(cols["queue"])
        jobs.queue = np.where(q == "", "default", q)
    if cols["gpu_types"] is not None:
        jobs.allowed = _constraints(tab, cols["gpu_types"])
    return convert(jobs, o, name=name or stem, throughput=throughput, cluster=cluster, rng=rng)
