"""Conformance kit for the hetsched envs, and a small fast setup for checks and examples.

:func:`check_env_suite` runs, for every registered id (or the ids given):

* multi-agent ids: PettingZoo's ``parallel_api_test``, ``parallel_seed_test``,
  ``api_test(parallel_to_aec(env))``, ``state_test``, ``max_cycles_test`` and ``render_test``,
  then our invariants;
* single-agent ids: Gymnasium's ``check_env``, Stable-Baselines3's ``check_env``, a few steps
  through ``gymnasium.make`` (with its passive checker), then our invariants.

Our invariants, over full episodes with a seeded random *masked* policy: every observation
lies in its space (and ``state()`` in ``state_space``); the observation's mask equals the
info's, the no-op is always legal and legal actions are never counted invalid; info keys are
:data:`~hetsched.envs.cluster_env.INFO_KEYS` with numeric values; the reward is the sum of its
components; the episode ends and is never truncated after step 1; when it terminates, the jobs
component sums to ``- weight * total JCT / Z``; two envs with the same seed produce identical
trajectories; and random *unmasked* actions never raise.

:func:`small_env_kwargs` gives a 5-node, 32-GPU heterogeneous cluster and a short synthetic
workload over the shipped throughput table, which keep every check within seconds.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from types import SimpleNamespace
from typing import Any

import gymnasium
import numpy as np
from numpy.typing import NDArray

from hetsched.sim.cluster import Cluster
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

#: A small heterogeneous cluster (node-spec mapping for the env's ``cluster`` argument).
SMALL_CLUSTER: dict[str, Any] = {
    "name": "small_32",
    "nodes": [
        {"gpu_type": "t4", "count": 2, "gpus": 4, "cpus": 48, "mem_gib": 192},
        {"gpu_type": "rtx2080ti", "count": 2, "gpus": 8, "cpus": 64, "mem_gib": 384},
        {"gpu_type": "a100", "count": 1, "gpus": 8, "cpus": 256, "mem_gib": 1024},
    ],
}


def synthetic_workload(
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    num_jobs: int = 24,
    mean_interarrival_s: float = 300.0,
    duration_s: tuple[float, float] = (600.0, 4 * 3600.0),
    gpu_choices: Sequence[int] = (1, 2, 4, 8, 16),
    gpu_probs: Sequence[float] | None = (0.4, 0.25, 0.2, 0.1, 0.05),
    elastic_frac: float = 0.3,
    family: str | None = "sia",
    name: str = "synthetic",
) -> Workload:
    """A small random workload (Poisson arrivals, log-uniform durations) that fits ``cluster``.

    Each job draws a model (of ``family``, when the table has such models), a GPU request that
    the model can run on some present GPU type, a duration, CPU cores per GPU in {2, 4, 8} and
    memory per GPU in {8, 16, 32} GiB. Work is the duration times the model's isolated
    throughput on the fastest present type at the request. A fraction of the jobs is elastic
    (``min_gpus = max(1, req / 2)``, ``max_gpus = 2 req``).

    Args:
        throughput: Throughput table (model indices refer to it).
        cluster: The cluster (jobs are drawn so that each can run on it).
        rng: The random generator (the only source of randomness).
        num_jobs: Number of jobs J.
        mean_interarrival_s: Mean gap between arrivals, seconds.
        duration_s: Range of durations on the fastest type, seconds (log-uniform).
        gpu_choices: Requested GPU counts to draw from.
        gpu_probs: Their probabilities (None: uniform).
        elastic_frac: Fraction of elastic jobs.
        family: Restrict models to this table family (None: all models).
        name: Workload name.

    Raises:
        ValueError: If no model can run on the cluster.
    """
    tm = throughput
    models = np.arange(tm.num_models)
    if family is not None and family in tm.family:
        models = models[np.asarray(tm.family) == family]
    choices = np.asarray(gpu_choices, dtype=np.int64)
    per_type = cluster.gpus_per_type()
    present = np.flatnonzero(per_type > 0)
    tput = tm.isolated(
        models[:, None, None], present[None, :, None], choices[None, None, :], False
    )  # (Mf, P, C)
    tput = np.where(choices[None, None, :] <= per_type[present][None, :, None], tput, 0.0)
    feasible = tput.max(axis=1) > 0  # (Mf, C)
    if not feasible.any():
        raise ValueError(f"no model of family {family!r} can run on cluster {cluster.name!r}")
    p = np.ones(choices.size) if gpu_probs is None else np.asarray(gpu_probs, dtype=np.float64)
    pair_p = feasible * p[None, :]
    pair_p = (pair_p / pair_p.sum()).ravel()
    pick = rng.choice(pair_p.size, size=num_jobs, p=pair_p)
    mi, ci = np.divmod(pick, choices.size)
    model = models[mi]
    req = choices[ci]
    lo, hi = np.log(duration_s[0]), np.log(duration_s[1])
    dur = np.exp(rng.uniform(lo, hi, num_jobs))
    work = dur * tput.max(axis=1)[mi, ci]
    arrival = np.cumsum(rng.exponential(mean_interarrival_s, num_jobs))
    arrival -= arrival[0]
    elastic = rng.random(num_jobs) < elastic_frac
    min_g = np.where(elastic, np.maximum(1, req // 2), req)
    max_g = np.where(elastic, req * 2, req)

    def runs(n: NDArray[np.int64]) -> NDArray[np.bool_]:
        t = tm.isolated(model[:, None], present[None, :], n[:, None], False)
        return np.asarray(((t > 0) & (n[:, None] <= per_type[present][None, :])).any(axis=1))

    min_g = np.where(runs(min_g), min_g, req)  # elastic only where the model runs there
    max_g = np.where(runs(max_g), max_g, req)
    return Workload(
        name=name,
        job_id=np.array([f"s{i}" for i in range(num_jobs)]),
        arrival=arrival,
        model=model,
        batch_size=np.full(num_jobs, 64),
        work=work,
        req_gpus=req,
        min_gpus=min_g,
        max_gpus=max_g,
        cpu_per_gpu=rng.choice([2.0, 4.0, 8.0], num_jobs),
        mem_per_gpu=rng.choice([8.0, 16.0, 32.0], num_jobs),
    )


def small_env_kwargs(num_jobs: int = 16, **overrides: Any) -> dict[str, Any]:
    """Kwargs of a small, fast env (:data:`SMALL_CLUSTER`, a short synthetic workload)."""
    kw: dict[str, Any] = {
        "cluster": SMALL_CLUSTER,
        "workload": partial(synthetic_workload, num_jobs=num_jobs),
        "max_cycles": 2_000,
    }
    kw.update(overrides)
    return kw


# ---------------------------------------------------------------------- helpers
def masked_random_actions(masks: NDArray[Any], rng: np.random.Generator) -> NDArray[np.int64]:
    """One uniformly random legal action per row of ``masks`` (vectorised), shape (rows,)."""
    m = np.asarray(masks, dtype=np.float64)
    u = rng.random(m.shape) * m
    return np.asarray(u.argmax(axis=1), dtype=np.int64)


def _equal(a: Any, b: Any) -> bool:
    from gymnasium.utils.env_checker import data_equivalence

    return bool(data_equivalence(a, b))


def _fail(env_id: str, check: str, msg: str) -> AssertionError:
    return AssertionError(f"[{env_id}] {check}: {msg}")


# ---------------------------------------------------------------------- multi-agent
def _parallel_episode(
    make: Callable[[], Any], seed: int, act_seed: int, max_steps: int, env_id: str
) -> list[tuple[Any, ...]]:
    """Run one episode with a seeded masked random policy, checking invariants per step."""
    from hetsched.envs.cluster_env import INFO_KEYS, REWARD_KEYS

    env = make()
    obs, infos = env.reset(seed=seed)
    rng = np.random.default_rng(act_seed)
    agents = list(env.possible_agents)
    sp = env.observation_space(agents[0])
    traj: list[tuple[Any, ...]] = [(obs, infos)]
    jobs_sum = 0.0
    steps = 0
    ended = False
    while env.agents:
        for a in env.agents:
            if not sp.contains(obs[a]):
                raise _fail(env_id, "obs_in_space", f"{a} at step {steps} is outside the space")
        if not env.state_space.contains(env.state()):
            raise _fail(env_id, "state_in_space", f"state() at step {steps} is outside")
        masks = np.stack([obs[a]["action_mask"] for a in agents])
        if not np.all(masks[:, 0] == 1):
            raise _fail(env_id, "masks", "the no-op is not always legal")
        for a in agents:
            if not np.array_equal(obs[a]["action_mask"], infos[a]["action_mask"]):
                raise _fail(env_id, "masks", f"{a}: observation and info masks differ")
        acts = masked_random_actions(masks, rng)
        obs, rew, term, trunc, infos = env.step(dict(zip(agents, acts.tolist(), strict=True)))
        steps += 1
        traj.append((obs, rew, term, trunc, infos))
        for a in agents:
            if tuple(infos[a]) != INFO_KEYS:
                raise _fail(env_id, "infos", f"{a} info keys {tuple(infos[a])} != {INFO_KEYS}")
            if infos[a]["invalid_action"] != 0.0:
                raise _fail(env_id, "masks", f"legal action of {a} counted invalid at {steps}")
        i0 = infos[agents[0]]
        parts = sum(i0[k] for k in REWARD_KEYS)
        if not np.isclose(rew[agents[0]], parts, rtol=1e-9, atol=1e-12):
            raise _fail(env_id, "reward", "reward != sum of its components")
        if len(set(rew.values())) != 1:
            raise _fail(env_id, "reward", "team reward differs between agents")
        jobs_sum += i0["reward_jobs"]
        if any(trunc.values()) and steps == 1:
            raise _fail(env_id, "episode_end", "truncated after step 1")
        if any(term.values()) or any(trunc.values()):
            ended = True
            if any(term.values()):
                res = env.sim_result()
                jct = float((res.finish_time - res.workload.arrival).sum())
                want = -env.settings.reward_weights.jobs * jct / env.z
                if not np.isclose(jobs_sum, want, rtol=1e-6, atol=1e-9):
                    raise _fail(
                        env_id, "reward", f"jobs component sums to {jobs_sum}, -w*JCT/Z = {want}"
                    )
        if steps > max_steps:
            raise _fail(env_id, "episode_end", f"no end within {max_steps} steps")
    if not ended:
        raise _fail(env_id, "episode_end", "agents left without termination or truncation")
    env.close()
    return traj


def check_parallel_env(
    env_id: str,
    make: Callable[[], Any],
    *,
    num_cycles: int = 200,
    episode_seeds: Sequence[int] = (0, 1),
    max_episode_steps: int = 20_000,
    fuzz_steps: int = 200,
    make_kw: Callable[..., Any] | None = None,
) -> list[str]:
    """All checks for one multi-agent id; returns the names of the checks passed.

    Args:
        env_id: Id used in failure messages.
        make: Builds a fresh parallel env.
        num_cycles: Cycles of PettingZoo's API and seed tests.
        episode_seeds: Seeds of the full-episode invariant and determinism checks.
        max_episode_steps: Fail when an episode has not ended after this many steps.
        fuzz_steps: Steps of random unmasked (and malformed) actions.
        make_kw: Like ``make`` but accepting extra constructor kwargs (``max_cycles``,
            ``render_mode``); enables PettingZoo's ``max_cycles_test`` and ``render_test``.
    """
    from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, state_test
    from pettingzoo.utils import parallel_to_aec

    done: list[str] = []
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*should be (Box or Discrete|gymnasium.spaces.box).*"
        )
        warnings.filterwarnings("ignore", message=".*not a NumPy array.*")
        warnings.filterwarnings("ignore", message=".*is all zeros.*")
        warnings.filterwarnings("ignore", message=".*Observation is not NumPy.*")
        parallel_api_test(make(), num_cycles=num_cycles)
        done.append("pettingzoo.parallel_api_test")
        parallel_seed_test(make, num_cycles=num_cycles)
        done.append("pettingzoo.parallel_seed_test")
        api_test(parallel_to_aec(make()), num_cycles=num_cycles)
        done.append("pettingzoo.api_test(parallel_to_aec)")
        state_test(parallel_to_aec(make()), make())
        done.append("pettingzoo.state_test")
        if make_kw is not None:
            from pettingzoo.test import max_cycles_test, render_test

            def aec(**k: Any) -> Any:
                return parallel_to_aec(make_kw(**k))

            max_cycles_test(SimpleNamespace(env=aec, parallel_env=make_kw))
            done.append("pettingzoo.max_cycles_test")
            with contextlib.redirect_stdout(io.StringIO()):
                render_test(aec)
            done.append("pettingzoo.render_test")
    for s in episode_seeds:
        t1 = _parallel_episode(make, s, 100 + s, max_episode_steps, env_id)
        t2 = _parallel_episode(make, s, 100 + s, max_episode_steps, env_id)
        if len(t1) != len(t2) or not all(_equal(a, b) for a, b in zip(t1, t2, strict=True)):
            raise _fail(env_id, "determinism", f"seed {s}: two runs differ")
    done += ["obs_in_space", "state_in_space", "masks", "infos", "reward", "episode_end"]
    done.append("determinism_full_episode")
    env = make()
    rng = np.random.default_rng(7)
    env.reset(seed=3)
    n_act = env.action_space(env.possible_agents[0]).n
    bad = 0
    for _ in range(fuzz_steps):
        if not env.agents:
            env.reset()
        vals = rng.integers(-3, n_act + 3, len(env.possible_agents))
        acts: dict[str, Any] = dict(zip(env.possible_agents, vals.tolist(), strict=True))
        acts[env.possible_agents[0]] = None  # malformed on purpose
        _, _, _, _, infos = env.step(acts)
        bad += int(infos[env.possible_agents[0]]["invalid_action"])
    if fuzz_steps and bad == 0:
        raise _fail(env_id, "invalid_fuzz", "malformed actions were not counted invalid")
    done.append("invalid_action_fuzz")
    return done


# ---------------------------------------------------------------------- single agent
def _central_episode(
    make: Callable[[], Any], seed: int, act_seed: int, max_steps: int, env_id: str
) -> list[tuple[Any, ...]]:
    from hetsched.envs.cluster_env import INFO_KEYS, REWARD_KEYS

    env = make()
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(act_seed)
    traj: list[tuple[Any, ...]] = [(obs, info)]
    steps = 0
    jobs_sum = 0.0
    while True:
        if not env.observation_space.contains(obs):
            raise _fail(env_id, "obs_in_space", f"observation at step {steps} is outside")
        m = env.action_masks()
        if not np.array_equal(m.astype(np.int8), info["action_mask"]) or not m[0]:
            raise _fail(env_id, "masks", "action_masks() differs from info or forbids the no-op")
        a = int(masked_random_actions(m[None, :], rng)[0])
        obs, r, term, trunc, info = env.step(a)
        steps += 1
        traj.append((obs, r, term, trunc, info))
        if tuple(info) != INFO_KEYS:
            raise _fail(env_id, "infos", f"info keys {tuple(info)} != {INFO_KEYS}")
        if info["invalid_action"] != 0.0:
            raise _fail(env_id, "masks", f"legal action counted invalid at step {steps}")
        if not np.isclose(r, sum(info[k] for k in REWARD_KEYS), rtol=1e-9, atol=1e-12):
            raise _fail(env_id, "reward", "reward != sum of its components")
        jobs_sum += info["reward_jobs"]
        if trunc and steps == 1:
            raise _fail(env_id, "episode_end", "truncated after step 1")
        if term:
            res = env.sim_result()
            jct = float((res.finish_time - res.workload.arrival).sum())
            want = -env.settings.reward_weights.jobs * jct / env.z
            if not np.isclose(jobs_sum, want, rtol=1e-6, atol=1e-9):
                raise _fail(env_id, "reward", f"jobs component {jobs_sum} != -w*JCT/Z {want}")
        if term or trunc:
            break
        if steps > max_steps:
            raise _fail(env_id, "episode_end", f"no end within {max_steps} steps")
    env.close()
    return traj


def check_central_env(
    env_id: str,
    make: Callable[[], Any],
    *,
    episode_seeds: Sequence[int] = (0, 1),
    max_episode_steps: int = 20_000,
    fuzz_steps: int = 200,
    sb3: bool = True,
) -> list[str]:
    """All checks for one Gymnasium id; returns the names of the checks passed."""
    from gymnasium.utils.env_checker import check_env as gym_check_env

    done: list[str] = []
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is not within the observation space.*")
        gym_check_env(make())
    done.append("gymnasium.check_env")
    if sb3:
        from stable_baselines3.common.env_checker import check_env as sb3_check_env

        sb3_check_env(make(), warn=True)
        done.append("sb3.check_env")
    for s in episode_seeds:
        t1 = _central_episode(make, s, 100 + s, max_episode_steps, env_id)
        t2 = _central_episode(make, s, 100 + s, max_episode_steps, env_id)
        if len(t1) != len(t2) or not all(_equal(a, b) for a, b in zip(t1, t2, strict=True)):
            raise _fail(env_id, "determinism", f"seed {s}: two runs differ")
    done += ["obs_in_space", "masks", "infos", "reward", "episode_end", "determinism_full_episode"]
    env = make()
    env.reset(seed=3)
    rng = np.random.default_rng(7)
    bad = 0
    for i in range(fuzz_steps):
        a: Any = None if i % 10 == 0 else int(rng.integers(-3, env.action_space.n + 3))
        _, _, term, trunc, info = env.step(a)
        bad += int(info["invalid_action"])
        if term or trunc:
            env.reset()
    if fuzz_steps and bad == 0:
        raise _fail(env_id, "invalid_fuzz", "malformed actions were not counted invalid")
    done.append("invalid_action_fuzz")
    return done


# ---------------------------------------------------------------------- suite
def check_env_suite(
    ids: Sequence[str] | None = None,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    num_cycles: int = 200,
    episode_seeds: Sequence[int] = (0, 1),
    max_episode_steps: int = 20_000,
    sb3: bool = True,
) -> dict[str, list[str]]:
    """Run every conformance check on every registered hetsched env id.

    Args:
        ids: Env ids to check (default: all registered multi-agent and Gymnasium ids).
        env_kwargs: Constructor kwargs for every id (default: :func:`small_env_kwargs`).
        num_cycles: Cycles for PettingZoo's API and seed tests.
        episode_seeds: Seeds of the full-episode invariant and determinism checks.
        max_episode_steps: Fail if an episode has not ended after this many steps.
        sb3: Also run Stable-Baselines3's ``check_env`` on Gymnasium ids.

    Returns:
        Env id -> names of the checks it passed.

    Raises:
        AssertionError: Naming the env id and the failed check.
    """
    import pettingzoo

    from hetsched.envs import GYM_ENV_IDS, PARALLEL_ENV_IDS

    kw = dict(env_kwargs) if env_kwargs is not None else small_env_kwargs()
    report: dict[str, list[str]] = {}
    for env_id in ids if ids is not None else (*PARALLEL_ENV_IDS, *GYM_ENV_IDS):
        if env_id in PARALLEL_ENV_IDS:

            def make_p(env_id: str = env_id, **extra: Any) -> Any:
                return pettingzoo.make("parallel", env_id, **{**kw, **extra})

            report[env_id] = check_parallel_env(
                env_id,
                make_p,
                num_cycles=num_cycles,
                episode_seeds=episode_seeds,
                max_episode_steps=max_episode_steps,
                make_kw=make_p,
            )
        elif env_id in GYM_ENV_IDS:
            genv = gymnasium.make(env_id, **kw)
            genv.reset(seed=0)
            for _ in range(5):
                m = genv.unwrapped.action_masks()  # type: ignore[attr-defined]
                genv.step(int(np.flatnonzero(m)[-1]))
            genv.close()

            def make_g(env_id: str = env_id) -> Any:
                return gymnasium.make(env_id, **kw).unwrapped

            report[env_id] = ["gymnasium.make", *check_central_env(
                env_id,
                make_g,
                episode_seeds=episode_seeds,
                max_episode_steps=max_episode_steps,
                sb3=sb3,
            )]  # fmt: skip
        else:
            raise ValueError(
                f"unknown env id {env_id!r}; registered: {[*PARALLEL_ENV_IDS, *GYM_ENV_IDS]}"
            )
    return report
