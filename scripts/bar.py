"""Issue 5's bar in one command: the held-out test rows of ``docs/results.md``, every scheduler.

The bar: on held-out workloads, the candidate's avg JCT is below every reference scheduler's and
its makespan no worse, per row (the mean over the seeds). The 16 rows are those of results.md's
two test tables: the Philly test windows t1 (the busiest window from sorted job 0), t2 (the
busiest from 44,000) and t3 (the 300 jobs from 30,000, jobs running for days), the held-out
Alibaba PAI window, and file 1 of Sia's three traces of elastic jobs and of Pollux's workloads,
each on ``sia_64`` and ``pai_mixed``, seeds 100-102 (never used for training or selection).

Every row runs through the evaluation runner, as ``scripts/evaluate.py scheduler=NAME
workload=W cluster=C 'seed=[100,101,102]'`` does, and prints one table: per row each
scheduler's mean avg JCT / makespan (h) and the verdict for the first scheduler. Rows whose
data is not here (the Alibaba and Sia traces need ``../shared/data``) are reported as missing,
not dropped.

Examples::

    python scripts/bar.py                                  # maifs against sia and gavel, 16 rows
    python scripts/bar.py --rows sia_newtrace/sia_64 --jobs 2
    python scripts/bar.py --schedulers maifs sia --out outputs/bar.md
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from hetsched.envs.presets import resolve_cluster, resolve_workload, scheduler_factory
from hetsched.evaluation import atomic_write_text, evaluate, markdown_table
from hetsched.sim.engine import SimConfig
from hetsched.sim.errors import TraceError
from hetsched.sim.throughput import default_throughput

#: The test seeds of docs/results.md.
SEEDS: tuple[int, ...] = (100, 101, 102)


@dataclass(frozen=True)
class Row:
    """One test row: a workload preset with overrides, on one cluster preset."""

    name: str  # e.g. "philly_t1"
    workload: str
    cluster: str
    overrides: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """``name/cluster``, as ``--rows`` takes it."""
        return f"{self.name}/{self.cluster}"


#: The workloads of the rows: (row name, workload preset, overrides).
WORKLOADS: tuple[tuple[str, str, Mapping[str, Any]], ...] = (
    ("philly_t1", "philly", {}),
    ("philly_t2", "philly", {"start": 44000}),
    ("philly_t3", "philly", {"start": 30000, "busiest": False}),
    ("alibaba", "alibaba", {}),
    ("sia_helios", "sia_helios", {}),
    ("sia_philly", "sia_philly", {}),
    ("sia_newtrace", "sia_newtrace", {}),
    ("pollux_philly", "pollux_philly", {}),
)
#: The 16 rows, in results.md's order within each cluster.
ROWS: tuple[Row, ...] = tuple(
    Row(name, wl, cluster, kw) for cluster in ("sia_64", "pai_mixed") for name, wl, kw in WORKLOADS
)


def run_one(args: tuple[Row, str, tuple[int, ...]]) -> tuple[str, str, list[float], list[float]]:
    """Run scheduler ``args[1]`` on row ``args[0]`` over the seeds ``args[2]``.

    Returns:
        (row key, scheduler, avg JCT per seed in h, makespan per seed in h); empty lists when
        the row's data is missing (a :class:`TraceError` or a missing file).
    """
    row, sched, seeds = args
    try:
        wl = resolve_workload(row.workload, row.overrides)
        assert callable(wl)
        outs = evaluate(
            {sched: scheduler_factory(sched)},
            cluster=resolve_cluster(row.cluster),
            workload_factory=wl,
            throughput=default_throughput(),
            seeds=list(seeds),
            sim_config=SimConfig(),
        )
    except (TraceError, FileNotFoundError) as err:
        print(f"{row.key}: {sched} not run: {err}", file=sys.stderr)
        return row.key, sched, [], []
    jct = [float(o.row["avg_jct_h"]) for o in outs]
    mk = [float(o.row["makespan_h"]) for o in outs]
    return row.key, sched, jct, mk


def verdict(means: Mapping[str, tuple[float, float]], candidate: str) -> str:
    """Whether ``candidate`` meets the bar on one row: avg JCT below every other scheduler's
    and makespan at most theirs (``means``: scheduler -> (avg JCT, makespan), NaN if missing).

    Returns:
        ``"yes"``, ``"no: ..."`` naming the metric and scheduler it loses to, or ``"n/a"`` when
        a figure is missing.
    """
    jct, mk = means[candidate]
    if not all(np.isfinite(v) for m in means.values() for v in m):
        return "n/a"
    lost = [
        f"avg JCT {100 * (jct / j - 1):+.1f} % vs {name}"
        for name, (j, _) in means.items()
        if name != candidate and not jct < j
    ] + [
        f"makespan {100 * (mk / m - 1):+.1f} % vs {name}"
        for name, (_, m) in means.items()
        if name != candidate and not mk <= m
    ]
    return "yes" if not lost else "no: " + "; ".join(lost)


def table(
    rows: Sequence[Row],
    results: Mapping[tuple[str, str], tuple[list[float], list[float]]],
    schedulers: Sequence[str],
) -> tuple[str, int, int]:
    """The Markdown table, the rows meeting the bar and the rows with every figure."""
    out: list[dict[str, Any]] = []
    met = full = 0
    for row in rows:
        means: dict[str, tuple[float, float]] = {}
        for s in schedulers:
            jct, mk = results.get((row.key, s), ([], []))
            means[s] = (float(np.mean(jct)), float(np.mean(mk))) if jct else (np.nan, np.nan)
        v = verdict(means, schedulers[0])
        full += v != "n/a"
        met += v == "yes"
        line: dict[str, Any] = {"row": row.name, "cluster": row.cluster}
        for s in schedulers:
            j, m = means[s]
            line[s] = "missing" if not np.isfinite(j) else f"{j:.3f} / {m:.2f}"
        line["bar met?"] = v
        out.append(line)
    cols = ["row", "cluster", *schedulers, "bar met?"]
    return markdown_table(out, cols), met, full


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--schedulers",
        nargs="+",
        default=["maifs", "sia", "gavel"],
        help="scheduler presets; the first is the candidate the bar judges",
    )
    keys = [r.key for r in ROWS]
    ap.add_argument("--rows", nargs="+", choices=keys, default=None, help="default: all 16")
    ap.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    ap.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    ap.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = ap.parse_args(argv)
    if len(args.schedulers) < 2:
        ap.error("--schedulers: the candidate and at least one scheduler to beat")
    if len(set(args.schedulers)) != len(args.schedulers):
        ap.error("--schedulers: each scheduler once")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rows = [r for r in ROWS if args.rows is None or r.key in args.rows]
    for s in args.schedulers:
        scheduler_factory(s)  # an unknown preset fails here, before any run
    tasks = [(r, s, tuple(args.seeds)) for r in rows for s in args.schedulers]
    bar = tqdm(total=len(tasks), desc="rows x schedulers", unit="run")
    results: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    if args.jobs > 1:
        with Pool(args.jobs) as pool:
            for key, s, jct, mk in pool.imap_unordered(run_one, tasks):
                results[(key, s)] = (jct, mk)
                bar.update()
    else:
        for task in tasks:
            key, s, jct, mk = run_one(task)
            results[(key, s)] = (jct, mk)
            bar.update()
    bar.close()
    md, met, full = table(rows, results, args.schedulers)
    seeds = ", ".join(str(s) for s in args.seeds)
    text = (
        f"Mean avg JCT / makespan (h) over seeds {seeds}; the bar: {args.schedulers[0]}'s avg "
        f"JCT below every other scheduler's and its makespan no worse.\n\n{md}\n\n"
        f"**{met} of {len(rows)} rows meet the bar** ({full} with every figure).\n"
    )
    print(text)
    if args.out is not None:
        atomic_write_text(args.out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
