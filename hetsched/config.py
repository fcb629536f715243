"""Typed Hydra config schemas, registered in Hydra's ConfigStore.

YAML files under ``conf/`` are presets only: each extends one of these schemas through its
defaults list (``- /schema/scheduler/fifo@_here_``), so a typo or a wrongly typed override fails
when the config is composed, not deep inside a run.

Scheduler presets live at ``scheduler.<name>`` (package header ``# @package scheduler.<name>``),
so ``scheduler=[fifo,las]`` selects several at once and ``scheduler.fifo.backfill=true`` tunes one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

#: The simple schedulers the main job compares by default.
DEFAULT_SCHEDULERS: list[str] = ["fifo", "las", "yarn_cs"]


@dataclass
class SimSettings:
    """Engine settings (see :class:`hetsched.sim.engine.SimConfig`).

    Attributes:
        round_s: Default round length in seconds (a scheduler's ``round_s`` overrides it).
        max_time_s: Horizon in seconds; ``null`` for none.
        max_idle_rounds: Rounds with waiting jobs and nothing running before a run is stalled.
    """

    round_s: float = 60.0
    max_time_s: float | None = None
    max_idle_rounds: int = 10_000


@dataclass
class FIFOConf:
    """:class:`hetsched.baselines.heuristics.FIFO`."""

    _target_: str = "hetsched.baselines.heuristics.FIFO"
    backfill: bool = False
    round_s: float = 60.0


@dataclass
class LASConf:
    """:class:`hetsched.baselines.heuristics.LAS` (Tiresias-like)."""

    _target_: str = "hetsched.baselines.heuristics.LAS"
    thresholds_gpu_h: list[float] = field(default_factory=lambda: [1.0, 10.0])
    round_s: float = 60.0


@dataclass
class YarnCSConf:
    """:class:`hetsched.baselines.heuristics.YarnCS`."""

    _target_: str = "hetsched.baselines.heuristics.YarnCS"
    shares: dict[str, float] | None = None
    round_s: float = 60.0


@dataclass
class OutputSettings:
    """What the evaluation writes.

    Attributes:
        dir: Output directory; ``null`` uses Hydra's run directory.
        jobs: Also write per-job records (``jobs.csv``).
        timeline: Also write the per-round cluster timeline (``timeline.csv``).
    """

    dir: str | None = None
    jobs: bool = True
    timeline: bool = True


@dataclass
class EvaluateConfig:
    """Top-level config of ``scripts/evaluate.py`` (defaults list in ``conf/evaluate.yaml``).

    Attributes:
        cluster: A cluster preset (``conf/cluster/``), instantiated with ``_target_``.
        workload: A workload preset (``conf/workload/``), a ``_partial_`` factory called with
            ``throughput``, ``cluster`` and ``rng``.
        scheduler: Mapping of scheduler name to preset (``conf/scheduler/``).
        seed: One seed or a list of seeds; every scheduler sees the same workload per seed.
        throughput_table: Path of a throughput table ``.npz``; ``null`` = the shipped one.
        progress: Show a progress bar.
    """

    cluster: Any = MISSING
    workload: Any = MISSING
    scheduler: Any = MISSING
    seed: Any = 0
    sim: SimSettings = field(default_factory=SimSettings)
    output: OutputSettings = field(default_factory=OutputSettings)
    throughput_table: str | None = None
    progress: bool = True


def register_configs() -> None:
    """Register every schema in Hydra's ConfigStore (idempotent)."""
    cs = ConfigStore.instance()
    cs.store(name="evaluate_schema", node=EvaluateConfig)
    cs.store(group="schema/scheduler", name="fifo", node=FIFOConf)
    cs.store(group="schema/scheduler", name="las", node=LASConf)
    cs.store(group="schema/scheduler", name="yarn_cs", node=YarnCSConf)


register_configs()
