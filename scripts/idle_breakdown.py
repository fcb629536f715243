"""Where a scheduler's idle GPU-hours come from: single-node fits or gangs only.

Runs one benchmark cell exactly as ``hetsched-benchmark`` does (same workload, same policy
generator, exact track) and splits the cell's ``idle_fit_gpu_h`` by what the waiting jobs need:
``single`` when some waiting job fits on one node's free GPUs of an allowed type, ``gang_only``
when waiting jobs fit only across several nodes of a type (the benchmark counts both).

    python scripts/idle_breakdown.py --scenario itp_c06_pai_busy --seed 1 --scheduler maifs
    python scripts/idle_breakdown.py --scenario itp_c06_pai_busy --seed 1 --checkpoint my.pt
"""

from __future__ import annotations

import argparse

import numpy as np

from hetsched.benchmark.info import RuntimeInfo, with_info
from hetsched.benchmark.runner import FitProbe
from hetsched.benchmark.scenarios import get_scenario
from hetsched.evaluation import run_one


def main() -> None:
    """Command line."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from hetsched.config import SimSettings, sim_config_from
    from hetsched.envs.presets import resolve_cluster, resolve_throughput, scheduler_node

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", required=True, help="benchmark scenario name")
    ap.add_argument("--seed", type=int, nargs="+", default=[0])
    ap.add_argument("--scheduler", default="maifs", help="a conf/scheduler preset")
    ap.add_argument("--checkpoint", default=None, help="MAIFS checkpoint (default: shipped)")
    args = ap.parse_args()
    sc = get_scenario(args.scenario)
    tm, cl = resolve_throughput(None), resolve_cluster(sc.cluster)
    node = OmegaConf.to_container(scheduler_node(args.scheduler), resolve=False)
    assert isinstance(node, dict)
    if args.checkpoint:
        node["checkpoint"] = args.checkpoint
    elif "checkpoint" in node:
        node["checkpoint"] = None
    for seed in args.seed:
        wl_rng, pol_rng = np.random.default_rng(seed).spawn(2)  # as the benchmark's cells
        wl = sc.factory()(throughput=tm, cluster=cl, rng=wl_rng)
        probe = FitProbe(with_info(instantiate(node), RuntimeInfo("exact", 0.0), seed))
        out = run_one(
            probe,
            name=args.scheduler,
            cluster=cl,
            workload=wl,
            throughput=tm,
            sim_config=sim_config_from(OmegaConf.structured(SimSettings)),
            seed=seed,
            rng=pol_rng,
        )
        end = float(out.result.end_time)
        parts = probe.idle_breakdown(end)
        print(
            f"{sc.name} seed {seed} {args.scheduler}: avg JCT {out.row['avg_jct_h']:.3f} h; "
            f"idle GPU-h while a fitting job waits {probe.idle_fit_gpu_h(end):.1f} = single-node "
            f"fits {parts['single']:.1f} + gang-only fits {parts['gang_only']:.1f}"
        )


if __name__ == "__main__":
    main()
