"""Bad input through the command line: one line on stderr naming what is wrong, exit code 2.

Each case is a mistake a user makes on the command line (a bad override, a broken cluster YAML or
trace, a missing checkpoint, an unusable output directory). The apps are called in-process through
their console entry functions (``hetsched.cli.evaluate.main`` is ``hetsched-evaluate``); two cases
also run as real processes, where ``HYDRA_FULL_ERROR=1`` brings the traceback back. The library
API's own errors (preset names from Python) are checked at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hetsched.cli import EXIT_BAD_INPUT
from hetsched.cli import evaluate as evaluate_cli
from hetsched.cli import train as train_cli
from hetsched.envs.presets import resolve_cluster, resolve_workload, scheduler_factory
from hetsched.sim.errors import ClusterSpecError, ConfigError, HetschedError, TraceError
from hetsched.sim.faults import FailureSpecError

ROOT = Path(__file__).resolve().parent.parent
#: Small, quick settings every evaluate case starts from (the error must come before any run).
QUICK = ["scheduler=fifo", "seed=0", "workload.num_jobs=10", "output.plots=false"]


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The single line the app wrote on stderr (fails if there is more, or a traceback)."""
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert lines[0].startswith("error: ") and "Traceback" not in err
    return lines[0]


def _evaluate(tmp_path: Path, *args: str) -> int:
    run = tmp_path / "run"
    return evaluate_cli.main([*QUICK, f"hydra.run.dir={run}", *args])


@pytest.fixture(autouse=True)
def _no_full_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ("sim.round_s=fast", "sim.round_s=fast"),
        ("sim.failures.mtbf_h=often", "mtbf_h=often"),
        ("sim.checkpoint.cost_s=[1,2]", "cost_s"),
        ("sim.no_such_field=1", "no_such_field"),
        ("cluster=no_such_cluster", "cluster/no_such_cluster"),
        ("workload=no_such_workload", "workload/no_such_workload"),
        ("cluster=custom", "cluster.path has no value"),
        ("workload=csv", "workload.path="),
    ],
)
def test_bad_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], override: str, match: str
) -> None:
    assert _evaluate(tmp_path, override) == EXIT_BAD_INPUT
    assert match in _error_line(capsys)
    assert not (tmp_path / "run" / "results.csv").exists()


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ("sim.failures.mtbf_h=-3", "mtbf_h=-3"),
        ("sim.failures.repair_h=0", "repair_h=0"),
        ("sim.checkpoint.interval_s=0", "interval_s=0"),
        ("sim.checkpoint.cost_s=-1", "cost_s=-1"),
        ("sim.failures.trace=/no/such/failures.csv", "does not exist"),
        ("seed=[]", "seed list is empty"),
        ("num_seeds=0", "num_seeds=0"),
        ("load=-1", "load=-1"),
        ("scheduler=[]", "scheduler="),
    ],
)
def test_bad_values_name_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], override: str, match: str
) -> None:
    assert _evaluate(tmp_path, override) == EXIT_BAD_INPUT
    assert match in _error_line(capsys)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("name: x\nnodes: []\n", "no node groups"),
        (
            "name: x\nnodes:\n  - {gpu_type: h900, count: 1, gpus: 8, cpus: 8, mem_gib: 64}\n",
            "h900",
        ),
        (
            "name: x\nnodes:\n  - {gpu_type: v100, count: 1, gpus: 0, cpus: 8, mem_gib: 64}\n",
            "gpus",
        ),
        ("name: x\nnodes:\n  - {gpu_type: v100, count: 1, gpus: 4, cpu: 8, mem_gib: 64}\n", "cpu"),
    ],
)
def test_bad_cluster_yaml_names_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, match: str
) -> None:
    p = tmp_path / "c.yaml"
    p.write_text(body)
    assert _evaluate(tmp_path, "cluster=custom", f"cluster.path={p}") == EXIT_BAD_INPUT
    line = _error_line(capsys)
    assert match in line and str(p) in line


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (None, "absent.csv"),  # no such file
        ("job_id,submission_time,duration\n1,0,60\n", "num_gpu"),  # a required column is missing
        ("job_id,submission_time,duration,num_gpu\n1,0,60,two\n", "two"),  # not a number
        ("job_id,submission_time,duration,num_gpu\n1,0,-60,1\n", "duration"),  # negative
        ("job_id,submission_time,duration,num_gpu\n", "no data rows"),  # header only
    ],
)
def test_bad_csv_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str | None, match: str
) -> None:
    p = tmp_path / ("absent.csv" if body is None else "t.csv")
    if body is not None:
        p.write_text(body)
    code = _evaluate(tmp_path, "workload=csv", f"workload.path={p}", "workload.num_jobs=null")
    assert code == EXIT_BAD_INPUT
    line = _error_line(capsys)
    assert match in line and p.name in line
    assert not (tmp_path / "run" / "results.csv").exists()


