"""Decision rounds of the env (a mixin of :class:`~hetsched.envs.core.EnvCore`).

A round starts at a simulator round boundary (:meth:`RoundFlow._start_round`), the agents'
placements build its allocation (:meth:`RoundFlow._add_entries`, :meth:`RoundFlow.refresh`), and
:meth:`RoundFlow.end_decision` advances the simulator when the round is over; the rules are
documented in :mod:`hetsched.envs.core`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from hetsched.envs.core_state import BIG_ROUNDS, StepStats
from hetsched.envs.features import NUM_TYPES, MaskArrays
from hetsched.envs.kernels_engine import engine_round, fast_advance
from hetsched.envs.window import WindowRules
from hetsched.sim.allocation import Allocation
from hetsched.sim.engine import RoundRecord


class RoundFlow(WindowRules):
    """Round start, window and masks, time advance and stall detection."""

    def _start_round(self) -> None:
        sim, wl = self.sim, self.wl
        assert sim is not None and wl is not None
        cl = self.cluster
        cur = sim.current
        N = self.N
        self._cur = cur
        self._round_alloc = cur
        start = engine_round(sim).usage(cur) if self._engine_compiled else None
        pend = None
        n_jobs = -1
        if start is not None:  # the same numbers as _free_of and below, compiled (kernels_engine)
            self.free_g, self.free_c, self.free_m, self._count, n_jobs, pend = start
        else:
            kernel = self._round_kernel
            if cur.size and kernel is not None:  # the same numbers, compiled (kernels_step)
                self.free_g = np.empty(N, dtype=np.int64)
                self.free_c, self.free_m = np.empty(N), np.empty(N)
                self._count = np.empty(N, dtype=np.int64)
                n_jobs = kernel(
                    cur.node, cur.job, cur.gpus, cur.cpus, cur.mem, cur.share, self.J,
                    cl.node_gpus, cl.node_cpus, cl.node_mem, self.free_g, self.free_c,
                    self.free_m, self._count,
                )  # fmt: skip
            if n_jobs < 0:
                self._free_of(cur)
        if self.failures is not None:
            up = sim.node_up
            self.node_up[:] = up
            if not up.all():  # a down node offers nothing
                self.free_g = np.where(up, self.free_g, 0)
                self.free_c = np.where(up, self.free_c, 0.0)
                self.free_m = np.where(up, self.free_m, 0.0)
        self._new: list[Allocation] = []  # one per placement this round
        self._placed[:] = False
        if n_jobs < 0:
            # Entries per node this round (resident-slot features are built when observed).
            self._count = np.bincount(cur.node, minlength=N).astype(np.int64)
            n_jobs = len(set(cur.job.tolist()))
        self._n_cur_jobs = n_jobs  # distinct running jobs
        self._n_new_jobs = 0
        self.pending = self._in_window_order(sim.pending_jobs() if pend is None else pend)
        self.decision_step = 0
        self.refused_step = False
        self._evict_map = None
        if self.cfg.preemptive:
            self.evicted_this_round[:] = False
        if self.cfg.reclaim_cores and cur.size:
            self._lend()
        self.refresh()

    def _lend(self) -> None:
        """``EnvSettings.reclaim_cores`` for the cores, then the memory: per node, give
        taken-back grants back out of what the free GPUs' share leaves (largest debt first);
        where a waiting job fits the free GPUs and they lack their share, take grants above
        the request back (largest excess first)."""
        cur, cl, wl = self._cur, self.cluster, self.wl
        assert wl is not None
        N, node, job, g, p = self.N, cur.node, cur.job, cur.gpus, self.pending
        ok = wl.allowed_types[p][:, cl.node_type] & (wl.min_gpus[p][:, None] <= self.free_g)
        fits = ok.any(axis=0)  # (N,) some waiting job fits the node's free GPUs
        per = np.maximum(cl.node_gpus, 1).astype(np.float64)
        held = {"cpus": cur.cpus.copy(), "mem": cur.mem.copy()}
        for i, (key, free, cap, req) in enumerate(
            (
                ("cpus", self.free_c, cl.node_cpus, wl.cpu_per_gpu),
                ("mem", self.free_m, cl.node_mem, wl.mem_per_gpu),
            )
        ):
            vals = held[key]
            lack = self.free_g * (cap / per) - free  # (N,) > 0: the free GPUs lack this much
            debt = np.maximum(g * self._granted[i, job] - vals, 0.0)  # (E,) taken back
            back = _give(node, debt, np.where(lack < 0, -lack, 0.0))
            over = np.maximum(vals - g * req[job], 0.0)  # (E,) above the request
            take = _give(node, over, np.where(fits & (lack > 0), lack, 0.0))
            vals += back - take
            free -= np.bincount(node, weights=back - take, minlength=N)
        self._cur = Allocation._of_arrays(job, node, g, held["cpus"], held["mem"], cur.share)
        self._round_alloc = self._cur

    def _free_of(self, cur: Allocation) -> None:
        """Free GPUs, CPU cores and GiB per node left by ``cur`` (the numpy path)."""
        cl, N = self.cluster, self.N
        if cur.size == 0:
            self.free_g = np.array(cl.node_gpus, dtype=np.int64)
            self.free_c = np.array(cl.node_cpus, dtype=np.float64)
            self.free_m = np.array(cl.node_mem, dtype=np.float64)
        elif int(cur.share.max()) < 0:  # no space sharing (always so for the env's entries)
            node = cur.node
            used_g = np.bincount(node, weights=cur.gpus, minlength=N)
            self.free_g = cl.node_gpus - used_g.astype(np.int64)
            self.free_c = cl.node_cpus - np.bincount(node, weights=cur.cpus, minlength=N)
            self.free_m = cl.node_mem - np.bincount(node, weights=cur.mem, minlength=N)
        else:
            self.free_g = cl.node_gpus - cur.used_gpus_per_node(N)
            self.free_c = cl.node_cpus - cur.used_cpus_per_node(N)
            self.free_m = cl.node_mem - cur.used_mem_per_node(N)

    def _job_flags(self) -> None:
        """Per-job flags of an episode (shape (J,) each): placed this round, evictions so far
        (``evict_max``), evicted this round; cores and memory per GPU granted at placement
        (shape (2, J), for ``reclaim_cores``)."""
        self._granted = np.zeros((2, self.J), dtype=np.float64)
        self._placed = np.zeros(self.J, dtype=bool)
        self._evicted_n = np.zeros(self.J, dtype=np.int64)
        self.evicted_this_round = np.zeros(self.J, dtype=bool)

    def _add_entries(
        self,
        jobs: NDArray[np.int64],
        nodes: NDArray[np.int64],
        gpus: NDArray[np.int64],
        cpus: NDArray[np.float64],
        mem: NDArray[np.float64],
    ) -> None:
        """Record new entries (distinct nodes) in the round's allocation and free resources.

        The arrays must be 1-D with the :class:`Allocation` field dtypes (int64 / float64): they
        are wrapped without conversion.
        """
        assert self.sim is not None and self.wl is not None
        self.free_g[nodes] -= gpus
        self.free_c[nodes] -= cpus
        self.free_m[nodes] -= mem
        self._granted[0, jobs] = cpus / gpus
        self._granted[1, jobs] = mem / gpus
        share = np.full(jobs.shape[0], -1, dtype=np.int64)
        self._new.append(Allocation._of_arrays(jobs, nodes, gpus, cpus, mem, share))
        self._round_alloc = None
        self._count[nodes] += 1  # distinct nodes: no repeated index
        self._placed[jobs] = True
        self._n_new_jobs += len(set(jobs.tolist()))  # distinct jobs (a gang repeats its job)

    def refresh(self) -> None:
        """Recompute the window, the masks and the cached observation parts."""
        assert self.jt is not None and self.wl is not None
        kernel = self._window_kernel
        if kernel is not None:  # the same window and test, compiled (kernels_step)
            win, self.slot_ok = np.empty(self.K, dtype=np.int64), np.empty(self.K, dtype=bool)
            fits = kernel(
                self.pending, self._placed, self.jt.min_gpus, self.free_g, self.node_up,
                self.failures is not None, self.cluster.node_type, NUM_TYPES, win, self.slot_ok,
                self.cfg.window_backfill, self.jt.allowed,
            )  # fmt: skip
        else:
            rest = self.window_jobs()
            win = np.full(self.K, -1, dtype=np.int64)
            win[: rest.size] = rest
            self.slot_ok = win >= 0
            fits = self._may_fit(rest)
        self.window = win
        if not fits:
            self.ma = self._empty_masks()
            self._any_legal = False
        else:
            self.ma = self.features.masks(
                self.jt,
                self.wl,
                win,
                self.slot_ok,
                self.free_g,
                self.free_c,
                self.free_m,
                self.node_up,
            )
            self._any_legal = None  # computed when first asked
        self.ma = self._with_slot_actions(self.ma)
        self._obs_cache = self._common_cache = None

    def _empty_masks(self) -> MaskArrays:
        """Masks with only the no-op legal (same shapes as :meth:`FeatureBuilder.masks`)."""
        if self._empty is None:
            lg, lc, lm = self.cfg.levels.sizes
            N, K = self.N, self.K
            z5 = np.zeros((N, K, lg, lc, lm), dtype=bool)
            self._empty = MaskArrays(
                mask=np.zeros((N, self.codec.n), dtype=np.int8),
                legal=z5,
                single=z5,
                cpu_per_gpu=np.ones((N, K, lc)),
                mem_per_gpu=np.ones((N, K, lm)),
                mem_ok=np.zeros((N, K, lm), dtype=bool),
                fits_any=np.zeros((N, K), dtype=bool),
                fits_one=np.zeros((N, K), dtype=bool),
            )
        mask = np.zeros((self.N, self.codec.n), dtype=np.int8)
        mask[:, 0] = 1
        e = self._empty
        return MaskArrays(
            mask, e.legal, e.single, e.cpu_per_gpu, e.mem_per_gpu, e.mem_ok, e.fits_any, e.fits_one
        )

    @property
    def any_legal(self) -> bool:
        """Some agent has a legal placement."""
        if self._any_legal is None:  # once per refresh of the masks
            self._any_legal = bool(self.ma.mask[:, 1 : self.n_place].any())
        return self._any_legal

    def round_allocation(self) -> Allocation:
        """Running jobs plus everything placed so far this round (built once per change)."""
        a = self._round_alloc
        if a is None:
            a = Allocation.concat([self._cur, *self._new]) if self._new else self._cur
            self._round_alloc = a
        return a

    def _future_arrivals(self) -> bool:
        """A job still arrives, or a down node comes back (so waiting jobs may run later)."""
        assert self.sim is not None and self.wl is not None
        if self.failures is not None and not self.node_up.all():
            return True
        return bool(np.searchsorted(self.wl.arrival, self.sim.time, side="right") < self.J)

    def _max_rounds(self, alloc: Allocation, jump: bool, env_built: bool) -> int:
        sim = self.sim
        assert sim is not None
        mode = self.cfg.advance
        if alloc.size == 0 and not self._future_arrivals():
            return 1
        if jump or mode == "event":
            return BIG_ROUNDS
        if mode == "no_pending":
            if env_built:  # running jobs are all kept: nothing waits iff all pending are placed
                return BIG_ROUNDS if self._n_new_jobs >= self.pending.size else 1
            active = sim.active_jobs()
            return BIG_ROUNDS if bool(np.isin(active, alloc.job).all()) else 1
        return 1

    def _account_admissions(self, stats: StepStats) -> None:
        """Add each newly admitted job's time from arrival to admission to the integral."""
        assert self.sim is not None and self.jt is not None and self.wl is not None
        hi = int(np.searchsorted(self.wl.arrival, self.sim.time, side="right"))
        lo = self._admitted
        if hi > lo:
            cs = self.jt.arrival_cumsum
            extra = (hi - lo) * self.sim.time - (cs[hi] - cs[lo])
            stats.jobs_s += float(extra)
            self.episode_jobs_s += float(extra)
            self._admitted = hi

    def _advance(self, alloc: Allocation, stats: StepStats, *, trusted: bool, jump: bool) -> None:
        sim = self.sim
        assert sim is not None
        sim.trusted = trusted and not self.cfg.validate_allocations
        try:
            max_rounds = self._max_rounds(alloc, jump, trusted)
            rec: RoundRecord | None = None
            if sim.trusted and self._engine_compiled:  # the same step, compiled (or None)
                rec = fast_advance(sim, alloc, self.cfg.round_s, max_rounds)
            if rec is None:
                rec = sim.advance(alloc, round_s=self.cfg.round_s, max_rounds=max_rounds)
        finally:
            sim.trusted = False
        self.last_alloc = alloc
        if self._progress_w is not None:  # progress shaping: the potential's drop
            phi = float(sim.remaining @ self._progress_w)
            stats.progress_gpu_s += self._phi - phi
            self._phi = phi
        stats.jobs_s += rec.jobs_in_system_s
        self.episode_jobs_s += rec.jobs_in_system_s
        stats.rounds += rec.rounds
        self._n_done += int(rec.completed.size)
        self._account_admissions(stats)
        self._start_round()

    def _skip_idle(self, stats: StepStats) -> None:
        """Advance while no agent has a legal placement (to the next arrival or completion)."""
        sim = self.sim
        assert sim is not None
        while not sim.done and not self.any_action:
            alloc = self.round_allocation()
            if self._stalls(alloc):
                return
            self._advance(alloc, stats, trusted=True, jump=True)

    def _stalls(self, alloc: Allocation) -> bool:
        """Set and return :attr:`stalled`: nothing runs, nothing fits, nothing will change.

        With ``alloc`` (this round's allocation) empty, no legal placement and no arrival or node
        repair to come, the waiting jobs can never be placed.
        """
        if alloc.size == 0 and not self.any_action and not self._future_arrivals():
            self.stalled = True  # stays set for the rest of the episode
            self.stall_reason = self.stall_reason or "unplaceable"
        return self.stalled

    def _count_progress(self, offered: bool, moved: bool) -> None:
        """Count decision steps without progress; stall after ``EnvSettings.stall_steps``.

        Args:
            offered: Some agent had a legal action at the step's start.
            moved: A job was placed, or the round's time advanced with jobs running.
        """
        if moved:
            self.no_progress_steps = 0
            return
        if not offered:  # nothing to do: waiting for an arrival is not the policy's stall
            return
        self.no_progress_steps += 1
        lim = self.cfg.stall_steps
        if lim is not None and self.no_progress_steps >= lim and not self.stalled:
            self.stalled = True
            self.stall_reason = "no_progress"

    def end_decision(self, placed_any: bool, stats: StepStats) -> None:
        """Close a decision step: advance the round if it is over (see the module docstring).

        Args:
            placed_any: The step placed or evicted a job.
            stats: Where the step's counts and reward parts accumulate.
        """
        self.decision_step += 1
        # Without a placement or eviction the masks are those the agents saw (less the claims
        # a refused step masked: EnvSettings.retry_refused).
        refused, self.refused_step = self.refused_step, False
        offered = placed_any or self.any_action
        moved = stats.placed > 0
        if (
            not (placed_any or refused)
            or not self.any_action
            or self.decision_step >= self.cfg.max_decisions_per_round
        ):
            # Nothing fits: with skip_idle, jump straight to the next arrival or completion
            # (the same boundaries as one round followed by _skip_idle, in one engine call).
            jump = self.cfg.skip_idle and not self.any_action
            alloc = self.round_allocation()
            moved = moved or alloc.size > 0
            if self._stalls(alloc):
                return
            self._advance(alloc, stats, trusted=True, jump=jump)
            if self.cfg.skip_idle:
                self._skip_idle(stats)
        self._count_progress(offered, moved)
        if self.done:
            self._finish(stats)

    def apply_allocation(self, alloc: Allocation, stats: StepStats) -> None:
        """The allocation action: replace this round's allocation by ``alloc`` and advance.

        Used by :mod:`hetsched.envs.adapters` when a fixed policy's decision cannot be written
        as per-agent actions (it preempts or moves a running job, places a job outside the
        window, or uses amounts off the level grid). The engine validates ``alloc``.

        Raises:
            hetsched.sim.errors.AllocationError: If ``alloc`` is invalid.
        """
        offered = self.any_action
        self._advance(alloc, stats, trusted=False, jump=False)
        self._count_progress(offered, alloc.size > 0)
        if self.cfg.skip_idle:
            self._skip_idle(stats)
        if self.done:
            self._finish(stats)

    def _finish(self, stats: StepStats) -> None:
        assert self.sim is not None and self.wl is not None
        fin = self.sim.finish_time
        if np.isfinite(fin).any():
            stats.makespan_s = float(np.nanmax(fin) - self.wl.arrival.min())
        stats.terminal = True

    def take_pending_stats(self, stats: StepStats) -> None:
        """Fold what happened during reset (admission waits, skipped rounds) into ``stats``."""
        p = self._pending_stats
        if p.jobs_s or p.rounds:
            stats.jobs_s += p.jobs_s
            stats.rounds += p.rounds
            stats.progress_gpu_s += p.progress_gpu_s
        self._pending_stats = StepStats()


def _give(
    node: NDArray[np.int64], want: NDArray[np.float64], room: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Amounts per entry, shape (E,): each node's ``room`` (N,) shared out to its entries'
    ``want`` (E,), largest want first, each in full while the room lasts (the last one in
    part)."""
    out = np.zeros_like(want)
    e = np.flatnonzero((want > 1e-9) & (room[node] > 1e-9))
    if e.size == 0:
        return out
    e = e[np.lexsort((-want[e], node[e]))]  # node by node, largest first
    n, w = node[e], want[e]
    before = np.cumsum(w) - w
    first = np.r_[0, np.flatnonzero(n[1:] != n[:-1]) + 1]
    before -= np.repeat(before[first], np.diff(np.r_[first, e.size]))
    out[e] = np.clip(room[n] - before, 0.0, w)
    return out
