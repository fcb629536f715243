"""Resizes of running elastic jobs by agents (a mixin of :class:`~hetsched.envs.core.EnvCore`).

Only with ``EnvSettings.resizable``. Action ``resize_offset + r`` of an agent doubles the GPUs
of the job in its resident slot ``r``, with the CPU cores and memory per GPU the job has now.
Legal iff the slot holds a job that was running when the round started, all of that job's
entries are on exclusive GPUs of one GPU type, twice its GPUs is within the job's ``max_gpus``
and has a positive isolated throughput on that type, the agent's node is up, the agent has no
legal placement, and the added GPUs have room:

* **on the agent's node** when the job's whole allocation is this one entry and the node has
  the GPUs, cores and memory free (the job stays on one node); otherwise
* **on other nodes of the job's GPU type** (*scale-out*): nodes that are up, hold no entry of
  the job and have no legal placement, taken in order of the most GPUs they can give (then the
  lowest index), each giving what its free GPUs, cores and memory allow at the job's cores and
  memory per GPU, until the job's GPUs are matched; legal iff those nodes together can.

Either way a resize only takes resources that no job waiting in the window could use. The
claims of a step are resolved first, then resizes, then evictions (the order changes no
outcome, see ``ClaimResolver._evict_and_resize``). Several agents' resizes in one step apply in
agent order, one per job; a scale-out whose room an earlier resize of the same step took is
dropped (``ClaimResult.resized_jobs`` counts the jobs resized). The engine charges the job's
restart delay (its placement changed). A step that resizes keeps the round going, so a job may
double again at the next decision step while room is left.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from hetsched.envs.core_state import CoreState
from hetsched.envs.features import MaskArrays
from hetsched.sim.allocation import Allocation

_TOL = 1e-9


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

    def _job_totals(self) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.bool_]]:
        """Per job of the workload, over the running entries: total GPUs (J,), the GPU type of
        its entries (J,; -1 for a job not running) and whether it may resize at all (J,:
        running, on exclusive GPUs of one type)."""
        a, J = self._cur, self.J
        tot = np.bincount(a.job, weights=a.gpus, minlength=J)
        nt = self.cluster.node_type[a.node]
        tmin = np.full(J, np.iinfo(np.int64).max, dtype=np.int64)
        tmax = np.full(J, -1, dtype=np.int64)
        np.minimum.at(tmin, a.job, nt)
        np.maximum.at(tmax, a.job, nt)
        shared = np.zeros(J, dtype=bool)
        shared[a.job[a.share >= 0]] = True
        ok = (tmax >= 0) & (tmin == tmax) & ~shared
        return tot, np.where(ok, tmax, -1), ok

    def _outside_room(self, jobs: NDArray[np.int64], per_gpu: tuple[NDArray, NDArray]) -> NDArray:
        """GPUs each node could add to each of ``jobs`` (U,) by a scale-out, shape (U, N)
        int64, at the jobs' cores and memory per GPU ``per_gpu`` ((U,), (U,))."""
        a, N = self._cur, self.N
        _, jtype, _ = self._job_totals()
        cpg, mpg = per_gpu
        hosts = np.zeros((jobs.size, N), dtype=bool)
        row = np.searchsorted(jobs, a.job)
        on = (row < jobs.size) & (jobs[np.minimum(row, jobs.size - 1)] == a.job)
        hosts[row[on], a.node[on]] = True
        fit_c = np.floor(self.free_c[None, :] / np.maximum(cpg[:, None], _TOL) + _TOL)
        fit_m = np.floor(self.free_m[None, :] / np.maximum(mpg[:, None], _TOL) + _TOL)
        cap = np.minimum(self.free_g[None, :], np.minimum(fit_c, fit_m)).astype(np.int64)
        ok = (self.cluster.node_type[None, :] == jtype[jobs][:, None]) & ~hosts
        ok &= (self.node_up & self._noplace)[None, :]
        return np.where(ok, np.maximum(cap, 0), 0)

    def _per_gpu(self, jobs: NDArray[np.int64]) -> tuple[NDArray, NDArray]:
        """Cores and memory per GPU (GiB) of running ``jobs`` (U,), each (U,)."""
        a, J = self._cur, self.J
        g = np.bincount(a.job, weights=a.gpus, minlength=J)[jobs]
        c = np.bincount(a.job, weights=a.cpus, minlength=J)[jobs]
        m = np.bincount(a.job, weights=a.mem, minlength=J)[jobs]
        return c / np.maximum(g, 1.0), m / np.maximum(g, 1.0)

    def _resize_mask(self, place_mask: NDArray[np.int8]) -> NDArray[np.int8]:
        """Legal resizes, shape (N, R) int8, given the placement masks ``place_mask`` (N, A_p)
        of the same refresh (see the module docstring)."""
        assert self.wl is not None
        ent = self._evictable()
        self._noplace = ~(place_mask[:, 1:] == 1).any(axis=1)  # no waiting job fits here
        m = (ent >= 0) & (self.node_up & self._noplace)[:, None]
        if not m.any():
            return m.astype(np.int8)
        a, wl = self._cur, self.wl
        tot, jtype, can = self._job_totals()
        e = np.where(m, ent, 0)
        job = a.job[e]
        G = tot[job].astype(np.int64)
        m &= can[job] & (2 * G <= wl.max_gpus[job])
        if m.any():
            m &= self.tm.isolated(wl.model[job], np.maximum(jtype[job], 0), 2 * G, False) > 0
        if not m.any():
            return m.astype(np.int8)
        node = np.broadcast_to(self._arange_n[:, None], e.shape)
        whole = np.bincount(a.job, minlength=self.J)[job] == 1  # one entry: not a gang
        own = whole & (self.free_g[node] >= G) & (self.free_c[node] >= a.cpus[e] - _TOL)
        own &= self.free_m[node] >= a.mem[e] - _TOL
        out = np.zeros(self.J, dtype=bool)
        cand = np.unique(job[m & ~own])
        if cand.size:
            room = self._outside_room(cand, self._per_gpu(cand)).sum(axis=1)
            out[cand] = room >= tot[cand]
        m &= own | out[job]
        return m.astype(np.int8)

    @property
    def any_resizable(self) -> bool:
        """Some agent has a legal resize (always False unless resizable)."""
        return self.cfg.resizable and bool(self.ma.mask[:, self.resize_offset :].any())

    def _resize(self, agents: NDArray[np.int64], slots: NDArray[np.int64]) -> int:
        """Double the jobs in ``slots`` of ``agents`` (legal, distinct agents, in agent order,
        one resize per job); jobs resized.

        The running entries are rebuilt (the simulator's allocation object is never written
        to); each node gives up the GPUs, cores and memory it adds.
        """
        cur = self._cur
        ents = self._evictable()[agents, slots]
        gpus, cpus, mem = cur.gpus.copy(), cur.cpus.copy(), cur.mem.copy()
        per_job = np.bincount(cur.job, minlength=self.J)
        add_j: list[int] = []
        add_n: list[int] = []
        add_g: list[int] = []
        done: set[int] = set()
        for e in ents.tolist():  # the step's resizes: a handful at most
            j, n = int(cur.job[e]), int(cur.node[e])
            if j in done:
                continue
            G = int(gpus[cur.job == j].sum())
            if (
                per_job[j] == 1
                and self.free_g[n] >= G
                and self.free_c[n] >= cpus[e] - _TOL
                and self.free_m[n] >= mem[e] - _TOL
            ):
                self.free_g[n] -= G
                self.free_c[n] -= cpus[e]
                self.free_m[n] -= mem[e]
                gpus[e] *= 2
                cpus[e] *= 2.0
                mem[e] *= 2.0
                done.add(j)
                continue
            jj = np.array([j])
            cpg, mpg = self._per_gpu(jj)
            cap = self._outside_room(jj, (cpg, mpg))[0]
            if add_n:  # nodes given to an earlier scale-out of this step
                cap[np.array(add_n)] = 0
            if cap.sum() < G:
                continue  # an earlier resize of this step took the room
            need = G
            for t in np.lexsort((np.arange(self.N), -cap)).tolist():
                if need <= 0 or cap[t] <= 0:
                    break
                take = min(int(cap[t]), need)
                add_j.append(j)
                add_n.append(t)
                add_g.append(take)
                self.free_g[t] -= take
                self.free_c[t] -= take * float(cpg[0])
                self.free_m[t] -= take * float(mpg[0])
                need -= take
            done.add(j)
        new = Allocation._of_arrays(cur.job, cur.node, gpus, cpus, mem, cur.share)
        if add_j:
            j_arr = np.array(add_j, dtype=np.int64)
            g_arr = np.array(add_g, dtype=np.int64)
            cpg, mpg = self._per_gpu(j_arr)
            extra = Allocation._of_arrays(
                j_arr, np.array(add_n, dtype=np.int64), g_arr, g_arr * cpg, g_arr * mpg,
                np.full(j_arr.size, -1, dtype=np.int64),
            )  # fmt: skip
            new = Allocation.concat([new, extra])
            self._count += np.bincount(extra.node, minlength=self.N)
            self._evict_map = None
        self._cur = new
        self._round_alloc = None
        return len(done)
