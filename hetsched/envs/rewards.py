"""The reward terms: one table, from which the weights, the info keys and the reward follow.

The team reward of a step is the sum of the weighted terms of :data:`REWARD_TERMS`::

    r = sum over terms t of  weight_t * value_t(stats, Z)

with ``stats`` the step's :class:`~hetsched.envs.core.StepStats` and ``Z = 3600 * N_gpu / 8``
(maifs.md section 7). The built-in terms:

* ``jobs`` (weight 1): ``- J_s / Z``, ``J_s`` the jobs-in-system integral over the step in
  job-seconds; with weight 1 its episode sum is ``- total JCT / Z``.
* ``makespan`` (0.1): ``- makespan_s / 3600`` at the terminal step, else 0.
* ``conflict`` (0.01): ``- (#lost claims + #failed gang claims)``.
* ``invalid`` (0.01): ``- #invalid (masked-out or malformed) actions``.
* ``progress`` (0, off): ``P_s / Z``, the work done during the step, each job's in GPU-seconds at
  its best rate (the drop of the potential ``sum_j G_j * remaining_j / v_j``). Over an episode in
  which every job finishes it sums to a constant, so it leaves the undiscounted ranking of
  policies unchanged; with discounting it credits work done early.

Each term ``t`` is reported as the info key ``reward_<t>`` (weighted), in table order, at the
front of every info dict (:data:`REWARD_KEYS`). Adding a term is one entry in the table, plus a
counter in ``StepStats`` (``hetsched/envs/core.py``) if it needs a quantity the step does not
count yet; envs then take its weight as ``reward_weights={"<t>": w}`` (docs/extending.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hetsched.envs.core import StepStats


@dataclass(frozen=True)
class RewardTerm:
    """One named reward term.

    Attributes:
        name: The weight's name (``reward_weights={name: w}``); info key ``reward_<name>``.
        default: Default weight (0 = off).
        value: ``value(stats, z) -> float``: the unweighted term of one step (signed: a penalty
            is negative), from the step's counts and the normaliser ``Z`` (GPU-hours scale).
        doc: One line for users.
    """

    name: str
    default: float
    value: Callable[[StepStats, float], float]
    doc: str


#: The reward terms, in info-key order. Add a term here (docs/extending.md).
REWARD_TERMS: tuple[RewardTerm, ...] = (
    RewardTerm("jobs", 1.0, lambda s, z: -s.jobs_s / z, "jobs-in-system integral / Z"),
    RewardTerm(
        "makespan",
        0.1,
        lambda s, z: -s.makespan_s / 3600.0 if s.terminal else 0.0,
        "makespan in hours, at the terminal step",
    ),
    RewardTerm(
        "conflict",
        0.01,
        lambda s, z: -float(s.conflicts + s.gang_failed),
        "penalty per lost or unfilled claim",
    ),
    RewardTerm("invalid", 0.01, lambda s, z: -float(s.invalid), "penalty per invalid action"),
    RewardTerm(
        "progress", 0.0, lambda s, z: s.progress_gpu_s / z, "work done (GPU-s at best rate) / Z"
    ),
    # a new term: one more entry here (docs/extending.md, "Add a reward term")
)

#: Info keys of the weighted terms (``reward_<name>``), in table order; their sum is the reward.
REWARD_KEYS: tuple[str, ...] = tuple(f"reward_{t.name}" for t in REWARD_TERMS)

_TERMS: dict[str, RewardTerm] = {t.name: t for t in REWARD_TERMS}
if len(_TERMS) != len(REWARD_TERMS):
    raise RuntimeError("REWARD_TERMS repeats a name")


class RewardWeights:
    """The weight of every term of :data:`REWARD_TERMS` (immutable; unnamed terms keep their
    default). Read a weight as an attribute (``w.jobs``) or by name (``w["jobs"]``).

    Args:
        **weights: Weights by term name, e.g. ``RewardWeights(progress=0.5)``.

    Raises:
        ValueError: On an unknown term name, or a weight that is not a finite number.
    """

    _w: dict[str, float]  # term name -> weight, in table order

    def __init__(self, **weights: Any) -> None:
        unknown = set(weights) - set(_TERMS)
        if unknown:
            raise ValueError(
                f"unknown reward component(s) {sorted(unknown)}; components: {sorted(_TERMS)}"
            )
        out: dict[str, float] = {}
        for t in REWARD_TERMS:
            v = weights.get(t.name, t.default)
            try:
                fv = float(v)
            except (TypeError, ValueError):
                raise ValueError(f"reward weight {t.name}={v!r} must be a number") from None
            if not math.isfinite(fv):
                raise ValueError(f"reward weight {t.name}={v!r} must be finite")
            out[t.name] = fv
        object.__setattr__(self, "_w", out)

    def __getattr__(self, name: str) -> float:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return float(self.__dict__["_w"][name])
        except KeyError:
            raise AttributeError(f"no reward term {name!r}; terms: {sorted(_TERMS)}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("RewardWeights is immutable; build a new one")

    def __getitem__(self, name: str) -> float:
        return float(self._w[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._w)

    def as_dict(self) -> dict[str, float]:
        """``{term name: weight}`` in table order."""
        return dict(self._w)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RewardWeights) and self._w == other._w

    def __hash__(self) -> int:
        return hash(tuple(self._w.items()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._w.items())
        return f"RewardWeights({inner})"

    @classmethod
    def from_any(cls, value: RewardWeights | Mapping[str, float] | None) -> RewardWeights:
        """Accept a :class:`RewardWeights`, a partial mapping of weights, or ``None``."""
        if value is None:
            return cls()
        if isinstance(value, RewardWeights):
            return value
        if isinstance(value, Mapping):
            return cls(**{str(k): v for k, v in value.items()})
        raise ValueError(f"reward_weights={value!r} must be a RewardWeights, a mapping or None")


def reward_parts(stats: StepStats, weights: RewardWeights, z: float) -> dict[str, float]:
    """Weighted reward terms of one step, keyed by :data:`REWARD_KEYS` (their sum is the reward).

    Args:
        stats: The step's team-level counts.
        weights: The term weights.
        z: Normaliser ``3600 * N_gpu / 8`` (GPU-seconds).
    """
    w = weights.as_dict()
    return {
        key: w[t.name] * t.value(stats, z) for key, t in zip(REWARD_KEYS, REWARD_TERMS, strict=True)
    }
