"""Named benchmark scenarios: (trace family, window sampler, cluster, load) presets.

A scenario draws, for each seed, a window of :data:`NUM_JOBS` consecutive jobs of its trace
family (:func:`hetsched.benchmark.windows.seeded_windows`: a random start, and for Sia's and
Pollux's files a random file of the family), with models assigned from the seed, and rescales
its arrival times to the scenario's offered load (:data:`LOADS`;
:func:`hetsched.benchmark.windows.offered_load`). The same seed gives the same workload to every
scheduler. Each scenario says what it stresses (:attr:`Scenario.stresses`).

Names read ``<family>_<cluster>_<load>[_elastic|_multi]``, e.g. ``itp_c03_sia64_busy``;
:func:`get_scenario` resolves one, :func:`scenarios_in` lists a split's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hetsched.benchmark.splits import SELECTIONS, SPLITS, split_names, split_of
from hetsched.sim.errors import ConfigError

#: Offered load of each load level (needed GPU-time on the fastest types / cluster GPU-time).
LOADS: dict[str, float] = {"light": 0.5, "busy": 0.9, "overloaded": 1.5}
#: Jobs per window.
NUM_JOBS = 80
#: Short cluster tags used in scenario names.
CLUSTER_TAGS: dict[str, str] = {
    "sia_64": "sia64",
    "pai_mixed": "pai",
    "rtx_64": "rtx64",
    "gavel_108": "gavel108",
}


@dataclass(frozen=True)
class Family:
    """A trace family: a workload preset with fixed overrides.

    Attributes:
        workload: The ``conf/workload`` preset.
        overrides: Its fixed field overrides.
        source: What the trace is, for the docs.
        stresses: What the family stresses.
    """

    workload: str
    overrides: Mapping[str, Any]
    source: str
    stresses: str


def _itp(n: str, what: str) -> Family:
    return Family(
        "itp",
        {"itp_cluster": f"cluster{n}"},
        f"Microsoft ITP cluster {n} (shipped)",
        f"rigid gang jobs of ITP cluster {n}: {what}",
    )


#: The trace families.
FAMILIES: dict[str, Family] = {
    "philly": Family(
        "philly",
        {},
        "Microsoft Philly 2017, Pollux's subset (shipped)",
        "heavy-tailed durations, 1-16 GPU gangs, models assigned per job",
    ),
    "alibaba": Family(
        "alibaba",
        {},
        "Alibaba PAI v2023 openb pods (shared data, research use)",
        "GPU-type constraints, CPU and memory requests of production pods",
    ),
    "sia_philly": Family(
        "sia_philly",
        {},
        "Sia's Philly-sampled files 1-8 (shared data)",
        "elastic Sia apps, 4-16 GPU requests",
    ),
    "helios": Family(
        "sia_helios",
        {},
        "Sia's Helios/Saturn files 1-10 (shared data)",
        "elastic Sia apps of the Helios distribution, many small jobs",
    ),
    "newtrace": Family(
        "sia_newtrace",
        {},
        "Sia's newtrace files 1-10 (shared data)",
        "elastic Sia apps of Sia's 48-h trace",
    ),
    "pollux": Family(
        "pollux_philly",
        {},
        "Pollux OSDI'21 files 1-8 (shipped)",
        "elastic jobs with large requests (up to 48 GPUs, capped to a type's pool)",
    ),
    "itp_c01": _itp("01", "large gangs (up to 64 GPUs, skipped beyond a type's pool)"),
    "itp_c02": _itp("02", "the largest ITP trace, long jobs"),
    "itp_c05": _itp("05", "mostly small jobs"),
    "itp_c06": _itp("06", "large gangs, long jobs"),
    "itp_c03": _itp("03", "large gangs, long jobs"),
    "itp_c08": _itp("08", "bursts of short jobs, gangs up to 32 GPUs"),
    "itp_c10": _itp("10", "a small cluster's 1-16 GPU jobs over a month"),
    "gavel": Family(
        "gavel_synthetic",
        {},
        "Gavel's synthetic generator (Poisson, 26 job types)",
        "Gavel's job mix on K80/P100/V100, where speedups across types differ most",
    ),
}

_LOAD_TEXT = {
    "light": "queues are short: placement quality and speed-aware type choice dominate",
    "busy": "queues form: ordering and packing decide JCT",
    "overloaded": "the queue grows through the window: starvation, makespan and preemption",
}
_CLUSTER_TEXT = {
    "sia_64": "sia_64 (T4, RTX 2080 Ti, A100; 64 GPUs)",
    "pai_mixed": "pai_mixed (Alibaba's mixed nodes)",
    "rtx_64": "rtx_64 (RTX 6000, V100, T4; 64 GPUs; a validation cluster with a GPU type no "
    "training cluster has)",
    "gavel_108": "gavel_108 (K80, P100, V100; 108 GPUs, held out)",
}


@dataclass(frozen=True)
class Scenario:
    """One benchmark scenario.

    Attributes:
        name: Its name.
        family: Trace family (a key of :data:`FAMILIES`).
        cluster: Cluster preset.
        load: Load level (a key of :data:`LOADS`).
        elastic: Jobs may scale between 1 and their maximum GPUs.
        overrides: Extra workload preset overrides (e.g. Gavel's ``multi_gpu``).
        num_jobs: Jobs per window.
    """

    name: str
    family: str
    cluster: str
    load: str
    elastic: bool = False
    overrides: Mapping[str, Any] = field(default_factory=dict)
    num_jobs: int = NUM_JOBS

    @property
    def split(self) -> str:
        """``train``, ``validation`` or ``test``."""
        return split_of(self.family, self.cluster)

    @property
    def offered_load(self) -> float:
        """The offered load the windows are rescaled to."""
        return LOADS[self.load]

    @property
    def stresses(self) -> str:
        """What the scenario stresses, in one sentence."""
        fam = FAMILIES[self.family]
        kind = "elastic jobs" if self.elastic else "rigid jobs"
        extra = ", multi-GPU job mix" if self.overrides.get("multi_gpu") else ""
        return (
            f"{fam.stresses}; {kind}{extra} on {_CLUSTER_TEXT[self.cluster]} at offered load "
            f"{self.offered_load:g} ({self.load}): {_LOAD_TEXT[self.load]}"
        )

    def workload_kwargs(self) -> dict[str, Any]:
        """The workload preset's overrides (family's, elastic, scenario's)."""
        fam = FAMILIES[self.family]
        kw: dict[str, Any] = dict(fam.overrides)
        if fam.workload in ("philly", "itp", "alibaba"):
            kw["elastic"] = self.elastic
        elif fam.workload == "gavel_synthetic":
            kw["num_jobs"] = self.num_jobs
        else:
            kw["elastic"] = self.elastic
            if fam.workload == "pollux_philly":
                kw["max_gpus_policy"] = "cap"
        kw.update(self.overrides)
        return kw

    def factory(self) -> Any:
        """The workload factory ``f(throughput=, cluster=, rng=)`` of this scenario."""
        from hetsched.benchmark.windows import seeded_windows
        from hetsched.envs.presets import resolve_workload

        base = resolve_workload(FAMILIES[self.family].workload, self.workload_kwargs())
        return seeded_windows(base, num_jobs=self.num_jobs, load=self.offered_load, name=self.name)


def _make(
    family: str, cluster: str, load: str, *, elastic: bool = False, multi: bool = False
) -> Scenario:
    tag = CLUSTER_TAGS[cluster]
    suffix = "_elastic" if elastic else "_multi" if multi else ""
    return Scenario(
        name=f"{family}_{tag}_{load}{suffix}",
        family=family,
        cluster=cluster,
        load=load,
        elastic=elastic,
        overrides={"multi_gpu": True} if multi else {},
    )


_ALL = ("light", "busy", "overloaded")
_SPECS: list[tuple[str, str, tuple[str, ...], bool, bool]] = [
    # (family, cluster, loads, elastic, multi)
    ("philly", "sia_64", _ALL, False, False),
    ("philly", "pai_mixed", ("busy",), False, False),
    ("philly", "sia_64", ("busy",), True, False),
    ("alibaba", "pai_mixed", _ALL, False, False),
    ("helios", "sia_64", _ALL, True, False),
    ("helios", "pai_mixed", ("busy",), True, False),
    ("sia_philly", "sia_64", ("busy",), True, False),
    ("itp_c01", "sia_64", ("busy",), False, False),
    ("itp_c02", "sia_64", ("overloaded",), False, False),
    ("itp_c05", "sia_64", ("light",), False, False),
    ("itp_c05", "pai_mixed", ("busy",), False, False),
    ("pollux", "sia_64", _ALL, True, False),
    ("newtrace", "sia_64", ("busy",), True, False),
    ("itp_c06", "sia_64", _ALL, False, False),
    ("itp_c06", "pai_mixed", ("busy",), False, False),
    ("philly", "rtx_64", ("busy",), False, False),
    ("itp_c06", "rtx_64", ("busy",), False, False),
    ("pollux", "rtx_64", ("busy",), True, False),
    ("itp_c03", "sia_64", _ALL, False, False),
    ("itp_c03", "pai_mixed", ("busy",), False, False),
    ("itp_c03", "sia_64", ("busy",), True, False),
    ("itp_c08", "pai_mixed", _ALL, False, False),
    ("itp_c10", "sia_64", _ALL, False, False),
    ("itp_c10", "sia_64", ("busy",), True, False),
    ("itp_c10", "gavel_108", ("busy",), False, False),
    ("gavel", "gavel_108", _ALL, False, False),
    ("gavel", "gavel_108", ("busy",), False, True),
]

#: Every scenario by name.
SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (_make(f, c, ld, elastic=e, multi=m) for f, c, loads, e, m in _SPECS for ld in loads)
}


