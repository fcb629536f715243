"""Round-based cluster simulation engine.

Time is in seconds. Each *round* of length ``round_s`` (60 s for Sia, 360 s for Gavel):

1. Jobs whose arrival time is <= now are admitted (arrivals are seen at round boundaries, as in
   the Gavel and Sia simulators; JCT still counts from the true arrival time).
2. The scheduler looks at a :class:`SimState` snapshot and returns an :class:`Allocation`.
3. The engine validates the allocation (over-allocation, unknown or finished jobs, a gang the job
   cannot run, GPU-type constraints, space-sharing rules) and raises
   :class:`~hetsched.sim.errors.AllocationError` naming the job and node on any violation.
4. A job whose placement (set of nodes and GPUs per node) changed since it last ran pays its
   model's restart delay with no progress (a checkpoint-restart); resuming after a preemption also
   counts as a restart. The first start is free. CPU/memory changes alone do not restart a job.
5. Every running job progresses at its rate from :class:`~hetsched.sim.throughput.ThroughputModel`
   (isolated throughput x CPU/memory factor x interference; a gang spread over GPU types runs at
   the pace of its slowest part). A job that completes inside the round finishes at the exact
   instant its remaining work reaches zero and releases its GPUs then (for accounting); its GPUs
   become schedulable at the next round boundary.

Node failures (optional, :mod:`hetsched.sim.faults`): a node that is down at a round boundary
offers nothing (``SimState.node_up``); one that fails inside a round stops its jobs at that
instant; they lose the work since their last checkpoint and wait to be placed again. Periodic
checkpoints cost time (an amortised rate factor). See the faults module for the exact rules.

Idle time is skipped: when nothing runs and nothing waits, the clock jumps to the next arrival.
A policy that declares ``static_when_no_pending`` (FIFO, LAS, YARN-CS) lets the engine jump over
whole rounds in which nothing can change (no job waiting, no arrival, no completion); results are
identical to stepping round by round.

All per-round work is vectorised over jobs and allocation entries (struct-of-arrays state).
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.allocation import Allocation
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import (
    AllocationError,
    HetschedError,
    SettingError,
    SimulationStalledError,
    TraceError,
)
from hetsched.sim.faults import MAX_LOST_ATTEMPTS, CheckpointPolicy, FailureSchedule, FailureSpec
from hetsched.sim.throughput import ThroughputModel, for_reproduction
from hetsched.sim.workload import Workload

FUTURE, PENDING, RUNNING, DONE = 0, 1, 2, 3

_SIG_A = np.uint64(0x9E3779B97F4A7C15)
_SIG_B = np.uint64(0xC2B2AE3D27D4EB4F)


def _entry_hash(node: NDArray[np.uint64], gpus: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """Hash of an allocation entry's (node, GPU count) (arrays broadcast; wraps modulo 2^64)."""
    with np.errstate(over="ignore"):
        h = ((node + np.uint64(1)) * _SIG_A) ^ ((gpus + np.uint64(7)) * _SIG_B)
        return np.asarray(h * _SIG_A + np.uint64(1), dtype=np.uint64)


