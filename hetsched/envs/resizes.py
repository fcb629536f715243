"""Resizes of running elastic jobs by agents (a mixin of :class:`~hetsched.envs.core.EnvCore`).

Only with ``EnvSettings.resizable``. Action ``resize_offset + r`` of an agent doubles the GPUs
of the job in its resident slot ``r`` on its own node, with the CPU cores and memory per GPU
the job has now. Legal iff the slot holds a job that was running when the round started, that
job's whole allocation is this one entry (a gang is never resized) on exclusive GPUs, twice its
GPUs is within the job's ``max_gpus`` and has a positive isolated throughput on the node's GPU
type, the node is up and has the GPUs, cores and memory free, and the agent has no legal
placement: a resize only takes resources that no job waiting in the window could use on this
node. The claims of a step are resolved first, then resizes, then evictions (the order changes
no outcome, see ``ClaimResolver._evict_and_resize``); the engine charges the job's restart
delay (its placement changed). A step that resizes keeps the round going, so a
job may double again at the next decision step while room is left.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from hetsched.envs.core_state import CoreState
from hetsched.envs.features import MaskArrays
from hetsched.sim.allocation import Allocation


class ResizeRules(CoreState):
    """Legal resizes and their effect on the round's allocation."""

    @property
    def resize_offset(self) -> int:
        """Index of the first resize action (after the placements and any evictions)."""
        return self.n_place + (self.cfg.resident_slots if self.cfg.preemptive else 0)

    def _with_slot_actions(self, ma: MaskArrays) -> MaskArrays:
        """``ma`` with the eviction (preemptive) and resize (resizable) masks appended to its
        placement masks, in that order."""
        extra = [self._evict_mask()] if self.cfg.preemptive else []
        if self.cfg.resizable:
            extra.append(self._resize_mask(ma.mask))
        return replace(ma, mask=np.hstack([ma.mask, *extra])) if extra else ma

    def _resize_mask(self, place_mask: NDArray[np.int8]) -> NDArray[np.int8]:
        """Legal resizes, shape (N, R) int8, given the placement masks ``place_mask`` (N, A_p)
        of the same refresh (see the module docstring)."""
        assert self.wl is not None
        ent = self._evictable()
        m = (ent >= 0) & self.node_up[:, None]
        m &= ~(place_mask[:, 1:] == 1).any(axis=1)[:, None]  # no waiting job fits here
        if not m.any():
            return m.astype(np.int8)
        a, wl = self._cur, self.wl
        e = np.where(m, ent, 0)
        job = a.job[e]
        g = a.gpus[e]
        node = np.broadcast_to(self._arange_n[:, None], e.shape)
        whole = np.bincount(a.job, minlength=self.J)[job] == 1  # one entry: not a gang
        m &= whole & (a.share[e] < 0) & (2 * g <= wl.max_gpus[job])
        m &= (self.free_g[node] >= g) & (self.free_c[node] >= a.cpus[e] - 1e-9)
        m &= self.free_m[node] >= a.mem[e] - 1e-9
        if m.any():
            nt = self.cluster.node_type[node]
            m &= self.tm.isolated(wl.model[job], nt, 2 * g, False) > 0
        return m.astype(np.int8)

    @property
    def any_resizable(self) -> bool:
        """Some agent has a legal resize (always False unless resizable)."""
        return self.cfg.resizable and bool(self.ma.mask[:, self.resize_offset :].any())

    def _resize(self, agents: NDArray[np.int64], slots: NDArray[np.int64]) -> int:
        """Double the entries in ``slots`` of ``agents`` (legal, distinct agents); jobs resized.

        The running entries are rebuilt (the simulator's allocation object is never written
        to); each entry's node gives up the added GPUs, cores and memory.
        """
        cur = self._cur
        e = self._evictable()[agents, slots]
        gpus, cpus, mem = cur.gpus.copy(), cur.cpus.copy(), cur.mem.copy()
        self.free_g[cur.node[e]] -= gpus[e]
        self.free_c[cur.node[e]] -= cpus[e]
        self.free_m[cur.node[e]] -= mem[e]
        gpus[e] *= 2
        cpus[e] *= 2.0
        mem[e] *= 2.0
        self._cur = Allocation._of_arrays(cur.job, cur.node, gpus, cpus, mem, cur.share)
        self._round_alloc = None
        return int(e.size)
