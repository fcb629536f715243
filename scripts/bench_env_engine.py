"""Engine step speed (``Simulator.advance``) of a git revision against the working tree, in one run.

Two measurements, each as CPU microseconds per ``advance`` call, alternating ``--pairs`` times
between the base revision (extracted with ``git archive``) and the working tree, each side in its
own process, with the ratio of each pair:

* ``env``: the engine calls of a multi-agent env episode on ``sia_64`` (``hetsched/Cluster-v0``,
  ``philly`` preset, ``--jobs`` jobs, random masked actions), recorded once with the working tree
  and replayed on both sides without validation (as the env runs them);
* ``fifo`` / ``las``: whole runs of those baselines (``Simulator.run``) on ``--run-jobs`` jobs of
  the ``philly`` preset on ``sia_64``, timing only ``advance`` (the policy's decisions are left
  out, the engine's allocation checks are in; LAS preempts, so its steps restart jobs).

Both sides replay the same recorded calls, so the results must be identical: each child also
prints a SHA-256 of the simulator's per-job records after its runs, and the script reports
whether base and working tree agree.

Usage::

    python scripts/bench_env_engine.py --base d46cdd3 --pairs 5
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from bench_env_compare import extract  # noqa: E402


def record(path: Path, jobs: int, steps: int, seed: int = 0) -> int:
    """Record the engine calls of random masked env steps into ``path``; returns their number."""
    import numpy as np
    from bench_env import workload_args

    from hetsched.envs import ClusterParallelEnv
    from hetsched.envs.testing import masked_random_actions

    env = ClusterParallelEnv("sia_64", seed=seed, max_cycles=10**9, **workload_args(jobs))
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    calls: list[tuple[Any, dict[str, Any]]] = []
    sim = env.core.sim
    assert sim is not None
    inner = type(sim).advance

    def advance(alloc: Any, **kw: Any) -> Any:
        calls.append((alloc, kw))
        return inner(sim, alloc, **kw)

    sim.advance = advance  # type: ignore[method-assign]
    agents = env.possible_agents
    for _ in range(steps):
        acts = masked_random_actions(env.action_masks(), rng)
        _, _, term, trunc, _ = env.step(dict(zip(agents, acts.tolist(), strict=True)))
        if term[agents[0]] or trunc[agents[0]]:
            break
    state = (sim.cluster, sim.workload, sim.tm, asdict(sim.config), calls)
    path.write_bytes(pickle.dumps(state))
    return len(calls)


def _digest(sim: Any) -> str:
    h = hashlib.sha256()
    for name in ("finish_time", "start_time", "run_s", "restarts", "preemptions", "remaining",
                 "attained_gpu_s", "effective_gpu_s", "gpu_s_by_type"):  # fmt: skip
        h.update(getattr(sim, name).tobytes())
    return h.hexdigest()[:16]


def child(path: Path, run_jobs: int, reps: int) -> dict[str, Any]:
    """The measurements in this process's tree (see the module docstring)."""
    import numpy as np

    from hetsched.baselines import FIFO, LAS
    from hetsched.envs.presets import env_workload, make_workload, resolve_cluster
    from hetsched.sim.engine import SimConfig, Simulator

    cl, wl, tm, cfg, calls = pickle.loads(path.read_bytes())
    out: dict[str, Any] = {}
    best = float("inf")
    for _ in range(reps):
        sim = Simulator(cl, wl, tm, SimConfig(**cfg))
        sim.validate = lambda alloc: None  # type: ignore[method-assign]  # the env's trusted path
        c0 = time.process_time()
        for alloc, kw in calls:
            sim.advance(alloc, **kw)
        best = min(best, time.process_time() - c0)
    out["env_us"] = 1e6 * best / len(calls)
    out["env_digest"] = _digest(sim)
    cluster = resolve_cluster("sia_64")
    big = make_workload(
        env_workload("philly", {"num_jobs": run_jobs}),
        throughput=tm,
        cluster=cluster,
        rng=np.random.default_rng(1),
    )
    for name, policy in (("fifo", FIFO), ("las", LAS)):
        sim = Simulator(cluster, big, tm, SimConfig(round_s=360.0, record_timeline=True))
        spent, n = [0.0], [0]
        inner = type(sim).advance

        def advance(
            alloc: Any, _s: Any = sim, _f: Any = inner, _t: Any = spent, _n: Any = n, **kw: Any
        ) -> Any:
            c = time.process_time()
            try:
                return _f(_s, alloc, **kw)
            finally:
                _t[0] += time.process_time() - c
                _n[0] += 1

        sim.advance = advance  # type: ignore[method-assign]
        sim.run(policy())
        out[f"{name}_us"] = 1e6 * spent[0] / n[0]
        out[f"{name}_calls"] = n[0]
        out[f"{name}_digest"] = _digest(sim)
    return out


def main() -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--base", default="HEAD", help="git revision to compare against")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=400, help="jobs of the recorded env episode")
    ap.add_argument("--steps", type=int, default=3000, help="env steps recorded (at most)")
    ap.add_argument("--run-jobs", type=int, default=2000, help="jobs of the FIFO/LAS runs")
    ap.add_argument("--reps", type=int, default=10, help="replays per child (the best counts)")
    ap.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.run_jobs, args.reps)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        calls = Path(tmp) / "calls.pkl"
        n = record(calls, args.jobs, args.steps)
        print(f"recorded {n} engine calls of an env episode on sia_64")
        base = extract(args.base, Path(tmp))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(calls),
               "--run-jobs", str(args.run_jobs), "--reps", str(args.reps)]  # fmt: skip
        rows: dict[str, list[tuple[float, float]]] = {}
        digests: dict[str, set[str]] = {}
        for i in range(args.pairs):
            res = []
            for tree in (base, ROOT):
                env = {**os.environ, "PYTHONPATH": str(tree)}
                p = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
                if p.returncode:
                    raise RuntimeError(f"child failed in {tree}:\n{p.stderr}")
                res.append(json.loads(p.stdout.strip().splitlines()[-1]))
            for key in ("env", "fifo", "las"):
                b, w = res[0][f"{key}_us"], res[1][f"{key}_us"]
                rows.setdefault(key, []).append((b, w))
                digests.setdefault(key, set()).update(
                    {res[0][f"{key}_digest"], res[1][f"{key}_digest"]}
                )
            print(
                f"pair {i + 1}: "
                + ", ".join(f"{k} {v[-1][0]:.0f} -> {v[-1][1]:.0f} us" for k, v in rows.items())
            )
    for key, v in rows.items():
        ratios = [b / w for b, w in v]
        same = "identical" if len(digests[key]) == 1 else "DIFFERENT"
        print(
            f"{key}: base {statistics.median(b for b, _ in v):.0f} us, working tree "
            f"{statistics.median(w for _, w in v):.0f} us per advance; speed-up median "
            f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}x); "
            f"records {same}"
        )


if __name__ == "__main__":
    main()
