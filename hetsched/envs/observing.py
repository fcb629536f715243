"""Observations and the global state of the env (a mixin of :class:`~hetsched.envs.core.EnvCore`).

The features themselves are built by :class:`~hetsched.envs.features.FeatureBuilder`; this mixin
caches the parts that only change when the round's allocation or free resources change.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from hetsched.envs.core_state import CoreState
from hetsched.envs.evictions import slot_ranks
from hetsched.sim.state import FUTURE


class Observing(CoreState):
    """Per-agent observations, the global state and job counts."""

    def _node_parts(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The own-node blocks (N, node_dim) and the global block (cached until a refresh)."""
        if self._obs_cache is None and self._head_kernel is not None:
            self._obs_cache = self._node_parts_compiled()
        elif self._obs_cache is None:
            nodes = self.features.node_blocks(
                self._resident(), self._count, self.free_g, self.free_c, self.free_m, self.node_up
            )
            glob = self.features.global_block(
                int(self.pending.size) - self._n_new_jobs,
                self._n_cur_jobs + self._n_new_jobs,
                self.free_g,
                self.decision_step,
                self._n_done,
                self._admitted,
                self.J,
            )
            self._obs_cache = (nodes, glob)
        return self._obs_cache

    def _node_parts_compiled(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """:meth:`_node_parts` with the compiled kernels: the resident slots written straight
        into the node blocks, the rest of the blocks and the global block's arrays in one call
        (:mod:`hetsched.envs.kernels_step`); the same numbers."""
        sim, wl, f = self.sim, self.wl, self.features
        assert sim is not None and wl is not None and self._head_kernel is not None
        N, R, D = self.N, self.cfg.resident_slots, self.layout.res_dim
        H = f._node_head.shape[1]
        nodes = np.zeros((N, H + R * D))
        a = self.round_allocation()
        if a.size and self._resident_kernel is not None:
            slots = nodes[:, H:].reshape(N, R, D)  # splits the last axis: a view into nodes
            assert slots.base is nodes
            remaining, work = f.observed_remaining(wl, sim.remaining)  # the information track's
            self._resident_kernel(
                a.job, a.node, a.gpus, a.cpus, a.mem, self._cur.size, wl.model, wl.cpu_per_gpu,
                wl.mem_per_gpu, work, remaining, sim.attained_gpu_s, f.node_gpus,
                f.node_cpus, f.node_mem, slots,
            )  # fmt: skip
        elif a.size:
            nodes[:, H:] = self._resident().reshape(N, -1)
        glob = np.empty(f.gpus_per_type.shape[0] + 6)
        args = (
            f._node_head, self.free_g, self.free_c, self.free_m, self.node_up, self._count, R,
        )  # fmt: skip
        rest = (
            f.node_gpus, f.node_cpus, f.node_mem, f.node_type, f.gpus_per_type, f.num_gpus,
            nodes, glob,
        )  # fmt: skip
        while not self._head_kernel(*args, f._slowdown_by_count, *rest):
            f._slowdown_by_count = f._slowdown_table(int(self._count.max()) + 1)
        f.global_counts(
            glob, int(self.pending.size) - self._n_new_jobs, self._n_cur_jobs + self._n_new_jobs,
            self.decision_step, self._n_done, self._admitted, self.J,
        )  # fmt: skip
        return nodes, glob

    def _obs_parts(self) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Node blocks, node-independent window features (K, job_common_dim), global block."""
        nodes, glob = self._node_parts()
        if self._common_cache is None:
            sim, wl, jt = self.sim, self.wl, self.jt
            assert sim is not None and wl is not None and jt is not None
            self._common_cache = self.features.window_common(
                jt, self.window, self.slot_ok, sim.time, wl, sim.remaining, sim.attained_gpu_s
            )
        return nodes, self._common_cache, glob

    def _resident(self) -> NDArray[np.float64]:
        """Resident-slot features of the round's entries, shape (N, R, res_dim).

        A node's slots hold its running entries (in the engine's order), then the entries placed
        this round (in placement order); entries beyond R are left out.
        """
        sim, wl = self.sim, self.wl
        assert sim is not None and wl is not None
        a = self.round_allocation()
        out = np.zeros((self.N, self.cfg.resident_slots, self.layout.res_dim))
        kernel = self._resident_kernel
        if a.size and kernel is not None:  # the same numbers, compiled (hetsched.envs.kernels)
            f = self.features
            remaining, work = f.observed_remaining(wl, sim.remaining)  # the information track's
            kernel(
                a.job, a.node, a.gpus, a.cpus, a.mem, self._cur.size, wl.model, wl.cpu_per_gpu,
                wl.mem_per_gpu, work, remaining, sim.attained_gpu_s, f.node_gpus,
                f.node_cpus, f.node_mem, out,
            )  # fmt: skip
        elif a.size:
            order, ns, rank = slot_ranks(a.node)
            keep = rank < self.cfg.resident_slots
            e = order[keep]
            new = e >= self._cur.size  # placed during this round
            out[ns[keep], rank[keep]] = self.features.entry_features(
                wl, a.job[e], a.node[e], a.gpus[e], a.cpus[e], a.mem[e], new,
                sim.remaining, sim.attained_gpu_s,
            )  # fmt: skip
        return out

    def observations(self) -> NDArray[np.float32]:
        """Per-agent observations, shape (N, D)."""
        assert self.jt is not None and self.wl is not None
        if self.features.observe_kernel is not None:  # the same numbers, compiled
            sim = self.sim
            assert sim is not None
            nodes, glob = self._node_parts()
            return self.features.observations_compiled(
                self.jt, self.wl, self.window, self.slot_ok, self.ma, nodes, glob, sim.time,
                sim.remaining, sim.attained_gpu_s,
            )  # fmt: skip
        nodes, common, glob = self._obs_parts()
        per_node = self.features.window_node(self.jt, self.wl, self.window, self.slot_ok, self.ma)
        return self.features.observations(nodes, common, per_node, glob)

    def state(self) -> NDArray[np.float32]:
        """Global state, shape (state_dim,)."""
        assert self.jt is not None
        nodes, common, glob = self._obs_parts()
        return self.features.state(self.jt, self.window, self.slot_ok, nodes, common, glob)

    def num_jobs_status(self) -> dict[str, int]:
        """Counts of jobs by status (future, waiting, running, done)."""
        assert self.sim is not None
        st = self.sim.status
        return {
            "future": int((st == FUTURE).sum()),
            "pending": int(self.pending.size),
            "running": int(np.unique(self._cur.job).size) if self._cur.size else 0,
            "done": int(self._n_done),
        }
