"""Hadar's schedule search and plan entries (numpy reference; see :mod:`hetsched.baselines.hadar`).

The pieces of the dual subroutine that turn one speed floor's per-slot cheapest placements
(a :class:`~hetsched.baselines.hadar_plan._SlotChoice`) into a plan
(:meth:`HadarDual._best_schedule <hetsched.baselines.hadar_dual.HadarDual._best_schedule>`):
the greedy schedules per candidate completion slot, the placement entries of the chosen slots,
and their stabilisation (a job keeps its placement while it stays free). The completion-slot
search runs in one block when it is small and in blocks of growing size, each as wide as its
first row's cut, when it is large. The compiled kernels of
:mod:`hetsched.baselines.hadar_kernel_search` and :mod:`hetsched.baselines.hadar_kernel_place`
repeat these computations.
"""

from __future__ import annotations

import math

import numpy as np

from hetsched.baselines.hadar_candidates import placement_rate
from hetsched.baselines.hadar_plan import (
    BoolArray,
    FloatArray,
    IntArray,
    _greedy_cuts,
    _JobInfo,
    _SlotChoice,
)

#: Above this many cells (completion slots x ranked slots) the schedule search runs in blocks.
_DENSE_SCHEDULE = 20_000


def schedule_search(
    cost: FloatArray, prog: FloatArray, W: float, He: int, horizon: int
) -> tuple[IntArray, BoolArray, IntArray, IntArray, FloatArray, IntArray]:
    """Greedy schedules per completion slot (numpy reference of the ``schedule`` kernel).

    Args:
        cost: Cost per slot of the window, shape (H,) (inf where infeasible).
        prog: Progress per slot in work units, shape (H,); the window covers ``W``.
        W: Work to cover.
        He: Computed columns (slots from ``He`` on repeat slot ``He - 1``).
        horizon: Slots of the window H.

    Returns:
        ``(sig, pos, taus, k, C, last)``: slots by rank (cheapest per progress first) and
        whether each has progress, shape (S,); the completion slots searched and, per
        completion slot, the rank of the last slot taken, the summed cost and the latest
        slot taken, shape (R,).
    """
    H = horizon
    time_cum = np.cumsum(prog)
    Wt = W * (1.0 - 1e-12)
    # Candidate completion slots: from the first slot by which all feasible slots so far
    # suffice, to the slot after which only identical idle slots would be added.
    tau_min = int(np.argmax(time_cum >= Wt))
    tau_max = H - 1
    p0 = float(prog[He - 1])
    if He < H and p0 > 0:
        tau_max = min(H - 1, He - 1 + math.ceil(W / p0))
    T = tau_max + 1
    c_T, p_T = cost[:T], prog[:T]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(p_T > 0, c_T / p_T, np.inf)
    sig = np.argsort(ratio, kind="stable")  # cheapest per progress first, earlier on ties
    p_sig, c_sig = p_T[sig], c_T[sig]
    pos = p_sig > 0
    # The greedy prefix shrinks (in rank) as tau grows, so the tau_min row bounds every
    # row's cut k0; a slot ranked after k0 is never taken, and adding it leaves the
    # schedule (and mu) of the previous tau unchanged, so only the other taus are rows.
    taus = np.arange(tau_min, T)
    if taus.size * T > _DENSE_SCHEDULE:
        k0 = int((np.cumsum(np.where(pos & (sig <= tau_min), p_sig, 0.0)) >= Wt).argmax())
        sig, p_sig, c_sig, pos = (
            sig[: k0 + 1],
            p_sig[: k0 + 1],
            c_sig[: k0 + 1],
            pos[: k0 + 1],
        )
        rank = np.full(T, T, dtype=np.int64)
        rank[sig[pos]] = np.flatnonzero(pos)
        taus = taus[(taus == tau_min) | (rank[taus] <= k0)]
    k, C, lst = _greedy_cuts(
        sig, p_sig, c_sig, pos, taus, Wt, blocks=taus.size * sig.size > _DENSE_SCHEDULE
    )
    return sig, pos, taus, k, C, lst