def _positive_seconds(value: Any, what: str) -> float:
    """``value`` as a float if it is a finite positive number of seconds, else a SettingError."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = float("nan")
    if isinstance(value, bool) or not (np.isfinite(v) and v > 0):
        raise SettingError(f"{what}={value!r} must be a finite positive number of seconds")
    return v


@dataclass
class SimConfig:
    """Engine settings.

    Attributes:
        round_s: Round length in seconds (a policy's own ``round_s`` overrides it).
        max_time_s: Simulation horizon in seconds; jobs unfinished then are reported as such.
        max_idle_rounds: Rounds in a row with waiting jobs, nothing running and nothing placed
            before the run is declared stalled.
        record_timeline: Keep the per-round cluster timeline.
        checkpoint: Periodic checkpointing of running jobs (None: only on preemption/restart).
        failures: Node failure model or trace, built per run from the run's seed (None: none).
        reproduction: Reproduction mode: the name of a paper (a key of
            :data:`~hetsched.sim.throughput.REPRODUCTION`) whose simulator the run mimics; every
            effect that simulator lacks is turned off. None: hetsched's full model.
    """

    round_s: float = 60.0
    max_time_s: float = float("inf")
    max_idle_rounds: int = 10_000
    record_timeline: bool = True
    checkpoint: CheckpointPolicy | None = None
    failures: FailureSpec | None = None
    reproduction: str | None = None

    def __post_init__(self) -> None:
        """Check every field (the one place where the engine settings are validated).

        Raises:
            SettingError: For a round length that is not a finite positive number of seconds, a
                horizon that is not positive (``inf`` = none), or ``max_idle_rounds`` below 1.
        """
        _positive_seconds(self.round_s, "sim.round_s")
        mt = self.max_time_s
        if isinstance(mt, bool | str) or not float(mt) > 0:  # NaN fails, inf = no horizon
            raise SettingError(
                f"sim.max_time_s={mt!r} must be a positive number of seconds (null for no horizon)"
            )
        mi = self.max_idle_rounds
        if isinstance(mi, bool) or not isinstance(mi, int | np.integer) or mi < 1:
            raise SettingError(f"sim.max_idle_rounds={mi!r} must be an integer >= 1")


def reproduction_throughput(tm: ThroughputModel, config: SimConfig) -> ThroughputModel:
    """The throughput model a run in ``config.reproduction`` mode uses (``tm`` itself if none).

    See :func:`hetsched.sim.throughput.for_reproduction`.

    Raises:
        HetschedError: If the mode is unknown, or if failures or checkpoints are configured
            with it (no paper's simulator has them).
    """
    mode = config.reproduction
    if mode is not None and (config.failures is not None or config.checkpoint is not None):
        raise HetschedError(
            f"sim reproduction={mode!r} cannot be combined with node failures or checkpoints "
            "(no paper's simulator has them); unset sim.failures and sim.checkpoint"
        )
    return for_reproduction(tm, mode)


class PolicyLike(Protocol):
    """What :meth:`Simulator.run` needs from a scheduler (see :mod:`hetsched.baselines.base`)."""

    def decide(self, state: SimState) -> Allocation:
        """Return this round's allocation."""
        ...


@dataclass
class SimState:
    """Read-only snapshot handed to a scheduler at a round boundary.

    The arrays are views of the engine's state: do not modify them.

    Attributes:
        time: Current simulated time in seconds.
        round_s: Round length in seconds.
        round_index: Number of rounds simulated so far.
        cluster: The cluster.
        workload: The whole workload (index jobs with ``active``).
        throughput: The ground-truth throughput model (oracle). Policies that are meant to
            estimate throughputs (e.g. Sia) must not read it beyond what they could profile.
        active: Indices of arrived, unfinished jobs in arrival order, shape (A,).
        status: Status of every job (0 future, 1 pending, 2 running, 3 done), shape (J,).
        remaining: Remaining work per job in work units, shape (J,).
        attained_gpu_s: GPU-seconds received so far per job, shape (J,).
        run_s: Seconds each job has held GPUs, shape (J,).
        start_time: First time each job held a GPU (NaN if never), shape (J,).
        restarts: Restarts so far per job, shape (J,).
        current: The allocation of the previous round.
        free_gpus: GPUs per node not used by ``current``, shape (N,).
        last_rate: Each job's progress rate in the previous round (0 if not running), (J,).
        node_up: Whether each node is up (not failed) now, shape (N,). A down node's
            ``free_gpus`` is 0 and an allocation naming it is rejected.
    """

    time: float
    round_s: float
    round_index: int
    cluster: Cluster
    workload: Workload
    throughput: ThroughputModel
    active: NDArray[np.int64]
    status: NDArray[np.int8]
    remaining: NDArray[np.float64]
    attained_gpu_s: NDArray[np.float64]
    run_s: NDArray[np.float64]
    start_time: NDArray[np.float64]
    restarts: NDArray[np.int64]
    current: Allocation
    free_gpus: NDArray[np.int64]
    last_rate: NDArray[np.float64]
    node_up: NDArray[np.bool_]

    @property
    def pending(self) -> NDArray[np.int64]:
        """Active jobs that did not run in the previous round."""
        return self.active[self.status[self.active] == PENDING]

    @property
    def running(self) -> NDArray[np.int64]:
        """Active jobs that ran in the previous round."""
        return self.active[self.status[self.active] == RUNNING]


@dataclass
class RoundRecord:
    """What happened in one :meth:`Simulator.advance` call (possibly several rounds)."""

    t0: float
    dt: float
    rounds: int
    completed: NDArray[np.int64]
    restarted: NDArray[np.int64]
    busy_gpus: int
    jobs_in_system_s: float
    """Integral over the step of the number of arrived, unfinished jobs, in job-seconds."""


@dataclass
class SimResult:
    """Everything the metrics need after a run.

    Attributes:
        cluster: The cluster simulated.
        workload: The workload replayed.
        throughput: The throughput model used.
        start_time: First time each job held a GPU (NaN if never), shape (J,).
        finish_time: Completion time (NaN if unfinished), shape (J,).
        run_s: Seconds each job held GPUs (restart time included), shape (J,).
        gpu_s_by_type: GPU-seconds per job and catalogue GPU type, shape (J, K).
        restarts: Restarts per job, shape (J,).
        preemptions: Running -> not running transitions before completion, shape (J,).
        remaining: Remaining work at the end, shape (J,).
        effective_gpu_s: GPU-seconds weighted by actual / isolated throughput, shape (J,).
        timeline: Per-step cluster records: columns ``t0, dt, busy_gpus, running, pending,
            cpus_used, mem_used`` plus ``busy_<type>`` per present GPU type.
        decision_s: Wall-clock seconds of each policy call (filled by the runner).
        end_time: Simulated time when the run stopped.
        lost_gpu_s: GPU-seconds whose work was lost to node failures, per job, shape (J,).
        failure_restarts: Times each job was stopped by a node failure, shape (J,).
        node_failures: Failures that occurred during the run (all nodes).
    """

    cluster: Cluster
    workload: Workload
    throughput: ThroughputModel
    start_time: NDArray[np.float64]
    finish_time: NDArray[np.float64]
    run_s: NDArray[np.float64]
    gpu_s_by_type: NDArray[np.float64]
    restarts: NDArray[np.int64]
    preemptions: NDArray[np.int64]
    remaining: NDArray[np.float64]
    effective_gpu_s: NDArray[np.float64]
    timeline: dict[str, NDArray[np.float64]]
    decision_s: list[float] = field(default_factory=list)
    end_time: float = 0.0
    lost_gpu_s: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    failure_restarts: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    node_failures: int = 0


def _sum_by(job: NDArray[np.int64], x: NDArray[Any], J: int) -> NDArray[np.float64]:
    """Per entry: the sum of ``x`` over the entries of its job (float64), shape (E,)."""
    return np.asarray(np.bincount(job, weights=x, minlength=J), dtype=np.float64)[job]


class Simulator:
    """The cluster simulator (numpy struct-of-arrays state).

    Args:
        cluster: Nodes and their resources.
        workload: Jobs to replay.
        throughput: Ground-truth throughput model (in a reproduction mode, the engine and the
            policies see it with that mode's effects turned off).
        config: Engine settings.
        failures: Node failure schedule (:class:`~hetsched.sim.faults.FailureModel` or a trace);
            None to build one from ``config.failures`` (if set) with ``seed``.
        seed: The run's seed, from which ``config.failures`` draws.

    Raises:
        TraceError: If a job can never run on this cluster (more GPUs than the cluster has of
            any allowed type, or a model the throughput table does not know).
    """

    def __init__(
        self,
        cluster: Cluster,
        workload: Workload,
        throughput: ThroughputModel,
        config: SimConfig | None = None,
        failures: FailureSchedule | None = None,
        seed: int = 0,
    ) -> None:
        self.cluster = cluster
        self.config = config or SimConfig()
        if failures is None and self.config.failures is not None:
            failures = self.config.failures.build(cluster.num_nodes, seed)
        if failures is not None and failures.num_nodes != cluster.num_nodes:
            raise AllocationError(
                f"failure schedule covers {failures.num_nodes} nodes but cluster {cluster.name!r} "
                f"has {cluster.num_nodes}; build it for this cluster"
            )
        self.failures = failures
        self.workload = workload
        self.config.__post_init__()  # the fields may have been changed after construction
        self.tm = reproduction_throughput(throughput, self.config)
        if self.config.reproduction is not None and failures is not None:
            raise HetschedError(
                f"sim reproduction={self.config.reproduction!r} cannot be combined with node "
                "failures (no paper's simulator has them); pass no failure schedule"
            )
        fs = self.config.failures
        self._max_lost = MAX_LOST_ATTEMPTS if fs is None else int(fs.max_lost_attempts)
        if workload.model.max() >= throughput.num_models:
            i = int(np.argmax(workload.model))
            raise TraceError(
                f"workload {workload.name!r}: job {str(workload.job_id[i])!r} has model index "
                f"{workload.model[i]} but the throughput table has {throughput.num_models} models"
            )
        self._check_fits()
        # Entry hashes for every (node, GPU count) a valid allocation can hold (see _signature).
        nodes = np.arange(cluster.num_nodes, dtype=np.uint64)[:, None]
        counts = np.arange(int(cluster.node_gpus.max()) + 1, dtype=np.uint64)[None, :]
        self._sig_table = _entry_hash(nodes, counts)
        self._keep_by_count = self.tm.node_keep_by_count(int(cluster.node_gpus.max()) + 2)
        # GPU types outside the catalogue: speed factor per (model, node variant) over the base.
        self._speed = cluster.speed_table(throughput.models)
        self.reset()

    # ------------------------------------------------------------------ setup
    def _check_fits(self) -> None:
        """Every job must be able to run somewhere on this cluster at its minimum size."""
        wl, cl = self.workload, self.cluster
        per_type = cl.gpus_per_type()
        present = per_type > 0
        allowed_here = wl.allowed_types & present[None, :]
        cap = np.where(allowed_here, per_type[None, :], 0).max(axis=1)
        bad = wl.min_gpus > cap
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise TraceError(
                f"workload {wl.name!r}: job {str(wl.job_id[i])!r} needs at least {wl.min_gpus[i]} GPUs "
                f"but cluster {cl.name!r} has at most {cap[i]} GPUs of a type it may use "
                f"({cl.describe()}); use a larger cluster or filter the trace explicitly"
            )
        # Some allowed present type must run the job at its minimum size.
        k_all = np.arange(per_type.shape[0])
        t = self.tm.isolated(wl.model[:, None], k_all[None, :], wl.min_gpus[:, None], False)
        runnable = (t > 0) & allowed_here & (per_type[None, :] >= wl.min_gpus[:, None])
        bad = ~runnable.any(axis=1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise TraceError(
                f"workload {wl.name!r}: job {str(wl.job_id[i])!r} (model "
                f"{self.tm.models[wl.model[i]]!r}, {wl.min_gpus[i]} GPUs) cannot run on any GPU "
                f"type of cluster {cl.name!r} ({cl.describe()})"
            )

    def reset(self) -> None:
        """Restore the initial state (time 0, no job admitted)."""
        J = self.workload.num_jobs
        K = self.cluster.gpus_per_type().shape[0]
        self.time = 0.0
        self.round_index = 0
        self.status = np.zeros(J, dtype=np.int8)
        self.remaining = self.workload.work.astype(np.float64).copy()
        self.attained_gpu_s = np.zeros(J)
        self.run_s = np.zeros(J)
        self.start_time = np.full(J, np.nan)
        self.finish_time = np.full(J, np.nan)
        self.restarts = np.zeros(J, dtype=np.int64)
        self.preemptions = np.zeros(J, dtype=np.int64)
        self.delay_left = np.zeros(J)
        self.gpu_s_by_type = np.zeros((J, K))
        self.effective_gpu_s = np.zeros(J)
        self.last_rate = np.zeros(J)
        self.sig = np.zeros(J, dtype=np.uint64)  # placement signature of the last run
        self.current = Allocation.empty()
        self.lost_gpu_s = np.zeros(J)
        self.failure_restarts = np.zeros(J, dtype=np.int64)
        self.lost_streak = np.zeros(J, dtype=np.int64)  # failures since the last saved progress
        self.work_since_ckpt = np.zeros(J)  # work units done since the last checkpoint
        self.ckpt_phase = np.zeros(J)  # productive seconds since the job last (re)started
        self.node_failures = 0
        self.node_up = np.ones(self.cluster.num_nodes, dtype=bool)
        self._next_arrival = 0  # index of the first job not yet admitted
        self._active_lo = 0  # all jobs before this index are done
        self._idle_rounds = 0
        self._timeline: list[tuple[float, ...]] = []
        self._types_present = self.cluster.types_present
        self._admit()
        if self._num_active() == 0 and self._next_arrival < J:
            self.time = float(self.workload.arrival[self._next_arrival])
            self._admit()
        self._update_nodes()

    def _update_nodes(self) -> None:
        if self.failures is not None:
            self.node_up = self.failures.node_up(self.time)

    # ------------------------------------------------------------------ queries
    @property
    def done(self) -> bool:
        """True when every job has finished or the horizon is reached."""
        return bool(
            self._active_lo >= self.workload.num_jobs or self.time >= self.config.max_time_s
        )

    def active_jobs(self) -> NDArray[np.int64]:
        """Indices of arrived, unfinished jobs (arrival order)."""
        lo, hi = self._active_lo, self._next_arrival
        st = self.status[lo:hi]
        return np.flatnonzero((st == PENDING) | (st == RUNNING)) + lo  # intp is int64

    def pending_jobs(self) -> NDArray[np.int64]:
        """Indices of arrived jobs waiting to run (arrival order)."""
        lo, hi = self._active_lo, self._next_arrival
        return np.flatnonzero(self.status[lo:hi] == PENDING) + lo  # intp is int64

    def _num_active(self) -> int:
        return int(self.active_jobs().shape[0])

    def state(self, round_s: float | None = None) -> SimState:
        """Snapshot for a scheduler at the current round boundary."""
        cap = np.where(self.node_up, self.cluster.node_gpus, 0)
        free = cap - self.current.used_gpus_per_node(self.cluster.num_nodes)
        return SimState(
            time=self.time,
            round_s=float(round_s or self.config.round_s),
            round_index=self.round_index,
            cluster=self.cluster,
            workload=self.workload,
            throughput=self.tm,
            active=self.active_jobs(),
            status=self.status,
            remaining=self.remaining,
            attained_gpu_s=self.attained_gpu_s,
            run_s=self.run_s,
            start_time=self.start_time,
            restarts=self.restarts,
            current=self.current,
            free_gpus=free,
            last_rate=self.last_rate,
            node_up=self.node_up,
        )

    # ------------------------------------------------------------------ validation
    def validate(self, alloc: Allocation) -> None:
        """Raise :class:`AllocationError` if ``alloc`` cannot be applied now."""
        wl, cl = self.workload, self.cluster
        J, N = wl.num_jobs, cl.num_nodes
        if alloc.size == 0:
            return
        a = alloc
        if np.any((a.job < 0) | (a.job >= J)):
            bad = int(a.job[(a.job < 0) | (a.job >= J)][0])
            raise AllocationError(
                f"allocation names unknown job index {bad} (workload has {J} jobs)"
            )
        if np.any((a.node < 0) | (a.node >= N)):
            bad = int(a.node[(a.node < 0) | (a.node >= N)][0])
            raise AllocationError(f"allocation names unknown node {bad} (cluster has {N} nodes)")
        st = self.status[a.job]
        if np.any((st != PENDING) & (st != RUNNING)):
            j = int(a.job[(st != PENDING) & (st != RUNNING)][0])
            what = "has not arrived yet" if self.status[j] == FUTURE else "has already finished"
            raise AllocationError(
                f"job {str(wl.job_id[j])!r} (index {j}) {what} at t={self.time:.0f}s"
            )
        for name in ("gpus", "cpus", "mem"):
            v = getattr(a, name)
            bad = ~np.isfinite(v) | (v < (1 if name == "gpus" else 0))
            if bad.any():
                e = int(np.flatnonzero(bad)[0])
                raise AllocationError(
                    f"job {str(wl.job_id[a.job[e]])!r} on node {a.node[e]}: {name}={v[e]} is invalid"
                )
        key = a.job * N + a.node
        uniq, counts = np.unique(key, return_counts=True)
        if np.any(counts > 1):
            dup = int(uniq[counts > 1][0])
            raise AllocationError(
                f"job {str(wl.job_id[dup // N])!r} has several entries on node {dup % N}; merge them"
            )
        down = ~self.node_up[a.node]
        if down.any():
            e = int(np.flatnonzero(down)[0])
            raise AllocationError(
                f"job {str(wl.job_id[a.job[e]])!r} placed on node {a.node[e]}, which is down "
                f"(failed) at t={self.time:.0f}s; use only nodes with SimState.node_up"
            )
        self._validate_sharing(a)
        used = a.used_gpus_per_node(N)
        over = np.flatnonzero(used > cl.node_gpus)
        if over.size:
            n = int(over[0])
            jobs = [str(wl.job_id[j]) for j in a.job[a.node == n]]
            raise AllocationError(
                f"node {n} over-allocated: {used[n]} GPUs assigned, {cl.node_gpus[n]} available "
                f"(jobs {jobs})"
            )
        for name, cap in (("cpus", cl.node_cpus), ("mem", cl.node_mem)):
            u = np.bincount(a.node, weights=getattr(a, name), minlength=N)
            over = np.flatnonzero(u > cap * (1 + 1e-9) + 1e-9)
            if over.size:
                n = int(over[0])
                jobs = [str(wl.job_id[j]) for j in a.job[a.node == n]]
                unit = "cores" if name == "cpus" else "GiB"
                raise AllocationError(
                    f"node {n} over-allocated: {u[n]:.2f} {unit} of {name} assigned, "
                    f"{cap[n]:.2f} available (jobs {jobs})"
                )
        gtype = cl.node_type[a.node]
        if not np.all(wl.allowed_types[a.job, gtype]):
            e = int(np.flatnonzero(~wl.allowed_types[a.job, gtype])[0])
            raise AllocationError(
                f"job {str(wl.job_id[a.job[e]])!r} may not run on GPU type {GPU_TYPE_NAMES[gtype[e]]} "
                f"(node {a.node[e]}): the trace constrains its GPU types"
            )
        total = np.bincount(a.job, weights=a.gpus, minlength=J).astype(np.int64)[a.job]
        lo, hi = wl.min_gpus[a.job], wl.max_gpus[a.job]
        out_of_range = (total < lo) | (total > hi)
        if out_of_range.any():
            e = int(np.flatnonzero(out_of_range)[0])
            j = int(a.job[e])
            raise AllocationError(
                f"job {str(wl.job_id[j])!r} given {total[e]} GPUs; it runs on {lo[e]}..{hi[e]} GPUs"
            )
        base = self._entry_base_rate(a)
        if np.any(base <= 0):
            e = int(np.flatnonzero(base <= 0)[0])
            j = int(a.job[e])
            n_nodes = int(np.sum(a.job == j))
            raise AllocationError(
                f"job {str(wl.job_id[j])!r} (model {self.tm.models[wl.model[j]]!r}) cannot run as a "
                f"gang of {total[e]} GPUs over {n_nodes} node(s) with GPU type index {gtype[e]}: "
                "its throughput there is 0 (a non-distributed model split over GPUs, or an "
                "unmeasured spread placement)"
            )
        cpu_ratio, mem_ratio = self._resource_ratios(a)
        phi = self.tm.phi(wl.model[a.job], cpu_ratio, mem_ratio)
        if np.any(phi <= 0):
            e = int(np.flatnonzero(phi <= 0)[0])
            raise AllocationError(
                f"job {str(wl.job_id[a.job[e]])!r} given {mem_ratio[e]:.2f}x its requested memory, "
                f"below the floor of {self.tm.mem_floor}x at which it can run"
            )

    def _validate_sharing(self, a: Allocation) -> None:
        sh = np.flatnonzero(a.share >= 0)
        if sh.size == 0:
            return
        wl = self.workload
        key = a.node[sh] * (int(a.share[sh].max()) + 1) + a.share[sh]
        order = np.argsort(key, kind="stable")
        k_sorted = key[order]
        uniq, start, counts = np.unique(k_sorted, return_index=True, return_counts=True)
        if np.any(counts > 2):
            e = sh[order[start[counts > 2][0]]]
            raise AllocationError(
                f"share group {a.share[e]} on node {a.node[e]} holds more than two jobs"
            )
        pairs = start[counts == 2]
        if pairs.size:
            e1, e2 = sh[order[pairs]], sh[order[pairs + 1]]
            bad = a.gpus[e1] != a.gpus[e2]
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise AllocationError(
                    f"jobs {str(wl.job_id[a.job[e1[i]]])!r} and {str(wl.job_id[a.job[e2[i]]])!r} share GPUs "
                    f"on node {a.node[e1[i]]} with unequal GPU counts"
                )
            k = self.cluster.node_type[a.node[e1]]
            ok = self.tm.colocatable(wl.model[a.job[e1]], wl.model[a.job[e2]], k)
            if not ok.all():
                i = int(np.flatnonzero(~ok)[0])
                raise AllocationError(
                    f"jobs {str(wl.job_id[a.job[e1[i]]])!r} and {str(wl.job_id[a.job[e2[i]]])!r} cannot "
                    f"share GPUs on node {a.node[e1[i]]} (pair not co-locatable per the data)"
                )

    # ------------------------------------------------------------------ rates
    def _one_per_job(self, a: Allocation) -> bool:
        """Every job of ``a`` has exactly one entry (one node): per-job totals are per entry."""
        return a.size > 0 and int(np.bincount(a.job).max()) == 1

    def _job_layout(
        self, a: Allocation, one_per_job: bool = False
    ) -> tuple[NDArray[np.int64], NDArray[np.bool_] | np.bool_]:
        """Per entry: the job's total GPUs and whether the job is spread over extra nodes.

        The spread flag is one scalar False when every job has one entry (it broadcasts).
        """
        if one_per_job:  # a job on one node is never spread
            return a.gpus, np.False_
        J = self.workload.num_jobs
        total = np.bincount(a.job, weights=a.gpus, minlength=J).astype(np.int64)
        n_nodes = np.bincount(a.job, minlength=J)
        biggest = np.zeros(J, dtype=np.int64)
        np.maximum.at(biggest, a.job, self.cluster.node_gpus[a.node])
        need = -(-total // np.maximum(biggest, 1))
        spread = n_nodes > need
        return total[a.job], spread[a.job]

    def _entry_base_rate(
        self,
        a: Allocation,
        one_per_job: bool = False,
        model: NDArray[np.int64] | None = None,
    ) -> NDArray[np.float64]:
        total, spread = self._job_layout(a, one_per_job)
        k = self.cluster.node_type[a.node]
        m = self.workload.model[a.job] if model is None else model
        base = self.tm.isolated(m, k, total, spread)
        if self._speed is not None:  # nodes of a GPU type defined relative to its base type
            base = base * self._speed[m, self.cluster.node_variant[a.node] + 1]
        return base

    def _resource_ratios(
        self, a: Allocation, one_per_job: bool = False
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Per entry: the job's CPU and memory given over requested (per GPU)."""
        wl = self.workload
        if one_per_job:  # the job's totals are its entry's values
            g, c, m = a.gpus.astype(np.float64), a.cpus, a.mem
        else:
            J = wl.num_jobs
            g = _sum_by(a.job, a.gpus, J)
            c = _sum_by(a.job, a.cpus, J)
            m = _sum_by(a.job, a.mem, J)
        gj = np.maximum(g, 1.0)
        return c / (gj * wl.cpu_per_gpu[a.job]), m / (gj * wl.mem_per_gpu[a.job])

    def _interference(self, a: Allocation) -> NDArray[np.float64]:
        """Per-entry slowdown factor in (0, 1] from node co-runners and GPU sharing."""
        N = self.cluster.num_nodes
        per_node = np.bincount(a.node, minlength=N)
        try:  # (1 - node_iota) ** (co-located entries - 1), tabulated by entry count
            factor = self._keep_by_count[per_node[a.node]]
        except IndexError:  # more entries on a node than the table holds: extend it
            self._keep_by_count = self.tm.node_keep_by_count(int(per_node.max()) + 1)
            factor = self._keep_by_count[per_node[a.node]]
        if int(a.share.max()) >= 0:  # some entries share GPUs
            sh = np.flatnonzero(a.share >= 0)
            key = a.node[sh] * (int(a.share[sh].max()) + 1) + a.share[sh]
            order = np.argsort(key, kind="stable")
            ks = key[order]
            same = np.flatnonzero(ks[1:] == ks[:-1])
            if same.size:
                e1, e2 = sh[order[same]], sh[order[same + 1]]
                k = self.cluster.node_type[a.node[e1]]
                m1, m2 = self.workload.model[a.job[e1]], self.workload.model[a.job[e2]]
                # Sharing partners are not "node co-runners" twice: undo one node term.
                undo = 1.0 / (1.0 - self.tm.node_iota)
                factor[e1] *= (1.0 - self.tm.pair_iota[m1, m2, k]) * undo
                factor[e2] *= (1.0 - self.tm.pair_iota[m2, m1, k]) * undo
        return np.minimum(factor, 1.0)

    def job_rates(
        self, a: Allocation, one_per_job: bool | None = None
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Progress rate per job (work units/s) and isolated rate, both shape (J,).

        The isolated rate excludes interference and the CPU/memory factor (for effective
        utilisation). A job on several nodes runs at its slowest entry's rate.

        Args:
            a: The allocation.
            one_per_job: Whether every job has one entry (computed when None); then the per-job
                reductions are skipped (same numbers).
        """
        J = self.workload.num_jobs
        if a.size == 0:
            return np.zeros(J), np.zeros(J)
        one = self._one_per_job(a) if one_per_job is None else one_per_job
        model = self.workload.model[a.job]
        base = self._entry_base_rate(a, one, model)
        cpu_ratio, mem_ratio = self._resource_ratios(a, one)
        phi = self.tm.phi(model, cpu_ratio, mem_ratio)
        entry_rate = base * phi * self._interference(a)
        if one:
            rate, iso = np.zeros(J), np.zeros(J)
            rate[a.job] = entry_rate
            iso[a.job] = base
            return rate, iso
        rate, iso = np.full(J, np.inf), np.full(J, np.inf)
        np.minimum.at(rate, a.job, entry_rate)
        np.minimum.at(iso, a.job, base)
        rate[~np.isfinite(rate)] = 0.0
        iso[~np.isfinite(iso)] = 0.0
        return rate, iso

    # ------------------------------------------------------------------ stepping
    def _signature(self, a: Allocation, one_per_job: bool = False) -> NDArray[np.uint64]:
        """Per-job hash of its (node, GPUs) entries, shape (J,) (0 for jobs not placed)."""
        J = self.workload.num_jobs
        if a.size == 0:
            return np.zeros(J, dtype=np.uint64)
        tab = self._sig_table
        if int(a.gpus.max()) < tab.shape[1] and int(a.gpus.min()) >= 0:
            h = tab[a.node, a.gpus]  # the same hashes, precomputed
        else:
            h = _entry_hash(a.node.astype(np.uint64), a.gpus.astype(np.uint64))
        # Sum modulo 2^64 is order independent.
        sig = np.zeros(J, dtype=np.uint64)
        if one_per_job:
            sig[a.job] = h  # one entry per job: the sum is the entry's hash
        else:
            np.add.at(sig, a.job, h)
        return sig

    def advance(
        self, alloc: Allocation, *, round_s: float | None = None, max_rounds: int = 1
    ) -> RoundRecord:
        """Apply an allocation and simulate until the next round boundary.

        Args:
            alloc: The allocation for this round (validated first).
            round_s: Round length in seconds (defaults to the config's).
            max_rounds: If > 1, simulate up to this many identical rounds at once, stopping at
                the first round boundary at or after the next arrival or completion (used when
                the policy would not change its decision).

        Returns:
            A :class:`RoundRecord` of the step.

        Raises:
            AllocationError: If the allocation is invalid.
            SimulationStalledError: If jobs wait forever with nothing running.
        """
        if self.done:
            raise SimulationStalledError("advance() called after the simulation finished")
        rs = _positive_seconds(self.config.round_s if round_s is None else round_s, "round_s")
        self.validate(alloc)
        wl, J = self.workload, self.workload.num_jobs
        t0 = self.time

        one_per_job = self._one_per_job(alloc)
        rate, iso = self.job_rates(alloc, one_per_job)
        ck = self.config.checkpoint
        if ck is not None and ck.interval_s is not None:
            rate = rate * ck.rate_factor
        running_now = np.zeros(J, dtype=bool)
        running_now[alloc.job] = True
        prev_running = self.status == RUNNING
        new_sig = self._signature(alloc, one_per_job)

        # Restarts: a changed placement of a job that ran before, or a resume after preemption.
        started_before = ~np.isnan(self.start_time)
        changed = running_now & started_before & (~prev_running | (new_sig != self.sig))
        restarted = np.flatnonzero(changed)
        self.restarts[restarted] += 1
        self.delay_left[restarted] = self.tm.restart_delay_s[wl.model[restarted]]
        preempted = prev_running & ~running_now
        self.preemptions[preempted] += 1
        self.delay_left[preempted] = 0.0
        first = running_now & ~started_before
        self.start_time[first] = t0
        fresh = changed | first | preempted  # a (re)start or a preemption saves/loads a checkpoint
        self.lost_streak[fresh & (self.work_since_ckpt > 0)] = 0  # that save kept some work
        self.work_since_ckpt[fresh] = 0.0
        self.ckpt_phase[fresh] = 0.0

        # How many rounds can be simulated at once.
        n_rounds = 1
        run_idx = np.flatnonzero(running_now)
        if max_rounds > 1:
            horizon = np.inf
            if self._next_arrival < J:
                horizon = float(wl.arrival[self._next_arrival]) - t0
            if run_idx.size:
                fin = self.delay_left[run_idx] + self.remaining[run_idx] / rate[run_idx]
                horizon = min(horizon, float(fin.min()))
            horizon = min(horizon, self.config.max_time_s - t0)
            if self.failures is not None:
                horizon = min(horizon, self.failures.next_event_after(t0) - t0)
            if np.isfinite(horizon):
                n_rounds = int(max(1, min(max_rounds, np.ceil(horizon / rs - 1e-9))))
            else:
                n_rounds = max_rounds
        dt = rs * n_rounds

        # Node failures inside this step cut the running window of the jobs on those nodes.
        r = rate[run_idx]
        window = np.full(run_idx.size, dt)
        failed = np.zeros(run_idx.size, dtype=bool)
        if self.failures is not None:
            ff = self.failures.first_failure_in(t0, t0 + dt)  # (N,)
            self.node_failures += int(np.isfinite(ff).sum())
            if alloc.size and np.isfinite(ff[alloc.node]).any():
                tf = np.full(J, np.inf)
                np.minimum.at(tf, alloc.job, ff[alloc.node])
                failed = np.isfinite(tf[run_idx])
                window = np.where(failed, tf[run_idx] - t0, dt)

        # Progress of running jobs.
        delay = self.delay_left[run_idx]
        busy = np.minimum(delay, window)
        work_time = window - busy
        need_time = self.remaining[run_idx] / r
        finishes = need_time <= work_time + 1e-9
        failed &= ~finishes
        held = np.where(finishes, busy + need_time, window)
        progress = np.where(finishes, self.remaining[run_idx], r * work_time)
        self.delay_left[run_idx] = delay - busy
        self.remaining[run_idx] = np.where(finishes, 0.0, self.remaining[run_idx] - progress)
        fin_idx = run_idx[finishes]
        self.finish_time[fin_idx] = t0 + held[finishes]

        # Checkpoints: the work since the last save is what a failure loses.
        productive = np.where(finishes, need_time, work_time)
        if ck is not None and ck.interval_s is not None:
            cyc = ck.cycle_s
            old = self.ckpt_phase[run_idx]
            new = old + productive
            crossed = np.floor(new / cyc) > np.floor(old / cyc)
            since = np.where(
                crossed, r * np.mod(new, cyc), self.work_since_ckpt[run_idx] + progress
            )
            self.work_since_ckpt[run_idx] = since
            self.ckpt_phase[run_idx] = new
            self.lost_streak[run_idx[crossed]] = 0
        else:
            self.work_since_ckpt[run_idx] += progress
        fail_idx = run_idx[failed]
        if fail_idx.size:
            lost = self.work_since_ckpt[fail_idx]
            self.remaining[fail_idx] += lost
            g_fail = alloc.gpus_per_job(J)[fail_idx]
            self.lost_gpu_s[fail_idx] += g_fail * lost / r[failed]
            self.failure_restarts[fail_idx] += 1
            self.work_since_ckpt[fail_idx] = 0.0
            self.ckpt_phase[fail_idx] = 0.0
            self.delay_left[fail_idx] = 0.0
            self.lost_streak[fail_idx] += 1
            worst = int(np.argmax(self.lost_streak[fail_idx]))
            if self.lost_streak[fail_idx[worst]] >= self._max_lost:
                j = int(fail_idx[worst])
                raise SimulationStalledError(
                    f"job {str(wl.job_id[j])!r} lost its work to node failures "
                    f"{int(self.lost_streak[j])} times in a row with no checkpoint in between "
                    f"(t={t0 / 3600.0:.1f} h); it outlasts its nodes' time between failures and "
                    "may never finish: set sim.checkpoint.interval_s (periodic checkpoints), a "
                    "larger sim.failures.mtbf_h, or raise sim.failures.max_lost_attempts"
                )

        # Accounting.
        held_full = np.zeros(J)
        held_full[run_idx] = held
        g_job = alloc.gpus_per_job(J)
        self.run_s[run_idx] += held
        self.attained_gpu_s[run_idx] += held * g_job[run_idx]
        gtype = self.cluster.node_type[alloc.node]
        if one_per_job:  # distinct (job, type) pairs: plain fancy-index addition is exact
            self.gpu_s_by_type[alloc.job, gtype] += alloc.gpus * held_full[alloc.job]
        else:
            np.add.at(self.gpu_s_by_type, (alloc.job, gtype), alloc.gpus * held_full[alloc.job])
        iso_run = iso[run_idx]
        iso_pos = iso_run > 0
        eff = np.where(iso_pos, r / np.where(iso_pos, iso_run, 1.0), 0.0)
        self.effective_gpu_s[run_idx] += (held - busy) * g_job[run_idx] * np.minimum(eff, 1.0)

        # Jobs-in-system integral over [t0, t0 + dt] (all active jobs were admitted by t0).
        active = self.active_jobs()
        in_sys = np.full(active.shape[0], dt)
        ended = np.zeros(J, dtype=bool)
        ended[fin_idx] = True
        fin_mask = ended[active]
        in_sys[fin_mask] = self.finish_time[active[fin_mask]] - t0

        # Status updates.
        self.status[active] = PENDING
        self.status[run_idx] = RUNNING
        self.status[fin_idx] = DONE
        self.status[fail_idx] = PENDING
        self.last_rate = np.where(running_now, rate, 0.0)
        self.last_rate[fin_idx] = 0.0
        self.last_rate[fail_idx] = 0.0
        self.sig = np.where(running_now, new_sig, self.sig)
        if fin_idx.size or fail_idx.size:
            ended[fail_idx] = True  # finished or failed: no longer placed
            self.current = alloc.select(~ended[alloc.job])
        else:
            self.current = alloc

        if self.config.record_timeline:
            busy_gpus = int(alloc.used_gpus_per_node(self.cluster.num_nodes).sum())
            by_type = np.bincount(gtype, weights=alloc.gpus, minlength=self.gpu_s_by_type.shape[1])[
                self._types_present
            ]
            self._timeline.append(
                (t0, dt, float(busy_gpus), float(run_idx.size), float(active.size - run_idx.size),
                 float(alloc.cpus.sum()), float(alloc.mem.sum()), *by_type.tolist())
            )  # fmt: skip

        # Stall detection.
        if run_idx.size == 0 and active.size > 0:
            self._idle_rounds += n_rounds
            if self._idle_rounds > self.config.max_idle_rounds:
                ids = [str(wl.job_id[j]) for j in active[:5]]
                raise SimulationStalledError(
                    f"no job has run for {self._idle_rounds} rounds while {active.size} jobs wait "
                    f"(first: {ids}); the policy never places them"
                )
        else:
            self._idle_rounds = 0

        self.time = t0 + dt
        self.round_index += n_rounds
        while self._active_lo < J and self.status[self._active_lo] == DONE:
            self._active_lo += 1
        admitted_before = self._next_arrival
        self._admit()
        # Active jobs now: those active at t0 less the finished ones, plus the new arrivals.
        n_active = active.size - fin_idx.size + (self._next_arrival - admitted_before)
        if n_active == 0 and self._next_arrival < J:
            self.time = max(self.time, float(wl.arrival[self._next_arrival]))
            self._admit()
        self._update_nodes()
        return RoundRecord(
            t0=t0,
            dt=dt,
            rounds=n_rounds,
            completed=fin_idx,
            restarted=restarted,
            busy_gpus=int(g_job.sum()),
            jobs_in_system_s=float(in_sys.sum()),
        )

    def _admit(self) -> None:
        hi = int(np.searchsorted(self.workload.arrival, self.time, side="right"))
        if hi > self._next_arrival:
            self.status[self._next_arrival : hi] = PENDING
            self._next_arrival = hi

    # ------------------------------------------------------------------ driving
    def run(
        self,
        policy: PolicyLike,
        *,
        on_step: Callable[[RoundRecord], None] | None = None,
    ) -> SimResult:
        """Run a policy until every job finishes (or the horizon); time each decision.

        The policy may declare ``round_s`` (its round length), ``event_driven`` (its decision
        changes only when a job arrives or completes) and ``static_when_no_pending`` (its decision
        does not change while every active job runs); the engine then skips the rounds in
        between in one vectorised step. An event-driven policy may also set ``wake_time`` (s,
        absolute simulated time; ``None`` = none) in ``decide``: the engine then asks it again
        at the first round boundary at or after that time even if no job arrives or completes
        before (e.g. when a waiting job reaches a rule's waiting threshold). Decision time is
        ``time.perf_counter`` around ``policy.decide`` only.

        Args:
            policy: Object with ``decide(state) -> Allocation``.
            on_step: Called after every step (e.g. to update a progress bar).

        Returns:
            The run's :class:`SimResult`, with ``decision_s`` filled in.
        """
        own = getattr(policy, "round_s", None)
        rs = _positive_seconds(
            self.config.round_s if own is None else own,
            f"{getattr(policy, 'name', type(policy).__name__)} round_s",
        )
        event_driven = bool(getattr(policy, "event_driven", False))
        static_idle = bool(getattr(policy, "static_when_no_pending", False))
        decisions: list[float] = []
        while not self.done:
            st = self.state(rs)
            t = _time.perf_counter()
            alloc = policy.decide(st)
            decisions.append(_time.perf_counter() - t)
            max_rounds = 1
            if event_driven or static_idle and bool(np.isin(st.active, alloc.job).all()):
                max_rounds = 1 << 40
                wake = getattr(policy, "wake_time", None) if event_driven else None
                if wake is not None and np.isfinite(wake):
                    max_rounds = int(max(1, min(max_rounds, np.ceil((wake - st.time) / rs - 1e-9))))
            rec = self.advance(alloc, round_s=rs, max_rounds=max_rounds)
            if on_step is not None:
                on_step(rec)
        res = self.result()
        res.decision_s = decisions
        return res

    # ------------------------------------------------------------------ results
    def result(self) -> SimResult:
        """Collect the run's per-job records and timeline."""
        names = ["t0", "dt", "busy_gpus", "running", "pending", "cpus_used", "mem_used"]
        names += [f"busy_{GPU_TYPE_NAMES[k]}" for k in self._types_present]
        if self._timeline:
            arr = np.asarray(self._timeline, dtype=np.float64)
        else:
            arr = np.zeros((0, len(names)))
        timeline = {n: arr[:, i] for i, n in enumerate(names)}
        return SimResult(
            cluster=self.cluster,
            workload=self.workload,
            throughput=self.tm,
            start_time=self.start_time.copy(),
            finish_time=self.finish_time.copy(),
            run_s=self.run_s.copy(),
            gpu_s_by_type=self.gpu_s_by_type.copy(),
            restarts=self.restarts.copy(),
            preemptions=self.preemptions.copy(),
            remaining=self.remaining.copy(),
            effective_gpu_s=self.effective_gpu_s.copy(),
            timeline=timeline,
            end_time=self.time,
            lost_gpu_s=self.lost_gpu_s.copy(),
            failure_restarts=self.failure_restarts.copy(),
            node_failures=self.node_failures,
        )
