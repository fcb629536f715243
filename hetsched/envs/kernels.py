"""Compiled kernels for the env's hot path (optional: used when numba is installed).

The vectorised numpy methods of :class:`~hetsched.envs.features.FeatureBuilder` and
:class:`~hetsched.envs.core.EnvCore` are the reference: they are what the docstrings specify
and what runs without numba. A step of the multi-agent env on a small cluster is a few hundred
numpy calls on arrays of a few thousand elements, so most of its time is per-call overhead; the
kernels here fuse the costliest of those methods into one compiled loop each:

* ``mask`` = :meth:`FeatureBuilder.masks` with the window gather of ``_window_static``;
* ``resident`` = :meth:`EnvCore._resident` (slot layout plus
  :meth:`FeatureBuilder.entry_features`);
* ``observe`` = :meth:`FeatureBuilder.window_common`, :meth:`FeatureBuilder.window_node` and
  :meth:`FeatureBuilder.observations` (the per-agent array, clipped to [0, 1], as float32).

Each kernel performs the same IEEE operations in the same order as its reference, so the
outputs are identical bit for bit (``tests/envs/test_kernels.py`` checks this on random and on
rolled-out states; an env episode gives the same observations, masks and metrics either way).

numba ships in the ``rl`` extra. ``HETSCHED_NUMBA=0`` in the environment selects the numpy path
(for debugging, or where numba cannot be installed); so does a missing or broken numba. The
kernels are compiled on first use and cached on disk (numba's ``cache=True``), so only the
first process pays the compile time (about 1.3 s on the 2-core development machine); where no
cache location is writable they are compiled once per process instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetsched.numba_support import ENV_VAR as ENV_VAR  # re-exported: scripts/bench_env.py reads it
from hetsched.numba_support import jit, numba_module

EPS = 1e-9  # the same constants as hetsched.envs.features (a test checks)
HOUR = 3600.0

_compiled: dict[str, Any] = {}


def get(name: str) -> Any | None:
    """The compiled kernel ``name`` (``"mask"``, ``"resident"`` or ``"observe"``), or None
    without numba."""
    nb = numba_module()
    if nb is None:
        return None
    fn = _compiled.get(name)
    if fn is None:
        py = {"mask": _mask_py, "resident": _resident_py, "observe": _observe_py}[name]
        fn = _compiled[name] = jit(nb, py)
    return fn


def _mask_py(
    f: Any,
    b: Any,
    g: Any,
    w: Any,
    slot_ok: Any,
    node_up: Any,
    free_g: Any,
    free_c: Any,
    free_m: Any,
    group: Any,
    num_groups: int,
    mask: Any,
    legal: Any,
    single: Any,
    fits_any: Any,
    cpg: Any,
    mpg: Any,
    mem_ok: Any,
) -> None:
    """Fill the masks of :meth:`FeatureBuilder.masks`, gathering the window's static parts.

    Args:
        f, b, g: Static per-job parts (``_PerJobStatic.f``, ``.b``, ``.g``) of B jobs, shapes
            (N, B, L_c + L_m), (N, B, L_m + 1 + 2 A1), (B, A1), ``A1 = L_g L_c L_m``.
        w: The column of each window slot in those tables, shape (K,) (any valid column on
            empty slots).
        slot_ok: Slot holds a job, shape (K,). node_up: node is up, shape (N,).
        free_g, free_c, free_m: Free GPUs (int), CPU cores and GiB per node, shape (N,).
        group: Present-type group of each node, shape (N,); ``num_groups`` groups.
        mask: Out, int8 (N, 1 + K A1). legal, single: out, bool (N, K, A1). fits_any: out,
            bool (N, K). cpg: out, CPU cores per GPU (N, K, L_c); mpg: out, GiB
            per GPU (N, K, L_m); mem_ok: out, bool (N, K, L_m).
    """
    N, K, Lc = cpg.shape
    Lm = mpg.shape[2]
    A1 = g.shape[1]
    LcLm = Lc * Lm
    Lg = A1 // LcLm
    s0 = Lm + 1  # start of the packed-throughput flags in b, then the spread ones
    cap = np.empty((N, K, LcLm))  # GPUs that fit at each (CPU, memory) level pair
    type_cap = np.zeros((num_groups, K, LcLm))
    cap_m = np.empty(Lm)  # the memory levels' capacities of one (node, slot)
    for n in range(N):
        fg = float(free_g[n])
        p = group[n]
        for k in range(K):
            j = w[k]
            ok = 1.0 if (b[n, j, Lm] and slot_ok[k] and node_up[n]) else 0.0
            for m in range(Lm):
                mpg[n, k, m] = f[n, j, Lc + m]
                mem_ok[n, k, m] = b[n, j, m]
                mo = 1.0 if b[n, j, m] else 0.0
                cap_m[m] = np.floor(free_m[n] / f[n, j, Lc + m] + EPS) * mo
            for c in range(Lc):
                cpg[n, k, c] = f[n, j, c]
                cc = np.floor(free_c[n] / f[n, j, c] + EPS)
                if fg < cc:  # np.minimum(cap_c, free_g)
                    cc = fg
                cc = cc * ok
                for m in range(Lm):
                    cm = cap_m[m]
                    v = cm if cm < cc else cc  # np.minimum (no NaN: amounts are > 0)
                    cap[n, k, c * Lm + m] = v
                    type_cap[p, k, c * Lm + m] += v  # integer-valued: any order is exact
    for n in range(N):
        mask[n, 0] = 1
        p = group[n]
        for k in range(K):
            j = w[k]
            base = 1 + k * A1
            if not slot_ok[k]:  # an empty slot: nothing is legal
                for a in range(A1):
                    legal[n, k, a] = False
                    single[n, k, a] = False
                    mask[n, base + a] = 0
                fits_any[n, k] = False
                continue
            any_legal = False
            for lg in range(Lg):
                a0 = lg * LcLm
                need = g[j, a0]  # the GPU count depends on the GPU level only
                for i in range(LcLm):
                    a = a0 + i
                    v = cap[n, k, i]
                    fit = v >= need
                    one = fit and b[n, j, s0 + a]
                    spread = (
                        (not fit)
                        and type_cap[p, k, i] >= need
                        and v >= 1.0
                        and b[n, j, s0 + A1 + a]
                    )
                    ok1 = one or spread
                    legal[n, k, a] = ok1
                    single[n, k, a] = one
                    mask[n, base + a] = 1 if ok1 else 0
                    any_legal = any_legal or ok1
            fits_any[n, k] = any_legal


def _resident_py(
    job: Any,
    node: Any,
    gpus: Any,
    cpus: Any,
    mem: Any,
    n_old: int,
    model: Any,
    cpu_per_gpu: Any,
    mem_per_gpu: Any,
    work: Any,
    remaining: Any,
    attained: Any,
    node_gpus: Any,
    node_cpus: Any,
    node_mem: Any,
    out: Any,
) -> None:
    """Fill the resident slots of :meth:`EnvCore._resident` into ``out`` (zeros, (N, R, D_r)).

    Entries keep their allocation order on each node; the first ``n_old`` entries ran before
    this round. Features as :meth:`FeatureBuilder.entry_features`.
    """
    N, R, _ = out.shape
    M = out.shape[2] - 9
    used = np.zeros(N, dtype=np.int64)
    for e in range(job.shape[0]):
        n = node[e]
        r = used[n]
        used[n] = r + 1
        if r >= R:
            continue
        j = job[e]
        g = float(gpus[e])
        o = out[n, r]
        o[0] = 1.0
        o[1 + model[j]] = 1.0
        cr = cpus[e] / (g * cpu_per_gpu[j])
        mr = mem[e] / (g * mem_per_gpu[j])
        o[1 + M] = g / node_gpus[n]
        o[2 + M] = cpus[e] / node_cpus[n]
        o[3 + M] = mem[e] / node_mem[n]
        o[4 + M] = cr / (1.0 + cr)
        o[5 + M] = mr / (1.0 + mr)
        o[6 + M] = remaining[j] / work[j]
        a = attained[j]
        o[7 + M] = a / (a + HOUR)
        o[8 + M] = 1.0 if e >= n_old else 0.0


def _observe_py(
    nodes: Any,
    c: Any,
    o: Any,
    w: Any,
    job: Any,
    slot_ok: Any,
    now: float,
    arrival: Any,
    attained: Any,
    remaining: Any,
    best: Any,
    fits_any: Any,
    fits_one: Any,
    glob: Any,
    out: Any,
) -> None:
    """Fill the per-agent observations of :meth:`EnvCore.observations` into ``out``.

    Args:
        nodes: Own-node blocks, shape (N, node_dim) (:meth:`FeatureBuilder.node_blocks`).
        c, o: Static per-job window parts (``_PerJobStatic.c``, ``.o``) of B jobs, shapes
            (B, 1 + S) and (N, B, 4).
        w: The column of each window slot in those tables, shape (K,).
        job: The job of each slot (job 0 on empty slots), shape (K,).
        slot_ok: Slot holds a job, shape (K,).
        now: Simulated time (s).
        arrival, attained, remaining, best: Arrival time (s), attained GPU-seconds, remaining
            work and best isolated throughput per job of the episode, shape (J,).
        fits_any, fits_one: From the masks, shape (N, K).
        glob: Global block, shape (global_dim,).
        out: Out, float32 (N, node_dim + K (S + 4 + 6) + global_dim).
    """
    N, nd = nodes.shape
    K = w.shape[0]
    S1 = c.shape[1]
    cw = S1 + 3  # window_common's width
    sw = cw + 6  # a slot: common, then window_node's six columns
    gd = glob.shape[0]
    lo, hi = np.float32(0.0), np.float32(1.0)
    common = np.empty((K, cw))
    for k in range(K):
        ok = 1.0 if slot_ok[k] else 0.0
        for i in range(S1):
            common[k, i] = c[w[k], i] * ok
        j = job[k]
        d0 = now - arrival[j]
        d1 = attained[j]
        bj = best[j]
        d2 = remaining[j] / bj if bj > 0 else 0.0
        if d0 < 0.0:  # np.maximum(d, 0.0)
            d0 = 0.0
        if d1 < 0.0:
            d1 = 0.0
        if d2 < 0.0:
            d2 = 0.0
        common[k, S1] = d0 / (d0 + HOUR) * ok
        common[k, S1 + 1] = d1 / (d1 + HOUR) * ok
        common[k, S1 + 2] = d2 / (d2 + HOUR) * ok
    for n in range(N):
        row = out[n]
        for i in range(nd):
            v = np.float32(nodes[n, i])
            row[i] = lo if v < lo else (hi if v > hi else v)
        for k in range(K):
            base = nd + k * sw
            for i in range(cw):
                v = np.float32(common[k, i])
                row[base + i] = lo if v < lo else (hi if v > hi else v)
            ok = 1.0 if slot_ok[k] else 0.0
            for i in range(4):
                v = np.float32(o[n, w[k], i] * ok)
                row[base + cw + i] = lo if v < lo else (hi if v > hi else v)
            row[base + cw + 4] = hi if fits_any[n, k] else lo
            row[base + cw + 5] = hi if fits_one[n, k] else lo
        g0 = nd + K * sw
        for i in range(gd):
            v = np.float32(glob[i])
            row[g0 + i] = lo if v < lo else (hi if v > hi else v)
