"""Sia's configurations and per-round cost inputs (sia.md §4-5.1).

The configuration set of a cluster, the extra columns of a round (rigid jobs' counts, running
jobs' current configurations), the jobs' current configurations, the restart factor and the
powered cost matrix. :class:`hetsched.baselines.sia.Sia` combines them into its assignment MILP
(see that module's docstring for the rules).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.allocation import Allocation
from hetsched.sim.catalog import GPU_TYPE_NAMES, canonical_gpu_type
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimState

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


def sia_configurations(
    cluster: Cluster,
    *,
    max_gpus: int = 64,
    max_nodes_per_type: dict[str, int] | None = None,
) -> tuple[IntArray, IntArray, IntArray]:
    """Sia's configuration columns for a cluster (sia.md §4).

    Args:
        cluster: The cluster.
        max_gpus: Largest configuration in GPUs.
        max_nodes_per_type: Optional node cap per GPU type name (aliases allowed).

    Returns:
        ``(gpu_type, nodes, gpus)``, each of shape (C,): catalogue type index, node count and GPU
        count of every column, grouped by type in catalogue order.
    """
    caps: dict[int, int] = {}
    for name, cap in (max_nodes_per_type or {}).items():
        caps[GPU_TYPE_NAMES.index(canonical_gpu_type(str(name)))] = int(cap)
    kk: list[int] = []
    nn: list[int] = []
    gg: list[int] = []
    for k in cluster.types_present.tolist():
        sizes = cluster.node_gpus[cluster.node_type == k]
        R = int(sizes.max())
        n_max = min(int((sizes == R).sum()), caps.get(k, 1 << 30))
        single = [1 << i for i in range(R.bit_length()) if (1 << i) <= R]
        if R not in single:
            single.append(R)
        for g in single:
            if g <= max_gpus:
                kk.append(k)
                nn.append(1)
                gg.append(g)
        for n in range(2, n_max + 1):
            if n * R <= max_gpus:
                kk.append(k)
                nn.append(n)
                gg.append(n * R)
    return np.array(kk, dtype=np.int64), np.array(nn, dtype=np.int64), np.array(gg, dtype=np.int64)


def powered_matrix(
    G: FloatArray,
    valid: BoolArray,
    n_min: FloatArray,
    restart_factor: FloatArray,
    current: BoolArray,
    *,
    p: float,
    clip: float,
    invalid_gain: float,
) -> FloatArray:
    """Sia's cost-matrix pipeline: normalise rows, restart factor, power, round, clip.

    Args:
        G: Estimated goodputs, shape (A, C).
        valid: Valid entries, shape (A, C).
        n_min: Normalisation target per job (its minimum GPU count), shape (A,).
        restart_factor: r_i per job, shape (A,) (1 for jobs that are not running).
        current: Each job's current configuration (all False for jobs not running), (A, C).
        p: Fairness power.
        clip: Clip value.
        invalid_gain: Value of invalid entries before powering.

    Returns:
        ``A`` of shape (A, C): ``min(round((r G_norm) ** p, 2), clip)``; invalid entries use
        ``invalid_gain`` before the power.
    """
    Gv = np.where(valid & (invalid_gain < G), G, np.inf)
    gmin = Gv.min(axis=1, keepdims=True)
    has = np.isfinite(gmin)
    Gn = np.where(has, n_min[:, None] * G / np.where(has, gmin, 1.0), invalid_gain)
    Gn = np.where(valid & (Gn > invalid_gain), Gn, invalid_gain)
    Gn = np.where(valid & ~current, restart_factor[:, None] * Gn, Gn)
    with np.errstate(divide="ignore", over="ignore"):
        Ap = np.power(Gn, p)
    Ap = np.round(Ap, 2)
    return np.asarray(np.minimum(np.nan_to_num(Ap, nan=clip, posinf=clip), clip))


@dataclass
class Columns:
    """Configuration columns of one round."""

    k: IntArray  # catalogue GPU type, (C,)
    n: IntArray  # GPUs, (C,)
    std: BoolArray  # a standard Sia configuration (vs an extra rigid / current column), (C,)


def round_columns(
    std_k: IntArray,
    std_n: IntArray,
    types: IntArray,
    max_count: int,
    min_gpus: IntArray,
    cur_k: IntArray,
    cur_n: IntArray,
) -> Columns:
    """Standard columns plus extra (type, count) columns for rigid / current configurations.

    Args:
        std_k: Catalogue GPU type of every standard column, shape (C0,).
        std_n: GPUs of every standard column, shape (C0,).
        types: Catalogue GPU types present, shape (Kp,).
        max_count: Largest GPU count the estimator covers.
        min_gpus: Minimum GPUs of every active job, shape (A,).
        cur_k: Current GPU type per active job, shape (A,).
        cur_n: Current GPU count per active job (0 = not running), shape (A,).

    Returns:
        The round's columns: the standard ones first, then the extra ones in key order.
    """
    base = max_count + 1
    std_key = std_k * base + std_n
    mn = np.minimum(min_gpus, max_count)
    extra = [(types[None, :] * base + mn[:, None]).ravel()]
    run = cur_n > 0
    if run.any():
        extra.append(cur_k[run] * base + np.minimum(cur_n[run], max_count))
    keys = np.unique(np.concatenate(extra))
    keys = keys[~np.isin(keys, std_key)]
    k = np.concatenate([std_k, keys // base])
    n = np.concatenate([std_n, keys % base])
    std = np.concatenate([np.ones(std_k.size, bool), np.zeros(keys.size, bool)])
    return Columns(k=k.astype(np.int64), n=n.astype(np.int64), std=std)


def live_current(state: SimState) -> Allocation:
    """The previous allocation without the jobs that have an entry on a down node.

    Such a job lost its placement (its node failed): it is treated as not running and is
    re-placed from scratch.
    """
    cur = state.current
    up = state.node_up
    if cur.size == 0 or bool(up[cur.node].all()):
        return cur
    gone = np.zeros(state.workload.num_jobs, dtype=bool)
    gone[cur.job[~up[cur.node]]] = True
    return cur.select(~gone[cur.job])


def up_capacity(state: SimState) -> IntArray:
    """GPUs on up nodes per catalogue GPU type, shape (K,).

    Args:
        state: The round's state (``node_up`` says which nodes count).
    """
    cl = state.cluster
    w = np.where(state.node_up, cl.node_gpus, 0).astype(np.float64)
    return np.bincount(cl.node_type, weights=w, minlength=len(GPU_TYPE_NAMES)).astype(np.int64)


def job_configs(
    state: SimState, cur: Allocation | None = None
) -> tuple[IntArray, IntArray, IntArray]:
    """Jobs in ``cur`` (default ``state.current``), their GPU type (-1 if mixed), GPU count.

    Returns:
        ``(jobs, gpu_type, gpus)``, each of shape (n,), jobs ascending.
    """
    cur = state.current if cur is None else cur
    J = state.workload.num_jobs
    gtype = state.cluster.node_type[cur.node]
    kmin = np.full(J, np.iinfo(np.int64).max)
    kmax = np.full(J, -1)
    np.minimum.at(kmin, cur.job, gtype)
    np.maximum.at(kmax, cur.job, gtype)
    n = np.bincount(cur.job, weights=cur.gpus, minlength=J).astype(np.int64)
    jobs = np.unique(cur.job)
    k = np.where(kmin[jobs] == kmax[jobs], kmax[jobs], -1)
    return jobs, k, n[jobs]


def restart_factor(
    state: SimState, act: IntArray, running: BoolArray, penalty_s: FloatArray
) -> FloatArray:
    """Sia's restart factor ``r_i`` per active job (1 for jobs not running), shape (A,).

    Args:
        state: The round's state.
        act: Active jobs, shape (A,).
        running: Which of them run now, shape (A,).
        penalty_s: Restart-penalty estimate S per model, seconds, shape (M,).
    """
    wl = state.workload
    T = state.time - wl.arrival[act]
    S = penalty_s[wl.model[act]]
    n = state.restarts[act].astype(np.float64)
    r = np.maximum(T - n * S, 0.0) / np.maximum(T + S, 1e-9)
    rigid = wl.min_gpus[act] == wl.max_gpus[act]
    young = np.where(rigid, state.attained_gpu_s[act] < S, T < S)
    r = np.where(young, 1.0, r)
    return np.where(running, r, 1.0)
