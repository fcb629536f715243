"""Reproduce Gavel's continuous-single sweep (OSDI'20, gavel.md section 8) with hetsched.

Setup (gavel.md sections 7-8): the ``gavel_108`` cluster (36 V100 + 36 P100 + 36 K80), Gavel's
synthetic generator (``workload=gavel_synthetic``: Poisson arrivals, 1-GPU jobs uniform over the 26
Gavel job types, "Philly" durations on V100), the shipped throughput table (Gavel's measured
K80/P100/V100 numbers). For each arrival rate and seed every scheduler runs on the same workload
through :func:`hetsched.evaluation.evaluate` (the shared runner behind ``scripts/evaluate.py``), and
the average JCT is taken over a *measured window* of jobs in steady state (Gavel: jobs 4000-4999
of a continuous stream; here ``--window`` of ``--jobs``, a reduced count). A window job that does
not finish within ``--max-hours`` of simulated time makes that run's value NaN ("-" in the table,
as in the paper's table for saturated policies).

Schedulers (Hydra presets in ``hetsched/conf/scheduler``) and the paper's column they are compared with:
``gavel_agnostic`` (LAS agnostic), ``gavel`` (Gavel LAS), ``gavel_ss`` (Gavel LAS w/ SS),
``fifo`` (FIFO) and ``gavel_ftf`` (FTF Gavel).

Examples::

    python scripts/reproduce_gavel.py --paper                          # the paper's scale
    python scripts/reproduce_gavel.py                                  # the documented sweep
    python scripts/reproduce_gavel.py --rates 0.4 5.6 --seeds 0 --jobs 600 --window 200 400
    python scripts/reproduce_gavel.py --schedulers gavel gavel_agnostic --rates 5.6

``--paper`` is the paper's continuous-single measurement at 5.6 jobs/h: seed 0, a stream of
15,000 jobs (about 2,700 h of arrivals, so arrivals continue until jobs 4000-4999 finish), window
4000-4999, Gavel LAS and agnostic LAS.

Every run is in Gavel's reproduction mode (``SimConfig(reproduction="gavel")``,
:data:`hetsched.sim.throughput.REPRODUCTION`): the simulator effects Gavel's simulator lacks (the
node co-location slowdown ``node_iota``, the restart delay and the spread-placement penalty) are
off. ``--effects`` turns named ones back on, to measure what each does to the figures.

A run stops as soon as every window job has finished (the simulation is causal: later rounds
cannot change those finish times); ``--no-early-stop`` runs every job to the end or the horizon.
A second progress bar shows each run's simulated hours and the window jobs finished.

Writes ``runs.csv`` (one row per rate, seed and scheduler), ``blocks.csv`` (mean JCT of
consecutive blocks of jobs, a steady-state check) and ``summary.md`` (means over seeds
beside the authors' numbers, plus the agnostic / Gavel JCT ratio) into ``--out``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hetsched.evaluation import atomic_write_text, compute_metrics, csv_text  # noqa: E402
from hetsched.resources import CONF_DIR  # noqa: E402
from hetsched.sim.engine import SimConfig, SimResult, Simulator  # noqa: E402
from hetsched.sim.throughput import REPRODUCTION, ThroughputModel, without_effects  # noqa: E402

#: Scheduler preset -> the paper's column (gavel.md section 8, continuous-single).
COLUMNS: dict[str, str] = {
    "gavel_agnostic": "LAS agnostic",
    "gavel": "Gavel LAS",
    "gavel_ss": "Gavel LAS w/ SS",
    "fifo": "FIFO",
    "gavel_ftf": "FTF Gavel",
}

#: Authors' notebook numbers, mean JCT in hours (seed 0, jobs 4000-4999, 36:36:36); None = "-".
PAPER: dict[float, dict[str, float | None]] = {
    0.4: {"gavel_agnostic": 23.26, "gavel": 17.58, "gavel_ss": 18.42, "fifo": 17.58,
          "gavel_ftf": 17.58},
    2.4: {"gavel_agnostic": 23.43, "gavel": 16.39, "gavel_ss": 16.92, "fifo": 18.63,
          "gavel_ftf": 16.58},
    4.4: {"gavel_agnostic": 23.81, "gavel": 17.48, "gavel_ss": 17.78, "fifo": 44.28,
          "gavel_ftf": 18.62},
    4.8: {"gavel_agnostic": 35.79, "gavel": 18.97, "gavel_ss": 18.67, "fifo": 99.19,
          "gavel_ftf": 20.43},
    5.2: {"gavel_agnostic": 63.78, "gavel": 22.02, "gavel_ss": 19.14, "fifo": 151.67,
          "gavel_ftf": 23.38},
    5.6: {"gavel_agnostic": 95.99, "gavel": 28.96, "gavel_ss": 19.64, "fifo": None,
          "gavel_ftf": 30.47},
    6.0: {"gavel_agnostic": None, "gavel": 41.23, "gavel_ss": 20.42, "fifo": None,
          "gavel_ftf": 43.05},
}  # fmt: skip

RUN_COLUMNS: tuple[str, ...] = (
    "rate_jobs_per_h", "seed", "scheduler", "jobs", "window_start", "window_end",
    "window_avg_jct_h", "window_unfinished", "window_done_h", "last_arrival_h",
    "arrivals_continue", "effects", "all_avg_jct_h", "unfinished", "utilization",
    "restarts", "decision_ms_mean", "wall_s",
)  # fmt: skip

#: ``--paper``: the paper's measurement (gavel.md section 8: seed 0, jobs 4000-4999 at 5.6/h).
PAPER_ARGS: dict[str, Any] = {
    "rates": [5.6],
    "seeds": [0],
    "jobs": 15_000,
    "window": [4000, 5000],
    "schedulers": ["gavel_agnostic", "gavel"],
}

#: Effects Gavel's simulator lacks, which ``--effects`` may turn back on.
EFFECTS: tuple[str, ...] = tuple(sorted(REPRODUCTION["gavel"]))


def scheduler_factories(names: Sequence[str]) -> dict[str, Callable[[], Any]]:
    """Zero-argument factories for the named ``hetsched/conf/scheduler`` presets (composed by Hydra)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.utils import instantiate

    import hetsched.config  # noqa: F401  (registers the schemas)

    conf = CONF_DIR
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose(
            "evaluate", overrides=[f"scheduler=[{','.join(names)}]", "~cluster", "~workload"]
        )
    return {str(k): partial(instantiate, node) for k, node in cfg.scheduler.items()}


