"""Migrations in the preemptive env (``EnvSettings.migrate_speedup``): an eviction is legal while
nothing waits when the job could run faster on a free node, and the agents place it there."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from env_helpers import CIFAR, TM, TWO_NODES, act, jobs

from hetsched.agents.teacher import SJFTeacher
from hetsched.envs import ClusterParallelEnv, EnvSettings
from hetsched.envs.testing import check_env_suite, small_env_kwargs

#: node_0: 4 K80 GPUs (cifar10 runs 7.3x slower there than on an A100); node_1: 4 A100 GPUs.
SLOW_FAST: dict[str, Any] = {
    "name": "k80_a100",
    "nodes": [
        {**TWO_NODES["nodes"][0], "gpu_type": "k80", "count": 1},
        {**TWO_NODES["nodes"][0], "gpu_type": "a100", "count": 1},
    ],
}


def _env(speedup: float | None, elastic: bool = False) -> ClusterParallelEnv:
    """j0 (1 GPU, 2 h on an A100) and j1 (4 GPUs, 10 min) at t=0 on :data:`SLOW_FAST` (rigid
    jobs; ``elastic`` sets ``migrate_elastic``, which leaves rigid jobs' moves as they are)."""
    wl = jobs([1, 4], seconds=600.0)
    wl.work[0] *= 12.0
    env = ClusterParallelEnv(
        SLOW_FAST, wl, throughput=TM, levels={"gpu": [1.0], "cpu": [1.0], "mem": [1.0]},
        window=2, preemptive=True, migrate_speedup=speedup, advance="event",
        migrate_elastic=elastic and speedup is not None,
    )  # fmt: skip
    env.reset(seed=0)
    return env


def _start(env: ClusterParallelEnv) -> None:
    """j1 on the A100 node, j0 on the K80 node; run until j1 finishes and node_1 is free."""
    env.step(act(env, node_0=1, node_1=2))
    while env.core.free_g[1] < 4:
        env.step(act(env))
    assert env.core.sim is not None and env.core.pending.size == 0  # nothing waits


@pytest.mark.parametrize("elastic", [False, True])
@pytest.mark.parametrize("speedup", [None, 1.25, 10.0])
def test_an_eviction_is_legal_while_nothing_waits_only_to_move_faster(
    speedup: float | None, elastic: bool
) -> None:
    env = _env(speedup, elastic)
    _start(env)
    legal = bool(env.action_masks()[0, env.core.n_place])
    assert legal == (speedup == 1.25)  # the A100 is 7.3x the K80: more than 1.25, not 10
    assert not env.action_masks()[1, env.core.n_place :].any()  # nothing runs on node_1


def test_a_migrated_job_moves_to_the_faster_node_and_finishes_sooner() -> None:
    ends = {}
    for move in (False, True):
        env = _env(1.25)
        _start(env)
        if move:
            env.step(act(env, node_0=env.core.n_place))  # evict j0: it waits in the window
            assert env.core.pending.tolist() == [0]
            *_, infos = env.step(act(env, node_1=1))  # the A100 node claims it at once
            assert infos["node_1"]["placed"] == 1
        while env.agents:
            env.step(act(env))
        assert env.core.sim is not None
        ends[move] = float(env.core.sim.finish_time[0])
        assert int(env.core.sim.restarts[0]) == int(move)  # the move pays one restart
    # 10 min on the K80 (at 1/7.3 of the A100's rate), a 50 s restart, the rest on the A100
    assert ends[True] == pytest.approx(600.0 + 50.0 + 7200.0 - 600.0 * 843.56 / 6135.38)
    assert ends[True] < 0.5 * ends[False]


def test_the_teacher_migrates_when_the_saving_exceeds_its_threshold() -> None:
    env = _env(1.25)
    _start(env)
    evict = env.core.n_place
    assert SJFTeacher(min_rel_rate=0.0, migrate_gain_s=60.0).act(env.core).tolist() == [evict, 0]
    assert SJFTeacher(min_rel_rate=0.0, migrate_gain_s=1e6).act(env.core).tolist() == [0, 0]
    assert SJFTeacher(min_rel_rate=0.0).act(env.core).tolist() == [0, 0]  # no migrations
    env.step(act(env, node_0=evict))
    assert SJFTeacher(min_rel_rate=0.0, migrate_gain_s=60.0).act(env.core).tolist() == [0, 1]


def test_migration_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="migrate_speedup needs preemptive=True"):
        EnvSettings(migrate_speedup=1.5)
    with pytest.raises(ValueError, match="migrate_speedup=1.0 must be a number > 1"):
        EnvSettings(preemptive=True, migrate_speedup=1.0)
    with pytest.raises(ValueError, match="migrate_gain_s=-1.0 must be >= 0"):
        SJFTeacher(migrate_gain_s=-1.0)


