"""Hadar's dual subroutine: a job's best schedule at the current prices (hadar.md §2.4).

A mixin of :class:`hetsched.baselines.hadar.Hadar`, which owns the price window and the plans;
the mechanism is described in that module's docstring. This module holds the subroutine's
driver: per speed floor, the cheapest placement per unit of progress in every slot, then the
best schedule over completion slots. Its numpy pieces live in
:mod:`hetsched.baselines.hadar_candidates` (the per-slot candidates, in a dense form for small
clusters and a per-floor form for large ones) and :mod:`hetsched.baselines.hadar_schedule` (the
completion-slot search and the plan's placement entries).

Where numba is available, :meth:`HadarDual.dual_subroutine` runs the compiled kernels of
:mod:`hetsched.baselines.hadar_kernels` instead: the same plans bit for bit, with one compiled
call for the candidate search and one for every floor's schedule search (the numpy code is
their reference). The numpy path also runs for the ``sigmoid`` utility (its ``exp`` may differ
in the last bit when compiled) and for a window with one computed column (numpy sums that
column pairwise), and with ``HETSCHED_NUMBA=0``.
"""

from __future__ import annotations

import math

import numpy as np

from hetsched.baselines import hadar_kernels
from hetsched.baselines.hadar_candidates import (
    candidates_dense,
    entries_at,
    multi_candidates,
    placement_rate,
    single_candidates,
    speed_levels,
)
from hetsched.baselines.hadar_plan import (
    FloatArray,
    HadarPlan,
    IntArray,
    _JobInfo,
    _SlotChoice,
    utility_value,
)
from hetsched.baselines.hadar_schedule import plan_entries, schedule_search, stabilise
from hetsched.sim.workload import Workload

#: Below this many cells (floors x nodes x slots) the candidate search uses its dense form
#: (fewer, larger numpy calls); above it, the per-floor form.
_DENSE_CELLS = 40_000


