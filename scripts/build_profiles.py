"""Build the shipped throughput table ``hetsched/data/profiles/throughput_table.npz``.

Reads the raw measurements under ``shared/data/profiles`` (Gavel's oracle and the Sia/Pollux
step-time profiles) and writes a :class:`hetsched.sim.throughput.ThroughputModel` with

* ``models``: the 26 Gavel job types, named exactly as in Gavel's oracle keys (ResNet-18,
  ResNet-50, Transformer, LM, Recommendation by increasing batch size, then A3C and CycleGAN),
  followed by the 7 Sia apps ``bert, cifar10, deepspeech2, gpt_pmp, imagenet, ncf, yolov3``;
* ``gpu_types``: :data:`hetsched.sim.catalog.GPU_TYPE_NAMES`;
* ``count_levels``: 1, 2, 4, ..., 128;
* ``tput[m, k, l, s]``: steps/s (Gavel models) or goodput in samples/s (Sia apps); ``s = 0`` packed
  on the fewest nodes, ``s = 1`` spread over more nodes than needed; 0 = cannot run.

Usage::

    python scripts/build_profiles.py [--shared-data DIR] [--out PATH]

The output is deterministic: the same inputs give identical arrays.

Filling rules
=============

1. **Gavel** (``profiles/gavel/simulation_throughputs.json``, keys parsed with
   ``ast.literal_eval``). ``null`` entries of ``k80``/``p100``/``v100`` at 1, 2, 4, 8 GPUs give the
   packed value, ``<type>_unconsolidated`` the spread value; at 1 GPU spread = packed. The
   non-distributed types (Recommendation, A3C, CycleGAN) are 0 above 1 GPU. Genuine zeros (K80
   ResNet-50 bs128 on 2/4/8 GPUs) stay 0 (cannot run), packed and spread. ``k80_unconsolidated``
   lacks ResNet-50 bs64 at 2/4/8 GPUs: spread = packed x the median spread/packed ratio of the
   distributed Gavel models measured both ways on K80 at that count (projected).
2. **Sia apps** (``profiles/sia/<app>/placements-<kind>.csv`` and ``scalability-<kind>.csv``,
   columns read by header name). Kinds: ``aws`` -> t4 (4 GPUs/node), ``azure`` -> v100 (8),
   ``dgx-ext`` -> a100 (8), ``quad`` -> rtx6000 (4), ``rtx`` -> rtx2080ti (8); plain ``dgx`` and
   un-suffixed files are ignored. Every row with ``R`` replicas and local batch ``b`` gives the
   throughput ``R*b/step_time`` samples/s at total batch ``M = R*b``, and the goodput
   ``throughput * eff(M)`` with Pollux's statistical efficiency
   ``eff(M) = (var + sqr) / (var + (M/M0) * sqr)``, ``M0`` = the app's smallest validated batch.
   ``var``/``sqr`` come from ``grad_var``/``grad_sqr`` in ``validation-<M0>.csv``, averaged over
   the epochs (rows) as follows: the per-epoch efficiency depends only on ``sqr_e/(var_e+sqr_e)``,
   and the table uses the progress-weighted epoch mean ``s`` of that fraction (``var = 1 - s``,
   ``sqr = s``). Then ``1/eff(M)`` is the epoch mean of the per-epoch ``1/eff_e(M)``: a job run at
   batch ``M`` finishes in the same time as with per-epoch efficiencies (the exact static
   equivalent). Averaging ``grad_var`` and ``grad_sqr`` separately would let the first epoch,
   where ``grad_sqr`` is 10-1000x larger, dominate (yolov3: var/sqr 0.6 instead of 29; goodput
   would then fall from 2 to 4 GPUs on every GPU type). Only rows with
   ``M0 <= M <= max validated batch`` count (Sia's batch-size range; no gradient accumulation).
   A configuration's value is the maximum goodput over its rows.

   * **packed(R)** = the single-node placement ``"R"`` when ``R`` fits a node, else the
     minimum-node placement (``"88"``, ``"4444"``; from ``placements``, else the
     ``scalability`` row with ``(num_nodes, num_replicas) = (R/G, R)``).
   * **spread(R)** (R >= 2) = the configuration with ``R`` replicas on more nodes than needed
     whose node count is closest to twice the minimum (ties: fewer nodes); among placements with
     that node count the most balanced one (``"22"`` rather than ``"13"``); a placement string is
     preferred to a ``scalability`` row with the same node and replica counts. E.g. 4 GPUs on aws
     -> ``"22"``, 16 on aws -> 8 nodes x 2, 16 on azure -> 4 nodes, 32 on azure -> 5 nodes.
   * ``deepspeech2`` on ``rtx``: local batches above 57 are dropped (Sia's simulator caps
     ``max_local_bsz`` there at 57, the 11 GB memory limit).
   * ``gpt_pmp`` (pipeline + data parallel, Sia's ``PMPApplication``): ``S`` pipeline stages (2 on
     ``dgx-ext``, 8 on ``rtx``, from Sia's ``applications.py``), ``D = R/S`` pipelines, 48
     micro-batches of size ``b`` per step: step time ``3*(S-1+48)*step_time + sync_time``, total
     batch ``D*48*b``. Only the profiled whole-pipeline placements exist (``"2"``, ``"4"``,
     ``"6"``, ``"8"``, ``"88"`` ... on dgx-ext; ``"8"``, ``"88"`` ... on rtx): counts below the
     smallest profiled one are 0, and **spread is 0** (Sia's PMP model rejects unprofiled
     placements). The batch cap does not apply to gpt_pmp (Sia checks it against the per-GPU
     micro-batch, which never exceeds it); eff(M) is evaluated beyond 384 by the same formula.
   * Sia's run-time calibration (``SLOWDOWN``) is not applied: the table holds profile goodput.
3. **Missing counts.** Between measured levels: linear interpolation in log-log space (0 if a
   neighbour is 0). Above the largest measured level: the last measured per-doubling factor
   ``T(n)/T(n/2)``, clamped to [1.0, 2.0], continued to 128 GPUs (for spread, the result is capped
   at packed). Below the smallest measured level (only gpt_pmp): 0. Data-parallel Sia apps are 0
   where ``R * min_local_bsz > max validated batch`` (Sia's ``max_batch // min_local_bsz`` limit:
   e.g. bert and deepspeech2 at 128 GPUs). Sia's 64-GPU job cap is a scheduler policy, not a
   throughput fact, so 128-GPU entries are extrapolated where the batch limit allows; policies
   enforce the cap themselves. A kind with no multi-node data (``quad``, one 4-GPU node) is
   continued with the measured kind of the same node size (``aws``, 4 GPUs/node, measured to 64
   GPUs) -- Sia's bootstrapping within the family: ``packed(n > 4) = quad(4) x aws(n)/aws(4)``
   and ``spread(n) = quad_packed(n) x aws_spread(n)/aws_packed(n)`` (capped at packed).
   Continuing quad's single-node 2 -> 4 factor instead would ignore the node boundary and make
   RTX 6000 the fastest type at 64 GPUs for several apps. All such entries have
   ``measured = False``, as do log-log interpolated ones.
4. **Projection to unmeasured types** (``measured = False``), Sia-style bootstrapping
   ``T_B(n) = T_A(n) * T_B(1)/T_A(1)`` with a median ratio taken from the other family:

   * Gavel models on t4/a100/rtx6000/rtx2080ti: ``T[v100] * median_{Sia apps measured on both}
     (T_sia[target, 1 GPU] / T_sia[v100, 1 GPU])`` (packed; applied to every level, both
     placements).
   * gpt_pmp on t4/v100/rtx6000 (no profile files): ``T[a100] * median_{other Sia apps}
     (T[target, 1] / T[a100, 1])``, 0 below the smallest count whose total memory reaches the
     least memory gpt_pmp was profiled on (min over kinds of smallest count x GPU memory =
     2 x 40 GiB on A100), rounded up to a power of two (8 on 16 GB types, 4 on the 24 GB RTX 6000).
   * Sia apps on k80/p100: ``T[v100] * median_{26 Gavel models} (T_gavel[target, 1] /
     T_gavel[v100, 1])``; gpt_pmp gets the same memory rule (8 GPUs on both).
5. **Interference** ``pair_iota[a, b, k]``. Gavel pairs on k80/p100/v100 from the single-GPU pair
   entries ``"('<b>', 1)": [self, other]`` of ``a``: ``clip(1 - self/iso_a, 0, 0.95)``; ``[0, 0]``
   or missing -> NaN (cannot co-locate). Gavel pairs on the other types take the pair's own value
   on the nearest measured type, v100 (same generation; also the projection bridge), NaN kept.
   Pairs involving a Sia app take the per-type median of the measured Gavel iota on k80/p100/v100,
   and v100's median on t4/a100/rtx6000/rtx2080ti (nearest measured type). gpt_pmp (2.8B
   parameters; it needs 80+ GiB over whole pipelines) cannot share GPUs: NaN with every partner.
6. **Per-model constants** (``maifs.md`` section 6, ``sia.md`` section 6). ``cpu_alpha`` 0.7 for
   data-loading-bound vision models and A3C (ResNet-18, ResNet-50, CycleGAN, A3C, cifar10,
   imagenet, yolov3), 0.3 for moderate ones (Recommendation, ncf, deepspeech2), 0.0 for language
   models (LM, Transformer, bert, gpt_pmp); ``cpu_ceiling`` 1.5 where alpha > 0, else 1.0.
   ``restart_delay_s``: Sia's simulated delays (cifar10 50, deepspeech2 25, bert 120, yolov3 80,
   imagenet 250, ncf 15, gpt_pmp 30); Gavel models 30. ``default_work``: Sia apps
   ``last progress of validation-<M0>.csv x M0`` samples (progress counts M0-batch iterations),
   NaN for Gavel models.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # allow `python scripts/build_profiles.py` without installing
    sys.path.insert(0, str(REPO))

from hetsched.sim.catalog import CATALOG, GPU_TYPE_NAMES  # noqa: E402
from hetsched.sim.errors import HetschedError  # noqa: E402
from hetsched.sim.throughput import ThroughputModel  # noqa: E402

FloatArray = NDArray[np.float64]

COUNT_LEVELS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
LEVEL_INDEX = {n: i for i, n in enumerate(COUNT_LEVELS)}

GAVEL_MODELS: tuple[str, ...] = (
    *(f"ResNet-18 (batch size {b})" for b in (16, 32, 64, 128, 256)),
    *(f"ResNet-50 (batch size {b})" for b in (16, 32, 64, 128)),
    *(f"Transformer (batch size {b})" for b in (16, 32, 64, 128, 256)),
    *(f"LM (batch size {b})" for b in (5, 10, 20, 40, 80)),
    *(f"Recommendation (batch size {b})" for b in (512, 1024, 2048, 4096, 8192)),
    "A3C",
    "CycleGAN",
)
GAVEL_TYPES: tuple[str, ...] = ("k80", "p100", "v100")
GAVEL_NON_DISTRIBUTED = ("Recommendation", "A3C", "CycleGAN")

SIA_APPS: tuple[str, ...] = (
    "bert",
    "cifar10",
    "deepspeech2",
    "gpt_pmp",
    "imagenet",
    "ncf",
    "yolov3",
)
#: Sia profile suffix -> (canonical GPU type, GPUs per node).
SIA_KINDS: dict[str, tuple[str, int]] = {
    "aws": ("t4", 4),
    "azure": ("v100", 8),
    "dgx-ext": ("a100", 8),
    "quad": ("rtx6000", 4),
    "rtx": ("rtx2080ti", 8),
}
#: gpt_pmp pipeline stages per kind (Sia ``applications.py``: PMPApplication num_stages).
PMP_STAGES = {"dgx-ext": 2, "rtx": 8}
PMP_MICROBATCHES = 48  # Sia PMPApplication: accum_steps = max_local_bsz = 48 micro-batches
#: Sia's per-app cap on the local batch where the profile exceeds device memory (applications.py).
SIA_MAX_LOCAL = {("deepspeech2", "rtx"): 57.0}

BRIDGE = "v100"  # measured by both families (Gavel v100, Sia azure)
PMP_BRIDGE = "a100"  # gpt_pmp's richest measured type
NEAREST_MEASURED_IOTA_TYPE = "v100"  # for t4/a100/rtx6000/rtx2080ti interference
IOTA_MAX = 0.95

CPU_ALPHA = {
    "ResNet-18": 0.7, "ResNet-50": 0.7, "CycleGAN": 0.7, "A3C": 0.7,
    "cifar10": 0.7, "imagenet": 0.7, "yolov3": 0.7,
    "Recommendation": 0.3, "ncf": 0.3, "deepspeech2": 0.3,
    "LM": 0.0, "Transformer": 0.0, "bert": 0.0, "gpt_pmp": 0.0,
}  # fmt: skip
CPU_CEILING_SENSITIVE = 1.5
SIA_RESTART_S = {
    "cifar10": 50.0, "deepspeech2": 25.0, "bert": 120.0, "yolov3": 80.0,
    "imagenet": 250.0, "ncf": 15.0,
}  # fmt: skip
DEFAULT_RESTART_S = 30.0  # Sia's "other"; also used for the Gavel job types

SOURCES: tuple[str, ...] = (
    "Gavel throughput oracle (Narayanan et al., OSDI'20), stanford-futuredata/gavel "
    "scheduler/simulation_throughputs.json, MIT licence: K80/P100/V100 steps/s, 1-8 GPUs, "
    "consolidated/unconsolidated, single-GPU co-location pairs.",
    "Sia artifact (Jayaram Subramanya et al., SOSP'23), siasosp23/artifacts "
    "sia-simulator/traces/<app>/placements-*.csv, scalability-*.csv (no licence; only derived "
    "goodput figures are shipped): azure=V100, dgx-ext=A100, quad=RTX6000, rtx=RTX2080Ti.",
    "Pollux/AdaptDL (Qiao et al., OSDI'21), Apache-2.0: *-aws.csv (T4) profiles and "
    "validation-*.csv gradient statistics (statistical efficiency, default_work).",
    "Sia simulator applications.py: gpt_pmp pipeline model (stages 2 on dgx-ext, 8 on rtx, "
    "48 micro-batches), deepspeech2 rtx max local batch 57, restart delays.",
    "Projections (measured=False): log-log interpolation, clamped per-doubling extrapolation, "
    "cross-family 1-GPU median ratios via v100; see scripts/build_profiles.py and "
    "hetsched/data/profiles/SOURCES.md.",
    "cpu_alpha/cpu_ceiling: parametric classes of maifs.md section 6 (Synergy-motivated shape).",
)


def model_class(name: str) -> str:
    """The model class of a job type: ``"ResNet-18 (batch size 64)"`` -> ``"ResNet-18"``."""
    return name.split(" (")[0]


# --------------------------------------------------------------------------- Gavel
def load_gavel(path: Path) -> dict[str, dict[tuple[str, int], dict[str, object]]]:
    """Parse Gavel's oracle into ``{type: {(job type, scale): {entry key: value}}}``."""
    if not path.is_file():
        raise HetschedError(f"Gavel oracle {path} not found; pass --shared-data")
    with path.open() as f:
        raw = json.load(f)
    out: dict[str, dict[tuple[str, int], dict[str, object]]] = {}
    for gtype, entries in raw.items():
        table: dict[tuple[str, int], dict[str, object]] = {}
        for key, val in entries.items():
            name, scale = ast.literal_eval(key)
            table[(str(name), int(scale))] = val
        out[str(gtype)] = table
    missing = [m for m in GAVEL_MODELS if (m, 1) not in out.get("v100", {})]
    if missing:
        raise HetschedError(f"{path}: job types {missing} not found in the 'v100' section")
    return out


