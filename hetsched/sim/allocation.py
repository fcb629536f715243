"""Allocations: what a scheduler hands the engine each round.

An :class:`Allocation` is struct-of-arrays over *entries*; an entry gives one job some GPUs, CPU
cores and memory on one node. A job absent from the allocation does not run this round (it is
preempted if it was running). A job may have entries on several nodes (a gang spread over
nodes) and, for Hadar-style task-level placement, on nodes of different GPU types.

Space sharing: entries on the same node with the same non-negative ``share`` id use the *same*
GPUs (at most two jobs, equal GPU counts), as in Gavel's space-sharing policy; ``share = -1`` means
exclusive GPUs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


@dataclass
class Allocation:
    """Struct-of-arrays allocation over E entries.

    Attributes:
        job: Job index (into the workload), shape (E,).
        node: Node index, shape (E,).
        gpus: GPUs on that node, >= 1, shape (E,).
        cpus: CPU cores on that node, >= 0, shape (E,).
        mem: Memory on that node in GiB, >= 0, shape (E,).
        share: Space-sharing group id on the node (-1 = exclusive GPUs), shape (E,).
    """

    job: IntArray
    node: IntArray
    gpus: IntArray
    cpus: FloatArray
    mem: FloatArray
    share: IntArray

    def __post_init__(self) -> None:
        self.job = np.asarray(self.job, dtype=np.int64).reshape(-1)
        self.node = np.asarray(self.node, dtype=np.int64).reshape(-1)
        self.gpus = np.asarray(self.gpus, dtype=np.int64).reshape(-1)
        self.cpus = np.asarray(self.cpus, dtype=np.float64).reshape(-1)
        self.mem = np.asarray(self.mem, dtype=np.float64).reshape(-1)
        self.share = np.asarray(self.share, dtype=np.int64).reshape(-1)

    @classmethod
    def _of_arrays(
        cls,
        job: IntArray,
        node: IntArray,
        gpus: IntArray,
        cpus: FloatArray,
        mem: FloatArray,
        share: IntArray,
    ) -> Allocation:
        """Wrap 1-D arrays already of the field dtypes (skips the conversions of ``__init__``)."""
        a = object.__new__(cls)
        a.job, a.node, a.gpus, a.cpus, a.mem, a.share = job, node, gpus, cpus, mem, share
        return a

    @property
    def size(self) -> int:
        """Number of entries E."""
        return int(self.job.shape[0])

    @classmethod
    def empty(cls) -> Allocation:
        """An allocation that runs nothing."""
        z = np.zeros(0, dtype=np.int64)
        f = np.zeros(0, dtype=np.float64)
        return cls(z, z.copy(), z.copy(), f, f.copy(), z.copy())

    @classmethod
    def from_entries(
        cls,
        entries: Sequence[
            tuple[int, int, int, float, float] | tuple[int, int, int, float, float, int]
        ],
    ) -> Allocation:
        """Build from tuples ``(job, node, gpus, cpus, mem[, share])``."""
        if not entries:
            return cls.empty()
        rows = [tuple(e) + ((-1,) if len(e) == 5 else ()) for e in entries]
        cols = list(zip(*rows, strict=True))
        return cls(
            np.array(cols[0]), np.array(cols[1]), np.array(cols[2]),
            np.array(cols[3], dtype=np.float64), np.array(cols[4], dtype=np.float64),
            np.array(cols[5]),
        )  # fmt: skip

    @classmethod
    def concat(cls, parts: Sequence[Allocation]) -> Allocation:
        """Concatenate allocations (no validation)."""
        parts = [p for p in parts if p.size]
        if not parts:
            return cls.empty()
        return cls._of_arrays(
            np.concatenate([p.job for p in parts]),
            np.concatenate([p.node for p in parts]),
            np.concatenate([p.gpus for p in parts]),
            np.concatenate([p.cpus for p in parts]),
            np.concatenate([p.mem for p in parts]),
            np.concatenate([p.share for p in parts]),
        )

    def select(self, mask: NDArray[np.bool_] | IntArray) -> Allocation:
        """Entries selected by a boolean mask or index array."""
        return Allocation._of_arrays(
            self.job[mask], self.node[mask], self.gpus[mask],
            self.cpus[mask], self.mem[mask], self.share[mask],
        )  # fmt: skip

    def for_jobs(self, jobs: NDArray[np.integer]) -> Allocation:
        """Entries of the given jobs."""
        return self.select(np.isin(self.job, jobs))

    def gpus_per_job(self, num_jobs: int) -> IntArray:
        """Total GPUs per job, shape (num_jobs,)."""
        return np.bincount(self.job, weights=self.gpus, minlength=num_jobs).astype(np.int64)

    def used_gpus_per_node(self, num_nodes: int) -> IntArray:
        """GPUs in use per node, counting a space-shared group once, shape (num_nodes,)."""
        if self.size == 0:
            return np.zeros(num_nodes, dtype=np.int64)
        if int(self.share.max()) < 0:  # no space sharing (the common case)
            return np.bincount(self.node, weights=self.gpus, minlength=num_nodes).astype(np.int64)
        excl = self.share < 0
        used = np.bincount(self.node[excl], weights=self.gpus[excl], minlength=num_nodes).astype(
            np.float64
        )
        if (~excl).any():
            sh = ~excl
            key = self.node[sh] * (int(self.share[sh].max()) + 1) + self.share[sh]
            _, first = np.unique(key, return_index=True)
            idx = np.flatnonzero(sh)[first]
            used += np.bincount(self.node[idx], weights=self.gpus[idx], minlength=num_nodes)
        return used.astype(np.int64)

    def used_cpus_per_node(self, num_nodes: int) -> FloatArray:
        """CPU cores in use per node, shape (num_nodes,)."""
        return np.asarray(
            np.bincount(self.node, weights=self.cpus, minlength=num_nodes), np.float64
        )

    def used_mem_per_node(self, num_nodes: int) -> FloatArray:
        """Memory in use per node in GiB, shape (num_nodes,)."""
        return np.asarray(np.bincount(self.node, weights=self.mem, minlength=num_nodes), np.float64)
