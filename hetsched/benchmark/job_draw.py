"""Random job mixes: GPU requests redrawn per training window, at the window's offered load.

The train split's trace families are mostly 1-GPU jobs (ITP clusters 01, 02 and 05: 85-99 %),
while other families are mostly gangs (8 GPUs and more). :class:`JobMixDraw` wraps a workload
factory (e.g. a scenario's :func:`~hetsched.benchmark.windows.seeded_windows`) so that a policy
trained on it also sees multi-GPU mixes (the job-mix randomisation of ``agent.job_draw``). On
each call it draws the inner window, then, with probability ``fraction``:

1. a share ``p`` uniformly in ``share`` (inclusive);
2. per job, with probability ``p``, a new GPU count uniformly from ``gpus``. A count no GPU type
   the job allows has that many GPUs of in the cluster, or one at which the job cannot run,
   leaves the job as it was. A rigid job's request, minimum and maximum all become the count;
   an elastic job's request becomes the count and its range widens to include it;
3. each redrawn job's work is rescaled so that its run time alone on its fastest allowed type
   is what it was at its old request (a job keeps its length; a gang does not finish sooner);
4. the arrivals are rescaled (:func:`~hetsched.benchmark.windows.at_load`) so that the window's
   offered load is what the inner window's was.

Every random number comes from the caller's generator, so one seed gives one window; with
``fraction=0`` the wrapper draws nothing and returns the inner window unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from hetsched.benchmark.windows import at_load, best_isolated_s, offered_load
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import ConfigError
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload


@dataclass(frozen=True)
class JobMixDraw:
    """A workload factory whose windows get redrawn GPU requests (module docstring).

    Attributes:
        inner: The factory ``f(throughput=, cluster=, rng=) -> Workload`` drawing the window.
        fraction: Share of calls whose window is redrawn, in [0, 1].
        share: Share of a redrawn window's jobs that get a new GPU count, ``[low, high]`` in
            [0, 1].
        gpus: GPU counts a redrawn job may get (positive integers, drawn uniformly).
    """

    inner: Any
    fraction: float
    share: tuple[float, float]
    gpus: tuple[int, ...]

    @classmethod
    def build(
        cls, inner: Any, fraction: float, share: Sequence[float], gpus: Sequence[int]
    ) -> JobMixDraw:
        """Checked construction (the ``agent.job_draw`` settings).

        Raises:
            ConfigError: If ``fraction`` is outside [0, 1], ``share`` is not ``[low, high]``
                within [0, 1], or ``gpus`` is empty or holds a count below 1.
        """
        if not 0.0 <= float(fraction) <= 1.0:
            raise ConfigError(f"agent.job_draw.fraction={fraction!r} must lie in [0, 1]")
        sh = [float(v) for v in share]
        if len(sh) != 2 or not 0.0 <= sh[0] <= sh[1] <= 1.0:
            raise ConfigError(
                f"agent.job_draw.share={list(share)!r} must be [low, high] with "
                "0 <= low <= high <= 1"
            )
        gs = tuple(int(g) for g in gpus)
        if not gs or min(gs) < 1 or any(float(g) != int(g) for g in gpus):
            raise ConfigError(
                f"agent.job_draw.gpus={list(gpus)!r} must be a non-empty list of GPU counts >= 1"
            )
        return cls(inner, float(fraction), (sh[0], sh[1]), gs)

    def __call__(
        self, *, throughput: ThroughputModel, cluster: Cluster, rng: np.random.Generator
    ) -> Workload:
        """The inner window, its GPU requests redrawn with probability ``fraction``."""
        wl = self.inner(throughput=throughput, cluster=cluster, rng=rng)
        if self.fraction <= 0.0 or not rng.random() < self.fraction:
            return wl
        return redraw_requests(wl, self.share, self.gpus, throughput, cluster, rng)


def redraw_requests(
    wl: Workload,
    share: tuple[float, float],
    gpus: tuple[int, ...],
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
) -> Workload:
    """Steps 1-4 of the module docstring on ``wl``.

    Returns:
        A new workload (``wl`` is not modified).
    """
    J = wl.num_jobs
    if J == 0:
        return wl
    p = float(rng.uniform(share[0], share[1]))
    pick = rng.random(J) < p
    g = np.asarray(gpus, dtype=np.int64)[rng.integers(0, len(gpus), size=J)]
    types = np.arange(len(GPU_TYPE_NAMES))
    per_type = cluster.gpus_per_type()
    ok = wl.allowed_types & (per_type > 0)[None, :]  # (J, T)
    rate = np.where(ok, throughput.isolated(wl.model[:, None], types[None, :], g[:, None]), 0.0)
    pool = np.where(ok, per_type[None, :], 0).max(axis=1)
    best_new = rate.max(axis=1)
    t_old = best_isolated_s(wl, throughput, cluster)
    pick &= (g <= pool) & (best_new > 0) & np.isfinite(t_old) & (g != wl.req_gpus)
    if not pick.any():
        return wl
    rigid = wl.min_gpus == wl.max_gpus
    req = np.where(pick, g, wl.req_gpus)
    lo = np.where(pick & rigid, g, np.where(pick, np.minimum(wl.min_gpus, g), wl.min_gpus))
    hi = np.where(pick & rigid, g, np.where(pick, np.maximum(wl.max_gpus, g), wl.max_gpus))
    work = wl.work.copy()
    work[pick] = t_old[pick] * best_new[pick]  # the old run time at the new best rate
    new = replace(wl, req_gpus=req, min_gpus=lo, max_gpus=hi, work=work)
    rho = offered_load(wl, throughput, cluster)
    return at_load(new, rho, throughput, cluster) if math.isfinite(rho) and rho > 0 else new
