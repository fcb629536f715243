"""The trained network and its teacher as schedulers of the evaluation runner.

:class:`ActorPolicy` implements the policy protocol (``reset(cluster, workload, throughput,
rng)`` and ``decide(state) -> Allocation``, :mod:`hetsched.baselines.base`) by rebuilding the
training env's round from ``state`` (:class:`hetsched.agents.driver.StateCore`: the same
observations, masks and claim resolution) and letting an *actor* take decision steps until the
env's round-closing rule fires. The round's allocation is what the actor placed, nothing more:
no rule adds, moves or withdraws a placement.

Time advances as in the training env (``advance="event"``): to the next arrival or completion,
or by one round when nothing runs, nothing was placed and no job is still to arrive. A policy
that keeps passing on an idle cluster with waiting jobs stops the run with :class:`PolicyStallError`
after ``max_idle_rounds`` such rounds instead of hanging.

* :class:`MAIFSPolicy` -- the trained network (``scheduler=maifs``), acting as trained.
* :class:`TeacherPolicy` -- the behaviour-cloning teacher (``scheduler=maifs_teacher``), a
  baseline.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from hetsched.agents.config import (
    AGENT_GPU_LEVELS,
    MAX_IDLE_ROUNDS,
    AgentEnvConf,
    MAIFSAgentConf,
    TeacherConf,
)
from hetsched.agents.driver import StateCore
from hetsched.agents.teacher import SJFTeacher
from hetsched.baselines.base import BasePolicy
from hetsched.envs.core import EnvCore
from hetsched.envs.idle import idle_cause
from hetsched.envs.spaces import EnvSettings, LevelSets
from hetsched.resources import CHECKPOINT_DIR
from hetsched.sim.allocation import Allocation
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimState
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

if TYPE_CHECKING:  # torch is imported lazily: the teacher policy runs without it
    from hetsched.agents.network import MAIFSNet

#: The shipped checkpoint of ``scheduler=maifs`` (``hetsched/checkpoints/README.md``).
DEFAULT_CHECKPOINT = CHECKPOINT_DIR / "maifs_default.pt"

Actor = Callable[[EnvCore], NDArray[np.int64]]


class PolicyStallError(RuntimeError):
    """The actor passed for too many rounds on an idle cluster while jobs waited."""


#: How a decision's final step ended: ``none`` (no step: nothing legal), ``pass`` (every agent
#: passed), ``failed`` (claims, none granted: e.g. a gang claim too few nodes made), ``moved``
#: (the step placed or evicted; then nothing was legal, or the round hit its decision-step
#: limit).
LAST_STEPS: tuple[str, ...] = ("none", "pass", "failed", "moved")


class ActorPolicy(BasePolicy):
    """Event-driven policy whose rounds are the env's decision steps (module docstring).

    Args:
        settings: Env settings the actor was trained in (``advance`` must be ``"event"``).
        actor: One action per node for an env core's current decision step.
        name: Scheduler name.
        max_idle_rounds: Rounds in a row the actor may leave an idle cluster idle while jobs
            wait and none is still to arrive before :class:`PolicyStallError` (> 0).
    """

    event_driven = True
    #: How the last decision's final step ended (:data:`LAST_STEPS`), for diagnostics
    #: (:meth:`hetsched.benchmark.runner.FitProbe.idle_by_last_step`).
    last_step: str

    def __init__(
        self, settings: EnvSettings, actor: Actor | None, name: str, max_idle_rounds: int
    ) -> None:
        if settings.advance != "event":
            raise ValueError(
                f"settings.advance={settings.advance!r}: the policy is event-driven, so the env "
                "it was trained in must use advance='event'"
            )
        if isinstance(max_idle_rounds, bool) or not int(max_idle_rounds) > 0:
            raise ValueError(f"max_idle_rounds={max_idle_rounds!r} must be a positive integer")
        self.settings = settings
        self.round_s = settings.round_s
        self.actor = actor
        self.name = name
        self.max_idle_rounds = int(max_idle_rounds)
        self.core: StateCore | None = None
        self.wake_time: float | None = None
        self.decision_steps = 0
        self.last_step = "none"
        self._idle_rounds = 0

    def reset(
        self,
        cluster: Cluster,
        workload: Workload,
        throughput: ThroughputModel,
        rng: np.random.Generator,
    ) -> None:
        """Build the env core for this run's cluster and workload."""
        super().reset(cluster, workload, throughput, rng)
        self.core = StateCore(cluster, workload, throughput, self.settings)
        self.core.bind(workload)
        self.wake_time = None
        self.decision_steps = 0
        self.last_step = "none"
        self._idle_rounds = 0

    def run_stats(self) -> dict[str, float]:
        """``decision_steps``: the actor's decision steps in the run so far."""
        return {"decision_steps": float(self.decision_steps)}

    def idle_cause(self, jobs: NDArray[np.int64], nodes: NDArray[np.int64]) -> str:
        """After :meth:`decide`: what kept waiting ``jobs`` off the free GPUs of ``nodes`` that
        they fit (:func:`hetsched.envs.idle.idle_cause`), for diagnostics."""
        if self.core is None:
            raise RuntimeError("idle_cause() called before reset()")
        return idle_cause(self.core, jobs, nodes)

    def act(self, core: EnvCore) -> NDArray[np.int64]:
        """One action per node for the current decision step."""
        if self.actor is None:
            raise ValueError(f"{type(self).__name__} has no actor; pass actor= or subclass act()")
        return self.actor(core)

    def decide(self, state: SimState) -> Allocation:
        """Decision steps until the round closes; return running jobs plus the placed ones."""
        core = self.core
        if core is None:
            raise RuntimeError("decide() called before reset(); the runner calls reset() first")
        core.begin(state)
        go = core.any_action
        self.last_step = "none"
        while go:
            actions = self.act(core)
            res, placed = core.resolve_claims(actions)
            self.decision_steps += 1
            moved = placed + res.evicted_jobs + res.resized_jobs
            self.last_step = "moved" if moved else "failed" if (actions > 0).any() else "pass"
            go = core.end_step(moved)
        alloc = core.allocation()
        self.wake_time = None
        if alloc.size == 0 and state.active.size and not core._future_arrivals():
            # As the env does: one round at a time (the waiting jobs' features change).
            self._idle_rounds += 1
            if self._idle_rounds > self.max_idle_rounds:
                raise PolicyStallError(
                    f"{self.name} left {state.active.size} waiting jobs on an idle cluster for "
                    f"{self.max_idle_rounds} rounds at t={state.time / 3600:.1f} h; the "
                    "policy never places them (retrain it, or raise max_idle_rounds)"
                )
            self.wake_time = state.time + self.settings.round_s
        else:
            self._idle_rounds = 0
        return alloc


