"""Hadar-style primal-dual online scheduler (a reconstruction, not the authors' algorithm).

Hadar (Sultana et al., IPDPS 2024) is described in its abstract as a task-level
heterogeneity-aware scheduler solved with "a primal-dual framework plus a purpose-designed dual
subroutine", deciding in space and time. No source code or full text was available, so this
module implements hetsched's reconstruction of ``shared/reference/hadar.md`` §2: the OASiS
template (Bao et al., INFOCOM 2018) with task-level GPU-type mixing.

Mechanism, per slot of ``round_s`` seconds (one engine round):

* **Prices.** Each node h (one GPU type k per node in hetsched, so a (node, type) pair is a node)
  and future slot t has a price per GPU-slot ``p_h(t) = L_k (U_k/L_k)^(g_h(t)/c_h)``, where
  ``g_h(t)`` GPUs are already reserved out of ``c_h``. The reservations live in a sliding window
  of ``horizon`` slots, shape (N, H), shifted at every decision (the ring buffer of hadar.md).
* **Dual subroutine** (:meth:`Hadar.dual_subroutine`). For a job with ``n`` tasks and work ``W``:
  for every slot of the window it finds the cheapest placement per unit of progress
  (vectorised over nodes, candidate speed levels and slots), then for every candidate completion
  slot tau it takes whole slots in ascending cost per progress until the planned progress reaches
  ``W``; the schedule maximising ``mu = f(JCT estimate) - cost`` wins.
* **Acceptance.** ``mu > 0``: the plan is committed (reserved), raising prices. Otherwise the job is
  deferred and retried at the next slot; after ``max_deferrals`` deferrals the best plan is
  accepted regardless of ``mu`` (every job must finish here; pure OASiS would reject it).
* **Execution.** At each slot the tasks planned for it run; a job finishing early releases its
  remaining reservations (prices fall).

How a mixed-type placement maps onto the engine: an :class:`~hetsched.sim.allocation.Allocation`
may give one job entries on several nodes of different GPU types in the same round (the engine's
``validate`` checks each entry's type against the job's ``allowed_types`` and the gang's total
against ``min_gpus..max_gpus``, but never requires a single type). The engine then runs the job
at ``min`` over its entries of ``isolated(model, type_of_entry, total_gpus, spread) x phi x
interference``: an n-task gang on mixed types progresses like an n-GPU gang of its slowest type
(hadar.md's ``sync`` rule). Hadar dispatches one entry per (job, node) with ``share = -1`` (no
GPU space-sharing). No LP/MILP solver is used (the dual subroutine is closed-form numpy), so
there is no solver failure; a job no slot of the window can run gets no plan and is deferred.

Reconstruction choices beyond hadar.md (all documented in ``docs/reproduction_hadar.md``):

* **Progress rule.** The engine runs a gang spread over GPU types at the pace of its slowest part
  (:mod:`hetsched.sim.throughput`), i.e. hadar.md's ``sync`` rule; the ``additive`` rule cannot be
  expressed by the engine and is not offered. The planner's progress estimate is the engine's rate
  rule without interference: the slowest used node's isolated throughput at the job's GPU count
  (its unconsolidated throughput when the gang uses more nodes than it needs) times the node's
  CPU/memory factor at the node's per-GPU share.
* **Per-slot cheapest placement.** hadar.md ranks GPUs by ``p/r``; under ``sync`` the exact
  cheapest-per-progress set is found instead by enumerating the job's speed levels: for each
  level, the ``n`` cheapest GPUs among nodes at least that fast (mixing types when one type alone
  has too few free GPUs), plus the cheapest single node that fits the whole gang (consolidation).
* **Switching cost.** A slot whose placement differs from the job's reference placement (where it
  runs now, or its first feasible placement) has its progress discounted by the model's restart
  delay (``switch_aware``), so plans keep jobs in place unless moving is clearly cheaper.
* **Price bounds.** ``U_k`` and ``L_k`` are learned online from the first ``warmup_jobs`` arrivals
  (hadar.md §2.3 formulas; ``f^min = utility_floor * weight``) and then frozen; ``U_k >= e L_k``.
* **Long jobs.** A job that cannot finish inside the window gets a partial plan over every
  feasible slot; its cost is extrapolated to its whole work (``C * W / P``) for acceptance, and it
  is re-planned (forced) when its plan runs out.
* **Re-planning.** A started job whose plan ends before its (estimated) completion is re-planned
  at its last planned slot, keeping its placement when possible. Accepted jobs that have not
  started are re-planned when prices fell since they were planned (``refresh_waiting``; no
  restart cost, keeps the better plan), so an early completion can pull waiting jobs forward.
  hadar.md's periodic re-planning of running jobs is ``replan_every`` (off by default).
* **Margin.** Plans cover ``(1 + work_margin)`` times the remaining work, absorbing
  interference and restart delays the estimate does not see.
* **Backfilling** (``backfill``). After the slot's arrivals are planned, the GPUs no plan reserves
  in the current slot can no longer be sold to anyone, so their opportunity cost is the idle
  price ``L_k``. Jobs not planned for the slot are re-planned in arrival order with those GPUs at
  ``L_k`` and keep the new plan if it runs them now or beats their old plan's payoff. Without it,
  an overloaded cluster idles: once a job's JCT passes ``(1 + kappa) T*`` its utility sits at the
  floor, so it is indifferent to time and its plan takes the cheapest slots of the whole window,
  which the exponential prices spread thinly over hours (on ``sia_64`` with the Philly window,
  55 % of the plans were at the floor, their first slot spread over the 200-slot window and the
  cluster was 9 % utilised over the run: ``evaluate.py scheduler=hadar
  scheduler.hadar.backfill=false seed=0``, avg JCT 10.4 h against 2.2 h with backfilling).

Node failures (``SimState.node_up``, :meth:`Hadar._sync_nodes`): a node that is down offers no
GPUs in any slot of the window (``_cap`` is 0 there; the scheduler does not know when it will be
repaired) and is priced as fully reserved. Jobs whose plans use a down node from the current slot
on are released and re-planned at once (counted in :attr:`Hadar.failure_replans`); a job the
engine stopped at a failure restarts from its plan like any pending job. A repair restores the
node's capacity and counts as a price fall, so deferred and waiting jobs are re-evaluated.

Deferrals per job are kept in :attr:`Hadar.deferrals`; :meth:`Hadar.stats` summarises them.

Modules: this one holds the policy (settings, acceptance, re-planning, backfilling, node
failures, dispatch); :mod:`hetsched.baselines.hadar_prices` the price window, price bounds and
job constants and :mod:`hetsched.baselines.hadar_book` the committed plans (mixins of
:class:`Hadar`); :mod:`hetsched.baselines.hadar_dual` the dual subroutine (a mixin too) with its
numpy pieces in :mod:`hetsched.baselines.hadar_candidates` (per-slot placements) and
:mod:`hetsched.baselines.hadar_schedule` (completion-slot search, plan entries);
:mod:`hetsched.baselines.hadar_plan` the exponential price, utilities and plan records; and
:mod:`hetsched.baselines.hadar_kernels` the subroutine compiled with numba (used when numba is
installed; the same plans bit for bit, several times faster; ``HETSCHED_NUMBA=0`` runs the numpy
reference).
"""

