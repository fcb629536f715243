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

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.envs import kernels
from hetsched.envs.layout import (
    EPS,
    F32,
    HOUR,
    NUM_TYPES,
    JobTable,
    MaskArrays,
    ObsLayout,
    _PerJobStatic,
    _WindowStatic,
    build_job_table,
    gpu_level_counts,
    squash,
)
from hetsched.envs.masks import PER_JOB_STATIC_MAX_BYTES, MaskBuilder
from hetsched.envs.spaces import LevelSets
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import ClusterSpecError
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

__all__ = [
    "EPS", "F32", "HOUR", "NUM_TYPES", "PER_JOB_STATIC_MAX_BYTES", "FeatureBuilder", "JobTable",
    "MaskArrays", "ObsLayout", "_PerJobStatic", "_WindowStatic", "build_job_table",
    "gpu_level_counts", "squash",
]  # fmt: skip


class RuntimeInfoView:
    """The remaining-work features' information track (exact, noisy or none).

    A mixin of :class:`FeatureBuilder`; the host sets ``tm`` and ``cluster``.
    """

    tm: ThroughputModel
    cluster: Cluster
    #: Information track of the remaining-work features (None: exact); see
    #: :meth:`set_runtime_info`.
    runtime_info: Any | None = None
    _info_rng: np.random.Generator | None = None
    _info_wl: Workload | None = None
    _info_arrays: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None

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

    @contextmanager
    def true_view(self) -> Iterator[None]:
        """Within the block, :meth:`observed_remaining` shows the true remaining work whatever
        the track (e.g. for a teacher that labels from the truth); the track's errors are kept."""
        info, self.runtime_info = self.runtime_info, None
        try:
            yield
        finally:
            self.runtime_info = info

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


class FeatureBuilder(RuntimeInfoView, MaskBuilder):
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
        # Types absent from the cluster have no busy GPUs: 0 / 1 = 0.
        np.divide(busy, np.maximum(self.gpus_per_type, 1.0), out=out[2 : 2 + T])
        out[2 + T] = int(free_g.sum()) / self.num_gpus
        self.global_counts(out, n_pending, n_placed, decision_step, n_done, n_arrived, num_jobs)
        return out

    def global_counts(
        self,
        out: NDArray[np.float64],
        n_pending: int,
        n_placed: int,
        decision_step: int,
        n_done: int,
        n_arrived: int,
        num_jobs: int,
    ) -> None:
        """Write the job-count and round-progress entries of :meth:`global_block` into ``out``
        (shape (global_dim,)); the per-type and free-GPU entries are left as they are."""
        T = out.shape[0] - 6
        out[0] = n_pending / (n_pending + self.K)
        out[1] = n_placed / (n_placed + self.cluster.num_nodes)
        out[3 + T] = min(decision_step / self.max_decisions, 1.0)
        out[4 + T] = n_done / num_jobs
        out[5 + T] = n_arrived / num_jobs

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
