"""Compiled kernels of Hadar's dual subroutine (optional: used when numba is installed).

The vectorised numpy code of :mod:`hetsched.baselines.hadar_dual` is the reference: it is what
the docstrings specify and what runs without numba. On a small cluster (``sia_64``: 11 nodes)
one subroutine call is a few hundred numpy calls on arrays of a few hundred elements, so its time
is mostly per-call overhead, and busy rounds make hundreds of calls (re-plans of waiting jobs,
backfilling). The kernel here fuses the costliest part, the completion-slot search of
:meth:`~hetsched.baselines.hadar_dual.HadarDual._best_schedule` (rank the slots by cost per
progress, then for every completion slot take slots in rank order until the work is covered),
into one compiled loop.

The kernel performs the same IEEE operations in the same order as the reference (sequential
sums, a stable sort), so its results are identical bit for bit; ``tests/baselines/test_hadar.py``
checks this on random inputs and through the decision fingerprint.

numba ships in the ``rl`` extra. ``HETSCHED_NUMBA=0`` in the environment selects the numpy path
(the same switch as :mod:`hetsched.envs.kernels`); so does a missing or broken numba. The kernel
is compiled on first use and cached on disk (numba's ``cache=True``).
"""

from __future__ import annotations

import functools
import os
from types import ModuleType
from typing import Any

import numpy as np

#: Set to "0" to use the numpy reference path even when numba is installed.
ENV_VAR = "HETSCHED_NUMBA"


@functools.cache
def _import_numba() -> ModuleType | None:
    """numba, or None when it is not installed or cannot be imported."""
    try:
        import numba
    except Exception:
        return None
    return numba


def numba_module() -> ModuleType | None:
    """The numba module, or None when it is disabled by :data:`ENV_VAR` or not importable."""
    if os.environ.get(ENV_VAR, "1").strip() == "0":
        return None
    return _import_numba()


_compiled: dict[str, Any] = {}


def get(name: str) -> Any | None:
    """The compiled kernel ``name`` (``"schedule"``), or None without numba."""
    nb = numba_module()
    if nb is None:
        return None
    fn = _compiled.get(name)
    if fn is None:
        py = {"schedule": schedule_search}[name]
        try:
            fn = nb.njit(cache=True, error_model="numpy", nogil=True)(py)
        except RuntimeError:  # no writable cache location: compile once per process
            fn = nb.njit(cache=False, error_model="numpy", nogil=True)(py)
        _compiled[name] = fn
    return fn


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
