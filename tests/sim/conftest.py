"""Fixtures for the trace tests: a synthetic throughput table with the real model names.

pytest imports this file as the module ``conftest`` (replacing ``tests/conftest.py`` in
``sys.modules``), so the helpers of ``tests/conftest.py`` that tests import with
``from conftest import ...`` are re-exported here.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.throughput import ThroughputModel


def _reexport_root_helpers() -> None:
    root = Path(__file__).resolve().parents[1] / "conftest.py"
    spec = importlib.util.spec_from_file_location("_hetsched_tests_root_conftest", root)
    if spec is None or spec.loader is None:  # pragma: no cover
        return
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    g = globals()
    for key, value in vars(mod).items():
        if key.startswith("_") or key.startswith("pytest_") or key in g:
            continue
        if type(value).__name__ == "FixtureFunctionDefinition" or hasattr(
            value, "_pytestfixturefunction"
        ):
            continue  # fixtures are already visible from tests/conftest.py
        g[key] = value


_reexport_root_helpers()

K = len(GPU_TYPE_NAMES)

GAVEL_NAMES: tuple[str, ...] = (
    *(f"ResNet-18 (batch size {b})" for b in (16, 32, 64, 128, 256)),
    *(f"ResNet-50 (batch size {b})" for b in (16, 32, 64, 128)),
    *(f"Transformer (batch size {b})" for b in (16, 32, 64, 128, 256)),
    *(f"LM (batch size {b})" for b in (5, 10, 20, 40, 80)),
    *(f"Recommendation (batch size {b})" for b in (512, 1024, 2048, 4096, 8192)),
    "A3C",
    "CycleGAN",
)
SIA_NAMES: tuple[str, ...] = (
    "bert",
    "cifar10",
    "deepspeech2",
    "gpt_pmp",
    "imagenet",
    "ncf",
    "yolov3",
)


def make_trace_tm() -> ThroughputModel:
    """33 models named like the shipped table. Throughput of model m on type k with n GPUs:
    ``(1 + m) * (1 + k) * n`` work units/s (so values are easy to check); non-distributed Gavel
    types run on 1 GPU only; gpt_pmp runs only on a100 and rtx2080ti with >= 8 GPUs."""
    models = GAVEL_NAMES + SIA_NAMES
    M = len(models)
    levels = 2 ** np.arange(8)
    base = (1.0 + np.arange(M))[:, None] * (1.0 + np.arange(K))[None, :]
    packed = base[:, :, None] * levels[None, None, :]
    non_dist = [
        models.index(n) for n in models if n.split(" ")[0] in ("Recommendation", "A3C", "CycleGAN")
    ]
    packed[non_dist, :, 1:] = 0.0
    g = models.index("gpt_pmp")
    packed[g] = 0.0
    for t in ("a100", "rtx2080ti"):
        packed[g, GPU_TYPE_NAMES.index(t), 3:] = base[g, GPU_TYPE_NAMES.index(t)] * levels[3:]
    tput = np.stack([packed, 0.8 * packed], axis=-1)
    default_work = np.full(M, np.nan)
    default_work[len(GAVEL_NAMES) :] = 1e5 * (1 + np.arange(len(SIA_NAMES)))
    return ThroughputModel(
        models=models,
        gpu_types=GPU_TYPE_NAMES,
        count_levels=levels,
        tput=tput,
        measured=np.ones_like(tput, dtype=bool),
        pair_iota=np.full((M, M, K), 0.2),
        cpu_alpha=np.zeros(M),
        cpu_ceiling=np.ones(M),
        restart_delay_s=np.full(M, 30.0),
        family=("gavel",) * len(GAVEL_NAMES) + ("sia",) * len(SIA_NAMES),
        work_unit=("steps",) * len(GAVEL_NAMES) + ("samples",) * len(SIA_NAMES),
        default_work=default_work,
    )


def sia_like_cluster() -> Cluster:
    """Sia's 64-GPU heterogeneous cluster (24 t4, 24 rtx2080ti, 16 a100)."""
    return Cluster.from_spec(
        "sia_64",
        [
            {"gpu_type": "t4", "count": 6, "gpus": 4, "cpus": 48, "mem_gib": 192},
            {"gpu_type": "rtx2080ti", "count": 3, "gpus": 8, "cpus": 64, "mem_gib": 384},
            {"gpu_type": "a100", "count": 2, "gpus": 8, "cpus": 256, "mem_gib": 1024},
        ],
    )


def gavel_like_cluster() -> Cluster:
    """36 k80 + 36 p100 + 36 v100 on 4-GPU nodes."""
    return Cluster.from_spec(
        "gavel_108",
        [
            {"gpu_type": t, "count": 9, "gpus": 4, "cpus": 32, "mem_gib": 244}
            for t in ("v100", "p100", "k80")
        ],
    )


@pytest.fixture(scope="session")
def trace_tm() -> ThroughputModel:
    return make_trace_tm()


@pytest.fixture(scope="session")
def sia_cluster() -> Cluster:
    return sia_like_cluster()


@pytest.fixture(scope="session")
def gavel_cluster() -> Cluster:
    return gavel_like_cluster()


@pytest.fixture(scope="session")
def real_tm() -> Any:
    """The shipped throughput table; skips the test if the file is absent."""
    from importlib import resources

    path = Path(str(resources.files("hetsched").joinpath("data/profiles/throughput_table.npz")))
    if not path.is_file():
        pytest.skip("the shipped throughput table is not built yet")
    from hetsched.sim.throughput import default_throughput

    return default_throughput()


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "fixtures" / "traces"
