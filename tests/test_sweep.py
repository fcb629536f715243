"""Sweeps: skipping finished runs, merging results of many runs, a joblib multirun end to end."""

from __future__ import annotations

import csv
import os
import runpy
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hetsched.evaluation import atomic_write_text, csv_text, results_complete, write_marker
from hetsched.sim import RESULT_COLUMNS

ROOT = Path(__file__).resolve().parent.parent


def _row(sched: str, seed: int, jct: float, workload: str = "w") -> dict[str, Any]:
    r: dict[str, Any] = dict.fromkeys(RESULT_COLUMNS, 1.0)
    r.update(scheduler=sched, workload=workload, cluster="c", seed=seed, num_jobs=4)
    r["avg_jct_h"] = jct
    return r


def _write_run(d: Path, rows: list[dict[str, Any]]) -> None:
    atomic_write_text(d / "results.csv", csv_text(rows, RESULT_COLUMNS))
    ext = [{k: r[k] for k in ("scheduler", "workload", "cluster", "seed")} for r in rows]
    for e in ext:
        e["lb_avg_jct_h"] = 0.5
    atomic_write_text(d / "results_extended.csv", csv_text(ext, list(ext[0])))
    write_marker(d, None)  # as scripts/evaluate.py does last


def _summarize_main() -> Callable[[list[str]], int]:
    main: Callable[[list[str]], int] = runpy.run_path(str(ROOT / "scripts" / "summarize.py"))[
        "main"
    ]
    return main


def _read(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_results_complete(tmp_path: Path) -> None:
    assert not results_complete(tmp_path, ["fifo"], [0])  # no file
    _write_run(tmp_path, [_row("fifo", 0, 1.0), _row("las", 0, 2.0)])
    assert results_complete(tmp_path, ["fifo", "las"], [0])
    assert results_complete(tmp_path, ["fifo", "las"], [0], cluster="c")
    assert not results_complete(tmp_path, ["fifo", "las"], [0], cluster="other")
    assert not results_complete(tmp_path, ["fifo", "las"], [0, 1])  # seed 1 missing
    assert not results_complete(tmp_path, ["fifo", "maifs"], [0])  # scheduler missing
    (tmp_path / "results.csv").write_text("scheduler,seed\nfifo,0\n")  # wrong header
    assert not results_complete(tmp_path, ["fifo"], [0])


def test_summarize_merges_runs_and_drops_duplicates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "sweep"
    _write_run(sweep / "0", [_row("fifo", 0, 1.0), _row("las", 0, 3.0)])
    _write_run(sweep / "1", [_row("fifo", 1, 2.0), _row("las", 1, 3.0)])
    _write_run(sweep / "2", [_row("fifo", 1, 99.0)])  # duplicate of run 1's fifo row
    _write_run(sweep / "3", [_row("fifo", 0, 4.0, workload="w@x2")])
    assert _summarize_main()([str(sweep), "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert "keeping the first" in err
    out = sweep / "summary"
    merged = _read(out / "results.csv")
    assert len(merged) == 5 and list(merged[0]) == list(RESULT_COLUMNS)
    assert "99.0" not in {r["avg_jct_h"] for r in merged}
    summ = {(r["workload"], r["scheduler"]): r for r in _read(out / "summary.csv")}
    assert set(summ) == {("w", "fifo"), ("w", "las"), ("w@x2", "fifo")}
    assert float(summ["w", "fifo"]["avg_jct_h_mean"]) == pytest.approx(1.5)
    assert int(summ["w", "las"]["n_seeds"]) == 2
    assert float(summ["w", "las"]["jct_vs_best"]) == pytest.approx(2.0)
    assert float(summ["w", "fifo"]["jct_vs_lb"]) == pytest.approx(3.0)
    md = (out / "results.md").read_text()
    assert "## w on c" in md and "## w@x2 on c" in md
    # Summarising again ignores the summary directory itself.
    assert _summarize_main()([str(sweep), "--no-plots"]) == 0
    assert len(_read(out / "results.csv")) == 5


def test_summarize_errors_on_empty_dir(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        _summarize_main()([str(tmp_path)])


@pytest.mark.slow
def test_joblib_sweep_end_to_end_resume_and_summary(tmp_path: Path) -> None:
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    sweep = tmp_path / "sweep"
    base = [
        sys.executable,
        str(ROOT / "scripts" / "evaluate.py"),
        "-m",
        "scheduler=fifo,las",
        "seed=0,1",
        "workload.num_jobs=20",
        "progress=false",
        "output.tensorboard=false",
        f"hydra.sweep.dir={sweep}",
    ]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [*base, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = sorted(p.parent for p in sweep.rglob("results.csv"))
    assert len(runs) == 4
    seen = set()
    for d in runs:
        rows = _read(d / "results.csv")
        assert len(rows) == 1 and int(rows[0]["num_jobs"]) == 20
        seen.add((rows[0]["scheduler"], rows[0]["seed"]))
        assert (d / "plots" / "jct_cdf.png").stat().st_size > 0
    assert seen == {("fifo", "0"), ("fifo", "1"), ("las", "0"), ("las", "1")}
    # Resuming: the same sweep with skip_done=true runs nothing again.
    stamps = {d: (d / "results.csv").stat().st_mtime_ns for d in runs}
    again = subprocess.run(
        [*base, "skip_done=true"], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("skip_done:") == 4
    assert {d: (d / "results.csv").stat().st_mtime_ns for d in runs} == stamps
    # Merge the sweep into one table and plot set.
    assert _summarize_main()([str(sweep)]) == 0
    summ = _read(sweep / "summary" / "summary.csv")
    assert [(r["scheduler"], r["n_seeds"]) for r in summ] == [("fifo", "2"), ("las", "2")]
    plots = sweep / "summary" / "plots" / "philly__sia_64"
    assert {p.name for p in plots.glob("*.png")} == {
        "metrics.png",
        "jct_cdf.png",
        "gpu_share.png",
        "timeline.png",
    }
