"""How often a scheduler moves running jobs, and to what rate.

:class:`MoveProbe` wraps any scheduler and, at each decision, compares every job's nodes with
the nodes it last ran on. A *move* is a job that runs on another set of nodes than it last did:
migrated in one decision, or evicted and placed again later (a job that only changes its GPU
count on the same nodes is not moved). Each move is rated by the job's isolated throughput at
its GPUs after against before (the slowest GPU type it holds; spread when it runs on more nodes
than its GPUs need, as the engine rates a gang): ``faster`` at least :data:`FASTER` times the
rate, ``slower`` at most its inverse, ``same`` in between. Moves between nodes of about the
same rate pay a restart for little.

``scripts/job_moves.py`` replays benchmark cells with it.
"""

from __future__ import annotations

from dataclasses import asdict, astuple, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.allocation import Allocation
from hetsched.sim.rates import job_layout

#: A move is ``faster`` when the job's isolated throughput after is at least this many times the
#: throughput before (the MAIFS recipe's ``migrate_speedup``), ``slower`` at most its inverse.
FASTER = 1.25

#: Odd 64-bit multiplier of the node-set signature (a sum of per-node hashes).
_MIX = np.uint64(0x9E3779B97F4A7C15)


@dataclass
class MoveCounts:
    """Moves of one run.

    Attributes:
        moves: Jobs that ran on another set of nodes than they last did.
        faster: Of those, to at least :data:`FASTER` times the isolated throughput.
        same: To between ``1 / FASTER`` and ``FASTER`` times it.
        slower: To at most ``1 / FASTER`` times it.
    """

    moves: int = 0
    faster: int = 0
    same: int = 0
    slower: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counts by name."""
        return asdict(self)

    def __add__(self, other: MoveCounts) -> MoveCounts:
        return MoveCounts(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


def job_rates(alloc: Allocation, state: Any) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The jobs of an allocation and the isolated throughput each gets there, shapes (U,):
    at its GPUs over all its nodes, spread as the engine rates it
    (:func:`hetsched.sim.rates.job_layout`), on the slowest GPU type it holds.

    Args:
        alloc: The allocation.
        state: The simulator state it was decided on (``workload``, ``cluster``,
            ``throughput``).
    """
    cl, wl, tm = state.cluster, state.workload, state.throughput
    total, spread = job_layout(alloc, cl.node_gpus, wl.num_jobs)
    per_entry = tm.isolated(wl.model[alloc.job], cl.node_type[alloc.node], total, spread)
    jobs, inv = np.unique(alloc.job, return_inverse=True)
    rate = np.full(jobs.shape[0], np.inf)
    np.minimum.at(rate, inv, np.asarray(per_entry, dtype=np.float64))
    return jobs, rate


def node_signature(alloc: Allocation, jobs: NDArray[np.int64]) -> NDArray[np.uint64]:
    """A signature of each job's set of nodes, shape (len(jobs),): equal sets, equal values
    (``jobs`` as :func:`job_rates` returns them, sorted)."""
    inv = np.searchsorted(jobs, alloc.job)
    h = (alloc.node.astype(np.uint64) + np.uint64(1)) * _MIX
    h ^= h >> np.uint64(29)
    out = np.zeros(jobs.shape[0], dtype=np.uint64)
    np.add.at(out, inv, h)  # wraps modulo 2**64
    return out


class MoveProbe:
    """Wraps a scheduler and counts the moves of its run (see the module docstring).

    Args:
        policy: Any scheduler (``reset`` / ``decide``).
        faster: The throughput ratio from which a move counts as ``faster``.
    """

    def __init__(self, policy: Any, faster: float = FASTER) -> None:
        if not faster > 1.0:
            raise ValueError(f"faster={faster!r} must be > 1 (a throughput ratio)")
        self.policy = policy
        self.faster = float(faster)
        self.counts = MoveCounts()
        self._sig: NDArray[np.uint64] = np.zeros(0, dtype=np.uint64)
        self._rate: NDArray[np.float64] = np.zeros(0)
        self._seen: NDArray[np.bool_] = np.zeros(0, dtype=bool)

    def __getattr__(self, name: str) -> Any:
        if name == "policy":
            raise AttributeError(name)
        return getattr(self.policy, name)

    def reset(self, *args: Any, **kwargs: Any) -> None:
        """Reset the wrapped policy and the counts."""
        self.counts = MoveCounts()
        self._sig = np.zeros(0, dtype=np.uint64)
        if hasattr(self.policy, "reset"):
            self.policy.reset(*args, **kwargs)

    def decide(self, state: Any) -> Allocation:
        """The wrapped policy's decision; counts the jobs it moves."""
        alloc: Allocation = self.policy.decide(state)
        J = state.workload.num_jobs
        if self._sig.shape[0] != J:  # a new run
            self._sig = np.zeros(J, dtype=np.uint64)
            self._rate = np.zeros(J)
            self._seen = np.zeros(J, dtype=bool)
        if alloc.size == 0:
            return alloc
        jobs, rate = job_rates(alloc, state)
        sig = node_signature(alloc, jobs)
        moved = self._seen[jobs] & (self._sig[jobs] != sig)
        if moved.any():
            r = rate[moved] / np.maximum(self._rate[jobs[moved]], 1e-300)
            c = self.counts
            c.moves += int(moved.sum())
            c.faster += int((r >= self.faster).sum())
            c.slower += int((r <= 1.0 / self.faster).sum())
            c.same = c.moves - c.faster - c.slower
        self._sig[jobs], self._rate[jobs], self._seen[jobs] = sig, rate, True
        return alloc
