"""Linear programs behind Gavel's allocation policies (HiGHS through ``scipy.optimize.linprog``).

Every policy here maps per-job throughputs to an *allocation matrix* ``X`` of shape (C, K): the
fraction of wall-clock time each scheduling unit ("combination": a single job, or for space
sharing a pair of jobs) should spend on each GPU type present in the cluster. Notation follows
``shared/reference/gavel.md`` §1: ``T`` (work units/s) is a job's isolated throughput at its scale
factor ``s`` (GPUs, packed) on a type, ``n`` the GPUs per type, ``thr(m, X) = sum_j T_mj X_mj``.

Base constraints shared by every LP::

    X >= 0,  X_kj = 0 where unit k cannot run on type j,
    sum_k s_k X_kj <= n_j          (capacity, GPU-time)
    sum_{k contains m} sum_j X_kj <= 1   (a job is in at most one place at a time)

All max-min objectives use one LP, :class:`MaxMinLP`::

    maximise   t + eps * mean_m g_m thr(m, X)
    subject to t <= c_m thr(m, X)   for every job m,   base constraints

* LAS / max-min fairness: ``c_m = s_m / (w_m thr(m, X_equal))`` (``g = c``).
* Makespan (the single-LP form of gavel.md §2.3): ``c_m = tau / R_m`` so ``t* = tau / makespan``.
* Finish-time fairness: bisection on rho; rho is feasible iff the LP with
  ``c_m = 1 / b_m(rho)`` reaches ``t* >= 1`` (see :func:`ftf_allocation`).

The secondary term (``eps``, default 1e-3) picks, among the max-min optimal allocations, one that
also hands spare capacity to jobs that are not the bottleneck (a single max-min LP leaves them
arbitrary; Gavel's interior-point solver returns some point of the optimal face). It changes the
max-min value by at most a relative ``eps``.

What is reused between solves, and what is rebuilt: :class:`MaxMinLP` caches the sparse
*layout* of the LP (the COO row/column index arrays and the constant coefficients) for the last
set of scheduling units, so a re-solve with the same units (every step of FTF's bisection, and
any re-solve after which no job arrived or left) only recomputes the throughput coefficients, the
right-hand side and the bounds, all vectorised. A change of the job set (an arrival or
completion) changes the layout, so it is rebuilt too.

Solver: HiGHS's interior-point method with crossover (``linprog(method="highs-ipm")``,
:func:`_linprog`), its dual simplex method as the fallback. The max-min LP is highly degenerate
(many allocations reach the optimum) and the simplex method pivots slowly through it: at 2,048
GPUs (about 2,200 jobs, 3 types) the interior-point solve takes about a third of the simplex
time (``docs/bench_policies.md``). Both end at an optimal vertex with the same optimal value, but
not necessarily the same vertex, so the allocation can differ from a simplex solve's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.optimize import OptimizeResult, linprog

from hetsched.sim.errors import HetschedError

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


class GavelSolverError(HetschedError):
    """The LP solver failed or reported an unexpected status."""


@dataclass
class Combos:
    """Scheduling units of a Gavel LP: single jobs and (space sharing) pairs of jobs.

    Attributes:
        members: Job rows (0..M-1) of each unit; second column -1 for a single job, (C, 2).
        scale: GPUs the unit occupies (its jobs' common scale factor), (C,).
        tput: Throughput of each member on each type while inside this unit, in work units/s;
            0 where the unit cannot run (second slot 0 for singles), (C, 2, K).
    """

    members: IntArray
    scale: IntArray
    tput: FloatArray

    def __post_init__(self) -> None:
        self.members = np.asarray(self.members, dtype=np.int64).reshape(-1, 2)
        self.scale = np.asarray(self.scale, dtype=np.int64).reshape(-1)
        self.tput = np.asarray(self.tput, dtype=np.float64)
        C = self.members.shape[0]
        if self.scale.shape != (C,) or self.tput.ndim != 3 or self.tput.shape[:2] != (C, 2):
            raise GavelSolverError(
                f"Combos shapes disagree: members {self.members.shape}, scale {self.scale.shape}, "
                f"tput {self.tput.shape}; want (C, 2), (C,), (C, 2, K)"
            )

    @property
    def num(self) -> int:
        """Number of units C."""
        return int(self.members.shape[0])

    @property
    def is_pair(self) -> BoolArray:
        """Whether each unit is a pair, (C,)."""
        return np.asarray(self.members[:, 1] >= 0)

    @property
    def runnable(self) -> BoolArray:
        """Whether each unit can run on each type (every member has throughput > 0), (C, K)."""
        first = self.tput[:, 0, :] > 0
        second = (self.tput[:, 1, :] > 0) | ~self.is_pair[:, None]
        return np.asarray(first & second)

    @classmethod
    def singles(cls, T: FloatArray, s: IntArray) -> Combos:
        """One unit per job: job m alone at throughput ``T[m]`` (shape (M, K)) on ``s[m]`` GPUs."""
        T = np.asarray(T, dtype=np.float64)
        M, K = T.shape
        members = np.stack([np.arange(M), np.full(M, -1)], axis=1)
        tput = np.zeros((M, 2, K))
        tput[:, 0, :] = T
        return cls(members, np.asarray(s, dtype=np.int64), tput)


# ---------------------------------------------------------------------- reference allocations
def equal_throughput(T: FloatArray, n: FloatArray) -> FloatArray:
    """``thr(m, X_equal) = sum_j T_mj n_j / N``: a job's speed on a random GPU, shape (M,)."""
    n = np.asarray(n, dtype=np.float64)
    return np.asarray(T @ n / max(float(n.sum()), 1e-12))


def isolated_allocation(s: IntArray, n: FloatArray, runnable: BoolArray) -> FloatArray:
    """Gavel's ``X_isolated``: a 1/M share of every type, rows scaled to sum <= 1.

    Args:
        s: Scale factor per job, (M,).
        n: GPUs per type, (K,).
        runnable: Whether each job can run on each type, (M, K); other entries are 0.

    Returns:
        ``x_mj = n_j / (M s_m)`` masked by ``runnable`` and divided by ``max(1, sum_j x_mj)``.
    """
    M = int(np.asarray(s).shape[0])
    if M == 0:
        return np.zeros((0, np.asarray(n).shape[0]))
    x = np.asarray(n, dtype=np.float64)[None, :] / (M * np.asarray(s, dtype=np.float64)[:, None])
    x = np.where(runnable, x, 0.0)
    return np.asarray(x / np.maximum(1.0, x.sum(axis=1, keepdims=True)))


def fit_capacity(X: FloatArray, scale: IntArray, n: FloatArray) -> FloatArray:
    """Clip to [0, 1] and scale columns down so that ``sum_k s_k X_kj <= n_j`` holds exactly."""
    X = np.clip(np.asarray(X, dtype=np.float64), 0.0, 1.0)
    used = np.asarray(scale, dtype=np.float64) @ X
    f = np.where(used > n, np.asarray(n, dtype=np.float64) / np.maximum(used, 1e-300), 1.0)
    X = X * f[None, :]
    rows = X.sum(axis=1, keepdims=True)
    return np.asarray(X / np.maximum(rows, 1.0))


# ---------------------------------------------------------------------- the LP
@dataclass
class _Structure:
    """Cached COO layout of the max-min LP for one set of units."""

    M: int
    K: int
    C: int
    mem_k: IntArray  # (E,) unit of each membership
    mem_r: IntArray  # (E,) slot (0/1) of each membership
    mem_m: IntArray  # (E,) job row of each membership
    rows: IntArray
    cols: IntArray
    const_data: FloatArray  # data of every entry except the throughput rows (first E*K entries)


class MaxMinLP:
    """``max t + eps * mean_m g_m thr(m, X)`` s.t. ``t <= c_m thr(m, X)`` and base constraints.

    Variables are ``X`` (C*K, row-major) and ``t``. The COO index structure is cached for the
    last set of units (by their membership array and K); each :meth:`solve` only fills in the
    coefficient values and calls HiGHS.

    Attributes:
        solves: Number of LPs solved.
        solve_s: Total wall-clock seconds spent in the solver.
    """

    def __init__(self) -> None:
        self._key: tuple[bytes, int, int] | None = None
        self._st: _Structure | None = None
        self.solves = 0
        self.solve_s = 0.0

    def _structure(self, combos: Combos, M: int, K: int) -> _Structure:
        key = (combos.members.tobytes(), K, M)
        if self._key == key and self._st is not None:
            return self._st
        C = combos.num
        k_idx, r_idx = np.nonzero(combos.members >= 0)
        m_idx = combos.members[k_idx, r_idx]
        E = k_idx.shape[0]
        jj = np.arange(K)
        # 1) throughput rows: t - sum c_m T x <= 0  (rows 0..M-1); data filled per solve.
        r1 = np.repeat(m_idx, K)
        c1 = (k_idx[:, None] * K + jj[None, :]).reshape(-1)
        # 2) t column in the throughput rows.
        r2 = np.arange(M)
        c2 = np.full(M, C * K)
        # 3) capacity rows M..M+K-1: sum_k s_k x_kj <= n_j.
        r3 = np.tile(M + jj, C)
        c3 = np.arange(C * K)
        d3 = np.repeat(combos.scale.astype(np.float64), K)
        # 4) one-place rows M+K..2M+K-1: sum_{k ∋ m} sum_j x_kj <= 1.
        r4 = M + K + r1
        c4 = c1
        rows = np.concatenate([r1, r2, r3, r4])
        cols = np.concatenate([c1, c2, c3, c4])
        const = np.concatenate([np.ones(M), d3, np.ones(E * K)])
        self._st = _Structure(M, K, C, k_idx, r_idx, m_idx, rows, cols, const)
        self._key = key
        return self._st

    def solve(
        self,
        combos: Combos,
        n: FloatArray,
        c: FloatArray,
        g: FloatArray | None = None,
        eps: float = 1e-3,
    ) -> tuple[FloatArray, float]:
        """Solve the LP.

        Args:
            combos: Scheduling units (C of them) over M jobs.
            n: GPUs per type, (K,).
            c: Per-job coefficient of the max-min constraint, (M,), > 0.
            g: Per-job weight of the secondary term (default ``c``), (M,).
            eps: Weight of the secondary term (0 disables it).

        Returns:
            ``(X, t)``: the allocation (C, K), clipped to [0, 1] and to capacity, and the optimal
            max-min value ``t``.

        Raises:
            GavelSolverError: If HiGHS does not report an optimal solution.
        """
        import time

        n = np.asarray(n, dtype=np.float64)
        c = np.asarray(c, dtype=np.float64)
        M, K = c.shape[0], n.shape[0]
        C = combos.num
        if C == 0 or M == 0:
            return np.zeros((C, K)), 0.0
        if combos.tput.shape[2] != K:
            raise GavelSolverError(f"units have {combos.tput.shape[2]} types, n has {K}")
        if np.any(~np.isfinite(c)) or np.any(c <= 0):
            bad = int(np.flatnonzero(~np.isfinite(c) | (c <= 0))[0])
            raise GavelSolverError(f"max-min coefficient c[{bad}]={c[bad]} must be finite and > 0")
        st = self._structure(combos, M, K)
        tp = combos.tput[st.mem_k, st.mem_r, :]  # (E, K)
        d1 = -(c[st.mem_m][:, None] * tp).reshape(-1)
        data = np.concatenate([d1, st.const_data])
        A = sparse.coo_array((data, (st.rows, st.cols)), shape=(2 * M + K, C * K + 1)).tocsc()
        b = np.concatenate([np.zeros(M), n, np.ones(M)])
        gw = c if g is None else np.asarray(g, dtype=np.float64)
        sec = np.bincount(
            np.repeat(st.mem_k, K) * K + np.tile(np.arange(K), st.mem_k.shape[0]),
            weights=(gw[st.mem_m][:, None] * tp).reshape(-1),
            minlength=C * K,
        )
        cost = np.concatenate([-(eps / M) * sec, [-1.0]])
        ub = np.where(combos.runnable & (combos.scale[:, None] <= n[None, :]), 1.0, 0.0)
        bounds = np.zeros((C * K + 1, 2))
        bounds[:-1, 1] = ub.reshape(-1)
        bounds[-1] = (0.0, np.inf)
        t0 = time.perf_counter()
        res = _linprog(cost, A, b, bounds)
        self.solve_s += time.perf_counter() - t0
        self.solves += 1
        if res.status != 0 or res.x is None:
            raise GavelSolverError(
                f"HiGHS failed on the Gavel max-min LP ({M} jobs, {C} units, {K} types): "
                f"status {res.status}: {res.message}"
            )
        X = fit_capacity(np.asarray(res.x[:-1]).reshape(C, K), combos.scale, n)
        return X, float(res.x[-1])


def _linprog(
    cost: FloatArray, A: sparse.csc_array, b: FloatArray, bounds: FloatArray
) -> OptimizeResult:
    """``min cost x`` s.t. ``A x <= b`` and ``bounds`` with HiGHS (tests patch it to fail).

    HiGHS's interior-point method with crossover to a vertex; its dual simplex method if that
    does not report an optimum.

    Args:
        cost: Objective coefficients, shape (V,).
        A: Constraint matrix, CSC, shape (R, V).
        b: Upper bounds of the rows, shape (R,).
        bounds: Lower and upper bound per variable, shape (V, 2) (``inf`` allowed).

    Returns:
        ``scipy.optimize.linprog``'s result: ``status`` (0 = optimal), ``x`` and ``message``.
    """
    res = linprog(cost, A_ub=A, b_ub=b, bounds=bounds, method="highs-ipm")
    if res.status != 0 or res.x is None:
        res = linprog(cost, A_ub=A, b_ub=b, bounds=bounds, method="highs-ds")
    return res


def job_throughput(combos: Combos, X: FloatArray, M: int) -> FloatArray:
    """``thr(m, X)``: each job's effective throughput summed over its units, (M,)."""
    k_idx, r_idx = np.nonzero(combos.members >= 0)
    m_idx = combos.members[k_idx, r_idx]
    per = (combos.tput[k_idx, r_idx, :] * X[k_idx, :]).sum(axis=1)
    return np.asarray(np.bincount(m_idx, weights=per, minlength=M), dtype=np.float64)


# ---------------------------------------------------------------------- policies
def las_allocation(
    lp: MaxMinLP,
    combos: Combos,
    T_solo: FloatArray,
    s: IntArray,
    w: FloatArray,
    n: FloatArray,
    eps: float = 1e-3,
) -> FloatArray:
    """Heterogeneity-aware max-min fairness (gavel.md §2.1); also space sharing via ``combos``.

    Args:
        lp: The LP (keeps its cached structure).
        combos: Units (singles, or singles + pairs for space sharing).
        T_solo: Solo throughput per job and type (for ``thr(m, X_equal)``), (M, K).
        s: Scale factors, (M,).
        w: Priority weights, (M,).
        n: GPUs per type, (K,).
        eps: Secondary-term weight.

    Returns:
        X, (C, K).
    """
    thr_eq = equal_throughput(T_solo, n)
    c = np.asarray(s, dtype=np.float64) / (np.asarray(w, dtype=np.float64) * thr_eq)
    X, _ = lp.solve(combos, n, c, eps=eps)
    return X


def makespan_allocation(
    lp: MaxMinLP, T: FloatArray, s: IntArray, R: FloatArray, n: FloatArray, eps: float = 1e-3
) -> tuple[FloatArray, float]:
    """Makespan policy as one LP (gavel.md §2.3, "[ours]").

    ``maximise u s.t. thr(m, X) >= R_m u`` with ``u = 1 / makespan``; the secondary term is
    ``eps * mean_m thr(m, X) / max_j T_mj`` (hands out spare capacity).

    Returns:
        ``(X, makespan_s)``: the allocation (M, K) and the LP's makespan bound ``1/u*`` in seconds.
    """
    T = np.asarray(T, dtype=np.float64)
    R = np.asarray(R, dtype=np.float64)
    best = T.max(axis=1)
    tau = float(np.median(R / best))  # time scale so that coefficients are O(1)
    c = tau / R
    X, t = lp.solve(Combos.singles(T, s), n, c, g=1.0 / best, eps=eps)
    if t <= 0:
        raise GavelSolverError("makespan LP returned u <= 0; some job cannot run on any type")
    return X, tau / t


def ftf_allocation(
    lp: MaxMinLP,
    T: FloatArray,
    s: IntArray,
    n: FloatArray,
    elapsed_s: FloatArray,
    remaining: FloatArray,
    t_iso_s: FloatArray,
    *,
    rel_tol: float = 1e-3,
    max_iter: int = 40,
    eps: float = 1e-3,
) -> tuple[FloatArray, float, int]:
    """Finish-time fairness (gavel.md §2.2) by bisection on rho with LP feasibility checks.

    ``rho_m(X) = (t_m + R_m / thr(m, X)) / E_m`` with ``E_m = t_iso_m + R_m / thr(m, X_iso)``.
    rho is feasible iff some X meets ``thr(m, X) >= b_m = R_m / (rho E_m - t_m)`` for all m
    (and ``rho E_m > t_m``); equivalently the max-min LP with ``c_m = 1/b_m`` reaches
    ``t*(rho) >= 1``. The bracket starts at ``[max_m (t_m + R_m / max_j T_mj) / E_m,
    max_m rho_m(X_iso)]`` (the upper end is feasible by construction). Since ``t*(rho) / rho``
    increases with rho, each LP also yields a bound on the other side: ``rho / t*`` is a lower
    bound when ``t* >= 1`` and a feasible level when ``t* < 1`` (tried next, a Newton step);
    otherwise the bracket is bisected. The upper end is always the realised ``max_m rho_m(X)``
    of the best X found, so the result is exact for that X.

    Args:
        lp: The LP.
        T: Throughput per job and type, (M, K).
        s: Scale factors, (M,).
        n: GPUs per type, (K,).
        elapsed_s: Time since each job arrived ``t_m``, seconds, (M,).
        remaining: Remaining work ``R_m``, (M,).
        t_iso_s: Isolated time consumed so far ``t_iso_m``, seconds, (M,).
        rel_tol: Stop when ``(hi - lo) <= rel_tol * hi``.
        max_iter: Most bisection steps.
        eps: Secondary-term weight of each LP.

    Returns:
        ``(X, rho, lps)``: the allocation at the smallest feasible rho found (``X_iso`` if no
        smaller rho was feasible), that rho, and the number of LPs solved.

    Raises:
        GavelSolverError: If an LP fails (the caller decides on the fallback).
    """
    T = np.asarray(T, dtype=np.float64)
    runnable = T > 0
    x_iso = isolated_allocation(s, n, runnable)
    thr_iso = (T * x_iso).sum(axis=1)
    R = np.asarray(remaining, dtype=np.float64)
    t = np.asarray(elapsed_s, dtype=np.float64)
    E = np.asarray(t_iso_s, dtype=np.float64) + R / thr_iso
    best = T.max(axis=1)
    lo = float(np.max((t + R / best) / E))

    def rho_of(X: FloatArray) -> float:
        thr = (T * X).sum(axis=1)
        if np.any(thr <= 0):
            return float("inf")
        return float(np.max((t + R / thr) / E))

    X_best = x_iso
    hi = rho_of(x_iso)  # feasible by construction
    combos = Combos.singles(T, s)
    lps = 0
    cand: float | None = None
    for _ in range(max_iter):
        if hi - lo <= rel_tol * hi:
            break
        if cand is None or not (lo < cand < hi):
            cand = 0.5 * (lo + hi)
        slack = cand * E - t
        if np.any(slack <= 0):
            lo, cand = cand, None
            continue
        X, tau = lp.solve(combos, n, slack / R, g=1.0 / best, eps=eps)  # c_m = 1 / b_m
        lps += 1
        r = rho_of(X)
        if r < hi:
            hi, X_best = r, X
        if tau >= 1.0:
            # t*(rho)/rho grows with rho, so rho/t* is a lower bound (slack for the eps term).
            lo = max(lo, cand / (tau * (1.0 + eps)))
            cand = None
        else:
            lo = max(lo, cand)
            cand = cand / max(tau, 1e-12)  # feasible by the same argument: a Newton step
    return X_best, hi, lps


def candidate_pairs(
    model: IntArray,
    s: IntArray,
    T: FloatArray,
    pair_iota: FloatArray,
    type_index: IntArray,
    *,
    max_partners: int = 4,
    max_pairs: int | None = None,
) -> tuple[IntArray, FloatArray]:
    """Pairs of 1-GPU jobs worth co-locating, with their co-located throughputs.

    A pair (a, b) of 1-GPU jobs may share a GPU of type j when the throughput model measured it
    (``pair_iota`` finite both ways) and both run there alone; member throughputs are
    ``T_aj (1 - iota_abj)``. A pair is kept only if its normalised packed throughput
    ``(1 - iota_ab) + (1 - iota_ba)`` exceeds 1 on some type (otherwise time-sharing the two
    jobs dominates it). Pruning (documented cap): each job keeps its ``max_partners`` best
    partners (by that normalised throughput, ties to older jobs); a pair survives if either
    member keeps it, and at most ``max_pairs`` pairs (default ``2 * M``) survive overall.

    Args:
        model: Model index per job, (M,).
        s: Scale factor per job, (M,).
        T: Solo throughput per job and present type, (M, K).
        pair_iota: The throughput model's slowdown table, (num_models, num_models, all types).
        type_index: Catalogue index of each present type, (K,).
        max_partners: Partners kept per job.
        max_pairs: Cap on the number of pairs.

    Returns:
        ``(pairs, tput)``: job-row pairs (P, 2) with a < b, and member throughputs (P, 2, K).
    """
    M, K = T.shape
    if max_pairs is None:
        max_pairs = 2 * M
    one = np.flatnonzero(np.asarray(s) == 1)
    if one.size < 2 or max_partners <= 0 or max_pairs <= 0:
        return np.zeros((0, 2), dtype=np.int64), np.zeros((0, 2, K))
    mo = np.asarray(model)[one]
    io_ab = pair_iota[mo[:, None], mo[None, :], :][:, :, type_index]  # (E, E, K)
    io_ba = np.swapaxes(io_ab, 0, 1)
    Te = T[one]  # (E, K)
    ok = np.isfinite(io_ab) & np.isfinite(io_ba) & (Te[:, None, :] > 0) & (Te[None, :, :] > 0)
    gain = np.where(ok, (1.0 - np.nan_to_num(io_ab)) + (1.0 - np.nan_to_num(io_ba)), 0.0)
    benefit = gain.max(axis=2)  # (E, E)
    E = one.size
    benefit[np.arange(E), np.arange(E)] = 0.0
    useful = benefit > 1.0 + 1e-9
    # Each job's best partners (stable: ties go to the older job, i.e. the lower row).
    order = np.argsort(-benefit, axis=1, kind="stable")[:, :max_partners]
    keep = np.zeros((E, E), dtype=bool)
    np.put_along_axis(keep, order, True, axis=1)
    keep = (keep | keep.T) & useful
    a, b = np.nonzero(np.triu(keep, 1))
    if a.size > max_pairs:
        sel = np.argsort(-benefit[a, b], kind="stable")[:max_pairs]
        sel.sort()
        a, b = a[sel], b[sel]
    tput = np.zeros((a.size, 2, K))
    okp = ok[a, b]
    tput[:, 0, :] = np.where(okp, Te[a] * (1.0 - np.nan_to_num(io_ab[a, b])), 0.0)
    tput[:, 1, :] = np.where(okp, Te[b] * (1.0 - np.nan_to_num(io_ba[a, b])), 0.0)
    pairs = np.stack([one[a], one[b]], axis=1).astype(np.int64)
    return pairs, tput
