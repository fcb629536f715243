"""Evaluation plots (matplotlib, Agg canvas: no display and no pyplot state) and TensorBoard output.

Every figure function takes plain rows (dicts, as written to or read back from ``jobs.csv``,
``timeline.csv`` and the summary of :func:`hetsched.reporting.summarize`), so the evaluation
runner and ``scripts/summarize.py`` draw the same figures:

* :func:`fig_jct_cdf` -- empirical CDF of job completion time per scheduler (all seeds pooled).
* :func:`fig_metric_bars` -- headline metrics per scheduler, mean with 95 % CI error bars.
* :func:`fig_timeline` -- cluster utilisation and queue length over simulated time, mean over
  seeds with a min-max band.
* :func:`fig_gpu_share` -- share of each scheduler's GPU-hours on each GPU type, one stacked bar
  per scheduler (who got the fast GPUs).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.reporting import to_number

log = logging.getLogger(__name__)

Rows = Sequence[Mapping[str, Any]]

#: Metrics drawn by :func:`fig_metric_bars` by default.
BAR_METRICS: tuple[str, ...] = (
    "avg_jct_h", "p99_jct_h", "makespan_h", "avg_queue_h", "ftf_rho_max", "utilization",
)  # fmt: skip


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _schedulers(rows: Rows) -> list[str]:
    return list(dict.fromkeys(str(r["scheduler"]) for r in rows))


def _column(rows: Rows, key: str) -> NDArray[np.float64]:
    return np.array([to_number(r.get(key, float("nan"))) for r in rows], dtype=np.float64)


def _empty(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=ax.transAxes)


def fig_jct_cdf(jobs: Rows, title: str = "") -> Any:
    """Empirical CDF of JCT (hours, log axis) per scheduler, seeds pooled.

    Args:
        jobs: Per-job rows with ``scheduler`` and ``jct_s`` (unfinished jobs, NaN, are left out).
        title: Figure title.

    Returns:
        A matplotlib ``Figure``.
    """
    fig = _figure(6.4, 4.2)
    ax = fig.add_subplot()
    sched = np.array([str(r["scheduler"]) for r in jobs])
    jct_h = _column(jobs, "jct_s") / 3600.0
    drawn = False
    for s in _schedulers(jobs):
        x = np.sort(jct_h[(sched == s) & np.isfinite(jct_h) & (jct_h > 0)])
        if x.size:
            y = np.arange(1, x.size + 1) / x.size
            ax.step(x, y, where="post", label=f"{s} (n={x.size})")
            drawn = True
    if drawn:
        ax.set_xscale("log")
        ax.legend(loc="lower right", fontsize="small")
    else:
        _empty(ax, "finished jobs")
    ax.set_xlabel("job completion time (h)")
    ax.set_ylabel("fraction of jobs")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title or "JCT CDF")
    return fig


def fig_metric_bars(summary: Rows, metrics: Sequence[str] = BAR_METRICS, title: str = "") -> Any:
    """Bar chart per metric: one bar per scheduler, mean with CI error bars.

    Args:
        summary: Rows of :func:`hetsched.reporting.summarize` for one (workload, cluster)
            group (``<m>_mean`` and ``<m>_ci95``).
        metrics: Metrics to draw, one panel each.
        title: Figure title.

    Returns:
        A matplotlib ``Figure``.
    """
    metrics = [m for m in metrics if any(f"{m}_mean" in r for r in summary)] or list(metrics)
    ncol = min(3, len(metrics))
    nrow = -(-len(metrics) // ncol)
    fig = _figure(3.4 * ncol, 2.8 * nrow)
    names = [str(r["scheduler"]) for r in summary]
    colors = [f"C{i % 10}" for i in range(len(names))]
    xs = np.arange(len(names))
    for i, m in enumerate(metrics):
        ax = fig.add_subplot(nrow, ncol, i + 1)
        mean = _column(summary, f"{m}_mean")
        half = np.nan_to_num(_column(summary, f"{m}_ci95"), nan=0.0)
        ax.bar(xs, np.nan_to_num(mean, nan=0.0), yerr=half, color=colors, capsize=4)
        ax.set_xticks(xs, names, rotation=30, ha="right", fontsize="small")
        ax.set_title(m, fontsize="medium")
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(title or "headline metrics (mean ± 95 % CI)")
    return fig


def seed_mean_step(
    t: NDArray[np.float64],
    v: NDArray[np.float64],
    seed: NDArray[np.float64],
    grid: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Mean, min and max over seeds of per-seed step functions, sampled on ``grid``.

    Each seed's series holds its value from one ``t`` to the next and is 0 after its last time
    (the run is over). Returns three arrays of ``grid``'s shape.

    Args:
        t: Times of the samples, shape (n,), any seed order.
        v: Values, shape (n,).
        seed: Seed of each sample, shape (n,).
        grid: Times to sample at, shape (g,), increasing.
    """
    per_seed = []
    for sd in np.unique(seed):
        sel = seed == sd
        order = np.argsort(t[sel], kind="stable")
        ts, vs = t[sel][order], v[sel][order]
        idx = np.searchsorted(ts, grid, side="right") - 1
        val = np.where(idx >= 0, vs[np.clip(idx, 0, None)], 0.0)
        val = np.where(grid <= ts[-1], val, 0.0)
        per_seed.append(val)
    stack = np.stack(per_seed) if per_seed else np.zeros((1, grid.size))
    return stack.mean(axis=0), stack.min(axis=0), stack.max(axis=0)


