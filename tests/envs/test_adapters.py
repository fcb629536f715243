"""Fixed baselines through the multi-agent env give the same metrics as on the simulator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from hetsched.baselines import FIFO, LAS
from hetsched.envs import ClusterParallelEnv
from hetsched.envs.adapters import PolicyAdapter, env_kwargs_for, run_policy
from hetsched.envs.presets import resolve_cluster, resolve_throughput
from hetsched.envs.testing import SMALL_CLUSTER, synthetic_workload
from hetsched.sim.engine import SimConfig, Simulator
from hetsched.sim.metrics import compute_metrics

TM = resolve_throughput(None)
CL = resolve_cluster(SMALL_CLUSTER)


def _gavel() -> Any:
    from hetsched.baselines.gavel import GavelPolicy

    return GavelPolicy()


def _sia() -> Any:
    from hetsched.baselines.sia import Sia

    return Sia()


def _hadar() -> Any:
    from hetsched.baselines.hadar import Hadar

    return Hadar()


POLICIES: dict[str, tuple[Callable[[], Any], int]] = {
    "fifo": (FIFO, 16),
    "fifo_backfill": (lambda: FIFO(backfill=True), 16),
    "las": (LAS, 12),
    "gavel": (_gavel, 10),
    "sia": (_sia, 8),
    "hadar": (_hadar, 10),
}


def _metrics(res: Any, name: str) -> dict[str, Any]:
    m = compute_metrics(res, scheduler=name, workload="w", cluster="c", seed=0)
    m.pop("decision_ms_mean")
    return m


@pytest.mark.parametrize("name", list(POLICIES))
def test_baseline_through_env_matches_simulator(name: str) -> None:
    make, num_jobs = POLICIES[name]
    wl = synthetic_workload(
        throughput=TM, cluster=CL, rng=np.random.default_rng(5), num_jobs=num_jobs
    )
    direct = make()
    direct.reset(CL, wl, TM, np.random.default_rng(0))
    r_sim = Simulator(CL, wl, TM, SimConfig(round_s=direct.round_s or 60.0)).run(direct)

    policy = make()
    env = ClusterParallelEnv(CL, wl, throughput=TM, **env_kwargs_for(policy))
    r_env, stats = run_policy(env, policy, seed=0, rng=np.random.default_rng(0))

    assert stats.mismatches == 0
    assert stats.action_rounds > 0, "some rounds must be written as per-agent actions"
    np.testing.assert_allclose(r_env.finish_time, r_sim.finish_time, rtol=1e-9)
    m_sim, m_env = _metrics(r_sim, name), _metrics(r_env, name)
    assert m_env.keys() == m_sim.keys()
    for k, v in m_sim.items():
        if isinstance(v, float):
            assert m_env[k] == pytest.approx(v, rel=1e-9, nan_ok=True), k
        else:
            assert m_env[k] == v, k


def test_allocation_action_only_also_matches() -> None:
    wl = synthetic_workload(throughput=TM, cluster=CL, rng=np.random.default_rng(9), num_jobs=12)
    direct = LAS()
    r_sim = Simulator(CL, wl, TM, SimConfig(round_s=direct.round_s or 60.0)).run(direct)
    env = ClusterParallelEnv(CL, wl, throughput=TM, **env_kwargs_for(LAS()))
    r_env, stats = run_policy(env, LAS(), seed=0, prefer_actions=False)
    assert stats.action_rounds == 0 and stats.allocation_rounds == stats.rounds > 0
    np.testing.assert_allclose(r_env.finish_time, r_sim.finish_time, rtol=1e-9)


def test_adapter_actions_are_legal_per_agent_actions() -> None:
    wl = synthetic_workload(throughput=TM, cluster=CL, rng=np.random.default_rng(3), num_jobs=10)
    env = ClusterParallelEnv(CL, wl, throughput=TM, **env_kwargs_for(FIFO()))
    adapter = PolicyAdapter(FIFO())
    env.reset(seed=0)
    adapter.reset(env)
    claims = 0
    while env.agents:
        acts = adapter.act(env)
        assert isinstance(acts, dict), "FIFO never needs the allocation action"
        mask = env.action_masks()
        for i, ag in enumerate(env.possible_agents):
            assert mask[i, acts[ag]] == 1
            claims += int(acts[ag] > 0)
        _, _, _, _, infos = env.step(acts)
        assert infos["node_0"]["invalid_actions"] == 0.0
    assert claims >= 10
