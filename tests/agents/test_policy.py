"""The scheduler twin: MAIFSPolicy inside Simulator.run reproduces the training env exactly."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from conftest import make_cluster, make_tm, make_workload
from helpers import A100, T4, fast_config, tiny_tm

from hetsched.agents.agent import Acting, build_net, env_settings, net_dims
from hetsched.agents.driver import TeamEnv
from hetsched.agents.policy import MAIFSPolicy, TeacherPolicy
from hetsched.envs.core import EnvCore
from hetsched.resources import CHECKPOINT_DIR
from hetsched.sim.allocation import Allocation
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimConfig, SimResult, SimState, Simulator
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload


def _twin_instance() -> tuple[ThroughputModel, Cluster, Workload]:
    """Two T4 nodes and an A100 node, 12 jobs of 1-4 GPUs arriving over 3 h."""
    tm = tiny_tm()
    cl = make_cluster(
        [
            {"gpu_type": "t4", "count": 2, "gpus": 2, "cpus": 16, "mem_gib": 64},
            {"gpu_type": "a100", "count": 1, "gpus": 4, "cpus": 32, "mem_gib": 128},
        ]
    )
    rng = np.random.default_rng(3)
    J = 12
    wl = make_workload(
        sorted(rng.uniform(0, 3 * 3600, J).tolist()),
        rng.uniform(600, 4 * 3600, J).tolist(),
        rng.choice([1, 2, 4], J).tolist(),
        cpu=4.0,
        mem=16.0,
    )
    return tm, cl, wl


@pytest.mark.parametrize("conflict", ["ordered", "none", "maxsum"])
def test_policy_matches_env_rollout(conflict: str) -> None:
    conf = fast_config().agent
    conf.conflict = conflict
    tm, cl, wl = _twin_instance()
    env = TeamEnv(cl, wl, tm, env_settings(conf.env))
    torch.manual_seed(0)
    net = build_net(conf.net, net_dims(env.core.layout, env.core.cfg.levels)).eval()
    acting = Acting(net, conf, greedy=True)
    env.reset(np.random.default_rng(0))
    while not env.step(acting(env.core)).done:
        pass
    via_env = env.core.sim.result()  # type: ignore[union-attr]
    pol = MAIFSPolicy(net=(net, conf))
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    via_sim = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert np.isfinite(via_sim.finish_time).all()
    np.testing.assert_allclose(via_sim.finish_time, via_env.finish_time)
    np.testing.assert_allclose(via_sim.start_time, via_env.start_time)


def test_teacher_actor_replaces_the_network() -> None:
    """actor="teacher": the checkpoint's teacher takes the decision steps in the same env."""
    from hetsched.agents.teacher import SJFTeacher

    conf = fast_config().agent
    conf.teacher.long_s = 1800.0  # some jobs of the instance count as long for the teacher
    tm, cl, wl = _twin_instance()
    env = TeamEnv(cl, wl, tm, env_settings(conf.env))
    teacher = SJFTeacher(
        conf.teacher.order, conf.teacher.min_rel_rate, conf.env.fungible, long_s=1800.0
    )
    env.reset(np.random.default_rng(0))
    while not env.step(teacher.act(env.core)).done:
        pass
    via_env = env.core.sim.result()  # type: ignore[union-attr]
    net = build_net(conf.net, net_dims(env.core.layout, env.core.cfg.levels)).eval()
    pol = MAIFSPolicy(net=(net, conf), actor="teacher")
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    via_sim = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    np.testing.assert_allclose(via_sim.finish_time, via_env.finish_time)
    np.testing.assert_allclose(via_sim.start_time, via_env.start_time)
    # The untrained network decides otherwise, so the switch is what made them equal.
    pol_net = MAIFSPolicy(net=(net, conf))
    pol_net.reset(cl, wl, tm, np.random.default_rng(0))
    by_net = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol_net)
    assert not np.allclose(by_net.start_time, via_env.start_time)
    with pytest.raises(ValueError, match="actor='oracle'; choose one of network, teacher"):
        MAIFSPolicy(net=(net, conf), actor="oracle")


def test_elastic_teacher_takes_the_steps_of_elastic_windows_only() -> None:
    """elastic_teacher: on a rigid workload the networks act (results equal the plain
    policy's); on the same jobs made elastic the teacher acts (results equal actor="teacher")."""
    conf = fast_config().agent
    conf.teacher.long_s = 1800.0
    tm, cl, rigid = _twin_instance()
    elastic = dataclasses.replace(
        rigid, min_gpus=np.ones_like(rigid.min_gpus), max_gpus=rigid.req_gpus * 2
    )
    env = TeamEnv(cl, rigid, tm, env_settings(conf.env))
    env.reset(np.random.default_rng(0))
    net = build_net(conf.net, net_dims(env.core.layout, env.core.cfg.levels)).eval()

    def run(wl: Workload, **kw: Any) -> SimResult:
        pol = MAIFSPolicy(net=(net, conf), **kw)
        pol.reset(cl, wl, tm, np.random.default_rng(0))
        return Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)

    for wl, same_as in ((rigid, {}), (elastic, {"actor": "teacher"})):
        split, ref = run(wl, elastic_teacher=True), run(wl, **same_as)
        np.testing.assert_array_equal(split.start_time, ref.start_time)
        np.testing.assert_array_equal(split.finish_time, ref.finish_time)
    pol = MAIFSPolicy(net=(net, conf), elastic_teacher=True)
    for wl, teacher_took_all in ((rigid, False), (elastic, True)):
        pol.reset(cl, wl, tm, np.random.default_rng(0))
        Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
        st = pol.run_stats()
        assert st["decision_steps"] > 0
        assert st["teacher_steps"] == (st["decision_steps"] if teacher_took_all else 0)
    # ... and the switch matters there: the untrained network decides otherwise.
    assert not np.array_equal(
        run(elastic).start_time, run(elastic, elastic_teacher=True).start_time
    )


def test_elastic_split_hands_mixed_and_empty_windows_to_the_other_actor() -> None:
    from types import SimpleNamespace

    from hetsched.agents.policy import elastic_split

    # Jobs 0-1 elastic (1..4 GPUs), jobs 2-3 rigid; the window's slots hold job ids.
    wl = make_workload([0.0] * 4, [3600.0] * 4, [2, 2, 2, 2], elastic=([1, 1, 2, 2], [4, 4, 2, 2]))
    act = elastic_split(lambda c: np.array([1]), lambda c: np.array([2]))
    cases = [
        ([0, 1, 0], [True, True, False], 1),  # every waiting job elastic: the elastic actor
        ([0, 2, 0], [True, True, False], 2),  # a rigid job beside it: the other one
        ([2, 3, 0], [True, True, False], 2),  # rigid only
        ([0, 0, 0], [False, False, False], 2),  # nothing waits
    ]
    for window, ok, expected in cases:
        core = SimpleNamespace(wl=wl, window=np.array(window), slot_ok=np.array(ok))
        assert act(core).tolist() == [expected], (window, ok)  # type: ignore[arg-type]


def test_teacher_policy_runs_and_validates_args() -> None:
    tm = tiny_tm()
    cl = make_cluster([{"gpu_type": "a100", "count": 1, "gpus": 2, "cpus": 16, "mem_gib": 64}])
    wl = make_workload([0.0, 0.0, 10.0], [3600.0, 600.0, 60.0], [1, 1, 2])
    pol = TeacherPolicy(window=4)
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert np.isfinite(res.finish_time).all()
    # shortest first: the 600-unit job starts at t=0 beside the long one
    assert res.start_time[1] == 0.0
    with pytest.raises(ValueError, match="order"):
        TeacherPolicy(order="random")


