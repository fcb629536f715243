"""Random cluster shapes: GPU types, node groups, node counts and node sizes drawn per episode.

Training a scheduler on the two or three cluster shapes of a benchmark's train split lets it
learn those shapes; :class:`ClusterDraw` draws a new heterogeneous cluster from a generator, so
that a policy sees many type mixes, node counts and node sizes (the randomisation of cluster
shapes and node counts a learned scheduler trains with, see ``agent.cluster_draw``). A draw:

1. a number of node groups ``n`` uniformly in ``groups`` (inclusive), each with its own GPU type
   drawn without replacement from ``gpu_types``;
2. per group, a node count uniformly in ``nodes`` (inclusive), GPUs per node from
   ``gpus_per_node``, host CPUs per GPU from ``cpus_per_gpu`` and host memory per GPU (GiB) from
   ``mem_gib_per_gpu`` (each uniformly);
3. the whole draw is repeated until the cluster's GPU total lies in ``total_gpus`` (inclusive);
   after :data:`MAX_TRIES` draws without one, :class:`~hetsched.sim.errors.ClusterSpecError`
   says which ranges cannot meet the bound.

Only numpy; every random number comes from the caller's generator, so one seed gives one
cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hetsched.sim.catalog import canonical_gpu_type
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import ClusterSpecError

#: Draws tried before giving up on the GPU-total bound.
MAX_TRIES = 1000


def _range(value: Sequence[int], name: str, lo: int = 1) -> tuple[int, int]:
    vals = [int(v) for v in value]
    if len(vals) != 2 or vals[0] < lo or vals[1] < vals[0]:
        raise ClusterSpecError(
            f"cluster_draw.{name}={list(value)!r} must be [low, high] with {lo} <= low <= high"
        )
    return vals[0], vals[1]


def _choices(value: Sequence[float], name: str) -> tuple[float, ...]:
    vals = tuple(float(v) for v in value)
    if not vals or any(not (np.isfinite(v) and v > 0) for v in vals):
        raise ClusterSpecError(
            f"cluster_draw.{name}={list(value)!r} must be a non-empty list of positive numbers"
        )
    return vals


@dataclass(frozen=True)
class ClusterDraw:
    """A distribution over heterogeneous clusters (module docstring); call it with a generator.

    Attributes:
        gpu_types: GPU types a group may have (catalogue names or aliases).
        groups: Node groups per cluster, ``[low, high]``; at most ``len(gpu_types)``.
        nodes: Nodes per group, ``[low, high]``.
        gpus_per_node: GPUs per node, one value per group.
        cpus_per_gpu: Host CPU cores per GPU of a node.
        mem_gib_per_gpu: Host memory per GPU of a node (GiB).
        total_gpus: The cluster's GPU total, ``[low, high]``.

    Raises:
        ClusterSpecError: On an unknown GPU type or a malformed range (one line naming the
            field).
    """

    gpu_types: tuple[str, ...]
    groups: tuple[int, int]
    nodes: tuple[int, int]
    gpus_per_node: tuple[float, ...]
    cpus_per_gpu: tuple[float, ...]
    mem_gib_per_gpu: tuple[float, ...]
    total_gpus: tuple[int, int]

    @classmethod
    def build(
        cls,
        *,
        gpu_types: Sequence[str],
        groups: Sequence[int],
        nodes: Sequence[int],
        gpus_per_node: Sequence[int],
        cpus_per_gpu: Sequence[float],
        mem_gib_per_gpu: Sequence[float],
        total_gpus: Sequence[int],
    ) -> ClusterDraw:
        """Checked construction from config values (lists, OmegaConf containers)."""
        types = tuple(canonical_gpu_type(str(t), where="cluster_draw.gpu_types") for t in gpu_types)
        if len(set(types)) != len(types) or not types:
            raise ClusterSpecError(
                f"cluster_draw.gpu_types={list(gpu_types)!r} must name distinct GPU types"
            )
        grp = _range(groups, "groups")
        if grp[1] > len(types):
            raise ClusterSpecError(
                f"cluster_draw.groups={list(groups)!r}: at most {len(types)} groups (one per "
                "GPU type of cluster_draw.gpu_types)"
            )
        g = _choices(gpus_per_node, "gpus_per_node")
        if any(v != int(v) for v in g):
            raise ClusterSpecError(
                f"cluster_draw.gpus_per_node={list(gpus_per_node)!r} must be whole numbers"
            )
        return cls(
            gpu_types=types,
            groups=grp,
            nodes=_range(nodes, "nodes"),
            gpus_per_node=g,
            cpus_per_gpu=_choices(cpus_per_gpu, "cpus_per_gpu"),
            mem_gib_per_gpu=_choices(mem_gib_per_gpu, "mem_gib_per_gpu"),
            total_gpus=_range(total_gpus, "total_gpus"),
        )

    def __call__(self, rng: np.random.Generator, name: str = "drawn") -> Cluster:
        """A cluster drawn with ``rng`` (module docstring).

        Raises:
            ClusterSpecError: If :data:`MAX_TRIES` draws give no cluster within ``total_gpus``.
        """
        lo, hi = self.total_gpus
        for _ in range(MAX_TRIES):
            n = int(rng.integers(self.groups[0], self.groups[1] + 1))
            types = rng.choice(len(self.gpu_types), size=n, replace=False)
            count = rng.integers(self.nodes[0], self.nodes[1] + 1, size=n)
            gpus = np.asarray(self.gpus_per_node)[rng.integers(len(self.gpus_per_node), size=n)]
            cpg = np.asarray(self.cpus_per_gpu)[rng.integers(len(self.cpus_per_gpu), size=n)]
            mpg = np.asarray(self.mem_gib_per_gpu)[rng.integers(len(self.mem_gib_per_gpu), size=n)]
            total = int((count * gpus).sum())
            if lo <= total <= hi:
                spec = [
                    {
                        "gpu_type": self.gpu_types[int(t)],
                        "count": int(c),
                        "gpus": int(g),
                        "cpus": float(g * cp),
                        "mem_gib": float(g * mp),
                    }
                    for t, c, g, cp, mp in zip(types, count, gpus, cpg, mpg, strict=True)
                ]
                return Cluster.from_spec(name, spec, source="cluster_draw")
        raise ClusterSpecError(
            f"cluster_draw: no cluster with total_gpus in {list(self.total_gpus)} after "
            f"{MAX_TRIES} draws; widen total_gpus or change groups/nodes/gpus_per_node"
        )
