"""Compiled-kernel bodies of Hadar's placement search (see :mod:`hetsched.baselines.hadar_kernels`).

Plain Python over numpy arrays, written for ``numba.njit``: the candidate search of every slot
and speed floor (``hadar_candidates.candidates_dense`` with the per-floor loop of
``HadarDual._slot_choices``) and the stabilised placement entries of a schedule
(``hadar_schedule.plan_entries`` with ``hadar_schedule.stabilise``), with the same IEEE operations
in the same order as that numpy reference. Helpers called from a kernel are module globals that
:func:`hetsched.baselines.hadar_kernels.compiled` replaces by their compiled forms.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _rate_of_py(nodes: Any, cnt: int, n: int, size: Any, r: Any, rs: Any) -> float:
    """``hadar_candidates.placement_rate`` of the first ``cnt`` entries of ``nodes``."""
    if cnt == 0:
        return 0.0
    mx = 0
    for i in range(cnt):
        if size[nodes[i]] > mx:
            mx = size[nodes[i]]
    need = -(-n // mx)
    out = np.inf
    for i in range(cnt):
        v = rs[nodes[i]] if cnt > need else r[nodes[i]]
        if v < out:
            out = v
    return out


_rate_of = _rate_of_py  # replaced by its compiled form when the "slots" kernel is compiled


def slot_choices_dense(
    r: Any,
    rs: Any,
    size: Any,
    levels: Any,
    free: Any,
    price: Any,
    order: Any,
    n: int,
    cmax: float,
    D: float,
    disc: float,
    sticky: bool,
    ref_nodes: Any,
    ref_gpus: Any,
    H: int,
) -> tuple[Any, Any, Any, Any, Any, Any, Any, Any, Any, Any]:
    """Cheapest placement per progress in every slot and speed floor (plain-Python form).

    The same computation as ``hadar_candidates.candidates_dense`` followed by the per-floor loop of
    ``HadarDual._slot_choices`` (reference placement and restart discount included), for
    ``He >= 2`` computed columns (with one column numpy sums pairwise; the caller uses numpy).

    Args:
        r, rs: The job's packed and spread rate per node, shape (N,) (0 = ineligible).
        size: GPUs per node, shape (N,).
        levels: Speed floors, fastest first, shape (Lv,).
        free, price, order: Free GPUs, price and nodes by ascending price per slot, shape
            (N, He).
        n: Gang size. cmax: largest node size. D: slot length in seconds.
        disc: Progress factor of a slot that moves the job. sticky: keep the reference
            placement wherever it is free.
        ref_nodes, ref_gpus: The job's current placement, shape (R,) (R = 0: none).
        H: Window length (columns ``He .. H - 1`` repeat column ``He - 1``).

    Returns:
        ``(take, single, b_cost, b_prog, kind, level, single_node, rn, rg, rcnt)``: GPUs per
        price-ordered position, shape (Lv, N, He); the single-node candidate per floor, shape
        (Lv, He); per floor the chosen cost and progress, shape (Lv, H), the kind, level and
        single node, shape (Lv, He); and each floor's reference placement, shape (Lv, max(N, R))
        with its length in ``rcnt``, shape (Lv,).
    """
    N, He = free.shape
    Lv = levels.shape[0]
    R0 = ref_nodes.shape[0]
    take = np.zeros((Lv, N, He), dtype=np.int64)
    single = np.zeros((Lv, He), dtype=np.int64)
    cand_cost = np.empty((2 * Lv, He))
    cand_rate = np.empty((2 * Lv, He))
    for lv in range(Lv):
        lvl = levels[lv]
        for t in range(He):
            cum = 0
            cost = 0.0
            nn = 0
            maxc = 0
            rate_p = np.inf
            rate_s = np.inf
            for p in range(N):
                node = order[p, t]
                av = free[node, t] if r[node] >= lvl else 0
                before = cum
                cum += av
                g = n - before
                if g < 0:
                    g = 0
                if g > av:
                    g = av
                take[lv, p, t] = g
                cost += g * price[node, t]
                if g > 0:
                    nn += 1
                    if size[node] > maxc:
                        maxc = size[node]
                    if r[node] < rate_p:
                        rate_p = r[node]
                    if rs[node] < rate_s:
                        rate_s = rs[node]
                if cum >= n:  # the later positions take nothing (and add +0.0 to the cost)
                    break
            spread = nn > -(-n // max(maxc, 1))
            rm = rate_s if spread else rate_p
            cand_cost[Lv + lv, t] = cost
            cand_rate[Lv + lv, t] = rm if (cum >= n and np.isfinite(rm)) else 0.0
            # Single node: the cheapest eligible node holding the gang (more free on ties).
            best = np.inf
            bi = 0
            for node in range(N):
                if r[node] >= lvl and free[node, t] >= n:
                    key = price[node, t] * (1.0 + 1e-7 * free[node, t] / cmax)
                    if key < best:
                        best = key
                        bi = node
            single[lv, t] = bi
            cand_cost[lv, t] = n * price[bi, t]
            cand_rate[lv, t] = r[bi] if np.isfinite(best) else 0.0
    ratio = np.empty((2 * Lv, He))
    for c in range(2 * Lv):
        for t in range(He):
            if cand_rate[c, t] > 0:
                ratio[c, t] = cand_cost[c, t] / (cand_rate[c, t] * D)
            else:
                ratio[c, t] = np.inf
    ref_rate = _rate_of(ref_nodes, R0, n, size, r, rs)
    Rm = max(N, R0)
    rn = np.zeros((Lv, Rm), dtype=np.int64)
    rg = np.zeros((Lv, Rm), dtype=np.int64)
    rcnt = np.zeros(Lv, dtype=np.int64)
    b_cost = np.empty((Lv, H))
    b_prog = np.empty((Lv, H))
    kind = np.empty((Lv, He), dtype=np.int64)
    level = np.empty((Lv, He), dtype=np.int64)
    single_node = np.empty((Lv, He), dtype=np.int64)
    bc = np.empty(He)
    bp = np.empty(He)
    for fl in range(Lv):
        first = -1
        for t in range(He):
            best = 0
            bv = ratio[0, t]
            for c in range(1, 2 * Lv):
                lvc = c if c < Lv else c - Lv
                v = ratio[c, t] if lvc <= fl else np.inf
                if v < bv:
                    bv = v
                    best = c
            bc[t] = cand_cost[best, t]
            bp[t] = cand_rate[best, t] * D if np.isfinite(bv) else 0.0
            kind[fl, t] = 1 if best < Lv else 0
            lvb = best if best < Lv else best - Lv
            level[fl, t] = lvb
            single_node[fl, t] = single[lvb, t]
            if first < 0 and bp[t] > 0:
                first = t
        # Reference placement: where the job runs now, else its first feasible placement.
        if R0 > 0 and ref_rate >= levels[fl] * (1 - 1e-9):
            cnt = R0
            for i in range(R0):
                rn[fl, i] = ref_nodes[i]
                rg[fl, i] = ref_gpus[i]
            rr = ref_rate
        else:
            cnt = 0
            if first >= 0:
                t = first
                if kind[fl, t] == 1:
                    rn[fl, 0] = single_node[fl, t]
                    rg[fl, 0] = n
                    cnt = 1
                else:
                    lvb = level[fl, t]
                    for p in range(N):
                        g = take[lvb, p, t]
                        if g != 0:
                            rn[fl, cnt] = order[p, t]
                            rg[fl, cnt] = g
                            cnt += 1
            rr = _rate_of(rn[fl], cnt, n, size, r, rs)
        rcnt[fl] = cnt
        if cnt > 0 and rr > 0:
            prog_r = rr * D
            for t in range(He):
                ok = True
                cost_r = 0.0
                for i in range(cnt):
                    if free[rn[fl, i], t] < rg[fl, i]:
                        ok = False
                    cost_r += rg[fl, i] * price[rn[fl, i], t]
                prog_b = bp[t] * disc
                ratio_b = bc[t] / prog_b if prog_b > 0 else np.inf
                ratio_r = cost_r / prog_r if ok else np.inf
                if ok and (sticky or ratio_r <= ratio_b):
                    bc[t] = cost_r
                    bp[t] = prog_r
                    kind[fl, t] = 2
                else:
                    bp[t] = prog_b
        for t in range(He):
            b_cost[fl, t] = bc[t] if bp[t] > 0 else np.inf
            b_prog[fl, t] = bp[t]
        for t in range(He, H):
            b_cost[fl, t] = b_cost[fl, He - 1]
            b_prog[fl, t] = b_prog[fl, He - 1]
    return take, single, b_cost, b_prog, kind, level, single_node, rn, rg, rcnt


def _block_sum_py(a: Any, lo: int, n: int) -> float:
    """numpy's pairwise summation of a block of at most 128 elements ``a[lo : lo + n]``."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    while i < n - (n % 8):
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


