"""One engine step: :meth:`RoundStepper.advance` (a mixin of :class:`~hetsched.sim.engine.Simulator`).

The round rules are documented in :mod:`hetsched.sim.engine`. The per-round work runs over the
allocation's entries and its running jobs (shape (E,) and (R,)); the jobs that ran in the
previous step and the number of finished jobs are kept between calls instead of being found in
the (J,) status array. What still touches (J,) arrays: the fresh ``last_rate`` array that the
next :class:`~hetsched.sim.state.SimState` hands out, and, in a step where a job finishes, the
scan of the arrived jobs for the jobs-in-system integral.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.allocation import Allocation
from hetsched.sim.errors import SimulationStalledError
from hetsched.sim.rates import JobGroups, group_by_job
from hetsched.sim.state import DONE, PENDING, RUNNING, RoundRecord, SimConfig, _positive_seconds

if TYPE_CHECKING:
    from hetsched.sim.cluster import Cluster
    from hetsched.sim.faults import FailureSchedule
    from hetsched.sim.throughput import ThroughputModel
    from hetsched.sim.workload import Workload

_NO_JOBS = np.zeros(0, dtype=np.int64)


class RoundStepper:
    """Applies an allocation and simulates one step (mixin; see :meth:`advance`)."""

    workload: Workload
    cluster: Cluster
    tm: ThroughputModel
    config: SimConfig
    failures: FailureSchedule | None
    time: float
    round_index: int
    status: NDArray[np.int8]
    remaining: NDArray[np.float64]
    attained_gpu_s: NDArray[np.float64]
    run_s: NDArray[np.float64]
    start_time: NDArray[np.float64]
    finish_time: NDArray[np.float64]
    restarts: NDArray[np.int64]
    preemptions: NDArray[np.int64]
    delay_left: NDArray[np.float64]
    gpu_s_by_type: NDArray[np.float64]
    effective_gpu_s: NDArray[np.float64]
    last_rate: NDArray[np.float64]
    sig: NDArray[np.uint64]
    current: Allocation
    lost_gpu_s: NDArray[np.float64]
    failure_restarts: NDArray[np.int64]
    lost_streak: NDArray[np.int64]
    work_since_ckpt: NDArray[np.float64]
    ckpt_phase: NDArray[np.float64]
    node_failures: int
    _max_lost: int
    _next_arrival: int
    _active_lo: int
    _idle_rounds: int
    _timeline: list[tuple[float, ...]]
    _running: NDArray[np.int64]
    _n_finished: int
    _types_present: NDArray[np.int64]

    if TYPE_CHECKING:  # provided by the simulator and its other mixins

        @property
        def done(self) -> bool: ...

        def validate(self, alloc: Allocation) -> None: ...

        def active_jobs(self) -> NDArray[np.int64]: ...

        def running_rates(
            self, g: JobGroups, a: Allocation
        ) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any], NDArray[Any]]: ...

        def _admit(self) -> None: ...

        def _update_nodes(self) -> None: ...

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
        t0 = self.time
        n_active = self._next_arrival - self._n_finished  # arrived, unfinished jobs at t0
        ck = self.config.checkpoint
        if alloc.size:
            g = group_by_job(alloc)
            run_idx = g.jobs
            rate, iso, g_run, new_sig = self.running_rates(g, alloc)
            if ck is not None and ck.interval_s is not None:
                rate = rate * ck.rate_factor
        else:
            g = None
            run_idx = _NO_JOBS
            rate = iso = np.zeros(0)
            g_run = _NO_JOBS
            new_sig = np.zeros(0, dtype=np.uint64)
        restarted, preempted = self._restarts(run_idx, new_sig, t0)
        n_rounds = self._rounds_at_once(run_idx, rate, rs, t0, max_rounds)
        dt = rs * n_rounds
        window, failed = self._windows(alloc, g, run_idx, t0, dt)

        # Progress of running jobs.
        delay = self.delay_left[run_idx]
        rem = self.remaining[run_idx]
        busy = np.minimum(delay, window)
        work_time = window - busy
        need_time = rem / rate
        finishes = need_time <= work_time + 1e-9
        if self.failures is not None:
            failed &= ~finishes
        held = np.where(finishes, busy + need_time, window)
        progress = np.where(finishes, rem, rate * work_time)
        self.delay_left[run_idx] = delay - busy
        self.remaining[run_idx] = np.where(finishes, 0.0, rem - progress)
        fin_idx = run_idx[finishes]
        self.finish_time[fin_idx] = t0 + held[finishes]
        fail_idx = self._checkpoints(run_idx, rate, g_run, finishes, failed, need_time,
                                     work_time, progress, t0)  # fmt: skip

        # Accounting.
        self.run_s[run_idx] += held
        self.attained_gpu_s[run_idx] += held * g_run
        gtype = self.cluster.node_type[alloc.node]
        if g is not None:
            held_e = held[g.row]
            if g.starts is None:  # distinct (job, type) pairs: plain fancy-index addition
                self.gpu_s_by_type[alloc.job, gtype] += alloc.gpus * held_e
            else:
                np.add.at(self.gpu_s_by_type, (alloc.job, gtype), alloc.gpus * held_e)
        iso_pos = iso > 0
        eff = np.where(iso_pos, rate / np.where(iso_pos, iso, 1.0), 0.0)
        self.effective_gpu_s[run_idx] += (held - busy) * g_run * np.minimum(eff, 1.0)

        # Jobs-in-system integral over [t0, t0 + dt] (all active jobs were admitted by t0).
        in_sys = np.full(n_active, dt)
        if fin_idx.size:
            active = self.active_jobs()  # ascending, as the positions of the sum's terms
            in_sys[np.searchsorted(active, fin_idx)] = self.finish_time[fin_idx] - t0

        # Status updates.
        self.status[preempted] = PENDING
        self.status[run_idx] = RUNNING
        self.status[fin_idx] = DONE
        if fail_idx.size:
            self.status[fail_idx] = PENDING
        stopped = finishes | failed if self.failures is not None else finishes
        last = np.zeros(self.workload.num_jobs)  # a fresh array: earlier snapshots keep theirs
        last[run_idx] = np.where(stopped, 0.0, rate)
        self.last_rate = last
        self.sig[run_idx] = new_sig
        self._running = run_idx[~stopped]
        self._n_finished += int(fin_idx.size)
        if g is not None and (fin_idx.size or fail_idx.size):
            self.current = alloc.select(~stopped[g.row])  # finished or failed: no longer placed
        else:
            self.current = alloc

        if self.config.record_timeline:
            self._record(alloc, gtype, t0, dt, run_idx.size, n_active)
        self._check_idle(run_idx.size, n_active, n_rounds)
        self._next_round(t0 + dt, n_rounds, n_active - fin_idx.size)
        return RoundRecord(
            t0=t0,
            dt=dt,
            rounds=n_rounds,
            completed=fin_idx,
            restarted=restarted,
            busy_gpus=int(g_run.sum()),
            jobs_in_system_s=float(in_sys.sum()),
        )

    def _restarts(
        self,
        run_idx: NDArray[np.int64],
        new_sig: NDArray[np.uint64],
        t0: float,
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Count restarts, preemptions and first starts; returns ``(restarted, preempted)``.

        A changed placement of a job that ran before, or a resume after a preemption, is a
        restart (its model's delay); a (re)start or a preemption saves/loads a checkpoint.
        """
        st = self.status
        prev_run = self._running
        if prev_run.size == 0:
            preempted = _NO_JOBS
        elif run_idx.size == 0:
            preempted = prev_run
        else:  # both ascending: a binary search finds which still run
            pos = np.minimum(np.searchsorted(run_idx, prev_run), run_idx.size - 1)
            preempted = prev_run[run_idx[pos] != prev_run]
        was_running = st[run_idx] == RUNNING
        started_before = ~np.isnan(self.start_time[run_idx])
        changed = started_before & (~was_running | (new_sig != self.sig[run_idx]))
        restarted = run_idx[changed]
        self.restarts[restarted] += 1
        self.delay_left[restarted] = self.tm.restart_delay_s[self.workload.model[restarted]]
        if preempted.size:
            self.preemptions[preempted] += 1
            self.delay_left[preempted] = 0.0
        first = ~started_before
        self.start_time[run_idx[first]] = t0
        if self.failures is not None or self.config.checkpoint is not None:
            for fresh in (run_idx[changed | first], preempted):
                self.lost_streak[fresh[self.work_since_ckpt[fresh] > 0]] = 0  # the save kept work
                self.work_since_ckpt[fresh] = 0.0
                self.ckpt_phase[fresh] = 0.0
        return restarted, preempted

    def _rounds_at_once(
        self,
        run_idx: NDArray[np.int64],
        rate: NDArray[np.float64],
        rs: float,
        t0: float,
        max_rounds: int,
    ) -> int:
        """How many identical rounds to simulate at once (up to the next event)."""
        if max_rounds <= 1:
            return 1
        wl = self.workload
        horizon = np.inf
        if self._next_arrival < wl.num_jobs:
            horizon = float(wl.arrival[self._next_arrival]) - t0
        if run_idx.size:
            fin = self.delay_left[run_idx] + self.remaining[run_idx] / rate
            horizon = min(horizon, float(fin.min()))
        horizon = min(horizon, self.config.max_time_s - t0)
        if self.failures is not None:
            horizon = min(horizon, self.failures.next_event_after(t0) - t0)
        if np.isfinite(horizon):
            return int(max(1, min(max_rounds, np.ceil(horizon / rs - 1e-9))))
        return max_rounds

    def _windows(
        self,
        alloc: Allocation,
        g: JobGroups | None,
        run_idx: NDArray[np.int64],
        t0: float,
        dt: float,
    ) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """Each running job's window in the step (s) and whether a node failure cuts it."""
        window = np.full(run_idx.size, dt)
        failed = np.zeros(run_idx.size, dtype=bool)
        if self.failures is None:
            return window, failed
        ff = self.failures.first_failure_in(t0, t0 + dt)  # (N,)
        self.node_failures += int(np.isfinite(ff).sum())
        if g is not None and np.isfinite(ff[alloc.node]).any():
            tf = np.full(run_idx.size, np.inf)
            np.minimum.at(tf, g.row, ff[alloc.node])
            failed = np.isfinite(tf)
            window = np.where(failed, tf - t0, dt)
        return window, failed

    def _checkpoints(
        self,
        run_idx: NDArray[np.int64],
        rate: NDArray[np.float64],
        g_run: NDArray[np.int64],
        finishes: NDArray[np.bool_],
        failed: NDArray[np.bool_],
        need_time: NDArray[np.float64],
        work_time: NDArray[np.float64],
        progress: NDArray[np.float64],
        t0: float,
    ) -> NDArray[np.int64]:
        """Checkpoint bookkeeping and failed jobs' lost work; returns the failed jobs.

        The work since the last save is what a failure loses (only tracked with failures or
        checkpoints configured).

        Raises:
            SimulationStalledError: If a job lost its work too many times in a row.
        """
        ck = self.config.checkpoint
        if self.failures is None and ck is None:
            return _NO_JOBS
        productive = np.where(finishes, need_time, work_time)
        if ck is not None and ck.interval_s is not None:
            cyc = ck.cycle_s
            old = self.ckpt_phase[run_idx]
            new = old + productive
            crossed = np.floor(new / cyc) > np.floor(old / cyc)
            since = np.where(
                crossed, rate * np.mod(new, cyc), self.work_since_ckpt[run_idx] + progress
            )
            self.work_since_ckpt[run_idx] = since
            self.ckpt_phase[run_idx] = new
            self.lost_streak[run_idx[crossed]] = 0
        else:
            self.work_since_ckpt[run_idx] += progress
        fail_idx = run_idx[failed]
        if fail_idx.size == 0:
            return fail_idx
        lost = self.work_since_ckpt[fail_idx]
        self.remaining[fail_idx] += lost
        self.lost_gpu_s[fail_idx] += g_run[failed] * lost / rate[failed]
        self.failure_restarts[fail_idx] += 1
        self.work_since_ckpt[fail_idx] = 0.0
        self.ckpt_phase[fail_idx] = 0.0
        self.delay_left[fail_idx] = 0.0
        self.lost_streak[fail_idx] += 1
        worst = int(np.argmax(self.lost_streak[fail_idx]))
        if self.lost_streak[fail_idx[worst]] >= self._max_lost:
            j = int(fail_idx[worst])
            raise SimulationStalledError(
                f"job {str(self.workload.job_id[j])!r} lost its work to node failures "
                f"{int(self.lost_streak[j])} times in a row with no checkpoint in between "
                f"(t={t0 / 3600.0:.1f} h); it outlasts its nodes' time between failures and "
                "may never finish: set sim.checkpoint.interval_s (periodic checkpoints), a "
                "larger sim.failures.mtbf_h, or raise sim.failures.max_lost_attempts"
            )
        return fail_idx

    def _record(
        self,
        alloc: Allocation,
        gtype: NDArray[np.int64],
        t0: float,
        dt: float,
        n_running: int,
        n_active: int,
    ) -> None:
        """Append the step's row to the cluster timeline."""
        if alloc.size and int(alloc.share.max()) < 0:  # no space sharing: GPUs add up
            busy_gpus = int(alloc.gpus.sum())
        else:
            busy_gpus = int(alloc.used_gpus_per_node(self.cluster.num_nodes).sum())
        by_type = np.bincount(gtype, weights=alloc.gpus, minlength=self.gpu_s_by_type.shape[1])[
            self._types_present
        ]
        self._timeline.append(
            (t0, dt, float(busy_gpus), float(n_running), float(n_active - n_running),
             float(alloc.cpus.sum()), float(alloc.mem.sum()), *by_type.tolist())
        )  # fmt: skip

    def _check_idle(self, n_running: int, n_active: int, n_rounds: int) -> None:
        """Count rounds with waiting jobs and nothing running; raise past the limit.

        Raises:
            SimulationStalledError: After ``config.max_idle_rounds`` such rounds in a row.
        """
        if n_running == 0 and n_active > 0:
            self._idle_rounds += n_rounds
            if self._idle_rounds > self.config.max_idle_rounds:
                active = self.active_jobs()
                ids = [str(self.workload.job_id[j]) for j in active[:5]]
                raise SimulationStalledError(
                    f"no job has run for {self._idle_rounds} rounds while {active.size} jobs wait "
                    f"(first: {ids}); the policy never places them"
                )
        else:
            self._idle_rounds = 0

    def _next_round(self, t1: float, n_rounds: int, n_left: int) -> None:
        """Move the clock to ``t1`` and admit arrivals (jumping over idle time).

        Args:
            t1: The step's end (s).
            n_rounds: Rounds the step simulated.
            n_left: Active jobs at the step's start less those that finished in it.
        """
        J = self.workload.num_jobs
        self.time = t1
        self.round_index += n_rounds
        st = self.status
        while self._active_lo < J and st[self._active_lo] == DONE:
            self._active_lo += 1
        admitted_before = self._next_arrival
        self._admit()
        if n_left + (self._next_arrival - admitted_before) == 0 and self._next_arrival < J:
            self.time = max(self.time, float(self.workload.arrival[self._next_arrival]))
            self._admit()
        self._update_nodes()