def get_scenario(name: str) -> Scenario:
    """The scenario ``name``.

    Raises:
        ValueError: If there is none (the message lists them).
    """
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ConfigError(
            f"unknown scenario {name!r}; known: {sorted(SCENARIOS)} (docs/benchmark.md)"
        ) from None


def scenarios_in(split: str) -> list[Scenario]:
    """The scenarios of a split (``train``, ``validation``, ``test``), a selection
    (``quick``) or ``all``, in catalogue order.

    Raises:
        ValueError: If ``split`` is none of these.
    """
    if split == "all":
        return list(SCENARIOS.values())
    if split in SELECTIONS:
        return [get_scenario(n) for n in SELECTIONS[split]]
    if split in SPLITS:
        return [s for s in SCENARIOS.values() if s.split == split]
    raise ConfigError(f"unknown split {split!r}; known: {split_names()}")


def scenario_names(split: str | None = None, scenario: str | None = None) -> list[str]:
    """Every scenario of ``split``, else ``[scenario]``; an unknown name fails before any run.

    Raises:
        ConfigError: If the split or the scenario is unknown, or neither is given.
    """
    if split is not None:
        return [sc.name for sc in scenarios_in(split)]
    if scenario is None:
        raise ConfigError("give a split or a scenario")
    return [get_scenario(scenario).name]