def fill_gavel(
    gavel: dict[str, dict[tuple[str, int], dict[str, object]]],
    tput: FloatArray,
    measured: NDArray[np.bool_],
    known: NDArray[np.bool_],
) -> None:
    """Write Gavel's measured packed/spread values (rule 1) into rows 0..25 of the table."""
    for gt in GAVEL_TYPES:
        k = GPU_TYPE_NAMES.index(gt)
        for m, name in enumerate(GAVEL_MODELS):
            distributed = model_class(name) not in GAVEL_NON_DISTRIBUTED
            for n in (1, 2, 4, 8):
                li = LEVEL_INDEX[n]
                if n > 1 and not distributed:
                    tput[m, k, li, :] = 0.0
                    known[m, k, li, :] = True
                    continue
                entry = gavel[gt].get((name, n))
                if entry is None:
                    raise HetschedError(f"Gavel oracle lacks {gt} {(name, n)}")
                packed = float(entry["null"])  # type: ignore[arg-type]
                tput[m, k, li, 0] = packed
                measured[m, k, li, 0] = known[m, k, li, 0] = True
                if n == 1:
                    tput[m, k, li, 1] = packed
                    measured[m, k, li, 1] = known[m, k, li, 1] = True
                    continue
                spread_entry = gavel[f"{gt}_unconsolidated"].get((name, n))
                if spread_entry is not None:
                    tput[m, k, li, 1] = float(spread_entry["null"])  # type: ignore[arg-type]
                    measured[m, k, li, 1] = known[m, k, li, 1] = True
                elif packed == 0.0:  # cannot run packed -> cannot run spread either
                    tput[m, k, li, 1] = 0.0
                    known[m, k, li, 1] = True
    # Missing unconsolidated entries with a runnable packed value: median spread/packed ratio
    # of the distributed models measured both ways on the same type and count.
    ng = len(GAVEL_MODELS)
    for gt in GAVEL_TYPES:
        k = GPU_TYPE_NAMES.index(gt)
        for li in range(1, 4):
            both = measured[:ng, k, li, 0] & measured[:ng, k, li, 1] & (tput[:ng, k, li, 0] > 0)
            need = ~known[:ng, k, li, 1]
            if not need.any():
                continue
            if not both.any():
                raise HetschedError(f"no spread/packed pair measured on {gt} at {COUNT_LEVELS[li]}")
            ratio = float(np.median(tput[:ng, k, li, 1][both] / tput[:ng, k, li, 0][both]))
            tput[:ng, k, li, 1][need] = tput[:ng, k, li, 0][need] * ratio
            known[:ng, k, li, 1][need] = True


