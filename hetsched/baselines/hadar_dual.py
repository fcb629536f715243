"""Hadar's dual subroutine: a job's best schedule at the current prices (hadar.md §2.4).

A mixin of :class:`hetsched.baselines.hadar.Hadar`, which owns the price window and the plans;
the mechanism is described in that module's docstring. Two forms of the candidate search give
the same results: a dense one over every node at once (small clusters: fewest numpy calls) and
one that visits only each speed floor's eligible nodes, in price order and only as deep as the
gang's last GPU (large clusters). Likewise the completion-slot search runs in one block when it
is small and in blocks of growing size, each as wide as its first row's cut, when it is large.

Where numba is available, :meth:`HadarDual.dual_subroutine` runs the compiled kernels of
:mod:`hetsched.baselines.hadar_kernels` instead: the same plans bit for bit, with one compiled
call for the candidate search and one for every floor's schedule search (the numpy code here is
their reference). The numpy path also runs for the ``sigmoid`` utility (its ``exp`` may differ
in the last bit when compiled) and for a window with one computed column (numpy sums that
column pairwise), and with ``HETSCHED_NUMBA=0``.
"""

from __future__ import annotations

import math

import numpy as np

from hetsched.baselines import hadar_kernels
from hetsched.baselines.hadar_plan import (
    BoolArray,
    FloatArray,
    HadarPlan,
    IntArray,
    _greedy_cuts,
    _JobInfo,
    _SlotChoice,
    utility_value,
)
from hetsched.sim.workload import Workload