def test_migrations_pass_the_conformance_kit() -> None:
    kw = small_env_kwargs(migrate_speedup=1.25)
    report = check_env_suite(["hetsched/ClusterPreempt-v0"], env_kwargs=kw, sb3=False)
    assert all("pettingzoo.parallel_api_test" in v for v in report.values())
    env = ClusterParallelEnv(**kw, preemptive=True)
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    while env.agents:  # random legal play with migrations: allocations stay valid
        m = env.action_masks()
        a = (rng.random(m.shape) * m).argmax(1)
        env.step(dict(zip(env.agents, a.tolist(), strict=True)))
    assert env.core.sim is not None and env.core.sim.done


#: node_0 and node_1: 4 K80 GPUs each; node_2: 8 A100 GPUs.
GANG_FAST: dict[str, Any] = {
    "name": "k80x2_a100x8",
    "nodes": [
        {**TWO_NODES["nodes"][0], "gpu_type": "k80", "count": 2},
        {**TWO_NODES["nodes"][0], "gpu_type": "a100", "count": 1, "gpus": 8, "cpus": 64,
         "mem_gib": 512},
    ],
}  # fmt: skip


@pytest.mark.parametrize("gangs", [False, True])
def test_a_gang_migrates_to_one_faster_node_only_with_migrate_gangs(gangs: bool) -> None:
    wl = jobs([8, 8], seconds=600.0)  # j0 (long) as a gang on the K80s, j1 on the A100
    wl.work[0] *= 12.0
    env = ClusterParallelEnv(
        GANG_FAST, wl, throughput=TM, levels={"gpu": [1.0], "cpu": [1.0], "mem": [1.0]},
        window=2, preemptive=True, migrate_speedup=1.25, migrate_gangs=gangs, advance="event",
    )  # fmt: skip
    env.reset(seed=0)
    env.step(act(env, node_0=1, node_1=1, node_2=2))  # then time runs until j1 finishes
    if not gangs:  # no legal action is left: the env runs j0 to its end on the K80s
        assert env.core.sim is not None and env.core.sim.done and not env.agents
        return
    assert env.core.free_g.tolist() == [0, 0, 8]  # j0 holds both K80 nodes, the A100 is free
    evict = env.core.n_place
    legal = env.action_masks()[:, evict]
    assert legal.tolist() == [True, True, False]  # each gang node may evict it
    teacher = SJFTeacher(min_rel_rate=0.0, migrate_gain_s=60.0)
    assert teacher.act(env.core).tolist() == [evict, 0, 0]  # the gang moves once
    env.step(act(env, node_0=evict))  # the whole gang leaves both nodes
    assert env.core.free_g.tolist() == [4, 4, 8] and env.core.pending.tolist() == [0]
    *_, infos = env.step(act(env, node_2=1))
    assert infos["node_2"]["placed"] == 1


def test_migrate_gangs_needs_migrate_speedup() -> None:
    with pytest.raises(ValueError, match="migrate_gangs needs migrate_speedup"):
        EnvSettings(preemptive=True, migrate_gangs=True)


def _elastic_env(elastic: bool) -> ClusterParallelEnv:
    """j0 (elastic: 1-4 GPUs, request 2, long) on node_0 at 2 GPUs, j1 (4 GPUs, short) on
    node_1 of :data:`TWO_NODES` (A100s); run until j1 finishes and node_1 is free (or the
    episode ends)."""
    wl = jobs([2, 4], seconds=600.0, elastic=True)
    wl.work[0] *= 12.0
    env = ClusterParallelEnv(
        TWO_NODES, wl, throughput=TM, levels={"gpu": [0.5, 1.0, 2.0], "cpu": [1.0], "mem": [1.0]},
        window=2, preemptive=True, migrate_speedup=1.25, migrate_elastic=elastic, advance="event",
    )  # fmt: skip
    env.reset(seed=0)
    enc = env.core.codec.encode  # (window slot, GPU level, CPU level, memory level)
    j0, j1 = (int(enc(k, 1, 0, 0)) for k in (0, 1))  # each at its request (level 1.0)
    env.step(act(env, node_0=j0, node_1=j1))
    while env.agents and env.core.free_g[1] < 4:
        env.step(act(env))
    return env