def gavel_iota(
    gavel: dict[str, dict[tuple[str, int], dict[str, object]]],
) -> FloatArray:
    """Measured Gavel pair slowdowns (rule 5), shape (26, 26, 3) over k80/p100/v100; NaN = no."""
    ng = len(GAVEL_MODELS)
    iota = np.full((ng, ng, len(GAVEL_TYPES)), np.nan)
    for t, gt in enumerate(GAVEL_TYPES):
        for a, name_a in enumerate(GAVEL_MODELS):
            entry = gavel[gt][(name_a, 1)]
            iso = float(entry["null"])  # type: ignore[arg-type]
            if iso <= 0:
                continue
            for b, name_b in enumerate(GAVEL_MODELS):
                pair = entry.get(str((name_b, 1)))
                if pair is None:
                    continue
                self_t, other_t = (float(x) for x in pair)  # type: ignore[attr-defined]
                if self_t == 0.0 and other_t == 0.0:
                    continue
                iota[a, b, t] = min(max(1.0 - self_t / iso, 0.0), IOTA_MAX)
    return iota


# --------------------------------------------------------------------------- Sia
@dataclass(frozen=True)
class Row:
    """One profiled step: ``replicas`` GPUs on ``nodes`` nodes at per-GPU batch ``local_bsz``."""

    nodes: int
    replicas: int
    placement: str | None  # None for scalability rows
    local_bsz: float
    step_time: float
    sync_time: float


