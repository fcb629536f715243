"""The trainer's phases: behaviour cloning with DAgger, periodic evaluation and ``best.pt``, the
TensorBoard namespaces, and the Hydra training app end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import fast_config, tiny_env, tiny_tm

from hetsched import __version__
from hetsched.agents.acting import Acting
from hetsched.agents.checkpoint import load_checkpoint
from hetsched.agents.teacher import SJFTeacher
from hetsched.agents.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]


def _scalars(run_dir: Path) -> dict[str, list[float]]:
    """Every scalar tag of the run's TensorBoard log with its values in step order."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [e.value for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def test_behaviour_cloning_imitates_the_teacher(tmp_path: Path) -> None:
    cfg = fast_config(steps=0)  # behaviour cloning only
    b = cfg.agent.bc
    b.episodes, b.dagger_rounds, b.dagger_episodes, b.epochs, b.lr = 4, 1, 2, 10, 3e-3
    tm = tiny_tm()
    env = tiny_env(cfg.agent, tm, jobs=1)
    torch.manual_seed(0)
    tr = Trainer(cfg, tmp_path, throughput=tm, envs=[env])
    env.reset(np.random.default_rng(0))
    teacher = SJFTeacher.for_agent(cfg.agent).act(env.core)
    untrained = Acting(tr.net, cfg.agent, greedy=True).step(env.core)["actions"]
    assert teacher[0] == 0 and teacher[1] > 0, "the teacher gives the job to the A100 node"
    assert not np.array_equal(untrained, teacher), "the untrained net must act otherwise"
    tr.run()
    env.reset(np.random.default_rng(0))
    agent = Acting(tr.net, cfg.agent, greedy=True).step(env.core)["actions"]
    np.testing.assert_array_equal(agent, teacher)
    # Teacher and DAgger episodes, no PPO step; one checkpoint at the end of the phase.
    assert tr.phase == "ppo" and tr.env_steps > 0 and tr.ppo_steps == 0
    assert (tmp_path / "checkpoints" / f"{tr.env_steps}.pt").is_file()
    tags = _scalars(tmp_path)
    assert {"rollout/teacher_avg_jct_h", "rollout/dagger_avg_jct_h"} <= tags.keys()
    ce = tags["train/bc_ce"]
    assert len(ce) >= 2 and ce[-1] < min(0.1, ce[0]), f"the BC loss must fall near 0: {ce}"


def test_periodic_evaluation_logs_and_keeps_the_best(tmp_path: Path) -> None:
    cfg = fast_config(steps=96)
    e = cfg.agent.eval
    e.every, e.baseline, e.cluster, e.workload = 32, "las", "sia_64", "philly"
    e.workload_kwargs = {"start": 55000, "num_jobs": 8}
    e.seeds = [50]
    # Philly's models need the default throughput table (the tiny one has two models); the
    # tiny training instance runs on it too.
    from hetsched.sim.throughput import default_throughput

    tm = default_throughput()
    env = tiny_env(cfg.agent, tm, jobs=2)
    torch.manual_seed(0)
    tr = Trainer(cfg, tmp_path, throughput=tm, envs=[env])
    best = tr.run()
    assert best == tmp_path / "checkpoints" / "best.pt" and best.is_file()
    tags = _scalars(tmp_path)
    maifs, base = tags["eval/maifs_avg_jct_h"], tags["eval/baseline_avg_jct_h"]
    assert len(maifs) >= 3  # every 32 env steps over 96, and at the end if not just done
    assert all(np.isfinite(maifs)) and min(maifs) > 0
    assert len(set(base)) == 1 and base[0] > 0  # the fixed baseline runs once, then is reused
    ck = load_checkpoint(best, obs_dim=tr.dims.obs_dim)
    assert ck["best"] == pytest.approx(min(maifs))
    for ns in ("rollout/", "train/", "reward/", "cluster/"):
        assert any(t.startswith(ns) for t in tags), f"no {ns} scalars in {sorted(tags)}"
    assert {"cluster/avg_jct_h", "cluster/restarts", "rollout/steps_per_s"} <= set(tags)


def test_unknown_evaluation_baseline_fails_before_training(tmp_path: Path) -> None:
    cfg = fast_config(steps=32)
    cfg.agent.eval.every, cfg.agent.eval.baseline = 32, "gavell"
    tm = tiny_tm()
    with pytest.raises(ValueError, match="agent.eval.baseline='gavell': unknown scheduler preset"):
        Trainer(cfg, tmp_path, throughput=tm, envs=[tiny_env(cfg.agent, tm)])
    assert not (tmp_path / "checkpoints").exists()


def test_teacher_baseline_is_the_teacher_this_run_clones(tmp_path: Path) -> None:
    cfg = fast_config(steps=32)
    cfg.agent.eval.every, cfg.agent.eval.baseline = 32, "teacher"
    cfg.agent.env.fungible, cfg.agent.teacher.long_s = False, 1800.0  # the no-fungible ablation
    tm = tiny_tm()
    tr = Trainer(cfg, tmp_path, throughput=tm, envs=[tiny_env(cfg.agent, tm)])
    pol = tr._baseline_factory()()
    teacher = pol.actor.__self__  # type: ignore[union-attr]
    assert isinstance(teacher, SJFTeacher)
    assert (teacher.fungible, teacher.long_s) == (False, 1800.0)
    assert pol.settings.window == cfg.agent.env.window