def fig_timeline(timeline: Rows, num_gpus: int | None = None, title: str = "") -> Any:
    """Cluster utilisation and queue length over simulated time, one line per scheduler.

    Every seed counts: each line is the mean over seeds (each seed's series held between its
    rounds and 0 once its run is over), the shaded band spans the seeds' minimum to maximum.

    Args:
        timeline: Per-round rows with ``scheduler, seed, t0`` (s), ``busy_gpus`` and ``pending``.
        num_gpus: GPUs in the cluster; the top panel shows busy GPUs / ``num_gpus`` when given,
            else the rows' ``utilization`` column, else the busy GPU count.
        title: Figure title.

    Returns:
        A matplotlib ``Figure``.
    """
    fig = _figure(8.0, 5.5)
    ax_u, ax_q = fig.subplots(2, 1, sharex=True)
    ylabel = "GPU utilisation"
    n_seeds = 0
    if timeline:
        sched = np.array([str(r["scheduler"]) for r in timeline])
        seed = _column(timeline, "seed")
        n_seeds = len(np.unique(seed))
        t_h = _column(timeline, "t0") / 3600.0
        pend = _column(timeline, "pending")
        if num_gpus:
            util = _column(timeline, "busy_gpus") / num_gpus
        elif "utilization" in timeline[0]:
            util = _column(timeline, "utilization")
        else:
            util, ylabel = _column(timeline, "busy_gpus"), "busy GPUs"
        grid = np.linspace(0.0, float(np.nanmax(t_h)), 400)
        for k, s in enumerate(_schedulers(timeline)):
            sel = sched == s
            for ax, vals in ((ax_u, util), (ax_q, pend)):
                mean, lo, hi = seed_mean_step(t_h[sel], vals[sel], seed[sel], grid)
                ax.plot(grid, mean, color=f"C{k % 10}", label=s, linewidth=1.2)
                if n_seeds > 1:
                    ax.fill_between(grid, lo, hi, color=f"C{k % 10}", alpha=0.15, linewidth=0)
        fig.legend(*ax_u.get_legend_handles_labels(), loc="outside right upper", fontsize="small")
    else:
        _empty(ax_u, "timeline")
    ax_u.set_ylabel(ylabel)
    ax_q.set_ylabel("queued jobs")
    ax_q.set_xlabel("simulated time (h)")
    for ax in (ax_u, ax_q):
        ax.grid(True, alpha=0.3)
    band = ", band: min to max" if n_seeds > 1 else ""
    fig.suptitle(title or f"cluster over time (mean over {n_seeds} seed(s){band})")
    return fig


def fig_gpu_share(jobs: Rows, title: str = "") -> Any:
    """Share of each scheduler's GPU-hours on each GPU type: one stacked bar per scheduler.

    All jobs and seeds are pooled (who got the fast GPUs).

    Args:
        jobs: Per-job rows with ``scheduler`` and ``gpu_hours_<type>`` columns.
        title: Figure title.

    Returns:
        A matplotlib ``Figure``; bar ``i`` of type ``k`` is ``ax.containers[k][i]``.
    """
    keys = list(jobs[0]) if jobs else []
    types = [k.removeprefix("gpu_hours_") for k in keys if k.startswith("gpu_hours_")]
    scheds = _schedulers(jobs)
    fig = _figure(max(5.0, 1.0 + 0.9 * len(scheds)) + 1.5, 4.5)
    ax = fig.subplots()
    if not types or not jobs:
        _empty(ax, "per-type GPU-hours")
        return fig
    sched = np.array([str(r["scheduler"]) for r in jobs])
    hours = np.stack([_column(jobs, f"gpu_hours_{t}") for t in types], axis=1)  # (J, T)
    hours = np.nan_to_num(hours, nan=0.0)
    per_sched = np.stack([hours[sched == s].sum(axis=0) for s in scheds])  # (S, T)
    tot = per_sched.sum(axis=1, keepdims=True)
    share = np.divide(per_sched, tot, out=np.zeros_like(per_sched), where=tot > 0)
    xs = np.arange(len(scheds))
    bottom = np.zeros(len(scheds))
    for k, t in enumerate(types):
        ax.bar(xs, share[:, k], bottom=bottom, color=f"C{k % 10}", label=t, width=0.7)
        bottom += share[:, k]
    ax.set_xticks(
        xs,
        scheds,
        rotation=30 if len(scheds) > 4 else 0,
        ha="right" if len(scheds) > 4 else "center",
    )
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of GPU-hours")
    ax.grid(True, axis="y", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize="small", title="GPU type")
    fig.suptitle(title or "GPU-type share of GPU-hours per scheduler")
    return fig


