"""Sia's placement (sia.md §7): chosen configurations -> node placements, per GPU type.

Jobs whose configuration is unchanged keep their nodes; the others are placed in descending GPU
count, whole-node allocations on whole free nodes (highest index first) and the remainder on one
best-fit node. Fragmentation is resolved by evicting single-node jobs that merely kept their old
nodes, then by shrinking the job to a power-of-two count that fits, else the job waits this round.
Down nodes offer no GPUs. :class:`hetsched.baselines.sia.Sia` calls :func:`place_configurations`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.baselines.base import Placer
from hetsched.sim.allocation import Allocation
from hetsched.sim.engine import SimState

IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


def place_configurations(
    state: SimState,
    live: Allocation,
    act: IntArray,
    chosen: IntArray,
    kc: IntArray,
    nc: IntArray,
    cur_k: IntArray,
    cur_n: IntArray,
    pinned: BoolArray,
    stats: dict[str, Any],
) -> Allocation:
    """Turn chosen configurations into node placements (sia.md §7).

    Args:
        state: The round's state.
        live: The previous allocation without jobs that lost their nodes.
        act: Active jobs, shape (A,).
        chosen: Chosen configuration column per active job (-1 = none), shape (A,).
        kc: Catalogue GPU type of every column, shape (C,).
        nc: GPUs of every column, shape (C,).
        cur_k: Current GPU type per active job (-1 = none or mixed), shape (A,).
        cur_n: Current GPU count per active job (0 = not running), shape (A,).
        pinned: Jobs pinned to their current configuration, shape (A,).
        stats: Counters ``evictions``, ``shrunk`` and ``dropped``, updated in place.

    Returns:
        An allocation the engine accepts.
    """
    cl = state.cluster
    cur = live
    sel = np.flatnonzero(chosen >= 0)
    if sel.size == 0:
        return Allocation.empty()
    order = np.argsort(cur.job, kind="stable")
    cj = cur.job[order]
    starts = np.searchsorted(cj, act[sel], side="left")
    ends = np.searchsorted(cj, act[sel], side="right")
    free = np.where(state.node_up, cl.node_gpus, 0).astype(np.int64)
    assign: dict[int, tuple[IntArray, IntArray]] = {}
    preserved: dict[int, int] = {}  # job -> node (single-node jobs that kept their place)
    want: dict[int, int] = {}
    todo_by_type: dict[int, list[int]] = {}
    for i, a in enumerate(sel.tolist()):
        j = int(act[a])
        c = int(chosen[a])
        k, n = int(kc[c]), int(nc[c])
        want[j] = n
        if cur_k[a] == k and cur_n[a] == n:
            e = order[starts[i] : ends[i]]
            nodes, gpus = cur.node[e], cur.gpus[e]
            assign[j] = (nodes, gpus)
            free[nodes] -= gpus
            if not pinned[a] and nodes.size == 1 and n < cl.node_gpus[nodes[0]]:
                preserved[j] = int(nodes[0])
        else:
            todo_by_type.setdefault(k, []).append(j)
    for k, todo in todo_by_type.items():
        _place_type(state, k, todo, want, free, assign, preserved, stats)
    placer = Placer(state)
    for j, (nodes, gpus) in assign.items():
        if not placer.place_exact(j, nodes, gpus):
            stats["dropped"] += 1
    return placer.allocation()


def _place_type(
    state: SimState,
    k: int,
    todo: list[int],
    want: dict[int, int],
    free: IntArray,
    assign: dict[int, tuple[IntArray, IntArray]],
    preserved: dict[int, int],
    stats: dict[str, Any],
) -> None:
    """Place the jobs of one GPU type (descending GPU count), evicting if fragmented."""
    cl = state.cluster
    nodes_k = np.flatnonzero(cl.node_type == k)
    R = int(cl.node_gpus[nodes_k].max())
    queue = sorted(todo, key=lambda j: (-want[j], j))
    while queue:
        j = queue.pop(0)
        n = want[j]
        got = fit_nodes(nodes_k, R, n, free, cl.node_gpus)
        while got is None:
            evicted = _evict(nodes_k, R, n, free, assign, preserved, cl.node_gpus)
            if not evicted:
                break
            stats["evictions"] += len(evicted)
            queue = sorted(queue + evicted, key=lambda x: (-want[x], x))
            got = fit_nodes(nodes_k, R, n, free, cl.node_gpus)
        if got is None:
            got = _shrink(state, j, k, nodes_k, R, n, free)
            if got is None:
                stats["dropped"] += 1
                continue
            stats["shrunk"] += 1
        nodes, gpus = got
        free[nodes] -= gpus
        assign[j] = (nodes, gpus)


def fit_nodes(
    nodes_k: IntArray, R: int, n: int, free: IntArray, node_gpus: IntArray
) -> tuple[IntArray, IntArray] | None:
    """Whole free nodes for ``n // R`` GPUs plus one best-fit node for the rest.

    Args:
        nodes_k: Nodes of the GPU type, shape (N_k,).
        R: GPUs of the type's largest node.
        n: GPUs to place.
        free: Free GPUs per node, shape (N,).
        node_gpus: GPUs per node, shape (N,).

    Returns:
        ``(nodes, gpus)`` of the placement, or ``None`` when it does not fit.
    """
    q, rem = divmod(n, R) if n >= R else (0, n)
    whole = nodes_k[(node_gpus[nodes_k] == R) & (free[nodes_k] == R)]
    if whole.size < q:
        return None
    use = whole[::-1][:q]
    nodes = [use]
    gpus = [np.full(q, R, dtype=np.int64)]
    if rem:
        cand = nodes_k[(free[nodes_k] >= rem) & ~np.isin(nodes_k, use)]
        if cand.size == 0:
            return None
        best = cand[np.lexsort((cand, free[cand]))[0]]
        nodes.append(np.array([best]))
        gpus.append(np.array([rem], dtype=np.int64))
    return np.concatenate(nodes).astype(np.int64), np.concatenate(gpus)


def _evict(
    nodes_k: IntArray,
    R: int,
    n: int,
    free: IntArray,
    assign: dict[int, tuple[IntArray, IntArray]],
    preserved: dict[int, int],
    node_gpus: IntArray,
) -> list[int]:
    """Evict preserved single-node jobs of this type to make room for ``n`` GPUs.

    Whole-node shortage: empty the nodes closest to being whole (most free GPUs first) whose
    remaining occupants are all evictable. Partial-node shortage: on the node that needs the
    fewest GPUs freed, evict its smallest preserved jobs until the remainder fits. Evicted
    jobs are removed from ``assign`` / ``preserved`` and their GPUs freed.

    Returns:
        The evicted jobs (empty if eviction cannot help).
    """
    in_type = np.zeros(free.shape[0], dtype=bool)
    in_type[nodes_k] = True
    on_node: dict[int, list[int]] = {}
    for j, node in preserved.items():
        if in_type[node]:
            on_node.setdefault(node, []).append(j)
    if not on_node:
        return []
    evictable = np.zeros(free.shape[0], dtype=np.int64)
    for node, jobs in on_node.items():
        evictable[node] = sum(int(assign[j][1].sum()) for j in jobs)
    q, rem = divmod(n, R) if n >= R else (0, n)
    whole_free = int(((node_gpus[nodes_k] == R) & (free[nodes_k] == R)).sum())
    victims: list[int] = []
    if q > whole_free:
        cand = nodes_k[
            (node_gpus[nodes_k] == R)
            & (free[nodes_k] < R)
            & (free[nodes_k] + evictable[nodes_k] == R)
        ]
        if cand.size < q - whole_free:
            return []
        cand = cand[np.lexsort((cand, -free[cand]))][: q - whole_free]
        for node in cand.tolist():
            victims += on_node[node]
    elif rem:
        cand = nodes_k[(free[nodes_k] < rem) & (free[nodes_k] + evictable[nodes_k] >= rem)]
        if cand.size == 0:
            return []
        node = int(cand[np.lexsort((cand, rem - free[cand]))[0]])
        left = int(free[node])
        for j in sorted(on_node[node], key=lambda x: (int(assign[x][1].sum()), x)):
            if left >= rem:
                break
            victims.append(j)
            left += int(assign[j][1].sum())
    for j in victims:
        nodes, gpus = assign.pop(j)
        free[nodes] += gpus
        del preserved[j]
    return victims


def _shrink(
    state: SimState, j: int, k: int, nodes_k: IntArray, R: int, n: int, free: IntArray
) -> tuple[IntArray, IntArray] | None:
    """The largest power-of-two count below ``n`` (>= min_gpus) that fits without eviction."""
    wl, tm, cl = state.workload, state.throughput, state.cluster
    lo = int(wl.min_gpus[j])
    g = 1 << (max(n - 1, 1).bit_length() - 1)
    while g >= lo and g >= 1:
        if g < n and tm.isolated(int(wl.model[j]), k, g, False) > 0:
            got = fit_nodes(nodes_k, R, g, free, cl.node_gpus)
            if got is not None:
                return got
        g //= 2
    return None
