"""Rendering of an env core's round state: text (``ansi``) or a node-by-GPU image (``rgb_array``).

Shared by :class:`hetsched.envs.cluster_env.ClusterParallelEnv` and the central env.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from hetsched.envs.core import EnvCore
from hetsched.sim.catalog import GPU_TYPE_NAMES


def render_core(core: EnvCore, mode: str) -> str | NDArray[np.uint8]:
    """Render the core's round state as text or as an RGB image."""
    cl = core.cluster
    alloc = core.round_allocation()
    if mode == "ansi":
        assert core.sim is not None
        lines = [
            f"t={core.sim.time:.0f}s step={core.decision_step} done={core._n_done}/{core.J} "
            f"waiting={core.pending.size} window={core.window.tolist()}"
        ]
        for n in range(cl.num_nodes):
            jobs = alloc.job[alloc.node == n].tolist()
            lines.append(
                f"node_{n:<3d} {GPU_TYPE_NAMES[cl.node_type[n]]:<10s} "
                f"gpus {int(core.free_g[n])}/{int(cl.node_gpus[n])} free  jobs {jobs}"
            )
        return "\n".join(lines)
    if mode == "rgb_array":
        N, G = cl.num_nodes, int(cl.node_gpus.max())
        img = np.zeros((N, G, 3), dtype=np.uint8)
        img[:, :, :] = 40
        cols = np.arange(G)[None, :]
        exists = cols < cl.node_gpus[:, None]
        busy = cols < (cl.node_gpus - core.free_g)[:, None]
        img[exists] = (200, 200, 200)
        img[busy & exists] = (30, 120, 220)
        return np.repeat(np.repeat(img, 8, axis=0), 8, axis=1)
    raise ValueError(f"render mode {mode!r} is not one of ['ansi', 'rgb_array']")