_block_sum = _block_sum_py  # replaced by its compiled form with the "plan" kernel


def _pairwise_sum_py(a: Any) -> float:
    """``a.sum()`` for a 1-D float array in numpy's order (pairwise: blocks of at most 128
    elements, halved at multiples of 8 and summed left + right), without recursion."""
    n = a.shape[0]
    if n <= 128:
        return _block_sum(a, 0, n)
    # Explicit stack of (lo, n, left value or NaN while the left half is pending).
    lo_s = np.zeros(64, dtype=np.int64)
    n_s = np.zeros(64, dtype=np.int64)
    left = np.full(64, np.nan)
    lo_s[0], n_s[0] = 0, n
    top = 0
    val = 0.0
    have = False  # ``val`` holds a finished sum to hand to the frame below ``top``
    while True:
        if not have:
            m = n_s[top]
            if m <= 128:
                val = _block_sum(a, lo_s[top], m)
                have = True
                top -= 1
            else:
                n2 = m // 2
                n2 -= n2 % 8
                top += 1
                lo_s[top], n_s[top] = lo_s[top - 1], n2
                left[top - 1] = np.nan
                continue
        if top < 0:
            return val
        m = n_s[top]
        n2 = m // 2
        n2 -= n2 % 8
        if np.isnan(left[top]):  # the left half is done: start the right half
            left[top] = val
            have = False
            top += 1
            lo_s[top], n_s[top] = lo_s[top - 1] + n2, m - n2
        else:
            val = left[top] + val
            top -= 1


