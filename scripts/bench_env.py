"""RL env speed benchmark: environment steps per second with a random masked policy.

For each cluster (default ``sia_64`` and ``large_2048``) it runs the multi-agent env
``hetsched/Cluster-v0`` with every agent acting (one uniformly random legal action per agent,
drawn vectorised from the masks) and reports

* ``ma_steps_per_s``: multi-agent ``env.step`` calls per second (all agents acting), the
  policy's sampling included; target >= 2,000 on ``sia_64``;
* ``sim_share``: fraction of that time spent in the engine round (``Simulator.advance``, or
  the env's compiled round of :mod:`hetsched.envs.kernels_engine`), and ``advances_per_step``;
* ``central_steps_per_s``: the same for the single-agent ``hetsched/ClusterCentral-v0``.

``kernels`` says whether the env's compiled kernels (:mod:`hetsched.envs.kernels`, numba) or the
numpy reference path ran; ``--numpy`` forces the numpy path (``HETSCHED_NUMBA=0``).

``*_per_cpu_s`` figures divide by this process's CPU time instead of wall time (robust to other
load on a shared machine); episode resets (which draw a new workload) are not counted as steps.
Each measurement starts after ``WARMUP_STEPS`` untimed steps of its own env (compiling the
kernels on first use, or loading them from numba's cache, is not counted either).

The workload is the ``philly`` preset (``--jobs`` jobs) when it exists, else the synthetic
workload of :mod:`hetsched.envs.testing`. Episodes restart when they end.

``--breakdown`` adds, for the multi-agent env, the inclusive wall time per step of the main
functions of a step (the engine round, the masks, the observation, the claims, ...), measured
with timers around each call (so the step itself runs a little slower); a function called from
another one counts in both, and time spent inside episode resets is left out. ``--cpu`` times
them in this process's CPU time instead of wall time (less sensitive to other load on a shared
machine).

Usage::

    python scripts/bench_env.py [--clusters sia_64 large_2048] [--steps 3000] [--jobs 400]
                                [--out bench_env.json] [--breakdown] [--numpy]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from hetsched.envs import ClusterCentralEnv, ClusterParallelEnv, kernels
from hetsched.envs.presets import CONF_DIR
from hetsched.envs.testing import masked_random_actions, synthetic_workload


def workload_args(jobs: int) -> dict[str, Any]:
    """``workload`` / ``workload_kwargs`` env kwargs: the Philly preset, or synthetic jobs."""
    if (CONF_DIR / "workload" / "philly.yaml").is_file():
        return {"workload": "philly", "workload_kwargs": {"num_jobs": jobs}}
    return {"workload": partial(synthetic_workload, num_jobs=jobs, mean_interarrival_s=60.0)}


class _Timed:
    """Wraps the engine round (``Simulator.advance``, or the env's compiled round where it
    runs) to count calls and accumulate their wall time."""

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0

    def wrap(self, env: Any) -> None:
        sim = env.core.sim
        inner = type(sim).advance

        def advance(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return inner(sim, *a, **k)
            finally:
                self.seconds += time.perf_counter() - t
                self.calls += 1

        sim.advance = advance
        if getattr(env.core, "_engine_compiled", False):  # revisions with the compiled round
            from hetsched.envs.kernels_engine import engine_round

            er = engine_round(sim)
            fast = er.advance

            def compiled(*a: Any, **k: Any) -> Any:
                t = time.perf_counter()
                rec = fast(*a, **k)
                if rec is not None:  # else the engine runs (and is timed above)
                    self.seconds += time.perf_counter() - t
                    self.calls += 1
                return rec

            er.advance = compiled  # type: ignore[method-assign]


#: (module, class, method) timed by ``--breakdown`` (those the code under test lacks are skipped).
BREAKDOWN: tuple[tuple[str, str, str], ...] = (
    ("hetsched.envs.cluster_env", "ClusterParallelEnv", "step"),
    ("hetsched.envs.core", "EnvCore", "resolve_claims"),
    ("hetsched.envs.core", "EnvCore", "end_decision"),
    ("hetsched.sim.engine", "Simulator", "advance"),
    ("hetsched.envs.kernels_engine", "EngineRound", "advance"),
    ("hetsched.sim.engine", "Simulator", "job_rates"),
    ("hetsched.sim.engine", "Simulator", "running_rates"),
    ("hetsched.envs.core", "EnvCore", "_start_round"),
    ("hetsched.envs.core", "EnvCore", "refresh"),
    ("hetsched.envs.features", "FeatureBuilder", "masks"),
    ("hetsched.envs.core", "EnvCore", "observations"),
    ("hetsched.envs.core", "EnvCore", "_resident"),
    ("hetsched.envs.cluster_env", "ClusterParallelEnv", "_infos"),
    ("hetsched.envs.core", "EnvCore", "round_allocation"),
)


def breakdown(
    cluster: str, steps: int, jobs: int, seed: int = 0, cpu: bool = False
) -> dict[str, float]:
    """Inclusive microseconds per env step of the functions in :data:`BREAKDOWN` (wall time, or
    this process's CPU time with ``cpu``)."""
    import importlib

    clock = time.process_time if cpu else time.perf_counter

    from hetsched.envs.cluster_env import ClusterParallelEnv as Env

    bench_parallel(cluster, 1, jobs, seed)  # compile or load the kernels before timing
    acc: dict[str, float] = {}
    calls: dict[str, int] = {}
    in_reset = [False]  # episode resets (a new workload, per-episode tables) are not counted
    originals = [(Env, "reset", Env.reset)]

    def reset(self: Any, *a: Any, _f: Any = Env.reset, **k: Any) -> Any:
        in_reset[0] = True
        try:
            return _f(self, *a, **k)
        finally:
            in_reset[0] = False

    Env.reset = reset  # type: ignore[method-assign]
    for mod, cls_name, meth in BREAKDOWN:
        try:
            cls = getattr(importlib.import_module(mod), cls_name)
        except ModuleNotFoundError:  # a module the code under test does not have
            continue
        f = getattr(cls, meth, None)
        if f is None:  # a method the code under test does not have (another revision)
            continue
        originals.append((cls, meth, f))
        key = f"{cls_name}.{meth}"

        def timed(*a: Any, _f: Any = f, _k: str = key, **k: Any) -> Any:
            t = clock()
            try:
                return _f(*a, **k)
            finally:
                if not in_reset[0]:
                    acc[_k] = acc.get(_k, 0.0) + clock() - t
                    calls[_k] = calls.get(_k, 0) + 1

        setattr(cls, meth, timed)
    try:
        bench_parallel(cluster, steps, jobs, seed, warmup=0)
    finally:
        for cls, meth, f in originals:
            setattr(cls, meth, f)
    out: dict[str, float] = {}
    for k in sorted(acc, key=lambda k: -acc[k]):
        out[f"{k}_us"] = 1e6 * acc[k] / steps
        out[f"{k}_calls"] = calls[k] / steps
    return out


#: Untimed steps before each measurement.
WARMUP_STEPS = 50


def _warm_up(env: Any, rng: np.random.Generator, multi: bool, steps: int = WARMUP_STEPS) -> None:
    """Take ``steps`` random masked steps (episodes restart when they end)."""
    for _ in range(steps):
        if multi:
            acts = masked_random_actions(env.action_masks(), rng)
            out = env.step(dict(zip(env.possible_agents, acts.tolist(), strict=True)))
            ended = out[2][env.possible_agents[0]] or out[3][env.possible_agents[0]]
        else:
            out = env.step(int(masked_random_actions(env.action_masks()[None, :], rng)[0]))
            ended = out[2] or out[3]
        if ended:
            env.reset()


def bench_parallel(
    cluster: str, steps: int, jobs: int, seed: int = 0, warmup: int = WARMUP_STEPS
) -> dict[str, float]:
    """Multi-agent steps per second with a random masked policy (after ``warmup`` untimed
    steps)."""
    env = ClusterParallelEnv(cluster, seed=seed, max_cycles=10**9, **workload_args(jobs))
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    _warm_up(env, rng, multi=True, steps=warmup)
    env.reset(seed=seed)
    timer = _Timed()
    timer.wrap(env)
    agents = env.possible_agents
    n = episodes = placed = 0
    reset_wall = reset_cpu = 0.0
    t0, c0 = time.perf_counter(), time.process_time()
    while n < steps:
        acts = masked_random_actions(env.action_masks(), rng)
        _, _, term, trunc, infos = env.step(dict(zip(agents, acts.tolist(), strict=True)))
        placed += int(infos[agents[0]]["placed_jobs"])
        n += 1
        if term[agents[0]] or trunc[agents[0]]:
            episodes += 1
            tr, cr = time.perf_counter(), time.process_time()
            env.reset()  # not counted as step time
            timer.wrap(env)  # a new workload may build a new simulator
            reset_wall += time.perf_counter() - tr
            reset_cpu += time.process_time() - cr
    dt = time.perf_counter() - t0 - reset_wall
    cpu = time.process_time() - c0 - reset_cpu
    return {
        "agents": len(agents),
        "steps": n,
        "ma_steps_per_s": n / dt,
        "ma_steps_per_cpu_s": n / cpu,
        "agent_steps_per_s": n * len(agents) / dt,
        "advances_per_step": timer.calls / n,
        "sim_share": timer.seconds / dt,
        "env_us_per_step_excl_sim": 1e6 * (dt - timer.seconds) / n,
        "placed_per_step": placed / n,
        "episodes_finished": episodes,
        "reset_s_mean": reset_wall / max(episodes, 1),
        "obs_dim": env.core.layout.obs_dim,
        "num_actions": env.num_actions,
    }


def bench_central(cluster: str, steps: int, jobs: int, seed: int = 0) -> dict[str, float]:
    """Single-agent steps per second with a random masked policy."""
    env = ClusterCentralEnv(cluster, seed=seed, max_cycles=10**9, **workload_args(jobs))
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    _warm_up(env, rng, multi=False)
    env.reset(seed=seed)
    n = 0
    reset_wall = reset_cpu = 0.0
    t0, c0 = time.perf_counter(), time.process_time()
    while n < steps:
        a = int(masked_random_actions(env.action_masks()[None, :], rng)[0])
        _, _, term, trunc, _ = env.step(a)
        n += 1
        if term or trunc:
            tr, cr = time.perf_counter(), time.process_time()
            env.reset()
            reset_wall += time.perf_counter() - tr
            reset_cpu += time.process_time() - cr
    dt = time.perf_counter() - t0 - reset_wall
    cpu = time.process_time() - c0 - reset_cpu
    return {
        "central_steps_per_s": n / dt,
        "central_steps_per_cpu_s": n / cpu,
        "obs_dim": float(env.obs_dim),
        "num_actions": float(env.codec.n),
    }


def main() -> None:
    """Run the benchmark and print (and optionally save) the figures."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--clusters", nargs="+", default=["sia_64", "large_2048"])
    ap.add_argument("--steps", type=int, default=3000, help="env steps per measurement")
    ap.add_argument("--jobs", type=int, default=400, help="jobs per workload")
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    ap.add_argument(
        "--breakdown", action="store_true", help="also time the main functions of a step"
    )
    ap.add_argument(
        "--cpu",
        action="store_true",
        help="--breakdown in CPU time of this process (less sensitive to other load)",
    )
    ap.add_argument(
        "--numpy", action="store_true", help="use the numpy path, not the compiled kernels"
    )
    args = ap.parse_args()
    if args.numpy:
        os.environ[kernels.ENV_VAR] = "0"
    nb = kernels.numba_module()
    out: dict[str, Any] = {
        "load_avg_1m": os.getloadavg()[0],
        "cpus": os.cpu_count(),
        "kernels": "numpy" if nb is None else f"numba {nb.__version__}",
    }
    for cl in args.clusters:
        out[f"parallel_{cl}"] = bench_parallel(cl, args.steps, args.jobs)
        out[f"central_{cl}"] = bench_central(cl, args.steps, args.jobs)
        if args.breakdown:
            out[f"breakdown_{cl}"] = breakdown(cl, args.steps, args.jobs, cpu=args.cpu)
    out["load_avg_1m_end"] = os.getloadavg()[0]
    for k, v in out.items():
        if isinstance(v, dict):
            print(f"{k}: " + ", ".join(f"{a}={b:.4g}" for a, b in v.items()))
        else:
            print(f"{k}: {v}")
    if args.out:
        args.out.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
