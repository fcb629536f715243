"""Node failures and recoveries, and periodic job checkpointing.

Two sources of failures, both producing the same thing -- per node, a sorted sequence of
``(down_at, up_at)`` intervals in simulated seconds:

* :class:`FailureModel` -- a renewal process per node: time to failure ~ Exponential(MTBF), time
  to repair ~ Exponential(mean repair time) (or a fixed repair time). Intervals are drawn from one
  seeded :class:`numpy.random.Generator` in fixed-size blocks of cycles for *all* nodes at once,
  so the schedule is a pure function of the seed: it does not depend on the scheduler, its round
  length or when the simulator asks for more (a longer run only draws further blocks).
* :func:`load_failure_trace` -- a CSV with columns ``node, fail_time_s, repair_s`` (node index,
  failure instant in seconds, repair duration in seconds), validated row by row.

How the engine uses them (see :mod:`hetsched.sim.engine`): a node that is down at a round boundary
offers no resources (``SimState.node_up`` is False and ``SimState.free_gpus`` is 0 there) and an
allocation that names it is rejected. A node that fails *inside* a round stops its jobs at the
failure instant: each such job loses the work done since its last checkpoint, releases its GPUs,
and becomes pending; when it is placed again it pays its restart delay like any resumed job. The
failure counts as a failure-induced restart, and the wasted GPU time as lost GPU-hours.

Checkpointing (:class:`CheckpointPolicy`): a running job saves a checkpoint every
``interval_s`` seconds of productive time, each save pausing it for ``cost_s`` seconds. The pause
is amortised as a rate factor ``interval_s / (interval_s + cost_s)`` on the job's progress; at a
failure the job loses the work done since the last save, i.e. the work of the current
``interval_s + cost_s`` cycle. With ``interval_s = None`` jobs checkpoint only when the scheduler
preempts or moves them (the restart delay models that), so a failure loses everything since the
job last (re)started. This is the trade-off of checkpoint overhead against lost work under
intermittent availability.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.errors import HetschedError

H = 3600.0

#: Default of ``sim.failures.max_lost_attempts`` (see :class:`FailureSpec`).
MAX_LOST_ATTEMPTS = 100


class FailureSpecError(HetschedError):
    """A failure model or failure trace is invalid."""


@dataclass
class CheckpointPolicy:
    """Periodic checkpointing of running jobs.

    Attributes:
        interval_s: Productive seconds between checkpoints; None = only on preemption/restart.
        cost_s: Seconds a job pauses to write one checkpoint.
    """

    interval_s: float | None = None
    cost_s: float = 0.0

    def __post_init__(self) -> None:
        if self.interval_s is not None and not (
            np.isfinite(self.interval_s) and self.interval_s > 0
        ):
            raise FailureSpecError(
                f"checkpoint interval_s={self.interval_s} must be a positive number of seconds "
                "(or null to checkpoint only on preemption)"
            )
        if not (np.isfinite(self.cost_s) and self.cost_s >= 0):
            raise FailureSpecError(f"checkpoint cost_s={self.cost_s} must be >= 0 seconds")
        if self.interval_s is None and self.cost_s > 0:
            raise FailureSpecError(
                f"checkpoint cost_s={self.cost_s} has no effect without interval_s; set "
                "sim.checkpoint.interval_s (seconds between saves) or leave cost_s at 0"
            )

    @property
    def rate_factor(self) -> float:
        """Fraction of a job's running time that is productive (1 without periodic saves)."""
        if self.interval_s is None:
            return 1.0
        return self.interval_s / (self.interval_s + self.cost_s)

    @property
    def cycle_s(self) -> float:
        """Length of one save cycle in seconds (inf without periodic saves)."""
        return np.inf if self.interval_s is None else self.interval_s + self.cost_s


#: Spawn-key branch of a run's seed that failure draws come from (the same for every scheduler).
FAILURE_STREAM = 0xFA11


