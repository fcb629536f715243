"""Workload factories: trace readers and synthetic generators.

Every factory has the signature ``fn(*, throughput, cluster, rng, **own_params) -> Workload``, so
a Hydra preset (``conf/workload/*.yaml``, ``_partial_: true``) fixes ``own_params`` and the
evaluation runner supplies the throughput table, the cluster and a seeded
:class:`numpy.random.Generator`. All randomness comes from ``rng``: the same seed gives the same
workload. Each factory also accepts ``name`` (the workload name used in result tables).

| factory | data | shipped? |
|---|---|---|
| :func:`philly` | Microsoft Philly subset prepared by Pollux (CC-BY-4.0) | yes (``.csv.gz``) |
| :func:`itp` | Microsoft ITP traces (MIT), 7 clusters | yes |
| :func:`csv_trace` | any CSV with arrival (or inter-arrival gap), duration and GPU count | -- |
| :func:`alibaba` | Alibaba PAI v2023 "openb" pods (research use only) | no: read by path |
| :func:`sia_trace` | Sia SOSP'23 (``kind=philly/helios/newtrace``, no licence) and Pollux OSDI'21 (``kind=pollux``, Apache-2.0) workloads | Pollux only |
| :func:`sia_workload` | any file in the Sia/Pollux workload format | -- |
| :func:`gavel_synthetic` | Gavel's job generator (gavel.md section 7) | -- |

``sia_philly``, ``sia_helios``, ``sia_newtrace`` and ``pollux_philly`` are :func:`sia_trace`
with ``kind`` fixed. Shipped files live under ``hetsched/data/traces/`` (see ``SOURCES.md``
there); the others are resolved by :func:`hetsched.sim.paths.shared_data`
(``$HETSCHED_SHARED_DATA`` or ``<repo>/../shared/data``).

The readers share one options object, :class:`TraceOptions` (passed as flat keyword arguments;
a reader's docstring states where its defaults differ), and one conversion step,
:func:`convert`. A new format takes one module: parse the file with :func:`read_table`, fill a
:class:`TraceJobs` and call :func:`convert`.

**From a trace job to a simulated job** (Philly, ITP, CSV, Alibaba; Sia files fix the model and
the work, so steps 4-5 do not apply to them):

1. *Reading and validation.* Files are read with typed columns (:mod:`.csvio`). A duplicated
   header column, a row with the wrong field count, a non-numeric, non-finite, negative or
   zero duration, a GPU count below 1, not an integer or beyond 2**31, a date-time column
   holding a bare number, a duplicated job id, a missing column or an unknown GPU type raise
   :class:`~hetsched.sim.errors.TraceError` naming the file, the line (1-based, the header is
   line 1) and the value. Rows are then sorted by arrival (stable sort); an arrival column that
   is not sorted in the file is reported by ``unsorted`` (``"warn"``: a warning naming the first
   out-of-order line; ``"sort"``: quietly, the default for Philly; ``"error"``).
2. *Explicit filters* (each one an option; every excluded or changed job is counted in a log
   line of the ``hetsched.sim.traces`` logger): ``include`` / ``exclude`` (rows by a column's
   values, e.g. ``exclude={status: [Failed, Killed]}``, applied first); ``zero_gpus``
   (``"error"`` (default) or ``"skip"`` rows with 0 GPUs, i.e. CPU-only jobs);
   ``min_duration_s`` / ``max_duration_s`` with ``duration_policy`` (``"skip"`` or ``"cap"``;
   defaults: no limits); ``absent_types`` (a job whose GPU-type constraint names no type of
   the cluster: ``"error"`` (default), ``"relax"`` = drop the constraint, ``"skip"``);
   ``max_gpus_policy`` (a job requesting more GPUs than the largest pool of one GPU type it may
   use: ``"error"`` (default), ``"cap"`` = request that pool, ``"skip"``). Filters come before
   the window, so ``num_jobs`` is the final count.
3. *Window*: ``start`` (index into the sorted, filtered jobs) and ``num_jobs`` (``None`` = all);
   with ``busiest=True`` the window is the ``num_jobs`` consecutive jobs (at or after ``start``)
   with the shortest arrival span, i.e. the highest arrival rate (first such window on ties).
4. *Model* (traces have none unless a CSV maps a ``model`` column, matched case-insensitively):
   :func:`assign_models` with ``model_scheme`` (``"auto"``, ``"sia_gputime"``,
   ``"gavel_uniform"``), drawn from ``rng``.
5. *Work*: ``work = duration * T[model, ref_type, req_gpus]`` (isolated, packed), so a job takes its
   traced duration on its requested GPUs of ``ref_type`` (default ``"v100"``: the one type both the
   Gavel and the Sia profiles measured) and runs faster or slower elsewhere. If the model cannot
   run on ``req_gpus`` GPUs of ``ref_type`` (throughput 0): ``ref_fallback="nearest"`` (default)
   uses the nearest table count ``c`` that runs (in log2 distance, the smaller on ties) scaled
   linearly, ``T[c] * req/c``; ``ref_fallback="error"`` raises naming the job. Jobs capped by
   ``max_gpus_policy="cap"`` get the work of their capped size.
6. *Sizes*: rigid by default (``min_gpus = max_gpus = req_gpus``); ``elastic=True`` gives
   ``min_gpus = 1`` and ``max_gpus = max(req, min(2 * req, largest usable pool))``, or
   ``max(req, min(max_gpus_cap, cluster GPUs))`` when ``max_gpus_cap`` is set (Sia: 64).
7. *CPU and memory per GPU* (traces other than Alibaba, and CSVs without such columns, have
   none): ``cpu_per_gpu`` / ``mem_per_gpu`` (``None`` = the Alibaba v2023 per-GPU medians, 9.8
   cores and 30 GiB, clipped to the cluster's scarcest node ratio ``min(node cpus / node GPUs)``
   and ``min(node GiB / node GPUs)`` so that a fully packed node can meet every request; pass
   numbers to override). A per-GPU request larger than every node of the GPU types a job may
   use raises naming the job and line.
8. *Arrivals* are shifted so that the first job arrives at t = 0 (``shift=False`` keeps them).
9. :func:`check_fits`: every job's request fits the largest pool of one GPU type it may use, its
   per-GPU CPU and memory fit some node of such a type, and its model runs there.

Queues: Philly jobs get their virtual cluster (VC), Alibaba pods their QoS class, CSV files an
optional ``queue`` column; otherwise one queue ``"default"``. GPU-type constraints: Alibaba's
``gpu_spec`` and an optional CSV ``gpu_types`` column (``|``-separated catalogue names or
aliases); every other job may use every type.
"""

