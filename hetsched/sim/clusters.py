"""Cluster factories for the Hydra presets in ``conf/cluster/``.

Each factory is named by a preset's ``_target_`` and called with only that preset's parameters:

| factory | preset | builds |
|---|---|---|
| :func:`spec_cluster` | ``gavel_108``, ``sia_64`` | the node groups written in the preset |
| :func:`scaled_cluster` | ``large_2048`` | node groups with every ``count`` multiplied |
| :func:`pai_cluster` | ``pai_mixed`` | a stratified sample of real Alibaba PAI v2020 machines |
| :func:`yaml_cluster` | ``custom`` | a user's own cluster YAML file |

A node group (see :meth:`hetsched.sim.cluster.Cluster.from_spec`) is a mapping with ``gpu_type``
(catalogue name or alias), ``count`` (nodes, default 1), ``gpus`` (per node), ``cpus`` (CPU cores
per node; the presets count logical CPUs, i.e. vCPUs / hardware threads) and ``mem_gib``.

The factories accept OmegaConf ``ListConfig``/``DictConfig`` (what ``hydra.utils.instantiate``
passes) as well as plain lists and dicts; only numpy (and PyYAML, imported lazily by
:func:`yaml_cluster`) are needed.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from hetsched.sim.catalog import GPU_TYPE_NAMES, canonical_gpu_type, gpu_type_index
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import ClusterSpecError

__all__ = [
    "PAI_COLUMNS",
    "PAI_DEFAULT_EXCLUDE",
    "PAI_SPEC_FILE",
    "PaiMachine",
    "load_pai_machines",
    "pai_cluster",
    "sample_pai_machines",
    "scaled_cluster",
    "spec_cluster",
    "yaml_cluster",
]

#: Top-level fields of a cluster YAML file (``_target_`` is tolerated and ignored, so a copy of a
#: ``spec_cluster`` preset also works as a user file).
_FILE_FIELDS = ("name", "nodes", "description", "gpu_types", "_target_")


def _plain(obj: Any) -> Any:
    """Recursively turn mappings/sequences (incl. OmegaConf containers) into dicts/lists."""
    if isinstance(obj, str | bytes):
        return obj
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, Sequence | set | frozenset):
        return [_plain(v) for v in obj]
    return obj


def _node_groups(nodes: Any, source: str, field: str = "nodes") -> list[Any]:
    groups = _plain(nodes)
    if groups is None:
        return []
    if not isinstance(groups, list):
        raise ClusterSpecError(
            f"{source}: `{field}` must be a list of node groups "
            "(- {gpu_type: v100, count: 4, gpus: 8, cpus: 64, mem_gib: 512}), "
            f"got {type(nodes).__name__} {nodes!r}"
        )
    return groups


def _cluster_name(name: Any, source: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ClusterSpecError(f"{source}: name={name!r} must be a non-empty string")
    return name


# ---------------------------------------------------------------------------- spec / scaled
def spec_cluster(
    name: str, nodes: Any, source: str | None = None, gpu_types: Any = None
) -> Cluster:
    """A cluster from node groups written in a preset (``conf/cluster/gavel_108.yaml`` ...).

    Args:
        name: Cluster name (used in result tables).
        nodes: List of node groups (plain or OmegaConf), see the module docstring.
        source: Where the spec came from, for error messages (default: ``cluster preset NAME``).
        gpu_types: GPU types outside the catalogue, name -> ``{base, memory_gib, speed,
            speed_csv, description}`` (see :func:`hetsched.sim.catalog.gpu_variant`).

    Raises:
        ClusterSpecError: For a malformed group, unknown field or non-positive value.
        UnknownGpuTypeError: For a GPU type that is neither in the catalogue nor in gpu_types.
    """
    src = source or f"cluster preset {name!r}"
    return Cluster.from_spec(
        _cluster_name(name, src),
        _node_groups(nodes, src),
        source=src,
        gpu_types=_gpu_types(gpu_types, src),
    )


def _gpu_types(value: Any, source: str) -> dict[str, Any]:
    value = _plain(value)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ClusterSpecError(
            f"{source}: gpu_types must map new type names to {{base, memory_gib, speed}}, "
            f"got {type(value).__name__}"
        )
    return dict(value)


def scaled_cluster(name: str, base_nodes: Any, factor: int, source: str | None = None) -> Cluster:
    """A cluster whose node groups are ``base_nodes`` with every ``count`` times ``factor``.

    Used for scale studies (Sia §9: the heterogeneous 64-GPU mix x {2, 4, 8, 16, 32}); the node
    shapes (GPUs, CPUs, memory per node) stay those of the base.

    Args:
        name: Cluster name.
        base_nodes: Node groups of the base cluster (``count`` defaults to 1).
        factor: Positive integer multiplier of every group's node count.
        source: Where the spec came from, for error messages.

    Raises:
        ClusterSpecError: For an invalid base spec or a factor that is not a positive integer.
    """
    src = source or f"cluster preset {name!r}"
    cname = _cluster_name(name, src)
    if isinstance(factor, bool) or not isinstance(factor, int | np.integer) or factor < 1:
        raise ClusterSpecError(f"{src}: factor={factor!r} must be a positive integer")
    groups = _node_groups(base_nodes, src, "base_nodes")
    Cluster.from_spec(cname, groups, source=f"{src}: base_nodes")  # validate before scaling
    scaled = [{**g, "count": int(float(g.get("count", 1))) * int(factor)} for g in groups]
    return Cluster.from_spec(cname, scaled, source=src)


# ---------------------------------------------------------------------------- user YAML file
def yaml_cluster(path: str | os.PathLike[str], name: str | None = None) -> Cluster:
    """A cluster from a user's YAML file (``cluster=custom cluster.path=FILE``).

    The file has the preset schema::

        name: my_cluster              # required, used in result tables
        description: optional text    # optional, ignored
        gpu_types:                    # optional: GPU types outside the catalogue
          h100: {base: a100, memory_gib: 80, speed: {default: 2.0}}
        nodes:                        # required, at least one node group
          - {gpu_type: a100, count: 2, gpus: 8, cpus: 256, mem_gib: 1024}
          - {gpu_type: v100, count: 4, gpus: 4, cpus: 32, mem_gib: 244}

    A relative ``path`` is resolved against the current directory (the launch directory under
    Hydra 1.3, which does not change directory). See ``docs/examples/my_cluster.yaml``.

    Args:
        path: The YAML file.
        name: Optional name overriding the file's ``name``.

    Raises:
        ClusterSpecError: Naming the file and the field for a missing file, a YAML syntax error
            (with line and column), a missing or unknown field, zero nodes, or a non-positive or
            non-numeric value.
        UnknownGpuTypeError: For a GPU type that is not in the catalogue.
    """
    import yaml  # lazy: the simulator core needs numpy only

    p = Path(os.path.expanduser(os.fspath(path)))
    src = str(p)
    if not p.is_file():
        raise ClusterSpecError(
            f"cluster file {src} not found (cwd {os.getcwd()}); pass an existing YAML file, "
            "e.g. cluster.path=docs/examples/my_cluster.yaml"
        )
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ClusterSpecError(f"cluster file {src}: cannot read it: {exc}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        loc = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ClusterSpecError(f"{src}: YAML syntax error{loc}: {problem}") from None
    if doc is None:
        raise ClusterSpecError(f"{src}: the file is empty; it needs top-level `name` and `nodes`")
    if not isinstance(doc, dict):
        raise ClusterSpecError(
            f"{src}: the top level must be a mapping with `name` and `nodes`, "
            f"got {type(doc).__name__}"
        )
    unknown = sorted(str(k) for k in doc if k not in _FILE_FIELDS)
    if unknown:
        raise ClusterSpecError(
            f"{src}: unknown top-level field(s) {unknown}; allowed: name, nodes, gpu_types, "
            "description"
        )
    for req in ("name", "nodes"):
        if req not in doc:
            raise ClusterSpecError(f"{src}: missing required top-level field {req!r}")
    cname = _cluster_name(doc["name"], f"{src}: field 'name'")
    if name is not None:
        cname = _cluster_name(name, f"{src}: name override")
    nodes = doc["nodes"]
    if not isinstance(nodes, list | type(None)):
        raise ClusterSpecError(
            f"{src}: field 'nodes' must be a list of node groups, got {type(nodes).__name__}"
        )
    return Cluster.from_spec(
        cname, nodes or [], source=src, gpu_types=_gpu_types(doc.get("gpu_types"), src)
    )


# ---------------------------------------------------------------------------- Alibaba PAI
#: The shipped copy of Alibaba's ``pai_machine_spec`` table (package data, CC-BY-4.0).
PAI_SPEC_FILE = "clusters/pai_machine_spec.csv"
#: Columns of the (header-less) CSV, as in ``pai_machine_spec.header``.
PAI_COLUMNS = ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu")
#: Machine labels ``pai_cluster`` drops by default: ``CPU`` (83 CPU-only machines, no GPU to
#: schedule) and ``MISC`` (280 machines x 8 GPUs of an undisclosed model with no throughput data).
PAI_DEFAULT_EXCLUDE = ("CPU", "MISC")
_GB_PER_GIB = 2**30 / 1e9


@dataclass(frozen=True)
class PaiMachine:
    """One row of ``pai_machine_spec``.

    Attributes:
        machine: Hashed machine ID.
        gpu_type: The file's label (``P100``, ``T4``, ``V100``, ``V100M32``, ``MISC``, ``CPU``).
        cpus: CPU cores (``cap_cpu``).
        mem_gb: Memory as written in the file (``cap_mem``, documented as GB).
        gpus: GPUs (``cap_gpu``).
        line: 1-based line number in the file.
    """

    machine: str
    gpu_type: str
    cpus: float
    mem_gb: float
    gpus: int
    line: int


def _read_pai_text(path: str | os.PathLike[str] | None) -> tuple[str, str | None, str]:
    """(csv text, header text or None, source name)."""
    if path is None:
        base = resources.files("hetsched").joinpath("data")
        csv_ref = base.joinpath(PAI_SPEC_FILE)
        hdr_ref = base.joinpath(PAI_SPEC_FILE.replace(".csv", ".header"))
        src = f"hetsched/data/{PAI_SPEC_FILE}"
        try:
            text = csv_ref.read_text(encoding="utf-8")
        except OSError as exc:
            raise ClusterSpecError(f"{src}: shipped PAI machine spec missing: {exc}") from None
        header = hdr_ref.read_text(encoding="utf-8") if hdr_ref.is_file() else None
        return text, header, src
    p = Path(os.path.expanduser(os.fspath(path)))
    src = str(p)
    if not p.is_file():
        raise ClusterSpecError(f"PAI machine spec {src} not found")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ClusterSpecError(f"{src}: cannot read it: {exc}") from None
    hdr = p.with_suffix(".header")
    header = hdr.read_text(encoding="utf-8") if hdr.is_file() else None
    return text, header, src


def load_pai_machines(path: str | os.PathLike[str] | None = None) -> list[PaiMachine]:
    """Every machine of an Alibaba PAI v2020 ``pai_machine_spec`` CSV.

    Args:
        path: The CSV (header-less, columns :data:`PAI_COLUMNS`; a ``.header`` file next to it
            may give the column order, and a header row is skipped); ``None`` = the shipped copy.

    Raises:
        ClusterSpecError: Naming the file and line for a malformed row.
    """
    text, header, src = _read_pai_text(path)
    cols = list(PAI_COLUMNS)
    if header is not None and header.strip():
        cols = [c.strip() for c in header.strip().splitlines()[0].split(",")]
        missing = [c for c in PAI_COLUMNS if c not in cols]
        if missing:
            raise ClusterSpecError(f"{src}: header file lacks column(s) {missing}; got {cols}")
    idx = {c: cols.index(c) for c in PAI_COLUMNS}
    out: list[PaiMachine] = []
    for lineno, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or all(not f.strip() for f in row):
            continue
        if row[idx["machine"]].strip() == "machine":  # a header row inside the CSV
            continue
        if len(row) != len(cols):
            raise ClusterSpecError(
                f"{src}:{lineno}: expected {len(cols)} fields ({','.join(cols)}), got {len(row)}"
            )
        vals: dict[str, float] = {}
        for c in ("cap_cpu", "cap_mem", "cap_gpu"):
            raw = row[idx[c]].strip()
            try:
                vals[c] = float(raw)
            except ValueError:
                raise ClusterSpecError(f"{src}:{lineno}: {c}={raw!r} is not a number") from None
            if not np.isfinite(vals[c]) or vals[c] < 0:
                raise ClusterSpecError(f"{src}:{lineno}: {c}={raw!r} must be >= 0")
        if vals["cap_gpu"] != int(vals["cap_gpu"]):
            raise ClusterSpecError(f"{src}:{lineno}: cap_gpu={vals['cap_gpu']} is not an integer")
        out.append(
            PaiMachine(
                machine=row[idx["machine"]].strip(),
                gpu_type=row[idx["gpu_type"]].strip(),
                cpus=vals["cap_cpu"],
                mem_gb=vals["cap_mem"],
                gpus=int(vals["cap_gpu"]),
                line=lineno,
            )
        )
    if not out:
        raise ClusterSpecError(f"{src}: no machine rows")
    return out


def sample_pai_machines(
    num_nodes: int = 32,
    seed: int = 0,
    path: str | os.PathLike[str] | None = None,
    gpu_types: Sequence[str] | None = None,
    exclude_types: Sequence[str] = PAI_DEFAULT_EXCLUDE,
) -> list[PaiMachine]:
    """The machines :func:`pai_cluster` picks (same arguments), in cluster node order.

    Stratified sampling without replacement: the strata are the file's ``gpu_type`` labels
    (``P100``, ``T4``, ``V100``, ``V100M32``), each gets ``num_nodes x its share of the kept
    machines`` nodes, rounded by largest remainder (ties: larger stratum, then label), and its
    machines are drawn with ``numpy.random.default_rng(seed)``. Nodes are ordered by catalogue
    GPU type, then by line in the file.
    """
    machines = load_pai_machines(path)
    src = f"hetsched/data/{PAI_SPEC_FILE}" if path is None else os.fspath(path)
    excl = {str(t).strip().upper() for t in _plain(exclude_types) or []}
    kept = [m for m in machines if m.gpu_type.upper() not in excl]
    canon: list[str] = []
    for m in kept:
        hint = (
            f"{src}:{m.line} (machine {m.machine}, gpu_type); add {m.gpu_type!r} to "
            "exclude_types to drop these machines"
        )
        canon.append(canonical_gpu_type(m.gpu_type, where=hint))
        if m.gpus < 1 or m.cpus <= 0 or m.mem_gb <= 0:
            raise ClusterSpecError(
                f"{src}:{m.line}: machine {m.machine} ({m.gpu_type}) has cap_gpu={m.gpus}, "
                f"cap_cpu={m.cpus}, cap_mem={m.mem_gb}; add {m.gpu_type!r} to exclude_types"
            )
    if gpu_types is not None:
        wanted = {
            canonical_gpu_type(str(t), where="pai_cluster gpu_types") for t in _plain(gpu_types)
        }
        keep = [c in wanted for c in canon]
        kept = [m for m, k in zip(kept, keep, strict=True) if k]
        canon = [c for c, k in zip(canon, keep, strict=True) if k]
        if not kept:
            raise ClusterSpecError(f"{src}: no machine of gpu_types={sorted(wanted)} is left")
    if not kept:
        raise ClusterSpecError(f"{src}: every machine is excluded (exclude_types={sorted(excl)})")
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int | np.integer):
        raise ClusterSpecError(f"pai_cluster: num_nodes={num_nodes!r} must be a positive integer")
    if not 1 <= num_nodes <= len(kept):
        raise ClusterSpecError(
            f"pai_cluster: num_nodes={num_nodes} must be between 1 and {len(kept)} "
            f"(the machines of {src} left after exclusions)"
        )
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ClusterSpecError(f"pai_cluster: seed={seed!r} must be an integer")

    strata: dict[str, list[int]] = {}
    for i, m in enumerate(kept):
        strata.setdefault(m.gpu_type.upper(), []).append(i)
    labels = sorted(strata, key=lambda s: (GPU_TYPE_NAMES.index(canon[strata[s][0]]), s))
    total = len(kept)
    take = {s: (num_nodes * len(strata[s])) // total for s in labels}
    left = num_nodes - sum(take.values())
    by_remainder = sorted(
        labels, key=lambda s: (-((num_nodes * len(strata[s])) % total), -len(strata[s]), s)
    )
    for s in by_remainder[:left]:
        take[s] += 1
    rng = np.random.default_rng(int(seed))
    picked: list[int] = []
    for s in labels:
        if take[s]:
            rows = rng.choice(len(strata[s]), size=take[s], replace=False)
            picked += [strata[s][int(r)] for r in rows]
    picked.sort(key=lambda i: (GPU_TYPE_NAMES.index(canon[i]), kept[i].line))
    return [kept[i] for i in picked]


def pai_cluster(
    name: str = "pai_mixed",
    num_nodes: int = 32,
    seed: int = 0,
    path: str | os.PathLike[str] | None = None,
    gpu_types: Sequence[str] | None = None,
    exclude_types: Sequence[str] = PAI_DEFAULT_EXCLUDE,
    mem_unit: str = "GiB",
) -> Cluster:
    """A deterministic sample of real machines from Alibaba PAI v2020 ``pai_machine_spec``.

    Source: Alibaba ``cluster-trace-gpu-v2020`` (Weng et al., "MLaaS in the Wild", NSDI'22),
    CC-BY-4.0; a copy ships as ``hetsched/data/clusters/`` (CSV, ``.header``, ``LICENSE``). The file
    has 1,897 machines / 6,742 GPUs: P100 798 x (64 cores, 512 GB, 2 GPUs), T4 497 x (96, 512, 2),
    MISC 280 x (96, 512, 8), V100M32 135 x (96, 384, 8), V100 59 x (96, 512, 8) + 45 x (96, 384, 8)
    and CPU 83 x (96, 512, 0).

    **Excluded by default** (``exclude_types``): the 83 ``CPU`` machines (no GPUs) and the 280
    ``MISC`` machines (2,240 GPUs of an undisclosed model with no throughput data). What is left,
    1,534 machines / 4,502 GPUs (35 % p100, 22 % t4, 42 % v100), maps through
    :func:`~hetsched.sim.catalog.canonical_gpu_type` to ``p100``, ``t4`` and ``v100`` (``V100M32``
    is a 32 GB V100, same speed). A label that is
    not excluded and not in the catalogue raises :class:`UnknownGpuTypeError`.

    Every node is one real machine (sampled without replacement, see
    :func:`sample_pai_machines`) with its real GPU count, CPU cores and memory. **Memory unit:**
    the file says GB, but its sizes (384, 512) are binary DIMM capacities, so by default
    (``mem_unit="GiB"``) the number is taken as GiB unchanged; ``mem_unit="GB"`` converts
    decimal GB to GiB (x 0.9313).

    The ``pai_mixed`` preset uses 32 nodes (seed 0): 17 P100, 10 T4, 3 V100M32, 2 V100 machines
    = 94 GPUs (34 p100, 20 t4, 40 v100), close to the file's mix after exclusion.

    Args:
        name: Cluster name.
        num_nodes: Machines to sample (1 .. machines left after exclusion).
        seed: Seed of the within-stratum draw (the per-label node counts depend on
            ``num_nodes`` only).
        path: Another ``pai_machine_spec`` CSV; ``None`` = the shipped copy.
        gpu_types: Keep only machines whose canonical type is in this list (e.g. ``[v100]``
            keeps ``V100`` and ``V100M32``); ``None`` = all kept types.
        exclude_types: File labels to drop (case-insensitive); default ``("CPU", "MISC")``.
        mem_unit: ``"GiB"`` (take ``cap_mem`` as GiB) or ``"GB"`` (convert).

    Raises:
        ClusterSpecError: For a bad argument or a malformed file row.
        UnknownGpuTypeError: For a kept label outside the catalogue.
    """
    cname = _cluster_name(name, "pai_cluster")
    unit = str(mem_unit).strip().lower()
    if unit not in ("gib", "gb"):
        raise ClusterSpecError(f"pai_cluster: mem_unit={mem_unit!r} must be 'GiB' or 'GB'")
    rows = sample_pai_machines(num_nodes, seed, path, gpu_types, exclude_types)
    scale = 1.0 if unit == "gib" else 1.0 / _GB_PER_GIB
    return Cluster(
        name=cname,
        node_type=np.array([gpu_type_index(m.gpu_type) for m in rows], dtype=np.int64),
        node_gpus=np.array([m.gpus for m in rows], dtype=np.int64),
        node_cpus=np.array([m.cpus for m in rows], dtype=np.float64),
        node_mem=np.array([m.mem_gb * scale for m in rows], dtype=np.float64),
    )