_MAX_LEVELS = 8  # speed floors searched per job
# Below these sizes the dual subroutine uses its dense forms (fewer, larger numpy calls): floors x
# nodes x slots of the candidate search, completion slots x ranked slots of the schedule search.
_DENSE_CELLS = 40_000
_DENSE_SCHEDULE = 20_000


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

    def _placement_rate(self, info: _JobInfo, nodes: IntArray, gpus: IntArray) -> float:
        """Engine rate rule (without interference) for a placement of the gang."""
        if nodes.size == 0:
            return 0.0
        need = -(-info.n // int(self._size[nodes].max()))
        r = info.rate_spread if nodes.size > need else info.rate
        return float(r[nodes].min())

    # ------------------------------------------------------------------ dual subroutine
    def _speed_levels(self, r: FloatArray) -> FloatArray:
        """Distinct positive node rates of a job, fastest first, at most ``_MAX_LEVELS``."""
        lv = np.unique(r[r > 0])[::-1]
        if lv.size > _MAX_LEVELS:
            idx = np.unique(np.linspace(0, lv.size - 1, _MAX_LEVELS).round().astype(np.int64))
            lv = lv[idx]
        return lv

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
        levels = self._speed_levels(r)
        Lv = levels.size
        if Lv == 0:
            return []
        D = self.round_s
        cols = np.arange(He)
        if Lv * free.size <= _DENSE_CELLS:  # small: fewest numpy calls
            take, tnode, cost_m, rate_m, single, ok_s = self._candidates_dense(
                info, levels, free, price, order
            )
        else:  # large: visit only each floor's eligible nodes, only as deep as needed
            # Speed band of each node: floor l admits the nodes of bands 0..l (Lv = ineligible).
            band = (levels[None, :] > r[:, None]).sum(axis=1)
            take, tnode, _, cost_m, rate_m = self._multi_candidates(
                info, band, Lv, free, price, order
            )
            single, ok_s = self._single_candidates(band, Lv, free, price, n)
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
            ref_rate = self._placement_rate(info, ref[0], ref[1])
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
                    ref_nodes, ref_gpus = self._entries_at(
                        t, int(kind[t]), int(level[t]), int(single_node[t]), take, tnode, n
                    )
                else:
                    ref_nodes = ref_gpus = np.zeros(0, dtype=np.int64)
                rr = self._placement_rate(info, ref_nodes, ref_gpus)
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
            cached = (info, self._speed_levels(info.rate))
            self._levels_cache[j] = cached
        levels = cached[1]
        if levels.size == 0:
            return None
        if He < 2:  # one column: numpy sums it pairwise, the kernels sequentially
            return False
        return hadar_kernels.compiled_plan(self, j, info, ref, W, levels, free, price, order)

    def _candidates_dense(
        self,
        info: _JobInfo,
        levels: FloatArray,
        free: IntArray,
        price: FloatArray,
        order: IntArray,
    ) -> tuple[IntArray, IntArray, FloatArray, FloatArray, IntArray, BoolArray]:
        """Multi- and single-node candidates of every floor over all nodes at once (small N).

        Returns:
            ``(take, tnode, cost_m, rate_m, single, ok_s)``: GPUs per sorted position and its
            node, shape (Lv, N, He); multi-node cost and rate, the single-node candidate and
            whether it exists, shape (Lv, He). The same values as the large-cluster path.
        """
        n, r, rs = info.n, info.rate, info.rate_spread
        mask = r[None, :] >= levels[:, None]  # (Lv, N)
        fr_s = np.take_along_axis(free, order, axis=0)
        pr_s = np.take_along_axis(price, order, axis=0)
        avail = np.where(mask[:, order], fr_s[None], 0)  # (Lv, N, He)
        cum = np.cumsum(avail, axis=1)
        take = np.clip(n - (cum - avail), 0, avail)
        feas_m = cum[:, -1, :] >= n
        cost_m = (take * pr_s[None]).sum(axis=1)
        used = take > 0
        nn = used.sum(axis=1)
        maxc = np.where(used, self._size[order][None], 0).max(axis=1)
        spread = nn > -(-n // np.maximum(maxc, 1))
        rate_p = np.where(used, r[order][None], np.inf).min(axis=1)
        rate_s = np.where(used, rs[order][None], np.inf).min(axis=1)
        rate_m = np.where(spread, rate_s, rate_p)
        rate_m = np.where(feas_m & np.isfinite(rate_m), rate_m, 0.0)
        fit = mask[:, :, None] & (free[None] >= n)
        key = np.where(fit, (price * (1.0 + 1e-7 * free / self._cmax))[None], np.inf)
        single = key.argmin(axis=1)  # (Lv, He)
        ok_s = np.isfinite(np.take_along_axis(key, single[:, None, :], axis=1)[:, 0, :])
        tnode = np.broadcast_to(order, take.shape)
        return take, tnode, cost_m, rate_m, single, ok_s

    def _single_candidates(
        self, band: IntArray, Lv: int, free: IntArray, price: FloatArray, n: int
    ) -> tuple[IntArray, BoolArray]:
        """Cheapest node holding the whole gang per floor and slot (best fit on ties).

        Returns:
            ``(single, ok)``: the node (0 where none) and whether one exists, shape (Lv, He).
        """
        He = free.shape[1]
        cols = np.arange(He)
        key = np.where(free >= n, price * (1.0 + 1e-7 * free / self._cmax), np.inf)
        single = np.zeros((Lv, He), dtype=np.int64)
        ok = np.zeros((Lv, He), dtype=bool)
        best_v = np.full(He, np.inf)
        best_i = np.zeros(He, dtype=np.int64)
        for lv in range(Lv):
            nodes = np.flatnonzero(band == lv)
            if nodes.size:
                kb = key[nodes]
                ib = kb.argmin(axis=0)
                vb = kb[ib, cols]
                nb = nodes[ib]
                # First minimum over the union of bands: lower value, then lower node index.
                win = (vb < best_v) | ((vb == best_v) & (nb < best_i))
                best_v = np.where(win, vb, best_v)
                best_i = np.where(win, nb, best_i)
            ok[lv] = np.isfinite(best_v)
            single[lv] = np.where(ok[lv], best_i, 0)
        return single, ok

    def _multi_candidates(
        self,
        info: _JobInfo,
        band: IntArray,
        Lv: int,
        free: IntArray,
        price: FloatArray,
        order: IntArray,
    ) -> tuple[IntArray, IntArray, BoolArray, FloatArray, FloatArray]:
        """Per speed floor and slot, the ``n`` cheapest eligible GPUs in price order.

        Only the eligible nodes of each floor are visited, in the window's price order, and only
        as deep as the ``n``-th free GPU (the depth doubles until every feasible slot is served).

        Args:
            info: The job's constants.
            band: Speed band per node, shape (N,) (floor l admits bands 0..l).
            Lv: Number of floors.
            free: Free GPUs per node and slot, shape (N, He).
            price: Price per node and slot, shape (N, He).
            order: Nodes by ascending price per slot, shape (N, He).

        Returns:
            ``(take, tnode, feasible, cost, rate)``: GPUs taken per visited position and the node
            at that position, shape (Lv, P, He); whether the floor has ``n`` free GPUs, the cost
            and the engine rate per floor and slot, shape (Lv, He) (rate 0 where infeasible).
        """
        n = info.n
        He = free.shape[1]
        cols = np.arange(He)
        band_s = band[order]  # (N, He)
        takes: list[IntArray] = []
        nodes_l: list[IntArray] = []
        feas = np.zeros((Lv, He), dtype=bool)
        cost = np.zeros((Lv, He))
        rate = np.zeros((Lv, He))
        for lv in range(Lv):
            elig = band <= lv
            cnt = int(elig.sum())
            # Eligible nodes in price order per slot (the same count in every slot).
            ol = order.T[(band_s <= lv).T].reshape(He, cnt).T  # (cnt, He)
            tot = free[elig].sum(axis=0)
            feas[lv] = tot >= n
            P = min(cnt, max(n, 2))
            while True:
                fr = free[ol[:P], cols]
                cum = np.cumsum(fr, axis=0)
                if cnt == P or ((cum[-1] >= n) | ~feas[lv]).all():
                    break
                P = min(cnt, 2 * P)
            ol = ol[:P]
            take = np.clip(n - (cum - fr), 0, fr)
            if He == 1:  # a single column sums pairwise over all N positions: keep that order
                full = np.zeros((order.shape[0], 1))
                full[np.flatnonzero(band_s[:, 0] <= lv)[:P], 0] = take[:, 0] * price[ol[:, 0], 0]
                cost[lv] = full.sum(axis=0)
            else:
                cost[lv] = (take * price[ol, cols]).sum(axis=0)
            used = take > 0
            nn = used.sum(axis=0)
            maxc = np.where(used, self._size[ol], 0).max(axis=0)
            spread = nn > -(-n // np.maximum(maxc, 1))
            rate_p = np.where(used, info.rate[ol], np.inf).min(axis=0)
            rate_s = np.where(used, info.rate_spread[ol], np.inf).min(axis=0)
            rm = np.where(spread, rate_s, rate_p)
            rate[lv] = np.where(feas[lv] & np.isfinite(rm), rm, 0.0)
            takes.append(take)
            nodes_l.append(ol)
        Pm = max(t.shape[0] for t in takes)
        take_all = np.zeros((Lv, Pm, He), dtype=np.int64)
        node_all = np.zeros((Lv, Pm, He), dtype=np.int64)
        for lv in range(Lv):
            P = takes[lv].shape[0]
            take_all[lv, :P] = takes[lv]
            node_all[lv, :P] = nodes_l[lv]
        return take_all, node_all, feas, cost, rate

    @staticmethod
    def _entries_at(
        t: int, kind: int, level: int, single: int, take: IntArray, tnode: IntArray, n: int
    ) -> tuple[IntArray, IntArray]:
        if kind == 1:
            return np.array([single], dtype=np.int64), np.array([n], dtype=np.int64)
        g = take[level, :, t]
        nz = np.flatnonzero(g)
        return tnode[level, nz, t].astype(np.int64), g[nz].astype(np.int64)

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
                sig, pos, taus, k, C, lst = self._schedule_search(cost, prog, W, sc.He)
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
            e_slot, e_node, e_gpus = self._plan_entries(sc, chosen, info.n)
            e_slot, e_node, e_gpus, progress, c_new = self._stabilise(
                info, sc, chosen, e_slot, e_node, e_gpus
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

    def _schedule_search(
        self, cost: FloatArray, prog: FloatArray, W: float, He: int
    ) -> tuple[IntArray, BoolArray, IntArray, IntArray, FloatArray, IntArray]:
        """Greedy schedules per completion slot (numpy reference of the ``schedule`` kernel).

        Args:
            cost: Cost per slot of the window, shape (H,) (inf where infeasible).
            prog: Progress per slot in work units, shape (H,); the window covers ``W``.
            W: Work to cover.
            He: Computed columns (slots from ``He`` on repeat slot ``He - 1``).

        Returns:
            ``(sig, pos, taus, k, C, last)``: slots by rank (cheapest per progress first) and
            whether each has progress, shape (S,); the completion slots searched and, per
            completion slot, the rank of the last slot taken, the summed cost and the latest
            slot taken, shape (R,).
        """
        H = self.horizon
        time_cum = np.cumsum(prog)
        Wt = W * (1.0 - 1e-12)
        # Candidate completion slots: from the first slot by which all feasible slots so far
        # suffice, to the slot after which only identical idle slots would be added.
        tau_min = int(np.argmax(time_cum >= Wt))
        tau_max = H - 1
        p0 = float(prog[He - 1])
        if He < H and p0 > 0:
            tau_max = min(H - 1, He - 1 + math.ceil(W / p0))
        T = tau_max + 1
        c_T, p_T = cost[:T], prog[:T]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(p_T > 0, c_T / p_T, np.inf)
        sig = np.argsort(ratio, kind="stable")  # cheapest per progress first, earlier on ties
        p_sig, c_sig = p_T[sig], c_T[sig]
        pos = p_sig > 0
        # The greedy prefix shrinks (in rank) as tau grows, so the tau_min row bounds every
        # row's cut k0; a slot ranked after k0 is never taken, and adding it leaves the
        # schedule (and mu) of the previous tau unchanged, so only the other taus are rows.
        taus = np.arange(tau_min, T)
        if taus.size * T > _DENSE_SCHEDULE:
            k0 = int((np.cumsum(np.where(pos & (sig <= tau_min), p_sig, 0.0)) >= Wt).argmax())
            sig, p_sig, c_sig, pos = (
                sig[: k0 + 1],
                p_sig[: k0 + 1],
                c_sig[: k0 + 1],
                pos[: k0 + 1],
            )
            rank = np.full(T, T, dtype=np.int64)
            rank[sig[pos]] = np.flatnonzero(pos)
            taus = taus[(taus == tau_min) | (rank[taus] <= k0)]
        k, C, lst = _greedy_cuts(
            sig, p_sig, c_sig, pos, taus, Wt, blocks=taus.size * sig.size > _DENSE_SCHEDULE
        )
        return sig, pos, taus, k, C, lst

    def _stabilise(
        self,
        info: _JobInfo,
        sc: _SlotChoice,
        chosen: IntArray,
        e_slot: IntArray,
        e_node: IntArray,
        e_gpus: IntArray,
    ) -> tuple[IntArray, IntArray, IntArray, FloatArray, float]:
        """Keep each placement for as long as it stays free (moves only when forced).

        Walks the chosen slots in time order: the placement of the first slot is kept in every
        later chosen slot until its GPUs are reserved by others; then the planned placement of
        that slot takes over, and so on. One vectorised feasibility check per move.

        Returns:
            Entries ``(slot, node, gpus)``, estimated progress per chosen slot (work units) and
            the schedule's cost at the current prices.
        """
        D = self.round_s
        col = np.minimum(chosen, sc.He - 1)
        S = chosen.size
        seg_start: list[int] = []
        i = 0
        while i < S:
            seg_start.append(i)
            m = e_slot == chosen[i]
            nodes, gpus = e_node[m], e_gpus[m]
            ok = (sc.free[nodes][:, col[i:]] >= gpus[:, None]).all(axis=0)
            bad = np.flatnonzero(~ok)
            i = S if bad.size == 0 else i + int(bad[0])
        starts = np.array(seg_start, dtype=np.int64)
        seg = np.searchsorted(starts, np.arange(S), side="right") - 1  # segment of each slot
        src = chosen[starts]  # slot whose placement each segment uses
        disc = max(0.0, 1.0 - info.restart_s / D) if self.switch_aware else 1.0
        parts: list[tuple[IntArray, IntArray, IntArray]] = []
        progress = np.zeros(S)
        for g, s0 in enumerate(src.tolist()):
            m = e_slot == s0
            nodes, gpus = e_node[m], e_gpus[m]
            idx = np.flatnonzero(seg == g)
            rate = self._placement_rate(info, nodes, gpus)
            progress[idx] = rate * D * (disc if g > 0 else 1.0)
            R = nodes.size
            parts.append(
                (np.repeat(chosen[idx], R), np.tile(nodes, idx.size), np.tile(gpus, idx.size))
            )
        ns = np.concatenate([p[0] for p in parts])
        nn = np.concatenate([p[1] for p in parts])
        ng = np.concatenate([p[2] for p in parts])
        cost = float((ng * sc.price[nn, np.minimum(ns, sc.He - 1)]).sum())
        return ns, nn, ng, progress, cost

    @staticmethod
    def _plan_entries(
        sc: _SlotChoice, chosen: IntArray, n: int
    ) -> tuple[IntArray, IntArray, IntArray]:
        """Placement entries (slot, node, gpus) of the chosen slots, vectorised."""
        col = np.minimum(chosen, sc.He - 1)  # idle columns repeat the last computed one
        kind = sc.kind[col]
        parts_s: list[IntArray] = []
        parts_n: list[IntArray] = []
        parts_g: list[IntArray] = []
        m = kind == 0
        if m.any():
            sl, cl_ = chosen[m], col[m]
            lv_ = sc.level[cl_]
            g = sc.take[lv_, :, cl_]  # (S, P) GPUs per visited position
            si, pos = np.nonzero(g)
            parts_s.append(sl[si])
            parts_n.append(sc.tnode[lv_[si], pos, cl_[si]])
            parts_g.append(g[si, pos])
        m = kind == 1
        if m.any():
            parts_s.append(chosen[m])
            parts_n.append(sc.single[col[m]])
            parts_g.append(np.full(int(m.sum()), n))
        m = kind == 2
        if m.any():
            R = sc.ref_nodes.size
            parts_s.append(np.repeat(chosen[m], R))
            parts_n.append(np.tile(sc.ref_nodes, int(m.sum())))
            parts_g.append(np.tile(sc.ref_gpus, int(m.sum())))
        return (
            np.concatenate(parts_s).astype(np.int64),
            np.concatenate(parts_n).astype(np.int64),
            np.concatenate(parts_g).astype(np.int64),
        )
