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

Other GPU types (H100, A800, L40S ...) are :class:`GpuVariant` s: a base catalogue type and a
relative-speed profile, declared in a cluster spec's ``gpu_types`` section (docs/extending.md).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.errors import ClusterSpecError, UnknownGpuTypeError


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
        "Use one of these names, or define the type by its speed relative to one of them "
        "(`gpu_types:` in the cluster file; docs/extending.md)."
    )


def gpu_type_index(name: str, *, where: str = "") -> int:
    """Index of a GPU type (or alias) in :data:`GPU_TYPE_NAMES`."""
    return GPU_TYPE_NAMES.index(canonical_gpu_type(name, where=where))


# ---------------------------------------------------------------------------- derived GPU types
@dataclass(frozen=True)
class GpuVariant:
    """A GPU type outside the catalogue, defined by a relative-speed profile over a base type.

    A node of a variant type takes its base type's slot wherever the simulator indexes GPU types
    (placement, GPU-type constraints, per-type GPU-hours, the throughput table's other columns),
    and the engine runs each job on it at ``speed x`` the base type's throughput. The shipped
    throughput table is not rebuilt.

    Attributes:
        name: Lower-case name (not a catalogue name or alias), e.g. ``"h100"``.
        base: Canonical catalogue type it is measured against, e.g. ``"a100"``.
        memory_gib: Device memory in GiB.
        speed: ``(pattern, factor)`` pairs: a model whose name contains ``pattern``
            (case-insensitive; the longest matching pattern wins) runs ``factor`` times as fast
            as on ``base``.
        default_speed: Factor of every model no pattern matches.
        description: Free text (hardware, where the numbers come from).
    """

    name: str
    base: str
    memory_gib: float
    speed: tuple[tuple[str, float], ...]
    default_speed: float
    description: str = ""

    def factors(self, models: Sequence[str]) -> NDArray[np.float64]:
        """Speed factor of each model name over the base type, shape (M,)."""
        pats = sorted(self.speed, key=lambda p: -len(p[0]))
        out = np.full(len(models), self.default_speed, dtype=np.float64)
        for i, m in enumerate(models):
            low = str(m).lower()
            for pat, f in pats:
                if pat in low:
                    out[i] = f
                    break
        return out


def _factor(value: Any, where: str) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        f = float("nan")
    if isinstance(value, bool) or not (np.isfinite(f) and f > 0):
        raise ClusterSpecError(f"{where}={value!r} must be a positive relative speed (1 = base)")
    return f


def _speed_csv(path: str, where: str) -> list[tuple[str, float]]:
    """``(model, factor)`` rows of a speed CSV (``model,speed`` or ``model,base,throughput``)."""
    p = Path(os.path.expanduser(path))
    if not p.is_file():
        raise ClusterSpecError(f"{where}: speed CSV {p} not found (cwd {os.getcwd()})")
    with p.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        cols = [c.strip().lower() for c in reader.fieldnames or []]
        has_speed = "speed" in cols
        if "model" not in cols or not (has_speed or {"base", "throughput"} <= set(cols)):
            raise ClusterSpecError(
                f"{p}: columns {cols} need `model` and either `speed` (relative to the base type) "
                "or `base` and `throughput` (measured on the base type and on the new one)"
            )
        rows: list[tuple[str, float]] = []
        for i, raw in enumerate(reader, start=2):
            r = {str(k).strip().lower(): v for k, v in raw.items()}
            model = str(r.get("model") or "").strip().lower()
            if not model:
                raise ClusterSpecError(f"{p}: line {i} has an empty model")
            if has_speed:
                f = _factor(r.get("speed"), f"{p}: line {i}: speed")
            else:
                b = _factor(r.get("base"), f"{p}: line {i}: base")
                f = _factor(r.get("throughput"), f"{p}: line {i}: throughput") / b
            rows.append((model, f))
    if not rows:
        raise ClusterSpecError(f"{p}: no rows; give one row per model (family)")
    return rows


def gpu_variant(name: str, spec: Mapping[str, Any], *, source: str = "gpu_types") -> GpuVariant:
    """Build a :class:`GpuVariant` from a cluster spec's ``gpu_types.<name>`` mapping.

    The mapping has ``base`` (catalogue type), ``memory_gib``, optional ``description``, and a
    speed profile: ``speed`` (a mapping of model-name pattern to factor; the key ``default`` sets
    the factor of unmatched models, 1.0 if absent) and/or ``speed_csv`` (a CSV file with columns
    ``model,speed`` or ``model,base,throughput``; its rows override ``speed``).

    Raises:
        ClusterSpecError: Naming the field for a clash with a catalogue name, an unknown field, a
            missing base or a factor that is not a positive number.
    """
    where = f"{source}.{name}"
    key = str(name).strip().lower()
    if key in _ALIASES:
        raise ClusterSpecError(
            f"{where}: {name!r} is already a catalogue GPU type ({_ALIASES[key]}); give the new "
            "type another name"
        )
    if not key or not isinstance(spec, Mapping):
        raise ClusterSpecError(f"{where} must be a mapping with base, memory_gib and speed")
    unknown = sorted(set(spec) - {"base", "memory_gib", "speed", "speed_csv", "description"})
    if unknown:
        raise ClusterSpecError(
            f"{where} has unknown field(s) {unknown}; allowed: base, memory_gib, speed, "
            "speed_csv, description"
        )
    if "base" not in spec or "memory_gib" not in spec:
        raise ClusterSpecError(f"{where} needs `base` (a catalogue type) and `memory_gib`")
    base = canonical_gpu_type(str(spec["base"]), where=f"{where}.base")
    mem = _factor(spec["memory_gib"], f"{where}.memory_gib")
    speed = dict(spec.get("speed") or {})
    if "speed" not in spec and "speed_csv" not in spec:
        raise ClusterSpecError(f"{where} needs a speed profile: `speed` and/or `speed_csv`")
    default = _factor(speed.pop("default", 1.0), f"{where}.speed.default")
    pairs = {str(k).strip().lower(): _factor(v, f"{where}.speed.{k}") for k, v in speed.items()}
    if spec.get("speed_csv"):
        pairs.update(_speed_csv(str(spec["speed_csv"]), where))
    return GpuVariant(
        name=key,
        base=base,
        memory_gib=mem,
        speed=tuple(sorted(pairs.items())),
        default_speed=default,
        description=str(spec.get("description", "")),
    )
