"""Score a benchmark run against MAIFS's bar: one table per scheduler and information track.

Reads the ``cells.csv`` a run of ``scripts/benchmark.py`` wrote and, for every scheduler and
track, checks the four parts of the bar the learned scheduler is held to (docs/maifs.md,
Results):

* ``iqm_vs_best``: interquartile mean over runs of avg JCT over the lower of Sia's and Gavel's
  on the same scenario and seed (at most 1.0);
* ``below_fifo_las``: scenarios where its mean avg JCT is below both FIFO's and LAS's;
* ``makespan_ok``: scenarios where its mean makespan is at most 1.05x the lower of Sia's and
  Gavel's mean makespans;
* ``idle_ok``: scenarios where its idle GPU-hours while a fitting job waits (mean over seeds)
  are at most twice Sia's; ``idle_gpu_h`` is the total over all runs;
* ``makespan_rigid_itp`` (reported, not a part of the bar): the mean over the rigid ITP windows
  (scenarios named ``itp_*`` without ``elastic``) of the mean makespan over the lower of Sia's
  and Gavel's mean makespans, the figure the notebook's selection rules bound (``-`` where the
  run has no such window).

Sia, Gavel, FIFO and LAS run the exact track only (they use no remaining work); every track of
another scheduler is compared with those exact-track runs. ``--failing`` lists instead, one
row per scenario, where a scheduler misses a part and by how much. Usage::

    python scripts/bar_check.py outputs/benchmark/validation [--scheduler maifs maifs_teacher]
    python scripts/bar_check.py outputs/benchmark/test --scheduler maifs --failing

Exit code 2 with one line when the directory has no ``cells.csv``, the file lacks a column or
holds a value that is not a number, or the run lacks a reference scheduler.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from hetsched.benchmark.leaderboard import iqm

REFERENCES = ("sia", "gavel", "fifo", "las")
COLUMNS = ("scenario", "scheduler", "track", "seed", "avg_jct_h", "makespan_h", "idle_fit_gpu_h")
NUMBERS = ("avg_jct_h", "makespan_h", "idle_fit_gpu_h")
MAKESPAN_SLACK = 1.05
IDLE_FACTOR = 2.0


def _load(path: Path) -> list[dict[str, str]]:
    cells = path / "cells.csv"
    if not cells.is_file():
        raise SystemExit(
            f"bar_check: {cells} not found; run scripts/benchmark.py with out_dir={path}"
        )
    with cells.open(newline="") as f:
        rows = list(csv.DictReader(f))
    cols = rows[0].keys() if rows else ()
    lack = [c for c in COLUMNS if c not in cols]
    if lack:
        raise SystemExit(f"bar_check: {cells} has no column {', '.join(lack)}; rerun the benchmark")
    for i, r in enumerate(rows, start=2):
        for c in NUMBERS:
            try:
                float(r[c])
            except ValueError:
                raise SystemExit(
                    f"bar_check: {cells}: line {i}: {c}={r[c]!r} is not a number"
                ) from None
    return rows


def _per_scenario(
    rows: list[dict[str, str]], schedulers: list[str] | None
) -> dict[tuple[str, str], tuple[list[float], dict[str, dict[str, float]], float]]:
    """Ratios and per-scenario means for every scored (scheduler, track).

    Returns:
        ``{(scheduler, track): (ratios, means, idle_total)}``: ``ratios`` holds each run's avg
        JCT over the lower of Sia's and Gavel's on the same scenario and seed;
        ``means[scenario]`` the mean over seeds of ``jct``, ``makespan``, ``idle`` and of each
        reference's ``<ref>_jct``, ``<ref>_makespan`` and ``sia_idle``; ``idle_total`` the
        idle GPU-hours summed over all runs.
    """
    ref: dict[tuple[str, str, str], dict[str, float]] = {}
    cells: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        if r["scheduler"] in REFERENCES and r["track"] == "exact":
            ref[(r["scheduler"], r["scenario"], r["seed"])] = {k: float(r[k]) for k in NUMBERS}
        cells[(r["scheduler"], r["track"])].append(r)
    missing = [s for s in REFERENCES if not any(k[0] == s for k in ref)]
    if missing:
        raise SystemExit(
            f"bar_check: the run has no exact-track cells of {', '.join(missing)}; "
            f"add them to scheduler=[...]"
        )
    out: dict[tuple[str, str], tuple[list[float], dict[str, dict[str, float]], float]] = {}
    for (sched, track), rs in sorted(cells.items()):
        if sched in REFERENCES or (schedulers and sched not in schedulers):
            continue
        ratios: list[float] = []
        per_scn: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in rs:
            key = (r["scenario"], r["seed"])
            if any((s, *key) not in ref for s in REFERENCES):
                raise SystemExit(f"bar_check: no reference cells of {key} for {sched}")
            sia, gavel = ref[("sia", *key)], ref[("gavel", *key)]
            jct = float(r["avg_jct_h"])
            ratios.append(jct / min(sia["avg_jct_h"], gavel["avg_jct_h"]))
            p = per_scn[r["scenario"]]
            p["jct"].append(jct)
            p["makespan"].append(float(r["makespan_h"]))
            p["idle"].append(float(r["idle_fit_gpu_h"]))
            for s in REFERENCES:
                p[f"{s}_jct"].append(ref[(s, *key)]["avg_jct_h"])
                p[f"{s}_makespan"].append(ref[(s, *key)]["makespan_h"])
            p["sia_idle"].append(sia["idle_fit_gpu_h"])
        means = {n: {k: float(np.mean(v)) for k, v in p.items()} for n, p in per_scn.items()}
        out[(sched, track)] = (ratios, means, sum(float(r["idle_fit_gpu_h"]) for r in rs))
    return out


def _makespan_ratio(v: dict[str, float]) -> float:
    """A scenario's mean makespan over the lower of Sia's and Gavel's mean makespans."""
    return v["makespan"] / min(v["sia_makespan"], v["gavel_makespan"])


