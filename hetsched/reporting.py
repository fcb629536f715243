"""Summary tables over seeds: mean and 95 % confidence interval, best per column, JCT ratios.

Input rows are result rows (:data:`hetsched.sim.metrics.RESULT_COLUMNS`, one per scheduler,
workload, cluster and seed), either as produced by :func:`hetsched.sim.metrics.compute_metrics`
or read back from ``results.csv`` (strings are converted). Rows are grouped by
``(workload, cluster)``; within a group each scheduler gets one summary row:

* ``<metric>_mean`` and ``<metric>_ci95``: the mean over seeds and the half-width of the
  two-sided Student-t confidence interval (``t_{n-1} * s / sqrt(n)``, sample standard deviation
  ``s``). A single seed has no interval (NaN, shown as the bare mean). A seed with an undefined
  value (NaN, e.g. a run with unfinished jobs) makes the mean NaN: it is never dropped silently.
* ``jct_vs_best``: the scheduler's mean ``avg_jct_h`` divided by the lowest mean ``avg_jct_h`` in
  its group (1.0 for the best scheduler).
* ``jct_vs_lb``: the mean over seeds of ``avg_jct_h / lb_avg_jct_h``, where ``lb_avg_jct_h`` is the
  mean best-solo-time lower bound of that seed's workload (``extended_metrics``, metrics.md §4);
  NaN when no extended rows are given.

"Best" per column follows :data:`HIGHER_IS_BETTER` (utilisation); every other metric is better
lower.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

#: Metrics shown in the summary table, in order (all are columns of ``RESULT_COLUMNS``).
TABLE_METRICS: tuple[str, ...] = (
    "avg_jct_h", "p99_jct_h", "makespan_h", "avg_queue_h", "ftf_rho_mean",
    "ftf_rho_max", "utilization", "gpu_hours", "restarts", "decision_ms_mean",
)  # fmt: skip

#: Metrics where a larger value is better; every other metric is better when smaller.
HIGHER_IS_BETTER: frozenset[str] = frozenset({"utilization", "effective_utilization"})

#: Keys that identify a result row (the rest are metrics).
KEY_COLUMNS: tuple[str, ...] = ("scheduler", "workload", "cluster", "seed")

#: Summary rows are grouped by these keys (one table section per group).
GROUP_COLUMNS: tuple[str, ...] = ("workload", "cluster")


def to_number(value: Any) -> float:
    """A float from a number or a CSV cell (empty or unparsable cells are NaN)."""
    if isinstance(value, int | float | np.integer | np.floating):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return float("nan")


def mean_ci(values: Sequence[float] | np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Mean and confidence-interval half-width of a sample.

    Args:
        values: The per-seed values, shape (n,).
        confidence: Two-sided confidence level in (0, 1).

    Returns:
        ``(mean, half_width)``; ``half_width`` is NaN for fewer than two values, and both are NaN
        for an empty sample or one containing NaN.

    Raises:
        ValueError: If ``confidence`` is not in (0, 1).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence!r} must be in (0, 1), e.g. 0.95")
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n == 0:
        return float("nan"), float("nan")
    mean = float(x.mean())
    if n < 2 or not np.isfinite(mean):
        return mean, float("nan")
    sd = float(x.std(ddof=1))
    t = float(stats.t.ppf(0.5 + confidence / 2.0, n - 1))
    return mean, t * sd / math.sqrt(n)


def _ordered_unique(values: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def summarize(
    rows: Iterable[Mapping[str, Any]],
    extended: Iterable[Mapping[str, Any]] | None = None,
    *,
    metrics: Sequence[str] = TABLE_METRICS,
    confidence: float = 0.95,
) -> list[dict[str, Any]]:
    """One summary row per (workload, cluster, scheduler), in order of first appearance.

    Args:
        rows: Result rows (one per scheduler, workload, cluster and seed).
        extended: Rows of ``results_extended.csv`` (same keys plus ``lb_avg_jct_h``), used for
            ``jct_vs_lb``; ``None`` leaves it NaN.
        metrics: Metric columns to summarise.
        confidence: Confidence level of the interval.

    Returns:
        Dicts with ``workload, cluster, scheduler, n_seeds, seeds`` (``;``-joined), then
        ``<m>_mean, <m>_ci95`` per metric, ``jct_vs_best`` and ``jct_vs_lb``.
    """
    rows = list(rows)
    lb: dict[tuple[str, str, str, int], float] = {}
    for e in extended or ():
        key = (str(e["scheduler"]), str(e["workload"]), str(e["cluster"]), int(e["seed"]))
        lb[key] = to_number(e.get("lb_avg_jct_h", float("nan")))
    groups = _ordered_unique((str(r["workload"]), str(r["cluster"])) for r in rows)
    out: list[dict[str, Any]] = []
    for wl, cl in groups:
        g_rows = [r for r in rows if str(r["workload"]) == wl and str(r["cluster"]) == cl]
        g_out: list[dict[str, Any]] = []
        for sched in _ordered_unique(str(r["scheduler"]) for r in g_rows):
            s_rows = [r for r in g_rows if str(r["scheduler"]) == sched]
            seeds = [int(r["seed"]) for r in s_rows]
            rec: dict[str, Any] = {
                "workload": wl,
                "cluster": cl,
                "scheduler": sched,
                "n_seeds": len(s_rows),
                "seeds": ";".join(str(s) for s in seeds),
            }
            for m in metrics:
                mean, half = mean_ci([to_number(r.get(m)) for r in s_rows], confidence)
                rec[f"{m}_mean"], rec[f"{m}_ci95"] = mean, half
            ratios = [
                to_number(r.get("avg_jct_h")) / lb.get((sched, wl, cl, s), float("nan"))
                for r, s in zip(s_rows, seeds, strict=True)
            ]
            rec["jct_vs_lb"] = float(np.mean(ratios)) if ratios else float("nan")
            g_out.append(rec)
        jct = np.array([to_number(r.get("avg_jct_h_mean", float("nan"))) for r in g_out])
        best = float(np.nanmin(jct)) if np.isfinite(jct).any() else float("nan")
        for r, v in zip(g_out, jct, strict=True):
            r["jct_vs_best"] = float(v / best) if best > 0 else float("nan")
        out.extend(g_out)
    return out


def best_mask(values: Sequence[float], metric: str, rel_tol: float = 1e-9) -> list[bool]:
    """Which entries are best for ``metric`` (ties all count; NaN never does).

    Args:
        values: One value per scheduler.
        metric: Metric name (its direction comes from :data:`HIGHER_IS_BETTER`).
        rel_tol: Relative tolerance for ties.

    Returns:
        One flag per value; all False when fewer than two values are finite.
    """
    x = np.asarray(values, dtype=np.float64)
    fin = np.isfinite(x)
    if fin.sum() < 2:
        return [False] * x.size
    target = x[fin].max() if metric in HIGHER_IS_BETTER else x[fin].min()
    close = np.isclose(x, target, rtol=rel_tol, atol=0.0) & fin
    return [bool(b) for b in close]


def fmt_number(v: float) -> str:
    """A compact number: 3 decimals, or 3 significant digits for very large or small values."""
    if not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if v != 0 and (abs(v) >= 1e4 or abs(v) < 1e-3):
        return f"{v:.3g}"
    return f"{v:.3f}"


def _cell(mean: float, half: float, bold: bool) -> str:
    m = fmt_number(mean)
    if abs(half) <= 1e-9 * max(abs(mean), 1.0):
        half = 0.0  # rounding noise of identical per-seed values
    if bold:
        m = f"**{m}**"
    return m if math.isnan(half) else f"{m} ± {fmt_number(half)}"


def _table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(header)]

    def line(vals: Sequence[str]) -> str:
        cells = [
            v.ljust(w) if i == 0 else v.rjust(w)
            for i, (v, w) in enumerate(zip(vals, widths, strict=True))
        ]
        return "| " + " | ".join(cells) + " |"

    sep = "|" + "|".join(
        (":" + "-" * (w + 1)) if i == 0 else ("-" * (w + 1) + ":") for i, w in enumerate(widths)
    )
    return "\n".join([line(header), sep + "|"] + [line(r) for r in body])


def summary_markdown(
    summary: Sequence[Mapping[str, Any]],
    *,
    metrics: Sequence[str] = TABLE_METRICS,
    confidence: float = 0.95,
    heading_level: int = 2,
) -> str:
    """Markdown tables of a :func:`summarize` result, one section per (workload, cluster).

    Each cell is ``mean ± half-width``; the best mean per column within a section is bold. The
    columns ``jct/best`` and ``jct/LB`` follow ``avg_jct_h`` when it is shown.

    Args:
        summary: Output of :func:`summarize`.
        metrics: Metrics to show (each needs ``<m>_mean`` and ``<m>_ci95`` in ``summary``).
        confidence: The confidence level used (for the caption only).
        heading_level: Markdown heading level of each section title.

    Returns:
        The Markdown text (sections separated by blank lines, ending in a legend).
    """
    pct = f"{100 * confidence:g} %"
    parts: list[str] = []
    groups = _ordered_unique((str(r["workload"]), str(r["cluster"])) for r in summary)
    for wl, cl in groups:
        rs = [r for r in summary if str(r["workload"]) == wl and str(r["cluster"]) == cl]
        n = sorted({int(r["n_seeds"]) for r in rs})
        n_txt = f"{n[0]} seed{'s' if n[0] != 1 else ''}" if len(n) == 1 else f"{n[0]}-{n[-1]} seeds"
        parts.append(f"{'#' * heading_level} {wl} on {cl}: mean ± {pct} CI over {n_txt}\n")
        header = ["scheduler"]
        cols: list[list[str]] = [[str(r["scheduler"]) for r in rs]]
        for m in metrics:
            means = [to_number(r.get(f"{m}_mean")) for r in rs]
            halves = [to_number(r.get(f"{m}_ci95")) for r in rs]
            best = best_mask(means, m)
            header.append(m)
            cols.append([_cell(a, h, b) for a, h, b in zip(means, halves, best, strict=True)])
            if m == "avg_jct_h":
                for key, title in (("jct_vs_best", "jct/best"), ("jct_vs_lb", "jct/LB")):
                    vals = [to_number(r.get(key)) for r in rs]
                    flags = best_mask(vals, key)
                    header.append(title)
                    cols.append(
                        [_cell(v, float("nan"), b) for v, b in zip(vals, flags, strict=True)]
                    )
        body = [list(row) for row in zip(*cols, strict=True)]
        parts.append(_table(header, body) + "\n")
    parts.append(
        f"Cells: mean ± half-width of the two-sided {pct} Student-t interval over seeds (no "
        "interval for one seed). **Bold**: best in the column (higher is better for "
        f"{', '.join(sorted(HIGHER_IS_BETTER & set(metrics))) or 'none'}, lower for the rest). "
        "jct/best: mean avg JCT over the best mean avg JCT; jct/LB: mean over seeds of avg JCT "
        "over the best-solo-time lower bound (metrics.md §4).\n"
    )
    return "\n".join(parts)


#: Columns every row given to :func:`job_breakdown` needs (and ``jct_s`` or ``finish_s``).
_JOB_NEEDS: tuple[str, ...] = ("scheduler", "workload", "cluster", "seed", "arrival_s", "start_s")


def _class_key(value: str) -> tuple[int, float, str]:
    """Sort classes numerically when they are numbers (GPU counts), else by name."""
    x = to_number(value)
    return (0, x, "") if math.isfinite(x) else (1, 0.0, value)


def job_breakdown(jobs: Iterable[Mapping[str, Any]], by: str) -> list[dict[str, Any]]:
    """Per-job figures of every scheduler, grouped by a job attribute (e.g. GPUs or model).

    Shows which jobs a scheduler's average JCT comes from: the figures of one class of jobs
    side by side for every scheduler that ran the same workload.

    Args:
        jobs: Per-job rows (``jobs.csv``, :func:`hetsched.evaluation.job_records`), one per
            scheduler, workload, cluster, seed and job.
        by: The column to group by, e.g. ``"gpus"`` or ``"model"``.

    Returns:
        One dict per (workload, cluster, class, scheduler), classes in numeric or name order and
        schedulers in order of first appearance: ``workload, cluster, <by>, scheduler``, then
        ``jobs`` (jobs of the class per seed, mean over seeds), ``queue_h`` and ``jct_h`` (mean
        initial queueing delay and JCT over the class's jobs of all seeds, hours),
        ``restarts`` (mean per job) and ``jct_share_h``: the class's part of the scheduler's
        average JCT (the class's JCT sum over all jobs of the seed, mean over seeds), so the
        shares of one scheduler add up to its ``avg_jct_h``. An unfinished job makes its class's
        JCT figures NaN; no job is dropped.

    Raises:
        ValueError: If a row lacks ``by`` or a column the figures need, naming it.
    """
    rows = list(jobs)
    for i, r in enumerate(rows):
        missing = [c for c in (*_JOB_NEEDS, by) if c not in r]
        if "jct_s" not in r and "finish_s" not in r:
            missing.append("jct_s")
        if missing:
            raise ValueError(
                f"job row {i} has no column(s) {missing}; expected the columns of jobs.csv "
                f"(hetsched.evaluation.job_records); this row has {sorted(r)}"
            )

    def jct_s(r: Mapping[str, Any]) -> float:
        if "jct_s" in r:
            return to_number(r["jct_s"])
        return to_number(r["finish_s"]) - to_number(r["arrival_s"])

    out: list[dict[str, Any]] = []
    for wl, cl in _ordered_unique((str(r["workload"]), str(r["cluster"])) for r in rows):
        g = [r for r in rows if str(r["workload"]) == wl and str(r["cluster"]) == cl]
        scheds = _ordered_unique(str(r["scheduler"]) for r in g)
        for cls in sorted({str(r[by]) for r in g}, key=_class_key):
            for s in scheds:
                s_rows = [r for r in g if str(r["scheduler"]) == s]
                seeds = _ordered_unique(str(r["seed"]) for r in s_rows)
                c_rows = [r for r in s_rows if str(r[by]) == cls]
                if not c_rows:
                    continue
                q = np.array([to_number(r["start_s"]) - to_number(r["arrival_s"]) for r in c_rows])
                jct = np.array([jct_s(r) for r in c_rows])
                shares = []
                for sd in seeds:
                    n_all = sum(1 for r in s_rows if str(r["seed"]) == sd)
                    total = sum(jct_s(r) for r in c_rows if str(r["seed"]) == sd)
                    shares.append(total / n_all / 3600.0)
                out.append(
                    {
                        "workload": wl,
                        "cluster": cl,
                        by: cls,
                        "scheduler": s,
                        "jobs": len(c_rows) / len(seeds),
                        "queue_h": float(q.mean() / 3600.0),
                        "jct_h": float(jct.mean() / 3600.0),
                        "restarts": float(np.mean([to_number(r.get("restarts")) for r in c_rows])),
                        "jct_share_h": float(np.mean(shares)),
                    }
                )
    return out


def _count(v: float) -> str:
    """A job count: an integer as such, a mean over seeds as :func:`fmt_number` writes it."""
    return str(int(v)) if math.isfinite(v) and v == int(v) else fmt_number(v)


def breakdown_markdown(breakdown: Sequence[Mapping[str, Any]], by: str) -> str:
    """Markdown tables of a :func:`job_breakdown` result, one section per (workload, cluster).

    Returns:
        The Markdown text: per section a table with one row per (class, scheduler), the class
        named on its first row only, then a legend.
    """
    parts: list[str] = []
    cols = ("jobs", "queue_h", "jct_h", "jct_share_h", "restarts")
    for wl, cl in _ordered_unique((str(r["workload"]), str(r["cluster"])) for r in breakdown):
        rs = [r for r in breakdown if str(r["workload"]) == wl and str(r["cluster"]) == cl]
        parts.append(f"### {wl} on {cl}: jobs by {by}\n")
        body, last = [], None
        for r in rs:
            cls = str(r[by])
            body.append(
                [cls if cls != last else "", str(r["scheduler"])]
                + [_count(to_number(r["jobs"]))]
                + [fmt_number(to_number(r[c])) for c in cols[1:]]
            )
            last = cls
        parts.append(_table([by, "scheduler", *cols], body) + "\n")
    parts.append(
        "jobs: jobs of the class per seed; queue_h, jct_h: mean initial queueing delay and JCT "
        "of the class's jobs (hours); jct_share_h: the class's part of the scheduler's avg JCT "
        "(the shares add up to avg_jct_h); restarts: mean per job.\n"
    )
    return "\n".join(parts)
