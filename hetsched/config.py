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
from omegaconf import MISSING, DictConfig, OmegaConf

from hetsched.sim.errors import SettingError
from hetsched.sim.faults import MAX_LOST_ATTEMPTS

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
        reproduction: Reproduction mode, the paper whose simulator to mimic (``gavel``,
            ``sia`` or ``hadar``; :data:`hetsched.sim.throughput.REPRODUCTION`): turns off every
            simulator effect that paper's simulator lacks. ``null``: hetsched's full model.
    """

    round_s: float = 60.0
    max_time_s: float | None = None
    max_idle_rounds: int = 10_000
    failures: FailureSettings = field(default_factory=lambda: FailureSettings())
    checkpoint: CheckpointSettings = field(default_factory=lambda: CheckpointSettings())
    reproduction: str | None = None


@dataclass
class FailureSettings:
    """Node failures (``sim.failures.*``; :class:`hetsched.sim.faults.FailureSpec`).

    Attributes:
        mtbf_h: Mean time between failures of one node, hours; ``null`` = no random failures.
        repair_h: Mean repair time, hours.
        fixed_repair: Repairs take exactly ``repair_h``.
        trace: Failure trace CSV (``node, fail_time_s, repair_s``), used instead of the model
            (not together with ``mtbf_h``).
        max_lost_attempts: Failures in a row that may destroy one job's work (no checkpoint in
            between) before the run stops with an error naming the job.
    """

    mtbf_h: float | None = None
    repair_h: float = 1.0
    fixed_repair: bool = False
    trace: str | None = None
    max_lost_attempts: int = MAX_LOST_ATTEMPTS


@dataclass
class CheckpointSettings:
    """Periodic checkpoints (``sim.checkpoint.*``; :class:`hetsched.sim.faults.CheckpointPolicy`).

    Attributes:
        interval_s: Productive seconds between checkpoints; ``null`` = only on preemption.
        cost_s: Seconds one checkpoint pauses the job (needs ``interval_s``).
    """

    interval_s: float | None = None
    cost_s: float = 0.0


def sim_config_from(sim: Any) -> SimConfig:
    """Build the engine's :class:`~hetsched.sim.engine.SimConfig` from ``cfg.sim``.

    The engine's settings classes check their own fields (``SimConfig``, ``FailureSpec``,
    ``CheckpointPolicy``), so building the config validates every ``sim.*`` setting.

    Raises:
        HetschedError: A ``SettingError`` or ``FailureSpecError`` naming the bad setting.
    """
    from hetsched.sim.engine import SimConfig
    from hetsched.sim.faults import CheckpointPolicy, FailureSpec

    f, c = sim.failures, sim.checkpoint
    spec = FailureSpec(
        mtbf_h=None if f.mtbf_h is None else float(f.mtbf_h),
        repair_h=float(f.repair_h),
        fixed_repair=bool(f.fixed_repair),
        trace=None if f.trace is None else str(f.trace),
        max_lost_attempts=int(f.max_lost_attempts),
    )
    ck = None
    if c.interval_s is not None or float(c.cost_s) != 0:  # cost without interval: an error
        ck = CheckpointPolicy(
            interval_s=None if c.interval_s is None else float(c.interval_s), cost_s=float(c.cost_s)
        )
    return SimConfig(
        round_s=float(sim.round_s),
        max_time_s=float(sim.max_time_s) if sim.max_time_s is not None else float("inf"),
        max_idle_rounds=int(sim.max_idle_rounds),
        checkpoint=ck,
        failures=spec if spec.enabled else None,
        reproduction=None if sim.reproduction is None else str(sim.reproduction),
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
    shares: Any = None  # queue name -> share (a mapping); None = equal shares
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


def unknown_keys(cfg: Any, path: str = "") -> list[str]:
    """Dotted paths of keys that no schema declares, anywhere in a composed config.

    Hydra's ``+key=value`` adds a key even to a typed node (``+sim.roundd=30``); every node that
    was built from a schema dataclass is checked against the dataclass's fields.
    """
    import dataclasses

    out: list[str] = []
    if not isinstance(cfg, DictConfig):
        return out
    typ = OmegaConf.get_type(cfg)
    fields = (
        {f.name for f in dataclasses.fields(typ)}
        if isinstance(typ, type) and dataclasses.is_dataclass(typ)
        else None
    )
    for key in cfg:
        name = str(key)
        where = f"{path}.{name}" if path else name
        if fields is not None and name not in fields:
            out.append(where)
            continue
        node = cfg._get_node(key)
        if isinstance(node, DictConfig):
            out += unknown_keys(node, where)
    return out


def validate_config(cfg: Any) -> None:
    """Check a composed ``evaluate`` config before any work is done.

    Unknown keys (:func:`unknown_keys`), every ``sim.*`` setting (through
    :func:`sim_config_from`) and every scheduler's ``round_s``
    (:func:`hetsched.baselines.base.check_round_s`). Seeds and ``load`` are checked where they
    are resolved (:func:`hetsched.evaluation.resolve_seeds`, :func:`~hetsched.evaluation.with_load`).

    Raises:
        SettingError: Naming the first bad key or value and how to fix it.
    """
    from hetsched.baselines.base import check_round_s

    bad = unknown_keys(cfg)
    if bad:
        raise SettingError(
            f"unknown setting(s) {bad}; check the spelling (python scripts/evaluate.py --cfg job "
            "prints every setting)"
        )
    sim_config_from(cfg.sim)
    sched = cfg.get("scheduler")
    if isinstance(sched, DictConfig):
        for name, node in sched.items():
            if isinstance(node, DictConfig) and "round_s" in node:
                check_round_s(node.round_s, str(name))


def changed_settings(old: Any, new: Any, ignore: tuple[str, ...] = (), path: str = "") -> list[str]:
    """Dotted keys whose values differ between two plain configs (nested dicts).

    Used on ``resume=``: the checkpoint's stored config against the new command line's, so a
    changed learning rate, reward weight or seed is named instead of taken silently.

    Args:
        old: The earlier config (plain dicts and values).
        new: The current config.
        ignore: Top-level keys left out.
        path: Prefix of the keys (for recursion).

    Returns:
        Sorted dotted keys that differ, appear in only one of the two, or change type.
    """
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for k in sorted(set(old) | set(new), key=str):
            if not path and k in ignore:
                continue
            where = f"{path}.{k}" if path else str(k)
            if k not in old or k not in new:
                out.append(where)
            else:
                out += changed_settings(old[k], new[k], ignore, where)
        return out
    return [] if old == new else [path]


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
