"""Allocation checks of the engine (a mixin of :class:`~hetsched.sim.engine.Simulator`).

:meth:`AllocationChecks.validate` raises :class:`~hetsched.sim.errors.AllocationError` naming the
job and node of the first violation: an unknown or finished job, an unknown or failed node,
invalid amounts, duplicate entries, over-allocation, a GPU-type constraint, a gang size outside
the job's range, a placement with zero throughput, memory below the floor, or an invalid
space-sharing group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.allocation import Allocation
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.errors import AllocationError
from hetsched.sim.state import FUTURE, PENDING, RUNNING

if TYPE_CHECKING:
    from hetsched.sim.cluster import Cluster
    from hetsched.sim.rates import JobGroups
    from hetsched.sim.throughput import ThroughputModel
    from hetsched.sim.workload import Workload


class AllocationChecks:
    """Validation of an allocation against the simulator's state (mixin).

    Needs the simulator's ``workload``, ``cluster``, ``tm``, ``status``, ``time`` and
    ``node_up``, and the rate helpers ``_entry_base_rate`` and ``_resource_ratios``.
    """

    workload: Workload
    cluster: Cluster
    tm: ThroughputModel
    status: NDArray[np.int8]
    time: float
    node_up: NDArray[np.bool_]

    if TYPE_CHECKING:  # provided by hetsched.sim.rates.RateModel

        def _entry_base_rate(
            self,
            a: Allocation,
            one_per_job: bool = False,
            model: NDArray[np.int64] | None = None,
            groups: JobGroups | None = None,
        ) -> NDArray[np.float64]: ...

        def _resource_ratios(
            self, a: Allocation, one_per_job: bool = False
        ) -> tuple[NDArray[np.float64], NDArray[np.float64]]: ...

    def validate(self, alloc: Allocation) -> None:
        """Raise :class:`AllocationError` if ``alloc`` cannot be applied now."""
        wl, cl = self.workload, self.cluster
        J, N = wl.num_jobs, cl.num_nodes
        if alloc.size == 0:
            return
        a = alloc
        if np.any((a.job < 0) | (a.job >= J)):
            bad = int(a.job[(a.job < 0) | (a.job >= J)][0])
            raise AllocationError(
                f"allocation names unknown job index {bad} (workload has {J} jobs)"
            )
        if np.any((a.node < 0) | (a.node >= N)):
            bad = int(a.node[(a.node < 0) | (a.node >= N)][0])
            raise AllocationError(f"allocation names unknown node {bad} (cluster has {N} nodes)")
        st = self.status[a.job]
        if np.any((st != PENDING) & (st != RUNNING)):
            j = int(a.job[(st != PENDING) & (st != RUNNING)][0])
            what = "has not arrived yet" if self.status[j] == FUTURE else "has already finished"
            raise AllocationError(
                f"job {str(wl.job_id[j])!r} (index {j}) {what} at t={self.time:.0f}s"
            )
        for name in ("gpus", "cpus", "mem"):
            v = getattr(a, name)
            bad = ~np.isfinite(v) | (v < (1 if name == "gpus" else 0))
            if bad.any():
                e = int(np.flatnonzero(bad)[0])
                raise AllocationError(
                    f"job {str(wl.job_id[a.job[e]])!r} on node {a.node[e]}: {name}={v[e]} is invalid"
                )
        key = a.job * N + a.node
        uniq, counts = np.unique(key, return_counts=True)
        if np.any(counts > 1):
            dup = int(uniq[counts > 1][0])
            raise AllocationError(
                f"job {str(wl.job_id[dup // N])!r} has several entries on node {dup % N}; merge them"
            )
        down = ~self.node_up[a.node]
        if down.any():
            e = int(np.flatnonzero(down)[0])
            raise AllocationError(
                f"job {str(wl.job_id[a.job[e]])!r} placed on node {a.node[e]}, which is down "
                f"(failed) at t={self.time:.0f}s; use only nodes with SimState.node_up"
            )
        self._validate_sharing(a)
        used = a.used_gpus_per_node(N)
        over = np.flatnonzero(used > cl.node_gpus)
        if over.size:
            n = int(over[0])
            jobs = [str(wl.job_id[j]) for j in a.job[a.node == n]]
            raise AllocationError(
                f"node {n} over-allocated: {used[n]} GPUs assigned, {cl.node_gpus[n]} available "
                f"(jobs {jobs})"
            )
        for name, cap in (("cpus", cl.node_cpus), ("mem", cl.node_mem)):
            u = np.bincount(a.node, weights=getattr(a, name), minlength=N)
            over = np.flatnonzero(u > cap * (1 + 1e-9) + 1e-9)
            if over.size:
                n = int(over[0])
                jobs = [str(wl.job_id[j]) for j in a.job[a.node == n]]
                unit = "cores" if name == "cpus" else "GiB"
                raise AllocationError(
                    f"node {n} over-allocated: {u[n]:.2f} {unit} of {name} assigned, "
                    f"{cap[n]:.2f} available (jobs {jobs})"
                )
        gtype = cl.node_type[a.node]
        if not np.all(wl.allowed_types[a.job, gtype]):
            e = int(np.flatnonzero(~wl.allowed_types[a.job, gtype])[0])
            raise AllocationError(
                f"job {str(wl.job_id[a.job[e]])!r} may not run on GPU type {GPU_TYPE_NAMES[gtype[e]]} "
                f"(node {a.node[e]}): the trace constrains its GPU types"
            )
        total = np.bincount(a.job, weights=a.gpus, minlength=J).astype(np.int64)[a.job]
        lo, hi = wl.min_gpus[a.job], wl.max_gpus[a.job]
        out_of_range = (total < lo) | (total > hi)
        if out_of_range.any():
            e = int(np.flatnonzero(out_of_range)[0])
            j = int(a.job[e])
            raise AllocationError(
                f"job {str(wl.job_id[j])!r} given {total[e]} GPUs; it runs on {lo[e]}..{hi[e]} GPUs"
            )
        base = self._entry_base_rate(a)
        if np.any(base <= 0):
            e = int(np.flatnonzero(base <= 0)[0])
            j = int(a.job[e])
            n_nodes = int(np.sum(a.job == j))
            raise AllocationError(
                f"job {str(wl.job_id[j])!r} (model {self.tm.models[wl.model[j]]!r}) cannot run as a "
                f"gang of {total[e]} GPUs over {n_nodes} node(s) with GPU type index {gtype[e]}: "
                "its throughput there is 0 (a non-distributed model split over GPUs, or an "
                "unmeasured spread placement)"
            )
        cpu_ratio, mem_ratio = self._resource_ratios(a)
        phi = self.tm.phi(wl.model[a.job], cpu_ratio, mem_ratio)
        if np.any(phi <= 0):
            e = int(np.flatnonzero(phi <= 0)[0])
            raise AllocationError(
                f"job {str(wl.job_id[a.job[e]])!r} given {mem_ratio[e]:.2f}x its requested memory, "
                f"below the floor of {self.tm.mem_floor}x at which it can run"
            )

    def _validate_sharing(self, a: Allocation) -> None:
        sh = np.flatnonzero(a.share >= 0)
        if sh.size == 0:
            return
        wl = self.workload
        key = a.node[sh] * (int(a.share[sh].max()) + 1) + a.share[sh]
        order = np.argsort(key, kind="stable")
        k_sorted = key[order]
        uniq, start, counts = np.unique(k_sorted, return_index=True, return_counts=True)
        if np.any(counts > 2):
            e = sh[order[start[counts > 2][0]]]
            raise AllocationError(
                f"share group {a.share[e]} on node {a.node[e]} holds more than two jobs"
            )
        pairs = start[counts == 2]
        if pairs.size:
            e1, e2 = sh[order[pairs]], sh[order[pairs + 1]]
            bad = a.gpus[e1] != a.gpus[e2]
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise AllocationError(
                    f"jobs {str(wl.job_id[a.job[e1[i]]])!r} and {str(wl.job_id[a.job[e2[i]]])!r} share GPUs "
                    f"on node {a.node[e1[i]]} with unequal GPU counts"
                )
            k = self.cluster.node_type[a.node[e1]]
            ok = self.tm.colocatable(wl.model[a.job[e1]], wl.model[a.job[e2]], k)
            if not ok.all():
                i = int(np.flatnonzero(~ok)[0])
                raise AllocationError(
                    f"jobs {str(wl.job_id[a.job[e1[i]]])!r} and {str(wl.job_id[a.job[e2[i]]])!r} cannot "
                    f"share GPUs on node {a.node[e1[i]]} (pair not co-locatable per the data)"
                )
