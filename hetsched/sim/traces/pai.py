"""Alibaba PAI v2023 ("openb") pods as jobs (research use only: never shipped, read by path)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.sim import tracecache
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import TraceError
from hetsched.sim.paths import shared_data
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.traces.convert import (
    TraceJobs,
    convert,
    default_resources,
    logger,
    select_rows,
)
from hetsched.sim.traces.csvio import read_table
from hetsched.sim.traces.generic import parse_constraint
from hetsched.sim.traces.options import TraceOptions, choice
from hetsched.sim.workload import Workload

__all__ = ["ALIBABA_GPU_MAP", "alibaba"]

K = len(GPU_TYPE_NAMES)
BoolArray = NDArray[np.bool_]

#: Alibaba GPU models -> catalogue types. ``None``: an undisclosed (G2, G3) or uncatalogued (A10)
#: model; a constraint naming one is handled by ``alibaba(unmapped=...)``. Names not listed here
#: go through :func:`hetsched.sim.catalog.canonical_gpu_type` (T4, P100, V100M16, V100M32 ...).
ALIBABA_GPU_MAP: dict[str, str | None] = {"G2": None, "G3": None, "A10": None}


def _log_dropped(source: str, n: int, total: int, why: str) -> None:
    if n:
        logger.info("%s: %d of %d jobs %s", source, n, total, why)


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
    **options: Any,
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
        **options: The fields of :class:`~hetsched.sim.traces.TraceOptions` (``absent_types``: a
            constraint naming only types absent from the cluster, e.g. P100 pods on the Sia
            cluster; ``include``/``exclude`` filter on any column, e.g.
            ``exclude={pod_phase: [Failed]}``).
    """
    o = TraceOptions.build(options)
    p = shared_data(path)
    tab = read_table(
        p,
        ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "qos", "creation_time",
         "deletion_time", "scheduled_time"] + (["gpu_spec"] if gpu_spec else []),
    )  # fmt: skip
    tab = select_rows(tab, o)
    fractional_gpu = choice(fractional_gpu, ("whole", "skip"), "fractional_gpu")
    unmapped = choice(unmapped, ("relax", "error", "skip"), "unmapped")
    src = p.name
    n_all = tab.num_rows
    gpus = tab.ints("num_gpu")
    cpu_milli = tab.floats("cpu_milli")
    mem_mib = tab.floats("memory_mib")
    gpu_milli = tab.floats("gpu_milli")
    created = tab.floats("creation_time", allow_empty=True)
    deleted = tab.floats("deletion_time", allow_empty=True)
    scheduled = tab.strings("scheduled_time") != ""
    for col, arr in (("num_gpu", gpus), ("cpu_milli", cpu_milli), ("memory_mib", mem_mib),
                     ("gpu_milli", gpu_milli)):  # fmt: skip
        if np.any(arr < 0):
            i = int(np.flatnonzero(arr < 0)[0])
            raise tab.error(i, col, tab.cell(i, col), "must be >= 0")
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
        specs = tab.strings("gpu_spec")
        relaxed = 0
        for r in np.flatnonzero(keep):
            i = int(r)
            s = str(specs[i])
            if not s:
                continue
            if s not in cache:
                cache[s] = parse_constraint(s, f"{src}: line {int(tab.lines[i])}: gpu_spec", gmap)
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
    c_def, m_def = default_resources(cluster, None, None)
    zc, zm = keep & (cpu <= 0), keep & (mem <= 0)
    if zc.any() or zm.any():
        logger.info(
            "%s: %d pods with a zero CPU and %d with a zero memory request given the defaults "
            "(%.3g cores, %.3g GiB per GPU)", src, int(zc.sum()), int(zm.sum()), c_def, m_def,
        )  # fmt: skip
    cpu = np.where(cpu > 0, cpu, c_def)
    mem = np.where(mem > 0, mem, m_def)
    logger.info("%s: %d of %d pods kept", src, int(keep.sum()), n_all)
    jobs = TraceJobs(
        source=src,
        lines=tab.lines,
        job_id=tab.strings("name"),
        arrival=np.where(np.isfinite(created), created, 0.0),
        duration=dur,
        gpus=gpus,
        cpu=cpu,
        mem=mem,
        queue=np.where(tab.strings("qos") == "", "default", tab.strings("qos")),
        allowed=allowed,
    ).take(keep)
    if len(jobs) == 0:
        raise TraceError(f"{src}: no pod left after the exclusions")
    return convert(jobs, o, name=name or "alibaba", throughput=throughput, cluster=cluster, rng=rng)