def test_missing_and_broken_checkpoints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    absent = tmp_path / "absent.pt"
    assert _evaluate(tmp_path, "scheduler=maifs", f"scheduler.maifs.checkpoint={absent}") == 2
    assert str(absent) in _error_line(capsys)
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"not a checkpoint")
    assert _evaluate(tmp_path, "scheduler=maifs", f"scheduler.maifs.checkpoint={broken}") == 2
    assert str(broken) in _error_line(capsys)


def test_unusable_output_dir_is_found_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    afile = tmp_path / "a_file"
    afile.write_text("x")
    assert _evaluate(tmp_path, f"output.dir={afile}") == EXIT_BAD_INPUT
    assert "output.dir" in _error_line(capsys)
    assert _evaluate(tmp_path, f"output.dir={afile / 'sub'}") == EXIT_BAD_INPUT
    assert "output.dir" in _error_line(capsys)


def test_run_dir_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "a_file"
    afile.write_text("x")
    code = evaluate_cli.main([*QUICK, f"hydra.run.dir={afile}"])
    assert code == EXIT_BAD_INPUT
    assert f"cannot use the path {afile}" in _error_line(capsys)


def test_train_app_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = f"hydra.run.dir={tmp_path / 'run'}"
    assert train_cli.main(["agent.ppo.lr=fast", run]) == EXIT_BAD_INPUT
    assert "agent.ppo.lr=fast" in _error_line(capsys)
    assert train_cli.main(["cluster=no_such_cluster", run]) == EXIT_BAD_INPUT
    assert "no_such_cluster" in _error_line(capsys)


def _as_process(args: list[str], cwd: Path, full: bool) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("HYDRA_FULL_ERROR", None)
    if full:
        env["HYDRA_FULL_ERROR"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "hetsched", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=env,
    )


def test_a_real_process_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    args = ["evaluate", *QUICK, "workload=csv", f"workload.path={tmp_path / 'absent.csv'}"]
    args.append(f"hydra.run.dir={tmp_path / 'run'}")
    proc = _as_process(args, tmp_path, full=False)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "absent.csv" in lines[0], proc.stderr
    full = _as_process(args, tmp_path, full=True)
    assert full.returncode not in (0, 2)
    assert "Traceback" in full.stderr and "TraceError" in full.stderr


@pytest.mark.parametrize(
    ("args", "match"),
    [(["--split", "nope"], "unknown split 'nope'"), (["--scenario", "nope"], "unknown scenario")],
)
@pytest.mark.parametrize("name", ["idle_breakdown", "makespan_job", "job_moves", "clone_gap"])
def test_cell_replay_scripts_name_a_bad_split_or_scenario(
    name: str, args: list[str], match: str
) -> None:
    script = ROOT / "scripts" / f"{name}.py"
    proc = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and match in lines[0] and lines[0].startswith(name), proc.stderr


def test_unknown_command(tmp_path: Path) -> None:
    proc = _as_process(["evalute"], tmp_path, full=False)
    assert proc.returncode == 2 and "unknown command 'evalute'" in proc.stderr


def test_error_types_share_one_base() -> None:
    from hetsched.agents.checkpoint import CheckpointError

    for cls in (FailureSpecError, ClusterSpecError, TraceError, ConfigError, CheckpointError):
        assert issubclass(cls, HetschedError)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: resolve_cluster("sia64"),
            r"unknown cluster preset 'sia64' .*'sia_64'.*Cluster obj",
        ),
        (lambda: resolve_workload("phily"), r"unknown workload preset 'phily' .*'philly'"),
        (lambda: scheduler_factory("gavell"), r"unknown scheduler preset 'gavell' .*'gavel'"),
        (
            lambda: resolve_cluster("custom"),
            r"cluster preset 'custom' needs a value for cluster.path",
        ),
        (
            lambda: resolve_workload("philly", {"num_jobz": 3}),
            r"cannot compose workload preset 'philly' with \['workload.num_jobz=3'\]",
        ),
    ],
)
def test_preset_names_from_python_list_the_choices(call: Callable[[], object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_scheduler_factory_builds_a_fresh_policy_per_call() -> None:
    make = scheduler_factory("las")
    a, b = make(), make()
    assert type(a).__name__ == "LAS" and a is not b
