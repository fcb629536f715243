"""The policy interface every scheduler implements, and a shared placement helper.

A scheduler observes the simulator's :class:`~hetsched.sim.engine.SimState` at each round
boundary and returns an :class:`~hetsched.sim.allocation.Allocation`::

    class MyPolicy(BasePolicy):
        name = "mine"
        def decide(self, state: SimState) -> Allocation:
            placer = Placer(state, keep=state.current)   # keep running jobs where they are
            for j in state.pending:
                placer.place(j, int(state.workload.req_gpus[j]))
            return placer.allocation()

Optional class attributes tell the engine what it may skip (see
:meth:`hetsched.sim.engine.Simulator.run`): ``round_s`` (the policy's round length, seconds),
``event_driven`` (the decision changes only at arrivals and completions) and
``static_when_no_pending`` (nothing changes while every active job runs). An event-driven
policy may also set ``wake_time`` in ``decide`` (absolute simulated seconds, ``None`` = none) to
be asked again then although no job arrives or completes.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.allocation import Allocation
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimState
from hetsched.sim.errors import SettingError
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload


@runtime_checkable
class SchedulingPolicy(Protocol):
    """What the engine and the evaluation runner need from a scheduler."""

    name: str

    def reset(
        self,
        cluster: Cluster,
        workload: Workload,
        throughput: ThroughputModel,
        rng: np.random.Generator,
    ) -> None:
        """Prepare for a new run (called once before the first decision)."""
        ...

    def decide(self, state: SimState) -> Allocation:
        """Return the allocation for the round starting at ``state.time``."""
        ...


def check_round_s(value: float, policy: str) -> float:
    """A policy's round length in seconds, if it is finite and positive.

    Args:
        value: The ``round_s`` setting.
        policy: The scheduler's name, for the message (``scheduler.<policy>.round_s``).

    Raises:
        SettingError: If ``value`` is not a finite positive number (0, negative, NaN, inf).
    """
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = float("nan")
    if isinstance(value, bool) or not (np.isfinite(v) and v > 0):
        raise SettingError(
            f"scheduler.{policy}.round_s={value!r} must be a finite positive number of seconds"
        )
    return v


class BasePolicy:
    """Convenience base class with the optional attributes set to safe defaults."""

    name: str = "policy"
    round_s: float | None = None
    event_driven: bool = False
    static_when_no_pending: bool = False
    wake_time: float | None = None

    def reset(
        self,
        cluster: Cluster,
        workload: Workload,
        throughput: ThroughputModel,
        rng: np.random.Generator,
    ) -> None:
        """Store the run's context; subclasses may extend this."""
        self.cluster = cluster
        self.workload = workload
        self.throughput = throughput
        self.rng = rng

    def decide(self, state: SimState) -> Allocation:  # pragma: no cover - abstract
        """Return the allocation for this round."""
        raise NotImplementedError


