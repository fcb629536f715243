"""Gavel's round-based mechanism (gavel.md §4): turns an allocation X into rounds.

:class:`RoundMechanism` holds the units of the current allocation and their time accounting,
decides when to reset and re-solve, and runs the greedy pass that picks the units of a round.
It knows GPU types only; :class:`hetsched.baselines.gavel.GavelPolicy` places the chosen units
on nodes (:mod:`hetsched.baselines.gavel_place`). The rules are in the docstring of
:mod:`hetsched.baselines.gavel`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

#: Priority multiplier for a unit whose time fraction is 0 (Gavel's rule).
ZERO_FRACTION_PRIORITY = 1e9


class RoundMechanism:
    """Gavel's round-based mechanism (gavel.md §4): turns an allocation X into rounds.

    The mechanism holds the current units ("keys": ``(job, -1)`` for a single job,
    ``(a, b)`` with a < b for a pair; job = workload index), their allocation and the time
    accounting. It knows GPU *types* only; node placement is the caller's job.

    Args:
        capacity: GPUs per type, (K,).
        round_s: Round length in seconds.
        min_reset_s: Minimum time between resets (and solves) in seconds.
        resolve_on_arrival: Re-solve on every arrival, bypassing the throttle (quirk 8).

    Attributes:
        keys: The units of the current X.
        members: Job indices per unit, (C, 2), -1 for none.
        X: Allocation, (C, K).
        runnable: Whether each unit can run on each type, (C, K).
        scale: GPUs per unit, (C,).
        time_so_far: Seconds per unit and type since the last reset, plus half a round, (C, K).
        received: Seconds per unit and type since the last reset, (C, K).
        deficit: Accumulated ``X * elapsed - received`` per unit and type, (C, K).
        worker_time: Sum of ``time_so_far`` per type, (K,).
        last_reset: Time of the last reset in seconds (None before the first).
        resets: Number of resets so far.
    """

    def __init__(
        self,
        capacity: IntArray,
        *,
        round_s: float = 360.0,
        min_reset_s: float = 1920.0,
        resolve_on_arrival: bool = False,
    ) -> None:
        if round_s <= 0:
            raise ValueError(f"round_s={round_s} must be > 0 seconds")
        if min_reset_s < 0:
            raise ValueError(f"min_reset_s={min_reset_s} must be >= 0 seconds")
        self.capacity = np.asarray(capacity, dtype=np.int64)
        self.round_s = float(round_s)
        self.min_reset_s = float(min_reset_s)
        self.resolve_on_arrival = bool(resolve_on_arrival)
        K = self.capacity.shape[0]
        self.keys: list[tuple[int, int]] = []
        self.members = np.zeros((0, 2), dtype=np.int64)
        self.X = np.zeros((0, K))
        self.runnable = np.zeros((0, K), dtype=bool)
        self.scale = np.zeros(0, dtype=np.int64)
        self.time_so_far = np.zeros((0, K))
        self.received = np.zeros((0, K))
        self.deficit = np.zeros((0, K))
        self.worker_time = np.zeros(K)
        self.last_reset: float | None = None
        self.resets = 0
        self._jobs = np.zeros(0, dtype=np.int64)  # sorted jobs present in X

    @property
    def num_types(self) -> int:
        """Number of GPU types K."""
        return int(self.capacity.shape[0])

    @property
    def jobs(self) -> IntArray:
        """Sorted job indices that appear in X."""
        return self._jobs

    def needs_solve(
        self, now: float, active: IntArray, idle: bool, capacity_changed: bool = False
    ) -> bool:
        """Whether to reset and re-solve at the start of the round at ``now`` (seconds).

        Args:
            now: Current time in seconds.
            active: Arrived, unfinished jobs.
            idle: Nothing ran in the previous round.
            capacity_changed: The GPUs of up nodes per type differ from those of the last solve
                (a node failed or was repaired); an event like an arrival or completion.
        """
        active = np.asarray(active, dtype=np.int64)
        arrived = bool((~np.isin(active, self._jobs)).any())
        completed = bool((~np.isin(self._jobs, active)).any())
        if not (arrived or completed or capacity_changed):
            return False
        if self.last_reset is None or idle:
            return True
        if self.resolve_on_arrival and arrived:
            return True
        return now - self.last_reset >= self.min_reset_s - 1e-9

    def reset(
        self,
        now: float,
        keys: list[tuple[int, int]],
        X: FloatArray,
        runnable: BoolArray,
        scale: IntArray,
    ) -> None:
        """Reset the accounting at ``now`` and install a new allocation.

        Deficits of units that stay are carried over (``deficit += X * elapsed - received``
        with the old X); new units start at 0. Every unit's ``time_so_far`` becomes half a round.
        """
        C, K = len(keys), self.num_types
        X = np.asarray(X, dtype=np.float64).reshape(C, K)
        new_deficit = np.zeros((C, K))
        if self.last_reset is not None and self.keys:
            elapsed = now - self.last_reset
            self.deficit += self.X * elapsed - self.received
            old = {k: i for i, k in enumerate(self.keys)}
            pos = np.array([old.get(k, -1) for k in keys], dtype=np.int64)
            hit = pos >= 0
            new_deficit[hit] = self.deficit[pos[hit]]
        self.keys = list(keys)
        self.members = (
            np.array(keys, dtype=np.int64).reshape(C, 2) if C else np.zeros((0, 2), dtype=np.int64)
        )
        self.X = X
        self.runnable = np.asarray(runnable, dtype=bool).reshape(C, K)
        self.scale = np.asarray(scale, dtype=np.int64).reshape(C)
        self.deficit = new_deficit
        half = self.round_s / 2.0
        self.time_so_far = np.full((C, K), half)
        self.received = np.zeros((C, K))
        self.worker_time = np.full(K, half * C)
        self.last_reset = float(now)
        self.resets += 1
        m = self.members.reshape(-1)
        self._jobs = np.unique(m[m >= 0])

    def record(self, unit: IntArray, type_pos: IntArray, seconds: FloatArray) -> None:
        """Add the seconds each unit ran on its type in the last round to the accounting."""
        unit = np.asarray(unit, dtype=np.int64)
        type_pos = np.asarray(type_pos, dtype=np.int64)
        sec = np.asarray(seconds, dtype=np.float64)
        np.add.at(self.time_so_far, (unit, type_pos), sec)
        np.add.at(self.received, (unit, type_pos), sec)
        np.add.at(self.worker_time, type_pos, sec)

    def priorities(self) -> FloatArray:
        """``X / (time_so_far / worker_time)`` per unit and type (1e9 X at fraction 0), (C, K)."""
        wt = self.worker_time[None, :]
        frac = np.where(wt > 0, self.time_so_far / np.where(wt > 0, wt, 1.0), 0.0)
        pri = np.where(
            frac > 0, self.X / np.where(frac > 0, frac, 1.0), self.X * ZERO_FRACTION_PRIORITY
        )
        return np.asarray(np.where((self.X > 0) & self.runnable, pri, 0.0))

    def select(
        self,
        type_order: IntArray,
        active: IntArray,
        new_jobs: IntArray | None = None,
        new_scale: IntArray | None = None,
        new_runnable: BoolArray | None = None,
    ) -> list[tuple[int, int]]:
        """The greedy pass of one round.

        Args:
            type_order: Type positions in the order their lists are walked.
            active: Arrived, unfinished jobs; units with a finished member are dropped (Gavel
                removes a completed job from the allocation at once).
            new_jobs: Active jobs not in X (quirk 8): ranked with priority, deficit and X 0.
            new_scale: Their scale factors.
            new_runnable: Whether they can run on each type, (N, K).

        Returns:
            ``(entry, type)`` pairs: ``entry`` is a unit index (< C) or ``C + i`` for
            ``new_jobs[i]`` (which hold GPUs but are not placed).
        """
        C, K = len(self.keys), self.num_types
        pri = self.priorities()
        deficit, X, runnable = self.deficit, self.X, self.runnable
        alive = np.asarray((np.isin(self.members, active) | (self.members < 0)).all(axis=1))
        runnable = runnable & alive[:, None]
        members, scale = self.members, self.scale
        if new_jobs is not None and len(new_jobs):
            nj = np.asarray(new_jobs, dtype=np.int64)
            N = nj.shape[0]
            z = np.zeros((N, K))
            pri = np.concatenate([pri, z])
            deficit = np.concatenate([deficit, z])
            X = np.concatenate([X, z])
            runnable = np.concatenate([runnable, np.asarray(new_runnable, dtype=bool)])
            members = np.concatenate([members, np.stack([nj, np.full(N, -1)], axis=1)])
            scale = np.concatenate([scale, np.asarray(new_scale, dtype=np.int64)])
        free = self.capacity.copy()
        taken: set[int] = set()
        out: list[tuple[int, int]] = []
        idx_all = np.arange(runnable.shape[0])
        for j in np.asarray(type_order, dtype=np.int64).tolist():
            if free[j] <= 0:
                continue
            cand = idx_all[runnable[:, j]]
            if cand.size == 0:
                continue
            order = cand[np.lexsort((cand, -X[cand, j], -deficit[cand, j], -pri[cand, j]))]
            left = int(free[j])
            mem = members[order].tolist()
            sc = scale[order].tolist()
            for e, (a, b), g in zip(order.tolist(), mem, sc, strict=True):
                if left == 0:
                    break
                if a in taken or (b >= 0 and b in taken) or g > left:
                    continue
                left -= g
                taken.add(a)
                if b >= 0:
                    taken.add(b)
                out.append((e, j))
            free[j] = left
        del C
        return out
