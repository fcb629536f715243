"""Progress rates and placement signatures (a mixin of :class:`~hetsched.sim.engine.Simulator`).

A running job's rate (work units/s) is its isolated throughput on its GPU type and gang size
(:class:`~hetsched.sim.throughput.ThroughputModel`) times its CPU/memory factor times the
interference of its node co-runners and GPU-sharing partner; a gang spread over nodes or GPU
types runs at its slowest entry's rate. Everything is vectorised over allocation entries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.allocation import Allocation

if TYPE_CHECKING:
    from hetsched.sim.cluster import Cluster
    from hetsched.sim.throughput import ThroughputModel
    from hetsched.sim.workload import Workload

_SIG_A = np.uint64(0x9E3779B97F4A7C15)
_SIG_B = np.uint64(0xC2B2AE3D27D4EB4F)


def _entry_hash(node: NDArray[np.uint64], gpus: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """Hash of an allocation entry's (node, GPU count) (arrays broadcast; wraps modulo 2^64)."""
    with np.errstate(over="ignore"):
        h = ((node + np.uint64(1)) * _SIG_A) ^ ((gpus + np.uint64(7)) * _SIG_B)
        return np.asarray(h * _SIG_A + np.uint64(1), dtype=np.uint64)


def _sum_by(job: NDArray[np.int64], x: NDArray[Any], J: int) -> NDArray[np.float64]:
    """Per entry: the sum of ``x`` over the entries of its job (float64), shape (E,)."""
    return np.asarray(np.bincount(job, weights=x, minlength=J), dtype=np.float64)[job]


@dataclass
class JobGroups:
    """The entries of an allocation grouped by job (see :func:`group_by_job`).

    Attributes:
        jobs: The distinct jobs, ascending, shape (R,).
        order: Entry indices sorted by job (stable), shape (E,).
        starts: First position in ``order`` of each job's entries, shape (R,); None when every
            job has one entry (then ``order`` maps job rows to entries one to one).
        row: Each entry's row in ``jobs``, shape (E,).
    """

    jobs: NDArray[np.int64]
    order: NDArray[np.int64]
    starts: NDArray[np.int64] | None
    row: NDArray[np.int64]


def group_by_job(a: Allocation) -> JobGroups:
    """Group the entries of a non-empty allocation by job (a few array calls, no (J,) arrays)."""
    order = np.argsort(a.job, kind="stable")
    js = a.job[order]
    if js.shape[0] < 2:
        return JobGroups(js, order, None, np.zeros(js.shape[0], dtype=np.int64))
    new = js[1:] != js[:-1]
    if new.all():
        return JobGroups(js, order, None, np.searchsorted(js, a.job))
    starts = np.concatenate(([0], np.flatnonzero(new) + 1))
    jobs = js[starts]
    return JobGroups(jobs, order, starts, np.searchsorted(jobs, a.job))


