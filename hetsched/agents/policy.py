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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from hetsched.agents.driver import StateCore
from hetsched.agents.teacher import SJFTeacher, preemption_room
from hetsched.baselines.base import BasePolicy
from hetsched.envs.core import EPS, EnvCore, fill_gang, is_spread
from hetsched.envs.spaces import EnvSettings
from hetsched.resources import CHECKPOINT_DIR
from hetsched.sim.allocation import Allocation
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimState
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

if TYPE_CHECKING:  # torch is imported lazily: the teacher policy runs without it
    from hetsched.agents.network import MAIFSNet, PolicyEnsemble

#: The shipped checkpoint (``hetsched/checkpoints``, resolved by :mod:`hetsched.resources`).
DEFAULT_CHECKPOINT = CHECKPOINT_DIR / "maifs_default.pt"
#: The shipped ensemble's other members (``hetsched/checkpoints/README.md``): with the default
#: checkpoint, ``scheduler=maifs`` acts with the five networks together.
DEFAULT_ENSEMBLE: tuple[Path, ...] = tuple(
    DEFAULT_CHECKPOINT.with_name(f"maifs_default_{name}.pt")
    for name in ("seed5", "seed6", "elastic", "loaded")
)

#: The rule and step counters of :meth:`CoreActorPolicy.run_stats`, in column order.
COUNTERS: tuple[str, ...] = (
    "decision_steps",
    "fallbacks",
    "guard_placements",
    "migrations",
    "preemptions",
    "fast_placements",
    "elastic_resized",
    "growths",
    "shrinks",
    "memory_lifts",
    "critical_placements",
    "memory_holds",
    "fast_preemptions",
    "wakeups",
    "eft_placements",
    "teacher_steps",
)
Actor = Callable[[EnvCore], NDArray[np.int64]]
#: Free GPUs, CPU cores and memory (GiB) per node, each shape (N,), updated as moves are made.
FreeRoom = tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]


def elastic_request(
    workload: Workload,
    throughput: ThroughputModel,
    cluster: Cluster,
    gain: float,
    max_s: float = float("inf"),
) -> NDArray[np.int64]:
    """GPU request per job as elastic sizing sees it (:class:`CoreActorPolicy`), shape (J,).

    For an elastic job (``min_gpus < max_gpus``) the ladder ``min_gpus, 2 min_gpus, 4 min_gpus,
    ...`` up to its submitted request (the last step may be less than a doubling) is climbed on
    its fastest allowed GPU type present in ``cluster`` (isolated throughput at the request) while
    each step speeds it up at least ``gain ** log2(step ratio)`` times; the count reached is its
    request. Never above the submitted request. Rigid jobs, and jobs that cannot run at
    ``min_gpus`` there, keep their request. Vectorised over jobs (a loop over the ladder's few
    rungs).

    Args:
        workload: The jobs.
        throughput: The throughput model.
        cluster: The cluster (which GPU types are present).
        gain: Speedup per doubling of the GPU count worth taking (>= 1).
        max_s: Jobs estimated longer than this (s, at the request on that type) keep it.

    Returns:
        The requests, int64, each in ``[min_gpus, req_gpus]``.
    """
    wl, tm = workload, throughput
    req = wl.req_gpus.astype(np.int64)
    elastic = wl.min_gpus < wl.max_gpus
    if not elastic.any():
        return req.copy()
    T = wl.allowed_types.shape[1]
    present = cluster.gpus_per_type()[:T] > 0
    at_req = tm.isolated(wl.model[:, None], np.arange(T)[None, :], req[:, None], False)  # (J, T)
    ok = wl.allowed_types & present[None, :] & (at_req > 0)
    k = np.argmax(np.where(ok, at_req, -1.0), axis=1)  # the fastest allowed type at the request
    best = at_req[np.arange(wl.num_jobs), k]
    # Estimated run time at the request there at most max_s (inf * 0 would warn).
    short = wl.work <= max_s * best if np.isfinite(max_s) else np.ones(wl.num_jobs, dtype=bool)
    size = wl.min_gpus.astype(np.int64)
    rate = tm.isolated(wl.model, k, size, False)
    sizable = elastic & ok.any(axis=1) & (rate > 0) & short
    climb = sizable & (size < req)
    while climb.any():
        nxt = np.minimum(2 * size, req)
        r_nxt = tm.isolated(wl.model, k, nxt, False)
        up = climb & (r_nxt >= gain ** np.log2(nxt / size) * rate)
        size = np.where(up, nxt, size)
        rate = np.where(up, r_nxt, rate)
        climb = up & (size < req)
    return np.where(sizable, size, req)


@dataclass
class _Placement:
    """A running job to re-place with ``gpus`` GPUs at the given amounts per GPU."""

    job: int
    gpus: int
    cpg: float  # CPU cores per GPU
    mpg: float  # memory (GiB) per GPU
    t_now: float  # its estimated remaining time where it runs (s)
    restart: bool = True  # whether re-placing it costs a restart (False: placed this round)


#: Orders in which :class:`CoreActorPolicy` picks the job to shrink while jobs wait.
SHRINK_ORDERS: tuple[str, ...] = ("excess", "restart_cost")
#: Timed wake-ups of :class:`CoreActorPolicy` (``wake``): which waiting thresholds they watch.
WAKE_RULES: tuple[str, ...] = ("starve", "all")
#: Who takes :class:`MAIFSPolicy`'s decision steps (``actor``): the checkpoint's network, or the
#: heuristic it was cloned from (an ablation: the same env settings and rules, no network).
ACTORS: tuple[str, ...] = ("network", "teacher")

#: A re-placement found by the rules: (saving in seconds, job, its new entries).
_Candidate = tuple[float, int, Allocation]


@dataclass
class _MoveRound:
    """What the migration step of one round works with (see :meth:`CoreActorPolicy._migrate`)."""

    core: EnvCore
    state: SimState
    cur: Allocation  # the running jobs' entries
    target: NDArray[np.bool_]  # (N,) nodes a job may move to
    free: FreeRoom  # room left, updated by each move
    gain: float  # smallest fraction of its remaining time a move must save


