"""Gavel (Narayanan et al., OSDI'20) as fixed policies: LP allocations + Gavel's round mechanism.

Reference: ``shared/reference/gavel.md`` (section numbers below point there).

Two parts:

* **Allocation** (:class:`GavelPolicy`, LPs in :mod:`hetsched.baselines.gavel_lp`): the matrix
  ``X`` (active jobs x GPU types present) of time fractions. ``T_mj`` is the isolated throughput
  of job m's model at its requested scale factor ``s_m`` (packed) on type j, 0 where the job may
  not use the type or the type has fewer than ``s_m`` GPUs. Objectives:

  - ``las`` (preset ``gavel``): heterogeneity-aware max-min fairness, ``c_m = s_m/(w_m thr(m,
    X_equal))`` (§2.1). With ``heterogeneity_aware=False`` (preset ``gavel_agnostic``) every
    usable type has ``T := 1`` (Tiresias-like LAS in GPU-time); since that LP cannot tell types
    apart, its solution is *symmetrised*: each job's total time is spread over the types it may
    use in proportion to their GPU counts (the same objective and capacity; a simplex solver
    would otherwise return an arbitrary vertex).
  - ``ftf`` (``gavel_ftf``): finish-time fairness (§2.2) by bisection on rho with LP feasibility
    checks; ``t_iso`` is kept between solves. The agnostic variant uses each job's throughput on
    the fastest type (the generalisation of "V100 throughput") for every type.
  - ``makespan`` (``gavel_makespan``): the single LP with ``u = 1/makespan`` (§2.3 "[ours]").
  - ``ss`` (``gavel_ss``): max-min fairness over single jobs and pairs of 1-GPU jobs with equal
    scale factors that the throughput model says may share a GPU (``pair_iota`` finite both
    ways); pair throughputs ``T (1 - pair_iota)``. Pairs are pruned to each job's
    ``max_partners`` best partners with at most ``max_pairs_per_job * M`` pairs in all (see
    :func:`~hetsched.baselines.gavel_lp.candidate_pairs`).

  All priority weights ``w_m`` are 1 (the workload carries none). A job with ``T_mj = 0`` on
  every present type (it could never run) is rejected at :meth:`GavelPolicy.reset` with a
  ``ValueError`` naming it, rather than stalling the LP. Solver failure: with
  ``on_solver_failure="fallback"`` (default) the policy uses ``X_isolated`` (a 1/M share of every
  type, Gavel's own FTF fallback), counts it in ``solver_fallbacks`` and warns; with ``"raise"``
  it raises :class:`~hetsched.baselines.gavel_lp.GavelSolverError`.

* **Mechanism** (:class:`RoundMechanism`, §4): 360 s rounds; the allocation is re-solved only
  when a job arrived or completed since the last solve *and* at least ``min_reset_s`` (1920 s)
  passed since the last reset (or there was none yet; forced when nothing ran last round). Each
  reset updates ``deficit += X * elapsed - received``, sets every unit's ``time_so_far`` to half
  a round and ``worker_time[j]`` to their sum. Priorities ``X / (time_so_far / worker_time)``
  (``X * 1e9`` when that fraction is 0; 0 where ``X == 0``), per type sorted by (priority,
  deficit, X) descending, types fastest first (by the median relative single-GPU speed of the
  workload's models, which gives V100, P100, K80 on Gavel's table) or shuffled every round with
  the policy's rng for agnostic policies. A greedy pass gives each job at most one type per
  round and a gang of ``s`` GPUs of one type while GPUs of that type remain. Entries with
  priority 0 still run when GPUs are left over (Gavel only skips FIFO jobs at priority 0).

  ``resolve_on_arrival`` (quirk 8 of §9): ``False`` (default, Gavel fidelity) -- a job that
  arrives after the last solve is not in X; it is ranked last with priority 0 and, if the
  greedy pass picks it, it holds its GPUs idle for that round but is *not placed*, so it waits
  for the next solve. ``True`` -- any arrival triggers an immediate solve and reset, bypassing
  the throttle (completions stay throttled).

Placement (§4 "Placement inside a type"): units by decreasing scale factor; first every unit
that ran on the same type last round keeps exactly its previous nodes and GPU counts if they
are still free (a *lease extension*, counted in :attr:`GavelPolicy.lease_extensions` over
:attr:`GavelPolicy.continuations`), then the rest go to the nodes of the chosen type with the
fewest servers (:class:`~hetsched.baselines.base.Placer` with a type mask: best-fit single node,
else the fewest nodes). CPU and memory are the fixed per-GPU node shares (capped at the
request); each member of a space-sharing pair gets its own share on the common node (pairs are
placed after exclusive units of the same size). A unit whose placement fails (fragmentation)
does not run that round. Pairs become two entries with one ``share`` id on one node.

Node failures (``SimState.node_up``; hetsched's addition, Gavel has none): the GPUs of down nodes
are left out everywhere. The greedy pass hands out the GPUs of up nodes per type (the
mechanism's capacity is updated every round), and the LP is solved on them: a change of that
capacity (a failure or a repair) is a re-solve event like an arrival or completion, under the
same ``min_reset_s`` throttle. A job that no up node can run (its types down, or fewer of their
GPUs up than its scale factor) is kept out of the LP with a zero row of X until its nodes return.
Placement only uses up nodes (:class:`~hetsched.baselines.base.Placer`), and a unit with an entry
on a node that is down gets no lease extension: it is placed afresh.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hetsched.baselines.base import BasePolicy, Placer
from hetsched.baselines.gavel_lp import (
    Combos,
    GavelSolverError,
    MaxMinLP,
    candidate_pairs,
    fit_capacity,
    ftf_allocation,
    isolated_allocation,
    las_allocation,
    makespan_allocation,
)
from hetsched.sim.allocation import Allocation
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimState
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

OBJECTIVES: tuple[str, ...] = ("las", "ftf", "makespan", "ss")
#: Priority multiplier for a unit whose time fraction is 0 (Gavel's rule).
ZERO_FRACTION_PRIORITY = 1e9


# ---------------------------------------------------------------------- mechanism
class RoundMechanism:
    """Gavel's round-based mechanism (gavel.md §4): turns an allocation X into rounds.

    The mechanism holds the current units ("keys": ``(job, -1)`` for a single job,
    ``(a, b)`` with a < b for a pair; job = workload index), their allocation and the time
    accounting. It knows GPU *types* only; node placement is the caller's job.

    Args:
        capacity: GPUs per type, (K,).
        round_s: Round length in seconds.
        min_reset_s: Minimum time between resets (and solves) in seconds.
        resolve_on_arrival: Re-solve on every arrival, bypassing the throttle (quirk 8).

    Attributes:
        keys: The units of the current X.
        members: Job indices per unit, (C, 2), -1 for none.
        X: Allocation, (C, K).
        runnable: Whether each unit can run on each type, (C, K).
        scale: GPUs per unit, (C,).
        time_so_far: Seconds per unit and type since the last reset, plus half a round, (C, K).
        received: Seconds per unit and type since the last reset, (C, K).
        deficit: Accumulated ``X * elapsed - received`` per unit and type, (C, K).
        worker_time: Sum of ``time_so_far`` per type, (K,).
        last_reset: Time of the last reset in seconds (None before the first).
        resets: Number of resets so far.
    """

    def __init__(
        self,
        capacity: IntArray,
        *,
        round_s: float = 360.0,
        min_reset_s: float = 1920.0,
        resolve_on_arrival: bool = False,
    ) -> None:
        if round_s <= 0:
            raise ValueError(f"round_s={round_s} must be > 0 seconds")
        if min_reset_s < 0:
            raise ValueError(f"min_reset_s={min_reset_s} must be >= 0 seconds")
        self.capacity = np.asarray(capacity, dtype=np.int64)
        self.round_s = float(round_s)
        self.min_reset_s = float(min_reset_s)
        self.resolve_on_arrival = bool(resolve_on_arrival)
        K = self.capacity.shape[0]
        self.keys: list[tuple[int, int]] = []
        self.members = np.zeros((0, 2), dtype=np.int64)
        self.X = np.zeros((0, K))
        self.runnable = np.zeros((0, K), dtype=bool)
        self.scale = np.zeros(0, dtype=np.int64)
        self.time_so_far = np.zeros((0, K))
        self.received = np.zeros((0, K))
        self.deficit = np.zeros((0, K))
        self.worker_time = np.zeros(K)
        self.last_reset: float | None = None
        self.resets = 0
        self._jobs = np.zeros(0, dtype=np.int64)  # sorted jobs present in X

    @property
    def num_types(self) -> int:
        """Number of GPU types K."""
        return int(self.capacity.shape[0])

    @property
    def jobs(self) -> IntArray:
        """Sorted job indices that appear in X."""
        return self._jobs

    def needs_solve(
        self, now: float, active: IntArray, idle: bool, capacity_changed: bool = False
    ) -> bool:
        """Whether to reset and re-solve at the start of the round at ``now`` (seconds).

        Args:
            now: Current time in seconds.
            active: Arrived, unfinished jobs.
            idle: Nothing ran in the previous round.
            capacity_changed: The GPUs of up nodes per type differ from those of the last solve
                (a node failed or was repaired); an event like an arrival or completion.
        """
        active = np.asarray(active, dtype=np.int64)
        arrived = bool((~np.isin(active, self._jobs)).any())
        completed = bool((~np.isin(self._jobs, active)).any())
        if not (arrived or completed or capacity_changed):
            return False
        if self.last_reset is None or idle:
            return True
        if self.resolve_on_arrival and arrived:
            return True
        return now - self.last_reset >= self.min_reset_s - 1e-9

    def reset(
        self,
        now: float,
        keys: list[tuple[int, int]],
        X: FloatArray,
        runnable: BoolArray,
        scale: IntArray,
    ) -> None:
        """Reset the accounting at ``now`` and install a new allocation.

        Deficits of units that stay are carried over (``deficit += X * elapsed - received``
        with the old X); new units start at 0. Every unit's ``time_so_far`` becomes half a round.
        """
        C, K = len(keys), self.num_types
        X = np.asarray(X, dtype=np.float64).reshape(C, K)
        new_deficit = np.zeros((C, K))
        if self.last_reset is not None and self.keys:
            elapsed = now - self.last_reset
            self.deficit += self.X * elapsed - self.received
            old = {k: i for i, k in enumerate(self.keys)}
            pos = np.array([old.get(k, -1) for k in keys], dtype=np.int64)
            hit = pos >= 0
            new_deficit[hit] = self.deficit[pos[hit]]
        self.keys = list(keys)
        self.members = (
            np.array(keys, dtype=np.int64).reshape(C, 2) if C else np.zeros((0, 2), dtype=np.int64)
        )
        self.X = X
        self.runnable = np.asarray(runnable, dtype=bool).reshape(C, K)
        self.scale = np.asarray(scale, dtype=np.int64).reshape(C)
        self.deficit = new_deficit
        half = self.round_s / 2.0
        self.time_so_far = np.full((C, K), half)
        self.received = np.zeros((C, K))
        self.worker_time = np.full(K, half * C)
        self.last_reset = float(now)
        self.resets += 1
        m = self.members.reshape(-1)
        self._jobs = np.unique(m[m >= 0])

    def record(self, unit: IntArray, type_pos: IntArray, seconds: FloatArray) -> None:
        """Add the seconds each unit ran on its type in the last round to the accounting."""
        unit = np.asarray(unit, dtype=np.int64)
        type_pos = np.asarray(type_pos, dtype=np.int64)
        sec = np.asarray(seconds, dtype=np.float64)
        np.add.at(self.time_so_far, (unit, type_pos), sec)
        np.add.at(self.received, (unit, type_pos), sec)
        np.add.at(self.worker_time, type_pos, sec)

    def priorities(self) -> FloatArray:
        """``X / (time_so_far / worker_time)`` per unit and type (1e9 X at fraction 0), (C, K)."""
        wt = self.worker_time[None, :]
        frac = np.where(wt > 0, self.time_so_far / np.where(wt > 0, wt, 1.0), 0.0)
        pri = np.where(
            frac > 0, self.X / np.where(frac > 0, frac, 1.0), self.X * ZERO_FRACTION_PRIORITY
        )
        return np.asarray(np.where((self.X > 0) & self.runnable, pri, 0.0))

    def select(
        self,
        type_order: IntArray,
        active: IntArray,
        new_jobs: IntArray | None = None,
        new_scale: IntArray | None = None,
        new_runnable: BoolArray | None = None,
    ) -> list[tuple[int, int]]:
        """The greedy pass of one round.

        Args:
            type_order: Type positions in the order their lists are walked.
            active: Arrived, unfinished jobs; units with a finished member are dropped (Gavel
                removes a completed job from the allocation at once).
            new_jobs: Active jobs not in X (quirk 8): ranked with priority, deficit and X 0.
            new_scale: Their scale factors.
            new_runnable: Whether they can run on each type, (N, K).

        Returns:
            ``(entry, type)`` pairs: ``entry`` is a unit index (< C) or ``C + i`` for
            ``new_jobs[i]`` (which hold GPUs but are not placed).
        """
        C, K = len(self.keys), self.num_types
        pri = self.priorities()
        deficit, X, runnable = self.deficit, self.X, self.runnable
        alive = np.asarray((np.isin(self.members, active) | (self.members < 0)).all(axis=1))
        runnable = runnable & alive[:, None]
        members, scale = self.members, self.scale
        if new_jobs is not None and len(new_jobs):
            nj = np.asarray(new_jobs, dtype=np.int64)
            N = nj.shape[0]
            z = np.zeros((N, K))
            pri = np.concatenate([pri, z])
            deficit = np.concatenate([deficit, z])
            X = np.concatenate([X, z])
            runnable = np.concatenate([runnable, np.asarray(new_runnable, dtype=bool)])
            members = np.concatenate([members, np.stack([nj, np.full(N, -1)], axis=1)])
            scale = np.concatenate([scale, np.asarray(new_scale, dtype=np.int64)])
        free = self.capacity.copy()
        taken: set[int] = set()
        out: list[tuple[int, int]] = []
        idx_all = np.arange(runnable.shape[0])
        for j in np.asarray(type_order, dtype=np.int64).tolist():
            if free[j] <= 0:
                continue
            cand = idx_all[runnable[:, j]]
            if cand.size == 0:
                continue
            order = cand[np.lexsort((cand, -X[cand, j], -deficit[cand, j], -pri[cand, j]))]
            left = int(free[j])
            mem = members[order].tolist()
            sc = scale[order].tolist()
            for e, (a, b), g in zip(order.tolist(), mem, sc, strict=True):
                if left == 0:
                    break
                if a in taken or (b >= 0 and b in taken) or g > left:
                    continue
                left -= g
                taken.add(a)
                if b >= 0:
                    taken.add(b)
                out.append((e, j))
            free[j] = left
        del C
        return out


# ---------------------------------------------------------------------- placement
class _GavelPlacer(Placer):
    """:class:`Placer` plus space-sharing pairs (two jobs on one GPU, one ``share`` id)."""

    def __init__(self, state: SimState, keep: Allocation | None = None) -> None:
        super().__init__(state, keep)
        self._pair_entries: list[tuple[int, int, int, float, float, int]] = []
        self._bulk: list[Allocation] = []
        self._next_share = int(self.keep.share.max()) + 1 if self.keep.size else 0

    def place_one_gpu_units(self, a: IntArray, b: IntArray, gpu_type: int) -> BoolArray | None:
        """Place many 1-GPU units (singles ``b = -1`` and pairs) on ``gpu_type`` in one step.

        Equivalent to placing them one by one with best fit (the node with the fewest free GPUs
        first, then the lowest index): the GPUs are handed out node by node in that order. CPU and
        memory are the fixed per-GPU shares capped at the request (each pair member its own).

        Args:
            a: First job of each unit, (U,).
            b: Second job of each unit or -1, (U,).
            gpu_type: Catalogue GPU type.

        Returns:
            Which units were placed (units beyond the free GPUs are not), or None (nothing
            placed) if CPU or memory would not fit on some node; the caller then places the
            units one by one.
        """
        st = self.state
        cl, wl = st.cluster, st.workload
        nodes = np.flatnonzero((cl.node_type == gpu_type) & (self.free_gpus > 0))
        nodes = nodes[np.lexsort((nodes, self.free_gpus[nodes]))]
        slots = np.repeat(nodes, self.free_gpus[nodes])
        U = a.shape[0]
        n = min(U, slots.shape[0])
        a, b, node = a[:n], b[:n], slots[:n]
        pair = b >= 0
        bb = np.where(pair, b, a)
        ca = np.minimum(wl.cpu_per_gpu[a], self._cpu_share[node])
        ma = np.minimum(wl.mem_per_gpu[a], self._mem_share[node])
        cb = np.where(pair, np.minimum(wl.cpu_per_gpu[bb], self._cpu_share[node]), 0.0)
        mb = np.where(pair, np.minimum(wl.mem_per_gpu[bb], self._mem_share[node]), 0.0)
        N = cl.num_nodes
        need_c = np.bincount(node, weights=ca + cb, minlength=N)
        need_m = np.bincount(node, weights=ma + mb, minlength=N)
        floor = st.throughput.mem_floor
        if (
            np.any(need_c > self.free_cpus + 1e-9)
            or np.any(need_m > self.free_mem + 1e-9)
            or np.any(ma < floor * wl.mem_per_gpu[a] - 1e-9)
            or np.any(pair & (mb < floor * wl.mem_per_gpu[bb] - 1e-9))
        ):
            return None
        self.free_gpus -= np.bincount(node, minlength=N)
        self.free_cpus -= need_c
        self.free_mem -= need_m
        self.placed.update(a.tolist())
        self.placed.update(b[pair].tolist())
        P = int(pair.sum())
        sid = self._next_share + np.arange(P)
        self._next_share += P
        one = np.ones(n + P, dtype=np.int64)
        first = np.full(n, -1, dtype=np.int64)
        first[pair] = sid
        share = np.concatenate([first, sid])
        self._bulk.append(
            Allocation(
                np.concatenate([a, b[pair]]), np.concatenate([node, node[pair]]), one,
                np.concatenate([ca, cb[pair]]), np.concatenate([ma, mb[pair]]), share,
            )
        )  # fmt: skip
        placed = np.zeros(U, dtype=bool)
        placed[:n] = True
        return placed

    def place_on_type(self, j: int, n: int, gpu_type: int) -> bool:
        """Place job ``j`` on ``n`` GPUs of ``gpu_type``: best-fit single node, else the fewest nodes.

        The caller guarantees the job's packed throughput on this type is positive, so a
        single-node placement needs no throughput check (spread layouts go through
        :meth:`Placer.place`, which checks).
        """
        if j in self.placed:
            return False
        cl = self.state.cluster
        cand = np.flatnonzero((cl.node_type == gpu_type) & (self.free_gpus >= n))
        if cand.size:
            cand = cand[np.lexsort((cand, self.free_gpus[cand]))][:8]
            g = np.array([n], dtype=np.int64)
            for nd in cand.tolist():
                if self._commit(j, np.array([nd], dtype=np.int64), g):
                    return True
        mask = np.zeros(len(self.state.throughput.gpu_types), dtype=bool)
        mask[gpu_type] = True
        return self.place(j, n, types=mask)

    def place_pair(self, a: int, b: int, gpu_type: int, node: int | None = None) -> bool:
        """Place 1-GPU jobs ``a`` and ``b`` on one GPU of ``gpu_type`` (on ``node`` if given)."""
        if a in self.placed or b in self.placed:
            return False
        cl, wl = self.state.cluster, self.state.workload
        if node is not None:
            cand = np.array([node], dtype=np.int64)
            if cl.node_type[node] != gpu_type or self.free_gpus[node] < 1:
                return False
        else:
            if not (wl.allowed_types[a, gpu_type] and wl.allowed_types[b, gpu_type]):
                return False
            cand = np.flatnonzero((cl.node_type == gpu_type) & (self.free_gpus >= 1))
            cand = cand[np.lexsort((cand, self.free_gpus[cand]))][:8]
        one = np.ones(1, dtype=np.int64)
        for nd in cand.tolist():
            nodes = np.array([nd], dtype=np.int64)
            ca, ma, ok_a = self._fit(a, nodes, one)
            if not ok_a:
                continue
            self.free_cpus[nd] -= ca[0]
            self.free_mem[nd] -= ma[0]
            cb, mb, ok_b = self._fit(b, nodes, one)
            if not ok_b:
                self.free_cpus[nd] += ca[0]
                self.free_mem[nd] += ma[0]
                continue
            self.free_cpus[nd] -= cb[0]
            self.free_mem[nd] -= mb[0]
            self.free_gpus[nd] -= 1
            sid = self._next_share
            self._next_share += 1
            self._pair_entries.append((a, nd, 1, float(ca[0]), float(ma[0]), sid))
            self._pair_entries.append((b, nd, 1, float(cb[0]), float(mb[0]), sid))
            self.placed.update((a, b))
            return True
        return False

    def allocation(self) -> Allocation:
        """Exclusive entries plus the pairs."""
        return Allocation.concat(
            [super().allocation(), Allocation.from_entries(self._pair_entries), *self._bulk]
        )


# ---------------------------------------------------------------------- policy
class GavelPolicy(BasePolicy):
    """Gavel's allocation policies driven by :class:`RoundMechanism` (see the module docstring).

    Args:
        objective: ``"las"``, ``"ftf"``, ``"makespan"`` or ``"ss"`` (space-sharing LAS).
        heterogeneity_aware: False gives the agnostic variants (LAS with T := 1, FTF/makespan
            with the fastest type's throughput everywhere) and shuffles the type order.
        round_s: Round length in seconds (Gavel: 360).
        min_reset_s: Minimum seconds between resets/solves (Gavel: 1920).
        resolve_on_arrival: Re-solve at every arrival (True) or let new jobs wait for the next
            throttled solve as Gavel does (False, default).
        secondary_eps: Weight of the LP's secondary (spare-capacity) term; 0 disables it.
        max_partners: Space sharing: partners kept per job.
        max_pairs_per_job: Space sharing: at most this many pairs per active job in all.
        ftf_rel_tol: FTF bisection stops at this relative width of the rho bracket.
        on_solver_failure: ``"fallback"`` (X_isolated, counted and warned) or ``"raise"``.
        name: Display name (default from objective and awareness).
    """

    def __init__(
        self,
        objective: str = "las",
        heterogeneity_aware: bool = True,
        round_s: float = 360.0,
        min_reset_s: float = 1920.0,
        resolve_on_arrival: bool = False,
        secondary_eps: float = 1e-3,
        max_partners: int = 4,
        max_pairs_per_job: float = 2.0,
        ftf_rel_tol: float = 1e-3,
        on_solver_failure: str = "fallback",
        name: str | None = None,
    ) -> None:
        if objective not in OBJECTIVES:
            raise ValueError(f"gavel objective={objective!r} is unknown; use one of {OBJECTIVES}")
        if objective == "ss" and not heterogeneity_aware:
            raise ValueError(
                "gavel objective='ss' is heterogeneity-aware only; set heterogeneity_aware=true"
            )
        if on_solver_failure not in ("fallback", "raise"):
            raise ValueError(
                f"gavel on_solver_failure={on_solver_failure!r}; use 'fallback' or 'raise'"
            )
        if round_s <= 0 or min_reset_s < 0:
            raise ValueError(
                f"gavel round_s={round_s} must be > 0 and min_reset_s={min_reset_s} >= 0"
            )
        if secondary_eps < 0 or max_partners < 0 or max_pairs_per_job < 0 or ftf_rel_tol <= 0:
            raise ValueError(
                "gavel secondary_eps, max_partners and max_pairs_per_job must be >= 0 and "
                f"ftf_rel_tol > 0 (got {secondary_eps}, {max_partners}, {max_pairs_per_job}, "
                f"{ftf_rel_tol})"
            )
        self.objective = objective
        self.aware = bool(heterogeneity_aware)
        self._round_s = float(round_s)
        self.round_s = self._round_s
        self.min_reset_s = float(min_reset_s)
        self.resolve_on_arrival = bool(resolve_on_arrival)
        self.secondary_eps = float(secondary_eps)
        self.max_partners = int(max_partners)
        self.max_pairs_per_job = float(max_pairs_per_job)
        self.ftf_rel_tol = float(ftf_rel_tol)
        self.on_solver_failure = on_solver_failure
        default = "gavel" if objective == "las" else f"gavel_{objective}"
        if not self.aware:
            default = "gavel_agnostic" if objective == "las" else f"{default}_agnostic"
        self.name = name or default

    # ------------------------------------------------------------------ setup
    def reset(
        self,
        cluster: Cluster,
        workload: Workload,
        throughput: ThroughputModel,
        rng: np.random.Generator,
    ) -> None:
        """Precompute per-job throughputs on the present types and clear all state."""
        super().reset(cluster, workload, throughput, rng)
        self.types = cluster.types_present.astype(np.int64)  # catalogue indices, (K,)
        per_type = cluster.gpus_per_type()
        self.n = per_type[self.types].astype(np.int64)  # GPUs per present type, (K,)
        self.n_f = self.n.astype(np.float64)  # the same as floats (LP right-hand sides)
        K = self.types.shape[0]
        wl = workload
        s = wl.req_gpus
        T = throughput.isolated(wl.model[:, None], self.types[None, :], s[:, None], False)
        ok = wl.allowed_types[:, self.types] & (s[:, None] <= self.n[None, :])
        self.T_all = np.where(ok, T, 0.0)  # (J, K) work units/s
        stuck = np.flatnonzero(~(self.T_all > 0).any(axis=1))
        if stuck.size:
            j = int(stuck[0])
            raise ValueError(
                f"{self.name}: job {j} ({wl.job_id[j]}, model "
                f"{throughput.models[int(wl.model[j])]!r}, {int(s[j])} GPUs) cannot run on any GPU "
                f"type of {cluster.describe()} ({stuck.size} such jobs): its allowed types, GPU "
                "request or throughput rule it out everywhere; drop such jobs from the workload "
                "or use a cluster with a type it can use"
            )
        # Type order: median over the workload's models of single-GPU speed relative to the
        # model's best type, fastest first (V100, P100, K80 on Gavel's table).
        models = np.unique(wl.model)
        t1 = throughput.isolated(models[:, None], self.types[None, :], 1, False)
        rel = t1 / np.maximum(t1.max(axis=1, keepdims=True), 1e-300)
        score = np.median(rel, axis=0)
        self.speed_order = np.lexsort((np.arange(K), -score)).astype(np.int64)
        self.mech = RoundMechanism(
            self.n,
            round_s=self._round_s,
            min_reset_s=self.min_reset_s,
            resolve_on_arrival=self.resolve_on_arrival,
        )
        self.lp = MaxMinLP()
        self._n_solved = self.n.copy()  # GPUs of up nodes per type at the last solve, (K,)
        J = wl.num_jobs
        self._last_run_s = np.zeros(J)
        self._ran_unit = np.zeros(0, dtype=np.int64)
        self._ran_type = np.zeros(0, dtype=np.int64)
        self._prev_code = np.zeros(0, dtype=np.int64)  # sorted codes of units that ran last round
        self._prev_type = np.zeros(0, dtype=np.int64)
        # FTF state (gavel.md §2.2): isolated time consumed so far, and the remaining work and
        # isolated throughput at the previous solve (0 = not seen yet).
        self._t_iso = np.zeros(J)
        self._r_prev = np.zeros(J)
        self._thr_iso_prev = np.zeros(J)
        self.solves = 0
        self.solver_fallbacks = 0
        self.lease_extensions = 0
        self.continuations = 0
        self.makespan_bound_s = float("nan")
        self.last_rho = float("nan")

    @property
    def lease_extension_rate(self) -> float:
        """Lease extensions / continuations (units scheduled on the same type two rounds running)."""
        return self.lease_extensions / self.continuations if self.continuations else float("nan")

    # ------------------------------------------------------------------ solving
    def _lp_throughput(self, T: FloatArray) -> FloatArray:
        """The throughputs the LP sees (agnostic variants replace them)."""
        if self.aware:
            return T
        if self.objective == "las":
            return np.where(T > 0, 1.0, 0.0)
        # Agnostic FTF / makespan: the job's throughput on the fastest type it can use, everywhere.
        Tk = T[:, self.speed_order]
        first = np.argmax(Tk > 0, axis=1)
        ref = Tk[np.arange(T.shape[0]), first]
        return np.where(T > 0, ref[:, None], 0.0)

    def _symmetrise(
        self, X: FloatArray, runnable: BoolArray, s: IntArray, n: FloatArray
    ) -> FloatArray:
        """Spread each job's total time over its usable types in proportion to their GPUs ``n``."""
        share = np.where(runnable, n[None, :], 0.0)
        share /= np.maximum(share.sum(axis=1, keepdims=True), 1e-300)
        Xs = X.sum(axis=1, keepdims=True) * share
        if np.all(s.astype(np.float64) @ Xs <= n * (1 + 1e-9) + 1e-9):
            return Xs
        return X

    def up_capacity(self, state: SimState) -> IntArray:
        """GPUs of the nodes that are up now, per present type, shape (K,)."""
        cl = state.cluster
        up = state.node_up
        per = np.bincount(
            cl.node_type[up], weights=cl.node_gpus[up], minlength=len(state.throughput.gpu_types)
        )
        return np.asarray(np.rint(per[self.types]), dtype=np.int64)

    def _solve(self, state: SimState, n: IntArray) -> None:
        """Solve the allocation for the active jobs on ``n`` GPUs per type (those of up nodes).

        A job that cannot run on the up nodes (its types are down, or too few of their GPUs are
        up for its scale factor) is left out of the LP and enters X with a zero row, so it is
        not taken for an arrival at the next round; it gets time again after the re-solve that
        the capacity change triggers when its nodes come back.
        """
        act_all = state.active
        wl = state.workload
        n_f = n.astype(np.float64)
        s_all = wl.req_gpus[act_all].astype(np.int64)
        T_act = np.where(s_all[:, None] <= n[None, :], self.T_all[act_all], 0.0)
        live = (T_act > 0).any(axis=1)
        act, T, s = act_all[live], T_act[live], s_all[live]
        M, K = act.shape[0], n.shape[0]
        runnable = T > 0
        Tlp = self._lp_throughput(T)
        keys: list[tuple[int, int]] = [(int(j), -1) for j in act.tolist()]
        scale = s
        unit_run = runnable
        try:
            if M == 0:
                X = np.zeros((0, K))
            elif self.objective == "las":
                X = las_allocation(
                    self.lp, Combos.singles(Tlp, s), Tlp, s, np.ones(M), n_f, self.secondary_eps
                )
                if not self.aware:
                    X = fit_capacity(self._symmetrise(X, runnable, s, n_f), s, n_f)
            elif self.objective == "ss":
                pairs, ptput = candidate_pairs(
                    wl.model[act], s, T, state.throughput.pair_iota, self.types,
                    max_partners=self.max_partners,
                    max_pairs=int(np.ceil(self.max_pairs_per_job * M)),
                )  # fmt: skip
                single = Combos.singles(T, s)
                combos = Combos(
                    np.concatenate([single.members, pairs]),
                    np.concatenate([s, np.ones(pairs.shape[0], dtype=np.int64)]),
                    np.concatenate([single.tput, ptput]),
                )
                X = las_allocation(self.lp, combos, T, s, np.ones(M), n_f, self.secondary_eps)
                keys += [(int(act[a]), int(act[b])) for a, b in pairs.tolist()]
                scale = combos.scale
                unit_run = combos.runnable
            elif self.objective == "makespan":
                X, self.makespan_bound_s = makespan_allocation(
                    self.lp, Tlp, s, state.remaining[act], n_f, self.secondary_eps
                )
            else:
                X = self._ftf(state, act, Tlp, s, n_f)
        except GavelSolverError as err:
            if self.on_solver_failure == "raise":
                raise
            self.solver_fallbacks += 1
            warnings.warn(
                f"{self.name}: LP failed at t={state.time:.0f}s ({err}); using X_isolated",
                RuntimeWarning,
                stacklevel=2,
            )
            keys = keys[:M]
            scale, unit_run = s, runnable
            X = isolated_allocation(s, n_f, runnable)
        stuck = act_all[~live]
        if stuck.size:  # jobs no up node can run: in X with a zero row, never runnable
            keys += [(int(j), -1) for j in stuck.tolist()]
            X = np.concatenate([X, np.zeros((stuck.size, K))])
            scale = np.concatenate([scale, s_all[~live]])
            unit_run = np.concatenate([unit_run, np.zeros((stuck.size, K), dtype=bool)])
        self.solves += 1
        self._n_solved = n.copy()
        self.mech.reset(state.time, keys, X, unit_run & (scale[:, None] <= n[None, :]), scale)

    def _ftf(
        self, state: SimState, act: IntArray, T: FloatArray, s: IntArray, n_f: FloatArray
    ) -> FloatArray:
        R = state.remaining[act]
        seen = self._thr_iso_prev[act] > 0
        a_seen = act[seen]
        self._t_iso[a_seen] += (self._r_prev[a_seen] - R[seen]) / self._thr_iso_prev[a_seen]
        x_iso = isolated_allocation(s, n_f, T > 0)
        self._thr_iso_prev[act] = (T * x_iso).sum(axis=1)
        self._r_prev[act] = R
        elapsed = state.time - state.workload.arrival[act]
        X, rho, _ = ftf_allocation(
            self.lp, T, s, n_f, elapsed, R, self._t_iso[act],
            rel_tol=self.ftf_rel_tol, eps=self.secondary_eps,
        )  # fmt: skip
        self.last_rho = rho
        return X

    # ------------------------------------------------------------------ rounds
    def decide(self, state: SimState) -> Allocation:
        """Account the last round, re-solve if the mechanism says so, select and place."""
        mech = self.mech
        if self._ran_unit.size:
            d = state.run_s - self._last_run_s
            mem = mech.members[self._ran_unit]
            sec = np.maximum(d[mem[:, 0]], np.where(mem[:, 1] >= 0, d[mem[:, 1]], 0.0))
            mech.record(self._ran_unit, self._ran_type, sec)
        self._last_run_s = state.run_s.copy()
        act = state.active
        if act.size == 0:
            self._ran_unit = np.zeros(0, dtype=np.int64)
            self._prev_code = np.zeros(0, dtype=np.int64)
            return Allocation.empty()
        # Failed nodes offer nothing: the greedy pass hands out the GPUs of up nodes only, and a
        # change of that capacity is a re-solve event (throttled like arrivals and completions).
        n_up = self.up_capacity(state)
        mech.capacity = n_up
        changed = not np.array_equal(n_up, self._n_solved)
        if mech.needs_solve(state.time, act, state.current.size == 0, changed):
            self._solve(state, n_up)
        if self.aware:
            order = self.speed_order
        else:
            order = self.rng.permutation(self.types.shape[0]).astype(np.int64)
        new = act[~np.isin(act, mech.jobs)]
        new_run = self.T_all[new] > 0
        selected = mech.select(order, act, new, state.workload.req_gpus[new], new_run)
        return self._place(state, selected)

    def _place(self, state: SimState, selected: list[tuple[int, int]]) -> Allocation:
        mech = self.mech
        C = len(mech.keys)
        J = state.workload.num_jobs
        sel = np.array([ej for ej in selected if ej[0] < C], dtype=np.int64).reshape(-1, 2)
        unit, tpos = sel[:, 0], sel[:, 1]  # new jobs (entry >= C) are not placed (quirk 8)
        a, b = mech.members[unit, 0], mech.members[unit, 1]
        single = b < 0
        bb = np.where(single, a, b)
        ktype = self.types[tpos]
        # Last round's entries, summarised per job.
        cur = state.current
        node_type = state.cluster.node_type
        cnt = np.bincount(cur.job, minlength=J)
        t_lo = np.full(J, np.iinfo(np.int64).max)
        t_hi = np.full(J, -1)
        np.minimum.at(t_lo, cur.job, node_type[cur.node])
        np.maximum.at(t_hi, cur.job, node_type[cur.node])
        sh_hi = np.full(J, -1)
        np.maximum.at(sh_hi, cur.job, cur.share)
        node1 = np.zeros(J, dtype=np.int64)
        node1[cur.job] = cur.node
        share1 = np.full(J, -1)
        share1[cur.job] = cur.share
        # Lease extensions: the same unit on the same type keeps exactly its previous entries.
        # Those entries are a subset of last round's valid allocation, so they fit together.
        ext_single = (
            single & (cnt[a] > 0) & (t_lo[a] == ktype) & (t_hi[a] == ktype) & (sh_hi[a] < 0)
        )
        ext_pair = (
            ~single & (cnt[a] == 1) & (cnt[bb] == 1) & (node1[a] == node1[bb])
            & (share1[a] >= 0) & (share1[a] == share1[bb]) & (node_type[node1[a]] == ktype)
        )  # fmt: skip
        # A unit with an entry on a node that is down now is placed afresh (no lease extension).
        # The engine already drops the jobs of a node that fails; this guards the boundary case.
        on_down = np.bincount(cur.job[~state.node_up[cur.node]], minlength=J) > 0
        ext = (ext_single | ext_pair) & ~on_down[a] & ~on_down[bb]
        ext_pair &= ext
        keep = cur.select(np.isin(cur.job, np.concatenate([a[ext], b[ext_pair]])))
        # Continuations: units that ran last round on the same type.
        code = a * (J + 1) + (b + 1)
        cont = np.zeros(unit.shape[0], dtype=bool)
        if self._prev_code.size:
            pos = np.clip(np.searchsorted(self._prev_code, code), 0, self._prev_code.size - 1)
            cont = (self._prev_code[pos] == code) & (self._prev_type[pos] == tpos)
        self.continuations += int(cont.sum())
        self.lease_extensions += int((cont & ext).sum())
        placer = _GavelPlacer(state, keep)
        ok = ext.copy()
        scale = mech.scale[unit]
        rest = np.flatnonzero(~ext)
        # Decreasing scale factor; pairs after exclusive units of the same size. 1-GPU units are
        # placed per type in one vectorised step (same result as one by one).
        rest = rest[np.lexsort((rest, ~single[rest], -scale[rest]))]
        one = rest[scale[rest] == 1]
        seq = rest[scale[rest] > 1].tolist()
        for k in np.unique(ktype[one]).tolist():
            idx = one[ktype[one] == k]
            got = placer.place_one_gpu_units(a[idx], b[idx], k)
            if got is None:
                seq += idx.tolist()
            else:
                ok[idx] = got
        req = state.workload.req_gpus
        for i in seq:  # fewest servers of the chosen type
            k = int(ktype[i])
            if single[i]:
                ok[i] = placer.place_on_type(int(a[i]), int(req[a[i]]), k)
            else:
                ok[i] = placer.place_pair(int(a[i]), int(b[i]), k)
        self._ran_unit = unit[ok]
        self._ran_type = tpos[ok]
        order = np.argsort(code[ok], kind="stable")
        self._prev_code = code[ok][order]
        self._prev_type = tpos[ok][order]
        return placer.allocation()


# ---------------------------------------------------------------------- Hydra schemas
@dataclass
class GavelConf:
    """:class:`GavelPolicy`, heterogeneity-aware max-min fairness (LAS), preset ``gavel``."""

    _target_: str = "hetsched.baselines.gavel.GavelPolicy"
    objective: str = "las"
    heterogeneity_aware: bool = True
    round_s: float = 360.0
    min_reset_s: float = 1920.0
    resolve_on_arrival: bool = False
    secondary_eps: float = 1e-3
    max_partners: int = 4
    max_pairs_per_job: float = 2.0
    ftf_rel_tol: float = 1e-3
    on_solver_failure: str = "fallback"
    name: str | None = None


@dataclass
class GavelAgnosticConf(GavelConf):
    """Heterogeneity-agnostic max-min fairness (LAS in GPU-time), preset ``gavel_agnostic``."""

    heterogeneity_aware: bool = False


@dataclass
class GavelFTFConf(GavelConf):
    """Heterogeneity-aware finish-time fairness, preset ``gavel_ftf``."""

    objective: str = "ftf"


@dataclass
class GavelMakespanConf(GavelConf):
    """Heterogeneity-aware makespan minimisation, preset ``gavel_makespan``."""

    objective: str = "makespan"


@dataclass
class GavelSSConf(GavelConf):
    """Heterogeneity-aware max-min fairness with space sharing, preset ``gavel_ss``."""

    objective: str = "ss"


#: Preset name -> schema, registered under ``schema/scheduler/<name>``.
GAVEL_SCHEMAS: dict[str, type[GavelConf]] = {
    "gavel": GavelConf,
    "gavel_agnostic": GavelAgnosticConf,
    "gavel_ftf": GavelFTFConf,
    "gavel_makespan": GavelMakespanConf,
    "gavel_ss": GavelSSConf,
}


def register_gavel_configs() -> None:
    """Store the Gavel schemas in Hydra's ConfigStore (called by ``hetsched.config``)."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    for name, node in GAVEL_SCHEMAS.items():
        cs.store(group="schema/scheduler", name=name, node=node)
