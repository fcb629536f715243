"""Paired comparison of ``scheduler=maifs`` variants with the shipped configuration, per seed.

The protocol of ``docs/maifs_log.md`` for a candidate change: declare it, then score it and the
shipped configuration on the same validation sets and fresh seeds, relative to a baseline
(Sia by default), and adopt it only if it is lower by more than a margin on every seed. One
run of this script does that comparison:

* every variant, the shipped configuration (``shipped``: ``scheduler=maifs`` as the preset
  composes it) and the baseline run on the same sets and seeds, through the evaluation runner;
* the score of a policy on one seed is the mean over the sets of ``avg JCT / baseline's +
  makespan / baseline's`` (the baseline scores 2.0; lower is better), as in
  ``scripts/validate_maifs.py --vs``;
* per variant and seed: its score, the difference to ``shipped``, the sets at or below the
  baseline on both metrics, and with ``--margin`` whether it is below ``shipped`` by more than
  the margin on every seed (the rule the log uses).

A variant is a JSON object of :class:`~hetsched.agents.policy.MAIFSPolicy` keyword arguments
that override the preset's rules (``{"evict_allowance": true}``); ``checkpoint`` and
``ensemble`` name other networks. Results are cached per (policy, set, seed) as JSON files
under ``--cache`` (default ``outputs/compare_cache``), so a baseline is simulated once for all
later candidates on the same seeds (Sia takes several minutes per seed of the shifted scan):
the key holds the policy's resolved settings, the set, the seed and the package version, not
the code, so clear the folder (or pass ``--fresh``) after changing the simulator, a baseline or
the policy. Seeds 100 and up are the test seeds and are refused.

Examples::

    python scripts/compare_variants.py --variants '{"A1": {"evict_allowance": true}}' \\
        --sets shifted --clusters sia_64 --seeds 76 77 --margin 0.01 --jobs 2
    python scripts/compare_variants.py --variants @variants.json --sets rigid --seeds 50 51
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from functools import partial
from multiprocessing import Pool
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))

import validate_maifs as vm  # noqa: E402

import hetsched  # noqa: E402
from hetsched.agents.config import MAIFSSchedulerConf, preset_rules  # noqa: E402
from hetsched.agents.policy import DEFAULT_CHECKPOINT, DEFAULT_ENSEMBLE, MAIFSPolicy  # noqa: E402
from hetsched.envs.presets import resolve_cluster  # noqa: E402
from hetsched.evaluation import atomic_write_text, evaluate  # noqa: E402
from hetsched.sim.engine import SimConfig  # noqa: E402
from hetsched.sim.throughput import default_throughput  # noqa: E402

#: The name of the shipped configuration in the tables (a variant may not take it).
SHIPPED = "shipped"

#: Groups of validation sets ``--sets`` chooses from (``scripts/validate_maifs.py``).
SET_GROUPS: dict[str, tuple[vm.ValidationSet, ...]] = {
    "shifted": vm.SHIFTED_SCAN_SETS,
    "scan": vm.SCAN_SETS,
    "validation": vm.VALIDATION_SETS,
    "rigid": vm.VALIDATION_SETS + vm.LOADED_SETS + vm.ALIBABA_SETS,
    "elastic": vm.elastic_validation_sets(vm.ELASTIC_TRACES, (2, 3, 4, 5, 6, 7)),
    # The files after 7 (8 of every trace, 9-10 of the two with ten; 8-9 are the elastic
    # ensemble member's fine-tune files): 16 more sets, a further check.
    "elastic_late": vm.elastic_validation_sets(vm.ELASTIC_TRACES, (8,))
    + vm.elastic_validation_sets(("sia_helios", "sia_newtrace"), (9, 10)),
    # The 17 Philly validation and loaded windows with their jobs made elastic.
    "elastic_philly": vm.ELASTIC_PHILLY_SETS,
}


@dataclass(frozen=True)
class Task:
    """One simulation: a policy (a variant's resolved settings, or a baseline preset's name)
    on one validation set and seed."""

    name: str
    settings: Mapping[str, Any] | None  # None: the baseline preset ``name``
    vset: vm.ValidationSet
    seed: int

    def key(self) -> str:
        """The cache key: the policy (not its display name), the set, the seed, the version.

        Settings at their schema default are left out of the key, so adding a new switch
        (off by default) to :class:`~hetsched.agents.config.MAIFSSchedulerConf` keeps the
        cached results of every policy that leaves it off. Changing a schema default, like
        changing the code, calls for clearing the cache.
        """
        what: dict[str, Any] = (
            {"baseline": self.name}
            if self.settings is None
            else {"maifs": {k: v for k, v in self.settings.items() if not _is_default(k, v)}}
        )
        blob = json.dumps(
            {**what, "set": list(self.vset), "seed": self.seed, "version": hetsched.__version__},
            sort_keys=True,
            default=str,
        )
        return hashlib.sha1(blob.encode()).hexdigest()[:20]


#: The rule settings' schema defaults (:class:`MAIFSSchedulerConf`), left out of cache keys.
_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in fields(MAIFSSchedulerConf) if f.default is not MISSING
}


def _is_default(name: str, value: Any) -> bool:
    """Whether ``value`` is setting ``name``'s schema default (never for a list or a path)."""
    return name in _DEFAULTS and type(value) is type(_DEFAULTS[name]) and value == _DEFAULTS[name]


