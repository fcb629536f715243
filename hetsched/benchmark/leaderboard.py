"""The leaderboard: per-scenario tables and aggregates with bootstrap confidence intervals.

Per scenario, scheduler and information track (means over seeds): avg and p99 JCT, makespan,
queueing, utilisation, idle GPU-hours while a waiting job fits (work conservation), and two
ratios of avg JCT, computed per seed and then averaged: to the reference scheduler (Sia) on the
same seed's workload, and to the lower bound (each job alone at its best configuration;
:func:`hetsched.sim.metrics.best_solo_time`).

Across scenarios, each scheduler and track gets the interquartile mean (IQM: the mean of the
middle 50 %) of its per-run ratios to the reference and to the lower bound, with a stratified
bootstrap confidence interval (runs resampled with replacement within each scenario; across
scenarios when each has one run), as rliable (Agarwal et al., NeurIPS'21) recommends for few runs over many tasks; plus the number of
scenarios where its mean ratio to the reference is below 1.

Outputs (:func:`write_leaderboard`): ``leaderboard.md``, ``leaderboard.csv`` (per scenario),
``aggregate.csv``, ``cells.csv`` (every cell) and ``plots/ratio_bars.png``,
``plots/performance_profile.png``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.evaluation import atomic_write_text, csv_text, markdown_table

#: Per-scenario columns (means over seeds).
SCENARIO_COLUMNS: tuple[str, ...] = (
    "scenario",
    "scheduler",
    "track",
    "seeds",
    "avg_jct_h",
    "p99_jct_h",
    "makespan_h",
    "avg_queue_h",
    "utilization",
    "idle_fit_gpu_h",
    "jct_vs_ref",
    "jct_vs_lb",
    "unfinished_jobs",
)
#: Aggregate columns.
AGGREGATE_COLUMNS: tuple[str, ...] = (
    "scheduler",
    "track",
    "runs",
    "iqm_vs_ref",
    "ci_low_vs_ref",
    "ci_high_vs_ref",
    "iqm_vs_lb",
    "ci_low_vs_lb",
    "ci_high_vs_lb",
    "wins_vs_ref",
    "scenarios",
    "cpu_s",
)


def iqm(x: NDArray[np.float64]) -> float:
    """Interquartile mean: the mean of the middle 50 % of the finite values (NaN if none).

    Values are sorted and a quarter is cut from each end (fractional cuts weighted), as
    ``scipy.stats.trim_mean(x, 0.25)`` does for sizes divisible by 4.
    """
    v = np.sort(np.asarray(x, dtype=np.float64)[np.isfinite(x)])
    n = v.size
    if n == 0:
        return float("nan")
    lo, hi = 0.25 * n, 0.75 * n
    idx = np.arange(n)
    w = np.clip(np.minimum(idx + 1, hi) - np.maximum(idx, lo), 0.0, 1.0)
    return float(np.sum(w * v) / np.sum(w))


def stratified_bootstrap_ci(
    groups: Sequence[NDArray[np.float64]],
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    rng: np.random.Generator | None = None,
) -> tuple[float, float, float]:
    """IQM of all values and its percentile bootstrap interval, resampling within each group.

    With one run per scenario, strata would give a zero-width interval; the runs are then
    resampled across scenarios instead.

    Args:
        groups: One array of run values per scenario (the strata).
        reps: Bootstrap replicates.
        confidence: Interval level.
        rng: Generator of the resampling (default: seeded with 0, so reruns agree).

    Returns:
        (IQM, lower bound, upper bound); NaNs when there is no finite value.
    """
    gs = [np.asarray(g, dtype=np.float64)[np.isfinite(g)] for g in groups]
    gs = [g for g in gs if g.size]
    if not gs:
        return (float("nan"),) * 3
    if all(g.size == 1 for g in gs):  # one run per scenario: resample the scenarios instead
        gs = [np.concatenate(gs)]
    point = iqm(np.concatenate(gs))
    rng = rng if rng is not None else np.random.default_rng(0)
    stats = np.empty(reps)
    for b in range(reps):
        stats[b] = iqm(np.concatenate([g[rng.integers(0, g.size, g.size)] for g in gs]))
    a = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(stats, [a, 1.0 - a])
    return point, float(lo), float(hi)


def _ratios(rows: Sequence[Mapping[str, Any]], reference: str) -> list[dict[str, Any]]:
    """Each row with ``jct_vs_ref`` (to the reference on the same scenario and seed, same track
    if it ran it, else its exact track) and ``jct_vs_lb``."""
    ref: dict[tuple[str, int, str], float] = {}
    for r in rows:
        if r["scheduler"] == reference:
            ref[(r["scenario"], int(r["seed"]), r["track"])] = float(r["avg_jct_h"])
    out = []
    for r in rows:
        key = (r["scenario"], int(r["seed"]))
        base = ref.get((*key, r["track"]), ref.get((*key, "exact"), math.nan))
        jct = float(r["avg_jct_h"])
        lb = float(r["lb_avg_jct_h"])
        out.append(
            {
                **r,
                "jct_vs_ref": jct / base if base > 0 else math.nan,
                "jct_vs_lb": jct / lb if lb > 0 else math.nan,
            }
        )
    return out


def summarize_cells(
    rows: Sequence[Mapping[str, Any]],
    *,
    reference: str = "sia",
    reps: int = 2000,
    confidence: float = 0.95,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Per-scenario rows, aggregate rows and the cells with their ratios.

    Args:
        rows: Cell rows (:func:`hetsched.benchmark.runner.run_cell`).
        reference: Scheduler the ratios are taken to.
        reps: Bootstrap replicates of the aggregate intervals.
        confidence: Their level.
    """
    cells = _ratios(rows, reference)
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in cells:
        groups[(r["scenario"], r["scheduler"], r["track"])].append(r)
    per: list[dict[str, Any]] = []
    for (scen_name, sched, track), rs in groups.items():
        row: dict[str, Any] = {"scenario": scen_name, "scheduler": sched, "track": track}
        row["seeds"] = len(rs)
        for c in SCENARIO_COLUMNS[4:]:
            vals = np.array([float(r[c]) for r in rs])
            row[c] = float(np.nanmean(vals)) if np.isfinite(vals).any() else math.nan
        per.append(row)
    agg: list[dict[str, Any]] = []
    by_sched: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in cells:
        by_sched[(r["scheduler"], r["track"])].append(r)
    for (sched, track), rs in by_sched.items():
        scen = sorted({r["scenario"] for r in rs})
        row = {"scheduler": sched, "track": track, "runs": len(rs), "scenarios": len(scen)}
        for what in ("ref", "lb"):
            strata = [
                np.array([float(r[f"jct_vs_{what}"]) for r in rs if r["scenario"] == s])
                for s in scen
            ]
            point, lo, hi = stratified_bootstrap_ci(strata, reps=reps, confidence=confidence)
            row.update({f"iqm_vs_{what}": point, f"ci_low_vs_{what}": lo, f"ci_high_vs_{what}": hi})
        means = [p["jct_vs_ref"] for p in per if p["scheduler"] == sched and p["track"] == track]
        row["wins_vs_ref"] = int(sum(1 for m in means if m < 1.0))
        row["cpu_s"] = float(sum(float(r.get("cpu_s", math.nan)) for r in rs))
        agg.append(row)
    agg.sort(key=lambda r: (math.isnan(r["iqm_vs_ref"]), r["iqm_vs_ref"], r["scheduler"]))
    per.sort(key=lambda r: (r["scenario"], r["jct_vs_ref"], r["scheduler"]))
    return per, agg, cells


