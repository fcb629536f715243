"""Sia's assignment MILP: the HiGHS model kept between rounds and re-solved, the exact shortcut
that skips the solver when capacity does not bind, and the greedy fallback.

The model is ``minimise cost @ x`` subject to ``matrix @ x <= row_upper`` and ``lower <= x <= 1``
with x binary: one row per job (at most one configuration) and one capacity row per GPU type.
:class:`hetsched.baselines.sia.Sia` builds the costs and the matrix each round (see its module
docstring); this module solves it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from hetsched.sim.errors import HetschedError

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


class SolverError(HetschedError):
    """The MILP solver returned no usable solution."""


@dataclass
class MilpResult:
    """Outcome of :func:`solve_assignment_milp`.

    Attributes:
        x: Variable values, shape (V,), or ``None`` when no solution was found.
        status: Solver status name (``"optimal"``, ``"time_limit"``, ``"infeasible"`` ...).
        message: Human-readable detail.
        lp_integral: Whether the LP relaxation was already integral (no branch and bound).
    """

    x: FloatArray | None
    status: str
    message: str
    lp_integral: bool = False


#: HiGHS MIP options: presolve and primal heuristics off (these tiny assignment models solve at
#: the root; the heuristics cost ~3x the solve time and never changed the optimum in our checks).
_HIGHS_MIP_OPTIONS: dict[str, Any] = {
    "presolve": "off",
    "mip_heuristic_run_feasibility_jump": False,
    "mip_heuristic_run_rens": False,
    "mip_heuristic_run_rins": False,
    "mip_heuristic_run_root_reduced_cost": False,
    "mip_heuristic_run_shifting": False,
    "mip_heuristic_run_zi_round": False,
    "mip_detect_symmetry": False,
}


def _load_highspy() -> Any:
    """The ``highspy`` module, or ``None`` when it is not installed."""
    try:
        import highspy
    except ImportError:  # pragma: no cover - highspy ships with the dev environment
        return None
    return highspy


class HighsModelCache:
    """A HiGHS instance that keeps the last assignment model, to re-solve instead of rebuild.

    The model is *rebuilt* (``passModel``) whenever the constraint matrix changes: a job arrives
    or leaves, a configuration becomes valid or invalid (the doubling cap grows, a job starts or
    stops running, a new extra column appears). When the matrix is identical to the previous
    round's (same jobs, same valid (job, configuration) pairs: the common case between arrivals
    and departures), only the costs, the variable bounds (pins) and the row bounds are *updated*
    in place, integrality is reset to continuous, and HiGHS re-solves the LP relaxation from its
    previous basis (a warm start); branch and bound, when needed, starts afresh every time.

    Attributes:
        highs: The ``highspy.Highs`` instance (``None`` until the first solve).
        key: Hash of the current model's matrix (``None`` = no model).
        integer: Whether the current model's columns are integer (the MIP phase ran last).
        rebuilds: Models passed to HiGHS from scratch.
        reuses: Solves that updated the previous model in place.
    """

    def __init__(self) -> None:
        self.highs: Any = None
        self.key: int | None = None
        self.integer = False
        self.rebuilds = 0
        self.reuses = 0


def _matrix_key(csc: sparse.csc_array) -> int:
    """Hash of a CSC matrix's shape, pattern and values."""
    return hash(
        (csc.shape, csc.indptr.tobytes(), csc.indices.tobytes(), np.asarray(csc.data).tobytes())
    )


