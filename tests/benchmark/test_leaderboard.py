"""Leaderboard statistics: IQM, stratified bootstrap intervals, ratios and outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import trim_mean

from hetsched.benchmark.leaderboard import (
    iqm,
    stratified_bootstrap_ci,
    summarize_cells,
    write_leaderboard,
)


@pytest.mark.parametrize("n", [4, 8, 12, 40])
def test_iqm_matches_scipy_trim_mean_for_sizes_divisible_by_4(n: int) -> None:
    x = np.random.default_rng(n).lognormal(size=n)
    assert iqm(x) == pytest.approx(trim_mean(x, 0.25))


def test_iqm_weights_fractional_ends_and_ignores_nan() -> None:
    assert iqm(np.array([1.0, 2.0, 3.0])) == pytest.approx(2.0)
    # n=5: the middle 2.5 values: 2 x 0.75, 3, 4 x 0.75 -> (1.5 + 3 + 3) / 2.5
    assert iqm(np.array([5.0, 1.0, 4.0, 2.0, 3.0, np.nan])) == pytest.approx(3.0)
    assert iqm(np.array([1.0, 1.0, 1.0, 100.0])) == pytest.approx(1.0)
    assert np.isnan(iqm(np.array([np.nan])))


def test_bootstrap_interval_brackets_the_point_and_shrinks_with_runs() -> None:
    rng = np.random.default_rng(0)
    few = [rng.normal(1.0, 0.2, 3) for _ in range(4)]
    many = [rng.normal(1.0, 0.2, 30) for _ in range(4)]
    p1, lo1, hi1 = stratified_bootstrap_ci(few, reps=500)
    p2, lo2, hi2 = stratified_bootstrap_ci(many, reps=500)
    assert lo1 <= p1 <= hi1 and lo2 <= p2 <= hi2
    assert hi2 - lo2 < hi1 - lo1
    assert stratified_bootstrap_ci([np.array([2.0, 2.0])], reps=50) == (2.0, 2.0, 2.0)
    _, lo, hi = stratified_bootstrap_ci([np.array([v]) for v in (0.8, 1.0, 1.3, 2.0)], reps=200)
    assert lo < hi  # one run per scenario: resampled across scenarios, not a zero-width interval


def _row(scen: str, sched: str, seed: int, jct: float, track: str = "exact") -> dict[str, Any]:
    return {
        "scenario": scen, "scheduler": sched, "track": track, "seed": seed,
        "avg_jct_h": jct, "p99_jct_h": 2 * jct, "makespan_h": 3 * jct, "avg_queue_h": 0.1,
        "utilization": 0.5, "idle_fit_gpu_h": 1.0, "lb_avg_jct_h": 0.5,
        "unfinished_jobs": 0.0, "cpu_s": 1.0,
    }  # fmt: skip


def test_ratios_pair_seeds_and_fall_back_to_the_exact_reference() -> None:
    rows = [
        _row("a", "sia", 0, 2.0), _row("a", "sia", 1, 4.0),
        _row("a", "x", 0, 1.0), _row("a", "x", 1, 4.0),
        _row("a", "x", 0, 3.0, "none"), _row("a", "x", 1, 8.0, "none"),
    ]  # fmt: skip
    per, agg, cells = summarize_cells(rows, reference="sia", reps=100)
    x = next(p for p in per if p["scheduler"] == "x" and p["track"] == "exact")
    assert x["jct_vs_ref"] == pytest.approx((0.5 + 1.0) / 2)
    assert x["jct_vs_lb"] == pytest.approx((2.0 + 8.0) / 2)
    xn = next(p for p in per if p["scheduler"] == "x" and p["track"] == "none")
    assert xn["jct_vs_ref"] == pytest.approx((1.5 + 2.0) / 2)
    ax = next(a for a in agg if a["scheduler"] == "x" and a["track"] == "exact")
    assert ax["runs"] == 2 and ax["wins_vs_ref"] == 1 and ax["cpu_s"] == 2.0
    assert agg[0]["iqm_vs_ref"] <= agg[-1]["iqm_vs_ref"]  # sorted best first


def test_write_leaderboard_files(tmp_path: Path) -> None:
    rows = [_row(s, n, k, j * (1 + k)) for s in ("a", "b") for n, j in (("sia", 2.0), ("x", 1.5))
            for k in (0, 1)]  # fmt: skip
    md = write_leaderboard(rows, tmp_path, reps=50)
    for f in ("leaderboard.md", "leaderboard.csv", "aggregate.csv", "cells.csv"):
        assert (tmp_path / f).is_file()
    for f in ("ratio_bars.png", "performance_profile.png"):
        assert (tmp_path / "plots" / f).stat().st_size > 1000
    assert "### a" in md and "### b" in md and "iqm_vs_ref" in md