def window_jct_h(arrival: np.ndarray, finish: np.ndarray, lo: int, hi: int) -> tuple[float, int]:
    """Mean JCT in hours of jobs ``lo..hi-1`` (NaN if any is unfinished) and the unfinished count."""
    jct = (finish[lo:hi] - arrival[lo:hi]) / 3600.0
    bad = int(np.isnan(jct).sum())
    return (float("nan") if bad else float(jct.mean())), bad


def _fmt(v: float | None) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:.2f}"


def summary_markdown(
    rows: Sequence[dict[str, Any]],
    names: Sequence[str],
    cmd: str,
    *,
    effects: str = "none (reproduction=gavel)",
    wall_s: float | None = None,
) -> str:
    """Mean window JCT over seeds per rate and scheduler, beside the paper's numbers.

    Args:
        rows: One row per run (:data:`RUN_COLUMNS`).
        names: Scheduler presets, in column order.
        cmd: The command line, quoted in the header.
        effects: The simulator effects Gavel lacks that were on.
        wall_s: Wall time of the whole sweep in seconds (None: not stated).
    """
    rates = sorted({float(r["rate_jobs_per_h"]) for r in rows})
    seeds = sorted({int(r["seed"]) for r in rows})

    def mean(rate: float, name: str) -> float:
        v = [
            float(r["window_avg_jct_h"])
            for r in rows
            if float(r["rate_jobs_per_h"]) == rate and r["scheduler"] == name
        ]
        return float(np.mean(v)) if v and all(math.isfinite(x) for x in v) else float("nan")

    head = ["jobs/h"]
    for n in names:
        head += [f"{n} (ours)", f"{COLUMNS.get(n, n)} (paper)"]
    ratio = "gavel_agnostic" in names and "gavel" in names
    if ratio:
        head += ["agnostic/Gavel (ours)", "agnostic/Gavel (paper)"]
    lines = [
        "# Gavel continuous-single reproduction (mean JCT of the measured window, hours)",
        "",
        f"Command: `{cmd}`; seeds {seeds}; ours = mean over seeds, '-' = a window job unfinished.",
        "",
        f"Simulator effects Gavel's simulator lacks that were on: {effects}."
        + ("" if wall_s is None else f" Wall time: {wall_s:.0f} s."),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---:" for _ in head) + "|",
    ]
    for rate in rates:
        paper = PAPER.get(round(rate, 1), {})
        cells = [f"{rate:g}"]
        for n in names:
            cells += [_fmt(mean(rate, n)), _fmt(paper.get(n))]
        if ratio:
            ours = mean(rate, "gavel_agnostic") / mean(rate, "gavel")
            pa, pg = paper.get("gavel_agnostic"), paper.get("gavel")
            theirs = pa / pg if pa is not None and pg is not None else float("nan")
            cells += [_fmt(ours), _fmt(theirs)]
        lines.append("| " + " | ".join(cells) + " |")
    short = sorted(
        {(float(r["rate_jobs_per_h"]), int(r["seed"])) for r in rows if not r["arrivals_continue"]}
    )
    if short:
        lines += [
            "",
            "Warning: in these (rate, seed) runs arrivals ended before the window finished (or a "
            f"window job is unfinished), unlike the paper's continuing stream: {short}; "
            "raise --jobs.",
        ]
    return "\n".join(lines) + "\n"