def test_long_job_guard_masks() -> None:
    from hetsched.agents.agent import agent_masks

    conf = fast_config().agent
    tm = tiny_tm()
    cl = make_cluster(
        [
            {"gpu_type": "t4", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
            {"gpu_type": "a100", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
        ]
    )
    wl = make_workload([0.0, 0.0], [400.0 * 3600, 60.0], [1, 1], cpu=4.0, mem=16.0)
    env = TeamEnv(cl, wl, tm, env_settings(conf.env))
    env.reset(np.random.default_rng(0))
    off, _ = agent_masks(env.core, conf.env)
    conf.env.long_guard_s = 3600.0
    on, _ = agent_masks(env.core, conf.env)
    L = (off.shape[1] - 1) // conf.env.window
    assert off[0, 1 : 1 + L].any() and off[1, 0] == 1  # without the guard: anything goes
    assert not on[0, 1 : 1 + L].any()  # the T4 node may not take the long job ...
    assert on[0, 1 + L : 1 + 2 * L].any()  # ... but may take the short one
    assert on[1, 0] == 0 and on[1, 1 : 1 + L].any()  # the A100 node serves the long job
    assert not on[1, 1 + L : 1 + 2 * L].any()


def only_job0(core: EnvCore) -> np.ndarray:
    """An actor that places job 0 on node 0 and otherwise always passes."""
    a = np.zeros(core.N, dtype=np.int64)
    k = np.flatnonzero(core.window == 0)
    one = core.features.one
    if k.size and core.ma.single[0, int(k[0]), one[0], one[1], one[2]]:
        a[0] = int(core.codec.encode(int(k[0]), *one))
    return a


@pytest.mark.parametrize("guard_s", [None, 3600.0])
def test_starvation_guard_places_a_job_left_waiting_on_idle_gpus(guard_s: float | None) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = tiny_tm()
    node = {"gpu_type": "a100", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 128}
    cl = make_cluster([node])
    # j0 runs for a long time; j1 fits on the idle second node; j2 arrives after 2 h (an event).
    wl = make_workload([0.0, 0.0, 7200.0], [1e7, 1e4, 1e2], [4, 4, 1])

    pol = CoreActorPolicy(
        EnvSettings(window=4, advance="event", round_s=60), only_job0, starve_guard_s=guard_s
    )
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert np.isfinite(res.finish_time).all() and res.start_time[0] == 0.0
    if guard_s is None:  # j1 waits on an idle node until nothing runs (the idle-cluster fallback)
        assert res.start_time[1] >= res.finish_time[0] and pol.run_stats()["guard_placements"] == 0
    else:  # checked at the next decision point after 3600 s of waiting: j2's arrival
        assert res.start_time[1] == 7200.0 and pol.run_stats()["guard_placements"] >= 1
    # The runner reports the policy's counters in results_extended.csv.
    from hetsched.evaluation import run_one

    out = run_one(
        pol, name="x", cluster=cl, workload=wl, throughput=tm, sim_config=SimConfig(round_s=60),
        seed=0, rng=np.random.default_rng(0),
    )  # fmt: skip
    assert out.extra["policy_guard_placements"] == pol.run_stats()["guard_placements"]
    assert (out.extra["policy_guard_placements"] > 0) == (guard_s is not None)
    assert out.extra["policy_decision_steps"] >= 1
    assert (out.extra["policy_fallbacks"] > 0) == (guard_s is None)  # j1 waits until j0 ends
    with pytest.raises(ValueError, match="starve_guard_s"):
        CoreActorPolicy(EnvSettings(advance="event"), only_job0, starve_guard_s=-1.0)


@pytest.mark.parametrize("wake", ["starve", "all"])
def test_timed_wakeup_lets_the_starvation_guard_act_without_an_event(wake: str) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = tiny_tm()
    cl = make_cluster([{"gpu_type": "a100", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 128}])
    # j0 runs for a long time; j1 fits on the idle second node; nothing arrives or completes
    # for days, so only a timed wake-up gives the guard a decision point.
    wl = make_workload([0.0, 0.0], [1e7, 1e4], [4, 4])

    settings = EnvSettings(window=4, advance="event", round_s=60)
    runs = {}
    for w in (None, wake):
        pol = CoreActorPolicy(settings, only_job0, starve_guard_s=3630.0, wake=w)
        pol.reset(cl, wl, tm, np.random.default_rng(0))
        runs[w] = (Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol), pol.run_stats())
    res, stats = runs[None]
    assert res.start_time[1] >= res.finish_time[0]  # no event: j1 waits for j0 to end
    assert stats["wakeups"] == 0
    res, stats = runs[wake]
    # Placed at the first round boundary at or after 3630 s of waiting.
    assert res.start_time[1] == 3660.0 and res.start_time[0] == 0.0
    assert stats["wakeups"] == 1 and stats["guard_placements"] == 1
    with pytest.raises(ValueError, match="wake='soon'"):
        CoreActorPolicy(settings, only_job0, wake="soon")


@pytest.mark.parametrize(
    ("gain", "blocker", "moves"),
    [(None, False, 0), (0.1, False, 1), (0.9, False, 0), (0.1, True, 0)],
)
def test_migration_moves_a_running_job_to_an_idle_faster_gpu(
    gain: float | None, blocker: bool, moves: int
) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = tiny_tm()  # 4x faster on the A100
    cl = make_cluster(
        [
            {"gpu_type": "t4", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
            {"gpu_type": "a100", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
        ]
    )
    # j0 (long) starts on the T4 and j1 (short) on the A100; when j1 ends, the A100 is idle.
    # With ``blocker``, j2 waits in the window and could use the A100: then nothing moves.
    arrivals, work = [0.0, 0.0], [1e5, 3600.0]
    if blocker:
        arrivals, work = [*arrivals, 0.0], [*work, 100.0]
    wl = make_workload(arrivals, work, [1] * len(work), cpu=4.0, mem=16.0)

    def j0_t4_j1_a100(core: EnvCore) -> np.ndarray:
        a = np.zeros(core.N, dtype=np.int64)
        one = core.features.one
        for job, node in ((0, 0), (1, 1)):
            k = np.flatnonzero(core.window == job)
            if k.size and core.ma.single[node, int(k[0]), one[0], one[1], one[2]]:
                a[node] = int(core.codec.encode(int(k[0]), *one))
        return a

    pol = CoreActorPolicy(
        EnvSettings(window=4, advance="event", round_s=60), j0_t4_j1_a100, migrate_gain=gain
    )
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert np.isfinite(res.finish_time).all()
    assert pol.run_stats()["migrations"] == moves and int(res.restarts[0]) == moves
    j1_end = res.finish_time[1]
    if moves:  # j0 ran ~j1_end on the T4, then the rest 4x faster after one restart delay
        assert res.finish_time[0] < 0.5 * 1e5
        assert res.finish_time[0] >= j1_end + (1e5 - j1_end) / 4.0
    else:
        assert res.finish_time[0] == pytest.approx(1e5, rel=1e-6)
    assert pol.run_stats()["migrations"] == moves
    with pytest.raises(ValueError, match="migrate_gain"):
        CoreActorPolicy(EnvSettings(advance="event"), j0_t4_j1_a100, migrate_gain=1.0)


def test_migration_moves_a_multi_node_job_as_a_gang() -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = tiny_tm()  # 4x faster on the A100
    cl = make_cluster(
        [
            {"gpu_type": "t4", "count": 2, "gpus": 2, "cpus": 16, "mem_gib": 64},
            {"gpu_type": "a100", "count": 2, "gpus": 2, "cpus": 16, "mem_gib": 64},
        ]
    )
    # j0 needs 4 GPUs: a gang over the two T4 nodes; j1 (short, 4 GPUs) holds both A100 nodes.
    # When j1 ends, j0 moves as a gang onto the two A100 nodes.
    wl = make_workload([0.0, 0.0], [4e5, 3600.0], [4, 4], cpu=4.0, mem=16.0)

    def j0_t4_j1_a100(core: EnvCore) -> np.ndarray:
        a = np.zeros(core.N, dtype=np.int64)
        one = core.features.one
        for job, nodes in ((0, (0, 1)), (1, (2, 3))):
            k = np.flatnonzero(core.window == job)
            if k.size and core.ma.legal[nodes[0], int(k[0]), one[0], one[1], one[2]]:
                a[list(nodes)] = int(core.codec.encode(int(k[0]), *one))
        return a

    pol = CoreActorPolicy(
        EnvSettings(window=4, advance="event", round_s=60), j0_t4_j1_a100, migrate_gain=0.1
    )
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    sim = Simulator(cl, wl, tm, SimConfig(round_s=60))
    res = sim.run(pol)
    assert pol.run_stats()["migrations"] == 1 and int(res.restarts[0]) == 1
    j1_end = res.finish_time[1]
    rate_t4 = float(tm.isolated(0, int(cl.node_type[0]), 4, False))
    assert res.finish_time[0] < 0.5 * 4e5 / rate_t4  # far sooner than staying on the T4s
    by_type = sim.gpu_s_by_type[0]
    assert by_type[int(cl.node_type[2])] > 0 and by_type[int(cl.node_type[0])] > 0
    assert j1_end < res.finish_time[0]


def test_teacher_gangs_a_job_larger_than_any_node_even_if_a_smaller_level_fits_one() -> None:
    # An elastic 8-GPU job on 4-GPU nodes: at its request only a gang can hold it, while its
    # 0.5x GPU level would fit one node. The teacher (and so MAIFS's idle-cluster fallback)
    # must claim the gang rather than wait forever (it used to stall on Sia's Helios workload).
    tm = tiny_tm()
    cl = make_cluster([{"gpu_type": "a100", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 128}])
    wl = make_workload([0.0], [1e4], [8], elastic=([1], [16]))
    pol = TeacherPolicy(window=4)
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    core = pol.core
    assert core is not None
    core.begin(Simulator(cl, wl, tm).state())
    g1 = core.cfg.levels.one_index[0]
    assert not core.ma.single[:, 0, g1].any() and core.ma.single[:, 0].any()
    acts = pol.act(core)
    assert (acts > 0).all()  # both nodes claim the gang
    res = Simulator(cl, wl, tm, SimConfig()).run(pol)
    assert np.isfinite(res.finish_time).all() and res.start_time[0] == 0.0


def _first_fit_actor(core: EnvCore) -> np.ndarray:
    """Place the first window job that fits one node at its request on the lowest such node."""
    a = np.zeros(core.N, dtype=np.int64)
    one = core.features.one
    single = core.ma.single[:, :, one[0], one[1], one[2]]
    for k in np.flatnonzero(core.slot_ok & single.any(axis=0)).tolist():
        n = int(np.argmax(single[:, k]))
        a[n] = int(core.codec.encode(k, *one))
        break
    return a


def _one_gpu_cluster() -> Cluster:
    return make_cluster([{"gpu_type": "a100", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64}])


@pytest.mark.parametrize(
    ("ratio", "short_work", "preempted"),
    [(None, 100.0, False), (4.0, 100.0, True), (4.0, 1.5e6, False)],
)
def test_preemption_for_a_short_job(
    ratio: float | None, short_work: float, preempted: bool
) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = tiny_tm()
    cl = _one_gpu_cluster()
    # j0 (long) holds the only GPU; j1 arrives at 600 s. It takes j0's place only when j0's
    # remaining time is more than ``ratio`` times j1's run time.
    wl = make_workload([0.0, 600.0], [4e6, short_work], [1, 1])
    pol = CoreActorPolicy(
        EnvSettings(window=4, advance="event", round_s=60), _first_fit_actor, preempt_ratio=ratio
    )
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert np.isfinite(res.finish_time).all()
    assert pol.run_stats()["preemptions"] == int(preempted)
    assert int(res.preemptions[0]) == int(preempted) and int(res.preemptions[1]) == 0
    if preempted:  # j1 starts on arrival; j0 resumes after it, paying its restart delay
        assert res.start_time[1] == 600.0
        assert res.finish_time[0] > res.finish_time[1]
        assert res.finish_time[0] >= 4e6 / 4.0 + short_work / 4.0 + tm.restart_delay_s[0]
    else:  # j1 waits for j0
        assert res.start_time[1] >= res.finish_time[0]


@pytest.mark.parametrize(
    ("max_times", "every_s", "expected"),
    [(1, None, 1), (2, None, 2), (1, 1e6, 1), (1, 3600.0, 2)],
)
def test_preemption_cap_per_job(max_times: int, every_s: float | None, expected: int) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = tiny_tm()
    cl = _one_gpu_cluster()
    # Two short jobs arrive while the long j0 runs; j0 may be preempted ``max_times`` times, plus
    # once per ``every_s`` seconds on the GPU: by the second arrival (7200 s) it has held the GPU
    # for more than 3600 s, which earns it one more preemption with every_s 3600.
    wl = make_workload([0.0, 600.0, 7200.0], [4e6, 100.0, 100.0], [1, 1, 1])
    pol = CoreActorPolicy(
        EnvSettings(window=4, advance="event", round_s=60),
        _first_fit_actor,
        preempt_ratio=4.0,
        preempt_max=max_times,
        preempt_every_s=every_s,
    )
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert pol.run_stats()["preemptions"] == expected and int(res.preemptions[0]) == expected
    assert res.start_time[1] == 600.0
    assert (res.start_time[2] == 7200.0) == (expected == 2)


def _evicting_actor(until_s: float = float("inf")) -> Callable[[EnvCore], np.ndarray]:
    """First fit; when that places nothing, node 0 evicts its first resident job if legal
    (only before ``until_s`` seconds of simulated time)."""

    def act(core: EnvCore) -> np.ndarray:
        a = _first_fit_actor(core)
        assert core.sim is not None
        if a[0] == 0 and core.sim.time < until_s and core.ma.mask[0, core.n_place] == 1:
            a[0] = core.n_place
        return a

    return act


def _evictions_of_a_long_job(until_s: float = float("inf"), **kw: Any) -> tuple[Any, SimResult]:
    """The long j0 holds the only GPU; short jobs arrive at 600, 7200 and 14,400 s."""
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = tiny_tm()
    cl = _one_gpu_cluster()
    wl = make_workload([0.0, 600.0, 7200.0, 14400.0], [4e6, 100.0, 100.0, 100.0], [1, 1, 1, 1])
    settings = EnvSettings(window=4, advance="event", round_s=60, preemptive=True)
    settings = dataclasses.replace(settings, window_order="sjf")  # the short job first
    pol = CoreActorPolicy(settings, _evicting_actor(until_s), **kw)
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    return pol, Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)


@pytest.mark.parametrize(
    ("kw", "evictions", "j2_start"),
    [
        ({}, 3, 7200.0),  # the learned evictions alone: unbounded (no evict_max)
        ({"preempt_max": 1}, 3, 7200.0),  # the rules' allowance binds them only with the switch
        ({"evict_allowance": True, "preempt_max": 1}, 1, None),  # j2 waits for j0 to end
        ({"evict_allowance": True, "preempt_max": 2}, 2, 7200.0),
        # one more per 10,000 s held: j0 has held the GPU ~7,100 s at 7,200 s (allowance 1,
        # spent), ~14,300 s at 14,400 s (allowance 2): j2 gets the GPU when j3 arrives
        ({"evict_allowance": True, "preempt_max": 1, "preempt_every_s": 10000.0}, 2, 14400.0),
    ],
)
def test_evict_allowance_bounds_the_actors_evictions(
    kw: dict[str, Any], evictions: int, j2_start: float | None
) -> None:
    pol, res = _evictions_of_a_long_job(**kw)
    assert pol.core.evictions[0] == evictions == int(res.preemptions[0])
    assert pol.core.evictions[1:].sum() == 0
    assert res.start_time[1] == 600.0  # the first eviction is always within the allowance
    if j2_start is None:
        assert res.start_time[2] > res.finish_time[0]
    else:
        assert res.start_time[2] == j2_start


@pytest.mark.parametrize("shared", [False, True])
def test_evict_allowance_counts_evictions_against_the_rules_victims(shared: bool) -> None:
    # The actor evicts j0 once (for j1, at 600 s); at 7,200 s the preemption rule would take
    # j0's GPU for j2 -- unless that eviction spent j0's allowance of one.
    pol, res = _evictions_of_a_long_job(
        until_s=1000.0, preempt_ratio=4.0, preempt_max=1, evict_allowance=shared
    )
    assert pol.core.evictions[0] == 1
    assert pol.run_stats()["preemptions"] == (0 if shared else 1)  # its own allowance of one
    assert (res.start_time[2] == 7200.0) == (not shared)
    prot = pol.core.evict_protected  # set at each decision with the switch only
    assert (prot is not None and bool(prot[0])) if shared else prot is None


@pytest.mark.parametrize("evict_critical", [True, False])
def test_evict_critical_false_spares_the_makespan_guards_jobs(evict_critical: bool) -> None:
    # The makespan guard places the long j0 at once (it would finish after every running job);
    # the actor may then evict it for each short job, unless evict_critical is false.
    pol, res = _evictions_of_a_long_job(critical_s=3600.0, evict_critical=evict_critical)
    evictions = 3 if evict_critical else 0
    assert pol.core.evictions[0] == evictions and res.start_time[0] == 0.0
    # The guard places j0 again after each eviction.
    assert pol.run_stats()["critical_placements"] == 1 + evictions
    assert (res.start_time[1] == 600.0) == evict_critical


@pytest.mark.parametrize("first", [False, True])
def test_starve_first_places_a_starved_gang_before_the_actors_short_jobs(first: bool) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = tiny_tm()
    cl = make_cluster([{"gpu_type": "a100", "count": 1, "gpus": 4, "cpus": 32, "mem_gib": 128}])
    # j0 holds the node's 4 GPUs until 25,000 s; j1 (4 GPUs) waits from 60 s; the short j2 and
    # j3 (1 GPU) arrive at 20,000 s. When j0 ends, the shortest-first actor takes the node for
    # j2 and j3 and j1 starves on; with starve_first the guard places j1 first.
    wl = make_workload([0.0, 60.0, 2e4, 2e4], [4e5, 4e5, 1e4, 1e4], [4, 4, 1, 1])
    settings = dataclasses.replace(
        EnvSettings(window=4, advance="event", round_s=60), window_order="sjf"
    )
    pol = CoreActorPolicy(settings, _first_fit_actor, starve_guard_s=3600.0, starve_first=first)
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert res.finish_time[0] == pytest.approx(25000.0)
    if first:
        assert res.start_time[1] < 25100.0 and (res.start_time[2:] >= res.finish_time[1]).all()
    else:
        assert res.start_time[2] < 25100.0 and res.start_time[1] >= res.finish_time[2]
    with pytest.raises(ValueError, match="starve_first=True needs the starvation guard"):
        CoreActorPolicy(settings, _first_fit_actor, starve_first=True)


def test_evict_protected_masks_evictions_and_checks_its_shape() -> None:
    pol, _ = _evictions_of_a_long_job()
    core = pol.core
    core.evict_protected = np.zeros(2, dtype=bool)
    core._cur = Allocation(
        job=[0], node=[0], gpus=[1], cpus=[4.0], mem=[16.0], share=[-1]
    )  # j0 runs again
    core._evict_map = None
    core.slot_ok[:] = True
    with pytest.raises(ValueError, match=r"evict_protected has shape \(2,\); it must be \(4,\)"):
        core._evict_mask()
    core.evict_protected = np.zeros(4, dtype=bool)
    assert core._evict_mask()[0, 0] == 1
    core.evict_protected[0] = True
    assert core._evict_mask()[0, 0] == 0
    with pytest.raises(ValueError, match="read-only"):
        core.evictions[0] = 5


def test_victim_shape_takes_gangs_only_on_the_fewest_nodes() -> None:
    from types import SimpleNamespace

    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    cl = make_cluster([{"gpu_type": "a100", "count": 3, "gpus": 4, "cpus": 32, "mem_gib": 128}])
    wl = make_workload([0.0] * 4, [1e4] * 4, [2, 8, 4, 2])
    # j0: 2 GPUs on one node; j1: 8 GPUs on two 4-GPU nodes (the fewest); j2: 4 GPUs spread
    # 2 + 2 (one node would hold it); j3: 2 GPUs spread 1 + 1.
    cur = Allocation(
        job=[0, 1, 1, 2, 2, 3, 3],
        node=[0, 1, 2, 0, 1, 0, 2],
        gpus=[2, 4, 4, 2, 2, 1, 1],
        cpus=[8.0] * 7,
        mem=[16.0] * 7,
        share=[-1] * 7,
    )
    core = SimpleNamespace(wl=wl, cluster=cl)
    s = EnvSettings(window=4, advance="event", round_s=60)
    off = CoreActorPolicy(s, _first_fit_actor, preempt_ratio=4.0)
    on = CoreActorPolicy(s, _first_fit_actor, preempt_ratio=4.0, preempt_gangs=True)
    assert off._victim_shape(core, cur).tolist() == [True, False, False, False, False, False, False]
    assert on._victim_shape(core, cur).tolist() == [True, True, True, False, False, False, False]


def _gang_first_fit_actor(core: EnvCore) -> np.ndarray:
    """Like :func:`_first_fit_actor`, but a job no node holds alone is claimed as a gang by
    every node where it is legal at its request."""
    a = _first_fit_actor(core)
    if a.any():
        return a
    one = core.features.one
    legal = core.ma.legal[:, :, one[0], one[1], one[2]]
    for k in np.flatnonzero(core.slot_ok & legal.any(axis=0)).tolist():
        a[legal[:, k]] = int(core.codec.encode(k, *one))
        break
    return a


@pytest.mark.parametrize("gangs", [False, True])
def test_preemption_of_a_gang_on_the_fewest_nodes(gangs: bool) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = tiny_tm()
    # Two 1-GPU nodes: the long 2-GPU j0 needs both, so it is a gang on the fewest nodes.
    cl = make_cluster([{"gpu_type": "a100", "count": 2, "gpus": 1, "cpus": 16, "mem_gib": 64}])
    wl = make_workload([0.0, 600.0], [4e6, 100.0], [2, 1])
    pol = CoreActorPolicy(
        EnvSettings(window=4, advance="event", round_s=60),
        _gang_first_fit_actor,
        preempt_ratio=4.0,
        preempt_gangs=gangs,
    )
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert np.isfinite(res.finish_time).all() and res.start_time[0] == 0.0
    assert pol.run_stats()["preemptions"] == int(gangs) == int(res.preemptions[0])
    if gangs:  # j1 starts on arrival; the gang resumes after it
        assert res.start_time[1] == 600.0 and res.finish_time[0] > res.finish_time[1]
    else:  # j1 waits for the gang
        assert res.start_time[1] >= res.finish_time[0]


def test_preemption_waits_and_looks_past_the_arrival_order_window() -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = tiny_tm()
    cl = _one_gpu_cluster()
    # Window of one slot: the long j1 (arrived first) fills it in arrival order, so the short
    # j2 is only seen through the rule's shortest-first window. With a 3600 s wait, j2 may
    # preempt j0 at the first decision point after waiting that long: j3's arrival at 7200 s.
    wl = make_workload([0.0, 10.0, 600.0, 7200.0], [4e6, 4e6, 100.0, 4e6], [1, 1, 1, 1])
    seen: list[int] = []

    def actor(core: EnvCore) -> np.ndarray:
        seen.append(int(core.window[0]))
        return _first_fit_actor(core)

    pol = CoreActorPolicy(
        EnvSettings(window=1, advance="event", round_s=60),
        actor,
        preempt_ratio=4.0,
        preempt_wait_s=3600.0,
    )
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert pol.run_stats()["preemptions"] == 1 and int(res.preemptions[0]) == 1
    assert res.start_time[2] == 7200.0
    assert 0 in seen and 2 not in seen  # the actor's window never showed j2
    # After the rule the actor sees the arrival order again: j0 (preempted, pending, arrived
    # first) resumes before j1 starts.
    assert res.finish_time[2] < res.start_time[1] and res.finish_time[0] <= res.start_time[1]


def test_preemption_arguments_and_release_are_checked() -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    s = EnvSettings(advance="event")
    with pytest.raises(ValueError, match="preempt_ratio"):
        CoreActorPolicy(s, _first_fit_actor, preempt_ratio=1.0)
    with pytest.raises(ValueError, match="preempt_wait_s"):
        CoreActorPolicy(s, _first_fit_actor, preempt_ratio=4.0, preempt_wait_s=-1.0)
    with pytest.raises(ValueError, match="preempt_max"):
        CoreActorPolicy(s, _first_fit_actor, preempt_ratio=4.0, preempt_max=0)
    with pytest.raises(ValueError, match="preempt_every_s"):
        CoreActorPolicy(s, _first_fit_actor, preempt_ratio=4.0, preempt_every_s=0.0)
    pol = CoreActorPolicy(s, _first_fit_actor)
    tm = tiny_tm()
    cl = _one_gpu_cluster()
    wl = make_workload([0.0], [1e4], [1])
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    sim = Simulator(cl, wl, tm, SimConfig(round_s=60))
    assert pol.core is not None
    pol.core.begin(sim.state())
    with pytest.raises(ValueError, match="none of these jobs runs"):
        pol.core.release(np.array([0]))


@pytest.mark.parametrize(
    ("fast_wait_s", "max_s", "j0_node", "j1_starts_at_arrival"),
    [
        (None, 3600.0, 0, False),
        (0.0, 3600.0, 0, True),
        (0.0, 3600.0, 1, False),
        (0.0, 100.0, 0, False),
    ],
)
def test_fast_gpu_guard_places_only_short_jobs_on_the_fastest_type(
    fast_wait_s: float | None, max_s: float, j0_node: int, j1_starts_at_arrival: bool
) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = tiny_tm()  # 4x faster on the A100
    cl = make_cluster(
        [
            {"gpu_type": "t4", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
            {"gpu_type": "a100", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
        ]
    )
    # The actor places j0 on ``j0_node`` and leaves j1 (arriving at 600 s, 250 s of work on
    # the A100) waiting. The guard starts j1 at once on the idle A100 (node 1), but never on
    # the slower T4, and not when j1 is estimated to run longer than ``max_s``.
    wl = make_workload([0.0, 600.0], [4e5, 1e3], [1, 1])

    def only_j0(core: EnvCore) -> np.ndarray:
        a = np.zeros(core.N, dtype=np.int64)
        one = core.features.one
        k = np.flatnonzero(core.window == 0)
        if k.size and core.ma.single[j0_node, int(k[0]), one[0], one[1], one[2]]:
            a[j0_node] = int(core.codec.encode(int(k[0]), *one))
        return a

    pol = CoreActorPolicy(
        EnvSettings(window=4, advance="event", round_s=60),
        only_j0,
        fast_wait_s=fast_wait_s,
        fast_max_s=max_s,
    )
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    sim = Simulator(cl, wl, tm, SimConfig(round_s=60))
    res = sim.run(pol)
    assert np.isfinite(res.finish_time).all()
    assert (res.start_time[1] == 600.0) == j1_starts_at_arrival
    # With the guard j1 runs on the A100 only: at once, or when j0 leaves it.
    guard = fast_wait_s is not None and max_s > 250.0
    assert pol.run_stats()["fast_placements"] == int(guard)
    if guard:
        assert sim.gpu_s_by_type[1][int(cl.node_type[0])] == 0  # never on the T4
        if j0_node == 1:  # at the first round boundary after j0 ends
            assert res.finish_time[0] <= res.start_time[1] < res.finish_time[0] + 60.0
    with pytest.raises(ValueError, match="fast_wait_s"):
        CoreActorPolicy(EnvSettings(advance="event"), only_j0, fast_wait_s=-1.0)
    with pytest.raises(ValueError, match="fast_max_s"):
        CoreActorPolicy(EnvSettings(advance="event"), only_j0, fast_max_s=0.0)


def _a100_first_fit_actor(core: EnvCore) -> np.ndarray:
    """:func:`_first_fit_actor` on the A100 nodes only (waits for them, as the agents do)."""
    a = _first_fit_actor(core)
    a[core.cluster.node_type != A100] = 0
    return a


@pytest.mark.parametrize("a100_only", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_all_rules_together_keep_the_simulation_valid(seed: int, a100_only: bool) -> None:
    """Random small workloads with every rule on: allocations validate, every job finishes."""
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = tiny_tm()
    cl = make_cluster(
        [
            {"gpu_type": "t4", "count": 2, "gpus": 2, "cpus": 16, "mem_gib": 64},
            {"gpu_type": "a100", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 128},
        ]
    )
    rng = np.random.default_rng(seed)
    J = 40
    wl = make_workload(
        sorted(rng.uniform(0, 6 * 3600, J).tolist()),
        rng.choice([100.0, 1e3, 1e4, 1e5], J).tolist(),
        rng.choice([1, 1, 2, 4], J).tolist(),
        cpu=4.0,
        mem=16.0,
    )
    pol = CoreActorPolicy(
        EnvSettings(window=4, advance="event", round_s=60),
        _a100_first_fit_actor if a100_only else _first_fit_actor,
        starve_guard_s=3600.0,
        migrate_gain=0.1,
        preempt_ratio=2.0,
        preempt_max=2,
        fast_wait_s=0.0,
        fast_max_s=3600.0,
        eft_gain=0.1,
        wake="starve",
    )
    pol.reset(cl, wl, tm, np.random.default_rng(seed))
    # Simulator.advance validates every allocation (room, GPU counts, types) and raises if not.
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert np.isfinite(res.finish_time).all()
    assert (res.finish_time >= res.start_time).all()
    stats = pol.run_stats()
    assert stats["preemptions"] <= res.preemptions.sum()  # each rule preemption is one
    assert (pol._preempted <= 2).all()
    if not a100_only:  # (with the A100-only actor the T4s are the rules', EFT's mostly)
        assert stats["preemptions"] > 0 and stats["migrations"] > 0  # the rules interact here


def test_maifs_window_order_override() -> None:

    ckpts = CHECKPOINT_DIR
    # maifs_multitrace.pt was saved before agent.env.window_order existed: it loads with the
    # order it was trained with; the default checkpoint was trained with the sjf window.
    old = MAIFSPolicy(checkpoint=ckpts / "maifs_multitrace.pt")
    assert old.settings.window_order == "arrival"
    assert MAIFSPolicy().settings.window_order == "sjf"
    assert MAIFSPolicy(window_order="arrival").settings.window_order == "arrival"
    assert (
        MAIFSPolicy(
            checkpoint=ckpts / "maifs_multitrace.pt", window_order="sjf"
        ).settings.window_order
        == "sjf"
    )
    with pytest.raises(ValueError, match="window_order='newest'"):
        MAIFSPolicy(window_order="newest")


def _one_a100_node() -> Cluster:
    return make_cluster([{"gpu_type": "a100", "count": 1, "gpus": 4, "cpus": 32, "mem_gib": 128}])


def _run_first_fit(
    cl: Cluster,
    wl: Workload,
    tm: ThroughputModel,
    decisions: dict[float, list[int]] | None = None,
    **rules: Any,
) -> tuple[SimResult, dict[str, float]]:
    """Run the first-fit actor with the given rules; return the result and the rule counters.

    ``decisions``, if given, receives each decision's GPUs per job, keyed by its time (s).
    """
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    pol = CoreActorPolicy(
        EnvSettings(window=4, advance="event", round_s=60), _first_fit_actor, **rules
    )
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    if decisions is not None:
        decide, log = pol.decide, decisions

        def spy(state: SimState) -> Allocation:
            alloc = decide(state)
            log[state.time] = alloc.gpus_per_job(wl.num_jobs).tolist()
            return alloc

        pol.decide = spy  # type: ignore[method-assign]
    return Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol), pol.run_stats()


def _elastic_workload(req: list[int], lo: list[int], hi: list[int], model: list[int]) -> Workload:
    J = len(req)
    return make_workload(
        [0.0] * J, [3600.0] * J, req, model=model, cpu=4.0, mem=16.0, elastic=(lo, hi)
    )


@pytest.mark.parametrize(
    ("scaling", "gain", "expected"),
    [
        # speedup per doubling 2 (linear): every elastic job climbs to its request
        (1.0, 1.5, [8, 6, 4, 2]),
        # speedup per doubling sqrt(2) = 1.41: climbs at gain 1.3, stays at min_gpus at 1.5
        (0.5, 1.3, [8, 6, 4, 2]),
        (0.5, 1.5, [1, 2, 4, 2]),
    ],
)
def test_elastic_request_climbs_while_doubling_pays(
    scaling: float, gain: float, expected: list[int]
) -> None:
    from hetsched.agents.policy import elastic_request

    tm = make_tm(scaling=scaling)
    cl = make_cluster([{"gpu_type": "a100", "count": 2, "gpus": 8, "cpus": 64, "mem_gib": 256}])
    # job 0: elastic 1..16 requesting 8; job 1: elastic 2..8 requesting 6 (the last rung 4 -> 6
    # is a 1.5x step, so it needs gain ** log2(1.5)); job 2: rigid 4; job 3: elastic, request 2
    # = min (nothing to shrink)
    wl = _elastic_workload([8, 6, 4, 2], [1, 2, 4, 2], [16, 8, 4, 4], [0, 1, 0, 1])
    req = elastic_request(wl, tm, cl, gain)
    assert req.tolist() == expected
    assert (req >= wl.min_gpus).all() and (req <= wl.req_gpus).all()
    # max_s: jobs estimated longer than it at their request keep the request. Each job's work
    # (3600 units) at its request runs in under an hour on the unit-rate table.
    assert elastic_request(wl, tm, cl, gain, max_s=3600.0).tolist() == expected
    assert elastic_request(wl, tm, cl, gain, max_s=1.0).tolist() == wl.req_gpus.tolist()


def test_elastic_request_uses_the_fastest_present_type_and_keeps_jobs_it_cannot_size() -> None:
    from hetsched.agents.policy import elastic_request

    base = np.ones((2, len(GPU_TYPE_NAMES)))
    tm = make_tm(base, scaling=0.5)
    # On T4 model 'a' scales linearly, on A100 poorly: rebuild the table per type.
    tput = tm.tput.copy()
    levels = np.asarray(tm.count_levels, dtype=float)
    tput[0, T4, :, 0] = levels
    tput[0, T4, :, 1] = levels * np.where(levels > 1, 0.5, 1.0)
    tput[1, :, :, :] = 0.0  # model 'b' runs nowhere
    tm = dataclasses.replace(tm, tput=tput)
    wl = _elastic_workload([8, 8], [1, 1], [8, 8], [0, 1])
    only_t4 = make_cluster([{"gpu_type": "t4", "count": 1, "gpus": 8, "cpus": 64, "mem_gib": 256}])
    a100 = make_cluster([{"gpu_type": "a100", "count": 1, "gpus": 8, "cpus": 64, "mem_gib": 256}])
    assert elastic_request(wl, tm, only_t4, 1.5).tolist() == [8, 8]  # scales well there
    assert elastic_request(wl, tm, a100, 1.5).tolist() == [1, 8]  # 'b' keeps its request


def test_elastic_sizing_runs_poorly_scaling_jobs_side_by_side() -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = make_tm(scaling=0.3)  # 1.23x per doubling: 4 GPUs run 1.5x faster than one
    wl = _elastic_workload([4, 4, 4, 4], [1, 1, 1, 1], [4, 4, 4, 4], [0, 0, 0, 0])
    runs = {
        gain: _run_first_fit(_one_a100_node(), wl, tm, elastic_gain=gain) for gain in (None, 1.3)
    }
    whole, sized = runs[None][0], runs[1.3][0]
    assert runs[None][1]["elastic_resized"] == 0 and runs[1.3][1]["elastic_resized"] == 4
    assert (whole.start_time > 0).sum() == 3  # one 4-GPU job at a time
    assert (sized.start_time == 0).all()  # four 1-GPU jobs at once
    assert np.isfinite(sized.finish_time).all()
    # the real requests are untouched: the engine accepted 1-GPU entries of elastic jobs
    assert wl.req_gpus.tolist() == [4, 4, 4, 4]
    assert sized.finish_time.mean() < whole.finish_time.mean()
    with pytest.raises(ValueError, match="elastic_gain"):
        CoreActorPolicy(EnvSettings(advance="event"), _first_fit_actor, elastic_gain=0.9)
    with pytest.raises(ValueError, match="elastic_max_s"):
        CoreActorPolicy(EnvSettings(advance="event"), _first_fit_actor, elastic_max_s=0.0)


@pytest.mark.parametrize("grow_gain", [None, 0.1])
def test_growth_doubles_a_running_elastic_job_onto_idle_gpus(grow_gain: float | None) -> None:

    tm = make_tm(scaling=1.0)  # linear scaling: doubling halves the remaining time
    # j0: elastic 1..4 GPUs requesting 1, long; j1: rigid 1 GPU, short, arrives at 600 s (an
    # event at which nothing waits once it is placed, and another when it finishes).
    wl = _elastic_workload([1, 1], [1, 1], [4, 1], [0, 0])
    wl.arrival[1] = 600.0
    wl.work[:] = [36000.0, 600.0]
    res, stats = _run_first_fit(_one_a100_node(), wl, tm, grow_gain=grow_gain)
    assert np.isfinite(res.finish_time).all()
    growths = stats["growths"]
    if grow_gain is None:
        assert growths == 0 and res.finish_time[0] == 36000.0
    else:  # 1 -> 2 GPUs when j1 starts (2 idle), 2 -> 4 when it ends
        assert growths == 2 and int(res.restarts[0]) == 2
        assert res.finish_time[0] < 0.5 * 36000.0
        assert res.gpu_s_by_type[0].sum() > res.finish_time[0] * 1.5  # ran on more GPUs


@pytest.mark.parametrize("factor", [2, 4])
def test_grow_factor_weighs_several_doublings_at_once(factor: int) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = make_tm(scaling=1.0)
    # j0: elastic 1..4 requesting 1, long; j1: rigid 1 GPU, short. Both start at 0; when j1
    # ends (600 s, the last event) three GPUs are idle: j0 grows once, by up to `factor`.
    wl = _elastic_workload([1, 1], [1, 1], [4, 1], [0, 0])
    wl.work[:] = [36000.0, 600.0]
    res, stats = _run_first_fit(_one_a100_node(), wl, tm, grow_gain=0.1, grow_factor=factor)
    assert stats["growths"] == 1 and int(res.restarts[0]) == 1
    delay = float(tm.restart_delay_s[0])
    # 600 s on one GPU, then the rest (35,400 units) on `factor` GPUs after the restart delay
    assert res.finish_time[0] == pytest.approx(600.0 + delay + 35400.0 / factor)
    with pytest.raises(ValueError, match="grow_factor"):
        CoreActorPolicy(EnvSettings(advance="event"), _first_fit_actor, grow_factor=1)


def test_growth_waits_while_a_job_waits() -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = make_tm(scaling=1.0)
    # j0 elastic (1..4, requesting 1) runs; j1 (rigid, 4 GPUs) waits for it; j2 (1 GPU, short)
    # is placed beside j0: no growth, since j1 still waits.
    wl = _elastic_workload([1, 4, 1], [1, 4, 1], [4, 4, 1], [0, 0, 0])
    wl.arrival[1:] = [600.0, 1200.0]
    wl.work[:] = [36000.0, 600.0, 600.0]
    res, stats = _run_first_fit(_one_a100_node(), wl, tm, grow_gain=0.1)
    assert np.isfinite(res.finish_time).all()
    assert stats["growths"] == 0 and res.finish_time[0] == 36000.0
    assert res.start_time[2] == 1200.0 and res.start_time[1] >= res.finish_time[0]
    with pytest.raises(ValueError, match="grow_gain"):
        CoreActorPolicy(EnvSettings(advance="event"), _first_fit_actor, grow_gain=1.0)


@pytest.mark.parametrize(
    ("grow_waiting", "waiter", "grows"),
    [
        (False, 0, False),  # growth waits while a job waits (the default)
        (True, 0, True),  # ... with grow_waiting, onto the T4s the waiting job does not want
        (True, 1, False),  # a waiting job as fast on a T4 waits for the T4s too: none there
    ],
)
def test_growth_while_jobs_wait_goes_onto_types_none_waits_for(
    grow_waiting: bool, waiter: int, grows: bool
) -> None:
    base = np.ones((2, len(GPU_TYPE_NAMES)))
    base[0, A100] = 4.0  # model 'a' runs 4x faster on an A100; 'b' as fast on both types
    tm = make_tm(base, scaling=1.0, spread_factor=1.0)
    node = {"count": 1, "gpus": 4, "cpus": 32, "mem_gib": 128}
    cl = make_cluster([{"gpu_type": "t4", **node}, {"gpu_type": "a100", **node}])
    # First fit: j0 (elastic 'b', 1..4 requesting 1) on the T4 node, j1 (rigid 'a', 4 GPUs,
    # ~1e5 s) on the A100 node; j2 (rigid, 4 GPUs, model `waiter`) arrives at 600 s and waits,
    # for the A100 node (model 'a') or for either (model 'b').
    wl = make_workload(
        [0.0, 0.0, 600.0],
        [36000.0, 1.6e6, 3600.0],
        [1, 4, 4],
        model=[1, 0, waiter],
        elastic=([1, 4, 4], [4, 4, 4]),
    )
    rules = {"grow_gain": 0.1, "grow_factor": 4, "grow_waiting": grow_waiting}
    res, stats = _run_first_fit(cl, wl, tm, **rules)
    assert np.isfinite(res.finish_time).all()
    if grows:  # at 600 s, 1 -> 4 T4s: 600 s + the restart + 35,400 units at 4 per s
        assert stats["growths"] >= 1 and res.gpu_s_by_type[0, A100] == 0.0
        assert res.finish_time[0] == pytest.approx(600.0 + tm.restart_delay_s[1] + 35400.0 / 4)
    else:
        assert stats["growths"] == 0 and res.finish_time[0] == 36000.0
    assert res.start_time[2] == pytest.approx(res.finish_time[0])  # then j2 takes the T4s


@pytest.mark.parametrize("switch", ["grow_waiting", "grow_new"])
def test_growth_switches_leave_rigid_jobs_alone(switch: str) -> None:
    """Growth acts on elastic jobs only, so rigid workloads run the same with either switch."""
    tm = tiny_tm()
    node = {"count": 1, "gpus": 2, "cpus": 16, "mem_gib": 64}
    cl = make_cluster([{"gpu_type": "t4", **node}, {"gpu_type": "a100", **node}])
    wl = make_workload([0.0, 0.0, 60.0, 120.0, 900.0], [4e3, 8e3, 2e3, 6e3, 1e3], [1, 2, 2, 1, 1])
    off, _ = _run_first_fit(cl, wl, tm, grow_gain=0.05)
    on, stats = _run_first_fit(cl, wl, tm, grow_gain=0.05, **{switch: True})
    assert stats["growths"] == 0 and (off.start_time > wl.arrival).any()  # some job waited
    np.testing.assert_array_equal(on.start_time, off.start_time)
    np.testing.assert_array_equal(on.finish_time, off.finish_time)


@pytest.mark.parametrize(("grow_new", "late"), [(False, False), (True, False), (True, True)])
def test_growth_of_jobs_starting_this_round(grow_new: bool, late: bool) -> None:
    """With grow_new an elastic job grows before its first start (no restart); without, it
    starts at its request and, alone on the cluster, never meets another round to grow at. A
    job that waits after the placements stops all growth, grow_new or not."""
    tm = make_tm(scaling=1.0)  # linear scaling
    # j0: elastic 1..4 GPUs requesting 1 on one 4-GPU A100 node; with `late`, j1 (rigid, 4
    # GPUs) arrives with it and waits behind it.
    wl = _elastic_workload([1, 4], [1, 4], [4, 4], [0, 0])
    wl.work[:] = [36000.0, 600.0]
    if not late:
        wl.arrival[1] = 1e6  # j1 arrives after j0 ends
    res, stats = _run_first_fit(
        _one_a100_node(), wl, tm, grow_gain=0.05, grow_factor=4, grow_new=grow_new
    )
    assert np.isfinite(res.finish_time).all() and int(res.restarts[0]) == 0
    if grow_new and not late:  # 1 -> 4 GPUs at its placement, before it starts: no delay
        assert stats["growths"] == 1 and res.finish_time[0] == pytest.approx(36000.0 / 4)
    else:
        assert stats["growths"] == 0 and res.finish_time[0] == pytest.approx(36000.0)
    if late:  # j1 waited behind j0 all along
        assert res.start_time[1] == pytest.approx(res.finish_time[0])


@pytest.mark.parametrize("keep", [False, True])
def test_memory_guard_raises_memory_below_the_request(keep: bool) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    def low_memory_actor(core: EnvCore) -> np.ndarray:
        """The first-fit claim at the lowest memory level."""
        a = _first_fit_actor(core)
        n = np.flatnonzero(a)
        if n.size:
            k, lg, lc, _ = core.codec.decode(a[n])
            a[n] = core.codec.encode(k, lg, lc, np.zeros_like(k))
        return a

    tm = tiny_tm()
    # 64 GiB: at the request (16 GiB per GPU) two 1-GPU jobs fit, at half of it four.
    cl = make_cluster([{"gpu_type": "a100", "count": 1, "gpus": 2, "cpus": 16, "mem_gib": 64}])
    wl = make_workload([0.0, 0.0], [3600.0, 3600.0], [1, 1], cpu=4.0, mem=16.0)
    settings = EnvSettings(window=4, advance="event", round_s=60)
    assert settings.levels.mem[0] < 1.0
    pol = CoreActorPolicy(settings, low_memory_actor, keep_memory=keep)
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    assert pol.core is not None
    pol.core.begin(Simulator(cl, wl, tm).state())
    pol._actor_steps(pol.core)
    alloc = pol.core.allocation()
    assert alloc.size == 2
    want = 16.0 if keep else 16.0 * settings.levels.mem[0]
    np.testing.assert_allclose(alloc.mem / alloc.gpus, want)
    assert pol.run_stats()["memory_lifts"] == (2 if keep else 0)


def test_grown_job_shrinks_back_when_a_job_arrives() -> None:

    tm = make_tm(scaling=1.0)
    cl = _one_a100_node()
    # j0 (elastic 1..4, requesting 1) grows to 2 GPUs beside j1, then to 4 when j1 ends; j2
    # (rigid, 2 GPUs) arrives at 3000 s to a full node: j0 gives up 2 GPUs and j2 starts.
    wl = _elastic_workload([1, 1, 2], [1, 1, 2], [4, 1, 2], [0, 0, 0])
    wl.arrival[1:] = [600.0, 3000.0]
    wl.work[:] = [72000.0, 600.0, 3600.0]
    decisions: dict[float, list[int]] = {}
    res, stats = _run_first_fit(cl, wl, tm, decisions, grow_gain=0.1)
    before = max(t for t in decisions if t < 3000.0)
    assert decisions[before][0] == 4  # grown to the whole node
    assert decisions[3000.0][:3] == [2, 0, 2]  # gave up what j2 requests, not more
    assert stats["growths"] >= 2 and stats["shrinks"] >= 1
    assert res.start_time[2] == 3000.0  # no wait behind the grown job
    assert np.isfinite(res.finish_time).all()


@pytest.mark.parametrize(("order", "expected"), [("excess", [2, 4]), ("restart_cost", [4, 2])])
def test_shrink_order_picks_the_job_to_shrink(order: str, expected: list[int]) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    # j0 (model a, 300 s restarts) and j1 (model b, 10 s restarts): elastic 1..4, requesting 1.
    # Both grow to 4 GPUs when j2 (1 GPU, short) ends; j3 (rigid, 2 GPUs) then arrives to a full
    # node. Both are 3 GPUs above their request: "excess" shrinks the lower index, j0;
    # "restart_cost" the one whose restart idles fewer GPU-seconds, j1.
    tm = dataclasses.replace(make_tm(scaling=1.0), restart_delay_s=np.array([300.0, 10.0]))
    cl = make_cluster([{"gpu_type": "a100", "count": 1, "gpus": 8, "cpus": 64, "mem_gib": 256}])
    wl = _elastic_workload([1, 1, 1, 2], [1, 1, 1, 2], [4, 4, 1, 2], [0, 1, 0, 0])
    wl.arrival[3] = 3000.0
    wl.work[:] = [72000.0, 72000.0, 600.0, 3600.0]
    decisions: dict[float, list[int]] = {}
    rules = {"grow_gain": 0.1, "grow_factor": 4, "shrink_order": order}
    res, _ = _run_first_fit(cl, wl, tm, decisions, **rules)
    before = max(t for t in decisions if t < 3000.0)
    assert decisions[before][:2] == [4, 4]
    assert decisions[3000.0] == [*expected, 0, 2]
    assert np.isfinite(res.finish_time).all()
    with pytest.raises(ValueError, match="shrink_order"):
        CoreActorPolicy(EnvSettings(advance="event"), _first_fit_actor, shrink_order="random")


def test_state_core_place_checks_its_input() -> None:
    from hetsched.agents.driver import StateCore
    from hetsched.envs.spaces import EnvSettings

    tm = tiny_tm()
    cl = make_cluster([{"gpu_type": "a100", "count": 2, "gpus": 2, "cpus": 16, "mem_gib": 64}])
    wl = make_workload([0.0, 0.0], [3600.0, 3600.0], [2, 2])
    core = StateCore(cl, wl, tm, EnvSettings(window=4, advance="event"))
    core.bind(wl)
    core.begin(Simulator(cl, wl, tm).state())
    one = np.array([1.0])
    with pytest.raises(ValueError, match="repeat"):
        core.place(0, np.array([0, 0]), np.array([1, 1]), one.repeat(2), one.repeat(2))
    with pytest.raises(ValueError, match="free GPUs"):
        core.place(0, np.array([0]), np.array([3]), 3 * one, 3 * one)
    core.place(0, np.array([1]), np.array([2]), 8 * one, 32 * one)
    assert core.free_g.tolist() == [2, 0]
    assert core.allocation().job.tolist() == [0]
    assert core.window[:1].tolist() == [1]  # the placed job left the window


def test_elastic_request_on_the_shipped_throughput_table() -> None:
    """The shipped throughput table: cifar10 on A100s gains 1.68x, 1.56x, 1.40x per doubling from 1 GPU."""
    from hetsched.agents.policy import elastic_request
    from hetsched.sim.throughput import default_throughput

    tm = default_throughput()
    m = tm.model_index("cifar10")
    cl = make_cluster([{"gpu_type": "a100", "count": 2, "gpus": 8, "cpus": 64, "mem_gib": 512}])
    wl = make_workload([0.0], [1e6], [16], model=[m], elastic=([1], [16]))
    got = {g: int(elastic_request(wl, tm, cl, g)[0]) for g in (1.0, 1.5, 1.6, 2.0)}
    assert got == {1.0: 16, 1.5: 4, 1.6: 2, 2.0: 1}


def _shrink_scenario(
    a100_gpus: int,
    t4_gpus: int,
    jobs: tuple[list[int], list[int], list[int]],
    fastest: bool,
    restart_s: tuple[float, float] = (30.0, 30.0),
) -> tuple[SimResult, dict[str, float], dict[float, list[int]]]:
    """First-fit with growth (up to 8x) and the restart-cost shrink on one A100 node and one T4
    node (both models twice as fast on an A100).

    ``jobs`` gives (request, min, max) GPUs of j0 (model b, T4 only, long), j1 (model a, long),
    j2 (short filler: when it ends the elastic jobs grow) and j3 (model a, arrives at 3000 s).
    Returns the result, the rule counters and each decision's GPUs per job.
    """
    base = np.ones((2, len(GPU_TYPE_NAMES)))
    base[:, GPU_TYPE_NAMES.index("a100")] = 2.0
    tm = dataclasses.replace(make_tm(base, scaling=1.0), restart_delay_s=np.array(restart_s))
    cl = make_cluster(
        [
            {"gpu_type": "a100", "count": 1, "gpus": a100_gpus, "cpus": 64, "mem_gib": 256},
            {"gpu_type": "t4", "count": 1, "gpus": t4_gpus, "cpus": 64, "mem_gib": 256},
        ]
    )
    wl = _elastic_workload(*jobs, [1, 0, 0, 0])
    wl.allowed_types[0] = np.array(GPU_TYPE_NAMES) == "t4"
    wl.arrival[3] = 3000.0
    wl.work[:] = [72000.0, 72000.0, 600.0, 3600.0]
    decisions: dict[float, list[int]] = {}
    rules = {"grow_gain": 0.1, "grow_factor": 8, "shrink_order": "restart_cost"}
    res, stats = _run_first_fit(cl, wl, tm, decisions, shrink_fastest=fastest, **rules)
    return res, stats, decisions


def _two_type_shrink_run(
    fastest: bool, j1_rigid: bool
) -> tuple[SimResult, dict[str, float], dict[float, list[int]]]:
    """j0 (10 s restarts, elastic 1..4 requesting 1) and j1 (300 s restarts, elastic 1..4
    requesting 1, or rigid at 4) fill a 4-GPU A100 node and a 4-GPU T4 node after j2 ends; j3
    (rigid, 2 GPUs) then arrives to a full cluster."""
    req = [1, 4 if j1_rigid else 1, 1, 2]
    jobs = (req, [1, req[1], 1, 2], [4, 4, 1, 2])
    res, stats, decisions = _shrink_scenario(4, 4, jobs, fastest, restart_s=(300.0, 10.0))
    before = max(t for t in decisions if t < 3000.0)
    assert decisions[before] == [4, 4, 0, 0]
    return res, stats, decisions


@pytest.mark.parametrize(("fastest", "expected"), [(False, [2, 4]), (True, [4, 2])])
def test_shrink_fastest_frees_the_waiting_jobs_fastest_type(
    fastest: bool, expected: list[int]
) -> None:
    # By restart cost j0 (on the T4s) shrinks and j3 runs on the T4 node; with shrink_fastest
    # only a job on j3's fastest type may shrink, so j1 gives up 2 A100s and j3 runs there.
    res, stats, decisions = _two_type_shrink_run(fastest, j1_rigid=False)
    assert decisions[3000.0] == [*expected, 0, 2]
    a100 = res.gpu_s_by_type[3, GPU_TYPE_NAMES.index("a100")] > 0
    assert a100 == fastest and res.start_time[3] == 3000.0
    assert stats["shrinks"] == 1 and np.isfinite(res.finish_time).all()


def test_shrink_fastest_leaves_other_types_alone() -> None:
    # j1 is rigid at 4 A100s: nothing on j3's fastest type is above its request, so nothing
    # shrinks and j3 waits for the A100s (without the rule j0 would shrink for it).
    res, stats, decisions = _two_type_shrink_run(True, j1_rigid=True)
    assert decisions[3000.0] == [4, 4, 0, 0]
    assert stats["shrinks"] == 0 and res.start_time[3] > 3000.0
    _, stats_any, decisions_any = _two_type_shrink_run(False, j1_rigid=True)
    assert decisions_any[3000.0] == [2, 4, 0, 2] and stats_any["shrinks"] == 1


def test_shrink_fastest_skips_a_type_too_small_for_the_waiting_job() -> None:
    # j3 (4 GPUs, twice as fast on an A100) can never run on the cluster's only 2 A100s, so its
    # fastest type that can hold it is the T4: the T4 job above its request (j0, grown to 8
    # when j2 ends) shrinks for it, and j3 starts on the T4s at once.
    jobs = ([1, 2, 1, 4], [1, 2, 1, 4], [8, 2, 1, 4])
    res, stats, decisions = _shrink_scenario(2, 8, jobs, fastest=True)
    before = max(t for t in decisions if t < 3000.0)
    assert decisions[before] == [8, 2, 0, 0]
    assert decisions[3000.0] == [4, 2, 0, 4]
    assert res.start_time[3] == 3000.0 and stats["shrinks"] == 1


def _makespan_scenario(
    long_work: float = 4e5,
    j3_work: float = 3600.0,
    **rules: Any,
) -> tuple[SimResult, dict[str, float], dict[float, float]]:
    """First-fit on one 4-GPU, 32-core A100 node: four 1-GPU jobs of 3,600 s fill it at 0 s,
    more 1-GPU jobs of 3,600 s arrive every 600 s from 600 s, and the long 4-GPU j4 (4 cores
    per GPU requested) arrives at 60 s. In arrival order first-fit starts j4 only once the
    node is empty. ``j3_work`` sets the work of j3 (one of the first four). Returns the result, the rule
    counters and j4's CPU cores at each decision that runs it."""
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = make_tm(cpu_alpha=(0.7, 0.7))  # 1 work unit/s per GPU; CPU-sensitive
    cl = _one_a100_node()
    arrival = [0.0] * 4 + [60.0] + [600.0 * i for i in range(1, 9)]
    work = [3600.0] * 3 + [j3_work, long_work] + [3600.0] * 8
    wl = make_workload(arrival, work, [1] * 4 + [4] + [1] * 8)
    pol = CoreActorPolicy(
        EnvSettings(window=4, advance="event", round_s=60), _first_fit_actor, **rules
    )
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    cpus: dict[float, float] = {}
    decide = pol.decide

    def spy(state: SimState) -> Allocation:
        alloc = decide(state)
        if (alloc.job == 4).any():
            cpus[state.time] = float(alloc.cpus[alloc.job == 4].sum())
        return alloc

    pol.decide = spy  # type: ignore[method-assign]
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert np.isfinite(res.finish_time).all()
    return res, pol.run_stats(), cpus


@pytest.mark.parametrize("critical_s", [None, 36000.0])
def test_makespan_guard_starts_the_job_that_sets_the_makespan(critical_s: float | None) -> None:
    res, stats, cpus = _makespan_scenario(critical_s=critical_s)
    if critical_s is None:  # first-fit keeps j4 waiting until nothing else holds a GPU
        assert stats["critical_placements"] == 0 and stats["preemptions"] == 0
        assert res.start_time[4] >= res.finish_time[:4].max()
        assert set(cpus.values()) == {16.0}  # first-fit places at the request
    else:  # the guard preempts the four short jobs on j4's arrival
        assert stats["critical_placements"] == 1 and stats["preemptions"] == 4
        assert res.start_time[4] == 60.0
        assert (res.preemptions[:4] == 1).all() and res.preemptions[4] == 0
        # with the most CPU legal on the node: all 32 cores (level 2.0), so phi > 1 and it
        # runs faster than 1 work unit/s per GPU
        assert cpus[60.0] == 32.0
        assert res.finish_time[4] - 60.0 < 4e5 / 4.0


def test_makespan_guard_waits_and_spares_jobs_not_far_shorter() -> None:
    # Waiting 1,800 s first: the first decision point after that is the arrival at 2,400 s.
    res, stats, _ = _makespan_scenario(critical_s=36000.0, critical_wait_s=1800.0)
    assert res.start_time[4] == 2400.0 and stats["critical_placements"] == 1
    assert stats["preemptions"] == 4
    # j4 estimated at 3 h: the short jobs become victims only once 4x shorter, with at most
    # 2,700 s left: not at 600 s (3,000 s left), at the next decision point, 1,200 s.
    res, stats, _ = _makespan_scenario(long_work=4 * 3 * 3600.0, critical_s=7200.0)
    assert stats["preemptions"] == 4 and stats["critical_placements"] == 1
    assert res.start_time[4] == 1200.0


def test_makespan_guard_only_for_the_job_that_would_finish_last() -> None:
    # j3 runs 8e5 s (the guard itself places it at 0 s, on the empty node): j4 (1e5 s on 4
    # GPUs) would not finish after it, so it is not preempted for; j4 starts only when j3 ends.
    res, stats, _ = _makespan_scenario(critical_s=36000.0, j3_work=8e5)
    assert stats["critical_placements"] == 2 and stats["preemptions"] == 0
    assert 0.0 <= res.start_time[4] - res.finish_time[3] < 60.0  # the next round


def test_makespan_guard_placed_jobs_are_not_preempted_for_short_jobs() -> None:
    # The short jobs waiting behind j4 may preempt (ratio 4, no wait); without the guard they
    # preempt j4 once it runs, but a job the guard placed is never their victim.
    res, stats, _ = _makespan_scenario(preempt_ratio=4.0, preempt_max=3)
    assert res.preemptions[4] > 0
    res, stats, _ = _makespan_scenario(critical_s=36000.0, preempt_ratio=4.0, preempt_max=3)
    assert stats["critical_placements"] == 1 and res.preemptions[4] == 0
    assert res.start_time[4] == 60.0


@pytest.mark.parametrize(("spread", "nodes", "preempted"), [(0.5, 1, 1), (1.5, 2, 0)])
def test_makespan_guard_spreads_a_job_that_runs_faster_spread(
    spread: float, nodes: int, preempted: int
) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    # Two 4-GPU A100 nodes: j0 (2 GPUs) runs on node 0 and j1 (3 GPUs) on node 1, leaving 2 + 1
    # GPUs free; the long 3-GPU j2 arrives at 60 s. Packed faster (spread_factor 0.5), the guard
    # preempts j0 and packs j2 on node 0; spread faster (1.5), it spreads j2 over both nodes'
    # free GPUs without preempting.
    cl = make_cluster([{"gpu_type": "a100", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 128}])
    wl = make_workload([0.0, 0.0, 60.0], [7200.0, 10800.0, 4e5], [2, 3, 3])
    tm = make_tm(spread_factor=spread)
    pol = CoreActorPolicy(
        EnvSettings(window=4, advance="event", round_s=60), _first_fit_actor, critical_s=36000.0
    )
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    used: dict[float, int] = {}
    decide = pol.decide

    def spy(state: SimState) -> Allocation:
        alloc = decide(state)
        used[state.time] = int(np.unique(alloc.node[alloc.job == 2]).size)
        return alloc

    pol.decide = spy  # type: ignore[method-assign]
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert pol.run_stats()["critical_placements"] == 1 and res.start_time[2] == 60.0
    assert used[60.0] == nodes
    assert res.preemptions.tolist() == [preempted, 0, 0]


@pytest.mark.parametrize("most_cpu", [False, True])
def test_makespan_guard_spread_placement_cpu(most_cpu: bool) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    # As above (spread faster): j2 spreads 2 + 1 over nodes 0 and 1, which have 24 and 20 of
    # their 32 cores free. At the request that is 4 cores per GPU; with critical_spread_cpu the
    # highest CPU level both nodes have room for: 2.0x, 8 cores per GPU (16 + 8 <= 24, 20).
    cl = make_cluster([{"gpu_type": "a100", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 128}])
    wl = make_workload([0.0, 0.0, 60.0], [7200.0, 10800.0, 4e5], [2, 3, 3])
    tm = make_tm(spread_factor=1.5)
    settings = EnvSettings(window=4, advance="event", round_s=60)
    pol = CoreActorPolicy(
        settings, _first_fit_actor, critical_s=36000.0, critical_spread_cpu=most_cpu
    )
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    got: dict[int, float] = {}
    decide = pol.decide

    def spy(state: SimState) -> Allocation:
        alloc = decide(state)
        if state.time == 60.0:
            m = alloc.job == 2
            got.update(zip(alloc.node[m].tolist(), alloc.cpus[m].tolist(), strict=True))
        return alloc

    pol.decide = spy  # type: ignore[method-assign]
    Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert max(settings.levels.cpu) == 2.0
    assert got == ({0: 16.0, 1: 8.0} if most_cpu else {0: 8.0, 1: 4.0})


@pytest.mark.parametrize(
    ("min_rel", "min_rel_s", "eft", "slower"),
    [
        (None, None, False, False),
        (0.5, None, False, False),
        (0.25, None, False, True),
        (0.25, 1e5, False, True),  # j1 is estimated at 8e6 / (4 x 4) = 5e5 s: long enough
        (0.25, 1e6, False, False),  # the fallback is kept to jobs of 1e6 s and more
        # On the T4s it would run 2e6 s; the A100s free in 2.5e5 s, and it would finish there
        # 7.5e5 s from now: with critical_slow_eft it waits for them.
        (0.25, None, True, False),
    ],
)
def test_makespan_guard_uses_a_slower_type_when_its_fastest_is_held(
    min_rel: float | None, min_rel_s: float | None, eft: bool, slower: bool
) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    # Node 0: 4 A100s; node 1: 4 T4s, which run model 'a' at 0.25 of its A100 speed. The guard
    # places the long j0 on the A100s at 0 s; the longer j1 (4 GPUs) arrives at 60 s and would
    # finish last, but j0 is no victim (the guard placed it, and it is not 4x shorter). The
    # actor never places j1: it waits for the A100s unless the guard may use the T4s.
    node = {"cpus": 32, "mem_gib": 128, "count": 1, "gpus": 4}
    cl = make_cluster([{"gpu_type": "a100", **node}, {"gpu_type": "t4", **node}])
    wl = make_workload([0.0, 60.0], [4e6, 8e6], [4, 4])
    pol = CoreActorPolicy(
        EnvSettings(window=4, advance="event", round_s=60),
        only_job0,
        critical_s=36000.0,
        critical_min_rel=min_rel,
        critical_min_rel_s=min_rel_s,
        critical_slow_eft=eft,
    )
    pol.reset(cl, wl, tiny_tm(), np.random.default_rng(0))
    res = Simulator(cl, wl, tiny_tm(), SimConfig(round_s=60)).run(pol)
    assert res.start_time[0] == 0.0 and res.gpu_s_by_type[0, T4] == 0.0
    if slower:  # the T4s are fast enough: j1 starts there at once
        assert res.start_time[1] == 60.0 and res.gpu_s_by_type[1, T4] > 0.0
        assert pol.run_stats()["critical_placements"] == 2
    else:  # it waits for the A100s (the T4s run it below min_rel of its speed)
        assert res.start_time[1] >= res.finish_time[0] and res.gpu_s_by_type[1, T4] == 0.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"critical_s": -1.0}, "critical_s"),
        ({"critical_ratio": 1.0}, "critical_ratio"),
        ({"critical_wait_s": -5.0}, "critical_wait_s"),
        ({"critical_min_rel": 0.0}, "critical_min_rel"),
        ({"critical_min_rel_s": -1.0}, "critical_min_rel_s"),
    ],
)
def test_makespan_guard_arguments_are_checked(kwargs: dict[str, float], match: str) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    with pytest.raises(ValueError, match=match):
        CoreActorPolicy(EnvSettings(window=4, advance="event", round_s=60), None, **kwargs)


