"""Training episodes under an information track: the privileged teacher (agent.bc.noisy_*)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_cluster, make_workload
from helpers import tiny_tm

from hetsched.agents.acting import build_net, env_settings, net_dims
from hetsched.agents.config import BCConf, MAIFSAgentConf
from hetsched.agents.driver import TeamEnv
from hetsched.agents.rollout import EpisodeSpec, label_weights, play, show_track
from hetsched.agents.signals import seen_remaining
from hetsched.agents.teacher import SJFTeacher

HOURS = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5]  # close lengths: noise reorders shortest-first


def _conf(fraction: float, sigma: float | None = 2.0) -> MAIFSAgentConf:
    conf = MAIFSAgentConf()
    conf.env.window = 6
    conf.env.resident_slots = 2
    conf.bc.noisy_fraction = fraction
    conf.bc.noisy_sigma = sigma
    return conf


def _env(conf: MAIFSAgentConf) -> TeamEnv:
    """One T4 node and one A100 node, one GPU each; six 1-GPU jobs at t=0 (``HOURS`` on A100)."""
    cl = make_cluster(
        [
            {"gpu_type": "t4", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
            {"gpu_type": "a100", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
        ]
    )
    n = len(HOURS)
    wl = make_workload([0.0] * n, [4.0 * 3600 * h for h in HOURS], [1] * n, cpu=4.0, mem=16.0)
    return TeamEnv(cl, wl, tiny_tm(), env_settings(conf.env), conf.env.max_steps)


def _true(env: TeamEnv) -> np.ndarray:
    assert env.core.sim is not None
    return np.asarray(env.core.sim.remaining)


def test_noisy_episodes_show_estimates_and_the_others_the_truth() -> None:
    env = _env(_conf(1.0))
    env.reset(np.random.default_rng(0))
    spec = EpisodeSpec(0, 0, 7, "teacher")
    assert show_track(env.core, _conf(1.0), spec)
    noisy = seen_remaining(env.core).copy()
    assert not np.allclose(noisy, _true(env)), "a noisy episode shows estimates"
    with env.core.features.true_view():
        np.testing.assert_array_equal(seen_remaining(env.core), _true(env))
    np.testing.assert_array_equal(seen_remaining(env.core), noisy)  # restored after the block
    # The same spec draws the same errors; PPO episodes and fraction 0 show the truth.
    assert show_track(env.core, _conf(1.0), spec)
    np.testing.assert_array_equal(seen_remaining(env.core), noisy)
    assert not show_track(env.core, _conf(1.0), EpisodeSpec(0, 0, 7, "agent"))
    np.testing.assert_array_equal(seen_remaining(env.core), _true(env))
    assert not show_track(env.core, _conf(0.0), spec)
    np.testing.assert_array_equal(seen_remaining(env.core), _true(env))


def test_the_fraction_sets_how_many_episodes_are_noisy() -> None:
    env = _env(_conf(0.5))
    env.reset(np.random.default_rng(0))
    shown = [show_track(env.core, _conf(0.5), EpisodeSpec(0, 0, s, "dagger")) for s in range(400)]
    assert 0.4 < float(np.mean(shown)) < 0.6


def test_the_teacher_labels_from_the_true_run_times() -> None:
    conf = _conf(1.0)
    teacher = SJFTeacher.for_agent(conf)
    # Control: some seed's errors change the teacher's choice when it reads the estimates, so
    # the comparison below could fail.
    env = _env(conf)
    differs = []
    for s in range(20):
        env.reset(np.random.default_rng(0))
        show_track(env.core, conf, EpisodeSpec(0, 0, s, "teacher"))
        fooled = teacher.act(env.core)
        with env.core.features.true_view():
            differs.append(not np.array_equal(fooled, teacher.act(env.core)))
    seed = int(np.argmax(differs))
    assert differs[seed], "no seed's errors reorder the teacher; the test cannot fail"
    net = build_net(conf.net, net_dims(env.core.layout, env.core.cfg.levels)).eval()
    noisy = play(_env(conf), net, conf, teacher, EpisodeSpec(0, 0, seed, "teacher"))
    exact = play(_env(_conf(0.0)), net, _conf(0.0), teacher, EpisodeSpec(0, 0, seed, "teacher"))
    np.testing.assert_array_equal(noisy.actions, exact.actions)
    assert not np.array_equal(noisy.obs, exact.obs), "the agents see the estimates"


def test_bad_noise_settings_are_one_line_errors() -> None:
    with pytest.raises(ValueError, match="agent.bc.noisy_fraction"):
        BCConf(noisy_fraction=1.5)
    with pytest.raises(ValueError, match="agent.bc.noisy_sigma"):
        BCConf(noisy_sigma=-0.1)
    with pytest.raises(ValueError, match="agent.bc.move_weight"):
        BCConf(move_weight=0.0)


def test_move_labels_weigh_move_weight_and_forbidden_labels_nothing() -> None:
    # 3 agents, 2 placement actions (no-op, one claim), 2 eviction slots
    mask = np.array(
        [[1, 1, 1, 0], [1, 0, 0, 1], [0, 1, 1, 1]],
        dtype=bool,
    )
    label = np.array([2, 2, 0])  # a legal eviction, a forbidden eviction, a forbidden pass
    assert label_weights(mask, label, 2, 4.0).tolist() == [4.0, 0.0, 0.0]
    label = np.array([1, 0, 3])  # a claim, a pass, a legal eviction
    assert label_weights(mask, label, 2, 4.0).tolist() == [1.0, 1.0, 4.0]
    assert label_weights(mask, label, 2, 1.0).tolist() == [1.0, 1.0, 1.0]
