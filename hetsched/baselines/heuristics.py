"""Simple, heterogeneity-agnostic schedulers: FIFO, YARN capacity scheduler, Tiresias-like LAS.

* :class:`FIFO` -- jobs in arrival order, gang-scheduled on their requested GPUs, never
  preempted; strict head-of-line blocking by default (``backfill=True`` lets later jobs pass a
  blocked head). GPU type is ignored (any type the job may use).
* :class:`YarnCS` -- a YARN capacity-scheduler-like FIFO with per-queue shares (Hadar's
  production baseline): jobs are FIFO within their queue (Philly virtual cluster); the next job is
  taken from the queue furthest below its guaranteed share; a queue may use idle capacity beyond
  its share (elastic capacity); no preemption.
* :class:`LAS` -- Tiresias-like discretised least-attained-service (2D-LAS): attained service is
  GPU-time; jobs are ranked by their priority queue (thresholds in GPU-hours), then by arrival;
  every round the highest-ranked jobs that fit run, others are preempted (a preempted job pays a
  restart when it resumes). Heterogeneity-agnostic: GPU-time on any type counts the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from hetsched.baselines.base import BasePolicy, Placer, check_round_s
from hetsched.sim.allocation import Allocation
from hetsched.sim.engine import SimState
from hetsched.sim.errors import SettingError


class FIFO(BasePolicy):
    """First-in-first-out, gang, non-preemptive, heterogeneity-agnostic.

    Args:
        backfill: Let later jobs start when the head of the queue does not fit.
        round_s: Round length in seconds.
    """

    name = "fifo"
    event_driven = True

    def __init__(self, backfill: bool = False, round_s: float = 60.0) -> None:
        self.backfill = backfill
        self.round_s = check_round_s(round_s, self.name)

    def decide(self, state: SimState) -> Allocation:
        """Keep running jobs; start waiting ones in arrival order while they fit."""
        placer = Placer(state, keep=state.current)
        req = state.workload.req_gpus
        for j in state.pending.tolist():
            if placer.total_free == 0:
                break
            if not placer.place(j, int(req[j])) and not self.backfill:
                break
        return placer.allocation()


class YarnCS(BasePolicy):
    """YARN capacity-scheduler-like FIFO with per-queue shares.

    Args:
        shares: Guaranteed share per queue name (normalised to sum 1). ``None`` or empty:
            equal shares over the queues that appear in the workload.
        round_s: Round length in seconds.
    """

    name = "yarn_cs"
    event_driven = True

    def __init__(self, shares: Mapping[str, float] | None = None, round_s: float = 60.0) -> None:
        if shares is not None and not isinstance(shares, Mapping):
            raise SettingError(
                f"scheduler.yarn_cs.shares={shares!r} must map queue names to shares, "
                "e.g. scheduler.yarn_cs.shares={vc1: 2, vc2: 1}"
            )
        self.shares = {str(k): v for k, v in shares.items()} if shares else None
        for q, v in (self.shares or {}).items():
            if isinstance(v, bool) or not isinstance(v, int | float) or not v >= 0 or v == np.inf:
                raise SettingError(
                    f"scheduler.yarn_cs.shares.{q}={v!r} must be a finite share >= 0"
                )
        if self.shares and sum(float(v) for v in self.shares.values()) <= 0:
            raise SettingError(f"scheduler.yarn_cs.shares={self.shares} must have a positive share")
        self.round_s = check_round_s(round_s, self.name)

    def decide(self, state: SimState) -> Allocation:
        """Start jobs from the queue furthest below its share, FIFO within each queue."""
        wl = state.workload
        names = wl.queue_names
        Q = len(names)
        if self.shares:
            unknown = set(self.shares) - set(names)
            if unknown:
                raise SettingError(
                    f"scheduler.yarn_cs.shares names unknown queues {sorted(unknown)}; the "
                    f"workload's queues are {list(names)}"
                )
            share = np.array([float(self.shares.get(q, 0.0)) for q in names])
        else:
            share = np.zeros(Q)
            share[np.unique(wl.queue)] = 1.0
        share = share / share.sum()
        cap = share * state.cluster.num_gpus
        used = np.bincount(
            wl.queue[state.current.job], weights=state.current.gpus, minlength=Q
        ).astype(np.float64)
        placer = Placer(state, keep=state.current)
        pending = state.pending
        queues: list[list[int]] = [[] for _ in range(Q)]
        for j in pending.tolist():
            queues[int(wl.queue[j])].append(j)
        heads = [0] * Q
        blocked = np.array([len(q) == 0 for q in queues])
        while not blocked.all() and placer.total_free > 0:
            ratio = np.where(blocked, np.inf, used / np.maximum(cap, 1e-9))
            q = int(np.argmin(ratio))
            j = queues[q][heads[q]]
            if placer.place(j, int(wl.req_gpus[j])):
                used[q] += wl.req_gpus[j]
                heads[q] += 1
                if heads[q] >= len(queues[q]):
                    blocked[q] = True
            else:
                blocked[q] = True  # strict FIFO inside a queue
        return placer.allocation()


class LAS(BasePolicy):
    """Tiresias-like discretised least-attained-service, preemptive, agnostic.

    Args:
        thresholds_gpu_h: Attained-service thresholds (GPU-hours) separating priority queues.
        round_s: Round length in seconds.
    """

    name = "las"
    static_when_no_pending = True

    def __init__(
        self, thresholds_gpu_h: Sequence[float] = (1.0, 10.0), round_s: float = 60.0
    ) -> None:
        th = np.asarray(list(thresholds_gpu_h), dtype=np.float64)
        if th.size and (np.any(np.diff(th) <= 0) or th[0] <= 0):
            raise ValueError(f"las thresholds_gpu_h must be positive and increasing, got {th}")
        self.thresholds_s = th * 3600.0
        self.round_s = check_round_s(round_s, self.name)

    def decide(self, state: SimState) -> Allocation:
        """Run the highest-priority jobs that fit; keep continuing jobs in place."""
        wl = state.workload
        act = state.active
        if act.size == 0:
            return Allocation.empty()
        level = np.searchsorted(self.thresholds_s, state.attained_gpu_s[act], side="right")
        order = act[np.lexsort((act, level))]
        req = wl.req_gpus[order]
        # Greedy selection by capacity, skipping jobs larger than what is left.
        total = state.cluster.num_gpus
        selected = np.zeros(order.size, dtype=bool)
        left = total
        for i, g in enumerate(req.tolist()):
            if g <= left:
                selected[i] = True
                left -= g
            if left == 0:
                break
        chosen = order[selected]
        keep = state.current.for_jobs(chosen)
        placer = Placer(state, keep=keep)
        for j in chosen.tolist():
            if placer.total_free == 0:
                break
            placer.place(j, int(wl.req_gpus[j]))
        # Work conservation: fill what fragmentation left with lower-priority jobs.
        for j in order[~selected].tolist():
            if placer.total_free == 0:
                break
            if not placer.keep_current(j):
                placer.place(j, int(wl.req_gpus[j]))
        return placer.allocation()
