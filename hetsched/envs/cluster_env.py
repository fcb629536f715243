"""PettingZoo ``ParallelEnv`` over the simulator: one agent per node (``hetsched/Cluster-v0``).

See :class:`ClusterParallelEnv` for the spaces, the decision rules and the reward.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
from gymnasium.utils import seeding
from numpy.typing import NDArray
from pettingzoo import ParallelEnv
from pettingzoo.utils import parallel_to_aec
from pettingzoo.utils.env import AECEnv

from hetsched.envs.core import ClaimResult, EnvCore, StepStats
from hetsched.envs.presets import (
    WorkloadFactory,
    as_failure_spec,
    env_workload,
    resolve_cluster,
    resolve_throughput,
)
from hetsched.envs.render import render_core
from hetsched.envs.rewards import REWARD_KEYS, reward_parts
from hetsched.envs.spaces import EnvSettings, LevelSets, RewardWeights
from hetsched.sim.allocation import Allocation
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimResult
from hetsched.sim.faults import FailureSpec
from hetsched.sim.metrics import compute_metrics
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

#: Default preset overrides of the small default workload (fast checkers and examples).
DEFAULT_WORKLOAD_KWARGS: dict[str, Any] = {"num_jobs": 48}

#: Numeric info keys every agent gets at reset and at every step (fixed order and shapes).
INFO_KEYS: tuple[str, ...] = (
    *REWARD_KEYS,  # the weighted reward terms (hetsched/envs/rewards.py), their sum the reward
    "jobs_in_system_s",
    "rounds_advanced",
    "placed_jobs",
    "conflicts",
    "gang_failed",
    "invalid_actions",
    "evicted_jobs",
    "resized_jobs",
    "invalid_action",
    "conflict",
    "placed",
    "num_legal_actions",
    "sim_time_s",
    "decision_step",
    "stalled",
    "unfinished_jobs",
    "no_progress_steps",
    "action_mask",
)


#: What :meth:`ClusterParallelEnv.step` returns: observations, rewards, terminations,
#: truncations and infos, each keyed by agent.
StepReturn = tuple[
    dict[str, dict[str, NDArray[Any]]],
    dict[str, float],
    dict[str, bool],
    dict[str, bool],
    dict[str, dict[str, Any]],
]


class ClusterParallelEnv(ParallelEnv[str, dict[str, NDArray[Any]], int]):
    """Multi-agent cluster scheduling: each node is an agent that claims jobs for itself.

    **Agents.** ``node_0 .. node_{N-1}``, constant for the episode. A full (or down) node stays
    an agent with only the no-op legal. Every live agent acts at every step; a missing action is
    a no-op.

    **Observation** per agent: ``Dict({"observation": Box(0, 1, (D,), float32),
    "action_mask": Box(0, 1, (A,), int8)})``, where the observation is, slice by slice (see
    :mod:`hetsched.envs.features` for every feature and :meth:`observation_slices` for the
    offsets):

    * own node (``T + 7 + R (M + 9)``): GPU-type one-hot (T = 7 catalogue types), free/total
      GPUs, node size, free CPU, free memory, up flag, resident count, interference; R padded
      slots of the node's jobs (model one-hot over the M throughput-table models, GPUs, CPUs,
      memory held, CPU/memory ratio to request, remaining work, attained service, new flag);
    * candidate window (``K (14 + M + L_c + L_m)``): the same K waiting jobs in the same global
      order (arrival, or least attained service; with ``window_backfill`` the last slots show
      the next jobs that may fit now) for every agent: requested/min/max GPUs,
      elasticity, model one-hot, sensitivity (phi at each CPU and memory level), waiting time,
      attained service, estimated remaining time, then for this node: CPU and memory request vs
      the node's per-GPU share, isolated throughput on this node's type relative to the fastest
      allowed type, type allowed, any legal action, fits at 1x;
    * global (``T + 6``): queue length, placed jobs, utilisation per GPU type, free GPUs,
      round progress, finished and arrived fractions.

    All features lie in [0, 1]. ``state()`` is a flat float32 vector (all node blocks, the
    node-independent window features plus per-type relative throughput and per-type "type
    allowed" flags, the global block). Each resident slot and each window slot starts with a
    ``present`` flag (0 for an empty, all-zero slot).

    **Action** per agent: ``Discrete(A)``, ``A = 1 + K L_g L_c L_m`` (289 with the defaults);
    0 is the no-op, ``a >= 1`` claims window slot ``k`` at GPU level ``g``, CPU level ``c`` and
    memory level ``m`` (:class:`hetsched.envs.spaces.ActionCodec`). The mask allows a claim iff
    the slot holds a job, its GPU-type constraint admits the node, the GPUs/CPU/memory fit the
    node's free capacity (or, for a job larger than what the node can host, the node has
    capacity and its GPU type has enough in total for a same-type gang), memory stays above the
    job's floor and the throughput at that size is positive. An illegal or malformed action
    becomes a no-op and is counted (``infos[a]["invalid_action"]``).

    **Eviction actions** (``preemptive=True``, registered as ``hetsched/ClusterPreempt-v0``):
    ``A = 1 + K L_g L_c L_m + R`` (293 with the defaults); action ``A - R + r`` evicts the job
    in the agent's resident slot ``r``. Legal iff the slot holds a job that was running when
    the round started, the node is up and a job waits in the window (with ``migrate_speedup``,
    or the job could move to a free node that runs it that many times as fast; a gang only
    with ``migrate_gangs``). Claims are resolved first, then evictions: the job leaves every
    node that holds it, its resources are free at the next decision step and it rejoins the
    queue with its progress (the engine charges its restart delay when it runs again). A step that evicts
    keeps the round going; a round is shown to the agents while an eviction is legal even if
    no placement is. ``infos[a]["evicted_jobs"]`` counts the jobs a step evicted. The
    observation is the same as without eviction actions.

    **Resize actions** (``resizable=True``, either id): R more actions at the end; action
    ``A - R + r`` doubles the GPUs of the elastic job in resident slot ``r`` on the agent's node
    when no waiting job could use them (rules in :mod:`hetsched.envs.resizes`; the engine
    charges the job's restart delay). ``infos[a]["resized_jobs"]`` counts the jobs resized.

    **Rounds and conflicts.** See :mod:`hetsched.envs.core`: several decision steps per round;
    time advances when a step places nothing (with ``retry_refused``, a step of only refused
    gang claims masks them and the agents decide again), nothing more fits, or after
    ``max_decisions_per_round`` steps; conflicting single-node claims go to the lowest agent
    index (``conflict_rule``), multi-node jobs are filled from same-type claims.

    **Reward** (team, identical for all agents): ``reward_jobs + reward_makespan +
    reward_conflict + reward_invalid + reward_progress``
    (:class:`~hetsched.envs.spaces.RewardWeights`; the progress shaping term is off by default),
    each component in the infos. **Episode end:** terminated when every job has finished; truncated
    after ``max_cycles`` steps (never after step 1), at ``max_time_s``, or ``stalled``: when
    waiting jobs can never be placed, or after ``stall_steps`` consecutive decision steps
    without progress (a legal action was offered, yet nothing was placed and time advanced with
    nothing running). ``infos[a]["unfinished_jobs"]`` counts the jobs not finished and
    ``infos[a]["no_progress_steps"]`` the current run of steps without progress.

    **Masks** handed out (``obs[a]["action_mask"]``, ``infos[a]["action_mask"]``,
    :meth:`action_masks`) are copies: writing into them does not change the env. Calling
    :meth:`step`, :meth:`step_allocation`, :meth:`state` or :meth:`action_masks` before the
    first :meth:`reset` raises :class:`~hetsched.envs.core.EnvNotResetError`.

    **Version history.** ``hetsched/Cluster-v0`` (hetsched 0.1.0): first release. Later
    changes keep the spaces, dynamics and rewards: speed-ups; a stall is also detected with
    ``skip_idle=False``; additions that change nothing by default (the progress shaping term
    ``reward_weights={"progress": w}`` with info key ``reward_progress``; the window orders
    ``"sjf"`` and ``"typed"``; ``window_backfill``; ``migrate_gangs``; ``migrate_multinode``; ``retry_refused``; ``migrate_elastic``; ``reclaim_cores``); the
    info key ``evicted_jobs`` (always 0 here) with ``hetsched/ClusterPreempt-v0`` (2026-11-26, this env
    with ``preemptive=True``, first version ``-v0``); the stall detector ``stall_steps`` (it
    truncates only episodes without progress for that many steps) with the info keys
    ``unfinished_jobs`` and ``no_progress_steps``. The suffix is bumped whenever spaces,
    dynamics or rewards change (MAIFS checkpoints record the env id and observation layout and
    refuse a mismatch).

    Args:
        cluster: A Cluster, a preset name (``hetsched/conf/cluster``) or a node-spec mapping.
        workload: A Workload, a preset name (``hetsched/conf/workload``) or a factory
            ``f(throughput=, cluster=, rng=)``; a factory draws a new workload each reset.
        throughput: Throughput model, a table path, or None for the shipped table.
        seed: Seed of the first reset when ``reset`` gets none.
        window: Candidate window K.
        resident_slots: Resident-job slots R per node.
        levels: Level sets (:class:`~hetsched.envs.spaces.LevelSets` or a mapping).
        reward_weights: Reward weights (a :class:`RewardWeights` or a mapping).
        max_cycles: Truncation after this many steps (>= 2).
        round_s: Round length in seconds.
        max_decisions_per_round: Decision steps after which time advances anyway.
        advance: ``"round"``, ``"no_pending"`` or ``"event"`` (see :class:`EnvSettings`).
        skip_idle: Advance by itself while no agent has a legal placement.
        window_order: ``"arrival"``, ``"attained"``, ``"sjf"`` or ``"typed"`` (see
            :class:`EnvSettings`).
        window_backfill: Last window slots that show the next waiting jobs which may fit
            now (see :class:`EnvSettings`; 0: the first K waiting jobs).
        conflict_rule: ``"lowest_index"``, ``"best_fit"`` or ``"most_free"``.
        workload_kwargs: Overrides of a workload preset's fields, or extra factory kwargs
            (default for the ``"philly"`` preset: :data:`DEFAULT_WORKLOAD_KWARGS`).
        max_time_s: Simulation horizon in seconds.
        validate_allocations: Let the engine re-check every allocation (debugging).
        render_mode: ``"ansi"``, ``"rgb_array"``, ``"human"`` (prints the ansi text) or None.
        failures: Node failures, a :class:`~hetsched.sim.faults.FailureSpec` or a mapping of
            its fields (``{"mtbf_h": 24, "repair_h": 1}``); None: no failures. A down node
            stays an agent whose only legal action is the no-op (``node_up`` feature 0).
        preemptive: Add the eviction actions (see above); ``hetsched/ClusterPreempt-v0``
            builds the env with ``preemptive=True``.
        resizable: Add the resize actions (see above).
        evict_max: With eviction actions, the most times one job may be evicted per episode
            (None: no limit).
        migrate_speedup: With eviction actions, see ``EnvSettings.migrate_speedup``.
        migrate_gangs: With ``migrate_speedup``, jobs on several nodes may move too (see
            ``EnvSettings.migrate_gangs``).
        migrate_multinode: With ``migrate_gangs``, a gang may move to several nodes of one
            GPU type too (see ``EnvSettings.migrate_multinode``).
        migrate_elastic: With ``migrate_speedup``, elastic jobs may move at another GPU count
            (see ``EnvSettings.migrate_elastic``).
        retry_refused: A step whose claims were all refused gang claims keeps the round going
            with those gang claims masked (see ``EnvSettings.retry_refused``).
        reclaim_cores: Grants of cores and memory above a running job's request are lent:
            taken back while they strand free GPUs a waiting job fits (see
            ``EnvSettings.reclaim_cores``).
        stall_steps: Decision steps without progress after which the episode is truncated
            as stalled (None: never; see :class:`~hetsched.envs.spaces.EnvSettings`).
    """

    metadata: dict[str, Any] = {
        "name": "hetsched_cluster_v0",
        "render_modes": ["ansi", "rgb_array", "human"],
        "is_parallelizable": True,
        "render_fps": 4,
    }

    def __init__(
        self,
        cluster: Cluster | str | Mapping[str, Any] = "sia_64",
        workload: Workload | str | WorkloadFactory = "philly",
        *,
        throughput: ThroughputModel | str | None = None,
        seed: int | None = None,
        window: int = EnvSettings.window,
        resident_slots: int = EnvSettings.resident_slots,
        levels: LevelSets | Mapping[str, Any] | None = None,
        reward_weights: RewardWeights | Mapping[str, float] | None = None,
        max_cycles: int = EnvSettings.max_cycles,
        round_s: float = EnvSettings.round_s,
        max_decisions_per_round: int = EnvSettings.max_decisions_per_round,
        advance: str = EnvSettings.advance,
        skip_idle: bool = EnvSettings.skip_idle,
        window_order: str = EnvSettings.window_order,
        window_backfill: int = EnvSettings.window_backfill,
        conflict_rule: str = EnvSettings.conflict_rule,
        workload_kwargs: Mapping[str, Any] | None = None,
        max_time_s: float | None = EnvSettings.max_time_s,
        validate_allocations: bool = EnvSettings.validate_allocations,
        render_mode: str | None = None,
        failures: FailureSpec | Mapping[str, Any] | None = None,
        preemptive: bool = EnvSettings.preemptive,
        evict_max: int | None = EnvSettings.evict_max,
        stall_steps: int | None = EnvSettings.stall_steps,
        resizable: bool = EnvSettings.resizable,
        migrate_speedup: float | None = EnvSettings.migrate_speedup,
        migrate_gangs: bool = EnvSettings.migrate_gangs,
        migrate_multinode: bool = EnvSettings.migrate_multinode,
        retry_refused: bool = EnvSettings.retry_refused,
        migrate_elastic: bool = EnvSettings.migrate_elastic,
        reclaim_cores: bool = EnvSettings.reclaim_cores,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode={render_mode!r} is not one of {self.metadata['render_modes']}"
            )
        self.render_mode = render_mode
        self.settings = EnvSettings(
            window=window,
            resident_slots=resident_slots,
            levels=LevelSets.from_any(levels),
            reward_weights=RewardWeights.from_any(reward_weights),
            max_cycles=max_cycles,
            round_s=round_s,
            max_decisions_per_round=max_decisions_per_round,
            advance=advance,
            skip_idle=skip_idle,
            window_order=window_order,
            window_backfill=window_backfill,
            conflict_rule=conflict_rule,
            max_time_s=max_time_s,
            validate_allocations=validate_allocations,
            preemptive=preemptive,
            evict_max=evict_max,
            stall_steps=stall_steps,
            resizable=resizable,
            migrate_speedup=migrate_speedup,
            migrate_gangs=migrate_gangs,
            migrate_multinode=migrate_multinode,
            retry_refused=retry_refused,
            migrate_elastic=migrate_elastic,
            reclaim_cores=reclaim_cores,
        )
        self.max_cycles = self.settings.max_cycles
        tm = resolve_throughput(throughput)
        cl = resolve_cluster(cluster)
        if workload_kwargs is None and workload == "philly":
            workload_kwargs = DEFAULT_WORKLOAD_KWARGS
        wl = env_workload(workload, workload_kwargs)
        self.core = EnvCore(cl, wl, tm, self.settings, failures=as_failure_spec(failures))
        self.z = 3600.0 * cl.num_gpus / 8.0
        N = cl.num_nodes
        self.possible_agents: list[str] = [f"node_{i}" for i in range(N)]
        self.agents: list[str] = []
        self.agent_index = {a: i for i, a in enumerate(self.possible_agents)}
        lay = self.core.layout
        A = self.core.n_actions
        self.num_actions = A
        self.observation_spaces = {
            a: gymnasium.spaces.Dict(
                {
                    "observation": gymnasium.spaces.Box(0.0, 1.0, (lay.obs_dim,), np.float32),
                    "action_mask": gymnasium.spaces.Box(0, 1, (A,), np.int8),
                }
            )
            for a in self.possible_agents
        }
        self.action_spaces: dict[str, gymnasium.spaces.Space[Any]] = {
            a: gymnasium.spaces.Discrete(A) for a in self.possible_agents
        }
        self.state_space = gymnasium.spaces.Box(0.0, 1.0, (lay.state_dim,), np.float32)
        self._seed = seed
        self.np_random, _ = seeding.np_random(seed)
        self._steps = 0
        self._obs: NDArray[np.float32] | None = None
        self._zero_info = dict.fromkeys(INFO_KEYS[:-1], 0.0)

    # ------------------------------------------------------------------ spaces
    def observation_space(self, agent: str) -> gymnasium.spaces.Space[Any]:
        """The agent's observation space (the same object on every call)."""
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gymnasium.spaces.Space[Any]:
        """The agent's action space (the same object on every call)."""
        return self.action_spaces[agent]

    def observation_slices(self) -> dict[str, slice]:
        """Named slices of the ``observation`` vector."""
        return self.core.layout.slices()

    @property
    def num_agents(self) -> int:
        """Live agents."""
        return len(self.agents)

    @property
    def max_num_agents(self) -> int:
        """All agents (nodes)."""
        return len(self.possible_agents)

    # ------------------------------------------------------------------ API
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, dict[str, NDArray[Any]]], dict[str, dict[str, Any]]]:
        """Start an episode; all randomness flows from ``self.np_random`` seeded here."""
        if seed is None and self._seed is not None:
            seed, self._seed = self._seed, None
        if seed is not None:
            self.np_random, _ = seeding.np_random(seed)
            self._seed = None
        if int(self.max_cycles) < 2:
            raise ValueError(f"max_cycles={self.max_cycles} must be >= 2")
        self.core.reset(self.np_random)
        self.agents = list(self.possible_agents)
        self._steps = 0
        obs = self._observe()
        infos = self._infos(None, StepStats(), dict.fromkeys(REWARD_KEYS, 0.0))
        return obs, infos

    def step(self, actions: Mapping[str, Any]) -> StepReturn:
        """Apply one decision step of every agent (see the class docstring).

        Raises:
            EnvNotResetError: Before the first :meth:`reset`.
        """
        self.core.require_episode("ClusterParallelEnv.step()")
        if not self.agents:
            return {}, {}, {}, {}, {}
        res, stats = self.core.decision_step_of(parse_actions(actions, self.possible_agents))
        return self._finish_step(stats, res)

    def step_allocation(self, alloc: Allocation) -> StepReturn:
        """The documented *allocation action*: apply a complete allocation for this round.

        ``alloc`` replaces the round's allocation (running jobs included, so it may preempt or
        move them) and the round's time advances at once. Used by
        :class:`hetsched.envs.adapters.PolicyAdapter` when a fixed policy's decision cannot be
        written as per-agent actions. Returns the same tuple as :meth:`step`.

        Raises:
            hetsched.sim.errors.AllocationError: If the engine rejects ``alloc``.
            EnvNotResetError: Before the first :meth:`reset`.
        """
        self.core.require_episode("ClusterParallelEnv.step_allocation()")
        if not self.agents:
            return {}, {}, {}, {}, {}
        stats = StepStats()
        self.core.take_pending_stats(stats)
        self.core.apply_allocation(alloc, stats)
        return self._finish_step(stats, None)

    def _finish_step(self, stats: StepStats, res: ClaimResult | None) -> StepReturn:
        self._steps += 1
        core = self.core
        parts = reward_parts(stats, self.settings.reward_weights, self.z)
        r = float(sum(parts.values()))
        term = core.all_finished
        trunc = not term and (self._steps >= int(self.max_cycles) or core.done or core.stalled)
        obs = self._observe()
        infos = self._infos(res, stats, parts)
        agents = self.possible_agents
        rewards = dict.fromkeys(agents, r)
        terms = dict.fromkeys(agents, term)
        truncs = dict.fromkeys(agents, trunc)
        if term or trunc:
            self.agents = []
        return obs, rewards, terms, truncs, infos

    def _observe(self) -> dict[str, dict[str, NDArray[Any]]]:
        O = self.core.observations()
        Mk = self.core.ma.mask.copy()  # the agents' own copy: writing into it leaves the env alone
        self._obs = O
        return {
            a: {"observation": o, "action_mask": m}
            for a, o, m in zip(self.possible_agents, O, Mk, strict=True)
        }

    def _infos(
        self, res: ClaimResult | None, stats: StepStats, parts: Mapping[str, float]
    ) -> dict[str, dict[str, Any]]:
        return agent_infos(self.core, self.possible_agents, res, stats, parts)

    def state(self) -> NDArray[np.float32]:
        """Global state for centralised critics (flat float32, in ``state_space``)."""
        self.core.require_episode("ClusterParallelEnv.state()")
        return self.core.state()

    def action_masks(self) -> NDArray[np.int8]:
        """Legal actions of every agent, shape (N, A), rows in ``possible_agents`` order (a
        copy)."""
        self.core.require_episode("ClusterParallelEnv.action_masks()")
        return self.core.ma.mask.copy()

    def close(self) -> None:
        """Nothing to release."""

    # ------------------------------------------------------------------ diagnostics
    def sim_result(self) -> SimResult:
        """The simulator's per-job records so far (for :func:`compute_metrics`)."""
        assert self.core.sim is not None
        return self.core.sim.result()

    def episode_metrics(self) -> dict[str, Any]:
        """Headline metrics of the episode so far (``hetsched.sim.metrics`` row)."""
        assert self.core.wl is not None
        return compute_metrics(
            self.sim_result(),
            scheduler="env",
            workload=self.core.wl.name,
            cluster=self.core.cluster.name,
            seed=0,
        )

    def render(self, mode: str | None = None) -> str | NDArray[np.uint8] | None:
        """``ansi``: a text summary; ``rgb_array``: nodes x GPUs image; ``human``: prints the text.

        Args:
            mode: Ignored unless ``render_mode`` is None (RLlib passes one).
        """
        m = self.render_mode or mode
        if m is None:
            return None
        if m == "human":
            print(render_core(self.core, "ansi"))
            return None
        return render_core(self.core, m)


