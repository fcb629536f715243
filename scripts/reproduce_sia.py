"""Reproduce Sia's Table 3 (heterogeneous 64-GPU simulation) with hetsched.

Runs Sia, the Pollux-like baseline, Gavel (``hetsched.baselines.gavel``, if present) and FIFO on
Sia's Philly-, Helios- (Saturn) and newTrace-derived workloads on the ``sia_64`` cluster, and
prints average JCT, p99 JCT, makespan, GPU-hours per job and restarts per job beside the paper's
numbers (sia.md §11), plus Sia's decision time per round.

Examples::

    python scripts/reproduce_sia.py                  # every file: 8 philly, 10 helios, 10 newtrace
    python scripts/reproduce_sia.py --quick          # smoke: 2 files per set
    python scripts/reproduce_sia.py --sets philly --files 3 --jobs 1
    python scripts/reproduce_sia.py --data-dir /abs/path/to/workloads/sia
    python scripts/reproduce_sia.py --sets pollux_philly   # shipped Pollux files (no paper row)

Sia's workload files are not shipped (the artifact has no licence): they are read from
``--data-dir`` (default ``$HETSCHED_SHARED_DATA/workloads/sia``, else
``<repo root>/../shared/data/workloads/sia``), which must hold
``philly/``, ``saturn/`` (Helios) and ``newtrace/`` with ``workload-<i>.csv`` files; each is passed
to the ``sia_philly`` / ``sia_helios`` / ``sia_newtrace`` workload presets as ``path=`` (Hydra:
``workload.path=...``). The script stops with a clear message if a file is missing. Runs go through
the shared runner :func:`hetsched.evaluation.run_one`. Aggregation follows Sia's ``print_run_stats``: JCTs are pooled over the files of a
set (``±`` = standard deviation of the per-file means), p99 is ``np.percentile(pooled, 99)``,
makespan and GPU-hours per job are averaged over files.

Runs are in Sia's reproduction mode (``SimConfig(reproduction="sia")``): the node co-location
slowdown, which Sia's simulator lacks, is off; restart delays stay (Sia's simulator has them).
``--full-model`` runs hetsched's full model instead.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread per worker process

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tqdm.auto import tqdm  # noqa: E402

from hetsched.evaluation import atomic_write_text, csv_text, run_one  # noqa: E402
from hetsched.resources import CONF_DIR  # noqa: E402
from hetsched.sim.cluster import Cluster  # noqa: E402
from hetsched.sim.engine import SimConfig  # noqa: E402
from hetsched.sim.metrics import RESULT_COLUMNS  # noqa: E402
from hetsched.sim.paths import shared_data_root  # noqa: E402
from hetsched.sim.throughput import ThroughputModel, default_throughput  # noqa: E402

#: Workload sets: name -> (trace factory name, number of files, sub-directory of --data-dir or
#: None for a shipped set).
SETS: dict[str, tuple[str, int, str | None]] = {
    "philly": ("sia_philly", 8, "philly"),
    "helios": ("sia_helios", 10, "saturn"),
    "newtrace": ("sia_newtrace", 10, "newtrace"),
    "pollux_philly": ("pollux_philly", 8, None),
}
DEFAULT_SETS: tuple[str, ...] = ("philly", "helios", "newtrace")
#: Default location of Sia's workload files: ``$HETSCHED_SHARED_DATA/workloads/sia``, else
#: ``<repo root>/../shared/data/workloads/sia`` (:func:`hetsched.sim.paths.shared_data_root`).
DEFAULT_DATA_DIR = shared_data_root() / "workloads" / "sia"
POLICIES: tuple[str, ...] = ("sia", "pollux", "gavel", "fifo")

#: Sia Table 3: (avg JCT h, p99 JCT h, makespan h, GPU-h per job, restarts per job).
PAPER: dict[tuple[str, str], tuple[float, float, float, float, float]] = {
    ("philly", "sia"): (0.6, 9.5, 14.2, 4.0, 2.9),
    ("philly", "pollux"): (1.0, 14.9, 24.5, 5.6, 5.8),
    ("philly", "gavel"): (1.9, 30.0, 33.8, 9.0, 5.7),
    ("helios", "sia"): (0.7, 10.9, 14.9, 4.8, 3.4),
    ("helios", "pollux"): (1.0, 15.0, 25.5, 5.9, 5.3),
    ("helios", "gavel"): (2.5, 38.7, 43.0, 12.1, 7.5),
    ("newtrace", "sia"): (0.7, 4.6, 52.2, 3.0, 5.0),
    ("newtrace", "pollux"): (1.5, 10.3, 62.3, 3.4, 5.4),
    ("newtrace", "gavel"): (11.3, 98.1, 110.0, 6.4, 4.5),
}

#: Sia's simulator calibration (sia.md §2.1): true goodput is divided by these factors.
SIA_SLOWDOWN: dict[str, float] = {"cifar10": 1.8, "ncf": 1.5, "gpt_pmp": 1.0}
SIA_SLOWDOWN_DEFAULT = 1.2

_CACHE: dict[str, Any] = {}


def calibrated(tm: ThroughputModel) -> ThroughputModel:
    """A copy of ``tm`` with Sia's ``SLOWDOWN`` calibration applied to the Sia apps."""
    f = np.array(
        [
            SIA_SLOWDOWN.get(m, SIA_SLOWDOWN_DEFAULT) if fam == "sia" else 1.0
            for m, fam in zip(tm.models, tm.family, strict=True)
        ]
    )
    return replace(tm, tput=tm.tput / f[:, None, None, None])


