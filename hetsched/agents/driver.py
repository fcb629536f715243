"""The training env loop and its twin that runs inside :class:`Simulator.run` (same features).

Training and evaluation share one piece of machinery, :class:`hetsched.envs.core.EnvCore`:

* :class:`TeamEnv` is the training env: an ``EnvCore`` over its own simulator, stepped with one
  action per node exactly as :meth:`hetsched.envs.cluster_env.ClusterParallelEnv.step` does
  (claims resolved by :meth:`EnvCore.resolve_claims`, rounds closed by
  :meth:`EnvCore.end_decision`, the same named reward components). It skips the PettingZoo
  dict plumbing only (the agent works on ``(N, D)`` arrays).
* :class:`StateCore` is an ``EnvCore`` whose simulator is a read-only view of a
  :class:`~hetsched.sim.engine.SimState`. :class:`hetsched.agents.policy.ActorPolicy` uses it to
  rebuild, inside ``decide(state)``, the very observations, masks and claim resolution the
  agent saw in training, then returns the round's allocation instead of advancing time.

Both use ``advance="event"``: a non-preemptive agent's decision can only change at an arrival or
a completion, so the policy declares ``event_driven`` and the engine jumps to the next event, as
the env does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hetsched.envs.cluster_env import reward_parts
from hetsched.envs.core import EnvCore
from hetsched.envs.features import build_job_table
from hetsched.envs.presets import WorkloadFactory
from hetsched.envs.spaces import EnvSettings
from hetsched.sim.allocation import Allocation
from hetsched.sim.cluster import Cluster
from hetsched.sim.cluster_draw import ClusterDraw
from hetsched.sim.engine import DONE, PENDING, SimState
from hetsched.sim.errors import TraceError
from hetsched.sim.metrics import compute_metrics
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

#: Clusters drawn per episode before :meth:`TeamEnv.reset` gives up (``agent.cluster_draw``).
DRAW_TRIES = 20

#: Env id (and version) the agent is trained on; stored in checkpoints and checked on load.
ENV_ID = "hetsched/Cluster-v0"
#: The same with eviction actions (``agent.env.preemptive=true``).
PREEMPT_ENV_ID = "hetsched/ClusterPreempt-v0"


@dataclass
class StepOut:
    """Outcome of one :meth:`TeamEnv.step`.

    Attributes:
        reward: Team reward.
        parts: Named reward components (their sum is ``reward``).
        dt_s: Simulated seconds the step advanced.
        done: Episode over (every job finished, horizon reached, or stalled).
        placed: Jobs placed by the step.
        conflicts: Lost or unfilled claims.
    """

    reward: float
    parts: dict[str, float]
    dt_s: float
    done: bool
    placed: int
    conflicts: int


class TeamEnv:
    """The multi-agent env on arrays: ``(N, D)`` observations, ``(N, A)`` masks, a team reward.

    Args:
        cluster: The cluster.
        workload: A workload or a factory called as ``f(throughput=, cluster=, rng=)``.
        throughput: Ground-truth throughput model.
        settings: Env settings (the agent uses ``advance="event"``).
        max_steps: Steps after which an episode is truncated.
        draw: Cluster-shape randomisation: a :class:`ClusterDraw` and the share of episodes
            (in [0, 1]) played on a cluster drawn from it instead of ``cluster`` (the episode's
            workload is then drawn for that cluster). None: always ``cluster``.
    """

    def __init__(
        self,
        cluster: Cluster,
        workload: Workload | WorkloadFactory,
        throughput: ThroughputModel,
        settings: EnvSettings,
        max_steps: int = 20_000,
        draw: tuple[ClusterDraw, float] | None = None,
    ) -> None:
        self._args = (workload, throughput, settings)
        self._own = EnvCore(cluster, workload, throughput, settings)
        self.core = self._own
        self.z = 3600.0 * cluster.num_gpus / 8.0
        self.weights = settings.reward_weights
        self.max_steps = max_steps
        self.steps = 0
        self.draw = draw

    @property
    def num_agents(self) -> int:
        """Agents (nodes) N."""
        return self.core.N

    def reset(self, rng: np.random.Generator) -> None:
        """Start an episode (a new workload from the factory, drawn with ``rng``; with
        ``draw``, first the cluster: a drawn one with the set probability)."""
        self.core = self._own
        self.steps = 0
        if self.draw is not None and rng.random() < self.draw[1]:
            self.core = self._drawn_core(rng)
        else:
            self.core.reset(rng)
        self.z = 3600.0 * self.core.cluster.num_gpus / 8.0

    def _drawn_core(self, rng: np.random.Generator) -> EnvCore:
        """A core reset on a drawn cluster that can host the episode's workload: a draw on
        which some job could never run (it asks more CPU cores per GPU than any node of a type
        it allows has, or no type it allows and runs on has its GPUs) is drawn again, up to :data:`DRAW_TRIES` times."""
        assert self.draw is not None
        err: TraceError | None = None
        for _ in range(DRAW_TRIES):
            core = EnvCore(self.draw[0](rng), *self._args)
            try:
                core.reset(rng)
            except TraceError as e:
                err = e
                continue
            if _hosts_every_job(core):
                return core
        raise TraceError(
            f"agent.cluster_draw: {DRAW_TRIES} drawn clusters could not host the workload "
            f"(last: {err}); widen cpus_per_gpu, mem_gib_per_gpu or total_gpus"
        )

    def observe(self) -> tuple[NDArray[np.float32], NDArray[np.int8]]:
        """Observations ``(N, D)`` float32 and action masks ``(N, A)`` int8."""
        return self.core.observations(), self.core.ma.mask.copy()

    def step(self, actions: NDArray[np.int64]) -> StepOut:
        """One decision step of every agent (same rules and reward as the PettingZoo env)."""
        core = self.core
        assert core.sim is not None
        t0 = core.sim.time
        _, stats = core.decision_step_of(actions)
        self.steps += 1
        parts = reward_parts(stats, self.weights, self.z)
        done = core.done or core.stalled or self.steps >= self.max_steps
        return StepOut(
            reward=float(sum(parts.values())),
            parts=parts,
            dt_s=float(core.sim.time - t0),
            done=bool(done),
            placed=stats.placed,
            conflicts=stats.conflicts + stats.gang_failed,
        )

    def metrics(self) -> dict[str, float]:
        """Episode metrics (:func:`hetsched.sim.metrics.compute_metrics`) of the finished run."""
        assert self.core.sim is not None and self.core.wl is not None
        res = self.core.sim.result()
        row = compute_metrics(res, scheduler="maifs", workload="", cluster="", seed=0)
        return {k: float(v) for k, v in row.items() if isinstance(v, int | float)}


def _hosts_every_job(core: EnvCore) -> bool:
    """Every job can run at its smallest GPU count on GPUs of one type it allows: the type has
    that many GPUs in all (gangs span nodes of one type) and the model runs on it (a positive
    isolated throughput, packed or spread)."""
    wl, cl, tm = core.wl, core.cluster, core.tm
    assert wl is not None
    T = wl.allowed_types.shape[1]
    per_type = np.bincount(cl.node_type, weights=cl.node_gpus, minlength=T)
    m, t, g = wl.model[:, None], np.arange(T)[None, :], wl.min_gpus[:, None]
    runs = (tm.isolated(m, t, g, False) > 0) | (tm.isolated(m, t, g, True) > 0)
    ok = wl.allowed_types & runs & (per_type[None, :] >= g)
    return bool(ok.any(axis=1).all())


class _StateView:
    """The few simulator attributes :class:`EnvCore` reads, taken from a :class:`SimState`."""

    def __init__(self, st: SimState) -> None:
        self.time = st.time
        self.current = st.current
        self.remaining = st.remaining
        self.attained_gpu_s = st.attained_gpu_s
        self.status = st.status
        self._active = st.active
        self.done = False

    def active_jobs(self) -> NDArray[np.int64]:
        return self._active

    def pending_jobs(self) -> NDArray[np.int64]:
        a = self._active
        return a[self.status[a] == PENDING]


class StateCore(EnvCore):
    """An :class:`EnvCore` bound to the simulator state handed to a policy.

    ``begin(state)`` rebuilds the round exactly as the training env starts one (free resources,
    resident slots, candidate window, masks); ``resolve_claims`` places jobs as in training; the
    round's result is :meth:`EnvCore.round_allocation` (nothing advances here).
    """

    def bind(self, workload: Workload) -> None:
        """Attach the run's workload (computes the per-job table once)."""
        self.wl = workload
        self.J = workload.num_jobs
        self.jt = build_job_table(workload, self.tm, self.cluster, self.cfg.levels)
        self._job_flags()  # per run, across rounds
        self._engine_compiled = False  # a state view, not a simulator: no compiled rounds

    def begin(self, state: SimState) -> None:
        """Start a round from ``state`` (the policy's ``decide`` input)."""
        assert self.wl is not None
        self.sim = _StateView(state)  # type: ignore[assignment]
        self.node_up = np.asarray(state.node_up, dtype=bool).copy()
        self._n_done = int((state.status == DONE).sum())
        self._admitted = int(np.searchsorted(self.wl.arrival, state.time, side="right"))
        self._start_round()

    def end_step(self, placed: int) -> bool:
        """Count a decision step; return whether the round goes on (same rule as the env).

        Args:
            placed: Jobs the step placed, evicted or resized.
        """
        self.decision_step += 1
        refused, self.refused_step = self.refused_step, False  # EnvSettings.retry_refused
        return (
            (placed > 0 or refused)
            and self.any_action
            and self.decision_step < self.cfg.max_decisions_per_round
        )

    def allocation(self) -> Allocation:
        """Running jobs plus everything placed this round."""
        return self.round_allocation()
