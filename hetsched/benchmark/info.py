"""Declared information: what a scheduler may know of each job's remaining work.

Three tracks (``runtime_info``):

* ``exact``: the true remaining work (clairvoyant; what the simulator holds);
* ``noisy``: each job's total work is known up to a multiplicative log-normal error
  ``exp(sigma * z)``, ``z ~ N(0, 1)`` drawn once per job from a seeded generator (median-unbiased);
  the remaining work seen is that estimate minus the work done so far (progress is observable),
  floored at :data:`FLOOR` of the estimate while the job runs;
* ``none``: the remaining work is not observable; a scheduler that needs a number sees an
  estimate from observable quantities only: a job is expected to run as long again as it has
  run so far, and at least :data:`PRIOR_S` seconds at its fastest isolated rate.

:class:`RuntimeInfo` computes the estimates; :class:`InfoPolicy` hands any scheduler a view of
the simulator state (and workload) in which ``remaining`` and ``work`` are the estimates, so every
scheduler that uses durations (Hadar, Gavel's FTF and makespan policies, MAIFS and its teacher,
SRPT) honours the track without code of its own. The envs honour it through
:meth:`hetsched.envs.features.FeatureBuilder.observed_remaining`.

This module depends on :mod:`hetsched.sim` only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import ConfigError
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

#: The information tracks.
TRACKS: tuple[str, ...] = ("exact", "noisy", "none")
#: Default sigma of the ``noisy`` track's log-normal error.
DEFAULT_SIGMA = 0.5
#: Least remaining work seen while a job runs, as a fraction of its estimated total work.
FLOOR = 0.01
#: The ``none`` track's least expected run time of a job (s at its fastest isolated rate).
PRIOR_S = 3600.0
#: Spawn key of the noise stream under a seed's root ``SeedSequence`` (distinct from the
#: workload's and the schedulers' children, which :func:`hetsched.evaluation.evaluate` numbers
#: from 0).
NOISE_KEY = 1 << 20

FloatArray = NDArray[np.float64]


def best_rate(wl: Workload, throughput: ThroughputModel, cluster: Cluster) -> FloatArray:
    """Each job's isolated rate at its request on its fastest allowed present type, (J,)."""
    types = np.arange(len(GPU_TYPE_NAMES))
    rate = throughput.isolated(wl.model[:, None], types[None, :], wl.req_gpus[:, None])
    ok = wl.allowed_types & (cluster.gpus_per_type() > 0)[None, :]
    return np.asarray(np.where(ok, rate, 0.0).max(axis=1), dtype=np.float64)


def noise_rng(seed: int) -> np.random.Generator:
    """The generator of a seed's estimation errors (the same for every scheduler)."""
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(NOISE_KEY,)))


@dataclass(frozen=True)
class RuntimeInfo:
    """An information track and its parameters.

    Args:
        mode: ``exact``, ``noisy`` or ``none``.
        sigma: Standard deviation of the log error of the ``noisy`` track (>= 0).

    Raises:
        ValueError: For an unknown mode or a sigma that is negative or not finite.
    """

    mode: str = "exact"
    sigma: float = DEFAULT_SIGMA

    def __post_init__(self) -> None:
        if self.mode not in TRACKS:
            raise ConfigError(f"runtime_info={self.mode!r} is not one of {list(TRACKS)}")
        s = float(self.sigma)
        if not (math.isfinite(s) and s >= 0):
            raise ConfigError(
                f"runtime_sigma={self.sigma!r} must be a finite number >= 0 (the log-normal "
                "error's sigma; e.g. runtime_sigma=0.5)"
            )
        object.__setattr__(self, "sigma", s)

    @property
    def track(self) -> str:
        """The track's label in results: ``exact``, ``noisy(0.5)`` or ``none``."""
        return f"noisy({self.sigma:g})" if self.mode == "noisy" else self.mode

    def factors(self, num_jobs: int, rng: np.random.Generator) -> FloatArray:
        """Multiplicative errors of the jobs' total work, shape (J,) (ones unless ``noisy``)."""
        if self.mode != "noisy":
            return np.ones(num_jobs)
        return np.exp(self.sigma * rng.standard_normal(num_jobs))

    def estimate(
        self,
        remaining: FloatArray,
        work: FloatArray,
        factors: FloatArray,
        prior_work: FloatArray,
    ) -> tuple[FloatArray, FloatArray]:
        """The remaining and total work a scheduler sees, each shape (J,).

        Args:
            remaining: True remaining work, (J,) (0 for a finished job).
            work: True total work, (J,).
            factors: Errors from :meth:`factors`, (J,).
            prior_work: Work of :data:`PRIOR_S` seconds at each job's fastest rate, (J,).
        """
        if self.mode == "exact":
            return remaining, work
        done = np.maximum(work - remaining, 0.0)
        if self.mode == "noisy":
            total = work * factors
            rem = np.maximum(total - done, FLOOR * total)
        else:
            rem = np.maximum(done, prior_work)
        rem = np.where(remaining > 0, rem, 0.0)
        return rem, done + rem


