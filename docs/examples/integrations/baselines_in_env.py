"""Fixed baselines acting through the multi-agent env (same metrics as on the simulator).

:func:`hetsched.envs.adapters.run_policy` writes each round of a policy's allocation as
per-agent claims where possible and falls back to the env's allocation action otherwise.

Run: ``python docs/examples/integrations/baselines_in_env.py`` (``HETSCHED_EXAMPLE_FAST=1`` for
FIFO and LAS on a small workload).
"""

from __future__ import annotations

import os

import numpy as np

from hetsched.baselines import FIFO, LAS
from hetsched.envs import ClusterParallelEnv
from hetsched.envs.adapters import env_kwargs_for, run_policy
from hetsched.envs.presets import resolve_cluster, resolve_throughput
from hetsched.envs.testing import SMALL_CLUSTER, synthetic_workload
from hetsched.sim.engine import SimConfig, Simulator
from hetsched.sim.metrics import compute_metrics

FAST = os.environ.get("HETSCHED_EXAMPLE_FAST") == "1"


def main() -> dict[str, tuple[float, float]]:
    """Average JCT (hours) of each policy: (through the env, on the simulator)."""
    tm, cl = resolve_throughput(None), resolve_cluster(SMALL_CLUSTER)
    wl = synthetic_workload(
        throughput=tm, cluster=cl, rng=np.random.default_rng(0), num_jobs=12 if FAST else 40
    )
    out = {}
    for make in (FIFO, LAS):
        policy = make()
        env = ClusterParallelEnv(cl, wl, throughput=tm, **env_kwargs_for(policy))
        res, stats = run_policy(env, policy, seed=0)
        direct = make()
        ref = Simulator(cl, wl, tm, SimConfig(round_s=direct.round_s or 60.0)).run(direct)
        a = compute_metrics(res, scheduler=policy.name, workload=wl.name, cluster=cl.name, seed=0)
        b = compute_metrics(ref, scheduler=policy.name, workload=wl.name, cluster=cl.name, seed=0)
        out[policy.name] = (float(a["avg_jct_h"]), float(b["avg_jct_h"]))
        print(f"{policy.name}: env {a['avg_jct_h']:.3f} h, simulator {b['avg_jct_h']:.3f} h, "
              f"{stats.action_rounds} rounds as actions, {stats.allocation_rounds} as allocations")  # fmt: skip
    return out


if __name__ == "__main__":
    main()
