"""GPU-type catalogue.

The catalogue lists every GPU type the simulator knows, with the aliases used by the data sources
(Gavel's ``k80``/``p100``/``v100``, Sia's profile suffixes ``aws``/``azure``/``dgx-ext``/``rtx``/
``quad``, Alibaba PAI's ``V100M32`` ...). Throughput for each type comes from
:mod:`hetsched.sim.throughput`; which figures were measured and which were projected is recorded
there.

| canonical | hardware | memory (GiB) | measured by |
|---|---|---|---|
| ``k80`` | NVIDIA K80 | 12 | Gavel (steps/s, 26 job types) |
| ``p100`` | NVIDIA P100 | 16 | Gavel |
| ``v100`` | NVIDIA V100 | 16 (32 for the M32 variant, same speed) | Gavel; Sia ``azure`` |
| ``t4`` | NVIDIA T4 | 16 | Sia/Pollux ``aws`` (g4dn.12xlarge) |
| ``a100`` | NVIDIA A100 40 GB | 40 | Sia ``dgx-ext`` |
| ``rtx6000`` | Quadro RTX 6000 | 24 | Sia ``quad`` |
| ``rtx2080ti`` | GeForce RTX 2080 Ti | 11 | Sia ``rtx`` |
"""

from __future__ import annotations

from dataclasses import dataclass

from hetsched.sim.errors import UnknownGpuTypeError


@dataclass(frozen=True)
class GpuType:
    """One GPU type of the catalogue.

    Attributes:
        name: Canonical lower-case name.
        description: Human-readable hardware name.
        memory_gib: Device memory in GiB.
    """

    name: str
    description: str
    memory_gib: float


CATALOG: tuple[GpuType, ...] = (
    GpuType("k80", "NVIDIA K80", 12.0),
    GpuType("p100", "NVIDIA P100", 16.0),
    GpuType("v100", "NVIDIA V100", 16.0),
    GpuType("t4", "NVIDIA T4", 16.0),
    GpuType("a100", "NVIDIA A100 40GB", 40.0),
    GpuType("rtx6000", "NVIDIA Quadro RTX 6000", 24.0),
    GpuType("rtx2080ti", "NVIDIA GeForce RTX 2080 Ti", 11.0),
)

GPU_TYPE_NAMES: tuple[str, ...] = tuple(g.name for g in CATALOG)

_ALIASES: dict[str, str] = {
    "k80": "k80",
    "p100": "p100",
    "v100": "v100",
    "v100m16": "v100",
    "v100m32": "v100",
    "v100-32gb": "v100",
    "azure": "v100",
    "t4": "t4",
    "aws": "t4",
    "a100": "a100",
    "dgx": "a100",
    "dgx-ext": "a100",
    "a100-40gb": "a100",
    "rtx6000": "rtx6000",
    "quadro_rtx_6000": "rtx6000",
    "quadro-rtx-6000": "rtx6000",
    "quad": "rtx6000",
    "rtx2080ti": "rtx2080ti",
    "rtx_2080_ti": "rtx2080ti",
    "2080ti": "rtx2080ti",
    "rtx": "rtx2080ti",
}


def canonical_gpu_type(name: str, *, where: str = "") -> str:
    """Return the canonical catalogue name for a GPU type or one of its aliases.

    Args:
        name: A GPU type name, case-insensitive (``"V100M32"``, ``"dgx-ext"``, ``"t4"`` ...).
        where: Where the name came from (file and field), used in the error message.

    Returns:
        The canonical name, one of :data:`GPU_TYPE_NAMES`.

    Raises:
        UnknownGpuTypeError: If the name is not in the catalogue.
    """
    key = str(name).strip().lower()
    if key in _ALIASES:
        return _ALIASES[key]
    loc = f" in {where}" if where else ""
    raise UnknownGpuTypeError(
        f"unknown GPU type {name!r}{loc}; known types: {', '.join(GPU_TYPE_NAMES)} "
        f"(aliases: {', '.join(sorted(k for k in _ALIASES if k not in GPU_TYPE_NAMES))}). "
        "Use one of these names, or add the type to hetsched.sim.catalog with measured throughputs."
    )


def gpu_type_index(name: str, *, where: str = "") -> int:
    """Index of a GPU type (or alias) in :data:`GPU_TYPE_NAMES`."""
    return GPU_TYPE_NAMES.index(canonical_gpu_type(name, where=where))
