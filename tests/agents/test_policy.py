"""The network and the teacher as schedulers: they act in the simulator exactly as in the env."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import make_cluster, make_tm, make_workload
from helpers import fast_config, preempt_env, tiny_tm

from hetsched.agents.acting import Acting, build_net, env_settings, net_dims
from hetsched.agents.driver import TeamEnv
from hetsched.agents.policy import ActorPolicy, MAIFSPolicy, PolicyStallError, TeacherPolicy
from hetsched.agents.teacher import SJFTeacher
from hetsched.envs.core import EnvCore
from hetsched.envs.spaces import EnvSettings
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimConfig, SimResult, Simulator
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


def _run(pol: ActorPolicy, cl: Cluster, wl: Workload, tm: ThroughputModel) -> SimResult:
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    return Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)


@pytest.mark.parametrize("conflict", ["ordered", "none", "maxsum"])
def test_policy_matches_env_rollout(conflict: str) -> None:
    """The scheduler is the env rollout of the same network: same starts, same finishes."""
    conf = fast_config().agent
    conf.conflict = conflict
    tm, cl, wl = _twin_instance()
    env = TeamEnv(cl, wl, tm, env_settings(conf.env), max_steps=3000)
    torch.manual_seed(0)
    net = build_net(conf.net, net_dims(env.core.layout, env.core.cfg.levels)).eval()
    with torch.no_grad():
        net.noop.bias.fill_(-10.0)  # an untrained network that claims whenever it can
    acting = Acting(net, conf, greedy=True)
    env.reset(np.random.default_rng(0))
    while not env.step(acting(env.core)).done:
        pass
    assert env.core.all_finished
    via_env = env.core.sim.result()  # type: ignore[union-attr]
    pol = MAIFSPolicy(net=(net, conf))
    via_sim = _run(pol, cl, wl, tm)
    assert np.isfinite(via_sim.finish_time).all()
    np.testing.assert_allclose(via_sim.finish_time, via_env.finish_time)
    np.testing.assert_allclose(via_sim.start_time, via_env.start_time)
    assert pol.run_stats()["decision_steps"] > 0


def test_a_level_rate_network_runs_in_the_simulator_as_in_the_env() -> None:
    """A network with the per-level claim term and the level-rate input (the observation's last
    block) is accepted by the scheduler and acts there as in the env."""
    from hetsched.agents.acting import job_extra, level_bits, level_rate_count

    conf = fast_config().agent
    conf.env.level_share_feature = conf.env.level_rate_feature = conf.net.level_head = True
    tm, cl, wl = _twin_instance()
    env = TeamEnv(cl, wl, tm, env_settings(conf.env), max_steps=3000)
    dims = net_dims(
        env.core.layout,
        env.core.cfg.levels,
        job_extra=job_extra(conf.env),
        level_bits=level_bits(conf.env),
        level_rates=level_rate_count(conf.env),
    )
    torch.manual_seed(0)
    net = build_net(conf.net, dims).eval()
    with torch.no_grad():
        net.noop.bias.fill_(-10.0)
    acting = Acting(net, conf, greedy=True)
    env.reset(np.random.default_rng(0))
    while not env.step(acting(env.core)).done:
        pass
    via_env = env.core.sim.result()  # type: ignore[union-attr]
    via_sim = _run(MAIFSPolicy(net=(net, conf)), cl, wl, tm)
    np.testing.assert_allclose(via_sim.finish_time, via_env.finish_time)
    np.testing.assert_allclose(via_sim.start_time, via_env.start_time)


def test_preemptive_network_evicts_in_the_simulator_as_in_the_env() -> None:
    """A network with eviction actions: its evictions reach the simulator unchanged."""
    conf = fast_config().agent
    conf.env.preemptive = True
    conf.env.evict_max = 1
    conf.net.evict_bias = 10.0  # an untrained head that evicts whenever it can (once per job)
    tm = tiny_tm()
    env = preempt_env(conf, tm)
    dims = net_dims(env.core.layout, env.core.cfg.levels, preemptive=True)
    torch.manual_seed(1)
    net = build_net(conf.net, dims).eval()
    acting = Acting(net, conf, greedy=True)
    env.reset(np.random.default_rng(0))
    evictions = 0
    while True:
        actions = acting(env.core)
        evictions += int((actions >= env.core.n_place).sum())
        if env.step(actions).done:
            break
    via_env = env.core.sim.result()  # type: ignore[union-attr]
    assert evictions > 0  # the head did evict, so the comparison means something
    via_sim = _run(MAIFSPolicy(net=(net, conf)), env.core.cluster, env.core.wl, tm)  # type: ignore[arg-type]
    np.testing.assert_allclose(via_sim.finish_time, via_env.finish_time)
    np.testing.assert_array_equal(via_sim.restarts, via_env.restarts)


def test_teacher_policy_matches_the_teacher_in_the_env() -> None:
    tm, cl, wl = _twin_instance()
    teacher = SJFTeacher("sjf", 0.5, True, long_s=1800.0)
    env = TeamEnv(cl, wl, tm, EnvSettings(window=16, advance="event", round_s=60))
    env.reset(np.random.default_rng(0))
    while not env.step(teacher.act(env.core)).done:
        pass
    via_env = env.core.sim.result()  # type: ignore[union-attr]
    via_sim = _run(TeacherPolicy(window=16, long_s=1800.0), cl, wl, tm)
    np.testing.assert_allclose(via_sim.finish_time, via_env.finish_time)
    np.testing.assert_allclose(via_sim.start_time, via_env.start_time)


def test_teacher_policy_runs_and_validates_args() -> None:
    tm = tiny_tm()
    cl = make_cluster([{"gpu_type": "a100", "count": 1, "gpus": 2, "cpus": 16, "mem_gib": 64}])
    wl = make_workload([0.0, 0.0, 10.0], [3600.0, 600.0, 60.0], [1, 1, 2])
    res = _run(TeacherPolicy(window=4), cl, wl, tm)
    assert np.isfinite(res.finish_time).all()
    assert res.start_time[1] == 0.0  # shortest first: the 600-unit job starts beside the long one
    with pytest.raises(ValueError, match="order"):
        TeacherPolicy(order="random")
    with pytest.raises(ValueError, match="max_idle_rounds=0"):
        TeacherPolicy(max_idle_rounds=0)


def test_teacher_without_elastic_share_gangs_a_job_larger_than_any_node() -> None:
    # An elastic 8-GPU job on 4-GPU nodes: at its request only a gang can hold it, while its
    # 0.5x GPU level would fit one node. Without the elastic share the teacher keeps the
    # request: it must claim the gang rather than wait.
    tm = tiny_tm()
    cl = make_cluster([{"gpu_type": "a100", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 128}])
    wl = make_workload([0.0], [1e4], [8], elastic=([1], [16]))
    pol = TeacherPolicy(window=4, elastic_share=False)
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    core = pol.core
    assert core is not None
    core.begin(Simulator(cl, wl, tm).state())
    g1 = core.cfg.levels.one_index[0]
    assert not core.ma.single[:, 0, g1].any() and core.ma.single[:, 0].any()
    assert (pol.act(core) > 0).all()  # both nodes claim the gang
    res = Simulator(cl, wl, tm, SimConfig()).run(pol)
    assert np.isfinite(res.finish_time).all() and res.start_time[0] == 0.0


@pytest.mark.parametrize(("jobs", "gpus"), [(1, 4), (4, 2)])
def test_teacher_starts_elastic_jobs_within_their_share_of_the_cluster(
    jobs: int, gpus: int
) -> None:
    """With the elastic share, an elastic 8-GPU job starts at the fastest level on one node
    within its share of the 8 GPUs: alone, 4 GPUs (its 8-GPU request needs a gang); four
    of them at once, 2 GPUs each (the 0.25 level), all four running at t=0."""
    tm = tiny_tm()
    cl = make_cluster([{"gpu_type": "a100", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 128}])
    wl = make_workload([0.0] * jobs, [1e4] * jobs, [8] * jobs, elastic=([1] * jobs, [16] * jobs))
    pol = TeacherPolicy(window=4)
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    alloc = pol.decide(Simulator(cl, wl, tm).state())
    assert sorted(alloc.job.tolist()) == list(range(jobs))  # each job on one node, all at once
    assert (alloc.gpus == gpus).all()


def test_teacher_waits_for_a_faster_type_only_where_one_node_of_it_could_host_the_job() -> None:
    """A long job waits for a faster GPU type only if a node of that type could host it alone:
    a 2-GPU job with a 1-GPU A100 node and a 2-GPU T4 node runs on the T4 at once (it used to
    wait forever for an A100 rate no node could give), and waits while a 2-GPU A100 node is
    busy."""
    from hetsched.agents.signals import best_alone_tput

    tm = tiny_tm()  # model 0 runs 4x faster on an A100 than on a T4
    long_work = 1e6  # far above the teacher's long-job threshold on either type
    for a100_gpus, waits in ((1, False), (2, True)):
        cl = make_cluster(
            [
                {"gpu_type": "t4", "count": 1, "gpus": 2, "cpus": 32, "mem_gib": 128},
                {"gpu_type": "a100", "count": 1, "gpus": a100_gpus, "cpus": 32, "mem_gib": 128},
            ]
        )
        # Job 0 (a100_gpus GPUs, short) takes the A100 node first; job 1 (2 GPUs, long) follows.
        wl = make_workload([0.0, 1.0], [1e4, long_work], [a100_gpus, 2])
        pol = TeacherPolicy(window=4)
        pol.reset(cl, wl, tm, np.random.default_rng(0))
        res = Simulator(cl, wl, tm, SimConfig()).run(pol)
        assert np.isfinite(res.finish_time).all()
        core = pol.core
        assert core is not None
        t4_rate = float(tm.isolated(0, GPU_TYPE_NAMES.index("t4"), 2))
        best = best_alone_tput(core, np.array([1]))[0]
        assert bool(best > t4_rate) is waits  # the A100 counts only if one node of it has 2 GPUs
        started_on_t4 = bool(res.start_time[1] < res.finish_time[0])
        assert started_on_t4 is not waits


def test_teacher_with_migrations_starts_a_long_job_on_a_slow_gpu_and_moves_it() -> None:
    """Where the waiting teacher leaves the T4 idle until the A100 is free, the migrating one
    starts the long job on the T4 at once and moves it to the A100 when that frees: no idle
    GPU while it waits, one restart, an earlier finish."""
    tm = tiny_tm()  # model 0 runs 4x faster on an A100 than on a T4
    cl = make_cluster(
        [
            {"gpu_type": "t4", "count": 1, "gpus": 2, "cpus": 32, "mem_gib": 128},
            {"gpu_type": "a100", "count": 1, "gpus": 2, "cpus": 32, "mem_gib": 128},
        ]
    )
    wl = make_workload([0.0, 1.0], [1e4, 1e6], [2, 2])  # job 0 short, takes the A100 first
    wait = _run(TeacherPolicy(window=4), cl, wl, tm)
    pol = TeacherPolicy(window=4, min_rel_rate=0.0, migrate_gain_s=300.0, migrate_speedup=1.25)
    move = _run(pol, cl, wl, tm)
    assert wait.start_time[1] >= wait.finish_time[0]  # waited for the A100
    assert move.start_time[1] < move.finish_time[0]  # started on the T4 at once
    assert int(move.restarts[1]) == 1 and int(wait.restarts[1]) == 0  # moved once
    assert move.finish_time[1] < wait.finish_time[1]
    with pytest.raises(ValueError, match="needs migrate_speedup"):
        TeacherPolicy(migrate_gain_s=300.0)


def test_teacher_policy_with_evict_ratio_preempts_a_long_job_for_a_short_one() -> None:
    tm = tiny_tm()
    cl = make_cluster([{"gpu_type": "a100", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64}])
    wl = make_workload([0.0, 10.0], [1e6, 600.0], [1, 1])  # the long job holds the only GPU
    plain = _run(TeacherPolicy(window=4), cl, wl, tm)
    pol = TeacherPolicy(window=4, evict_ratio=4.0, evict_wait_s=0.0)
    assert pol.settings.preemptive and pol.settings.migrate_speedup is None
    pre = _run(pol, cl, wl, tm)
    assert plain.start_time[1] >= plain.finish_time[0]  # waited for the long job
    assert pre.finish_time[1] < pre.finish_time[0]  # the short job ran first ...
    assert int(pre.restarts[0]) == 1  # ... and the long one restarted once
    assert pre.finish_time[1] < plain.finish_time[1]
    both = TeacherPolicy(evict_ratio=4.0, migrate_gain_s=300.0, migrate_speedup=1.25)
    assert both.settings.preemptive and both.settings.migrate_speedup == 1.25


def test_teacher_policy_for_agent_carries_the_runs_teacher_and_env_settings() -> None:
    conf = fast_config().agent
    conf.env.preemptive, conf.env.migrate_speedup = True, 1.5
    conf.env.migrate_elastic = True
    conf.teacher.migrate_gain_s, conf.teacher.min_rel_rate = 120.0, 0.0
    pol = TeacherPolicy.for_agent(conf)
    assert pol.settings.preemptive and pol.settings.migrate_speedup == 1.5
    assert pol.settings.migrate_elastic
    assert env_settings(conf.env).migrate_speedup == 1.5
    assert env_settings(conf.env).migrate_elastic
    conf.env.migrate_speedup, conf.env.migrate_elastic = None, False
    conf.teacher.migrate_gain_s, conf.teacher.evict_ratio = None, 3.0
    assert TeacherPolicy.for_agent(conf).settings.preemptive  # for the teacher's evictions
    conf.teacher.long_drain, conf.teacher.shrink_share = 1.0, 2.0
    teacher = TeacherPolicy.for_agent(conf).actor.__self__  # the SJFTeacher it acts with
    assert isinstance(teacher, SJFTeacher)
    assert (teacher.long_drain, teacher.shrink_share) == (1.0, 2.0)
    conf.env.preemptive = False  # shrinks are evictions: none in the plain env
    assert TeacherPolicy.for_agent(conf).actor.__self__.shrink_share is None


def _first_fit(core: EnvCore) -> np.ndarray:
    """Place the first window job that fits one node at its request on the lowest such node."""
    a = np.zeros(core.N, dtype=np.int64)
    one = core.features.one
    single = core.ma.single[:, :, one[0], one[1], one[2]]
    for k in np.flatnonzero(core.slot_ok & single.any(axis=0)).tolist():
        a[int(np.argmax(single[:, k]))] = int(core.codec.encode(k, *one))
        break
    return a


def _idle_instance() -> tuple[ThroughputModel, Cluster, Workload]:
    tm = tiny_tm()
    cl = make_cluster([{"gpu_type": "a100", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64}])
    return tm, cl, make_workload([0.0], [3600.0], [1])


def test_no_rule_completes_a_pass_on_an_idle_cluster() -> None:
    """An actor that passes until t = 5 min: the job waits exactly that long (no fallback places
    it), and the policy is asked again each round meanwhile, as the env advances."""
    tm, cl, wl = _idle_instance()
    settings = EnvSettings(window=4, advance="event", round_s=60)

    def late(core: EnvCore) -> np.ndarray:
        assert core.sim is not None
        return _first_fit(core) if core.sim.time >= 300 else np.zeros(core.N, dtype=np.int64)

    pol = ActorPolicy(settings, late, "late", max_idle_rounds=100)
    res = _run(pol, cl, wl, tm)
    assert res.start_time[0] == 300.0
    assert pol.run_stats()["decision_steps"] == 6  # t = 0, 60, ..., 300


def test_a_policy_that_never_places_stops_with_an_error_not_a_hang() -> None:
    tm, cl, wl = _idle_instance()
    settings = EnvSettings(window=4, advance="event", round_s=60)
    never = ActorPolicy(settings, lambda c: np.zeros(c.N, dtype=np.int64), "never", 50)
    with pytest.raises(
        PolicyStallError, match="never left 1 waiting jobs on an idle cluster for 50"
    ):
        _run(never, cl, wl, tm)


def test_policy_refuses_a_network_of_another_layout() -> None:
    from hetsched.agents.checkpoint import CheckpointError

    conf = fast_config().agent
    tm, cl, wl = _twin_instance()
    env = TeamEnv(cl, wl, tm, env_settings(conf.env))
    dims = net_dims(env.core.layout, env.core.cfg.levels, preemptive=True)
    net = build_net(conf.net, dims).eval()  # eviction actions the env settings do not have
    with pytest.raises(CheckpointError, match="actions per node"):
        _run(MAIFSPolicy(net=(net, conf)), cl, wl, tm)


def test_wait_below_lets_a_slow_node_pass_until_its_binding_claims_are_taken() -> None:
    """With ``agent.env.wait_below`` a node whose GPU type runs every job it could host below
    that fraction of the job's best one-node throughput may pass (the T4 runs the tiny model at
    a quarter of the A100's rate); the A100 node stays bound. In the ordered decision an agent
    whose binding claims were taken may pass again."""
    import dataclasses

    from helpers import tiny_env, tiny_tm

    from hetsched.agents.acting import agent_masks, binding_claims
    from hetsched.agents.config import MAIFSAgentConf
    from hetsched.agents.coordination import ordered_actions

    conf = MAIFSAgentConf()
    env = tiny_env(conf, tiny_tm())
    env.reset(np.random.default_rng(0))
    core = env.core
    P = core.n_place
    for wb, t4_may_pass in ((0.0, False), (0.2, False), (0.5, True), (1.0, True)):
        c = dataclasses.replace(conf.env, wait_below=wb)
        mask, single = agent_masks(core, c)
        assert bool(mask[0, 0]) is t4_may_pass  # node 0: the T4 (rate ratio 0.25)
        assert mask[1, 0] == 0  # node 1: the A100 always hosts the job at full rate
        assert np.array_equal(mask[:, 1:], core.ma.mask[:, 1:])  # claims stay legal
    c = dataclasses.replace(conf.env, wait_below=0.5)
    mask, single = agent_masks(core, c)
    bind = binding_claims(core, c, single)
    assert not bind[0].any() and bind[1].any()
    # Node 1 decides first (higher logits) and takes the job; with a 2-node env and bound node 0
    # under wait_below=0, node 0 may pass again once its binding claim is taken.
    c0 = dataclasses.replace(conf.env, wait_below=0.0)
    m0, s0 = agent_masks(core, c0)
    logits = np.where(m0 == 1, 0.0, -1e9)
    a1 = 1 + int(np.flatnonzero(m0[1, 1:P] == 1)[0])
    logits[1] = -1e9
    logits[1, a1] = 5.0  # node 1 is sure: it decides first
    acts, eff = ordered_actions(logits, m0, s0, core.K, None, binding=binding_claims(core, c0, s0))
    assert acts[1] == a1 and acts[0] == 0 and eff[0, 0]


def test_rate_order_lets_the_faster_node_choose_first() -> None:
    """``decision_order="rate"``: the A100 node (rate ratio 1) decides before the T4 node
    (0.25) even when the T4 node is the more confident, so under ``wait_below=0`` (both bound)
    the A100 takes the one job and the T4 node passes; the confidence order gives the job to
    the T4. The order changes who chooses first, not what an agent may choose."""
    import dataclasses

    from helpers import tiny_env, tiny_tm

    from hetsched.agents.acting import agent_masks, binding_claims, rate_priority
    from hetsched.agents.config import MAIFSAgentConf
    from hetsched.agents.coordination import ordered_actions

    conf = MAIFSAgentConf()
    assert conf.env.decision_order == "rate"
    env = tiny_env(conf, tiny_tm())
    env.reset(np.random.default_rng(0))
    core = env.core
    P = core.n_place
    c0 = dataclasses.replace(conf.env, wait_below=0.0)
    m0, s0 = agent_masks(core, c0)
    prio = rate_priority(core, m0)
    assert prio[1] == pytest.approx(1.0) and prio[0] == pytest.approx(0.25)
    a0 = 1 + int(np.flatnonzero(m0[0, 1:P] == 1)[0])
    a1 = 1 + int(np.flatnonzero(m0[1, 1:P] == 1)[0])
    logits = np.where(m0 == 1, 0.0, -1e9)
    logits[0, a0] = 9.0  # the T4 node is sure of its claim
    logits[1, a1] = 1.0
    bind = binding_claims(core, c0, s0)
    by_rate, _ = ordered_actions(logits, m0, s0, core.K, None, binding=bind, priority=prio)
    assert by_rate[1] == a1 and by_rate[0] == 0
    by_conf, _ = ordered_actions(logits, m0, s0, core.K, None, binding=bind)
    assert by_conf[0] == a0 and by_conf[1] == 0
    no_claim = np.zeros_like(m0)
    no_claim[:, 0] = 1
    assert (rate_priority(core, no_claim) == -1.0).all()


def test_work_conserving_agent_mask_and_identity_columns() -> None:
    """``agent.env.work_conserving`` makes the no-op illegal exactly for agents with a legal
    single-node claim; ``agent.env.identity=false`` zeroes the one-hot identity columns only."""
    import dataclasses

    from helpers import tiny_env, tiny_tm

    from hetsched.agents.acting import agent_masks, agent_observations, identity_columns
    from hetsched.agents.config import MAIFSAgentConf

    conf = MAIFSAgentConf()
    conf.env.wait_below = 0.0  # every single-node claim binds (the T4 node too)
    env = tiny_env(conf, tiny_tm())
    env.reset(np.random.default_rng(0))
    core = env.core
    mask, single = agent_masks(core, conf.env)
    raw = core.ma.mask
    P = core.n_place
    hosts = ((raw[:, 1:P] == 1) & single[:, : P - 1]).any(axis=1)
    assert hosts.all()  # both nodes can host the 1-GPU job alone
    assert (mask[:, 0] == 0).all() and np.array_equal(mask[:, 1:], raw[:, 1:])
    off = dataclasses.replace(conf.env, work_conserving=False)
    assert (agent_masks(core, off)[0][:, 0] == 1).all()
    cols = identity_columns(core.layout)
    sl = core.layout.slices()
    assert cols[sl["gpu_type_onehot"]].all() and not cols[sl["global"]].any()
    assert cols.sum() == core.layout.num_types + core.layout.num_models * (
        core.layout.resident_slots + core.layout.window
    )
    full = agent_observations(core, conf.env)
    blind = agent_observations(core, dataclasses.replace(conf.env, identity=False))
    assert full[:, cols].any() and not blind[:, cols].any()
    assert np.array_equal(full[:, ~cols], blind[:, ~cols])


def test_last_step_tells_a_failed_gang_claim_from_a_pass_and_a_placement() -> None:
    """An 8-GPU job on two 4-GPU nodes: a gang claim by one node only is granted nothing
    (``failed``), no claim at all is ``pass``, both nodes claiming places it (``moved``)."""
    tm = tiny_tm()
    cl = make_cluster([{"gpu_type": "a100", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 128}])
    wl = make_workload([0.0], [1e4], [8], cpu=4.0, mem=16.0)
    settings = EnvSettings(window=2, resident_slots=2, advance="event")
    sim = Simulator(cl, wl, tm)
    probe = EnvCore(cl, wl, tm, settings)
    probe.reset(np.random.default_rng(0))
    claim = 1 + int(np.flatnonzero(probe.ma.mask[0, 1:])[0])
    for fixed, want in (([claim, 0], "failed"), ([0, 0], "pass"), ([claim, claim], "moved")):
        pol = ActorPolicy(settings, lambda core, a=fixed: np.array(a), "fixed", 10)
        pol.reset(cl, wl, tm, np.random.default_rng(0))
        alloc = pol.decide(sim.state())
        assert pol.last_step == want and (alloc.size > 0) == (want == "moved")


def test_retry_refused_lets_the_policy_decide_again_after_a_failed_gang_in_the_round() -> None:
    """An 8-GPU job and a 2-GPU job on two 4-GPU nodes; node_0 takes its first legal claim
    (the gang of slot 0 first), node_1 passes. Without ``retry_refused`` the refused gang ends
    the round empty; with it node_0 decides again in the same round and places the 2-GPU job."""
    tm = tiny_tm()
    cl = make_cluster([{"gpu_type": "a100", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 128}])
    wl = make_workload([0.0, 0.0], [1e4, 1e4], [8, 2], cpu=4.0, mem=16.0)
    sim = Simulator(cl, wl, tm)

    def first_legal(core: EnvCore) -> np.ndarray:
        a = np.zeros(core.N, dtype=np.int64)
        a[0] = 1 + int(np.flatnonzero(core.ma.mask[0, 1 : core.n_place])[0])
        return a

    for retry in (False, True):
        settings = EnvSettings(window=2, resident_slots=2, advance="event", retry_refused=retry)
        pol = ActorPolicy(settings, first_legal, "first", 10)
        pol.reset(cl, wl, tm, np.random.default_rng(0))
        alloc = pol.decide(sim.state())
        if retry:
            assert alloc.job.tolist() == [1] and alloc.node.tolist() == [0]
            assert pol.run_stats()["decision_steps"] == 2  # refused, then placed: none legal left
        else:
            assert alloc.size == 0 and pol.last_step == "failed"
            assert pol.run_stats()["decision_steps"] == 1


def test_maifs_policy_acts_under_the_checkpoints_decision_order_unless_told() -> None:
    """``decision_order`` replaces the checkpoint's order for this evaluation only; None keeps
    the checkpoint's; an unknown order is refused."""
    from hetsched.agents.policy import MAIFSPolicy

    saved = MAIFSPolicy().conf.env.decision_order
    assert MAIFSPolicy(decision_order=None).conf.env.decision_order == saved
    for order in ("rate", "confidence"):
        pol = MAIFSPolicy(decision_order=order)
        assert pol.conf.env.decision_order == order
    assert MAIFSPolicy().conf.env.decision_order == saved  # nothing shared was changed
    with pytest.raises(ValueError, match="decision_order"):
        MAIFSPolicy(decision_order="fastest")


