"""Reproduce Gavel's continuous-single sweep (OSDI'20, gavel.md section 8) with hetsched.

Setup (gavel.md sections 7-8): the ``gavel_108`` cluster (36 V100 + 36 P100 + 36 K80), Gavel's
synthetic generator (``workload=gavel_synthetic``: Poisson arrivals, 1-GPU jobs uniform over the 26
Gavel job types, "Philly" durations on V100), the shipped throughput table (Gavel's measured
K80/P100/V100 numbers). For each arrival rate and seed every scheduler runs on the same workload
through :func:`hetsched.evaluation.evaluate` (the shared runner behind ``scripts/evaluate.py``), and
the average JCT is taken over a *measured window* of jobs in steady state (Gavel: jobs 4000-4999
of a continuous stream; here ``--window`` of ``--jobs``, a reduced count). A window job that does
not finish within ``--max-hours`` of simulated time makes that run's value NaN ("-" in the table,
as in the paper's table for saturated policies).

Schedulers (Hydra presets in ``hetsched/conf/scheduler``) and the paper's column they are compared with:
``gavel_agnostic`` (LAS agnostic), ``gavel`` (Gavel LAS), ``gavel_ss`` (Gavel LAS w/ SS),
``fifo`` (FIFO) and ``gavel_ftf`` (FTF Gavel).

Examples::

    python scripts/reproduce_gavel.py                                  # the documented sweep
    python scripts/reproduce_gavel.py --rates 0.4 5.6 --seeds 0 --jobs 600 --window 200 400
    python scripts/reproduce_gavel.py --schedulers gavel gavel_agnostic --rates 5.6

Gavel's simulator has no restart cost, so by default every placement change is free here too
(``--restart-s 0``; a negative value keeps the throughput table's delays).

Writes ``runs.csv`` (one row per rate, seed and scheduler), ``blocks.csv`` (mean JCT of
consecutive blocks of jobs, a steady-state check) and ``summary.md`` (means over seeds
beside the authors' numbers, plus the agnostic / Gavel JCT ratio) into ``--out``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hetsched.evaluation import atomic_write_text, csv_text, evaluate  # noqa: E402
from hetsched.resources import CONF_DIR  # noqa: E402
from hetsched.sim.engine import SimConfig  # noqa: E402

#: Scheduler preset -> the paper's column (gavel.md section 8, continuous-single).
COLUMNS: dict[str, str] = {
    "gavel_agnostic": "LAS agnostic",
    "gavel": "Gavel LAS",
    "gavel_ss": "Gavel LAS w/ SS",
    "fifo": "FIFO",
    "gavel_ftf": "FTF Gavel",
}

#: Authors' notebook numbers, mean JCT in hours (seed 0, jobs 4000-4999, 36:36:36); None = "-".
PAPER: dict[float, dict[str, float | None]] = {
    0.4: {"gavel_agnostic": 23.26, "gavel": 17.58, "gavel_ss": 18.42, "fifo": 17.58,
          "gavel_ftf": 17.58},
    2.4: {"gavel_agnostic": 23.43, "gavel": 16.39, "gavel_ss": 16.92, "fifo": 18.63,
          "gavel_ftf": 16.58},
    4.4: {"gavel_agnostic": 23.81, "gavel": 17.48, "gavel_ss": 17.78, "fifo": 44.28,
          "gavel_ftf": 18.62},
    4.8: {"gavel_agnostic": 35.79, "gavel": 18.97, "gavel_ss": 18.67, "fifo": 99.19,
          "gavel_ftf": 20.43},
    5.2: {"gavel_agnostic": 63.78, "gavel": 22.02, "gavel_ss": 19.14, "fifo": 151.67,
          "gavel_ftf": 23.38},
    5.6: {"gavel_agnostic": 95.99, "gavel": 28.96, "gavel_ss": 19.64, "fifo": None,
          "gavel_ftf": 30.47},
    6.0: {"gavel_agnostic": None, "gavel": 41.23, "gavel_ss": 20.42, "fifo": None,
          "gavel_ftf": 43.05},
}  # fmt: skip

RUN_COLUMNS: tuple[str, ...] = (
    "rate_jobs_per_h", "seed", "scheduler", "jobs", "window_start", "window_end",
    "window_avg_jct_h", "window_unfinished", "all_avg_jct_h", "unfinished", "utilization",
    "restarts", "decision_ms_mean", "wall_s",
)  # fmt: skip


def scheduler_factories(names: Sequence[str]) -> dict[str, Callable[[], Any]]:
    """Zero-argument factories for the named ``hetsched/conf/scheduler`` presets (composed by Hydra)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.utils import instantiate

    import hetsched.config  # noqa: F401  (registers the schemas)

    conf = CONF_DIR
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose(
            "evaluate", overrides=[f"scheduler=[{','.join(names)}]", "~cluster", "~workload"]
        )
    return {str(k): partial(instantiate, node) for k, node in cfg.scheduler.items()}


