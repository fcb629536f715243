"""Sia: heterogeneity-aware, goodput-optimised, elastic scheduling (Jayaram Subramanya et al.,
SOSP'23), re-implemented from ``shared/reference/sia.md``.

Every 60 s round, for every active job, Sia picks at most one *configuration* (GPU type, nodes,
GPUs) by solving a small assignment MILP, then places the chosen configurations on nodes.

**Configurations** (sia.md §4). For each GPU type present, with R GPUs per node and N_max whole
nodes of that size: ``{(1 node, 2^k GPUs): 2^k <= R} ∪ {(n nodes, n*R GPUs): 2 <= n <= N_max}``,
capped at ``max_gpus_per_job`` (64) GPUs and, optionally, at a per-type node cap (Sia's
"profiled-node caps"; off by default because our throughput table extrapolates). R itself is added
when it is not a power of two. On Sia's 64-GPU cluster this gives 19 columns (8 T4 + 5 A100 +
6 RTX 2080 Ti). A configuration is valid for job i when ``min_gpus <= GPUs <= max_gpus``, the GPU
count is at most the doubling cap (:mod:`hetsched.baselines.goodput`), the job may use the type,
and the job can run there at all (positive throughput, memory share above the floor). Rigid jobs
(``min_gpus == max_gpus``) only choose the GPU type: when their count is not in the set above, an
extra column (type, count) is added for them (the same happens for an elastic job whose
``[min_gpus, max_gpus]`` window holds no standard count on a type).

**Cost matrix** (sia.md §5.1), each round:

1. ``G_ij`` = the policy's *own* goodput estimate (:class:`~hetsched.baselines.goodput.
   GoodputEstimator`; never the simulator's ground truth beyond the 1-GPU profiles Sia pays for).
2. Row normalisation: ``G_ij <- N_min,i * G_ij / min_j G_ij`` over valid entries (``N_min,i`` =
   the job's ``min_gpus``: 1 for adaptive jobs, the GPU count for rigid jobs, as in the artifact);
   entries <= ``invalid_gain`` (1e-4) are reset to it.
3. Restart factor ``r_i = max(T_i - n_i S_i, 0) / (T_i + S_i)`` (age T_i, restarts n_i, the
   policy's restart-penalty estimate S_i by application name, sia.md §5.1), ``r_i = 1`` while
   ``T_i < S_i`` (rigid jobs: attained GPU-seconds ``< S_i``); applied to every configuration of a
   *running* job except its current one (a type change counts as a restart too).
4. ``A_ij = min(round(G_ij ** p, 2), clip)`` with ``p = -0.5`` and ``clip = 3000``.

**MILP** (sia.md §5.2-5.3): binary ``x_ij`` per valid (job, configuration); minimise
``sum A_ij x_ij + lambda_n (n_jobs - sum x_ij)`` (``lambda_n = 1.1``; for ``p > 0`` the objective is
maximised and lambda_n enters with the opposite sign, Sia's sign rule) subject to one
configuration per job and, per GPU type, the GPUs chosen <= the GPUs of that type. Invalid
entries are left out of the model (with ``p < 0`` their cost 100 exceeds lambda_n, so they could
never be chosen anyway). A job still in checkpoint-restore is pinned to its current configuration
(``x = 1``). Solved with HiGHS (``highspy``; ``scipy.optimize.milp`` if it is missing) at a relative
gap of 0.01 %; the build and solve times of every round are kept in :attr:`Sia.stats`.

*What is rebuilt each round, honestly:* the cost matrix, the list of valid (job, configuration)
variables and the sparse constraint matrix are recomputed in numpy every round (a few hundred
microseconds). Then, in order: (a) if the whole problem (costs, variables, pins) equals the
previous round's, the previous answer is reused (``stats["cache_hits"]``); (b) if every job's
individually best configuration fits the capacities jointly, that is provably optimal and no
solver is called (``stats["shortcuts"]``); (c) otherwise HiGHS runs. The HiGHS model is kept
between rounds (:class:`HighsModelCache`): when the constraint matrix is the same as in the last
solve (same jobs, same valid pairs) only costs and bounds are updated in place and the LP
relaxation is warm-started from the previous basis (``stats["model_reuses"]``); any change of the
active jobs or of the valid set rebuilds the model (``stats["model_rebuilds"]``). Branch and bound,
when the LP optimum is fractional, always starts afresh.

**Allocation-change penalty** ``lambda_a = 0.01`` (the value of Sia's physical ``mip`` policy;
Sia's *simulator* uses none and relies on the restart factor alone -- pass ``lambda_a=0`` for
that): adds ``lambda_a * sum_ij |x_ij - prev_ij|`` to the minimised objective, i.e.
``-lambda_a`` on a running job's current configuration and ``+lambda_a`` on every other variable.
It breaks the exact ties between a running job and a waiting one that the restart factor leaves
open (pre-empting a job is not penalised by ``r_i``, but resuming it later is a restart). On Sia's
own low-contention workloads it changes little (Philly workload-1: avg JCT 0.435 -> 0.431 h,
restarts/job 2.6 -> 2.1); on the heavily contended ``philly`` preset (300 rigid jobs arriving
within minutes on ``sia_64``) ``lambda_a = 0`` lets the solver swap tied jobs every round (avg JCT
7.5 h, 91 restarts/job) while 0.01 gives 2.0 h and 3.0 restarts/job (see
``docs/reproduction_sia.md``).

**Solver failure.** If HiGHS returns no solution (infeasible, error, or a time limit without an
incumbent), ``on_solver_failure="raise"`` raises :class:`SolverError`; the default ``"greedy"``
falls back to a documented heuristic (keep every running job's configuration, pinned jobs first,
then admit waiting jobs in arrival order at their smallest valid count on the type with the best
normalised goodput, while that type has GPUs left), counts it in ``stats["solver_failures"]`` and
warns. It never returns a silently empty schedule.

**Placement** (sia.md §7), per GPU type: jobs whose configuration is unchanged keep their nodes
(no restart); the others are placed in descending GPU count; whole-node allocations take whole
free nodes (highest index first), the remainder (a partial-node allocation) goes to one node, best
fit, never split. If fragmentation blocks a job, single-node jobs that merely kept their old nodes
(not pinned) are evicted from the node that frees the needed space with the fewest GPUs and
re-queued (each at most once per round). If the job still cannot be placed it is shrunk to the
largest power-of-two count (>= ``min_gpus``) that fits without eviction, else left out for this
round (``stats["shrunk"]``, ``stats["dropped"]``). CPU cores and memory are fixed per-GPU shares
(:class:`~hetsched.baselines.base.Placer`). The result is always an allocation the engine accepts.

**Restoring jobs.** A job whose restart count went up in the last round is restoring until
``t_restart + restart_delay`` (the policy observes when a job's checkpoint-restore finishes, as
Sia's ``scaling_underway`` flag does); it is pinned meanwhile, and its observed rate only feeds
the estimator once the restore is over.

**Node failures** (:mod:`hetsched.sim.faults`). Every round the per-type capacity (the MILP's
capacity rows, the exact shortcut and the greedy fallback) counts only GPUs of nodes that are up
(``SimState.node_up``), and placement treats a down node as full, so no allocation ever names one.
A capacity change is only a change of the capacity rows' right-hand sides: the kept HiGHS model
is updated in place (the valid set and the constraint matrix use the cluster's full per-type
capacity and do not change when nodes fail or recover). A job stopped by a failure is pending for
the policy (not running, no restart factor, not pinned) and is re-placed like a waiting job; a
job whose current placement names a down node (the engine never reports one, but the policy
does not rely on that) is treated the same way. Its rate sample for the round it failed in is
not fed to the estimator: only jobs that ran the whole round on up nodes are observed (the
engine reports a failed job's rate as 0 and drops it from ``SimState.current``).
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from hetsched.baselines.base import BasePolicy, Placer
from hetsched.baselines.goodput import (
    DEFAULT_RESTART_PENALTY_S,
    PROFILE_GPU_S_PER_TYPE,
    SIA_RESTART_PENALTY_S,
    GoodputEstimator,
)
from hetsched.sim.allocation import Allocation
from hetsched.sim.catalog import GPU_TYPE_NAMES, canonical_gpu_type
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimState
from hetsched.sim.errors import HetschedError
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


class SolverError(HetschedError):
    """The MILP solver returned no usable solution."""


@dataclass
class SiaConf:
    """:class:`hetsched.baselines.sia.Sia` (sia.md defaults).

    Attributes:
        p: Fairness power (negative: minimise, more fair; positive: maximise).
        lambda_n: No-allocation penalty magnitude (> 1; its sign follows Sia's sign rule).
        round_s: Round length in seconds.
        clip: Clip value of the powered matrix.
        invalid_gain: Gain of invalid / unknown entries.
        mip_rel_gap: Relative MIP gap (0.01 %).
        time_limit_s: HiGHS time limit per round in seconds.
        max_gpus_per_job: Largest configuration in GPUs.
        max_nodes_per_type: Optional cap on nodes per configuration, by GPU type name.
        restart_penalty_s: Restart-penalty estimates S_i by application (model) name, seconds.
        default_restart_penalty_s: S_i of applications not listed.
        obs_weight: Weight of the newest observation in the estimator's moving average.
        profile_gpu_s_per_type: Profiling cost per job and GPU type (reported), GPU-seconds.
        on_solver_failure: ``greedy`` (documented fallback, warns) or ``raise``.
        lambda_a: Allocation-change penalty per changed variable (0.01, Sia's physical policy;
            0 = Sia's simulator).
    """

    _target_: str = "hetsched.baselines.sia.Sia"
    p: float = -0.5
    lambda_n: float = 1.1
    round_s: float = 60.0
    clip: float = 3000.0
    invalid_gain: float = 1e-4
    mip_rel_gap: float = 1e-4
    time_limit_s: float = 60.0
    max_gpus_per_job: int = 64
    max_nodes_per_type: dict[str, int] | None = None
    restart_penalty_s: dict[str, float] = field(default_factory=lambda: dict(SIA_RESTART_PENALTY_S))
    default_restart_penalty_s: float = DEFAULT_RESTART_PENALTY_S
    obs_weight: float = 0.5
    profile_gpu_s_per_type: float = PROFILE_GPU_S_PER_TYPE
    on_solver_failure: str = "greedy"
    lambda_a: float = 0.01


def sia_configurations(
    cluster: Cluster,
    *,
    max_gpus: int = 64,
    max_nodes_per_type: dict[str, int] | None = None,
) -> tuple[IntArray, IntArray, IntArray]:
    """Sia's configuration columns for a cluster (sia.md §4).

    Args:
        cluster: The cluster.
        max_gpus: Largest configuration in GPUs.
        max_nodes_per_type: Optional node cap per GPU type name (aliases allowed).

    Returns:
        ``(gpu_type, nodes, gpus)``, each of shape (C,): catalogue type index, node count and GPU
        count of every column, grouped by type in catalogue order.
    """
    caps: dict[int, int] = {}
    for name, cap in (max_nodes_per_type or {}).items():
        caps[GPU_TYPE_NAMES.index(canonical_gpu_type(str(name)))] = int(cap)
    kk: list[int] = []
    nn: list[int] = []
    gg: list[int] = []
    for k in cluster.types_present.tolist():
        sizes = cluster.node_gpus[cluster.node_type == k]
        R = int(sizes.max())
        n_max = min(int((sizes == R).sum()), caps.get(k, 1 << 30))
        single = [1 << i for i in range(R.bit_length()) if (1 << i) <= R]
        if R not in single:
            single.append(R)
        for g in single:
            if g <= max_gpus:
                kk.append(k)
                nn.append(1)
                gg.append(g)
        for n in range(2, n_max + 1):
            if n * R <= max_gpus:
                kk.append(k)
                nn.append(n)
                gg.append(n * R)
    return np.array(kk, dtype=np.int64), np.array(nn, dtype=np.int64), np.array(gg, dtype=np.int64)


def powered_matrix(
    G: FloatArray,
    valid: BoolArray,
    n_min: FloatArray,
    restart_factor: FloatArray,
    current: BoolArray,
    *,
    p: float,
    clip: float,
    invalid_gain: float,
) -> FloatArray:
    """Sia's cost-matrix pipeline: normalise rows, restart factor, power, round, clip.

    Args:
        G: Estimated goodputs, shape (A, C).
        valid: Valid entries, shape (A, C).
        n_min: Normalisation target per job (its minimum GPU count), shape (A,).
        restart_factor: r_i per job, shape (A,) (1 for jobs that are not running).
        current: Each job's current configuration (all False for jobs not running), (A, C).
        p: Fairness power.
        clip: Clip value.
        invalid_gain: Value of invalid entries before powering.

    Returns:
        ``A`` of shape (A, C): ``min(round((r G_norm) ** p, 2), clip)``; invalid entries use
        ``invalid_gain`` before the power.
    """
    Gv = np.where(valid & (invalid_gain < G), G, np.inf)
    gmin = Gv.min(axis=1, keepdims=True)
    has = np.isfinite(gmin)
    Gn = np.where(has, n_min[:, None] * G / np.where(has, gmin, 1.0), invalid_gain)
    Gn = np.where(valid & (Gn > invalid_gain), Gn, invalid_gain)
    Gn = np.where(valid & ~current, restart_factor[:, None] * Gn, Gn)
    with np.errstate(divide="ignore", over="ignore"):
        Ap = np.power(Gn, p)
    Ap = np.round(Ap, 2)
    return np.asarray(np.minimum(np.nan_to_num(Ap, nan=clip, posinf=clip), clip))


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


@dataclass
class _Columns:
    """Configuration columns of one round."""

    k: IntArray  # catalogue GPU type, (C,)
    n: IntArray  # GPUs, (C,)
    std: BoolArray  # a standard Sia configuration (vs an extra rigid / current column), (C,)


class Sia(BasePolicy):
    """Sia's MILP scheduler with its own goodput estimator.

    Args:
        p: Fairness power (-0.5; Pollux-like uses -1).
        lambda_n: No-allocation penalty magnitude (> 1).
        round_s: Round length in seconds (60).
        clip: Clip value of the powered matrix (3000).
        invalid_gain: Gain of invalid entries (1e-4).
        mip_rel_gap: HiGHS relative gap (1e-4 = 0.01 %).
        time_limit_s: HiGHS time limit per round, seconds.
        max_gpus_per_job: Largest configuration (64 GPUs).
        max_nodes_per_type: Optional node cap per configuration, by GPU type name.
        restart_penalty_s: S_i by application name (default: Sia's table).
        default_restart_penalty_s: S_i for other applications (30 s).
        obs_weight: Estimator moving-average weight of the newest observation.
        profile_gpu_s_per_type: Profiling cost per job and type in GPU-seconds (reported).
        on_solver_failure: ``"greedy"`` or ``"raise"`` (see the module docstring).
        type_aware: Whether the estimator distinguishes GPU types (False: Pollux-like).
        lambda_a: Allocation-change penalty (0.01; see the module docstring; 0 = Sia's
            simulator).

    Raises:
        HetschedError: For out-of-range settings.
    """

    name = "sia"

    def __init__(
        self,
        p: float = -0.5,
        lambda_n: float = 1.1,
        round_s: float = 60.0,
        clip: float = 3000.0,
        invalid_gain: float = 1e-4,
        mip_rel_gap: float = 1e-4,
        time_limit_s: float = 60.0,
        max_gpus_per_job: int = 64,
        max_nodes_per_type: dict[str, int] | None = None,
        restart_penalty_s: dict[str, float] | None = None,
        default_restart_penalty_s: float = DEFAULT_RESTART_PENALTY_S,
        obs_weight: float = 0.5,
        profile_gpu_s_per_type: float = PROFILE_GPU_S_PER_TYPE,
        on_solver_failure: str = "greedy",
        type_aware: bool = True,
        lambda_a: float = 0.01,
    ) -> None:
        if p == 0 or not np.isfinite(p):
            raise HetschedError(f"{self.name}: p={p} must be a non-zero finite number (Sia: -0.5)")
        if not lambda_n > 0:
            raise HetschedError(
                f"{self.name}: lambda_n={lambda_n} must be > 0 (a magnitude; Sia uses 1.1)"
            )
        if on_solver_failure not in ("greedy", "raise"):
            raise HetschedError(
                f"{self.name}: on_solver_failure={on_solver_failure!r}; use 'greedy' or 'raise'"
            )
        if max_gpus_per_job < 1 or round_s <= 0 or clip <= 0 or invalid_gain <= 0:
            raise HetschedError(
                f"{self.name}: max_gpus_per_job={max_gpus_per_job}, round_s={round_s}, clip={clip} "
                f"and invalid_gain={invalid_gain} must all be positive"
            )
        if not (np.isfinite(lambda_a) and lambda_a >= 0):
            raise HetschedError(
                f"{self.name}: lambda_a={lambda_a} must be >= 0 (0 = Sia's simulator; its "
                "physical implementation uses 0.01)"
            )
        self.p = float(p)
        self.lambda_n = float(lambda_n)
        self.lambda_a = float(lambda_a)
        self.round_s = float(round_s)
        self.clip = float(clip)
        self.invalid_gain = float(invalid_gain)
        self.mip_rel_gap = float(mip_rel_gap)
        self.time_limit_s = float(time_limit_s)
        self.max_gpus_per_job = int(max_gpus_per_job)
        self.max_nodes_per_type = dict(max_nodes_per_type) if max_nodes_per_type else None
        self.restart_penalty_s = dict(
            SIA_RESTART_PENALTY_S if restart_penalty_s is None else restart_penalty_s
        )
        self.default_restart_penalty_s = float(default_restart_penalty_s)
        self.obs_weight = float(obs_weight)
        self.profile_gpu_s_per_type = float(profile_gpu_s_per_type)
        self.on_solver_failure = on_solver_failure
        self.type_aware = bool(type_aware)
        self.stats: dict[str, Any] = {}

    # ------------------------------------------------------------------ setup
    def reset(
        self,
        cluster: Cluster,
        workload: Workload,
        throughput: ThroughputModel,
        rng: np.random.Generator,
    ) -> None:
        """Build the configuration set and the estimator for a new run."""
        super().reset(cluster, workload, throughput, rng)
        ck, _, cn = sia_configurations(
            cluster, max_gpus=self.max_gpus_per_job, max_nodes_per_type=self.max_nodes_per_type
        )
        self.std_k, self.std_n = ck, cn
        max_count = int(max(self.max_gpus_per_job, workload.max_gpus.max(), cn.max()))
        max_count = min(max_count, int(cluster.num_gpus))
        self.max_count = max(max_count, int(workload.min_gpus.max()))
        self.estimator = GoodputEstimator(
            throughput,
            cluster,
            workload,
            type_aware=self.type_aware,
            obs_weight=self.obs_weight,
            max_count=self.max_count,
            profile_gpu_s_per_type=self.profile_gpu_s_per_type,
        )
        self.types = self.estimator.types
        self.type_gpus = cluster.gpus_per_type()
        self._cap: IntArray = self.type_gpus.astype(np.int64).copy()  # up GPUs per type
        # Memory share per GPU on every node of a type must clear the job's floor.
        mem_share = cluster.node_mem / cluster.node_gpus
        K = len(GPU_TYPE_NAMES)
        worst = np.full(K, np.inf)
        np.minimum.at(worst, cluster.node_type, mem_share)
        need = throughput.mem_floor * workload.mem_per_gpu
        self._type_ok = worst[None, :] >= need[:, None] - 1e-9  # (J, K)
        self._S = np.array(
            [
                self.restart_penalty_s.get(m, self.default_restart_penalty_s)
                for m in throughput.models
            ]
        )
        J = workload.num_jobs
        self._restore_until = np.full(J, -np.inf)
        self._restarts_seen = np.zeros(J, dtype=np.int64)
        self._prev_time: float | None = None
        self._cache_key: int | None = None
        self._cache_pick: IntArray | None = None
        self._highs = HighsModelCache()
        self.stats = {
            "build_s": [],
            "solve_s": [],
            "n_active": [],
            "n_vars": [],
            "objective": [],
            "pinned": 0,
            "evictions": 0,
            "shrunk": 0,
            "dropped": 0,
            "solver_failures": 0,
            "milp_calls": 0,
            "lp_integral": 0,
            "shortcuts": 0,
            "cache_hits": 0,
            "model_rebuilds": 0,
            "model_reuses": 0,
            "down_node_rounds": 0,
            "profiling_gpu_s": self.estimator.profiling_gpu_s,
        }

    # ------------------------------------------------------------------ per round
    def _bookkeep(self, state: SimState) -> None:
        """Track restores and feed completed-round observations to the estimator."""
        wl, tm = state.workload, state.throughput
        t = state.time
        if self._prev_time is not None:
            restarted = np.flatnonzero(state.restarts != self._restarts_seen)
            self._restore_until[restarted] = (
                self._prev_time + tm.restart_delay_s[wl.model[restarted]]
            )
        self._restarts_seen = state.restarts.copy()
        self._prev_time = t
        cur = self._live_current(state)
        if cur.size == 0:
            return
        # Only jobs that ran the whole last round: a job stopped by a node failure is not in
        # the live allocation (and its engine-reported rate is 0), so its partial sample is
        # never recorded; a restoring job is skipped until its restore is over.
        jobs, k, n = self._job_configs(state, cur)
        ok = (k >= 0) & (state.last_rate[jobs] > 0) & (self._restore_until[jobs] < t)
        self.estimator.observe(jobs[ok], k[ok], n[ok], state.last_rate[jobs[ok]])

    @staticmethod
    def _live_current(state: SimState) -> Allocation:
        """The previous allocation without the jobs that have an entry on a down node.

        Such a job lost its placement (its node failed): it is treated as not running and is
        re-placed from scratch.
        """
        cur = state.current
        up = state.node_up
        if cur.size == 0 or bool(up[cur.node].all()):
            return cur
        gone = np.zeros(state.workload.num_jobs, dtype=bool)
        gone[cur.job[~up[cur.node]]] = True
        return cur.select(~gone[cur.job])

    @staticmethod
    def up_capacity(state: SimState) -> IntArray:
        """GPUs on up nodes per catalogue GPU type, shape (K,).

        Args:
            state: The round's state (``node_up`` says which nodes count).
        """
        cl = state.cluster
        w = np.where(state.node_up, cl.node_gpus, 0).astype(np.float64)
        return np.bincount(cl.node_type, weights=w, minlength=len(GPU_TYPE_NAMES)).astype(np.int64)

    @staticmethod
    def _job_configs(
        state: SimState, cur: Allocation | None = None
    ) -> tuple[IntArray, IntArray, IntArray]:
        """Jobs in ``cur`` (default ``state.current``), their GPU type (-1 if mixed), GPU count."""
        cur = state.current if cur is None else cur
        J = state.workload.num_jobs
        gtype = state.cluster.node_type[cur.node]
        kmin = np.full(J, np.iinfo(np.int64).max)
        kmax = np.full(J, -1)
        np.minimum.at(kmin, cur.job, gtype)
        np.maximum.at(kmax, cur.job, gtype)
        n = np.bincount(cur.job, weights=cur.gpus, minlength=J).astype(np.int64)
        jobs = np.unique(cur.job)
        k = np.where(kmin[jobs] == kmax[jobs], kmax[jobs], -1)
        return jobs, k, n[jobs]

    def _columns(self, act: IntArray, cur_k: IntArray, cur_n: IntArray) -> _Columns:
        """Standard columns plus extra (type, count) columns for rigid / current configs."""
        wl = self.workload
        base = self.max_count + 1
        std_key = self.std_k * base + self.std_n
        mn = np.minimum(wl.min_gpus[act], self.max_count)
        extra = [(self.types[None, :] * base + mn[:, None]).ravel()]
        run = cur_n > 0
        if run.any():
            extra.append(cur_k[run] * base + np.minimum(cur_n[run], self.max_count))
        keys = np.unique(np.concatenate(extra))
        keys = keys[~np.isin(keys, std_key)]
        k = np.concatenate([self.std_k, keys // base])
        n = np.concatenate([self.std_n, keys % base])
        std = np.concatenate([np.ones(self.std_k.size, bool), np.zeros(keys.size, bool)])
        return _Columns(k=k.astype(np.int64), n=n.astype(np.int64), std=std)

    def _restart_factor(self, state: SimState, act: IntArray, running: BoolArray) -> FloatArray:
        wl = state.workload
        T = state.time - wl.arrival[act]
        S = self._S[wl.model[act]]
        n = state.restarts[act].astype(np.float64)
        r = np.maximum(T - n * S, 0.0) / np.maximum(T + S, 1e-9)
        rigid = wl.min_gpus[act] == wl.max_gpus[act]
        young = np.where(rigid, state.attained_gpu_s[act] < S, T < S)
        r = np.where(young, 1.0, r)
        return np.where(running, r, 1.0)

    def decide(self, state: SimState) -> Allocation:
        """Estimate goodputs, solve the MILP and place the chosen configurations."""
        t_build = time.perf_counter()
        self._bookkeep(state)
        act = state.active
        if act.size == 0:
            return Allocation.empty()
        wl, tm = state.workload, state.throughput
        A = act.size
        J = wl.num_jobs
        # Capacity of this round: GPUs of up nodes only (a right-hand-side change in the MILP).
        self._cap = self.up_capacity(state)
        if not bool(state.node_up.all()):
            self.stats["down_node_rounds"] += 1
        live = self._live_current(state)
        cur_k_all = np.full(J, -1, dtype=np.int64)
        cur_n_all = np.zeros(J, dtype=np.int64)
        if live.size:
            jobs, k, n = self._job_configs(state, live)
            cur_k_all[jobs] = k
            cur_n_all[jobs] = n
        cur_k, cur_n = cur_k_all[act], cur_n_all[act]
        running = cur_n > 0
        cols = self._columns(act, cur_k, cur_n)
        kc, nc = cols.k, cols.n
        tpos = self.estimator.type_pos[kc]
        mn, mx = wl.min_gpus[act], wl.max_gpus[act]
        cap = self.estimator.max_count_allowed(act)

        est = self.estimator.estimate(act)  # (A, Kp, max_count)
        G = est[:, tpos, np.minimum(nc, self.max_count) - 1]  # (A, C)
        runnable = tm.isolated(wl.model[act][:, None], kc[None, :], nc[None, :], False) > 0
        base = (
            wl.allowed_types[act][:, kc]
            & self._type_ok[act][:, kc]
            & runnable
            & (G > 0)
            & (nc <= self.type_gpus[kc])[None, :]
        )
        in_range = (nc[None, :] >= mn[:, None]) & (nc[None, :] <= mx[:, None])
        std_ok = base & cols.std[None, :] & in_range & (nc[None, :] <= cap[:, None])
        onehot = np.zeros((kc.size, self.types.size))
        onehot[np.arange(kc.size), tpos] = 1.0
        type_has = (std_ok.astype(np.float64) @ onehot) > 0  # (A, Kp)
        fb_ok = base & ~cols.std[None, :] & (nc[None, :] == mn[:, None]) & ~type_has[:, tpos]
        is_cur = (
            (kc[None, :] == cur_k[:, None]) & (nc[None, :] == cur_n[:, None]) & running[:, None]
        )
        valid = std_ok | fb_ok | is_cur
        G = np.where(is_cur & ~(G > 0), self.invalid_gain * 2, G)

        r = self._restart_factor(state, act, running)
        Amat = powered_matrix(
            G,
            valid,
            mn.astype(np.float64),
            r,
            is_cur,
            p=self.p,
            clip=self.clip,
            invalid_gain=self.invalid_gain,
        )
        pinned = running & (self._restore_until[act] > state.time)
        pinned &= is_cur.any(axis=1)
        self.stats["pinned"] += int(pinned.sum())

        va, vc = np.nonzero(valid)
        lam = self.lambda_n if self.p < 0 else -self.lambda_n
        coef = Amat[va, vc] - lam
        if self.p > 0:
            coef = -coef
        if self.lambda_a > 0:
            # lambda_a * sum_ij |x_ij - prev_ij| up to a constant: keeping the current
            # configuration earns lambda_a, taking any other (or a first) one costs lambda_a.
            coef = coef + np.where(is_cur[va, vc] & running[va], -self.lambda_a, self.lambda_a)
        lb = np.where(pinned[va] & is_cur[va, vc], 1.0, 0.0)
        self.stats["build_s"].append(time.perf_counter() - t_build)
        self.stats["n_active"].append(A)
        self.stats["n_vars"].append(int(va.size))

        chosen = self._solve(coef, va, vc, nc, tpos, lb, A)
        if chosen is None:
            chosen = self._greedy(Amat, valid, is_cur, pinned, running, nc, tpos, A)
        return self._place(state, live, act, chosen, kc, nc, cur_k, cur_n, pinned)

    # ------------------------------------------------------------------ MILP
    def _solve(
        self,
        coef: FloatArray,
        va: IntArray,
        vc: IntArray,
        nc: IntArray,
        tpos: IntArray,
        lb: FloatArray,
        A: int,
    ) -> IntArray | None:
        """Solve the assignment MILP; return the chosen column per job (-1 = none).

        Returns ``None`` when the solver failed and ``on_solver_failure == "greedy"``.

        Raises:
            SolverError: When the solver failed and ``on_solver_failure == "raise"``.
        """
        V = va.size
        out = np.full(A, -1, dtype=np.int64)
        t0 = time.perf_counter()
        if V == 0:
            self.stats["solve_s"].append(0.0)
            self.stats["objective"].append(0.0)
            return out
        gpus, tp = nc[vc], tpos[vc]
        cap = self._cap[self.types]
        key = hash(
            (A, coef.tobytes(), va.tobytes(), gpus.tobytes(), tp.tobytes(), lb.tobytes())
            + (cap.tobytes(),)
        )
        if key == self._cache_key and self._cache_pick is not None:
            pick: IntArray | None = self._cache_pick
            self.stats["cache_hits"] += 1
        else:
            pick = self._shortcut(coef, va, gpus, tp, lb, A)
            if pick is None:
                pick = self._milp(coef, va, gpus, tp, lb, A)
            else:
                self.stats["shortcuts"] += 1
            self._cache_key, self._cache_pick = key, pick
        self.stats["solve_s"].append(time.perf_counter() - t0)
        if pick is None:
            return None
        self.stats["objective"].append(float(coef[pick].sum()))
        out[va[pick]] = vc[pick]
        return out

    def _shortcut(
        self, coef: FloatArray, va: IntArray, gpus: IntArray, tp: IntArray, lb: FloatArray, A: int
    ) -> IntArray | None:
        """Exact shortcut: if every job's individually best variable fits jointly, it is optimal.

        Each job takes its cheapest variable if that has negative cost (pinned jobs their pinned
        variable). Without binding capacity the MILP decomposes per job, so this is an optimal
        solution; otherwise ``None`` (solve the MILP).
        """
        pinned_job = np.zeros(A, dtype=bool)
        pinned_job[va[lb > 0]] = True
        key = np.where(lb > 0, -np.inf, np.where(pinned_job[va], np.inf, coef))
        order = np.lexsort((np.arange(va.size), key, va))
        first = order[np.unique(va[order], return_index=True)[1]]
        pick = first[(coef[first] < 0) | (lb[first] > 0)]
        used = np.bincount(tp[pick], weights=gpus[pick], minlength=self.types.size)
        if np.all(used <= self._cap[self.types]):
            return np.sort(pick)
        return None

    def _milp(
        self, coef: FloatArray, va: IntArray, gpus: IntArray, tp: IntArray, lb: FloatArray, A: int
    ) -> IntArray | None:
        """Solve the MILP with HiGHS; returns the chosen variables or ``None`` on failure."""
        V = va.size
        Kp = self.types.size
        rows = np.concatenate([va, A + tp])
        cols = np.concatenate([np.arange(V), np.arange(V)])
        vals = np.concatenate([np.ones(V), gpus.astype(np.float64)])
        M = sparse.csc_array((vals, (rows, cols)), shape=(A + Kp, V))
        ub = np.concatenate([np.ones(A), self._cap[self.types].astype(np.float64)])
        self.stats["milp_calls"] += 1
        try:
            res = solve_assignment_milp(
                coef,
                M,
                ub,
                lb,
                mip_rel_gap=self.mip_rel_gap,
                time_limit_s=self.time_limit_s,
                cache=self._highs,
            )
            x, status, message = res.x, res.status, res.message
            self.stats["lp_integral"] += int(res.lp_integral)
            self.stats["model_rebuilds"] = self._highs.rebuilds
            self.stats["model_reuses"] = self._highs.reuses
        except (ValueError, RuntimeError) as exc:  # the solver refusing the model
            x, status, message = None, "error", f"{type(exc).__name__}: {exc}"
        if x is None:
            self.stats["solver_failures"] += 1
            msg = (
                f"{self.name}: HiGHS returned no solution (status {status}: {message}) for "
                f"{A} jobs, {V} variables and {Kp} GPU types"
            )
            if self.on_solver_failure == "raise":
                raise SolverError(
                    msg + "; set on_solver_failure='greedy' to fall back to the greedy heuristic"
                )
            warnings.warn(msg + "; using the greedy fallback", RuntimeWarning, stacklevel=4)
            return None
        return np.flatnonzero(np.asarray(x) > 0.5)

    def _greedy(
        self,
        Amat: FloatArray,
        valid: BoolArray,
        is_cur: BoolArray,
        pinned: BoolArray,
        running: BoolArray,
        nc: IntArray,
        tpos: IntArray,
        A: int,
    ) -> IntArray:
        """Fallback: keep running jobs (pinned first), then admit waiting jobs in order."""
        out = np.full(A, -1, dtype=np.int64)
        left = self._cap[self.types].astype(np.int64).copy()
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

    # ------------------------------------------------------------------ placement
    def _place(
        self,
        state: SimState,
        live: Allocation,
        act: IntArray,
        chosen: IntArray,
        kc: IntArray,
        nc: IntArray,
        cur_k: IntArray,
        cur_n: IntArray,
        pinned: BoolArray,
    ) -> Allocation:
        """Turn chosen configurations into node placements (sia.md §7).

        ``live`` is the previous allocation without jobs that lost their nodes; down nodes offer
        no GPUs.
        """
        cl = state.cluster
        cur = live
        sel = np.flatnonzero(chosen >= 0)
        if sel.size == 0:
            return Allocation.empty()
        order = np.argsort(cur.job, kind="stable")
        cj = cur.job[order]
        starts = np.searchsorted(cj, act[sel], side="left")
        ends = np.searchsorted(cj, act[sel], side="right")
        free = np.where(state.node_up, cl.node_gpus, 0).astype(np.int64)
        assign: dict[int, tuple[IntArray, IntArray]] = {}
        preserved: dict[int, int] = {}  # job -> node (single-node jobs that kept their place)
        want: dict[int, int] = {}
        todo_by_type: dict[int, list[int]] = {}
        for i, a in enumerate(sel.tolist()):
            j = int(act[a])
            c = int(chosen[a])
            k, n = int(kc[c]), int(nc[c])
            want[j] = n
            if cur_k[a] == k and cur_n[a] == n:
                e = order[starts[i] : ends[i]]
                nodes, gpus = cur.node[e], cur.gpus[e]
                assign[j] = (nodes, gpus)
                free[nodes] -= gpus
                if not pinned[a] and nodes.size == 1 and n < cl.node_gpus[nodes[0]]:
                    preserved[j] = int(nodes[0])
            else:
                todo_by_type.setdefault(k, []).append(j)
        for k, todo in todo_by_type.items():
            self._place_type(state, k, todo, want, free, assign, preserved)
        placer = Placer(state)
        for j, (nodes, gpus) in assign.items():
            if not placer.place_exact(j, nodes, gpus):
                self.stats["dropped"] += 1
        return placer.allocation()

    def _place_type(
        self,
        state: SimState,
        k: int,
        todo: list[int],
        want: dict[int, int],
        free: IntArray,
        assign: dict[int, tuple[IntArray, IntArray]],
        preserved: dict[int, int],
    ) -> None:
        """Place the jobs of one GPU type (descending GPU count), evicting if fragmented."""
        cl = state.cluster
        nodes_k = np.flatnonzero(cl.node_type == k)
        R = int(cl.node_gpus[nodes_k].max())
        queue = sorted(todo, key=lambda j: (-want[j], j))
        while queue:
            j = queue.pop(0)
            n = want[j]
            got = self._fit(nodes_k, R, n, free, cl.node_gpus)
            while got is None:
                evicted = self._evict(nodes_k, R, n, free, assign, preserved, cl.node_gpus)
                if not evicted:
                    break
                self.stats["evictions"] += len(evicted)
                queue = sorted(queue + evicted, key=lambda x: (-want[x], x))
                got = self._fit(nodes_k, R, n, free, cl.node_gpus)
            if got is None:
                got = self._shrink(state, j, k, nodes_k, R, n, free)
                if got is None:
                    self.stats["dropped"] += 1
                    continue
                self.stats["shrunk"] += 1
            nodes, gpus = got
            free[nodes] -= gpus
            assign[j] = (nodes, gpus)

    @staticmethod
    def _fit(
        nodes_k: IntArray, R: int, n: int, free: IntArray, node_gpus: IntArray
    ) -> tuple[IntArray, IntArray] | None:
        """Whole free nodes for ``n // R`` GPUs plus one best-fit node for the rest."""
        q, rem = divmod(n, R) if n >= R else (0, n)
        whole = nodes_k[(node_gpus[nodes_k] == R) & (free[nodes_k] == R)]
        if whole.size < q:
            return None
        use = whole[::-1][:q]
        nodes = [use]
        gpus = [np.full(q, R, dtype=np.int64)]
        if rem:
            cand = nodes_k[(free[nodes_k] >= rem) & ~np.isin(nodes_k, use)]
            if cand.size == 0:
                return None
            best = cand[np.lexsort((cand, free[cand]))[0]]
            nodes.append(np.array([best]))
            gpus.append(np.array([rem], dtype=np.int64))
        return np.concatenate(nodes).astype(np.int64), np.concatenate(gpus)

    @staticmethod
    def _evict(
        nodes_k: IntArray,
        R: int,
        n: int,
        free: IntArray,
        assign: dict[int, tuple[IntArray, IntArray]],
        preserved: dict[int, int],
        node_gpus: IntArray,
    ) -> list[int]:
        """Evict preserved single-node jobs of this type to make room for ``n`` GPUs.

        Whole-node shortage: empty the nodes closest to being whole (most free GPUs first) whose
        remaining occupants are all evictable. Partial-node shortage: on the node that needs the
        fewest GPUs freed, evict its smallest preserved jobs until the remainder fits. Evicted
        jobs are removed from ``assign`` / ``preserved`` and their GPUs freed.

        Returns:
            The evicted jobs (empty if eviction cannot help).
        """
        in_type = np.zeros(free.shape[0], dtype=bool)
        in_type[nodes_k] = True
        on_node: dict[int, list[int]] = {}
        for j, node in preserved.items():
            if in_type[node]:
                on_node.setdefault(node, []).append(j)
        if not on_node:
            return []
        evictable = np.zeros(free.shape[0], dtype=np.int64)
        for node, jobs in on_node.items():
            evictable[node] = sum(int(assign[j][1].sum()) for j in jobs)
        q, rem = divmod(n, R) if n >= R else (0, n)
        whole_free = int(((node_gpus[nodes_k] == R) & (free[nodes_k] == R)).sum())
        victims: list[int] = []
        if q > whole_free:
            cand = nodes_k[
                (node_gpus[nodes_k] == R)
                & (free[nodes_k] < R)
                & (free[nodes_k] + evictable[nodes_k] == R)
            ]
            if cand.size < q - whole_free:
                return []
            cand = cand[np.lexsort((cand, -free[cand]))][: q - whole_free]
            for node in cand.tolist():
                victims += on_node[node]
        elif rem:
            cand = nodes_k[(free[nodes_k] < rem) & (free[nodes_k] + evictable[nodes_k] >= rem)]
            if cand.size == 0:
                return []
            node = int(cand[np.lexsort((cand, rem - free[cand]))[0]])
            left = int(free[node])
            for j in sorted(on_node[node], key=lambda x: (int(assign[x][1].sum()), x)):
                if left >= rem:
                    break
                victims.append(j)
                left += int(assign[j][1].sum())
        for j in victims:
            nodes, gpus = assign.pop(j)
            free[nodes] += gpus
            del preserved[j]
        return victims

    @staticmethod
    def _shrink(
        state: SimState, j: int, k: int, nodes_k: IntArray, R: int, n: int, free: IntArray
    ) -> tuple[IntArray, IntArray] | None:
        """The largest power-of-two count below ``n`` (>= min_gpus) that fits without eviction."""
        wl, tm, cl = state.workload, state.throughput, state.cluster
        lo = int(wl.min_gpus[j])
        g = 1 << (max(n - 1, 1).bit_length() - 1)
        while g >= lo and g >= 1:
            if g < n and tm.isolated(int(wl.model[j]), k, g, False) > 0:
                got = Sia._fit(nodes_k, R, g, free, cl.node_gpus)
                if got is not None:
                    return got
            g //= 2
        return None
