"""Compiled conflict resolution of a decision step (optional: used when numba is installed).

:meth:`~hetsched.envs.claims.ClaimResolver.resolve_claims` and its helpers (``_claims``,
``_gang``, :func:`~hetsched.envs.claims.fill_gang`, :func:`~hetsched.envs.claims.is_spread`) are
the reference: they are what the rules in :mod:`hetsched.envs.core` specify and what runs with
``HETSCHED_NUMBA=0`` or without numba. On a small cluster they are some fifty numpy calls per
step on arrays of a few dozen elements, so their time is per-call overhead; the ``claims``
kernel here does the same work in one compiled call: the legality of every action, the
single-node winners of each job, the same-type gangs of the jobs no claimant hosts alone, and
the per-agent outcome flags. It returns the new entries; the caller records them
(``EnvCore._add_entries``) and handles evictions (preemptive envs) as the numpy path does.

The kernel performs the same IEEE operations as its reference (the capacities
``floor(free / per_gpu + EPS)``, the entries' ``gpus * per_gpu`` amounts), so the entries, the
flags and everything computed from them are identical bit for bit
(``tests/envs/test_kernels_claims.py`` compares both paths on random and rolled-out states).
Entries come out in the reference's order: the single-node winners in window order, then the
gangs in window order, each gang's nodes by capacity (descending, then node index).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetsched.numba_support import jit, numba_module

EPS = 1e-9  # hetsched.envs.core_state.EPS (a test checks)

#: ``EnvSettings.conflict_rule`` as the kernel's integer code.
RULE_CODES: dict[str, int] = {"lowest_index": 0, "best_fit": 1, "most_free": 2}

_compiled: dict[str, Any] = {}


def get() -> Any | None:
    """The compiled ``claims`` kernel, or None without numba (or with ``HETSCHED_NUMBA=0``)."""
    nb = numba_module()
    if nb is None:
        return None
    fn = _compiled.get("claims")
    if fn is None:
        fn = _compiled["claims"] = jit(nb, _claims_py)
    return fn


def _claims_py(
    a: Any,
    n_place: int,
    mask: Any,
    shape: Any,
    window: Any,
    gpu_count: Any,
    single: Any,
    cpg: Any,
    mpg: Any,
    mem_ok: Any,
    free_g: Any,
    free_c: Any,
    free_m: Any,
    rule: int,
    node_type: Any,
    n_types: int,
    node_gpus: Any,
    tput: Any,
    flags: Any,
    ints: Any,
    floats: Any,
) -> tuple[int, int]:
    """Resolve one decision step's actions (claims only; evictions are left to the caller).

    Args:
        a: One action per agent, int64 (N,); values outside ``[0, A)`` are invalid.
        n_place: Placement actions ``A_p`` (the no-op included); actions from there on evict.
        mask: Legal actions, int8 (N, A).
        shape: The placement codec's shape ``(K, L_g, L_c, L_m)``, int64 (4,).
        window: Job of each window slot (-1 empty), int64 (K,).
        gpu_count: GPUs per GPU level, int64 (J, L_g).
        single: Single-node legality flattened as the codec, bool (N, K L_g L_c L_m).
        cpg, mpg: CPU cores / GiB per GPU, float64 (N, K, L_c) and (N, K, L_m).
        mem_ok: Memory level allowed, bool (N, K, L_m).
        free_g, free_c, free_m: Free GPUs (int64), CPU cores and GiB per node, shape (N,).
        rule: :data:`RULE_CODES` of ``EnvSettings.conflict_rule``.
        node_type: GPU type per node, int64 (N,), values below ``n_types``.
        node_gpus: GPUs per node, int64 (N,).
        tput: Isolated throughput per job, type, GPU level and packed / spread, float64
            (J, T, L_g, 2); a gang needs a positive one, and the fastest gang wins.
        flags: Out, bool (5, N): invalid, granted, conflict, gang_failed, (evicted: left
            False).
        ints: Out, int64 (3, N): the new entries' job, node and GPUs.
        floats: Out, float64 (2, N): the new entries' CPU cores and GiB.

    Returns:
        ``(entries, placed)``: the number of entries written to ``ints`` / ``floats`` and the
        number of jobs placed.
    """
    N = a.shape[0]
    A = mask.shape[1]
    K, Lg, Lc, Lm = shape[0], shape[1], shape[2], shape[3]
    LcLm = Lc * Lm
    A1 = Lg * LcLm
    ck = np.full(N, -1, dtype=np.int64)  # claimed slot per agent (-1: no claim)
    clg = np.zeros(N, dtype=np.int64)
    clc = np.zeros(N, dtype=np.int64)
    clm = np.zeros(N, dtype=np.int64)
    win_n = np.full(K, -1, dtype=np.int64)  # single-node winner per slot
    win_s = np.zeros(K, dtype=np.int64)
    claimed = np.zeros(K, dtype=np.bool_)
    for n in range(N):
        for r in range(5):
            flags[r, n] = False
        x = a[n]
        ok = x >= 0 and x < A and mask[n, x] == 1
        flags[0, n] = not ok
        if not ok or x <= 0 or x >= n_place:
            continue
        i = x - 1
        k = i // A1
        rest = i - k * A1
        lg = rest // LcLm
        rest -= lg * LcLm
        lc = rest // Lm
        ck[n] = k
        clg[n] = lg
        clc[n] = lc
        clm[n] = rest - lc * Lm
        claimed[k] = True
        if single[n, i]:  # agents ascend: a strictly better score replaces the winner
            if rule == 1:
                s = free_g[n] - gpu_count[window[k], lg]
            elif rule == 2:
                s = -free_g[n]
            else:
                s = 0
            if win_n[k] < 0 or s < win_s[k]:
                win_n[k] = n
                win_s[k] = s
    # 1) One winner per job among the claimants that host it alone, in window order.
    e = 0
    placed = 0
    for k in range(K):
        n = win_n[k]
        if n < 0:
            continue
        g = gpu_count[window[k], clg[n]]
        ints[0, e] = window[k]
        ints[1, e] = n
        ints[2, e] = g
        floats[0, e] = g * cpg[n, k, clc[n]]
        floats[1, e] = g * mpg[n, k, clm[n]]
        flags[1, n] = True
        e += 1
        placed += 1
    for n in range(N):
        k = ck[n]
        if k >= 0 and win_n[k] >= 0 and win_n[k] != n:
            flags[2, n] = True
    # 2) Same-type gangs for the jobs claimed only by nodes that cannot host them alone.
    mem_nodes = np.empty(N, dtype=np.int64)
    room = np.empty(N, dtype=np.int64)
    best_nodes = np.empty(N, dtype=np.int64)
    best_g = np.empty(N, dtype=np.int64)
    for k in range(K):
        if not claimed[k] or win_n[k] >= 0:
            continue
        j = window[k]
        best_rate = 0.0
        best_cnt = -1
        best_lead = -1
        best_lc = 0
        best_lm = 0
        for t in range(n_types):
            lead = -1
            m = 0
            lg = lc = lm = 0
            G = 0
            for n in range(N):
                if ck[n] != k or node_type[n] != t:
                    continue
                if lead < 0:  # the lowest-index claimant of the type fixes the levels
                    lead = n
                    lg, lc, lm = clg[n], clc[n], clm[n]
                    G = gpu_count[j, lg]
                cc = np.floor(free_c[n] / cpg[n, k, lc] + EPS)
                cm = np.floor(free_m[n] / mpg[n, k, lm] + EPS)
                v = cc if cc < cm else cm  # np.minimum (no NaN: amounts are > 0)
                fg = float(free_g[n])
                if fg < v:
                    v = fg
                cap = np.int64(v) if mem_ok[n, k, lm] else 0
                if cap <= 0:  # fill_gang keeps positive rooms only
                    continue
                # Insert by room descending; members ascend, so ties keep node order.
                p = m
                while p > 0 and room[p - 1] < cap:
                    room[p] = room[p - 1]
                    mem_nodes[p] = mem_nodes[p - 1]
                    p -= 1
                room[p] = cap
                mem_nodes[p] = n
                m += 1
            if lead < 0:
                continue
            cum = 0
            cnt = 0
            while cnt < m and cum < G:
                cum += room[cnt]
                cnt += 1
            if m == 0 or cum < G:  # no room, or the rooms add up to fewer than G
                continue
            if cnt == 0:  # G <= 0: np.searchsorted(cum, G) is 0
                cnt = 1
                cum = room[0]
            top = 0
            for i in range(cnt):
                if node_gpus[mem_nodes[i]] > top:
                    top = node_gpus[mem_nodes[i]]
            spread = 1 if cnt > -(-G // top) else 0
            rate = tput[j, node_type[mem_nodes[0]], lg, spread]
            if not rate > 0:
                continue
            # the fastest gang wins, then the fewest nodes, then the lowest lead index
            if (
                best_lead < 0
                or rate > best_rate
                or (
                    rate == best_rate and (cnt < best_cnt or (cnt == best_cnt and lead < best_lead))
                )
            ):
                best_rate = rate
                best_cnt = cnt
                best_lead = lead
                best_lc = lc
                best_lm = lm
                for i in range(cnt):
                    best_nodes[i] = mem_nodes[i]
                    best_g[i] = room[i]
                best_g[cnt - 1] -= cum - G
        if best_lead < 0:
            for n in range(N):
                if ck[n] == k:
                    flags[3, n] = True
            continue
        for i in range(best_cnt):
            n = best_nodes[i]
            g = best_g[i]
            ints[0, e] = j
            ints[1, e] = n
            ints[2, e] = g
            floats[0, e] = g * cpg[n, k, best_lc]
            floats[1, e] = g * mpg[n, k, best_lm]
            flags[1, n] = True
            e += 1
        for n in range(N):
            if ck[n] == k and not flags[1, n]:
                flags[2, n] = True
        placed += 1
    return e, placed