def _checks(v: dict[str, float]) -> tuple[bool, bool, bool]:
    """(below FIFO and LAS, makespan within the slack, idle within the factor) of one scenario."""
    return (
        v["jct"] < min(v["fifo_jct"], v["las_jct"]),
        _makespan_ratio(v) <= MAKESPAN_SLACK,
        v["idle"] <= IDLE_FACTOR * v["sia_idle"] + 1e-9,
    )


def bar_rows(rows: list[dict[str, str]], schedulers: list[str] | None) -> list[dict[str, object]]:
    """The bar per (scheduler, track) from benchmark cells (see the module docstring).

    Args:
        rows: Rows of ``cells.csv``.
        schedulers: Schedulers to score (``None``: every scheduler that is not a reference).

    Returns:
        One dict per (scheduler, track): ``scheduler``, ``track``, ``runs``, ``iqm_vs_best``,
        ``below_fifo_las``, ``makespan_ok``, ``idle_ok`` (``"k/n"`` strings), ``idle_gpu_h`` and
        ``makespan_rigid_itp``.
    """
    out: list[dict[str, object]] = []
    for (sched, track), (ratios, m, idle_total) in _per_scenario(rows, schedulers).items():
        below, mk, idle = (sum(c) for c in zip(*(_checks(v) for v in m.values()), strict=True))
        n = len(m)
        rigid = [
            _makespan_ratio(v)
            for name, v in m.items()
            if name.startswith("itp_") and "elastic" not in name
        ]
        out.append(
            {
                "scheduler": sched,
                "track": track,
                "runs": len(ratios),
                "iqm_vs_best": round(iqm(np.asarray(ratios)), 3),
                "below_fifo_las": f"{below}/{n}",
                "makespan_ok": f"{mk}/{n}",
                "idle_ok": f"{idle}/{n}",
                "idle_gpu_h": round(idle_total, 1),
                "makespan_rigid_itp": round(float(np.mean(rigid)), 3) if rigid else "-",
            }
        )
    return out


def failing_rows(
    rows: list[dict[str, str]], schedulers: list[str] | None
) -> list[dict[str, object]]:
    """The scenarios where a scored (scheduler, track) misses a part of the bar.

    Returns:
        One dict per failing scenario: ``scheduler``, ``track``, ``scenario``, ``jct_vs_best``
        (mean avg JCT over the lower of Sia's and Gavel's means), ``jct_vs_fifo_las`` (over the
        lower of FIFO's and LAS's; must be below 1), ``makespan_vs_best`` (must be at most
        1.05), ``idle_gpu_h`` and ``sia_idle_gpu_h`` (means over seeds), and ``fails`` naming
        the missed parts.
    """
    out: list[dict[str, object]] = []
    for (sched, track), (_, m, _) in _per_scenario(rows, schedulers).items():
        for scn, v in sorted(m.items()):
            ok = _checks(v)
            if all(ok):
                continue
            names = ("below_fifo_las", "makespan", "idle")
            out.append(
                {
                    "scheduler": sched,
                    "track": track,
                    "scenario": scn,
                    "jct_vs_best": round(v["jct"] / min(v["sia_jct"], v["gavel_jct"]), 3),
                    "jct_vs_fifo_las": round(v["jct"] / min(v["fifo_jct"], v["las_jct"]), 3),
                    "makespan_vs_best": round(_makespan_ratio(v), 3),
                    "idle_gpu_h": round(v["idle"], 2),
                    "sia_idle_gpu_h": round(v["sia_idle"], 2),
                    "fails": " ".join(n for n, o in zip(names, ok, strict=True) if not o),
                }
            )
    return out


def main(argv: list[str] | None = None) -> int:
    """CLI entry point (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path, help="a benchmark out_dir (holds cells.csv)")
    p.add_argument("--scheduler", nargs="*", default=None, help="schedulers to score")
    p.add_argument(
        "--failing", action="store_true", help="list the scenarios that miss a part of the bar"
    )
    a = p.parse_args(argv)
    try:
        rows = _load(a.run_dir)
        absent = sorted(set(a.scheduler or ()) - {r["scheduler"] for r in rows})
        if absent:
            raise SystemExit(
                f"bar_check: {a.run_dir / 'cells.csv'} has no cells of scheduler "
                f"{', '.join(absent)}; pick from those the run scored"
            )
        table = (failing_rows if a.failing else bar_rows)(rows, a.scheduler)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    if not table:
        print("every scored scenario meets the bar" if a.failing else "no scheduler to score")
        return 0
    cols = list(table[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for row in table:
        print("| " + " | ".join(str(row[c]) for c in cols) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
