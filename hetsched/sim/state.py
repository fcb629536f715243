"""The engine's settings, the scheduler's snapshot and the records of a run.

Status codes of a job: ``FUTURE`` (not arrived), ``PENDING`` (arrived, not running),
``RUNNING`` (ran in the previous round), ``DONE``. Everything here is re-exported by
:mod:`hetsched.sim.engine`, the module that documents the round rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.allocation import Allocation
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import HetschedError, SettingError
from hetsched.sim.faults import CheckpointPolicy, FailureSpec
from hetsched.sim.throughput import ThroughputModel, for_reproduction
from hetsched.sim.workload import Workload

FUTURE, PENDING, RUNNING, DONE = 0, 1, 2, 3


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