_pairwise_sum = _pairwise_sum_py  # replaced by its compiled form with the "plan" kernel


def plan_entries(
    chosen: Any,
    kind: Any,
    level: Any,
    single: Any,
    take: Any,
    tnode: Any,
    ref_nodes: Any,
    ref_gpus: Any,
    free: Any,
    price: Any,
    n: int,
    size: Any,
    r: Any,
    rs: Any,
    D: float,
    disc: float,
) -> tuple[Any, Any, Any, Any, float]:
    """Placement entries of the chosen slots, stabilised (plain-Python form of the kernel).

    The same computation as ``hadar_schedule.plan_entries`` then ``hadar_schedule.stabilise``:
    entries of multi-node slots, then single-node slots, then reference-placement slots; then,
    in time order, each placement is kept in the later chosen slots while its GPUs stay free.

    Args:
        chosen: Chosen slots, ascending, shape (S,).
        kind, level, single: Per computed column, the kind (0 multi-node, 1 single node,
            2 reference), speed floor and single node of the slot's placement, shape (He,).
        take, tnode: GPUs per price-ordered position and the node there, shape (Lv, P, He).
        ref_nodes, ref_gpus: The floor's reference placement, shape (R,).
        free, price: Free GPUs and price per node and computed column, shape (N, He).
        n: Gang size. size: GPUs per node, shape (N,). r, rs: packed and spread rate per node.
        D: Slot length in seconds. disc: progress factor of a slot after a move.

    Returns:
        ``(slot, node, gpus, progress, cost)``: the entries, shape (E,), the estimated progress
        per chosen slot, shape (S,), and the entries' cost at ``price`` (numpy's pairwise sum).
    """
    He = free.shape[1]
    S = chosen.shape[0]
    P = take.shape[1]
    R = ref_nodes.shape[0]
    col = np.empty(S, dtype=np.int64)
    for i in range(S):
        col[i] = min(chosen[i], He - 1)
    # _plan_entries: kind 0, then kind 1, then kind 2 entries.
    cap = 0
    for i in range(S):
        cap += P if kind[col[i]] == 0 else (1 if kind[col[i]] == 1 else R)
    es = np.empty(cap, dtype=np.int64)
    en = np.empty(cap, dtype=np.int64)
    eg = np.empty(cap, dtype=np.int64)
    e = 0
    for i in range(S):
        c = col[i]
        if kind[c] == 0:
            lv = level[c]
            for p in range(P):
                g = take[lv, p, c]
                if g != 0:
                    es[e] = chosen[i]
                    en[e] = tnode[lv, p, c]
                    eg[e] = g
                    e += 1
    for i in range(S):
        c = col[i]
        if kind[c] == 1:
            es[e] = chosen[i]
            en[e] = single[c]
            eg[e] = n
            e += 1
    for i in range(S):
        if kind[col[i]] == 2:
            for q in range(R):
                es[e] = chosen[i]
                en[e] = ref_nodes[q]
                eg[e] = ref_gpus[q]
                e += 1
    E = e
    # _stabilise: segments of chosen slots that keep the placement of their first slot.
    starts = np.empty(S, dtype=np.int64)
    nseg = 0
    i = 0
    while i < S:
        starts[nseg] = i
        nseg += 1
        nxt = S
        for j in range(i + 1, S):
            ok = True
            for q in range(E):
                if es[q] == chosen[i] and free[en[q], col[j]] < eg[q]:
                    ok = False
                    break
            if not ok:
                nxt = j
                break
        i = nxt
    total = 0
    for g in range(nseg):
        s0 = chosen[starts[g]]
        cnt = 0
        for q in range(E):
            if es[q] == s0:
                cnt += 1
        hi = starts[g + 1] if g + 1 < nseg else S
        total += cnt * (hi - starts[g])
    ns = np.empty(total, dtype=np.int64)
    nn = np.empty(total, dtype=np.int64)
    ng = np.empty(total, dtype=np.int64)
    progress = np.zeros(S)
    nodes = np.empty(E, dtype=np.int64)
    o = 0
    for g in range(nseg):
        s0 = chosen[starts[g]]
        cnt = 0
        for q in range(E):
            if es[q] == s0:
                nodes[cnt] = q
                cnt += 1
        seg_nodes = np.empty(cnt, dtype=np.int64)
        for q in range(cnt):
            seg_nodes[q] = en[nodes[q]]
        rate = _rate_of(seg_nodes, cnt, n, size, r, rs)
        hi = starts[g + 1] if g + 1 < nseg else S
        f = disc if g > 0 else 1.0
        for i in range(starts[g], hi):
            progress[i] = rate * D * f
            for q in range(cnt):
                ns[o] = chosen[i]
                nn[o] = en[nodes[q]]
                ng[o] = eg[nodes[q]]
                o += 1
    vals = np.empty(total)
    for q in range(total):
        vals[q] = ng[q] * price[nn[q], min(ns[q], He - 1)]
    return ns, nn, ng, progress, _pairwise_sum(vals)
