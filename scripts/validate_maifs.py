"""Score MAIFS checkpoints on the validation windows (checkpoint selection, never the test windows).

The validation sets are Philly windows that neither training nor testing uses for scoring
(``docs/maifs_log.md``): the busiest windows after sorted jobs 55,000, 60,000 and 62,000 on
``sia_64`` and after 60,000 and 62,000 on ``pai_mixed``; on both clusters the busiest windows
after 68,000 and 80,000, which hold jobs of many hours; and on both clusters the quiet stretch of
300 consecutive jobs from sorted job 20,000 (arrivals over hours, jobs of up to days, like test
window t3 from 30,000). Each set runs seeds 50 and 51 (training draws seeds 0-9, tests use
100-102). Some validation windows share jobs with training windows (with other seeds, so other
model assignments); the test windows share none. Every checkpoint runs greedily through the same
runner and simulator as the baselines, beside the behaviour-cloning teacher.

Score per checkpoint: the mean over the sets of ``avg JCT / teacher's avg JCT + makespan /
teacher's makespan`` (lower is better; the teacher alone scores 2.0). Both halves matter: the
issue's bar asks for lower average JCT *and* no worse makespan than the baselines.

The rule flags (``--starve-guard-s``, ``--preempt-fast``, ...) turn on the rules of
:class:`~hetsched.agents.policy.MAIFSPolicy`; without any, each checkpoint runs bare.
``--preset`` takes every rule from ``conf/scheduler/maifs.yaml`` (what ``scheduler=maifs``
runs), and rule flags given with it override its values.

``--loaded`` adds six loaded stretches (:data:`LOADED_SETS`): long jobs queue there for hours,
the failure mode of test window t3 that the other sets miss.

``--scan`` adds 51 stretches of 300 consecutive Philly jobs (:data:`SCAN_SETS`): every
2,500th sorted job from 0 to 80,000 on both clusters, but for those overlapping a test window
or another quiet set. The rules were chosen on the sets above, so they may be fitted to them; this
broad scan, added later, checks that (``--only-scan --vs sia --seeds 50``, docs/maifs_log.md).
``--scan-shifted`` adds the stretches halfway between the scan's (:data:`SHIFTED_SCAN_SETS`,
from 1,250), added after every rule of the preset was chosen: a check no rule was fitted to.

``--alibaba`` adds two sets from the Alibaba PAI v2023 trace (research-use data, not shipped:
it needs ``../shared/data`` or ``$HETSCHED_SHARED_DATA``): the 300 consecutive pods from job
4,700 of the 6,203 kept, on ``sia_64`` and on ``pai_mixed`` -- between the training stretches of
``agent=maifs_multitrace`` (jobs 3,000-3,299 and 4,200-4,499) and the held-out busiest window
(jobs 5,609-6,108, the ``workload=alibaba`` preset's default).

``--elastic`` adds six sets of elastic jobs (:data:`ELASTIC_SETS`): Sia's Helios files 2, 3 and
4 (160 jobs each; Sia artifact data, not shipped) on both clusters. File 1 is the held-out
``workload=sia_helios`` test trace. No checkpoint was trained on any Helios file.
``--elastic-traces`` takes the elastic sets from other presets too (:data:`ELASTIC_TRACES`:
Sia's Helios, Philly and new traces, Pollux's workloads) and ``--elastic-files`` picks the
files; file 1 of every preset is its test trace and is refused.

Usage::

    python scripts/validate_maifs.py checkpoints/maifs_default.pt outputs/train/RUN/checkpoints/*.pt
    python scripts/validate_maifs.py A.pt B.pt --long-guard-s 10800 --out val.md
    python scripts/validate_maifs.py A.pt --starve-guard-s 21600 --migrate-gain 0.1 --alibaba
    python scripts/validate_maifs.py A.pt --starve-guard-s 21600 --migrate-gain 0.1 \
        --preempt-ratio 10 --preempt-wait-s 3600
    python scripts/validate_maifs.py A.pt --elastic-gain 2.0 --grow-gain 0.05 --grow-factor 8 \
        --grow-at-request --shrink-order restart_cost --shrink-fastest --keep-memory \
        --only-elastic --elastic-files 5 6 7 \
        --elastic-traces sia_helios sia_philly sia_newtrace pollux_philly --seeds 50
    python scripts/validate_maifs.py A.pt --starve-guard-s 21600 --migrate-gain 0.1 \
        --preempt-ratio 4 --preempt-max 3 --preempt-wait-s 7200 --fast-wait-s 0 \
        --fast-max-s 10800 --window-order sjf --keep-memory \
        --critical-s 86400 --critical-wait-s 10800 --mem-hold-phi 0.4 --alibaba --loaded \
        --vs sia
    python scripts/validate_maifs.py A.pt --preset --only-scan --vs sia --seeds 50
    python scripts/validate_maifs.py checkpoints/maifs_default.pt --preset --alibaba --loaded \
        --members checkpoints/maifs_default_{seed5,seed6,elastic,loaded}.pt   # the ensemble
    python scripts/validate_maifs.py checkpoints/maifs_default.pt --preset --evict-only \
        --members checkpoints/maifs_sjf.pt checkpoints/maifs_default_{seed5,seed6}.pt \
        checkpoints/maifs_default_{elastic,loaded}.pt   # learned evictions, those placements
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hetsched.agents.config import (  # noqa: E402
    CONFLICT_MODES,
    MAIFS_RULES,
    MAIFSSchedulerConf,
    preset_rules,
)
from hetsched.agents.policy import (  # noqa: E402
    ACTORS,
    SHRINK_ORDERS,
    WAKE_RULES,
    MAIFSPolicy,
    TeacherPolicy,
)
from hetsched.envs.presets import (  # noqa: E402
    resolve_cluster,
    resolve_workload,
    scheduler_factory,
)
from hetsched.envs.spaces import WINDOW_ORDERS  # noqa: E402
from hetsched.evaluation import atomic_write_text, evaluate  # noqa: E402
from hetsched.sim.engine import SimConfig  # noqa: E402
from hetsched.sim.throughput import default_throughput  # noqa: E402

#: A validation set: (cluster preset, first sorted job of the busiest-window search), or with a
#: third item False the 300 consecutive jobs from that sorted job (a quiet stretch, not the
#: busiest window); a fourth item names the workload preset (default ``philly``). For Sia's
#: traces (``sia_helios``, ...) the second item is the file index and the third is ignored.
ValidationSet = tuple[str, int] | tuple[str, int, bool] | tuple[str, int, bool, str]

#: The Philly validation sets (see the module docstring).
VALIDATION_SETS: tuple[ValidationSet, ...] = (
    ("sia_64", 55000),
    ("sia_64", 60000),
    ("sia_64", 62000),
    ("pai_mixed", 60000),
    ("pai_mixed", 62000),
    # Windows with jobs of many hours (the makespan failure mode of docs/maifs_log.md):
    ("sia_64", 68000),
    ("pai_mixed", 68000),
    ("sia_64", 80000),
    ("pai_mixed", 80000),
    # Quiet stretches with jobs of many hours (like test window t3, whose failure on sia_64 the
    # busy sets above did not show; docs/maifs_log.md, "Progress shaping"):
    ("sia_64", 20000, False),
    ("pai_mixed", 20000, False),
)
#: The Alibaba validation sets of ``--alibaba`` (see the module docstring).
ALIBABA_SETS: tuple[ValidationSet, ...] = (
    ("sia_64", 4700, False, "alibaba"),
    ("pai_mixed", 4700, False, "alibaba"),
)
#: The loaded stretches of ``--loaded``: 300 consecutive jobs from sorted jobs 10,000, 25,000
#: and 35,000 on both clusters. A scan of stretches from 10,000 to 65,000 (step 5,000 or so,
#: sia_64, seed 50) found these three with an avg queueing delay of 2-19 h under the default
#: scheduler=maifs: a queue of long jobs, like test window t3 (30,000), which the quiet
#: stretches from 20,000 do not show. None shares a job with a test window.
LOADED_SETS: tuple[ValidationSet, ...] = tuple(
    (c, s, False) for s in (10000, 25000, 35000) for c in ("sia_64", "pai_mixed")
)
#: Starts of the stretches of ``--scan``: every 2,500th sorted job from 0 to 80,000 but those
#: whose 300 jobs overlap a test window (t3 from 30,000, t1 from 42,734) and those the other
#: quiet stretches use (10,000, 20,000, 25,000, 35,000); on sia_64 also 12,500, 75,000 and
#: 77,500, which hold jobs larger than any of its GPU types' pools (a TraceError there).
SCAN_STARTS: dict[str, tuple[int, ...]] = {
    "pai_mixed": tuple(
        s for s in range(0, 80001, 2500) if s not in (10000, 20000, 25000, 30000, 35000, 42500)
    ),
}
SCAN_STARTS["sia_64"] = tuple(s for s in SCAN_STARTS["pai_mixed"] if s not in (12500, 75000, 77500))
#: The stretches of ``--scan`` (quiet, i.e. 300 consecutive jobs): a broad check that the
#: rules were not fitted to the few loaded stretches above (see the module docstring).
SCAN_SETS: tuple[ValidationSet, ...] = tuple(
    (c, s, False) for c in ("sia_64", "pai_mixed") for s in SCAN_STARTS[c]
)
#: Starts of the stretches of ``--scan-shifted``: every 2,500th sorted job from 1,250 (halfway
#: between the scan's), added on 2026-11-26 after every rule of the preset had been chosen. None
#: overlaps a test window (t3 from 30,000, t1 from 42,734, t2 from 46,600) or another quiet set.
#: Not 81,250, nor on sia_64 8,750 and 68,750: they hold jobs larger than any of the cluster's
#: GPU types' pools (a TraceError there).
SHIFTED_SCAN_STARTS: dict[str, tuple[int, ...]] = {
    "pai_mixed": tuple(range(1250, 78751, 2500)),
    "sia_64": tuple(s for s in range(1250, 78751, 2500) if s not in (8750, 68750)),
}
#: The stretches of ``--scan-shifted`` (quiet): a second broad check, on stretches no rule was
#: chosen on (docs/maifs_log.md, "A second scan, shifted").
SHIFTED_SCAN_SETS: tuple[ValidationSet, ...] = tuple(
    (c, s, False) for c in ("sia_64", "pai_mixed") for s in SHIFTED_SCAN_STARTS[c]
)
SEEDS: tuple[int, ...] = (50, 51)

#: Workload presets of elastic jobs ``--elastic-traces`` may use. Each preset's file 1 is its
#: held-out test trace (the presets' default ``index``); files 2 and up are free for validation.
#: Pollux's workloads are shipped (Apache-2.0); Sia's need the shared data.
ELASTIC_TRACES: tuple[str, ...] = ("sia_helios", "sia_philly", "sia_newtrace", "pollux_philly")


def elastic_validation_sets(
    traces: Sequence[str], files: Sequence[int]
) -> tuple[ValidationSet, ...]:
    """Elastic sets: every file of every trace on both clusters (file 1 is refused).

    Raises:
        ValueError: If ``files`` holds file 1 or a trace is not in :data:`ELASTIC_TRACES`.
    """
    if 1 in files:
        raise ValueError(f"files={list(files)}: file 1 is each elastic preset's test trace")
    bad = [t for t in traces if t not in ELASTIC_TRACES]
    if bad:
        raise ValueError(f"unknown elastic traces {bad}; choose from {list(ELASTIC_TRACES)}")
    return tuple((c, i, True, t) for t in traces for i in files for c in ("sia_64", "pai_mixed"))


#: The elastic sets of ``--elastic`` by default: Sia's Helios files 2-4 on both clusters (file 1
#: is the test trace).
ELASTIC_SETS: tuple[ValidationSet, ...] = elastic_validation_sets(("sia_helios",), (2, 3, 4))


#: The pseudo-trace of :data:`ELASTIC_PHILLY_SETS`: the ``philly`` preset with ``elastic=true``
#: (each job may run on 1 to twice its requested GPUs).
PHILLY_ELASTIC = "philly_elastic"

#: The 17 Philly validation and loaded windows with their jobs made elastic: elastic jobs of
#: another trace than Sia's and Pollux's, which no elastic rule was chosen on
#: (``compare_variants.py --sets elastic_philly``). Unlike Sia's fixed files, a seed re-draws
#: part of them (deepspeech2 or bert for a job of 1-10 GPU-hours; in a busy window of short
#: jobs only a few), and the schedules follow.
ELASTIC_PHILLY_SETS: tuple[ValidationSet, ...] = tuple(
    (v[0], v[1], bool(v[2]) if len(v) > 2 else True, PHILLY_ELASTIC)
    for v in VALIDATION_SETS + LOADED_SETS
)


def workload_kwargs(trace: str, start: int, busiest: bool) -> dict[str, Any]:
    """Preset overrides of one validation set (see :data:`ValidationSet`)."""
    if trace in ELASTIC_TRACES:
        return {"index": start}
    out: dict[str, Any] = {"start": start, "num_jobs": 300, "busiest": busiest}
    if trace == PHILLY_ELASTIC:
        out["elastic"] = True
    return out


def workload_factory(vset: ValidationSet) -> Callable[..., Any]:
    """The workload factory of one validation set (see :data:`ValidationSet`)."""
    busiest = bool(vset[2]) if len(vset) > 2 else True
    trace = str(vset[3]) if len(vset) > 3 else "philly"
    preset = "philly" if trace == PHILLY_ELASTIC else trace
    factory = resolve_workload(preset, workload_kwargs(trace, vset[1], busiest))
    assert callable(factory)
    return factory


def baseline_factory(name: str) -> Callable[[], Any]:
    """A factory of the scheduler preset ``conf/scheduler/<name>.yaml`` (as ``evaluate.py``
    builds it), for ``--vs``.

    Raises:
        ValueError: If there is no such preset.
    """
    try:
        return scheduler_factory(name)
    except ValueError as err:
        raise ValueError(f"--vs {name}: {err}") from None


def at_or_below(rows: Sequence[Mapping[str, Any]], baseline: str) -> dict[str, list[bool]]:
    """Per name, for each set in order: both avg JCT and makespan at or below ``baseline``'s
    on that set (the issue's bar against one baseline)."""
    base = {(r["cluster"], r["start"]): r for r in rows if r["name"] == baseline}
    out: dict[str, list[bool]] = {}
    for r in rows:
        if r["name"] != baseline:
            b = base[(r["cluster"], r["start"])]
            out.setdefault(r["name"], []).append(
                r["jct_h"] <= b["jct_h"] and r["mk_h"] <= b["mk_h"]
            )
    return out


#: The rule settings of :class:`MAIFSPolicy` (the rule flags' names).
RULES: tuple[str, ...] = MAIFS_RULES
#: Those a null value turns off (``--rules-off``): the schema's optional ones.
OFFABLE: tuple[str, ...] = tuple(
    f.name for f in fields(MAIFSSchedulerConf) if f.name in RULES and "None" in str(f.type)
)


def score_vs(rows: Sequence[Mapping[str, Any]], baseline: str) -> dict[str, float]:
    """Per name, the mean over the sets of ``avg JCT / baseline's + makespan / baseline's``
    (the baseline scores 2.0; lower is better), like the teacher-relative score."""
    base = {(r["cluster"], r["start"]): r for r in rows if r["name"] == baseline}
    out: dict[str, list[float]] = {}
    for r in rows:
        b = base[(r["cluster"], r["start"])]
        out.setdefault(r["name"], []).append(r["jct_h"] / b["jct_h"] + r["mk_h"] / b["mk_h"])
    return {name: float(np.mean(v)) for name, v in out.items()}


def score_checkpoints(
    paths: Sequence[Path],
    *,
    policy_kwargs: Mapping[str, Any] | None = None,
    sets: Sequence[ValidationSet] = VALIDATION_SETS,
    seeds: Sequence[int] = SEEDS,
    baselines: Mapping[str, Callable[[], Any]] | None = None,
    progress: bool = False,
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Run the teacher, every checkpoint and the ``baselines`` on the validation sets.

    Args:
        paths: Checkpoint files.
        policy_kwargs: Keyword arguments of :class:`MAIFSPolicy` for every checkpoint: its rules
            (``starve_guard_s``, ``migrate_gain``, ``preempt_ratio``, ``fast_wait_s``, ...),
            ``long_guard_s``, ``window_order`` or ``ensemble`` (the further members acting
            with every checkpoint; without it each checkpoint acts alone, the default one
            too). None: each checkpoint as saved, alone, no rules.
            The teacher keeps its own settings (arrival-order window), so scores stay
            comparable.
        sets: ``(cluster, start[, busiest[, workload]])`` validation sets (:data:`ValidationSet`).
        seeds: Seeds per set.
        baselines: Further schedulers by name (e.g. ``{"sia": baseline_factory("sia")}``),
            run through the same runner on the same sets and seeds (scored like the others).
        progress: Show a progress bar over the sets (on stderr).

    Returns:
        ``(score per name, rows)``: the score as in the module docstring (``teacher`` included,
        2.0 by construction) and one row per (set, name) with mean avg JCT and makespan (hours).
    """
    tm = default_throughput()
    # The teacher as the maifs_teacher preset runs it (conf/scheduler/maifs_teacher.yaml).
    teacher = partial(TeacherPolicy, window=16, long_s=10800.0)
    policies: dict[str, Callable[[], Any]] = {"teacher": teacher}
    kw = dict(policy_kwargs or {})
    kw.setdefault("ensemble", [])  # a checkpoint file is scored alone unless members are given
    for p in paths:
        policies[str(p)] = partial(MAIFSPolicy, checkpoint=p, **kw)
    policies.update(baselines or {})
    rows: list[dict[str, Any]] = []
    ratios: dict[str, list[float]] = {name: [] for name in policies}
    bar = tqdm(sets, desc="validation sets", unit="set", disable=not progress)
    for vset in bar:
        bar.set_postfix_str(" ".join(str(x) for x in vset))
        cluster_name, start = vset[0], vset[1]
        busiest = bool(vset[2]) if len(vset) > 2 else True
        trace = str(vset[3]) if len(vset) > 3 else "philly"
        cluster = resolve_cluster(cluster_name)
        factory = workload_factory(vset)
        outs = evaluate(
            policies,
            cluster=cluster,
            workload_factory=factory,
            throughput=tm,
            seeds=list(seeds),
            sim_config=SimConfig(),
        )
        mean: dict[str, tuple[float, float]] = {}
        for name in policies:
            r = [o.row for o in outs if o.row["scheduler"] == name]
            mean[name] = (
                float(np.mean([x["avg_jct_h"] for x in r])),
                float(np.mean([x["makespan_h"] for x in r])),
            )
        t_jct, t_mk = mean["teacher"]
        for name, (jct, mk) in mean.items():
            ratios[name].append(jct / t_jct + mk / t_mk)
            rows.append(
                {
                    "cluster": cluster_name,
                    "start": (start if busiest else f"{start} (quiet)")
                    if trace == "philly"
                    else f"{trace} {start}",
                    "name": name,
                    "jct_h": jct,
                    "mk_h": mk,
                }
            )
    return {name: float(np.mean(v)) for name, v in ratios.items()}, rows


def parse_args(
    argv: Sequence[str] | None = None,
) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """The parser and the parsed arguments (``argv``: None = ``sys.argv[1:]``); ``--preset``
    makes the preset's rules the defaults of the rule flags."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("checkpoints", nargs="+", type=Path)
    ap.add_argument("--long-guard-s", type=float, default=None)
    ap.add_argument("--starve-guard-s", type=float, default=None)
    ap.add_argument("--migrate-gain", type=float, default=None)
    ap.add_argument("--preempt-ratio", type=float, default=None)
    ap.add_argument("--preempt-wait-s", type=float, default=0.0)
    ap.add_argument("--preempt-max", type=int, default=1)
    ap.add_argument(
        "--preempt-every-s",
        type=float,
        default=None,
        help="seconds of holding GPUs that earn a job one more preemption beyond --preempt-max",
    )
    ap.add_argument(
        "--preempt-gangs",
        action="store_true",
        help="the preemption rules may also take gangs on the fewest nodes that hold them",
    )
    ap.add_argument(
        "--preempt-fast",
        type=float,
        default=None,
        help="turn on preemption for a much faster GPU at this speedup (needs --preempt-ratio)",
    )
    ap.add_argument("--fast-wait-s", type=float, default=None)
    ap.add_argument("--fast-max-s", type=float, default=3600.0)
    ap.add_argument("--elastic-gain", type=float, default=None)
    ap.add_argument("--elastic-max-s", type=float, default=None, help="seconds; default: no limit")
    ap.add_argument("--grow-gain", type=float, default=None)
    ap.add_argument("--grow-factor", type=int, default=2)
    ap.add_argument(
        "--grow-at-request", action="store_true", help="growth at >= the requested CPU/memory"
    )
    ap.add_argument("--shrink-order", choices=SHRINK_ORDERS, default="excess")
    ap.add_argument("--keep-memory", action="store_true", help="turn on the memory guard")
    ap.add_argument(
        "--shrink-fastest",
        action="store_true",
        help="only jobs on the first waiting job's fastest GPU type shrink",
    )
    ap.add_argument(
        "--critical-s",
        type=float,
        default=None,
        help="turn on the makespan guard for jobs estimated to run at least this long (s)",
    )
    ap.add_argument("--critical-ratio", type=float, default=4.0)
    ap.add_argument("--critical-wait-s", type=float, default=0.0)
    ap.add_argument(
        "--critical-min-rel",
        type=float,
        default=None,
        help="let the makespan guard use a slower type with room at this fraction of its speed",
    )
    ap.add_argument("--mem-hold-phi", type=float, default=None)
    ap.add_argument(
        "--eft-gain",
        type=float,
        default=None,
        help="place waiting jobs where they finish earliest (the saving a placement must make)",
    )
    ap.add_argument(
        "--evict-allowance",
        action="store_true",
        help="the network's evictions share the rules' preemption allowance per job",
    )
    ap.add_argument(
        "--spare-critical",
        dest="evict_critical",
        action="store_false",
        help="the network never evicts a job the makespan guard placed",
    )
    ap.add_argument(
        "--starve-first",
        action="store_true",
        help="the starvation guard also runs before the agents' steps, over every waiting job",
    )
    ap.add_argument(
        "--critical-spread-cpu",
        action="store_true",
        help="the makespan guard's spread placements take the most CPU legal",
    )
    ap.add_argument(
        "--critical-min-rel-s",
        type=float,
        default=None,
        help="only jobs estimated this long (s) may be placed on a slower type by the guard",
    )
    ap.add_argument(
        "--critical-slow-eft",
        action="store_true",
        help="the guard's slower-type placement only when it finishes sooner than waiting",
    )
    ap.add_argument(
        "--eft-elastic",
        action="store_true",
        help="the earliest-finish placement (--eft-gain) also takes elastic jobs",
    )
    ap.add_argument(
        "--grow-waiting",
        action="store_true",
        help="growth (--grow-gain) also while jobs wait, onto types none of them waits for",
    )
    ap.add_argument(
        "--grow-new",
        action="store_true",
        help="growth (--grow-gain) also takes the jobs starting this round, before they start",
    )
    ap.add_argument(
        "--elastic-teacher",
        action="store_true",
        help="the teacher takes the decision steps whose window holds elastic jobs only",
    )
    ap.add_argument(
        "--conflict",
        choices=CONFLICT_MODES,
        default=None,
        help="override the checkpoints' conflict resolution (default: each checkpoint's own)",
    )
    ap.add_argument(
        "--actor",
        choices=ACTORS,
        default="network",
        help="who takes the decision steps: the checkpoint's network or its teacher (ablation)",
    )
    ap.add_argument(
        "--wake",
        choices=WAKE_RULES,
        default=None,
        help="timed wake-ups at the starvation guard's threshold or at every rule's",
    )
    ap.add_argument("--window-order", choices=WINDOW_ORDERS, default=None)
    ap.add_argument(
        "--members",
        type=Path,
        nargs="+",
        default=[],
        metavar="CKPT",
        help="ensemble members acting together with every checkpoint scored (default: none, "
        "each checkpoint alone; the shipped ensemble: checkpoints/maifs_default.pt --members "
        "checkpoints/maifs_default_{seed5,seed6,elastic,loaded}.pt)",
    )
    ap.add_argument(
        "--evict-only",
        action="store_true",
        help="each checkpoint scored decides evictions only; the --members vote on placements "
        "(scheduler.maifs.evict_only)",
    )
    ap.add_argument(
        "--seeds", type=int, nargs="+", default=list(SEEDS), help="validation seeds (< 100)"
    )
    ap.add_argument(
        "--alibaba", action="store_true", help="add the Alibaba sets (needs the shared data)"
    )
    ap.add_argument("--loaded", action="store_true", help="add the loaded stretches (LOADED_SETS)")
    ap.add_argument(
        "--elastic", action="store_true", help="add the elastic sets (ELASTIC_SETS; shared data)"
    )
    ap.add_argument("--only-elastic", action="store_true", help="score on the elastic sets alone")
    ap.add_argument(
        "--scan", action="store_true", help="add the 51 scan stretches (SCAN_SETS; slow for sia)"
    )
    ap.add_argument("--only-scan", action="store_true", help="score on the scan stretches alone")
    ap.add_argument(
        "--scan-shifted",
        action="store_true",
        help="add the shifted scan's stretches (SHIFTED_SCAN_SETS; slow for sia)",
    )
    ap.add_argument(
        "--only-scan-shifted",
        action="store_true",
        help="score on the shifted scan's stretches alone",
    )
    ap.add_argument(
        "--elastic-files",
        type=int,
        nargs="+",
        default=None,
        help="files of the elastic sets (default 2 3 4; 1 is each trace's test file)",
    )
    ap.add_argument(
        "--elastic-traces",
        nargs="+",
        choices=ELASTIC_TRACES,
        default=["sia_helios"],
        help="workload presets of the elastic sets (default sia_helios)",
    )
    ap.add_argument(
        "--vs",
        default=None,
        metavar="SCHEDULER",
        help="also run this scheduler preset (e.g. sia) and count the sets where each "
        "checkpoint's avg JCT and makespan are both at or below its (slow for sia)",
    )
    ap.add_argument("--out", type=Path, default=None, help="also write the tables as Markdown")
    ap.add_argument(
        "--clusters",
        nargs="+",
        default=None,
        metavar="CLUSTER",
        help="keep only the sets on these clusters (e.g. sia_64)",
    )
    ap.add_argument(
        "--rules-off",
        nargs="+",
        default=[],
        choices=OFFABLE,
        metavar="RULE",
        help="turn these rule settings off (null), e.g. --preset --rules-off preempt_ratio "
        f"preempt_fast: the preset without its own preemption; one of {', '.join(OFFABLE)}",
    )
    ap.add_argument(
        "--preset",
        action="store_true",
        help="take the rules from conf/scheduler/maifs.yaml (what scheduler=maifs runs); "
        "rule flags given as well override them (switches such as --keep-memory only turn on)",
    )
    if ap.parse_known_args(argv)[0].preset:
        ap.set_defaults(**preset_rules())
    return ap, ap.parse_args(argv)


def main() -> None:
    """Command-line entry point."""
    ap, args = parse_args()
    files = (2, 3, 4) if args.elastic_files is None else tuple(args.elastic_files)
    if 1 in files:
        ap.error("--elastic-files: file 1 is the held-out test trace of every elastic preset")
    elastic_sets = elastic_validation_sets(args.elastic_traces, files)
    if any(seed >= 100 for seed in args.seeds):
        ap.error(f"--seeds {args.seeds}: seeds 100 and up are the test seeds; use seeds < 100")
    missing = [str(p) for p in [*args.checkpoints, *args.members] if not p.is_file()]
    if missing:
        ap.error(f"no such checkpoint file: {', '.join(missing)}")
    rules: dict[str, Any] = {k: getattr(args, k) for k in RULES}
    for k in args.rules_off:
        rules[k] = None
    rules["ensemble"] = [str(p) for p in args.members]  # [] = each checkpoint alone
    if args.evict_only:
        if not args.members:
            ap.error("--evict-only: the --members vote on placements; name at least one")
        rules["evict_only"] = True
    if args.conflict is not None:
        rules["conflict"] = args.conflict
    sets = (
        VALIDATION_SETS
        + (LOADED_SETS if args.loaded else ())
        + (ALIBABA_SETS if args.alibaba else ())
        + (elastic_sets if args.elastic else ())
        + (SCAN_SETS if args.scan else ())
        + (SHIFTED_SCAN_SETS if args.scan_shifted else ())
    )
    only = [f for f in ("only_elastic", "only_scan", "only_scan_shifted") if getattr(args, f)]
    if len(only) > 1:
        ap.error(" and ".join("--" + f.replace("_", "-") for f in only) + " exclude each other")
    if args.only_elastic:
        sets = elastic_sets
    if args.only_scan:
        sets = SCAN_SETS
    if args.only_scan_shifted:
        sets = SHIFTED_SCAN_SETS
    if args.clusters is not None:
        unknown = sorted(set(args.clusters) - {s[0] for s in sets})
        if unknown:
            ap.error(f"--clusters {' '.join(unknown)}: no chosen set runs on it")
        sets = tuple(s for s in sets if s[0] in args.clusters)
    try:
        baselines = {args.vs: baseline_factory(args.vs)} if args.vs else None
    except ValueError as err:
        ap.error(str(err))
    scores, rows = score_checkpoints(
        args.checkpoints,
        policy_kwargs=rules,
        seeds=args.seeds,
        sets=sets,
        baselines=baselines,
        progress=True,
    )
    lines = ["| cluster | start | name | avg JCT (h) | makespan (h) |", "|---|---|---|---|---|"]
    lines += [
        f"| {r['cluster']} | {r['start']} | {r['name']} | {r['jct_h']:.3f} | {r['mk_h']:.2f} |"
        for r in rows
    ]
    lines += ["", "| name | score (teacher = 2.0, lower is better) |", "|---|---|"]
    lines += [f"| {n} | {s:.3f} |" for n, s in sorted(scores.items(), key=lambda kv: kv[1])]
    if args.vs:
        met = at_or_below(rows, args.vs)
        where = [f"{r['cluster']} {r['start']}" for r in rows if r["name"] == args.vs]
        lines += [
            "",
            f"| name | sets at or below {args.vs} on both | those sets |",
            "|---|---|---|",
        ]
        lines += [
            f"| {n} | {sum(m)}/{len(m)} | {', '.join(w for w, ok in zip(where, m, strict=True) if ok)} |"
            for n, m in met.items()
        ]
        lines += ["", f"| name | score relative to {args.vs} ({args.vs} = 2.0) |", "|---|---|"]
        vs = score_vs(rows, args.vs)
        lines += [f"| {n} | {s:.3f} |" for n, s in sorted(vs.items(), key=lambda kv: kv[1])]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        atomic_write_text(args.out, text)


if __name__ == "__main__":
    main()
