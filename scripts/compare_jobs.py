"""Which jobs a scheduler's average JCT comes from: per-job figures by job class, head to head.

Reads the ``jobs.csv`` of an evaluation run directory (``scripts/evaluate.py`` writes it) and
prints, for every workload and cluster in it, one table per grouping (``--by``, default GPUs
requested and model): per class and scheduler the jobs, mean queueing delay, mean JCT, the
class's part of the average JCT and restarts (:func:`hetsched.reporting.job_breakdown`). A first
table gives each scheduler's average JCT and queueing delay and ``idle_gpu_hours_waiting`` (the
GPU-hours left idle while a job waited, from ``results_extended.csv``; see
:func:`hetsched.sim.metrics.idle_gpu_hours_waiting`).

Examples::

    python scripts/evaluate.py 'scheduler=[maifs,sia]' workload.start=30000 \\
        workload.busiest=false 'seed=[100]' hydra.run.dir=outputs/t3
    python scripts/compare_jobs.py outputs/t3
    python scripts/compare_jobs.py outputs/t3 --by model --schedulers maifs sia --out t3.md
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from hetsched.evaluation import atomic_write_text, markdown_table, read_csv_rows
from hetsched.reporting import breakdown_markdown, job_breakdown, mean_ci, to_number

#: Per-scheduler figures of the first table: (file, column).
HEAD: tuple[tuple[str, str], ...] = (
    ("results.csv", "avg_jct_h"),
    ("results.csv", "avg_queue_h"),
    ("results_extended.csv", "idle_gpu_hours_waiting"),
)


def head_markdown(run_dir: Path, schedulers: Sequence[str] | None) -> str:
    """Each scheduler's mean avg JCT, queueing delay and idle GPU-hours while jobs waited.

    A figure the run's files lack (``idle_gpu_hours_waiting`` before it was added) shows as nan.
    """
    cols: dict[str, list[dict[str, str]]] = {}
    for name in ("results.csv", "results_extended.csv"):
        path = run_dir / name
        cols[name] = read_csv_rows(path) if path.is_file() else []
    groups = list(
        dict.fromkeys((r["workload"], r["cluster"]) for r in cols["results.csv"])
    )  # fmt: skip
    parts = []
    for wl, cl in groups:
        scheds = list(
            dict.fromkeys(
                r["scheduler"]
                for r in cols["results.csv"]
                if (r["workload"], r["cluster"]) == (wl, cl)
                and (schedulers is None or r["scheduler"] in schedulers)
            )
        )
        body = []
        for s in scheds:
            rec: dict[str, object] = {"scheduler": s}
            for name, col in HEAD:
                vals = [
                    to_number(r.get(col))
                    for r in cols[name]
                    if (r["workload"], r["cluster"], r["scheduler"]) == (wl, cl, s)
                ]
                rec[col] = mean_ci(vals)[0] if vals else float("nan")  # nan: not in the run
            body.append(rec)
        parts.append(f"### {wl} on {cl}: mean over seeds\n")
        parts.append(markdown_table(body, ["scheduler", *(c for _, c in HEAD)]) + "\n")
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    """Print (and optionally write) the per-class tables of one run directory."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, help="an evaluation run directory holding jobs.csv")
    ap.add_argument(
        "--by", nargs="+", default=["gpus", "model"], help="jobs.csv columns to group by"
    )
    ap.add_argument("--schedulers", nargs="+", default=None, help="only these schedulers")
    ap.add_argument("--out", type=Path, default=None, help="also write the Markdown here")
    args = ap.parse_args(argv)
    jobs_csv = args.run_dir / "jobs.csv"
    if not jobs_csv.is_file():
        ap.error(
            f"{jobs_csv} not found: give the directory of one evaluation run "
            "(scripts/evaluate.py writes jobs.csv unless output.jobs=false)"
        )
    rows = read_csv_rows(jobs_csv)
    if args.schedulers is not None:
        known = sorted({r["scheduler"] for r in rows})
        unknown = [s for s in args.schedulers if s not in known]
        if unknown:
            ap.error(f"--schedulers {unknown} not in {jobs_csv}; it holds {known}")
        rows = [r for r in rows if r["scheduler"] in args.schedulers]
    parts = [head_markdown(args.run_dir, args.schedulers)]
    for by in args.by:
        try:
            parts.append(breakdown_markdown(job_breakdown(rows, by), by))
        except ValueError as e:
            ap.error(f"--by {by}: {e}")
    text = "\n".join(parts)
    print(text)
    if args.out is not None:
        atomic_write_text(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
