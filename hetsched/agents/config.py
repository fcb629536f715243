"""Typed Hydra schemas of the MAIFS-style agent, its training run and its scheduler preset.

Presets: ``conf/agent/maifs.yaml`` (every hyperparameter), ``conf/train.yaml`` (the training
app) and ``conf/scheduler/maifs.yaml`` (the evaluation scheduler). :func:`register_agent_configs`
puts the schemas into Hydra's ConfigStore; :func:`hetsched.config.register_configs` calls it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from hydra.core.config_store import ConfigStore

CONFLICT_MODES: tuple[str, ...] = ("ordered", "maxsum", "none")


@dataclass
class AgentEnvConf:
    """Env settings the agent trains and runs in (:class:`hetsched.envs.spaces.EnvSettings`).

    Attributes:
        window: Candidate window K.
        resident_slots: Resident slots R per node.
        round_s: Round length (s).
        max_decisions_per_round: Decision steps after which a round's time advances anyway.
        fungible: Allow GPU/CPU/memory levels other than the request (False: ablation with
            only the 1.0 levels legal).
        long_guard_s: Long-job guard threshold (s; null = off): see
            :func:`hetsched.agents.agent.agent_masks`.
        guard_rel_rate: Rate fraction below which the guard keeps a long job off a node.
        reward_jobs: Weight of the jobs-in-system integral.
        reward_makespan: Weight of the terminal makespan term.
        reward_conflict: Penalty per lost claim.
        reward_invalid: Penalty per invalid action.
        reward_progress: Weight of the progress shaping term (0 = off; see
            :class:`hetsched.envs.spaces.RewardWeights`).
        max_steps: Steps after which a training episode is truncated.
        window_order: Order of the candidate window (``arrival``, ``attained``, ``sjf`` or
            ``typed``; see :class:`hetsched.envs.spaces.EnvSettings`). Checkpoints saved
            before this field existed load with ``arrival``, the order they were trained with.
        evict_max: With ``preemptive``, the most evictions per job and episode (null: no
            limit; bounds what sampled exploration can cost).
        preemptive: Train and act in the preemptive env ``hetsched/ClusterPreempt-v0`` (one
            eviction action per resident slot; the network gets an eviction head). Checkpoints
            saved before this field existed load with false.
    """

    window: int = 16
    resident_slots: int = 4
    round_s: float = 60.0
    max_decisions_per_round: int = 32
    fungible: bool = True
    long_guard_s: float | None = None
    guard_rel_rate: float = 0.5
    reward_jobs: float = 1.0
    reward_makespan: float = 0.1
    reward_conflict: float = 0.01
    reward_invalid: float = 0.01
    reward_progress: float = 0.0
    max_steps: int = 5000
    window_order: str = "arrival"
    preemptive: bool = False
    evict_max: int | None = None


@dataclass
class NetConf:
    """:class:`hetsched.agents.network.MAIFSNet` sizes and ablation switches; ``evict_bias``
    is the initial bias of the eviction logits (preemptive env only)."""

    hidden: int = 64
    heads: int = 4
    graph_layers: int = 2
    type_emb: int = 16
    attention: bool = True
    graph: bool = True
    evict_bias: float = 0.0


@dataclass
class TeacherConf:
    """:class:`hetsched.agents.teacher.SJFTeacher` (behaviour-cloning warm start).

    ``evict_ratio`` and ``evict_wait_s`` label evictions in the preemptive env (the teacher's
    step 4; null: the teacher never evicts).
    """

    order: str = "sjf"
    min_rel_rate: float = 0.5
    long_s: float = 10800.0
    evict_ratio: float | None = None
    evict_wait_s: float = 7200.0


@dataclass
class BCConf:
    """Behaviour cloning from the teacher (DAgger rounds after the first).

    Attributes:
        episodes: Teacher episodes collected first (drawn from the curriculum).
        dagger_rounds: Further rounds in which the greedy agent acts and the teacher labels.
        dagger_episodes: Episodes per DAgger round.
        buffer_episodes: Most recent episodes kept for fitting.
        epochs: Passes over the kept data after each round.
        lr: Adam learning rate.
        batch: Decision steps per minibatch.
        value_coef: Weight of the critic's regression on the teacher's returns.
        long_weight: Loss weight of agents whose teacher action claims a long job (the rare
            makespan-critical decisions; see :meth:`Trainer._label_weights`).
        evict_only: Clone only the teacher's eviction decisions (preemptive env; e.g. to warm
            up a new eviction head on a trained placement network): each agent with a legal
            eviction is fit to "evict this slot" or "do not evict" (the total probability of
            its placement actions and the no-op); which placement it makes is not cloned.
        anchor: Weight of the placement anchor (:attr:`PPOConf.anchor`) during cloning.
    """

    episodes: int = 24
    dagger_rounds: int = 3
    dagger_episodes: int = 8
    buffer_episodes: int = 40
    epochs: int = 6
    lr: float = 1e-3
    batch: int = 64
    value_coef: float = 0.5
    long_weight: float = 1.0
    evict_only: bool = False
    anchor: float = 0.0


@dataclass
class PPOConf:
    """MAPPO-style fine-tuning (clipped surrogate, GAE, centralised critic, entropy bonus).

    Attributes:
        env_steps: Env steps of PPO (0 = behaviour cloning only).
        rollout_steps: Env steps per update.
        epochs: Passes per update.
        batch: Decision steps per minibatch.
        lr: Adam learning rate.
        gamma: Discount per ``gamma_ref_s`` seconds of simulated time (semi-MDP).
        gamma_ref_s: Reference interval of ``gamma`` (s).
        gae_lambda: GAE lambda.
        clip: PPO clip epsilon.
        ent_coef: Entropy bonus.
        vf_coef: Value-loss weight.
        max_grad_norm: Gradient-norm clip.
        attn_reg: L2 penalty on the attention logits (MAAC).
        rules_preset: A scheduler preset (``conf/scheduler/``, e.g. ``maifs``) whose rules act
            around the agents during the PPO rollouts: each episode runs the simulator with
            :class:`~hetsched.agents.policy.MAIFSPolicy` (that preset's rules, this network
            sampling) and records the network's decision steps, so the agents learn what the
            rules leave to them. Null (default): the bare env, as before.
        anchor: Weight of a KL penalty ``KL(ref || net)`` between the placement choices (the
            no-op and the claims, renormalised without the evictions) of a frozen reference
            network, the ``init=`` checkpoint, and of the trained one, averaged over the agents
            with a legal claim. It keeps a trained placement policy from drifting while a new
            eviction head learns. 0 (default): off; above 0 needs ``init=``.
    """

    env_steps: int = 20_000
    rollout_steps: int = 512
    epochs: int = 4
    batch: int = 64
    lr: float = 1e-4
    gamma: float = 0.99
    gamma_ref_s: float = 60.0
    gae_lambda: float = 0.95
    clip: float = 0.2
    ent_coef: float = 0.003
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    attn_reg: float = 1e-3
    rules_preset: str | None = None
    anchor: float = 0.0


@dataclass
class CurriculumItem:
    """One training distribution: a cluster preset, a workload preset with overrides, seeds.

    Attributes:
        cluster: Cluster preset name (``conf/cluster``).
        workload: Workload preset name (``conf/workload``).
        workload_kwargs: Overrides of the preset's fields (e.g. a trace window).
        seeds: Episode seeds drawn uniformly from ``[seed_lo, seed_hi)``.
    """

    cluster: str = "sia_64"
    workload: str = "philly"
    workload_kwargs: dict[str, Any] = field(default_factory=dict)
    seed_lo: int = 0
    seed_hi: int = 10


@dataclass
class EvalConf:
    """Periodic evaluation against a fixed baseline on the validation item.

    Attributes:
        every: Env steps between evaluations (0: no evaluation, no ``best.pt``).
        baseline: ``"teacher"`` (the agent's behaviour-cloning teacher) or the name of a
            scheduler preset (``conf/scheduler/<name>.yaml``, e.g. ``"fifo"`` or ``"sia"``),
            run once by the same runner; an unknown name fails when the trainer is built.
        cluster: Cluster preset name; null = the training app's ``cluster``.
        workload: Workload preset name; null = the training app's ``workload``.
        workload_kwargs: Overrides of the workload's fields (a validation window, not a test
            window).
        seeds: Seeds.
    """

    every: int = 4000
    baseline: str = "fifo"
    cluster: str | None = None
    workload: str | None = None
    workload_kwargs: dict[str, Any] = field(default_factory=lambda: {"start": 55000})
    seeds: list[int] = field(default_factory=lambda: [50, 51])


@dataclass
class MAIFSAgentConf:
    """The MAIFS-style agent: env, network, coordination, training phases, curriculum."""

    name: str = "maifs"
    conflict: str = "ordered"
    maxsum_iters: int = 6
    env: AgentEnvConf = field(default_factory=AgentEnvConf)
    net: NetConf = field(default_factory=NetConf)
    teacher: TeacherConf = field(default_factory=TeacherConf)
    bc: BCConf = field(default_factory=BCConf)
    ppo: PPOConf = field(default_factory=PPOConf)
    curriculum: list[CurriculumItem] = field(default_factory=lambda: [CurriculumItem()])
    eval: EvalConf = field(default_factory=EvalConf)

    def __post_init__(self) -> None:
        if self.conflict not in CONFLICT_MODES:
            raise ValueError(
                f"agent.conflict={self.conflict!r} is not one of {list(CONFLICT_MODES)}"
            )


@dataclass
class TrainConfig:
    """Top-level config of ``scripts/train.py`` (``conf/train.yaml``).

    Attributes:
        agent: The agent (``agent=maifs``).
        cluster: The cluster preset (config group ``cluster=sia_64``; a name in Python): the
            periodic evaluation's cluster (unless ``agent.eval.cluster`` names one) and the
            training cluster when ``agent.curriculum`` is empty.
        workload: The workload preset (``workload=philly``), likewise; the evaluation applies
            ``agent.eval.workload_kwargs`` (a validation window) on top.
        seed: Training seed (network init, sampling, episode draws).
        threads: torch threads.
        checkpoint_every: Env steps between ``{step}.pt`` checkpoints.
        resume: Checkpoint to continue from (``resume=PATH``).
        init: Checkpoint whose weights start a new run (no optimizer or counters; the
            behaviour-cloning phase still runs unless ``bc.episodes`` and ``bc.dagger_rounds``
            are 0).
        out: Final checkpoint copy (e.g. ``checkpoints/maifs_default.pt``); null = none.
        progress: tqdm progress bar.
        max_wall_s: Stop the PPO phase after this many wall-clock seconds (null: no limit; a
            time-limited run is not reproducible step for step).
    """

    agent: MAIFSAgentConf = field(default_factory=MAIFSAgentConf)
    cluster: Any = "sia_64"
    workload: Any = "philly"
    seed: int = 0
    threads: int = 1
    checkpoint_every: int = 4000
    resume: str | None = None
    init: str | None = None
    out: str | None = None
    progress: bool = True
    max_wall_s: float | None = None


@dataclass
class MAIFSSchedulerConf:
    """:class:`hetsched.agents.policy.MAIFSPolicy` as an evaluation scheduler.

    Attributes:
        checkpoint: Checkpoint path; null = the shipped ``checkpoints/maifs_default.pt`` (with
            its ensemble members, see ``ensemble``).
        greedy: Argmax actions (False: sample with the run's generator).
        conflict: Override the checkpoint's conflict mode (``ordered``, ``maxsum``, ``none``).
        long_guard_s: Turn on the long-job guard (s); null = the checkpoint's setting.
        starve_guard_s: Turn on the starvation guard (s; null = off): see
            :class:`hetsched.agents.policy.CoreActorPolicy`.
        migrate_gain: Move running jobs to idle faster GPUs when that saves at least this
            fraction of their remaining time (null = off): see
            :class:`hetsched.agents.policy.CoreActorPolicy`.
        preempt_ratio: Preempt a running job for a waiting job this many times shorter than
            its remaining time (null = off): see :class:`hetsched.agents.policy.CoreActorPolicy`.
        preempt_wait_s: Waiting time (s) after which a job may preempt.
        preempt_max: Times the rule may preempt one job.
        preempt_every_s: Seconds of holding GPUs that earn a job one more preemption beyond
            ``preempt_max`` (null = off).
        preempt_gangs: The preemption rules and the makespan guard may also take as victims
            gangs held on the fewest nodes that hold them: see
            :class:`hetsched.agents.policy.CoreActorPolicy`.
        fast_wait_s: Place a job that has waited this long (s) when a node of its fastest GPU
            type holds it (null = off): see :class:`hetsched.agents.policy.CoreActorPolicy`.
        fast_max_s: Longest estimated run time (s) of a job the fast-GPU guard places.
        elastic_gain: Size elastic jobs' requests by their scaling, keeping doublings that speed
            them up at least this many times (null = off): see
            :class:`hetsched.agents.policy.CoreActorPolicy`.
        elastic_max_s: Elastic jobs estimated to run longer than this (s) keep their request
            (null = no limit).
        grow_gain: Double a running elastic job onto idle GPUs when no job waits and that saves
            at least this fraction of its remaining time (null = off): see
            :class:`hetsched.agents.policy.CoreActorPolicy`.
        keep_memory: Raise the agents' memory levels below the request to the request where
            legal (the memory guard): see :class:`hetsched.agents.policy.CoreActorPolicy`.
        grow_factor: Largest multiple of its GPU count one growth may give a job (2 = a
            doubling; 4 or 8 also weigh two or three doublings at once, on any allowed type).
        grow_at_request: A growth gives the job at least its requested CPU and memory per GPU.
        shrink_order: Which job above its request shrinks first while jobs wait: ``excess``
            (furthest above it) or ``restart_cost`` (whose restart idles the fewest GPU-seconds).
        shrink_fastest: Only jobs on the first waiting job's fastest GPU type shrink for it.
        critical_s: Place a waiting job estimated to run at least this long (s) that would
            finish after every running job (it sets the makespan) at once on its fastest GPU
            type, preempting far shorter jobs if needed (null = off): see
            :class:`hetsched.agents.policy.CoreActorPolicy`.
        critical_ratio: A job the makespan guard preempts must be estimated to finish this many
            times sooner than the guarded job runs.
        critical_wait_s: Waiting time (s) after which the makespan guard acts.
        mem_hold_phi: The memory hold: an agents' placement whose memory share slows the job
            below this speed factor is raised to the most memory legal, or withdrawn when
            another node could do better (null = off): see
            :class:`hetsched.agents.policy.CoreActorPolicy`.
        preempt_fast: Preemption for a much faster GPU: a rigid waiting job whose fastest GPU
            type runs it this many times faster than the best node free now may preempt there
            at once (needs ``preempt_ratio``; null = off): see
            :class:`hetsched.agents.policy.CoreActorPolicy`.
        wake: Timed wake-ups: also decide when a waiting job reaches the starvation guard's
            threshold (``starve``) or any rule's waiting threshold (``all``), not only at
            arrivals and completions (null = off): see
            :class:`hetsched.agents.policy.CoreActorPolicy`.
        critical_min_rel: When the makespan guard can neither place nor make room for its job
            on its fastest GPU type, place it on the fastest type with room now that runs it
            at least this fraction of its fastest speed (null = it waits): see
            :class:`hetsched.agents.policy.CoreActorPolicy`.
        eft_gain: The earliest-finish placement: a waiting rigid job starts now on a slower GPU
            type when that finishes it sooner, by this fraction, than waiting for its fastest
            type, unless it would then finish last (null = off): see
            :class:`hetsched.agents.policy.CoreActorPolicy`.
        evict_allowance: One preemption allowance: the network's evictions count against the
            rules' allowance (``preempt_max`` plus one per ``preempt_every_s`` held) and may
            take only a job below it; the rules' victims count both (no effect without
            eviction actions): see :class:`hetsched.agents.policy.CoreActorPolicy`.
        evict_critical: The network may evict a job the makespan guard placed (false: it is
            spared, as the preemption rules spare it).
        starve_first: The starvation guard also runs before the agents' steps, over every
            waiting job, longest-waiting first (needs ``starve_guard_s``): see
            :class:`hetsched.agents.policy.CoreActorPolicy`.
        critical_spread_cpu: The makespan guard's placements over several nodes take the most
            CPU every node of the gang has room for, as its one-node placements do (false:
            the requested CPU): see :class:`hetsched.agents.policy.CoreActorPolicy`.
        critical_min_rel_s: Shortest estimated run time (s) of a job the makespan guard may
            place on a slower type (``critical_min_rel``); null = every job it guards.
        critical_slow_eft: The makespan guard places a job on a slower type only when it would
            finish there before it would by waiting for its fastest type (estimated from the
            running jobs' remaining times).
        eft_elastic: The earliest-finish placement (``eft_gain``) also takes elastic jobs, at
            the request elastic sizing gave them (false: rigid jobs only).
        grow_waiting: Growth of elastic jobs (``grow_gain``) also while jobs wait, onto
            nodes of GPU types no waiting job waits for (false: only when none waits).
        grow_new: Growth of elastic jobs (``grow_gain``) also takes the jobs starting this
            round, before their first start (false: only jobs that ran before the round).
        elastic_teacher: With ``actor: network``, the teacher takes the decision steps whose
            window holds elastic jobs only (rigid workloads are untouched): see
            :func:`hetsched.agents.policy.elastic_split`.
        actor: Who takes the decision steps: ``network`` (the trained agents) or ``teacher``
            (the checkpoint's behaviour-cloning heuristic with the same window, levels and
            rules; the ablation without the network): see
            :class:`hetsched.agents.policy.MAIFSPolicy`.
        window_order: Override the agents' window order (``arrival``, ``attained``, ``sjf``
            or ``typed``; null = the checkpoint's, ``arrival``).
        ensemble: Further checkpoint files whose networks act together with the checkpoint's
            (the mean of their masked log-probabilities; same env settings required). null =
            the shipped ensemble's four other members with the default checkpoint (and the
            network acting), none otherwise; ``[]`` = the checkpoint's network alone: see
            :class:`hetsched.agents.policy.MAIFSPolicy`.
        evict_only: The checkpoint's network decides evictions only and the ``ensemble``
            members alone vote on placements (the checkpoint needs an eviction head).
    """

    _target_: str = "hetsched.agents.policy.MAIFSPolicy"
    checkpoint: str | None = None
    ensemble: list[str] | None = None
    evict_only: bool = False
    greedy: bool = True
    conflict: str | None = None
    long_guard_s: float | None = None
    starve_guard_s: float | None = None
    migrate_gain: float | None = None
    preempt_ratio: float | None = None
    preempt_wait_s: float = 0.0
    preempt_max: int = 1
    preempt_every_s: float | None = None
    preempt_gangs: bool = False
    fast_wait_s: float | None = None
    fast_max_s: float = 3600.0
    elastic_gain: float | None = None
    elastic_max_s: float | None = None
    grow_gain: float | None = None
    keep_memory: bool = False
    grow_factor: int = 2
    grow_at_request: bool = False
    shrink_order: str = "excess"
    shrink_fastest: bool = False
    critical_s: float | None = None
    critical_ratio: float = 4.0
    critical_wait_s: float = 0.0
    mem_hold_phi: float | None = None
    preempt_fast: float | None = None
    wake: str | None = None
    critical_min_rel: float | None = None
    eft_gain: float | None = None
    evict_allowance: bool = False
    evict_critical: bool = True
    starve_first: bool = False
    critical_spread_cpu: bool = False
    critical_min_rel_s: float | None = None
    critical_slow_eft: bool = False
    eft_elastic: bool = False
    grow_waiting: bool = False
    grow_new: bool = False
    elastic_teacher: bool = False
    actor: str = "network"
    window_order: str | None = None


@dataclass
class TeacherSchedulerConf:
    """:class:`hetsched.agents.policy.TeacherPolicy` (the behaviour-cloning teacher)."""

    _target_: str = "hetsched.agents.policy.TeacherPolicy"
    window: int = 16
    order: str = "sjf"
    min_rel_rate: float = 0.5
    fungible: bool = True
    long_s: float = 10800.0
    round_s: float = 60.0


#: The rule settings of :class:`~hetsched.agents.policy.MAIFSPolicy`: the fields of the
#: ``scheduler=maifs`` schema but those naming the checkpoint and how it acts.
MAIFS_RULES: tuple[str, ...] = tuple(
    f.name
    for f in fields(MAIFSSchedulerConf)
    if f.name not in ("_target_", "checkpoint", "ensemble", "evict_only", "greedy", "conflict")
)


def preset_rules(name: str = "maifs") -> dict[str, Any]:
    """The rule settings of the scheduler preset ``conf/scheduler/<name>.yaml`` (composed as
    ``scripts/evaluate.py`` composes it), by the names in :data:`MAIFS_RULES`.

    Raises:
        ValueError: If there is no such preset; the message lists those there are.
    """
    from hetsched.envs.presets import scheduler_node

    node = scheduler_node(name)
    return {k: node[k] for k in MAIFS_RULES}


def register_agent_configs() -> None:
    """Register the agent, training and scheduler schemas (idempotent)."""
    cs = ConfigStore.instance()
    cs.store(group="schema/agent", name="maifs", node=MAIFSAgentConf)
    cs.store(name="train_schema", node=TrainConfig)
    cs.store(group="schema/scheduler", name="maifs", node=MAIFSSchedulerConf)
    cs.store(group="schema/scheduler", name="maifs_teacher", node=TeacherSchedulerConf)
