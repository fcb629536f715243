"""Policy decision time per round as the cluster grows (64 -> 2048 GPUs).

For each selected policy and cluster size the benchmark builds Sia's heterogeneous 64-GPU node
mix scaled by 1, 4, 16 and 32 (:func:`hetsched.sim.clusters.scaled_cluster`: 64, 256, 1024 and
2048 GPUs of T4 / RTX 2080 Ti / A100, the ``sia_64`` and ``large_2048`` presets at the ends), a
Philly busiest-window workload of ``--jobs-per-gpu`` x GPUs jobs (elastic by default, so Sia and
Pollux may resize; arrivals compressed into the first ``--arrival-span-s`` seconds so that active
jobs ~ 1.5 x GPUs), and runs the simulator with the policy itself for ``--warm-s`` simulated
seconds (at the policy's own round length, at most ``--max-warm`` rounds) so the state is a
realistic mid-run one: every job arrived, about one per GPU running, the rest waiting. The
default warm-up covers one Gavel reset period (1920 s), so Gavel's timed window holds a
throttled LP re-solve (counted in ``note``). It then times ``--decisions`` further calls of
``policy.decide`` (each followed by the engine's ``advance``) and reports the median and max
milliseconds per decision, with the first (cold) decision and the active-job count beside them.

Targets (project brief): Gavel LAS under 1 s and Sia under 5 s per decision at 2048 GPUs on the
2-core development machine; Hadar under 100 ms (median) on ``sia_64`` and under 1 s at 2048 GPUs.

``--compare REF`` measures the same cells for the code of git commit ``REF`` (extracted with
``git archive`` into a temporary directory) and for the working tree, one cell after the other
in fresh processes (``--repeats`` pairs per cell), and reports both medians with their ratio
(``REF / now``, > 1 = faster now) in wall-clock and in CPU time (the CPU ratio is the steadier one
on a shared machine), and whether the two made the same decisions (a hash of every allocation,
warm-up included).

Examples::

    python scripts/bench_policies.py                                 # every policy, 4 sizes
    python scripts/bench_policies.py --quick                         # 64 and 256 GPUs, 3 decisions
    python scripts/bench_policies.py --policies gavel sia --sizes 2048 --decisions 5
    python scripts/bench_policies.py --out outputs/bench_policies    # also write .md / .csv
    python scripts/bench_policies.py --policies hadar gavel --sizes 64 2048 --compare HEAD~3
    python scripts/bench_policies.py --policies hadar --sizes 64 --workload main --max-warm 2 \
        --compare HEAD~3                                          # the main job's busy rounds

``--workload main`` replaces the compressed workload by the main job's (``evaluate.py``'s
defaults: the ``philly`` preset's 300-job busiest window on ``sia_64``, rigid jobs arriving over
4.3 min); with a short warm-up its timed rounds are the busy ones, where Hadar re-plans hundreds
of waiting jobs per round.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# ``--tree DIR`` (a worker of ``--compare``) imports hetsched from DIR instead of this checkout.
_TREE = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--tree=")), str(ROOT))
sys.path.insert(0, _TREE)

from hetsched.evaluation import atomic_write_text, csv_text, markdown_table  # noqa: E402
from hetsched.sim.cluster import Cluster  # noqa: E402
from hetsched.sim.clusters import scaled_cluster  # noqa: E402
from hetsched.sim.engine import SimConfig, Simulator  # noqa: E402
from hetsched.sim.throughput import ThroughputModel, default_throughput  # noqa: E402
from hetsched.sim.workload import Workload  # noqa: E402

#: The presets of the tree under test (packaged since hetsched/conf; at the root before).
CONF = next(
    (p for p in (Path(_TREE) / "hetsched" / "conf", Path(_TREE) / "conf") if p.is_dir()),
    Path(_TREE) / "hetsched" / "conf",
)
POLICIES: tuple[str, ...] = (
    "fifo",
    "las",
    "yarn_cs",
    "gavel",
    "gavel_agnostic",
    "sia",
    "pollux",
    "hadar",
)
SIZES: tuple[int, ...] = (64, 256, 1024, 2048)
#: Sia's heterogeneous 64-GPU node mix (hetsched/conf/cluster/sia_64.yaml).
BASE_NODES: list[dict[str, Any]] = [
    {"gpu_type": "t4", "count": 6, "gpus": 4, "cpus": 48, "mem_gib": 192},
    {"gpu_type": "rtx2080ti", "count": 3, "gpus": 8, "cpus": 64, "mem_gib": 384},
    {"gpu_type": "a100", "count": 2, "gpus": 8, "cpus": 256, "mem_gib": 1024},
]
COLUMNS: tuple[str, ...] = (
    "policy",
    "gpus",
    "nodes",
    "jobs",
    "active",
    "running",
    "first_ms",
    "median_ms",
    "max_ms",
    "timed",
    "note",
)
COMPARE_COLUMNS: tuple[str, ...] = (
    "policy",
    "gpus",
    "active",
    "ref_median_ms",
    "median_ms",
    "wall_ratio",
    "ref_cpu_ms",
    "cpu_ms",
    "cpu_ratio",
    "ref_max_ms",
    "max_ms",
    "ref_cpu_max_ms",
    "cpu_max_ms",
    "same_decisions",
    "note",
)


def make_cluster(gpus: int) -> Cluster:
    """Sia's 64-GPU mix scaled to ``gpus`` (a multiple of 64)."""
    if gpus % 64 or gpus < 64:
        raise SystemExit(f"--sizes {gpus}: every size must be a positive multiple of 64 GPUs")
    return scaled_cluster(f"sia_x{gpus // 64}", BASE_NODES, gpus // 64)


def make_policies(names: Sequence[str]) -> dict[str, Any]:
    """The scheduler presets ``hetsched/conf/scheduler/<name>.yaml`` as Hydra config nodes."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import hetsched.config  # noqa: F401  (registers the schemas)

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("evaluate", overrides=[f"scheduler=[{','.join(names)}]"])
    return {str(k): v for k, v in cfg.scheduler.items()}


def make_workload(
    cluster: Cluster, tm: ThroughputModel, jobs: int, elastic: bool, seed: int, span_s: float
) -> Workload:
    """The Philly busiest window of ``jobs`` jobs for ``cluster`` (sizes capped to its pools).

    Arrival times are scaled linearly into ``[0, span_s]`` seconds (order kept).
    """
    from hetsched.sim import traces

    wl = traces.philly(
        throughput=tm,
        cluster=cluster,
        rng=np.random.default_rng(seed),
        num_jobs=jobs,
        busiest=True,
        elastic=elastic,
        max_gpus_policy="cap",
    )
    top = float(wl.arrival.max())
    if top > span_s > 0:
        wl = replace(wl, arrival=wl.arrival * (span_s / top))
    return wl


def main_job_workload(cluster: Cluster, tm: ThroughputModel, seed: int) -> Workload:
    """The main job's workload: the ``philly`` preset's defaults (the 300 jobs of the busiest
    window, rigid, traced arrivals over 4.3 min) drawn as ``evaluate`` draws seed ``seed``."""
    from hetsched.envs.presets import resolve_workload

    wl_rng = np.random.default_rng(seed).spawn(1)[0]  # evaluate()'s workload child
    factory = resolve_workload("philly", {})
    assert callable(factory)  # a preset name resolves to a factory
    wl: Workload = factory(throughput=tm, cluster=cluster, rng=wl_rng)
    return wl


def bench_one(
    name: str,
    node: Any,
    cluster: Cluster,
    tm: ThroughputModel,
    wl: Workload,
    *,
    warm_s: float,
    max_warm: int,
    decisions: int,
    budget_s: float,
    seed: int,
) -> dict[str, Any]:
    """Warm the simulator with the policy, then time ``decisions`` decisions.

    Returns:
        One table row (see :data:`COLUMNS`); times in milliseconds.
    """
    from hydra.utils import instantiate

    pol = instantiate(node)
    pol.reset(cluster, wl, tm, np.random.default_rng(seed))
    round_s = float(getattr(pol, "round_s", None) or 60.0)
    sim = Simulator(cluster, wl, tm, SimConfig(round_s=round_s))
    warm = min(max_warm, math.ceil(warm_s / round_s))
    solves0 = 0
    times: list[float] = []
    cpu: list[float] = []
    digest = hashlib.sha256()
    active: list[int] = []
    running: list[int] = []
    first = float("nan")
    note = ""
    t_start = time.perf_counter()
    for r in range(warm + decisions):
        if sim.done:
            note = f"finished after {r} rounds"
            break
        st = sim.state(round_s)
        gc.collect()
        c0 = time.process_time()
        t0 = time.perf_counter()
        alloc = pol.decide(st)
        dt = time.perf_counter() - t0
        dc = time.process_time() - c0
        o = np.lexsort((alloc.node, alloc.job))
        for arr in (alloc.job[o], alloc.node[o], alloc.gpus[o]):
            digest.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
        if r == 0:
            first = dt
        if r == warm - 1 or (warm == 0 and r == 0):
            solves0 = int(getattr(pol, "solves", 0)) if warm else 0
        if r >= warm:
            times.append(dt)
            cpu.append(dc)
            active.append(int(st.active.size))
            running.append(int(np.unique(alloc.job).size))
        sim.advance(alloc, round_s=round_s)
        if time.perf_counter() - t_start > budget_s and r + 1 < warm + decisions:
            note = f"stopped by --budget-s after {r + 1} rounds"
            break
    ms = [1e3 * t for t in times]
    if hasattr(pol, "solves"):
        note = f"{int(pol.solves) - solves0} solves timed; {note}".rstrip("; ")
    nan = float("nan")
    return {
        "policy": name,
        "gpus": int(cluster.node_gpus.sum()),
        "nodes": int(cluster.num_nodes),
        "jobs": int(wl.num_jobs),
        "active": int(statistics.median(active)) if active else 0,
        "running": int(statistics.median(running)) if running else 0,
        "first_ms": 1e3 * first,
        "median_ms": statistics.median(ms) if ms else nan,
        "max_ms": max(ms) if ms else nan,
        "timed": len(ms),
        "note": note,
        "cpu_ms": 1e3 * statistics.median(cpu) if cpu else nan,
        "cpu_max_ms": 1e3 * max(cpu) if cpu else nan,
        "decisions": digest.hexdigest()[:16],
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line, benchmark every (policy, size) and print a Markdown table."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--policies", nargs="+", default=list(POLICIES), choices=list(POLICIES))
    ap.add_argument("--sizes", nargs="+", type=int, default=list(SIZES), help="GPUs (x64)")
    ap.add_argument("--jobs-per-gpu", type=float, default=1.5, help="workload jobs per GPU")
    ap.add_argument("--warm-s", type=float, default=1920.0, help="simulated warm-up seconds")
    ap.add_argument("--max-warm", type=int, default=12, help="at most this many warm-up rounds")
    ap.add_argument("--decisions", type=int, default=8, help="timed decisions per cell")
    ap.add_argument(
        "--arrival-span-s", type=float, default=600.0, help="arrivals scaled into [0, span]"
    )
    ap.add_argument("--rigid", action="store_true", help="rigid jobs (default: elastic 1..2x)")
    ap.add_argument(
        "--budget-s", type=float, default=300.0, help="wall budget per (policy, size) cell"
    )
    ap.add_argument(
        "--workload",
        choices=["compressed", "main"],
        default="compressed",
        help="compressed: --jobs-per-gpu x GPUs Philly jobs arriving in --arrival-span-s; main: "
        "the main job's 300-job Philly window (use with --sizes 64: its busy rounds)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="write bench_policies.{md,csv} here")
    ap.add_argument("--quick", action="store_true", help="64 and 256 GPUs, 3 warm, 3 timed")
    ap.add_argument("--compare", metavar="REF", help="also time git commit REF, paired per cell")
    ap.add_argument("--repeats", type=int, default=1, help="--compare: pairs of runs per cell")
    ap.add_argument("--tree", help=argparse.SUPPRESS)  # worker: import hetsched from this tree
    ap.add_argument("--json", type=Path, help=argparse.SUPPRESS)  # worker: write rows here
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes = [s for s in args.sizes if s <= 256] or [64]
        args.max_warm, args.decisions = 3, 3
    if args.repeats < 1:
        print(f"bench_policies: --repeats {args.repeats} must be >= 1", file=sys.stderr)
        raise SystemExit(2)
    if args.compare:
        compare(args, sys.argv[1:] if argv is None else list(argv))
        return
    from tqdm.auto import tqdm

    tm = default_throughput()
    nodes = make_policies(args.policies)
    rows: list[dict[str, Any]] = []
    cells = [(g, p) for g in args.sizes for p in args.policies]
    bar = tqdm(cells, desc="bench", unit="cell")
    wl_cache: dict[int, Any] = {}
    for gpus, name in bar:
        bar.set_postfix_str(f"{name} @ {gpus} GPUs")
        cluster = make_cluster(gpus)
        if gpus not in wl_cache:
            jobs = max(1, round(args.jobs_per_gpu * gpus))
            wl_cache = {
                gpus: main_job_workload(cluster, tm, args.seed)
                if args.workload == "main"
                else make_workload(
                    cluster, tm, jobs, not args.rigid, args.seed, args.arrival_span_s
                )
            }
        try:
            row = bench_one(
                name,
                nodes[name],
                cluster,
                tm,
                wl_cache[gpus],
                warm_s=args.warm_s,
                max_warm=args.max_warm,
                decisions=args.decisions,
                budget_s=args.budget_s,
                seed=args.seed,
            )
        except Exception as err:  # report a broken policy and go on with the others
            row = {"policy": name, "gpus": gpus, "note": f"error: {type(err).__name__}: {err}"}
        rows.append(row)
        tqdm.write(
            f"{name:>14} {gpus:>5} GPUs: median {row.get('median_ms', float('nan')):.1f} ms, "
            f"max {row.get('max_ms', float('nan')):.1f} ms {row.get('note', '')}"
        )
    bar.close()
    cmd = "python scripts/bench_policies.py " + " ".join(sys.argv[1:] if argv is None else argv)
    header = (
        f"Command: `{cmd.strip()}` on {platform.node() or 'unknown host'} "
        f"({os.cpu_count()} CPUs, Python {platform.python_version()}); "
        f"warm-up min({args.max_warm} rounds, {args.warm_s:.0f} s), then {args.decisions} timed "
        f"decisions per cell; "
        + (
            "the main job's workload (philly preset, 300 jobs)."
            if args.workload == "main"
            else f"{args.jobs_per_gpu} Philly jobs per GPU "
            f"({'rigid' if args.rigid else 'elastic'}, arrivals in {args.arrival_span_s:.0f} s)."
        )
    )
    if args.json:
        atomic_write_text(args.json, json.dumps(rows))
        return
    table = markdown_table(rows, COLUMNS)
    print(header + "\n\n" + table)
    if args.out:
        atomic_write_text(args.out / "bench_policies.md", header + "\n\n" + table + "\n")
        atomic_write_text(args.out / "bench_policies.csv", csv_text(rows, COLUMNS))


def _extract(ref: str, dest: Path) -> None:
    """``git archive REF`` of this checkout, unpacked into ``dest``; exit 2 on a bad REF."""
    import io
    import tarfile

    res = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=False)
    if res.returncode != 0:
        msg = res.stderr.decode(errors="replace").strip().splitlines()
        print(f"bench_policies: --compare {ref}: git archive failed: {msg[-1] if msg else ''}",
              file=sys.stderr)  # fmt: skip
        raise SystemExit(2)
    with tarfile.open(fileobj=io.BytesIO(res.stdout)) as tar:
        try:
            tar.extractall(dest, filter="data")
        except TypeError:  # Python < 3.10.12 has no extraction filters (our own archive)
            tar.extractall(dest)


def _worker(tree: Path, policy: str, gpus: int, args: argparse.Namespace) -> dict[str, Any]:
    """One cell in a fresh process importing hetsched from ``tree``; its row (or an error)."""
    from hetsched.sim.paths import shared_data_root

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "row.json"
        cmd = [
            sys.executable, str(Path(__file__).resolve()), f"--tree={tree}",
            "--policies", policy, "--sizes", str(gpus), "--jobs-per-gpu", str(args.jobs_per_gpu),
            "--warm-s", str(args.warm_s), "--max-warm", str(args.max_warm),
            "--decisions", str(args.decisions), "--arrival-span-s", str(args.arrival_span_s),
            "--budget-s", str(args.budget_s), "--seed", str(args.seed), "--json", str(out),
            "--workload", args.workload,
        ] + (["--rigid"] if args.rigid else [])  # fmt: skip
        env = {**os.environ, "HETSCHED_SHARED_DATA": str(shared_data_root())}
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if res.returncode != 0 or not out.exists():
            tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
            return {"policy": policy, "gpus": gpus, "note": f"worker failed: {tail}"}
        rows: list[dict[str, Any]] = json.loads(out.read_text())
        return rows[0]


def compare(args: argparse.Namespace, argv: list[str]) -> None:
    """Time every cell for commit ``args.compare`` and for this tree, in alternating processes."""
    nan = float("nan")

    def med(rows: list[dict[str, Any]], key: str) -> float:
        vals = [float(r[key]) for r in rows if key in r and math.isfinite(float(r[key]))]
        return statistics.median(vals) if vals else nan

    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench_ref_") as tmp:
        ref_tree = Path(tmp)
        _extract(args.compare, ref_tree)
        for gpus in args.sizes:
            for name in args.policies:
                runs: dict[str, list[dict[str, Any]]] = {"ref": [], "now": []}
                for rep in range(args.repeats):
                    order = ("ref", "now") if rep % 2 == 0 else ("now", "ref")
                    for which in order:
                        tree = ref_tree if which == "ref" else ROOT
                        runs[which].append(_worker(tree, name, gpus, args))
                ref, now = runs["ref"], runs["now"]
                row = {
                    "policy": name,
                    "gpus": gpus,
                    "active": now[0].get("active", 0),
                    "ref_median_ms": med(ref, "median_ms"),
                    "median_ms": med(now, "median_ms"),
                    "ref_cpu_ms": med(ref, "cpu_ms"),
                    "cpu_ms": med(now, "cpu_ms"),
                    "ref_max_ms": med(ref, "max_ms"),
                    "max_ms": med(now, "max_ms"),
                    "ref_cpu_max_ms": med(ref, "cpu_max_ms"),
                    "cpu_max_ms": med(now, "cpu_max_ms"),
                    "same_decisions": "yes"
                    if {r.get("decisions") for r in ref + now} == {now[0].get("decisions")}
                    and now[0].get("decisions")
                    else "no",
                    "note": "; ".join(sorted({r["note"] for r in ref + now if r.get("note")})),
                }
                row["wall_ratio"] = row["ref_median_ms"] / row["median_ms"]
                row["cpu_ratio"] = row["ref_cpu_ms"] / row["cpu_ms"]
                out.append(row)
                print(
                    f"{name:>14} {gpus:>5} GPUs: {row['ref_median_ms']:.1f} -> "
                    f"{row['median_ms']:.1f} ms (x{row['wall_ratio']:.2f} wall, "
                    f"x{row['cpu_ratio']:.2f} CPU), same decisions: {row['same_decisions']}",
                    flush=True,
                )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else nan
    header = (
        f"Command: `python scripts/bench_policies.py {' '.join(argv)}` on "
        f"{platform.node() or 'unknown host'} ({os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, load average {load:.1f} at the end); `ref` = "
        f"{args.compare}, {args.repeats} pair(s) of fresh processes per cell, medians of "
        f"{args.decisions} timed decisions after min({args.max_warm} rounds, "
        f"{args.warm_s:.0f} s) of warm-up; ratio = ref / now."
    )
    table = markdown_table(out, COMPARE_COLUMNS)
    print(header + "\n\n" + table)
    if args.out:
        atomic_write_text(args.out / "bench_policies_compare.md", header + "\n\n" + table + "\n")
        atomic_write_text(args.out / "bench_policies_compare.csv", csv_text(out, COMPARE_COLUMNS))


if __name__ == "__main__":
    main()