def read_csv(path: Path, need: Sequence[str]) -> list[dict[str, str]]:
    """Read a CSV by header names, checking that the needed columns exist."""
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [c for c in need if c not in header]
        if missing:
            raise HetschedError(f"{path}: missing columns {missing} (header {header})")
        return list(reader)


def load_sia_rows(app_dir: Path, kind: str) -> list[Row] | None:
    """Rows of ``placements-<kind>.csv`` and ``scalability-<kind>.csv``; None if absent."""
    pfile = app_dir / f"placements-{kind}.csv"
    sfile = app_dir / f"scalability-{kind}.csv"
    if not pfile.is_file():
        return None
    rows: list[Row] = []
    for r in read_csv(pfile, ("placement", "local_bsz", "step_time", "sync_time")):
        pl = r["placement"].strip()
        if not pl.isdigit():
            raise HetschedError(f"{pfile}: bad placement {pl!r}")
        digits = [int(c) for c in pl]
        rows.append(
            Row(len(digits), sum(digits), pl, float(r["local_bsz"]), float(r["step_time"]),
                float(r["sync_time"]))
        )  # fmt: skip
    if sfile.is_file():
        need = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
        for r in read_csv(sfile, need):
            rows.append(
                Row(int(float(r["num_nodes"])), int(float(r["num_replicas"])), None,
                    float(r["local_bsz"]), float(r["step_time"]), float(r["sync_time"]))
            )  # fmt: skip
    return rows