import math
from dataclasses import dataclass

import numpy as np

from hetsched.baselines.base import BasePolicy
from hetsched.baselines.hadar_book import HadarBook
from hetsched.baselines.hadar_dual import HadarDual
from hetsched.baselines.hadar_plan import UTILITIES, HadarPlan, exp_price, utility_value
from hetsched.sim.allocation import Allocation
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import DONE, PENDING, RUNNING, SimState
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload


@dataclass
class HadarConf:
    """:class:`hetsched.baselines.hadar.Hadar` (Hadar-style primal-dual, a reconstruction).

    Attributes:
        round_s: Slot length Delta in seconds (one engine round).
        horizon: Planning window H in slots.
        utility: Utility shape f_i(JCT): ``linear`` (hadar.md default), ``sigmoid``, ``step``
            (deadline at ``kappa`` x T*) or ``constant`` (admission / throughput maximisation).
        kappa: Utility time scale in multiples of the best solo time T*.
        weight: Utility weight w_i of every job.
        utility_floor: f^min as a fraction of ``weight`` (utilities never fall below it).
        max_deferrals: D; a job deferred this many times is accepted at its next evaluation.
        warmup_jobs: Arrivals from which the price bounds U_k, L_k are learned, then frozen.
        replan_every: Re-plan every running job every R slots (0 = off, hadar.md default).
        refresh_waiting: Re-plan accepted, not yet started jobs when prices fell.
        work_margin: Plans cover (1 + margin) x the remaining work.
        switch_aware: Discount the progress of slots that move a job (restart delay).
        sticky: Keep a job on its reference placement in every slot where it is free; off: move
            whenever another placement is cheaper per progress (after the restart discount).
        backfill: Offer the GPUs no plan reserves in the current slot to jobs that wait, at the
            idle price L_k (that capacity perishes unsold at the end of the slot); off: run
            only the committed plans (GPUs may idle while jobs wait for cheap future slots).
    """

    _target_: str = "hetsched.baselines.hadar.Hadar"
    round_s: float = 360.0
    horizon: int = 200
    utility: str = "linear"
    kappa: float = 10.0
    weight: float = 1.0
    utility_floor: float = 0.01
    max_deferrals: int = 10
    warmup_jobs: int = 100
    replan_every: int = 0
    refresh_waiting: bool = True
    work_margin: float = 0.05
    switch_aware: bool = True
    sticky: bool = True
    backfill: bool = True


