"""Merge the results of many evaluation runs (e.g. a Hydra sweep) into one table and plot set.

Finds every ``results.csv`` under a directory (with the ``results_extended.csv``, ``jobs.csv`` and
``timeline.csv`` next to each) whose run directory holds a valid completion marker ``run.json``
(written last by ``scripts/evaluate.py``; every result file matches its recorded digest), so an
unfinished, killed or partly overwritten run is skipped with a warning and never mixed with
another run's files; it exits with status 2 when no valid run is left. It merges them (one row per scheduler, workload, cluster and seed; a
repeated row is kept once, first found in path order, with a warning) and writes into ``--out``
(default ``<dir>/summary``): ``results.csv``, ``results_extended.csv``, ``summary.csv``,
``results.md`` and, unless ``--no-plots``, ``plots/<workload>__<cluster>/*.png``.

Examples::

    python scripts/summarize.py outputs/multirun/2026-01-01/12-00-00
    python scripts/summarize.py sweeps/load --out reports/load --no-plots
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hetsched.evaluation import (
    KEYS,
    MARKER,
    atomic_write_text,
    csv_text,
    markdown_table,
    read_csv_rows,
    read_marker,
)
from hetsched.reporting import summarize, summary_markdown
from hetsched.sim.metrics import RESULT_COLUMNS


def _key(r: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(r[k]) for k in KEYS)


def find_results(root: Path, exclude: Path | None = None) -> list[Path]:
    """Every ``results.csv`` under ``root`` (sorted), outside ``exclude``."""
    found = sorted(root.rglob("results.csv"))
    if exclude is not None:
        ex = exclude.resolve()
        found = [p for p in found if ex not in p.resolve().parents]
    return found


def _merge(
    files: Sequence[Path],
    name: str,
    keep: set[tuple[str, ...]] | None = None,
    markers: dict[Path, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Rows of ``<dir>/<name>`` next to each results file, once per run key (or those in keep).

    Only files that the run's valid marker lists are read (``markers``: run directory -> marker,
    as :func:`read_marker` returns it; looked up when not given).
    """
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, ...]] = set()
    for f in files:
        path = f.parent / name
        marker = (markers or {}).get(f.parent) or read_marker(f.parent)
        if marker is None or name not in marker["files"]:
            continue  # only files the run's valid marker vouches for
        local: set[tuple[str, ...]] = set()
        for r in read_csv_rows(path):
            k = _key(r)
            if (keep is not None and k not in keep) or (k in seen and k not in local):
                continue
            local.add(k)
            out.append(r)
        seen |= local
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@-]+", "_", text)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path, help="directory searched recursively for results.csv")
    ap.add_argument("--out", type=Path, default=None, help="output dir (default: DIR/summary)")
    ap.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    ap.add_argument("--confidence", type=float, default=0.95, help="CI level (default 0.95)")
    args = ap.parse_args(argv)
    root: Path = args.dir
    if not root.is_dir():
        ap.error(f"{root} is not a directory; give the sweep or run directory to summarise")
    out_dir: Path = args.out or root / "summary"
    files = find_results(root, exclude=out_dir)
    if not files:
        ap.error(f"no results.csv under {root}; is it the sweep directory of scripts/evaluate.py?")
    markers = {f.parent: m for f in files if (m := read_marker(f.parent)) is not None}
    valid = [f for f in files if f.parent in markers]
    for f in sorted(set(files) - set(valid)):
        print(
            f"warning: {f.parent} has no valid {MARKER} (unfinished, killed or stale run); skipped",
            file=sys.stderr,
        )
    if not valid:
        print(
            f"error: none of the {len(files)} results.csv under {root} has a valid {MARKER}; "
            "rerun those evaluations (scripts/evaluate.py writes the marker last)",
            file=sys.stderr,
        )
        return 2
    files = valid
    rows: list[dict[str, Any]] = []
    index: dict[tuple[str, ...], Path] = {}
    for f in files:
        file_rows = read_csv_rows(f)
        if file_rows and tuple(file_rows[0]) != RESULT_COLUMNS:
            print(f"warning: {f} does not have the result columns; skipped", file=sys.stderr)
            continue
        for r in file_rows:
            k = _key(r)
            if k in index:
                print(
                    f"warning: {dict(zip(KEYS, k, strict=True))} in both {index[k]} and {f}; "
                    f"keeping the first",
                    file=sys.stderr,
                )
                continue
            index[k] = f
            rows.append(r)
    kept_files = sorted(set(index.values()))
    ext = _merge(kept_files, "results_extended.csv", set(index), markers)
    summary = summarize(rows, ext, confidence=args.confidence)
    md = summary_markdown(summary, confidence=args.confidence)
    atomic_write_text(out_dir / "results.csv", csv_text(rows, RESULT_COLUMNS))
    if ext:
        cols = list(dict.fromkeys(c for r in ext for c in r))
        atomic_write_text(out_dir / "results_extended.csv", csv_text(ext, cols))
    atomic_write_text(out_dir / "summary.csv", csv_text(summary, list(summary[0])))
    text = f"# Summary of {len(kept_files)} run(s) under {root}\n\n{md}\n## Per-seed results\n\n"
    atomic_write_text(out_dir / "results.md", text + markdown_table(rows) + "\n")
    if not args.no_plots:
        from hetsched import plots

        jobs = _merge(kept_files, "jobs.csv", set(index), markers)
        tl = _merge(kept_files, "timeline.csv", set(index), markers)
        for wl, cl in dict.fromkeys((str(r["workload"]), str(r["cluster"])) for r in summary):

            def grp(rs: list[dict[str, Any]], wl: str = wl, cl: str = cl) -> list[dict[str, Any]]:
                return [r for r in rs if r.get("workload") == wl and r.get("cluster") == cl]

            figs = plots.make_figures(grp(summary), grp(jobs), grp(tl), title=f"{wl} on {cl}")
            plots.save_figures(figs, out_dir / "plots" / _slug(f"{wl}__{cl}"))
    print(md)
    print(f"merged {len(rows)} rows from {len(kept_files)} run(s) into {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
