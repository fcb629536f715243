"""The candidate window of the env's rounds (a mixin of :class:`~hetsched.envs.core.EnvCore`).

Which waiting jobs the agents see and in which order: the window order
(``EnvSettings.window_order``), the backfill slots (``EnvSettings.window_backfill``) and the
cheap test of whether any window job may fit (the numpy references of the compiled window
kernel, :mod:`hetsched.envs.kernels_step`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from hetsched.envs.core_state import CoreState
from hetsched.envs.features import NUM_TYPES


class WindowRules(CoreState):
    """Window order, window contents and the window's fit test."""

    def _in_window_order(self, pend: NDArray[np.int64]) -> NDArray[np.int64]:
        """``pend`` (arrival order) sorted by ``EnvSettings.window_order``."""
        sim = self.sim
        assert sim is not None
        if self.cfg.window_order == "attained" and pend.size:
            pend = pend[np.lexsort((pend, sim.attained_gpu_s[pend]))]
        elif self.cfg.window_order == "sjf" and pend.size:
            pend = pend[np.lexsort((pend, self.est_run_s(pend)))]
        elif self.cfg.window_order == "typed" and pend.size:
            pend = pend[self.typed_order(pend)]
        return pend

    def est_run_s(self, jobs: NDArray[np.int64]) -> NDArray[np.float64]:
        """Estimated run time (s) of ``jobs``: remaining work over the isolated rate at the
        request on the fastest allowed GPU type present (the ``"sjf"`` window order's key).
        """
        assert self.sim is not None and self.jt is not None
        best = self.jt.best_tput[jobs]
        out = np.full(best.shape, np.inf)  # a job no present type can run: never short
        np.divide(self.sim.remaining[jobs], best, out=out, where=best > 0)
        return out

    def typed_order(self, jobs: NDArray[np.int64]) -> NDArray[np.int64]:
        """Permutation of ``jobs`` for the ``"typed"`` window order.

        Each GPU type present ranks the jobs it can run by their estimated run time on it
        (remaining work over the isolated rate at the request on that type; ties to the lower
        job index). The order takes the types' lists in turn -- the first job of every type,
        then the second, and so on, types in index order -- and keeps each job's first
        appearance, so every GPU type finds the jobs that run shortest on it near the front of
        the window (with ``"sjf"``, a burst of jobs that are short only on the fastest type
        fills the window while slower types idle). Jobs no present type can run come last, in
        the given order. Loops over the (few) GPU types only; vectorised over jobs.

        Returns:
            Indices into ``jobs``, shape (len(jobs),).
        """
        assert self.sim is not None and self.jt is not None
        rate = self.jt.rel_tput[jobs] * self.jt.best_tput[jobs, None]  # (P, T) work units/s
        types = np.flatnonzero(self.cluster.gpus_per_type() > 0)
        P = jobs.shape[0]
        key = np.full(P, np.iinfo(np.int64).max, dtype=np.int64)
        rem = self.sim.remaining[jobs]
        for i, t in enumerate(types):
            ok = rate[:, t] > 0
            est = np.full(P, np.inf)
            np.divide(rem, rate[:, t], out=est, where=ok)
            rank = np.empty(P, dtype=np.int64)
            rank[np.lexsort((jobs, est))] = np.arange(P)
            key = np.where(ok, np.minimum(key, rank * types.size + i), key)
        return np.lexsort((np.arange(P), key))

    def window_jobs(self) -> NDArray[np.int64]:
        """The window's jobs, in slot order (at most K; the numpy reference of the compiled
        window kernel).

        The first ``K - EnvSettings.window_backfill`` slots hold the first waiting jobs (in
        window order) not placed this round. The last ``window_backfill`` slots hold the next
        such jobs that *may fit* now: all up nodes of some GPU type the job allows have at least
        its fewest GPUs (at any legal level) free together. If too few may, the next jobs that
        may not fill the rest (in that order), so the window is never emptier than without
        backfill. Without backfill slots this is the first K waiting jobs: a queue whose first
        K jobs cannot run hides every job behind them that could.
        """
        assert self.jt is not None
        p = self.pending
        rest = p[~self._placed[p]] if p.size else p
        head = self.K - self.cfg.window_backfill
        if self.cfg.window_backfill == 0 or rest.size <= head:
            return rest[: self.K]
        tail = rest[head:]
        per_type = self._free_per_type(self._up_free())
        may = (self.jt.allowed[tail] & (per_type[None, :] >= self.jt.min_gpus[tail, None])).any(1)
        b = self.cfg.window_backfill
        fill = np.concatenate([tail[may][:b], tail[~may][:b]])[:b]
        return np.concatenate([rest[:head], fill])

    def _may_fit(self, jobs: NDArray[np.int64]) -> bool:
        """Cheap necessary condition for any legal placement (skips the full masks)."""
        if jobs.size == 0:
            return False
        assert self.jt is not None
        g = int(self.jt.min_gpus[jobs].min())
        up_free = self._up_free()
        if int(up_free.max()) >= g:  # one node alone has room (the common case)
            return True
        return bool(self._free_per_type(up_free).max() >= g)

    def _up_free(self) -> NDArray[np.int64]:
        """Free GPUs per node, 0 on nodes that are down, shape (N,)."""
        return self.free_g if self.failures is None else np.where(self.node_up, self.free_g, 0)

    def _free_per_type(self, up_free: NDArray[np.int64]) -> NDArray[np.float64]:
        """``up_free`` summed over the nodes of each catalogue GPU type, shape (NUM_TYPES,)."""
        per_type = np.bincount(self.cluster.node_type, weights=up_free, minlength=NUM_TYPES)
        return np.asarray(per_type, dtype=np.float64)