def _new_highs(highspy: Any) -> Any:
    """A new ``highspy.Highs``, without the banner HiGHS prints to stdout when constructed.

    The banner cannot be switched off by an option (``output_flag`` only takes effect after
    construction), so file descriptor 1 points at ``os.devnull`` while the object is built. The
    model is built once and kept between rounds, so this runs once per run.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            return highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _load_model(
    highspy: Any,
    cache: HighsModelCache | None,
    cost: FloatArray,
    csc: sparse.csc_array,
    row_upper: FloatArray,
    lower: FloatArray,
    time_limit_s: float,
) -> Any:
    """A Highs instance holding the model: the cached one updated in place, or a new build."""
    V, R = cost.shape[0], csc.shape[0]
    key = _matrix_key(csc) if cache is not None else None
    if cache is not None and cache.highs is not None and cache.key == key:
        h = cache.highs
        idx = np.arange(V, dtype=np.int32)
        if cache.integer:
            h.changeColsIntegrality(V, idx, np.full(V, highspy.HighsVarType.kContinuous))
            cache.integer = False
        h.changeColsCost(V, idx, np.asarray(cost, dtype=np.float64))
        h.changeColsBounds(V, idx, np.asarray(lower, dtype=np.float64), np.ones(V))
        h.changeRowsBounds(
            R,
            np.arange(R, dtype=np.int32),
            np.full(R, -highspy.kHighsInf),
            np.asarray(row_upper, dtype=np.float64),
        )
        h.setOptionValue("time_limit", float(time_limit_s))
        cache.reuses += 1
        return h
    h = cache.highs if cache is not None and cache.highs is not None else _new_highs(highspy)
    h.clearModel()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)  # decision time is measured single-threaded (metrics.md)
    h.setOptionValue("time_limit", float(time_limit_s))
    for opt, val in _HIGHS_MIP_OPTIONS.items():  # also for the LP phase: same path every time
        h.setOptionValue(opt, val)
    lp = highspy.HighsLp()
    lp.num_col_ = V
    lp.num_row_ = R
    lp.col_cost_ = np.asarray(cost, dtype=np.float64)
    lp.col_lower_ = np.asarray(lower, dtype=np.float64)
    lp.col_upper_ = np.ones(V)
    lp.row_lower_ = np.full(R, -highspy.kHighsInf)
    lp.row_upper_ = np.asarray(row_upper, dtype=np.float64)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = csc.indptr
    lp.a_matrix_.index_ = csc.indices
    lp.a_matrix_.value_ = csc.data
    h.passModel(lp)
    if cache is not None:
        cache.highs, cache.key, cache.integer = h, key, False
        cache.rebuilds += 1
    return h


def solve_assignment_milp(
    cost: FloatArray,
    matrix: sparse.csc_array,
    row_upper: FloatArray,
    lower: FloatArray,
    *,
    mip_rel_gap: float = 1e-4,
    time_limit_s: float = 60.0,
    cache: HighsModelCache | None = None,
) -> MilpResult:
    """Minimise ``cost @ x`` s.t. ``matrix @ x <= row_upper``, ``lower <= x <= 1``, x binary.

    Uses HiGHS through ``highspy`` when installed (LP relaxation first: an integral LP optimum is
    optimal for the MILP; otherwise branch and bound at ``mip_rel_gap``), else
    ``scipy.optimize.milp`` (also HiGHS, built from scratch on every call).

    Args:
        cost: Objective coefficients, shape (V,).
        matrix: Constraint matrix, shape (R, V).
        row_upper: Row upper bounds, shape (R,).
        lower: Variable lower bounds (1 pins a variable), shape (V,).
        mip_rel_gap: Relative MIP gap.
        time_limit_s: Time limit in seconds.
        cache: Keeps the HiGHS model between calls; a call whose matrix equals the previous
            one's updates costs and bounds in place and warm-starts (see
            :class:`HighsModelCache`). ``None``: build a fresh model.

    Returns:
        A :class:`MilpResult`; ``x`` is ``None`` when no feasible solution was found.
    """
    V = cost.shape[0]
    highspy = _load_highspy()
    if highspy is None:  # pragma: no cover
        res = milp(
            cost,
            integrality=np.ones(V),
            bounds=Bounds(lower, np.ones(V)),
            constraints=LinearConstraint(matrix, -np.inf, row_upper),
            options={"mip_rel_gap": mip_rel_gap, "time_limit": time_limit_s, "disp": False},
        )
        names = {0: "optimal", 1: "time_limit", 2: "infeasible", 3: "unbounded", 4: "error"}
        ok = res.x is not None and res.status in (0, 1)
        return MilpResult(res.x if ok else None, names.get(res.status, "error"), str(res.message))
    csc = sparse.csc_array(matrix)
    h = _load_model(highspy, cache, cost, csc, row_upper, lower, time_limit_s)
    h.run()
    st = h.getModelStatus()
    if st == highspy.HighsModelStatus.kOptimal:
        x = np.asarray(h.getSolution().col_value)
        if np.all(np.minimum(np.abs(x), np.abs(1.0 - x)) < 1e-7):
            return MilpResult(np.round(x), "optimal", "LP relaxation integral", lp_integral=True)
    elif st == highspy.HighsModelStatus.kInfeasible:
        return MilpResult(None, "infeasible", "LP relaxation infeasible")
    h.setOptionValue("mip_rel_gap", float(mip_rel_gap))
    idx = np.arange(V, dtype=np.int32)
    h.changeColsIntegrality(V, idx, np.full(V, highspy.HighsVarType.kInteger))
    if cache is not None:
        cache.integer = True
    h.run()
    st = h.getModelStatus()
    has_x = h.getInfo().primal_solution_status == 2
    name = h.modelStatusToString(st)
    if st == highspy.HighsModelStatus.kOptimal or (
        st == highspy.HighsModelStatus.kTimeLimit and has_x
    ):
        x = np.round(np.asarray(h.getSolution().col_value))
        return MilpResult(
            x, "optimal" if st == highspy.HighsModelStatus.kOptimal else "time_limit", name
        )
    return MilpResult(None, name.lower().replace(" ", "_"), name)


def exact_shortcut(
    coef: FloatArray,
    va: IntArray,
    gpus: IntArray,
    tp: IntArray,
    lb: FloatArray,
    A: int,
    cap: IntArray,
) -> IntArray | None:
    """Exact shortcut: if every job's individually best variable fits jointly, it is optimal.

    Each job takes its cheapest variable if that has negative cost (pinned jobs their pinned
    variable). Without binding capacity the MILP decomposes per job, so this is an optimal
    solution; otherwise ``None`` (solve the MILP).

    Args:
        coef: Cost of every variable, shape (V,).
        va: Job row (0..A-1) of every variable, shape (V,).
        gpus: GPUs of every variable's configuration, shape (V,).
        tp: Capacity row (GPU type position) of every variable, shape (V,).
        lb: Lower bound of every variable (1 = pinned), shape (V,).
        A: Number of jobs.
        cap: GPUs available per GPU type position, shape (Kp,).

    Returns:
        The chosen variables in ascending order, or ``None`` when capacity binds.
    """
    pinned_job = np.zeros(A, dtype=bool)
    pinned_job[va[lb > 0]] = True
    key = np.where(lb > 0, -np.inf, np.where(pinned_job[va], np.inf, coef))
    order = np.lexsort((np.arange(va.size), key, va))
    first = order[np.unique(va[order], return_index=True)[1]]
    pick = first[(coef[first] < 0) | (lb[first] > 0)]
    used = np.bincount(tp[pick], weights=gpus[pick], minlength=cap.size)
    if np.all(used <= cap):
        return np.sort(pick)
    return None


def greedy_assignment(
    Amat: FloatArray,
    valid: BoolArray,
    is_cur: BoolArray,
    pinned: BoolArray,
    running: BoolArray,
    nc: IntArray,
    tpos: IntArray,
    cap: IntArray,
) -> IntArray:
    """Fallback when the solver fails: keep running jobs (pinned first), then admit waiting jobs.

    Waiting jobs are taken in order, each at its smallest valid GPU count that still fits, on
    the configuration with the lowest powered cost among those.

    Args:
        Amat: Powered cost matrix, shape (A, C).
        valid: Valid (job, configuration) entries, shape (A, C).
        is_cur: Each job's current configuration, shape (A, C).
        pinned: Jobs pinned to their current configuration, shape (A,).
        running: Jobs running now, shape (A,).
        nc: GPUs of every configuration, shape (C,).
        tpos: GPU type position of every configuration, shape (C,).
        cap: GPUs available per GPU type position, shape (Kp,).

    Returns:
        The chosen configuration per job (-1 = none), shape (A,).
    """
    A = Amat.shape[0]
    out = np.full(A, -1, dtype=np.int64)
    left = cap.astype(np.int64).copy()
    order = np.concatenate(
        [np.flatnonzero(pinned), np.flatnonzero(running & ~pinned), np.flatnonzero(~running)]
    )
    for a in order.tolist():
        if running[a] and is_cur[a].any():
            c = int(np.flatnonzero(is_cur[a])[0])
            if nc[c] <= left[tpos[c]]:
                out[a] = c
                left[tpos[c]] -= nc[c]
            continue
        ok = np.flatnonzero(valid[a] & (nc <= left[tpos]))
        if ok.size == 0:
            continue
        smallest = ok[nc[ok] == nc[ok].min()]
        c = int(smallest[np.argmin(Amat[a, smallest])])
        out[a] = c
        left[tpos[c]] -= nc[c]
    return out