class HadarDual:
    """The dual subroutine of :class:`~hetsched.baselines.hadar.Hadar` (a mixin).

    It reads the policy's settings, price window (``usage``, ``_price``, ``_order``; shape
    (N, H)) and capacity, and never changes them (except ``subroutine_calls``).
    """

    horizon: int
    round_s: float
    now_time: float
    utility: str
    kappa: float
    weight: float
    utility_floor: float
    work_margin: float
    switch_aware: bool
    sticky: bool
    workload: Workload
    subroutine_calls: int
    usage: IntArray
    _cap: IntArray
    _size: IntArray
    _cmax: float
    _price: FloatArray
    _order: IntArray
    _col_load: IntArray
    _bounds_ready: bool
    _compiled_on: bool = False
    #: Speed floors per job for the compiled path, with the job info they were computed from.
    _levels_cache: dict[int, tuple[_JobInfo, FloatArray]]

    def _refresh_prices(self) -> None:
        raise NotImplementedError

    def _job_info(self, j: int) -> _JobInfo:
        raise NotImplementedError

    def _learn_bounds(self, j: int) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ dual subroutine
    def _slot_choices(
        self, info: _JobInfo, ref: tuple[IntArray, IntArray] | None
    ) -> list[_SlotChoice]:
        """Cheapest placement per unit of progress in every slot, for every speed floor.

        Speed floor l admits placements whose slowest node runs the job at least as fast as the
        l-th fastest rate level; floor 0 is the fastest. Returns one :class:`_SlotChoice` per
        floor (empty list when the job can run nowhere).
        """
        He, free, price, order = self._window()
        H = self.horizon
        n = info.n
        r = info.rate
        levels = speed_levels(r)
        Lv = levels.size
        if Lv == 0:
            return []
        D = self.round_s
        cols = np.arange(He)
        if Lv * free.size <= _DENSE_CELLS:  # small: fewest numpy calls
            take, tnode, cost_m, rate_m, single, ok_s = candidates_dense(
                info, levels, free, price, order, self._size, self._cmax
            )
        else:  # large: visit only each floor's eligible nodes, only as deep as needed
            # Speed band of each node: floor l admits the nodes of bands 0..l (Lv = ineligible).
            band = (levels[None, :] > r[:, None]).sum(axis=1)
            take, tnode, _, cost_m, rate_m = multi_candidates(
                info, band, Lv, free, price, order, self._size
            )
            single, ok_s = single_candidates(band, Lv, free, price, n, self._cmax)
        cost_s = n * price[single, cols[None, :]]
        rate_1 = np.where(ok_s, r[single], 0.0)
        # Candidates: single-node first (preferred on ties: consolidation), then multi-node.
        cand_cost = np.concatenate([cost_s, cost_m])  # (2Lv, He)
        cand_rate = np.concatenate([rate_1, rate_m])
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(cand_rate > 0, cand_cost / (cand_rate * D), np.inf)
        cand_lv = np.concatenate([np.arange(Lv), np.arange(Lv)])
        disc = max(0.0, 1.0 - info.restart_s / D) if self.switch_aware else 1.0
        ref_rate = 0.0
        if ref is not None and ref[0].size:
            ref_rate = placement_rate(info, self._size, ref[0], ref[1])
        out: list[_SlotChoice] = []
        for fl in range(Lv):
            rf = np.where((cand_lv <= fl)[:, None], ratio, np.inf)
            best = rf.argmin(axis=0)
            b_cost = cand_cost[best, cols]
            b_prog = np.where(np.isfinite(rf[best, cols]), cand_rate[best, cols] * D, 0.0)
            kind = np.where(best < Lv, 1, 0).astype(np.int64)
            level = np.where(best < Lv, best, best - Lv).astype(np.int64)
            single_node = single[level, cols]
            # Reference placement: where the job runs now, else its first feasible placement.
            if ref is not None and ref[0].size and ref_rate >= levels[fl] * (1 - 1e-9):
                ref_nodes, ref_gpus, rr = ref[0], ref[1], ref_rate
            else:
                feas_cols = np.flatnonzero(b_prog > 0)
                if feas_cols.size:
                    t = int(feas_cols[0])
                    ref_nodes, ref_gpus = entries_at(
                        t, int(kind[t]), int(level[t]), int(single_node[t]), take, tnode, n
                    )
                else:
                    ref_nodes = ref_gpus = np.zeros(0, dtype=np.int64)
                rr = placement_rate(info, self._size, ref_nodes, ref_gpus)
            if ref_nodes.size and rr > 0:
                feas_r = (free[ref_nodes] >= ref_gpus[:, None]).all(axis=0)
                cost_r = (ref_gpus[:, None] * price[ref_nodes]).sum(axis=0)
                prog_r = rr * D
                prog_b = b_prog * disc  # any other placement pays a restart
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio_b = np.where(prog_b > 0, b_cost / prog_b, np.inf)
                ratio_r = np.where(feas_r, cost_r / prog_r, np.inf)
                use_r = feas_r & (self.sticky | (ratio_r <= ratio_b))
                b_cost = np.where(use_r, cost_r, b_cost)
                b_prog = np.where(use_r, prog_r, prog_b)
                kind = np.where(use_r, 2, kind)
            b_cost = np.where(b_prog > 0, b_cost, np.inf)
            # Columns from He on are idle and identical to column He - 1.
            if He < H:
                b_cost = np.concatenate([b_cost, np.full(H - He, b_cost[-1])])
                b_prog = np.concatenate([b_prog, np.full(H - He, b_prog[-1])])
            out.append(
                _SlotChoice(
                    b_cost,
                    b_prog,
                    kind,
                    level,
                    single_node,
                    take,
                    tnode,
                    ref_nodes,
                    ref_gpus,
                    He,
                    free,
                    price,
                )
            )
        return out

    def _window(self) -> tuple[int, IntArray, FloatArray, IntArray]:
        """The window's computed columns: ``(He, free, price, order)``, shapes (N, He).

        Columns from ``He`` on hold no reservation and repeat column ``He - 1``.
        """
        self._refresh_prices()
        used_cols = np.flatnonzero(self._col_load > 0)
        He = min(self.horizon, int(used_cols[-1]) + 2) if used_cols.size else 1
        free = self._cap[:, None] - self.usage[:, :He]  # (N, He)
        return He, free, self._price[:, :He], self._order[:, :He]

    def _compiled_plan(
        self, j: int, info: _JobInfo, ref: tuple[IntArray, IntArray] | None, W: float
    ) -> HadarPlan | None | bool:
        """:meth:`dual_subroutine`'s result by the compiled kernels (the same plan, bit for bit;
        see :mod:`hetsched.baselines.hadar_kernels`), or ``False`` where they do not apply
        (a window with one computed column)."""
        He, free, price, order = self._window()
        cached = self._levels_cache.get(j)
        if cached is None or cached[0] is not info:
            cached = (info, speed_levels(info.rate))
            self._levels_cache[j] = cached
        levels = cached[1]
        if levels.size == 0:
            return None
        if He < 2:  # one column: numpy sums it pairwise, the kernels sequentially
            return False
        return hadar_kernels.compiled_plan(self, j, info, ref, W, levels, free, price, order)

    def dual_subroutine(
        self, j: int, work: float | None = None, ref: tuple[IntArray, IntArray] | None = None
    ) -> HadarPlan | None:
        """Best schedule of job ``j`` at the current prices (hadar.md §2.4).

        For every speed floor (see :meth:`_slot_choices`) and every candidate completion slot
        tau, whole slots are taken in ascending cost per unit of progress until the planned
        progress reaches the work; the (floor, tau) maximising ``f - cost`` wins.

        Args:
            j: Job index (its reservations, if any, must have been released).
            work: Work to plan for in work units (default: the job's total work x margin).
            ref: Reference placement ``(nodes, gpus)`` (where the job runs now), if any.

        Returns:
            The best plan, or ``None`` when no slot of the window can run the job.

        Raises:
            RuntimeError: Before the first :meth:`decide` / :meth:`sync` (no current time).
        """
        if math.isnan(self.now_time):
            raise RuntimeError(
                "Hadar.dual_subroutine needs the current time: call decide(state) or sync(time) first"
            )
        self.subroutine_calls += 1
        # The compiled kernels (same results) when numba is available and not disabled.
        self._compiled_on = hadar_kernels.numba_module() is not None
        info = self._job_info(j)
        if not self._bounds_ready:
            self._learn_bounds(j)
        W = float(self.workload.work[j]) * (1.0 + self.work_margin) if work is None else float(work)
        if self._compiled_on and self.utility in hadar_kernels.UTILITY_CODES:
            fused = self._compiled_plan(j, info, ref, W)
            if fused is not False:
                return fused  # type: ignore[return-value]
        best: HadarPlan | None = None
        for sc in self._slot_choices(info, ref):
            plan = self._best_schedule(j, info, sc, W)
            if plan is not None and (best is None or plan.mu > best.mu):
                best = plan
        return best

    def _best_schedule(self, j: int, info: _JobInfo, sc: _SlotChoice, W: float) -> HadarPlan | None:
        """OASiS-style search over completion slots for one speed floor (vectorised)."""
        D = self.round_s
        cost, prog = sc.cost, sc.prog
        feas = prog > 0
        if not feas.any():
            return None
        base_t = self.now_time - info.arrival
        kernel = hadar_kernels.compiled("schedule") if self._compiled_on else None
        if kernel is not None:
            tau_min, T, k, C, lst, sig, pos = kernel(cost, prog, W, sc.He)
            partial = T == 0
        else:
            partial = bool(np.cumsum(prog)[-1] < W * (1.0 - 1e-12))
        if not partial:
            if kernel is None:
                sig, pos, taus, k, C, lst = schedule_search(cost, prog, W, sc.He, self.horizon)
            else:
                taus = np.arange(tau_min, T)
            fval = utility_value(
                self.utility,
                np.asarray(base_t + (lst + 1) * D, dtype=np.float64),
                info.t_star,
                weight=self.weight,
                kappa=self.kappa,
                floor=self.utility_floor,
            )
            i = int((fval - C).argmax())
            ki = int(k[i]) + 1
            chosen = sig[:ki][(sig[:ki] <= taus[i]) & pos[:ki]]
            total_cost, fbest = float(C[i]), float(fval[i])
            finish = self.now_time + (int(lst[i]) + 1) * D
        else:
            chosen = np.flatnonzero(feas)
            P = float(prog[chosen].sum())
            rate_best = float(prog.max()) / D
            finish = self.now_time + (int(chosen.max()) + 1) * D + (W - P) / rate_best
            total_cost = float(cost[chosen].sum()) * W / P
            fbest = float(
                utility_value(
                    self.utility,
                    finish - info.arrival,
                    info.t_star,
                    weight=self.weight,
                    kappa=self.kappa,
                    floor=self.utility_floor,
                )
            )
        chosen = np.sort(chosen).astype(np.int64)
        plan_k = hadar_kernels.compiled("plan") if self._compiled_on and sc.He >= 2 else None
        if plan_k is not None:
            disc = max(0.0, 1.0 - info.restart_s / D) if self.switch_aware else 1.0
            e_slot, e_node, e_gpus, progress, c_new = plan_k(
                chosen,
                sc.kind,
                sc.level,
                sc.single,
                sc.take,
                sc.tnode,
                sc.ref_nodes,
                sc.ref_gpus,
                sc.free,
                sc.price,
                info.n,
                self._size,
                info.rate,
                info.rate_spread,
                D,
                disc,
            )
        else:
            e_slot, e_node, e_gpus, progress, c_new = stabilise(
                info,
                sc,
                chosen,
                plan_entries(sc, chosen, info.n),
                size=self._size,
                round_s=D,
                switch_aware=self.switch_aware,
            )
        if not partial:
            total_cost = c_new
        return HadarPlan(
            job=j,
            slots=chosen,
            progress=progress,
            entry_slot=e_slot,
            entry_node=e_node,
            entry_gpus=e_gpus,
            cost=total_cost,
            utility=fbest,
            mu=fbest - total_cost,
            finish_s=float(finish),
            partial=partial,
        )