def _all_claim_actor(core: EnvCore, first_only: bool = False) -> np.ndarray:
    """Every node (or, with ``first_only``, the lowest-index one) that can hold the first
    waiting job alone at its request claims it."""
    a = np.zeros(core.N, dtype=np.int64)
    one = core.features.one
    single = core.ma.single[:, :, one[0], one[1], one[2]]
    ks = np.flatnonzero(core.slot_ok & single.any(axis=0))
    if ks.size:
        nodes = np.flatnonzero(single[:, ks[0]])
        a[nodes[:1] if first_only else nodes] = int(core.codec.encode(ks[0], *one))
    return a


@pytest.mark.parametrize(
    ("hold", "mem_levels", "where", "lifts", "holds"),
    [
        (None, (0.5, 1.0, 1.5), "a100", 0, 0),  # level 1 = 36 GiB of 64: runs at phi ~0.2
        (0.4, (0.5, 1.0, 1.5), "a100", 1, 0),  # lifted to level 1.5 (54 GiB): phi ~0.7
        (0.4, (0.5, 1.0), "t4", 0, 1),  # no higher level: withdrawn, the T4 node takes it
    ],
)
def test_memory_hold_raises_or_withdraws_a_placement_short_of_memory(
    hold: float | None, mem_levels: tuple[float, ...], where: str, lifts: int, holds: int
) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings, LevelSets

    # Node 0: A100s with 36 GiB per GPU; node 1: T4s with 128 GiB per GPU. The job asks 64 GiB
    # per GPU; levels are capped at the node's share, so on node 0 level 1 gives 36 GiB.
    cl = make_cluster(
        [
            {"gpu_type": "a100", "count": 1, "gpus": 4, "cpus": 32, "mem_gib": 144},
            {"gpu_type": "t4", "count": 1, "gpus": 4, "cpus": 32, "mem_gib": 512},
        ]
    )
    tm = make_tm()  # the same rate on both types
    wl = make_workload([0.0], [3600.0], [1], mem=64.0)
    settings = EnvSettings(window=4, advance="event", round_s=60, levels=LevelSets(mem=mem_levels))
    pol = CoreActorPolicy(settings, _all_claim_actor, mem_hold_phi=hold)
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    stats = pol.run_stats()
    assert res.gpu_s_by_type[0, GPU_TYPE_NAMES.index(where)] > 0
    assert (stats["memory_lifts"], stats["memory_holds"], stats["fallbacks"]) == (lifts, holds, 0)
    phi = float(tm.phi(0, 1.0, {"a100": [36.0, 54.0][lifts], "t4": 64.0}[where] / 64.0))
    assert res.finish_time[0] == pytest.approx(3600.0 / phi, rel=0.02)
    assert (phi < 0.4) == (hold is None)


