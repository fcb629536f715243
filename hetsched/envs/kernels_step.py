"""Compiled bookkeeping of a decision step (optional: used when numba is installed).

Two more of the env's small numpy sequences, each fused into one compiled call (the numpy code
stays the reference and runs with ``HETSCHED_NUMBA=0`` or without numba):

* ``round_start``: the free resources, entries per node and distinct running jobs at a round's
  start (:meth:`~hetsched.envs.rounds.RoundFlow._start_round`, for allocations without space
  sharing, which is every allocation the env builds);
* ``window``: the candidate window of :meth:`~hetsched.envs.rounds.RoundFlow.refresh` and its
  cheap fit test (:meth:`~hetsched.envs.rounds.RoundFlow._may_fit`);
* ``node_head``: the own-node columns of :meth:`FeatureBuilder.node_blocks` and the array parts
  of :meth:`FeatureBuilder.global_block` (busy GPUs per type, the free-GPU share).

Each performs the reference's IEEE operations in the same order (the per-node sums accumulate
entries in allocation order, as ``np.bincount`` does), so the results are identical bit for bit
(``tests/envs/test_kernels.py`` runs the compiled and numpy envs in lockstep;
``tests/envs/test_kernels_claims.py`` compares the two kernels with their references).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetsched.numba_support import jit, numba_module

_compiled: dict[str, Any] = {}


def get(name: str) -> Any | None:
    """The compiled kernel ``name`` (``"round_start"``, ``"window"`` or ``"node_head"``), or
    None without numba (or with ``HETSCHED_NUMBA=0``)."""
    nb = numba_module()
    if nb is None:
        return None
    fn = _compiled.get(name)
    if fn is None:
        py = _SOURCES[name]
        fn = _compiled[name] = jit(nb, py)
    return fn


def _round_start_py(
    node: Any,
    job: Any,
    gpus: Any,
    cpus: Any,
    mem: Any,
    share: Any,
    num_jobs: int,
    node_gpus: Any,
    node_cpus: Any,
    node_mem: Any,
    free_g: Any,
    free_c: Any,
    free_m: Any,
    count: Any,
) -> int:
    """Free resources and entries per node left by an allocation, and its distinct jobs.

    Args:
        node, job, gpus, cpus, mem, share: The allocation's entries, shape (E,).
        num_jobs: Jobs of the workload J (job indices lie below it).
        node_gpus, node_cpus, node_mem: Node capacities, shape (N,).
        free_g, free_c, free_m: Out, free GPUs (int64), CPU cores and GiB per node, shape (N,).
        count: Out, entries per node, int64 (N,).

    Returns:
        The number of distinct jobs, or -1 (outputs unspecified) if an entry shares GPUs
        (``share >= 0``; the caller then uses the numpy path).
    """
    N = node_gpus.shape[0]
    E = node.shape[0]
    for e in range(E):
        if share[e] >= 0:
            return -1
    used_g = np.zeros(N, dtype=np.int64)
    used_c = np.zeros(N)
    used_m = np.zeros(N)
    seen = np.zeros(num_jobs, dtype=np.bool_)
    for n in range(N):
        count[n] = 0
    jobs = 0
    for e in range(E):  # entry order: the sums round as np.bincount's
        n = node[e]
        used_g[n] += gpus[e]
        used_c[n] += cpus[e]
        used_m[n] += mem[e]
        count[n] += 1
        if not seen[job[e]]:
            seen[job[e]] = True
            jobs += 1
    for n in range(N):
        free_g[n] = node_gpus[n] - used_g[n]
        free_c[n] = node_cpus[n] - used_c[n]
        free_m[n] = node_mem[n] - used_m[n]
    return jobs


def _window_py(
    pending: Any,
    placed: Any,
    min_gpus: Any,
    free_g: Any,
    node_up: Any,
    use_up: bool,
    node_type: Any,
    n_types: int,
    window: Any,
    slot_ok: Any,
    backfill: int,
    allowed: Any,
) -> bool:
    """The window and the fit test (:meth:`~hetsched.envs.rounds.RoundFlow.window_jobs`).

    The first ``K - backfill`` slots hold the first waiting jobs not placed this round; the last
    ``backfill`` slots the next such jobs that may fit (all up nodes of a GPU type the job
    allows have at least its fewest GPUs free together), then, if too few may, the next ones
    that may not, all in ``pending`` order.

    Args:
        pending: Waiting jobs in window order, int64 (P,). placed: Placed this round, bool (J,).
        min_gpus: Fewest GPUs of each job at any legal level, int64 (J,).
        free_g: Free GPUs per node, int64 (N,). node_up: Node is up, bool (N,).
        use_up: Down nodes offer nothing (the env has failures).
        node_type: GPU type per node, int64 (N,); ``n_types`` types (``NUM_TYPES``).
        window: Out, the job of each slot (-1 empty), int64 (K,). slot_ok: Out, bool (K,).
        backfill: Backfill slots ``EnvSettings.window_backfill`` (0 <= backfill <= K).
        allowed: Allowed GPU types of each job, bool (J, n_types) (read only with backfill).

    Returns:
        Some window job may fit: one up node, or all up nodes of one type together, have at
        least the fewest GPUs any window job needs (the necessary condition of ``_may_fit``).
    """
    K = window.shape[0]
    per_type = np.zeros(n_types)
    top = -1
    for i in range(free_g.shape[0]):
        f = free_g[i] if (node_up[i] or not use_up) else 0
        if f > top:
            top = f
        per_type[node_type[i]] += f
    head = K - backfill
    skipped = np.empty(backfill, dtype=np.int64)  # waiting jobs passed over for a backfill slot
    n = 0
    n_skip = 0
    g = 0
    for i in range(pending.shape[0]):
        if n == K:
            break
        j = pending[i]
        if placed[j]:
            continue
        take = n < head
        if not take:  # a backfill slot: only a job that may fit now
            for t in range(n_types):
                if allowed[j, t] and per_type[t] >= min_gpus[j]:
                    take = True
                    break
        if take:
            window[n] = j
            n += 1
        elif n_skip < backfill:
            skipped[n_skip] = j
            n_skip += 1
    for s in range(n_skip):  # too few may fit: the next ones that may not
        if n == K:
            break
        window[n] = skipped[s]
        n += 1
    for k in range(K):
        if k >= n:
            window[k] = -1
        elif k == 0 or min_gpus[window[k]] < g:
            g = min_gpus[window[k]]
        slot_ok[k] = k < n
    if n == 0:
        return False
    if top >= g:
        return True
    best = per_type[0]
    for t in range(1, n_types):
        if per_type[t] > best:
            best = per_type[t]
    return best >= g


def _node_head_py(
    const: Any,
    free_g: Any,
    free_c: Any,
    free_m: Any,
    node_up: Any,
    count: Any,
    R: int,
    slowdown: Any,
    node_gpus: Any,
    node_cpus: Any,
    node_mem: Any,
    node_type: Any,
    gpus_per_type: Any,
    num_gpus: float,
    nodes: Any,
    glob: Any,
) -> bool:
    """The own-node head of :meth:`FeatureBuilder.node_blocks` and the array parts of
    :meth:`FeatureBuilder.global_block`.

    Args:
        const: The head's constant columns (``FeatureBuilder._node_head``), shape (N, T + 7).
        free_g, free_c, free_m: Free GPUs (int64), CPU cores and GiB per node, shape (N,).
        node_up: Node is up, shape (N,). count: Entries per node, int64 (N,).
        R: Resident slots. slowdown: Co-runner slowdown by entry count, shape (C,).
        node_gpus, node_cpus, node_mem: Node capacities (GPUs as float64), shape (N,).
        node_type: GPU type per node, shape (N,). gpus_per_type: GPUs per type, float64 (T,).
        num_gpus: GPUs of the cluster.
        nodes: Out, the first T + 7 columns are written, shape (N, >= T + 7).
        glob: Out, entries 2 .. T + 2 are written, shape (T + 6,).

    Returns:
        False (nothing written) if a node holds ``C`` entries or more: the caller extends
        ``slowdown`` and calls again.
    """
    N, H = const.shape
    T = gpus_per_type.shape[0]
    C = slowdown.shape[0]
    for n in range(N):
        if count[n] >= C:
            return False
    busy = np.zeros(T)
    free = 0
    for n in range(N):
        row = nodes[n]
        for i in range(H):
            row[i] = const[n, i]
        fg = free_g[n]
        row[T] = fg / node_gpus[n]
        row[T + 2] = free_c[n] / node_cpus[n]
        row[T + 3] = free_m[n] / node_mem[n]
        row[T + 4] = 1.0 if node_up[n] else 0.0
        v = count[n] / R
        row[T + 5] = v if v < 1.0 else 1.0  # np.minimum(count / R, 1.0)
        row[T + 6] = slowdown[count[n]]
        busy[node_type[n]] += node_gpus[n] - fg
        free += fg
    for t in range(T):
        g = gpus_per_type[t]
        glob[2 + t] = busy[t] / (g if g > 1.0 else 1.0)  # np.maximum(gpus, 1.0)
    glob[2 + T] = free / num_gpus
    return True


_SOURCES = {"round_start": _round_start_py, "window": _window_py, "node_head": _node_head_py}