@dataclass
class FailureSpec:
    """What :class:`~hetsched.sim.engine.SimConfig` carries: a failure model or a trace.

    Attributes:
        mtbf_h: Mean time between failures per node, hours; None = no random failures.
        repair_h: Mean repair time, hours.
        fixed_repair: Repair takes exactly ``repair_h``.
        trace: A failure trace CSV (``node, fail_time_s, repair_s``); used instead of the model.
        max_lost_attempts: Failures in a row that may destroy one job's work (no checkpoint
            saved in between) before the run stops with an error; it bounds runs in which a job
            outlasts its nodes' time between failures and never finishes.
    """

    mtbf_h: float | None = None
    repair_h: float = 1.0
    fixed_repair: bool = False
    trace: str | None = None
    max_lost_attempts: int = MAX_LOST_ATTEMPTS

    def __post_init__(self) -> None:
        for name in ("mtbf_h", "repair_h"):
            v = getattr(self, name)
            if v is not None and not (np.isfinite(v) and v > 0):
                raise FailureSpecError(f"failures.{name}={v} must be a positive number of hours")
        if self.trace is not None and self.mtbf_h is not None:
            raise FailureSpecError(
                f"failures.trace={self.trace!r} and failures.mtbf_h={self.mtbf_h} are both set; "
                "a run uses either a failure trace or the random model: drop one of them"
            )
        if int(self.max_lost_attempts) < 1:
            raise FailureSpecError(
                f"failures.max_lost_attempts={self.max_lost_attempts} must be >= 1"
            )

    @property
    def enabled(self) -> bool:
        """Whether any failure is configured."""
        return self.mtbf_h is not None or self.trace is not None

    def build(self, num_nodes: int, seed: int) -> FailureSchedule | None:
        """The schedule for a cluster of ``num_nodes`` nodes and run seed ``seed``.

        Draws come from ``SeedSequence(seed, spawn_key=(FAILURE_STREAM,))``, a fixed branch of the
        run's seed, so every scheduler evaluated with that seed sees the same failures.
        """
        if self.trace is not None:
            return load_failure_trace(self.trace, num_nodes)
        if self.mtbf_h is None:
            return None
        ss = np.random.SeedSequence(seed, spawn_key=(FAILURE_STREAM,))
        return FailureModel(
            num_nodes,
            mtbf_h=self.mtbf_h,
            repair_h=self.repair_h,
            rng=np.random.default_rng(ss),
            fixed_repair=self.fixed_repair,
        )


class FailureSchedule:
    """Per-node down intervals, extended on demand. Base class of the two sources.

    Subclasses fill ``self._down`` / ``self._up`` (each a list of (N, C) blocks of interval
    bounds, sorted per node along the block and across blocks) and may implement
    :meth:`_extend` to append a block.
    """

    def __init__(self, num_nodes: int) -> None:
        self.num_nodes = num_nodes
        self._down = np.zeros((num_nodes, 0))
        self._up = np.zeros((num_nodes, 0))

    def _extend(self) -> bool:
        """Append more intervals for every node; return False if there are no more."""
        return False

    def _covered(self, t: float) -> None:
        """Make sure every node's known intervals reach past ``t``."""
        while self._down.shape[1] == 0 or float(self._down[:, -1].min()) <= t:
            if not self._extend():
                return

    def node_up(self, t: float) -> NDArray[np.bool_]:
        """Whether each node is up at time ``t`` (a node is down on ``[down_at, up_at)``)."""
        self._covered(t)
        down: NDArray[np.bool_] = np.asarray((self._down <= t) & (t < self._up))
        return np.asarray(~down.any(axis=1), dtype=bool)

    def first_failure_in(self, t0: float, t1: float) -> NDArray[np.float64]:
        """Per node, the first failure instant in ``(t0, t1]`` (inf if none), shape (N,)."""
        self._covered(t1)
        hit = (self._down > t0) & (self._down <= t1)
        return np.where(hit, self._down, np.inf).min(axis=1, initial=np.inf)

    def next_event_after(self, t: float) -> float:
        """The earliest failure or recovery strictly after ``t`` (inf if none)."""
        self._covered(t)
        cand = np.concatenate([self._down[self._down > t], self._up[self._up > t]])
        return float(cand.min()) if cand.size else np.inf

    def intervals(self, until: float) -> list[tuple[int, float, float]]:
        """All ``(node, down_at, up_at)`` with ``down_at < until``, sorted by time."""
        self._covered(until)
        n, c = np.nonzero(self._down < until)
        rows = sorted(
            zip(self._down[n, c].tolist(), n.tolist(), self._up[n, c].tolist(), strict=True)
        )
        return [(node, d, u) for d, node, u in rows]