def make_figures(
    summary: Rows,
    jobs: Rows = (),
    timeline: Rows = (),
    *,
    num_gpus: int | None = None,
    title: str = "",
) -> dict[str, Any]:
    """Every figure for one (workload, cluster) group; figures whose data is absent are omitted.

    Args:
        summary: Summary rows of the group.
        jobs: Per-job rows of the group (``jobs.csv``).
        timeline: Per-round rows of the group (``timeline.csv``).
        num_gpus: GPUs in the cluster (for utilisation).
        title: Prefix of each figure title (e.g. ``"philly on sia_64"``).

    Returns:
        Figure name -> ``Figure``; names are ``metrics``, ``jct_cdf``, ``timeline``,
        ``gpu_share``.
    """
    pre = f"{title}: " if title else ""
    figs: dict[str, Any] = {
        "metrics": fig_metric_bars(summary, title=f"{pre}headline metrics (mean ± 95 % CI)")
    }
    if jobs:
        figs["jct_cdf"] = fig_jct_cdf(jobs, title=f"{pre}JCT CDF")
        figs["gpu_share"] = fig_gpu_share(jobs, title=f"{pre}GPU-type share of GPU-hours")
    if timeline:
        figs["timeline"] = fig_timeline(timeline, num_gpus, title="")
    return figs


def save_figures(figs: Mapping[str, Any], out_dir: Path) -> list[Path]:
    """Save figures as ``<out_dir>/<name>.png`` (written to a temp name, then renamed).

    Returns:
        The written paths.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in figs.items():
        path = out_dir / f"{name}.png"
        tmp = out_dir / f".{name}.png.tmp"
        fig.savefig(tmp, format="png")
        tmp.replace(path)
        paths.append(path)
    return paths


def figure_rgb(fig: Any) -> NDArray[np.uint8]:
    """Render a figure to an RGB image, shape (H, W, 3)."""
    canvas = fig.canvas
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def write_tensorboard(
    log_dir: Path,
    rows: Rows,
    *,
    summary_md: str = "",
    timeline: Rows = (),
    figures: Mapping[str, Any] | None = None,
    metrics: Sequence[str] = (),
    num_gpus: int | None = None,
) -> bool:
    """Write evaluation scalars, figures and the summary table as TensorBoard events.

    Tags: ``eval/<scheduler>/<metric>`` (step = seed), ``cluster/<scheduler>/utilization`` and
    ``cluster/<scheduler>/queued`` (first seed; step = simulated seconds), ``eval/figures/<name>``
    and the text ``eval/summary``. Uses ``torch.utils.tensorboard`` (imported lazily).

    Args:
        log_dir: Event file directory.
        rows: Result rows (one per scheduler and seed).
        summary_md: Markdown summary to store as text.
        timeline: Per-round rows (``timeline.csv``).
        figures: Figures to store as images.
        metrics: Metrics to log per seed (default: every numeric column but ``seed``).
        num_gpus: GPUs in the cluster (utilisation = busy GPUs / num_gpus).

    Returns:
        True if written; False (with a warning naming the fix) if TensorBoard is not installed.
    """
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:  # pragma: no cover - depends on the environment
        warnings.warn(
            f"TensorBoard output skipped ({e}); install it with `pip install -e .[agents]` "
            "or set output.tensorboard=false",
            stacklevel=2,
        )
        return False
    skip = {"scheduler", "workload", "cluster", "seed", "num_jobs"}
    with SummaryWriter(log_dir=str(log_dir)) as w:
        for r in rows:
            keys = metrics or [k for k in r if k not in skip]
            for k in keys:
                v = to_number(r.get(k))
                if np.isfinite(v):
                    w.add_scalar(f"eval/{r['scheduler']}/{k}", v, global_step=int(r["seed"]))
        seed_col = _column(timeline, "seed")
        if seed_col.size:
            first = seed_col[0]
            for r, s in zip(timeline, seed_col, strict=True):
                if s != first:
                    continue
                step = int(to_number(r["t0"]))
                busy = to_number(r["busy_gpus"])
                util = busy / num_gpus if num_gpus else to_number(r.get("utilization", busy))
                w.add_scalar(f"cluster/{r['scheduler']}/utilization", util, global_step=step)
                w.add_scalar(
                    f"cluster/{r['scheduler']}/queued", to_number(r["pending"]), global_step=step
                )
        for name, fig in (figures or {}).items():
            w.add_image(f"eval/figures/{name}", figure_rgb(fig), 0, dataformats="HWC")
        if summary_md:
            w.add_text("eval/summary", summary_md, 0)
    return True
