"""Summary tables: mean and 95 % CI over seeds, best per column, JCT ratios (hand-computed)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from hetsched.reporting import (
    best_mask,
    breakdown_markdown,
    job_breakdown,
    mean_ci,
    summarize,
    summary_markdown,
)

T2 = 4.302652729911275  # Student t, 2 degrees of freedom, 97.5 % quantile


def _rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Two schedulers x three seeds, one workload and cluster, with lower bounds per seed."""
    jct = {"a": [1.0, 2.0, 3.0], "b": [2.0, 3.0, 4.0]}
    util = {"a": [0.5, 0.5, 0.5], "b": [0.6, 0.6, 0.9]}
    lb = [0.5, 1.0, 1.0]
    rows, ext = [], []
    for s in ("a", "b"):
        for seed in range(3):
            key = {"scheduler": s, "workload": "w", "cluster": "c", "seed": seed}
            rows.append({**key, "avg_jct_h": jct[s][seed], "utilization": util[s][seed]})
            ext.append({**key, "lb_avg_jct_h": lb[seed]})
    return rows, ext


def test_mean_ci_hand_computed() -> None:
    m, h = mean_ci([1.0, 2.0, 3.0])
    assert m == pytest.approx(2.0)
    assert h == pytest.approx(T2 * 1.0 / math.sqrt(3))  # sample sd = 1
    m1, h1 = mean_ci([5.0])
    assert m1 == 5.0 and math.isnan(h1)
    assert all(math.isnan(v) for v in mean_ci([]))
    m_nan, h_nan = mean_ci([1.0, float("nan")])
    assert math.isnan(m_nan) and math.isnan(h_nan)  # an undefined seed is never dropped
    _, h90 = mean_ci([1.0, 2.0, 3.0], confidence=0.9)
    assert h90 < h
    with pytest.raises(ValueError, match="confidence"):
        mean_ci([1.0, 2.0], confidence=95)


def test_summarize_known_results() -> None:
    rows, ext = _rows()
    summ = summarize(rows, ext, metrics=("avg_jct_h", "utilization"))
    assert [r["scheduler"] for r in summ] == ["a", "b"]
    a, b = summ
    assert a["n_seeds"] == 3 and a["seeds"] == "0;1;2"
    assert a["avg_jct_h_mean"] == pytest.approx(2.0)
    assert a["avg_jct_h_ci95"] == pytest.approx(T2 / math.sqrt(3))
    assert b["avg_jct_h_mean"] == pytest.approx(3.0)
    assert b["utilization_mean"] == pytest.approx(0.7)
    assert b["utilization_ci95"] == pytest.approx(T2 * math.sqrt(0.03) / math.sqrt(3))
    assert a["utilization_ci95"] == pytest.approx(0.0)
    # Ratio to the best mean avg JCT, and mean per-seed ratio to the lower bound.
    assert a["jct_vs_best"] == pytest.approx(1.0)
    assert b["jct_vs_best"] == pytest.approx(1.5)
    assert a["jct_vs_lb"] == pytest.approx((2 + 2 + 3) / 3)
    assert b["jct_vs_lb"] == pytest.approx((4 + 3 + 4) / 3)


def test_summarize_accepts_csv_strings_and_missing_extended() -> None:
    rows, _ = _rows()
    as_text = [{k: str(v) for k, v in r.items()} for r in rows]
    summ = summarize(as_text, None, metrics=("avg_jct_h",))
    assert summ[1]["avg_jct_h_mean"] == pytest.approx(3.0)
    assert math.isnan(summ[0]["jct_vs_lb"])