def window_jct_h(arrival: np.ndarray, finish: np.ndarray, lo: int, hi: int) -> tuple[float, int]:
    """Mean JCT in hours of jobs ``lo..hi-1`` (NaN if any is unfinished) and the unfinished count."""
    jct = (finish[lo:hi] - arrival[lo:hi]) / 3600.0
    bad = int(np.isnan(jct).sum())
    return (float("nan") if bad else float(jct.mean())), bad


def _fmt(v: float | None) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:.2f}"


def summary_markdown(rows: Sequence[dict[str, Any]], names: Sequence[str], cmd: str) -> str:
    """Mean window JCT over seeds per rate and scheduler, beside the paper's numbers."""
    rates = sorted({float(r["rate_jobs_per_h"]) for r in rows})
    seeds = sorted({int(r["seed"]) for r in rows})

    def mean(rate: float, name: str) -> float:
        v = [
            float(r["window_avg_jct_h"])
            for r in rows
            if float(r["rate_jobs_per_h"]) == rate and r["scheduler"] == name
        ]
        return float(np.mean(v)) if v and all(math.isfinite(x) for x in v) else float("nan")

    head = ["jobs/h"]
    for n in names:
        head += [f"{n} (ours)", f"{COLUMNS.get(n, n)} (paper)"]
    ratio = "gavel_agnostic" in names and "gavel" in names
    if ratio:
        head += ["agnostic/Gavel (ours)", "agnostic/Gavel (paper)"]
    lines = [
        "# Gavel continuous-single reproduction (mean JCT of the measured window, hours)",
        "",
        f"Command: `{cmd}`; seeds {seeds}; ours = mean over seeds, '-' = a window job unfinished.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---:" for _ in head) + "|",
    ]
    for rate in rates:
        paper = PAPER.get(round(rate, 1), {})
        cells = [f"{rate:g}"]
        for n in names:
            cells += [_fmt(mean(rate, n)), _fmt(paper.get(n))]
        if ratio:
            ours = mean(rate, "gavel_agnostic") / mean(rate, "gavel")
            pa, pg = paper.get("gavel_agnostic"), paper.get("gavel")
            theirs = pa / pg if pa is not None and pg is not None else float("nan")
            cells += [_fmt(ours), _fmt(theirs)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    """Run the sweep and write ``runs.csv`` and ``summary.md``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", type=float, nargs="+", default=[0.4, 2.4, 4.4, 5.6])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--jobs", type=int, default=1500, help="jobs per workload (Gavel: ~6000)")
    ap.add_argument(
        "--window", type=int, nargs=2, default=None, metavar=("START", "END"),
        help="measured job indices [START, END) (default: the middle third of --jobs)",
    )  # fmt: skip
    ap.add_argument("--schedulers", nargs="+", default=list(COLUMNS), choices=list(COLUMNS))
    ap.add_argument(
        "--max-hours", type=float, default=3000.0, help="simulated horizon per run, hours"
    )
    ap.add_argument(
        "--restart-s", type=float, default=0.0,
        help="restart delay per placement change, seconds (0 = Gavel's simulator, which has "
        "none; a negative value keeps the throughput table's per-model delays)",
    )  # fmt: skip
    ap.add_argument(
        "--blocks", type=int, default=4,
        help="also write the mean JCT of this many consecutive blocks of jobs (blocks.csv), "
        "to show whether the window is in steady state",
    )  # fmt: skip
    ap.add_argument("--out", type=Path, default=Path("outputs/reproduce_gavel"))
    args = ap.parse_args(argv)
    if args.blocks < 1:
        raise SystemExit(f"--blocks={args.blocks} must be >= 1")
    if args.jobs < 3:
        raise SystemExit(f"--jobs={args.jobs} must be >= 3")
    lo, hi = args.window if args.window else (args.jobs // 3, 2 * args.jobs // 3)
    if not 0 <= lo < hi <= args.jobs:
        raise SystemExit(f"--window {lo} {hi} must satisfy 0 <= START < END <= --jobs={args.jobs}")
    if any(not (r > 0 and math.isfinite(r)) for r in args.rates):
        raise SystemExit(f"--rates {args.rates}: every rate must be a positive number of jobs/h")

    from tqdm.auto import tqdm

    from hetsched.envs.presets import resolve_cluster, resolve_workload
    from hetsched.sim.throughput import default_throughput
    from hetsched.sim.workload import Workload

    cluster = resolve_cluster("gavel_108")
    tm = default_throughput()
    if args.restart_s >= 0:
        tm = replace(tm, restart_delay_s=np.full_like(tm.restart_delay_s, args.restart_s))
    factories = scheduler_factories(args.schedulers)
    sim_config = SimConfig(round_s=360.0, max_time_s=args.max_hours * 3600.0)
    args.out.mkdir(parents=True, exist_ok=True)
    cmd = "python scripts/reproduce_gavel.py " + " ".join(sys.argv[1:] if argv is None else argv)
    rows: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]] = []
    edges = np.linspace(0, args.jobs, args.blocks + 1).astype(int)
    total = len(args.rates) * len(args.seeds) * len(factories)
    with tqdm(total=total, desc="reproduce_gavel", unit="run") as bar:
        for rate in args.rates:
            wf = resolve_workload(
                "gavel_synthetic",
                {"num_jobs": args.jobs, "jobs_per_hour": rate, "multi_gpu": False},
            )
            if isinstance(wf, Workload):
                raise TypeError("the gavel_synthetic preset must build a workload factory")
            for seed in args.seeds:
                for name, make in factories.items():
                    bar.set_postfix_str(f"{rate:g}/h seed={seed} {name}")
                    t0 = time.perf_counter()
                    (out,) = evaluate(
                        {name: make}, cluster=cluster, workload_factory=wf, throughput=tm,
                        seeds=[seed], sim_config=sim_config,
                    )  # fmt: skip
                    res = out.result
                    arr = res.workload.arrival
                    w_jct, w_bad = window_jct_h(arr, res.finish_time, lo, hi)
                    done = np.isfinite(res.finish_time)
                    rows.append(
                        {
                            "rate_jobs_per_h": rate,
                            "seed": seed,
                            "scheduler": name,
                            "jobs": args.jobs,
                            "window_start": lo,
                            "window_end": hi,
                            "window_avg_jct_h": w_jct,
                            "window_unfinished": w_bad,
                            "all_avg_jct_h": float(
                                np.mean((res.finish_time[done] - arr[done]) / 3600.0)
                            ),
                            "unfinished": int((~done).sum()),
                            "utilization": out.row["utilization"],
                            "restarts": out.row["restarts"],
                            "decision_ms_mean": out.row["decision_ms_mean"],
                            "wall_s": time.perf_counter() - t0,
                        }
                    )
                    for b0, b1 in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
                        b_jct, b_bad = window_jct_h(arr, res.finish_time, b0, b1)
                        blocks.append(
                            {
                                "rate_jobs_per_h": rate, "seed": seed, "scheduler": name,
                                "block_start": b0, "block_end": b1, "avg_jct_h": b_jct,
                                "unfinished": b_bad,
                            }
                        )  # fmt: skip
                    bar.update(1)
                    # Rewrite after every run so that an interrupted sweep keeps its results.
                    atomic_write_text(args.out / "runs.csv", csv_text(rows, RUN_COLUMNS))
                    atomic_write_text(args.out / "blocks.csv", csv_text(blocks, list(blocks[0])))
    md = summary_markdown(rows, list(factories), cmd)
    atomic_write_text(args.out / "summary.md", md)
    print(md)
    print(f"written: {args.out / 'runs.csv'}, {args.out / 'summary.md'}")


if __name__ == "__main__":
    main()