def job_layout(
    a: Allocation,
    node_gpus: NDArray[np.int64],
    num_jobs: int,
    one_per_job: bool = False,
    groups: JobGroups | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.bool_] | np.bool_]:
    """Per entry of ``a``: the job's total GPUs and whether the job is spread over more nodes
    than its GPUs need (the engine's rating of a gang), each shape (E,).

    Args:
        a: The allocation.
        node_gpus: GPUs per node of the cluster, shape (N,).
        num_jobs: Jobs of the workload (J; ``a.job`` indexes them).
        one_per_job: Every job of ``a`` has one entry: the spread flag is one scalar False
            (it broadcasts).
        groups: :func:`group_by_job` of ``a``; when given, the same integers come from per-job
            reductions over the sorted entries instead of (J,) arrays.
    """
    if one_per_job:  # a job on one node is never spread
        return a.gpus, np.False_
    if groups is not None and groups.starts is not None:
        o, st, row = groups.order, groups.starts, groups.row
        total = np.add.reduceat(a.gpus[o], st)
        n_nodes = np.diff(st, append=a.size)
        biggest = np.maximum.reduceat(node_gpus[a.node[o]], st)
    else:
        row = a.job
        total = np.bincount(a.job, weights=a.gpus, minlength=num_jobs).astype(np.int64)
        n_nodes = np.bincount(a.job, minlength=num_jobs)
        biggest = np.zeros(num_jobs, dtype=np.int64)
        np.maximum.at(biggest, a.job, node_gpus[a.node])
    need = -(-total // np.maximum(biggest, 1))
    spread = n_nodes > need
    return total[row], spread[row]


class RateModel:
    """Per-entry and per-job progress rates of an allocation (mixin).

    Needs the simulator's ``workload``, ``cluster``, ``tm``, ``_speed``, ``_keep_by_count`` and
    ``_sig_table``.
    """

    workload: Workload
    cluster: Cluster
    tm: ThroughputModel
    _speed: NDArray[np.float64] | None
    _keep_by_count: NDArray[np.float64]
    _sig_table: NDArray[np.uint64]

    def _one_per_job(self, a: Allocation) -> bool:
        """Every job of ``a`` has exactly one entry (one node): per-job totals are per entry."""
        return a.size > 0 and int(np.bincount(a.job).max()) == 1

    def _job_layout(
        self, a: Allocation, one_per_job: bool = False, groups: JobGroups | None = None
    ) -> tuple[NDArray[np.int64], NDArray[np.bool_] | np.bool_]:
        """:func:`job_layout` of ``a`` on the simulator's cluster and workload."""
        return job_layout(a, self.cluster.node_gpus, self.workload.num_jobs, one_per_job, groups)

    def _entry_base_rate(
        self,
        a: Allocation,
        one_per_job: bool = False,
        model: NDArray[np.int64] | None = None,
        groups: JobGroups | None = None,
    ) -> NDArray[np.float64]:
        total, spread = self._job_layout(a, one_per_job, groups)
        k = self.cluster.node_type[a.node]
        m = self.workload.model[a.job] if model is None else model
        base = self.tm.isolated(m, k, total, spread)
        if self._speed is not None:  # nodes of a GPU type defined relative to its base type
            base = base * self._speed[m, self.cluster.node_variant[a.node] + 1]
        return base

    def _resource_ratios(
        self, a: Allocation, one_per_job: bool = False
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Per entry: the job's CPU and memory given over requested (per GPU)."""
        wl = self.workload
        if one_per_job:  # the job's totals are its entry's values
            g, c, m = a.gpus.astype(np.float64), a.cpus, a.mem
        else:
            J = wl.num_jobs
            g = _sum_by(a.job, a.gpus, J)
            c = _sum_by(a.job, a.cpus, J)
            m = _sum_by(a.job, a.mem, J)
        gj = np.maximum(g, 1.0)
        return c / (gj * wl.cpu_per_gpu[a.job]), m / (gj * wl.mem_per_gpu[a.job])

    def _interference(self, a: Allocation) -> NDArray[np.float64]:
        """Per-entry slowdown factor in (0, 1] from node co-runners and GPU sharing."""
        N = self.cluster.num_nodes
        per_node = np.bincount(a.node, minlength=N)
        try:  # (1 - node_iota) ** (co-located entries - 1), tabulated by entry count
            factor = self._keep_by_count[per_node[a.node]]
        except IndexError:  # more entries on a node than the table holds: extend it
            self._keep_by_count = self.tm.node_keep_by_count(int(per_node.max()) + 1)
            factor = self._keep_by_count[per_node[a.node]]
        if int(a.share.max()) >= 0:  # some entries share GPUs
            sh = np.flatnonzero(a.share >= 0)
            key = a.node[sh] * (int(a.share[sh].max()) + 1) + a.share[sh]
            order = np.argsort(key, kind="stable")
            ks = key[order]
            same = np.flatnonzero(ks[1:] == ks[:-1])
            if same.size:
                e1, e2 = sh[order[same]], sh[order[same + 1]]
                k = self.cluster.node_type[a.node[e1]]
                m1, m2 = self.workload.model[a.job[e1]], self.workload.model[a.job[e2]]
                # Sharing partners are not "node co-runners" twice: undo one node term.
                undo = 1.0 / (1.0 - self.tm.node_iota)
                factor[e1] *= (1.0 - self.tm.pair_iota[m1, m2, k]) * undo
                factor[e2] *= (1.0 - self.tm.pair_iota[m2, m1, k]) * undo
        return np.minimum(factor, 1.0)

    def _entry_rates(
        self, a: Allocation, one_per_job: bool, groups: JobGroups | None = None
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Per entry: the progress rate (work units/s) and the isolated rate, shape (E,) each."""
        model = self.workload.model[a.job]
        base = self._entry_base_rate(a, one_per_job, model, groups)
        cpu_ratio, mem_ratio = self._resource_ratios(a, one_per_job)
        phi = self.tm.phi(model, cpu_ratio, mem_ratio)
        return base * phi * self._interference(a), base

    def job_rates(
        self, a: Allocation, one_per_job: bool | None = None
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Progress rate per job (work units/s) and isolated rate, both shape (J,).

        The isolated rate excludes interference and the CPU/memory factor (for effective
        utilisation). A job on several nodes runs at its slowest entry's rate.

        Args:
            a: The allocation.
            one_per_job: Whether every job has one entry (computed when None); then the per-job
                reductions are skipped (same numbers).
        """
        J = self.workload.num_jobs
        if a.size == 0:
            return np.zeros(J), np.zeros(J)
        one = self._one_per_job(a) if one_per_job is None else one_per_job
        entry_rate, base = self._entry_rates(a, one)
        if one:
            rate, iso = np.zeros(J), np.zeros(J)
            rate[a.job] = entry_rate
            iso[a.job] = base
            return rate, iso
        rate, iso = np.full(J, np.inf), np.full(J, np.inf)
        np.minimum.at(rate, a.job, entry_rate)
        np.minimum.at(iso, a.job, base)
        rate[~np.isfinite(rate)] = 0.0
        iso[~np.isfinite(iso)] = 0.0
        return rate, iso

    def running_rates(
        self, g: JobGroups, a: Allocation
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64], NDArray[np.uint64]]:
        """Per running job (``g.jobs`` order): rate, isolated rate, GPUs and placement hash.

        The same numbers as :meth:`job_rates`, :meth:`Allocation.gpus_per_job` and
        :meth:`_signature` at ``g.jobs``, computed over the allocation's entries only.

        Returns:
            ``(rate, iso, gpus, sig)``, each shape (R,) (float64, float64, int64, uint64).
        """
        entry_rate, base = self._entry_rates(a, g.starts is None, g)
        h = self._entry_hashes(a)
        if g.starts is None:  # one entry per job: reorder the entries into job order
            o = g.order
            return entry_rate[o], base[o], a.gpus[o], h[o]
        o, st = g.order, g.starts
        rate = np.minimum.reduceat(entry_rate[o], st)
        iso = np.minimum.reduceat(base[o], st)
        rate[~np.isfinite(rate)] = 0.0
        iso[~np.isfinite(iso)] = 0.0
        with np.errstate(over="ignore"):  # the hash sum wraps modulo 2^64
            sig = np.add.reduceat(h[o], st)
        return rate, iso, np.add.reduceat(a.gpus[o], st), sig

    # ------------------------------------------------------------------ stepping
    def _entry_hashes(self, a: Allocation) -> NDArray[np.uint64]:
        """Hash of each entry's (node, GPUs), shape (E,)."""
        tab = self._sig_table
        if int(a.gpus.max()) < tab.shape[1] and int(a.gpus.min()) >= 0:
            return np.asarray(tab[a.node, a.gpus])  # the same hashes, precomputed
        return _entry_hash(a.node.astype(np.uint64), a.gpus.astype(np.uint64))

    def _signature(self, a: Allocation, one_per_job: bool = False) -> NDArray[np.uint64]:
        """Per-job hash of its (node, GPUs) entries, shape (J,) (0 for jobs not placed)."""
        J = self.workload.num_jobs
        if a.size == 0:
            return np.zeros(J, dtype=np.uint64)
        h = self._entry_hashes(a)
        # Sum modulo 2^64 is order independent.
        sig = np.zeros(J, dtype=np.uint64)
        if one_per_job:
            sig[a.job] = h  # one entry per job: the sum is the entry's hash
        else:
            np.add.at(sig, a.job, h)
        return sig
