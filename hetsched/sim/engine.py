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

All per-round work is vectorised over allocation entries and running jobs (struct-of-arrays
state). The engine is split over modules: :mod:`hetsched.sim.state` (settings, snapshot,
records), :mod:`hetsched.sim.validation` (allocation checks), :mod:`hetsched.sim.rates` (rates
and placement signatures) and :mod:`hetsched.sim.stepping` (:meth:`Simulator.advance`); every
name is importable from this module.
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.allocation import Allocation
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import AllocationError, HetschedError, TraceError
from hetsched.sim.faults import MAX_LOST_ATTEMPTS, FailureSchedule
from hetsched.sim.rates import (
    _SIG_A,
    _SIG_B,
    JobGroups,
    RateModel,
    _entry_hash,
    _sum_by,
    group_by_job,
)
from hetsched.sim.state import (
    DONE,
    FUTURE,
    PENDING,
    RUNNING,
    PolicyLike,
    RoundRecord,
    SimConfig,
    SimResult,
    SimState,
    _positive_seconds,
    reproduction_throughput,
)
from hetsched.sim.stepping import RoundStepper
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.validation import AllocationChecks
from hetsched.sim.workload import Workload

__all__ = [
    "DONE", "FUTURE", "PENDING", "RUNNING", "JobGroups", "PolicyLike", "RoundRecord",
    "SimConfig", "SimResult", "SimState", "Simulator", "group_by_job", "reproduction_throughput",
    "_SIG_A", "_SIG_B", "_entry_hash", "_positive_seconds", "_sum_by",
]  # fmt: skip


class Simulator(RoundStepper, AllocationChecks, RateModel):
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
        self._running = np.zeros(0, dtype=np.int64)  # jobs that ran in the last step (ascending)
        self._n_finished = 0  # jobs done so far (the active ones: admitted, not finished)
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