def parse_actions(actions: Mapping[str, Any], agents: list[str]) -> NDArray[np.int64]:
    """The agents' actions as one integer per agent, in ``agents`` order.

    A missing action is the no-op 0; a value that is not one integral scalar becomes -1
    (invalid).
    """
    N = len(agents)
    try:
        arr = np.asarray([actions.get(ag, 0) for ag in agents])
    except (TypeError, ValueError, OverflowError):
        arr = np.zeros(0)
    if arr.shape == (N,) and arr.dtype.kind in "iu":  # fast path: one integer per agent
        return arr.astype(np.int64)
    # Anything else: integral scalars are accepted, the rest is invalid (-1).
    out = np.zeros(N, dtype=np.int64)
    for i, ag in enumerate(agents):
        v = actions.get(ag, 0)
        try:
            fv = np.asarray(v).reshape(-1)
            out[i] = int(fv[0]) if fv.size == 1 and float(fv[0]) == int(fv[0]) else -1
        except (TypeError, ValueError, OverflowError):
            out[i] = -1
    return out


def agent_infos(
    core: EnvCore,
    agents: list[str],
    res: ClaimResult | None,
    stats: StepStats,
    parts: Mapping[str, float],
) -> dict[str, dict[str, Any]]:
    """Per-agent infos of a step: the team values plus each agent's own entries.

    Args:
        core: The env's core after the step.
        agents: Agent names in node order.
        res: The step's claim resolution (None at reset and for an allocation action).
        stats: The step's counters.
        parts: The step's reward components.

    Returns:
        ``{agent: info}`` with the keys of :data:`INFO_KEYS` and the agent's action mask.
    """
    mask = core.ma.mask.copy()  # a copy apart from the observations' one
    assert core.sim is not None
    team: dict[str, Any] = dict.fromkeys(INFO_KEYS, 0.0)  # fixes the key order
    team.update(parts)
    team["jobs_in_system_s"] = float(stats.jobs_s)
    team["rounds_advanced"] = float(stats.rounds)
    team["placed_jobs"] = float(stats.placed)
    team["conflicts"] = float(stats.conflicts)
    team["gang_failed"] = float(stats.gang_failed)
    team["invalid_actions"] = float(stats.invalid)
    team["evicted_jobs"] = float(stats.evicted)
    team["resized_jobs"] = float(stats.resized)
    team["sim_time_s"] = float(core.sim.time)
    team["decision_step"] = float(core.decision_step)
    team["stalled"] = float(core.stalled)
    team["unfinished_jobs"] = float(core.unfinished_jobs)
    team["no_progress_steps"] = float(core.no_progress_steps)
    N = mask.shape[0]
    # The agents' own entries, one row each: invalid, conflict, placed, legal actions.
    own = np.zeros((4, N))
    if res is not None:
        own[0] = res.invalid
        own[1] = res.conflict | res.gang_failed
        own[2] = res.granted
    own[3] = mask.sum(axis=1)
    # Per agent, a copy of the team values with the agent's own entries written in place.
    out: dict[str, dict[str, Any]] = {}
    for a, (i_, c_, g_, n_), m_ in zip(agents, own.T.tolist(), mask, strict=True):
        d = team.copy()
        d["invalid_action"] = i_
        d["conflict"] = c_
        d["placed"] = g_
        d["num_legal_actions"] = n_
        d["action_mask"] = m_
        out[a] = d
    return out


