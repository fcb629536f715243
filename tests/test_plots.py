"""Plots and TensorBoard output: files are produced, non-empty and not blank."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import make_cluster, make_tm, make_workload

from hetsched.baselines.heuristics import FIFO, LAS
from hetsched.evaluation import evaluate, write_outputs
from hetsched.plots import (
    fig_gpu_share,
    fig_timeline,
    figure_rgb,
    make_figures,
    save_figures,
    write_tensorboard,
)
from hetsched.reporting import summarize
from hetsched.sim import SimConfig


def _synthetic() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    rng = np.random.default_rng(0)
    rows, jobs, tl = [], [], []
    for s, scale in (("fifo", 1.0), ("las", 0.8)):
        for seed in range(3):
            key = {"scheduler": s, "workload": "w", "cluster": "c", "seed": seed}
            rows.append(
                {
                    **key,
                    "avg_jct_h": scale * (1 + 0.1 * seed),
                    "p99_jct_h": 3.0 * scale,
                    "utilization": 0.5 / scale,
                }
            )
            for j in range(20):
                jobs.append(
                    {
                        **key,
                        "model": f"m{j % 3}",
                        "jct_s": float(rng.uniform(600, 36000)) * scale,
                        "gpu_hours_v100": float(j % 2),
                        "gpu_hours_k80": 1.0,
                    }
                )
            for i in range(30):
                tl.append({**key, "t0": 60.0 * i, "busy_gpus": float(i % 8), "pending": 30 - i})
    return rows, jobs, tl


def _assert_png(path: Path) -> None:
    from matplotlib.image import imread

    assert path.is_file() and path.stat().st_size > 0, path
    img = imread(path)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
    assert float(img[..., :3].var()) > 0.0, f"{path} is blank"


def test_figures_written_and_not_blank(tmp_path: Path) -> None:
    rows, jobs, tl = _synthetic()
    summ = summarize(rows, metrics=("avg_jct_h", "p99_jct_h", "utilization"))
    figs = make_figures(summ, jobs, tl, num_gpus=8, title="w on c")
    assert set(figs) == {"metrics", "jct_cdf", "gpu_share", "timeline"}
    paths = save_figures(figs, tmp_path / "plots")
    assert sorted(p.name for p in paths) == [
        "gpu_share.png",
        "jct_cdf.png",
        "metrics.png",
        "timeline.png",
    ]
    for p in paths:
        _assert_png(p)
    assert not list((tmp_path / "plots").glob(".*tmp"))  # no temp files left behind
    # Without jobs or timeline only the bar chart is drawn.
    assert set(make_figures(summ)) == {"metrics"}


def test_gpu_share_is_one_stacked_bar_per_scheduler() -> None:
    _, jobs, _ = _synthetic()
    fig = fig_gpu_share(jobs)
    (ax,) = fig.axes
    heights = np.array([[b.get_height() for b in c] for c in ax.containers])  # (types, scheds)
    assert heights.shape == (2, 2)
    np.testing.assert_allclose(heights.sum(axis=0), 1.0)
    # Per scheduler and seed: 10 of 20 jobs had 1 v100-hour, all 20 had 1 k80-hour.
    np.testing.assert_allclose(heights[0], 10 / 30)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["fifo", "las"]
    assert figure_rgb(fig).shape[2] == 3


def test_timeline_is_the_mean_over_seeds() -> None:
    """Two seeds, constant 2 and 6 busy GPUs of 8: the line is 0.5 until the shorter run ends."""
    tl = [
        {"scheduler": "fifo", "seed": sd, "t0": 3600.0 * i, "busy_gpus": busy, "pending": 1}
        for sd, busy, n in ((0, 2.0, 3), (1, 6.0, 5))
        for i in range(n)
    ]
    fig = fig_timeline(tl, num_gpus=8)
    line = fig.axes[0].lines[0]
    x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
    np.testing.assert_allclose(y[x <= 2.0], 0.5)
    np.testing.assert_allclose(y[(x > 2.0) & (x <= 4.0)], 0.375)  # seed 0 is over: (0 + 0.75) / 2
    assert "mean over 2 seed(s)" in fig._suptitle.get_text()


def test_tensorboard_tags(tmp_path: Path) -> None:
    pytest.importorskip("torch.utils.tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    rows, jobs, tl = _synthetic()
    summ = summarize(rows, metrics=("avg_jct_h",))
    figs = make_figures(summ)
    assert write_tensorboard(
        tmp_path / "tb", rows, summary_md="| a |", timeline=tl, figures=figs, num_gpus=8
    )
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()
    assert "eval/fifo/avg_jct_h" in tags["scalars"]
    assert "cluster/las/utilization" in tags["scalars"]
    assert "cluster/las/queued" in tags["scalars"]
    assert "eval/figures/metrics" in tags["images"]
    ev = acc.Scalars("eval/las/avg_jct_h")
    assert [e.step for e in ev] == [0, 1, 2]
    assert ev[1].value == pytest.approx(0.88)
    util = acc.Scalars("cluster/fifo/utilization")
    assert len(util) == 30 and util[3].step == 180 and util[3].value == pytest.approx(3 / 8)


def test_write_outputs_end_to_end_with_plots(tmp_path: Path) -> None:
    tm = make_tm()
    cl = make_cluster(
        [
            {"gpu_type": "v100", "count": 1, "gpus": 4, "cpus": 32, "mem_gib": 256},
            {"gpu_type": "k80", "count": 1, "gpus": 4, "cpus": 32, "mem_gib": 256},
        ]
    )

    def factory(*, throughput: Any, cluster: Any, rng: np.random.Generator) -> Any:
        arrival = np.sort(rng.uniform(0, 600, 8)).tolist()
        work = rng.uniform(600, 3600, 8).tolist()
        return make_workload(arrival, work, [1, 2, 1, 4, 1, 2, 1, 1], model=[0, 1] * 4)

    outs = evaluate(
        {"fifo": FIFO, "las": LAS},
        cluster=cl,
        workload_factory=factory,
        throughput=tm,
        seeds=[0, 1],
        sim_config=SimConfig(round_s=60.0),
    )
    md = write_outputs(outs, tmp_path, plots=True, tensorboard=False)
    assert "mean ± 95 % CI over 2 seeds" in md
    for name in ("metrics", "jct_cdf", "gpu_share", "timeline"):
        _assert_png(tmp_path / "plots" / f"{name}.png")
    assert not (tmp_path / "tb").exists()
    # The completion marker is written last, after results.csv and every other artifact.
    newest = max(p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file())
    assert (tmp_path / "run.json").stat().st_mtime_ns == newest
    others = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "run.json"]
    assert (tmp_path / "results.csv").stat().st_mtime_ns == max(
        p.stat().st_mtime_ns for p in others
    )
