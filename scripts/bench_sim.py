"""Simulator speed benchmark.

Reports, in one run on this machine:

1. Simulated rounds per second and jobs per second under FIFO on ``sia_64`` and ``large_2048``
   (Philly window, round by round: no fast-forward), policy time excluded from "sim" figures.
2. The simulator time of one round on ``large_2048`` with 2,000 active jobs (policy excluded),
   mean over rounds (target: < 5 ms).
3. Wall time to replay 10,000 Philly jobs on ``large_2048`` under FIFO, end to end (target:
   < 60 s).

Usage::

    python scripts/bench_sim.py [--jobs 10000] [--rounds 200] [--out bench_sim.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import hetsched.config  # noqa: F401
from hetsched.baselines import FIFO
from hetsched.resources import CONF_DIR
from hetsched.sim import Allocation, SimConfig, Simulator, Workload, default_throughput
from hetsched.sim.cluster import Cluster

CONF = CONF_DIR


def load(cluster: str, overrides: list[str]) -> tuple[Cluster, Any]:
    """Compose the evaluation config and build a cluster and workload factory."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("evaluate", overrides=[f"cluster={cluster}", *overrides])
    return instantiate(cfg.cluster), instantiate(cfg.workload)


def timed_run(cl: Cluster, wl: Workload, max_rounds: int | None) -> dict[str, float]:
    """FIFO round by round; time simulator and policy separately."""
    tm = default_throughput()
    sim = Simulator(cl, wl, tm, SimConfig(round_s=60.0))
    pol = FIFO()
    sim_t = pol_t = 0.0
    rounds = 0
    while not sim.done and (max_rounds is None or rounds < max_rounds):
        t0 = time.perf_counter()
        st = sim.state(60.0)
        a = pol.decide(st)
        t1 = time.perf_counter()
        sim.advance(a, round_s=60.0)
        t2 = time.perf_counter()
        pol_t += t1 - t0
        sim_t += t2 - t1
        rounds += 1
    finished = int(np.isfinite(sim.finish_time).sum())
    return {
        "rounds": rounds,
        "sim_s": sim_t,
        "policy_s": pol_t,
        "rounds_per_s_sim": rounds / sim_t,
        "jobs_finished": finished,
        "jobs_per_s_sim": finished / sim_t,
        "ms_per_round_sim": 1e3 * sim_t / rounds,
    }


def round_with_active_jobs(cl: Cluster, n_jobs: int, rounds: int) -> dict[str, float]:
    """Mean simulator time of a round with ``n_jobs`` running 1-GPU jobs (policy excluded)."""
    tm = default_throughput()
    model = tm.model_index("cifar10")
    wl = Workload(
        name="bench",
        job_id=np.array([f"b{i}" for i in range(n_jobs)]),
        arrival=np.zeros(n_jobs),
        model=np.full(n_jobs, model),
        batch_size=np.full(n_jobs, 128),
        work=np.full(n_jobs, 1e12),
        req_gpus=np.ones(n_jobs, dtype=np.int64),
        min_gpus=np.ones(n_jobs, dtype=np.int64),
        max_gpus=np.ones(n_jobs, dtype=np.int64),
        cpu_per_gpu=np.full(n_jobs, 4.0),
        mem_per_gpu=np.full(n_jobs, 16.0),
    )
    sim = Simulator(cl, wl, tm, SimConfig(round_s=60.0))
    alloc = FIFO(backfill=True).decide(sim.state())
    if alloc.size and np.unique(alloc.job).size < n_jobs:
        raise SystemExit(f"cluster too small for {n_jobs} 1-GPU jobs")
    a2 = Allocation(alloc.job, alloc.node, alloc.gpus, alloc.cpus, alloc.mem, alloc.share)
    sim.advance(a2)
    t = time.perf_counter()
    for _ in range(rounds):
        sim.advance(a2)
    dt = (time.perf_counter() - t) / rounds
    return {"active_jobs": n_jobs, "ms_per_round_sim": dt * 1e3}


def main() -> None:
    """Run the benchmark and print a table (and JSON with ``--out``)."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--jobs", type=int, default=10_000, help="Philly jobs to replay on large_2048")
    ap.add_argument("--rounds", type=int, default=300, help="rounds for the per-round figures")
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    args = ap.parse_args()
    out: dict[str, Any] = {}
    for name in ("sia_64", "large_2048"):
        cl, factory = load(name, [])
        wl = factory(throughput=default_throughput(), cluster=cl, rng=np.random.default_rng(0))
        out[f"fifo_{name}"] = timed_run(cl, wl, args.rounds)
    cl, _ = load("large_2048", [])
    out["round_2000_active_large_2048"] = round_with_active_jobs(cl, 2000, args.rounds)
    cl, factory = load("large_2048", [f"workload.num_jobs={args.jobs}"])
    wl = factory(throughput=default_throughput(), cluster=cl, rng=np.random.default_rng(0))
    t = time.perf_counter()
    res = Simulator(cl, wl, default_throughput(), SimConfig(round_s=60.0)).run(FIFO())
    out["replay_philly_large_2048"] = {
        "jobs": wl.num_jobs,
        "wall_s": time.perf_counter() - t,
        "unfinished": int((~np.isfinite(res.finish_time)).sum()),
        "policy_calls": len(res.decision_s),
    }
    for k, v in out.items():
        print(
            f"{k}: "
            + ", ".join(
                f"{a}={b:.4g}" if isinstance(b, float) else f"{a}={b}" for a, b in v.items()
            )
        )
    if args.out:
        args.out.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