def test_memory_hold_argument_is_checked() -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="mem_hold_phi"):
            CoreActorPolicy(
                EnvSettings(window=4, advance="event", round_s=60), None, mem_hold_phi=bad
            )


@pytest.mark.parametrize("hold", [None, 0.4])
def test_memory_hold_checks_the_fast_gpu_guards_placements(hold: float | None) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings, LevelSets

    # The A100 node (36 GiB per GPU) is the job's fastest type, so the fast-GPU guard claims it
    # there (the actor never places); with the hold that claim is withdrawn (the job would run
    # at phi ~0.2 while the T4 node has 128 GiB per GPU) and the idle-cluster fallback places.
    cl = make_cluster(
        [
            {"gpu_type": "a100", "count": 1, "gpus": 4, "cpus": 32, "mem_gib": 144},
            {"gpu_type": "t4", "count": 1, "gpus": 4, "cpus": 32, "mem_gib": 512},
        ]
    )
    base = np.ones((2, len(GPU_TYPE_NAMES)))
    base[:, GPU_TYPE_NAMES.index("a100")] = 2.0
    tm = make_tm(base)
    wl = make_workload([0.0], [3600.0], [1], mem=64.0)
    settings = EnvSettings(window=4, advance="event", round_s=60, levels=LevelSets(mem=(0.5, 1.0)))

    def idle(core: EnvCore) -> np.ndarray:
        return np.zeros(core.N, dtype=np.int64)

    pol = CoreActorPolicy(settings, idle, fast_wait_s=0.0, fast_max_s=1e5, mem_hold_phi=hold)
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    stats = pol.run_stats()
    expected = (1, 0, 0) if hold is None else (0, 1, 1)
    assert (stats["fast_placements"], stats["memory_holds"], stats["fallbacks"]) == expected


