"""Clusters: nodes with a GPU type, GPUs, CPU cores and memory.

A :class:`Cluster` is struct-of-arrays over nodes. Units: CPU in cores, memory in GiB. Every node
holds GPUs of exactly one type (``node_type`` indexes :data:`hetsched.sim.catalog.GPU_TYPE_NAMES`).

Build one from a spec (the shape of the YAML presets in ``conf/cluster/``)::

    Cluster.from_spec(name="tiny", nodes=[
        {"gpu_type": "v100", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 244},
        {"gpu_type": "k80",  "count": 1, "gpus": 8, "cpus": 32, "mem_gib": 488},
    ])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.catalog import GPU_TYPE_NAMES, GpuVariant, gpu_type_index, gpu_variant
from hetsched.sim.errors import ClusterSpecError

_NODE_FIELDS = ("gpu_type", "count", "gpus", "cpus", "mem_gib")


@dataclass
class Cluster:
    """A heterogeneous GPU cluster (struct-of-arrays over N nodes).

    Attributes:
        name: Cluster name (used in result tables).
        node_type: GPU type index per node into ``GPU_TYPE_NAMES``, shape (N,).
        node_gpus: GPUs per node, shape (N,).
        node_cpus: CPU cores per node, shape (N,).
        node_mem: Memory per node in GiB, shape (N,).
        variants: GPU types outside the catalogue used by some node (see
            :class:`~hetsched.sim.catalog.GpuVariant`); empty for a catalogue-only cluster.
        node_variant: Index into ``variants`` per node, -1 for a catalogue type, shape (N,).
            A variant node's ``node_type`` is its base type.
    """

    name: str
    node_type: NDArray[np.int64]
    node_gpus: NDArray[np.int64]
    node_cpus: NDArray[np.float64]
    node_mem: NDArray[np.float64]
    variants: tuple[GpuVariant, ...] = ()
    node_variant: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __post_init__(self) -> None:
        self.node_type = np.asarray(self.node_type, dtype=np.int64)
        self.node_gpus = np.asarray(self.node_gpus, dtype=np.int64)
        self.node_cpus = np.asarray(self.node_cpus, dtype=np.float64)
        self.node_mem = np.asarray(self.node_mem, dtype=np.float64)
        n = self.node_type.shape
        if self.node_variant.size == 0 and not self.variants:
            self.node_variant = np.full(n, -1, dtype=np.int64)
        self.node_variant = np.asarray(self.node_variant, dtype=np.int64)
        if self.node_variant.shape != n or (
            self.node_variant.size and int(self.node_variant.max()) >= len(self.variants)
        ):
            raise ClusterSpecError(
                f"cluster {self.name!r}: node_variant must have shape {n} and index variants"
            )
        for v in np.unique(self.node_variant[self.node_variant >= 0]):
            base = gpu_type_index(self.variants[int(v)].base)
            if np.any(self.node_type[self.node_variant == v] != base):
                raise ClusterSpecError(
                    f"cluster {self.name!r}: nodes of GPU type {self.variants[int(v)].name!r} "
                    f"must have its base type {self.variants[int(v)].base!r} as node_type"
                )
        for fname in ("node_gpus", "node_cpus", "node_mem"):
            if getattr(self, fname).shape != n:
                raise ClusterSpecError(f"cluster {self.name!r}: {fname} must have shape {n}")
        if self.num_nodes == 0:
            raise ClusterSpecError(
                f"cluster {self.name!r} has zero nodes; give at least one node with gpus >= 1"
            )
        if self.node_type.min() < 0 or self.node_type.max() >= len(GPU_TYPE_NAMES):
            raise ClusterSpecError(f"cluster {self.name!r}: node_type index out of range")
        for fname in ("node_gpus", "node_cpus", "node_mem"):
            arr = getattr(self, fname)
            bad = np.flatnonzero(~np.isfinite(arr) | (arr <= 0))
            if bad.size:
                raise ClusterSpecError(
                    f"cluster {self.name!r}: node {int(bad[0])} has {fname}={arr[bad[0]]}; "
                    "every node needs a positive number of GPUs, CPU cores and GiB of memory"
                )

    # ------------------------------------------------------------------ properties
    @property
    def num_nodes(self) -> int:
        """Number of nodes N."""
        return int(self.node_type.shape[0])

    @property
    def num_gpus(self) -> int:
        """Total number of GPUs."""
        return int(self.node_gpus.sum())

    @property
    def types_present(self) -> NDArray[np.int64]:
        """Sorted GPU type indices that occur in the cluster."""
        return np.unique(self.node_type)

    def gpus_per_type(self) -> NDArray[np.int64]:
        """GPUs of each catalogue type, shape (len(GPU_TYPE_NAMES),)."""
        return np.bincount(
            self.node_type, weights=self.node_gpus, minlength=len(GPU_TYPE_NAMES)
        ).astype(np.int64)

    def max_node_gpus_per_type(self) -> NDArray[np.int64]:
        """Largest node size (GPUs) of each catalogue type (0 where absent)."""
        out = np.zeros(len(GPU_TYPE_NAMES), dtype=np.int64)
        np.maximum.at(out, self.node_type, self.node_gpus)
        return out

    @property
    def has_variants(self) -> bool:
        """Whether some node's GPU type is outside the catalogue (a :class:`GpuVariant`)."""
        return bool(np.any(self.node_variant >= 0))

    def speed_table(self, models: Sequence[str]) -> NDArray[np.float64] | None:
        """Speed factor over the base type per model and variant, shape (M, V + 1).

        Column 0 is the catalogue types (all ones); column ``v + 1`` is ``variants[v]``, so
        ``table[m, node_variant[n] + 1]`` is node ``n``'s factor for model ``m``. ``None`` when no
        node is a variant.
        """
        if not self.has_variants:
            return None
        cols = [np.ones(len(models))] + [v.factors(models) for v in self.variants]
        return np.stack(cols, axis=1)

    def describe(self) -> str:
        """One-line summary such as ``sia_64: 64 GPUs (24 t4, 24 rtx2080ti, 16 a100), 11 nodes``.

        A GPU type outside the catalogue is shown with its base, e.g. ``16 h100 (as a100)``.
        """
        parts = []
        for k in np.flatnonzero(self.gpus_per_type()):
            for v in np.unique(self.node_variant[self.node_type == k]):
                g = int(self.node_gpus[(self.node_type == k) & (self.node_variant == v)].sum())
                label = (
                    GPU_TYPE_NAMES[k]
                    if v < 0
                    else f"{self.variants[v].name} (as {GPU_TYPE_NAMES[k]})"
                )
                parts.append(f"{g} {label}")
        return f"{self.name}: {self.num_gpus} GPUs ({', '.join(parts)}), {self.num_nodes} nodes"

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_spec(
        cls,
        name: str,
        nodes: Sequence[Mapping[str, Any]],
        *,
        source: str = "cluster spec",
        gpu_types: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> Cluster:
        """Build a cluster from node groups.

        Args:
            name: Cluster name.
            nodes: Node groups, each a mapping with ``gpu_type`` (catalogue name or alias),
                ``count`` (nodes in the group, default 1), ``gpus`` (per node), ``cpus``
                (cores per node) and ``mem_gib`` (GiB per node).
            source: Where the spec came from (file name), used in error messages.
            gpu_types: GPU types outside the catalogue, name -> spec (see
                :func:`hetsched.sim.catalog.gpu_variant`); nodes may name them as ``gpu_type``.

        Raises:
            ClusterSpecError: For unknown fields, unknown GPU types, or non-positive values.
        """
        if nodes is None or len(nodes) == 0:
            raise ClusterSpecError(
                f"{source}: cluster {name!r} has no node groups; add entries under `nodes:` "
                "like {gpu_type: v100, count: 4, gpus: 8, cpus: 64, mem_gib: 512}"
            )
        defined = {
            v.name: v
            for v in (
                gpu_variant(str(k), spec, source=f"{source}: gpu_types")
                for k, spec in (gpu_types or {}).items()
            )
        }
        used: list[GpuVariant] = []
        var: list[int] = []
        types: list[int] = []
        gpus: list[int] = []
        cpus: list[float] = []
        mem: list[float] = []
        for i, group in enumerate(nodes):
            where = f"{source}: nodes[{i}]"
            if not isinstance(group, Mapping):
                raise ClusterSpecError(f"{where} must be a mapping, got {group!r}")
            unknown = set(group) - set(_NODE_FIELDS)
            if unknown:
                raise ClusterSpecError(
                    f"{where} has unknown field(s) {sorted(unknown)}; allowed: {list(_NODE_FIELDS)}"
                )
            for req in ("gpu_type", "gpus", "cpus", "mem_gib"):
                if req not in group:
                    raise ClusterSpecError(f"{where} is missing required field {req!r}")
            tname = str(group["gpu_type"]).strip().lower()
            if tname in defined:
                if defined[tname] not in used:
                    used.append(defined[tname])
                vi = used.index(defined[tname])
                k = gpu_type_index(defined[tname].base)
            else:
                vi = -1
                k = gpu_type_index(str(group["gpu_type"]), where=f"{where}.gpu_type")
            count = _positive_int(group.get("count", 1), f"{where}.count")
            g = _positive_int(group["gpus"], f"{where}.gpus")
            c = _positive_float(group["cpus"], f"{where}.cpus")
            m = _positive_float(group["mem_gib"], f"{where}.mem_gib")
            types += [k] * count
            var += [vi] * count
            gpus += [g] * count
            cpus += [c] * count
            mem += [m] * count
        return cls(
            name=name,
            node_type=np.array(types),
            node_gpus=np.array(gpus),
            node_cpus=np.array(cpus),
            node_mem=np.array(mem),
            variants=tuple(used),
            node_variant=np.array(var, dtype=np.int64),
        )


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise ClusterSpecError(f"{where}={value!r} must be a positive integer")
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ClusterSpecError(f"{where}={value!r} must be a positive integer") from None
    if not np.isfinite(f) or f != int(f) or f < 1:
        raise ClusterSpecError(f"{where}={value!r} must be a positive integer")
    return int(f)


def _positive_float(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise ClusterSpecError(f"{where}={value!r} must be a positive number")
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ClusterSpecError(f"{where}={value!r} must be a positive number") from None
    if not np.isfinite(f) or f <= 0:
        raise ClusterSpecError(f"{where}={value!r} must be a positive number")
    return f
