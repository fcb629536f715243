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

**Modules.** :mod:`hetsched.baselines.sia_cost` builds the configurations, the round's columns
and the cost matrix, :mod:`hetsched.baselines.sia_milp` solves the assignment (HiGHS model cache,
exact shortcut, greedy fallback) and :mod:`hetsched.baselines.sia_place` places the result; this
module holds the policy that ties them together and re-exports the public names.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from hetsched.baselines.base import BasePolicy
from hetsched.baselines.goodput import (
    DEFAULT_RESTART_PENALTY_S,
    PROFILE_GPU_S_PER_TYPE,
    SIA_RESTART_PENALTY_S,
    GoodputEstimator,
)
from hetsched.baselines.sia_cost import (
    job_configs,
    live_current,
    powered_matrix,
    restart_factor,
    round_columns,
    sia_configurations,
    up_capacity,
)
from hetsched.baselines.sia_milp import (
    HighsModelCache,
    MilpResult,
    SolverError,
    exact_shortcut,
    greedy_assignment,
    solve_assignment_milp,
)
from hetsched.baselines.sia_place import place_configurations
from hetsched.sim.allocation import Allocation
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimState
from hetsched.sim.errors import HetschedError
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

__all__ = [
    "HighsModelCache",
    "MilpResult",
    "Sia",
    "SiaConf",
    "SolverError",
    "powered_matrix",
    "sia_configurations",
    "solve_assignment_milp",
]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


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
        cur = live_current(state)
        if cur.size == 0:
            return
        # Only jobs that ran the whole last round: a job stopped by a node failure is not in
        # the live allocation (and its engine-reported rate is 0), so its partial sample is
        # never recorded; a restoring job is skipped until its restore is over.
        jobs, k, n = job_configs(state, cur)
        ok = (k >= 0) & (state.last_rate[jobs] > 0) & (self._restore_until[jobs] < t)
        self.estimator.observe(jobs[ok], k[ok], n[ok], state.last_rate[jobs[ok]])

    #: GPUs on up nodes per catalogue GPU type (:func:`hetsched.baselines.sia_cost.up_capacity`).
    up_capacity = staticmethod(up_capacity)

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
        live = live_current(state)
        cur_k_all = np.full(J, -1, dtype=np.int64)
        cur_n_all = np.zeros(J, dtype=np.int64)
        if live.size:
            jobs, k, n = job_configs(state, live)
            cur_k_all[jobs] = k
            cur_n_all[jobs] = n
        cur_k, cur_n = cur_k_all[act], cur_n_all[act]
        running = cur_n > 0
        cols = round_columns(
            self.std_k, self.std_n, self.types, self.max_count, wl.min_gpus[act], cur_k, cur_n
        )
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

        r = restart_factor(state, act, running, self._S)
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
            left = self._cap[self.types]
            chosen = greedy_assignment(Amat, valid, is_cur, pinned, running, nc, tpos, left)
        return place_configurations(
            state, live, act, chosen, kc, nc, cur_k, cur_n, pinned, self.stats
        )

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
            pick = exact_shortcut(coef, va, gpus, tp, lb, A, cap)
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
