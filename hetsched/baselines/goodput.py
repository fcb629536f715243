"""The policy-side goodput estimator used by Sia and the Pollux-like baseline.

The simulator knows every job's true throughput (:class:`~hetsched.sim.throughput.ThroughputModel`);
Sia does not. It *profiles* each new job briefly and then *learns* from what the job does. This
module models that knowledge, so that the policies never read the ground truth for free.

What the estimator knows, per job ``j`` and GPU type ``k`` present in the cluster:

1. **Profile (paid for).** On arrival each job is profiled on its minimum GPU count
   ``n0 = min_gpus`` (1 GPU for every job of Sia's workloads) on every GPU type present that it
   may use: ``xput_k(n0)`` is read from ``ThroughputModel.isolated`` at that count. Sia's paper
   puts this at under 20 GPU-seconds per type (about 0.1 GPU-hour per job);
   :attr:`GoodputEstimator.profiling_gpu_s` adds it up (it is reported, not charged to the
   simulated jobs: the engine has no notion of profiling runs).
2. **Observations.** Each round, the policy reports the progress rate it saw for every job that
   ran the whole previous round after any checkpoint-restore (``SimState.last_rate``, work units/s)
   together with the job's GPU type and count. A job stopped mid-round by a node failure is not
   reported (its sample would be partial). Under periodic checkpointing the observed rate
   includes the checkpoint pause (it is the job's real progress rate). Observations are kept per (job, type, count) as an
   exponential moving average of the log rate (``obs_weight`` = weight of the newest value;
   1.0 keeps the latest only). An observation at ``n0`` replaces the profile the same way.
3. **Scaling model.** Known points (profile plus observations) of a (job, type) row are joined by
   piecewise-linear interpolation in log-log space (GPU count vs rate), so the estimate at an
   observed count *is* the observation. Above the largest known count the row is extrapolated with
   a power law ``rate(n) = rate(n_hi) * (n / n_hi) ** s``, where ``s = 1 + b`` and ``b`` is the
   least-squares slope (through the profile point) of log per-GPU efficiency
   ``rate(n) / (n / n0 * rate(n0))`` against ``log(n / n0)``, clipped to ``0 <= s <= 1``. Before any
   multi-GPU observation ``s = 1``: perfect linear scaling, i.e. Sia's "assume 2x for the first
   doubling" (with the doubling cap, a job can only ask for ``2 * n0`` GPUs before it has been
   observed at more than ``n0``).
4. **Cross-type projection.** A type ``B`` on which the job has not yet run multi-GPU, while it
   has on some type ``A`` (the one with the largest observed count), is estimated as
   ``xput_B(n) = xput_B(n0) / xput_A(n0) * xput_A(n)`` (Sia §3.2). The projection is dropped for
   ``B`` as soon as the job has been observed multi-GPU on ``B``.
5. **Doubling cap.** :meth:`GoodputEstimator.max_count` is
   ``max(2 * largest count observed on any type, min_gpus)`` (Sia's ``share_max_replicas``), so a
   job at most doubles beyond the largest allocation it has been measured at.

Batch size is implicit: the shipped throughput table stores, for Sia's applications, the Pollux
goodput (throughput x statistical efficiency) at the goodput-maximising batch size for each
(type, GPU count); observed rates are therefore already "goodput at the tuned batch size", and
the estimator never models the batch dimension (Sia's per-round batch-size tuning is folded into
the table).

**Type-agnostic mode** (the Pollux-like baseline, ``type_aware=False``): one row per job instead
of one per type. The profile is the mean over the present, allowed types of the profiled rate,
observations on any type update the same row, and there is no cross-type projection; the estimate
for a count is the same on every type.

All lookups are vectorised over jobs, types and counts (arrays of shape (A, R, C)).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import HetschedError
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

#: Sia's restart-penalty estimates S_i in seconds, by application name (sia.md §5.1).
SIA_RESTART_PENALTY_S: dict[str, float] = {
    "deepspeech2": 25.0,
    "imagenet": 250.0,
    "cifar10": 30.0,
    "bert": 120.0,
    "yolov3": 45.0,
}
#: Restart penalty for applications not in :data:`SIA_RESTART_PENALTY_S`.
DEFAULT_RESTART_PENALTY_S = 30.0
#: Sia's profiling cost per job and GPU type in GPU-seconds (paper: "under 20 GPU-seconds").
PROFILE_GPU_S_PER_TYPE = 20.0


class GoodputEstimator:
    """Per (job, GPU type) goodput estimates learnt from profiles and observed rates.

    Args:
        throughput: The ground-truth model; only read for the profiling step (rate at
            ``min_gpus`` on each type) and for whether a configuration can run at all.
        cluster: The cluster (which GPU types are present).
        workload: The jobs.
        type_aware: One row per GPU type (Sia) or one shared row per job (Pollux-like).
        obs_weight: Weight of the newest observation in the log-rate moving average, in (0, 1].
        max_count: Largest GPU count ever estimated (counts above it are not tracked).
        profile_gpu_s_per_type: Profiling cost per job and type in GPU-seconds (reported only).

    Raises:
        HetschedError: If ``obs_weight`` or ``max_count`` is out of range.
    """

    def __init__(
        self,
        throughput: ThroughputModel,
        cluster: Cluster,
        workload: Workload,
        *,
        type_aware: bool = True,
        obs_weight: float = 0.5,
        max_count: int = 64,
        profile_gpu_s_per_type: float = PROFILE_GPU_S_PER_TYPE,
    ) -> None:
        if not 0.0 < obs_weight <= 1.0:
            raise HetschedError(f"obs_weight={obs_weight} must be in (0, 1]; 1.0 keeps the latest")
        if max_count < 1:
            raise HetschedError(f"max_count={max_count} must be >= 1")
        self.tm = throughput
        self.type_aware = type_aware
        self.obs_weight = float(obs_weight)
        self.max_count = int(max_count)
        self.types: IntArray = cluster.types_present.astype(np.int64)  # (Kp,) catalogue indices
        K = len(throughput.gpu_types)
        self.type_pos: IntArray = np.full(K, -1, dtype=np.int64)
        self.type_pos[self.types] = np.arange(self.types.size)
        J = workload.num_jobs
        self.n0: IntArray = np.minimum(workload.min_gpus.astype(np.int64), self.max_count)
        # Profiling: rate at min_gpus on each present, allowed type (0 = cannot run there).
        prof = throughput.isolated(
            workload.model[:, None], self.types[None, :], self.n0[:, None], False
        )
        prof = np.where(workload.allowed_types[:, self.types], prof, 0.0)
        self.profiled: BoolArray = prof > 0  # (J, Kp)
        self.profiling_gpu_s = float(
            (self.profiled.sum(axis=1) * self.n0).sum() * profile_gpu_s_per_type
        )
        if type_aware:
            prof_rows = prof
        else:
            cnt = self.profiled.sum(axis=1, keepdims=True)
            prof_rows = prof.sum(axis=1, keepdims=True) / np.maximum(cnt, 1)
        R = prof_rows.shape[1]
        self.rows = R
        # Known log rates per (job, row, count - 1); NaN = unknown.
        self.log_rate: FloatArray = np.full((J, R, self.max_count), np.nan)
        jj, rr = np.nonzero(prof_rows > 0)
        self.log_rate[jj, rr, self.n0[jj] - 1] = np.log(prof_rows[jj, rr])
        self.observed: BoolArray = np.zeros((J, R, self.max_count), dtype=bool)
        self.max_seen: IntArray = self.n0.copy()
        self._log_n = np.log(np.arange(1, self.max_count + 1, dtype=np.float64))

    # ------------------------------------------------------------------ updates
    def observe(
        self,
        jobs: IntArray,
        gpu_type: IntArray,
        count: IntArray,
        rate: FloatArray,
    ) -> None:
        """Record observed progress rates.

        Args:
            jobs: Job indices, shape (B,), unique.
            gpu_type: Catalogue GPU type each job ran on, shape (B,).
            count: GPUs each job held, shape (B,).
            rate: Observed rate in work units/s, shape (B,); non-positive entries are ignored.
        """
        jobs = np.asarray(jobs, dtype=np.int64)
        gpu_type = np.asarray(gpu_type, dtype=np.int64)
        count = np.asarray(count, dtype=np.int64)
        rate = np.asarray(rate, dtype=np.float64)
        pos = self.type_pos[gpu_type] if self.type_aware else np.zeros_like(gpu_type)
        ok = (rate > 0) & (count >= 1) & (count <= self.max_count) & (pos >= 0)
        ok &= count >= self.n0[jobs]
        if not ok.any():
            return
        j, r, c, lr = jobs[ok], pos[ok], count[ok] - 1, np.log(rate[ok])
        old = self.log_rate[j, r, c]
        w = self.obs_weight
        self.log_rate[j, r, c] = np.where(np.isnan(old), lr, (1.0 - w) * old + w * lr)
        self.observed[j, r, c] = True
        self.max_seen[j] = np.maximum(self.max_seen[j], count[ok])

    # ------------------------------------------------------------------ queries
    def max_count_allowed(self, jobs: IntArray) -> IntArray:
        """Sia's doubling cap per job: ``max(2 * largest observed count, min_gpus)``, shape (A,)."""
        return np.maximum(2 * self.max_seen[jobs], self.n0[jobs])

    def _own_estimates(self, L: FloatArray, n0: IntArray) -> FloatArray:
        """Interpolate / extrapolate each row's known points; returns log rates (NaN unknown).

        Args:
            L: Known log rates, shape (A, R, C) (NaN unknown).
            n0: Anchor (profiled) count per job, shape (A,).
        """
        A, R, C = L.shape
        known = ~np.isnan(L)
        idx = np.arange(C)
        lo = np.maximum.accumulate(np.where(known, idx, -1), axis=-1)
        hi = np.minimum.accumulate(np.where(known, idx, C)[..., ::-1], axis=-1)[..., ::-1]
        x = self._log_n[:C]
        lo_c = np.maximum(lo, 0)
        hi_c = np.minimum(hi, C - 1)
        L0 = np.where(known, L, 0.0)
        y_lo = np.take_along_axis(L0, lo_c, axis=-1)
        y_hi = np.take_along_axis(L0, hi_c, axis=-1)
        x_lo, x_hi = x[lo_c], x[hi_c]
        # Power-law slope for extrapolation: LS fit of log efficiency through the anchor.
        a0 = (n0 - 1)[:, None, None]
        y0 = np.take_along_axis(L0, np.broadcast_to(a0, (A, R, 1)), axis=-1)  # (A, R, 1)
        xr = x[None, None, :] - x[a0]  # log(n / n0), (A, 1, C)
        above = known & (idx[None, None, :] > a0)
        yr = np.where(above, L0 - y0 - xr, 0.0)  # log efficiency
        num = (yr * xr).sum(axis=-1)
        den = np.where(above, xr * xr, 0.0).sum(axis=-1)
        b = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
        s = np.clip(1.0 + b, 0.0, 1.0)[..., None]  # (A, R, 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = np.where(hi_c > lo_c, (x[None, None, :] - x_lo) / (x_hi - x_lo), 0.0)
        interp = y_lo + frac * (y_hi - y_lo)
        extrap = y_lo + s * (x[None, None, :] - x_lo)
        est = np.where(known, L0, np.where(hi < C, interp, extrap))
        return np.where(lo >= 0, est, np.nan)

    def estimate(self, jobs: IntArray) -> FloatArray:
        """Estimated goodput (work units/s) of each job on every present type and count.

        Args:
            jobs: Job indices, shape (A,).

        Returns:
            Array of shape (A, Kp, C) with C = ``max_count``: entry ``[a, t, n - 1]`` is the
            estimate for ``n`` GPUs of type ``self.types[t]``; 0 where unknown (a type the job was
            not profiled on, or a count below its minimum).
        """
        jobs = np.asarray(jobs, dtype=np.int64)
        A, Kp, C = jobs.size, self.types.size, self.max_count
        if A == 0:
            return np.zeros((0, Kp, C))
        L = self.log_rate[jobs]
        n0 = self.n0[jobs]
        est = self._own_estimates(L, n0)
        if not self.type_aware:
            out = np.exp(np.nan_to_num(est, nan=-np.inf))
            return np.broadcast_to(out, (A, Kp, C)).copy()
        obs = self.observed[jobs]
        idx = np.arange(C)
        multi: BoolArray = np.any(obs & (idx[None, None, :] > (n0 - 1)[:, None, None]), axis=-1)
        has_src: BoolArray = np.any(multi, axis=1)  # multi: (A, Kp)
        if has_src.any():
            # Source type: the one with the largest observed multi-GPU count.
            top = np.where(obs, idx[None, None, :] + 1, 0).max(axis=-1)
            top = np.where(multi, top, -1)
            src = np.argmax(top, axis=1)  # (A,)
            ar = np.arange(A)
            est_src = est[ar, src]  # (A, C)
            anchor = (n0 - 1)[:, None]
            y0_src = np.take_along_axis(est_src, anchor, axis=1)  # (A, 1)
            y0_all = np.take_along_axis(
                est, np.broadcast_to(anchor[:, :, None], (A, Kp, 1)), axis=2
            )
            proj = y0_all - y0_src[:, :, None] + est_src[:, None, :]
            use = has_src[:, None] & ~multi & ~np.isnan(y0_all[..., 0])
            est = np.where(use[..., None], proj, est)
        return np.exp(np.nan_to_num(est, nan=-np.inf))