@pytest.mark.slow
def test_training_app_end_to_end(tmp_path: Path) -> None:
    """``scripts/train.py`` as users run it, with a tiny budget: checkpoints, best.pt, out=."""
    run = tmp_path / "run"
    out = tmp_path / "final.pt"
    cmd = [
        sys.executable, str(ROOT / "scripts" / "train.py"),
        "agent=maifs", "workload=philly", "cluster=sia_64",
        "agent.curriculum=[]", "workload.num_jobs=12", "workload.start=55000",
        "workload.busiest=false",
        "agent.bc.episodes=1", "agent.bc.dagger_rounds=1", "agent.bc.dagger_episodes=1",
        "agent.bc.epochs=1", "agent.ppo.env_steps=48", "agent.ppo.rollout_steps=24",
        "agent.eval.every=24", "agent.eval.workload_kwargs.num_jobs=8", "agent.eval.seeds=[50]",
        "checkpoint_every=24", "progress=false", f"out={out}", f"hydra.run.dir={run}",
    ]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"best checkpoint: {run / 'checkpoints' / 'best.pt'}" in res.stdout
    steps = sorted(int(p.stem) for p in (run / "checkpoints").glob("[0-9]*.pt"))
    assert len(steps) >= 3 and steps[-1] >= 48
    ck = torch.load(out, weights_only=True)
    assert ck["env_id"] == "hetsched/Cluster-v0" and ck["package_version"] == __version__
    assert ck["config"]["eval"]["workload_kwargs"] == {"start": 55000, "num_jobs": 8}
    tags = _scalars(run)
    want = {
        "rollout/episode_return", "rollout/steps_per_s", "rollout/teacher_avg_jct_h",
        "rollout/dagger_avg_jct_h", "train/policy_loss", "train/value_loss", "train/entropy",
        "reward/jobs", "reward/makespan", "cluster/avg_jct_h", "eval/maifs_avg_jct_h",
        "eval/baseline_avg_jct_h",
    }  # fmt: skip
    assert want <= tags.keys(), sorted(want - tags.keys())
    assert all(t.split("/")[0] in {"rollout", "train", "reward", "cluster", "eval"} for t in tags)


@pytest.mark.parametrize("preemptive", [False, True])
def test_rollouts_with_the_rules_in_the_loop(tmp_path: Path, preemptive: bool) -> None:
    """``ppo.rules_preset``: the network's steps under MAIFSPolicy's rules, with the env's
    reward (its sum is minus the total JCT over Z, minus the makespan term) and real times."""
    from helpers import preempt_env

    cfg = fast_config(steps=64)
    cfg.agent.env.preemptive = preemptive
    cfg.agent.ppo.rules_preset = "maifs"
    tm = tiny_tm()
    env = preempt_env(cfg.agent, tm) if preemptive else tiny_env(cfg.agent, tm, jobs=3)
    tr = Trainer(cfg, tmp_path, throughput=tm, envs=[env])
    tr.draw_env()
    ep = tr.run_rules_episode(env, "maifs")
    assert ep is not None and ep.length >= 1
    assert np.all(ep.dt >= 0) and np.isfinite(ep.logp).all()
    assert np.all(
        ep.mask[np.arange(ep.length)[:, None], np.arange(env.core.N)[None, :], ep.actions]
    )
    m = ep.metrics
    wl = env.core.wl
    assert wl is not None
    total_jct_s = m["avg_jct_h"] * 3600.0 * wl.num_jobs
    w = env.weights
    want = -w.jobs * total_jct_s / env.z - w.makespan * m["makespan_h"]
    assert ep.reward.sum() == pytest.approx(want, rel=1e-9)
    assert ep.dt.sum() == pytest.approx(m["makespan_h"] * 3600.0)
    tr.run()  # PPO on such episodes runs end to end
    assert tr.ppo_steps >= 64


def test_rules_in_the_loop_leave_elastic_windows_to_the_teacher(tmp_path: Path) -> None:
    """With the ``maifs`` preset (``elastic_teacher: true``) the teacher takes the steps whose
    waiting jobs are all elastic, unrecorded: on elastic jobs only, the network has no step;
    on the same jobs rigid it has."""
    from conftest import make_cluster, make_workload

    from hetsched.agents.acting import env_settings
    from hetsched.agents.config import preset_rules
    from hetsched.agents.driver import TeamEnv

    cfg = fast_config(steps=64)
    cfg.agent.ppo.rules_preset = "maifs"
    tm = tiny_tm()
    node = {"count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64}
    cl = make_cluster([{"gpu_type": "t4", **node}, {"gpu_type": "a100", **node}])

    def env(elastic: bool) -> TeamEnv:
        wl = make_workload(
            [0.0] * 3, [4.0 * 3600] * 3, [1] * 3, elastic=([1] * 3, [2] * 3) if elastic else None
        )
        return TeamEnv(cl, wl, tm, env_settings(cfg.agent.env), cfg.agent.env.max_steps)

    assert preset_rules("maifs")["elastic_teacher"] is True
    for elastic in (True, False):
        e = env(elastic)
        tr = Trainer(cfg, tmp_path / str(elastic), throughput=tm, envs=[e])
        tr.draw_env()
        ep = tr.run_rules_episode(e, "maifs")
        assert (ep is None) if elastic else (ep is not None and ep.length >= 1)
