"""The decision-round core shared by the PettingZoo and Gymnasium envs (numpy only).

A *scheduling round* starts at a simulator round boundary. Running jobs keep their placement
unless an agent evicts them (only with ``EnvSettings.preemptive``, see "Evictions" below; a
fixed policy that preempts uses the allocation path, see :meth:`EnvCore.apply_allocation`).
During the round the agents take one or more *decision steps*; each step places jobs from the
candidate window onto free resources, building the round's allocation. The round's simulated time then advances (``Simulator.advance`` with the
running jobs plus everything placed) when

* a decision step placed nothing (every agent passed, or every claim was invalid or lost), or
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
   the one with the fewest nodes wins, ties to the lowest lead index. Unused claimants count a
   conflict; if no type fills, every claimant counts a failed gang claim and the job waits.

**Evictions** (``EnvSettings.preemptive``). Actions ``A_p .. A_p + R - 1`` after the ``A_p``
placement actions evict the job in resident slot ``r`` of the agent's node. Legal iff the slot
holds a job that was running when the round started (not one placed this round), the node is up
and some job waits in the window (and, with ``evict_max``, the job was evicted fewer times
than that this episode). In a decision step the claims are resolved first (against the
window the agents saw), then the evictions: the job's entries leave every node that holds it,
their resources are free for the next decision step, and the job rejoins the waiting queue in
its window order (it may be placed again this round). A step that evicts counts as acting, so
the round goes on; while an eviction is legal a round is shown to the agents even if no
placement is.

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

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.envs import kernels
from hetsched.envs.features import NUM_TYPES, FeatureBuilder, JobTable, MaskArrays, build_job_table
from hetsched.envs.presets import WorkloadFactory, make_workload
from hetsched.envs.spaces import ActionCodec, EnvSettings
from hetsched.sim.allocation import Allocation
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import FUTURE, RoundRecord, SimConfig, SimState, Simulator
from hetsched.sim.faults import FailureSpec
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

BIG_ROUNDS = 1 << 40
EPS = 1e-9


class EnvNotResetError(RuntimeError):
    """An env method that needs an episode was called before the first ``reset()``."""


class _EnvSimulator(Simulator):
    """A :class:`Simulator` that can skip re-validating allocations the env built itself."""

    trusted: bool = False

    def validate(self, alloc: Allocation) -> None:
        """Validate unless the allocation comes from the env's own (checked) placement."""
        if not self.trusted:
            super().validate(alloc)


@dataclass
class StepStats:
    """Team-level counts and reward parts of one env step."""

    jobs_s: float = 0.0
    rounds: int = 0
    placed: int = 0
    conflicts: int = 0
    gang_failed: int = 0
    invalid: int = 0
    makespan_s: float = 0.0
    terminal: bool = False
    progress_gpu_s: float = 0.0
    evicted: int = 0


@dataclass
class ClaimResult:
    """Per-agent outcome of one decision step, each shape (N,).

    ``evicted`` marks agents whose eviction action took a job off (preemptive envs only);
    ``evicted_jobs`` counts the distinct jobs evicted.
    """

    invalid: NDArray[np.bool_]
    granted: NDArray[np.bool_]
    conflict: NDArray[np.bool_]
    gang_failed: NDArray[np.bool_]
    evicted: NDArray[np.bool_]
    evicted_jobs: int = 0


def fill_gang(
    nodes: NDArray[np.int64], room: NDArray[np.int64], G: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]] | None:
    """``G`` GPUs over the fewest of ``nodes``, largest ``room`` (GPUs that fit) first.

    Ties go to the lower node index; the last node takes only what is still needed.

    Returns:
        ``(nodes, gpus per node)``, or None if the rooms add up to fewer than ``G``.
    """
    order = np.lexsort((nodes, -room))
    keep = room[order] > 0
    use_all, cap = nodes[order][keep], room[order][keep]
    cum = np.cumsum(cap)
    if cum.size == 0 or cum[-1] < G:
        return None
    cnt = int(np.searchsorted(cum, G) + 1)
    g = cap[:cnt].copy()
    g[-1] -= int(cum[cnt - 1] - G)
    return use_all[:cnt], g


