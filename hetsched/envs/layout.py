"""Observation layout, per-episode job tables and the mask containers of the env's features.

See :mod:`hetsched.envs.features` for what every feature means; everything here is re-exported
from there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hetsched.envs.spaces import LevelSets
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

F32 = np.float32
EPS = 1e-9
HOUR = 3600.0
NUM_TYPES = len(GPU_TYPE_NAMES)
#: Version of what the observations show and how the env resolves the agents' claims. Learned
#: schedulers' benchmark cells hash it, so a result measured under older observations or claim
#: rules is recomputed, never read (2: the compiled resident slots show the information track's
#: remaining work, as the numpy path does, in envs made with ``runtime_info``; 3: a job claimed
#: as a gang by several GPU types goes to the type whose gang runs it fastest).
OBS_VERSION = 3


def squash(x: NDArray[np.floating], scale: float) -> NDArray[np.float64]:
    """``x / (x + scale)`` for ``x >= 0`` (0 for negative inputs), in [0, 1)."""
    x = np.maximum(np.asarray(x, dtype=np.float64), 0.0)
    return np.asarray(x / (x + scale), dtype=np.float64)


@dataclass(frozen=True)
class ObsLayout:
    """Sizes of the observation blocks (see the module docstring)."""

    num_nodes: int
    num_models: int
    resident_slots: int
    window: int
    num_cpu_levels: int
    num_mem_levels: int
    num_types: int = NUM_TYPES

    @property
    def res_dim(self) -> int:
        """Features per resident slot."""
        return 9 + self.num_models

    @property
    def node_dim(self) -> int:
        """Own-node block length."""
        return self.num_types + 7 + self.resident_slots * self.res_dim

    @property
    def job_common_dim(self) -> int:
        """Node-independent features per window slot."""
        return 8 + self.num_models + self.num_cpu_levels + self.num_mem_levels

    @property
    def job_node_dim(self) -> int:
        """Node-specific features per window slot."""
        return 6

    @property
    def job_dim(self) -> int:
        """Features per window slot in an agent's observation."""
        return self.job_common_dim + self.job_node_dim

    @property
    def global_dim(self) -> int:
        """Global block length."""
        return self.num_types + 6

    @property
    def obs_dim(self) -> int:
        """Per-agent observation length D."""
        return self.node_dim + self.window * self.job_dim + self.global_dim

    @property
    def state_job_dim(self) -> int:
        """Features per window slot in ``state()``."""
        return self.job_common_dim + 2 * self.num_types

    @property
    def state_dim(self) -> int:
        """Global state length."""
        return self.num_nodes * self.node_dim + self.window * self.state_job_dim + self.global_dim

    def slices(self) -> dict[str, slice]:
        """Named slices of the per-agent observation."""
        T, R, rd = self.num_types, self.resident_slots, self.res_dim
        o = 0
        out: dict[str, slice] = {}
        for name, n in (
            ("gpu_type_onehot", T),
            ("free_gpu_frac", 1),
            ("node_size", 1),
            ("free_cpu_frac", 1),
            ("free_mem_frac", 1),
            ("node_up", 1),
            ("resident_count", 1),
            ("node_interference", 1),
            ("resident_slots", R * rd),
            ("window", self.window * self.job_dim),
            ("global", self.global_dim),
        ):
            out[name] = slice(o, o + n)
            o += n
        assert o == self.obs_dim
        return out