@pytest.mark.parametrize("elastic", [False, True])
def test_an_elastic_job_migrates_to_more_gpus_only_with_migrate_elastic(elastic: bool) -> None:
    env = _elastic_env(elastic)
    evict = env.core.n_place
    assert env.core.sim is not None
    if not elastic:  # same GPU type and count: no move is faster, no legal action is left,
        assert env.core.sim.done and not env.agents  # and j0 runs to its end where it is
        assert int(env.core.sim.restarts[0]) == 0
        return
    assert env.core.pending.size == 0 and env.core.free_g.tolist() == [2, 4]  # nothing waits
    assert env.action_masks()[0, evict]  # node_1 gives it 4 GPUs (its 2x level)
    mv = env.core.move_targets(env.action_masks()[:, evict : evict + 1].astype(bool))
    assert mv.ok.tolist() == [[False, True]]  # its own node's 2 free GPUs are no faster
    assert mv.there[0, 1] == pytest.approx(float(TM.isolated(CIFAR, TM.gpu_types.index("a100"), 4)))
    assert SJFTeacher(min_rel_rate=0.0, migrate_gain_s=60.0).act(env.core).tolist() == [evict, 0]
    env.step(act(env, node_0=evict))
    assert env.core.pending.tolist() == [0] and env.core.free_g.tolist() == [4, 4]


def test_migrate_elastic_needs_migrate_speedup() -> None:
    with pytest.raises(ValueError, match="migrate_elastic needs migrate_speedup"):
        EnvSettings(preemptive=True, migrate_elastic=True)


def test_move_savings_and_the_move_feature_show_what_a_migration_saves() -> None:
    """After j1 leaves the A100 node, moving j0 off the K80 saves its run time left there less
    that on the A100 and the 50 s restart (:func:`hetsched.agents.signals.move_savings`); the
    agent's ``move_feature`` shows it in node_0's first resident slot as ``h / (h + 1)``."""
    from hetsched.agents.acting import agent_observations
    from hetsched.agents.config import AgentEnvConf
    from hetsched.agents.signals import move_savings

    env = _env(1.25)
    _start(env)
    left = 7200.0 - 600.0 * 843.56 / 6135.38  # s of j0's work left at the A100's rate
    want = left * 6135.38 / 843.56 - left - 50.0
    got = move_savings(env.core)
    assert got[0, 0] == pytest.approx(want, rel=1e-3)
    assert (got[0, 1:] == 0).all() and (got[1] == 0).all()  # empty slots
    assert (move_savings(_env(None).core) == 0).all()  # no migrations: nothing to show
    conf = AgentEnvConf(move_feature=True)
    obs = agent_observations(env.core, conf)
    R = env.core.cfg.resident_slots
    assert obs.shape[1] == env.core.layout.obs_dim + R
    h = want / 3600.0
    assert obs[0, -R] == pytest.approx(h / (h + 1.0), rel=1e-3)
    import torch

    from hetsched.agents.acting import net_dims
    from hetsched.agents.network import MAIFSNet

    dims = net_dims(env.core.layout, env.core.cfg.levels, preemptive=True, res_extra=1)
    assert dims.obs_dim == obs.shape[1]
    net = MAIFSNet(dims)
    assert net.res_enc[0].in_features == dims.res_dim + 1
    assert torch.isfinite(net.encode(torch.from_numpy(obs)[None])[3]).all()


def test_the_move_input_shows_an_elastic_move_at_its_new_gpu_count() -> None:
    """``agent=maifs_elastic`` relies on the move input being computed from the env's own move
    targets: with ``migrate_elastic`` j0's move to 4 A100s saves its run time at 2 GPUs less
    that at 4 less the restart (without it no move is faster and none is offered, see
    :func:`test_an_elastic_job_migrates_to_more_gpus_only_with_migrate_elastic`)."""
    from hetsched.agents.signals import move_savings

    env = _elastic_env(True)
    got = move_savings(env.core)
    assert env.core.sim is not None and env.core.wl is not None
    a100 = TM.gpu_types.index("a100")
    r2, r4 = (float(TM.isolated(CIFAR, a100, g)) for g in (2, 4))
    left = float(env.core.sim.remaining[0])
    want = left / r2 - left / r4 - float(TM.restart_delay_s[CIFAR])
    assert got[0, 0] == pytest.approx(want, rel=1e-6) and want > 0
    assert (got[0, 1:] == 0).all() and (got[1] == 0).all()