def test_markdown_bolds_best_per_column() -> None:
    rows, ext = _rows()
    summ = summarize(rows, ext, metrics=("avg_jct_h", "utilization"))
    md = summary_markdown(summ, metrics=("avg_jct_h", "utilization"))
    lines = md.splitlines()
    assert lines[0] == "## w on c: mean ± 95 % CI over 3 seeds"
    header = next(ln for ln in lines if ln.startswith("| scheduler"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "scheduler",
        "avg_jct_h",
        "jct/best",
        "jct/LB",
        "utilization",
    ]
    row_a = next(ln for ln in lines if ln.startswith("| a "))
    row_b = next(ln for ln in lines if ln.startswith("| b "))
    cells_a = [c.strip() for c in row_a.strip("|").split("|")]
    cells_b = [c.strip() for c in row_b.strip("|").split("|")]
    # a has the lower JCT (bold), b the higher utilisation (bold: higher is better).
    assert cells_a[1] == "**2.000** ± 2.484"
    assert cells_b[1] == "3.000 ± 2.484"
    assert cells_a[2] == "**1.000**" and cells_b[2] == "1.500"
    assert cells_a[3] == "**2.333**" and cells_b[3] == "3.667"
    assert cells_a[4] == "0.500 ± 0.000"
    assert cells_b[4] == "**0.700** ± 0.430"


def test_markdown_one_section_per_group_and_single_seed() -> None:
    rows = [
        {"scheduler": s, "workload": w, "cluster": "c", "seed": 0, "avg_jct_h": v}
        for w, s, v in (("w1", "a", 1.0), ("w1", "b", 2.0), ("w2", "a", 5.0), ("w2", "b", 4.0))
    ]
    md = summary_markdown(summarize(rows, metrics=("avg_jct_h",)), metrics=("avg_jct_h",))
    assert "## w1 on c: mean ± 95 % CI over 1 seed\n" in md
    assert "## w2 on c" in md
    table = md.split("## w2 on c")[1].split("| scheduler")[1].split("Cells:")[0]
    cells = {
        ln.strip("|").split("|")[0].strip(): [c.strip() for c in ln.strip("|").split("|")[1:]]
        for ln in table.strip().splitlines()[2:]
    }
    assert cells["b"][0] == "**4.000**" and cells["a"][0] == "5.000"
    assert cells["a"][1] == "1.250"  # jct/best
    assert "±" not in table  # one seed: no interval


def test_best_mask_directions_ties_and_nan() -> None:
    assert best_mask([2.0, 1.0, 1.0], "avg_jct_h") == [False, True, True]
    assert best_mask([0.2, 0.9, float("nan")], "utilization") == [False, True, False]
    assert best_mask([1.0, float("nan")], "avg_jct_h") == [False, False]  # nothing to compare


def _job(s: str, seed: int, gpus: int, arrival: float, start: float, jct: float) -> dict[str, Any]:
    return {
        "scheduler": s, "workload": "w", "cluster": "c", "seed": seed, "gpus": gpus,
        "model": "m", "arrival_s": arrival, "start_s": start, "jct_s": jct, "restarts": 1,
    }  # fmt: skip


def test_job_breakdown_hand_computed() -> None:
    h = 3600.0
    jobs = [
        # Scheduler a, seed 0: a 1-GPU job (queue 1 h, JCT 2 h) and an 8-GPU job (0 h, 4 h).
        _job("a", 0, 1, 0.0, h, 2 * h),
        _job("a", 0, 8, 0.0, 0.0, 4 * h),
        # Seed 1: the 1-GPU job waits 3 h and takes 6 h, the 8-GPU job takes 2 h.
        _job("a", 1, 1, 0.0, 3 * h, 6 * h),
        _job("a", 1, 8, 0.0, 0.0, 2 * h),
        # Scheduler b, seed 0 only: both jobs start at once, 1 h each.
        _job("b", 0, 8, 0.0, 0.0, h),
        _job("b", 0, 1, 0.0, 0.0, h),
    ]
    out = job_breakdown(jobs, "gpus")
    assert [(r["gpus"], r["scheduler"]) for r in out] == [
        ("1", "a"),
        ("1", "b"),
        ("8", "a"),
        ("8", "b"),
    ]
    a1, b1, a8, _ = out
    assert (
        a1["jobs"] == 1
        and a1["queue_h"] == pytest.approx(2.0)
        and a1["jct_h"] == pytest.approx(4.0)
    )
    assert a1["restarts"] == 1
    # Shares: seed 0 2 h / 2 jobs = 1, seed 1 6 h / 2 = 3, mean 2 (1-GPU); 8-GPU (2 + 1) / 2.
    assert a1["jct_share_h"] == pytest.approx(2.0) and a8["jct_share_h"] == pytest.approx(1.5)
    # The shares of a scheduler add up to its avg JCT over seeds: (3 + 4) / 2.
    assert a1["jct_share_h"] + a8["jct_share_h"] == pytest.approx(3.5)
    assert b1["jct_share_h"] == pytest.approx(0.5) and b1["queue_h"] == 0.0
    # JCT from finish - arrival when jct_s is absent; an unfinished job is NaN, not dropped.
    no_jct = [
        {**{k: v for k, v in j.items() if k != "jct_s"}, "finish_s": j["jct_s"]} for j in jobs
    ]
    assert job_breakdown(no_jct, "gpus")[0]["jct_h"] == pytest.approx(4.0)
    jobs[0]["jct_s"] = float("nan")
    assert math.isnan(job_breakdown(jobs, "gpus")[0]["jct_h"])
    md = breakdown_markdown(out, "gpus")
    assert "### w on c: jobs by gpus" in md and "jct_share_h" in md
    lines = [ln for ln in md.splitlines() if ln.startswith("| ")]
    assert lines[1].startswith("| 1 ") and lines[2].startswith("|   ")  # class named once


def test_job_breakdown_names_a_missing_column() -> None:
    job = _job("a", 0, 1, 0.0, 0.0, 1.0)
    with pytest.raises(ValueError, match=r"no column\(s\) \['vc'\]"):
        job_breakdown([job], "vc")
    del job["start_s"]
    with pytest.raises(ValueError, match="start_s"):
        job_breakdown([job], "gpus")


def test_breakdown_markdown_writes_job_counts_as_counts() -> None:
    h = 3600.0
    jobs = [
        # Scheduler a: one 1-GPU job on seed 0, two on seed 1 (1.5 per seed); scheduler b: one.
        _job("a", 0, 1, 0.0, 0.0, h),
        _job("a", 1, 1, 0.0, 0.0, h),
        _job("a", 1, 1, 0.0, 0.0, h),
        _job("b", 0, 1, 0.0, 0.0, h),
    ]
    out = job_breakdown(jobs, "gpus")
    assert [r["jobs"] for r in out] == [pytest.approx(1.5), 1]
    rows = [
        [c.strip() for c in ln.strip("|").split("|")]
        for ln in breakdown_markdown(out, "gpus").splitlines()
        if ln.startswith("| ")
    ][1:]
    # A mean over seeds as fmt_number writes it; a whole count without decimals.
    assert [r[2] for r in rows] == ["1.500", "1"]