def slot_ranks(
    nodes: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Resident-slot order of allocation entries: ``(order, node, rank)``, each shape (E,).

    ``order`` sorts the entries by node, stably (a node's entries keep their allocation
    order); ``node`` and ``rank`` are each sorted entry's node and its index among that
    node's entries, i.e. its resident slot when ``rank < R``.
    """
    order = np.argsort(nodes, kind="stable")
    ns = nodes[order]
    return order, ns, np.arange(ns.shape[0]) - np.searchsorted(ns, ns, side="left")


def is_spread(cluster: Cluster, nodes: NDArray[np.int64], G: int) -> bool:
    """A job of ``G`` GPUs on ``nodes`` uses more nodes than the fewest that could hold it."""
    return nodes.size > -(-G // int(cluster.node_gpus[nodes].max()))


class EnvCore:
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
        #: Placement actions A_p (no-op included) and all actions (A_p + R when preemptive).
        self.n_place = self.codec.n
        self.n_actions = self.codec.n + (settings.resident_slots if settings.preemptive else 0)
        self.node_up = np.ones(self.N, dtype=bool)
        self.sim: _EnvSimulator | None = None
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

    # ------------------------------------------------------------------ rounds
    def _start_round(self) -> None:
        sim, wl = self.sim, self.wl
        assert sim is not None and wl is not None
        cl = self.cluster
        cur = sim.current
        N = self.N
        self._cur = cur
        self._round_alloc = cur
        if cur.size == 0:
            self.free_g = np.array(cl.node_gpus, dtype=np.int64)
            self.free_c = np.array(cl.node_cpus, dtype=np.float64)
            self.free_m = np.array(cl.node_mem, dtype=np.float64)
        elif int(cur.share.max()) < 0:  # no space sharing (always so for the env's entries)
            node = cur.node
            used_g = np.bincount(node, weights=cur.gpus, minlength=N)
            self.free_g = cl.node_gpus - used_g.astype(np.int64)
            self.free_c = cl.node_cpus - np.bincount(node, weights=cur.cpus, minlength=N)
            self.free_m = cl.node_mem - np.bincount(node, weights=cur.mem, minlength=N)
        else:
            self.free_g = cl.node_gpus - cur.used_gpus_per_node(N)
            self.free_c = cl.node_cpus - cur.used_cpus_per_node(N)
            self.free_m = cl.node_mem - cur.used_mem_per_node(N)
        if self.failures is not None:
            up = sim.node_up
            self.node_up[:] = up
            if not up.all():  # a down node offers nothing
                self.free_g = np.where(up, self.free_g, 0)
                self.free_c = np.where(up, self.free_c, 0.0)
                self.free_m = np.where(up, self.free_m, 0.0)
        self._new: list[Allocation] = []  # one per placement this round
        self._placed[:] = False
        # Entries per node this round (resident-slot features are built when observed).
        self._count = np.bincount(cur.node, minlength=N).astype(np.int64)
        self._n_cur_jobs = len(set(cur.job.tolist()))  # distinct running jobs
        self._n_new_jobs = 0
        self.pending = self._in_window_order(sim.pending_jobs())
        self.decision_step = 0
        self._evict_map = None
        if self.cfg.preemptive:
            self.evicted_this_round[:] = False
        self.refresh()

    def _job_flags(self) -> None:
        """Per-job flags of an episode (shape (J,) each): placed this round, evictions so far
        (``evict_max``), evicted this round."""
        self._placed = np.zeros(self.J, dtype=bool)
        self._evicted_n = np.zeros(self.J, dtype=np.int64)
        self.evicted_this_round = np.zeros(self.J, dtype=bool)

    def _in_window_order(self, pend: NDArray[np.int64]) -> NDArray[np.int64]:
        """``pend`` (arrival order) sorted by ``EnvSettings.window_order``."""
        sim = self.sim
        assert sim is not None
        if self.cfg.window_order == "attained" and pend.size:
            pend = pend[np.lexsort((pend, sim.attained_gpu_s[pend]))]
        elif self.cfg.window_order == "sjf" and pend.size:
            pend = pend[np.lexsort((pend, self.est_run_s(pend)))]
        elif self.cfg.window_order == "typed" and pend.size:
            pend = pend[self.typed_order(pend)]
        return pend

    def est_run_s(self, jobs: NDArray[np.int64]) -> NDArray[np.float64]:
        """Estimated run time (s) of ``jobs``: remaining work over the isolated rate at the
        request on the fastest allowed GPU type present (the ``"sjf"`` window order's key).
        """
        assert self.sim is not None and self.jt is not None
        best = self.jt.best_tput[jobs]
        out = np.full(best.shape, np.inf)  # a job no present type can run: never short
        np.divide(self.sim.remaining[jobs], best, out=out, where=best > 0)
        return out

    def typed_order(self, jobs: NDArray[np.int64]) -> NDArray[np.int64]:
        """Permutation of ``jobs`` for the ``"typed"`` window order.

        Each GPU type present ranks the jobs it can run by their estimated run time on it
        (remaining work over the isolated rate at the request on that type; ties to the lower
        job index). The order takes the types' lists in turn -- the first job of every type,
        then the second, and so on, types in index order -- and keeps each job's first
        appearance, so every GPU type finds the jobs that run shortest on it near the front of
        the window (with ``"sjf"``, a burst of jobs that are short only on the fastest type
        fills the window while slower types idle). Jobs no present type can run come last, in
        the given order. Loops over the (few) GPU types only; vectorised over jobs.

        Returns:
            Indices into ``jobs``, shape (len(jobs),).
        """
        assert self.sim is not None and self.jt is not None
        rate = self.jt.rel_tput[jobs] * self.jt.best_tput[jobs, None]  # (P, T) work units/s
        types = np.flatnonzero(self.cluster.gpus_per_type() > 0)
        P = jobs.shape[0]
        key = np.full(P, np.iinfo(np.int64).max, dtype=np.int64)
        rem = self.sim.remaining[jobs]
        for i, t in enumerate(types):
            ok = rate[:, t] > 0
            est = np.full(P, np.inf)
            np.divide(rem, rate[:, t], out=est, where=ok)
            rank = np.empty(P, dtype=np.int64)
            rank[np.lexsort((jobs, est))] = np.arange(P)
            key = np.where(ok, np.minimum(key, rank * types.size + i), key)
        return np.lexsort((np.arange(P), key))

    def _add_entries(
        self,
        jobs: NDArray[np.int64],
        nodes: NDArray[np.int64],
        gpus: NDArray[np.int64],
        cpus: NDArray[np.float64],
        mem: NDArray[np.float64],
    ) -> None:
        """Record new entries (distinct nodes) in the round's allocation and free resources.

        The arrays must be 1-D with the :class:`Allocation` field dtypes (int64 / float64): they
        are wrapped without conversion.
        """
        assert self.sim is not None and self.wl is not None
        self.free_g[nodes] -= gpus
        self.free_c[nodes] -= cpus
        self.free_m[nodes] -= mem
        share = np.full(jobs.shape[0], -1, dtype=np.int64)
        self._new.append(Allocation._of_arrays(jobs, nodes, gpus, cpus, mem, share))
        self._round_alloc = None
        self._count[nodes] += 1  # distinct nodes: no repeated index
        self._placed[jobs] = True
        self._n_new_jobs += len(set(jobs.tolist()))  # distinct jobs (a gang repeats its job)

    def refresh(self) -> None:
        """Recompute the window, the masks and the cached observation parts."""
        assert self.jt is not None and self.wl is not None
        p = self.pending
        rest = p[~self._placed[p]][: self.K] if p.size else p
        win = np.full(self.K, -1, dtype=np.int64)
        win[: rest.size] = rest
        self.window = win
        self.slot_ok = win >= 0
        if not self._may_fit(rest):
            self.ma = self._empty_masks()
            self._any_legal = False
        else:
            self.ma = self.features.masks(
                self.jt,
                self.wl,
                win,
                self.slot_ok,
                self.free_g,
                self.free_c,
                self.free_m,
                self.node_up,
            )
            self._any_legal = None  # computed when first asked
        if self.cfg.preemptive:
            self.ma = replace(self.ma, mask=np.hstack([self.ma.mask, self._evict_mask()]))
        self._obs_cache = self._common_cache = None

    # ------------------------------------------------------------------ evictions
    def _evictable(self) -> NDArray[np.int64]:
        """Entry of :attr:`_cur` in each resident slot, shape (N, R); -1 where none.

        Slots follow the observation's order (:meth:`_resident`): a node's running entries in
        allocation order come first, so slot ``r < R`` of node ``i`` is its ``r``-th entry.
        """
        if self._evict_map is None:
            R = self.cfg.resident_slots
            out = np.full((self.N, R), -1, dtype=np.int64)
            cur = self._cur
            if cur.size:
                order, ns, rank = slot_ranks(cur.node)
                keep = rank < R
                out[ns[keep], rank[keep]] = order[keep]
            self._evict_map = out
        return self._evict_map

    def running(self) -> Allocation:
        """Entries of the jobs that were running before this round and still hold resources."""
        return self._cur

    def resident_entries(self) -> NDArray[np.int64]:
        """Entry of :meth:`running` that each eviction action ``n_place + r`` of each agent
        would take off, shape (N, R); -1 where the slot is empty."""
        return self._evictable()

    def _evict_mask(self) -> NDArray[np.int8]:
        """Legal evictions, shape (N, R) int8 (see the module docstring)."""
        ent = self._evictable()
        m = ent >= 0
        m &= self.node_up[:, None]
        cap, prot = self.cfg.evict_max, self.evict_protected
        if (cap is not None or prot is not None) and m.any():
            job = self._cur.job[np.where(m, ent, 0)]  # (N, R) the job in each slot
            if cap is not None:  # the job's allowance is spent
                m &= self._evicted_n[job] < cap
            if prot is not None:  # protected by whoever acts through the core
                if prot.shape != (self.J,):
                    raise ValueError(
                        f"evict_protected has shape {prot.shape}; it must be ({self.J},), one "
                        "flag per job of the episode's workload"
                    )
                m &= ~prot[job]
        if not self.slot_ok.any():  # nothing waits: an eviction could only idle GPUs
            m[:] = False
        return m.astype(np.int8)

    @property
    def evictions(self) -> NDArray[np.int64]:
        """Times each job was taken off by an eviction action this episode, shape (J,)
        (a read-only view; all zero unless preemptive)."""
        v = self._evicted_n.view()
        v.flags.writeable = False
        return v

    @property
    def any_evictable(self) -> bool:
        """Some agent has a legal eviction (always False unless preemptive)."""
        return self.cfg.preemptive and bool(self.ma.mask[:, self.n_place :].any())

    @property
    def any_action(self) -> bool:
        """Some agent has a legal placement or eviction."""
        return self.any_legal or self.any_evictable

    def release_entries(self, drop: NDArray[np.bool_]) -> Allocation:
        """Take the entries ``drop`` (a mask over :attr:`_cur`) off this round; free their
        resources. Does not touch the waiting queue or the masks.

        Returns:
            The dropped entries.
        """
        cur = self._cur
        gone = cur.select(drop)
        self._cur = cur.select(~drop)
        self._round_alloc = None
        self._evict_map = None
        N = self.N
        self.free_g += np.bincount(gone.node, weights=gone.gpus, minlength=N).astype(np.int64)
        self.free_c += np.bincount(gone.node, weights=gone.cpus, minlength=N)
        self.free_m += np.bincount(gone.node, weights=gone.mem, minlength=N)
        self._count -= np.bincount(gone.node, minlength=N)
        self._n_cur_jobs -= len(set(gone.job.tolist()))
        return gone

    def _evict(self, agents: NDArray[np.int64], slots: NDArray[np.int64]) -> int:
        """Evict the jobs in ``slots`` of ``agents`` (legal, distinct agents); jobs evicted."""
        entries = self._evictable()[agents, slots]
        jobs = np.unique(self._cur.job[entries])
        self._evicted_n[jobs] += 1
        self.evicted_this_round[jobs] = True
        self.release_entries(np.isin(self._cur.job, jobs))
        pend = np.concatenate([self.pending, jobs])
        self.pending = self._in_window_order(np.sort(pend))
        return int(jobs.size)

    def _may_fit(self, jobs: NDArray[np.int64]) -> bool:
        """Cheap necessary condition for any legal placement (skips the full masks)."""
        if jobs.size == 0:
            return False
        assert self.jt is not None
        g = int(self.jt.min_gpus[jobs].min())
        up_free = self.free_g if self.failures is None else np.where(self.node_up, self.free_g, 0)
        if int(up_free.max()) >= g:  # one node alone has room (the common case)
            return True
        per_type = np.bincount(self.cluster.node_type, weights=up_free, minlength=NUM_TYPES)
        return bool(per_type.max() >= g)

    def _empty_masks(self) -> MaskArrays:
        """Masks with only the no-op legal (same shapes as :meth:`FeatureBuilder.masks`)."""
        if self._empty is None:
            lg, lc, lm = self.cfg.levels.sizes
            N, K = self.N, self.K
            z5 = np.zeros((N, K, lg, lc, lm), dtype=bool)
            self._empty = MaskArrays(
                mask=np.zeros((N, self.codec.n), dtype=np.int8),
                legal=z5,
                single=z5,
                cpu_per_gpu=np.ones((N, K, lc)),
                mem_per_gpu=np.ones((N, K, lm)),
                mem_ok=np.zeros((N, K, lm), dtype=bool),
                fits_any=np.zeros((N, K), dtype=bool),
                fits_one=np.zeros((N, K), dtype=bool),
            )
        mask = np.zeros((self.N, self.codec.n), dtype=np.int8)
        mask[:, 0] = 1
        e = self._empty
        return MaskArrays(
            mask, e.legal, e.single, e.cpu_per_gpu, e.mem_per_gpu, e.mem_ok, e.fits_any, e.fits_one
        )

    @property
    def any_legal(self) -> bool:
        """Some agent has a legal placement."""
        if self._any_legal is None:  # once per refresh of the masks
            self._any_legal = bool(self.ma.mask[:, 1 : self.n_place].any())
        return self._any_legal

    def round_allocation(self) -> Allocation:
        """Running jobs plus everything placed so far this round (built once per change)."""
        a = self._round_alloc
        if a is None:
            a = Allocation.concat([self._cur, *self._new]) if self._new else self._cur
            self._round_alloc = a
        return a

    def _future_arrivals(self) -> bool:
        """A job still arrives, or a down node comes back (so waiting jobs may run later)."""
        assert self.sim is not None and self.wl is not None
        if self.failures is not None and not self.node_up.all():
            return True
        return bool(np.searchsorted(self.wl.arrival, self.sim.time, side="right") < self.J)

    def _max_rounds(self, alloc: Allocation, jump: bool, env_built: bool) -> int:
        sim = self.sim
        assert sim is not None
        mode = self.cfg.advance
        if alloc.size == 0 and not self._future_arrivals():
            return 1
        if jump or mode == "event":
            return BIG_ROUNDS
        if mode == "no_pending":
            if env_built:  # running jobs are all kept: nothing waits iff all pending are placed
                return BIG_ROUNDS if self._n_new_jobs >= self.pending.size else 1
            active = sim.active_jobs()
            return BIG_ROUNDS if bool(np.isin(active, alloc.job).all()) else 1
        return 1

    def _account_admissions(self, stats: StepStats) -> None:
        """Add each newly admitted job's time from arrival to admission to the integral."""
        assert self.sim is not None and self.jt is not None and self.wl is not None
        hi = int(np.searchsorted(self.wl.arrival, self.sim.time, side="right"))
        lo = self._admitted
        if hi > lo:
            cs = self.jt.arrival_cumsum
            extra = (hi - lo) * self.sim.time - (cs[hi] - cs[lo])
            stats.jobs_s += float(extra)
            self.episode_jobs_s += float(extra)
            self._admitted = hi

    def _advance(self, alloc: Allocation, stats: StepStats, *, trusted: bool, jump: bool) -> None:
        sim = self.sim
        assert sim is not None
        sim.trusted = trusted and not self.cfg.validate_allocations
        try:
            rec: RoundRecord = sim.advance(
                alloc, round_s=self.cfg.round_s, max_rounds=self._max_rounds(alloc, jump, trusted)
            )
        finally:
            sim.trusted = False
        self.last_alloc = alloc
        if self._progress_w is not None:  # progress shaping: the potential's drop
            phi = float(sim.remaining @ self._progress_w)
            stats.progress_gpu_s += self._phi - phi
            self._phi = phi
        stats.jobs_s += rec.jobs_in_system_s
        self.episode_jobs_s += rec.jobs_in_system_s
        stats.rounds += rec.rounds
        self._n_done += int(rec.completed.size)
        self._account_admissions(stats)
        self._start_round()

    def _skip_idle(self, stats: StepStats) -> None:
        """Advance while no agent has a legal placement (to the next arrival or completion)."""
        sim = self.sim
        assert sim is not None
        while not sim.done and not self.any_action:
            alloc = self.round_allocation()
            if self._stalls(alloc):
                return
            self._advance(alloc, stats, trusted=True, jump=True)

    def _stalls(self, alloc: Allocation) -> bool:
        """Set and return :attr:`stalled`: nothing runs, nothing fits, nothing will change.

        With ``alloc`` (this round's allocation) empty, no legal placement and no arrival or node
        repair to come, the waiting jobs can never be placed.
        """
        if alloc.size == 0 and not self.any_action and not self._future_arrivals():
            self.stalled = True  # stays set for the rest of the episode
            self.stall_reason = self.stall_reason or "unplaceable"
        return self.stalled

    def _count_progress(self, offered: bool, moved: bool) -> None:
        """Count decision steps without progress; stall after ``EnvSettings.stall_steps``.

        Args:
            offered: Some agent had a legal action at the step's start.
            moved: A job was placed, or the round's time advanced with jobs running.
        """
        if moved:
            self.no_progress_steps = 0
            return
        if not offered:  # nothing to do: waiting for an arrival is not the policy's stall
            return
        self.no_progress_steps += 1
        lim = self.cfg.stall_steps
        if lim is not None and self.no_progress_steps >= lim and not self.stalled:
            self.stalled = True
            self.stall_reason = "no_progress"

    def end_decision(self, placed_any: bool, stats: StepStats) -> None:
        """Close a decision step: advance the round if it is over (see the module docstring).

        Args:
            placed_any: The step placed or evicted a job.
            stats: Where the step's counts and reward parts accumulate.
        """
        self.decision_step += 1
        # Without a placement or eviction the masks are those the agents saw.
        offered = placed_any or self.any_action
        moved = stats.placed > 0
        if (
            not placed_any
            or not self.any_action
            or self.decision_step >= self.cfg.max_decisions_per_round
        ):
            # Nothing fits: with skip_idle, jump straight to the next arrival or completion
            # (the same boundaries as one round followed by _skip_idle, in one engine call).
            jump = self.cfg.skip_idle and not self.any_action
            alloc = self.round_allocation()
            moved = moved or alloc.size > 0
            if self._stalls(alloc):
                return
            self._advance(alloc, stats, trusted=True, jump=jump)
            if self.cfg.skip_idle:
                self._skip_idle(stats)
        self._count_progress(offered, moved)
        if self.done:
            self._finish(stats)

    def apply_allocation(self, alloc: Allocation, stats: StepStats) -> None:
        """The allocation action: replace this round's allocation by ``alloc`` and advance.

        Used by :mod:`hetsched.envs.adapters` when a fixed policy's decision cannot be written
        as per-agent actions (it preempts or moves a running job, places a job outside the
        window, or uses amounts off the level grid). The engine validates ``alloc``.

        Raises:
            hetsched.sim.errors.AllocationError: If ``alloc`` is invalid.
        """
        offered = self.any_action
        self._advance(alloc, stats, trusted=False, jump=False)
        self._count_progress(offered, alloc.size > 0)
        if self.cfg.skip_idle:
            self._skip_idle(stats)
        if self.done:
            self._finish(stats)

    def _finish(self, stats: StepStats) -> None:
        assert self.sim is not None and self.wl is not None
        fin = self.sim.finish_time
        if np.isfinite(fin).any():
            stats.makespan_s = float(np.nanmax(fin) - self.wl.arrival.min())
        stats.terminal = True

    def take_pending_stats(self, stats: StepStats) -> None:
        """Fold what happened during reset (admission waits, skipped rounds) into ``stats``."""
        p = self._pending_stats
        if p.jobs_s or p.rounds:
            stats.jobs_s += p.jobs_s
            stats.rounds += p.rounds
            stats.progress_gpu_s += p.progress_gpu_s
        self._pending_stats = StepStats()

    # ------------------------------------------------------------------ placement
    def _commit(
        self,
        j: int,
        nodes: NDArray[np.int64],
        gpus: NDArray[np.int64],
        cpus: NDArray[np.float64],
        mem: NDArray[np.float64],
    ) -> None:
        self._add_entries(np.full(nodes.shape[0], j, dtype=np.int64), nodes, gpus, cpus, mem)

    def _gang(
        self,
        k: int,
        members: NDArray[np.int64],
        lg: int,
        lc: int,
        lm: int,
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]] | None:
        """Fill a gang for slot ``k`` from ``members`` (one GPU type) at the given levels.

        Returns:
            ``(nodes, gpus)`` of the gang, or None if it cannot be filled.
        """
        assert self.jt is not None and self.wl is not None
        j = int(self.window[k])
        G = int(self.jt.gpu_count[j, lg])
        ma = self.ma
        cpg = ma.cpu_per_gpu[members, k, lc]
        mpg = ma.mem_per_gpu[members, k, lm]
        cap = np.minimum(
            self.free_g[members],
            np.minimum(
                np.floor(self.free_c[members] / cpg + EPS),
                np.floor(self.free_m[members] / mpg + EPS),
            ),
        ).astype(np.int64)
        cap = np.where(ma.mem_ok[members, k, lm], cap, 0)
        out = fill_gang(members, cap, G)
        if out is None:
            return None
        use, g = out
        spread = is_spread(self.cluster, use, G)
        t = int(self.cluster.node_type[use[0]])
        if not bool(self.jt.tput_ok[j, t, lg, int(spread)]):
            return None
        return use, g

    def decision_step_of(self, actions: NDArray[np.int64]) -> tuple[ClaimResult, StepStats]:
        """One decision step of per-node actions, as every multi-agent env takes it.

        Resolves the claims and evictions (:meth:`resolve_claims`), counts them into a fresh
        :class:`StepStats` (with what happened since the last step, e.g. during reset) and
        closes the step (:meth:`end_decision`: a step that placed or evicted keeps the round
        going).

        Args:
            actions: One flat action per node, shape (N,).

        Returns:
            The per-agent outcome and the step's counts and reward inputs.
        """
        stats = StepStats()
        self.take_pending_stats(stats)
        res, placed = self.resolve_claims(actions)
        stats.placed = placed
        stats.invalid = int(np.count_nonzero(res.invalid))
        stats.conflicts = int(np.count_nonzero(res.conflict))
        stats.gang_failed = int(np.count_nonzero(res.gang_failed))
        stats.evicted = res.evicted_jobs
        self.end_decision(placed > 0 or res.evicted_jobs > 0, stats)
        return res, stats

    def resolve_claims(self, actions: NDArray[np.int64]) -> tuple[ClaimResult, int]:
        """Resolve one decision step of per-node actions (see the module docstring).

        Claims are resolved first, then evictions (preemptive envs only; their count is
        ``ClaimResult.evicted_jobs``).

        Args:
            actions: One flat action per node, shape (N,); out-of-range values are invalid.

        Returns:
            The per-agent outcome and the number of jobs placed.
        """
        N = self.N
        a = np.asarray(actions, dtype=np.int64)
        in_range = (a >= 0) & (a < self.n_actions)
        a_safe = np.where(in_range, a, 0)
        legal = in_range & (self.ma.mask[self._arange_n, a_safe] == 1)
        flags = np.zeros((4, N), dtype=bool)  # one allocation for the four outcome rows
        res = ClaimResult(
            invalid=~legal, granted=flags[0], conflict=flags[1], gang_failed=flags[2],
            evicted=flags[3],
        )  # fmt: skip
        claim = legal & (a_safe > 0) & (a_safe < self.n_place)
        placed = self._claims(claim, a_safe, res) if claim.any() else 0
        ev = legal & (a_safe >= self.n_place)
        if ev.any():
            agents = ev.nonzero()[0]
            res.evicted_jobs = self._evict(agents, a_safe[agents] - self.n_place)
            res.evicted[agents] = True
        if placed or res.evicted_jobs:
            self.refresh()
        return res, placed

    def _claims(self, claim: NDArray[np.bool_], a_safe: NDArray[np.int64], res: ClaimResult) -> int:
        """Resolve the legal placement claims ``claim`` (N,) of actions ``a_safe`` into ``res``;
        returns the number of jobs placed (the caller refreshes the masks)."""
        assert self.jt is not None
        N = self.N
        agents = claim.nonzero()[0]
        a_claim = a_safe[agents]
        ks, lgs, lcs, lms = self.codec.decode_legal(a_claim)
        jt, ma = self.jt, self.ma
        jobs = self.window[ks]
        G = jt.gpu_count[jobs, lgs]
        # 1) Jobs with at least one claimant that hosts them alone: one winner per job.
        single = ma.single.reshape(N, -1)[agents, a_claim - 1]  # same flat order as the codec
        placed = 0
        si = single.nonzero()[0]
        won = np.zeros(self.K, dtype=bool)
        if si.size:
            rule = self.cfg.conflict_rule
            if rule == "best_fit":
                score = self.free_g[agents[si]] - G[si]
            elif rule == "most_free":
                score = -self.free_g[agents[si]]
            else:
                score = np.zeros(si.size, dtype=np.int64)
            order = np.lexsort((agents[si], score, ks[si]))
            sk = ks[si][order]
            first = np.ones(sk.size, dtype=bool)
            first[1:] = sk[1:] != sk[:-1]
            win = si[order[first]]  # one claim per job, in window order
            nodes = agents[win]
            kw = ks[win]
            g = G[win]
            cpus = g * ma.cpu_per_gpu[nodes, kw, lcs[win]]
            mem = g * ma.mem_per_gpu[nodes, kw, lms[win]]
            self._add_entries(jobs[win], nodes, g, cpus, mem)
            res.granted[nodes] = True
            won = np.zeros(self.K, dtype=bool)
            won[kw] = True
            lost = won[ks]
            lost[win] = False
            res.conflict[agents[lost]] = True
            placed += int(win.size)
        # 2) Jobs claimed only by nodes that cannot host them alone: same-type gangs.
        rest = ~won[ks]
        if rest.any():
            nt = self.cluster.node_type
            for k in np.unique(ks[rest]).tolist():  # at most K jobs per step
                sel = ks == k
                ag, lg, lc, lm = agents[sel], lgs[sel], lcs[sel], lms[sel]
                best: tuple[int, int, NDArray[np.int64], NDArray[np.int64], int, int] | None = None
                types = nt[ag]
                for t in np.unique(types).tolist():
                    idx = np.flatnonzero(types == t)
                    lead = int(idx[0])  # agents are sorted: the first is the lowest index
                    out = self._gang(k, ag[idx], int(lg[lead]), int(lc[lead]), int(lm[lead]))
                    if out is None:
                        continue
                    key = (out[0].size, int(ag[lead]))
                    if best is None or key < (best[0], best[1]):
                        best = (key[0], key[1], out[0], out[1], int(lc[lead]), int(lm[lead]))
                if best is None:
                    res.gang_failed[ag] = True
                    continue
                _, _, nodes_g, gg, c_l, m_l = best
                self._commit(
                    int(self.window[k]),
                    nodes_g,
                    gg,
                    gg * ma.cpu_per_gpu[nodes_g, k, c_l],
                    gg * ma.mem_per_gpu[nodes_g, k, m_l],
                )
                res.granted[nodes_g] = True
                res.conflict[ag[~np.isin(ag, nodes_g)]] = True
                placed += 1
        return placed

    def place_on_type(self, k: int, t: int, lg: int, lc: int, lm: int) -> bool:
        """Central placement: slot ``k`` on GPU type ``t`` at the given levels.

        The node is the best fit (fewest free GPUs that host the job alone, then lowest index,
        as the baselines' ``Placer``); if no node hosts it alone, a gang over the type's nodes
        (largest capacity first). Returns whether the job was placed.
        """
        assert self.jt is not None
        j = int(self.window[k])
        if j < 0:
            return False
        nodes = np.flatnonzero(self.cluster.node_type == t)
        single = self.ma.single[nodes, k, lg, lc, lm]
        if single.any():
            cand = nodes[single]
            n = int(cand[np.lexsort((cand, self.free_g[cand]))[0]])
            G = int(self.jt.gpu_count[j, lg])
            cpus = G * float(self.ma.cpu_per_gpu[n, k, lc])
            mem = G * float(self.ma.mem_per_gpu[n, k, lm])
            self._commit(j, np.array([n]), np.array([G]), np.array([cpus]), np.array([mem]))
        else:
            gang = self.ma.legal[nodes, k, lg, lc, lm] & ~self.ma.single[nodes, k, lg, lc, lm]
            members = nodes[gang]
            out = self._gang(k, members, lg, lc, lm) if members.size else None
            if out is None:
                return False
            use, g = out
            self._commit(
                j, use, g, g * self.ma.cpu_per_gpu[use, k, lc], g * self.ma.mem_per_gpu[use, k, lm]
            )
        self.refresh()
        return True

    # ------------------------------------------------------------------ features
    def _node_parts(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The own-node blocks (N, node_dim) and the global block (cached until a refresh)."""
        if self._obs_cache is None:
            nodes = self.features.node_blocks(
                self._resident(), self._count, self.free_g, self.free_c, self.free_m, self.node_up
            )
            glob = self.features.global_block(
                int(self.pending.size) - self._n_new_jobs,
                self._n_cur_jobs + self._n_new_jobs,
                self.free_g,
                self.decision_step,
                self._n_done,
                self._admitted,
                self.J,
            )
            self._obs_cache = (nodes, glob)
        return self._obs_cache

    def _obs_parts(self) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Node blocks, node-independent window features (K, job_common_dim), global block."""
        nodes, glob = self._node_parts()
        if self._common_cache is None:
            sim, wl, jt = self.sim, self.wl, self.jt
            assert sim is not None and wl is not None and jt is not None
            self._common_cache = self.features.window_common(
                jt, self.window, self.slot_ok, sim.time, wl, sim.remaining, sim.attained_gpu_s
            )
        return nodes, self._common_cache, glob

    def _resident(self) -> NDArray[np.float64]:
        """Resident-slot features of the round's entries, shape (N, R, res_dim).

        A node's slots hold its running entries (in the engine's order), then the entries placed
        this round (in placement order); entries beyond R are left out.
        """
        sim, wl = self.sim, self.wl
        assert sim is not None and wl is not None
        a = self.round_allocation()
        out = np.zeros((self.N, self.cfg.resident_slots, self.layout.res_dim))
        kernel = self._resident_kernel
        if a.size and kernel is not None:  # the same numbers, compiled (hetsched.envs.kernels)
            f = self.features
            kernel(
                a.job, a.node, a.gpus, a.cpus, a.mem, self._cur.size, wl.model, wl.cpu_per_gpu,
                wl.mem_per_gpu, wl.work, sim.remaining, sim.attained_gpu_s, f.node_gpus,
                f.node_cpus, f.node_mem, out,
            )  # fmt: skip
        elif a.size:
            order, ns, rank = slot_ranks(a.node)
            keep = rank < self.cfg.resident_slots
            e = order[keep]
            new = e >= self._cur.size  # placed during this round
            out[ns[keep], rank[keep]] = self.features.entry_features(
                wl, a.job[e], a.node[e], a.gpus[e], a.cpus[e], a.mem[e], new,
                sim.remaining, sim.attained_gpu_s,
            )  # fmt: skip
        return out

    def observations(self) -> NDArray[np.float32]:
        """Per-agent observations, shape (N, D)."""
        assert self.jt is not None and self.wl is not None
        if self.features.observe_kernel is not None:  # the same numbers, compiled
            sim = self.sim
            assert sim is not None
            nodes, glob = self._node_parts()
            return self.features.observations_compiled(
                self.jt, self.wl, self.window, self.slot_ok, self.ma, nodes, glob, sim.time,
                sim.remaining, sim.attained_gpu_s,
            )  # fmt: skip
        nodes, common, glob = self._obs_parts()
        per_node = self.features.window_node(self.jt, self.wl, self.window, self.slot_ok, self.ma)
        return self.features.observations(nodes, common, per_node, glob)

    def state(self) -> NDArray[np.float32]:
        """Global state, shape (state_dim,)."""
        assert self.jt is not None
        nodes, common, glob = self._obs_parts()
        return self.features.state(self.jt, self.window, self.slot_ok, nodes, common, glob)

    def num_jobs_status(self) -> dict[str, int]:
        """Counts of jobs by status (future, waiting, running, done)."""
        assert self.sim is not None
        st = self.sim.status
        return {
            "future": int((st == FUTURE).sum()),
            "pending": int(self.pending.size),
            "running": int(np.unique(self._cur.job).size) if self._cur.size else 0,
            "done": int(self._n_done),
        }