def _context(slowdown: bool = False) -> tuple[Cluster, ThroughputModel]:
    """The sia_64 cluster and the shipped throughput table (cached per process)."""
    if "cluster" not in _CACHE:
        import yaml

        from hetsched.sim.clusters import spec_cluster

        conf = CONF_DIR / "cluster" / "sia_64.yaml"
        spec = yaml.safe_load(conf.read_text())
        _CACHE["cluster"] = spec_cluster(spec["name"], spec["nodes"])
        _CACHE["tm"] = default_throughput()
        _CACHE["tm_slow"] = calibrated(_CACHE["tm"])
    return _CACHE["cluster"], _CACHE["tm_slow" if slowdown else "tm"]


def gavel_available() -> bool:
    """Whether ``hetsched.baselines.gavel`` exists in this checkout."""
    try:
        import hetsched.baselines.gavel  # noqa: F401
    except ImportError:
        return False
    return True


def make_policy(name: str) -> Any:
    """A fresh policy with the settings of Sia's Table 3 runs."""
    if name == "sia":
        from hetsched.baselines.sia import Sia

        return Sia()
    if name == "pollux":
        from hetsched.baselines.pollux import PolluxLike

        return PolluxLike()
    if name == "gavel":
        from hetsched.baselines.gavel import GavelPolicy

        return GavelPolicy()  # heterogeneity-aware max-min fairness, 360 s rounds
    if name == "fifo":
        from hetsched.baselines.heuristics import FIFO

        return FIFO()
    raise ValueError(f"unknown policy {name!r}; choose from {POLICIES}")


def workload_file(data_dir: Path, set_name: str, index: int) -> Path | None:
    """The file of one (set, index) under ``data_dir``, or ``None`` for a shipped set."""
    sub = SETS[set_name][2]
    return None if sub is None else data_dir / sub / f"workload-{index}.csv"


def check_data(data_dir: Path, sets: list[str], n_files: int | None) -> None:
    """Exit with a clear message if a needed workload file is missing.

    Raises:
        SystemExit: Naming the missing directory or files and how to point at them.
    """
    need = [s for s in sets if SETS[s][2] is not None]
    if not need:
        return
    if not data_dir.is_dir():
        raise SystemExit(
            f"reproduce_sia: Sia's workload directory {data_dir} does not exist. These files are "
            "not shipped (the Sia artifact has no licence); pass --data-dir /path/to/workloads/sia "
            "(holding philly/, saturn/, newtrace/ with workload-<i>.csv), or run only the shipped "
            "set with --sets pollux_philly."
        )
    missing = []
    for s in need:
        n = SETS[s][1] if n_files is None else min(n_files, SETS[s][1])
        for i in range(1, n + 1):
            f = workload_file(data_dir, s, i)
            if f is not None and not f.exists() and not f.with_name(f.name + ".gz").exists():
                missing.append(str(f))
    if missing:
        raise SystemExit(
            f"reproduce_sia: {len(missing)} workload file(s) missing under {data_dir}, e.g. "
            f"{missing[0]}; pass the right --data-dir, or fewer --files / other --sets."
        )