class TeacherPolicy(ActorPolicy):
    """The behaviour-cloning teacher as a scheduler (:class:`SJFTeacher`).

    Args:
        window: Candidate window K.
        order: ``"sjf"``, ``"arrival"`` or ``"node"`` (:class:`SJFTeacher`).
        min_rel_rate: Wait for a faster GPU below this fraction of the best rate.
        fungible: Use CPU levels other than the request.
        long_s: Jobs estimated longer than this (s) go first and wait for a fast GPU.
        round_s: Round length (s).
        max_idle_rounds: See :class:`ActorPolicy`.
        gpu_levels: GPU-count levels (multipliers of an elastic job's request).
        elastic_share: Start elastic jobs within their share of the cluster's GPUs
            (:class:`SJFTeacher`).
        resize_gain_s: Act in the env with resize actions and double a running elastic job
            when that saves more than this many seconds (:class:`SJFTeacher`, step 5). None:
            no resize actions.
        migrate_gain_s: Move a running job to a faster free node when that saves more than
            this many seconds (:class:`SJFTeacher`, step 4); needs ``migrate_speedup``.
        migrate_speedup: Act in the preemptive env with this ``EnvSettings.migrate_speedup``
            (None: the plain env, no evictions).
        share_guard: Claim only at levels that strand no GPU
            (:func:`hetsched.agents.signals.share_guard`).
        window_backfill: Window slots that show waiting jobs which may fit now
            (``EnvSettings.window_backfill``).
        migrate_gangs: With ``migrate_speedup``, gangs may migrate too
            (``EnvSettings.migrate_gangs``).
        migrate_multinode: With ``migrate_gangs``, to several nodes of one type too
            (``EnvSettings.migrate_multinode``).
        share_guard_all: The share guard keeps the share of every free GPU.
        retry_refused: A step of only refused claims keeps the round going
            (``EnvSettings.retry_refused``).
        migrate_elastic: With ``migrate_speedup``, elastic jobs may migrate at another GPU
            count (``EnvSettings.migrate_elastic``).
        reclaim_cores: Grants above a running job's request are lent
            (``EnvSettings.reclaim_cores``).
        evict_ratio: Evict a running job for a waiting one whose run time is this many
            times shorter (:class:`SJFTeacher`, step 4; the preemptive env). None: no such
            evictions.
        evict_wait_s: Only for a job that has waited this long (s), with ``evict_ratio``.
        evict_protect: With ``evict_ratio``, spare the victims with at least this fraction of
            the longest remaining time among the possible victims (None: spare none).
        long_drain: Jobs with a run time over this many times the cluster's drain time go
            first (:class:`SJFTeacher`; None: ``long_s`` alone).
        shrink_share: Evict a running one-node elastic job above this many times its share of
            the cluster's GPUs while a window job waits, to restart it within its share
            (:class:`SJFTeacher`, step 4; the preemptive env). None: no shrinks.
        gang_fastest: A gang goes to the fastest GPU type with room for it
            (:class:`SJFTeacher`, step 3).
    """

    def __init__(
        self,
        window: int = AgentEnvConf.window,
        order: str = TeacherConf.order,
        min_rel_rate: float = TeacherConf.min_rel_rate,
        fungible: bool = AgentEnvConf.fungible,
        long_s: float = TeacherConf.long_s,
        round_s: float = AgentEnvConf.round_s,
        max_idle_rounds: int = MAX_IDLE_ROUNDS,
        gpu_levels: tuple[float, ...] | list[float] = AGENT_GPU_LEVELS,
        elastic_share: bool = TeacherConf.elastic_share,
        resize_gain_s: float | None = TeacherConf.resize_gain_s,
        migrate_gain_s: float | None = TeacherConf.migrate_gain_s,
        migrate_speedup: float | None = AgentEnvConf.migrate_speedup,
        share_guard: bool = AgentEnvConf.share_guard,
        window_backfill: int = AgentEnvConf.window_backfill,
        migrate_gangs: bool = AgentEnvConf.migrate_gangs,
        migrate_multinode: bool = AgentEnvConf.migrate_multinode,
        share_guard_all: bool = AgentEnvConf.share_guard_all,
        retry_refused: bool = AgentEnvConf.retry_refused,
        migrate_elastic: bool = AgentEnvConf.migrate_elastic,
        reclaim_cores: bool = AgentEnvConf.reclaim_cores,
        evict_ratio: float | None = TeacherConf.evict_ratio,
        evict_wait_s: float = TeacherConf.evict_wait_s,
        evict_protect: float | None = TeacherConf.evict_protect,
        long_drain: float | None = TeacherConf.long_drain,
        shrink_share: float | None = TeacherConf.shrink_share,
        gang_fastest: bool = TeacherConf.gang_fastest,
    ) -> None:
        if migrate_gain_s is not None and migrate_speedup is None:
            raise ValueError(
                f"migrate_gain_s={migrate_gain_s!r} needs migrate_speedup (the env's rule for "
                "when a running job may move); set both, or migrate_gain_s=None"
            )
        t = SJFTeacher(
            order=order,
            min_rel_rate=min_rel_rate,
            fungible=fungible,
            long_s=long_s,
            evict_ratio=evict_ratio,
            evict_wait_s=evict_wait_s,
            evict_protect=evict_protect,
            elastic_share=elastic_share,
            resize_gain_s=resize_gain_s,
            migrate_gain_s=migrate_gain_s,
            share_guard=share_guard,
            share_guard_all=share_guard_all,
            long_drain=long_drain,
            shrink_share=shrink_share,
            gang_fastest=gang_fastest,
        )
        settings = EnvSettings(
            window=window,
            window_backfill=window_backfill,
            advance="event",
            round_s=round_s,
            levels=LevelSets(gpu=tuple(gpu_levels)),
            resizable=resize_gain_s is not None,
            preemptive=migrate_speedup is not None
            or evict_ratio is not None
            or shrink_share is not None,
            migrate_speedup=migrate_speedup,
            migrate_gangs=migrate_gangs,
            migrate_multinode=migrate_multinode,
            retry_refused=retry_refused,
            migrate_elastic=migrate_elastic,
            reclaim_cores=reclaim_cores,
        )
        super().__init__(settings, t.act, "maifs_teacher", max_idle_rounds)

    @classmethod
    def for_agent(cls, conf: MAIFSAgentConf) -> TeacherPolicy:
        """The teacher an agent config clones, as a scheduler (its ``teacher`` settings and
        the env settings the teacher reads)."""
        t, e = conf.teacher, conf.env
        return cls(
            e.window,
            t.order,
            t.min_rel_rate,
            e.fungible,
            t.long_s,
            e.round_s,
            gpu_levels=e.gpu_levels,
            elastic_share=t.elastic_share,
            resize_gain_s=t.resize_gain_s if e.resizable else None,
            migrate_gain_s=t.migrate_gain_s if e.migrate_speedup is not None else None,
            migrate_speedup=e.migrate_speedup,
            share_guard=e.share_guard,
            window_backfill=e.window_backfill,
            migrate_gangs=e.migrate_gangs,
            migrate_multinode=e.migrate_multinode,
            share_guard_all=e.share_guard_all,
            retry_refused=e.retry_refused,
            migrate_elastic=e.migrate_elastic,
            reclaim_cores=e.reclaim_cores,
            evict_ratio=t.evict_ratio if e.preemptive else None,
            evict_wait_s=t.evict_wait_s,
            evict_protect=t.evict_protect,
            long_drain=t.long_drain,
            shrink_share=t.shrink_share if e.preemptive else None,
            gang_fastest=t.gang_fastest,
        )


