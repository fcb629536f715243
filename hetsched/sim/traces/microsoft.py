"""Microsoft's traces: Philly (the subset prepared by Pollux) and ITP, both shipped."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hetsched.sim import tracecache
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import TraceError
from hetsched.sim.paths import shared_data, shipped_data
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.traces.convert import TraceJobs, convert, logger, select_rows, validate_jobs
from hetsched.sim.traces.csvio import read_table
from hetsched.sim.traces.generic import csv_trace, match_names
from hetsched.sim.traces.options import TraceOptions
from hetsched.sim.workload import Workload

__all__ = ["ITP_CLUSTERS", "itp", "philly"]

#: ITP clusters shipped under ``hetsched/data/traces/itp/``.
ITP_CLUSTERS = ("cluster01", "cluster02", "cluster03", "cluster05", "cluster06", "cluster08",
                "cluster10")  # fmt: skip


@tracecache.memoised
def philly(
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    path: str | Path | None = None,
    name: str | None = None,
    vc: str | Sequence[str] | None = None,
    **options: Any,
) -> Workload:
    """The Philly subset prepared by Pollux (82,247 jobs, Sep-Dec 2017; data.md section 2).

    Columns ``timestamp`` (date-time), ``duration`` (s), ``num_gpus``, ``gpu_time``, ``cluster``
    (the virtual cluster, used as the job's queue). Rows are not sorted in the file; they are
    sorted (stably) by timestamp (``unsorted`` defaults to ``"sort"`` here). Job ids are
    ``philly-<line>``.

    The default is the **busiest window** (``num_jobs=300, busiest=True``): the 300 consecutive
    jobs with the shortest arrival span (4.3 minutes, 179 GPU-hours, 1-4 GPUs per job; about
    three hours of work for 64 GPUs), which simulates in seconds. ``busiest=False`` with
    ``start``/``num_jobs`` selects other windows; ``num_jobs=None`` with ``busiest=False``
    replays the whole trace (jobs of up to 128 GPUs: pass ``max_gpus_policy`` if the cluster is
    smaller).

    Args:
        path: Another copy of the file (absolute, or relative to the shared data directory);
            ``None`` = the shipped ``hetsched/data/traces/philly/philly_pollux.csv.gz``.
        name: Workload name (default ``"philly"``).
        vc: Keep only these virtual clusters (a hash or a list); the count is logged.
        **options: The fields of :class:`~hetsched.sim.traces.TraceOptions`.
    """
    o = TraceOptions.build(options, num_jobs=300, busiest=True, unsorted="sort")
    p = shipped_data("traces/philly/philly_pollux.csv") if path is None else shared_data(path)
    tab = select_rows(read_table(p, ["timestamp", "duration", "num_gpus", "cluster"]), o)
    ts = tab.datetimes("timestamp")
    vcs = tab.strings("cluster")
    jobs = TraceJobs(
        source=p.name,
        lines=tab.lines,
        job_id=np.char.add("philly-", tab.lines.astype(str)),
        arrival=ts - ts.min(),
        duration=tab.floats("duration"),
        gpus=tab.ints("num_gpus"),
        queue=vcs,
    )
    if vc is not None:
        keep = match_names(vc, sorted(set(vcs.tolist())), f"{p.name}: vc")
        mask = np.isin(vcs, keep)
        validate_jobs(jobs)  # a bad row outside the kept VCs is still reported
        n_out = int((~mask).sum())
        logger.info("%s: %d of %d jobs outside VC(s) %s skipped", p.name, n_out, len(jobs), keep)
        jobs = jobs.take(mask)
    return convert(jobs, o, name=name or "philly", throughput=throughput, cluster=cluster, rng=rng)


def itp(
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    itp_cluster: str = "cluster10",
    path: str | Path | None = None,
    name: str | None = None,
    **options: Any,
) -> Workload:
    """A Microsoft ITP cluster trace (MIT; data.md section 1), shipped.

    Args:
        itp_cluster: Which ITP cluster (``cluster01`` ... ``cluster10``, see
            :data:`ITP_CLUSTERS`; named ``itp_cluster`` because ``cluster`` is the simulated
            cluster). Default ``cluster10``: 260 jobs over 33 days, up to 16 GPUs.
        path: Another file in the ITP format (absolute, or relative to the shared data
            directory); overrides ``itp_cluster``.
        name: Workload name (default ``itp_<cluster>``).
        **options: The fields of :class:`~hetsched.sim.traces.TraceOptions`.
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
        p, throughput=throughput, cluster=cluster, rng=rng, name=name or f"itp_{key}", **options
    )
