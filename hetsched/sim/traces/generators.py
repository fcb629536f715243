"""Gavel's synthetic workload generator (gavel.md section 7)."""

from __future__ import annotations

import math

import numpy as np

from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import TraceError
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.traces.convert import check_fits, default_resources
from hetsched.sim.traces.models import batch_sizes, gavel_types, reference_work
from hetsched.sim.traces.options import choice
from hetsched.sim.workload import Workload

__all__ = ["gavel_synthetic"]


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
    allm, dist = gavel_types(throughput)
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
        mg = choice(max_gpus_policy, ("error", "cap"), "max_gpus_policy")
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
    c_def, m_def = default_resources(cluster, cpu_per_gpu, mem_per_gpu)
    wl = Workload(
        name=name or "gavel_synthetic",
        job_id=np.char.add("gavel-", np.arange(J).astype(str)),
        arrival=arrival,
        model=model,
        batch_size=batch_sizes(throughput, model),
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
