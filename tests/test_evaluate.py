"""The evaluation app: config composition, end-to-end runs, outputs and determinism."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate

import hetsched.config  # noqa: F401
from hetsched.evaluation import evaluate, markdown_table, seeds_from
from hetsched.sim import RESULT_COLUMNS, SimConfig, default_throughput

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"


def _compose(overrides: list[str]):  # type: ignore[no-untyped-def]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("evaluate", overrides=overrides)


def test_default_config_composes_with_simple_schedulers() -> None:
    cfg = _compose([])
    assert set(cfg.scheduler) >= {"fifo", "las", "yarn_cs"}
    assert cfg.cluster.name == "sia_64"
    assert cfg.workload.name == "philly"


def test_scheduler_list_and_typed_override() -> None:
    cfg = _compose(["scheduler=[fifo,las]", "scheduler.fifo.backfill=true"])
    assert list(cfg.scheduler) == ["fifo", "las"]
    assert cfg.scheduler.fifo.backfill is True
    with pytest.raises(ConfigCompositionException):
        _compose(["scheduler=fifo", "scheduler.fifo.backfill=maybe"])
    with pytest.raises(ConfigCompositionException):
        _compose(["scheduler=no_such_scheduler"])


def test_seeds_from() -> None:
    assert seeds_from(3) == [3]
    assert seeds_from([0, 1]) == [0, 1]
    assert seeds_from("[0,2]") == [0, 2]
    with pytest.raises(ValueError, match="empty"):
        seeds_from([])


def _run(cfg, seeds: list[int]):  # type: ignore[no-untyped-def]
    cluster = instantiate(cfg.cluster)
    factory = instantiate(cfg.workload)
    pols = {name: (lambda node=node: instantiate(node)) for name, node in cfg.scheduler.items()}
    return evaluate(
        pols,
        cluster=cluster,
        workload_factory=factory,
        throughput=default_throughput(),
        seeds=seeds,
        sim_config=SimConfig(),
    )


def test_same_seed_same_metrics_different_seed_different_workload() -> None:
    cfg = _compose(["scheduler=[fifo,las]", "workload.num_jobs=60"])
    a = _run(cfg, [0])
    b = _run(cfg, [0])
    c = _run(cfg, [1])
    for x, y in zip(a, b, strict=True):
        assert {k: v for k, v in x.row.items() if k != "decision_ms_mean"} == {
            k: v for k, v in y.row.items() if k != "decision_ms_mean"
        }
    assert not np.array_equal(a[0].result.workload.model, c[0].result.workload.model)
    # Every scheduler saw the same workload for a seed.
    np.testing.assert_array_equal(a[0].result.workload.work, a[1].result.workload.work)


def test_evaluate_script_writes_results(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "evaluate.py"),
            "scheduler=[fifo,las]",
            "workload=philly",
            "cluster=sia_64",
            "seed=0",
            "workload.num_jobs=50",
            "progress=false",
            f"hydra.run.dir={out}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with (out / "results.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["scheduler"] for r in rows] == ["fifo", "las"]
    assert list(rows[0]) == list(RESULT_COLUMNS)
    for r in rows:
        assert int(r["num_jobs"]) == 50
        assert 0 < float(r["avg_jct_h"]) < 1e4
        assert 0 < float(r["utilization"]) <= 1.0
    md = (out / "results.md").read_text()
    assert "| scheduler" in md and "fifo" in md
    assert "avg_jct_h" in proc.stdout
    with (out / "jobs.csv").open() as fh:
        jobs = list(csv.DictReader(fh))
    assert len(jobs) == 100
    assert (out / "timeline.csv").stat().st_size > 0


def test_markdown_table_alignment() -> None:
    rows = [
        {"scheduler": "fifo", "avg_jct_h": 1.23456},
        {"scheduler": "las", "avg_jct_h": float("nan")},
    ]
    md = markdown_table(rows, ["scheduler", "avg_jct_h"])
    lines = md.splitlines()
    assert lines[0].startswith("| scheduler")
    assert lines[1].endswith(":|")  # numeric column right-aligned
    assert "1.235" in lines[2] and "nan" in lines[3]
