"""Training throughput of the MAIFS-style agent: env steps per second including the network.

Measures, on one cluster/workload preset, (1) rollout collection (env step + observation +
masks + graph + network forward + ordered decision) and (2) a PPO update over the collected
steps, and reports env steps/s for each and for both together::

    python scripts/bench_train.py --cluster sia_64 --steps 512
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from hetsched.agents.config import CurriculumItem, TrainConfig
from hetsched.agents.trainer import Trainer


def main() -> None:
    """Parse arguments, time collection and update, print a JSON line."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cluster", default="sia_64", help="cluster preset (conf/cluster)")
    ap.add_argument("--workload", default="philly", help="workload preset (conf/workload)")
    ap.add_argument("--num-jobs", type=int, default=300, help="jobs per episode")
    ap.add_argument("--steps", type=int, default=512, help="env steps to collect (whole episodes)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--window", type=int, default=16, help="candidate window K")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = TrainConfig(progress=False, threads=args.threads)
    cfg.agent.curriculum = [
        CurriculumItem(args.cluster, args.workload, {"num_jobs": args.num_jobs}, 0, 10)
    ]
    cfg.agent.env.window = args.window
    cfg.agent.ppo.rollout_steps = args.steps
    tr = Trainer(cfg, run_dir=__import__("pathlib").Path("/tmp/hetsched_bench_train"))
    t0 = time.perf_counter()
    eps = tr.collect()
    t1 = time.perf_counter()
    tr.update(eps)
    t2 = time.perf_counter()
    n = sum(e.length for e in eps)
    print(
        json.dumps(
            {
                "cluster": args.cluster,
                "agents": tr.envs[0].num_agents,
                "env_steps": n,
                "collect_steps_per_s": round(n / (t1 - t0), 1),
                "update_steps_per_s": round(n / (t2 - t1), 1),
                "train_steps_per_s": round(n / (t2 - t0), 1),
                "threads": args.threads,
            }
        )
    )


if __name__ == "__main__":
    main()