from __future__ import annotations

from hetsched.sim.traces.convert import TraceJobs, check_fits, convert, select_rows
from hetsched.sim.traces.csvio import Table, read_table
from hetsched.sim.traces.csvio import _read_csv_cached as _read_csv_cached
from hetsched.sim.traces.generators import gavel_synthetic
from hetsched.sim.traces.generic import CSV_FIELDS, csv_trace
from hetsched.sim.traces.microsoft import ITP_CLUSTERS, itp, philly
from hetsched.sim.traces.models import (
    GAVEL_GPU_TYPES,
    SIA_INITIAL_BATCH,
    assign_models,
    reference_work,
)
from hetsched.sim.traces.options import DEFAULT_CPU_PER_GPU, DEFAULT_MEM_PER_GPU, TraceOptions
from hetsched.sim.traces.pai import ALIBABA_GPU_MAP, alibaba
from hetsched.sim.traces.sia_format import _SIA_INDEX_RANGE as _SIA_INDEX_RANGE
from hetsched.sim.traces.sia_format import (
    SIA_KINDS,
    pollux_philly,
    sia_helios,
    sia_newtrace,
    sia_philly,
    sia_trace,
    sia_workload,
)

__all__ = [
    "ALIBABA_GPU_MAP",
    "CSV_FIELDS",
    "DEFAULT_CPU_PER_GPU",
    "DEFAULT_MEM_PER_GPU",
    "GAVEL_GPU_TYPES",
    "ITP_CLUSTERS",
    "SIA_INITIAL_BATCH",
    "SIA_KINDS",
    "Table",
    "TraceJobs",
    "TraceOptions",
    "alibaba",
    "assign_models",
    "check_fits",
    "convert",
    "csv_trace",
    "gavel_synthetic",
    "itp",
    "philly",
    "pollux_philly",
    "read_table",
    "reference_work",
    "select_rows",
    "sia_helios",
    "sia_newtrace",
    "sia_philly",
    "sia_trace",
    "sia_workload",
]