class MAIFSPolicy(ActorPolicy):
    """The trained MAIFS-style network as a scheduler (``scheduler=maifs checkpoint=PATH``).

    The network sees the observations and masks it was trained on (the checkpoint's env
    settings: window, window order, levels, eviction actions) and its actions are resolved by
    the env's claim rules; nothing else decides.

    Args:
        checkpoint: Checkpoint path; None = :data:`DEFAULT_CHECKPOINT`.
        greedy: Argmax actions (False: sample with the run's generator).
        max_idle_rounds: See :class:`ActorPolicy`.
        net: Use this ``(network, agent config)`` pair instead of a file (training-time
            evaluation).
        decision_order: Act under this decision order instead of the checkpoint's
            (``agent.env.decision_order``; None: the checkpoint's).

    Raises:
        hetsched.agents.checkpoint.CheckpointError: If the checkpoint cannot be used (wrong
            env, non-finite weights, retired settings).
        ValueError: If ``decision_order`` is not one of ``DECISION_ORDERS``.
    """

    def __init__(
        self,
        checkpoint: str | Path | None = None,
        greedy: bool = True,
        max_idle_rounds: int = MAX_IDLE_ROUNDS,
        net: tuple[Any, Any] | None = None,
        decision_order: str | None = None,
    ) -> None:
        import dataclasses

        import torch

        from hetsched.agents.acting import env_settings
        from hetsched.agents.checkpoint import load_checkpoint, net_from_checkpoint

        torch.set_num_threads(1)
        self.net: MAIFSNet
        if net is None:
            path = Path(checkpoint) if checkpoint else DEFAULT_CHECKPOINT
            self.net, self.conf = net_from_checkpoint(load_checkpoint(path))
        else:
            self.net, self.conf = net
        if decision_order is not None:
            env = dataclasses.replace(self.conf.env, decision_order=decision_order)
            self.conf = dataclasses.replace(self.conf, env=env)
        self.greedy = bool(greedy)
        super().__init__(env_settings(self.conf.env), None, "maifs", max_idle_rounds)

    def reset(
        self,
        cluster: Cluster,
        workload: Workload,
        throughput: ThroughputModel,
        rng: np.random.Generator,
    ) -> None:
        """Build the env core and check that the observation size matches the network."""
        from hetsched.agents.acting import Acting
        from hetsched.agents.checkpoint import CheckpointError

        super().reset(cluster, workload, throughput, rng)
        assert self.core is not None
        lay, dims = self.core.layout, self.net.dims
        extra = lay.window * (dims.job_extra + dims.level_rates)
        extra += lay.resident_slots * dims.res_extra
        if lay.obs_dim + extra != dims.obs_dim:
            raise CheckpointError(
                f"the checkpoint expects observations of size {dims.obs_dim}, this "
                f"cluster/throughput table gives {lay.obs_dim} (other model table?)"
            )
        if self.core.n_actions != self.net.dims.num_actions:
            raise CheckpointError(
                f"the checkpoint has {self.net.dims.num_actions} actions per node, the env "
                f"settings give {self.core.n_actions} (eviction actions: env.preemptive)"
            )
        self.actor = Acting(self.net, self.conf, greedy=self.greedy, rng=rng)