class _WindowDone(Exception):  # noqa: N818  (a control-flow signal, not an error)
    """Raised from the step callback once every window job has finished."""


class _Timed:
    """A policy proxy that records the wall time of each ``decide`` call (seconds)."""

    def __init__(self, policy: Any) -> None:
        self._policy = policy
        self.decision_s: list[float] = []

    def decide(self, state: Any) -> Any:
        t = time.perf_counter()
        alloc = self._policy.decide(state)
        self.decision_s.append(time.perf_counter() - t)
        return alloc

    def __getattr__(self, name: str) -> Any:  # round_s, event_driven, wake_time, ...
        return getattr(self._policy, name)


def run_window(
    policy: Any,
    *,
    cluster: Any,
    workload: Any,
    throughput: ThroughputModel,
    sim_config: SimConfig,
    seed: int,
    rng: np.random.Generator,
    window: tuple[int, int],
    early_stop: bool = True,
    bar: Any = None,
) -> SimResult:
    """Run one policy, stopping once jobs ``window[0]..window[1]-1`` have all finished.

    Args:
        policy: A fresh scheduler.
        cluster: The cluster.
        workload: The job stream.
        throughput: Ground-truth throughput model (the engine applies the reproduction mode).
        sim_config: Engine settings.
        seed: The run's seed.
        rng: The policy's random generator.
        window: Measured job indices ``[start, end)``.
        early_stop: Stop when the window is done (False: run to the end or the horizon).
        bar: A tqdm bar advanced by simulated hours (or None).

    Returns:
        The run's result; jobs after the window may be unfinished when it stopped early.
    """
    lo, hi = window
    sim = Simulator(cluster, workload, throughput, sim_config, seed=seed)
    if hasattr(policy, "reset"):
        policy.reset(cluster, workload, sim.tm, rng)
    timed = _Timed(policy)

    def on_step(rec: Any) -> None:
        if bar is not None:
            bar.update(rec.dt / 3600.0)
            bar.set_postfix_str(
                f"window done {int(np.isfinite(sim.finish_time[lo:hi]).sum())}/{hi - lo}",
                refresh=False,
            )
        if early_stop and bool(np.isfinite(sim.finish_time[lo:hi]).all()):
            raise _WindowDone

    try:
        res = sim.run(timed, on_step=on_step)
    except _WindowDone:
        res = sim.result()
    res.decision_s = timed.decision_s
    return res