def test_shrink_keeps_each_nodes_amounts_per_gpu() -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    # Two T4 nodes of 4 GPUs with 16 and 64 cores (shares of 4 and 16 per GPU). Elastic job 0
    # (asking 4 GPUs and 16 cores per GPU, up to 8 GPUs) is placed at GPU level 2 as a gang of
    # 8 over both nodes, at CPU level 1 capped at each node's share: 16 and 64 cores. Job 1 (4
    # GPUs) arrives, and job 0 shrinks back to node 0 alone, which must keep its 4 cores per GPU
    # (the average over both nodes, 10 per GPU, would over-allocate node 0).
    cl = make_cluster(
        [
            {"gpu_type": "t4", "count": 1, "gpus": 4, "cpus": 16, "mem_gib": 256},
            {"gpu_type": "t4", "count": 1, "gpus": 4, "cpus": 64, "mem_gib": 256},
        ]
    )
    tm = make_tm()
    wl = make_workload([0.0, 120.0], [36000.0, 600.0], [4, 4], cpu=16.0, elastic=([1, 4], [8, 4]))

    def gang_actor(core: EnvCore) -> np.ndarray:  # the largest legal GPU level, all nodes claim
        a = np.zeros(core.N, dtype=np.int64)
        _, c1, m1 = core.features.one
        legal = core.ma.legal[:, :, :, c1, m1]  # (N, K, Lg)
        ks = np.flatnonzero(core.slot_ok & legal.any(axis=(0, 2)))
        if ks.size:
            k = int(ks[0])
            g = int(np.flatnonzero(legal[:, k].any(axis=0))[-1])
            a[legal[:, k, g]] = int(core.codec.encode(k, g, c1, m1))
        return a

    settings = EnvSettings(window=4, advance="event", round_s=60)
    pol = CoreActorPolicy(settings, gang_actor, grow_gain=0.05)
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert pol.run_stats()["shrinks"] == 1
    assert res.start_time[1] == pytest.approx(120.0)
    assert np.isfinite(res.finish_time).all()


