"""Hadar's price window, price bounds and per-job constants (see :mod:`hetsched.baselines.hadar`).

A mixin of :class:`hetsched.baselines.hadar.Hadar`. The window holds the reserved GPUs per node
and future slot, shape (N, H) (column 0 is the current slot), and the price of a GPU-slot
``L_k (U_k/L_k)^(reserved/capacity)`` of each cell, recomputed only for the columns whose
reservations changed. It slides with time (:meth:`HadarPrices.sync`). The bounds ``L_k`` and
``U_k`` are learned from the first ``warmup_jobs`` arrivals (hadar.md §2.3) and then frozen. An
epoch counter records where prices fell, so jobs are re-evaluated only when their payoff can have
risen.
"""

from __future__ import annotations

import math

import numpy as np

from hetsched.baselines.hadar_plan import BoolArray, FloatArray, IntArray, PlanTables, _JobInfo
from hetsched.sim.cluster import Cluster
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload


class HadarPrices:
    """Price window, price bounds and job constants of :class:`~hetsched.baselines.hadar.Hadar`
    (a mixin; :meth:`Hadar.reset <hetsched.baselines.hadar.Hadar.reset>` creates the state)."""

    horizon: int
    round_s: float
    now_time: float
    now_slot: int
    weight: float
    utility_floor: float
    warmup_jobs: int
    cluster: Cluster
    workload: Workload
    throughput: ThroughputModel
    #: Reserved GPUs per node and slot of the window, shape (N, H); column 0 = current slot.
    usage: IntArray
    _size: IntArray
    _cap: IntArray
    _cmax: float
    _col_load: IntArray
    _price: FloatArray
    _order: IntArray
    _dirty: BoolArray
    _perish: bool
    _info: dict[int, _JobInfo]
    _eval_epoch: IntArray
    _epoch: int
    _epoch_slot: IntArray
    _n_warm: int
    _warm: BoolArray
    _U: FloatArray
    _L: FloatArray
    _node_low: FloatArray
    _node_ratio: FloatArray
    _price_lo: FloatArray
    _price_hl: FloatArray
    _bounds_ready: bool
    _table: PlanTables | None

    # ------------------------------------------------------------------ prices
    @property
    def price_bounds(self) -> tuple[FloatArray, FloatArray]:
        """``(L, U)`` per catalogue GPU type (NaN where no warm-up job could use the type)."""
        L = np.where(np.isfinite(self._L), self._L, np.nan)
        U = np.where(np.isfinite(self._U), self._U, np.nan)
        return L, U

    def set_price_bounds(self, low: FloatArray, high: FloatArray) -> None:
        """Fix the price bounds per catalogue GPU type and stop learning them (for experiments).

        Args:
            low: L_k per catalogue type, shape (K,), > 0 where the cluster has the type.
            high: U_k per catalogue type, shape (K,), >= L_k.
        """
        self._L = np.asarray(low, dtype=np.float64).copy()
        self._U = np.asarray(high, dtype=np.float64).copy()
        self._n_warm = self.warmup_jobs
        self._apply_bounds()

    def _apply_bounds(self) -> None:
        """Turn the bounds per GPU type into each node's price curve (``U >= e L``)."""
        ok = np.isfinite(self._L) & np.isfinite(self._U)
        if not ok.any():
            return
        L = np.where(ok, self._L, self._L[ok].min())
        U = np.where(ok, self._U, self._U[ok].max())
        U = np.maximum(U, math.e * L)  # alpha = ln(U/L) >= 1
        k = self.cluster.node_type
        self._node_low = L[k]
        self._node_ratio = U[k] / L[k]
        self._price_lo = self._node_low[:, None]
        self._price_hl = (self._node_low * self._node_ratio)[:, None] / self._price_lo
        self._bounds_ready = True
        self._dirty[:] = True
        self._bump(-1)

    def _bump(self, slot: int) -> None:
        """Record that prices fell from absolute slot ``slot`` on (-1: everywhere)."""
        self._epoch += 1
        if self._epoch >= self._epoch_slot.size:
            self._epoch_slot = np.concatenate(
                [self._epoch_slot, np.full(self._epoch_slot.size, -1)]
            )
        self._epoch_slot[self._epoch] = slot

    def _prices_fell_before(self, j: int, slot: int) -> bool:
        """Whether some price fell, at a slot before ``slot``, since job j was last planned."""
        e = int(self._eval_epoch[j])
        if e == self._epoch:
            return False
        return bool(self._epoch_slot[e + 1 : self._epoch + 1].min() < slot)

    def _learn_bounds(self, j: int) -> None:
        """Fold job j into U_k / L_k during the warm-up (hadar.md §2.3)."""
        if self._n_warm >= self.warmup_jobs or self._warm[j]:
            return
        self._n_warm += 1
        self._warm[j] = True
        wl, tm, cl = self.workload, self.throughput, self.cluster
        info = self._info[j]
        K = self._U.shape[0]
        ks = np.arange(K)
        present = (cl.gpus_per_type() > 0) & wl.allowed_types[j]
        phi = float(tm.best_phi(np.array([wl.model[j]]))[0])
        r = tm.isolated(wl.model[j], ks, info.n, False) * phi
        rs = tm.isolated(wl.model[j], ks, info.n, True)
        rs = np.where(rs > 0, rs, r)
        ok = present & (r > 0)
        if not ok.any():
            return
        W, n, D = float(wl.work[j]), info.n, self.round_s
        slots_best = np.ceil(W / np.where(ok, r, 1.0) / D)
        slots_worst = np.ceil(W / np.where(ok & (rs > 0), rs, np.where(ok, r, 1.0)) / D)
        u_cand = self.weight / (n * np.maximum(slots_best, 1.0))
        l_cand = self.utility_floor * self.weight / (n * np.maximum(slots_worst, 1.0))
        self._U = np.where(ok, np.maximum(self._U, u_cand), self._U)
        self._L = np.where(ok, np.minimum(self._L, l_cand), self._L)
        self._apply_bounds()

    def prices(self) -> FloatArray:
        """Current price per GPU-slot of every node over the window, shape (N, H)."""
        self._refresh_prices()
        return self._price.copy()

    def _refresh_prices(self) -> None:
        """Recompute the price and the price order of the window's changed columns."""
        cols = np.flatnonzero(self._dirty)
        if cols.size == 0:
            return
        use = self.usage[:, cols]
        # The GPUs of a down node count as reserved: it is priced at U (and has none free).
        down = (self._size - self._cap)[:, None]
        util = np.minimum((use + down) / self._size[:, None], 1.0)
        if self._perish and cols[0] == 0:
            # Backfill: the current slot's unreserved GPUs cost the idle price L_k.
            util[:, 0] = down[:, 0] / self._size
        # exp_price(util, L, U) with L and U / L of every node precomputed (the same values).
        p = self._price_lo * np.power(self._price_hl, util)
        self._price[:, cols] = p
        free = self._cap[:, None] - use
        # Ties (equal price): prefer the node with more free GPUs, then the lower index.
        key = p * (1.0 + 1e-7 * (self._cmax - free) / self._cmax)
        self._order[:, cols] = np.argsort(key, axis=0, kind="stable")
        self._dirty[cols] = False

    def _reserve(self, rel: IntArray, node: IntArray, gpus: IntArray, sign: int) -> None:
        """Add (``sign=+1``) or remove (``-1``) GPUs at relative slots ``rel`` of ``node``."""
        if rel.size == 0:
            return
        np.add.at(self.usage, (node, rel), sign * gpus)
        np.add.at(self._col_load, rel, sign * gpus)
        self._dirty[rel] = True
        self._table = None

    def sync(self, time: float) -> None:
        """Move the price window to the slot starting at ``time`` (seconds).

        :meth:`decide` does this itself; call it only to use :meth:`dual_subroutine` or
        :meth:`prices` before the first decision (e.g. in experiments).
        """
        self._shift(float(time))

    def _shift(self, time: float) -> None:
        """Advance the window to the slot starting at ``time``."""
        H = self.horizon
        if math.isnan(self.now_time):
            step = 0
        else:
            step = max(0, int(round((time - self.now_time) / self.round_s)))
        self.now_time = float(time)
        if step == 0:
            return
        self.now_slot += step
        s = min(step, H)
        for arr in (self.usage, self._price, self._order):
            arr[:, : H - s] = arr[:, s:]
            arr[:, H - s :] = 0
        self._col_load[: H - s] = self._col_load[s:]
        self._col_load[H - s :] = 0
        self._dirty[: H - s] = self._dirty[s:]
        self._dirty[H - s :] = True
        self._table = None

    # ------------------------------------------------------------------ job data
    def _job_info(self, j: int) -> _JobInfo:
        """Planning constants of job j: gang size, best solo time T*, rate per node."""
        info = self._info.get(j)
        if info is not None:
            return info
        wl, tm, cl = self.workload, self.throughput, self.cluster
        N = cl.num_nodes
        m = int(wl.model[j])
        k = cl.node_type
        share_c = cl.node_cpus / cl.node_gpus
        share_m = cl.node_mem / cl.node_gpus
        cpu_r = np.minimum(wl.cpu_per_gpu[j], share_c) / wl.cpu_per_gpu[j]
        mem_r = np.minimum(wl.mem_per_gpu[j], share_m) / wl.mem_per_gpu[j]
        phi = tm.phi(np.full(N, m), cpu_r, mem_r)
        mem_ok = mem_r >= tm.mem_floor - 1e-9
        allowed = wl.allowed_types[j][k] & mem_ok & (phi > 0)

        def rates(n: int) -> tuple[FloatArray, FloatArray]:
            r = np.where(allowed, tm.isolated(m, k, n, False) * phi, 0.0)
            rs = np.where(allowed, tm.isolated(m, k, n, True) * phi, 0.0)
            return r, rs

        n = int(np.clip(wl.req_gpus[j], wl.min_gpus[j], wl.max_gpus[j]))
        r, rs = rates(n)
        if self._size[r > 0].sum() < n and int(wl.min_gpus[j]) < n:
            n = int(wl.min_gpus[j])
            r, rs = rates(n)
        K = self._U.shape[0]
        types_ok = wl.allowed_types[j] & (cl.gpus_per_type() > 0)
        per_type = tm.isolated(m, np.arange(K), n, False) * float(tm.best_phi(np.array([m]))[0])
        best = float(np.max(np.where(types_ok, per_type, 0.0)))
        if best <= 0:
            best = float(r.max()) if r.max() > 0 else 1.0
        info = _JobInfo(
            n=n,
            t_star=float(wl.work[j]) / best,
            rate=r,
            rate_spread=rs,
            restart_s=float(tm.restart_delay_s[m]),
            arrival=float(wl.arrival[j]),
        )
        self._info[j] = info
        return info
