"""Hadar's per-slot placement candidates (numpy reference; see :mod:`hetsched.baselines.hadar`).

The pieces of the dual subroutine's candidate search (:meth:`HadarDual._slot_choices
<hetsched.baselines.hadar_dual.HadarDual._slot_choices>`): a job's speed floors, the engine's rate
rule for a placement, and per speed floor and slot of the window the ``n`` cheapest eligible GPUs
(multi-node candidate) and the cheapest node holding the whole gang (single-node candidate).
Two forms give the same values: a dense one over every node at once (small clusters: fewest
numpy calls) and one that visits only each floor's eligible nodes, in price order and only as
deep as the gang's last GPU (large clusters). The compiled kernel
:func:`hetsched.baselines.hadar_kernel_place.slot_choices_dense` repeats this computation.
"""

from __future__ import annotations

import numpy as np

from hetsched.baselines.hadar_plan import BoolArray, FloatArray, IntArray, _JobInfo

#: Speed floors searched per job.
_MAX_LEVELS = 8


def speed_levels(r: FloatArray) -> FloatArray:
    """Distinct positive node rates of a job, fastest first, at most ``_MAX_LEVELS``.

    Args:
        r: The job's rate per node, shape (N,) (0 = ineligible).

    Returns:
        The speed floors' rates, descending, shape (Lv,) with ``Lv <= _MAX_LEVELS``.
    """
    lv = np.unique(r[r > 0])[::-1]
    if lv.size > _MAX_LEVELS:
        idx = np.unique(np.linspace(0, lv.size - 1, _MAX_LEVELS).round().astype(np.int64))
        lv = lv[idx]
    return lv