def run_task(task: tuple[str, int, str, bool, str, str | None]) -> dict[str, Any]:
    """Run one (set, file index, policy, slowdown, data dir, reproduction mode).

    Returns:
        The run's metrics and per-job arrays.
    """
    set_name, index, policy, slowdown, data_dir, mode = task
    from hetsched.sim import traces

    cluster, tm = _context(slowdown)
    factory = getattr(traces, SETS[set_name][0])
    f = workload_file(Path(data_dir), set_name, index)
    kw: dict[str, Any] = {} if f is None else {"path": str(f)}
    wl = factory(
        throughput=tm, cluster=cluster, rng=np.random.default_rng(index), index=index, **kw
    )
    pol = make_policy(policy)
    t0 = time.perf_counter()
    out = run_one(
        pol,
        name=policy,
        cluster=cluster,
        workload=wl,
        throughput=tm,
        sim_config=SimConfig(round_s=60.0, reproduction=mode),
        seed=index,
        rng=np.random.default_rng(1000 + index),
    )
    wall = time.perf_counter() - t0
    res = out.result
    raw = getattr(pol, "stats", None)
    stats: dict[str, Any] = raw if isinstance(raw, dict) else {}
    solve = np.asarray(stats["solve_s"]) if "solve_s" in stats else None
    return {
        "set": set_name,
        "index": index,
        "policy": policy,
        "row": {**out.row, "set": set_name, "wall_s": wall},
        "jct_h": (res.finish_time - wl.arrival) / 3600.0,
        "makespan_h": float(out.row["makespan_h"]),
        "gpu_h_per_job": float(res.gpu_s_by_type.sum() / 3600.0 / wl.num_jobs),
        "restarts": res.restarts.astype(np.float64),
        "unfinished": int(np.sum(~np.isfinite(res.finish_time))),
        "decision_s": np.asarray(res.decision_s),
        "solve_s": solve,
        "active": np.asarray(stats["n_active"]) if solve is not None else None,
        "milp_calls": int(stats["milp_calls"]) if solve is not None else 0,
        "wall_s": wall,
    }


def _ms(x: np.ndarray) -> str:
    return (
        f"{1e3 * np.mean(x):.1f} / {1e3 * np.median(x):.1f} / "
        f"{1e3 * np.percentile(x, 95):.1f} / {1e3 * np.max(x):.0f}"
    )