def _plots(per: Sequence[Mapping[str, Any]], cells: Sequence[Mapping[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    labels = sorted({f"{r['scheduler']} ({r['track']})" for r in per})
    scen = sorted({r["scenario"] for r in per})
    val = {(r["scenario"], f"{r['scheduler']} ({r['track']})"): r["jct_vs_ref"] for r in per}
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(scen) + 2), 4.5))
    width = 0.8 / max(len(labels), 1)
    x = np.arange(len(scen))
    for i, lab in enumerate(labels):
        ax.bar(x + i * width, [val.get((s, lab), np.nan) for s in scen], width, label=lab)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(x + 0.4 - width / 2, scen, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("avg JCT / reference's (per seed, mean)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out / "ratio_bars.png", dpi=120)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    taus = np.exp(np.linspace(np.log(0.5), np.log(4.0), 200))
    for lab in labels:
        v = np.array([c["jct_vs_ref"] for c in cells if f"{c['scheduler']} ({c['track']})" == lab])
        v = v[np.isfinite(v)]
        if v.size:
            ax.plot(taus, [(v <= t).mean() for t in taus], label=lab)
    ax.set_xscale("log")
    ax.set_xlabel("tau (avg JCT / reference's)")
    ax.set_ylabel("fraction of runs with ratio <= tau")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "performance_profile.png", dpi=120)
    plt.close(fig)


def render_markdown(
    per: Sequence[Mapping[str, Any]],
    agg: Sequence[Mapping[str, Any]],
    *,
    reference: str,
    header: str = "",
    confidence: float = 0.95,
) -> str:
    """The leaderboard as Markdown: the aggregate table, then one table per scenario."""
    pct = f"{100 * confidence:g} %"
    lines = ["# Leaderboard", ""]
    if header:
        lines += [header, ""]
    lines += [
        f"Aggregate over scenarios: IQM of per-run avg-JCT ratios to {reference} (`vs_ref`) and "
        f"to the lower bound (`vs_lb`), {pct} stratified bootstrap intervals; `wins_vs_ref`: "
        f"scenarios with a mean ratio below 1; `cpu_s`: CPU seconds of all its runs.",
        "",
        markdown_table(agg, AGGREGATE_COLUMNS),
        "",
        "## Per scenario (means over seeds)",
        "",
    ]
    for scen in sorted({r["scenario"] for r in per}):
        rows = [r for r in per if r["scenario"] == scen]
        lines += [f"### {scen}", "", markdown_table(rows, SCENARIO_COLUMNS[1:]), ""]
    return "\n".join(lines)


def write_leaderboard(
    rows: Sequence[Mapping[str, Any]],
    out_dir: Path,
    *,
    reference: str = "sia",
    header: str = "",
    plots: bool = True,
    reps: int = 2000,
    confidence: float = 0.95,
) -> str:
    """Write the leaderboard files (see the module docstring) and return its Markdown."""
    out_dir = Path(out_dir)
    failed = [r for r in rows if "error" in r]
    rows = [r for r in rows if "error" not in r]
    if failed:
        lines = [
            f"- {r['scenario']} {r['scheduler']} {r['track']} seed {r['seed']}: {r['error']}"
            for r in failed
        ]
        header = "\n".join(
            [header, "", f"**{len(failed)} cells failed** (not in the tables):", *lines]
        )
    per, agg, cells = summarize_cells(rows, reference=reference, reps=reps, confidence=confidence)
    cell_cols = list(cells[0]) if cells else []
    atomic_write_text(out_dir / "cells.csv", csv_text(cells, cell_cols))
    atomic_write_text(out_dir / "leaderboard.csv", csv_text(per, SCENARIO_COLUMNS))
    atomic_write_text(out_dir / "aggregate.csv", csv_text(agg, AGGREGATE_COLUMNS))
    if plots and per:
        _plots(per, cells, out_dir / "plots")
    md = render_markdown(per, agg, reference=reference, header=header, confidence=confidence)
    atomic_write_text(out_dir / "leaderboard.md", md + "\n")
    return md