def check_trainable(scenario_name: str) -> None:
    """Refuse training on a test scenario (or an unknown one).

    Raises:
        ValueError: One line naming the scenario and its held-out family or cluster.
    """
    sc = get_scenario(scenario_name)
    if sc.split == "test":
        raise ConfigError(
            f"scenario {scenario_name!r} is in the test split (family {sc.family!r}, cluster "
            f"{sc.cluster!r}); train on a train scenario (hetsched.benchmark.scenarios_in('train'))"
        )


def check_trainable_preset(workload: str, workload_kwargs: Mapping[str, Any], cluster: str) -> None:
    """Refuse a training preset that draws from a test family or cluster.

    Args:
        workload: The ``conf/workload`` preset.
        workload_kwargs: Its overrides (``itp_cluster`` picks the ITP family).
        cluster: The cluster preset.

    Raises:
        ValueError: One line naming the preset and the held-out family or cluster.
    """
    test = SPLITS["test"]
    if cluster in test.clusters:
        raise ConfigError(
            f"cluster {cluster!r} is held out for the test split; train on another cluster"
        )
    fams = [
        name
        for name, fam in FAMILIES.items()
        if fam.workload == workload
        and all(workload_kwargs.get(k, _preset_default(workload, k)) == v
                for k, v in fam.overrides.items())
    ]  # fmt: skip
    held = [f for f in fams if f in test.families]
    if held:
        raise ConfigError(
            f"workload {workload!r} with {dict(workload_kwargs)} draws from the test family "
            f"{held[0]!r}; train on a train family ({', '.join(SPLITS['train'].families)})"
        )


def _preset_default(workload: str, key: str) -> Any:
    """The default of a workload preset's field (``itp_cluster`` of ``itp`` is ``cluster10``)."""
    return {("itp", "itp_cluster"): "cluster10"}.get((workload, key))
