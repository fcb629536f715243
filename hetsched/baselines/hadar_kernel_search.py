"""Compiled-kernel bodies of Hadar's schedule search (see :mod:`hetsched.baselines.hadar_kernels`).

Plain Python over numpy arrays, written for ``numba.njit``: the greedy search over completion
slots (``hadar_schedule.schedule_search``) and the fused search over every speed floor with the
utility and the stabilised entries (``HadarDual._best_schedule`` and the floor loop of
``HadarDual.dual_subroutine``), with the same IEEE operations in the same order as that numpy
reference. Helpers called from a kernel are module globals that
:func:`hetsched.baselines.hadar_kernels.compiled` replaces by their compiled forms.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetsched.baselines.hadar_kernel_place import _pairwise_sum_py, plan_entries


def schedule_search(
    cost: Any, prog: Any, work: float, he: int
) -> tuple[int, int, Any, Any, Any, Any, Any]:
    """Greedy schedules for every completion slot (plain-Python form of the kernel).

    The same search as the non-partial branch of ``HadarDual._best_schedule`` with
    :func:`hetsched.baselines.hadar_plan._greedy_cuts`: the slots up to the last useful
    completion slot are ranked by cost per progress (stable, infeasible ones last); for each
    completion slot tau from the first one by which the work can be done, the slots ``<= tau``
    with progress are taken in rank order until their progress reaches the work.

    Args:
        cost: Cost per slot of the window, shape (H,) (inf where infeasible).
        prog: Progress per slot in work units, shape (H,) (0 where infeasible).
        work: Work to cover W (the search covers ``W (1 - 1e-12)``).
        he: Computed columns: slots from ``he`` on repeat slot ``he - 1``.

    Returns:
        ``(tau_min, T, k, C, last, sig, pos)``: the first completion slot and the number of
        ranked slots (``T = 0``: the window cannot cover the work, a partial plan); per
        completion slot ``tau_min .. T - 1`` the rank of the last slot taken, the summed cost in
        rank order and the latest slot taken, shape (T - tau_min,); the slots by rank and
        whether each ranked slot has progress, shape (T,).
    """
    H = cost.shape[0]
    wt = work * (1.0 - 1e-12)
    acc = 0.0
    tau_min = -1
    for t in range(H):
        acc += prog[t]
        if tau_min < 0 and acc >= wt:
            tau_min = t
    if not acc >= wt:  # partial: the caller's numpy branch handles it
        e_i = np.zeros(0, dtype=np.int64)
        return 0, 0, e_i, np.zeros(0), e_i, e_i, np.zeros(0, dtype=np.bool_)
    tau_max = H - 1
    p0 = prog[he - 1]
    if he < H and p0 > 0:
        q = work / p0
        if q < H:
            tau_max = min(H - 1, he - 1 + int(np.ceil(q)))
    T = tau_max + 1
    ratio = np.empty(T)
    for t in range(T):
        ratio[t] = cost[t] / prog[t] if prog[t] > 0 else np.inf
    sig = np.argsort(ratio, kind="mergesort")
    p_sig = np.empty(T)
    c_sig = np.empty(T)
    pos = np.empty(T, dtype=np.bool_)
    for r in range(T):
        p_sig[r] = prog[sig[r]]
        c_sig[r] = cost[sig[r]]
        pos[r] = p_sig[r] > 0
    R = T - tau_min
    k = np.zeros(R, dtype=np.int64)
    c_out = np.zeros(R)
    last = np.zeros(R, dtype=np.int64)
    for i in range(R):
        tau = tau_min + i
        a = 0.0
        c = 0.0
        lst = -1
        found = False
        for r in range(T):
            if pos[r] and sig[r] <= tau:
                a += p_sig[r]
                c += c_sig[r]
                if sig[r] > lst:
                    lst = sig[r]
            if a >= wt:
                k[i] = r
                c_out[i] = c
                last[i] = lst
                found = True
                break
        if not found:  # numpy's argmax of an all-False row: rank 0
            m0 = pos[0] and sig[0] <= tau
            k[i] = 0
            c_out[i] = c_sig[0] if m0 else 0.0
            last[i] = sig[0] if m0 else -1
    return tau_min, T, k, c_out, last, sig, pos


def _utility_py(
    code: int, jct: float, t_star: float, weight: float, kappa: float, floor: float
) -> float:
    """``hadar_plan.utility_value`` for one JCT (linear, step or constant shape)."""
    d = jct / max(t_star, 1e-9)
    if code == 0:
        v = 1.0 - (d - 1.0) / kappa
    elif code == 1:
        v = 1.0 if d <= kappa else 0.0
    else:
        v = 1.0
    return weight * min(max(v, floor), 1.0)


def best_plan(
    b_cost: Any,
    b_prog: Any,
    kind: Any,
    level: Any,
    single_node: Any,
    rn: Any,
    rg: Any,
    rcnt: Any,
    take: Any,
    order: Any,
    free: Any,
    price: Any,
    work: float,
    now: float,
    arrival: float,
    D: float,
    t_star: float,
    code: int,
    weight: float,
    kappa: float,
    floor: float,
    n: int,
    size: Any,
    r: Any,
    rs: Any,
    disc: float,
) -> tuple[int, Any, Any, Any, Any, Any, float, float, float, float, bool]:
    """The best plan over every speed floor (plain-Python form of the fused kernel).

    For each floor, the schedule search of ``HadarDual._best_schedule`` (full or partial plan),
    its utility, and its stabilised entries; the floor with the highest ``mu`` wins (the first
    on ties), as in ``HadarDual.dual_subroutine``.

    Args:
        b_cost, b_prog: Cost and progress per floor and slot, shape (Lv, H).
        kind, level, single_node: Per floor and computed column, shape (Lv, He).
        rn, rg, rcnt: Each floor's reference placement and its length (see
            :func:`slot_choices_dense`).
        take: GPUs per price-ordered position, shape (Lv, N, He).
        order: Nodes by ascending price per computed column, shape (N, He).
        free, price: Free GPUs and price per node and computed column, shape (N, He).
        work: Work W to plan. now: current time (s). arrival: the job's arrival (s).
        D: slot length (s). t_star, code, weight, kappa, floor: the utility (``code`` from
            :data:`UTILITY_CODES`).
        n, size, r, rs, disc: the gang size, node sizes, rates and restart discount.

    Returns:
        ``(floor, slots, progress, entry_slot, entry_node, entry_gpus, cost, utility, mu, finish,
        partial)``: the winning floor (-1: no feasible slot, the other fields unused)
        and its plan.
    """
    Lv, H = b_cost.shape
    He = free.shape[1]
    tnode = np.empty(take.shape, dtype=np.int64)
    for lv in range(Lv):
        tnode[lv] = order
    e_i = np.zeros(0, dtype=np.int64)
    best = -1
    b_mu = -np.inf
    out_slots, out_prog = e_i, np.zeros(0)
    out_s, out_n, out_g = e_i, e_i, e_i
    out_cost, out_u, out_fin, out_part = 0.0, 0.0, 0.0, False
    base_t = now - arrival
    for fl in range(Lv):
        cost = b_cost[fl]
        prog = b_prog[fl]
        nf = 0
        for t in range(H):
            if prog[t] > 0:
                nf += 1
        if nf == 0:
            continue
        tau_min, T, k, C, lst, sig, pos = _schedule(cost, prog, work, He)
        partial = T == 0
        if not partial:
            i_best = 0
            v_best = -np.inf
            for i in range(k.shape[0]):
                jct = base_t + (lst[i] + 1) * D
                v = _utility(code, jct, t_star, weight, kappa, floor) - C[i]
                if i == 0 or v > v_best:
                    v_best = v
                    i_best = i
            tau = tau_min + i_best
            ki = k[i_best] + 1
            cnt = 0
            for q in range(ki):
                if sig[q] <= tau and pos[q]:
                    cnt += 1
            chosen = np.empty(cnt, dtype=np.int64)
            cnt = 0
            for q in range(ki):
                if sig[q] <= tau and pos[q]:
                    chosen[cnt] = sig[q]
                    cnt += 1
            chosen = np.sort(chosen)
            fbest = _utility(code, base_t + (lst[i_best] + 1) * D, t_star, weight, kappa, floor)
            finish = now + (lst[i_best] + 1) * D
            total = 0.0
        else:
            chosen = np.empty(nf, dtype=np.int64)
            pv = np.empty(nf)
            cv = np.empty(nf)
            nf = 0
            pmax = prog[0]
            for t in range(H):
                if prog[t] > pmax:
                    pmax = prog[t]
                if prog[t] > 0:
                    chosen[nf] = t
                    pv[nf] = prog[t]
                    cv[nf] = cost[t]
                    nf += 1
            P = _pairwise_sum(pv)
            rate_best = pmax / D
            finish = now + (chosen[nf - 1] + 1) * D + (work - P) / rate_best
            total = _pairwise_sum(cv) * work / P
            fbest = _utility(code, finish - arrival, t_star, weight, kappa, floor)
        c = rcnt[fl]
        es, en, eg, progress, c_new = _plan(
            chosen,
            kind[fl],
            level[fl],
            single_node[fl],
            take,
            tnode,
            rn[fl, :c],
            rg[fl, :c],
            free,
            price,
            n,
            size,
            r,
            rs,
            D,
            disc,
        )
        if not partial:
            total = c_new
        mu = fbest - total
        if best < 0 or mu > b_mu:
            best, b_mu = fl, mu
            out_slots, out_prog, out_s, out_n, out_g = chosen, progress, es, en, eg
            out_cost, out_u, out_fin, out_part = total, fbest, finish, partial
    return (
        best,
        out_slots,
        out_prog,
        out_s,
        out_n,
        out_g,
        out_cost,
        out_u,
        b_mu,
        out_fin,
        out_part,
    )


# Helpers of ``best_plan``: replaced by their compiled forms with the "best" kernel.
_schedule = schedule_search
_plan = plan_entries
_utility = _utility_py
_pairwise_sum = _pairwise_sum_py