class InfoPolicy:
    """A scheduler seeing the remaining work of an information track instead of the truth.

    Every attribute the engine or the runner reads (``round_s``, ``event_driven``,
    ``wake_time``, ``run_stats``, ...) is the wrapped policy's.

    Args:
        policy: Any scheduler (``reset`` / ``decide``).
        info: The track.
        seed: The evaluation seed; the errors come from :func:`noise_rng` of it.
    """

    def __init__(self, policy: Any, info: RuntimeInfo, seed: int) -> None:
        self.policy = policy
        self.info = info
        self.seed = int(seed)
        self._wl: Workload | None = None
        self._view: Workload | None = None
        self._factors = np.ones(0)
        self._prior = np.ones(0)

    def __getattr__(self, name: str) -> Any:
        if name == "policy":  # not set yet (e.g. during unpickling)
            raise AttributeError(name)
        return getattr(self.policy, name)

    def _prepare(self, wl: Workload, throughput: ThroughputModel, cluster: Cluster) -> None:
        self._wl = wl
        self._factors = self.info.factors(wl.num_jobs, noise_rng(self.seed))
        self._prior = PRIOR_S * best_rate(wl, throughput, cluster)
        _, work = self.info.estimate(wl.work, wl.work, self._factors, self._prior)
        self._view = replace(wl, work=work)

    def reset(
        self, cluster: Cluster, workload: Workload, throughput: ThroughputModel, rng: Any
    ) -> None:
        """Reset the wrapped policy with the workload whose ``work`` is the estimate."""
        self._prepare(workload, throughput, cluster)
        if hasattr(self.policy, "reset"):
            self.policy.reset(cluster, self._view, throughput, rng)

    def decide(self, state: Any) -> Any:
        """The wrapped policy's decision on the state with estimated remaining work."""
        if self._wl is not state.workload:
            self._prepare(state.workload, state.throughput, state.cluster)
        work = state.workload.work
        rem, _ = self.info.estimate(state.remaining, work, self._factors, self._prior)
        return self.policy.decide(replace(state, remaining=rem, workload=self._view))


def with_info(policy: Any, info: RuntimeInfo | None, seed: int) -> Any:
    """``policy`` itself for the exact track (or ``None``), else an :class:`InfoPolicy`."""
    if info is None or info.mode == "exact":
        return policy
    return InfoPolicy(policy, info, seed)


#: What each scheduler observes: remaining work, attained service, throughput. ``table``: the
#: simulator's isolated-throughput table (measured offline; ground truth); ``estimated``: the
#: scheduler's own estimator from profiles and observed progress.
INFO_TABLE: dict[str, tuple[str, str, str]] = {
    "fifo": ("no", "no", "none (heterogeneity-agnostic)"),
    "yarn_cs": ("no", "no", "none (heterogeneity-agnostic)"),
    "las": ("no", "yes (GPU-time)", "none (heterogeneity-agnostic)"),
    "gavel": ("no", "yes (isolated time)", "table"),
    "gavel_agnostic": ("no", "yes (isolated time)", "table, fastest type only"),
    "gavel_ss": ("no", "yes (isolated time)", "table, pairs"),
    "gavel_ftf": ("yes", "yes (isolated time)", "table"),
    "gavel_makespan": ("yes", "no", "table"),
    "hadar": ("yes (plans cover it)", "no", "table"),
    "sia": ("no", "yes (restart age)", "estimated (goodput model from 1-GPU profiles)"),
    "pollux": ("no", "no", "estimated (goodput model)"),
    "srpt": ("yes (ranks by it)", "no", "table"),
    "maifs": ("yes (features)", "yes (features)", "table"),
    "maifs_teacher": ("yes (ranks by it)", "yes (features)", "table"),
}


def uses_remaining(scheduler: str) -> bool:
    """Whether a scheduler reads remaining work (so its results depend on the track).

    ``maifs[...]`` checkpoints count as ``maifs``; an unknown scheduler counts as reading it
    (every track is run).
    """
    base = scheduler.split("[", 1)[0]
    entry = INFO_TABLE.get(base)
    return entry is None or entry[0].startswith("yes")
