"""Action levels, the flat action codec and the env settings shared by every hetsched env.

Actions are flat ``Discrete`` indices (see ``shared/reference/maifs.md`` section 4)::

    A = 1 + K * L_g * L_c * L_m            (index 0 = no-op)
    a = 1 + ((k * L_g + g) * L_c + c) * L_m + m

where ``k`` is a candidate-window slot, ``g`` a GPU-count level, ``c`` a CPU-per-GPU level and
``m`` a memory-per-GPU level. Levels are *relative to the job's request*:

* GPU level ``x``: ``x * req_gpus`` rounded to a power of two and clipped to
  ``[min_gpus, max_gpus]``; the ``1.0`` level is the request itself (no rounding). Rigid jobs
  (``min_gpus == max_gpus``) only have the ``1.0`` level. A level whose count equals the
  ``1.0`` level's or an earlier level's is masked (no duplicate actions).
* CPU level ``x``: ``x * base_cpu`` cores per GPU; memory level ``x``: ``x * base_mem`` GiB per
  GPU. ``base`` is the job's request per GPU, capped at the node's per-GPU share (node CPUs /
  node GPUs, node memory / node GPUs) when ``LevelSets.cap_at_node_share`` is true (the
  default: the ``1.0`` levels then equal what the non-fungible baselines' ``Placer`` gives, so
  their schedules are expressible as actions).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.envs.rewards import RewardWeights

#: Default level sets (maifs.md section 4).
DEFAULT_GPU_LEVELS: tuple[float, ...] = (0.5, 1.0, 2.0)
DEFAULT_CPU_LEVELS: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0)
DEFAULT_MEM_LEVELS: tuple[float, ...] = (0.5, 1.0, 1.5)

#: How a round's simulated time advances once the agents are done deciding.
ADVANCE_MODES: tuple[str, ...] = ("round", "no_pending", "event")
#: Order of the candidate window.
WINDOW_ORDERS: tuple[str, ...] = ("arrival", "attained", "sjf", "typed")
#: Who wins when several agents claim the same single-node job.
CONFLICT_RULES: tuple[str, ...] = ("lowest_index", "best_fit", "most_free")


def _level_tuple(name: str, value: Any) -> tuple[float, ...]:
    try:
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(
            f"levels.{name}={value!r} must be a sequence of positive numbers"
        ) from None
    if not out:
        raise ValueError(f"levels.{name} is empty; give at least the 1.0 level, e.g. [1.0]")
    if any(not math.isfinite(v) or v <= 0 for v in out):
        raise ValueError(f"levels.{name}={list(out)} must hold positive finite numbers")
    if len(set(out)) != len(out):
        raise ValueError(f"levels.{name}={list(out)} has duplicates; list each level once")
    if 1.0 not in out:
        raise ValueError(
            f"levels.{name}={list(out)} lacks the 1.0 level (the request itself); add 1.0 so "
            "that fixed policies and the 'fits at request' features are expressible"
        )
    return out


@dataclass(frozen=True)
class LevelSets:
    """Level sets of the fungible allocation (multipliers of the request).

    Attributes:
        gpu: GPU-count multipliers (must contain 1.0).
        cpu: CPU-per-GPU multipliers (must contain 1.0).
        mem: Memory-per-GPU multipliers (must contain 1.0).
        cap_at_node_share: Cap the per-GPU base at the node's per-GPU share.
    """

    gpu: tuple[float, ...] = DEFAULT_GPU_LEVELS
    cpu: tuple[float, ...] = DEFAULT_CPU_LEVELS
    mem: tuple[float, ...] = DEFAULT_MEM_LEVELS
    cap_at_node_share: bool = True

    def __post_init__(self) -> None:
        for name in ("gpu", "cpu", "mem"):
            object.__setattr__(self, name, _level_tuple(name, getattr(self, name)))
        object.__setattr__(self, "cap_at_node_share", bool(self.cap_at_node_share))

    @classmethod
    def from_any(cls, value: LevelSets | Mapping[str, Any] | None) -> LevelSets:
        """Accept a :class:`LevelSets`, a mapping of its fields, or ``None`` (defaults)."""
        if value is None:
            return cls()
        if isinstance(value, LevelSets):
            return value
        if isinstance(value, Mapping):
            known = {f.name for f in fields(cls)}
            unknown = set(value) - known
            if unknown:
                raise ValueError(
                    f"unknown level set key(s) {sorted(unknown)}; allowed: {sorted(known)}"
                )
            return cls(**dict(value))
        raise ValueError(f"levels={value!r} must be a LevelSets, a mapping or None")

    @property
    def sizes(self) -> tuple[int, int, int]:
        """``(L_g, L_c, L_m)``."""
        return len(self.gpu), len(self.cpu), len(self.mem)

    @property
    def one_index(self) -> tuple[int, int, int]:
        """Index of the 1.0 level in each set."""
        return self.gpu.index(1.0), self.cpu.index(1.0), self.mem.index(1.0)


@dataclass(frozen=True)
class EnvSettings:
    """Settings shared by the multi-agent and the central env (validated on construction).

    Attributes:
        window: Candidate-window size K.
        resident_slots: Padded slots R for a node's jobs in its observation.
        levels: Level sets.
        reward_weights: Reward weights (:mod:`hetsched.envs.rewards`).
        max_cycles: Env steps after which an episode is truncated (>= 2).
        round_s: Round length in seconds.
        max_decisions_per_round: Decision steps after which a round's time advances anyway.
        advance: ``"round"``: each round lasts ``round_s``; ``"no_pending"`` (default): skip
            whole rounds while nothing waits (Simulator ``static_when_no_pending``);
            ``"event"``: advance to the next arrival or completion (``event_driven``).
        skip_idle: When no agent has any legal placement, advance on its own to the next
            arrival or completion instead of asking the agents to pass.
        window_order: ``"arrival"``, ``"attained"`` (least attained GPU-time first),
            ``"sjf"`` (shortest estimated run time first: remaining work over the isolated
            rate at the request on the fastest allowed GPU type present) or ``"typed"`` (each
            GPU type's shortest jobs on that type in turn; ``EnvCore.typed_order``).
        window_backfill: Backfill slots: the last this many window slots show the next waiting
            jobs that may fit the free GPUs now (all up nodes of a GPU type the job allows
            have its fewest GPUs free together) instead of the next jobs in window order
            (``RoundFlow.window_jobs``), so a queue head that cannot run does not hide the
            jobs behind it that could. 0 (default): the first K waiting jobs.
        conflict_rule: Winner among single-node claims of one job: ``"lowest_index"``,
            ``"best_fit"`` (fewest free GPUs left) or ``"most_free"``; ties to the lowest index.
        max_time_s: Simulation horizon in seconds (``None``: none); reaching it truncates.
        validate_allocations: Let the engine re-validate the env's own allocations (slower;
            the env builds valid ones by construction).
        preemptive: Eviction actions (``hetsched/ClusterPreempt-v0``): each agent also has one
            action per resident slot, appended after the placement actions, that takes the
            slot's running job off the cluster while jobs wait (a gang leaves all its nodes).
            The job rejoins the waiting queue at once with its progress; the engine charges
            its restart delay when it runs again.
        evict_max: With ``preemptive``, a job may be evicted at most this many times per
            episode (its eviction actions are masked after that); None: no limit.
        migrate_speedup: With ``preemptive``, an eviction is also legal while nothing waits
            when the job could move: another node that is up has the GPUs, cores and memory
            the job holds free, of a GPU type it allows, on which it runs at least this many
            times as fast (isolated throughput at its GPU count). The agents then place it
            there (a migration to a faster GPU, paid with the restart delay). None: evictions
            only while jobs wait.
        migrate_gangs: With ``migrate_speedup``, a job running on several nodes (a gang) may
            move too: to one node that has all the GPUs, cores and memory it holds free and
            runs it that many times as fast as it runs now. False: only one-node jobs move.
        migrate_multinode: With ``migrate_gangs``, a gang larger than any one node of a GPU
            type may also move to several nodes of that type that together have its GPUs,
            cores and memory free (counted at the fewest of them, as a gang claim takes them)
            and run it that many times as fast. False: a gang moves only to one node, so one
            started on many slow nodes stays there.
        migrate_elastic: With ``migrate_speedup``, an elastic job (``min_gpus < max_gpus``)
            may also move at another GPU count: to a node where the largest count of its GPU
            levels that the node's free GPUs, cores and memory hold (at the cores and memory
            per GPU it holds now) runs it that many times as fast as it runs now. This is how
            a job started small grows onto a node that empties, and how one started on slow
            GPUs moves to fewer fast ones. False: a job moves only at the GPU count it holds.
        resizable: Resize actions: each agent also has one action per resident slot, after
            the placement and eviction actions, that doubles the GPUs of the slot's elastic
            job on the agent's node when no waiting job could use them
            (:mod:`hetsched.envs.resizes`).
        retry_refused: A decision step whose claims were all refused (gang claims too few
            nodes joined, and nothing placed, evicted or resized) does not close the round:
            each refused agent's gang claims of that window slot (its legal claims that its
            node does not host alone, e.g. at a CPU level above the node's free cores) are
            masked for the rest of the round and the agents decide again
            (``ClaimResolver.resolve_claims``). False (default): such a step closes the
            round, and its GPUs idle until the next one.
        reclaim_cores: Cores and memory granted above a running job's request are lent, not
            given: at the start of each decision round, a node whose free GPUs some waiting
            job fits (a GPU type it allows, its fewest GPUs) and that lacks their share of its
            cores or memory (node total over node GPUs, per free GPU) takes back such grants,
            largest first, each down to the request, until the free GPUs have their share; a
            node with more free than its free GPUs' share gives taken-back grants back, up to
            what each job was granted. Neither restarts a job. False: a grant lasts until
            the job ends.
        stall_steps: Truncate the episode (``stalled``) after this many consecutive decision
            steps without progress: a legal action was offered, yet no job was placed and
            the round's time advanced with nothing running (e.g. a policy that always
            passes while jobs wait). None: never.
    """

    window: int = 8
    resident_slots: int = 4
    levels: LevelSets = field(default_factory=LevelSets)
    reward_weights: RewardWeights = field(default_factory=RewardWeights)
    max_cycles: int = 20_000
    round_s: float = 60.0
    max_decisions_per_round: int = 32
    advance: str = "no_pending"
    skip_idle: bool = True
    window_order: str = "arrival"
    window_backfill: int = 0
    conflict_rule: str = "lowest_index"
    max_time_s: float | None = None
    validate_allocations: bool = False
    preemptive: bool = False
    evict_max: int | None = None
    migrate_speedup: float | None = None
    migrate_gangs: bool = False
    migrate_multinode: bool = False
    migrate_elastic: bool = False
    stall_steps: int | None = 1000
    resizable: bool = False
    retry_refused: bool = False
    reclaim_cores: bool = False

    def __post_init__(self) -> None:
        ss = self.stall_steps
        if ss is not None and (isinstance(ss, bool) or int(ss) != ss or int(ss) < 1):
            raise ValueError(
                f"stall_steps={ss!r} must be an integer >= 1 (decision steps without progress "
                "before the episode is truncated) or None (never)"
            )
        object.__setattr__(self, "stall_steps", None if ss is None else int(ss))
        em = self.evict_max
        if em is not None and (isinstance(em, bool) or int(em) != em or int(em) < 0):
            raise ValueError(f"evict_max={em!r} must be an integer >= 0 or None (no limit)")
        object.__setattr__(self, "evict_max", None if em is None else int(em))
        for name in (
            "preemptive",
            "migrate_gangs",
            "migrate_multinode",
            "migrate_elastic",
            "retry_refused",
            "resizable",
            "reclaim_cores",
        ):
            v = getattr(self, name)
            if not isinstance(v, bool | np.bool_):
                raise ValueError(f"{name}={v!r} must be true or false")
            object.__setattr__(self, name, bool(v))
        ms = self.migrate_speedup
        if ms is not None:
            if isinstance(ms, bool) or not (math.isfinite(float(ms)) and float(ms) > 1.0):
                raise ValueError(
                    f"migrate_speedup={ms!r} must be a number > 1 (how many times faster a "
                    "free node must run a job for its eviction to be legal) or None (off)"
                )
            if not self.preemptive:
                raise ValueError(
                    "migrate_speedup needs preemptive=True (migrations are evictions); set "
                    "preemptive=True or migrate_speedup=None"
                )
            object.__setattr__(self, "migrate_speedup", float(ms))
        for name, what in (("migrate_gangs", "a gang's"), ("migrate_elastic", "an elastic job's")):
            if getattr(self, name) and ms is None:
                raise ValueError(
                    f"{name} needs migrate_speedup (how many times faster {what} new node "
                    f"must run it); set migrate_speedup or {name}=False"
                )
        if self.migrate_multinode and not self.migrate_gangs:
            raise ValueError(
                "migrate_multinode needs migrate_gangs=True (only gangs move to several nodes); "
                "set migrate_gangs=True or migrate_multinode=False"
            )
        for name, lo in (("window", 1), ("resident_slots", 1), ("max_decisions_per_round", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or int(v) != v or int(v) < lo:
                raise ValueError(f"{name}={v!r} must be an integer >= {lo}")
            object.__setattr__(self, name, int(v))
        wb = self.window_backfill
        if isinstance(wb, bool) or int(wb) != wb or not 0 <= int(wb) <= self.window:
            raise ValueError(
                f"window_backfill={wb!r} must be an integer from 0 to window={self.window} "
                "(window slots that show jobs which may fit now)"
            )
        object.__setattr__(self, "window_backfill", int(wb))
        mc = self.max_cycles
        if isinstance(mc, bool) or int(mc) != mc or int(mc) < 2:
            raise ValueError(
                f"max_cycles={mc!r} must be an integer >= 2 (episodes never truncate after step 1)"
            )
        object.__setattr__(self, "max_cycles", int(mc))
        rs = float(self.round_s)
        if not math.isfinite(rs) or rs <= 0:
            raise ValueError(f"round_s={self.round_s!r} must be a positive number of seconds")
        object.__setattr__(self, "round_s", rs)
        for name, allowed in (
            ("advance", ADVANCE_MODES),
            ("window_order", WINDOW_ORDERS),
            ("conflict_rule", CONFLICT_RULES),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}={getattr(self, name)!r} is not one of {list(allowed)}")
        if self.max_time_s is not None and not float(self.max_time_s) > 0:
            raise ValueError(f"max_time_s={self.max_time_s!r} must be > 0 or None")
        object.__setattr__(self, "levels", LevelSets.from_any(self.levels))
        object.__setattr__(self, "reward_weights", RewardWeights.from_any(self.reward_weights))


class ActionCodec:
    """Encode and decode flat action indices ``(slot, gpu level, cpu level, mem level)``.

    Args:
        window: Window size K.
        levels: Level sets.
        groups: Size of an extra placement axis after the slot (the central env's GPU-type
            choice); 1 for the per-node agents.
        group_axis: Keep the group axis even when ``groups == 1`` (default: only when
            ``groups > 1``).
    """

    def __init__(
        self, window: int, levels: LevelSets, groups: int = 1, group_axis: bool | None = None
    ) -> None:
        lg, lc, lm = levels.sizes
        axis = groups != 1 if group_axis is None else group_axis
        self.shape: tuple[int, ...] = (window, groups, lg, lc, lm) if axis else (window, lg, lc, lm)
        self.n = 1 + int(np.prod(self.shape))
        # Components of every placement action, one row per axis (for decode_legal).
        self._table = np.stack(np.unravel_index(np.arange(self.n - 1), self.shape)).astype(np.int64)

    def decode(self, actions: NDArray[np.integer] | Sequence[int]) -> tuple[NDArray[np.int64], ...]:
        """Components of placement actions (each >= 1), one array per axis of :attr:`shape`."""
        a = np.asarray(actions, dtype=np.int64) - 1
        return tuple(np.asarray(x, dtype=np.int64) for x in np.unravel_index(a, self.shape))

    def decode_legal(self, actions: NDArray[np.int64]) -> NDArray[np.int64]:
        """:meth:`decode` of actions known to lie in ``[1, n)``, as rows of one array (no checks).

        Returns:
            Shape (len(shape), B): one row per axis.
        """
        return self._table[:, actions - 1]

    def encode(self, *parts: NDArray[np.integer] | int) -> NDArray[np.int64]:
        """Flat indices (>= 1) of the given components."""
        idx = np.ravel_multi_index(tuple(np.asarray(p, dtype=np.int64) for p in parts), self.shape)
        return np.asarray(idx, dtype=np.int64) + 1
