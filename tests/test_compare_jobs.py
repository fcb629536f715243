"""scripts/compare_jobs.py: per-class job tables of a real run directory, and its errors."""

from __future__ import annotations

import runpy
from collections.abc import Callable
from pathlib import Path

import pytest

from hetsched.baselines import FIFO, LAS
from hetsched.envs.presets import resolve_cluster, resolve_workload
from hetsched.evaluation import evaluate, read_csv_rows, write_outputs
from hetsched.sim import SimConfig, default_throughput
from hetsched.sim.metrics import idle_gpu_hours_waiting

ROOT = Path(__file__).resolve().parent.parent


def _main() -> Callable[[list[str]], int]:
    main: Callable[[list[str]], int] = runpy.run_path(str(ROOT / "scripts" / "compare_jobs.py"))[
        "main"
    ]
    return main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Strict FIFO and LAS on a loaded stretch of 120 Philly jobs on sia_64, two seeds."""
    outs = evaluate(
        {"fifo": FIFO, "las": LAS},
        cluster=resolve_cluster("sia_64"),
        workload_factory=resolve_workload(
            "philly", {"num_jobs": 120, "start": 7500, "busiest": False}
        ),
        throughput=default_throughput(),
        seeds=[0, 1],
        sim_config=SimConfig(),
        progress=False,
    )
    d = tmp_path_factory.mktemp("run")
    write_outputs(outs, d, jobs=True, timeline=False, plots=False, tensorboard=False)
    # The extended column is the metric of each run's result; jobs waited beside idle GPUs.
    ext = read_csv_rows(d / "results_extended.csv")
    for o, e in zip(outs, ext, strict=True):
        assert float(e["idle_gpu_hours_waiting"]) == pytest.approx(idle_gpu_hours_waiting(o.result))
    assert all(idle_gpu_hours_waiting(o.result) > 1.0 for o in outs)
    return d


def _table_rows(text: str, title: str) -> list[list[str]]:
    """The body rows of the Markdown table under a heading, as stripped cells."""
    block = text.split(title, 1)[1].split("\n\n", 2)[1]
    lines = [ln for ln in block.splitlines() if ln.startswith("|")][2:]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]


def test_compare_jobs_tables_add_up_to_the_results(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp.md"
    assert _main()([str(run_dir), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text == out.read_text() + "\n"  # print() ends the text with one more newline
    head = _table_rows(text, "### philly on sia_64: mean over seeds")
    results = read_csv_rows(run_dir / "results.csv")
    ext = read_csv_rows(run_dir / "results_extended.csv")
    for sched, jct, queue, idle in head:
        rs = [r for r in results if r["scheduler"] == sched]
        assert float(jct) == pytest.approx(sum(float(r["avg_jct_h"]) for r in rs) / 2, abs=1e-3)
        assert float(queue) == pytest.approx(sum(float(r["avg_queue_h"]) for r in rs) / 2, abs=1e-3)
        es = [float(e["idle_gpu_hours_waiting"]) for e in ext if e["scheduler"] == sched]
        assert float(idle) == pytest.approx(sum(es) / 2, abs=1e-3)
    assert [r[0] for r in head] == ["fifo", "las"]
    for by in ("gpus", "model"):
        rows = _table_rows(text, f"### philly on sia_64: jobs by {by}")
        for sched, jct in ((r[0], float(r[1])) for r in head):
            shares = [float(r[5]) for r in rows if r[1] == sched]
            jobs = [float(r[2]) for r in rows if r[1] == sched]
            assert sum(shares) == pytest.approx(jct, abs=5e-3)  # 3 decimals per cell
            assert sum(jobs) == 120


def test_compare_jobs_filters_schedulers_and_names_bad_input(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _main()([str(run_dir), "--by", "gpus", "--schedulers", "las"]) == 0
    text = capsys.readouterr().out
    assert "| las" in text and "fifo" not in text and "jobs by model" not in text
    with pytest.raises(SystemExit):
        _main()([str(run_dir), "--schedulers", "sia"])
    assert "--schedulers ['sia'] not in" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _main()([str(run_dir), "--by", "vc"])
    assert "--by vc: job row 0 has no column(s) ['vc']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _main()([str(run_dir / "nowhere")])
    assert "jobs.csv not found" in capsys.readouterr().err