@dataclass(frozen=True)
class Validation:
    """Gradient statistics of an app at its smallest validated batch size.

    ``var`` and ``sqr`` are normalised so that ``var + sqr = 1`` (only their ratio matters).
    """

    m0: float
    max_batch: float
    var: float
    sqr: float
    last_progress: float

    def efficiency(self, total_batch: float) -> float:
        """Pollux's statistical efficiency of a total batch, relative to ``m0``."""
        return (self.var + self.sqr) / (self.var + (total_batch / self.m0) * self.sqr)


def load_validation(app_dir: Path) -> Validation:
    """Read ``validation-<B>.csv`` files: M0, the largest B, and mean grad stats at M0."""
    sizes = sorted(int(p.stem.split("-")[1]) for p in app_dir.glob("validation-*.csv"))
    if not sizes:
        raise HetschedError(f"{app_dir}: no validation-*.csv files")
    m0 = sizes[0]
    rows = read_csv(app_dir / f"validation-{m0}.csv", ("progress", "grad_sqr", "grad_var"))
    var = np.array([float(r["grad_var"]) for r in rows])
    sqr = np.array([float(r["grad_sqr"]) for r in rows])
    progress = np.array([float(r["progress"]) for r in rows])
    if np.any(var + sqr <= 0) or np.any(np.diff(progress) <= 0):
        raise HetschedError(f"{app_dir}/validation-{m0}.csv: bad grad_var/grad_sqr or progress")
    # Epoch mean, weighted by each epoch's progress, of sqr/(var+sqr): the static efficiency
    # 1/(1 - b + b*M/M0) then has as inverse the mean inverse per-epoch efficiency, i.e. it gives
    # the same time to completion as the per-epoch efficiencies at a fixed batch size.
    weights = np.diff(np.concatenate([[0.0], progress]))
    b = float(np.sum(weights * sqr / (var + sqr)) / np.sum(weights))
    return Validation(float(m0), float(sizes[-1]), 1.0 - b, b, float(progress[-1]))


def row_goodput(app: str, kind: str, row: Row, val: Validation) -> float | None:
    """Goodput (samples/s) of one profiled row, or None if its total batch is out of range."""
    if app == "gpt_pmp":
        stages = PMP_STAGES[kind]
        if row.replicas % stages:
            return None
        batch = row.replicas // stages * PMP_MICROBATCHES * row.local_bsz
        step = 3.0 * (stages - 1 + PMP_MICROBATCHES) * row.step_time + row.sync_time
        return batch / step * val.efficiency(batch)
    if row.local_bsz > SIA_MAX_LOCAL.get((app, kind), math.inf):
        return None
    batch = row.replicas * row.local_bsz
    if batch < val.m0 - 1e-9 or batch > val.max_batch + 1e-9:
        return None
    return batch / row.step_time * val.efficiency(batch)


def balance_key(placement: str | None) -> tuple[int, int, str]:
    """Sort key preferring placement strings, then the most balanced one, then lexicographic."""
    if placement is None:
        return (1, 0, "")
    return (0, max(int(c) for c in placement), placement)


