"""Bad input through the user-facing entry points: each gets one clear error naming what is wrong.

Trace files, cluster specs and failure traces have their own detailed cases in tests/sim; here the
same mistakes arrive the way a user makes them, through Hydra overrides and the evaluate app.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException, InstantiationException
from hydra.utils import instantiate

from hetsched.config import sim_config_from
from hetsched.envs.presets import resolve_cluster, resolve_workload, scheduler_factory
from hetsched.resources import CONF_DIR
from hetsched.sim.errors import ClusterSpecError, HetschedError
from hetsched.sim.faults import FailureSpecError

ROOT = Path(__file__).resolve().parent.parent
CONF = CONF_DIR


def _compose(overrides: list[str]):  # type: ignore[no-untyped-def]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("evaluate", overrides=overrides)


@pytest.mark.parametrize(
    "override",
    [
        "sim.round_s=fast",
        "sim.failures.mtbf_h=often",
        "sim.checkpoint.cost_s=[1,2]",
        "sim.no_such_field=1",
        "cluster=no_such_cluster",
        "workload=no_such_workload",
    ],
)
def test_bad_overrides_fail_at_composition(override: str) -> None:
    with pytest.raises(ConfigCompositionException):
        _compose([override])


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ("sim.failures.mtbf_h=-3", "mtbf_h=-3"),
        ("sim.failures.repair_h=0", "repair_h=0"),
        ("sim.checkpoint.interval_s=0", "interval_s=0"),
        ("sim.checkpoint.cost_s=-1", "cost_s=-1"),
        ("sim.failures.trace=/no/such/failures.csv", "does not exist"),
    ],
)
def test_bad_failure_values_name_the_field(override: str, match: str) -> None:
    cfg = _compose([override])
    with pytest.raises(FailureSpecError, match=match):
        spec = sim_config_from(cfg.sim).failures
        if spec is not None:
            spec.build(4, 0)


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
def test_bad_cluster_yaml_names_the_field(tmp_path: Path, body: str, match: str) -> None:
    p = tmp_path / "c.yaml"
    p.write_text(body)
    cfg = _compose(["cluster=custom", f"cluster.path={p}"])
    with pytest.raises(InstantiationException) as e:
        instantiate(cfg.cluster)
    assert isinstance(e.value.__cause__, ClusterSpecError)
    assert match in str(e.value) and str(p) in str(e.value)


def test_missing_csv_trace_is_a_clear_error_from_the_app(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "evaluate.py"),
            "scheduler=fifo",
            "workload=csv",
            f"workload.path={tmp_path / 'absent.csv'}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    assert "absent.csv" in proc.stderr
    assert not (tmp_path / "run" / "results.csv").exists()


def test_error_types_share_one_base() -> None:
    assert issubclass(FailureSpecError, HetschedError)
    assert issubclass(ClusterSpecError, HetschedError)


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
