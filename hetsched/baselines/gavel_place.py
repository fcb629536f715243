"""Gavel's placement inside a GPU type (gavel.md §4): exclusive units and space-sharing pairs.

:class:`GavelPlacer` is the common :class:`~hetsched.baselines.base.Placer` plus pairs of 1-GPU
jobs on one GPU (two entries with one ``share`` id) and a vectorised step for many 1-GPU units.
:class:`hetsched.baselines.gavel.GavelPolicy` decides which units go where.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from hetsched.baselines.base import Placer
from hetsched.sim.allocation import Allocation
from hetsched.sim.engine import SimState

IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


class GavelPlacer(Placer):
    """:class:`Placer` plus space-sharing pairs (two jobs on one GPU, one ``share`` id)."""

    def __init__(self, state: SimState, keep: Allocation | None = None) -> None:
        super().__init__(state, keep)
        self._pair_entries: list[tuple[int, int, int, float, float, int]] = []
        self._bulk: list[Allocation] = []
        self._next_share = int(self.keep.share.max()) + 1 if self.keep.size else 0

    def place_one_gpu_units(self, a: IntArray, b: IntArray, gpu_type: int) -> BoolArray | None:
        """Place many 1-GPU units (singles ``b = -1`` and pairs) on ``gpu_type`` in one step.

        Equivalent to placing them one by one with best fit (the node with the fewest free GPUs
        first, then the lowest index): the GPUs are handed out node by node in that order. CPU and
        memory are the fixed per-GPU shares capped at the request (each pair member its own).

        Args:
            a: First job of each unit, (U,).
            b: Second job of each unit or -1, (U,).
            gpu_type: Catalogue GPU type.

        Returns:
            Which units were placed (units beyond the free GPUs are not), or None (nothing
            placed) if CPU or memory would not fit on some node; the caller then places the
            units one by one.
        """
        st = self.state
        cl, wl = st.cluster, st.workload
        nodes = np.flatnonzero((cl.node_type == gpu_type) & (self.free_gpus > 0))
        nodes = nodes[np.lexsort((nodes, self.free_gpus[nodes]))]
        slots = np.repeat(nodes, self.free_gpus[nodes])
        U = a.shape[0]
        n = min(U, slots.shape[0])
        a, b, node = a[:n], b[:n], slots[:n]
        pair = b >= 0
        bb = np.where(pair, b, a)
        ca = np.minimum(wl.cpu_per_gpu[a], self._cpu_share[node])
        ma = np.minimum(wl.mem_per_gpu[a], self._mem_share[node])
        cb = np.where(pair, np.minimum(wl.cpu_per_gpu[bb], self._cpu_share[node]), 0.0)
        mb = np.where(pair, np.minimum(wl.mem_per_gpu[bb], self._mem_share[node]), 0.0)
        N = cl.num_nodes
        need_c = np.bincount(node, weights=ca + cb, minlength=N)
        need_m = np.bincount(node, weights=ma + mb, minlength=N)
        floor = st.throughput.mem_floor
        if (
            np.any(need_c > self.free_cpus + 1e-9)
            or np.any(need_m > self.free_mem + 1e-9)
            or np.any(ma < floor * wl.mem_per_gpu[a] - 1e-9)
            or np.any(pair & (mb < floor * wl.mem_per_gpu[bb] - 1e-9))
        ):
            return None
        self.free_gpus -= np.bincount(node, minlength=N)
        self.free_cpus -= need_c
        self.free_mem -= need_m
        self.placed.update(a.tolist())
        self.placed.update(b[pair].tolist())
        P = int(pair.sum())
        sid = self._next_share + np.arange(P)
        self._next_share += P
        one = np.ones(n + P, dtype=np.int64)
        first = np.full(n, -1, dtype=np.int64)
        first[pair] = sid
        share = np.concatenate([first, sid])
        self._bulk.append(
            Allocation(
                np.concatenate([a, b[pair]]), np.concatenate([node, node[pair]]), one,
                np.concatenate([ca, cb[pair]]), np.concatenate([ma, mb[pair]]), share,
            )
        )  # fmt: skip
        placed = np.zeros(U, dtype=bool)
        placed[:n] = True
        return placed

    def place_on_type(self, j: int, n: int, gpu_type: int) -> bool:
        """Place job ``j`` on ``n`` GPUs of ``gpu_type``: best-fit single node, else the fewest nodes.

        The caller guarantees the job's packed throughput on this type is positive, so a
        single-node placement needs no throughput check (spread layouts go through
        :meth:`Placer.place`, which checks).
        """
        if j in self.placed:
            return False
        cl = self.state.cluster
        cand = np.flatnonzero((cl.node_type == gpu_type) & (self.free_gpus >= n))
        if cand.size:
            cand = cand[np.lexsort((cand, self.free_gpus[cand]))][:8]
            g = np.array([n], dtype=np.int64)
            for nd in cand.tolist():
                if self._commit(j, np.array([nd], dtype=np.int64), g):
                    return True
        mask = np.zeros(len(self.state.throughput.gpu_types), dtype=bool)
        mask[gpu_type] = True
        return self.place(j, n, types=mask)

    def place_pair(self, a: int, b: int, gpu_type: int, node: int | None = None) -> bool:
        """Place 1-GPU jobs ``a`` and ``b`` on one GPU of ``gpu_type`` (on ``node`` if given)."""
        if a in self.placed or b in self.placed:
            return False
        cl, wl = self.state.cluster, self.state.workload
        if node is not None:
            cand = np.array([node], dtype=np.int64)
            if cl.node_type[node] != gpu_type or self.free_gpus[node] < 1:
                return False
        else:
            if not (wl.allowed_types[a, gpu_type] and wl.allowed_types[b, gpu_type]):
                return False
            cand = np.flatnonzero((cl.node_type == gpu_type) & (self.free_gpus >= 1))
            cand = cand[np.lexsort((cand, self.free_gpus[cand]))][:8]
        one = np.ones(1, dtype=np.int64)
        for nd in cand.tolist():
            nodes = np.array([nd], dtype=np.int64)
            ca, ma, ok_a = self._fit(a, nodes, one)
            if not ok_a:
                continue
            self.free_cpus[nd] -= ca[0]
            self.free_mem[nd] -= ma[0]
            cb, mb, ok_b = self._fit(b, nodes, one)
            if not ok_b:
                self.free_cpus[nd] += ca[0]
                self.free_mem[nd] += ma[0]
                continue
            self.free_cpus[nd] -= cb[0]
            self.free_mem[nd] -= mb[0]
            self.free_gpus[nd] -= 1
            sid = self._next_share
            self._next_share += 1
            self._pair_entries.append((a, nd, 1, float(ca[0]), float(ma[0]), sid))
            self._pair_entries.append((b, nd, 1, float(cb[0]), float(mb[0]), sid))
            self.placed.update((a, b))
            return True
        return False

    def allocation(self) -> Allocation:
        """Exclusive entries plus the pairs."""
        return Allocation.concat(
            [super().allocation(), Allocation.from_entries(self._pair_entries), *self._bulk]
        )