class CoreActorPolicy(BasePolicy):
    """Event-driven policy whose rounds are env decision steps.

    Rules complete the actor's decisions (each counts its uses):

    * **Idle-cluster fallback** (always on): when nothing runs and the actor's claims placed
      nothing although something fits, the teacher places that round (an event-driven policy
      would otherwise wait forever).
    * **Starvation guard** (``starve_guard_s``, off by default): after the actor's steps, while a
      window job that has waited at least ``starve_guard_s`` seconds fits at its requested
      amounts, it is placed -- the longest-waiting first, on the node with the fastest GPU type
      for it that hosts it alone (lowest index on ties), else as a gang over the nodes of the
      fastest type that can hold it. It makes the policy work-conserving for starved jobs: the
      learned agents may leave a job waiting on idle GPUs for a faster node, but not forever.
      Being event-driven, the policy checks it at decision points (arrivals and completions).
      ``scheduler=maifs`` turns it on at 6 h (``hetsched/conf/scheduler/maifs.yaml``; chosen on the
      validation windows, ``docs/maifs_log.md``). With ``starve_first`` it also runs before
      the actor's steps (and the preemption for a much faster GPU), over every waiting job,
      not only the window's: the jobs that have waited ``starve_guard_s`` go to the window's
      front, longest-waiting first, and are placed as above while one fits; then the window
      goes back to its order. Classic aging: on a loaded cluster the actor's window (shortest
      first) would otherwise take each node that frees before the guard looks. Tried on
      validation, not adopted: worse on both avg JCT and makespan (``docs/maifs_log.md``).
    * **Migration to idle faster GPUs** (``migrate_gain``, off by default): the optional
      ``rebalance`` step of the reference design (``maifs.md`` section 2), restricted to moves.
      After the placements, a running job moves, with its GPU count and CPU and memory per GPU
      unchanged, to nodes of a faster GPU type for it that are up, have room for it and on
      which no window job is legal at its requested amounts (idle capacity that the waiting
      jobs cannot use now) -- when its estimated remaining time there, restart delay included,
      is below ``1 - migrate_gain`` times its remaining time where it is (isolated rates). A
      job on one node moves to one node; a job on several nodes (of one GPU type) moves to one
      node of the faster type if one has room, else to the fewest nodes of that type. Multi-node
      jobs go first, then single-node ones; within each, the largest saving first. A node freed
      by a move is not a target in the same round. The engine charges the move as a restart.
    * **Fast-GPU guard** (``fast_wait_s``, off by default): after the starvation guard, while a
      window job that has waited at least ``fast_wait_s`` seconds and is estimated to run at
      most ``fast_max_s`` seconds (isolated rate at its request on its fastest allowed type)
      fits one node of that fastest type at its request, it is placed there -- the
      longest-waiting first, on the node with the fewest free GPUs that holds it (lowest index
      on ties). A short job cannot gain by waiting for a GPU faster than the fastest one, and
      holds it only briefly; the learned agents sometimes pass on it, which on a lightly
      loaded cluster (few events) leaves it waiting until the next arrival or completion.
      ``scheduler=maifs`` turns it on at once (0 s) for jobs of up to 3 h (chosen on
      validation, ``docs/maifs_log.md``).
    * **Preemption for short jobs** (``preempt_ratio``, off by default): after the placements
      and the starvation guard, the rule looks at the waiting jobs that have waited at least
      ``preempt_wait_s`` seconds, shortest first (estimated run time at the request on the
      fastest allowed type), through a window of ``K`` of them -- so short jobs queued behind
      the actor's arrival-order window are seen too. A job that fits nowhere at its requested
      amounts may take the place of one running job on one node, the *victim*: a job held on
      one node, preempted by this rule fewer than ``preempt_max`` times, whose room (with the
      node's free room) holds the waiting job at its request, and whose estimated remaining
      time (isolated rate where it runs) exceeds ``preempt_ratio`` times the waiting job's run
      time on that node. Among the victims that qualify: the fewest GPUs, then the longest
      remaining time, then the lowest node index. The victim is preempted (the engine charges
      its restart delay when it resumes) and the waiting job is placed on its node; after the
      rule the actor takes more decision steps in the room left, with its window back in its
      own order. A victim is pending from the next round on. ``preempt_max`` bounds each job's
      restarts from the rules; with ``preempt_every_s`` each full ``preempt_every_s`` seconds a
      job has held GPUs (``SimState.run_s``, restart time included) allow it one more, so a
      long job that has run for a day may be preempted more often than one that has just
      started (Tiresias-style: the more service a job has had, the less it is protected).
      With ``preempt_gangs`` (off by default and in ``scheduler=maifs``), this rule, the
      next one and the makespan guard may also take a gang held on the fewest nodes that hold
      it (a 16-GPU job on two 8-GPU nodes) as the victim, its remaining time estimated on all
      its GPUs; a gang spread wider never is, since it could come back packed with fewer
      cores per GPU and run slower (tried on validation, not adopted: ``docs/maifs_log.md``).
      Time-sharing schedulers (Sia, LAS) start short jobs at once on a busy cluster; this is
      the non-learned counterpart for MAIFS, in the SRPT spirit. ``scheduler=maifs`` turns it
      on with ratio 2.5 (4 until the re-tuning for the ensemble), at most 3 times per job, after
      2 h of waiting (chosen on validation, ``docs/maifs_log.md``).
      Without it the policy is non-preemptive: no job is stopped to make room.
    * **One preemption allowance** (``evict_allowance``, off by default): with a network that
      can evict (``EnvSettings.preemptive``), its evictions count against the same allowance
      as the rules' preemptions (``preempt_max``, plus one per ``preempt_every_s`` held), and
      it may evict only a job whose preemptions so far, by the rules and by evictions, are
      below that allowance (:attr:`EnvCore.evict_protected`, set at each decision); the
      rules' victims count both too. Without it the learned evictions are bounded only by the
      checkpoint's ``evict_max`` (none for the shipped one), and the rules count their own.
      With ``evict_critical`` false the actor never evicts a job the makespan guard placed
      either (the rules never take one). No effect on a network without eviction actions.
      Both tried with the shipped ensemble on validation, not adopted (``docs/maifs_log.md``).
    * **Preemption for a much faster GPU** (``preempt_fast``, off by default; needs
      ``preempt_ratio``): before the actor's steps, the same rule runs for the rigid window
      jobs (shortest first, no waiting time; elastic jobs get room by shrinking) whose best
      legal node now runs them at most ``1 / preempt_fast`` of their speed on their fastest
      allowed type (isolated rates at the request). Such a job may take a victim's place only
      on a node whose GPU type runs it at least ``preempt_fast`` times faster than the best
      node free now, with the same victim conditions (one node, ``preempt_max``,
      ``preempt_ratio`` times its run time there, never a job the makespan guard placed). Jobs
      that fit nowhere are left to the rule above. It gives a GPU type's large speedups to
      short jobs at once (e.g. bert runs 5x faster on an A100 than on an RTX 2080 Ti), as Sia
      does by time-sharing; counter ``fast_preemptions`` (the jobs it placed; their victims
      count in ``preemptions``). ``scheduler=maifs`` turns it on at 2 (chosen on validation;
      on the test windows it lengthened the loaded windows' makespan, ``docs/maifs_log.md``).
    * **Elastic sizing** (``elastic_gain``, off by default): the policy sees each elastic job
      (``min_gpus < max_gpus``) with a request of its own choosing, :func:`elastic_request`:
      starting from ``min_gpus``, the count doubles (the last step up to the job's request)
      while each doubling speeds the job up at least ``elastic_gain`` times on its fastest
      allowed GPU type present. The actor's GPU levels, the masks, the other rules and the
      teacher all read that request (the engine keeps the real one), so a job that scales
      poorly runs on a few fast GPUs instead of a gang of slow ones -- what Sia's goodput
      optimisation does each round, here decided once per job at arrival. Jobs estimated to
      run longer than ``elastic_max_s`` at their request keep it (they set the makespan, and
      few jobs compete with them for GPUs then). Rigid jobs are unchanged.
    * **Growth of elastic jobs** (``grow_gain``, off by default): when no job waits after the
      placements (and migration), a running elastic job may double its GPU count (up to its
      ``max_gpus``) onto idle GPUs, on nodes of any allowed GPU type (its own nodes count with
      the room it holds) -- when its estimated remaining time there, restart delay included, is
      below ``1 - grow_gain`` times its remaining time now (isolated rates). With
      ``grow_factor`` above 2 the growth also weighs two or more doublings at once (up to that
      multiple), so a job on a few fast GPUs can move to many more slower ones when only those
      are idle, which no single doubling reaches. The grown job keeps its CPU and memory per
      GPU, or with ``grow_at_request`` gets at least the requested amounts per GPU (an actor's
      low CPU level would otherwise slow every GPU the job grows onto). One job at a time, the
      largest saving first; each job grows at most once per round. The slack-time
      half of Sia's re-planning: jobs scale up when nothing else needs the GPUs (with
      ``grow_waiting`` also while jobs wait, onto nodes of GPU types none of them waits for:
      each waiting job's fastest allowed type with enough GPUs up). With ``grow_new`` the
      jobs starting this round are candidates too, weighed with no restart delay: the first
      start is free (a resumed job pays its delay either way), so a job sized at one GPU on a
      cluster with slack starts on more at once instead of growing, and restarting, at a later
      round -- Sia allocates a new job's GPUs in the same optimisation as everyone else's.
      Jobs moved this round (migration, shrinking) are not candidates. The other half: when jobs
      still wait after the actor's steps and the other rules, a running job
      above its request (grown, or placed at a larger GPU level) gives up as many GPUs as the
      first waiting job requests, never going below its own request and keeping the fewest of
      its nodes. The job is the one furthest above its request, or with
      ``shrink_order="restart_cost"`` the one whose restart idles the fewest GPU-seconds (a
      250 s imagenet restart on 8 GPUs costs far more than a 15 s ncf one on 2). With
      ``shrink_fastest`` only jobs on the waiting job's fastest GPU type (of those with enough
      GPUs up to hold it) are candidates, and none shrinks if there is none there: the actor
      seldom places a job on a much slower type, so GPUs freed there stay idle while every
      shrink costs a restart. Then the actor takes more decision steps, and so on, at most
      ``K`` times per round. So allocations above the request shrink while jobs wait. The
      engine charges each change as a restart.
    * **Memory hold** (``mem_hold_phi``, off by default): an actor's placement that gives a job
      so little of its requested memory per GPU that the throughput model slows it below
      ``mem_hold_phi`` of its speed (``phi`` at that memory share) is raised to the most memory
      legal on the node at the same job, GPU and CPU levels if that brings it to
      ``mem_hold_phi``; otherwise it is withdrawn (the node takes no action this step) when
      some up node of an allowed type could give the job enough memory at one of its levels
      (this node included, once it has the room). The memory
      levels are multiples of the request capped at the node's memory per GPU, so a job asking
      more memory per GPU than a node's share (Alibaba pods of 123 GiB per GPU on 64 GiB-per-GPU
      V100 nodes) runs there at a fraction of its speed even at level 1 -- the memory guard
      cannot see that. Such a job waits for a node with more memory per GPU instead. The
      hold also checks the placements of the starvation guard and the fast-GPU guard (a guard
      whose claim it withdraws places no more jobs that round); the makespan guard and the
      preemption for short jobs are not checked.
    * **Makespan guard** (``critical_s``, off by default): before the actor's steps, a waiting
      job estimated to run at least ``critical_s`` seconds (isolated rate at its request on its
      fastest allowed GPU type present) that would finish after every running job if it
      started now -- the job that sets the makespan -- and that has waited at least
      ``critical_wait_s`` is placed at once on a node of its fastest allowed type (among the
      types with a node that can hold its request): on the node with the fewest free GPUs
      that holds it, else on the node where preempting the fewest running jobs makes room.
      Victims are jobs held on that one node, estimated to finish at least
      ``critical_ratio`` times sooner than the waiting job runs, preempted by the rules fewer
      than ``preempt_max`` times; the most GPUs go first, then the longest remaining time.
      The longest such job first, one after another while one qualifies (the rule stops at
      the first it cannot place). A job whose measured
      rate on that type is higher spread over several nodes than packed on the fewest (the
      throughput table has such entries, e.g. imagenet on 8 V100s: 3,510 against 2,055
      samples/s) is instead placed at its request over two or more nodes of that type with
      free room (the most free GPUs first, none taking all of it), without preemption (with
      ``critical_spread_cpu``, at the highest CPU level every node of the gang has the cores
      for, as one-node placements take the most CPU legal; else at the requested CPU). A job
      placed by
      this guard is never a victim of the preemption for short jobs. Under a shortest-first
      window the job that sets the makespan waits for the queue of short jobs to drain (on a
      loaded validation stretch a 125 h job waited 7.6 h, while Sia started it at once): the
      longest-processing-time-first half of a makespan schedule, which the learned agents do
      not do. With ``critical_min_rel``, a job the guard can neither place nor make room for
      on its fastest type (the running jobs there are too long to preempt) is placed at its
      request on a node of the fastest type that holds it now, if that type runs it at least
      ``critical_min_rel`` of its fastest speed (the fewest free GPUs first, the most CPU the
      node allows); migration may move it to a faster type later.
    * **Timed wake-ups** (``wake``, off by default): being event-driven, the policy decides
      only when a job arrives or completes, so a waiting threshold above is checked only then.
      On a quiet cluster that can be days: on a validation stretch two 8-GPU jobs waited 85 h
      beside an idle A100 node while one long job ran and nothing arrived, because the
      starvation guard never got a decision point after its 6 h had passed. With ``wake`` the
      policy sets ``wake_time`` (see :meth:`hetsched.sim.engine.Simulator.run`) to the
      earliest time a still-waiting job reaches a threshold: ``"starve"`` the starvation
      guard's; ``"all"`` also the preemption wait, the makespan guard's wait and the fast-GPU
      guard's (of the rules that are on). Counter ``wakeups``: decisions made at a wake-up.
    * **Earliest-finish placement** (``eft_gain``, off by default): after the starvation and
      fast-GPU guards and before the preemption for short jobs, the waiting rigid window jobs
      that one node holds alone at their request are looked at shortest first. A job waits for
      its fastest GPU type only while that pays: the estimated wait until one node of that type
      has its GPUs free (the running jobs' and this round's placements' estimated remaining
      times, isolated rates, taken in order on each node; GPUs only: a node with free GPUs but
      too few free cores counts as free) plus its run time there is compared with its run time
      on the best node that holds it now. When the latter is at most ``1 - eft_gain`` times the
      former, and does not exceed every running job's estimated remaining time (a job that would
      then finish last is not started slowly: it would set the makespan), it is placed there at
      its request (the fewest free GPUs among the nodes of that speed; the memory hold applies).
      Earliest finish time first is the classic list-scheduling rule for heterogeneous machines
      (HEFT); migration may move the job to a faster type later. Elastic jobs are left to the
      elastic rules, unless ``eft_elastic`` (then at their sized request). The learned agents
      wait for the fastest type even when it is busy for hours: on a validation stretch, 1-GPU
      bert jobs (about 0.5 h on an A100, 2.3 h on an RTX 2080 Ti) of a burst waited up to 5 h
      while 11-14 RTX and T4 GPUs idled. With ``eft_gain``
      0 a job whose fastest type has room now is placed there (waiting never pays); above 0
      those are left to the actor. Counter ``eft_placements``.
    * **Memory guard** (``keep_memory``, off by default): an actor's placement with less memory
      than the job requests is given the requested memory instead (same job, GPU and CPU
      levels) when that is legal on the node. Memory below the request never speeds a job up
      (the throughput model slows it to ``mem_rho`` at the floor), it only leaves memory to
      others; on traces unlike its training data the actor sometimes picks it for long jobs.

    Args:
        settings: Env settings the actor was built for (``advance`` must be ``"event"``).
        actor: Maps the env core (window, masks, features) to one action per node, shape (N,).
        name: Scheduler name.
        starve_guard_s: Waiting time (s) after which the starvation guard places a job that
            fits; None = off.
        migrate_gain: Smallest fraction of its remaining time a move must save (in [0, 1));
            None = no migration.
        preempt_ratio: A running job may be preempted for a waiting job whose estimated run
            time is this many times shorter than its remaining time (> 1); None = off.
        preempt_wait_s: Waiting time (s) after which a job may preempt (>= 0).
        preempt_max: Times the rule may preempt one job (>= 1).
        preempt_every_s: Seconds of holding GPUs that earn a job one more preemption beyond
            ``preempt_max`` (> 0); None = ``preempt_max`` for every job.
        preempt_gangs: The preemption rules and the makespan guard may also take as victims
            jobs held on several nodes, if on the fewest nodes that hold them (else victims
            are jobs held on one node).
        preempt_fast: Speedup (> 1) of a GPU type over the best node free now for which a
            waiting job may preempt there at once (needs ``preempt_ratio``); None = off.
        fast_wait_s: Waiting time (s) after which the fast-GPU guard places a short job on a
            node of its fastest GPU type; None = off.
        fast_max_s: Longest estimated run time (s) of a job the fast-GPU guard places.
        elastic_gain: Speedup per doubling (>= 1) an elastic job's GPU count must keep for the
            policy to size it larger (:func:`elastic_request`); None = off (the requests as
            submitted).
        elastic_max_s: Elastic jobs estimated to run longer than this (s) keep their request.
        grow_gain: Smallest fraction of its remaining time (restart delay included) doubling a
            running elastic job's GPUs must save (in [0, 1)); None = no growth.
        keep_memory: Raise the actor's memory levels below the request to the request where
            that is legal (the memory guard).
        grow_factor: Largest multiple of its GPU count one growth may give a job (an integer
            >= 2; 2 = one doubling).
        grow_at_request: A growth gives the job at least its requested CPU cores and memory
            per GPU (else the amounts per GPU it runs with).
        shrink_order: Which job above its request shrinks first: ``"excess"`` (the one
            furthest above it) or ``"restart_cost"`` (the one whose restart idles the fewest
            GPU-seconds: restart delay times its GPUs; then the furthest above).
        shrink_fastest: Only jobs running on the first waiting job's fastest allowed GPU type
            (its isolated rate at the request there is the best, among the types with enough
            GPUs up to hold the request) may shrink for it.
        critical_s: Shortest estimated run time (s) of a job the makespan guard places; None
            = off.
        critical_ratio: A victim of the makespan guard must be estimated to finish this many
            times sooner than the guarded job runs (> 1).
        critical_wait_s: Waiting time (s) after which the makespan guard acts (>= 0).
        mem_hold_phi: Slowest memory-share speed factor (in (0, 1]) an actor's placement may
            impose before the memory hold raises or withdraws it; None = off.
        wake: Timed wake-ups: ``"starve"`` (at the starvation guard's threshold) or ``"all"``
            (at every waiting threshold of the rules that are on); None = decide at arrivals
            and completions only.
        critical_min_rel: When the makespan guard can neither place nor make room for its job
            on its fastest type, it places it on the fastest type with room now if that type
            runs it at least this fraction of its fastest speed (in (0, 1]); None = it waits.
        eft_gain: The earliest-finish placement: the fraction (in [0, 1)) of its estimated
            finish time by waiting for its fastest type that placing a job now on a slower
            one must save; None = off.
        evict_allowance: The actor's evictions and the rules' preemptions share one allowance
            per job (see above).
        evict_critical: The actor may evict a job the makespan guard placed (False: it is
            spared, as by the rules).
        starve_first: The starvation guard also runs before the actor's steps, over every
            waiting job (see above; needs ``starve_guard_s``).
        critical_spread_cpu: The makespan guard's placements over several nodes take the
            most CPU every node of the gang has room for, as its one-node placements do
            (False: the requested CPU).
        critical_min_rel_s: Shortest estimated run time (s) of a job the makespan guard may
            place on a slower type (``critical_min_rel``); None = every job it guards.
        critical_slow_eft: The makespan guard places a job on a slower type only when it
            would finish there before it would by waiting for its fastest type (estimated).
        eft_elastic: The earliest-finish placement also takes elastic jobs, at the request
            elastic sizing gave them (False: rigid jobs only).
        grow_waiting: Growth (``grow_gain``) also while jobs wait, onto nodes of GPU types
            no waiting job waits for (its fastest allowed type with enough GPUs up).
        grow_new: Growth (``grow_gain``) also takes the jobs starting this round, weighed
            without a restart delay (False: only jobs that ran before the round, unmoved).
    """

    event_driven = True

    def __init__(
        self,
        settings: EnvSettings,
        actor: Actor | None = None,
        name: str = "core",
        starve_guard_s: float | None = None,
        migrate_gain: float | None = None,
        preempt_ratio: float | None = None,
        preempt_wait_s: float = 0.0,
        preempt_max: int = 1,
        preempt_every_s: float | None = None,
        preempt_gangs: bool = False,
        fast_wait_s: float | None = None,
        fast_max_s: float = 3600.0,
        elastic_gain: float | None = None,
        elastic_max_s: float = float("inf"),
        grow_gain: float | None = None,
        keep_memory: bool = False,
        grow_factor: int = 2,
        grow_at_request: bool = False,
        shrink_order: str = "excess",
        shrink_fastest: bool = False,
        critical_s: float | None = None,
        critical_ratio: float = 4.0,
        critical_wait_s: float = 0.0,
        mem_hold_phi: float | None = None,
        preempt_fast: float | None = None,
        wake: str | None = None,
        critical_min_rel: float | None = None,
        eft_gain: float | None = None,
        evict_allowance: bool = False,
        evict_critical: bool = True,
        starve_first: bool = False,
        critical_spread_cpu: bool = False,
        critical_min_rel_s: float | None = None,
        critical_slow_eft: bool = False,
        eft_elastic: bool = False,
        grow_waiting: bool = False,
        grow_new: bool = False,
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
        if starve_guard_s is not None and not starve_guard_s >= 0:
            raise ValueError(f"starve_guard_s={starve_guard_s!r} must be >= 0 seconds or None")
        self.starve_guard_s = starve_guard_s
        if starve_first and starve_guard_s is None:
            raise ValueError("starve_first=True needs the starvation guard: set starve_guard_s")
        self.starve_first = bool(starve_first)
        self.critical_spread_cpu = bool(critical_spread_cpu)
        if migrate_gain is not None and not 0.0 <= migrate_gain < 1.0:
            raise ValueError(f"migrate_gain={migrate_gain!r} must be in [0, 1) or None")
        self.migrate_gain = migrate_gain
        if preempt_ratio is not None and not preempt_ratio > 1.0:
            raise ValueError(f"preempt_ratio={preempt_ratio!r} must be > 1 or None")
        if not preempt_wait_s >= 0:
            raise ValueError(f"preempt_wait_s={preempt_wait_s!r} must be >= 0 seconds")
        self.preempt_ratio = preempt_ratio
        self.preempt_wait_s = float(preempt_wait_s)
        if not preempt_max >= 1:
            raise ValueError(f"preempt_max={preempt_max!r} must be >= 1")
        self.preempt_max = int(preempt_max)
        if preempt_every_s is not None and not preempt_every_s > 0:
            raise ValueError(f"preempt_every_s={preempt_every_s!r} must be > 0 seconds or None")
        self.preempt_every_s = preempt_every_s
        self.preempt_gangs = bool(preempt_gangs)
        self._preempted = np.zeros(0, dtype=np.int64)
        if fast_wait_s is not None and not fast_wait_s >= 0:
            raise ValueError(f"fast_wait_s={fast_wait_s!r} must be >= 0 seconds or None")
        self.fast_wait_s = fast_wait_s
        if not fast_max_s > 0:
            raise ValueError(f"fast_max_s={fast_max_s!r} must be > 0 seconds")
        self.fast_max_s = float(fast_max_s)
        if elastic_gain is not None and not elastic_gain >= 1.0:
            raise ValueError(f"elastic_gain={elastic_gain!r} must be >= 1 or None")
        self.elastic_gain = elastic_gain
        if not elastic_max_s > 0:
            raise ValueError(f"elastic_max_s={elastic_max_s!r} must be > 0 seconds")
        self.elastic_max_s = float(elastic_max_s)
        if grow_gain is not None and not 0.0 <= grow_gain < 1.0:
            raise ValueError(f"grow_gain={grow_gain!r} must be in [0, 1) or None")
        self.grow_gain = grow_gain
        if isinstance(grow_factor, bool) or not (
            isinstance(grow_factor, (int, np.integer)) and grow_factor >= 2
        ):
            raise ValueError(f"grow_factor={grow_factor!r} must be an integer >= 2")
        self.grow_factor = int(grow_factor)
        self.grow_at_request = bool(grow_at_request)
        if shrink_order not in SHRINK_ORDERS:
            raise ValueError(
                f"shrink_order={shrink_order!r}; choose one of {', '.join(SHRINK_ORDERS)}"
            )
        self.shrink_order = shrink_order
        self.shrink_fastest = bool(shrink_fastest)
        self.keep_memory = bool(keep_memory)
        if critical_s is not None and not critical_s >= 0:
            raise ValueError(f"critical_s={critical_s!r} must be >= 0 seconds or None")
        self.critical_s = critical_s
        if not critical_ratio > 1.0:
            raise ValueError(f"critical_ratio={critical_ratio!r} must be > 1")
        self.critical_ratio = float(critical_ratio)
        if not critical_wait_s >= 0:
            raise ValueError(f"critical_wait_s={critical_wait_s!r} must be >= 0 seconds")
        self.critical_wait_s = float(critical_wait_s)
        if critical_min_rel is not None and not 0.0 < critical_min_rel <= 1.0:
            raise ValueError(f"critical_min_rel={critical_min_rel!r} must be in (0, 1] or None")
        self.critical_min_rel = critical_min_rel
        if critical_min_rel_s is not None and not critical_min_rel_s >= 0:
            raise ValueError(f"critical_min_rel_s={critical_min_rel_s!r} must be >= 0 s or None")
        self.critical_min_rel_s = float(critical_min_rel_s or 0.0)
        self.critical_slow_eft = bool(critical_slow_eft)
        self.eft_elastic = bool(eft_elastic)
        self.grow_waiting = bool(grow_waiting)
        self.grow_new = bool(grow_new)
        self._critical = np.zeros(0, dtype=np.bool_)
        if mem_hold_phi is not None and not 0.0 < mem_hold_phi <= 1.0:
            raise ValueError(f"mem_hold_phi={mem_hold_phi!r} must be in (0, 1] or None")
        self.mem_hold_phi = mem_hold_phi
        if preempt_fast is not None and not preempt_fast > 1.0:
            raise ValueError(f"preempt_fast={preempt_fast!r} must be > 1 or None")
        if preempt_fast is not None and preempt_ratio is None:
            raise ValueError(
                f"preempt_fast={preempt_fast!r} needs preempt_ratio (the victims' ratio); "
                "set preempt_ratio too"
            )
        self.preempt_fast = preempt_fast
        if wake is not None and wake not in WAKE_RULES:
            raise ValueError(f"wake={wake!r}; choose one of {', '.join(WAKE_RULES)} or None")
        self.wake = wake
        self.wake_time: float | None = None
        if eft_gain is not None and not 0.0 <= eft_gain < 1.0:
            raise ValueError(f"eft_gain={eft_gain!r} must be in [0, 1) or None")
        self.eft_gain = eft_gain
        self.evict_allowance = bool(evict_allowance)
        self.evict_critical = bool(evict_critical)
        self.counts = dict.fromkeys(COUNTERS, 0)

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
        self.counts = dict.fromkeys(COUNTERS, 0)
        if self.elastic_gain is not None:
            req = elastic_request(
                workload, throughput, cluster, self.elastic_gain, self.elastic_max_s
            )
            self.counts["elastic_resized"] = int((req != workload.req_gpus).sum())
            workload = replace(workload, req_gpus=req)  # the policy's view only
        self.core.bind(workload)
        self._preempted = np.zeros(workload.num_jobs, dtype=np.int64)
        self._critical = np.zeros(workload.num_jobs, dtype=np.bool_)
        self.wake_time = None

    def run_stats(self) -> dict[str, float]:
        """Counters of the run so far (``results_extended.csv`` columns ``policy_<name>``).

        ``decision_steps``: the actor's decision steps; ``fallbacks``: rounds placed by the
        idle-cluster fallback; ``guard_placements``: jobs placed by the starvation guard;
        ``migrations``: running jobs moved to a faster GPU type; ``preemptions``: running jobs
        preempted for short waiting jobs; ``fast_placements``: jobs placed by the fast-GPU
        guard; ``elastic_resized``: elastic jobs whose request elastic sizing changed;
        ``growths``: running elastic jobs given more GPUs; ``shrinks``: running jobs that gave
        up GPUs for waiting jobs; ``memory_lifts``: actor placements whose memory the memory
        guard raised to the request (or the memory hold raised); ``critical_placements``: jobs
        placed by the makespan guard; ``memory_holds``: actor placements the memory hold
        withdrew; ``fast_preemptions``: jobs placed by preemption for a much faster GPU;
        ``wakeups``: decisions made at or after a timed wake-up's time; ``eft_placements``:
        jobs placed by the earliest-finish placement; ``teacher_steps``: decision steps the
        teacher took for the networks (``elastic_teacher``; they count in ``decision_steps``
        too).
        """
        return {name: float(n) for name, n in self.counts.items()}

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
        if core.cfg.preemptive and (self.evict_allowance or not self.evict_critical):
            core.evict_protected = self._evict_protected(core, state)
        core.begin(state)
        if self.wake_time is not None and state.time >= self.wake_time - 1e-9:
            self.counts["wakeups"] += 1
        if self.critical_s is not None:
            self.counts["critical_placements"] += self._guard_makespan(core, state, self.critical_s)
        if self.starve_first and self.starve_guard_s is not None:
            self.counts["guard_placements"] += self._place_starved_first(
                core, state.time, self.starve_guard_s
            )
        if self.preempt_fast is not None and self.preempt_ratio is not None:
            self.counts["fast_preemptions"] += self._preempt(
                core, state, self.preempt_ratio, self.preempt_fast
            )
        self._actor_steps(core)
        if self.starve_guard_s is not None:
            wait = self.starve_guard_s
            self.counts["guard_placements"] += self._place_each(
                core, lambda: self._rule_hold(core, self._starved_claim(core, state.time, wait))
            )
        if self.fast_wait_s is not None:
            fast_wait, fast_max = self.fast_wait_s, self.fast_max_s
            self.counts["fast_placements"] += self._place_each(
                core,
                lambda: self._rule_hold(core, self._fast_claim(core, state, fast_wait, fast_max)),
            )
        if self.eft_gain is not None:
            self.counts["eft_placements"] += self._place_eft(core, state, self.eft_gain)
        if self.preempt_ratio is not None and self._preempt(core, state, self.preempt_ratio):
            self._actor_steps(core)  # the actor fills the room the victims left
        if self.grow_gain is not None:
            for _ in range(core.K):  # one job at a time; the actor fills the room it left
                if not self._shrink_one(core):
                    break
                self._actor_steps(core)
        if core.any_legal and core.round_allocation().size == 0:
            # Idle-cluster fallback: with nothing running and nothing placed, an event-driven
            # greedy policy would wait forever (e.g. a gang claim that did not fill), so the
            # teacher places this round (counted in ``fallbacks``).
            core.resolve_claims(SJFTeacher().act(core))
            self.counts["fallbacks"] += 1
        alloc = core.allocation()
        if self.migrate_gain is not None:
            alloc = self._migrate(core, state, self.migrate_gain)
        if self.grow_gain is not None:
            if not core.slot_ok.any():
                alloc = self._grow(core, state, alloc, self.grow_gain)
            elif self.grow_waiting:  # onto types no waiting job waits for
                avoid = self._waited_types(core)
                if not avoid.all():
                    alloc = self._grow(core, state, alloc, self.grow_gain, avoid)
        if self.wake is not None:
            self.wake_time = self._next_wake(state, alloc)
        return alloc

    def _wake_thresholds(self) -> list[float]:
        """Waiting thresholds (s) a timed wake-up watches (class doc, ``wake``)."""
        out = [self.starve_guard_s]
        if self.wake == "all":
            out += [
                self.preempt_wait_s if self.preempt_ratio is not None else None,
                self.critical_wait_s if self.critical_s is not None else None,
                self.fast_wait_s,
            ]
        return [float(t) for t in out if t is not None]

    def _next_wake(self, state: SimState, alloc: Allocation) -> float | None:
        """The earliest time (s) after now at which a job still waiting after ``alloc``
        reaches one of :meth:`_wake_thresholds`; None if none will."""
        waiting = np.setdiff1d(state.active, alloc.job)
        ths = self._wake_thresholds()
        if waiting.size == 0 or not ths:
            return None
        due = (state.workload.arrival[waiting][:, None] + np.asarray(ths)[None, :]).ravel()
        due = due[due > state.time + 1e-9]
        return float(due.min()) if due.size else None

    def _actor_steps(self, core: StateCore) -> None:
        """The actor's decision steps until the env's round-closing rule fires."""
        go = core.any_action
        while go:
            actions = self.act(core)
            if self.keep_memory:
                actions = self._keep_memory(core, actions)
            if self.mem_hold_phi is not None:
                actions = self._hold_memory(core, actions)
            res, placed = core.resolve_claims(actions)
            self.counts["decision_steps"] += 1
            go = core.end_step(placed + res.evicted_jobs)

    def _keep_memory(self, core: EnvCore, actions: NDArray[np.int64]) -> NDArray[np.int64]:
        """``actions`` with memory levels below the request raised to it where legal."""
        a = np.asarray(actions, dtype=np.int64)
        nodes = np.flatnonzero((a > 0) & (a < core.codec.n))
        if nodes.size == 0:
            return a
        k, lg, lc, lm = core.codec.decode(a[nodes])
        m1 = core.features.one[2]
        low = np.asarray(core.cfg.levels.mem)[lm] < 1.0
        if not low.any():
            return a
        lifted = core.codec.encode(k, lg, lc, np.full(lm.shape, m1))
        ok = low & (core.ma.mask[nodes, lifted] == 1)
        if not ok.any():
            return a
        a = a.copy()
        a[nodes[ok]] = lifted[ok]
        self.counts["memory_lifts"] += int(ok.sum())
        return a

    def _rule_hold(
        self, core: EnvCore, actions: NDArray[np.int64] | None
    ) -> NDArray[np.int64] | None:
        """A rule's claim with the memory hold applied (unchanged when the hold is off)."""
        return None if actions is None else self._hold_memory(core, actions)

    def _hold_memory(self, core: EnvCore, actions: NDArray[np.int64]) -> NDArray[np.int64]:
        """``actions`` with the memory hold applied (class doc): a placement slowing its job
        below ``mem_hold_phi`` by its memory share is raised to the most memory legal if that
        suffices, else withdrawn when an up node of an allowed type could do better."""
        a = np.asarray(actions, dtype=np.int64)
        nodes = np.flatnonzero((a > 0) & (a < core.codec.n))
        if nodes.size == 0 or self.mem_hold_phi is None:
            return a
        wl, jt = core.wl, core.jt
        assert wl is not None and jt is not None
        k, lg, lc, lm = core.codec.decode(a[nodes])
        j = core.window[k]
        _, mpg, _ = core.features.window_amounts(jt, wl, core.window, core.slot_ok, core.node_up)
        req = wl.mem_per_gpu[j]
        phi = core.tm.phi(wl.model[j], 1.0, mpg[nodes, k, lm] / req)
        slow = np.flatnonzero(phi < self.mem_hold_phi)
        if slow.size == 0:
            return a
        a = a.copy()
        L = mpg.shape[2]
        for i in slow:
            n, kk = int(nodes[i]), int(k[i])
            # the most memory legal on this node at the same job, GPU and CPU levels
            codes = core.codec.encode(
                np.full(L, kk), np.full(L, lg[i]), np.full(L, lc[i]), np.arange(L)
            )
            legal = core.ma.mask[n, codes] == 1
            best_here = float(np.where(legal, mpg[n, kk], 0.0).max())
            if core.tm.phi(wl.model[j[i]], 1.0, best_here / req[i]) >= self.mem_hold_phi:
                a[n] = int(codes[int(np.argmax(np.where(legal, mpg[n, kk], -1.0)))])
                self.counts["memory_lifts"] += 1
                continue
            elsewhere = core.node_up & jt.allowed[j[i]][core.cluster.node_type]
            ratio = mpg[:, kk].max(axis=1) / req[i]
            if (elsewhere & (core.tm.phi(wl.model[j[i]], 1.0, ratio) >= self.mem_hold_phi)).any():
                a[n] = 0
                self.counts["memory_holds"] += 1
        return a

    @staticmethod
    def _place_each(core: EnvCore, claim: Callable[[], NDArray[np.int64] | None]) -> int:
        """Resolve a rule's claims one job at a time until it has none; return the jobs placed.

        At most one placement per window slot; stops at the first claim that places nothing.
        """
        done = 0
        for _ in range(core.K):
            actions = claim()
            if actions is None or core.resolve_claims(actions)[1] == 0:
                break
            done += 1
        return done

    def _migrate(self, core: EnvCore, state: SimState, gain: float) -> Allocation:
        """The round's allocation with running jobs moved to idle faster nodes (class doc).

        Multi-node jobs move first (one at a time, the largest saving first), then single-node
        jobs (vectorised over jobs and nodes); both only onto target nodes (up, with free GPUs,
        no window job legal there at its request) and with the free room left by earlier moves.
        """
        alloc = core.round_allocation()
        cur = state.current
        wl = core.wl
        assert wl is not None
        if cur.size == 0:
            return alloc
        # Targets: up nodes with free GPUs on which no window job is legal at its request.
        g1, c1, m1 = core.features.one
        waiting_fit = core.ma.legal[:, :, g1, c1, m1].any(axis=1)
        target = core.node_up & (core.free_g > 0) & ~waiting_fit
        if not target.any():
            return alloc
        free = (core.free_g.copy(), core.free_c.copy(), core.free_m.copy())
        # Running jobs' entries: all in ``cur`` (jobs placed this round are not running yet).
        per_job = np.bincount(cur.job, minlength=wl.num_jobs)[cur.job]
        rnd = _MoveRound(core, state, cur, target, free, gain)
        moves = self._move_gangs(rnd, per_job > 1)
        moves += self._move_singles(rnd, per_job == 1)
        if not moves:
            return alloc
        self.counts["migrations"] += len(moves)
        moved = np.unique(np.concatenate([m.job for m in moves]))
        return Allocation.concat([alloc.select(~np.isin(alloc.job, moved)), *moves])

    @staticmethod
    def _fastest_types(core: StateCore, jobs: NDArray[np.int64]) -> NDArray[np.bool_]:
        """(len(jobs), T) each job's fastest allowed GPU types among those whose up GPUs could
        hold it at its request (all False for a job no such type holds)."""
        wl, cl, jt = core.wl, core.cluster, core.jt
        assert wl is not None and jt is not None
        T = jt.rel_tput.shape[1]
        up_gpus = np.bincount(cl.node_type, weights=cl.node_gpus * core.node_up, minlength=T)
        rel = np.where(up_gpus[None, :] >= wl.req_gpus[jobs][:, None], jt.rel_tput[jobs], 0.0)
        best = rel.max(axis=1, keepdims=True)  # (len(jobs), 1)
        return (rel >= best - 1e-9) & (best > 0)

    def _waited_types(self, core: StateCore) -> NDArray[np.bool_]:
        """(T,) the GPU types some waiting job waits for: its fastest allowed type whose up
        GPUs could hold it (:meth:`_fastest_types`, as ``shrink_fastest`` reads it)."""
        return np.any(self._fastest_types(core, core.pending), axis=0)

    def _grow(
        self,
        core: EnvCore,
        state: SimState,
        alloc: Allocation,
        gain: float,
        avoid: NDArray[np.bool_] | None = None,
    ) -> Allocation:
        """``alloc`` with running elastic jobs grown onto idle GPUs (class doc).

        Called when no job waits, or with ``grow_waiting`` while jobs wait: then ``avoid``
        ((T,) bool) marks the GPU types they wait for, whose nodes take no growth. Each
        candidate is weighed at 2x, 4x, ... its GPUs, up to ``grow_factor`` times and its
        ``max_gpus``. One job at a time, the largest saving first; each job grows at most once
        per round, onto nodes of one allowed GPU type (its own nodes count with the room it
        holds there). With ``grow_new`` the jobs starting this round (in ``alloc``, not in
        ``state.current``) are candidates too, weighed without a restart delay.
        """
        wl, tm, cl = core.wl, core.tm, core.cluster
        assert wl is not None
        prev = state.current
        # Elastic jobs running before this round with the same entries (not moved by migration).
        before = set(zip(prev.job.tolist(), prev.node.tolist(), prev.gpus.tolist(), strict=True))
        same = np.array(
            [
                e in before
                for e in zip(
                    alloc.job.tolist(), alloc.node.tolist(), alloc.gpus.tolist(), strict=True
                )
            ],
            dtype=bool,
        )
        changed = np.unique(alloc.job[~same])
        jobs = np.setdiff1d(np.unique(alloc.job[same]), changed)
        new = np.zeros(0, dtype=np.int64)
        if self.grow_new:  # jobs starting this round (not running before): no extra restart
            new = np.setdiff1d(changed, prev.job)
            jobs = np.union1d(jobs, new)
        jobs = jobs[wl.min_gpus[jobs] < wl.max_gpus[jobs]]
        if jobs.size == 0:
            return alloc
        used = (
            np.bincount(alloc.node, weights=alloc.gpus, minlength=core.N).astype(np.int64),
            np.bincount(alloc.node, weights=alloc.cpus, minlength=core.N),
            np.bincount(alloc.node, weights=alloc.mem, minlength=core.N),
        )
        up = core.node_up
        free: FreeRoom = (
            np.where(up, cl.node_gpus - used[0], 0),
            np.where(up, cl.node_cpus - used[1], 0.0),
            np.where(up, cl.node_mem - used[2], 0.0),
        )
        if int(free[0].max()) <= 0:
            return alloc
        present = cl.gpus_per_type() > 0
        cand = jobs.tolist()
        new_set = set(new.tolist())
        while cand:
            best: _Candidate | None = None
            for j in cand:
                ent = alloc.job == j
                nodes, G = alloc.node[ent], int(alloc.gpus[ent].sum())
                top = min(self.grow_factor * G, int(wl.max_gpus[j]))
                if top <= G:
                    continue
                t0 = int(cl.node_type[nodes[0]])
                m = int(wl.model[j])
                rate_now = float(tm.isolated(m, t0, G, is_spread(cl, nodes, G)))
                t_now = self._remaining_time(core, state, j, rate_now, False)
                cpg, mpg = float(alloc.cpus[ent].sum()) / G, float(alloc.mem[ent].sum()) / G
                if self.grow_at_request:  # no less than the requested amounts per GPU
                    cpg = max(cpg, float(wl.cpu_per_gpu[j]))
                    mpg = max(mpg, float(wl.mem_per_gpu[j]))
                own = (free[0].copy(), free[1].copy(), free[2].copy())  # its own room counts
                own[0][nodes] += alloc.gpus[ent]
                own[1][nodes] += alloc.cpus[ent]
                own[2][nodes] += alloc.mem[ent]
                target = up & (own[0] > 0)
                if avoid is not None:
                    target &= ~avoid[cl.node_type]
                types = np.flatnonzero(wl.allowed_types[j] & present).tolist()
                size = G
                while size < top:  # doublings up to grow_factor times, the last one capped
                    size = min(2 * size, top)
                    place = _Placement(j, size, cpg, mpg, t_now, j not in new_set)
                    best = self._best_gang(core, state, place, types, gain, target, own, best)
            if best is None:
                break
            _, j, a = best
            old = alloc.select(alloc.job == j)
            for room, give, take in zip(
                free, (old.gpus, old.cpus, old.mem), (a.gpus, a.cpus, a.mem), strict=True
            ):
                np.add.at(room, old.node, give)
                np.subtract.at(room, a.node, take)
            alloc = Allocation.concat([alloc.select(alloc.job != j), a])
            self.counts["growths"] += 1
            cand.remove(j)
        return alloc

    def _shrink_one(self, core: StateCore) -> bool:
        """While jobs wait, shrink a running job above its request (the one furthest above
        it, or with ``shrink_order="restart_cost"`` the one whose restart idles the fewest
        GPU-seconds; with ``shrink_fastest`` only one on the first waiting job's fastest GPU
        type) by the first waiting job's request, not below its own (class doc); return
        whether one was shrunk."""
        wl = core.wl
        assert wl is not None
        if not core.slot_ok.any():
            return False
        cur = core.running()
        G = np.bincount(cur.job, weights=cur.gpus, minlength=wl.num_jobs).astype(np.int64)
        over = np.flatnonzero(wl.req_gpus < G)
        over = over[np.isin(over, cur.job[core.node_up[cur.node]])]
        if over.size == 0:
            return False
        need_j = int(core.window[int(np.argmax(core.slot_ok))])  # the first waiting job
        need = int(wl.req_gpus[need_j])
        if self.shrink_fastest:  # only jobs on its fastest GPU type (one type per job)
            fast = self._fastest_types(core, np.array([need_j]))[0]  # (T,)
            if not fast.any():
                return False
            node_of = np.zeros(wl.num_jobs, dtype=np.int64)
            node_of[cur.job] = cur.node  # any of its nodes: a job runs on one GPU type
            over = over[fast[core.cluster.node_type[node_of[over]]]]
            if over.size == 0:
                return False
        excess = G[over] - wl.req_gpus[over]
        if self.shrink_order == "restart_cost":  # GPU-seconds its restart idles, then excess
            cost = core.tm.restart_delay_s[wl.model[over]] * G[over]
            j = int(over[np.lexsort((over, -excess, cost))[0]])
        else:
            j = int(over[np.argmax(excess)])  # lowest index on ties
        ent = cur.select(cur.job == j)
        keep = max(int(wl.req_gpus[j]), int(G[j]) - need)
        out = fill_gang(ent.node, ent.gpus, keep)  # on the fewest of its nodes
        assert out is not None  # its nodes hold more than its request
        nodes, g = out
        # Each kept node keeps its amounts per GPU (levels capped at the node's share can give
        # a job different amounts per GPU on nodes of one GPU type with different shares).
        by_node = np.argsort(ent.node)
        at = by_node[np.searchsorted(ent.node, nodes, sorter=by_node)]
        cpg, mpg = ent.cpus[at] / ent.gpus[at], ent.mem[at] / ent.gpus[at]
        core.release(np.array([j]))
        gf = g.astype(np.float64)
        core.place(j, nodes, g, gf * cpg, gf * mpg)
        self.counts["shrinks"] += 1
        return True

    def _preempt(
        self, core: StateCore, state: SimState, ratio: float, fast: float | None = None
    ) -> int:
        """Preempt running jobs for short waiting jobs (class doc); return the jobs placed."""
        wl, cl, jt = core.wl, core.cluster, core.jt
        assert wl is not None and jt is not None
        p = core.pending
        if p.size == 0 or core.running().size == 0:
            return 0
        # The window shows the eligible waiting jobs, shortest first (restored at the end).
        est_p = core.est_run_s(p)
        key = np.where(
            (state.time - wl.arrival[p] >= self.preempt_wait_s) | (fast is not None), est_p, np.inf
        )  # (with ``fast``, every waiting job may qualify at once)
        order = np.argsort(key, kind="stable")
        core.reorder_pending(order)
        g1, c1, m1 = core.features.one
        done = 0
        for _ in range(core.K):  # at most one placement per window slot
            cur = core.running()
            if cur.size == 0 or not core.slot_ok.any():
                break
            w = np.where(core.slot_ok, core.window, 0)
            legal = core.ma.legal[:, :, g1, c1, m1]  # (N, K) at the requested amounts
            waited = state.time - wl.arrival[w]
            if fast is None:  # jobs that fit nowhere and have waited
                cand = core.slot_ok & ~legal.any(axis=0) & (waited >= self.preempt_wait_s)
            else:  # rigid jobs their fastest GPUs run `fast` times faster than the best free now
                # The best speed (relative to its fastest type) each job gets now, 0 if none.
                now = np.where(legal, jt.rel_tput[w][:, cl.node_type].T, 0.0).max(axis=0)  # (K,)
                rigid = wl.min_gpus[w] == wl.max_gpus[w]  # elastic ones get room by shrinking
                cand = core.slot_ok & rigid & (now > 0) & (now * fast <= 1.0 + 1e-9)
            if not cand.any():
                break
            # Victims: running entries of jobs held on one node (or, with preempt_gangs, on
            # the fewest nodes that hold them), preempted fewer times than their allowance,
            # on up nodes.
            v = np.flatnonzero(
                self._victim_shape(core, cur)
                & (self._preemptions(core)[cur.job] < self._allowance(state, cur.job))
                & ~self._critical[cur.job]
                & core.node_up[cur.node]
            )
            if v.size == 0:
                break
            vj, vn, vg = cur.job[v], cur.node[v], cur.gpus[v]
            vt = cl.node_type[vn]
            rem = self._running_remaining(core, state, cur)[v]  # (V,) s, on all its GPUs
            v_rem = np.where(np.isfinite(rem), rem, np.nan)
            ks = np.flatnonzero(cand)
            wj = w[ks]
            ok = preemption_room(core, cur, v, ks, v_rem, ratio)  # (C, V)
            if fast is not None:  # the victim's type runs it `fast` times faster than now
                ok &= jt.rel_tput[wj][:, vt] >= fast * now[ks][:, None] - 1e-9
            if not ok.any():
                break
            i = int(np.argmax(ok.any(axis=1)))  # the shortest candidate with a victim
            cols = np.flatnonzero(ok[i])
            # Fewest GPUs, then the longest remaining time, then the lowest node index.
            c = cols[np.lexsort((vn[cols], -v_rem[cols], vg[cols]))[0]]
            k, n, victim = int(ks[i]), int(vn[c]), int(vj[c])
            core.release(np.array([victim]))
            self._preempted[victim] += 1
            self.counts["preemptions"] += 1
            actions = np.zeros(core.N, dtype=np.int64)
            actions[n] = int(core.codec.encode(k, g1, c1, m1))
            if core.resolve_claims(actions)[1] == 0:  # pragma: no cover - room was checked
                raise RuntimeError(f"preemption of job {victim} on node {n} did not place slot {k}")
            done += 1
        core.reorder_pending(np.argsort(order))  # the window goes back to the actor's order
        return done

    def _victim_shape(self, core: StateCore, cur: Allocation) -> NDArray[np.bool_]:
        """Which running entries belong to jobs the rules may take as victims by their shape,
        shape (E,): jobs held on one node; with ``preempt_gangs`` also jobs held on several
        nodes if on the fewest that hold them (a 16-GPU gang on two 8-GPU nodes). A job
        spread wider was spread for room or for cores; preempted, it could come back packed
        with fewer cores per GPU and run slower, so it is never a victim."""
        assert core.wl is not None
        if not self.preempt_gangs:
            return np.bincount(cur.job, minlength=core.wl.num_jobs)[cur.job] == 1
        return ~self._entry_spread(core, cur)[1]

    @staticmethod
    def _entry_spread(
        core: StateCore, cur: Allocation
    ) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
        """Each running entry's job's GPUs in all, and whether the job is held on more nodes
        than the fewest that could hold it (:func:`is_spread`, vectorised); both shape (E,)."""
        wl, cl = core.wl, core.cluster
        assert wl is not None
        G = np.bincount(cur.job, weights=cur.gpus, minlength=wl.num_jobs).astype(np.int64)
        per_job = np.bincount(cur.job, minlength=wl.num_jobs)
        largest = np.ones(wl.num_jobs, dtype=np.int64)  # its largest node's GPUs
        np.maximum.at(largest, cur.job, cl.node_gpus[cur.node])
        j = cur.job
        return G[j], per_job[j] > -(-G[j] // largest[j])

    def _evict_protected(self, core: StateCore, state: SimState) -> NDArray[np.bool_]:
        """Jobs the actor may not evict at this decision, shape (J,) (class doc:
        ``evict_allowance`` and ``evict_critical``)."""
        out = np.zeros(core.J, dtype=bool)
        if self.evict_allowance:  # its evictions spend the rules' allowance
            out |= self._preemptions(core) >= self._allowance(state, np.arange(core.J))
        if not self.evict_critical:  # the makespan guard's jobs, as the rules spare them
            out |= self._critical
        return out

    def _preemptions(self, core: StateCore) -> NDArray[np.int64]:
        """Preemptions so far that count against each job's allowance, shape (J,): the rules',
        plus, with ``evict_allowance``, the actor's evictions (:attr:`EnvCore.evictions`)."""
        if self.evict_allowance:
            return self._preempted + core.evictions
        return self._preempted

    def _allowance(self, state: SimState, jobs: NDArray[np.int64]) -> NDArray[np.int64]:
        """How many preemptions by the rules each of ``jobs`` may have in all: ``preempt_max``,
        plus one per full ``preempt_every_s`` seconds it has held GPUs (``SimState.run_s``);
        shape (len(jobs),). A job preempted that many times is protected."""
        base = np.full(jobs.shape, self.preempt_max, dtype=np.int64)
        if self.preempt_every_s is None:
            return base
        return base + (state.run_s[jobs] // self.preempt_every_s).astype(np.int64)

    @staticmethod
    def _free_times(
        core: StateCore, alloc: Allocation, rem: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Estimated wait (s) until each node has ``g`` free GPUs, shape (N, G_max + 1).

        Entry ``[n, g]``: 0 where node ``n`` has ``g`` GPUs free now, else the earliest
        remaining time ``rem`` (s, per entry of ``alloc``, the jobs holding GPUs) of a job on it
        whose end, with the jobs on it ending before, frees ``g`` GPUs; inf on down nodes or
        beyond the node's size.
        """
        gs = np.arange(int(core.cluster.node_gpus.max()) + 1)
        out = np.where(core.free_g[:, None] >= gs[None, :], 0.0, np.inf)
        if alloc.size:
            o = np.lexsort((rem, alloc.node))
            node, g = alloc.node[o], alloc.gpus[o]
            cum = np.cumsum(g)
            first = np.searchsorted(node, node)  # each entry's node's first entry (sorted)
            freed = core.free_g[node] + cum - (cum[first] - g[first])  # (E,) free after it ends
            vals = np.where(freed[:, None] >= gs[None, :], rem[o][:, None], np.inf)
            np.minimum.at(out, node, vals)
        out[~core.node_up] = np.inf
        return out

    def _place_eft(self, core: StateCore, state: SimState, gain: float) -> int:
        """Place waiting jobs where they finish earliest, not waiting for a faster type (class
        doc, ``eft_gain``); return the jobs placed."""
        wl, cl, jt = core.wl, core.cluster, core.jt
        assert wl is not None and jt is not None
        p = core.pending
        if p.size == 0 or not core.any_legal:
            return 0
        order = np.argsort(core.est_run_s(p), kind="stable")  # the shortest first
        core.reorder_pending(order)
        g1, c1, m1 = core.features.one
        done = 0
        for _ in range(core.K):
            if not core.any_legal:
                break
            w = np.where(core.slot_ok, core.window, 0)
            G = wl.req_gpus[w]  # (K,)
            speed = jt.rel_tput[w][:, cl.node_type].T  # (N, K), 1 on the fastest type present
            single = core.ma.single[:, :, g1, c1, m1]  # (N, K) holds it alone at the request
            now = np.where(single, speed, 0.0).max(axis=0)  # (K,) the best speed now
            est = core.est_run_s(w)  # (K,) s on the fastest type
            # This round's placements count as running.
            alloc = core.round_allocation()
            rem = self._running_remaining(core, state, alloc)  # (E,) s
            free_at = self._free_times(core, alloc, rem)  # (N, G_max + 1)
            # Its fastest type's nodes that could ever hold it alone; the earliest one frees.
            home = (
                (speed >= 1.0 - 1e-9)
                & (cl.node_gpus[:, None] >= G[None, :])
                & core.node_up[:, None]
            )
            Gc = np.minimum(G, free_at.shape[1] - 1)  # in range; larger jobs have no home
            wait = np.where(home, free_at[:, Gc], np.inf).min(axis=0)  # (K,)
            cand = core.slot_ok & (now > 0) & home.any(axis=0)
            if not self.eft_elastic:  # rigid only: elastic jobs are left to the elastic rules
                cand &= wl.min_gpus[w] == wl.max_gpus[w]
            horizon = float(rem.max()) if rem.size else 0.0  # when every running job ends
            run_now = est / np.where(now > 0, now, 1.0)  # (K,) s on the best node now
            # Never a job that would then finish last: a slow start there sets the makespan.
            ok = cand & (run_now <= horizon) & (run_now <= (1.0 - gain) * (wait + est))
            if not ok.any():
                break
            k = int(np.argmax(ok))  # the shortest such job
            at = single[:, k] & (speed[:, k] >= now[k] - 1e-9)
            n = self._fewest_free(core, at)
            actions = np.zeros(core.N, dtype=np.int64)
            actions[n] = int(core.codec.encode(k, g1, c1, m1))
            actions = self._hold_memory(core, actions)
            if core.resolve_claims(actions)[1] == 0:
                break
            done += 1
        core.reorder_pending(np.argsort(order))  # the window goes back to the actor's order
        return done

    def _guard_makespan(self, core: StateCore, state: SimState, min_s: float) -> int:
        """Place the waiting jobs that set the makespan, preempting if needed (class doc).

        Returns:
            The jobs placed.
        """
        wl = core.wl
        assert wl is not None
        done, placed_s = 0, 0.0  # the longest job this guard placed this round (s)
        for _ in range(core.K):
            p = core.pending
            if p.size == 0:
                break
            est_p = core.est_run_s(p)  # (P,) s, inf where no present type runs the job
            cur = core.running()  # without this round's placements
            v_rem = self._running_remaining(core, state, cur)  # (E,) s per entry
            horizon = max(float(v_rem.max()) if v_rem.size else 0.0, placed_s)
            waited = state.time - wl.arrival[p]
            crit = (
                np.isfinite(est_p)
                & (est_p >= min_s)
                & (est_p > horizon)
                & (waited >= self.critical_wait_s)
            )
            if not crit.any():
                break
            # The longest first: it goes to window slot 0 (the window order is restored below).
            order = np.argsort(np.where(crit, -est_p, np.inf), kind="stable")
            core.reorder_pending(order)
            placed = self._place_critical(core, state, cur, v_rem, float(est_p[order[0]]))
            core.reorder_pending(np.argsort(order))
            if not placed:
                break
            self._critical[int(p[order[0]])] = True
            placed_s = max(placed_s, float(est_p[order[0]]))
            done += 1
        return done

    @staticmethod
    def _running_remaining(
        core: StateCore, state: SimState, cur: Allocation
    ) -> NDArray[np.float64]:
        """Estimated remaining time (s) of each running entry's job (isolated rate where it
        runs, on all its GPUs), shape (E,)."""
        wl, tm, cl = core.wl, core.tm, core.cluster
        assert wl is not None
        if cur.size == 0:
            return np.zeros(0)
        G, spread = CoreActorPolicy._entry_spread(core, cur)
        j = cur.job
        rate = tm.isolated(wl.model[j], cl.node_type[cur.node], G, spread)
        out = np.full(j.shape, np.inf)
        np.divide(state.remaining[j], rate, out=out, where=rate > 0)
        return out

    def _place_critical(
        self,
        core: StateCore,
        state: SimState,
        cur: Allocation,
        v_rem: NDArray[np.float64],
        est: float,
    ) -> bool:
        """Place window slot 0 (a job estimated to run ``est`` s) on one node of its fastest
        type, preempting running jobs there if needed, else (with ``critical_min_rel``) on a
        slower type with room; return whether it was placed."""
        wl, cl, jt = core.wl, core.cluster, core.jt
        assert wl is not None and jt is not None
        if not core.slot_ok[0]:
            return False
        g1, c1, m1 = core.features.one
        j = int(core.window[0])
        G = int(wl.req_gpus[j])
        # Its fastest allowed type among those with an up node that can hold the request.
        speed = jt.rel_tput[j][cl.node_type]  # (N,)
        fits_node = core.node_up & (cl.node_gpus >= G) & (speed > 0)
        if not fits_node.any():
            return False
        best = fits_node & (speed >= speed[fits_node].max() - 1e-9)
        t = int(cl.node_type[int(np.argmax(best))])
        packed, spread = core.tm.isolated(wl.model[j], t, G, np.array([False, True]))
        if spread > packed:  # the measured rates favour spreading it over nodes
            placed = self._place_spread(core, best, most_cpu=self.critical_spread_cpu)
            return placed or self._place_slower(core, speed, est, cur, v_rem)
        single = core.ma.single[:, 0, g1, c1, m1] & best
        if single.any():  # it fits now: the node with the fewest free GPUs that holds it
            n = self._fewest_free(core, single)
            return self._claim_most_cpu(core, n)
        # Room by preemption: victims held on one node (or, with preempt_gangs, on the fewest
        # nodes that hold them), far shorter than the job.
        ok_v = (
            self._victim_shape(core, cur)
            & best[cur.node]
            & (v_rem * self.critical_ratio <= est)
            & (self._preemptions(core)[cur.job] < self._allowance(state, cur.job))
            & ~self._critical[cur.job]
        )
        if not ok_v.any():
            return self._place_slower(core, speed, est, cur, v_rem)
        cpg, mpg, mem_ok = core.features.window_amounts(
            jt, wl, core.window, core.slot_ok, core.node_up
        )
        pick: tuple[tuple[int, int, int], int, NDArray[np.int64]] | None = None
        for node in np.flatnonzero(best & mem_ok[:, 0, m1]):
            v = np.flatnonzero(ok_v & (cur.node == node))
            v = v[np.lexsort((cur.job[v], -v_rem[v], -cur.gpus[v]))]  # most GPUs, longest left
            room = np.array(
                [core.free_g[node], core.free_c[node], core.free_m[node]], dtype=np.float64
            )
            need = np.array([G, cpg[node, 0, c1] * G, mpg[node, 0, m1] * G])
            gain = np.cumsum(np.stack([cur.gpus[v], cur.cpus[v], cur.mem[v]], axis=1), axis=0)
            enough = np.flatnonzero((room + gain >= need - EPS).all(axis=1))
            if enough.size == 0:
                continue
            take = v[: int(enough[0]) + 1]
            cost = (take.size, int(cur.gpus[take].sum()), int(node))
            if pick is None or cost < pick[0]:
                pick = (cost, int(node), cur.job[take])
        if pick is None:
            return self._place_slower(core, speed, est, cur, v_rem)
        _, n, victims = pick
        core.release(victims)
        self._preempted[victims] += 1
        self.counts["preemptions"] += int(victims.size)
        if not self._claim_most_cpu(core, n):  # pragma: no cover - room was checked
            raise RuntimeError(f"makespan guard: node {n} did not hold job {j} after preemption")
        return True

    def _place_slower(
        self,
        core: StateCore,
        speed: NDArray[np.float64],
        est: float,
        cur: Allocation,
        v_rem: NDArray[np.float64],
    ) -> bool:
        """The makespan guard's last resort (``critical_min_rel``; None = none): place window
        slot 0 (estimated to run ``est`` s on its fastest type) at its request on one node of
        the fastest type that holds it now, if that type runs it at least ``critical_min_rel``
        of its fastest speed (``speed``: per node, relative to it, shape (N,); the fewest free
        GPUs first) and ``est`` is at least ``critical_min_rel_s``; with
        ``critical_slow_eft``, only if it would finish there before it would by waiting for a
        node of its fastest type (``cur``'s entries ending after ``v_rem`` s, as the
        earliest-finish placement estimates it). Returns whether it was placed."""
        if self.critical_min_rel is None or est < self.critical_min_rel_s:
            return False
        g1, c1, m1 = core.features.one
        ok = core.ma.single[:, 0, g1, c1, m1] & core.node_up
        ok &= speed >= self.critical_min_rel - 1e-9
        if not ok.any():
            return False
        ok &= speed >= speed[ok].max() - 1e-9
        if self.critical_slow_eft:
            assert core.wl is not None
            G = int(core.wl.req_gpus[int(core.window[0])])
            fastest = core.node_up & (speed >= speed.max() - 1e-9)
            fastest &= core.cluster.node_gpus >= G
            if fastest.any():
                wait = float(self._free_times(core, cur, v_rem)[fastest, G].min())
                if est / float(speed[ok].max()) >= wait + est:
                    return False  # waiting for the fastest type finishes it sooner
        n = self._fewest_free(core, ok)
        return self._claim_most_cpu(core, n)

    @staticmethod
    def _place_spread(core: StateCore, best: NDArray[np.bool_], most_cpu: bool = False) -> bool:
        """Place window slot 0 at its request over two or more ``best`` nodes with free room
        (no node takes all of it); return whether it was placed. With ``most_cpu`` the gang
        then takes the highest CPU level that every one of its nodes has the cores for (one
        level for the gang; the request's level at least)."""
        wl, jt = core.wl, core.jt
        assert wl is not None and jt is not None
        g1, c1, m1 = core.features.one
        j = int(core.window[0])
        G = int(wl.req_gpus[j])
        cpg, mpg, mem_ok = core.features.window_amounts(
            jt, wl, core.window, core.slot_ok, core.node_up
        )
        members = np.flatnonzero(best & mem_ok[:, 0, m1])
        if members.size < 2:
            return False
        c, m = cpg[members, 0, c1], mpg[members, 0, m1]
        room = np.minimum(
            core.free_g[members],
            np.minimum(
                np.floor(core.free_c[members] / c + EPS), np.floor(core.free_m[members] / m + EPS)
            ),
        ).astype(np.int64)
        out = fill_gang(members, np.minimum(room, G - 1), G)
        if out is None:
            return False
        nodes, g = out
        i = np.searchsorted(members, nodes)
        gf = g.astype(np.float64)
        cpus = gf * c[i]
        if most_cpu:
            per_gpu = cpg[nodes, 0, :]  # (E, L_c) cores per GPU at each CPU level
            fits = (per_gpu * gf[:, None] <= core.free_c[nodes, None] + EPS).all(axis=0)
            levels = np.flatnonzero(fits & (per_gpu.min(axis=0) >= c[i].max() - EPS))
            if levels.size:  # the level with the most cores that every node has room for
                best_level = int(levels[np.argmax(per_gpu[:, levels].sum(axis=0))])
                cpus = gf * per_gpu[:, best_level]
        core.place(j, nodes, g, cpus, gf * m[i])
        return True

    @staticmethod
    def _fewest_free(core: EnvCore, nodes: NDArray[np.bool_]) -> int:
        """The node among ``nodes`` (shape (N,), at least one true) with the fewest free GPUs,
        the lowest index on ties (best fit)."""
        return int(np.argmin(np.where(nodes, core.free_g, np.iinfo(np.int64).max)))

    @staticmethod
    def _claim_most_cpu(core: StateCore, n: int) -> bool:
        """Place window slot 0 alone on node ``n`` at its requested GPUs and memory, with the
        most CPU cores legal there (a CPU-sensitive long job runs faster; the job's CPU level
        at the request is legal when this is called); return whether it was placed."""
        g1, c1, m1 = core.features.one
        legal = np.flatnonzero(core.ma.single[n, 0, g1, :, m1])  # CPU level indices
        cpu = np.asarray(core.cfg.levels.cpu, dtype=np.float64)
        c = int(legal[np.argmax(cpu[legal])]) if legal.size else c1
        actions = np.zeros(core.N, dtype=np.int64)
        actions[n] = int(core.codec.encode(0, g1, c, m1))
        return bool(core.resolve_claims(actions)[1] > 0)

    @staticmethod
    def _remaining_time(
        core: EnvCore, state: SimState, job: int, rate: float, restart: bool
    ) -> float:
        """Seconds to finish ``job`` at ``rate`` (plus its restart delay if it moves)."""
        assert core.wl is not None
        if rate <= 0:
            return float("inf")
        delay = float(core.tm.restart_delay_s[core.wl.model[job]]) if restart else 0.0
        return delay + float(state.remaining[job]) / rate

    def _move_gangs(self, rnd: _MoveRound, multi: NDArray[np.bool_]) -> list[Allocation]:
        """Moves of multi-node jobs of one GPU type to a faster type (updates ``free``)."""
        core, state, cur = rnd.core, rnd.state, rnd.cur
        target, free, gain = rnd.target, rnd.free, rnd.gain
        wl, tm, cl = core.wl, core.tm, core.cluster
        assert wl is not None
        types = cl.node_type
        jobs = np.unique(cur.job[multi]).tolist()
        moves: list[Allocation] = []
        while jobs:
            best: _Candidate | None = None
            for j in jobs:
                ent = cur.job == j
                nodes = cur.node[ent]
                t0 = int(types[nodes[0]])
                if (types[nodes] != t0).any():
                    continue  # a job over several GPU types is left alone
                G = int(cur.gpus[ent].sum())
                cpg, mpg = float(cur.cpus[ent].sum()) / G, float(cur.mem[ent].sum()) / G
                spread = is_spread(cl, nodes, G)
                m = int(wl.model[j])
                t_now = self._remaining_time(
                    core, state, j, float(tm.isolated(m, t0, G, spread)), False
                )
                others = [t for t in np.flatnonzero(wl.allowed_types[j]).tolist() if t != t0]
                place = _Placement(j, G, cpg, mpg, t_now)
                best = self._best_gang(core, state, place, others, gain, target, free, best)
            if best is None:
                break
            _, j, a = best
            free[0][a.node] -= a.gpus
            free[1][a.node] -= a.cpus
            free[2][a.node] -= a.mem
            moves.append(a)
            jobs.remove(j)
        return moves

    def _best_gang(
        self,
        core: EnvCore,
        state: SimState,
        place: _Placement,
        types: list[int],
        gain: float,
        target: NDArray[np.bool_],
        free: FreeRoom,
        best: _Candidate | None,
    ) -> _Candidate | None:
        """``best``, or a better placement of ``place`` on nodes of one of ``types``.

        A placement qualifies when its estimated remaining time, restart delay included, is
        below ``1 - gain`` times ``place.t_now``; the largest saving wins (the earlier one on
        ties).
        """
        assert core.wl is not None
        j, G = place.job, place.gpus
        m = int(core.wl.model[j])
        for t in types:
            out = self._place_gang(core, t, G, place.cpg, place.mpg, target, free)
            if out is None:
                continue
            nodes_t, g_t, spread_t = out
            t_new = self._remaining_time(
                core, state, j, float(core.tm.isolated(m, t, G, spread_t)), place.restart
            )
            saving = place.t_now - t_new
            if t_new < (1.0 - gain) * place.t_now and (best is None or saving > best[0]):
                gf = g_t.astype(np.float64)
                a = Allocation(
                    np.full(g_t.size, j), nodes_t, g_t, gf * place.cpg, gf * place.mpg,
                    np.full(g_t.size, -1),
                )  # fmt: skip
                best = (saving, j, a)
        return best

    @staticmethod
    def _place_gang(
        core: EnvCore,
        t: int,
        G: int,
        cpg: float,
        mpg: float,
        target: NDArray[np.bool_],
        free: FreeRoom,
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], bool] | None:
        """Target nodes of type ``t`` for ``G`` GPUs at the given amounts per GPU, or None.

        One node if one has room (the one with the least room that suffices, lowest index on
        ties), else the fewest nodes, largest room first.

        Returns:
            ``(nodes, gpus per node, spread)``.
        """
        cl = core.cluster
        nodes = np.flatnonzero(target & (cl.node_type == t))
        if nodes.size == 0:
            return None
        room = np.minimum(
            free[0][nodes],
            np.minimum(
                np.floor(free[1][nodes] / cpg + EPS) if cpg > 0 else free[0][nodes],
                np.floor(free[2][nodes] / mpg + EPS) if mpg > 0 else free[0][nodes],
            ),
        ).astype(np.int64)
        alone = room >= G
        if alone.any():
            c = nodes[alone]
            n = int(c[np.lexsort((c, room[alone]))[0]])
            return np.array([n]), np.array([G]), False
        out = fill_gang(nodes, room, G)
        if out is None:
            return None
        return out[0], out[1], is_spread(cl, out[0], G)

    def _move_singles(self, rnd: _MoveRound, single: NDArray[np.bool_]) -> list[Allocation]:
        """Moves of single-node jobs to one node of a faster type (updates ``free``)."""
        core, state, cur = rnd.core, rnd.state, rnd.cur
        target, free, gain = rnd.target, rnd.free, rnd.gain
        wl, tm, cl = core.wl, core.tm, core.cluster
        assert wl is not None
        e = np.flatnonzero(single)
        if e.size == 0:
            return []
        job, G = cur.job[e], cur.gpus[e]
        cpus, mem = cur.cpus[e], cur.mem[e]
        model, types = wl.model[job], cl.node_type
        rate_now = tm.isolated(model, types[cur.node[e]], G, False)  # (E,)
        rate_new = tm.isolated(model[:, None], types[None, :], G[:, None], False)  # (E, N)
        rem = state.remaining[job]
        t_now = rem / np.where(rate_now > 0, rate_now, np.inf)
        t_new = tm.restart_delay_s[model][:, None] + rem[:, None] / np.where(
            rate_new > 0, rate_new, np.nan
        )
        ok = (
            target[None, :]
            & wl.allowed_types[job][:, types]
            & (rate_new > rate_now[:, None])
            & (t_new < (1.0 - gain) * t_now[:, None])
        )
        if not ok.any():
            return []
        free_g, free_c, free_m = free
        saving = np.where(ok, t_now[:, None] - t_new, -np.inf)
        moves: list[Allocation] = []
        while True:
            fits = (free_g[None, :] >= G[:, None]) & (free_c[None, :] >= cpus[:, None] - EPS)
            fits &= free_m[None, :] >= mem[:, None] - EPS
            s = np.where(fits, saving, -np.inf)
            best = int(np.argmax(s))
            i, n = divmod(best, core.N)
            if not np.isfinite(s[i, n]):
                break
            moves.append(
                Allocation(job[i : i + 1], np.array([n]), G[i : i + 1], cpus[i : i + 1],
                           mem[i : i + 1], np.array([-1]))
            )  # fmt: skip
            free_g[n] -= G[i]
            free_c[n] -= cpus[i]
            free_m[n] -= mem[i]
            saving[i, :] = -np.inf  # one move per job per round
        return moves

    @staticmethod
    def _fast_claim(
        core: EnvCore, state: SimState, wait_s: float, max_s: float
    ) -> NDArray[np.int64] | None:
        """Actions placing the longest-waiting short window job on a node of its fastest type.

        Only jobs waiting at least ``wait_s`` seconds, estimated to run at most ``max_s``
        seconds there (isolated rate at the request), that one node of their fastest allowed
        GPU type can hold at their request; on the node with the fewest free GPUs that holds
        it (lowest index on ties). None when no job qualifies.
        """
        if not core.any_legal:
            return None
        assert core.wl is not None and core.jt is not None
        g1, c1, m1 = core.features.one
        w = np.where(core.slot_ok, core.window, 0)
        speed = core.jt.rel_tput[w][:, core.cluster.node_type].T  # (N, K)
        best = core.ma.single[:, :, g1, c1, m1] & (speed >= 1.0 - 1e-9)
        waited = np.where(core.slot_ok, state.time - core.wl.arrival[w], -np.inf)
        short = core.est_run_s(w) <= max_s
        cand = (waited >= wait_s) & short & best.any(axis=0)
        if not cand.any():
            return None
        k = int(np.argmax(np.where(cand, waited, -np.inf)))
        n = CoreActorPolicy._fewest_free(core, best[:, k])
        actions = np.zeros(core.N, dtype=np.int64)
        actions[n] = int(core.codec.encode(k, g1, c1, m1))
        return actions

    def _place_starved_first(self, core: StateCore, now: float, wait_s: float) -> int:
        """The starvation guard over every waiting job, before the actor (``starve_first``):
        the starved jobs go to the window's front, longest-waiting first, and are placed while
        one fits; the window order is restored. Returns the jobs placed."""
        assert core.wl is not None
        waited = now - core.wl.arrival[core.pending]
        starved = waited >= wait_s
        if not starved.any():
            return 0
        order = np.argsort(np.where(starved, -waited, np.inf), kind="stable")
        core.reorder_pending(order)
        placed = self._place_each(
            core, lambda: self._rule_hold(core, self._starved_claim(core, now, wait_s))
        )
        core.reorder_pending(np.argsort(order))  # the window goes back to the actor's order
        return placed

    @staticmethod
    def _starved_claim(core: EnvCore, now: float, wait_s: float) -> NDArray[np.int64] | None:
        """Actions placing the longest-waiting starved window job at its request, or None."""
        if not core.any_legal:
            return None
        assert core.wl is not None and core.jt is not None
        g1, c1, m1 = core.features.one
        legal = core.ma.legal[:, :, g1, c1, m1]  # (N, K) at the requested amounts
        w = np.where(core.slot_ok, core.window, 0)
        waited = np.where(core.slot_ok, now - core.wl.arrival[w], -np.inf)
        cand = (waited >= wait_s) & legal.any(axis=0)
        if not cand.any():
            return None
        k = int(np.argmax(np.where(cand, waited, -np.inf)))
        speed = core.jt.rel_tput[w[k]][core.cluster.node_type]  # (N,) by the node's GPU type
        single = core.ma.single[:, k, g1, c1, m1]
        actions = np.zeros(core.N, dtype=np.int64)
        code = int(core.codec.encode(k, g1, c1, m1))
        if single.any():
            actions[int(np.argmax(np.where(single, speed, -1.0)))] = code
        else:  # a gang: every legal node of the fastest type that has legal nodes claims
            fastest = np.where(legal[:, k], speed, -1.0).max()
            actions[legal[:, k] & (speed == fastest)] = code
        return actions


def elastic_split(elastic: Actor, other: Actor) -> Actor:
    """An actor that hands each decision step to ``elastic`` when every job in the window is
    elastic (``min_gpus < max_gpus``), and to ``other`` otherwise (an empty window too).

    Rigid workloads (Philly, Alibaba) therefore always get ``other``; Sia's and Pollux's
    traces of elastic jobs always get ``elastic``.
    """

    def act(core: EnvCore) -> NDArray[np.int64]:
        wl = core.wl
        assert wl is not None
        w = core.window[core.slot_ok]
        if w.size and bool((wl.min_gpus[w] < wl.max_gpus[w]).all()):
            return elastic(core)
        return other(core)

    return act


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
        starve_guard_s: Turn on the starvation guard (s; see :class:`CoreActorPolicy`);
            None = off.
        migrate_gain: Turn on migration to idle faster GPUs (see :class:`CoreActorPolicy`);
            None = off.
        preempt_ratio: Turn on preemption for short jobs (see :class:`CoreActorPolicy`);
            None = off.
        preempt_wait_s: Waiting time (s) after which a job may preempt.
        preempt_max: Times the rule may preempt one job.
        preempt_every_s: Seconds of holding GPUs that earn a job one more preemption (None =
            off).
        preempt_gangs: Gangs on the fewest nodes that hold them may be victims too (see
            :class:`CoreActorPolicy`).
        preempt_fast: Turn on preemption for a much faster GPU at this speedup (see
            :class:`CoreActorPolicy`); None = off.
        fast_wait_s: Turn on the fast-GPU guard (s; see :class:`CoreActorPolicy`); None = off.
        fast_max_s: Longest estimated run time (s) of a job the fast-GPU guard places.
        elastic_gain: Turn on elastic sizing (see :class:`CoreActorPolicy`); None = off.
        elastic_max_s: Elastic jobs estimated to run longer than this (s) keep their request;
            None = no limit.
        grow_gain: Turn on growth of elastic jobs onto idle GPUs (see
            :class:`CoreActorPolicy`); None = off.
        keep_memory: Turn on the memory guard (see :class:`CoreActorPolicy`).
        grow_factor: Largest multiple of its GPU count one growth may give a job (see
            :class:`CoreActorPolicy`).
        grow_at_request: A growth gives at least the requested CPU and memory per GPU (see
            :class:`CoreActorPolicy`).
        shrink_order: Which job above its request shrinks first while jobs wait (see
            :class:`CoreActorPolicy`).
        shrink_fastest: Only jobs on the first waiting job's fastest GPU type shrink (see
            :class:`CoreActorPolicy`).
        critical_s: Turn on the makespan guard for jobs estimated to run at least this long
            (s; see :class:`CoreActorPolicy`); None = off.
        critical_ratio: A makespan-guard victim must finish this many times sooner than the
            guarded job runs.
        critical_wait_s: Waiting time (s) after which the makespan guard acts.
        mem_hold_phi: Turn on the memory hold at this speed factor (see
            :class:`CoreActorPolicy`); None = off.
        wake: Timed wake-ups (``"starve"`` or ``"all"``; see :class:`CoreActorPolicy`);
            None = decide at arrivals and completions only.
        critical_min_rel: Let the makespan guard place its job on a slower type with room at
            this fraction of its fastest speed (see :class:`CoreActorPolicy`); None = off.
        eft_gain: Turn on the earliest-finish placement with this saving (see
            :class:`CoreActorPolicy`); None = off.
        evict_allowance: The network's evictions and the rules' preemptions share one
            allowance per job (see :class:`CoreActorPolicy`; no effect without eviction
            actions).
        evict_critical: The network may evict a job the makespan guard placed (False: it is
            spared, as by the rules; see :class:`CoreActorPolicy`).
        starve_first: The starvation guard also runs before the agents' steps, over every
            waiting job (see :class:`CoreActorPolicy`; needs ``starve_guard_s``).
        critical_spread_cpu: The makespan guard's spread placements take the most CPU legal
            (see :class:`CoreActorPolicy`).
        critical_min_rel_s: Shortest estimated run time (s) of a job the makespan guard may
            place on a slower type (see :class:`CoreActorPolicy`); None = every job it guards.
        critical_slow_eft: The guard's slower-type placement only when it finishes sooner
            than waiting for the fastest type (see :class:`CoreActorPolicy`).
        eft_elastic: The earliest-finish placement also takes elastic jobs (see
            :class:`CoreActorPolicy`).
        grow_waiting: Growth also while jobs wait, onto types none of them waits for (see
            :class:`CoreActorPolicy`).
        grow_new: Growth also takes the jobs starting this round (see
            :class:`CoreActorPolicy`).
        window_order: Override the window order the agents see (``"arrival"``,
            ``"attained"``, ``"sjf"``, shortest estimated run time first, or ``"typed"``, each
            GPU type's shortest jobs in turn; see :class:`EnvSettings`); None = the
            checkpoint's (``agent.env.window_order``, ``"arrival"`` for checkpoints saved
            before that field existed).
        ensemble: Further checkpoint files whose networks act together with the checkpoint's
            (:class:`~hetsched.agents.network.PolicyEnsemble`: the mean of their masked
            log-probabilities; every member must share the checkpoint's env settings). None:
            :data:`DEFAULT_ENSEMBLE` when the checkpoint is :data:`DEFAULT_CHECKPOINT` and the
            network acts, else none (the teacher needs no network); ``[]``: the checkpoint's
            network alone.
        evict_only: The checkpoint's network decides the evictions only (it needs an
            eviction head); the ``ensemble`` members alone vote on placements: learned
            evictions beside an ensemble's placements (see
            :class:`~hetsched.agents.network.PolicyEnsemble`).
        net: Use this network and config instead of a file (training-time evaluation).
        actor: Who takes the decision steps: ``"network"`` (the trained agents) or
            ``"teacher"``, the checkpoint's behaviour-cloning teacher
            (:class:`~hetsched.agents.teacher.SJFTeacher` with the checkpoint's ``teacher``
            and ``env.fungible`` settings), with the same window, action levels and rules:
            the ablation "without the learned network".
        elastic_teacher: With ``actor="network"``, the teacher takes the decision steps
            whose window holds elastic jobs only (:func:`elastic_split`); a step with a rigid
            job in its window stays with the networks.
    """

    def __init__(
        self,
        checkpoint: str | Path | None = None,
        greedy: bool = True,
        conflict: str | None = None,
        long_guard_s: float | None = None,
        starve_guard_s: float | None = None,
        migrate_gain: float | None = None,
        preempt_ratio: float | None = None,
        preempt_wait_s: float = 0.0,
        preempt_max: int = 1,
        preempt_every_s: float | None = None,
        preempt_gangs: bool = False,
        fast_wait_s: float | None = None,
        fast_max_s: float = 3600.0,
        elastic_gain: float | None = None,
        elastic_max_s: float | None = None,
        grow_gain: float | None = None,
        keep_memory: bool = False,
        grow_factor: int = 2,
        grow_at_request: bool = False,
        shrink_order: str = "excess",
        shrink_fastest: bool = False,
        critical_s: float | None = None,
        critical_ratio: float = 4.0,
        critical_wait_s: float = 0.0,
        mem_hold_phi: float | None = None,
        preempt_fast: float | None = None,
        wake: str | None = None,
        critical_min_rel: float | None = None,
        eft_gain: float | None = None,
        evict_allowance: bool = False,
        evict_critical: bool = True,
        starve_first: bool = False,
        critical_spread_cpu: bool = False,
        critical_min_rel_s: float | None = None,
        critical_slow_eft: bool = False,
        eft_elastic: bool = False,
        grow_waiting: bool = False,
        grow_new: bool = False,
        elastic_teacher: bool = False,
        window_order: str | None = None,
        ensemble: Sequence[str | Path] | None = None,
        evict_only: bool = False,
        net: tuple[Any, Any] | None = None,
        actor: str = "network",
    ) -> None:
        import torch

        from hetsched.agents.agent import (
            ensemble_from_checkpoints,
            env_settings,
            load_checkpoint,
            net_from_checkpoint,
        )

        if actor not in ACTORS:
            raise ValueError(f"actor={actor!r}; choose one of {', '.join(ACTORS)}")
        self.actor_kind = actor
        self.elastic_teacher = bool(elastic_teacher)
        torch.set_num_threads(1)
        self.net: MAIFSNet | PolicyEnsemble
        if net is None:
            path = Path(checkpoint) if checkpoint else DEFAULT_CHECKPOINT
            ck = load_checkpoint(path)
            if ensemble is None:  # the shipped members act with the default network only
                is_default = path.resolve() == DEFAULT_CHECKPOINT.resolve()
                ensemble = DEFAULT_ENSEMBLE if is_default and actor == "network" else ()
            if ensemble or evict_only:
                self.net, self.conf = ensemble_from_checkpoints(
                    ck, ensemble, primary_path=path, evict_only=evict_only
                )
            else:
                self.net, self.conf = net_from_checkpoint(ck)
        else:
            if ensemble or evict_only:
                raise ValueError("ensemble= needs checkpoint files, not net= (so does evict_only=)")
            self.net, self.conf = net
        if long_guard_s is not None:
            self.conf.env.long_guard_s = float(long_guard_s)
        self.greedy = greedy
        self.conflict = conflict
        settings = env_settings(self.conf.env)
        if window_order is not None:
            settings = replace(settings, window_order=window_order)  # validated by EnvSettings
        super().__init__(
            settings,
            None,
            "maifs",
            starve_guard_s=starve_guard_s,
            migrate_gain=migrate_gain,
            preempt_ratio=preempt_ratio,
            preempt_wait_s=preempt_wait_s,
            preempt_max=preempt_max,
            preempt_every_s=preempt_every_s,
            preempt_gangs=preempt_gangs,
            fast_wait_s=fast_wait_s,
            fast_max_s=fast_max_s,
            elastic_gain=elastic_gain,
            elastic_max_s=float("inf") if elastic_max_s is None else elastic_max_s,
            grow_gain=grow_gain,
            keep_memory=keep_memory,
            grow_factor=grow_factor,
            grow_at_request=grow_at_request,
            shrink_order=shrink_order,
            shrink_fastest=shrink_fastest,
            critical_s=critical_s,
            critical_ratio=critical_ratio,
            critical_wait_s=critical_wait_s,
            mem_hold_phi=mem_hold_phi,
            preempt_fast=preempt_fast,
            wake=wake,
            critical_min_rel=critical_min_rel,
            eft_gain=eft_gain,
            evict_allowance=evict_allowance,
            evict_critical=evict_critical,
            starve_first=starve_first,
            critical_spread_cpu=critical_spread_cpu,
            critical_min_rel_s=critical_min_rel_s,
            critical_slow_eft=critical_slow_eft,
            eft_elastic=eft_elastic,
            grow_waiting=grow_waiting,
            grow_new=grow_new,
        )

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
        if self.core.n_actions != self.net.dims.num_actions:
            raise CheckpointError(
                f"the checkpoint has {self.net.dims.num_actions} actions per node, the env "
                f"settings give {self.core.n_actions} (eviction actions: env.preemptive)"
            )
        if self.actor_kind == "teacher":
            self.actor = SJFTeacher.for_agent(self.conf).act
        else:
            self.actor = Acting(
                self.net, self.conf, greedy=self.greedy, rng=rng, conflict=self.conflict
            )
            if self.elastic_teacher:
                teacher = SJFTeacher.for_agent(self.conf).act

                def counted(core: EnvCore) -> NDArray[np.int64]:
                    self.counts["teacher_steps"] += 1
                    return teacher(core)

                self.actor = elastic_split(counted, self.actor)
