"""Typed config of ``scripts/benchmark.py`` (registered in Hydra's ConfigStore as
``benchmark_schema``; the defaults live in ``conf/benchmark.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from hetsched.config import SimSettings, register_configs


@dataclass
class BenchmarkConfig:
    """Top-level config of the benchmark.

    Attributes:
        scheduler: Scheduler name -> preset (``conf/scheduler/``; ``'scheduler=[fifo,sia]'``).
        split: ``train``, ``validation``, ``test``, ``quick`` or ``all``
            (:mod:`hetsched.benchmark.splits`).
        scenarios: Scenario names to run instead of the split's (``null``: the split's).
        seed: Seeds (a list, or one seed).
        runtime_info: Information tracks to run (``exact``, ``noisy``, ``none``); schedulers
            that use no remaining work run the exact track only.
        runtime_sigma: Sigma of the ``noisy`` track's log-normal error (>= 0).
        checkpoints: MAIFS checkpoints to add, each as ``maifs[<file stem>]``.
        checkpoint: The ``maifs`` preset's checkpoint (``null``: the shipped one).
        reference: Scheduler the ratios are taken to.
        n_jobs: Worker processes (joblib).
        resume: Skip cells already finished under ``out_dir``.
        out_dir: Output directory (cells, leaderboard, plots).
        plots: Write the plots.
        bootstrap: Bootstrap replicates of the aggregate intervals.
        cheap: Per-scheduler setting overrides used for the quick selection (``split=quick``
            without a ``scenarios`` list; declared in the leaderboard).
        sim: Engine settings.
    """

    scheduler: Any = MISSING
    split: str = "quick"
    scenarios: list[str] | None = None
    seed: Any = field(default_factory=lambda: [0, 1, 2])
    runtime_info: list[str] = field(default_factory=lambda: ["exact"])
    runtime_sigma: float = 0.5
    checkpoints: list[str] = field(default_factory=list)
    checkpoint: str | None = None
    reference: str = "sia"
    n_jobs: int = 2
    resume: bool = True
    out_dir: str = "outputs/benchmark/quick"
    plots: bool = True
    bootstrap: int = 2000
    cheap: dict[str, Any] = field(default_factory=dict)
    sim: SimSettings = field(default_factory=SimSettings)


def register_benchmark_config() -> None:
    """Register the schema (and the scheduler schemas) in the ConfigStore (idempotent)."""
    register_configs()
    ConfigStore.instance().store(name="benchmark_schema", node=BenchmarkConfig)
