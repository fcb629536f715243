"""Hostile inputs through the user's entry points: nothing silent, nothing stale, nothing hangs.

One section per class of issue 40 that this suite covers (stale results, hangs, silently wrong
settings, GPU types outside the catalogue, confusing errors). A user meets each case on the
command line of ``scripts/evaluate.py`` or ``scripts/summarize.py``: a bad setting exits with
status 2 and one line naming the setting, before any simulation. Most cases call the Hydra app in
this process (the same code path, much faster than a new interpreter); two run it as a real
subprocess to pin the exit status and the single stderr line.
"""

from __future__ import annotations

import csv
import json
import runpy
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omegaconf import OmegaConf

from hetsched.baselines.heuristics import FIFO, LAS, YarnCS
from hetsched.evaluation import MARKER, read_marker
from hetsched.sim.catalog import GPU_TYPE_NAMES, gpu_variant
from hetsched.sim.cluster import Cluster
from hetsched.sim.clusters import yaml_cluster
from hetsched.sim.engine import SimConfig, Simulator
from hetsched.sim.errors import ClusterSpecError, HetschedError, SettingError
from hetsched.sim.throughput import ThroughputModel, default_throughput
from hetsched.sim.workload import Workload

ROOT = Path(__file__).resolve().parent.parent
EVALUATE = ROOT / "scripts" / "evaluate.py"
SUMMARIZE = ROOT / "scripts" / "summarize.py"
TINY = [
    "scheduler=fifo",
    "workload.num_jobs=20",
    "seed=0",
    "progress=false",
    "output.plots=false",
    "output.tensorboard=false",
    "output.timeline=false",
]


def _app(path: Path) -> Callable[..., Any]:
    main: Callable[..., Any] = runpy.run_path(str(path))["main"]
    return main


