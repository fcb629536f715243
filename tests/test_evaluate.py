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
from hetsched.evaluation import (
    evaluate,
    markdown_table,
    resolve_seeds,
    seeds_from,
    with_load,
)
from hetsched.resources import CONF_DIR
from hetsched.sim import RESULT_COLUMNS, SimConfig, default_throughput
from hetsched.sim.errors import TraceError

ROOT = Path(__file__).resolve().parent.parent
CONF = CONF_DIR


def _compose(overrides: list[str]):  # type: ignore[no-untyped-def]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("evaluate", overrides=overrides)


def test_default_config_composes_with_simple_schedulers() -> None:
    cfg = _compose([])
    assert list(cfg.scheduler) == hetsched.config.DEFAULT_SCHEDULERS
    assert set(cfg.scheduler) >= {"fifo", "las", "yarn_cs", "maifs", "sia", "gavel", "hadar"}
    cfg = _compose(["scheduler=maifs", "checkpoint=/some/where.pt"])
    assert cfg.scheduler.maifs.checkpoint == "/some/where.pt"
    assert cfg.scheduler.maifs.greedy is True  # the network alone: no rule settings
    assert set(cfg.scheduler.maifs) == {
        "_target_",
        "checkpoint",
        "greedy",
        "max_idle_rounds",
        "decision_order",
    }
    assert cfg.cluster.name == "sia_64"
    assert cfg.workload.name == "philly"
    # Several seeds by default; plots and TensorBoard on, skipping off.
    assert resolve_seeds(cfg.seed, cfg.seeds, cfg.num_seeds) == [0, 1, 2, 3, 4]
    assert cfg.output.plots is True and cfg.output.tensorboard is True
    assert cfg.skip_done is False and cfg.load == 1.0
    with pytest.raises(ConfigCompositionException):
        _compose(["num_seeds=many"])


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


def test_resolve_seeds() -> None:
    assert resolve_seeds(0) == [0]
    assert resolve_seeds([3, 5]) == [3, 5]
    assert resolve_seeds(0, seeds=[7, 8]) == [7, 8]  # the alias wins
    assert resolve_seeds(10, num_seeds=3) == [10, 11, 12]
    assert resolve_seeds([4], num_seeds=2) == [4, 5]
    with pytest.raises(ValueError, match="drop listed seeds"):
        resolve_seeds([4, 9], num_seeds=2)
    with pytest.raises(ValueError, match="num_seeds=0"):
        resolve_seeds(0, num_seeds=0)
    with pytest.raises(ValueError, match="repeat"):
        resolve_seeds([1, 1])


def test_with_load_scales_arrivals_and_renames() -> None:
    cfg = _compose(["workload.num_jobs=30"])
    cluster, factory, tm = instantiate(cfg.cluster), instantiate(cfg.workload), default_throughput()
    base = factory(throughput=tm, cluster=cluster, rng=np.random.default_rng(0))
    scaled = with_load(factory, 2.0)(throughput=tm, cluster=cluster, rng=np.random.default_rng(0))
    np.testing.assert_allclose(scaled.arrival, base.arrival / 2.0)
    np.testing.assert_array_equal(scaled.work, base.work)
    assert scaled.name == "philly@x2"
    assert with_load(factory, 1.0) is factory
    with pytest.raises(ValueError, match="load=0"):
        with_load(factory, 0.0)


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
            "output.tensorboard=false",
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
    assert "## philly on sia_64: mean ± 95 % CI over 1 seed" in md
    assert "## Per-seed results" in md
    assert "avg_jct_h" in proc.stdout and "jct/LB" in proc.stdout
    with (out / "jobs.csv").open() as fh:
        jobs = list(csv.DictReader(fh))
    assert len(jobs) == 100
    # Per-type GPU-hours of each job add up to its GPU-hours (sia_64: t4, a100, rtx2080ti).
    for j in jobs[:10]:
        per_type = sum(float(j[f"gpu_hours_{t}"]) for t in ("t4", "a100", "rtx2080ti"))
        assert per_type == pytest.approx(float(j["gpu_hours"]))
        assert j["workload"] == "philly" and j["cluster"] == "sia_64"
    with (out / "timeline.csv").open() as fh:
        tl = list(csv.DictReader(fh))
    assert tl and 0.0 <= float(tl[1]["utilization"]) <= 1.0
    with (out / "summary.csv").open() as fh:
        assert [r["scheduler"] for r in csv.DictReader(fh)] == ["fifo", "las"]
    for name in ("metrics", "jct_cdf", "gpu_share", "timeline"):
        assert (out / "plots" / f"{name}.png").stat().st_size > 0
    assert not (out / "tb").exists()


