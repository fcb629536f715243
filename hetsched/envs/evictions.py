"""Evictions of running jobs by agents (a mixin of :class:`~hetsched.envs.core.EnvCore`).

Only with ``EnvSettings.preemptive``; the rules are documented in :mod:`hetsched.envs.core`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from hetsched.envs.core_state import CoreState
from hetsched.sim.allocation import Allocation


def slot_ranks(
    nodes: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Resident-slot order of allocation entries: ``(order, node, rank)``, each shape (E,).

    ``order`` sorts the entries by node, stably (a node's entries keep their allocation
    order); ``node`` and ``rank`` are each sorted entry's node and its index among that
    node's entries, i.e. its resident slot when ``rank < R``.
    """
    order = np.argsort(nodes, kind="stable")
    ns = nodes[order]
    return order, ns, np.arange(ns.shape[0]) - np.searchsorted(ns, ns, side="left")


class MoveTargets(NamedTuple):
    """Where running jobs could move (:meth:`EvictionRules.move_targets`); S candidates.

    Attributes:
        node: Node of each candidate's resident slot, shape (S,).
        slot: The resident slot, shape (S,).
        job: The job, shape (S,).
        ok: Nodes it could move to now, shape (S, N).
        here: Its isolated throughput on its own node's GPU type at its GPUs, shape (S,).
        there: The same on every node's type, shape (S, N).
        pooled: Where the move is to several nodes of that node's type together
            (``EnvSettings.migrate_multinode``), shape (S, N); None: no such moves.
    """

    node: NDArray[np.int64]
    slot: NDArray[np.int64]
    job: NDArray[np.int64]
    ok: NDArray[np.bool_]
    here: NDArray[np.float64]
    there: NDArray[np.float64]
    pooled: NDArray[np.bool_] | None = None


