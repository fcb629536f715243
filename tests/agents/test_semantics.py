"""The agents' action semantics that keep GPUs from idling while jobs wait: the share guard
(no claim strands a node's GPUs for want of cores or memory) and gang binding (gang claims
bind, and a GPU type's agents fill the gang opened first)."""

from __future__ import annotations

import numpy as np
from conftest import make_cluster, make_workload
from helpers import tiny_tm

from hetsched.agents.acting import agent_masks, binding_claims
from hetsched.agents.config import AgentEnvConf
from hetsched.agents.coordination import ordered_actions
from hetsched.agents.driver import TeamEnv
from hetsched.agents.signals import share_guard
from hetsched.agents.teacher import SJFTeacher
from hetsched.envs.spaces import EnvSettings, LevelSets

LEVELS = LevelSets(gpu=(1.0,), cpu=(1.0, 2.0), mem=(1.0,))


def _node_env(cpus: float, arrivals: list[float], gpus: list[int]) -> TeamEnv:
    """One A100 node with 8 GPUs and ``cpus`` cores; jobs asking 8 cores per GPU."""
    cl = make_cluster([{"gpu_type": "a100", "count": 1, "gpus": 8, "cpus": cpus, "mem_gib": 512}])
    wl = make_workload(arrivals, [3600.0] * len(gpus), gpus, cpu=8.0, mem=16.0)
    env = TeamEnv(cl, wl, tiny_tm(), EnvSettings(window=4, advance="event", levels=LEVELS))
    env.reset(np.random.default_rng(0))
    return env


def test_share_guard_keeps_the_cores_another_waiting_job_needs() -> None:
    env = _node_env(64.0, [0.0, 0.0], [4, 4])
    core = env.core
    legal = core.ma.legal[0, 0, 0, :, 0]  # job 0 on the node at the 1x and 2x CPU levels
    assert legal.tolist() == [True, True]  # 32 or 64 of the node's 64 cores
    # 2x takes every core and strands the other 4 GPUs that job 1 could use
    assert share_guard(core)[0, 0, 0, :, 0].tolist() == [True, False]
    for guard in (False, True):  # the agent's masks apply it only with share_guard
        mask, _ = agent_masks(core, AgentEnvConf(wait_below=0.0, share_guard=guard))
        two_x = int(core.codec.encode(0, 0, 1, 0))  # job 0 at 1x GPUs, 2x CPU, 1x memory
        assert mask[0, two_x] == int(not guard)
    label = SJFTeacher(share_guard=True).act(core)  # CPU-sensitive: 2x unless guarded
    assert core.codec.decode(label[:1])[2].tolist() == [0]
    assert core.codec.decode(SJFTeacher().act(core)[:1])[2].tolist() == [1]


def test_share_guard_gives_spare_cores_when_nothing_else_waits_or_nothing_fits() -> None:
    alone = _node_env(64.0, [0.0, 3600.0], [4, 4])  # job 1 is not in the window yet
    assert share_guard(alone.core)[0, 0, 0, :, 0].tolist() == [True, True]
    tight = _node_env(40.0, [0.0, 0.0], [4, 4])  # levels are per GPU of the node's share
    assert tight.core.ma.cpu_per_gpu[0, 0].tolist() == [5.0, 10.0]
    assert share_guard(tight.core)[0, 0, 0, :, 0].tolist() == [True, False]
    tight.core.free_c[0] = 30.0  # fewer cores than 4 GPUs' share after any claim of job 0
    assert share_guard(tight.core)[0, 0, 0, :, 0].tolist() == [True, True]  # never unplaceable


def test_share_guard_all_keeps_the_share_of_gpus_no_waiting_job_needs_yet() -> None:
    alone = _node_env(64.0, [0.0, 3600.0], [4, 4])  # job 1 is not in the window yet
    # 2x takes the 4 free GPUs' cores: allowed by the guard, not by share_guard_all
    assert share_guard(alone.core, every_gpu=True)[0, 0, 0, :, 0].tolist() == [True, False]
    conf = AgentEnvConf(wait_below=0.0, share_guard=True, share_guard_all=True)
    mask, _ = agent_masks(alone.core, conf)
    assert mask[0, int(alone.core.codec.encode(0, 0, 1, 0))] == 0
    label = SJFTeacher(share_guard=True, share_guard_all=True).act(alone.core)
    assert alone.core.codec.decode(label[:1])[2].tolist() == [0]  # the 1x CPU level
    tight = _node_env(40.0, [0.0, 3600.0], [4, 4])
    tight.core.free_c[0] = 30.0  # every claim of job 0 would strand: it stays placeable
    assert share_guard(tight.core, every_gpu=True)[0, 0, 0, :, 0].tolist() == [True, True]


def test_gang_binding_makes_gang_claims_bind_and_fills_the_first_gang() -> None:
    # three 4-GPU A100 nodes; two 8-GPU jobs that no node can host alone
    cl = make_cluster([{"gpu_type": "a100", "count": 3, "gpus": 4, "cpus": 64, "mem_gib": 512}])
    wl = make_workload([0.0, 0.0], [3600.0, 3600.0], [8, 8], cpu=4.0, mem=16.0)
    one = LevelSets(gpu=(1.0,), cpu=(1.0,), mem=(1.0,))
    settings = EnvSettings(window=2, advance="event", levels=one)
    env = TeamEnv(cl, wl, tiny_tm(), settings)
    env.reset(np.random.default_rng(0))
    core = env.core
    single = core.ma.single.reshape(core.N, -1)
    loose = binding_claims(core, AgentEnvConf(wait_below=0.0), single)
    bound = binding_claims(core, AgentEnvConf(wait_below=0.0, gang_binding=True), single)
    assert not loose.any() and bound.all()  # gang claims bind only with gang_binding
    mask = core.ma.mask.copy()
    mask[:, 0] = 0  # the no-op, as the work-conserving mask leaves it
    # node 0 prefers job 0, nodes 1 and 2 prefer job 1: without gang binding they split
    logits = np.array([[0.0, 2.0, 1.0], [0.0, 1.0, 2.0], [0.0, 1.0, 2.0]])
    prio = np.array([3.0, 2.0, 1.0])
    split, _ = ordered_actions(logits, mask, single, 2, None, binding=bound, priority=prio)
    assert split.tolist() == [1, 2, 2]
    acts, eff = ordered_actions(
        logits, mask, single, 2, None, binding=bound, priority=prio, gang_type=cl.node_type
    )
    assert acts.tolist() == [1, 1, 1] and not eff[1:, 2].any()  # job 1 masked once 0 opened
    env.step(acts)
    assert core.sim is not None and core.sim.start_time[0] == 0.0  # job 0 ran at once
