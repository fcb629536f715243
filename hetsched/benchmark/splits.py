"""The benchmark's splits: train / validation / test by trace family and by cluster.

:data:`SPLITS` is the one table of record (``docs/benchmark.md`` prints it). A scenario belongs to
``test`` when its trace family or its cluster is a test one, else to ``validation`` when its
family or its cluster is a validation one, else to ``train``. Test families and clusters are held out whole:
no checkpoint, rule, threshold or hyperparameter may be trained or chosen on them, and
:func:`check_trainable` refuses them. Validation families are for choosing among candidates.

Besides the three splits, :data:`SELECTIONS` names lists of scenarios to run together (``quick``:
the main job's small representative set: four families, three loads, two clusters, rigid and
elastic jobs, shipped data only, so it runs on a fresh clone; no test scenario, so running it
looks at nothing held out).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hetsched.sim.errors import ConfigError


@dataclass(frozen=True)
class Split:
    """Families and clusters held by one split.

    Attributes:
        families: Trace families (see :data:`hetsched.benchmark.scenarios.FAMILIES`).
        clusters: Clusters held out whole (every scenario on them is in this split).
        purpose: What the split is for.
    """

    families: tuple[str, ...]
    clusters: tuple[str, ...]
    purpose: str


#: The splits (the one table of record).
SPLITS: dict[str, Split] = {
    "train": Split(
        families=("philly", "alibaba", "sia_philly", "helios", "itp_c01", "itp_c02", "itp_c05"),
        clusters=(),
        purpose="training agents, fitting rules and thresholds",
    ),
    "validation": Split(
        families=("pollux", "newtrace", "itp_c06"),
        clusters=("rtx_64",),
        purpose="choosing checkpoints, rules and hyperparameters",
    ),
    "test": Split(
        families=("itp_c03", "itp_c08", "itp_c10", "gavel"),
        clusters=("gavel_108",),
        purpose="reporting only: never trained or chosen on",
    ),
}

#: Named lists of scenarios that are not splits (run with ``split=<name>``).
SELECTIONS: dict[str, tuple[str, ...]] = {
    "quick": (
        "philly_sia64_busy",
        "pollux_sia64_light_elastic",
        "itp_c06_sia64_overloaded",
        "itp_c05_pai_busy",
    ),
}


def split_of(family: str, cluster: str) -> str:
    """The split of a (family, cluster) pair (see the module docstring).

    Raises:
        ValueError: If the family is in no split.
    """
    test, val = SPLITS["test"], SPLITS["validation"]
    if family in test.families or cluster in test.clusters:
        return "test"
    if family in val.families or cluster in val.clusters:
        return "validation"
    if family in SPLITS["train"].families:
        return "train"
    known = sorted(f for s in SPLITS.values() for f in s.families)
    raise ConfigError(f"trace family {family!r} is in no split; known families: {known}")


def split_names() -> list[str]:
    """Every name ``split=`` accepts: the splits, the selections and ``all``."""
    return [*SPLITS, *SELECTIONS, "all"]


def as_rows() -> list[dict[str, Any]]:
    """The table as rows (split, families, clusters held out, purpose), for the docs."""
    return [
        {
            "split": name,
            "families": ", ".join(s.families),
            "clusters held out": ", ".join(s.clusters) or "-",
            "purpose": s.purpose,
        }
        for name, s in SPLITS.items()
    ]
