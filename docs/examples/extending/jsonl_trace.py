"""A trace format in one file: JSON lines, one job per line.

Each line holds ``id``, ``submit_s`` (submission time, seconds), ``duration_s`` (run time on its
GPUs) and ``gpus``; e.g. ``{"id": "a", "submit_s": 0, "duration_s": 3600, "gpus": 2}``. Used
with the preset ``conf/workload/jsonl.yaml`` next to it (docs/extending.md)::

    PYTHONPATH=docs/examples/extending hetsched-evaluate \
        'hydra.searchpath=[file://docs/examples/extending/conf]' \
        workload=jsonl workload.path=$PWD/docs/examples/extending/jobs.jsonl
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import TraceError
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.traces import assign_models, reference_work
from hetsched.sim.workload import Workload

FIELDS = ("id", "submit_s", "duration_s", "gpus")


def jsonl_trace(
    path: str,
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    name: str = "jsonl",
    cpu_per_gpu: float = 4.0,
    mem_per_gpu: float = 16.0,
) -> Workload:
    """Read a JSON-lines trace into a :class:`Workload` (the factory a workload preset names).

    Args:
        path: The ``.jsonl`` file.
        throughput: The throughput table (gives each job a model and its work).
        cluster: The cluster (the model mapping depends on its GPU types).
        rng: Seeded generator (model draws).
        name: Workload name in result tables.
        cpu_per_gpu: CPU cores requested per GPU.
        mem_per_gpu: Memory requested per GPU (GiB).

    Raises:
        TraceError: On a missing file, a bad line or field, or an empty trace.
    """
    p = Path(path)
    if not p.is_file():
        raise TraceError(f"trace file {p} not found; pass workload.path=/abs/path.jsonl")
    rows = []
    for n, line in enumerate(p.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            rows.append((str(rec["id"]), *(float(rec[k]) for k in FIELDS[1:])))
        except (ValueError, KeyError, TypeError) as err:
            raise TraceError(f"{p}, line {n}: {err!r}; each line needs {list(FIELDS)}") from None
    if not rows:
        raise TraceError(f"{p}: no jobs")
    ids = np.array([r[0] for r in rows])
    submit, duration, gpus_f = (np.array([r[i] for r in rows]) for i in (1, 2, 3))
    if (duration <= 0).any() or (gpus_f < 1).any() or (gpus_f != np.round(gpus_f)).any():
        raise TraceError(f"{p}: duration_s must be > 0 and gpus an integer >= 1 on every line")
    order = np.argsort(submit, kind="stable")
    ids, submit, duration = ids[order], submit[order], duration[order]
    gpus = gpus_f[order].astype(np.int64)
    model = assign_models(duration, gpus, throughput=throughput, cluster=cluster, rng=rng)
    work = reference_work(duration, model, gpus, throughput=throughput, job_id=ids, source=p.name)
    J = len(ids)
    return Workload(
        name=name,
        job_id=ids,
        arrival=submit - submit[0],
        model=model,
        batch_size=np.zeros(J, dtype=np.int64),
        work=work,
        req_gpus=gpus,
        min_gpus=gpus,
        max_gpus=gpus,
        cpu_per_gpu=np.full(J, cpu_per_gpu),
        mem_per_gpu=np.full(J, mem_per_gpu),
        trace_duration=duration,
    )
