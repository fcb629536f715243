"""Typed Hydra schemas of the MAIFS-style agent, its training run and its scheduler preset.

Presets: ``conf/agent/maifs.yaml`` (every hyperparameter), ``conf/train.yaml`` (the training
app) and ``conf/scheduler/maifs.yaml`` (the evaluation scheduler). :func:`register_agent_configs`
puts the schemas into Hydra's ConfigStore; :func:`hetsched.config.register_configs` calls it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore

CONFLICT_MODES: tuple[str, ...] = ("ordered", "maxsum", "none")

#: Who decides first in the ordered decision (``agent.env.decision_order``).
DECISION_ORDERS: tuple[str, ...] = ("rate", "cores", "confidence")

#: The agent's GPU-count levels (multipliers of the request; elastic jobs only, clipped to
#: their ``[min_gpus, max_gpus]``). The env's default :data:`~hetsched.envs.spaces.DEFAULT_GPU_LEVELS`
#: lacks 0.25, so a 16-GPU elastic job could not start on one 4-GPU node.
AGENT_GPU_LEVELS: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0)


@dataclass
class AgentEnvConf:
    """Env settings the agent trains and runs in (:class:`hetsched.envs.spaces.EnvSettings`).

    A field added after a checkpoint was saved loads with the value it was trained under
    (:data:`hetsched.agents.checkpoint.LEGACY`), else with its default here.

    Attributes:
        window: Candidate window K.
        resident_slots: Resident slots R per node.
        round_s: Round length (s).
        max_decisions_per_round: Decision steps after which a round's time advances anyway.
        fungible: Allow GPU/CPU/memory levels other than the request (False: ablation with
            only the 1.0 levels legal).
        reward_jobs: Weight of the jobs-in-system integral.
        reward_makespan: Weight of the terminal makespan term.
        reward_conflict: Penalty per lost claim.
        reward_invalid: Penalty per invalid action.
        reward_progress: Weight of the progress shaping term (0 = off; see
            :class:`hetsched.envs.spaces.RewardWeights`).
        max_steps: Steps after which a training episode is truncated.
        window_order: Order of the candidate window (``arrival``, ``attained``, ``sjf`` or
            ``typed``; see :class:`hetsched.envs.spaces.EnvSettings`).
        window_backfill: The last this many window slots show the next waiting jobs that
            may fit the free GPUs now (``EnvSettings.window_backfill``), so a queue head that
            cannot run does not hide the jobs behind it that could.
        evict_max: With ``preemptive``, the most evictions per job and episode (null: no
            limit; bounds what sampled exploration can cost).
        preemptive: Train and act in the preemptive env ``hetsched/ClusterPreempt-v0`` (one
            eviction action per resident slot; the network gets an eviction head).
        work_conserving: The agent's action semantics: an agent that can host a waiting job
            alone (a legal single-node claim, after the claims of the agents that decided
            before it) may not pass; which job, at which GPU, CPU and memory levels, stays the
            network's choice. Gang claims stay voluntary.
        wait_below: With ``work_conserving``, the claims that do not bind the agent: it may still
            pass when every job it could host alone would run on its GPU type below this fraction of
            the best isolated throughput one node of the cluster could give the job (waiting for a
            faster GPU stays an action). 0: every single-node claim binds.
        gpu_levels: GPU-count levels of the action space (multipliers of an elastic job's
            request, :class:`hetsched.envs.spaces.LevelSets`).
        decision_order: Who decides first in the ordered decision (``agent.conflict=ordered``,
            :func:`hetsched.agents.coordination.ordered_actions`). ``"rate"``: the agents whose node
            serves the jobs they may claim best, relative to the best one node of the cluster could
            (:func:`hetsched.agents.acting.rate_priority`), then the most confident; ``"cores"``:
            the same with the teacher's rate model, which counts the cores each node can give the
            job (:func:`hetsched.agents.acting.cores_priority`); ``"confidence"``: the most
            confident (highest best-claim probability) first. Which job each agent claims, or
            whether it passes, stays the network's choice either way.
        resizable: Train and act with the env's resize actions (``EnvSettings.resizable``:
            double a running elastic job on its node when no waiting job could use the GPUs;
            the network gets a resize head).
        gang_binding: With ``work_conserving``, claims of a job that no node can host alone (a gang)
            bind too, and once an agent claims a job as a gang the later agents of its GPU type may
            not claim another job as a gang (:func:`hetsched.agents.coordination.ordered_actions`):
            gangs fill instead of GPUs idling while they wait.
        share_guard: A claim may not take so many CPU cores or so much memory that the node's other
            free GPUs are left less than the node's cores (memory) per GPU, unless every legal claim
            of that job on that node would (:func:`hetsched.agents.signals.share_guard`; the teacher
            claims under it too): fungible resources beyond a GPU's share come only from what no GPU
            of the node needs, so no GPU is stranded.
        retry_refused: A decision step whose claims were all refused (gang claims too few
            agents joined) does not end the round: the refused agents' gang claims of that
            slot are masked (their claims the node hosts alone stay legal) and the agents
            decide again (``EnvSettings.retry_refused``), so GPUs do not idle until
            the next event for want of a gang.
        share_guard_all: With ``share_guard``, keep the share of every free GPU of the node,
            not only of those the window's other jobs could use, so that jobs arriving later
            find cores and memory beside the free GPUs.
        migrate_speedup: With ``preemptive``, evictions are also legal while nothing waits
            when the job could move to a free node at least this many times as fast
            (``EnvSettings.migrate_speedup``; the teacher's migrations,
            ``teacher.migrate_gain_s``). None: off.
        migrate_gangs: With ``migrate_speedup``, a job on several nodes may migrate too, to
            one node that holds it whole (``EnvSettings.migrate_gangs``).
        migrate_multinode: With ``migrate_gangs``, a gang too large for one node may migrate
            to several nodes of a faster type (``EnvSettings.migrate_multinode``).
        migrate_elastic: With ``migrate_speedup``, an elastic job may migrate at another GPU
            count: grow onto a node that empties, or move to fewer faster GPUs
            (``EnvSettings.migrate_elastic``).
        reclaim_cores: Cores and memory granted above a running job's request are lent: taken
            back while they strand free GPUs a waiting job fits, given back when the node has
            them to spare (``EnvSettings.reclaim_cores``).
        identity: Show identity features (the GPU-type one-hot of the own node, the model
            one-hot of resident and window jobs). False zeroes them, so the network sees jobs
            and nodes only through throughput-relative features (the identity-features
            ablation; such a checkpoint also runs on models and GPU types it never saw).
        share_feature: Append, per window slot, the job's share of the cluster's GPUs (all
            GPUs over the jobs in the system) over its request, as ``(log2(x) + 4) / 8``
            clipped to [0, 1], after the env's observation.
        drain_feature: Append, per window slot (after the share feature), the job's run time over
            the cluster's drain time (:func:`hetsched.agents.signals.drain_ratio`, what the
            teacher's ``long_drain`` reads) where it is at least 1, as ``(log2(x) + 4) / 8`` clipped
            to [0, 1] (0.5 at a ratio of 1), and 0 where it is below 1: a step, so that the feature
            says nothing about jobs that would not outlast the work in the system.
        level_share_feature: Append, per window slot (after the features above), one input
            per GPU level: 1 where the level's GPU count is within the job's share of the
            cluster (all GPUs over the jobs in the system, at least 1), the test the teacher's
            ``elastic_share`` rule makes per level; else 0.
        level_rate_feature: Append, per node, window slot and GPU level (after every feature
            above), the job's rate at that level on the node as the teacher's rate model values
            it (:func:`hetsched.agents.signals.level_rates`) over its best such rate there; 0
            where no claim at that level is legal alone. Node-specific: each agent sees its own.
        move_feature: Append, per resident slot, the time a migration would save the job
            (:func:`hetsched.agents.signals.move_savings`, what the teacher's
            ``migrate_gain_s`` rule reads), as ``h / (h + 1)`` of the hours saved (0: no move).
        shrink_feature: Append, per resident slot (after the move feature), the job's GPUs over
            its share of the cluster (:func:`hetsched.agents.signals.over_share`, what the
            teacher's ``shrink_share`` rule reads) as ``(log2(x) + 4) / 8`` clipped to [0, 1],
            0 where no shrink is possible.
    """

    window: int = 16
    resident_slots: int = 4
    round_s: float = 60.0
    max_decisions_per_round: int = 32
    fungible: bool = True
    reward_jobs: float = 1.0
    reward_makespan: float = 0.1
    reward_conflict: float = 0.01
    reward_invalid: float = 0.01
    reward_progress: float = 0.0
    max_steps: int = 5000
    window_order: str = "arrival"
    window_backfill: int = 0
    preemptive: bool = False
    evict_max: int | None = None
    work_conserving: bool = True
    wait_below: float = 0.5
    gpu_levels: list[float] = field(default_factory=lambda: list(AGENT_GPU_LEVELS))
    identity: bool = True
    share_feature: bool = False
    drain_feature: bool = False
    move_feature: bool = False
    level_share_feature: bool = False
    shrink_feature: bool = False
    level_rate_feature: bool = False
    decision_order: str = "rate"
    resizable: bool = False
    migrate_speedup: float | None = None
    migrate_gangs: bool = False
    migrate_multinode: bool = False
    migrate_elastic: bool = False
    reclaim_cores: bool = False
    gang_binding: bool = False
    share_guard: bool = False
    share_guard_all: bool = False
    retry_refused: bool = False

    def __post_init__(self) -> None:
        if self.decision_order not in DECISION_ORDERS:
            raise ValueError(
                f"agent.env.decision_order={self.decision_order!r} is not one of "
                f"{list(DECISION_ORDERS)}"
            )


@dataclass
class NetConf:
    """:class:`hetsched.agents.network.MAIFSNet` sizes and ablation switches; ``evict_bias``
    is the initial bias of the eviction logits (preemptive env only); ``runtime_rank`` gives the
    job MLP each job's run-time rank on the agent's node; ``level_head`` adds to each GPU
    level's claim logits a term read from that level's and the next larger level's
    ``env.level_share_feature`` inputs (the network's per-level claim term; needs them).
    Checkpoints saved before a field existed load with false."""

    hidden: int = 64
    heads: int = 4
    graph_layers: int = 2
    type_emb: int = 16
    attention: bool = True
    graph: bool = True
    evict_bias: float = 0.0
    runtime_rank: bool = False
    level_head: bool = False


@dataclass
class TeacherConf:
    """:class:`hetsched.agents.teacher.SJFTeacher` (behaviour-cloning warm start).

    ``order``: ``sjf`` (job-major), ``arrival`` or ``node`` (node-major, in the agents' ``cores``
    decision order; the teacher's step 3). ``evict_ratio`` and ``evict_wait_s`` label evictions in
    the preemptive env (the teacher's step 4; null: the teacher never evicts). ``elastic_share``: an
    elastic job starts at the fastest GPU level within its share of the cluster (GPUs over jobs in
    the system) rather than at its request (checkpoints saved before it existed load with false).
    ``resize_gain_s``: in an env with resize actions, double a running elastic job when that saves
    more than this many seconds (the teacher's step 5; null: never). ``migrate_gain_s``: in a
    preemptive env with ``env.migrate_speedup``, move a running job to a faster free node when that
    saves more than this many seconds (the teacher's step 4; null: never). ``evict_protect``: with
    ``evict_ratio``, spare the victims whose remaining time is at least this fraction of the longest
    among the possible victims (null: spare none). ``long_drain``: a job is also long (started
    first) when its run time is more than this many times the cluster's drain time
    (:func:`hetsched.agents.signals.drain_ratio`; null: only ``long_s``). ``shrink_share``: in a
    preemptive env, while a window job waits, evict a running elastic job held above this many times
    its share of the cluster so that it restarts within it (the teacher's step 4; null: never).
    ``gang_fastest``: a gang goes to the fastest GPU type with room for it rather than the one with
    the most free GPUs (step 3).
    """

    order: str = "sjf"
    min_rel_rate: float = 0.5
    long_s: float = 10800.0
    evict_ratio: float | None = None
    evict_wait_s: float = 7200.0
    elastic_share: bool = True
    resize_gain_s: float | None = None
    migrate_gain_s: float | None = None
    evict_protect: float | None = None
    long_drain: float | None = None
    shrink_share: float | None = None
    gang_fastest: bool = False


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
        ordered_masks: Record each teacher label under the mask its agent decides under in
            the ordered decision when the agents before it play the teacher's labels
            (:meth:`hetsched.agents.acting.Acting.label_masks`); false: the env's mask.
        noisy_fraction: Fraction of the teacher and DAgger episodes in which the agents'
            features show the ``noisy`` information track (:mod:`hetsched.benchmark.info`)
            while the teacher labels from the true run times (a privileged teacher); 0: every
            episode shows the true run times.
        noisy_sigma: Sigma of those episodes' log-normal errors; None: the track's default.
        move_weight: Cloning-loss weight of labels past the placements (evictions, resizes).
    """

    episodes: int = 40
    dagger_rounds: int = 16
    dagger_episodes: int = 8
    buffer_episodes: int = 120
    epochs: int = 8
    lr: float = 1e-3
    batch: int = 64
    value_coef: float = 0.5
    ordered_masks: bool = False
    noisy_fraction: float = 0.0
    noisy_sigma: float | None = None
    move_weight: float = 1.0

    def __post_init__(self) -> None:
        if not self.move_weight > 0.0:
            raise ValueError(f"agent.bc.move_weight={self.move_weight!r} must be positive")
        if not 0.0 <= self.noisy_fraction <= 1.0:
            raise ValueError(f"agent.bc.noisy_fraction={self.noisy_fraction!r} must lie in [0, 1]")
        if self.noisy_sigma is not None and not self.noisy_sigma >= 0.0:
            msg = "must be >= 0 (or null: the noisy track's default)"
            raise ValueError(f"agent.bc.noisy_sigma={self.noisy_sigma!r} {msg}")


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
    """

    env_steps: int = 40_000
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


@dataclass
class CurriculumItem:
    """One training distribution: a cluster preset, a workload preset with overrides, seeds.

    Attributes:
        cluster: Cluster preset name (``conf/cluster``).
        workload: Workload preset name (``conf/workload``).
        workload_kwargs: Overrides of the preset's fields (e.g. a trace window).
        seed_lo, seed_hi: Episode seeds drawn uniformly from ``[seed_lo, seed_hi)``.
        scenario: A benchmark scenario (:mod:`hetsched.benchmark.scenarios`) instead of
            ``cluster``/``workload``: its cluster and its seeded windows at its offered load
            (each seed draws another window). Test-split scenarios are refused.
    """

    cluster: str = "sia_64"
    workload: str = "philly"
    workload_kwargs: dict[str, Any] = field(default_factory=dict)
    seed_lo: int = 0
    seed_hi: int = 10
    scenario: str | None = None


#: Seeds of training episodes on benchmark scenarios. The benchmark evaluates seeds 0, 1, 2, ...
#: of each scenario; training draws its windows from seeds far above them.
TRAIN_SEED_LO = 1000
TRAIN_SEED_HI = 1_000_000


def train_split_curriculum() -> list[CurriculumItem]:
    """Every scenario of the benchmark's train split (its families, both clusters, light to
    overloaded loads, rigid and elastic jobs), windows drawn from seeds the benchmark does not
    evaluate. Validation and test families are never drawn."""
    from hetsched.benchmark.scenarios import scenarios_in

    return [
        CurriculumItem(scenario=s.name, seed_lo=TRAIN_SEED_LO, seed_hi=TRAIN_SEED_HI)
        for s in scenarios_in("train")
    ]


@dataclass
class ClusterDrawConf:
    """Cluster-shape and node-count randomisation of training episodes
    (:class:`hetsched.sim.cluster_draw.ClusterDraw`).

    Attributes:
        fraction: Share of training episodes played on a drawn cluster instead of the
            curriculum item's own (0: never). The episode's workload is drawn for the drawn
            cluster (a scenario's windows rescaled to its offered load there); a draw on which
            some job of it could never run is drawn again.
        gpu_types: GPU types a drawn node group may have. ``rtx6000`` is left out: the validation
            cluster ``rtx_64`` holds it, so validation measures a type never trained on.
        groups: Node groups (one GPU type each) per drawn cluster, ``[low, high]``.
        nodes: Nodes per group, ``[low, high]``.
        gpus_per_node: GPUs per node (one value per group).
        cpus_per_gpu: Host CPU cores per GPU.
        mem_gib_per_gpu: Host memory per GPU (GiB).
        total_gpus: A drawn cluster's GPU total, ``[low, high]``.
    """

    fraction: float = 0.5
    gpu_types: list[str] = field(
        default_factory=lambda: ["k80", "p100", "v100", "t4", "a100", "rtx2080ti"]
    )
    groups: list[int] = field(default_factory=lambda: [2, 4])
    nodes: list[int] = field(default_factory=lambda: [1, 12])
    gpus_per_node: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    cpus_per_gpu: list[float] = field(default_factory=lambda: [8.0, 12.0, 16.0, 32.0, 48.0])
    mem_gib_per_gpu: list[float] = field(default_factory=lambda: [32.0, 64.0, 128.0, 256.0])
    total_gpus: list[int] = field(default_factory=lambda: [32, 160])

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.fraction) <= 1.0:
            raise ValueError(f"agent.cluster_draw.fraction={self.fraction!r} must lie in [0, 1]")


@dataclass
class JobDrawConf:
    """Job-mix randomisation of training windows
    (:class:`hetsched.benchmark.job_draw.JobMixDraw`: GPU requests redrawn at the window's
    offered load, each redrawn job as long as it was).

    Attributes:
        fraction: Share of training windows whose job mix is redrawn (0: never).
        share: Share of a redrawn window's jobs that get a new GPU count, ``[low, high]``.
        gpus: GPU counts a redrawn job may get (uniformly).
    """

    fraction: float = 0.0
    share: list[float] = field(default_factory=lambda: [0.2, 0.7])
    gpus: list[int] = field(default_factory=lambda: [2, 4, 8, 16])


@dataclass
class EvalConf:
    """Periodic evaluation against a fixed baseline on the validation item.

    Attributes:
        every: Env steps between evaluations (0: no evaluation, no ``best.pt``).
        scenario: A benchmark scenario of the validation split (its cluster and seeded
            windows); null = ``cluster``, ``workload`` and ``workload_kwargs`` below.
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
    scenario: str | None = "itp_c06_sia64_busy"
    cluster: str | None = None
    workload: str | None = None
    workload_kwargs: dict[str, Any] = field(
        default_factory=lambda: {"start": 55000, "num_jobs": 300}
    )
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
    curriculum: list[CurriculumItem] = field(default_factory=train_split_curriculum)
    cluster_draw: ClusterDrawConf = field(default_factory=ClusterDrawConf)
    job_draw: JobDrawConf = field(default_factory=JobDrawConf)
    eval: EvalConf = field(default_factory=EvalConf)

    def __post_init__(self) -> None:
        if self.conflict not in CONFLICT_MODES:
            raise ValueError(
                f"agent.conflict={self.conflict!r} is not one of {list(CONFLICT_MODES)}"
            )
        shrinks = self.teacher.shrink_share is not None or self.env.shrink_feature
        if shrinks and not self.env.preemptive:
            raise ValueError(
                "agent.teacher.shrink_share and agent.env.shrink_feature need evictions: set "
                "agent.env.preemptive=true (or leave both unset)"
            )
        if self.net.level_head and not self.env.level_share_feature:
            raise ValueError(
                "agent.net.level_head reads the per-level share inputs: set "
                "agent.env.level_share_feature=true (or agent.net.level_head=false)"
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
        out: Copy of the run's result (``best.pt``, else the last checkpoint) to this path,
            e.g. ``out=my_maifs.pt``; null = none.
        progress: One tqdm progress bar per phase (behaviour cloning in episodes, PPO in env steps).
        max_wall_s: Stop training (either phase) after this many wall-clock seconds (null: no
            limit; a time-limited run is not reproducible step for step).
        max_env_steps: Stop training (either phase) after this many env steps in all (null: no
            limit beyond the phases' own budgets).
        num_workers: Worker processes that play episodes (1: in this process). Episodes are
            seeded one by one from the run's generator, so the count changes the wall time,
            not which episodes are played.
        device: Where the learner's fits and updates run: ``auto`` (a CUDA GPU when one is
            present, else the CPU), ``cpu`` or ``cuda``. Episodes are always played on CPUs.
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
    max_env_steps: int | None = None
    num_workers: int = 1
    device: str = "auto"

    def __post_init__(self) -> None:
        if isinstance(self.num_workers, bool) or not int(self.num_workers) >= 1:
            raise ValueError(f"num_workers={self.num_workers!r} must be an integer >= 1")
        for name in ("max_wall_s", "max_env_steps"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise ValueError(f"{name}={v!r} must be positive (or null: no limit)")


#: Rounds in a row a scheduler may leave an idle cluster idle while jobs wait, none is still to
#: arrive and it places nothing, before the run stops with an error
#: (:class:`hetsched.agents.policy.PolicyStallError`).
MAX_IDLE_ROUNDS = 1440  # a simulated day of 60-s rounds


@dataclass
class MAIFSSchedulerConf:
    """:class:`hetsched.agents.policy.MAIFSPolicy`: the trained network as a scheduler.

    Attributes:
        checkpoint: Checkpoint path; null = the shipped ``hetsched/checkpoints/maifs_default.pt``.
        greedy: Argmax actions (false: sample with the run's generator).
        max_idle_rounds: See :data:`MAX_IDLE_ROUNDS`.
        decision_order: Who decides first in the ordered decision (``rate`` or
            ``confidence``, :class:`AgentEnvConf`); null = the checkpoint's own.
    """

    _target_: str = "hetsched.agents.policy.MAIFSPolicy"
    checkpoint: str | None = None
    greedy: bool = True
    max_idle_rounds: int = MAX_IDLE_ROUNDS
    decision_order: str | None = None


@dataclass
class TeacherSchedulerConf:
    """:class:`hetsched.agents.policy.TeacherPolicy`: the behaviour-cloning teacher as a
    baseline (its settings as in :class:`TeacherConf` and :class:`AgentEnvConf`)."""

    _target_: str = "hetsched.agents.policy.TeacherPolicy"
    window: int = AgentEnvConf.window
    order: str = TeacherConf.order
    min_rel_rate: float = TeacherConf.min_rel_rate
    fungible: bool = AgentEnvConf.fungible
    long_s: float = TeacherConf.long_s
    round_s: float = AgentEnvConf.round_s
    max_idle_rounds: int = MAX_IDLE_ROUNDS
    gpu_levels: list[float] = field(default_factory=lambda: list(AGENT_GPU_LEVELS))
    elastic_share: bool = TeacherConf.elastic_share
    resize_gain_s: float | None = TeacherConf.resize_gain_s
    migrate_gain_s: float | None = TeacherConf.migrate_gain_s
    migrate_speedup: float | None = AgentEnvConf.migrate_speedup
    share_guard: bool = AgentEnvConf.share_guard
    window_backfill: int = AgentEnvConf.window_backfill
    migrate_gangs: bool = AgentEnvConf.migrate_gangs
    migrate_multinode: bool = AgentEnvConf.migrate_multinode
    share_guard_all: bool = AgentEnvConf.share_guard_all
    retry_refused: bool = AgentEnvConf.retry_refused
    migrate_elastic: bool = AgentEnvConf.migrate_elastic
    reclaim_cores: bool = AgentEnvConf.reclaim_cores
    evict_ratio: float | None = TeacherConf.evict_ratio
    evict_wait_s: float = TeacherConf.evict_wait_s
    evict_protect: float | None = TeacherConf.evict_protect
    long_drain: float | None = TeacherConf.long_drain
    shrink_share: float | None = TeacherConf.shrink_share
    gang_fastest: bool = TeacherConf.gang_fastest


def register_agent_configs() -> None:
    """Register the agent, training and scheduler schemas (idempotent)."""
    cs = ConfigStore.instance()
    cs.store(group="schema/agent", name="maifs", node=MAIFSAgentConf)
    cs.store(name="train_schema", node=TrainConfig)
    cs.store(group="schema/scheduler", name="maifs", node=MAIFSSchedulerConf)
    cs.store(group="schema/scheduler", name="maifs_teacher", node=TeacherSchedulerConf)