class Placer:
    """Greedy placement of whole jobs onto free node resources, building an allocation.

    Starts from the resources left free by ``keep`` (entries that stay as they are). Each placed
    job gets, per node, ``g`` GPUs, ``g x min(request, node share)`` CPU cores and memory, where
    the node share is the node's CPUs (memory) divided by its GPUs: the fixed per-GPU shares that
    non-fungible schedulers use.

    Args:
        state: The current snapshot.
        keep: Entries kept unchanged (e.g. running jobs of a non-preemptive policy).
    """

    def __init__(self, state: SimState, keep: Allocation | None = None) -> None:
        self.state = state
        cl = state.cluster
        self.keep = keep if keep is not None else Allocation.empty()
        N = cl.num_nodes
        # Failed nodes (state.node_up False) offer nothing.
        cap = np.where(state.node_up, cl.node_gpus, 0)
        self.free_gpus = cap - self.keep.used_gpus_per_node(N)
        self.free_cpus = cl.node_cpus - self.keep.used_cpus_per_node(N)
        self.free_mem = cl.node_mem - self.keep.used_mem_per_node(N)
        self._cpu_share = cl.node_cpus / cl.node_gpus
        self._mem_share = cl.node_mem / cl.node_gpus
        self._entries: list[tuple[int, int, int, float, float]] = []
        self.placed: set[int] = set(int(j) for j in np.unique(self.keep.job))

    @property
    def total_free(self) -> int:
        """Free GPUs left in the whole cluster."""
        return int(self.free_gpus.sum())

    def _fit(
        self, j: int, nodes: NDArray[np.int64], g: NDArray[np.int64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], bool]:
        wl = self.state.workload
        cpus = g * np.minimum(wl.cpu_per_gpu[j], self._cpu_share[nodes])
        mem = g * np.minimum(wl.mem_per_gpu[j], self._mem_share[nodes])
        cpus = np.minimum(cpus, self.free_cpus[nodes])
        mem = np.minimum(mem, self.free_mem[nodes])
        floor = self.state.throughput.mem_floor * g * wl.mem_per_gpu[j]
        ok = bool(np.all(mem >= floor - 1e-9) and np.all(cpus > 0))
        return cpus, mem, ok

    def place(
        self,
        j: int,
        n: int,
        *,
        types: NDArray[np.bool_] | None = None,
        allow_spread: bool = True,
    ) -> bool:
        """Place job ``j`` on ``n`` GPUs; return whether it was placed.

        Prefers one node (best fit: the node with the fewest free GPUs that still fits); else
        the fewest whole nodes of a single GPU type (largest free first). Only layouts at which
        the job's throughput is positive are used.

        Args:
            j: Job index.
            n: GPUs to give it.
            types: Allowed catalogue GPU types (default: all the job may use).
            allow_spread: Whether a job may span several nodes.
        """
        st = self.state
        wl, cl, tm = st.workload, st.cluster, st.throughput
        if j in self.placed or n < 1 or n > self.total_free:
            return False
        allowed = wl.allowed_types[j].copy()
        if types is not None:
            allowed &= types
        cand = allowed[cl.node_type] & (self.free_gpus > 0)
        m = int(wl.model[j])
        # 1) a single node, best fit.
        one = np.flatnonzero(cand & (self.free_gpus >= n))
        if one.size:
            ok_tput = tm.isolated(m, cl.node_type[one], n, False) > 0
            one = one[ok_tput]
            if one.size:
                order = np.lexsort((one, self.free_gpus[one]))
                for node in one[order[:8]]:
                    if self._commit(j, np.array([node]), np.array([n])):
                        return True
        if not allow_spread:
            return False
        # 2) several nodes of one type, largest free first.
        best: tuple[int, NDArray[np.int64], NDArray[np.int64]] | None = None
        for k in np.unique(cl.node_type[cand]):
            nodes = np.flatnonzero(cand & (cl.node_type == k))
            if self.free_gpus[nodes].sum() < n:
                continue
            nodes = nodes[np.lexsort((nodes, -self.free_gpus[nodes]))]
            cum = np.cumsum(self.free_gpus[nodes])
            cnt = int(np.searchsorted(cum, n) + 1)
            use = nodes[:cnt]
            g = self.free_gpus[use].copy()
            g[-1] -= int(cum[cnt - 1] - n)
            need = -(-n // int(cl.node_gpus[use].max()))
            spread = cnt > need
            if tm.isolated(m, k, n, spread) <= 0:
                continue
            if best is None or cnt < best[0]:
                best = (cnt, use, g)
        if best is not None:
            return self._commit(j, best[1], best[2])
        return False

    def place_exact(self, j: int, nodes: NDArray[np.int64], gpus: NDArray[np.int64]) -> bool:
        """Place job ``j`` on the given nodes and GPU counts if they are free."""
        if j in self.placed or np.any(self.free_gpus[nodes] < gpus):
            return False
        return self._commit(j, np.asarray(nodes), np.asarray(gpus))

    def keep_current(self, j: int) -> bool:
        """Place job ``j`` exactly where it ran last round, if those GPUs are still free."""
        cur = self.state.current
        mask = cur.job == j
        if not mask.any():
            return False
        return self.place_exact(j, cur.node[mask], cur.gpus[mask])

    def _commit(self, j: int, nodes: NDArray[np.int64], g: NDArray[np.int64]) -> bool:
        cpus, mem, ok = self._fit(j, nodes, g)
        if not ok:
            return False
        self.free_gpus[nodes] -= g
        self.free_cpus[nodes] -= cpus
        self.free_mem[nodes] -= mem
        for node, gg, c, mm in zip(
            nodes.tolist(), g.tolist(), cpus.tolist(), mem.tolist(), strict=True
        ):
            self._entries.append((j, int(node), int(gg), float(c), float(mm)))
        self.placed.add(j)
        return True

    def allocation(self) -> Allocation:
        """The kept entries plus everything placed."""
        return Allocation.concat([self.keep, Allocation.from_entries(self._entries)])