def _positive_int(text: str) -> int:
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"{v} must be >= 1")
    return v


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse and check the command line (errors: one line on stderr, exit code 2)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--paper", action="store_true",
        help="the paper's measurement: --rates 5.6 --seeds 0 --jobs 15000 --window 4000 5000 "
        "--schedulers gavel_agnostic gavel (explicit options of those names are not allowed)",
    )  # fmt: skip
    ap.add_argument("--rates", type=float, nargs="+", default=None, help="jobs/h")
    ap.add_argument("--seeds", type=int, nargs="+", default=None)
    ap.add_argument("--jobs", type=int, default=None, help="jobs per workload (default 1500)")
    ap.add_argument(
        "--window", type=int, nargs=2, default=None, metavar=("START", "END"),
        help="measured job indices [START, END) (default: the middle third of --jobs)",
    )  # fmt: skip
    ap.add_argument("--schedulers", nargs="+", default=None, choices=list(COLUMNS))
    ap.add_argument(
        "--max-hours", type=float, default=3000.0, help="simulated horizon per run, hours"
    )
    ap.add_argument(
        "--effects", nargs="+", default=[], choices=list(EFFECTS),
        help="simulator effects Gavel's simulator lacks to turn back on (default: none, "
        "Gavel's reproduction mode): node_iota = node co-location slowdown, restart_delay = "
        "the throughput table's restart delays, spread = unconsolidated throughput of a gang "
        "on more nodes than it needs (no effect on 1-GPU jobs)",
    )  # fmt: skip
    ap.add_argument(
        "--no-early-stop", action="store_true",
        help="run every job to the end (or the horizon) instead of stopping once the window "
        "jobs have finished",
    )  # fmt: skip
    ap.add_argument(
        "--blocks", type=_positive_int, default=4,
        help="also write the mean JCT of this many consecutive blocks of jobs (blocks.csv), "
        "to show whether the window is in steady state",
    )  # fmt: skip
    ap.add_argument("--out", type=Path, default=Path("outputs/reproduce_gavel"))
    args = ap.parse_args(argv)
    defaults: dict[str, Any] = {
        "rates": [0.4, 2.4, 4.4, 5.6], "seeds": [0, 1, 2], "jobs": 1500,
        "window": None, "schedulers": list(COLUMNS),
    }  # fmt: skip
    if args.paper:
        clash = [k for k in PAPER_ARGS if getattr(args, k) is not None]
        if clash:
            ap.error(f"--paper sets --{' --'.join(clash)}; drop them or drop --paper")
        defaults = PAPER_ARGS
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.jobs < 3:
        ap.error(f"--jobs={args.jobs} must be >= 3")
    lo, hi = args.window if args.window else (args.jobs // 3, 2 * args.jobs // 3)
    if not 0 <= lo < hi <= args.jobs:
        ap.error(f"--window {lo} {hi} must satisfy 0 <= START < END <= --jobs={args.jobs}")
    args.window = (lo, hi)
    if any(not (r > 0 and math.isfinite(r)) for r in args.rates):
        ap.error(f"--rates {args.rates}: every rate must be a positive number of jobs/h")
    if not (args.max_hours > 0 and math.isfinite(args.max_hours)):
        ap.error(f"--max-hours={args.max_hours} must be a positive number of hours")
    if len(set(args.schedulers)) != len(args.schedulers):
        ap.error(f"--schedulers {args.schedulers}: a scheduler is named twice")
    return args


def effect_setup(tm: ThroughputModel, effects: Sequence[str]) -> tuple[ThroughputModel, SimConfig]:
    """The throughput model and engine mode for ``--effects`` (the horizon is set by the caller).

    No effect: the unmodified table and ``reproduction="gavel"``. Otherwise the full model
    (no reproduction mode) with every Gavel-lacking effect *not* named turned off by hand.
    """
    if not effects:
        return tm, SimConfig(round_s=360.0, reproduction="gavel")
    return without_effects(tm, REPRODUCTION["gavel"] - set(effects)), SimConfig(round_s=360.0)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the sweep and write ``runs.csv``, ``blocks.csv`` and ``summary.md``."""
    args = parse_args(argv)
    lo, hi = args.window

    from tqdm.auto import tqdm

    from hetsched.envs.presets import resolve_cluster, resolve_workload
    from hetsched.sim.throughput import default_throughput
    from hetsched.sim.workload import Workload

    cluster = resolve_cluster("gavel_108")
    tm, sim_config = effect_setup(default_throughput(), args.effects)
    sim_config = replace(sim_config, max_time_s=args.max_hours * 3600.0)
    factories = scheduler_factories(args.schedulers)
    args.out.mkdir(parents=True, exist_ok=True)
    cmd = "python scripts/reproduce_gavel.py " + " ".join(sys.argv[1:] if argv is None else argv)
    effects = "+".join(args.effects) or "none (reproduction=gavel)"
    rows: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]] = []
    edges = np.linspace(0, args.jobs, args.blocks + 1).astype(int)
    total = len(args.rates) * len(args.seeds) * len(factories)
    t_all = time.perf_counter()
    with tqdm(total=total, desc="reproduce_gavel", unit="run", position=0) as bar:
        for rate in args.rates:
            wf = resolve_workload(
                "gavel_synthetic",
                {"num_jobs": args.jobs, "jobs_per_hour": rate, "multi_gpu": False},
            )
            if isinstance(wf, Workload):
                raise TypeError("the gavel_synthetic preset must build a workload factory")
            for seed in args.seeds:
                # The same streams as hetsched.evaluation.evaluate with one policy per call.
                wl_rng = np.random.default_rng(seed).spawn(2)[0]
                workload = wf(throughput=tm, cluster=cluster, rng=wl_rng)
                arr = workload.arrival
                for name, make in factories.items():
                    bar.set_postfix_str(f"{rate:g}/h seed={seed} {name}")
                    t0 = time.perf_counter()
                    with tqdm(
                        desc=f"  {name} seed={seed}", unit="sim h", position=1, leave=False,
                        mininterval=5.0, bar_format="{desc}: {n:.0f} sim h [{elapsed}] {postfix}",
                    ) as sub:  # fmt: skip
                        res = run_window(
                            make(), cluster=cluster, workload=workload, throughput=tm,
                            sim_config=sim_config, seed=seed,
                            rng=np.random.default_rng(seed).spawn(2)[1],
                            window=(lo, hi), early_stop=not args.no_early_stop, bar=sub,
                        )  # fmt: skip
                    row = compute_metrics(
                        res, scheduler=name, workload=workload.name, cluster=cluster.name,
                        seed=seed,
                    )  # fmt: skip
                    w_jct, w_bad = window_jct_h(arr, res.finish_time, lo, hi)
                    done = np.isfinite(res.finish_time)
                    w_done = float(np.max(res.finish_time[lo:hi])) / 3600.0
                    last_arr = float(arr[-1]) / 3600.0
                    rows.append(
                        {
                            "rate_jobs_per_h": rate,
                            "seed": seed,
                            "scheduler": name,
                            "jobs": args.jobs,
                            "window_start": lo,
                            "window_end": hi,
                            "window_avg_jct_h": w_jct,
                            "window_unfinished": w_bad,
                            "window_done_h": w_done,
                            "last_arrival_h": last_arr,
                            "arrivals_continue": bool(w_bad == 0 and w_done <= last_arr),
                            "effects": effects,
                            "all_avg_jct_h": float(
                                np.mean((res.finish_time[done] - arr[done]) / 3600.0)
                            ),
                            "unfinished": int((~done).sum()),
                            "utilization": row["utilization"],
                            "restarts": row["restarts"],
                            "decision_ms_mean": row["decision_ms_mean"],
                            "wall_s": time.perf_counter() - t0,
                        }
                    )
                    for b0, b1 in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
                        b_jct, b_bad = window_jct_h(arr, res.finish_time, b0, b1)
                        blocks.append(
                            {
                                "rate_jobs_per_h": rate, "seed": seed, "scheduler": name,
                                "block_start": b0, "block_end": b1, "avg_jct_h": b_jct,
                                "unfinished": b_bad,
                            }
                        )  # fmt: skip
                    bar.update(1)
                    # Rewrite after every run so that an interrupted sweep keeps its results.
                    atomic_write_text(args.out / "runs.csv", csv_text(rows, RUN_COLUMNS))
                    atomic_write_text(args.out / "blocks.csv", csv_text(blocks, list(blocks[0])))
    wall = time.perf_counter() - t_all
    md = summary_markdown(rows, list(factories), cmd, effects=effects, wall_s=wall)
    atomic_write_text(args.out / "summary.md", md)
    print(md)
    print(f"written: {args.out / 'runs.csv'}, {args.out / 'summary.md'}")


if __name__ == "__main__":
    main()
