"""Training throughput of the MAIFS-style agent: env steps/s, and how rollouts scale with workers.

For each worker count in ``--workers``, plays the same ``--episodes`` episodes (sampled actions,
as in PPO: env step + observations + masks + graph + network forward + ordered decision) in
worker processes (:class:`hetsched.agents.rollout.RolloutWorkers`; 1 = in this process), and
reports env steps/s and the speed-up over the first count, all measured in this one run. Then
times one PPO update over the collected steps. Pool start-up (process spawn, env building, each
worker's throwaway first episode, one untimed wave) is excluded from the rollout time and
reported separately::

    python scripts/bench_train.py --workers 1 2 --episodes 4 --num-jobs 60

Figures are reported, not asserted: they depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from hetsched.agents.config import CurriculumItem, TrainConfig
from hetsched.agents.learner import ppo_update
from hetsched.agents.rollout import Episode, RolloutWorkers, discounts, gae
from hetsched.agents.trainer import Trainer


def main() -> None:
    """Parse arguments, time rollouts per worker count and one update, print JSON lines."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cluster", default="sia_64", help="cluster preset (conf/cluster)")
    ap.add_argument("--workload", default="philly", help="workload preset (conf/workload)")
    ap.add_argument("--num-jobs", type=int, default=60, help="jobs per episode")
    ap.add_argument("--start", type=int, default=50000, help="first sorted trace job")
    ap.add_argument("--episodes", type=int, default=4, help="episodes per worker count")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = TrainConfig(progress=False, threads=1)
    kw = {"start": args.start, "num_jobs": args.num_jobs, "busiest": False}
    cfg.agent.curriculum = [CurriculumItem(args.cluster, args.workload, kw, 0, 10)]
    tr = Trainer(cfg, run_dir=Path(tempfile.mkdtemp(prefix="hetsched_bench_train_")))
    base = None
    eps: list[Episode] = []
    for w in args.workers:
        t0 = time.perf_counter()
        tr.workers = RolloutWorkers(tr.envs, cfg.agent, tr.net, w) if w > 1 else None
        tr.episodes = args.episodes  # warm-up wave (caches and compiled kernels per process)
        tr.play_episodes(w, "agent")
        t1 = time.perf_counter()
        eps = []
        for i in range(0, args.episodes, w):  # waves of w episodes, as the trainer plays them
            tr.episodes = i
            eps += tr.play_episodes(min(w, args.episodes - i), "agent")
        t2 = time.perf_counter()
        if tr.workers is not None:
            tr.workers.close()
        n = sum(e.length for e in eps)
        rate = n / (t2 - t1)
        base = base or rate
        row = {
            "workers": w,
            "episodes": len(eps),
            "env_steps": n,
            "env_steps_per_s": round(rate, 1),
            "speedup": round(rate / base, 2),
            "pool_start_s": round(t1 - t0, 2),
        }
        print(json.dumps(row), flush=True)
    p = cfg.agent.ppo
    for e in eps:
        e.adv, e.ret = gae(e.reward, e.value.astype(float), discounts(e.dt, p.gamma, 60.0), 0.95)
    t0 = time.perf_counter()
    ppo_update(tr.net, tr.opt, eps, p, tr.rng)
    dt = time.perf_counter() - t0
    n = sum(e.length for e in eps)
    print(json.dumps({"ppo_update_steps_per_s": round(n / dt, 1), "env_steps": n}))


if __name__ == "__main__":
    main()
