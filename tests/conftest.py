"""Shared fixtures: small synthetic throughput models, clusters and workloads with known numbers."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

K = len(GPU_TYPE_NAMES)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-slow", action="store_true", default=False, help="also run tests marked slow"
    )


@pytest.fixture(autouse=True, scope="session")
def _sb3_logdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep Stable-Baselines3's default log folders (one per ``learn``) out of the system temp
    folder: SB3 makes ``SB3-<date>`` there unless ``SB3_LOGDIR`` names one."""
    mp = pytest.MonkeyPatch()
    mp.setenv("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3")))
    yield
    mp.undo()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow") or config.getoption("-m"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def make_tm(
    base: np.ndarray | None = None,
    *,
    scaling: float = 1.0,
    spread_factor: float = 0.5,
    iota: float = 0.25,
    restart_s: float = 30.0,
    cpu_alpha: tuple[float, ...] = (0.0, 0.0),
    node_iota: float = 0.0,
) -> ThroughputModel:
    """Two models ('a', 'b'). ``base[m, k]`` is the 1-GPU rate; n GPUs run at base * n**scaling."""
    if base is None:
        base = np.ones((2, K))
    M = base.shape[0]
    levels = 2 ** np.arange(8)
    packed = base[:, :, None] * (levels[None, None, :] ** scaling)
    spread = packed * np.where(levels > 1, spread_factor, 1.0)[None, None, :]
    tput = np.stack([packed, spread], axis=-1)
    return ThroughputModel(
        models=tuple("abcdefgh"[:M]),
        gpu_types=GPU_TYPE_NAMES,
        count_levels=levels,
        tput=tput,
        measured=np.ones_like(tput, dtype=bool),
        pair_iota=np.full((M, M, K), iota),
        cpu_alpha=np.array(cpu_alpha[:M]),
        cpu_ceiling=np.where(np.array(cpu_alpha[:M]) > 0, 1.5, 1.0),
        restart_delay_s=np.full(M, restart_s),
        family=("gavel",) * M,
        work_unit=("steps",) * M,
        node_iota=node_iota,
    )


def make_cluster(groups: list[dict[str, Any]], name: str = "test") -> Cluster:
    return Cluster.from_spec(name, groups)


def make_workload(
    arrival: list[float],
    work: list[float],
    gpus: list[int],
    *,
    model: list[int] | None = None,
    cpu: float = 4.0,
    mem: float = 16.0,
    queue: list[int] | None = None,
    queue_names: tuple[str, ...] = ("default",),
    name: str = "wl",
    elastic: tuple[list[int], list[int]] | None = None,
) -> Workload:
    J = len(arrival)
    g = np.array(gpus)
    lo, hi = (np.array(elastic[0]), np.array(elastic[1])) if elastic else (g, g)
    return Workload(
        name=name,
        job_id=np.array([f"j{i}" for i in range(J)]),
        arrival=np.array(arrival, dtype=float),
        model=np.array(model if model is not None else [0] * J),
        batch_size=np.full(J, 32),
        work=np.array(work, dtype=float),
        req_gpus=g,
        min_gpus=lo,
        max_gpus=hi,
        cpu_per_gpu=np.full(J, cpu),
        mem_per_gpu=np.full(J, mem),
        queue=np.array(queue if queue is not None else [0] * J),
        queue_names=queue_names,
    )


@pytest.fixture
def tm_factory() -> Callable[..., ThroughputModel]:
    return make_tm


@pytest.fixture
def cluster_factory() -> Callable[..., Cluster]:
    return make_cluster


@pytest.fixture
def workload_factory() -> Callable[..., Workload]:
    return make_workload


def script_module(script: str) -> Any:
    """Import ``scripts/<script>`` as a module (its ``__main__`` block does not run)."""
    path = Path(__file__).resolve().parents[1] / "scripts" / script
    spec = importlib.util.spec_from_file_location(Path(script).stem, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def script_table(script: str, args: list[str]) -> list[dict[str, str]]:
    """Run ``scripts/<script>`` with ``args`` (asserting it exits 0) and return the rows of the
    Markdown table it prints, each as ``{column: stripped cell}``."""
    path = Path(__file__).resolve().parents[1] / "scripts" / script
    proc = subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("|")]
    split = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]
    return [dict(zip(split[0], row, strict=True)) for row in split[2:]]
