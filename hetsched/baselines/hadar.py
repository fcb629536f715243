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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hetsched.baselines.base import BasePolicy
from hetsched.sim.allocation import Allocation
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import DONE, PENDING, RUNNING, SimState
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

UTILITIES = ("linear", "sigmoid", "step", "constant")
_MAX_LEVELS = 8  # speed floors searched per job
# Below these sizes the dual subroutine uses its dense forms (fewer, larger numpy calls): floors x
# nodes x slots of the candidate search, completion slots x ranked slots of the schedule search.
_DENSE_CELLS = 40_000
_DENSE_SCHEDULE = 20_000


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


def exp_price(
    util: FloatArray | float, low: FloatArray | float, high: FloatArray | float
) -> FloatArray:
    """Exponential resource price ``low * (high / low) ** util``.

    Args:
        util: Utilisation in [0, 1] (reserved / capacity), any shape.
        low: Price at zero utilisation L (> 0), broadcastable to ``util``.
        high: Price at full utilisation U (>= L), broadcastable to ``util``.

    Returns:
        Price per GPU-slot, the broadcast shape.
    """
    u = np.asarray(util, dtype=np.float64)
    lo = np.asarray(low, dtype=np.float64)
    hi = np.asarray(high, dtype=np.float64)
    return np.asarray(lo * np.power(hi / lo, u), dtype=np.float64)


def utility_value(
    kind: str,
    jct_s: FloatArray | float,
    t_star_s: float,
    *,
    weight: float = 1.0,
    kappa: float = 10.0,
    floor: float = 0.01,
) -> FloatArray:
    """Utility f_i of a job completing after ``jct_s`` seconds (non-increasing in the JCT).

    Args:
        kind: ``linear``: ``w * (1 - (d - T*) / (kappa T*))``; ``sigmoid``: a smooth step centred
            at ``(1 + kappa/2) T*``; ``step``: ``w`` up to the deadline ``kappa T*``;
            ``constant``: ``w``.
        jct_s: Estimated JCT(s) in seconds, any shape.
        t_star_s: The job's best solo time T* in seconds (> 0).
        weight: w_i.
        kappa: Time scale in multiples of T*.
        floor: f^min as a fraction of ``weight``; every value is clipped to [floor w, w].

    Returns:
        Utility values, the shape of ``jct_s``.

    Raises:
        ValueError: For an unknown ``kind``.
    """
    d = np.asarray(jct_s, dtype=np.float64) / max(t_star_s, 1e-9)
    if kind == "linear":
        v = 1.0 - (d - 1.0) / kappa
    elif kind == "sigmoid":
        z = np.clip((d - 1.0 - 0.5 * kappa) * (8.0 / kappa), -50.0, 50.0)
        v = 1.0 / (1.0 + np.exp(z))
    elif kind == "step":
        v = np.where(d <= kappa, 1.0, 0.0)
    elif kind == "constant":
        v = np.ones_like(d)
    else:
        raise ValueError(f"hadar utility={kind!r} is unknown; use one of {UTILITIES}")
    return np.asarray(weight * np.clip(v, floor, 1.0), dtype=np.float64)