@dataclass
class JobTable:
    """Per-job quantities computed once per episode (shape (J, ...)).

    Attributes:
        static: Node-independent static window features (req/min/max GPUs, elastic, model
            one-hot, sensitivity), shape (J, 4 + M + L_c + L_m).
        gpu_count: GPU count of each GPU level, shape (J, L_g).
        level_ok: Whether each GPU level is a distinct legal level, shape (J, L_g).
        tput: Isolated throughput per type and level, packed / spread, work units/s,
            shape (J, T, L_g, 2) (0: the job cannot run there).
        rel_tput: Isolated throughput at the request relative to the fastest allowed present
            type, shape (J, T) (0 where not allowed or absent).
        best_tput: That fastest throughput, work units/s, shape (J,).
        allowed: Allowed GPU types, shape (J, T).
        arrival_cumsum: Prefix sums of arrivals, shape (J + 1,).
        min_gpus: Fewest GPUs at any legal level (``2**30`` if none), shape (J,).
    """

    static: NDArray[np.float64]
    gpu_count: NDArray[np.int64]
    level_ok: NDArray[np.bool_]
    tput: NDArray[np.float64]
    rel_tput: NDArray[np.float64]
    best_tput: NDArray[np.float64]
    allowed: NDArray[np.bool_]
    arrival_cumsum: NDArray[np.float64]
    min_gpus: NDArray[np.int64]


