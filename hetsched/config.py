"""Typed Hydra config schemas, registered in Hydra's ConfigStore.

YAML files under ``conf/`` are presets only: each extends one of these schemas through its
defaults list (``- /schema/scheduler/fifo@_here_``), so a typo or a wrongly typed override fails
when the config is composed, not deep inside a run.

Scheduler presets live at ``scheduler.<name>`` (package header ``# @package scheduler.<name>``),
so ``scheduler=[fifo,las]`` selects several at once and ``scheduler.fifo.backfill=true`` tunes one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

if TYPE_CHECKING:
    from hetsched.sim.engine import SimConfig

#: The schedulers the main job compares by default (conf/evaluate.yaml's defaults list).
DEFAULT_SCHEDULERS: list[str] = ["maifs", "sia", "hadar", "gavel", "las", "yarn_cs", "fifo"]


@dataclass
class SimSettings:
    """Engine settings (see :class:`hetsched.sim.engine.SimConfig`).

    Attributes:
        round_s: Default round length in seconds (a scheduler's ``round_s`` overrides it).
        max_time_s: Horizon in seconds; ``null`` for none.
        max_idle_rounds: Rounds with waiting jobs and nothing running before a run is stalled.
        failures: Node failures (see :mod:`hetsched.sim.faults`); off by default.
        checkpoint: Periodic job checkpointing; off by default.
    """

    round_s: float = 60.0
    max_time_s: float | None = None
    max_idle_rounds: int = 10_000
    failures: FailureSettings = field(default_factory=lambda: FailureSettings())
    checkpoint: CheckpointSettings = field(default_factory=lambda: CheckpointSettings())


@dataclass
class FailureSettings:
    """Node failures (``sim.failures.*``; :class:`hetsched.sim.faults.FailureSpec`).

    Attributes:
        mtbf_h: Mean time between failures of one node, hours; ``null`` = no random failures.
        repair_h: Mean repair time, hours.
        fixed_repair: Repairs take exactly ``repair_h``.
        trace: Failure trace CSV (``node, fail_time_s, repair_s``), used instead of the model.
    """

    mtbf_h: float | None = None
    repair_h: float = 1.0
    fixed_repair: bool = False
    trace: str | None = None


@dataclass
class CheckpointSettings:
    """Periodic checkpoints (``sim.checkpoint.*``; :class:`hetsched.sim.faults.CheckpointPolicy`).

    Attributes:
        interval_s: Productive seconds between checkpoints; ``null`` = only on preemption.
        cost_s: Seconds one checkpoint pauses the job.
    """

    interval_s: float | None = None
    cost_s: float = 0.0


def sim_config_from(sim: Any) -> SimConfig:
    """Build the engine's :class:`~hetsched.sim.engine.SimConfig` from ``cfg.sim``."""
    from hetsched.sim.engine import SimConfig
    from hetsched.sim.faults import CheckpointPolicy, FailureSpec

    f, c = sim.failures, sim.checkpoint
    spec = FailureSpec(
        mtbf_h=None if f.mtbf_h is None else float(f.mtbf_h),
        repair_h=float(f.repair_h),
        fixed_repair=bool(f.fixed_repair),
        trace=None if f.trace is None else str(f.trace),
    )
    ck = None
    if c.interval_s is not None or float(c.cost_s) != 0:
        ck = CheckpointPolicy(
            interval_s=None if c.interval_s is None else float(c.interval_s), cost_s=float(c.cost_s)
        )
    return SimConfig(
        round_s=float(sim.round_s),
        max_time_s=float(sim.max_time_s) if sim.max_time_s is not None else float("inf"),
        max_idle_rounds=int(sim.max_idle_rounds),
        checkpoint=ck,
        failures=spec if spec.enabled else None,
    )


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
        plots: Also write PNG plots (``plots/``; needs matplotlib).
        tensorboard: Also write TensorBoard scalars and figures (``tb/``; needs tensorboard).
    """

    dir: str | None = None
    jobs: bool = True
    timeline: bool = True
    plots: bool = True
    tensorboard: bool = True


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
        seeds: Alias of ``seed`` (wins when set).
        num_seeds: If set, run this many consecutive seeds from the first given seed.
        load: Load factor: arrival times are divided by it (2.0 = twice the arrival rate).
        skip_done: Skip the run if its output directory already holds a complete results.csv.
        checkpoint: MAIFS checkpoint for ``scheduler=maifs`` (``checkpoint=PATH``); ``null`` =
            the shipped ``checkpoints/maifs_default.pt`` (with its ensemble members).
    """

    cluster: Any = MISSING
    workload: Any = MISSING
    scheduler: Any = MISSING
    seed: Any = 0
    sim: SimSettings = field(default_factory=SimSettings)
    output: OutputSettings = field(default_factory=OutputSettings)
    throughput_table: str | None = None
    progress: bool = True
    seeds: Any = None
    num_seeds: int | None = None
    load: float = 1.0
    skip_done: bool = False
    checkpoint: str | None = None


def register_configs() -> None:
    """Register every schema in Hydra's ConfigStore (idempotent)."""
    cs = ConfigStore.instance()
    cs.store(name="evaluate_schema", node=EvaluateConfig)
    cs.store(group="schema/scheduler", name="fifo", node=FIFOConf)
    cs.store(group="schema/scheduler", name="las", node=LASConf)
    cs.store(group="schema/scheduler", name="yarn_cs", node=YarnCSConf)
    # -- more scheduler schemas (one block per module, imported here to avoid import cycles) --
    from hetsched.baselines.hadar import HadarConf

    cs.store(group="schema/scheduler", name="hadar", node=HadarConf)
    from hetsched.baselines.pollux import PolluxConf
    from hetsched.baselines.sia import SiaConf

    cs.store(group="schema/scheduler", name="sia", node=SiaConf)
    cs.store(group="schema/scheduler", name="pollux", node=PolluxConf)
    from hetsched.baselines.srpt import SRPTConf

    cs.store(group="schema/scheduler", name="srpt", node=SRPTConf)
    from hetsched.baselines.gavel import register_gavel_configs

    register_gavel_configs()
    from hetsched.agents.config import register_agent_configs

    register_agent_configs()


register_configs()
