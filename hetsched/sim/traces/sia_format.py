"""Workload files in the Sia/Pollux format ``name,time,application,num_replicas,batch_size``."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from hetsched.sim import tracecache
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import TraceError
from hetsched.sim.paths import shared_data, shipped_data
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.traces.convert import TraceJobs, convert, select_rows
from hetsched.sim.traces.csvio import read_table, user_path
from hetsched.sim.traces.models import match_models
from hetsched.sim.traces.options import TraceOptions, choice
from hetsched.sim.workload import Workload

__all__ = [
    "SIA_KINDS",
    "pollux_philly",
    "sia_helios",
    "sia_newtrace",
    "sia_philly",
    "sia_trace",
    "sia_workload",
]

#: The Sia/Pollux workload sets: kind -> (directory, number of files, shipped?, name prefix).
SIA_KINDS: dict[str, tuple[str, int, bool, str]] = {
    "philly": ("workloads/sia/philly", 8, False, "sia_philly"),
    "helios": ("workloads/sia/saturn", 10, False, "sia_helios"),
    "newtrace": ("workloads/sia/newtrace", 10, False, "sia_newtrace"),
    "pollux": ("traces/pollux", 8, True, "pollux_philly"),
}

#: Number of files per Sia directory name (``philly`` also counts Pollux's eight files).
_SIA_INDEX_RANGE = {Path(d).name: n for d, n, shipped, _ in SIA_KINDS.values() if not shipped}

#: This format's defaults where they differ from :class:`TraceOptions`: Sia and Pollux rescale
#: jobs (elastic up to 64 GPUs) and the files' times are kept as they are.
_SIA_DEFAULTS: dict[str, Any] = {"elastic": True, "max_gpus_cap": 64, "shift": False}


@tracecache.memoised_fixed
def sia_workload(
    path: str | Path,
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    name: str | None = None,
    relative_to: str = "cwd",
    **options: Any,
) -> Workload:
    """A workload file in the Sia/Pollux format ``name,time,application,num_replicas,batch_size``.

    * job id = ``name``; arrival = ``time`` (seconds from the workload start, kept as is:
      ``shift`` defaults to False);
    * model = ``application`` (any case), which must be a Sia app of the throughput table
      (family ``sia``);
    * work = ``throughput.default_work[model]``: Sia apps complete after ``max_epochs`` epochs,
      whatever the trace says (the files have no duration);
    * ``req_gpus = num_replicas``, ``batch_size`` from the file;
    * ``elastic=True`` (default; Sia and Pollux rescale jobs): ``min_gpus = 1`` and ``max_gpus =
      max(req, min(max_gpus_cap, GPUs of the cluster))`` with ``max_gpus_cap=64``. Sia caps
      ``max_replicas`` at 64 and at ``max_batch // min_local_bsz``; the table keeps no batch
      limits, so the 64 cap and the cluster size are used. ``elastic=False``: rigid.

    ``rng`` is unused (the files fix everything); it is accepted for the factory signature.

    Args:
        path: The file; resolved from the current directory if ``relative_to="cwd"``, from the
            shared data directory if ``"shared"``, or from the shipped data if ``"shipped"``.
        name: Workload name (default: the file's stem).
        **options: The fields of :class:`~hetsched.sim.traces.TraceOptions` (those about
            durations and models do not apply: the files fix the model and the work).
    """
    o = TraceOptions.build(options, **_SIA_DEFAULTS)
    where = choice(relative_to, ("cwd", "shared", "shipped"), "relative_to")
    if where == "shared":
        p = shared_data(path)
    elif where == "shipped":
        p = shipped_data(str(path))
    else:
        p = user_path(path)
    tab = read_table(p, ["name", "time", "application", "num_replicas", "batch_size"])
    tab = select_rows(tab, o)
    sia = {i for i, f in enumerate(throughput.family) if f == "sia"}
    model = match_models(tab.strings("application"), throughput.models, sia)
    bad = model < 0
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise tab.error(
            i, "application", tab.cell(i, "application"),
            f"is not a Sia app of the throughput table ({sorted(throughput.models[m] for m in sia)})",
        )  # fmt: skip
    work = throughput.default_work[model]
    bad = ~np.isfinite(work) | (work <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise tab.error(
            i, "application", tab.cell(i, "application"),
            "has no default_work in the throughput table",
        )  # fmt: skip
    time_s = tab.floats("time")
    if np.any(time_s < 0):
        i = int(np.flatnonzero(time_s < 0)[0])
        raise tab.error(i, "time", tab.cell(i, "time"), "must be >= 0")
    jobs = TraceJobs(
        source=p.name,
        lines=tab.lines,
        job_id=tab.strings("name"),
        arrival=time_s,
        duration=np.full(tab.num_rows, np.nan),
        gpus=tab.ints("num_replicas"),
        model=model,
        batch_size=tab.ints("batch_size"),
        work=np.asarray(work, dtype=np.float64),
    )
    stem = p.name.split(".")[0]
    return convert(jobs, o, name=name or stem, throughput=throughput, cluster=cluster, rng=rng)


def sia_trace(
    kind: str = "philly",
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    index: int = 1,
    path: str | Path | None = None,
    name: str | None = None,
    **options: Any,
) -> Workload:
    """One file of the Sia/Pollux workload sets (see :func:`sia_workload` for the conversion).

    * ``philly``: Sia's Philly files ``workloads/sia/philly/workload-<i>.csv`` (1..8; 160 jobs,
      4-16 GPUs), named ``sia_philly_<i>``;
    * ``helios``: Sia's Helios files ``workloads/sia/saturn/workload-<i>.csv`` (1..10; 160 jobs
      over about 8 h), named ``sia_helios_<i>``;
    * ``newtrace``: Sia's ``workloads/sia/newtrace/workload-<i>.csv`` (1..10; 960 jobs over
      48 h), named ``sia_newtrace_<i>``;
    * ``pollux``: Pollux OSDI'21 ``traces/pollux/workload-<i>.csv`` (1..8; 160 jobs over about
      8 h, up to 48 replicas; shipped, Apache-2.0), named ``pollux_philly_<i>``.

    Files that are not shipped (the Sia artifact has no licence) are read from the shared data
    directory (:func:`hetsched.sim.paths.shared_data`).

    Args:
        kind: Which set (list above).
        index: Which file of the set.
        path: Another file in this format (absolute, or relative to the shared data
            directory); overrides ``index``.
        name: Workload name (default in the list above).
        **options: The fields of :class:`~hetsched.sim.traces.TraceOptions`.
    """
    kind = choice(kind, tuple(SIA_KINDS), "kind")
    folder, n, shipped, label = SIA_KINDS[kind]
    try:
        i = int(index)
    except (TypeError, ValueError):
        raise TraceError(f"index={index!r} must be an integer 1..{n}") from None
    if not 1 <= i <= n:
        raise TraceError(
            f"index={index!r}: the {Path(folder).name} workloads are workload-1 .. workload-{n}"
        )
    rel = f"{folder}/workload-{i}.csv"
    if path is not None:
        p = shared_data(path)
    else:
        p = shipped_data(rel) if shipped else shared_data(rel)
    return sia_workload(
        p, throughput=throughput, cluster=cluster, rng=rng, name=name or f"{label}_{i}", **options
    )


#: ``sia_trace`` with ``kind`` fixed, for code that names the sets as functions.
sia_philly = functools.partial(sia_trace, "philly")
sia_helios = functools.partial(sia_trace, "helios")
sia_newtrace = functools.partial(sia_trace, "newtrace")
pollux_philly = functools.partial(sia_trace, "pollux")