def placement_rate(info: _JobInfo, size: IntArray, nodes: IntArray, gpus: IntArray) -> float:
    """Engine rate rule (without interference) for a placement of the gang.

    Args:
        info: The job's constants.
        size: GPUs per node, shape (N,).
        nodes: Nodes of the placement, shape (R,).
        gpus: GPUs on each of them, shape (R,).

    Returns:
        Work units per second of the slowest used node (0 for an empty placement).
    """
    if nodes.size == 0:
        return 0.0
    need = -(-info.n // int(size[nodes].max()))
    r = info.rate_spread if nodes.size > need else info.rate
    return float(r[nodes].min())


def candidates_dense(
    info: _JobInfo,
    levels: FloatArray,
    free: IntArray,
    price: FloatArray,
    order: IntArray,
    size: IntArray,
    cmax: float,
) -> tuple[IntArray, IntArray, FloatArray, FloatArray, IntArray, BoolArray]:
    """Multi- and single-node candidates of every floor over all nodes at once (small N).

    Args:
        info: The job's constants.
        levels: Speed floors' rates, shape (Lv,).
        free: Free GPUs per node and slot, shape (N, He).
        price: Price per node and slot, shape (N, He).
        order: Nodes by ascending price per slot, shape (N, He).
        size: GPUs per node, shape (N,).
        cmax: GPUs of the largest node.

    Returns:
        ``(take, tnode, cost_m, rate_m, single, ok_s)``: GPUs per sorted position and its
        node, shape (Lv, N, He); multi-node cost and rate, the single-node candidate and
        whether it exists, shape (Lv, He). The same values as the large-cluster path.
    """
    n, r, rs = info.n, info.rate, info.rate_spread
    mask = r[None, :] >= levels[:, None]  # (Lv, N)
    fr_s = np.take_along_axis(free, order, axis=0)
    pr_s = np.take_along_axis(price, order, axis=0)
    avail = np.where(mask[:, order], fr_s[None], 0)  # (Lv, N, He)
    cum = np.cumsum(avail, axis=1)
    take = np.clip(n - (cum - avail), 0, avail)
    feas_m = cum[:, -1, :] >= n
    cost_m = (take * pr_s[None]).sum(axis=1)
    used = take > 0
    nn = used.sum(axis=1)
    maxc = np.where(used, size[order][None], 0).max(axis=1)
    spread = nn > -(-n // np.maximum(maxc, 1))
    rate_p = np.where(used, r[order][None], np.inf).min(axis=1)
    rate_s = np.where(used, rs[order][None], np.inf).min(axis=1)
    rate_m = np.where(spread, rate_s, rate_p)
    rate_m = np.where(feas_m & np.isfinite(rate_m), rate_m, 0.0)
    fit = mask[:, :, None] & (free[None] >= n)
    key = np.where(fit, (price * (1.0 + 1e-7 * free / cmax))[None], np.inf)
    single = key.argmin(axis=1)  # (Lv, He)
    ok_s = np.isfinite(np.take_along_axis(key, single[:, None, :], axis=1)[:, 0, :])
    tnode = np.broadcast_to(order, take.shape)
    return take, tnode, cost_m, rate_m, single, ok_s


def single_candidates(
    band: IntArray, Lv: int, free: IntArray, price: FloatArray, n: int, cmax: float
) -> tuple[IntArray, BoolArray]:
    """Cheapest node holding the whole gang per floor and slot (best fit on ties).

    Args:
        band: Speed band per node, shape (N,) (floor l admits bands 0..l).
        Lv: Number of floors.
        free: Free GPUs per node and slot, shape (N, He).
        price: Price per node and slot, shape (N, He).
        n: GPUs of the gang.
        cmax: GPUs of the largest node.

    Returns:
        ``(single, ok)``: the node (0 where none) and whether one exists, shape (Lv, He).
    """
    He = free.shape[1]
    cols = np.arange(He)
    key = np.where(free >= n, price * (1.0 + 1e-7 * free / cmax), np.inf)
    single = np.zeros((Lv, He), dtype=np.int64)
    ok = np.zeros((Lv, He), dtype=bool)
    best_v = np.full(He, np.inf)
    best_i = np.zeros(He, dtype=np.int64)
    for lv in range(Lv):
        nodes = np.flatnonzero(band == lv)
        if nodes.size:
            kb = key[nodes]
            ib = kb.argmin(axis=0)
            vb = kb[ib, cols]
            nb = nodes[ib]
            # First minimum over the union of bands: lower value, then lower node index.
            win = (vb < best_v) | ((vb == best_v) & (nb < best_i))
            best_v = np.where(win, vb, best_v)
            best_i = np.where(win, nb, best_i)
        ok[lv] = np.isfinite(best_v)
        single[lv] = np.where(ok[lv], best_i, 0)
    return single, ok


def multi_candidates(
    info: _JobInfo,
    band: IntArray,
    Lv: int,
    free: IntArray,
    price: FloatArray,
    order: IntArray,
    size: IntArray,
) -> tuple[IntArray, IntArray, BoolArray, FloatArray, FloatArray]:
    """Per speed floor and slot, the ``n`` cheapest eligible GPUs in price order.

    Only the eligible nodes of each floor are visited, in the window's price order, and only
    as deep as the ``n``-th free GPU (the depth doubles until every feasible slot is served).

    Args:
        info: The job's constants.
        band: Speed band per node, shape (N,) (floor l admits bands 0..l).
        Lv: Number of floors.
        free: Free GPUs per node and slot, shape (N, He).
        price: Price per node and slot, shape (N, He).
        order: Nodes by ascending price per slot, shape (N, He).
        size: GPUs per node, shape (N,).

    Returns:
        ``(take, tnode, feasible, cost, rate)``: GPUs taken per visited position and the node
        at that position, shape (Lv, P, He); whether the floor has ``n`` free GPUs, the cost
        and the engine rate per floor and slot, shape (Lv, He) (rate 0 where infeasible).
    """
    n = info.n
    He = free.shape[1]
    cols = np.arange(He)
    band_s = band[order]  # (N, He)
    takes: list[IntArray] = []
    nodes_l: list[IntArray] = []
    feas = np.zeros((Lv, He), dtype=bool)
    cost = np.zeros((Lv, He))
    rate = np.zeros((Lv, He))
    for lv in range(Lv):
        elig = band <= lv
        cnt = int(elig.sum())
        # Eligible nodes in price order per slot (the same count in every slot).
        ol = order.T[(band_s <= lv).T].reshape(He, cnt).T  # (cnt, He)
        tot = free[elig].sum(axis=0)
        feas[lv] = tot >= n
        P = min(cnt, max(n, 2))
        while True:
            fr = free[ol[:P], cols]
            cum = np.cumsum(fr, axis=0)
            if cnt == P or ((cum[-1] >= n) | ~feas[lv]).all():
                break
            P = min(cnt, 2 * P)
        ol = ol[:P]
        take = np.clip(n - (cum - fr), 0, fr)
        if He == 1:  # a single column sums pairwise over all N positions: keep that order
            full = np.zeros((order.shape[0], 1))
            full[np.flatnonzero(band_s[:, 0] <= lv)[:P], 0] = take[:, 0] * price[ol[:, 0], 0]
            cost[lv] = full.sum(axis=0)
        else:
            cost[lv] = (take * price[ol, cols]).sum(axis=0)
        used = take > 0
        nn = used.sum(axis=0)
        maxc = np.where(used, size[ol], 0).max(axis=0)
        spread = nn > -(-n // np.maximum(maxc, 1))
        rate_p = np.where(used, info.rate[ol], np.inf).min(axis=0)
        rate_s = np.where(used, info.rate_spread[ol], np.inf).min(axis=0)
        rm = np.where(spread, rate_s, rate_p)
        rate[lv] = np.where(feas[lv] & np.isfinite(rm), rm, 0.0)
        takes.append(take)
        nodes_l.append(ol)
    Pm = max(t.shape[0] for t in takes)
    take_all = np.zeros((Lv, Pm, He), dtype=np.int64)
    node_all = np.zeros((Lv, Pm, He), dtype=np.int64)
    for lv in range(Lv):
        P = takes[lv].shape[0]
        take_all[lv, :P] = takes[lv]
        node_all[lv, :P] = nodes_l[lv]
    return take_all, node_all, feas, cost, rate


def entries_at(
    t: int, kind: int, level: int, single: int, take: IntArray, tnode: IntArray, n: int
) -> tuple[IntArray, IntArray]:
    """Placement ``(nodes, gpus)`` of the candidate chosen in slot ``t``.

    Args:
        t: Column of the window.
        kind: 1 for the single-node candidate, else the multi-node one.
        level: Speed floor of the candidate.
        single: Node of the single-node candidate.
        take: GPUs per visited position, shape (Lv, P, He).
        tnode: Node at each visited position, shape (Lv, P, He).
        n: GPUs of the gang.

    Returns:
        The nodes and the GPUs on each, shape (R,).
    """
    if kind == 1:
        return np.array([single], dtype=np.int64), np.array([n], dtype=np.int64)
    g = take[level, :, t]
    nz = np.flatnonzero(g)
    return tnode[level, nz, t].astype(np.int64), g[nz].astype(np.int64)