def parallel_env(**kwargs: Any) -> ClusterParallelEnv:
    """Factory of the parallel env (``pettingzoo.make("parallel", "hetsched/Cluster-v0")``)."""
    return ClusterParallelEnv(**kwargs)


def preempt_parallel_env(**kwargs: Any) -> ClusterParallelEnv:
    """Factory of the preemptive parallel env (``hetsched/ClusterPreempt-v0``): the same env
    with ``preemptive=True`` (eviction actions)."""
    if not kwargs.pop("preemptive", True):
        raise ValueError(
            "hetsched/ClusterPreempt-v0 is the env with eviction actions; for preemptive=False "
            "use hetsched/Cluster-v0"
        )
    return ClusterParallelEnv(preemptive=True, **kwargs)


def preempt_env(**kwargs: Any) -> AECEnv[str, dict[str, NDArray[Any]], int]:
    """The AEC version of :func:`preempt_parallel_env`."""
    return parallel_to_aec(preempt_parallel_env(**kwargs))


def raw_env(**kwargs: Any) -> AECEnv[str, dict[str, NDArray[Any]], int]:
    """The AEC version (``parallel_to_aec`` of the parallel env)."""
    return parallel_to_aec(ClusterParallelEnv(**kwargs))


def env(**kwargs: Any) -> AECEnv[str, dict[str, NDArray[Any]], int]:
    """The AEC version (PettingZoo's conventional ``env()`` factory)."""
    return raw_env(**kwargs)
