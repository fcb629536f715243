"""The benchmark command: cells, resume, tracks in the leaderboard, bad input."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from hetsched.benchmark.config import register_benchmark_config
from hetsched.benchmark.runner import FitProbe, benchmark_cells, read_cell, run_cells
from hetsched.resources import CONF_DIR
from hetsched.sim.catalog import GPU_TYPE_NAMES

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "benchmark.py"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, cwd=ROOT,
        timeout=600,
    )  # fmt: skip


def _cfg(*overrides: str) -> Any:
    register_benchmark_config()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("benchmark", overrides=list(overrides))


@pytest.mark.slow
def test_cli_runs_resumes_and_writes_the_tracks(tmp_path: Path) -> None:
    args = [
        "scenarios=[philly_sia64_overloaded]", "scheduler=[fifo,srpt]", "seed=[0,1]",
        "runtime_info=[exact,none]", "reference=fifo", "n_jobs=1", "plots=false",
        "bootstrap=50", f"out_dir={tmp_path}",
    ]  # fmt: skip
    first = _cli(*args)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "4 cells" not in first.stdout and "6 cells, 0 done, 6 to run" in first.stdout
    assert "# Leaderboard" in first.stdout
    with (tmp_path / "leaderboard.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {(r["scheduler"], r["track"]) for r in rows} == {
        ("fifo", "exact"),
        ("srpt", "exact"),
        ("srpt", "none"),
    }  # fifo reads no remaining work: the exact track only
    cells = sorted((tmp_path / "cells" / "philly_sia64_overloaded").glob("*.json"))
    assert len(cells) == 6 and all(read_cell(c) for c in cells)
    again = _cli(*args)
    assert again.returncode == 0 and "6 cells, 6 done, 0 to run" in again.stdout
    changed = _cli(*args, "scheduler.srpt.min_speed=0.5")  # a new hash for srpt only
    assert changed.returncode == 0 and "6 cells, 2 done, 4 to run" in changed.stdout


@pytest.mark.slow
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = _cli("split=tset", f"out_dir={tmp_path}")
    assert bad.returncode == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: unknown split 'tset'")


def test_run_cells_writes_one_file_per_cell_and_resumes(tmp_path: Path) -> None:
    cfg = _cfg(
        "scenarios=[philly_sia64_overloaded]", "scheduler=[fifo,srpt]", "seed=[0]",
        "runtime_info=[exact,noisy]",
    )  # fmt: skip
    cells = benchmark_cells(cfg)
    assert sorted((c.scheduler, c.mode) for c in cells) == [
        ("fifo", "exact"), ("srpt", "exact"), ("srpt", "noisy"),
    ]  # fmt: skip
    rows, ran = run_cells(cells, tmp_path, progress=False)
    assert ran == 3 and len(rows) == 3
    assert all(c.path(tmp_path).is_file() for c in cells)
    assert {r["track"] for r in rows} == {"exact", "noisy(0.5)"}
    rows2, ran2 = run_cells(cells, tmp_path, progress=False)
    assert ran2 == 0 and rows2 == rows  # resumed from the files
    cells[0].path(tmp_path).write_text("{half")  # an unreadable file is rerun, not read
    assert run_cells(cells, tmp_path, progress=False)[1] == 1


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ("scenarios=[itp_c3_busy]", "unknown scenario 'itp_c3_busy'"),
        ("runtime_sigma=-0.5", r"runtime_sigma=-0.5 must be a finite number >= 0"),
        ("runtime_info=[oracle]", "runtime_info='oracle' is not one of"),
        ("checkpoints=[/no/such.pt]", r"checkpoints: '/no/such.pt' is not a file"),
    ],
)
def test_bad_settings(override: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        benchmark_cells(_cfg(override))


def test_quick_cells_cover_every_baseline_and_declare_cheap_settings() -> None:
    cfg = _cfg()
    cells = benchmark_cells(cfg)
    scheds = {c.scheduler for c in cells}
    assert {"fifo", "yarn_cs", "las", "gavel", "sia", "pollux", "hadar", "srpt", "maifs"} <= scheds
    assert len({c.seed for c in cells}) >= 3
    for c in cells:
        for k, v in dict(cfg.cheap).get(c.scheduler, {}).items():
            assert c.node[k] == v
    listed = benchmark_cells(_cfg("scenarios=[philly_sia64_busy]"))  # not the quick selection
    full = benchmark_cells(_cfg("split=test"))
    assert cfg.cheap
    for cells_ in (full, listed):
        for name, over in dict(cfg.cheap).items():
            node = next(c for c in cells_ if c.scheduler == name).node
            assert all(node[k] != v for k, v in dict(over).items())


def test_fit_probe_counts_idle_gpus_only_while_a_waiting_job_fits() -> None:
    probe = FitProbe(object())
    probe.times, probe.idle, probe.fits = (
        [0.0, 3600.0, 7200.0],
        [4.0, 8.0, 2.0],
        [True, False, True],
    )
    assert probe.idle_fit_gpu_h(9000.0) == pytest.approx(4.0 + 2.0 * 0.5)
    probe.single = [False, True, True]  # the first interval's job fits only as a gang
    probe.fast = [False, True, False]  # the third one's only on a slow GPU type
    parts = probe.idle_breakdown(9000.0)
    assert parts == pytest.approx({"single": 0.0, "slow_only": 1.0, "gang_only": 4.0})
    assert sum(parts.values()) == pytest.approx(probe.idle_fit_gpu_h(9000.0))
    probe.last = ["failed", "pass", "failed"]  # how each decision's final step ended
    assert probe.idle_by_last_step(9000.0) == pytest.approx({"failed": 5.0, "pass": 0.0})


def test_fit_probe_records_the_last_step_and_idle_cause_of_actor_policies_only() -> None:
    nodes = [{"gpu_type": "v100", "count": 2, "gpus": 2, "cpus": 16, "mem_gib": 64}]
    st = _probe_state(nodes, 2, {"v100": 1.0}, [True, True])
    plain, actor = FitProbe(_Idle()), FitProbe(_Idle())
    actor.policy.last_step = "pass"  # what ActorPolicy.decide sets
    calls: list[tuple[list[int], list[int]]] = []

    def idle_cause(jobs: Any, nodes: Any) -> str:  # what ActorPolicy.idle_cause answers
        calls.append((jobs.tolist(), nodes.tolist()))
        return "window"

    actor.policy.idle_cause = idle_cause
    for p in (plain, actor):
        p.decide(st)
    assert plain.last == ["n/a"] and actor.last == ["pass"]
    assert actor.idle_by_last_step(3600.0) == pytest.approx({"pass": 4.0})
    assert calls == [([0, 0], [0, 1])]  # the waiting job with each node whose free GPUs it fits
    assert plain.idle_by_cause(3600.0) == pytest.approx({"n/a": 4.0})
    assert actor.idle_by_cause(3600.0) == pytest.approx({"window": 4.0})


class _Idle:
    """A scheduler that places nothing."""

    def decide(self, state: object) -> Any:
        from hetsched.sim.allocation import Allocation

        return Allocation.empty()


def _probe_state(groups: list[dict[str, Any]], gpus: int, tput: dict[str, float], up: list[bool]):
    """A scheduler state with one waiting ``gpus``-GPU job on ``groups`` and a throughput stub
    giving the job ``tput[type]`` work units/s on each GPU type (0 on others)."""
    from types import SimpleNamespace

    from conftest import make_cluster, make_workload

    from hetsched.sim.catalog import gpu_type_index

    table = np.zeros(len(GPU_TYPE_NAMES))
    for name, v in tput.items():
        table[gpu_type_index(name)] = v
    tm = SimpleNamespace(isolated=lambda m, k, n, s: table[np.asarray(k)] + 0.0 * np.asarray(n))
    return SimpleNamespace(
        cluster=make_cluster(groups), workload=make_workload([0.0], [3600.0], [gpus]),
        throughput=tm, node_up=np.array(up), active=np.array([0]), time=0.0,
    )  # fmt: skip


def test_fit_probe_tells_single_node_fits_from_gang_only_fits() -> None:
    """Two 2-GPU nodes of one type, both free: a 3-GPU job fits only as a gang, a 2-GPU job on
    one node."""
    nodes = [{"gpu_type": "v100", "count": 2, "gpus": 2, "cpus": 16, "mem_gib": 64}]
    for need, single in ((3, False), (2, True)):
        probe = FitProbe(_Idle())
        probe.decide(_probe_state(nodes, need, {"v100": 1.0}, [True, True]))
        assert probe.fits == [True] and probe.single == [single]


def test_fit_probe_tells_fits_on_slow_gpu_types_apart() -> None:
    """A fast node (A100, down) and a slow one (T4, free): a 1-GPU job that runs on the T4 at
    0.3 of its A100 throughput fits only slowly; at 0.6 it fits at full value."""
    nodes = [
        {"gpu_type": "a100", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
        {"gpu_type": "t4", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
    ]
    for slow_rate, fast in ((0.3, False), (0.6, True)):
        st = _probe_state(nodes, 1, {"a100": 1.0, "t4": slow_rate}, [False, True])
        probe = FitProbe(_Idle())
        probe.decide(st)
        assert probe.single == [True] and probe.fast == [fast]
        parts = probe.idle_breakdown(3600.0)
        assert parts["single" if fast else "slow_only"] == pytest.approx(1.0)


def test_extra_checkpoints_build_a_maifs_policy_each() -> None:
    """``checkpoints=[...]`` adds one ``maifs[<stem>]`` scheduler per file, built from the
    maifs preset with that checkpoint."""
    from hydra.utils import instantiate

    from hetsched.agents.policy import MAIFSPolicy
    from hetsched.benchmark.runner import scheduler_nodes
    from hetsched.resources import CHECKPOINT_DIR

    ck = CHECKPOINT_DIR / "maifs_default.pt"
    nodes = scheduler_nodes(_cfg("scheduler=[fifo]", f"checkpoints=[{ck}]"))
    assert sorted(nodes) == ["fifo", "maifs[maifs_default]"]
    pol = instantiate(nodes["maifs[maifs_default]"])
    assert isinstance(pol, MAIFSPolicy)


def test_a_retrained_checkpoint_at_the_same_path_is_a_new_cell(tmp_path: Path) -> None:
    """A MAIFS cell's hash covers its checkpoint's contents (a resumed benchmark never reads a
    result of an older file at the same path); other schedulers' hashes ignore files."""
    from hetsched.benchmark.runner import Cell

    ck = tmp_path / "net.pt"
    ck.write_bytes(b"one")
    node = {"_target_": "hetsched.agents.policy.MAIFSPolicy", "checkpoint": str(ck)}
    first = Cell("philly_sia64_busy", "maifs", node, "exact", 1.0, 0).config_hash
    assert Cell("philly_sia64_busy", "maifs", node, "exact", 1.0, 0).config_hash == first
    ck.write_bytes(b"two")
    os.utime(ck, ns=(1, 2))  # a new modification time, as a rewrite gives
    assert Cell("philly_sia64_busy", "maifs", node, "exact", 1.0, 0).config_hash != first
    fifo = {"_target_": "hetsched.baselines.fifo.FIFO", "checkpoint": str(ck)}
    h = Cell("philly_sia64_busy", "fifo", fifo, "exact", 1.0, 0).config_hash
    ck.write_bytes(b"three")
    assert Cell("philly_sia64_busy", "fifo", fifo, "exact", 1.0, 0).config_hash == h