class EvictionRules(CoreState):
    """Resident slots, legal evictions and their effect on the round."""

    def _evictable(self) -> NDArray[np.int64]:
        """Entry of :attr:`_cur` in each resident slot, shape (N, R); -1 where none.

        Slots follow the observation's order (:meth:`_resident`): a node's running entries in
        allocation order come first, so slot ``r < R`` of node ``i`` is its ``r``-th entry.
        """
        if self._evict_map is None:
            R = self.cfg.resident_slots
            out = np.full((self.N, R), -1, dtype=np.int64)
            cur = self._cur
            if cur.size:
                order, ns, rank = slot_ranks(cur.node)
                keep = rank < R
                out[ns[keep], rank[keep]] = order[keep]
            self._evict_map = out
        return self._evict_map

    def running(self) -> Allocation:
        """Entries of the jobs that were running before this round and still hold resources."""
        return self._cur

    def resident_entries(self) -> NDArray[np.int64]:
        """Entry of :meth:`running` that each eviction action ``n_place + r`` of each agent
        would take off, shape (N, R); -1 where the slot is empty."""
        return self._evictable()

    def _evict_mask(self) -> NDArray[np.int8]:
        """Legal evictions, shape (N, R) int8 (see the module docstring)."""
        ent = self._evictable()
        m = ent >= 0
        m &= self.node_up[:, None]
        cap, prot = self.cfg.evict_max, self.evict_protected
        if (cap is not None or prot is not None) and m.any():
            job = self._cur.job[np.where(m, ent, 0)]  # (N, R) the job in each slot
            if cap is not None:  # the job's allowance is spent
                m &= self._evicted_n[job] < cap
            if prot is not None:  # protected by whoever acts through the core
                if prot.shape != (self.J,):
                    raise ValueError(
                        f"evict_protected has shape {prot.shape}; it must be ({self.J},), one "
                        "flag per job of the episode's workload"
                    )
                m &= ~prot[job]
        if not self.slot_ok.any():  # nothing waits: an eviction could only idle GPUs ...
            if self.cfg.migrate_speedup is None or not m.any():
                m[:] = False
            else:  # ... unless the job can move to a faster node
                mv = self.move_targets(m)
                m[:] = False
                m[mv.node, mv.slot] = mv.ok.any(axis=1)
        return m.astype(np.int8)

    def move_targets(
        self, slots: NDArray[np.bool_], pool: NDArray[np.bool_] | None = None
    ) -> MoveTargets:
        """Where the jobs in resident ``slots`` (N, R bool) could move now (migrations).

        Only one-entry jobs are considered, unless ``EnvSettings.migrate_gangs``: then a job
        on several nodes (a gang) is considered too, with the GPUs, cores and memory it holds
        in total and its throughput as placed (spread or not). A job could move to another
        node that is up, has the GPUs, cores and memory the job holds free, is of a GPU type
        the job allows, and runs it alone (isolated throughput at its GPU count) at least
        ``migrate_speedup`` times as fast as where it runs now. With
        ``EnvSettings.migrate_elastic`` an elastic job is considered at the GPU count each
        node could give it (:meth:`_elastic_targets`).
        """
        assert self.wl is not None and self.cfg.migrate_speedup is not None
        a, wl = self._cur, self.wl
        ns, rs = np.nonzero(slots)
        e = self._evictable()[ns, rs]
        count = np.bincount(a.job, minlength=self.J)
        keep = e >= 0
        if not self.cfg.migrate_gangs:
            keep &= count[a.job[np.where(keep, e, 0)]] == 1
        ns, rs, e = ns[keep], rs[keep], e[keep]
        job = a.job[e]
        spread: NDArray[np.bool_] | bool = False
        g: NDArray[np.int64] = a.gpus[e]
        cpus: NDArray[np.float64] = a.cpus[e]
        mem: NDArray[np.float64] = a.mem[e]
        if self.cfg.migrate_gangs:  # what the job holds on all its nodes together
            g = np.bincount(a.job, weights=a.gpus, minlength=self.J)[job].astype(np.int64)
            per_job = (
                np.bincount(a.job, weights=a.cpus, minlength=self.J),
                np.bincount(a.job, weights=a.mem, minlength=self.J),
            )
            cpus = np.asarray(per_job[0][job], dtype=np.float64)
            mem = np.asarray(per_job[1][job], dtype=np.float64)
            big = np.zeros(self.J, dtype=np.int64)  # the largest node each job runs on
            np.maximum.at(big, a.job, self.cluster.node_gpus[a.node])
            spread = count[job] > -(-g // np.maximum(big[job], 1))  # claims.is_spread, per job
        nt = self.cluster.node_type
        here = self.tm.isolated(wl.model[job], nt[ns], g, spread)  # (S,)
        there = self.tm.isolated(wl.model[job][:, None], nt[None, :], g[:, None], False)
        fits = (
            (self.free_g[None, :] >= g[:, None])
            & (self.free_c[None, :] >= cpus[:, None] - 1e-9)
            & (self.free_m[None, :] >= mem[:, None] - 1e-9)
        )  # (S, N) the node hosts the job as it holds now
        if self.cfg.migrate_elastic:
            fits, there = self._elastic_targets(job, g, cpus, mem, fits, there)
        pooled = None
        if self.cfg.migrate_multinode:
            pool = np.ones(self.N, dtype=bool) if pool is None else pool
            fits, there, pooled = self._pooled_targets(job, g, cpus, mem, fits, there, pool)
        ok = (
            self.node_up[None, :]
            & fits
            & wl.allowed_types[job][:, nt]
            & (there >= self.cfg.migrate_speedup * here[:, None])
            & (here[:, None] > 0)
        )  # (S, N)
        return MoveTargets(ns, rs, job, ok, here, there, pooled)

    def _pooled_targets(
        self,
        job: NDArray[np.int64],
        g: NDArray[np.int64],
        cpus: NDArray[np.float64],
        mem: NDArray[np.float64],
        fits: NDArray[np.bool_],
        there: NDArray[np.float64],
        pool: NDArray[np.bool_],
    ) -> tuple[NDArray[np.bool_], NDArray[np.float64], NDArray[np.bool_]]:
        """``EnvSettings.migrate_multinode``: gangs too large for one node of a GPU type, on
        several nodes of it.

        For each GPU type (a handful; the loop is over types, not jobs), the nodes of that type
        in ``pool`` that are up with a free GPU host a candidate whose GPUs exceed that type's
        largest node when their free GPUs, cores and memory together cover what it holds. Its
        throughput there is the isolated one at its GPUs on the fewest of those nodes that hold
        its GPUs (spread where that is more nodes than it needs at full nodes). Every node of
        the set is marked as a target, ``pooled``.

        Args:
            job: Each candidate's job, shape (S,).
            g: GPUs each candidate's job holds, shape (S,).
            cpus: Cores it holds, shape (S,).
            mem: Memory it holds (GiB), shape (S,).
            fits: One-node targets, shape (S, N); the set's nodes are marked in place.
            there: Isolated throughput on each node, shape (S, N); set in place there.
            pool: Nodes that may take part, shape (N,).

        Returns:
            ``(fits, there, pooled)``, each shape (S, N).
        """
        assert self.wl is not None
        nt, ng = self.cluster.node_type, self.cluster.node_gpus
        pooled = np.zeros_like(fits)
        for k in np.unique(nt).tolist():
            size = int(ng[nt == k].max())
            on = pool & self.node_up & (nt == k) & (self.free_g > 0)
            big = g > size
            if not (on.any() and big.any()):
                continue
            cum = np.cumsum(np.sort(self.free_g[on])[::-1])  # free GPUs of the n emptiest nodes
            n_need = np.searchsorted(cum, g) + 1  # (S,) nodes that hold g; > len: too few
            ok = (
                big
                & (n_need <= cum.size)
                & (self.free_c[on].sum() >= cpus - 1e-9)
                & (self.free_m[on].sum() >= mem - 1e-9)
            )
            if not ok.any():
                continue
            spread = n_need > -(-g // size)
            tput = self.tm.isolated(self.wl.model[job], k, g, spread)  # (S,)
            rows, cols = np.flatnonzero(ok), np.flatnonzero(on)
            fits[np.ix_(rows, cols)] = True
            there[np.ix_(rows, cols)] = tput[rows, None]
            pooled[np.ix_(rows, cols)] = True
        return fits, there, pooled

    def _elastic_targets(
        self,
        job: NDArray[np.int64],
        g: NDArray[np.int64],
        cpus: NDArray[np.float64],
        mem: NDArray[np.float64],
        fits: NDArray[np.bool_],
        there: NDArray[np.float64],
    ) -> tuple[NDArray[np.bool_], NDArray[np.float64]]:
        """``EnvSettings.migrate_elastic``: elastic candidates at the GPU count each node gives.

        For a candidate whose job is elastic, its count on node ``n`` is the largest count of
        its legal GPU levels (the counts the agents can claim it at) that ``n``'s free GPUs,
        and its free cores and memory at the job's cores and memory per GPU as held, allow;
        the node fits when there is one. Rigid candidates keep ``fits`` and ``there``.

        Args:
            job: Each candidate's job, shape (S,).
            g: GPUs each candidate's job holds, shape (S,).
            cpus: Cores it holds, shape (S,).
            mem: Memory it holds (GiB), shape (S,).
            fits: Nodes that host the job as it holds now, shape (S, N).
            there: Isolated throughput on each node at ``g``, shape (S, N).

        Returns:
            ``(fits, there)`` with the elastic candidates' rows at their counts, shape (S, N).
        """
        assert self.wl is not None and self.jt is not None
        wl = self.wl
        el = wl.max_gpus[job] > wl.min_gpus[job]
        if not el.any():
            return fits, there
        room = self.free_g[None, :].astype(np.float64)  # (S, N) GPUs each node could give
        for held, free in ((cpus, self.free_c), (mem, self.free_m)):  # at the job's per-GPU share
            per = (held / np.maximum(g, 1))[:, None]  # (S, 1)
            room = np.minimum(room, np.where(per > 0, (free + 1e-9) / np.maximum(per, 1e-12), room))
        cnt = self.jt.gpu_count[job]  # (S, L) the counts of the job's GPU levels
        usable = self.jt.level_ok[job][:, None, :] & (cnt[:, None, :] <= room[:, :, None])
        count = np.where(usable, cnt[:, None, :], 0).max(axis=2)  # (S, N); 0: none fits
        there_el = self.tm.isolated(
            wl.model[job][:, None], self.cluster.node_type[None, :], np.maximum(count, 1), False
        )
        return (
            np.where(el[:, None], count > 0, fits),
            np.where(el[:, None], there_el, there),
        )

    @property
    def evictions(self) -> NDArray[np.int64]:
        """Times each job was taken off by an eviction action this episode, shape (J,)
        (a read-only view; all zero unless preemptive)."""
        v = self._evicted_n.view()
        v.flags.writeable = False
        return v

    @property
    def any_evictable(self) -> bool:
        """Some agent has a legal eviction (always False unless preemptive)."""
        end = self.n_place + self.cfg.resident_slots
        return self.cfg.preemptive and bool(self.ma.mask[:, self.n_place : end].any())

    @property
    def any_action(self) -> bool:
        """Some agent has a legal placement, eviction or resize."""
        if self.any_legal:
            return True
        return self.n_actions > self.n_place and bool(self.ma.mask[:, self.n_place :].any())

    def release_entries(self, drop: NDArray[np.bool_]) -> Allocation:
        """Take the entries ``drop`` (a mask over :attr:`_cur`) off this round; free their
        resources. Does not touch the waiting queue or the masks.

        Returns:
            The dropped entries.
        """
        cur = self._cur
        gone = cur.select(drop)
        self._cur = cur.select(~drop)
        self._round_alloc = None
        self._evict_map = None
        N = self.N
        self.free_g += np.bincount(gone.node, weights=gone.gpus, minlength=N).astype(np.int64)
        self.free_c += np.bincount(gone.node, weights=gone.cpus, minlength=N)
        self.free_m += np.bincount(gone.node, weights=gone.mem, minlength=N)
        self._count -= np.bincount(gone.node, minlength=N)
        self._n_cur_jobs -= len(set(gone.job.tolist()))
        return gone

    def _evict(self, agents: NDArray[np.int64], slots: NDArray[np.int64]) -> int:
        """Evict the jobs in ``slots`` of ``agents`` (legal, distinct agents); jobs evicted."""
        entries = self._evictable()[agents, slots]
        jobs = np.unique(self._cur.job[entries])
        self._evicted_n[jobs] += 1
        self.evicted_this_round[jobs] = True
        self.release_entries(np.isin(self._cur.job, jobs))
        pend = np.concatenate([self.pending, jobs])
        self.pending = self._in_window_order(np.sort(pend))
        return int(jobs.size)
