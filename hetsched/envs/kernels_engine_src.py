"""The compiled engine round's kernel sources (plain Python that numba compiles).

:mod:`hetsched.envs.kernels_engine` compiles these functions and drives them; its docstring
says what a round computes and which simulator numbers it reproduces bit for bit. The module
holds only the kernels and the constants they read, so numba's on-disk cache is keyed by
this file.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_PENDING, _RUNNING, _DONE = 1, 2, 3  # hetsched.sim.state's codes (a test checks)
_MAX_IDLE = 1 << 62  # idle-round limits above this are the same as this one

# Rows of the round kernel's per-job int64 scratch: the running jobs (ascending), their GPUs,
# nodes, biggest node, flags; the preempted, finished, restarted and still running jobs.
_JOBS, _GPUS, _NODES, _BIG, _FLAGS, _PRE, _FIN, _RESTARTED, _RUN = range(9)
_ISCR_ROWS = 9


def _prepare_py(
    job: Any, node: Any, gpus: Any, cpus: Any, mem: Any, share: Any,
    model: Any, per_gpu: Any, per_model: Any, memc: Any, sums: Any, ints: Any,
    keep_len: int, sig_cols: int, ent: Any,
) -> int:  # fmt: skip
    """Per entry: the CPU ratio clamped at 0, the CPU exponent and the memory factor.

    The engine's ``RateModel._resource_ratios`` and the memory part of ``ThroughputModel.phi``,
    written to ``ent[0]``, ``ent[1]`` and ``ent[2]``.

    Returns:
        -1 when the round is outside the compiled case (nothing written but ``ent``), 1 when
        some job has several entries, 0 when every job has one.
    """
    E = job.shape[0]
    J = sums.shape[1]
    ok = True
    for e in range(E):
        if share[e] >= 0 or gpus[e] < 0 or gpus[e] >= sig_cols:
            ok = False
        ints[J + node[e]] += 1
    multi = False
    for e in range(E):
        if ints[J + node[e]] >= keep_len:
            ok = False
        sums[0, job[e]] += 1.0  # entries per job (reset below)
    for e in range(E):
        if sums[0, job[e]] > 1.0:
            multi = True
        sums[0, job[e]] = 0.0
        ints[J + node[e]] = 0
    if not ok:
        return -1
    if multi:  # per-job totals in entry order (np.bincount's order)
        for e in range(E):
            j = job[e]
            sums[0, j] += float(gpus[e])
            sums[1, j] += cpus[e]
            sums[2, j] += mem[e]
    mem_thr, mem_floor, mem_rho, rho_rest, span = memc[0], memc[1], memc[2], memc[3], memc[4]
    for e in range(E):
        j = job[e]
        if multi:
            g, c, m = sums[0, j], sums[1, j], sums[2, j]
        else:
            g, c, m = float(gpus[e]), cpus[e], mem[e]
        gj = g if g >= 1.0 else 1.0
        cr = c / (gj * per_gpu[0, j])
        mr = m / (gj * per_gpu[1, j])
        ent[0, e] = cr if (cr >= 0.0 or cr != cr) else 0.0  # np.maximum(cr, 0.0)
        ent[1, e] = per_model[0, model[j]]
        if mr >= 1.0:
            ent[2, e] = 1.0
        elif mr >= mem_thr:
            ent[2, e] = mem_rho + rho_rest * (mr - mem_floor) / span
        else:
            ent[2, e] = 0.0
    if multi:
        for e in range(E):
            j = job[e]
            sums[0, j] = 0.0
            sums[1, j] = 0.0
            sums[2, j] = 0.0
    return 1 if multi else 0


def _round_py(
    job: Any, node: Any, gpus: Any, pc: Any, ent: Any, multi: bool,
    model: Any, nodes: Any, per_model: Any, iso_int: Any, max_count: int,
    keep: Any, sig_table: Any, arrival: Any,
    status: Any, remaining: Any, attained: Any, run_s: Any, start_time: Any,
    finish_time: Any, restarts: Any, preemptions: Any, delay_left: Any,
    gpu_s_by_type: Any, effective: Any, sig: Any, prev_run: Any,
    ints: Any, iscr: Any, new_sig: Any, fscr: Any, row: Any,
    last: Any, keep_e: Any, by_type: Any, in_sys: Any,
    t0: float, rs: float, max_rounds: int, max_time_s: float, next_arrival: int,
    n_active: int, active_lo: int, idle: int, max_idle: int,
) -> Any:  # fmt: skip
    """One engine step after the CPU powers (see the module docstring).

    Writes the simulator's arrays, ``last`` (the new ``last_rate``), ``keep_e`` (entries whose
    job still runs), ``by_type`` (GPUs per type), ``in_sys`` (jobs-in-system terms) and the
    rows ``_FIN``, ``_RESTARTED`` and ``_RUN`` of ``iscr``.

    Returns:
        ``(running jobs, still running, finished, restarted, rounds, busy GPUs, stalled,
        first active job, next arrival, idle rounds, dt, time after the step)``.
    """
    E = job.shape[0]
    J = status.shape[0]
    K = gpu_s_by_type.shape[1]
    row_of = ints  # ints[:J]: -1, or a running job's row; ints[J:]: entries per node
    run_idx = iscr[_JOBS]
    g_run, n_nodes, biggest, flags = iscr[_GPUS], iscr[_NODES], iscr[_BIG], iscr[_FLAGS]
    rate, iso, held_r = fscr[0], fscr[1], fscr[2]
    # Running jobs, ascending (group_by_job; insertion sort: few jobs), and each entry's row.
    R = 0
    for e in range(E):
        j = job[e]
        if row_of[j] == -1:
            row_of[j] = -2
            i = R
            while i > 0 and run_idx[i - 1] > j:
                run_idx[i] = run_idx[i - 1]
                i -= 1
            run_idx[i] = j
            R += 1
    for r in range(R):
        row_of[run_idx[r]] = r
        g_run[r] = 0
        n_nodes[r] = 0
        biggest[r] = 0
        new_sig[r] = 0
        flags[r] = 0  # bit 0: rate seen, bit 1: first start, bit 2: finishes
    for e in range(E):
        row[e] = row_of[job[e]]
    # Per job: GPUs, nodes, the biggest node's GPUs and the placement hash (wraps mod 2^64).
    for e in range(E):
        r = row[e]
        g_run[r] += gpus[e]
        n_nodes[r] += 1
        ng = nodes[1, node[e]]
        if ng > biggest[r]:
            biggest[r] = ng
        new_sig[r] += sig_table[node[e], gpus[e]]
        ints[J + node[e]] += 1
    # Entry rates: isolated x CPU/memory factor x node co-runners; per job the slowest entry.
    # np.minimum(x, y) is `x if x <= y or x != x else y` (NaN propagates).
    for e in range(E):
        r = row[e]
        m = model[job[e]]
        if multi:
            total = g_run[r]
            b = biggest[r] if biggest[r] > 1 else 1
            need = -((-total) // b)
            si = 1 if n_nodes[r] > need else 0
        else:
            total = gpus[e]
            si = 0
        idx = total if total < max_count + 1 else max_count + 1
        idx = idx if idx > 0 else 0
        base = iso_int[m, nodes[0, node[e]], idx, si]
        p, cc = pc[e], per_model[1, m]
        phi = (p if p <= cc or p != p else cc) * ent[2, e]
        kf = keep[ints[J + node[e]]]
        er = base * phi * (kf if kf <= 1.0 or kf != kf else 1.0)
        if flags[r] & 1:
            x = rate[r]
            rate[r] = x if x <= er or x != x else er
            x = iso[r]
            iso[r] = x if x <= base or x != x else base
        else:
            rate[r] = er
            iso[r] = base
            flags[r] = 1
    for e in range(E):
        ints[J + node[e]] = 0
    if multi:
        for r in range(R):
            if not np.isfinite(rate[r]):
                rate[r] = 0.0
            if not np.isfinite(iso[r]):
                iso[r] = 0.0
    # Restarts and preemptions (RoundStepper._restarts).
    preempted = iscr[_PRE]
    n_pre = 0
    for i in range(prev_run.shape[0]):
        if row_of[prev_run[i]] < 0:
            preempted[n_pre] = prev_run[i]
            n_pre += 1
    restarted = iscr[_RESTARTED]
    n_restart = 0
    for r in range(R):
        j = run_idx[r]
        started = not np.isnan(start_time[j])
        if started and (status[j] != _RUNNING or new_sig[r] != sig[j]):
            restarted[n_restart] = j
            n_restart += 1
        if not started:
            flags[r] |= 2
    for i in range(n_restart):
        j = restarted[i]
        restarts[j] += 1
        delay_left[j] = per_model[2, model[j]]
    for i in range(n_pre):
        j = preempted[i]
        preemptions[j] += 1
        delay_left[j] = 0.0
    for r in range(R):
        if flags[r] & 2:
            start_time[run_idx[r]] = t0
    for e in range(E):
        row_of[job[e]] = -1
    # Rounds at once (RoundStepper._rounds_at_once; no failures).
    n_rounds = 1
    if max_rounds > 1:
        horizon = np.inf
        if next_arrival < J:
            horizon = arrival[next_arrival] - t0
        if R:
            fmin = 0.0
            for r in range(R):
                j = run_idx[r]
                f = delay_left[j] + remaining[j] / rate[r]
                fmin = f if r == 0 or f != f or (f < fmin) else fmin
            if fmin < horizon:
                horizon = fmin
        h2 = max_time_s - t0
        if h2 < horizon:
            horizon = h2
        if np.isfinite(horizon):
            v = np.ceil(horizon / rs - 1e-9)
            w = v if v < max_rounds else float(max_rounds)
            n_rounds = int(w) if w > 1 else 1
        else:
            n_rounds = max_rounds
    dt = rs * n_rounds
    # Progress, accounting and status (RoundStepper.advance).
    fin_idx = iscr[_FIN]
    n_fin = 0
    busy_gpus = 0
    for r in range(R):
        j = run_idx[r]
        delay = delay_left[j]
        rem = remaining[j]
        busy = delay if delay <= dt or delay != delay else dt
        work_time = dt - busy
        need_time = rem / rate[r]
        fin = need_time <= work_time + 1e-9
        held = busy + need_time if fin else dt
        progress = rem if fin else rate[r] * work_time
        delay_left[j] = delay - busy
        remaining[j] = 0.0 if fin else rem - progress
        if fin:
            finish_time[j] = t0 + held
            fin_idx[n_fin] = j
            n_fin += 1
            flags[r] |= 4
        held_r[r] = held
        run_s[j] += held
        attained[j] += held * g_run[r]
        eff = rate[r] / iso[r] if iso[r] > 0 else 0.0
        effective[j] += (held - busy) * g_run[r] * (eff if eff <= 1.0 or eff != eff else 1.0)
        last[j] = 0.0 if fin else rate[r]
        busy_gpus += g_run[r]
    for k in range(K):
        by_type[k] = 0.0
    for e in range(E):
        k = nodes[0, node[e]]
        gpu_s_by_type[job[e], k] += gpus[e] * held_r[row[e]]
        by_type[k] += gpus[e]  # the timeline's GPUs per type (np.bincount's order)
    # Jobs-in-system terms over [t0, t0 + dt] (before the status updates).
    for i in range(n_active):
        in_sys[i] = dt
    if n_fin:
        p = 0
        f = 0
        for j in range(active_lo, next_arrival):
            s = status[j]
            if _PENDING <= s <= _RUNNING:  # active (pending or running)
                if f < n_fin and fin_idx[f] == j:
                    in_sys[p] = finish_time[j] - t0
                    f += 1
                p += 1
    for i in range(n_pre):
        status[preempted[i]] = _PENDING
    running = iscr[_RUN]
    n_keep = 0
    for r in range(R):
        j = run_idx[r]
        sig[j] = new_sig[r]
        if flags[r] & 4:
            status[j] = _DONE
        else:
            status[j] = _RUNNING
            running[n_keep] = j
            n_keep += 1
    for e in range(E):
        keep_e[e] = (flags[row[e]] & 4) == 0
    # Idle check and the next round boundary (RoundStepper._check_idle, _next_round).
    stalled = False
    if R == 0 and n_active > 0:
        stalled = idle + n_rounds > max_idle
        idle += n_rounds
    else:
        idle = 0
    t1 = t0 + dt
    if not stalled:
        while active_lo < J and status[active_lo] == _DONE:
            active_lo += 1
        admitted_before = next_arrival
        for rep in range(2):
            hi = int(np.searchsorted(arrival, t1, side="right"))
            if hi > next_arrival:
                for j in range(next_arrival, hi):
                    status[j] = _PENDING
                next_arrival = hi
            if rep == 1:
                break
            if n_active - n_fin + (next_arrival - admitted_before) == 0 and next_arrival < J:
                a_next = arrival[next_arrival]
                t1 = a_next if a_next > t1 else t1
            else:
                break
    return (R, n_keep, n_fin, n_restart, n_rounds, busy_gpus, stalled, active_lo,
            next_arrival, idle, dt, t1)  # fmt: skip


def _usage_py(
    job: Any, node: Any, gpus: Any, cpus: Any, mem: Any, share: Any,
    node_gpus: Any, node_cpus: Any, node_mem: Any, ints: Any,
    free_g: Any, free_c: Any, free_m: Any, count: Any, status: Any, lo: int, hi: int, pend: Any,
) -> Any:  # fmt: skip
    """Free resources and entries per node of an allocation, its distinct jobs, and the
    pending jobs among ``lo .. hi - 1`` (see :meth:`EngineRound.usage`).

    Returns:
        ``(distinct jobs, pending jobs)``; ``(-1, 0)`` (nothing written) if entries share GPUs.
    """
    E = job.shape[0]
    N = free_g.shape[0]
    for e in range(E):
        if share[e] >= 0:
            return -1, 0
    for n in range(N):
        free_g[n] = 0
        free_c[n] = 0.0
        free_m[n] = 0.0
        count[n] = 0
    n_jobs = 0
    for e in range(E):  # per-node sums in entry order (np.bincount's)
        n = node[e]
        free_g[n] += gpus[e]
        free_c[n] += cpus[e]
        free_m[n] += mem[e]
        count[n] += 1
        if ints[job[e]] == -1:
            ints[job[e]] = -2
            n_jobs += 1
    for e in range(E):
        ints[job[e]] = -1
    for n in range(N):
        free_g[n] = node_gpus[n] - free_g[n]
        free_c[n] = node_cpus[n] - free_c[n]
        free_m[n] = node_mem[n] - free_m[n]
    n_pend = 0
    for j in range(lo, hi):
        if status[j] == _PENDING:
            pend[n_pend] = j
            n_pend += 1
    return n_jobs, n_pend
