"""Single-agent Gymnasium env: a centralised scheduler over the same simulator.

Registered as ``hetsched/ClusterCentral-v0`` (entry point ``hetsched.envs:ClusterCentralEnv``).
See :class:`ClusterCentralEnv`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, SupportsFloat

import gymnasium
import numpy as np
from numpy.typing import NDArray

from hetsched.envs.cluster_env import (
    DEFAULT_WORKLOAD_KWARGS,
    INFO_KEYS,
    REWARD_KEYS,
    reward_parts,
)
from hetsched.envs.core import EnvCore, StepStats
from hetsched.envs.features import NUM_TYPES
from hetsched.envs.presets import (
    WorkloadFactory,
    as_failure_spec,
    env_workload,
    resolve_cluster,
    resolve_throughput,
)
from hetsched.envs.render import render_core
from hetsched.envs.spaces import ActionCodec, EnvSettings, LevelSets, RewardWeights
from hetsched.sim.allocation import Allocation
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimResult
from hetsched.sim.faults import FailureSpec
from hetsched.sim.metrics import compute_metrics
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload


class ClusterCentralEnv(gymnasium.Env[NDArray[np.float32], np.int64]):
    """One central agent places one job per step (same core and rules as the multi-agent env).

    **Observation:** ``Box(0, 1, (S + K T,), float32)``: the multi-agent env's ``state()``
    (every node block, the window's node-independent features plus per-type relative
    throughput and type allowed, the global block; ``S`` = its length) followed by, per window
    slot and catalogue GPU type, whether the job can be placed on that type now (``K x T``).

    **Action:** ``Discrete(1 + K P L_g L_c L_m)`` with ``P`` = GPU types present in the cluster
    (in catalogue order, :attr:`placement_types`). Index 0 is the no-op (ends the round);
    ``a >= 1`` decodes (row-major) to ``(slot k, type p, GPU level, CPU level, memory level)``:
    place window slot ``k`` on a node of type ``placement_types[p]`` chosen by best fit (the
    node with the fewest free GPUs that hosts it alone, then the lowest index), or, if no node
    hosts it alone, as a gang over that type's nodes (largest capacity first). A masked or
    malformed action is a no-op counted in ``info["invalid_action"]``.

    **Masks:** :meth:`action_masks` (bool, for sb3-contrib ``MaskablePPO``) and
    ``info["action_mask"]`` (int8).

    **Rounds:** one placement per step; the round's time advances after a no-op, when nothing
    more fits, or after ``max_decisions_per_round`` placements (as in the multi-agent env).
    **Reward:** the same named components (:class:`~hetsched.envs.spaces.RewardWeights`),
    each in ``info``. **Episode end:** terminated when every job has finished; truncated after
    ``max_cycles`` steps (>= 2), at ``max_time_s`` or when stalled (waiting jobs can never be
    placed, or ``stall_steps`` steps without progress; ``info["unfinished_jobs"]`` counts the
    jobs not finished). :meth:`step`, :meth:`step_allocation` and :meth:`action_masks` before
    the first :meth:`reset` raise :class:`~hetsched.envs.core.EnvNotResetError`.

    **Version history.** ``hetsched/ClusterCentral-v0`` (hetsched 0.1.0): first release; the same
    later changes as ``hetsched/Cluster-v0`` (speed-ups; stall detection with
    ``skip_idle=False``; the ``stall_steps`` detector and its info keys; the optional progress
    shaping term and the ``"sjf"`` and ``"typed"`` window orders and ``window_backfill``, all
    off by default), none of which changes spaces, dynamics or default rewards.

    Args: as :class:`hetsched.envs.cluster_env.ClusterParallelEnv` (``conflict_rule`` is
    accepted for a uniform signature and unused: one placement per step cannot conflict;
    ``preemptive`` must stay false: this env has no eviction actions).
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "rgb_array", "human"], "render_fps": 4}

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
        stall_steps: int | None = EnvSettings.stall_steps,
    ) -> None:
        if preemptive:
            raise ValueError(
                "the central env has no eviction actions (preemptive=True); use the "
                "multi-agent hetsched/ClusterPreempt-v0, or a fixed policy's allocation"
            )
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
            stall_steps=stall_steps,
        )
        tm = resolve_throughput(throughput)
        cl = resolve_cluster(cluster)
        if workload_kwargs is None and workload == "philly":
            workload_kwargs = DEFAULT_WORKLOAD_KWARGS
        wl = env_workload(workload, workload_kwargs)
        self.core = EnvCore(cl, wl, tm, self.settings, failures=as_failure_spec(failures))
        self.z = 3600.0 * cl.num_gpus / 8.0
        self.placement_types = cl.types_present.astype(np.int64)
        P = int(self.placement_types.size)
        self.codec = ActionCodec(
            self.settings.window, self.settings.levels, groups=P, group_axis=True
        )
        lay = self.core.layout
        self.obs_dim = lay.state_dim + self.settings.window * NUM_TYPES
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (self.obs_dim,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(self.codec.n)
        self._seed = seed
        self._steps = 0
        assert np.array_equal(self.placement_types, self.core.features.present_types)
        self._mask = np.ones(self.codec.n, dtype=np.int8)

    # ------------------------------------------------------------------ API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Start an episode; all randomness flows from ``self.np_random``."""
        if seed is None and self._seed is not None:
            seed, self._seed = self._seed, None
        super().reset(seed=seed)
        self.core.reset(self.np_random)
        self._steps = 0
        obs = self._observe()
        return obs, self._info(StepStats(), dict.fromkeys(REWARD_KEYS, 0.0), 0, 0)

    def step(
        self, action: Any
    ) -> tuple[NDArray[np.float32], SupportsFloat, bool, bool, dict[str, Any]]:
        """Place one job (or pass); see the class docstring.

        Raises:
            EnvNotResetError: Before the first :meth:`reset`.
        """
        core = self.core
        core.require_episode("ClusterCentralEnv.step()")
        stats = StepStats()
        core.take_pending_stats(stats)
        try:
            arr = np.asarray(action).reshape(-1)
            a = int(arr[0]) if arr.size == 1 and float(arr[0]) == int(arr[0]) else -1
        except (TypeError, ValueError, OverflowError):
            a = -1
        legal = 0 <= a < self.codec.n and self._mask[a] == 1
        placed = False
        if not legal:
            stats.invalid = 1
        elif a > 0:
            k, p, lg, lc, lm = (int(x[0]) for x in self.codec.decode([a]))
            placed = core.place_on_type(k, int(self.placement_types[p]), lg, lc, lm)
            if not placed:
                stats.gang_failed = 1
        stats.placed = int(placed)
        core.end_decision(placed, stats)
        return self._finish(stats, invalid=int(not legal), placed=int(placed))

    def step_allocation(
        self, alloc: Allocation
    ) -> tuple[NDArray[np.float32], SupportsFloat, bool, bool, dict[str, Any]]:
        """The allocation action (see :meth:`ClusterParallelEnv.step_allocation`)."""
        self.core.require_episode("ClusterCentralEnv.step_allocation()")
        stats = StepStats()
        self.core.take_pending_stats(stats)
        self.core.apply_allocation(alloc, stats)
        return self._finish(stats, invalid=0, placed=0)

    def _finish(
        self, stats: StepStats, *, invalid: int, placed: int
    ) -> tuple[NDArray[np.float32], SupportsFloat, bool, bool, dict[str, Any]]:
        self._steps += 1
        core = self.core
        parts = reward_parts(stats, self.settings.reward_weights, self.z)
        term = core.all_finished
        trunc = not term and (self._steps >= self.settings.max_cycles or core.done or core.stalled)
        obs = self._observe()
        return (
            obs,
            float(sum(parts.values())),
            term,
            trunc,
            self._info(stats, parts, invalid, placed),
        )

    def _observe(self) -> NDArray[np.float32]:
        core = self.core
        ma = core.ma
        N = core.N
        # Legal central actions: any node of the type has a legal claim at those levels.
        legal = ma.mask[:, 1:].reshape((N,) + core.codec.shape)  # (N, K, Lg, Lc, Lm)
        # (P, K, Lg, Lc, Lm), P = present types in ascending order = placement_types
        sel = core.features.per_type_any(legal.astype(bool))
        mask = np.ones(self.codec.n, dtype=np.int8)
        mask[1:] = np.moveaxis(sel, 0, 1).reshape(-1)
        self._mask = mask
        fits = np.zeros((core.K, NUM_TYPES), dtype=np.float32)  # (K, T)
        fits[:, self.placement_types] = sel.reshape(sel.shape[0], core.K, -1).any(axis=2).T
        return np.concatenate([core.state(), fits.reshape(-1)])

    def _info(
        self, stats: StepStats, parts: Mapping[str, float], invalid: int, placed: int
    ) -> dict[str, Any]:
        core = self.core
        assert core.sim is not None
        info: dict[str, Any] = {
            **parts,
            "jobs_in_system_s": float(stats.jobs_s),
            "rounds_advanced": float(stats.rounds),
            "placed_jobs": float(stats.placed),
            "conflicts": float(stats.conflicts),
            "gang_failed": float(stats.gang_failed),
            "invalid_actions": float(stats.invalid),
            "evicted_jobs": 0.0,  # the central env has no eviction actions
            "resized_jobs": 0.0,  # ... and no resize actions
            "invalid_action": float(invalid),
            "conflict": 0.0,
            "placed": float(placed),
            "num_legal_actions": float(self._mask.sum()),
            "sim_time_s": float(core.sim.time),
            "decision_step": float(core.decision_step),
            "stalled": float(core.stalled),
            "unfinished_jobs": float(core.unfinished_jobs),
            "no_progress_steps": float(core.no_progress_steps),
            "action_mask": self._mask.copy(),
        }
        return {k: info[k] for k in INFO_KEYS}

    def action_masks(self) -> NDArray[np.bool_]:
        """Legal actions now (bool, shape (A,), a copy), for sb3-contrib ``MaskablePPO``."""
        self.core.require_episode("ClusterCentralEnv.action_masks()")
        return self._mask.astype(bool)

    def render(self) -> str | NDArray[np.uint8] | None:  # type: ignore[override,unused-ignore]
        """``ansi`` text or an ``rgb_array`` image of the nodes (see the multi-agent env)."""
        if self.render_mode is None:
            return None
        if self.render_mode == "human":
            print(render_core(self.core, "ansi"))
            return None
        return render_core(self.core, self.render_mode)

    def sim_result(self) -> SimResult:
        """The simulator's per-job records so far."""
        assert self.core.sim is not None
        return self.core.sim.result()

    def episode_metrics(self) -> dict[str, Any]:
        """Headline metrics of the episode so far."""
        assert self.core.wl is not None
        return compute_metrics(
            self.sim_result(),
            scheduler="central_env",
            workload=self.core.wl.name,
            cluster=self.core.cluster.name,
            seed=0,
        )
