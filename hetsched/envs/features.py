"""Vectorised observation, state and action-mask building (no per-node or per-job Python loops).

Everything here is computed for all N nodes and all K window slots at once with numpy. These
numpy methods are the reference; when numba is installed, :meth:`FeatureBuilder.masks` and the
per-agent observations run through compiled kernels of :mod:`hetsched.envs.kernels` that give
identical arrays. All
features are normalised to ``[0, 1]``; unbounded positive quantities use the squash
``x / (x + scale)``. Notation: ``T`` = 7 catalogue GPU types, ``M`` = models of the throughput
table, ``R`` = resident slots, ``K`` = window size, ``L_g, L_c, L_m`` = level-set sizes.

Per-agent observation (``observation`` key, length ``D``), in order:

1. **Own node** (``node_dim = T + 7 + R * (M + 9)``):
   ``[0:T]`` GPU-type one-hot; then free GPUs / node GPUs; node GPUs / largest node's GPUs;
   free CPU / node CPU; free memory / node memory; node up (1) or down (0); resident jobs / R
   (clipped to 1); node interference slowdown ``1 - (1 - node_iota) ** (jobs - 1)``. Then R
   resident slots (the node's jobs this round, kept ones first, in allocation order), each
   ``[present, model one-hot (M), GPUs / node GPUs, CPUs / node CPUs, memory / node memory,
   squash(CPU ratio to request, 1), squash(memory ratio to request, 1), remaining work / total
   work, squash(attained GPU-s, 3600), placed this round]``. Remaining work is shown through
   the information track set by :meth:`FeatureBuilder.set_runtime_info` (exact by default).
2. **Candidate window** (``K * job_dim``, ``job_dim = 14 + M + L_c + L_m``), the same K jobs in
   the same order for every agent, each slot ``[present, log2(1+req) / log2(1+N_gpu),
   same for min_gpus, same for max_gpus, elastic, model one-hot (M), phi at each CPU level /
   best phi (L_c), phi at each memory level (L_m), squash(waiting s, 3600), squash(attained
   GPU-s, 3600), squash(estimated remaining s on the fastest allowed type at the request,
   3600)]`` followed by the node-specific ``[squash(CPU request per GPU / node share, 1),
   squash(memory request per GPU / node share, 1), isolated throughput on this node's type /
   fastest allowed present type, type allowed, any legal action here, fits here at the 1x
   levels]``. Empty slots are all zero.
3. **Global** (``global_dim = T + 6``): squash(pending jobs not yet placed, K); squash(jobs
   placed or running, N); busy GPUs / GPUs per catalogue type (T, 0 where absent); free GPUs /
   all GPUs; decision step in round / max decisions per round; finished jobs / J; arrived
   jobs / J.

``state()`` (centralised critics): every node block (``N * node_dim``), then per window slot
the node-independent part (``8 + M + L_c + L_m``) plus relative throughput per catalogue type
(T) and type allowed (T), then the global block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.envs import kernels
from hetsched.envs.spaces import LevelSets
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import ClusterSpecError
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

F32 = np.float32
EPS = 1e-9
HOUR = 3600.0
NUM_TYPES = len(GPU_TYPE_NAMES)
#: Largest node-by-job table of static mask parts kept per episode (bytes); above it the masks
#: compute the window's static parts directly (same numbers, slower).
PER_JOB_STATIC_MAX_BYTES = 64 * 2**20


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
        tput_ok: Positive isolated throughput per type and level, packed / spread,
            shape (J, T, L_g, 2).
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
    tput_ok: NDArray[np.bool_]
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
        tput_ok=tput > 0,
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


class FeatureBuilder:
    """Builds masks, observations and the global state for one cluster and level sets.

    Args:
        cluster: The cluster.
        tm: The throughput model (fixes M).
        levels: Level sets.
        window: Window size K.
        resident_slots: Resident slots R.
        max_decisions: Max decision steps per round (for the round-progress feature).
    """

    def __init__(
        self,
        cluster: Cluster,
        tm: ThroughputModel,
        levels: LevelSets,
        window: int,
        resident_slots: int,
        max_decisions: int,
    ) -> None:
        self.cluster = cluster
        self.tm = tm
        self.levels = levels
        self.K = window
        self.R = resident_slots
        self.max_decisions = max_decisions
        N = cluster.num_nodes
        self.layout = ObsLayout(
            num_nodes=N,
            num_models=tm.num_models,
            resident_slots=resident_slots,
            window=window,
            num_cpu_levels=len(levels.cpu),
            num_mem_levels=len(levels.mem),
        )
        self.node_type = cluster.node_type
        self.node_gpus = cluster.node_gpus.astype(np.float64)
        self.node_cpus = cluster.node_cpus
        self.node_mem = cluster.node_mem
        self.cpu_share = cluster.node_cpus / cluster.node_gpus
        self.mem_share = cluster.node_mem / cluster.node_gpus
        if cluster.has_variants:  # the one-hot covers the catalogue types only
            names = sorted({v.name for v in cluster.variants})
            raise ClusterSpecError(
                f"cluster {cluster.name!r} has GPU type(s) {names} outside the {NUM_TYPES}-type "
                "catalogue that the observations encode (one-hot over "
                f"{', '.join(GPU_TYPE_NAMES)}); the environments and learned schedulers cannot run "
                "on it without a new observation layout. Evaluate fixed schedulers on it"
            )
        self.type_onehot = np.zeros((N, NUM_TYPES))
        self.type_onehot[np.arange(N), cluster.node_type] = 1.0
        self.type_onehot_T = self.type_onehot.T.copy()  # (T, N)
        self.gpus_per_type = cluster.gpus_per_type().astype(np.float64)
        self.node_size = self.node_gpus / self.node_gpus.max()
        self.lc = np.asarray(levels.cpu, dtype=np.float64)
        self.lm = np.asarray(levels.mem, dtype=np.float64)
        self.one = levels.one_index
        sizes = levels.sizes
        #: GPU level of each (GPU, CPU, memory) level combination, in the action codec's order.
        self.lg_of = np.repeat(np.arange(sizes[0]), sizes[1] * sizes[2])
        self.one_flat = int(np.ravel_multi_index(self.one, sizes))
        self.num_gpus = float(cluster.num_gpus)
        self._slowdown_by_count = self._slowdown_table(int(cluster.node_gpus.max()) + 2)
        T = NUM_TYPES
        self._node_head = np.zeros((N, T + 7))  # node_blocks' constant columns
        self._node_head[:, :T] = self.type_onehot
        self._node_head[:, T + 1] = self.node_size
        self._static_cache: tuple[JobTable, bytes, bytes, _WindowStatic] | None = None
        # Window features that depend only on the window: (jt, window bytes, common, per-node).
        self._win_cache: tuple[JobTable, bytes, NDArray[np.float64], NDArray[np.float64]] | None = (
            None
        )
        self._per_job_cache: tuple[JobTable, _PerJobStatic | None] | None = None
        self._win_jobs = np.zeros(window, dtype=np.int64)  # the cached window's jobs (0 if empty)
        # Per-type sums without BLAS (tiny matmuls would wake OpenBLAS threads): nodes sorted
        # by type, one reduceat segment per present type, in ascending catalogue order.
        self.type_perm = np.argsort(cluster.node_type, kind="stable")
        self._type_sorted = bool((self.type_perm == np.arange(N)).all())  # no gather needed
        st = cluster.node_type[self.type_perm]
        self.type_starts = np.flatnonzero(np.r_[True, st[1:] != st[:-1]])
        self.present_types = st[self.type_starts]
        self.node_group = np.searchsorted(self.present_types, cluster.node_type)
        #: Compiled mask kernel (:mod:`hetsched.envs.kernels`), None for the numpy path.
        self.mask_kernel: Any | None = kernels.get("mask")
        #: Compiled observation kernel, None for the numpy path.
        self.observe_kernel: Any | None = kernels.get("observe")
        #: Information track of the remaining-work features (None: exact); see
        #: :meth:`set_runtime_info`.
        self.runtime_info: Any | None = None
        self._info_rng: np.random.Generator | None = None
        self._info_wl: Workload | None = None
        self._info_arrays: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None

    def set_runtime_info(self, info: Any, seed: int) -> None:
        """Show the remaining-work features through an information track.

        Args:
            info: A :class:`hetsched.benchmark.info.RuntimeInfo` (``exact`` / ``noisy`` /
                ``none``); ``None`` or ``exact``: the true remaining work.
            seed: Seed of the track's errors (drawn per episode workload, in episode order).
        """
        exact = info is None or info.mode == "exact"
        self.runtime_info = None if exact else info
        self._info_rng = None if exact else np.random.default_rng(int(seed))
        self._info_wl = None

    def observed_remaining(
        self, wl: Workload, remaining: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The remaining and total work per job the features show, each shape (J,).

        The true ``remaining`` and ``wl.work`` unless :meth:`set_runtime_info` set a track.
        """
        info = self.runtime_info
        if info is None:
            return remaining, wl.work
        if self._info_wl is not wl:
            from hetsched.benchmark.info import PRIOR_S, best_rate

            assert self._info_rng is not None
            factors = info.factors(wl.num_jobs, self._info_rng)
            self._info_arrays = (factors, PRIOR_S * best_rate(wl, self.tm, self.cluster))
            self._info_wl = wl
        assert self._info_arrays is not None
        out: tuple[NDArray[np.float64], NDArray[np.float64]] = info.estimate(
            remaining, wl.work, *self._info_arrays
        )
        return out

    def per_type_sum(self, x: NDArray[np.floating]) -> NDArray[np.float64]:
        """Sum over the nodes of each present GPU type, shape (P, ...) for ``x`` (N, ...)."""
        xs = x if self._type_sorted else x[self.type_perm]
        return np.asarray(np.add.reduceat(xs, self.type_starts, axis=0))

    def per_type_any(self, x: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """Any over the nodes of each present GPU type, shape (P, ...) for ``x`` (N, ...)."""
        return np.asarray(np.logical_or.reduceat(x[self.type_perm], self.type_starts, axis=0))

    # ------------------------------------------------------------------ masks
    def _job_static(self, jt: JobTable, wl: Workload, jobs: NDArray[np.int64]) -> _PerJobStatic:
        """The node-by-job mask parts that never change in an episode, for ``jobs`` (shape (B,))."""
        nt = self.node_type
        req_c, req_m = wl.cpu_per_gpu[jobs], wl.mem_per_gpu[jobs]  # (B,)
        if self.levels.cap_at_node_share:
            cpg = np.minimum(req_c[None, :], self.cpu_share[:, None])[:, :, None] * self.lc
            mpg = np.minimum(req_m[None, :], self.mem_share[:, None])[:, :, None] * self.lm
        else:
            shape = (nt.shape[0], jobs.shape[0])
            cpg = np.broadcast_to((req_c[:, None] * self.lc)[None], shape + (self.lc.size,))
            mpg = np.broadcast_to((req_m[:, None] * self.lm)[None], shape + (self.lm.size,))
        tok = jt.tput_ok[jobs][:, nt] & jt.level_ok[jobs][:, None, :, None]  # (B, N, Lg, 2)
        mem_ok = mpg >= (self.tm.mem_floor - EPS) * req_m[None, :, None]
        allowed = jt.allowed[jobs][:, nt].T[:, :, None]  # (N, B, 1)
        single = tok[..., 0].transpose(1, 0, 2)[:, :, self.lg_of]  # (N, B, A1)
        gang = np.any(tok, axis=3).transpose(1, 0, 2)[:, :, self.lg_of]
        rc = req_c[None, :] / self.cpu_share[:, None]
        rm = req_m[None, :] / self.mem_share[:, None]
        o = np.empty((nt.shape[0], jobs.shape[0], 4))
        o[:, :, 0] = rc / (1.0 + rc)
        o[:, :, 1] = rm / (1.0 + rm)
        o[:, :, 2] = jt.rel_tput[jobs][:, nt].T
        o[:, :, 3] = allowed[:, :, 0]
        c = np.empty((jobs.shape[0], 1 + jt.static.shape[1]))
        c[:, 0] = 1.0
        c[:, 1:] = jt.static[jobs]
        return _PerJobStatic(
            f=np.concatenate([cpg, mpg], axis=2),
            b=np.concatenate([mem_ok, allowed, single, gang], axis=2),
            g=jt.gpu_count[jobs][:, self.lg_of].astype(np.float64),
            o=o,
            c=c,
        )

    def _per_job_static(self, jt: JobTable, wl: Workload) -> _PerJobStatic | None:
        """:meth:`_job_static` of every job of the episode, built once per job table.

        A new window then only gathers its columns. None (the window's parts are computed
        directly) above :data:`PER_JOB_STATIC_MAX_BYTES`.
        """
        c = self._per_job_cache
        if c is not None and c[0] is jt:
            return c[1]
        N, J = self.node_type.shape[0], wl.num_jobs
        Lc, Lm, Lg = self.lc.size, self.lm.size, jt.gpu_count.shape[1]
        A1 = Lg * Lc * Lm
        per_job = N * (8 * (Lc + Lm + 4) + Lm + 1 + 2 * A1) + 8 * (A1 + 1 + jt.static.shape[1])
        small = J * per_job <= PER_JOB_STATIC_MAX_BYTES
        out = self._job_static(jt, wl, np.arange(J)) if small else None
        self._per_job_cache = (jt, out)
        return out

    def _window_tables(
        self, jt: JobTable, wl: Workload, window: NDArray[np.int64], slot_ok: NDArray[np.bool_]
    ) -> tuple[_PerJobStatic, NDArray[np.int64], NDArray[np.int64]]:
        """Static tables for the compiled kernels: ``(tables, column of each slot, job of each
        slot)``; empty slots read job 0 (the kernels zero them). The episode's per-job table when
        it exists, else the window's own parts, read in slot order.
        """
        job = np.where(slot_ok, window, 0)
        pj = self._per_job_static(jt, wl)
        if pj is None:
            return self._job_static(jt, wl, job), np.arange(window.shape[0]), job
        return pj, job, job

    def window_amounts(
        self,
        jt: JobTable,
        wl: Workload,
        window: NDArray[np.int64],
        slot_ok: NDArray[np.bool_],
        node_up: NDArray[np.bool_],
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
        """Per-GPU amounts of the window's jobs at each level, whatever the free room.

        :meth:`masks` uses the same numbers; these do not depend on the free resources, so
        they are valid also when the env skips the masks because nothing fits.

        Returns:
            ``(cpu_per_gpu, mem_per_gpu, mem_ok)``: CPU cores per GPU, shape (N, K, L_c);
            memory (GiB) per GPU, shape (N, K, L_m); whether each memory level is usable on
            the node, shape (N, K, L_m).
        """
        st = self._window_static(jt, wl, window, slot_ok, node_up)
        return st.cpg, st.mpg, st.mem_ok

    def _window_static(
        self,
        jt: JobTable,
        wl: Workload,
        window: NDArray[np.int64],
        slot_ok: NDArray[np.bool_],
        node_up: NDArray[np.bool_],
    ) -> _WindowStatic:
        """The mask parts that depend only on the window and the up nodes (cached)."""
        wb, ub = window.tobytes(), node_up.tobytes()
        c = self._static_cache  # holds jt itself, so its id cannot be reused while cached
        if c is not None and c[0] is jt and c[1] == wb and c[2] == ub:
            return c[3]
        w = np.where(slot_ok, window, 0)  # empty slots read job 0, then are masked out
        pj = self._per_job_static(jt, wl)
        if pj is None:
            p = self._job_static(jt, wl, w)
            f, b, g = p.f, p.b, p.g
        else:  # gather the window's columns of the episode table (same numbers)
            f, b, g = pj.f[:, w], pj.b[:, w], pj.g[w]
        Lc, Lm, A1 = self.lc.size, self.lm.size, self.lg_of.size
        mem_ok = b[:, :, :Lm]
        ok_nk = b[:, :, Lm : Lm + 1] & slot_ok[None, :, None]  # (N, K, 1)
        if not node_up.all():
            ok_nk &= node_up[:, None, None]
        so = slot_ok[None, :, None]
        out = _WindowStatic(
            cpg=f[:, :, :Lc],
            mpg=f[:, :, Lc : Lc + Lm],
            mem_ok=mem_ok,
            mem_okf=mem_ok.astype(np.float64),
            okf=ok_nk.astype(np.float64),
            G=g,
            single=b[:, :, Lm + 1 : Lm + 1 + A1] & so,
            gang=b[:, :, Lm + 1 + A1 :] & so,
        )
        self._static_cache = (jt, wb, ub, out)
        return out

    def masks(
        self,
        jt: JobTable,
        wl: Workload,
        window: NDArray[np.int64],
        slot_ok: NDArray[np.bool_],
        free_g: NDArray[np.int64],
        free_c: NDArray[np.float64],
        free_m: NDArray[np.float64],
        node_up: NDArray[np.bool_],
    ) -> MaskArrays:
        """Legal actions of every node for the window (all arrays vectorised).

        Args:
            jt: The episode's job table.
            wl: The workload.
            window: Job index per slot (-1 for empty), shape (K,).
            slot_ok: Slot holds a job, shape (K,).
            free_g: Free GPUs per node, shape (N,).
            free_c: Free CPU cores per node, shape (N,).
            free_m: Free memory per node (GiB), shape (N,).
            node_up: Node is up, shape (N,).
        """
        N = free_g.shape[0]
        K = window.shape[0]
        Lc, Lm, A1 = self.lc.size, self.lm.size, self.lg_of.size
        Lg, LcLm = A1 // (Lc * Lm), Lc * Lm
        if self.mask_kernel is not None:  # the same numbers, compiled (hetsched.envs.kernels)
            pj, w, _ = self._window_tables(jt, wl, window, slot_ok)
            mask = np.empty((N, 1 + K * A1), dtype=np.int8)
            legal = np.empty((N, K, A1), dtype=bool)
            single = np.empty((N, K, A1), dtype=bool)
            fits_any = np.empty((N, K), dtype=bool)
            cpg, mpg = np.empty((N, K, Lc)), np.empty((N, K, Lm))
            mem_ok = np.empty((N, K, Lm), dtype=bool)
            self.mask_kernel(
                pj.f, pj.b, pj.g, w, slot_ok, node_up, free_g, free_c, free_m, self.node_group,
                self.present_types.size, mask, legal, single, fits_any, cpg, mpg, mem_ok,
            )  # fmt: skip
        else:
            st = self._window_static(jt, wl, window, slot_ok, node_up)
            cpg, mpg, mem_ok, G = st.cpg, st.mpg, st.mem_ok, st.G
            # Capacities are finite and >= 0, so multiplying by a 0/1 factor zeroes exactly.
            cap_c = np.floor(free_c[:, None, None] / cpg + EPS)
            np.minimum(cap_c, free_g[:, None, None], out=cap_c)
            cap_c *= st.okf
            cap_m = np.floor(free_m[:, None, None] / mpg + EPS)
            cap_m *= st.mem_okf
            # GPUs that fit at each (CPU, memory) level pair, compared by broadcasting with the
            # GPU count per GPU level (G is constant over the CPU and memory levels), so that
            # every array below is (N, K, Lg, Lc * Lm), i.e. (N, K, A1) in the codec's order.
            cap2 = np.minimum(cap_c[:, :, :, None], cap_m[:, :, None, :]).reshape(N, K, 1, LcLm)
            G4 = G.reshape(K, Lg, LcLm)[:, :, :1]
            ts4 = st.single.reshape(N, K, Lg, LcLm)
            fits = cap2 >= G4
            single = fits & ts4
            type_fits = (self.per_type_sum(cap2) >= G4)[self.node_group]  # the type has room
            gang_ok = type_fits & (cap2 >= 1.0) & st.gang.reshape(N, K, Lg, LcLm)
            legal = np.where(fits, ts4, gang_ok)
            mask = np.empty((N, 1 + K * A1), dtype=np.int8)
            mask[:, 0] = 1
            mask[:, 1:] = legal.reshape(N, -1)
            legal = legal.reshape(N, K, A1)
            single = single.reshape(N, K, A1)
            fits_any = np.logical_or.reduce(legal, axis=2)
        shape5 = (N, K, Lg, Lc, Lm)
        return MaskArrays(
            mask=mask,
            legal=legal.reshape(shape5),
            single=single.reshape(shape5),
            cpu_per_gpu=cpg,
            mem_per_gpu=mpg,
            mem_ok=mem_ok,
            fits_any=fits_any,
            fits_one=single[:, :, self.one_flat],
        )

    # ------------------------------------------------------------------ observations
    def entry_features(
        self,
        wl: Workload,
        job: NDArray[np.int64],
        node: NDArray[np.int64],
        gpus: NDArray[np.int64],
        cpus: NDArray[np.float64],
        mem: NDArray[np.float64],
        new: bool | NDArray[np.bool_],
        remaining: NDArray[np.float64],
        attained: NDArray[np.float64],
    ) -> NDArray[np.float64]:
        """Resident-slot features of allocation entries, shape (E, res_dim).

        Args:
            wl: The workload.
            job: Job per entry, shape (E,).
            node: Node per entry, shape (E,).
            gpus: GPUs per entry, shape (E,).
            cpus: CPU cores per entry, shape (E,).
            mem: Memory per entry (GiB), shape (E,).
            new: Entries placed during this round (one flag, or one per entry, shape (E,)).
            remaining: Remaining work per job, shape (J,).
            attained: Attained GPU-seconds per job, shape (J,).
        """
        E = job.shape[0]
        M = self.layout.num_models
        out = np.zeros((E, self.layout.res_dim))
        if E == 0:
            return out
        g = gpus.astype(np.float64)
        out[:, 0] = 1.0
        out[np.arange(E), 1 + wl.model[job]] = 1.0
        cr = cpus / (g * wl.cpu_per_gpu[job])
        mr = mem / (g * wl.mem_per_gpu[job])
        out[:, 1 + M] = g / self.node_gpus[node]
        out[:, 2 + M] = cpus / self.node_cpus[node]
        out[:, 3 + M] = mem / self.node_mem[node]
        out[:, 4 + M] = cr / (1.0 + cr)
        out[:, 5 + M] = mr / (1.0 + mr)
        remaining, work = self.observed_remaining(wl, remaining)
        out[:, 6 + M] = remaining[job] / work[job]
        a = attained[job]
        out[:, 7 + M] = a / (a + HOUR)
        out[:, 8 + M] = new
        return out

    def node_blocks(
        self,
        resident: NDArray[np.float64],
        count: NDArray[np.int64],
        free_g: NDArray[np.int64],
        free_c: NDArray[np.float64],
        free_m: NDArray[np.float64],
        node_up: NDArray[np.bool_],
    ) -> NDArray[np.float64]:
        """Own-node blocks of every node, shape (N, node_dim).

        Args:
            resident: Resident-slot features, shape (N, R, res_dim) (see
                :meth:`entry_features`; the env builds it when it observes).
            count: Jobs (entries) per node this round, shape (N,).
            free_g: Free GPUs per node, shape (N,).
            free_c: Free CPU cores per node, shape (N,).
            free_m: Free memory per node, shape (N,).
            node_up: Node is up, shape (N,).
        """
        N, T = self.type_onehot.shape
        out = np.empty((N, T + 7 + resident[0].size))
        out[:, : T + 7] = self._node_head  # the type one-hot and node size (constants)
        head = out[:, T : T + 7]
        head[:, 0] = free_g / self.node_gpus
        head[:, 2] = free_c / self.node_cpus
        head[:, 3] = free_m / self.node_mem
        head[:, 4] = node_up
        head[:, 5] = np.minimum(count / self.R, 1.0)
        try:  # the co-runner slowdown, tabulated by entry count
            head[:, 6] = self._slowdown_by_count[count]
        except IndexError:  # more entries on a node than the table holds
            self._slowdown_by_count = self._slowdown_table(int(count.max()) + 1)
            head[:, 6] = self._slowdown_by_count[count]
        out[:, T + 7 :] = resident.reshape(N, -1)
        return out

    def _slowdown_table(self, size: int) -> NDArray[np.float64]:
        """Node interference slowdown ``1 - keep ** (c - 1)`` for ``c`` entries (0 if none)."""
        keep = self.tm.node_keep_by_count(size)
        keep[0] = 1.0  # no entry: no slowdown
        return 1.0 - keep

    def _window_fixed(
        self, jt: JobTable, wl: Workload, window: NDArray[np.int64], slot_ok: NDArray[np.bool_]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The window features fixed by the window alone (cached for the last window).

        Returns:
            The common columns ``[present, static...]`` (K, 1 + S) and the node-specific columns
            ``[cpu, memory, relative throughput, allowed]`` (N, K, 4), zero on empty slots.
        """
        wb = window.tobytes()
        c = self._win_cache  # holds jt itself, so its id cannot be reused while cached
        if c is not None and c[0] is jt and c[1] == wb:
            return c[2], c[3]
        w = np.where(slot_ok, window, 0)
        self._win_jobs = w
        pj = self._per_job_static(jt, wl)
        if pj is None:
            p = self._job_static(jt, wl, w)
            common, node = p.c, p.o
        else:
            common, node = pj.c[w], pj.o[:, w]
        common = common * slot_ok[:, None]
        node = node * slot_ok[None, :, None]
        self._win_cache = (jt, wb, common, node)
        return common, node

    def window_common(
        self,
        jt: JobTable,
        window: NDArray[np.int64],
        slot_ok: NDArray[np.bool_],
        now: float,
        wl: Workload,
        remaining: NDArray[np.float64],
        attained: NDArray[np.float64],
    ) -> NDArray[np.float64]:
        """Node-independent window features, shape (K, job_common_dim)."""
        fixed = self._window_fixed(jt, wl, window, slot_ok)[0]
        remaining = self.observed_remaining(wl, remaining)[0]
        w = self._win_jobs  # the window's jobs, empty slots reading job 0 (set by _window_fixed)
        best = jt.best_tput[w]
        S1 = fixed.shape[1]
        out = np.empty((w.shape[0], S1 + 3))
        out[:, :S1] = fixed
        # Waiting time, attained service and remaining time at the best rate, squashed together.
        d = np.empty((3, w.shape[0]))
        np.subtract(now, wl.arrival[w], out=d[0])
        d[1] = attained[w]
        d[2] = np.where(best > 0, remaining[w] / np.where(best > 0, best, 1.0), 0.0)
        np.maximum(d, 0.0, out=d)
        d /= d + HOUR
        d *= slot_ok
        out[:, S1:] = d.T
        return out

    def window_node(
        self,
        jt: JobTable,
        wl: Workload,
        window: NDArray[np.int64],
        slot_ok: NDArray[np.bool_],
        ma: MaskArrays,
    ) -> NDArray[np.float64]:
        """Node-specific window features, shape (N, K, 6)."""
        fixed = self._window_fixed(jt, wl, window, slot_ok)[1]
        out = np.empty(fixed.shape[:2] + (6,))
        out[:, :, :4] = fixed
        out[:, :, 4] = ma.fits_any  # both are False on empty slots
        out[:, :, 5] = ma.fits_one
        return out

    def global_block(
        self,
        n_pending: int,
        n_placed: int,
        free_g: NDArray[np.int64],
        decision_step: int,
        n_done: int,
        n_arrived: int,
        num_jobs: int,
    ) -> NDArray[np.float64]:
        """Global features, shape (global_dim,)."""
        busy = np.bincount(self.node_type, weights=self.node_gpus - free_g, minlength=NUM_TYPES)
        T = busy.shape[0]
        out = np.empty(T + 6)
        out[0] = n_pending / (n_pending + self.K)
        out[1] = n_placed / (n_placed + self.cluster.num_nodes)
        # Types absent from the cluster have no busy GPUs: 0 / 1 = 0.
        np.divide(busy, np.maximum(self.gpus_per_type, 1.0), out=out[2 : 2 + T])
        out[2 + T] = int(free_g.sum()) / self.num_gpus
        out[3 + T] = min(decision_step / self.max_decisions, 1.0)
        out[4 + T] = n_done / num_jobs
        out[5 + T] = n_arrived / num_jobs
        return out

    def observations(
        self,
        nodes: NDArray[np.float64],
        common: NDArray[np.float64],
        per_node: NDArray[np.float64],
        glob: NDArray[np.float64],
    ) -> NDArray[np.float32]:
        """Per-agent observations, shape (N, D), float32 in [0, 1]."""
        N, K, pw = per_node.shape
        nd, cw = nodes.shape[1], common.shape[1]
        W = K * (cw + pw)
        out = np.empty((N, nd + W + glob.shape[0]), dtype=F32)
        out[:, :nd] = nodes
        win = out[:, nd : nd + W].reshape(N, K, cw + pw)  # a view: splits the last axis only
        win[:, :, :cw] = common
        win[:, :, cw:] = per_node
        out[:, nd + W :] = glob
        np.maximum(out, 0.0, out=out)  # clip to [0, 1] in place (np.clip is slower)
        np.minimum(out, 1.0, out=out)
        return out

    def observations_compiled(
        self,
        jt: JobTable,
        wl: Workload,
        window: NDArray[np.int64],
        slot_ok: NDArray[np.bool_],
        ma: MaskArrays,
        nodes: NDArray[np.float64],
        glob: NDArray[np.float64],
        now: float,
        remaining: NDArray[np.float64],
        attained: NDArray[np.float64],
    ) -> NDArray[np.float32]:
        """:meth:`observations` of :meth:`window_common` and :meth:`window_node` in one
        compiled pass over the per-job tables (identical array; needs :attr:`observe_kernel`).
        """
        pj, w, job = self._window_tables(jt, wl, window, slot_ok)
        remaining = self.observed_remaining(wl, remaining)[0]
        N, K = nodes.shape[0], window.shape[0]
        D = nodes.shape[1] + K * (pj.c.shape[1] + 3 + 6) + glob.shape[0]
        out = np.empty((N, D), dtype=F32)
        assert self.observe_kernel is not None
        self.observe_kernel(
            nodes, pj.c, pj.o, w, job, slot_ok, float(now), wl.arrival, attained, remaining,
            jt.best_tput, ma.fits_any, ma.fits_one, glob, out,
        )  # fmt: skip
        return out

    def state(
        self,
        jt: JobTable,
        window: NDArray[np.int64],
        slot_ok: NDArray[np.bool_],
        nodes: NDArray[np.float64],
        common: NDArray[np.float64],
        glob: NDArray[np.float64],
    ) -> NDArray[np.float32]:
        """Global state, shape (state_dim,), float32 in [0, 1]."""
        w = np.where(slot_ok, window, 0)
        rel = jt.rel_tput[w] * slot_ok[:, None]
        allowed = jt.allowed[w] * slot_ok[:, None]
        jobs = np.concatenate([common, rel, allowed], axis=1)
        out = np.concatenate([nodes.ravel(), jobs.ravel(), glob])
        return np.clip(out, 0.0, 1.0).astype(F32)