def evaluate_cli(
    args: list[str], run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """Run ``scripts/evaluate.py ARGS hydra.run.dir=RUN_DIR`` in this process (as ``__main__``).

    Returns:
        ``(exit status, stdout, stderr)``.
    """
    argv = sys.argv
    sys.argv = [str(EVALUATE), *args, f"hydra.run.dir={run_dir}", "hydra.output_subdir=null"]
    capsys.readouterr()
    try:
        runpy.run_path(str(EVALUATE), run_name="__main__")
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    finally:
        sys.argv = argv
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    """Exit status 2 and a single ``error: ...`` line on stderr that contains every needle."""
    lines = [ln for ln in err.splitlines() if ln.strip() and "[INFO]" not in ln]
    assert code == 2, err[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    for n in needles:
        assert n in lines[0], (n, lines[0])


# ---------------------------------------------------------------- 1. stale results
def test_skip_done_skips_only_the_same_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    code, out, err = evaluate_cli(TINY, run, capsys)
    assert code == 0, err[-2000:]
    marker = read_marker(run)
    assert marker is not None and marker["config_hash"]
    first = (run / "results.csv").read_text()
    # The same config is skipped ...
    code, out, _ = evaluate_cli([*TINY, "skip_done=true"], run, capsys)
    assert code == 0 and "skipped" in out
    # ... a changed sim.* setting, load or workload is not: it runs and replaces the results.
    for change in ("sim.failures.mtbf_h=5", "load=2", "workload.num_jobs=21"):
        code, out, err = evaluate_cli([*TINY, change, "skip_done=true"], run, capsys)
        assert code == 0 and "skipped" not in out, (change, err[-2000:])
        new = read_marker(run)
        assert new is not None and new["config_hash"] != marker["config_hash"]
    assert (run / "results.csv").read_text() != first


def test_failed_rerun_leaves_no_old_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert evaluate_cli(TINY, run, capsys)[0] == 0
    assert (run / "results.csv").is_file() and (run / MARKER).is_file()
    # A rerun that stops during the simulation (failures without checkpoints, see section 2).
    bad = [*TINY, "sim.failures.mtbf_h=1", "sim.failures.max_lost_attempts=3"]
    code, _, err = evaluate_cli(bad, run, capsys)
    assert code == 2, err[-2000:]
    # The rerun removed the earlier run's marker and results before simulating: nothing of the
    # old run is left to be read as this run's results.
    assert not (run / MARKER).exists() and not (run / "results.csv").exists()
    assert not (run / "jobs.csv").exists() and read_marker(run) is None
    # A run that completes with other settings replaces every file, marker last.
    assert evaluate_cli([*TINY, "output.jobs=false"], run, capsys)[0] == 0
    m = read_marker(run)
    assert m is not None and "jobs.csv" not in m["files"] and not (run / "jobs.csv").exists()


def test_summarize_refuses_runs_without_a_valid_marker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "sweep"
    assert evaluate_cli(TINY, sweep / "0", capsys)[0] == 0
    assert evaluate_cli([*TINY, "seed=1"], sweep / "1", capsys)[0] == 0
    summarize = _app(SUMMARIZE)
    # Run 1 killed while rewriting: a new jobs.csv beside the old results.csv.
    jobs = sweep / "1" / "jobs.csv"
    jobs.write_text(jobs.read_text().replace(",0,", ",7,", 1))
    assert summarize([str(sweep), "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert f"{sweep / '1'} has no valid {MARKER}" in err
    with (sweep / "summary" / "results.csv").open() as fh:
        assert [r["seed"] for r in csv.DictReader(fh)] == ["0"]
    # Run 0 without its marker (killed before the end): nothing valid is left, exit 2.
    (sweep / "0" / MARKER).unlink()
    assert summarize([str(sweep), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("error: none of the 2 results.csv")


def test_marker_records_every_result_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert evaluate_cli(TINY, run, capsys)[0] == 0
    body = json.loads((run / MARKER).read_text())
    assert {"results.csv", "results_extended.csv", "summary.csv", "results.md", "jobs.csv"} <= set(
        body["files"]
    )
    (run / "summary.csv").write_text("stale\n")
    assert read_marker(run) is None


# ---------------------------------------------------------------- 2. hangs
@pytest.mark.parametrize(
    ("sched", "value"),
    [("fifo", "-60"), ("fifo", "nan"), ("fifo", "0"), ("fifo", "inf"), ("las", "-60")]
    + [("yarn_cs", "nan"), ("gavel", "nan"), ("sia", "0"), ("hadar", "-1")],
)
def test_bad_round_s_is_an_error_before_any_simulation(
    sched: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*TINY, f"scheduler={sched}", f"scheduler.{sched}.round_s={value}"]
    code, _, err = evaluate_cli(args, tmp_path / "run", capsys)
    assert_one_line_error(code, err, f"scheduler.{sched}.round_s=", "finite positive")
    assert not (tmp_path / "run" / "results.csv").exists()


@pytest.mark.parametrize("make", [FIFO, LAS, YarnCS])
@pytest.mark.parametrize("value", [-60.0, float("nan"), 0.0])
def test_policies_and_engine_refuse_bad_round_lengths(
    make: Callable[..., Any], value: float, tiny_sim: Simulator
) -> None:
    with pytest.raises(SettingError, match="round_s"):
        make(round_s=value)

    class Rogue(FIFO):
        pass

    rogue = Rogue()
    rogue.round_s = value  # set after the constructor's check: the engine checks again
    with pytest.raises(SettingError, match="round_s"):
        tiny_sim.run(rogue)
    with pytest.raises(SettingError, match="sim.round_s"):
        SimConfig(round_s=value)


def test_failures_without_checkpoints_stop_instead_of_looping(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*TINY, "sim.failures.mtbf_h=1", "sim.failures.max_lost_attempts=5"]
    code, _, err = evaluate_cli(args, tmp_path / "run", capsys)
    assert_one_line_error(code, err, "5 times in a row", "sim.checkpoint.interval_s")
    # With periodic checkpoints the same failures are survivable: every job finishes.
    code, _, err = evaluate_cli([*args, "sim.checkpoint.interval_s=600"], tmp_path / "ok", capsys)
    assert code == 0, err[-2000:]
    with (tmp_path / "ok" / "results.csv").open() as fh:
        row = next(csv.DictReader(fh))
    assert int(row["num_jobs"]) == 20 and float(row["avg_jct_h"]) < 1e3


# ---------------------------------------------------------------- 4. silently wrong settings
@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["+sim.roundd=30"], ["sim.roundd", "unknown setting"]),
        (["+scheduler.fifo.backfil=true"], ["scheduler.fifo.backfil"]),
        (["+output.plot=false"], ["output.plot"]),
        (["sim.max_time_s=0"], ["sim.max_time_s=0"]),
        (["sim.max_time_s=-5"], ["sim.max_time_s=-5"]),
        (["sim.round_s=0"], ["sim.round_s=0"]),
        (["sim.max_idle_rounds=0"], ["sim.max_idle_rounds=0"]),
        (["sim.checkpoint.cost_s=30"], ["cost_s=30", "interval_s"]),
        (
            ["sim.failures.mtbf_h=20", f"sim.failures.trace={ROOT / 'README.md'}"],
            ["failures.trace", "mtbf_h=20", "drop one"],
        ),
        (["seed=[3,5,7]", "num_seeds=2"], ["num_seeds=2", "drop listed seeds"]),
        (["load=0"], ["load=0"]),
        (["+cluster.gpu=8"], ["unexpected keyword argument 'gpu'"]),
    ],
)
def test_silently_wrong_settings_are_errors(
    args: list[str], needles: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = evaluate_cli([*TINY, *args], tmp_path / "run", capsys)
    assert_one_line_error(code, err, *needles)


def test_resume_names_the_settings_the_new_command_line_changes(tmp_path: Path) -> None:
    from hetsched.agents.trainer import Trainer

    h = runpy.run_path(str(ROOT / "tests" / "agents" / "helpers.py"))
    tm = h["tiny_tm"]()

    def trainer(d: Path, resume: Path | None = None, lr: float | None = None, seed: int = 0) -> Any:
        cfg = h["fast_config"](steps=32)
        cfg.checkpoint_every = 32
        cfg.resume = str(resume) if resume else None
        cfg.seed = seed
        if lr is not None:
            cfg.agent.ppo.lr = lr
        return Trainer(cfg, d, throughput=tm, envs=[h["tiny_env"](cfg.agent, tm, jobs=2)])

    trainer(tmp_path / "a").run()
    (ck,) = (tmp_path / "a" / "checkpoints").glob("*_32.pt")  # {phase}_{step}.pt
    with pytest.warns(UserWarning, match=r"\['agent.ppo.lr', 'seed'\]"):
        trainer(tmp_path / "b", resume=ck, lr=0.5, seed=3)  # the checkpoint loads at start
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same settings resume without a word
        trainer(tmp_path / "c", resume=ck)


# ---------------------------------------------------------------- 6. GPU types outside the catalogue
def _one_node(gpu_type: str, gpu_types: dict[str, Any] | None = None) -> Cluster:
    node = {"gpu_type": gpu_type, "count": 1, "gpus": 8, "cpus": 128, "mem_gib": 1024}
    return Cluster.from_spec("one", [node], gpu_types=gpu_types)


def _workload(tm: ThroughputModel, model: str, a100_s: float) -> Workload:
    """One 8-GPU job of ``model`` that takes ``a100_s`` seconds on 8 A100s of one node."""
    m = tm.models.index(model)
    rate = float(tm.isolated(m, GPU_TYPE_NAMES.index("a100"), 8, False))
    return Workload(
        name="w",
        job_id=np.array(["j"]),
        arrival=np.zeros(1),
        model=np.array([m]),
        batch_size=np.full(1, 32),
        work=np.array([rate * a100_s]),
        req_gpus=np.array([8]),
        min_gpus=np.array([8]),
        max_gpus=np.array([8]),
        cpu_per_gpu=np.full(1, 4.0),
        mem_per_gpu=np.full(1, 16.0),
        queue=np.zeros(1, dtype=np.int64),
    )


def _finish_time(cluster: Cluster, tm: ThroughputModel, model: str) -> float:
    wl = _workload(tm, model, 3600.0)
    res = Simulator(cluster, wl, tm, SimConfig(round_s=60.0)).run(FIFO())
    return float(res.finish_time[0])


def test_a_gpu_type_defined_by_relative_speed_runs_at_that_speed() -> None:
    tm = default_throughput()
    h100 = {"h100": {"base": "a100", "memory_gib": 80, "speed": {"default": 2.0, "bert": 3.0}}}
    a100 = _one_node("a100")
    fast = _one_node("h100", h100)
    assert "8 h100 (as a100)" in fast.describe()
    # One hour of work on 8 A100s; on the new type it takes 1/2 (default) or 1/3 (bert) of that.
    assert _finish_time(a100, tm, "bert") == pytest.approx(3600.0)
    assert _finish_time(fast, tm, "bert") == pytest.approx(1200.0)
    assert _finish_time(fast, tm, "cifar10") == pytest.approx(1800.0)


def test_speed_profile_from_a_csv_of_measured_throughputs(tmp_path: Path) -> None:
    (tmp_path / "l40s.csv").write_text("model,base,throughput\nbert,100,150\ncifar10,10,8\n")
    v = gpu_variant(
        "l40s",
        {"base": "a100", "memory_gib": 48, "speed_csv": str(tmp_path / "l40s.csv")},
    )
    assert v.factors(["bert", "cifar10", "yolov3"]).tolist() == pytest.approx([1.5, 0.8, 1.0])
    (tmp_path / "bad.csv").write_text("model,speed\nbert,-1\n")
    with pytest.raises(ClusterSpecError, match="line 2: speed=.-1"):
        gpu_variant("x", {"base": "a100", "memory_gib": 48, "speed_csv": str(tmp_path / "bad.csv")})


def test_shipped_h100_preset_runs_from_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*TINY, "cluster=h100_mixed", "scheduler=[fifo,las]"]
    code, out, err = evaluate_cli(args, tmp_path / "run", capsys)
    assert code == 0, err[-2000:]
    assert "16 h100 (as a100)" in out


def test_user_cluster_file_with_a_new_gpu_type(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(
        "name: mine\ngpu_types:\n  a800: {base: a100, memory_gib: 80, speed: {default: 1.0}}\n"
        "nodes:\n  - {gpu_type: A800, count: 2, gpus: 8, cpus: 128, mem_gib: 1024}\n"
    )
    cl = yaml_cluster(f)
    assert cl.has_variants and cl.describe() == "mine: 16 GPUs (16 a800 (as a100)), 2 nodes"
    f.write_text(
        "name: mine\nnodes:\n  - {gpu_type: h800, count: 1, gpus: 8, cpus: 8, mem_gib: 64}\n"
    )
    with pytest.raises(ClusterSpecError, match="h800.*gpu_types"):
        yaml_cluster(f)
    with pytest.raises(ClusterSpecError, match="already a catalogue GPU type"):
        _one_node("v100", {"V100": {"base": "a100", "memory_gib": 8, "speed": {}}})


def test_observations_refuse_a_gpu_type_they_cannot_encode() -> None:
    from hetsched.envs.features import NUM_TYPES, FeatureBuilder
    from hetsched.envs.spaces import LevelSets

    assert NUM_TYPES == len(GPU_TYPE_NAMES) == 7  # existing checkpoints' observation size
    h100 = {"h100": {"base": "a100", "memory_gib": 80, "speed": {"default": 2.0}}}
    with pytest.raises(ClusterSpecError, match=r"h100.*outside the 7-type catalogue"):
        FeatureBuilder(
            _one_node("h100", h100),
            default_throughput(),
            LevelSets(),
            window=4,
            resident_slots=2,
            max_decisions=8,
        )


@pytest.mark.slow  # loads the shipped MAIFS checkpoint
def test_learned_scheduler_on_a_new_gpu_type_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*TINY, "cluster=h100_mixed", "scheduler=maifs"]
    code, _, err = evaluate_cli(args, tmp_path / "run", capsys)
    assert_one_line_error(code, err, "['h100'] outside the 7-type catalogue")


# ---------------------------------------------------------------- 8. confusing errors
@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["seed=-1"], ["seed=-1", "whole number >= 0"]),
        (["seed=1.5"], ["seed=1.5"]),
        (["seed=[0,-2]"], ["seed=-2"]),
        ([f"throughput_table={ROOT / 'README.md'}"], ["README.md", "not an .npz"]),
    ],
)
def test_confusing_errors_are_clear(
    args: list[str], needles: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = evaluate_cli([*TINY, *args], tmp_path / "run", capsys)
    assert_one_line_error(code, err, *needles)


def test_yarn_cs_shares_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*TINY, "scheduler=yarn_cs", "scheduler.yarn_cs.shares={nosuch: 2, other: 1}"]
    code, _, err = evaluate_cli(args, tmp_path / "run", capsys)
    # The mapping reaches the scheduler, which names the workload's real queues.
    assert_one_line_error(code, err, "unknown queues ['nosuch', 'other']", "queues are")
    code, _, err = evaluate_cli(
        [*TINY, "scheduler=yarn_cs", "scheduler.yarn_cs.shares={a: -1}"], tmp_path / "r2", capsys
    )
    assert_one_line_error(code, err, "scheduler.yarn_cs.shares.a=-1")
    pol = YarnCS(shares=OmegaConf.create({"vc1": 2, "vc2": 1}))
    assert pol.shares == {"vc1": 2, "vc2": 1}