def _greedy_cuts(
    sig: IntArray,
    p_sig: FloatArray,
    c_sig: FloatArray,
    pos: BoolArray,
    taus: IntArray,
    Wt: float,
    blocks: bool = True,
) -> tuple[IntArray, FloatArray, IntArray]:
    """Greedy schedules for several completion slots (the OASiS search of the dual subroutine).

    For completion slot tau, the slots ``<= tau`` with progress are taken in the rank order
    ``sig`` until their progress reaches ``Wt``. The cut (in rank) never grows with tau, so the
    rows are processed in blocks of growing size, each only as wide as its first row's cut.

    Args:
        sig: Slots by rank (cheapest per progress first), shape (S,).
        p_sig: Progress of each ranked slot, shape (S,).
        c_sig: Cost of each ranked slot, shape (S,).
        pos: Whether each ranked slot has progress, shape (S,).
        taus: Completion slots, ascending; the first reaches ``Wt``, shape (R,).
        Wt: Work to reach.
        blocks: Blocks of growing size (large searches); off: one block as wide as ``sig``.

    Returns:
        ``(k, cost, last)`` per completion slot, shape (R,): the rank of the last slot taken,
        the summed cost in rank order and the latest slot taken.
    """
    R = taus.size
    edges = [0]
    b = 2
    while blocks and b < R:
        edges.append(b)
        b *= 4
    edges.append(R)
    if blocks:
        heads = taus[edges[:-1]]
        mh = (sig[None, :] <= heads[:, None]) & pos[None, :]
        kh = (np.cumsum(np.where(mh, p_sig[None, :], 0.0), axis=1) >= Wt).argmax(axis=1)
    else:
        kh = np.array([sig.size - 1])
    k = np.zeros(R, dtype=np.int64)
    cost = np.zeros(R)
    last = np.zeros(R, dtype=np.int64)
    for h in range(len(edges) - 1):
        lo, hi, w = edges[h], edges[h + 1], int(kh[h]) + 1
        m = (sig[None, :w] <= taus[lo:hi, None]) & pos[None, :w]
        kk = (np.cumsum(np.where(m, p_sig[None, :w], 0.0), axis=1) >= Wt).argmax(axis=1)
        rows = np.arange(hi - lo)
        k[lo:hi] = kk
        cost[lo:hi] = np.cumsum(np.where(m, c_sig[None, :w], 0.0), axis=1)[rows, kk]
        last[lo:hi] = np.maximum.accumulate(np.where(m, sig[None, :w], -1), axis=1)[rows, kk]
    return k, cost, last


@dataclass
class HadarPlan:
    """One job's schedule found by the dual subroutine (slots relative to the current slot).

    Attributes:
        job: Job index.
        slots: Chosen slots, ascending, relative to the current slot (0 = now), shape (S,).
        progress: Estimated progress per chosen slot in work units, shape (S,).
        entry_slot: Relative slot of each placement entry, shape (E,).
        entry_node: Node of each entry, shape (E,).
        entry_gpus: GPUs of each entry, shape (E,).
        cost: Sum of the prices of the reserved GPU-slots (extrapolated to the whole work for a
            partial plan).
        utility: f_i at the estimated completion.
        mu: ``utility - cost`` (the job's dual payoff).
        finish_s: Estimated completion time, absolute seconds.
        partial: Whether the plan covers only part of the work (the job outlasts the window).
    """

    job: int
    slots: IntArray
    progress: FloatArray
    entry_slot: IntArray
    entry_node: IntArray
    entry_gpus: IntArray
    cost: float
    utility: float
    mu: float
    finish_s: float
    partial: bool = False


@dataclass
class _Stored:
    """A committed plan in absolute slot numbers."""

    slot: IntArray  # (E,) absolute slot of each entry
    node: IntArray
    gpus: IntArray
    pslot: IntArray  # (S,) absolute slots
    pprog: FloatArray  # (S,) estimated progress
    finish_s: float
    epoch: int


@dataclass
class _JobInfo:
    """Per-job planning constants (computed at first sight)."""

    n: int
    t_star: float
    rate: FloatArray  # (N,) packed isolated rate x CPU/mem factor per node, 0 = ineligible
    rate_spread: FloatArray  # (N,) the same when the gang is spread over extra nodes
    restart_s: float
    arrival: float


@dataclass
class _SlotChoice:
    """Per-slot cheapest placement of one job (internal to the dual subroutine)."""

    cost: FloatArray  # (H,)
    prog: FloatArray  # (H,) 0 = infeasible
    kind: IntArray  # (He,) 0 multi-node, 1 single node, 2 reference placement
    level: IntArray  # (He,)
    single: IntArray  # (He,) node of the single-node candidate
    take: IntArray  # (Lv, P, He) GPUs per visited position of the multi candidates
    tnode: IntArray  # (Lv, P, He) node at each visited position
    ref_nodes: IntArray
    ref_gpus: IntArray
    He: int
    free: IntArray  # (N, He) free GPUs per node and slot (the job's own plan released)
    price: FloatArray  # (N, He)


