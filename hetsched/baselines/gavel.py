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

Modules: the LPs are in :mod:`hetsched.baselines.gavel_lp`, the mechanism in
:mod:`hetsched.baselines.gavel_mechanism` and the placer in :mod:`hetsched.baselines.gavel_place`;
this module holds the policy and its Hydra schemas and re-exports the mechanism and the placer.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hetsched.baselines.base import BasePolicy
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
from hetsched.baselines.gavel_mechanism import ZERO_FRACTION_PRIORITY, RoundMechanism
from hetsched.baselines.gavel_place import GavelPlacer
from hetsched.sim.allocation import Allocation
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimState
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

__all__ = [
    "GAVEL_SCHEMAS",
    "OBJECTIVES",
    "ZERO_FRACTION_PRIORITY",
    "GavelAgnosticConf",
    "GavelConf",
    "GavelFTFConf",
    "GavelMakespanConf",
    "GavelPlacer",
    "GavelPolicy",
    "GavelSSConf",
    "RoundMechanism",
    "register_gavel_configs",
]

OBJECTIVES: tuple[str, ...] = ("las", "ftf", "makespan", "ss")


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
        placer = GavelPlacer(state, keep)
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
