"""Soak benchmark: replay the whole Philly trace on ``large_2048`` and watch memory.

For each scheduler, replays the full 82,247-job Philly subset (``--jobs`` to cut it) on the
``large_2048`` cluster, optionally with node failures, and reports wall time, peak RSS, and the
resident memory sampled along simulated time. Memory must stay flat: after the job table is
built, RSS should not grow with simulated time. The per-round timeline is switched off here
(it is an output that grows by design, one row per step); the per-call decision times are kept.

Usage::

    python scripts/bench_soak.py [--jobs 82247] [--schedulers fifo gavel] [--mtbf-h 500]
        [--out soak.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path
from typing import Any

import numpy as np
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from tqdm.auto import tqdm

import hetsched.config  # noqa: F401  (registers the config schemas)
from hetsched.resources import CONF_DIR
from hetsched.sim import SimConfig, Simulator, default_throughput
from hetsched.sim.faults import FailureSpec

CONF = CONF_DIR
PAGE = 4096


def rss_mib() -> float:
    """Resident set size of this process now, MiB (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE / 2**20


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def soak(scheduler: str, jobs: int, mtbf_h: float | None, samples: int) -> dict[str, Any]:
    """Replay ``jobs`` Philly jobs on large_2048 under ``scheduler``; sample memory."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            "evaluate",
            overrides=[
                "cluster=large_2048",
                "workload=philly",
                "workload.busiest=false",
                f"workload.num_jobs={jobs}",
                "workload.max_gpus_policy=cap",
                f"scheduler=[{scheduler}]",
            ],
        )
    tm = default_throughput()
    cl = instantiate(cfg.cluster)
    wl = instantiate(cfg.workload)(throughput=tm, cluster=cl, rng=np.random.default_rng(0))
    policy = instantiate(cfg.scheduler[scheduler])
    policy.reset(cl, wl, tm, np.random.default_rng(1))
    spec = FailureSpec(mtbf_h=mtbf_h) if mtbf_h is not None else None
    sim = Simulator(
        cl, wl, tm, SimConfig(round_s=60.0, record_timeline=False, failures=spec), seed=0
    )
    end = float(wl.arrival[-1])
    marks = list(np.linspace(0.0, 1.0, samples + 1)[1:])
    trace: list[tuple[float, int, float]] = []  # (simulated h, jobs done, RSS MiB)
    rss0 = rss_mib()
    bar = tqdm(total=wl.num_jobs, desc=f"soak {scheduler}", unit="job", leave=False)
    done_before = 0

    def on_step(rec: Any) -> None:
        nonlocal done_before
        done_before += int(rec.completed.size)
        done = done_before
        if rec.completed.size:
            bar.update(int(rec.completed.size))
        if marks and sim.time >= marks[0] * end:
            marks.pop(0)
            trace.append((sim.time / 3600.0, done, rss_mib()))

    t = time.perf_counter()
    res = sim.run(policy, on_step=on_step)
    wall = time.perf_counter() - t
    bar.close()
    trace.append((sim.time / 3600.0, int(np.isfinite(res.finish_time).sum()), rss_mib()))
    rss = np.array([r for _, _, r in trace])
    half = len(rss) // 2
    return {
        "scheduler": scheduler,
        "jobs": wl.num_jobs,
        "failures_mtbf_h": mtbf_h,
        "node_failures": res.node_failures,
        "simulated_days": sim.time / 86400.0,
        "policy_calls": len(res.decision_s),
        "wall_s": wall,
        "unfinished": int((~np.isfinite(res.finish_time)).sum()),
        "rss_start_mib": rss0,
        "rss_mid_mib": float(rss[half]),
        "rss_end_mib": float(rss[-1]),
        "growth_second_half_mib": float(rss[-1] - rss[half]),
        "peak_rss_mib": peak_rss_mib(),
        "samples": trace,
    }


def main() -> None:
    """Run the soak for each scheduler and print a table (and JSON with ``--out``)."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--jobs", type=int, default=82_247, help="Philly jobs to replay")
    ap.add_argument("--schedulers", nargs="+", default=["fifo", "gavel"])
    ap.add_argument("--mtbf-h", type=float, default=None, help="add node failures (MTBF hours)")
    ap.add_argument("--samples", type=int, default=10, help="memory samples along the run")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rows = [soak(s, args.jobs, args.mtbf_h, args.samples) for s in args.schedulers]
    cols = [
        "scheduler", "jobs", "node_failures", "simulated_days", "policy_calls", "wall_s",
        "unfinished", "rss_start_mib", "rss_mid_mib", "rss_end_mib", "growth_second_half_mib",
        "peak_rss_mib",
    ]  # fmt: skip
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        vals = [f"{r[c]:.1f}" if isinstance(r[c], float) else str(r[c]) for c in cols]
        print("| " + " | ".join(vals) + " |")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