class Hadar(BasePolicy):
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
        #: Reserved GPUs per node and slot of the window, shape (N, H); column 0 = current slot.
        self.usage = np.zeros((N, H), dtype=np.int64)
        self._col_load = np.zeros(H, dtype=np.int64)
        self._price = np.zeros((N, H))
        self._order = np.zeros((N, H), dtype=np.int64)
        self._dirty = np.ones(H, dtype=bool)
        self.now_slot = 0
        self.now_time = float("nan")
        self._plans: dict[int, _Stored] = {}
        self._info: dict[int, _JobInfo] = {}
        self._seen = np.zeros(J, dtype=bool)
        self._accepted = np.zeros(J, dtype=bool)
        self._eval_epoch = np.full(J, -1, dtype=np.int64)
        self._epoch = 0
        # Per epoch (index), the earliest absolute slot whose price fell (-1: every slot).
        self._epoch_slot = np.full(64, -1, dtype=np.int64)
        self._table: (
            tuple[IntArray, IntArray, IntArray, IntArray, IntArray, IntArray, FloatArray] | None
        ) = None
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
        self._node_L = np.ones(N)
        self._node_ratio = np.full(N, math.e)
        self._bounds_ready = False

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
        ok = np.isfinite(self._L) & np.isfinite(self._U)
        if not ok.any():
            return
        L = np.where(ok, self._L, self._L[ok].min())
        U = np.where(ok, self._U, self._U[ok].max())
        U = np.maximum(U, math.e * L)  # alpha = ln(U/L) >= 1
        k = self.cluster.node_type
        self._node_L = L[k]
        self._node_ratio = U[k] / L[k]
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
        p = exp_price(util, self._node_L[:, None], (self._node_L * self._node_ratio)[:, None])
        self._price[:, cols] = p
        free = self._cap[:, None] - use
        # Ties (equal price): prefer the node with more free GPUs, then the lower index.
        key = p * (1.0 + 1e-7 * (self._cmax - free) / self._cmax)
        self._order[:, cols] = np.argsort(key, axis=0, kind="stable")
        self._dirty[cols] = False

    def _reserve(self, rel: IntArray, node: IntArray, gpus: IntArray, sign: int) -> None:
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
        self._refresh_prices()
        H = self.horizon
        used_cols = np.flatnonzero(self._col_load > 0)
        He = min(H, int(used_cols[-1]) + 2) if used_cols.size else 1
        n = info.n
        free = self._cap[:, None] - self.usage[:, :He]  # (N, He)
        price = self._price[:, :He]
        order = self._order[:, :He]
        r = info.rate
        levels = self._speed_levels(r)
        Lv = levels.size
        if Lv == 0:
            return []
        cols = np.arange(He)
        D = self.round_s
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
        info = self._job_info(j)
        if not self._bounds_ready:
            self._learn_bounds(j)
        W = float(self.workload.work[j]) * (1.0 + self.work_margin) if work is None else float(work)
        best: HadarPlan | None = None
        for sc in self._slot_choices(info, ref):
            plan = self._best_schedule(j, info, sc, W)
            if plan is not None and (best is None or plan.mu > best.mu):
                best = plan
        return best

    def _best_schedule(self, j: int, info: _JobInfo, sc: _SlotChoice, W: float) -> HadarPlan | None:
        """OASiS-style search over completion slots for one speed floor (vectorised)."""
        H, D = self.horizon, self.round_s
        cost, prog = sc.cost, sc.prog
        feas = prog > 0
        if not feas.any():
            return None
        base_t = self.now_time - info.arrival
        time_cum = np.cumsum(prog)
        Wt = W * (1.0 - 1e-12)
        partial = bool(time_cum[-1] < Wt)
        if not partial:
            # Candidate completion slots: from the first slot by which all feasible slots so far
            # suffice, to the slot after which only identical idle slots would be added.
            tau_min = int(np.argmax(time_cum >= Wt))
            tau_max = H - 1
            p0 = float(prog[sc.He - 1])
            if sc.He < H and p0 > 0:
                tau_max = min(H - 1, sc.He - 1 + math.ceil(W / p0))
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
            fval = utility_value(
                self.utility,
                base_t + (lst + 1) * D,
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

    # ------------------------------------------------------------------ commitments
    def _commit(self, plan: HadarPlan) -> None:
        rel = plan.entry_slot
        self._reserve(rel, plan.entry_node, plan.entry_gpus, +1)
        self._plans[plan.job] = _Stored(
            slot=rel + self.now_slot,
            node=plan.entry_node,
            gpus=plan.entry_gpus,
            pslot=plan.slots + self.now_slot,
            pprog=plan.progress,
            finish_s=plan.finish_s,
            epoch=self._epoch,
        )
        self._accepted[plan.job] = True

    def _release(self, j: int) -> _Stored | None:
        """Remove job j's reservations from the current slot on; return the old plan."""
        old = self._plans.pop(j, None)
        if old is None:
            return None
        fut = old.slot >= self.now_slot
        if fut.any():
            self._reserve(old.slot[fut] - self.now_slot, old.node[fut], old.gpus[fut], -1)
            later = old.slot[fut] > self.now_slot
            if later.any():
                self._bump(int(old.slot[fut][later].min()))  # future prices fell
        self._table = None
        return old

    def _plan_cost_now(self, old: _Stored) -> float:
        """Cost of a stored (released) plan at the current prices."""
        self._refresh_prices()
        fut = old.slot >= self.now_slot
        rel = old.slot[fut] - self.now_slot
        return float((old.gpus[fut] * self._price[old.node[fut], rel]).sum())

    def _restore(self, j: int, old: _Stored) -> None:
        fut = old.slot >= self.now_slot
        self._reserve(old.slot[fut] - self.now_slot, old.node[fut], old.gpus[fut], +1)
        keep = old.pslot >= self.now_slot
        self._plans[j] = _Stored(
            old.slot[fut],
            old.node[fut],
            old.gpus[fut],
            old.pslot[keep],
            old.pprog[keep],
            old.finish_s,
            self._epoch,
        )

    def _tables(
        self,
    ) -> tuple[IntArray, IntArray, IntArray, IntArray, IntArray, IntArray, FloatArray]:
        """All stored plans concatenated (cached until a plan changes).

        Returns:
            ``(job, slot, node, gpus)`` per placement entry (absolute slots), then
            ``(job, slot, progress)`` per planned slot.
        """
        if self._table is None:
            z = np.zeros(0, dtype=np.int64)
            if not self._plans:
                self._table = (z, z, z, z, z, z, np.zeros(0))
            else:
                jobs = np.fromiter(self._plans.keys(), dtype=np.int64, count=len(self._plans))
                plans = list(self._plans.values())
                e_sz = np.array([p.slot.size for p in plans])
                p_sz = np.array([p.pslot.size for p in plans])
                self._table = (
                    np.repeat(jobs, e_sz),
                    np.concatenate([p.slot for p in plans]),
                    np.concatenate([p.node for p in plans]),
                    np.concatenate([p.gpus for p in plans]),
                    np.repeat(jobs, p_sz),
                    np.concatenate([p.pslot for p in plans]),
                    np.concatenate([p.pprog for p in plans]),
                )
        return self._table

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

    def _stored_mu(self, j: int, old: _Stored) -> float:
        """Payoff ``f - cost`` of a released stored plan at the current prices."""
        info = self._info[j]
        f_old = float(
            utility_value(
                self.utility,
                old.finish_s - info.arrival,
                info.t_star,
                weight=self.weight,
                kappa=self.kappa,
                floor=self.utility_floor,
            )
        )
        return f_old - self._plan_cost_now(old)

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
