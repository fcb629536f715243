"""Gang migrations to several nodes (``EnvSettings.migrate_multinode``) and the teacher's
``gang_fastest`` placement, which together move a gang off slow GPUs when no one node of a
faster type holds it."""

from __future__ import annotations

from typing import Any

import pytest
from env_helpers import TM, TWO_NODES, act, jobs

from hetsched.agents.teacher import SJFTeacher
from hetsched.envs import ClusterParallelEnv, EnvSettings

#: node_0-node_2: 4 K80 GPUs each; node_3 and node_4: 4 A100 GPUs each. An 8-GPU gang fits on
#: no single node.
K80X3_A100X2: dict[str, Any] = {
    "name": "k80x3_a100x2",
    "nodes": [
        {**TWO_NODES["nodes"][0], "gpu_type": "k80", "count": 3},
        {**TWO_NODES["nodes"][0], "gpu_type": "a100", "count": 2},
    ],
}


def _env(multinode: bool) -> ClusterParallelEnv:
    """j0 (8 GPUs, long) as a gang on node_0 and node_1 (K80s), j1 (8 GPUs, 10 min) on the
    A100s; run until j1 finishes and the A100 nodes are free (or the episode ends)."""
    wl = jobs([8, 8], seconds=600.0)
    wl.work[0] *= 12.0
    env = ClusterParallelEnv(
        K80X3_A100X2, wl, throughput=TM, levels={"gpu": [1.0], "cpu": [1.0], "mem": [1.0]},
        window=2, preemptive=True, migrate_speedup=1.25, migrate_gangs=True,
        migrate_multinode=multinode, advance="event",
    )  # fmt: skip
    env.reset(seed=0)
    env.step(act(env, node_0=1, node_1=1, node_3=2, node_4=2))
    return env


@pytest.mark.parametrize("multinode", [False, True])
def test_a_gang_moves_to_several_faster_nodes_only_with_migrate_multinode(
    multinode: bool,
) -> None:
    env = _env(multinode)
    if not multinode:  # no single A100 node holds 8 GPUs: j0 runs to its end on the K80s
        assert env.core.sim is not None and env.core.sim.done and not env.agents
        return
    assert env.core.free_g.tolist() == [0, 0, 4, 4, 4]
    evict = env.core.n_place
    assert env.action_masks()[:, evict].tolist() == [True, True, False, False, False]
    mv = env.core.move_targets(env.action_masks()[:, evict : evict + 1] == 1)
    assert mv.pooled is not None
    assert mv.pooled.tolist() == [[False, False, False, True, True]] * 2  # both A100 nodes
    assert mv.ok.tolist() == mv.pooled.tolist()  # the idle K80 node is no faster
    teacher = SJFTeacher(min_rel_rate=0.0, migrate_gain_s=60.0, gang_fastest=True)
    assert teacher.act(env.core).tolist() == [evict, 0, 0, 0, 0]  # the gang moves once


@pytest.mark.parametrize("fastest", [False, True])
def test_the_teacher_starts_a_gang_on_the_fastest_type_with_room_only_with_gang_fastest(
    fastest: bool,
) -> None:
    env = _env(True)
    env.step(act(env, node_0=env.core.n_place))  # the gang leaves both K80 nodes
    assert env.core.free_g.tolist() == [4, 4, 4, 4, 4] and env.core.pending.tolist() == [0]
    a = SJFTeacher(min_rel_rate=0.0, gang_fastest=fastest).act(env.core).tolist()
    # the K80s have the most free GPUs (12), the A100s room for it (8) and 7.3x its rate
    assert a == ([0, 0, 0, 1, 1] if fastest else [1, 1, 1, 0, 0])
    *_, infos = env.step(act(env, **{f"node_{i}": x for i, x in enumerate(a)}))
    placed = [int(infos[f"node_{i}"]["placed"]) for i in range(5)]
    assert (sum(placed[3:]) > 0, sum(placed[:3]) > 0) == (fastest, not fastest)


def test_migrate_multinode_needs_migrate_gangs() -> None:
    with pytest.raises(ValueError, match="migrate_multinode needs migrate_gangs=True"):
        EnvSettings(preemptive=True, migrate_speedup=1.25, migrate_multinode=True)


def test_the_teacher_moves_one_gang_per_set_of_target_nodes() -> None:
    """Two long 8-GPU gangs on the K80s and one set of free A100 nodes that holds one of them:
    the teacher moves one (without reserving the whole set, the second would take its other
    node)."""
    cluster = {
        "name": "k80x4_a100x2",
        "nodes": [
            {**TWO_NODES["nodes"][0], "gpu_type": "k80", "count": 4},
            {**TWO_NODES["nodes"][0], "gpu_type": "a100", "count": 2},
        ],
    }
    wl = jobs([8, 8, 8], seconds=600.0)
    wl.work[:2] *= 12.0
    env = ClusterParallelEnv(
        cluster, wl, throughput=TM, levels={"gpu": [1.0], "cpu": [1.0], "mem": [1.0]},
        window=3, preemptive=True, migrate_speedup=1.25, migrate_gangs=True,
        migrate_multinode=True, advance="event",
    )  # fmt: skip
    env.reset(seed=0)
    env.step(act(env, node_0=1, node_1=1, node_2=2, node_3=2, node_4=3, node_5=3))
    assert env.core.free_g.tolist() == [0, 0, 0, 0, 4, 4]  # j2 done: the A100 nodes are free
    a = SJFTeacher(min_rel_rate=0.0, migrate_gain_s=60.0).act(env.core)
    assert int((a == env.core.n_place).sum()) == 1  # one eviction: one gang moves
