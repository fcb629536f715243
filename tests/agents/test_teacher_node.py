"""The node-major teacher (``order="node"``) and the labels' ordered masks."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_cluster, make_workload
from helpers import tiny_tm

from hetsched.agents.acting import Acting, build_net, env_settings, net_dims
from hetsched.agents.config import MAIFSAgentConf
from hetsched.agents.driver import TeamEnv
from hetsched.agents.teacher import SJFTeacher


def _env(conf: MAIFSAgentConf, hours: list[float]) -> TeamEnv:
    """A T4 node and an A100 node, one GPU each; 1-GPU jobs of model 'a' (4x faster on the
    A100) waiting at t=0, with work in proportion to ``hours`` (``h`` runs 2h/3 hours on the
    A100 at the teacher's CPU level, phi 1.5)."""
    cl = make_cluster(
        [
            {"gpu_type": "t4", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
            {"gpu_type": "a100", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
        ]
    )
    n = len(hours)
    wl = make_workload([0.0] * n, [4.0 * 3600 * h for h in hours], [1] * n)
    env = TeamEnv(cl, wl, tiny_tm(), env_settings(conf.env), conf.env.max_steps)
    env.reset(np.random.default_rng(0))
    return env


def _jobs(env: TeamEnv, actions: np.ndarray) -> list[int]:
    """The job each node claims (-1: none)."""
    core = env.core
    out = []
    for a in actions.tolist():
        if 0 < a < core.n_place:
            out.append(int(core.window[core.codec.decode(np.array([a]))[0][0]]))
        else:
            out.append(-1)
    return out


def test_node_major_teacher_lets_the_fastest_node_take_its_shortest_job_first() -> None:
    conf = MAIFSAgentConf()
    env = _env(conf, [5.0, 1.0, 3.0])
    t = SJFTeacher(order="node", min_rel_rate=0.0, long_s=1e9)
    assert _jobs(env, t.act(env.core)) == [2, 1]  # A100: the shortest job; T4: the next one
    # long jobs first, longest first, as in the job-major order
    t_long = SJFTeacher(order="node", min_rel_rate=0.0, long_s=1.5 * 3600.0)  # jobs 0 and 2
    assert _jobs(env, t_long.act(env.core)) == [2, 0]
    with pytest.raises(ValueError, match="order"):
        SJFTeacher(order="nodes")


def test_label_masks_take_the_earlier_agents_claims_out_of_the_later_ones_masks() -> None:
    conf = MAIFSAgentConf()
    conf.env.decision_order = "cores"
    conf.teacher.order = "node"
    conf.teacher.long_s = 1e9
    env = _env(conf, [5.0, 1.0, 3.0])
    core = env.core
    label = SJFTeacher.for_agent(conf).act(core)
    net = build_net(conf.net, net_dims(core.layout, core.cfg.levels)).eval()
    eff = Acting(net, conf, greedy=True).label_masks(core, label)
    assert eff[np.arange(core.N), label].all()  # every label is legal where it is scored
    K, L = core.K, (core.n_place - 1) // core.K
    slot = [int(np.flatnonzero(core.window == j)[0]) for j in (1, 2)]
    claims = eff[:, 1 : core.n_place].reshape(core.N, K, L).any(axis=2)
    assert claims[1, slot[0]] and claims[1, slot[1]]  # the A100 decides first: both open
    assert not claims[0, slot[0]] and claims[0, slot[1]]  # the T4: the A100's job is taken


def test_teacher_episodes_record_the_ordered_masks_and_score_every_label() -> None:
    """With ``bc.ordered_masks`` a teacher episode's recorded masks are the ordered ones: the
    T4 node's mask at the first step lacks the job the A100 node took, and every label of the
    node-major teacher is legal where it is scored (weight 1)."""
    from hetsched.agents.rollout import EpisodeSpec, play

    conf = MAIFSAgentConf()
    conf.env.decision_order = "cores"
    conf.teacher.order = "node"
    conf.teacher.long_s = 1e9
    runs = {}
    for ordered in (False, True):
        conf.bc.ordered_masks = ordered
        env = _env(conf, [5.0, 1.0, 3.0])
        net = build_net(conf.net, net_dims(env.core.layout, env.core.cfg.levels))
        teacher = SJFTeacher.for_agent(conf)
        runs[ordered] = play(env, net, conf, teacher, EpisodeSpec(0, 0, 0, "teacher"))
    plain, ordered_ep = runs[False], runs[True]
    assert (plain.actions == ordered_ep.actions).all()  # the same teacher, the same episode
    assert (ordered_ep.mask.sum(axis=-1) <= plain.mask.sum(axis=-1)).all()
    assert ordered_ep.mask[0, 0].sum() < plain.mask[0, 0].sum()  # the T4, after the A100
    assert (ordered_ep.weight == 1.0).all()


def test_long_drain_starts_first_the_jobs_that_outlast_the_clusters_drain_time() -> None:
    """Two GPUs, 5 h + 1 h + 3 h of A100 work waiting: the cluster drains in 4.5 h, so the 5 h
    job (ratio 1.11) bounds the makespan if it starts last. ``long_drain=1`` starts it first on
    the fastest node; plain SJF gives that node the 1 h job."""
    from hetsched.agents.signals import drain_ratio

    conf = MAIFSAgentConf()
    env = _env(conf, [5.0, 1.0, 3.0])
    core = env.core
    w = np.where(core.slot_ok, core.window, 0)
    got = {
        int(j): float(r)
        for j, r, ok in zip(w, drain_ratio(core, w), core.slot_ok, strict=True)
        if ok
    }
    assert got == pytest.approx({0: 5 / 4.5, 1: 1 / 4.5, 2: 3 / 4.5})
    plain = SJFTeacher(order="node", min_rel_rate=0.0, long_s=1e9)
    assert _jobs(env, plain.act(core)) == [2, 1]
    drain = SJFTeacher(order="node", min_rel_rate=0.0, long_s=1e9, long_drain=1.0)
    assert _jobs(env, drain.act(core)) == [1, 0]  # T4: the shortest left; A100: the 5 h job
    both = SJFTeacher(order="node", min_rel_rate=0.0, long_s=1e9, long_drain=0.5)
    assert _jobs(env, both.act(core)) == [2, 0]  # 5 h and 3 h are long: longest first
    with pytest.raises(ValueError, match="long_drain"):
        SJFTeacher(long_drain=0.0)


def test_a_long_job_goes_to_the_fastest_free_node_even_when_a_slower_one_decides_first() -> None:
    """A 2-GPU T4 node decides first (a 2-GPU job only it can host ranks it 1.0, as the
    1-GPU A100 node; ties to the lower index). The long 5 h job goes to the A100, which runs it
    4x as fast; the T4 node takes a job it runs shortest instead."""
    conf = MAIFSAgentConf()
    cl = make_cluster(
        [
            {"gpu_type": "t4", "count": 1, "gpus": 2, "cpus": 16, "mem_gib": 64},
            {"gpu_type": "a100", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
        ]
    )
    wl = make_workload([0.0] * 3, [4.0 * 3600 * h for h in (5.0, 1.0, 1.0)], [1, 2, 1])
    env = TeamEnv(cl, wl, tiny_tm(), env_settings(conf.env), conf.env.max_steps)
    env.reset(np.random.default_rng(0))
    t = SJFTeacher(order="node", min_rel_rate=0.0, long_s=1.5 * 3600.0)
    t4, a100 = _jobs(env, t.act(env.core))
    assert a100 == 0 and t4 in (1, 2)
