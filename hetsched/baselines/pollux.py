"""A Pollux-like baseline: goodput-adaptive and elastic, but blind to GPU heterogeneity.

Pollux (Qiao et al., OSDI'21) co-adapts each job's GPU count and batch size to maximise a
p-mean of per-job goodput speed-ups. Sia's artifact runs it on heterogeneous clusters as a
*heterogeneity-unaware* baseline with ``p = -1`` (sia.md §8). This module reproduces that role with
Sia's machinery (:class:`hetsched.baselines.sia.Sia`) and two changes:

* **Type-agnostic goodput.** The estimator keeps one row per job instead of one per GPU type
  (:class:`~hetsched.baselines.goodput.GoodputEstimator` with ``type_aware=False``): the profile is
  the mean over the present types of the profiled 1-GPU rate, observations from whatever type the
  job ran on update the same (job, GPU count) entry, and there is no cross-type projection. The
  estimated goodput of a count is therefore the same on every type, so the MILP's choice of type
  is only a matter of which type has GPUs free: the job lands on *any* free GPUs of one type.
* **Fairness power** ``p = -1`` (the artifact's setting for Pollux).

Everything else -- configurations, doubling cap, row normalisation, restart factor, lambda_n, the
allocation-change penalty lambda_a, the MILP, placement, and the handling of node failures
(capacities and placement over up nodes only, failed jobs re-placed, their partial-round samples
not observed) -- is Sia's.

How it differs from real Pollux:

* no genetic algorithm (Pollux's NSGA-II search over per-node replica assignments); the
  allocation is Sia's MILP over Sia's configuration set, solved exactly;
* no batch-size co-adaptation: the throughput table already stores goodput at the best batch
  size per (type, count), so every job runs "tuned" (the same simplification Sia's runs get);
* no Pollux throughput-model fit (the 7-parameter ``PerfParams``): scaling is learnt with the
  same log-log estimator Sia uses here, pooled over GPU types;
* Pollux's objective normalises goodput by the job's fair-share goodput; here rows are
  normalised by the job's minimum configuration, as in Sia;
* no cluster auto-scaling and no interference avoidance.
"""

from __future__ import annotations

from dataclasses import dataclass

from hetsched.baselines.goodput import (
    DEFAULT_RESTART_PENALTY_S,
    PROFILE_GPU_S_PER_TYPE,
)
from hetsched.baselines.sia import Sia, SiaConf


@dataclass
class PolluxConf(SiaConf):
    """:class:`hetsched.baselines.pollux.PolluxLike` (Sia's settings with ``p = -1``)."""

    _target_: str = "hetsched.baselines.pollux.PolluxLike"
    p: float = -1.0


class PolluxLike(Sia):
    """Heterogeneity-unaware goodput scheduler (Sia's machinery, type-agnostic estimator).

    Takes the same arguments as :class:`~hetsched.baselines.sia.Sia` except ``type_aware``,
    which is always False; ``p`` defaults to -1.
    """

    name = "pollux"

    def __init__(
        self,
        p: float = -1.0,
        lambda_n: float = 1.1,
        round_s: float = 60.0,
        clip: float = 3000.0,
        invalid_gain: float = 1e-4,
        mip_rel_gap: float = 1e-4,
        time_limit_s: float = 60.0,
        max_gpus_per_job: int = 64,
        max_nodes_per_type: dict[str, int] | None = None,
        restart_penalty_s: dict[str, float] | None = None,
        default_restart_penalty_s: float = DEFAULT_RESTART_PENALTY_S,
        obs_weight: float = 0.5,
        profile_gpu_s_per_type: float = PROFILE_GPU_S_PER_TYPE,
        on_solver_failure: str = "greedy",
        lambda_a: float = 0.01,
    ) -> None:
        super().__init__(
            p=p,
            lambda_n=lambda_n,
            round_s=round_s,
            clip=clip,
            invalid_gain=invalid_gain,
            mip_rel_gap=mip_rel_gap,
            time_limit_s=time_limit_s,
            max_gpus_per_job=max_gpus_per_job,
            max_nodes_per_type=max_nodes_per_type,
            restart_penalty_s=restart_penalty_s,
            default_restart_penalty_s=default_restart_penalty_s,
            obs_weight=obs_weight,
            profile_gpu_s_per_type=profile_gpu_s_per_type,
            on_solver_failure=on_solver_failure,
            type_aware=False,
            lambda_a=lambda_a,
        )