class FailureModel(FailureSchedule):
    """Exponential failures and repairs per node, drawn from one seeded generator.

    Args:
        num_nodes: Nodes of the cluster.
        mtbf_h: Mean time between failures of one node, hours (> 0).
        repair_h: Mean (or fixed) repair time, hours (> 0).
        rng: The generator every draw comes from.
        fixed_repair: Use exactly ``repair_h`` instead of an exponential draw.
        block: Cycles drawn per node at a time.

    Raises:
        FailureSpecError: For a non-positive MTBF or repair time.
    """

    def __init__(
        self,
        num_nodes: int,
        *,
        mtbf_h: float,
        repair_h: float,
        rng: np.random.Generator,
        fixed_repair: bool = False,
        block: int = 16,
    ) -> None:
        super().__init__(num_nodes)
        for name, v in (("mtbf_h", mtbf_h), ("repair_h", repair_h)):
            if not (np.isfinite(v) and v > 0):
                raise FailureSpecError(f"failures.{name}={v} must be a positive number of hours")
        self.mtbf_s = float(mtbf_h) * H
        self.repair_s = float(repair_h) * H
        self.fixed_repair = fixed_repair
        self.block = block
        self.rng = rng
        self._t_end = np.zeros(num_nodes)  # end of the last drawn cycle per node

    def _extend(self) -> bool:
        N, C = self.num_nodes, self.block
        up_len = self.rng.exponential(self.mtbf_s, size=(N, C))
        if self.fixed_repair:
            down_len = np.full((N, C), self.repair_s)
        else:
            down_len = self.rng.exponential(self.repair_s, size=(N, C))
        # Each cycle: up for up_len, then down for down_len.
        ends = np.cumsum(up_len + down_len, axis=1) + self._t_end[:, None]
        down_at = ends - down_len
        self._down = np.concatenate([self._down, down_at], axis=1)
        self._up = np.concatenate([self._up, ends], axis=1)
        self._t_end = ends[:, -1]
        return True


class TraceFailures(FailureSchedule):
    """Failures read from a trace (see :func:`load_failure_trace`)."""

    def __init__(
        self,
        num_nodes: int,
        node: NDArray[np.int64],
        down: NDArray[np.float64],
        up: NDArray[np.float64],
    ) -> None:
        super().__init__(num_nodes)
        counts = np.bincount(node, minlength=num_nodes) if node.size else np.zeros(num_nodes, int)
        C = int(counts.max()) if counts.size else 0
        self._down = np.full((num_nodes, C), np.inf)
        self._up = np.full((num_nodes, C), np.inf)
        order = np.lexsort((down, node))
        node, down, up = node[order], down[order], up[order]
        start = np.concatenate([[0], np.cumsum(counts)[:-1]])
        col = np.arange(node.size) - start[node]
        self._down[node, col] = down
        self._up[node, col] = up


def load_failure_trace(path: str | Path, num_nodes: int) -> TraceFailures:
    """Read a failure trace CSV with columns ``node, fail_time_s, repair_s``.

    Args:
        path: The CSV file (header row required).
        num_nodes: Nodes of the cluster (node indices must be below it).

    Raises:
        FailureSpecError: Naming the file, row, column and value for a missing column, a
            non-numeric or negative value, an unknown node, or overlapping failures of one node.
    """
    p = Path(path)
    if not p.is_file():
        raise FailureSpecError(f"failure trace {p} does not exist; give failures.trace=PATH")
    need = ("node", "fail_time_s", "repair_s")
    nodes: list[int] = []
    down: list[float] = []
    rep: list[float] = []
    with p.open(newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in need if c not in (reader.fieldnames or [])]
        if missing:
            raise FailureSpecError(
                f"failure trace {p}: missing column(s) {missing}; expected header {','.join(need)}"
            )
        for row_no, row in enumerate(reader, start=2):
            try:
                n = int(row["node"])
                f = float(row["fail_time_s"])
                r = float(row["repair_s"])
            except (TypeError, ValueError) as e:
                raise FailureSpecError(f"failure trace {p} row {row_no}: {e}") from None
            if not 0 <= n < num_nodes:
                raise FailureSpecError(
                    f"failure trace {p} row {row_no}: node={n} but the cluster has nodes "
                    f"0..{num_nodes - 1}"
                )
            if not (np.isfinite(f) and f >= 0):
                raise FailureSpecError(
                    f"failure trace {p} row {row_no}: fail_time_s={f} must be >= 0"
                )
            if not (np.isfinite(r) and r > 0):
                raise FailureSpecError(f"failure trace {p} row {row_no}: repair_s={r} must be > 0")
            nodes.append(n)
            down.append(f)
            rep.append(r)
    node_a = np.asarray(nodes, dtype=np.int64)
    down_a = np.asarray(down, dtype=np.float64)
    up_a = down_a + np.asarray(rep, dtype=np.float64)
    order = np.lexsort((down_a, node_a))
    same = node_a[order][1:] == node_a[order][:-1]
    overlap = same & (down_a[order][1:] < up_a[order][:-1])
    if overlap.any():
        i = int(np.flatnonzero(overlap)[0])
        raise FailureSpecError(
            f"failure trace {p}: node {node_a[order][i]} fails at {down_a[order][i + 1]} s while "
            f"still down from an earlier failure (until {up_a[order][i]} s); merge the rows"
        )
    return TraceFailures(num_nodes, node_a, down_a, up_a)
