"""The decision-round core shared by the PettingZoo and Gymnasium envs (numpy only).

A *scheduling round* starts at a simulator round boundary. Running jobs keep their placement
unless an agent evicts them (only with ``EnvSettings.preemptive``, see "Evictions" below; a
fixed policy that preempts uses the allocation path, see :meth:`EnvCore.apply_allocation`).
During the round the agents take one or more *decision steps*; each step places jobs from the
candidate window onto free resources, building the round's allocation. The round's simulated
time then advances (``Simulator.advance`` with the running jobs plus everything placed) when

* a decision step placed nothing (every agent passed, or every claim was invalid or lost; with
  ``EnvSettings.retry_refused``, a step whose claims were all refused gang claims instead masks
  each refused agent's gang claims of that slot for the rest of the round, keeps its claims the
  node hosts alone, and the agents decide again), or
* no agent has a legal placement left ("nothing more fits"), or
* ``max_decisions_per_round`` decision steps were taken.

How far time advances is ``EnvSettings.advance``. With ``skip_idle`` (default), a new round in
which no agent has a legal placement is not shown to the agents: the env advances to the next
arrival or completion by itself (identical dynamics: in a non-preemptive env nothing can change
before that). A round that ended because nothing fits is advanced straight to that event in
one engine call (the same round boundaries as one round followed by the skip).

With ``failures`` (a :class:`~hetsched.sim.faults.FailureSpec`), a node that is down at a round
boundary offers no resources: its agent stays in the episode with only the no-op legal and its
``node_up`` feature at 0; jobs stopped by a failure return to the waiting queue (engine rules).

**Conflicts** (maifs.md section 4; see :meth:`EnvCore.resolve_claims`): claims on different jobs
never interact (an agent claims one job per step, so nodes are disjoint). For one job:

1. If some claimant can host the whole job alone, exactly one such claimant wins
   (``conflict_rule``: lowest agent index by default); every other claimant counts a conflict.
2. Otherwise the claims form a gang per GPU type: the lowest-index claimant of the type is the
   lead and fixes the GPU count and CPU/memory levels; members, sorted by GPU capacity at those
   levels (descending, then index), contribute ``min(capacity, GPUs still needed)`` until the
   count is met. Among the types whose gang fills (and has positive throughput at its layout),
   the one whose gang runs the job fastest wins (isolated throughput at its GPU count, packed or
   spread), then the one with the fewest nodes, ties to the lowest lead index. Unused claimants
   count a conflict; if no type fills, every claimant counts a failed gang claim and the job
   waits.

**Evictions** (``EnvSettings.preemptive``). Actions ``A_p .. A_p + R - 1`` after the ``A_p``
placement actions evict the job in resident slot ``r`` of the agent's node. Legal iff the slot
holds a job that was running when the round started (not one placed this round), the node is up
and some job waits in the window, or (with ``migrate_speedup``) the job could move to a free
node that runs it that many times as fast (and, with ``evict_max``, the job was evicted fewer
times than that this episode). In a decision step the claims are resolved first (against the
window the agents saw), then the evictions: the job's entries leave every node that holds it,
their resources are free for the next decision step, and the job rejoins the waiting queue in
its window order (it may be placed again this round). A step that evicts counts as acting, so
the round goes on; while an eviction is legal a round is shown to the agents even if no
placement is.

**Resizes** (``EnvSettings.resizable``). R more actions, after the placements and evictions,
double the GPUs of the elastic job in resident slot ``r`` on the agent's node, when no waiting
job could use them (rules in :mod:`hetsched.envs.resizes`). They are resolved after the claims
of a step (before its evictions, which changes no outcome); like an eviction, a resize keeps
the round going, and a round is shown while a resize is legal.

**Stalls.** An episode is ``stalled`` (the envs truncate it) when waiting jobs can never be
placed (nothing runs, nothing fits, no arrival or repair is to come), or after
``EnvSettings.stall_steps`` consecutive decision steps without progress: some agent had a legal
action, yet no job was placed and the round's time advanced with nothing running
(:attr:`EnvCore.stall_reason` says which). Methods that need an episode raise
:class:`EnvNotResetError` before the first :meth:`EnvCore.reset`.

**Reward** (team): see :class:`~hetsched.envs.spaces.RewardWeights`. The jobs term integrates
the number of arrived, unfinished jobs over simulated time (``RoundRecord.jobs_in_system_s`` plus
the time between a job's arrival and its admission at the next round boundary), so with weight
1 its episode sum is exactly ``- total JCT / Z``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.envs import kernels, kernels_claims, kernels_engine, kernels_step
from hetsched.envs.claims import ClaimResolver, fill_gang, is_spread
from hetsched.envs.core_state import (
    BIG_ROUNDS,
    EPS,
    ClaimResult,
    CoreState,
    EnvNotResetError,
    StepStats,
    _EnvSimulator,
)
from hetsched.envs.evictions import EvictionRules, slot_ranks
from hetsched.envs.features import FeatureBuilder, JobTable, MaskArrays, build_job_table
from hetsched.envs.observing import Observing
from hetsched.envs.presets import WorkloadFactory, make_workload
from hetsched.envs.resizes import ResizeRules
from hetsched.envs.rounds import RoundFlow
from hetsched.envs.spaces import ActionCodec, EnvSettings
from hetsched.sim.allocation import Allocation
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimConfig, SimState
from hetsched.sim.faults import FailureSpec
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

__all__ = [
    "BIG_ROUNDS", "EPS", "ClaimResult", "CoreState", "EnvCore", "EnvNotResetError", "StepStats",
    "fill_gang", "is_spread", "slot_ranks",
]  # fmt: skip


class EnvCore(RoundFlow, ClaimResolver, EvictionRules, ResizeRules, Observing):
    """Simulator wrapper with decision rounds, placement, conflict resolution and features.

    Args:
        cluster: The cluster.
        workload: A fixed workload or a factory called once per episode.
        throughput: Ground-truth throughput model.
        settings: Env settings.
        failures: Node failures (:class:`~hetsched.sim.faults.FailureSpec`); each episode
            builds its schedule from a seed drawn from the episode's generator. A down node
            offers nothing: its agent only has the no-op.

    Attributes:
        evicted_this_round: Shape (J,) bool: the jobs an agent evicted in the current round
            (preemptive envs only). They wait in the window and may be placed again; the
            teacher (:mod:`hetsched.agents.teacher`) leaves them for the next round.
        evict_protected: Shape (J,) bool, or None (the default): jobs no eviction action may
            take off. The env never sets it; a policy acting through the core may (e.g.
            :class:`hetsched.agents.policy.CoreActorPolicy` with ``evict_allowance``, which
            shares its preemption rules' allowance with the learned evictions). Read when the
            masks are built (:meth:`refresh`).
    """

    def __init__(
        self,
        cluster: Cluster,
        workload: Workload | WorkloadFactory,
        throughput: ThroughputModel,
        settings: EnvSettings,
        failures: FailureSpec | None = None,
    ) -> None:
        if failures is not None and not isinstance(failures, FailureSpec):
            raise ValueError(
                f"failures={failures!r} must be a hetsched.sim.faults.FailureSpec or None"
            )
        self.failures = failures if failures is not None and failures.enabled else None
        self.cluster = cluster
        self.workload_source = workload
        self.tm = throughput
        self.cfg = settings
        self.N = cluster.num_nodes
        self._arange_n = np.arange(self.N)
        self.K = settings.window
        self.features = FeatureBuilder(
            cluster,
            throughput,
            settings.levels,
            settings.window,
            settings.resident_slots,
            settings.max_decisions_per_round,
        )
        self.layout = self.features.layout
        self._resident_kernel: Any | None = kernels.get("resident")
        self.codec = ActionCodec(settings.window, settings.levels)
        self._claims_kernel: Any | None = kernels_claims.get()
        self._codec_shape = np.array(self.codec.shape, dtype=np.int64)
        self._rule_code = kernels_claims.RULE_CODES[settings.conflict_rule]
        self._n_types = int(cluster.node_type.max()) + 1
        self._round_kernel: Any | None = kernels_step.get("round_start")
        self._head_kernel: Any | None = kernels_step.get("node_head")
        self._window_kernel: Any | None = kernels_step.get("window")
        #: Placement actions A_p (no-op included) and all actions (plus R evictions when
        #: preemptive, plus R resizes when resizable).
        self.n_place = self.codec.n
        R = settings.resident_slots
        self.n_actions = self.codec.n + R * (int(settings.preemptive) + int(settings.resizable))
        self.node_up = np.ones(self.N, dtype=bool)
        self.sim: _EnvSimulator | None = None
        #: Trusted rounds run compiled (hetsched.envs.kernels_engine); False: the engine's code.
        self._engine_compiled = kernels_engine.available()
        self.wl: Workload | None = None
        self.jt: JobTable | None = None
        self.last_alloc = Allocation.empty()
        self._round_alloc: Allocation | None = None  # round_allocation(), built once per change
        self.stalled = False
        #: Why the episode stalled: ``"unplaceable"`` (waiting jobs can never be placed),
        #: ``"no_progress"`` (``EnvSettings.stall_steps`` steps without progress) or "".
        self.stall_reason = ""
        #: Consecutive decision steps without progress (see ``EnvSettings.stall_steps``).
        self.no_progress_steps = 0
        #: The last decision step's claims were all refused (``EnvSettings.retry_refused``).
        self.refused_step = False
        self._empty: MaskArrays | None = None
        self._obs_cache: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None
        self._common_cache: NDArray[np.float64] | None = None
        self._any_legal: bool | None = None
        self._evict_map: NDArray[np.int64] | None = None
        self.evict_protected: NDArray[np.bool_] | None = None
        self.ma: MaskArrays

    # ------------------------------------------------------------------ episode
    def reset(self, rng: np.random.Generator) -> None:
        """Start an episode (a new workload from the factory, if any, drawn with ``rng``)."""
        src = self.workload_source
        if isinstance(src, Workload):
            wl = src
        else:
            wl = make_workload(src, throughput=self.tm, cluster=self.cluster, rng=rng.spawn(1)[0])
        cfg = SimConfig(
            round_s=self.cfg.round_s,
            max_time_s=float("inf") if self.cfg.max_time_s is None else float(self.cfg.max_time_s),
            max_idle_rounds=1 << 62,
            record_timeline=True,
        )
        if self.failures is not None:  # a fresh schedule per episode, seeded from rng
            sched = self.failures.build(self.N, int(rng.integers(2**31 - 1)))
            self.sim = _EnvSimulator(self.cluster, wl, self.tm, cfg, failures=sched)
        elif self.sim is not None and self.wl is wl:
            self.sim.config = cfg
            self.sim.reset()
        else:
            self.sim = _EnvSimulator(self.cluster, wl, self.tm, cfg)
        if self.jt is None or self.wl is not wl:
            self.wl = wl
            self.jt = build_job_table(wl, self.tm, self.cluster, self.cfg.levels)
        self.node_up[:] = True
        self.J = wl.num_jobs
        # Progress shaping (RewardWeights.progress): GPU-seconds at the best rate per work unit.
        self._progress_w: NDArray[np.float64] | None = None
        if self.cfg.reward_weights.progress != 0.0:
            best = self.jt.best_tput
            self._progress_w = np.where(best > 0, wl.req_gpus / np.where(best > 0, best, 1.0), 0.0)
            self._phi = float(self.sim.remaining @ self._progress_w)
        self._job_flags()
        self._n_done = 0
        self._admitted = 0
        self.stalled = False
        self.stall_reason = ""
        self.no_progress_steps = 0
        self.last_alloc = Allocation.empty()
        self.episode_jobs_s = 0.0
        stats = StepStats()
        self._account_admissions(stats)
        self._start_round()
        if self.cfg.skip_idle:
            self._skip_idle(stats)
        self._pending_stats = stats  # folded into the first step (0 unless jobs wait at reset)

    def require_episode(self, what: str) -> None:
        """Raise :class:`EnvNotResetError` naming ``what`` unless an episode was started.

        Raises:
            EnvNotResetError: Before the first :meth:`reset`.
        """
        if self.sim is None:
            raise EnvNotResetError(
                f"{what} called before reset(); call env.reset(seed=...) to start an episode first"
            )

    @property
    def done(self) -> bool:
        """Every job finished or the simulation horizon was reached."""
        assert self.sim is not None
        return self.sim.done

    @property
    def jobs_in_system(self) -> int:
        """Jobs waiting at the round's start (those placed since included) plus jobs running."""
        return int(self.pending.size) + self._n_cur_jobs

    @property
    def unfinished_jobs(self) -> int:
        """Jobs of the episode's workload that have not finished (arrived or not)."""
        return int(self.J - self._n_done)

    @property
    def all_finished(self) -> bool:
        """Every job finished."""
        return self._n_done >= self.J

    def sim_state(self) -> SimState:
        """The simulator's snapshot at the current round boundary."""
        assert self.sim is not None
        return self.sim.state(self.cfg.round_s)