def resolve_variant(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A variant's :class:`MAIFSPolicy` keyword arguments: the preset's rules, the default
    checkpoint and its ensemble, with ``overrides`` on top (paths as strings).

    Raises:
        ValueError: For a key :class:`MAIFSPolicy` does not take.
    """
    out: dict[str, Any] = dict(preset_rules())
    out["checkpoint"] = str(DEFAULT_CHECKPOINT)
    out["ensemble"] = [str(p) for p in DEFAULT_ENSEMBLE]
    known = set(out) | {"evict_only", "conflict", "greedy"}
    bad = sorted(set(overrides) - known)
    if bad:
        raise ValueError(
            f"unknown variant setting(s) {bad}; use MAIFSPolicy's rule names "
            f"({', '.join(sorted(known))})"
        )
    out.update(overrides)
    if "ensemble" in overrides and overrides["ensemble"] is not None:
        out["ensemble"] = [str(p) for p in overrides["ensemble"]]
    return out


def run_task(task: Task) -> dict[str, float]:
    """Simulate ``task``; return its avg JCT and makespan (hours)."""
    factory: Callable[..., Any]
    if task.settings is None:
        factory = vm.baseline_factory(task.name)
    else:
        factory = partial(MAIFSPolicy, **task.settings)
    vset = task.vset
    wl = vm.workload_factory(vset)
    out = evaluate(
        {task.name: factory},
        cluster=resolve_cluster(vset[0]),
        workload_factory=wl,
        throughput=default_throughput(),
        seeds=[task.seed],
        sim_config=SimConfig(),
    )[0]
    return {"jct_h": float(out.row["avg_jct_h"]), "mk_h": float(out.row["makespan_h"])}


def cached_run(task: Task, cache: Path | None) -> dict[str, float]:
    """:func:`run_task` through the cache folder (None: no cache)."""
    if cache is None:
        return run_task(task)
    path = cache / f"{task.key()}.json"
    if path.is_file():
        rec = json.loads(path.read_text())
        return {"jct_h": float(rec["jct_h"]), "mk_h": float(rec["mk_h"])}
    res = run_task(task)
    record = {**res, "name": task.name, "set": list(task.vset), "seed": task.seed}
    atomic_write_text(path, json.dumps(record, sort_keys=True) + "\n")
    return res


def _cached_run_star(args: tuple[Task, Path | None]) -> dict[str, float]:
    return cached_run(*args)


def tasks_for(
    variants: Mapping[str, Mapping[str, Any]],
    sets: Sequence[vm.ValidationSet],
    seeds: Sequence[int],
    baseline: str,
) -> list[Task]:
    """The simulations of a comparison: ``shipped``, every variant and the baseline on every
    set and seed."""
    policies: dict[str, Mapping[str, Any] | None] = {SHIPPED: resolve_variant({})}
    policies.update({n: resolve_variant(v) for n, v in variants.items()})
    policies[baseline] = None
    return [Task(n, s, v, seed) for seed in seeds for v in sets for n, s in policies.items()]


def compare(
    variants: Mapping[str, Mapping[str, Any]],
    sets: Sequence[vm.ValidationSet],
    seeds: Sequence[int],
    *,
    baseline: str = "sia",
    cache: Path | None = None,
    jobs: int = 1,
    progress: bool = False,
) -> dict[str, dict[int, dict[vm.ValidationSet, dict[str, float]]]]:
    """Run the variants, ``shipped`` and the baseline on ``sets`` x ``seeds``.

    Returns:
        ``results[name][seed][set] = {"jct_h": ..., "mk_h": ...}`` for every variant, for
        ``shipped`` and for the baseline.
    """
    tasks = tasks_for(variants, sets, seeds, baseline)
    args = [(t, cache) for t in tasks]
    bar = partial(tqdm, total=len(tasks), desc="simulations", unit="run", disable=not progress)
    if jobs > 1:
        with Pool(jobs) as pool:
            res = list(bar(pool.imap(_cached_run_star, args, chunksize=1)))
    else:
        res = [_cached_run_star(a) for a in bar(args)]
    out: dict[str, dict[int, dict[vm.ValidationSet, dict[str, float]]]] = {}
    for t, r in zip(tasks, res, strict=True):
        out.setdefault(t.name, {}).setdefault(t.seed, {})[t.vset] = r
    return out


@dataclass
class SeedScore:
    """One policy on one seed, relative to the baseline."""

    score: float  # mean over the sets of jct / baseline's + makespan / baseline's
    at_or_below: int  # sets at or below the baseline on both metrics
    sets: int


def seed_scores(
    results: Mapping[str, Mapping[int, Mapping[vm.ValidationSet, Mapping[str, float]]]],
    baseline: str,
) -> dict[str, dict[int, SeedScore]]:
    """Per policy and seed, its :class:`SeedScore` (the baseline's own is 2.0), by
    ``validate_maifs``'s :func:`score_vs` and :func:`at_or_below` on that seed's rows."""
    out: dict[str, dict[int, SeedScore]] = {}
    for seed in results[baseline]:
        rows = [
            {"cluster": v[0], "start": v, "name": name, **r}
            for name, by_seed in results.items()
            for v, r in by_seed[seed].items()
        ]
        score = vm.score_vs(rows, baseline)
        below = vm.at_or_below(rows, baseline)
        for name in results:
            ok = below.get(name, [])
            n_sets = len(results[name][seed])
            out.setdefault(name, {})[seed] = SeedScore(
                score[name], sum(ok) if name != baseline else n_sets, n_sets
            )
    return out


def report(
    results: Mapping[str, Mapping[int, Mapping[vm.ValidationSet, Mapping[str, float]]]],
    baseline: str,
    margin: float | None = None,
    rows: bool = False,
) -> str:
    """The comparison as Markdown tables (see the module docstring)."""
    scores = seed_scores(results, baseline)
    seeds = sorted(scores[SHIPPED])
    head = "| policy | " + " | ".join(f"seed {s}" for s in seeds) + " |"
    lines = [
        f"Score relative to {baseline} ({baseline} = 2.0, lower is better; sets at or below "
        f"{baseline} on both metrics in parentheses), and the difference to {SHIPPED}:",
        "",
        head,
        "|---" * (len(seeds) + 1) + "|",
    ]
    ship = scores[SHIPPED]
    for name in [SHIPPED, *(n for n in scores if n not in (SHIPPED, baseline))]:
        cells = []
        for s in seeds:
            sc = scores[name][s]
            d = "" if name == SHIPPED else f", {sc.score - ship[s].score:+.5f}"
            cells.append(f"{sc.score:.5f} ({sc.at_or_below}/{sc.sets}{d})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if margin is not None:
        lines += ["", f"Below {SHIPPED} by more than {margin} on every seed:", ""]
        for name in (n for n in scores if n not in (SHIPPED, baseline)):
            ok = all(scores[name][s].score < ship[s].score - margin for s in seeds)
            lines.append(f"- {name}: {'yes' if ok else 'no'}")
    if rows:
        lines += ["", "Per set: avg JCT / makespan (h), the score's change against shipped:", ""]
        base = results[baseline]
        for name in (n for n in results if n not in (SHIPPED, baseline)):
            for s in seeds:
                for v, r in results[name][s].items():
                    b, sh = base[s][v], results[SHIPPED][s][v]
                    dj = (r["jct_h"] - sh["jct_h"]) / b["jct_h"]
                    delta = dj + (r["mk_h"] - sh["mk_h"]) / b["mk_h"]
                    if abs(delta) > 1e-12:
                        lines.append(
                            f"- {name}, seed {s}, {' '.join(map(str, v))}: {delta:+.3f} "
                            f"({r['jct_h']:.2f} / {r['mk_h']:.1f} against {sh['jct_h']:.2f} / "
                            f"{sh['mk_h']:.1f}; {baseline} {b['jct_h']:.2f} / {b['mk_h']:.1f})"
                        )
    return "\n".join(lines) + "\n"


def parse_variants(text: str) -> dict[str, dict[str, Any]]:
    """``--variants``: a JSON object (name -> settings), or ``@FILE`` holding one.

    Raises:
        ValueError: For invalid JSON, a non-object, or the reserved name ``shipped``.
    """
    src = Path(text[1:]).read_text() if text.startswith("@") else text
    try:
        obj = json.loads(src)
    except json.JSONDecodeError as err:
        raise ValueError(f"--variants: not valid JSON ({err})") from None
    if not isinstance(obj, dict) or not all(isinstance(v, dict) for v in obj.values()):
        raise ValueError('--variants: give an object of objects, e.g. {"A": {"wake": "all"}}')
    if SHIPPED in obj:
        raise ValueError(f"--variants: {SHIPPED!r} names the shipped configuration; rename it")
    return obj


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--variants", required=True, help="JSON object name -> settings, or @FILE")
    ap.add_argument("--sets", choices=sorted(SET_GROUPS), default="shifted")
    ap.add_argument("--clusters", nargs="+", default=None, help="keep the sets on these only")
    ap.add_argument("--seeds", type=int, nargs="+", required=True)
    ap.add_argument("--vs", default="sia", help="the baseline preset (default sia)")
    ap.add_argument("--margin", type=float, default=None, help="check the log's adoption rule")
    ap.add_argument("--rows", action="store_true", help="list the sets whose score changed")
    ap.add_argument("--cache", type=Path, default=Path("outputs/compare_cache"))
    ap.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    ap.add_argument("--fresh", action="store_true", help="run again, overwriting cached results")
    ap.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    ap.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = ap.parse_args(argv)
    if any(s >= 100 for s in args.seeds):
        ap.error(f"--seeds {args.seeds}: seeds 100 and up are the test seeds; use seeds < 100")
    if args.jobs < 1:
        ap.error(f"--jobs {args.jobs}: give at least 1")
    try:
        variants = parse_variants(args.variants)
        if args.vs in variants:
            raise ValueError(f"--variants: {args.vs!r} names the baseline (--vs); rename it")
        for v in variants.values():
            resolve_variant(v)
        vm.baseline_factory(args.vs)
    except (ValueError, OSError) as err:
        ap.error(str(err))
    sets = SET_GROUPS[args.sets]
    if args.clusters is not None:
        unknown = sorted(set(args.clusters) - {s[0] for s in sets})
        if unknown:
            ap.error(f"--clusters {' '.join(unknown)}: no set of --sets {args.sets} runs on it")
        sets = tuple(s for s in sets if s[0] in args.clusters)
    cache = None if args.no_cache else args.cache
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        if args.fresh:
            for t in tasks_for(variants, sets, args.seeds, args.vs):
                (cache / f"{t.key()}.json").unlink(missing_ok=True)
    results = compare(
        variants, sets, args.seeds, baseline=args.vs, cache=cache, jobs=args.jobs, progress=True
    )
    text = report(results, args.vs, margin=args.margin, rows=args.rows)
    print(text)
    if args.out is not None:
        atomic_write_text(args.out, text)


if __name__ == "__main__":
    main()