def test_cores_order_counts_the_cores_a_node_can_give() -> None:
    """``decision_order="cores"`` ranks the agents by the teacher's rate model: with the A100
    only 1.2x as fast at the request but left 4 cores (the job's request) and the T4 node 16,
    the T4 serves the CPU-sensitive job faster (phi 1.5 at twice the cores) and decides first,
    where the request-level ``rate`` order puts the A100 first; the acting agents follow."""
    from helpers import A100

    from hetsched.agents.acting import agent_masks, cores_priority, rate_priority
    from hetsched.agents.config import MAIFSAgentConf

    base = np.ones((2, len(GPU_TYPE_NAMES)))
    base[:, A100] = 1.2
    tm = make_tm(base, cpu_alpha=(0.7, 0.7))
    cl = make_cluster(
        [
            {"gpu_type": "t4", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
            {"gpu_type": "a100", "count": 1, "gpus": 1, "cpus": 4, "mem_gib": 64},
        ]
    )
    wl = make_workload([0.0], [4.0 * 3600], [1], cpu=4.0, mem=16.0)
    conf = MAIFSAgentConf()
    conf.env.decision_order = "cores"
    env = TeamEnv(cl, wl, tm, env_settings(conf.env), conf.env.max_steps)
    env.reset(np.random.default_rng(0))
    core = env.core
    mask, _ = agent_masks(core, conf.env)
    teacher = SJFTeacher.for_agent(conf)
    prio = cores_priority(core, mask, teacher)
    assert prio[0] == pytest.approx(1.0) and 0.5 < prio[1] < 1.0
    by_rate = rate_priority(core, mask)
    assert by_rate[1] == pytest.approx(1.0) and by_rate[0] < 1.0
    # Acting under each order: both nodes are bound, whoever decides first takes the one job.
    net = build_net(conf.net, net_dims(core.layout, core.cfg.levels)).eval()
    acts = Acting(net, conf, greedy=True)(core)
    assert acts[0] > 0 and acts[1] == 0  # the T4 node first
    conf.env.decision_order = "rate"
    acts = Acting(net, conf, greedy=True)(core)
    assert acts[1] > 0 and acts[0] == 0  # the A100 node first
    no_claim = np.zeros_like(mask)
    no_claim[:, 0] = 1
    assert (cores_priority(core, no_claim, teacher) == -1.0).all()