class Hadar(BasePolicy, HadarBook, HadarDual):
    """Hadar-style primal-dual online scheduler: a reconstruction from the paper's description.

    This is **not** the authors' algorithm (neither its code nor its full text was available); it
    is hetsched's reconstruction of the abstract's "primal-dual framework plus dual subroutine"
    in the OASiS template, as specified in ``shared/reference/hadar.md`` §2 and summarised in
    this module's docstring. Jobs are rigid gangs of ``req_gpus`` tasks that may mix GPU types;
    the engine runs a mixed gang at the pace of its slowest type (``sync``).

    Args: see :class:`HadarConf` (same names and defaults).

    Raises:
        ValueError: For a non-positive ``round_s``/``horizon``/``kappa``/``weight``, a
            ``utility_floor`` outside (0, 1], negative ``max_deferrals``/``replan_every``/
            ``work_margin``, ``warmup_jobs < 1`` or an unknown ``utility``.
    """

    name = "hadar"
    round_s: float = 360.0
    event_driven = False
    static_when_no_pending = False

    def __init__(
        self,
        round_s: float = 360.0,
        horizon: int = 200,
        utility: str = "linear",
        kappa: float = 10.0,
        weight: float = 1.0,
        utility_floor: float = 0.01,
        max_deferrals: int = 10,
        warmup_jobs: int = 100,
        replan_every: int = 0,
        refresh_waiting: bool = True,
        work_margin: float = 0.05,
        switch_aware: bool = True,
        sticky: bool = True,
        backfill: bool = True,
    ) -> None:
        checks = {
            "round_s": round_s > 0,
            "horizon": horizon >= 1,
            "kappa": kappa > 0,
            "weight": weight > 0,
            "utility_floor": 0 < utility_floor <= 1,
            "max_deferrals": max_deferrals >= 0,
            "warmup_jobs": warmup_jobs >= 1,
            "replan_every": replan_every >= 0,
            "work_margin": work_margin >= 0,
        }
        for key, ok in checks.items():
            if not ok:
                raise ValueError(
                    f"hadar {key}={locals()[key]!r} is out of range; see HadarConf for valid values"
                )
        if utility not in UTILITIES:
            raise ValueError(f"hadar utility={utility!r} is unknown; use one of {UTILITIES}")
        self.round_s = float(round_s)
        self.horizon = int(horizon)
        self.utility = utility
        self.kappa = float(kappa)
        self.weight = float(weight)
        self.utility_floor = float(utility_floor)
        self.max_deferrals = int(max_deferrals)
        self.warmup_jobs = int(warmup_jobs)
        self.replan_every = int(replan_every)
        self.refresh_waiting = bool(refresh_waiting)
        self.work_margin = float(work_margin)
        self.switch_aware = bool(switch_aware)
        self.sticky = bool(sticky)
        self.backfill = bool(backfill)

    # ------------------------------------------------------------------ setup
    def reset(
        self,
        cluster: Cluster,
        workload: Workload,
        throughput: ThroughputModel,
        rng: np.random.Generator,
    ) -> None:
        """Clear all reservations, prices, bounds and counters for a new run."""
        super().reset(cluster, workload, throughput, rng)
        N, H, J = cluster.num_nodes, self.horizon, workload.num_jobs
        K = cluster.gpus_per_type().shape[0]
        #: GPUs per node, shape (N,): ``_size`` physically, ``_cap`` those offered now (0 on a
        #: node that is down; see :meth:`_sync_nodes`).
        self._size = cluster.node_gpus.astype(np.int64)
        self._cap = self._size.copy()
        self._up = np.ones(N, dtype=bool)
        self._cmax = float(self._size.max())
        self.usage = np.zeros((N, H), dtype=np.int64)
        self._col_load = np.zeros(H, dtype=np.int64)
        self._price = np.zeros((N, H))
        self._order = np.zeros((N, H), dtype=np.int64)
        self._dirty = np.ones(H, dtype=bool)
        self.now_slot = 0
        self.now_time = float("nan")
        self._plans = {}
        self._info = {}
        self._levels_cache = {}
        self._seen = np.zeros(J, dtype=bool)
        self._accepted = np.zeros(J, dtype=bool)
        self._eval_epoch = np.full(J, -1, dtype=np.int64)
        self._epoch = 0
        # Per epoch (index), the earliest absolute slot whose price fell (-1: every slot).
        self._epoch_slot = np.full(64, -1, dtype=np.int64)
        self._table = None
        #: Deferrals per job (hadar.md §2.5 asks for this as a metric), shape (J,).
        self.deferrals = np.zeros(J, dtype=np.int64)
        #: Jobs accepted with mu <= 0 after ``max_deferrals`` deferrals (or re-plans), shape (J,).
        self.forced = np.zeros(J, dtype=bool)
        self.replans = 0
        #: Plans moved onto the current slot's unreserved GPUs (see :meth:`_backfill`).
        self.backfills = 0
        self._perish = False
        #: Re-plans of jobs whose plan used a node that went down.
        self.failure_replans = 0
        self.subroutine_calls = 0
        self._n_warm = 0
        self._warm = np.zeros(J, dtype=bool)
        self._U = np.full(K, -np.inf)
        self._L = np.full(K, np.inf)
        self._node_low = np.ones(N)
        self._node_ratio = np.full(N, math.e)
        self._price_lo = self._node_low[:, None]
        self._price_hl = (self._node_low * self._node_ratio)[:, None] / self._price_lo
        self._bounds_ready = False

    # ------------------------------------------------------------------ decision
    def _sync_nodes(self, state: SimState) -> None:
        """Follow node failures and repairs (``state.node_up``) in the capacity and the plans.

        A node that is down offers no GPUs in any slot of the window (its repair time is not
        known to the scheduler), and its GPUs count as reserved in its price. Every job whose
        plan uses a down node from the current slot on is released and re-planned (forced, from
        its remaining work; all of them are released first). A repair raises capacity, so prices
        fell: deferred and waiting jobs are evaluated again.
        """
        up = np.asarray(state.node_up, dtype=bool)
        if np.array_equal(up, self._up):
            return
        repaired = bool((up & ~self._up).any())
        self._up = up.copy()
        self._cap = np.where(up, self._size, 0)
        self._dirty[:] = True
        if repaired:
            self._bump(-1)
        job, slot, node, _, _, _, _ = self._tables()
        hit = np.unique(job[(slot >= self.now_slot) & ~up[node]])
        for j in hit.tolist():
            self._release(j)
        for j in hit.tolist():
            self._replan_started(j, state)
        self.failure_replans += int(hit.size)

    def _evaluate(self, j: int, *, forced: bool) -> bool:
        """Run the dual subroutine for an unplanned job; commit or defer. Returns committed."""
        plan = self.dual_subroutine(j)
        self._eval_epoch[j] = self._epoch
        if plan is None:
            self.deferrals[j] += 1
            return False
        force = forced or self.deferrals[j] >= self.max_deferrals
        if plan.mu > 0 or force:
            if plan.mu <= 0:
                self.forced[j] = True
            self._commit(plan)
            return True
        self.deferrals[j] += 1
        return False

    def _replan_started(self, j: int, state: SimState) -> None:
        """Forced re-plan of a committed job from the current slot, keeping its placement."""
        self._release(j)
        cur = state.current
        m = cur.job == j
        ref = (cur.node[m].astype(np.int64), cur.gpus[m].astype(np.int64)) if m.any() else None
        work = float(state.remaining[j]) * (1.0 + self.work_margin)
        plan = self.dual_subroutine(j, work=work, ref=ref)
        self.replans += 1
        if plan is not None:
            self._commit(plan)

    def _refresh(self, j: int) -> None:
        """Re-plan an accepted job that has not started; keep the better plan."""
        old = self._release(j)
        plan = self.dual_subroutine(j)
        self._eval_epoch[j] = self._epoch
        if old is None:
            if plan is not None:
                self._commit(plan)
            return
        old_mu = self._stored_mu(j, old)
        if plan is not None and (plan.mu > old_mu or not (old.slot >= self.now_slot).any()):
            self._commit(plan)
        else:
            self._restore(j, old)

    def decide(self, state: SimState) -> Allocation:
        """Advance the price window, plan arrivals / deferred jobs, and run this slot's tasks."""
        self._shift(state.time)
        wl = state.workload
        act = state.active
        now = self.now_slot
        # 1) Jobs that completed: release what is left of their plans.
        if self._plans:
            planned = np.fromiter(self._plans.keys(), dtype=np.int64, count=len(self._plans))
            for j in planned[state.status[planned] == DONE].tolist():
                self._release(j)
        self._sync_nodes(state)
        if act.size == 0:
            return Allocation.empty()
        # Warm-up of the price bounds from arrivals, in arrival order.
        new = act[~self._seen[act]]
        self._seen[new] = True
        for j in new.tolist():
            self._job_info(j)
            self._learn_bounds(j)
        # 2) Optional periodic re-planning of every committed job (hadar.md §2.5).
        acc = act[self._accepted[act]]
        if self.replan_every > 0 and now % self.replan_every == 0:
            for j in acc.tolist():
                self._replan_started(j, state)
        # 3) Committed jobs whose plan ends before their estimated completion.
        if acc.size:
            J = wl.num_jobs
            _, _, _, _, pj, ps, pp = self._tables()
            sel = ps >= now
            planned_prog = np.bincount(pj[sel], weights=pp[sel], minlength=J)
            future = np.bincount(pj[ps > now], minlength=J)
            short = acc[(state.remaining[acc] > planned_prog[acc]) & (future[acc] == 0)]
            for j in short.tolist():
                self._replan_started(j, state)
        # 4) New arrivals and deferred jobs (arrival order); refresh waiting accepted jobs.
        todo = act[~self._accepted[act]]
        for j in todo.tolist():
            unchanged = self._eval_epoch[j] == self._epoch
            if unchanged and self.deferrals[j] < self.max_deferrals:
                self.deferrals[j] += 1  # prices did not fall: mu cannot have become positive
                continue
            self._evaluate(j, forced=False)
        if self.refresh_waiting:
            waiting = act[self._accepted[act] & np.isnan(state.start_time[act])]
            for j in waiting.tolist():
                p = self._plans.get(j)
                if p is None or not p.slot.size or int(p.slot.min()) <= now:
                    continue  # starts now anyway
                if not self._prices_fell_before(j, int(p.slot.max())):
                    continue  # no earlier or cheaper slot than its plan can have appeared
                self._refresh(j)
        if self.backfill:
            self._backfill(state)
        return self._dispatch(state)

    def _backfill(self, state: SimState) -> None:
        """Re-plan waiting jobs onto the GPUs no plan reserves in the current slot.

        Once this slot's arrivals are planned, its unreserved GPUs can no longer be sold: their
        opportunity cost is the idle price ``L_k``, not the partial-occupancy price the window
        shows. Jobs not planned for this slot (accepted ones waiting for later slots, started
        ones paused by their plan, deferred ones) are re-planned in arrival order with the
        current slot's free GPUs at ``L_k``; a new plan is kept only if it runs the job now
        (a deferred job also needs ``mu > 0``) or if it beats the old plan's payoff at the current
        prices (which can change without falling, so ``refresh_waiting`` missed it); else the old
        plan is restored. Reservations of
        other jobs are never touched, so no committed plan is delayed (EASY-style backfilling).
        """
        free0 = self._cap - self.usage[:, 0]
        if free0.max() <= 0:
            return
        now = self.now_slot
        job, slot, _, _, _, _, _ = self._tables()
        act = state.active
        live = (state.status[act] == PENDING) | (state.status[act] == RUNNING)
        cand = act[live & ~np.isin(act, job[slot == now])]
        if cand.size == 0:
            return
        cur = state.current
        self._perish = True
        self._dirty[0] = True
        try:
            for j in cand.tolist():
                info = self._job_info(j)
                free0 = self._cap - self.usage[:, 0]
                if int(free0[info.rate > 0].sum()) < info.n:
                    continue  # cannot run now: skip without a subroutine call
                epoch = self._epoch
                old = self._release(j)
                if old is None and self._accepted[j]:
                    continue  # accepted, plan exhausted: step 3 re-plans it
                m = cur.job == j
                ref = (
                    (cur.node[m].astype(np.int64), cur.gpus[m].astype(np.int64))
                    if m.any()
                    else None
                )
                work = float(state.remaining[j]) * (1.0 + self.work_margin)
                plan = self.dual_subroutine(j, work=work, ref=ref)
                if plan is None:
                    keep = False
                elif int(plan.slots[0]) == 0:
                    keep = old is not None or plan.mu > 0
                else:  # a better plan at the true prices (they changed since it was planned)
                    keep = old is not None and plan.mu > self._stored_mu(j, old)
                if keep and plan is not None:
                    self._commit(plan)
                    self.backfills += 1
                elif old is not None:
                    self._restore(j, old)
                    self._epoch = epoch  # nothing was freed after all
        finally:
            self._perish = False
            self._dirty[0] = True

    def _dispatch(self, state: SimState) -> Allocation:
        """The entries planned for the current slot, with per-GPU CPU/memory shares."""
        job, slot, node, gpus, _, _, _ = self._tables()
        sel = slot == self.now_slot
        job, node, gpus = job[sel], node[sel], gpus[sel]
        ok = (state.status[job] == RUNNING) | (state.status[job] == PENDING)
        ok &= ~np.isin(job, job[~state.node_up[node]])  # never a gang with a part on a down node
        job, node, gpus = job[ok], node[ok], gpus[ok]
        if job.size == 0:
            return Allocation.empty()
        cl, wl = state.cluster, state.workload
        cpus = gpus * np.minimum(wl.cpu_per_gpu[job], cl.node_cpus[node] / cl.node_gpus[node])
        mem = gpus * np.minimum(wl.mem_per_gpu[job], cl.node_mem[node] / cl.node_gpus[node])
        return Allocation(job, node, gpus, cpus, mem, np.full(job.size, -1, dtype=np.int64))

    # ------------------------------------------------------------------ reporting
    def stats(self) -> dict[str, float]:
        """Run summary: mean / max deferrals, forced acceptances, re-plans, subroutine calls."""
        seen = self._seen
        d = self.deferrals[seen]
        return {
            "deferrals_mean": float(d.mean()) if d.size else 0.0,
            "deferrals_max": float(d.max()) if d.size else 0.0,
            "forced_frac": float(self.forced[seen].mean()) if d.size else 0.0,
            "replans": float(self.replans),
            "failure_replans": float(self.failure_replans),
            "backfills": float(self.backfills),
            "subroutine_calls": float(self.subroutine_calls),
        }


__all__ = ["Hadar", "HadarConf", "HadarPlan", "exp_price", "utility_value"]
