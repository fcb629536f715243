"""Schedulers that act through the env's machinery inside :meth:`Simulator.run` (policy protocol).

:class:`CoreActorPolicy` implements ``reset(cluster, workload, throughput, rng)`` and
``decide(state) -> Allocation`` (:mod:`hetsched.baselines.base`) by rebuilding the training env's
round from ``state`` with :class:`hetsched.agents.driver.StateCore` and letting an *actor* take
decision steps until the env's round-closing rule fires; the result is the round's allocation.
So the trained agent is evaluated by the same runner (:mod:`hetsched.evaluation`) on the same
simulator as every baseline, on exactly the observations and masks it was trained on.

:class:`MAIFSPolicy` is the trained MAIFS-style agent (greedy actions by default);
:class:`TeacherPolicy` is the behaviour-cloning teacher (:mod:`hetsched.agents.teacher`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.agents.driver import StateCore
from hetsched.agents.teacher import SJFTeacher
from hetsched.baselines.base import BasePolicy
from hetsched.envs.core import EnvCore
from hetsched.envs.spaces import EnvSettings
from hetsched.sim.allocation import Allocation
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimState
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

#: The shipped checkpoint, resolved relative to the repository (``<repo>/checkpoints``).
DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[2] / "checkpoints" / "maifs_default.pt"

Actor = Callable[[EnvCore], NDArray[np.int64]]


class CoreActorPolicy(BasePolicy):
    """Non-preemptive, event-driven policy whose rounds are env decision steps.

    Args:
        settings: Env settings the actor was built for (``advance`` must be ``"event"``).
        actor: Maps the env core (window, masks, features) to one action per node, shape (N,).
        name: Scheduler name.
    """

    event_driven = True

    def __init__(
        self, settings: EnvSettings, actor: Actor | None = None, name: str = "core"
    ) -> None:
        if settings.advance != "event":
            raise ValueError(
                f"settings.advance={settings.advance!r}: the policy is event-driven, so the env "
                "it was trained in must use advance='event'"
            )
        self.settings = settings
        self.round_s = settings.round_s
        self.actor = actor
        self.name = name
        self.core: StateCore | None = None
        self.steps = 0
        self.fallbacks = 0

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
        self.steps = 0
        self.fallbacks = 0

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
        go = core.any_legal
        while go:
            _, placed = core.resolve_claims(self.act(core))
            self.steps += 1
            go = core.end_step(placed)
        if core.any_legal and core.round_allocation().size == 0:
            # Idle-cluster fallback: with nothing running and nothing placed, an event-driven
            # greedy policy would wait forever (e.g. a gang claim that did not fill), so the
            # teacher places this round (counted in ``fallbacks``).
            core.resolve_claims(SJFTeacher().act(core))
            self.fallbacks += 1
        return core.allocation()


class TeacherPolicy(CoreActorPolicy):
    """The behaviour-cloning teacher as a scheduler (:class:`SJFTeacher`).

    Args:
        window: Candidate window K.
        order: ``"sjf"`` or ``"arrival"``.
        min_rel_rate: Wait for a faster GPU below this fraction of the best rate.
        fungible: Use CPU levels other than the request.
        long_s: Jobs estimated longer than this (s) go first and wait for a fast GPU.
        round_s: Round length (s).
    """

    def __init__(
        self,
        window: int = 8,
        order: str = "sjf",
        min_rel_rate: float = 0.5,
        fungible: bool = True,
        long_s: float = 3 * 3600.0,
        round_s: float = 60.0,
    ) -> None:
        t = SJFTeacher(order=order, min_rel_rate=min_rel_rate, fungible=fungible, long_s=long_s)
        super().__init__(
            EnvSettings(window=window, advance="event", round_s=round_s), t.act, "maifs_teacher"
        )


class MAIFSPolicy(CoreActorPolicy):
    """The trained MAIFS-style agent as a scheduler (``scheduler=maifs checkpoint=...``).

    Args:
        checkpoint: Checkpoint path; None = :data:`DEFAULT_CHECKPOINT`.
        greedy: Argmax actions (False: sample with the run's generator).
        conflict: Override the checkpoint's conflict mode (``ordered``, ``maxsum``, ``none``).
        long_guard_s: Turn on the long-job guard with this threshold (s; see
            :func:`hetsched.agents.agent.agent_masks`); None = the checkpoint's setting.
        net: Use this network and config instead of a file (training-time evaluation).
    """

    def __init__(
        self,
        checkpoint: str | Path | None = None,
        greedy: bool = True,
        conflict: str | None = None,
        long_guard_s: float | None = None,
        net: tuple[Any, Any] | None = None,
    ) -> None:
        import torch

        from hetsched.agents.agent import env_settings, load_checkpoint, net_from_checkpoint

        torch.set_num_threads(1)
        if net is None:
            path = Path(checkpoint) if checkpoint else DEFAULT_CHECKPOINT
            ck = load_checkpoint(path)
            self.net, self.conf = net_from_checkpoint(ck)
        else:
            self.net, self.conf = net
        if long_guard_s is not None:
            self.conf.env.long_guard_s = float(long_guard_s)
        self.greedy = greedy
        self.conflict = conflict
        super().__init__(env_settings(self.conf.env), None, "maifs")

    def reset(
        self,
        cluster: Cluster,
        workload: Workload,
        throughput: ThroughputModel,
        rng: np.random.Generator,
    ) -> None:
        """Build the env core and check that the observation size matches the network."""
        from hetsched.agents.agent import Acting, CheckpointError

        super().reset(cluster, workload, throughput, rng)
        assert self.core is not None
        if self.core.layout.obs_dim != self.net.dims.obs_dim:
            raise CheckpointError(
                f"the checkpoint expects observations of size {self.net.dims.obs_dim}, this "
                f"cluster/throughput table gives {self.core.layout.obs_dim} (other model table?)"
            )
        self.actor = Acting(
            self.net, self.conf, greedy=self.greedy, rng=rng, conflict=self.conflict
        )
