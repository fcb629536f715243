"""Heterogeneity-aware shortest-remaining-processing-time (SRPT): a clairvoyant reference.

At every arrival and completion, the active jobs are ranked by their estimated remaining time:
remaining work (``state.remaining``) divided by the job's isolated rate at its request on its
fastest allowed GPU type of the cluster. The shortest jobs whose requests fit in the cluster's
GPUs are selected (greedy, in rank order); a selected running job stays where it runs, and every
other selected job is placed on its fastest GPU type with room (then the next fastest, down to
``min_speed`` of its fastest rate; a job no such type has room for waits). Running
jobs that are not selected are preempted (a resumed job pays the engine's restart delay);
GPUs left over by fragmentation go to the next jobs in rank order (work conservation).

SRPT minimises mean completion time on one machine when remaining times are known; here it is
the reference for the value of clairvoyance: it reads the remaining work, so its results depend
on the information track (:mod:`hetsched.benchmark.info`: exact, noisy or none).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hetsched.baselines.base import BasePolicy, Placer, check_round_s
from hetsched.sim.allocation import Allocation
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimState
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload


@dataclass
class SRPTConf:
    """:class:`SRPT` (schema of ``conf/scheduler/srpt.yaml``)."""

    _target_: str = "hetsched.baselines.srpt.SRPT"
    round_s: float = 60.0
    preempt: bool = True
    min_speed: float = 0.25


class SRPT(BasePolicy):
    """Heterogeneity-aware SRPT, gang, preemptive (see the module docstring).

    Args:
        round_s: Round length in seconds.
        preempt: Preempt running jobs that rank below the selected ones (False: running jobs
            keep their GPUs and only waiting jobs are ranked).
        min_speed: A job starts only on GPU types that run it at least this fraction of its
            fastest type's rate (in (0, 1]); otherwise it waits for a faster type.
    """

    name = "srpt"
    event_driven = True

    def __init__(
        self, round_s: float = 60.0, preempt: bool = True, min_speed: float = 0.25
    ) -> None:
        if not 0 < min_speed <= 1:
            raise ValueError(f"srpt min_speed={min_speed!r} must be in (0, 1] (a rate fraction)")
        self.min_speed = float(min_speed)
        self.round_s = check_round_s(round_s, self.name)
        self.preempt = bool(preempt)
        self._rate = np.zeros((0, len(GPU_TYPE_NAMES)))

    def reset(
        self,
        cluster: Cluster,
        workload: Workload,
        throughput: ThroughputModel,
        rng: np.random.Generator,
    ) -> None:
        """Tabulate each job's isolated rate at its request on every allowed present type."""
        super().reset(cluster, workload, throughput, rng)
        types = np.arange(len(GPU_TYPE_NAMES))
        rate = throughput.isolated(
            workload.model[:, None], types[None, :], workload.req_gpus[:, None]
        )
        ok = workload.allowed_types & (cluster.gpus_per_type() > 0)[None, :]
        self._rate = np.where(ok, rate, 0.0)  # (J, T)

    def ranked(self, state: SimState) -> NDArray[np.int64]:
        """Active jobs, shortest estimated remaining time first (ties: arrival order)."""
        act = state.active
        best = self._rate[act].max(axis=1)
        est = np.where(best > 0, state.remaining[act] / np.where(best > 0, best, 1.0), np.inf)
        return act[np.lexsort((act, est))]

    def decide(self, state: SimState) -> Allocation:
        """Select the shortest jobs that fit; keep selected running jobs in place."""
        if self._rate.shape[0] != state.workload.num_jobs:
            self.reset(state.cluster, state.workload, state.throughput, np.random.default_rng(0))
        if state.active.size == 0:
            return Allocation.empty()
        req = state.workload.req_gpus
        if self.preempt:
            order = self.ranked(state)
            cap = int(np.where(state.node_up, state.cluster.node_gpus, 0).sum())
            keep_gpus = np.cumsum(req[order])
            chosen = order[keep_gpus <= cap]
            keep = state.current.for_jobs(chosen)
            rest = order[keep_gpus > cap]
        else:
            keep = state.current
            order = self.ranked(state)
            chosen = order[state.status[order] != 2]
            rest = order[:0]
        placer = Placer(state, keep=keep)
        for j in np.concatenate([chosen, rest]).tolist():
            if placer.total_free == 0:
                break
            if j in placer.placed or placer.keep_current(j):
                continue
            self._place_fastest(placer, j, int(req[j]))
        return placer.allocation()

    def _place_fastest(self, placer: Placer, j: int, n: int) -> bool:
        """Place job ``j`` on the fastest GPU type with room for ``n`` GPUs."""
        rate = self._rate[j]
        floor = self.min_speed * rate.max()
        for k in np.argsort(-rate, kind="stable").tolist():
            if rate[k] <= 0 or rate[k] < floor:
                break
            mask = np.zeros(rate.shape[0], dtype=bool)
            mask[k] = True
            if placer.place(j, n, types=mask):
                return True
        return False
