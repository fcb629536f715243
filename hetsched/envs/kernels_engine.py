"""The engine round of the env as compiled calls (optional: used when numba is installed).

:meth:`Simulator.advance <hetsched.sim.stepping.RoundStepper.advance>` is the reference: the
engine (:mod:`hetsched.sim`) stays numpy-only, and everything here reproduces its numbers bit for
bit (the same IEEE operations in the same order) for the case the env hands it most often:

* a trusted allocation (built by the env's own checked placement, not validated again);
* no space sharing, no node failures, no periodic checkpoints;
* GPU counts within the engine's signature table and node co-runner counts within its
  interference table.

Any other call returns None before touching the simulator, and the caller runs the engine.

A round is two compiled calls with two numpy calls between and after them:

1. ``prepare``: the per-job CPU and memory totals and, per entry, the clamped CPU ratio, the
   model's CPU exponent and the memory factor (:meth:`ThroughputModel.phi
   <hetsched.sim.throughput.ThroughputModel.phi>` less its power);
2. ``np.power`` of the CPU ratios, by numpy as in the engine (numba's ``pow`` may round
   differently);
3. ``round``: grouping by job, rates, restarts and preemptions, the number of rounds at once,
   progress, accounting, the jobs-in-system terms, status updates and the timeline's per-type
   GPU counts;
4. the sums of the jobs-in-system terms and of the allocation's CPUs and memory, by numpy (its
   pairwise summation).

The simulator's bookkeeping after a step (idle check, clock, admissions) is its own code.
``tests/envs/test_kernels_engine.py`` steps compiled and engine rounds in lockstep over env
episodes and compares every state array after every step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from hetsched.numba_support import jit, numba_module
from hetsched.sim.state import RoundRecord, _positive_seconds

if TYPE_CHECKING:
    from hetsched.sim.allocation import Allocation
    from hetsched.sim.engine import Simulator

_compiled: dict[str, Any] = {}

_PENDING, _RUNNING, _DONE = 1, 2, 3  # hetsched.sim.state's codes (a test checks)


def available() -> bool:
    """Whether the compiled round can run (numba importable and not disabled)."""
    return numba_module() is not None


def _kernels() -> tuple[Any, Any]:
    nb = numba_module()
    assert nb is not None
    if not _compiled:
        _compiled["prepare"] = jit(nb, _prepare_py)
        _compiled["round"] = jit(nb, _round_py)
    return _compiled["prepare"], _compiled["round"]


class EngineRound:
    """The compiled round for one simulator: its constant tables and scratch arrays.

    Args:
        sim: The simulator whose rounds it runs (its workload, cluster and throughput model
            are fixed for the simulator's life; ``reset`` keeps them).
    """

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        _kernels()  # compiled (or loaded from numba's cache) now, not in the first round
        wl, cl, tm = sim.workload, sim.cluster, sim.tm
        J, N = wl.num_jobs, cl.num_nodes
        self.model = np.ascontiguousarray(wl.model, dtype=np.int64)
        self.cpu_per_gpu = np.ascontiguousarray(wl.cpu_per_gpu, dtype=np.float64)
        self.mem_per_gpu = np.ascontiguousarray(wl.mem_per_gpu, dtype=np.float64)
        self.arrival = np.ascontiguousarray(wl.arrival, dtype=np.float64)
        self.node_type = np.ascontiguousarray(cl.node_type, dtype=np.int64)
        self.node_gpus = np.ascontiguousarray(cl.node_gpus, dtype=np.int64)
        self.node_variant = np.ascontiguousarray(cl.node_variant, dtype=np.int64)
        self.has_speed = sim._speed is not None
        self.speed = (
            np.ones((1, 1)) if sim._speed is None else np.ascontiguousarray(sim._speed, np.float64)
        )
        self.cpu_alpha = np.ascontiguousarray(tm.cpu_alpha, dtype=np.float64)
        self.cpu_ceiling = np.ascontiguousarray(tm.cpu_ceiling, dtype=np.float64)
        self.restart_delay = np.ascontiguousarray(tm.restart_delay_s, dtype=np.float64)
        self.iso_int = np.ascontiguousarray(tm._iso_int, dtype=np.float64)
        self.max_count = int(tm.max_count)
        # ThroughputModel.phi's memory constants, computed by the same Python float operations.
        self.mem_floor = float(tm.mem_floor)
        self.mem_rho = float(tm.mem_rho)
        self.mem_thr = tm.mem_floor - 1e-12
        self.rho_rest = 1.0 - tm.mem_rho
        self.span = max(1.0 - tm.mem_floor, 1e-9)
        # Scratch (left as found by every call): per-job sums and rows, per-node counts.
        self.sum_g = np.zeros(J)
        self.sum_c = np.zeros(J)
        self.sum_m = np.zeros(J)
        self.row_of = np.full(J, -1, dtype=np.int64)
        self.per_node = np.zeros(N, dtype=np.int64)
        self.K = int(sim.gpu_s_by_type.shape[1])

    def advance(self, alloc: Allocation, round_s: float, max_rounds: int) -> RoundRecord | None:
        """:meth:`Simulator.advance` of a trusted allocation, compiled; None when not covered.

        Args:
            alloc: The round's allocation (the env's own: not validated).
            round_s: Round length (s).
            max_rounds: As :meth:`Simulator.advance`'s.

        Returns:
            The step's :class:`RoundRecord`, or None (nothing changed) when the call is outside
            the compiled case; the caller then runs :meth:`Simulator.advance`.

        Raises:
            SimulationStalledError: As :meth:`Simulator.advance`.
        """
        sim = self.sim
        if sim.failures is not None or sim.config.checkpoint is not None:
            return None
        prepare, round_kernel = _kernels()
        keep = sim._keep_by_count
        E = alloc.size
        c_ratio = np.empty(E)
        alpha = np.empty(E)
        phi_mem = np.empty(E)
        state = prepare(
            alloc.job, alloc.node, alloc.gpus, alloc.cpus, alloc.mem, alloc.share,
            self.model, self.cpu_per_gpu, self.mem_per_gpu, self.cpu_alpha,
            self.sum_g, self.sum_c, self.sum_m, self.per_node,
            keep.shape[0], sim._sig_table.shape[1],
            self.mem_thr, self.mem_floor, self.mem_rho, self.rho_rest, self.span,
            c_ratio, alpha, phi_mem,
        )  # fmt: skip
        if state < 0:  # space sharing, or counts outside the engine's tables
            return None
        if sim.done:
            return None  # the engine raises its error
        rs = _positive_seconds(round_s, "round_s")
        pc = np.power(c_ratio, alpha)  # numpy's pow, as in ThroughputModel.phi
        t0 = sim.time
        n_active = sim._next_arrival - sim._n_finished
        out = round_kernel(
            alloc.job, alloc.node, alloc.gpus, state == 1, pc, phi_mem,
            self.model, self.node_type, self.node_gpus, self.node_variant,
            self.cpu_ceiling, self.restart_delay, self.iso_int, self.max_count,
            self.speed, self.has_speed, keep, sim._sig_table, self.arrival,
            sim.status, sim.remaining, sim.attained_gpu_s, sim.run_s, sim.start_time,
            sim.finish_time, sim.restarts, sim.preemptions, sim.delay_left, sim.gpu_s_by_type,
            sim.effective_gpu_s, sim.sig, sim._running,
            self.row_of, self.per_node,
            t0, rs, max_rounds, float(sim.config.max_time_s), sim._next_arrival, n_active,
            sim._active_lo, self.K,
        )  # fmt: skip
        run_idx, running, fin_idx, restarted, keep_e, last, in_sys, by_type, n_rounds, dt = out
        sim.last_rate = last
        sim._running = running
        sim._n_finished += int(fin_idx.shape[0])
        sim.current = alloc.select(keep_e) if fin_idx.shape[0] else alloc
        busy = int(by_type.sum())  # the GPUs held: integer counts, exact in float64
        if sim.config.record_timeline:
            n_run = int(run_idx.shape[0])
            sim._timeline.append(
                (t0, dt, float(busy), float(n_run), float(n_active - n_run),
                 float(alloc.cpus.sum()), float(alloc.mem.sum()),
                 *by_type[sim._types_present].tolist())
            )  # fmt: skip
        sim._check_idle(int(run_idx.shape[0]), n_active, n_rounds)
        sim._next_round(t0 + dt, n_rounds, n_active - int(fin_idx.shape[0]))
        return RoundRecord(
            t0=t0,
            dt=dt,
            rounds=n_rounds,
            completed=fin_idx,
            restarted=restarted,
            busy_gpus=busy,
            jobs_in_system_s=float(in_sys.sum()),
        )


def fast_advance(
    sim: Simulator, alloc: Allocation, round_s: float, max_rounds: int
) -> RoundRecord | None:
    """The compiled round of ``sim`` (built on first use and kept on it), or None.

    See :meth:`EngineRound.advance`.
    """
    er: EngineRound | None = sim.__dict__.get("_engine_round")
    if er is None:
        er = EngineRound(sim)
        sim.__dict__["_engine_round"] = er
    return er.advance(alloc, round_s, max_rounds)


# ---------------------------------------------------------------------- kernels (numba)
def _prepare_py(
    job: Any, node: Any, gpus: Any, cpus: Any, mem: Any, share: Any,
    model: Any, cpu_per_gpu: Any, mem_per_gpu: Any, cpu_alpha: Any,
    sum_g: Any, sum_c: Any, sum_m: Any, per_node: Any,
    keep_len: int, sig_cols: int,
    mem_thr: float, mem_floor: float, mem_rho: float, rho_rest: float, span: float,
    c_out: Any, alpha_out: Any, phi_mem_out: Any,
) -> int:  # fmt: skip
    """Per entry: the CPU ratio clamped at 0, the CPU exponent and the memory factor.

    The engine's ``RateModel._resource_ratios`` and the memory part of ``ThroughputModel.phi``.

    Returns:
        -1 when the round is outside the compiled case (nothing written but the outputs), 1
        when some job has several entries, 0 when every job has one.
    """
    E = job.shape[0]
    ok = True
    for e in range(E):
        if share[e] >= 0 or gpus[e] < 0 or gpus[e] >= sig_cols:
            ok = False
        per_node[node[e]] += 1
    multi = False
    for e in range(E):
        if per_node[node[e]] >= keep_len:
            ok = False
        sum_g[job[e]] += 1.0  # entry count per job (reset below)
    for e in range(E):
        if sum_g[job[e]] > 1.0:
            multi = True
        sum_g[job[e]] = 0.0
        per_node[node[e]] = 0
    if not ok:
        return -1
    if multi:  # per-job totals in entry order (np.bincount's order)
        for e in range(E):
            j = job[e]
            sum_g[j] += float(gpus[e])
            sum_c[j] += cpus[e]
            sum_m[j] += mem[e]
    for e in range(E):
        j = job[e]
        if multi:
            g, c, m = sum_g[j], sum_c[j], sum_m[j]
        else:
            g, c, m = float(gpus[e]), cpus[e], mem[e]
        gj = g if g >= 1.0 else 1.0
        cr = c / (gj * cpu_per_gpu[j])
        mr = m / (gj * mem_per_gpu[j])
        c_out[e] = cr if (cr >= 0.0 or cr != cr) else 0.0  # np.maximum(cr, 0.0)
        alpha_out[e] = cpu_alpha[model[j]]
        if mr >= 1.0:
            phi_mem_out[e] = 1.0
        elif mr >= mem_thr:
            phi_mem_out[e] = mem_rho + rho_rest * (mr - mem_floor) / span
        else:
            phi_mem_out[e] = 0.0
    if multi:
        for e in range(E):
            j = job[e]
            sum_g[j] = 0.0
            sum_c[j] = 0.0
            sum_m[j] = 0.0
    return 1 if multi else 0


def _round_py(
    job: Any, node: Any, gpus: Any, multi: bool, pc: Any, phi_mem: Any,
    model: Any, node_type: Any, node_gpus: Any, node_variant: Any,
    cpu_ceiling: Any, restart_delay: Any, iso_int: Any, max_count: int,
    speed: Any, has_speed: bool, keep: Any, sig_table: Any, arrival: Any,
    status: Any, remaining: Any, attained: Any, run_s: Any, start_time: Any,
    finish_time: Any, restarts: Any, preemptions: Any, delay_left: Any, gpu_s_by_type: Any,
    effective: Any, sig: Any, prev_run: Any,
    row_of: Any, per_node: Any,
    t0: float, rs: float, max_rounds: int, max_time_s: float, next_arrival: int,
    n_active: int, active_lo: int, K: int,
) -> Any:  # fmt: skip
    """One engine step after the CPU powers (see the module docstring); returns
    ``(run_idx, running, fin_idx, restarted, keep_entries, last_rate, in_sys, gpus_by_type,
    n_rounds, dt)``."""
    E = job.shape[0]
    J = status.shape[0]
    # Running jobs, ascending (group_by_job), and each entry's row.
    uniq = np.empty(E, dtype=np.int64)
    R = 0
    for e in range(E):
        j = job[e]
        if row_of[j] == -1:
            row_of[j] = -2
            uniq[R] = j
            R += 1
    run_idx = np.sort(uniq[:R])
    for r in range(R):
        row_of[run_idx[r]] = r
    row = np.empty(E, dtype=np.int64)
    for e in range(E):
        row[e] = row_of[job[e]]
    # Per job: GPUs, nodes, the biggest node's GPUs and the placement hash.
    g_run = np.zeros(R, dtype=np.int64)
    n_nodes = np.zeros(R, dtype=np.int64)
    biggest = np.zeros(R, dtype=np.int64)
    new_sig = np.zeros(R, dtype=np.uint64)
    for e in range(E):
        r = row[e]
        g_run[r] += gpus[e]
        n_nodes[r] += 1
        ng = node_gpus[node[e]]
        if ng > biggest[r]:
            biggest[r] = ng
        new_sig[r] += sig_table[node[e], gpus[e]]
        per_node[node[e]] += 1
    # Entry rates: isolated x CPU/memory factor x node co-runners; per job the slowest entry.
    rate = np.empty(R)
    iso = np.empty(R)
    seen = np.zeros(R, dtype=np.bool_)
    for e in range(E):
        r = row[e]
        j = job[e]
        m = model[j]
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
        base = iso_int[m, node_type[node[e]], idx, si]
        if has_speed:
            base = base * speed[m, node_variant[node[e]] + 1]
        # np.minimum(x, y) is `x if x <= y or x != x else y` (NaN propagates).
        p, cc = pc[e], cpu_ceiling[m]
        phi = (p if p <= cc or p != p else cc) * phi_mem[e]
        kf = keep[per_node[node[e]]]
        er = base * phi * (kf if kf <= 1.0 or kf != kf else 1.0)
        if seen[r]:
            x = rate[r]
            rate[r] = x if x <= er or x != x else er
            x = iso[r]
            iso[r] = x if x <= base or x != x else base
        else:
            rate[r] = er
            iso[r] = base
            seen[r] = True
    for e in range(E):
        per_node[node[e]] = 0
    if multi:
        for r in range(R):
            if not np.isfinite(rate[r]):
                rate[r] = 0.0
            if not np.isfinite(iso[r]):
                iso[r] = 0.0
    # Restarts and preemptions (RoundStepper._restarts).
    n_pre = 0
    preempted = np.empty(prev_run.shape[0], dtype=np.int64)
    for i in range(prev_run.shape[0]):
        if row_of[prev_run[i]] < 0:
            preempted[n_pre] = prev_run[i]
            n_pre += 1
    first = np.zeros(R, dtype=np.bool_)
    changed_n = 0
    restarted_buf = np.empty(R, dtype=np.int64)
    for r in range(R):
        j = run_idx[r]
        started = not np.isnan(start_time[j])
        if started and (status[j] != _RUNNING or new_sig[r] != sig[j]):
            restarted_buf[changed_n] = j
            changed_n += 1
        first[r] = not started
    for i in range(changed_n):
        j = restarted_buf[i]
        restarts[j] += 1
        delay_left[j] = restart_delay[model[j]]
    for i in range(n_pre):
        j = preempted[i]
        preemptions[j] += 1
        delay_left[j] = 0.0
    for r in range(R):
        if first[r]:
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
    fin_buf = np.empty(R, dtype=np.int64)
    n_fin = 0
    finishes = np.zeros(R, dtype=np.bool_)
    held_r = np.empty(R)
    last = np.zeros(J)
    n_keep = 0
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
            fin_buf[n_fin] = j
            n_fin += 1
        else:
            n_keep += 1
        finishes[r] = fin
        held_r[r] = held
        run_s[j] += held
        attained[j] += held * g_run[r]
        eff = rate[r] / iso[r] if iso[r] > 0 else 0.0
        effective[j] += (held - busy) * g_run[r] * (eff if eff <= 1.0 or eff != eff else 1.0)
        last[j] = 0.0 if fin else rate[r]
    by_type = np.zeros(K)
    for e in range(E):
        k = node_type[node[e]]
        gpu_s_by_type[job[e], k] += gpus[e] * held_r[row[e]]
        by_type[k] += gpus[e]
    # Jobs-in-system terms over [t0, t0 + dt] (before the status updates).
    in_sys = np.full(n_active, dt)
    if n_fin:
        p = 0
        f = 0
        for j in range(active_lo, next_arrival):
            s = status[j]
            if s == _PENDING or s == _RUNNING:
                if f < n_fin and fin_buf[f] == j:
                    in_sys[p] = finish_time[j] - t0
                    f += 1
                p += 1
    for i in range(n_pre):
        status[preempted[i]] = _PENDING
    running = np.empty(n_keep, dtype=np.int64)
    q = 0
    for r in range(R):
        j = run_idx[r]
        sig[j] = new_sig[r]
        if finishes[r]:
            status[j] = _DONE
        else:
            status[j] = _RUNNING
            running[q] = j
            q += 1
    keep_e = np.empty(E, dtype=np.bool_)
    for e in range(E):
        keep_e[e] = not finishes[row[e]]
    return (run_idx, running, fin_buf[:n_fin].copy(), restarted_buf[:changed_n].copy(), keep_e,
            last, in_sys, by_type, n_rounds, dt)  # fmt: skip
