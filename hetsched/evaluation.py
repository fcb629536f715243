"""The evaluation runner: every scheduler, learned or fixed, on the same simulator and inputs.

For each seed the runner builds the cluster and the workload once (all randomness from one
``numpy.random.Generator`` seeded with the seed: the workload and each scheduler get independent
children of it), then runs every scheduler on identical copies and scores each run with
:func:`hetsched.sim.metrics.compute_metrics`.
"""

from __future__ import annotations

import csv
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimConfig, SimResult, Simulator
from hetsched.sim.metrics import RESULT_COLUMNS, compute_metrics, extended_metrics
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

WorkloadFactory = Callable[..., Workload]


@dataclass
class RunOutput:
    """One (scheduler, seed) run: its result row, extra metrics and raw result."""

    row: dict[str, Any]
    extra: dict[str, float]
    result: SimResult
    timeline_rows: list[dict[str, float]] = field(default_factory=list)


def seeds_from(value: Any) -> list[int]:
    """Normalise ``seed=0`` / ``seed=[0,1,2]`` to a list of ints."""
    if isinstance(value, int | np.integer):
        return [int(value)]
    if isinstance(value, str):
        return [int(v) for v in value.replace("[", "").replace("]", "").split(",") if v.strip()]
    seeds = [int(v) for v in value]
    if not seeds:
        raise ValueError("seed list is empty; give seed=0 or seed=[0,1,2]")
    return seeds


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
    if hasattr(policy, "reset"):
        policy.reset(cluster, workload, throughput, rng)
    sim = Simulator(cluster, workload, throughput, sim_config, seed=seed)
    res = sim.run(policy, on_step=on_step)
    row = compute_metrics(
        res, scheduler=name, workload=workload.name, cluster=cluster.name, seed=seed
    )
    return RunOutput(row=row, extra=extended_metrics(res), result=res)


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
    recs = []
    for j in range(wl.num_jobs):
        types = "+".join(GPU_TYPE_NAMES[k] for k in np.flatnonzero(used[j]))
        recs.append(
            {
                "scheduler": out.row["scheduler"],
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
            }
        )
    return recs


def write_outputs(
    outs: Sequence[RunOutput], out_dir: Path, *, jobs: bool = True, timeline: bool = True
) -> None:
    """Write ``results.csv``, ``results.md`` and optionally ``jobs.csv`` / ``timeline.csv``."""
    rows = [o.row for o in outs]
    atomic_write_text(out_dir / "results.csv", csv_text(rows, RESULT_COLUMNS))
    extra_cols = sorted({k for o in outs for k in o.extra})
    ext_rows = [
        {**{c: o.row[c] for c in ("scheduler", "workload", "cluster", "seed")}, **o.extra}
        for o in outs
    ]
    atomic_write_text(
        out_dir / "results_extended.csv",
        csv_text(ext_rows, ["scheduler", "workload", "cluster", "seed", *extra_cols]),
    )
    md = "# Results\n\n" + markdown_table(rows) + "\n"
    atomic_write_text(out_dir / "results.md", md)
    if jobs:
        recs = [r for o in outs for r in job_records(o)]
        atomic_write_text(out_dir / "jobs.csv", csv_text(recs, list(recs[0]) if recs else []))
    if timeline:
        trs: list[dict[str, Any]] = []
        for o in outs:
            tl = o.result.timeline
            n = len(tl.get("t0", []))
            for i in range(n):
                trs.append(
                    {
                        "scheduler": o.row["scheduler"],
                        "seed": o.row["seed"],
                        **{k: float(v[i]) for k, v in tl.items()},
                    }
                )
        cols = [
            "scheduler",
            "seed",
            *sorted({k for o in outs for k in o.result.timeline}, key=_tl_order),
        ]
        atomic_write_text(out_dir / "timeline.csv", csv_text(trs, cols))


def _tl_order(name: str) -> tuple[int, str]:
    base = ["t0", "dt", "busy_gpus", "running", "pending", "cpus_used", "mem_used"]
    return (base.index(name), name) if name in base else (len(base), name)
