"""Property-based checks of the multi-agent env over random clusters, workloads and actions.

Whatever the agents send (legal, illegal, out-of-range actions), under node failures or not:
observations and the global state lie inside their declared spaces and are finite, rewards are
finite and equal the sum of their named parts, no node is over-allocated, and no job is lost.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetsched.envs import ClusterParallelEnv
from hetsched.sim.errors import SimulationStalledError
from hetsched.sim.throughput import default_throughput
from hetsched.sim.workload import Workload

TM = default_throughput()
TYPES = ["t4", "a100", "rtx2080ti", "v100"]
#: Sia-family models that run on every type above at 1, 2 and 4 GPUs on one node.
SIA_MODELS = [
    m
    for m, f in enumerate(TM.family)
    if f == "sia"
    and all(TM.isolated(m, TM.gpu_types.index(t), g, False) > 0 for t in TYPES for g in (1, 2, 4))
]
PARTS = ("reward_jobs", "reward_makespan", "reward_conflict", "reward_invalid")


@st.composite
def instances(draw: Any) -> tuple[dict[str, Any], Workload, int, bool]:
    groups = []
    for t in draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True)):
        gpus = draw(st.sampled_from([2, 4, 8]))
        groups.append(
            {"gpu_type": t, "count": draw(st.integers(1, 3)), "gpus": gpus,
             "cpus": 4 * gpus, "mem_gib": 32 * gpus}
        )  # fmt: skip
    max_node = min(g["gpus"] for g in groups)
    n = draw(st.integers(2, 10))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    req = rng.choice([g for g in (1, 2, 4) if g <= max_node] or [1], n).astype(np.int64)
    model = rng.choice(SIA_MODELS, n).astype(np.int64)
    rate = TM.isolated(model, np.full(n, TM.gpu_types.index("a100")), req, False)
    wl = Workload(
        name="prop",
        job_id=np.array([f"p{i}" for i in range(n)]),
        arrival=np.sort(rng.uniform(0, 1800, n)),
        model=model,
        batch_size=np.full(n, 64, dtype=np.int64),
        work=rate * rng.uniform(120, 1800, n),
        req_gpus=req,
        min_gpus=req.copy(),
        max_gpus=req.copy(),
        cpu_per_gpu=np.full(n, 4.0),
        mem_per_gpu=np.full(n, 16.0),
    )
    cluster = {"name": "prop", "nodes": groups}
    return cluster, wl, seed, draw(st.booleans())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances())
def test_random_actions_keep_every_invariant(
    inst: tuple[dict[str, Any], Workload, int, bool],
) -> None:
    assert len(SIA_MODELS) >= 3
    cluster, wl, seed, with_failures = inst
    env = ClusterParallelEnv(
        cluster, wl, throughput=TM, window=4, max_cycles=400,
        failures={"mtbf_h": 1.0, "repair_h": 0.25} if with_failures else None,
    )  # fmt: skip
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    state_space = env.state_space
    for _ in range(400):
        for a, o in obs.items():
            assert env.observation_space(a).contains(o), a
            assert np.isfinite(o["observation"]).all()
        s = env.state()
        assert state_space.contains(s) and np.isfinite(s).all()
        actions = {}
        for a in env.agents:
            mask = obs[a]["action_mask"]
            r = rng.random()
            if r < 0.6 and mask.any():
                actions[a] = int(rng.choice(np.flatnonzero(mask)))
            elif r < 0.9:
                actions[a] = int(rng.integers(0, env.action_space(a).n))  # maybe illegal
            else:
                actions[a] = int(rng.integers(-3, env.action_space(a).n + 3))  # maybe out of range
        try:
            obs, rew, term, trunc, infos = env.step(actions)
        except SimulationStalledError as err:
            # With an MTBF of 1 h a drawn job may outlast its nodes: the engine stops it with
            # this error rather than loop forever; nothing else may stop a run.
            assert with_failures and "node failures" in str(err)
            return
        for a in rew:
            assert np.isfinite(rew[a])
            assert rew[a] == np.float32(sum(infos[a][p] for p in PARTS)) or np.isclose(
                rew[a], sum(infos[a][p] for p in PARTS), rtol=1e-5, atol=1e-6
            )
        core = env.core
        used = core.round_allocation().used_gpus_per_node(core.cluster.num_nodes)
        assert np.all(used <= core.cluster.node_gpus)
        if not env.agents or all(term.values()) or all(trunc.values()):
            break
    res = env.sim_result()
    done = np.isfinite(res.finish_time)
    # No job is lost or double-counted: a finished job has no work left and finished after it
    # arrived; an unfinished one (truncation) still has work.
    assert np.all(res.remaining[done] == 0.0)
    assert np.all(res.finish_time[done] >= wl.arrival[done])
    assert np.all(res.remaining[~done] > 0.0)