def test_a_new_metrics_version_is_a_new_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cells computed under older metric definitions are recomputed, not read."""
    import hetsched.benchmark.runner as runner

    node = {"_target_": "hetsched.baselines.fifo.FIFO"}
    before = runner.Cell("philly_sia64_busy", "fifo", node, "exact", 1.0, 0).config_hash
    monkeypatch.setattr(runner, "METRICS_VERSION", runner.METRICS_VERSION + 1)
    assert runner.Cell("philly_sia64_busy", "fifo", node, "exact", 1.0, 0).config_hash != before


def test_a_new_observation_version_is_a_new_learned_cell(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A learned scheduler's cells measured under older observations are recomputed; fixed
    schedulers' cells keep their hashes."""
    import hetsched.benchmark.runner as runner

    ck = tmp_path / "net.pt"
    ck.write_bytes(b"weights")
    learned = {"_target_": "hetsched.agents.policy.MAIFSPolicy", "checkpoint": str(ck)}
    fixed = {"_target_": "hetsched.baselines.fifo.FIFO"}
    cells = [runner.Cell("philly_sia64_busy", s, n, "exact", 1.0, 0) for s, n in
             (("maifs", learned), ("fifo", fixed))]  # fmt: skip
    before = [c.config_hash for c in cells]
    monkeypatch.setattr(runner, "OBS_VERSION", runner.OBS_VERSION + 1)
    after = [c.config_hash for c in cells]
    assert after[0] != before[0] and after[1] == before[1]


def test_preset_node_sets_the_checkpoint_of_maifs_presets_only() -> None:
    from hetsched.benchmark.runner import preset_node

    assert preset_node("maifs", "my.pt")["checkpoint"] == "my.pt"
    assert preset_node("maifs")["checkpoint"] is None  # the shipped network
    assert "checkpoint" not in preset_node("fifo", "my.pt")
    with pytest.raises(ValueError, match="fifo"):
        preset_node("nope")