def sia_measured(
    app: str, kind: str, rows: list[Row], val: Validation
) -> tuple[dict[int, float], dict[int, float]]:
    """Measured packed and spread goodput per count level for one (app, kind) (rule 2)."""
    per_node = SIA_KINDS[kind][1]
    best: dict[tuple[int, int, str | None], float] = {}
    for row in rows:
        g = row_goodput(app, kind, row, val)
        if g is None or not math.isfinite(g) or g <= 0:
            continue
        key = (row.nodes, row.replicas, row.placement)
        best[key] = max(best.get(key, 0.0), g)
    packed: dict[int, float] = {}
    spread: dict[int, float] = {}
    for n in COUNT_LEVELS:
        min_nodes = -(-n // per_node)
        if n > per_node and n % per_node:
            continue
        cands = sorted(
            (balance_key(pl), v)
            for (nodes, r, pl), v in best.items()
            if r == n and nodes == min_nodes
        )
        if cands:
            packed[n] = cands[0][1]
        if n == 1:
            continue
        more = [
            (nodes, pl, v) for (nodes, r, pl), v in best.items() if r == n and nodes > min_nodes
        ]
        if not more:
            continue
        target = 2 * min_nodes
        chosen = min({nodes for nodes, _, _ in more}, key=lambda x: (abs(x - target), x))
        spread[n] = sorted((balance_key(pl), v) for nodes, pl, v in more if nodes == chosen)[0][1]
    return packed, spread


# --------------------------------------------------------------------------- filling
def fill_curve(
    values: FloatArray, known: NDArray[np.bool_], *, below: float = 0.0
) -> tuple[FloatArray, NDArray[np.bool_]]:
    """Fill a curve over the count levels (rule 3).

    Interpolates linearly in log-log space between known levels (0 if a neighbour is 0),
    continues the last per-doubling factor (clamped to [1, 2]) above the largest known level,
    and sets ``below`` under the smallest known level.

    Returns:
        The filled curve and a mask of the entries that were filled.
    """
    out = values.copy()
    filled = np.zeros(len(values), dtype=bool)
    idx = np.flatnonzero(known)
    if len(idx) == 0:
        raise HetschedError("cannot fill a throughput curve without any known level")
    for li in range(len(values)):
        if known[li]:
            continue
        filled[li] = True
        if li < idx[0]:
            out[li] = below
        elif li > idx[-1]:
            last = idx[-1]
            prev = idx[-2] if len(idx) >= 2 else None
            if out[last] <= 0:
                out[li] = 0.0
                continue
            if prev is None or out[prev] <= 0:
                factor = 1.0
            else:
                factor = (out[last] / out[prev]) ** (1.0 / (last - prev))
            factor = min(max(factor, 1.0), 2.0)
            out[li] = out[last] * factor ** (li - last)
        else:
            lo = idx[idx < li][-1]
            hi = idx[idx > li][0]
            if out[lo] <= 0 or out[hi] <= 0:
                out[li] = 0.0
            else:
                w = (li - lo) / (hi - lo)
                out[li] = math.exp((1 - w) * math.log(out[lo]) + w * math.log(out[hi]))
    return out, filled


def build(shared: Path) -> ThroughputModel:
    """Build the throughput model from ``shared`` (the ``shared/data`` directory)."""
    models = (*GAVEL_MODELS, *SIA_APPS)
    M, K, L = len(models), len(GPU_TYPE_NAMES), len(COUNT_LEVELS)
    ng = len(GAVEL_MODELS)
    kidx = {t: i for i, t in enumerate(GPU_TYPE_NAMES)}
    mem = {g.name: g.memory_gib for g in CATALOG}
    tput = np.zeros((M, K, L, 2))
    measured = np.zeros((M, K, L, 2), dtype=bool)
    known = np.zeros((M, K, L, 2), dtype=bool)

    # ---- Gavel (rule 1) + extrapolation (rule 3)
    gavel = load_gavel(shared / "profiles" / "gavel" / "simulation_throughputs.json")
    fill_gavel(gavel, tput, measured, known)
    for m in range(ng):
        for gt in GAVEL_TYPES:
            k = kidx[gt]
            tput[m, k, :, 0], _ = fill_curve(tput[m, k, :, 0], known[m, k, :, 0])
            s_known = known[m, k, :, 1].copy()
            tput[m, k, :, 1], s_new = fill_curve(tput[m, k, :, 1], s_known)
            tput[m, k, s_new, 1] = np.minimum(tput[m, k, s_new, 1], tput[m, k, s_new, 0])
            known[m, k] = True

    # ---- Sia (rule 2) + filling (rule 3)
    sia_dir = shared / "profiles" / "sia"
    vals: dict[str, Validation] = {}
    sia_min_count: dict[str, dict[str, int]] = {}  # gpt_pmp: smallest runnable count per type
    for a, app in enumerate(SIA_APPS):
        m = ng + a
        app_dir = sia_dir / app
        if not app_dir.is_dir():
            raise HetschedError(f"Sia profile directory {app_dir} not found; pass --shared-data")
        val = vals[app] = load_validation(app_dir)
        have: list[str] = []
        limits: dict[str, NDArray[np.bool_]] = {}
        for kind, (gt, _per_node) in SIA_KINDS.items():
            rows = load_sia_rows(app_dir, kind)
            if rows is None:
                continue
            have.append(kind)
            k = kidx[gt]
            packed, spread = sia_measured(app, kind, rows, val)
            if not packed:
                raise HetschedError(f"{app_dir}: no usable packed placement for kind {kind!r}")
            for n, v in packed.items():
                tput[m, k, LEVEL_INDEX[n], 0] = v
                measured[m, k, LEVEL_INDEX[n], 0] = True
            for n, v in spread.items():
                tput[m, k, LEVEL_INDEX[n], 1] = v
                measured[m, k, LEVEL_INDEX[n], 1] = True
            if app == "gpt_pmp":
                sia_min_count.setdefault(app, {})[gt] = min(packed)
                limits[kind] = np.zeros(L, dtype=bool)
            else:
                min_local = min(r.local_bsz for r in rows)
                limits[kind] = np.array(
                    [n * min_local > val.max_batch + 1e-9 for n in COUNT_LEVELS]
                )
        multi = [kd for kd in have if measured[m, kidx[SIA_KINDS[kd][0]], :, 1].any()]
        for kind in have:
            gt, per_node = SIA_KINDS[kind]
            k = kidx[gt]
            limit = limits[kind] & ~measured[m, k, :, 0]
            p_curve, _ = fill_curve(tput[m, k, :, 0], measured[m, k, :, 0])
            if app == "gpt_pmp":
                s_curve = np.zeros(L)  # only whole-pipeline placements exist
                s_curve[0] = p_curve[0]
            elif kind in multi:
                tput[m, k, 0, 1] = p_curve[0]
                s_known = measured[m, k, :, 1].copy()
                s_known[0] = True
                s_curve, s_new = fill_curve(tput[m, k, :, 1], s_known)
                s_curve[s_new] = np.minimum(s_curve[s_new], p_curve[s_new])
            else:
                # No multi-node data (quad): continue with the measured kind of the same node size
                # (aws), anchored at the largest packed count measured here; spread = packed x
                # that kind's spread/packed ratio. Without such a kind: packed by rule 3 and the
                # median spread/packed ratio of the other kinds.
                sib = [o for o in multi if SIA_KINDS[o][1] == per_node]
                refs = [kidx[SIA_KINDS[o][0]] for o in (sib[:1] if sib else multi)]
                if not refs:
                    raise HetschedError(f"{app}: no kind with multi-node data to derive {kind!r}")
                if sib:
                    ref = refs[0]
                    la = int(np.flatnonzero(measured[m, k, :, 0])[-1])
                    anchor = tput[m, ref, la, 0]
                    for li in range(la + 1, L):
                        p_curve[li] = p_curve[la] * tput[m, ref, li, 0] / anchor if anchor else 0.0
                s_curve = p_curve.copy()
                for li in range(1, L):
                    ratios = [
                        tput[m, o, li, 1] / tput[m, o, li, 0] for o in refs if tput[m, o, li, 0]
                    ]
                    r = float(np.median(ratios)) if ratios else 0.0
                    s_curve[li] = min(p_curve[li] * r, p_curve[li])
            p_curve[limit] = 0.0
            s_curve[limit] = 0.0
            tput[m, k, :, 0] = p_curve
            tput[m, k, :, 1] = s_curve
            known[m, k] = True

    # ---- Projections (rule 4)
    bridge = kidx[BRIDGE]
    # gpt_pmp on Sia types without profile files, from a100 and the other Sia apps' ratios.
    pmp = ng + SIA_APPS.index("gpt_pmp")
    others_dp = [ng + i for i, a in enumerate(SIA_APPS) if a != "gpt_pmp"]
    pmp_mem = min(n * mem[gt] for gt, n in sia_min_count["gpt_pmp"].items())
    sia_types = [SIA_KINDS[kd][0] for kd in SIA_KINDS]
    pb = kidx[PMP_BRIDGE]
    notes: list[str] = []
    for gt in sia_types:
        k = kidx[gt]
        if known[pmp, k, 0, 0]:
            continue
        ratio = float(
            np.median(
                [tput[o, k, 0, 0] / tput[o, pb, 0, 0] for o in others_dp if tput[o, pb, 0, 0] > 0]
            )
        )
        tput[pmp, k] = tput[pmp, pb] * ratio
        min_n = 2 ** math.ceil(math.log2(pmp_mem / mem[gt] - 1e-9))
        tput[pmp, k, np.asarray(COUNT_LEVELS) < min_n, :] = 0.0
        tput[pmp, k, :, 1] = 0.0
        known[pmp, k] = True
        notes.append(f"gpt_pmp on {gt}: {PMP_BRIDGE} x {ratio:.4f}, 0 below {min_n} GPUs")
    # Sia apps on k80/p100 from v100 with Gavel's median 1-GPU ratios.
    for gt in GAVEL_TYPES:
        k = kidx[gt]
        if gt == BRIDGE:
            continue
        ratio = float(np.median(tput[:ng, k, 0, 0] / tput[:ng, bridge, 0, 0]))
        for m in range(ng, M):
            tput[m, k] = tput[m, bridge] * ratio
            if m == pmp:
                min_n = 2 ** math.ceil(math.log2(pmp_mem / mem[gt] - 1e-9))
                tput[m, k, np.asarray(COUNT_LEVELS) < min_n, :] = 0.0
            known[m, k] = True
        notes.append(f"Sia apps on {gt}: {BRIDGE} x {ratio:.4f} (median over Gavel models)")
    # Gavel models on Sia-only types from v100 with the Sia apps' median 1-GPU ratios.
    for gt in GPU_TYPE_NAMES:
        k = kidx[gt]
        if gt in GAVEL_TYPES:
            continue
        both = [
            m for m in range(ng, M)
            if measured[m, k, 0, 0] and measured[m, bridge, 0, 0] and tput[m, bridge, 0, 0] > 0
        ]  # fmt: skip
        if not both:
            raise HetschedError(f"no Sia app measured on both {gt} and {BRIDGE}")
        ratio = float(np.median([tput[m, k, 0, 0] / tput[m, bridge, 0, 0] for m in both]))
        tput[:ng, k] = tput[:ng, bridge] * ratio
        known[:ng, k] = True
        notes.append(f"Gavel models on {gt}: {BRIDGE} x {ratio:.4f} (median over Sia apps)")
    if not known.all():
        raise HetschedError("internal error: throughput table has unfilled entries")

    # ---- Interference (rule 5)
    g_iota = gavel_iota(gavel)
    pair_iota = np.full((M, M, K), np.nan)
    medians: dict[str, float] = {}
    for t, gt in enumerate(GAVEL_TYPES):
        pair_iota[:ng, :ng, kidx[gt]] = g_iota[:, :, t]
        vals_t = g_iota[:, :, t]
        medians[gt] = float(np.median(vals_t[np.isfinite(vals_t)]))
    for gt in GPU_TYPE_NAMES:
        k = kidx[gt]
        src = gt if gt in GAVEL_TYPES else NEAREST_MEASURED_IOTA_TYPE
        if gt not in GAVEL_TYPES:
            pair_iota[:ng, :ng, k] = g_iota[:, :, GAVEL_TYPES.index(src)]
        pair_iota[ng:, :, k] = medians[src]
        pair_iota[:, ng:, k] = medians[src]
    pair_iota[pmp, :, :] = np.nan
    pair_iota[:, pmp, :] = np.nan
    notes.append(
        "median measured Gavel iota (used for pairs with a Sia app): "
        + ", ".join(f"{gt} {v:.4f}" for gt, v in medians.items())
        + f"; t4/a100/rtx6000/rtx2080ti use {NEAREST_MEASURED_IOTA_TYPE}'s"
    )

    # ---- Per-model constants (rule 6)
    cpu_alpha = np.array([CPU_ALPHA[model_class(n)] for n in models])
    cpu_ceiling = np.where(cpu_alpha > 0, CPU_CEILING_SENSITIVE, 1.0)
    restart = np.array([SIA_RESTART_S.get(n, DEFAULT_RESTART_S) for n in models])
    default_work = np.full(M, np.nan)
    for a, app in enumerate(SIA_APPS):
        default_work[ng + a] = vals[app].last_progress * vals[app].m0

    return ThroughputModel(
        models=models,
        gpu_types=GPU_TYPE_NAMES,
        count_levels=np.asarray(COUNT_LEVELS, dtype=np.int64),
        tput=tput,
        measured=measured,
        pair_iota=pair_iota,
        cpu_alpha=cpu_alpha,
        cpu_ceiling=cpu_ceiling,
        restart_delay_s=restart,
        family=("gavel",) * ng + ("sia",) * len(SIA_APPS),
        work_unit=("steps",) * ng + ("samples",) * len(SIA_APPS),
        default_work=default_work,
        sources=(*SOURCES, *notes),
    )


def default_shared() -> Path:
    """``$HETSCHED_SHARED_DATA`` or ``<repo>/../shared/data``."""
    env = os.environ.get("HETSCHED_SHARED_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--shared-data",
        metavar="DIR",
        type=Path,
        default=None,
        help="the shared/data directory (default: $HETSCHED_SHARED_DATA or <repo>/../shared/data)",
    )
    parser.add_argument(
        "--out",
        metavar="PATH",
        type=Path,
        default=REPO / "hetsched" / "data" / "profiles" / "throughput_table.npz",
        help="output .npz (default: the shipped table)",
    )
    args = parser.parse_args(argv)
    shared = args.shared_data if args.shared_data is not None else default_shared()
    if not shared.is_dir():
        parser.error(f"shared data directory {shared} not found; pass --shared-data DIR")
    tm = build(shared)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tm.save(args.out)
    print(
        f"wrote {args.out} ({args.out.stat().st_size} bytes): {tm.num_models} models x "
        f"{len(tm.gpu_types)} types x {len(tm.count_levels)} counts, "
        f"{int(tm.measured.sum())} measured entries of {tm.measured.size}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
