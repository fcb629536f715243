"""Metrics, exactly as ``shared/reference/metrics.md`` defines them.

Times are seconds internally and hours in reports. Per job i: arrival A_i, first start S_i,
completion C_i, JCT_i = C_i - A_i, queueing delay Q_i = S_i - A_i.

* ``avg/p50/p99_jct_h`` -- mean and numpy-default-interpolated percentiles of JCT, hours.
* ``makespan_h`` -- max C_i - min A_i, hours.
* ``gpu_hours`` -- sum over jobs of GPU-time held, restart time included, hours.
* ``avg_queue_h`` -- mean initial queueing delay Q_i, hours.
* ``ftf_rho_mean/max`` -- finish-time fairness, variant A (Gavel's isolated share) with the
  static approximation of metrics.md §2.1: M_i is the time-averaged number of jobs in the system
  during [A_i, C_i]; job i's fair share is x_ij = n_j / (M_i s_i) of each GPU type j (row scaled so
  that sum_j x_ij <= 1), its fair throughput sum_j T_ij x_ij (isolated, at the requested GPU count),
  T_fair = W_i / that throughput, and rho_i = JCT_i / T_fair.
* ``utilization`` -- allocation utilisation: GPU-time held / (N_gpu x makespan window).
* ``restarts`` -- mean restarts per job.
* ``decision_ms_mean`` -- mean wall-clock time of one policy call, milliseconds.

Extra figures (``extended_metrics``): JCT lower bound (each job alone at its best configuration,
metrics.md §4) and mean slowdown against it, max JCT, p99 queueing, unfinished jobs, preemptions,
GPU-hours per type, effective utilisation, FTF p99 and fraction with rho > 1, decision time p99,
``idle_gpu_hours_waiting`` (GPU-hours left idle while a job waited: how far a scheduler is from
work-conserving, see :func:`idle_gpu_hours_waiting`), and under node failures:
``node_failures`` (count), ``failure_restarts`` (mean per job) and ``lost_gpu_hours`` (GPU time
whose work a failure destroyed).
A run with unfinished jobs has undefined JCT figures (NaN) and reports the count.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.engine import SimResult

#: Result columns, in order (a contract: other tools read them by name).
RESULT_COLUMNS: tuple[str, ...] = (
    "scheduler", "workload", "cluster", "seed", "num_jobs",
    "avg_jct_h", "p50_jct_h", "p99_jct_h", "makespan_h", "gpu_hours", "avg_queue_h",
    "ftf_rho_mean", "ftf_rho_max", "utilization", "restarts", "decision_ms_mean",
)  # fmt: skip

H = 3600.0
#: Version of the metric definitions. Benchmark cells hash it, so a result computed under an
#: older definition is recomputed, never read (2: the lower bounds count spread placements).
METRICS_VERSION = 2


def jobs_in_system_integral(
    arrival: NDArray[np.float64], finish: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Cumulative integral of the number of jobs in the system, N(t) = #{A_j <= t < C_j}.

    Returns:
        ``(times, F)`` where F(times[e]) is the integral of N from times[0]; F is piecewise linear
        between the returned points, so ``np.interp`` evaluates it anywhere.
    """
    t = np.concatenate([arrival, finish])
    d = np.concatenate([np.ones_like(arrival), -np.ones_like(finish)])
    order = np.argsort(t, kind="stable")
    t, d = t[order], d[order]
    n_after = np.cumsum(d)  # jobs in system just after each event
    seg = np.diff(t) * n_after[:-1]
    F = np.concatenate([[0.0], np.cumsum(seg)])
    return t, F


def fair_share_time(res: SimResult) -> NDArray[np.float64]:
    """T_fair per job in seconds (FTF variant A, static approximation); NaN if unfinished."""
    wl, tm, cl = res.workload, res.throughput, res.cluster
    A, C = wl.arrival, res.finish_time
    done = np.isfinite(C)
    out = np.full(wl.num_jobs, np.nan)
    if not done.any():
        return out
    t, F = jobs_in_system_integral(A[done], C[done])
    Ad, Cd = A[done], C[done]
    span = np.maximum(Cd - Ad, 1e-9)
    m_bar = np.maximum((np.interp(Cd, t, F) - np.interp(Ad, t, F)) / span, 1.0)
    n_type = cl.gpus_per_type().astype(np.float64)  # (K,)
    s = wl.req_gpus[done].astype(np.float64)
    x = n_type[None, :] / (m_bar[:, None] * s[:, None])
    x = x * (wl.allowed_types[done] & (n_type > 0)[None, :])
    x = x / np.maximum(1.0, x.sum(axis=1, keepdims=True))
    K = n_type.shape[0]
    T = tm.isolated(wl.model[done][:, None], np.arange(K)[None, :], wl.req_gpus[done][:, None])
    thr = (T * x).sum(axis=1)
    fair = np.where(thr > 0, wl.work[done] / np.where(thr > 0, thr, 1.0), np.nan)
    out[done] = fair
    return out