def summarise(results: list[dict[str, Any]], sets: list[str], policies: list[str]) -> str:
    """Markdown tables: ours beside the paper, and the decision times."""
    lines = [
        "| trace | policy | avg JCT (h) | paper | p99 JCT (h) | paper | makespan (h) | paper "
        "| GPU-h/job | paper | restarts/job | paper | files | unfinished |",
        "|:--|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    agg: dict[tuple[str, str], tuple[float, ...]] = {}
    for s in sets:
        for p in policies:
            rs = sorted((r for r in results if r["set"] == s and r["policy"] == p),
                        key=lambda r: r["index"])  # fmt: skip
            if not rs:
                continue
            jct = np.concatenate([r["jct_h"] for r in rs])
            per_file = np.array([np.nanmean(r["jct_h"]) for r in rs])
            mk = np.array([r["makespan_h"] for r in rs])
            gh = np.array([r["gpu_h_per_job"] for r in rs])
            rst = float(np.mean(np.concatenate([r["restarts"] for r in rs])))
            unf = sum(r["unfinished"] for r in rs)
            ok = jct[np.isfinite(jct)]
            avg, p99 = float(np.mean(ok)), float(np.percentile(ok, 99))
            agg[(s, p)] = (avg, p99, float(mk.mean()), float(gh.mean()), rst)
            paper = PAPER.get((s, p))

            def pp(i: int, paper: tuple[float, ...] | None = paper) -> str:
                return f"{paper[i]:g}" if paper else "--"

            lines.append(
                f"| {s} | {p} | {avg:.2f} ± {per_file.std():.2f} | {pp(0)} | {p99:.1f} | {pp(1)} "
                f"| {mk.mean():.1f} ± {mk.std():.1f} | {pp(2)} | {gh.mean():.2f} ± {gh.std():.2f} "
                f"| {pp(3)} | {rst:.1f} | {pp(4)} | {len(rs)} | {unf} |"
            )
    out = ["## Table 3 beside the paper", "", *lines, ""]
    # Relative reductions of Sia vs each baseline (avg JCT / p99 / makespan / GPU-h).
    red = ["## Sia's reductions vs the baselines (avg JCT / p99 / makespan / GPU-h)", ""]
    red += ["| trace | vs | ours | paper |", "|:--|:--|:--|:--|"]
    for s in sets:
        for p in policies:
            if p == "sia" or (s, p) not in agg or (s, "sia") not in agg:
                continue
            ours_s = "/".join(f"{100 * (1 - a / b):.0f}%" for a, b in
                            zip(agg[(s, "sia")][:4], agg[(s, p)][:4], strict=True))  # fmt: skip
            if (s, p) in PAPER:
                paper_s = "/".join(f"{100 * (1 - a / b):.0f}%" for a, b in
                                 zip(PAPER[(s, "sia")][:4], PAPER[(s, p)][:4], strict=True))  # fmt: skip
            else:
                paper_s = "--"
            red.append(f"| {s} | {p} | {ours_s} | {paper_s} |")
    out += [*red, ""]
    dec = ["## Decision time per round (ms: mean / median / p95 / max)", ""]
    dec += ["| trace | policy | rounds | decision (whole call) | MILP solve only | active jobs "
            "mean / max | MILP calls |", "|:--|:--|--:|:--|:--|:--|--:|"]  # fmt: skip
    for s in sets:
        for p in policies:
            rs = [r for r in results if r["set"] == s and r["policy"] == p]
            if not rs:
                continue
            d = np.concatenate([r["decision_s"] for r in rs])
            if rs[0]["solve_s"] is not None:
                sv = np.concatenate([r["solve_s"] for r in rs])
                act = np.concatenate([r["active"] for r in rs])
                extra = f"{_ms(sv)} | {act.mean():.1f} / {act.max()} | "
                extra += f"{sum(r['milp_calls'] for r in rs)}"
            else:
                extra = "-- | -- | --"
            dec.append(f"| {s} | {p} | {d.size} | {_ms(d)} | {extra} |")
    out += [*dec, ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 files per set")
    ap.add_argument("--files", type=int, default=None, help="first N files of each set")
    ap.add_argument("--sets", nargs="+", default=list(DEFAULT_SETS), choices=list(SETS))
    ap.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="Sia's workloads directory (philly/, saturn/, newtrace/); default %(default)s",
    )
    ap.add_argument("--policies", nargs="+", default=list(POLICIES), choices=list(POLICIES))
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                    help="worker processes (default 2)")  # fmt: skip
    ap.add_argument("--out", type=Path, default=Path("outputs/reproduce_sia"))
    ap.add_argument(
        "--sia-slowdown",
        action="store_true",
        help="apply Sia's simulator calibration (goodput / SLOWDOWN: cifar10 1.8, others 1.2)",
    )
    ap.add_argument(
        "--full-model",
        action="store_true",
        help="hetsched's full simulator model instead of Sia's reproduction mode (sim "
        "reproduction=sia: no node co-location slowdown; restart delays stay, as in Sia's simulator)",
    )
    args = ap.parse_args(argv)
    mode = None if args.full_model else "sia"
    n_files = 2 if args.quick else args.files
    data_dir = args.data_dir.expanduser().resolve()
    check_data(data_dir, list(args.sets), n_files)
    policies = list(args.policies)
    notes = []
    if "gavel" in policies and not gavel_available():
        policies.remove("gavel")
        notes.append("Gavel skipped: hetsched.baselines.gavel is not in this checkout.")
    tasks = []
    for s in args.sets:
        n = SETS[s][1] if n_files is None else min(n_files, SETS[s][1])
        tasks += [
            (s, i, p, args.sia_slowdown, str(data_dir), mode)
            for i in range(1, n + 1)
            for p in policies
        ]
    # Longest first (newtrace, the elastic policies) for load balance.
    cost = {"newtrace": 6.0, "philly": 1.0, "helios": 1.0, "pollux_philly": 1.0}
    weight = {"sia": 3.0, "pollux": 4.0, "gavel": 0.5, "fifo": 0.2}
    tasks.sort(key=lambda t: -cost[t[0]] * weight[t[2]])
    t0 = time.perf_counter()
    results: list[dict[str, Any]] = []
    with tqdm(total=len(tasks), desc="reproduce_sia", unit="run") as bar:
        if args.jobs <= 1:
            it: Any = map(run_task, tasks)
            ex = None
        else:
            ex = ProcessPoolExecutor(max_workers=args.jobs)
            it = ex.map(run_task, tasks)
        try:
            for r in it:
                results.append(r)
                bar.set_postfix_str(f"{r['set']}-{r['index']} {r['policy']} {r['wall_s']:.0f}s")
                bar.update(1)
        finally:
            if ex is not None:
                ex.shutdown(cancel_futures=True)
    wall = time.perf_counter() - t0
    cluster, _ = _context()
    if args.sia_slowdown:
        notes.append("Sia's SLOWDOWN calibration applied to the ground-truth goodput.")
    notes.append(
        "Simulator: hetsched's full model (--full-model)."
        if mode is None
        else "Simulator: Sia's reproduction mode (sim reproduction=sia)."
    )
    cmd = "python scripts/reproduce_sia.py " + " ".join(sys.argv[1:] if argv is None else argv)
    head = [
        f"Command: `{cmd.strip()}`",
        "",
        f"Cluster: {cluster.describe()}; {len(tasks)} runs in {wall / 60:.1f} min wall "
        f"with {args.jobs} worker(s).",
        *notes,
        "",
    ]
    text = "\n".join(head) + summarise(results, list(args.sets), policies)
    print(text)
    rows = [r["row"] for r in results]
    cols = ["set", *RESULT_COLUMNS, "wall_s"]
    atomic_write_text(args.out / "results.csv", csv_text(rows, cols))
    atomic_write_text(args.out / "summary.md", text + "\n")
    print(f"\nwritten: {args.out / 'results.csv'}, {args.out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