TINY_CSV = "id,submit,runtime,gpus\na,0,3600,1\nb,60,7200,2\nc,120,1800,1\nd,200,600,4\n"
COLUMNS = "{job_id: id, submission_time: submit, duration: runtime, num_gpu: gpus}"


def test_user_csv_workload_end_to_end(tmp_path: Path) -> None:
    (tmp_path / "mine.csv").write_text(TINY_CSV)
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "evaluate.py"),
            "scheduler=fifo",
            "workload=csv",
            "workload.path=mine.csv",  # relative to the directory run from
            f"workload.columns={COLUMNS}",
            "seed=0",
            "progress=false",
            "output.plots=false",
            "output.tensorboard=false",
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
    assert [(r["scheduler"], r["workload"], r["num_jobs"]) for r in rows] == [("fifo", "mine", "4")]
    with (out / "jobs.csv").open() as fh:
        assert [j["job_id"] for j in csv.DictReader(fh)] == ["a", "b", "c", "d"]
    assert not (out / "plots").exists()


@pytest.mark.parametrize(
    ("text", "columns", "match"),
    [
        (TINY_CSV, COLUMNS.replace("submit,", "submitted,"), "missing column 'submitted'"),
        (TINY_CSV.replace("b,60,7200,2", "b,60,7200,two"), COLUMNS, "two"),
        (TINY_CSV, "{job_id: id, arrival: submit}", "unknown field"),
    ],
)
def test_user_csv_workload_clear_errors(
    tmp_path: Path, text: str, columns: str, match: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    cfg = _compose(["workload=csv", f"workload.path={path}", f"workload.columns={columns}"])
    factory = instantiate(cfg.workload)
    with pytest.raises(TraceError, match=match):
        factory(
            throughput=default_throughput(),
            cluster=instantiate(cfg.cluster),
            rng=np.random.default_rng(0),
        )


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


EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_presets_compose_and_build(name: str) -> None:
    cfg = _compose([f"experiment={name}"])
    # The preset changes the setup, and a later command-line override still wins.
    assert list(cfg.scheduler) != hetsched.config.DEFAULT_SCHEDULERS or cfg.sim.failures.mtbf_h
    cluster = instantiate(cfg.cluster)
    assert cluster.num_nodes > 0
    for sched in cfg.scheduler.values():
        assert callable(instantiate(sched, _partial_=True))
    if cfg.workload.name != "sia_philly":  # Sia's files are not shipped (read by path)
        wl = instantiate(cfg.workload)(
            throughput=default_throughput(), cluster=cluster, rng=np.random.default_rng(0)
        )
        assert wl.num_jobs > 0
    again = _compose([f"experiment={name}", "cluster=pai_mixed", "seed=7"])
    assert again.cluster.name == "pai_mixed" and again.seed == 7


def test_experiment_list_is_what_docs_promise() -> None:
    assert {"maifs_heldout", "gavel_continuous", "sia_table3", "failures"} <= set(EXPERIMENTS)
    with pytest.raises(ConfigCompositionException):
        _compose(["experiment=no_such_experiment"])