# ---------------------------------------------------------------- the real command line
@pytest.mark.parametrize(
    ("args", "needle"),
    [(["scheduler.fifo.round_s=-60"], "scheduler.fifo.round_s=-60")],
)
def test_real_cli_exit_status_and_single_line(tmp_path: Path, args: list[str], needle: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(EVALUATE), *TINY, *args, f"hydra.run.dir={tmp_path / 'run'}"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert_one_line_error(proc.returncode, proc.stderr, needle)
    assert proc.stdout == ""


def test_every_error_is_a_hetsched_error() -> None:
    assert issubclass(SettingError, HetschedError)


@pytest.fixture
def tiny_sim() -> Simulator:
    tm = default_throughput()
    return Simulator(_one_node("a100"), _workload(tm, "bert", 3600.0), tm, SimConfig())


# ---------------------------------------------------------------- 3. NaN weights, through the CLI
def test_evaluating_a_checkpoint_with_nan_weights_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torch = pytest.importorskip("torch")
    from hetsched.agents.policy import DEFAULT_CHECKPOINT

    ck = torch.load(DEFAULT_CHECKPOINT, weights_only=True)
    name = next(k for k, v in ck["model"].items() if v.is_floating_point())
    ck["model"][name] = torch.full_like(ck["model"][name], float("nan"))
    bad = tmp_path / "nan.pt"
    torch.save(ck, bad)
    code, _, err = evaluate_cli(
        [*TINY, "scheduler=maifs", f"scheduler.maifs.checkpoint={bad}"], tmp_path / "run", capsys
    )
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "nan.pt" in lines[0], err
    assert not (tmp_path / "run" / "results.csv").exists()
