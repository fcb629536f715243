"""The evaluation runner: every scheduler, learned or fixed, on the same simulator and inputs.

For each seed the runner builds the cluster and the workload once (all randomness from one
``numpy.random.Generator`` seeded with the seed: the workload and each scheduler get independent
children of it), then runs every scheduler on identical copies and scores each run with
:func:`hetsched.sim.metrics.compute_metrics`.

:func:`write_outputs` writes a run directory: ``results.csv`` (one row per scheduler, workload,
cluster and seed), ``results_extended.csv``, ``summary.csv`` and ``results.md`` (mean ± 95 % CI
over seeds, see :mod:`hetsched.reporting`), ``jobs.csv``, ``timeline.csv``, ``plots/*.png`` and
TensorBoard events under ``tb/`` (see :mod:`hetsched.plots`), each atomically, and last the
completion marker :data:`MARKER` (config hash and a digest of every result file): only a
directory whose marker is valid (:func:`read_marker`) holds a finished run.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from hetsched.reporting import summarize, summary_markdown
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimConfig, SimResult, Simulator
from hetsched.sim.errors import SettingError
from hetsched.sim.metrics import RESULT_COLUMNS, compute_metrics, extended_metrics
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

WorkloadFactory = Callable[..., Workload]

#: Columns that identify one run (scheduler, workload, cluster, seed).
KEYS: tuple[str, ...] = ("scheduler", "workload", "cluster", "seed")


@dataclass
class RunOutput:
    """One (scheduler, seed) run: its result row, extra metrics and raw result."""

    row: dict[str, Any]
    extra: dict[str, float]
    result: SimResult
    timeline_rows: list[dict[str, float]] = field(default_factory=list)


def _one_seed(value: Any) -> int:
    """A seed as an int if it is a whole number >= 0 (``3``, ``3.0``, ``"3"``), else an error."""
    v: Any = value
    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            v = None
    if (
        isinstance(v, bool)
        or not isinstance(v, int | float | np.integer | np.floating)
        or not math.isfinite(float(v))
        or float(v) != int(v)
        or v < 0
    ):
        raise SettingError(
            f"seed={value!r} is not a whole number >= 0; give seed=0 or seed=[0,1,2]"
        )
    return int(v)


def seeds_from(value: Any) -> list[int]:
    """Normalise ``seed=0`` / ``seed=[0,1,2]`` to a list of ints.

    Raises:
        SettingError: For an empty list or a seed that is negative, fractional or not a number.
    """
    if isinstance(value, str):
        parts = [v for v in value.replace("[", "").replace("]", "").split(",") if v.strip()]
        seeds = [_one_seed(v) for v in parts]
    elif isinstance(value, Iterable):
        seeds = [_one_seed(v) for v in value]
    else:
        return [_one_seed(value)]
    if not seeds:
        raise SettingError("seed list is empty; give seed=0 or seed=[0,1,2]")
    return seeds


def resolve_seeds(seed: Any, seeds: Any = None, num_seeds: int | None = None) -> list[int]:
    """The seeds of an evaluation from the ``seed`` / ``seeds`` / ``num_seeds`` settings.

    Args:
        seed: One seed or a list of seeds (see :func:`seeds_from`).
        seeds: Alias of ``seed``; used instead of it when not ``None``.
        num_seeds: If set, ``num_seeds`` consecutive seeds starting at the first given seed.

    Returns:
        The seeds, in order, without duplicates.

    Raises:
        SettingError: If a seed is not a whole number >= 0, ``num_seeds`` is below 1 or given
            with a list of several seeds (it would drop them), or seeds repeat.
    """
    base = seeds_from(seeds if seeds is not None else seed)
    if num_seeds is not None:
        if isinstance(num_seeds, bool) or int(num_seeds) != num_seeds or int(num_seeds) < 1:
            raise SettingError(
                f"num_seeds={num_seeds!r} must be an integer >= 1 (or null to use seed as is)"
            )
        if len(base) > 1:
            raise SettingError(
                f"num_seeds={num_seeds} with the seed list {base} would drop listed seeds; give "
                "either a list (seed=[0,1,2]) or a first seed and num_seeds (seed=0 num_seeds=3)"
            )
        base = [base[0] + i for i in range(int(num_seeds))]
    if len(set(base)) != len(base):
        raise SettingError(f"seeds {base} repeat; give distinct seeds, e.g. seed=[0,1,2]")
    return base


def with_load(factory: WorkloadFactory, load: float) -> WorkloadFactory:
    """A workload factory whose arrival times are divided by ``load``.

    ``load=2`` doubles the arrival rate (same jobs, half the inter-arrival gaps); the workload is
    renamed ``<name>@x<load>`` so results at different loads stay apart. ``load=1`` returns
    ``factory`` unchanged.

    Raises:
        SettingError: If ``load`` is not a positive finite number.
    """
    try:
        value = float(load)
    except (TypeError, ValueError):
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise SettingError(f"load={load!r} must be a positive number (1.0 = the trace as is)")
    load = value
    if load == 1.0:
        return factory

    def scaled(**kwargs: Any) -> Workload:
        wl = factory(**kwargs)
        return replace(wl, arrival=wl.arrival / load, name=f"{wl.name}@x{load:g}")

    return scaled


def run_one(
    policy: Any,
    *,
    name: str,
    cluster: Cluster,
    workload: Workload,
    throughput: ThroughputModel,
    sim_config: SimConfig,
    seed: int,
    rng: np.random.Generator,
    on_step: Callable[[Any], None] | None = None,
) -> RunOutput:
    """Run one policy on one workload and score it."""
    sim = Simulator(cluster, workload, throughput, sim_config, seed=seed)
    if hasattr(policy, "reset"):  # sim.tm: the model with a reproduction mode's effects off
        policy.reset(cluster, workload, sim.tm, rng)
    res = sim.run(policy, on_step=on_step)
    row = compute_metrics(
        res, scheduler=name, workload=workload.name, cluster=cluster.name, seed=seed
    )
    extra = extended_metrics(res)
    stats = getattr(policy, "run_stats", None)
    if callable(stats):  # the policy's own counters, e.g. how often a rule overrode MAIFS
        extra.update({f"policy_{k}": float(v) for k, v in stats().items()})
    return RunOutput(row=row, extra=extra, result=res)


def evaluate(
    policies: Mapping[str, Callable[[], Any]],
    *,
    cluster: Cluster,
    workload_factory: WorkloadFactory,
    throughput: ThroughputModel,
    seeds: Sequence[int],
    sim_config: SimConfig,
    progress: bool = False,
) -> list[RunOutput]:
    """Run every policy on every seed.

    Args:
        policies: Scheduler name -> zero-argument factory returning a fresh policy.
        cluster: The cluster (the same for every seed).
        workload_factory: Called as ``factory(throughput=, cluster=, rng=)`` once per seed.
        throughput: Ground-truth throughput model.
        seeds: Seeds; each gives one workload and one rng stream per scheduler.
        sim_config: Engine settings.
        progress: Show a tqdm progress bar over runs, with simulated time.

    Returns:
        One :class:`RunOutput` per (seed, scheduler), seeds outermost.
    """
    from tqdm.auto import tqdm

    outs: list[RunOutput] = []
    total = len(seeds) * len(policies)
    bar = tqdm(total=total, desc="evaluate", unit="run", disable=not progress, leave=True)
    try:
        for seed in seeds:
            root = np.random.default_rng(seed)
            wl_rng, *pol_rngs = root.spawn(1 + len(policies))
            workload = workload_factory(throughput=throughput, cluster=cluster, rng=wl_rng)
            for (name, make), prng in zip(policies.items(), pol_rngs, strict=True):
                bar.set_postfix_str(f"{name} seed={seed}")
                out = run_one(
                    make(),
                    name=name,
                    cluster=cluster,
                    workload=workload,
                    throughput=throughput,
                    sim_config=sim_config,
                    seed=seed,
                    rng=prng,
                )
                outs.append(out)
                bar.update(1)
    finally:
        bar.close()
    return outs


# ---------------------------------------------------------------------- output
def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if v != 0 and (abs(v) >= 1e4 or abs(v) < 1e-3):
            return f"{v:.3g}"
        return f"{v:.3f}"
    return str(v)


def markdown_table(
    rows: Iterable[Mapping[str, Any]], columns: Sequence[str] = RESULT_COLUMNS
) -> str:
    """A GitHub-flavoured Markdown table with right-aligned numbers."""
    rows = list(rows)
    cells = [[_fmt(r.get(c, "")) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(r.get(c), int | float) for r in rows) for c in columns]

    def line(vals: Sequence[str]) -> str:
        out = []
        for i, v in enumerate(vals):
            out.append(v.rjust(widths[i]) if numeric[i] else v.ljust(widths[i]))
        return "| " + " | ".join(out) + " |"

    sep = (
        "|"
        + "|".join(
            ("-" * (w + 1) + ":") if num else (":" + "-" * (w + 1))
            for w, num in zip(widths, numeric, strict=True)
        )
        + "|"
    )
    return "\n".join([line(columns), sep] + [line(c) for c in cells])


def atomic_write_text(path: Path, text: str) -> None:
    """Write a file atomically (temp file in the same directory, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def csv_text(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """CSV text with a header row."""
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({c: r.get(c, "") for c in columns})
    return buf.getvalue()


def job_records(out: RunOutput) -> list[dict[str, Any]]:
    """Per-job records of one run: arrival, start, finish (s), GPU types used, restarts."""
    res = out.result
    wl = res.workload
    used = res.gpu_s_by_type > 0
    present = np.flatnonzero((res.cluster.gpus_per_type() > 0) | used.any(axis=0))
    recs = []
    for j in range(wl.num_jobs):
        types = "+".join(GPU_TYPE_NAMES[k] for k in np.flatnonzero(used[j]))
        recs.append(
            {
                "scheduler": out.row["scheduler"],
                "workload": out.row["workload"],
                "cluster": out.row["cluster"],
                "seed": out.row["seed"],
                "job_id": str(wl.job_id[j]),
                "model": res.throughput.models[int(wl.model[j])],
                "gpus": int(wl.req_gpus[j]),
                "arrival_s": float(wl.arrival[j]),
                "start_s": float(res.start_time[j]),
                "finish_s": float(res.finish_time[j]),
                "jct_s": float(res.finish_time[j] - wl.arrival[j]),
                "gpu_types": types,
                "gpu_hours": float(res.gpu_s_by_type[j].sum() / 3600.0),
                "restarts": int(res.restarts[j]),
                "preemptions": int(res.preemptions[j]),
                **{
                    f"gpu_hours_{GPU_TYPE_NAMES[k]}": float(res.gpu_s_by_type[j, k] / 3600.0)
                    for k in present
                },
            }
        )
    return recs


def timeline_records(outs: Sequence[RunOutput]) -> list[dict[str, Any]]:
    """Per-round cluster records of every run (``timeline.csv`` rows).

    Each row: ``scheduler, workload, cluster, seed``, then the engine's timeline columns
    (``t0, dt`` in s, ``busy_gpus, running, pending, cpus_used, mem_used, busy_<type>``) and
    ``utilization`` (busy GPUs / cluster GPUs).
    """
    trs: list[dict[str, Any]] = []
    for o in outs:
        tl = dict(o.result.timeline)
        if "busy_gpus" in tl:
            tl["utilization"] = np.asarray(tl["busy_gpus"]) / max(o.result.cluster.num_gpus, 1)
        names = sorted(tl, key=_tl_order)
        key = {c: o.row[c] for c in ("scheduler", "workload", "cluster", "seed")}
        cols = [np.asarray(tl[k], dtype=np.float64).tolist() for k in names]
        trs.extend(
            {**key, **dict(zip(names, vals, strict=True))} for vals in zip(*cols, strict=True)
        )
    return trs


def extended_records(outs: Sequence[RunOutput]) -> list[dict[str, Any]]:
    """``results_extended.csv`` rows: the result keys plus :func:`extended_metrics`."""
    return [
        {**{c: o.row[c] for c in ("scheduler", "workload", "cluster", "seed")}, **o.extra}
        for o in outs
    ]


def write_outputs(
    outs: Sequence[RunOutput],
    out_dir: Path,
    *,
    jobs: bool = True,
    timeline: bool = True,
    plots: bool = False,
    tensorboard: bool = False,
    confidence: float = 0.95,
    config_hash: str | None = None,
) -> str:
    """Write a run directory, then its completion marker.

    Files: ``results_extended.csv``, ``summary.csv`` (mean and CI half-width per scheduler),
    ``results.md`` (summary tables, then the per-seed table), optionally ``jobs.csv``,
    ``timeline.csv``, ``plots/{metrics,jct_cdf,gpu_share,timeline}.png`` and TensorBoard events
    in ``tb/``, then ``results.csv`` and finally the completion marker :data:`MARKER` (see
    :func:`write_marker`). Every file is written atomically, and the old marker and result files
    are removed first (:func:`clear_run`), so a run killed midway leaves no marker and nothing
    of an earlier run in the directory.

    Args:
        outs: The runs (one per scheduler and seed; one workload and cluster).
        out_dir: Directory to write into (created if needed).
        jobs: Write per-job records.
        timeline: Write the per-round cluster timeline.
        plots: Write PNG plots (matplotlib).
        tensorboard: Write TensorBoard scalars, figures and the summary text.
        confidence: Confidence level of the summary intervals.
        config_hash: Hash of the run's resolved config (:func:`config_hash`), stored in the
            marker for ``skip_done``; ``None`` = a run that is never skipped.

    Returns:
        The Markdown summary (as at the top of ``results.md``).
    """
    out_dir = Path(out_dir)
    clear_run(out_dir)
    rows = [o.row for o in outs]
    ext_rows = extended_records(outs)
    extra_cols = sorted({k for o in outs for k in o.extra})
    atomic_write_text(
        out_dir / "results_extended.csv",
        csv_text(ext_rows, ["scheduler", "workload", "cluster", "seed", *extra_cols]),
    )
    summary = summarize(rows, ext_rows, confidence=confidence)
    atomic_write_text(
        out_dir / "summary.csv", csv_text(summary, list(summary[0]) if summary else [])
    )
    summary_md = summary_markdown(summary, confidence=confidence)
    md = "# Results\n\n" + summary_md + "\n## Per-seed results\n\n" + markdown_table(rows) + "\n"
    atomic_write_text(out_dir / "results.md", md)
    recs = [r for o in outs for r in job_records(o)] if (jobs or plots or tensorboard) else []
    if jobs:
        atomic_write_text(out_dir / "jobs.csv", csv_text(recs, list(recs[0]) if recs else []))
    trs = timeline_records(outs) if (timeline or plots or tensorboard) else []
    if timeline:
        cols = [
            *KEYS,
            *sorted({k for r in trs[:1] for k in r} - set(KEYS), key=_tl_order),
        ]
        atomic_write_text(out_dir / "timeline.csv", csv_text(trs, cols))
    if (plots or tensorboard) and outs:
        from hetsched import plots as plt_mod

        num_gpus = int(outs[0].result.cluster.num_gpus)
        title = f"{rows[0]['workload']} on {rows[0]['cluster']}"
        figs = plt_mod.make_figures(summary, recs, trs, num_gpus=num_gpus, title=title)
        if plots:
            plt_mod.save_figures(figs, out_dir / "plots")
        if tensorboard:
            plt_mod.write_tensorboard(
                out_dir / "tb",
                rows,
                summary_md=summary_md,
                timeline=trs,
                figures=figs,
                num_gpus=num_gpus,
            )
    atomic_write_text(out_dir / "results.csv", csv_text(rows, RESULT_COLUMNS))
    write_marker(out_dir, config_hash)
    return summary_md


# ---------------------------------------------------------------------- completion markers
#: Completion marker of a run directory (JSON: config hash and a digest of every result file).
MARKER = "run.json"

#: Result files a run directory may hold (removed before a run writes, digested in the marker).
RESULT_FILES: tuple[str, ...] = (
    "results.csv", "results_extended.csv", "summary.csv", "results.md", "jobs.csv",
    "timeline.csv", "plots/metrics.png", "plots/jct_cdf.png", "plots/gpu_share.png",
    "plots/timeline.png",
)  # fmt: skip


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def config_hash(config: Mapping[str, Any]) -> str:
    """A hash of a resolved run config (hex SHA-256).

    The config (plain JSON-like values; the caller drops settings that do not change results,
    such as output options) is serialised with sorted keys; every string value that names an
    existing file adds that file's size and modification time, so a trace edited in place
    changes the hash too.
    """
    files: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, Mapping):
            for x in v.values():
                walk(x)
        elif isinstance(v, list | tuple):
            for x in v:
                walk(x)
        elif isinstance(v, str) and 0 < len(v) < 4096:
            p = Path(v)
            try:
                if p.is_file():
                    st = p.stat()
                    files.append(f"{p.resolve()}:{st.st_size}:{st.st_mtime_ns}")
            except OSError:
                pass

    walk(config)
    text = json.dumps({"config": config, "files": sorted(files)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def clear_run(out_dir: Path) -> None:
    """Remove a run directory's marker, then its result files (nothing else is touched)."""
    out_dir = Path(out_dir)
    (out_dir / MARKER).unlink(missing_ok=True)
    for name in RESULT_FILES:
        (out_dir / name).unlink(missing_ok=True)


def write_marker(out_dir: Path, config_hash: str | None) -> None:
    """Write the completion marker: the config hash and a SHA-256 of every result file present."""
    out_dir = Path(out_dir)
    digests = {n: _file_digest(out_dir / n) for n in RESULT_FILES if (out_dir / n).is_file()}
    body = {"config_hash": config_hash, "files": digests}
    atomic_write_text(out_dir / MARKER, json.dumps(body, indent=1, sort_keys=True) + "\n")


def read_marker(out_dir: Path) -> dict[str, Any] | None:
    """The run's marker if it is valid: readable, lists ``results.csv``, and every listed file
    is present with the recorded digest. ``None`` otherwise (no marker, a killed or stale run).
    """
    path = Path(out_dir) / MARKER
    try:
        body = json.loads(path.read_text())
        files = body["files"]
        if not isinstance(files, dict) or "results.csv" not in files:
            return None
        for name, digest in files.items():
            if _file_digest(Path(out_dir) / name) != digest:
                return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return dict(body)


def run_done(out_dir: Path, config_hash: str) -> bool:
    """Whether ``out_dir`` holds a complete run of exactly this config (``skip_done``)."""
    marker = read_marker(out_dir)
    return marker is not None and marker.get("config_hash") == config_hash


def read_csv_rows(path: Path) -> list[dict[str, str]]:
    """Rows of a CSV file with a header, as dicts of strings."""
    with Path(path).open(newline="") as fh:
        return list(csv.DictReader(fh))


def results_complete(
    out_dir: Path,
    schedulers: Iterable[str],
    seeds: Iterable[int],
    cluster: str | None = None,
) -> bool:
    """Whether ``out_dir/results.csv`` already holds every (scheduler, seed) of a run.

    Args:
        out_dir: The run directory.
        schedulers: Scheduler names the run evaluates.
        seeds: Seeds the run evaluates.
        cluster: If given, the rows must also be for this cluster name.

    Returns:
        True if the file exists, has the :data:`RESULT_COLUMNS` header and a row for every
        (scheduler, seed) pair; False otherwise (including an unreadable file).
    """
    path = Path(out_dir) / "results.csv"
    if not path.is_file():
        return False
    try:
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            if tuple(reader.fieldnames or ()) != RESULT_COLUMNS:
                return False
            have = {
                (r["scheduler"], int(r["seed"]))
                for r in reader
                if cluster is None or r["cluster"] == cluster
            }
    except (OSError, ValueError, KeyError, csv.Error):
        return False
    want = {(str(s), int(d)) for s in schedulers for d in seeds}
    return want <= have


def _tl_order(name: str) -> tuple[int, str]:
    base = ["t0", "dt", "busy_gpus", "running", "pending", "cpus_used", "mem_used"]
    return (base.index(name), name) if name in base else (len(base), name)