def plan_entries(sc: _SlotChoice, chosen: IntArray, n: int) -> tuple[IntArray, IntArray, IntArray]:
    """Placement entries of the chosen slots, vectorised.

    Args:
        sc: One speed floor's per-slot choices.
        chosen: Chosen slots, ascending, relative to the current slot, shape (S,).
        n: GPUs of the gang.

    Returns:
        ``(slot, node, gpus)`` per entry, shape (E,).
    """
    col = np.minimum(chosen, sc.He - 1)  # idle columns repeat the last computed one
    kind = sc.kind[col]
    parts_s: list[IntArray] = []
    parts_n: list[IntArray] = []
    parts_g: list[IntArray] = []
    m = kind == 0
    if m.any():
        sl, cl_ = chosen[m], col[m]
        lv_ = sc.level[cl_]
        g = sc.take[lv_, :, cl_]  # (S, P) GPUs per visited position
        si, pos = np.nonzero(g)
        parts_s.append(sl[si])
        parts_n.append(sc.tnode[lv_[si], pos, cl_[si]])
        parts_g.append(g[si, pos])
    m = kind == 1
    if m.any():
        parts_s.append(chosen[m])
        parts_n.append(sc.single[col[m]])
        parts_g.append(np.full(int(m.sum()), n))
    m = kind == 2
    if m.any():
        R = sc.ref_nodes.size
        parts_s.append(np.repeat(chosen[m], R))
        parts_n.append(np.tile(sc.ref_nodes, int(m.sum())))
        parts_g.append(np.tile(sc.ref_gpus, int(m.sum())))
    return (
        np.concatenate(parts_s).astype(np.int64),
        np.concatenate(parts_n).astype(np.int64),
        np.concatenate(parts_g).astype(np.int64),
    )


def stabilise(
    info: _JobInfo,
    sc: _SlotChoice,
    chosen: IntArray,
    entries: tuple[IntArray, IntArray, IntArray],
    *,
    size: IntArray,
    round_s: float,
    switch_aware: bool,
) -> tuple[IntArray, IntArray, IntArray, FloatArray, float]:
    """Keep each placement for as long as it stays free (moves only when forced).

    Walks the chosen slots in time order: the placement of the first slot is kept in every
    later chosen slot until its GPUs are reserved by others; then the planned placement of
    that slot takes over, and so on. One vectorised feasibility check per move.

    Args:
        info: The job's constants.
        sc: The speed floor's per-slot choices.
        chosen: Chosen slots, ascending, relative to the current slot, shape (S,).
        entries: The planned ``(slot, node, gpus)`` of the chosen slots (:func:`plan_entries`).
        size: GPUs per node, shape (N,).
        round_s: Slot length in seconds.
        switch_aware: Whether a move discounts the slot's progress by the restart delay.

    Returns:
        Entries ``(slot, node, gpus)``, estimated progress per chosen slot (work units) and
        the schedule's cost at the current prices.
    """
    e_slot, e_node, e_gpus = entries
    D = round_s
    col = np.minimum(chosen, sc.He - 1)
    S = chosen.size
    seg_start: list[int] = []
    i = 0
    while i < S:
        seg_start.append(i)
        m = e_slot == chosen[i]
        nodes, gpus = e_node[m], e_gpus[m]
        ok = (sc.free[nodes][:, col[i:]] >= gpus[:, None]).all(axis=0)
        bad = np.flatnonzero(~ok)
        i = S if bad.size == 0 else i + int(bad[0])
    starts = np.array(seg_start, dtype=np.int64)
    seg = np.searchsorted(starts, np.arange(S), side="right") - 1  # segment of each slot
    src = chosen[starts]  # slot whose placement each segment uses
    disc = max(0.0, 1.0 - info.restart_s / D) if switch_aware else 1.0
    parts: list[tuple[IntArray, IntArray, IntArray]] = []
    progress = np.zeros(S)
    for g, s0 in enumerate(src.tolist()):
        m = e_slot == s0
        nodes, gpus = e_node[m], e_gpus[m]
        idx = np.flatnonzero(seg == g)
        rate = placement_rate(info, size, nodes, gpus)
        progress[idx] = rate * D * (disc if g > 0 else 1.0)
        R = nodes.size
        parts.append((np.repeat(chosen[idx], R), np.tile(nodes, idx.size), np.tile(gpus, idx.size)))
    ns = np.concatenate([p[0] for p in parts])
    nn = np.concatenate([p[1] for p in parts])
    ng = np.concatenate([p[2] for p in parts])
    cost = float((ng * sc.price[nn, np.minimum(ns, sc.He - 1)]).sum())
    return ns, nn, ng, progress, cost