def gpu_level_counts(
    wl: Workload, levels: tuple[float, ...]
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """GPU count per (job, GPU level) and whether each level is a distinct legal choice.

    Returns:
        ``(count, ok)``, both shape (J, L_g).
    """
    lv = np.asarray(levels, dtype=np.float64)
    req = wl.req_gpus.astype(np.float64)[:, None]
    raw = lv[None, :] * req
    p2 = np.exp2(np.round(np.log2(np.maximum(raw, 1.0))))
    count = np.where(lv[None, :] == 1.0, req, p2)
    count = np.clip(count, wl.min_gpus[:, None], wl.max_gpus[:, None]).astype(np.int64)
    one = levels.index(1.0)
    rigid = (wl.min_gpus == wl.max_gpus)[:, None]
    L = lv.shape[0]
    ok = np.zeros(count.shape, dtype=bool)
    ok[:, one] = True
    for li in range(L):  # loop over the (few) levels, vectorised over jobs
        if li == one:
            continue
        dup = count[:, li] == count[:, one]
        for lj in range(li):
            if lj != one:
                dup |= ok[:, lj] & (count[:, lj] == count[:, li])
        ok[:, li] = ~dup & ~rigid[:, 0]
    return count, ok


def build_job_table(
    wl: Workload, tm: ThroughputModel, cluster: Cluster, levels: LevelSets
) -> JobTable:
    """Per-job features and lookups for an episode (vectorised over jobs)."""
    J = wl.num_jobs
    T = NUM_TYPES
    M = tm.num_models
    n_gpu = float(cluster.num_gpus)
    scale = np.log2(1.0 + n_gpu)
    gsc = np.stack(
        [
            np.log2(1.0 + np.minimum(wl.req_gpus, n_gpu)) / scale,
            np.log2(1.0 + np.minimum(wl.min_gpus, n_gpu)) / scale,
            np.log2(1.0 + np.minimum(wl.max_gpus, n_gpu)) / scale,
            (wl.min_gpus < wl.max_gpus).astype(np.float64),
        ],
        axis=1,
    )
    onehot = np.zeros((J, M))
    onehot[np.arange(J), wl.model] = 1.0
    best_phi = tm.best_phi(wl.model)[:, None]
    lc = np.asarray(levels.cpu)[None, :]
    lm = np.asarray(levels.mem)[None, :]
    m_col = wl.model[:, None]
    phi_c = tm.phi(m_col, lc, np.ones_like(lc)) / best_phi
    phi_m = tm.phi(m_col, np.ones_like(lm), lm) / best_phi
    static = np.concatenate([gsc, onehot, np.clip(phi_c, 0, 1), np.clip(phi_m, 0, 1)], axis=1)

    count, ok = gpu_level_counts(wl, levels.gpu)
    k_all = np.arange(T)
    tput = tm.isolated(
        wl.model[:, None, None, None],
        k_all[None, :, None, None],
        count[:, None, :, None],
        np.array([False, True])[None, None, None, :],
    )  # (J, T, Lg, 2)
    one = levels.gpu.index(1.0)
    present = cluster.gpus_per_type() > 0
    allowed = wl.allowed_types & present[None, :]
    iso_req = np.where(allowed, tput[:, :, one, 0], 0.0)
    best = iso_req.max(axis=1)
    rel = np.where(best[:, None] > 0, iso_req / np.where(best > 0, best, 1.0)[:, None], 0.0)
    cs = np.concatenate([[0.0], np.cumsum(wl.arrival)])
    return JobTable(
        static=static,
        gpu_count=count,
        level_ok=ok,
        tput=np.asarray(tput, dtype=np.float64),
        rel_tput=np.clip(rel, 0.0, 1.0),
        best_tput=best,
        allowed=wl.allowed_types.copy(),
        arrival_cumsum=cs,
        min_gpus=np.where(ok, count, 1 << 30).min(axis=1),
    )


@dataclass
class MaskArrays:
    """Legal actions and the quantities the conflict resolution reuses.

    Shapes: N nodes, K slots, levels ``(L_g, L_c, L_m)``.

    Attributes:
        mask: Legal flat actions per node, int8, shape (N, A) (column 0 = no-op, always 1).
        legal: The same without the no-op, shape (N, K, L_g, L_c, L_m).
        single: The node can host the whole job alone, same shape. ``legal & ~single`` are the
            gang claims (the node contributes to a multi-node job of its GPU type).
        cpu_per_gpu: CPU cores per GPU at each CPU level, shape (N, K, L_c).
        mem_per_gpu: GiB per GPU at each memory level, shape (N, K, L_m).
        mem_ok: Memory level keeps the job above the memory floor, shape (N, K, L_m).
        fits_any: Any legal placement of the slot on the node, shape (N, K).
        fits_one: Legal at the 1x levels on the node alone, shape (N, K).
    """

    mask: NDArray[np.int8]
    legal: NDArray[np.bool_]
    single: NDArray[np.bool_]
    cpu_per_gpu: NDArray[np.float64]
    mem_per_gpu: NDArray[np.float64]
    mem_ok: NDArray[np.bool_]
    fits_any: NDArray[np.bool_]
    fits_one: NDArray[np.bool_]


@dataclass
class _WindowStatic:
    """Mask inputs fixed by the window and the up nodes (see :meth:`FeatureBuilder.masks`).

    ``A1 = L_g L_c L_m`` is the number of level combinations, in the action codec's order.
    """

    cpg: NDArray[np.float64]  # (N, K, L_c) CPU cores per GPU
    mpg: NDArray[np.float64]  # (N, K, L_m) GiB per GPU
    mem_ok: NDArray[np.bool_]  # (N, K, L_m)
    mem_okf: NDArray[np.float64]  # (N, K, L_m) mem_ok as 0/1
    okf: NDArray[np.float64]  # (N, K, 1) 1 where the node may host the slot's job, else 0
    G: NDArray[np.float64]  # (K, A1) GPUs at each level combination
    single: NDArray[np.bool_]  # (N, K, A1) positive throughput packed on the node's type
    gang: NDArray[np.bool_]  # (N, K, A1) positive throughput packed or spread


@dataclass
class _PerJobStatic:
    """Mask parts of a set of B jobs, packed so that a window gathers them in three takes.

    ``f``: float parts, node-major, shape (N, B, L_c + L_m): CPU cores per GPU at each CPU level,
    then GiB per GPU at each memory level. ``b``: boolean parts, node-major, shape
    (N, B, L_m + 1 + 2 A1) with ``A1 = L_g L_c L_m``: memory level above the job's floor (L_m);
    GPU-type constraint admits the node (1); positive throughput on the node's type at each level
    combination packed (A1), then packed or spread (A1), for distinct legal GPU levels.
    ``g``: GPUs at each level combination, job-major, shape (B, A1). ``o``: the node-specific
    window features fixed by the job (CPU and memory request against the node's share, squashed;
    relative throughput on the node's type; type allowed), node-major, shape (N, B, 4). ``c``: the
    common window features fixed by the job (``[1, static...]``), job-major, shape (B, 1 + S).
    """

    f: NDArray[np.float64]
    b: NDArray[np.bool_]
    g: NDArray[np.float64]
    o: NDArray[np.float64]
    c: NDArray[np.float64]
