"""Action masks of the env's features (a mixin of :class:`~hetsched.envs.features.FeatureBuilder`).

The mask parts fixed by a job (per-GPU amounts at each level, memory floor, GPU-type constraint,
positive throughput per level) are tabulated once per episode for every (node, job) pair; a
window gathers its columns, and only the free-resource comparison is redone per refresh. With
numba the whole mask runs as one compiled kernel (:mod:`hetsched.envs.kernels`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.envs.layout import (
    EPS,
    JobTable,
    MaskArrays,
    _PerJobStatic,
    _WindowStatic,
)
from hetsched.envs.spaces import LevelSets
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

#: Largest node-by-job table of static mask parts kept per episode (bytes); above it the masks
#: compute the window's static parts directly (same numbers, slower).
PER_JOB_STATIC_MAX_BYTES = 64 * 2**20


class MaskBuilder:
    """Legal actions of every node for a window (mixin; see :meth:`masks`)."""

    tm: ThroughputModel
    levels: LevelSets
    node_type: NDArray[np.int64]
    cpu_share: NDArray[np.float64]
    mem_share: NDArray[np.float64]
    lc: NDArray[np.float64]
    lm: NDArray[np.float64]
    lg_of: NDArray[np.int64]
    one_flat: int
    type_perm: NDArray[np.int64]
    type_starts: NDArray[np.int64]
    present_types: NDArray[np.int64]
    node_group: NDArray[np.int64]
    mask_kernel: Any | None
    _type_sorted: bool
    _static_cache: tuple[JobTable, bytes, bytes, _WindowStatic] | None
    _per_job_cache: tuple[JobTable, _PerJobStatic | None] | None

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
        tok = (jt.tput[jobs][:, nt] > 0) & jt.level_ok[jobs][:, None, :, None]  # (B, N, Lg, 2)
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