def _first_node_actor(core: EnvCore) -> np.ndarray:
    """The lowest-index node that can hold the first waiting job alone claims it."""
    return _all_claim_actor(core, first_only=True)


@pytest.mark.parametrize(
    ("fast", "elastic", "preempted"),
    [(None, False, False), (4.0, False, True), (8.0, False, False), (4.0, True, False)],
)
def test_preemption_for_a_much_faster_gpu(
    fast: float | None, elastic: bool, preempted: bool
) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    # An A100 node and a T4 node, one GPU each; the model runs 5x faster on the A100. Job 0
    # (7,200 s on the A100) takes it at 0 s. Job 1 (120 s on the A100, 600 s on the T4) arrives
    # at 120 s: the T4 is free, at a fifth of its best speed. At a speedup threshold of 4 it
    # preempts job 0 (whose 7,080 s left exceed 4 x 120 s) and runs on the A100; at 8 (or off,
    # or when job 1 is elastic: elastic jobs get room by shrinking) it runs on the T4.
    cl = make_cluster(
        [
            {"gpu_type": "a100", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
            {"gpu_type": "t4", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
        ]
    )
    base = np.ones((2, len(GPU_TYPE_NAMES)))
    base[:, GPU_TYPE_NAMES.index("a100")] = 5.0
    tm = make_tm(base, restart_s=30.0)
    wl = make_workload(
        [0.0, 120.0], [36000.0, 600.0], [1, 1], elastic=([1, 1], [1, 2]) if elastic else None
    )
    settings = EnvSettings(window=4, advance="event", round_s=60)
    pol = CoreActorPolicy(
        settings, _first_node_actor, preempt_ratio=4.0, preempt_wait_s=7200.0, preempt_fast=fast
    )
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    stats = pol.run_stats()
    assert res.start_time[1] == pytest.approx(120.0)
    if preempted:
        assert (stats["fast_preemptions"], stats["preemptions"]) == (1, 1)
        assert res.finish_time[1] == pytest.approx(240.0)
        assert res.restarts[0] == 1
        assert res.gpu_s_by_type[1, GPU_TYPE_NAMES.index("t4")] == 0
    else:
        assert (stats["fast_preemptions"], stats["preemptions"]) == (0, 0)
        assert res.finish_time[1] == pytest.approx(720.0)
        assert res.finish_time[0] == pytest.approx(7200.0)


def test_preemption_for_a_much_faster_gpu_arguments_are_checked() -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    settings = EnvSettings(window=4, advance="event", round_s=60)
    with pytest.raises(ValueError, match="must be > 1"):
        CoreActorPolicy(settings, None, preempt_ratio=4.0, preempt_fast=1.0)
    with pytest.raises(ValueError, match="needs preempt_ratio"):
        CoreActorPolicy(settings, None, preempt_fast=4.0)


def test_preemption_for_a_much_faster_gpu_needs_the_speedup_on_the_victims_type() -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    # A100, RTX 2080 Ti and T4 nodes (one GPU each) at rates 5, 2 and 1. Job 0 (short) runs on
    # the A100 and job 1 (long) on the RTX when job 2 arrives; only the T4 is free, at a fifth
    # of job 2's best speed. Job 0 has too little left to be a victim, and the RTX is only 2x
    # faster than the T4, below the threshold of 4, so job 1 is not preempted either.
    cl = make_cluster(
        [
            {"gpu_type": g, "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64}
            for g in ("a100", "rtx2080ti", "t4")
        ]
    )
    base = np.ones((2, len(GPU_TYPE_NAMES)))
    base[:, GPU_TYPE_NAMES.index("a100")] = 5.0
    base[:, GPU_TYPE_NAMES.index("rtx2080ti")] = 2.0
    tm = make_tm(base)
    wl = make_workload([0.0, 0.0, 120.0], [2600.0, 36000.0, 600.0], [1, 1, 1])
    settings = EnvSettings(window=4, advance="event", round_s=60)
    pol = CoreActorPolicy(settings, _first_node_actor, preempt_ratio=4.0, preempt_fast=4.0)
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert pol.run_stats()["preemptions"] == 0
    assert res.finish_time[2] == pytest.approx(720.0)
    assert res.restarts.sum() == 0


def _j0_on_a100_j1_on_t4(core: EnvCore) -> np.ndarray:
    """Place j0 on node 0 and j1, if it arrived at 0 s too, on node 2 (each alone, at its
    request); pass otherwise."""
    assert core.wl is not None
    a = np.zeros(core.N, dtype=np.int64)
    one = core.features.one
    for job, node in ((0, 0), (1, 2)):
        if core.wl.arrival[job] > 0:
            continue
        k = np.flatnonzero(core.window == job)
        if k.size and core.ma.single[node, int(k[0]), one[0], one[1], one[2]]:
            a[node] = int(core.codec.encode(int(k[0]), *one))
    return a


@pytest.mark.parametrize(
    ("j0_work", "gain", "j1", "elastic", "on_t4_at_once"),
    [
        (4e6, None, True, False, False),  # the rule off: j2 waits for the A100 (~1e6 s)
        (4e6, 0.1, True, False, True),  # the A100 is held ~1e6 s: the T4 now is far sooner
        (4e6, 0.1, True, True, False),  # ... but an elastic job is left to the elastic rules
        (4e6, 0.1, True, "eft", True),  # ... unless eft_elastic takes elastic jobs too
        (8e3, 0.1, True, False, False),  # the A100 frees at 2,000 s: 1,940 + 1,000 s < 4,000 s
        (1.24e4, 0.0, True, False, True),  # frees at 3,100 s: 3,040 + 1,000 s > 4,000 s ...
        (1.24e4, 0.1, True, False, False),  # ... but not by the 10 % saving the gain asks for
        (1.6e4, 0.1, True, False, True),  # frees at 4,000 s: 0.9 x (3,940 + 1,000) > 4,000 s
        (1.6e4, 0.1, False, False, False),  # ... yet without j1, j2 would then finish last
    ],
)
def test_earliest_finish_places_a_job_on_a_slower_type_when_waiting_costs_more(
    j0_work: float, gain: float | None, j1: bool, elastic: bool | str, on_t4_at_once: bool
) -> None:
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = tiny_tm()  # model 'a' runs 4x faster on the A100
    node = {"count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64}
    cl = make_cluster(
        [{"gpu_type": "a100", **node}, {"gpu_type": "t4", **node}, {"gpu_type": "t4", **node}]
    )
    # The actor places j0 on the A100 and j1 (a long job, 1e6 s) on the second T4 at 0 s, and
    # never places j2 (arrives at 60 s; 1,000 s of work on the A100, 4,000 s on the T4).
    jobs = [0, 1, 2] if j1 else [0, 2]
    wl = make_workload(
        [[0.0, 0.0, 60.0][i] for i in jobs],
        [[j0_work, 4e6, 4e3][i] for i in jobs],
        [1] * len(jobs),
        elastic=([1] * len(jobs), [1] * (len(jobs) - 1) + [2]) if elastic else None,
    )
    w = len(jobs) - 1  # the waiting job's index
    pol = CoreActorPolicy(
        EnvSettings(window=4, advance="event", round_s=60),
        _j0_on_a100_j1_on_t4,
        eft_gain=gain,
        eft_elastic=elastic == "eft",
    )
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert np.isfinite(res.finish_time).all() and res.start_time[0] == 0.0
    if on_t4_at_once:
        assert res.start_time[w] == 60.0 and res.gpu_s_by_type[w, T4] > 0.0
        assert pol.run_stats()["eft_placements"] == 1
    else:  # it waits for the A100 and starts there when j0 ends
        assert res.start_time[w] >= res.finish_time[0] and res.gpu_s_by_type[w, T4] == 0.0
        # (with gain 0 the rule itself places it there: waiting no longer pays)
        assert pol.run_stats()["eft_placements"] == int(gain == 0.0 and j1 and not elastic)
    if elastic == "eft":  # placed at the request elastic sizing would give it (here 1 GPU)
        assert res.start_time[w] == 60.0 and pol.run_stats()["eft_placements"] == 1
    with pytest.raises(ValueError, match="eft_gain"):
        CoreActorPolicy(EnvSettings(advance="event"), only_job0, eft_gain=1.0)


def test_earliest_finish_counts_every_job_on_the_faster_node() -> None:
    """The wait for the A100 node is until enough of its GPUs free: the job needing 2 waits
    for the second running job to end too."""
    from hetsched.agents.policy import CoreActorPolicy
    from hetsched.envs.spaces import EnvSettings

    tm = tiny_tm()
    cl = make_cluster(
        [
            {"gpu_type": "a100", "count": 1, "gpus": 2, "cpus": 32, "mem_gib": 128},
            {"gpu_type": "t4", "count": 1, "gpus": 2, "cpus": 32, "mem_gib": 128},
        ]
    )

    def j0_j1_on_a100(core: EnvCore) -> np.ndarray:
        a = np.zeros(core.N, dtype=np.int64)
        one = core.features.one
        for k in np.flatnonzero(np.isin(core.window, [0, 1])).tolist():
            if core.ma.single[0, k, one[0], one[1], one[2]]:
                a[0] = int(core.codec.encode(k, *one))
                break
        return a

    # j0 frees its A100 at 1,000 s, j1 at ~1e6 s; j2 (2 GPUs, 2,000 s on the A100s, 8,000 s
    # on the T4s) arrives at 60 s. One free A100 soon is not enough: it starts on the T4s.
    wl = make_workload([0.0, 0.0, 60.0], [4e3, 4e6, 1.6e4], [1, 1, 2])
    pol = CoreActorPolicy(
        EnvSettings(window=4, advance="event", round_s=60), j0_j1_on_a100, eft_gain=0.1
    )
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert res.start_time[:2].tolist() == [0.0, 0.0]
    assert res.start_time[2] == 60.0 and res.gpu_s_by_type[2, T4] > 0.0