def best_solo_time(res: SimResult) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Lower bounds per job: best solo time T* (s) and minimum GPU-time G* (GPU-s).

    Each job alone on the cluster at its best configuration: any allowed GPU type present, any
    GPU count in [min_gpus, max_gpus] up to the GPUs of that type (powers of two plus the
    endpoints), packed or spread over nodes, whichever the throughput table rates faster (some
    measured tables rate a spread placement above a packed one), with its best CPU factor; no
    queueing, restarts or interference.
    """
    wl, tm, cl = res.workload, res.throughput, res.cluster
    n_type = cl.gpus_per_type()
    K = n_type.shape[0]
    levels = np.unique(np.concatenate([tm.count_levels, [1]]))
    cand = np.concatenate(
        [
            np.broadcast_to(levels, (wl.num_jobs, levels.size)),
            wl.min_gpus[:, None],
            wl.max_gpus[:, None],
        ],
        axis=1,
    )  # (J, C)
    ok_n = (cand >= wl.min_gpus[:, None]) & (cand <= wl.max_gpus[:, None])
    args = (wl.model[:, None, None], np.arange(K)[None, :, None], cand[:, None, :])
    thr = np.maximum(tm.isolated(*args, False), tm.isolated(*args, True))  # (J, K, C)
    ok = (
        ok_n[:, None, :]
        & (cand[:, None, :] <= n_type[None, :, None])
        & wl.allowed_types[:, :, None]
        & (thr > 0)
    )
    thr = thr * tm.best_phi(wl.model)[:, None, None]
    with np.errstate(divide="ignore"):
        time = np.where(ok, wl.work[:, None, None] / np.where(ok, thr, 1.0), np.inf)
    gtime = time * cand[:, None, :]
    return time.reshape(wl.num_jobs, -1).min(axis=1), gtime.reshape(wl.num_jobs, -1).min(axis=1)


def _gpu_window(res: SimResult) -> float:
    """N_gpu x (last completion, or end of run, - first arrival), in GPU-seconds."""
    done = np.isfinite(res.finish_time)
    end = float(np.nanmax(res.finish_time)) if done.all() else res.end_time
    return max(res.cluster.num_gpus * (end - float(res.workload.arrival.min())), 1e-9)


def _pct(x: NDArray[np.float64], q: float) -> float:
    return float(np.percentile(x, q)) if x.size else float("nan")


def compute_metrics(
    res: SimResult, *, scheduler: str, workload: str, cluster: str, seed: int
) -> dict[str, Any]:
    """The headline result row, keys in :data:`RESULT_COLUMNS` order."""
    wl = res.workload
    done = np.isfinite(res.finish_time)
    all_done = bool(done.all())
    jct = res.finish_time - wl.arrival
    queue = res.start_time - wl.arrival
    nan = float("nan")
    makespan = float(np.nanmax(res.finish_time) - wl.arrival.min()) if done.any() else nan
    gpu_s = float(res.gpu_s_by_type.sum())
    util = gpu_s / _gpu_window(res)
    rho = jct / fair_share_time(res)
    dec = np.asarray(res.decision_s, dtype=np.float64)
    row: dict[str, Any] = {
        "scheduler": scheduler,
        "workload": workload,
        "cluster": cluster,
        "seed": int(seed),
        "num_jobs": int(wl.num_jobs),
        "avg_jct_h": float(jct.mean() / H) if all_done else nan,
        "p50_jct_h": _pct(jct, 50) / H if all_done else nan,
        "p99_jct_h": _pct(jct, 99) / H if all_done else nan,
        "makespan_h": makespan / H if all_done else nan,
        "gpu_hours": gpu_s / H,
        "avg_queue_h": float(np.nanmean(queue) / H) if np.isfinite(queue).any() else nan,
        "ftf_rho_mean": float(np.nanmean(rho)) if all_done else nan,
        "ftf_rho_max": float(np.nanmax(rho)) if all_done else nan,
        "utilization": util,
        "restarts": float(res.restarts.mean()),
        "decision_ms_mean": float(dec.mean() * 1e3) if dec.size else nan,
    }
    assert tuple(row) == RESULT_COLUMNS
    return row


def idle_gpu_hours_waiting(res: SimResult) -> float:
    """GPU-hours left idle while at least one admitted job waited, from the run's timeline.

    The sum over the engine's steps with a waiting job of (cluster GPUs - busy GPUs) x the step's
    length. A work-conserving scheduler scores 0 when every waiting job fits the idle GPUs; in
    general it is an upper bound on the GPU time that starting waiting jobs could have added,
    since a waiting job may not fit them (a gang larger than any node's free GPUs, too few free
    cores or memory). GPUs of failed nodes count as idle.

    Returns:
        Hours x GPUs; NaN when the run kept no timeline (``SimConfig.record_timeline=False``).
    """
    tl = res.timeline
    if len(tl.get("busy_gpus", ())) == 0:  # not recorded (every run takes at least one step)
        return float("nan")
    waiting = np.asarray(tl["pending"]) > 0
    idle = res.cluster.num_gpus - np.asarray(tl["busy_gpus"])
    return float((idle * np.asarray(tl["dt"]))[waiting].sum() / H)


def extended_metrics(res: SimResult) -> dict[str, float]:
    """Additional figures beyond the headline row (see the module docstring)."""
    wl = res.workload
    done = np.isfinite(res.finish_time)
    jct = res.finish_time - wl.arrival
    t_star, g_star = best_solo_time(res)
    rho = jct / fair_share_time(res)
    queue = res.start_time - wl.arrival
    dec = np.asarray(res.decision_s, dtype=np.float64)
    out: dict[str, float] = {
        "unfinished_jobs": float((~done).sum()),
        "max_jct_h": float(np.nanmax(jct) / H) if done.any() else float("nan"),
        "lb_avg_jct_h": float(t_star.mean() / H),
        "lb_p99_jct_h": float(np.percentile(t_star, 99) / H),
        "lb_gpu_hours": float(g_star.sum() / H),
        "slowdown_mean": float(np.nanmean(jct / t_star)) if done.any() else float("nan"),
        "p99_queue_h": float(np.nanpercentile(queue, 99) / H)
        if np.isfinite(queue).any()
        else float("nan"),
        "ftf_rho_p99": float(np.nanpercentile(rho, 99)) if done.any() else float("nan"),
        "ftf_unfair_frac": float(np.nanmean(rho > 1.0)) if done.any() else float("nan"),
        "preemptions": float(res.preemptions.mean()),
        "effective_utilization": float(res.effective_gpu_s.sum() / _gpu_window(res)),
        "decision_ms_p99": float(np.percentile(dec, 99) * 1e3) if dec.size else float("nan"),
        "decision_ms_max": float(dec.max() * 1e3) if dec.size else float("nan"),
        "node_failures": float(res.node_failures),
        "failure_restarts": float(res.failure_restarts.mean())
        if res.failure_restarts.size
        else 0.0,
        "lost_gpu_hours": float(res.lost_gpu_s.sum() / H),
        "idle_gpu_hours_waiting": idle_gpu_hours_waiting(res),
    }
    for k in np.flatnonzero(res.gpu_s_by_type.sum(axis=0) > 0):
        out[f"gpu_hours_{GPU_TYPE_NAMES[k]}"] = float(res.gpu_s_by_type[:, k].sum() / H)
    return out


def makespan_job(res: SimResult) -> dict[str, Any]:
    """The job that finished last, which sets the makespan: when it came, how long it waited,
    and how it ran against its best solo time.

    Returns:
        ``index`` (into the workload) and ``job_id``; ``req_gpus``; ``arrival_h`` (after the
        first arrival), ``wait_h`` (first start minus arrival), ``run_h`` (first start to
        finish) and ``best_solo_h`` (:func:`best_solo_time`), all in hours; ``gpu_type`` (the
        type of most of its GPU-seconds); ``gpus_held`` (its GPU-seconds over the seconds it
        held GPUs); ``restarts``. An empty dict when no job finished.
    """
    wl = res.workload
    done = np.isfinite(res.finish_time)
    if not done.any():
        return {}
    j = int(np.argmax(np.where(done, res.finish_time, -np.inf)))
    t_star, _ = best_solo_time(res)
    gpu_s = res.gpu_s_by_type[j]
    return {
        "index": j,
        "job_id": str(wl.job_id[j]),
        "req_gpus": int(wl.req_gpus[j]),
        "arrival_h": float((wl.arrival[j] - wl.arrival.min()) / H),
        "wait_h": float((res.start_time[j] - wl.arrival[j]) / H),
        "run_h": float((res.finish_time[j] - res.start_time[j]) / H),
        "best_solo_h": float(t_star[j] / H),
        "gpu_type": GPU_TYPE_NAMES[int(np.argmax(gpu_s))],
        "gpus_held": float(gpu_s.sum() / res.run_s[j]) if res.run_s[j] > 0 else float("nan"),
        "restarts": int(res.restarts[j]),
    }
