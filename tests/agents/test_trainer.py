"""The trainer's phases: behaviour cloning with DAgger, periodic evaluation and ``best.pt``, the
TensorBoard namespaces, and the Hydra training app end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import fast_config, resize_env, tiny_env, tiny_tm

from hetsched import __version__
from hetsched.agents.acting import Acting
from hetsched.agents.checkpoint import load_checkpoint
from hetsched.agents.policy import MAIFSPolicy
from hetsched.agents.teacher import SJFTeacher
from hetsched.agents.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]


def _events(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag of the run's TensorBoard log: (step, value) in the order written."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def _scalars(run_dir: Path) -> dict[str, list[float]]:
    """Every scalar tag of the run's TensorBoard log with its values in step order."""
    return {t: [v for _, v in ev] for t, ev in _events(run_dir).items()}


def test_behaviour_cloning_imitates_the_teacher(tmp_path: Path) -> None:
    cfg = fast_config(steps=0)  # behaviour cloning only
    cfg.agent.env.work_conserving = False  # the teacher's T4 node passes: a legal label here
    # Under the rate order the A100 node chooses first, so even an untrained net may give it
    # the job; under the confidence order the clone must learn that the T4 node passes.
    cfg.agent.env.decision_order = "confidence"
    b = cfg.agent.bc
    b.episodes, b.dagger_rounds, b.dagger_episodes, b.epochs, b.lr = 4, 1, 2, 10, 3e-3
    cfg.checkpoint_every = 1  # a checkpoint after every round
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
    # Teacher and DAgger episodes, no PPO step; one checkpoint per round, the last at the end.
    assert tr.phase == "ppo" and tr.env_steps > 0 and tr.ppo_steps == 0
    assert (tmp_path / "checkpoints" / f"bc_{tr.env_steps}.pt").is_file()
    assert len(list((tmp_path / "checkpoints").glob("bc_*.pt"))) == 2
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
    teacher = getattr(pol.actor, "__self__", None)
    assert isinstance(teacher, SJFTeacher)
    assert (teacher.fungible, teacher.long_s) == (False, 1800.0)
    assert pol.settings.window == cfg.agent.env.window
    assert pol.settings.levels.gpu == tuple(cfg.agent.env.gpu_levels)
    assert teacher.elastic_share is cfg.agent.teacher.elastic_share


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
    names = {p.name for p in (run / "checkpoints").glob("*.pt")}
    bc = [n for n in names if n.startswith("bc_")]
    steps = sorted(int(n[4:-3]) for n in names if n.startswith("ppo_"))
    # A bc_ checkpoint after each round that crosses checkpoint_every (the last at the end).
    assert 1 <= len(bc) <= 2 and len(steps) >= 2 and steps[-1] >= 48, sorted(names)
    ck = torch.load(out, weights_only=True)
    # the recipe (conf/agent/maifs.yaml) acts in the preemptive env, for its migrations
    assert ck["env_id"] == "hetsched/ClusterPreempt-v0" and ck["package_version"] == __version__
    assert ck["config"]["eval"]["workload_kwargs"] == {"start": 55000, "num_jobs": 8}
    # One step axis for every tag: env steps, never decreasing, never past the run's end.
    last = int(steps[-1])
    for tag, ev in _events(run).items():
        st = [e[0] for e in ev]
        assert st == sorted(st) and st[0] >= 0 and st[-1] <= last, (tag, st)
    tags = _scalars(run)
    want = {
        "rollout/episode_return", "rollout/steps_per_s", "rollout/teacher_avg_jct_h",
        "rollout/dagger_avg_jct_h", "train/policy_loss", "train/value_loss", "train/entropy",
        "reward/jobs", "reward/makespan", "cluster/avg_jct_h", "eval/maifs_avg_jct_h",
        "eval/baseline_avg_jct_h",
    }  # fmt: skip
    assert want <= tags.keys(), sorted(want - tags.keys())
    assert all(t.split("/")[0] in {"rollout", "train", "reward", "cluster", "eval"} for t in tags)


def test_a_diverging_run_stops_with_a_clear_error_and_writes_no_nan_checkpoint(
    tmp_path: Path,
) -> None:
    """``agent.ppo.lr=100`` used to train to all-NaN weights and name them best."""
    from hetsched.agents.learner import TrainingDivergedError
    from hetsched.sim.throughput import default_throughput

    cfg = fast_config(steps=2000, lr=100.0)
    e = cfg.agent.eval
    e.every, e.baseline, e.cluster, e.workload = 32, "fifo", "sia_64", "philly"
    e.workload_kwargs, e.seeds = {"start": 55000, "num_jobs": 8}, [50]
    tm = default_throughput()
    tr = Trainer(cfg, tmp_path, throughput=tm, envs=[tiny_env(cfg.agent, tm, jobs=3)])
    with pytest.raises(
        TrainingDivergedError, match=r"diverged at env step \d+ \(phase ppo\).*lr=100"
    ):
        tr.run()
    written = sorted((tmp_path / "checkpoints").glob("*.pt"))
    assert written, "the checkpoint before the divergence is kept"
    for p in written:  # every file written loads: none holds a non-finite weight
        load_checkpoint(p, obs_dim=tr.dims.obs_dim)


def test_budgets_cap_behaviour_cloning_too(tmp_path: Path) -> None:
    """``max_env_steps`` stops the run inside behaviour cloning (no PPO step after it)."""
    cfg = fast_config(steps=512)
    b = cfg.agent.bc
    b.episodes, b.dagger_rounds, b.dagger_episodes, b.epochs = 50, 3, 50, 1
    cfg.max_env_steps = 5
    tm = tiny_tm()
    tr = Trainer(cfg, tmp_path, throughput=tm, envs=[tiny_env(cfg.agent, tm, jobs=2)])
    tr.run()
    assert 5 <= tr.env_steps < 20 and tr.ppo_steps == 0
    assert tr.episodes < 10  # far fewer than the 200 episodes asked for
    assert (tmp_path / "checkpoints" / f"bc_{tr.env_steps}.pt").is_file()


@pytest.mark.slow
def test_worker_processes_play_the_same_episodes(tmp_path: Path) -> None:
    """``num_workers=2`` plays exactly the episodes a single process plays, with the weights
    the trainer holds now (shared memory: an in-place update reaches the workers)."""
    from hetsched.agents.rollout import RolloutWorkers

    cfg = fast_config(steps=64)
    cfg.agent.env.work_conserving = False  # the no-op bias below must be able to change actions
    tm = tiny_tm()
    tr = Trainer(cfg, tmp_path, throughput=tm, envs=[tiny_env(cfg.agent, tm, jobs=3)])
    tr.workers = RolloutWorkers(tr.envs, cfg.agent, tr.net, 2)
    try:
        there = tr.play_episodes(3, "agent")
        with torch.no_grad():
            tr.net.noop.bias.add_(4.0)  # in place, as the optimizer updates
        there_after = tr.play_episodes(3, "agent")
    finally:
        tr.workers.close()
        tr.workers = None
    here_after = tr.play_episodes(3, "agent")
    with torch.no_grad():
        tr.net.noop.bias.sub_(4.0)
    here = tr.play_episodes(3, "agent")
    for xs, ys in ((here, there), (here_after, there_after)):
        assert [e.length for e in xs] == [e.length for e in ys]
        for a, b in zip(xs, ys, strict=True):
            np.testing.assert_array_equal(a.actions, b.actions)
            np.testing.assert_allclose(a.reward, b.reward)
    assert any(  # the update changed what was played, so the workers did see it
        a.length != b.length or not np.array_equal(a.actions, b.actions)
        for a, b in zip(here, here_after, strict=True)
    )


@pytest.mark.slow
def test_training_app_stops_a_diverging_run_with_exit_code_2(tmp_path: Path) -> None:
    """``agent.ppo.lr=100`` through ``scripts/train.py``: one line on stderr, exit code 2."""
    run = tmp_path / "run"
    cmd = [
        sys.executable, str(ROOT / "scripts" / "train.py"),
        "agent=maifs", "agent.curriculum=[]", "workload.num_jobs=12", "workload.start=55000",
        "workload.busiest=false", "agent.bc.episodes=1", "agent.bc.dagger_rounds=0",
        "agent.bc.epochs=1", "agent.ppo.env_steps=4000", "agent.ppo.rollout_steps=24",
        "agent.ppo.lr=100", "agent.eval.every=0", "progress=false", f"hydra.run.dir={run}",
    ]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert res.returncode == 2, res.stderr[-3000:]
    err = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "diverged" in err[0] and "agent.ppo.lr=100" in err[0]
    assert "Traceback" not in res.stderr
    for p in (run / "checkpoints").glob("*.pt"):
        load_checkpoint(p)  # nothing non-finite was written


def test_a_separate_learner_copies_its_weights_back_to_the_acting_network(tmp_path: Path) -> None:
    """With the learner on an accelerator (``device=cuda``) the trainer keeps a second network;
    exercised here with a second CPU copy: every fit and update reaches the acting network
    (which the rollout workers read) and the checkpoints."""
    import copy

    cfg = fast_config(steps=64)
    tm = tiny_tm()
    env = tiny_env(cfg.agent, tm)
    torch.manual_seed(0)
    tr = Trainer(cfg, tmp_path, throughput=tm, envs=[env])
    assert tr.learner is tr.net and tr.device.type == "cpu"  # no GPU here: one network
    before = {k: v.clone() for k, v in tr.net.state_dict().items()}
    tr.learner = copy.deepcopy(tr.net)
    tr.opt = torch.optim.Adam(tr.learner.parameters(), lr=cfg.agent.ppo.lr)
    tr.run()
    now, learnt = tr.net.state_dict(), tr.learner.state_dict()
    assert all(torch.equal(now[k], learnt[k]) for k in now)
    assert any(not torch.equal(now[k], before[k]) for k in now)
    ck = load_checkpoint(tmp_path / "checkpoints" / f"ppo_{tr.env_steps}.pt")
    assert all(torch.equal(ck["model"][k], now[k]) for k in now)
    assert "CPU cores" in ck["hardware"]


def test_cuda_learner_without_cuda_is_a_clear_error() -> None:
    from hetsched.agents.trainer import learner_device

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="device='cuda'.*not available"):
        learner_device("cuda")
    with pytest.raises(ValueError, match="not one of auto, cpu, cuda"):
        learner_device("tpu")
    assert learner_device("auto").type == "cpu"


def test_cluster_draw_plays_episodes_on_drawn_clusters(tmp_path: Path) -> None:
    """With ``agent.cluster_draw.fraction`` set, training episodes run on clusters drawn from
    the env seed (node counts vary), the rest on the item's own; the teacher plays both."""
    from hetsched.agents.config import ClusterDrawConf
    from hetsched.agents.driver import TeamEnv
    from hetsched.agents.trainer import cluster_draw

    cfg = fast_config()
    assert cluster_draw(ClusterDrawConf(fraction=0.0)) is None  # off: the item's own cluster
    conf = ClusterDrawConf(fraction=0.5, gpu_types=["t4", "a100"], groups=[1, 2], nodes=[1, 3])
    conf.total_gpus = [2, 48]
    tm = tiny_tm()
    own = tiny_env(cfg.agent, tm, jobs=3).core
    env = TeamEnv(own.cluster, own.workload_source, tm, own.cfg, 500, cluster_draw(conf))
    tr = Trainer(cfg, tmp_path, throughput=tm, envs=[env])
    eps = tr.play_episodes(10, "teacher")
    assert all(e.metrics for e in eps)  # every job finished on every cluster
    sizes = [e.obs.shape[1] for e in eps]  # agents (nodes) of each episode
    assert 2 in sizes and len(set(sizes)) >= 2  # the own 2-node cluster and drawn ones
    seen = set()
    for seed in range(20):
        env.reset(np.random.default_rng(seed))
        seen.add(env.num_agents)
    assert len(seen) >= 3
    env.reset(np.random.default_rng(5))
    n = env.num_agents
    env.reset(np.random.default_rng(5))  # the same seed draws the same cluster again
    assert env.num_agents == n
    with pytest.raises(ValueError, match="cluster_draw.fraction"):
        ClusterDrawConf(fraction=1.5)


def test_job_draw_redraws_the_requests_of_the_training_windows() -> None:
    """With ``agent.job_draw.fraction`` set, each curriculum item's windows come through a
    :class:`JobMixDraw`: the item's 1-GPU window gets gangs, at the same seed the same ones."""
    from hetsched.agents.acting import env_settings
    from hetsched.agents.config import CurriculumItem
    from hetsched.agents.trainer import curriculum_envs
    from hetsched.benchmark.job_draw import JobMixDraw
    from hetsched.sim.throughput import default_throughput

    cfg = fast_config()
    cfg.agent.curriculum = [CurriculumItem(scenario="itp_c01_sia64_busy")]
    tm = default_throughput()
    settings = env_settings(cfg.agent.env)
    _, (off,) = curriculum_envs(cfg, tm, settings, None)
    cfg.agent.job_draw.fraction = 1.0
    _, (on,) = curriculum_envs(cfg, tm, settings, None)
    assert isinstance(on._args[0], JobMixDraw) and not isinstance(off._args[0], JobMixDraw)
    reqs = []
    for env in (off, on, on):
        env.reset(np.random.default_rng(7))
        assert env.core.wl is not None
        reqs.append(env.core.wl.req_gpus.copy())
    assert (reqs[0] == 1).mean() > 0.9 and (reqs[1] > 1).mean() > 0.2
    np.testing.assert_array_equal(reqs[1], reqs[2])


@pytest.mark.slow
def test_workers_start_from_a_small_message(tmp_path: Path) -> None:
    """The envs reach the workers through a file (a start message over the pipe's buffer would
    start the workers one after another), and closing removes the file."""
    import os
    from multiprocessing.reduction import ForkingPickler

    from hetsched.agents.rollout import RolloutWorkers

    cfg = fast_config()
    tm = tiny_tm()
    tr = Trainer(cfg, tmp_path, throughput=tm, envs=[tiny_env(cfg.agent, tm, jobs=3)])
    workers = RolloutWorkers(tr.envs, cfg.agent, tr.net, 2)
    try:
        assert len(ForkingPickler.dumps(workers.pool._initargs)) < 65536  # type: ignore[attr-defined]
        assert os.path.isfile(os.path.join(workers._dir, "envs.pkl"))
    finally:
        workers.close()
    assert not os.path.exists(workers._dir)


def test_a_worker_plays_one_throwaway_episode_as_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The initializer pays a worker's first-call costs with one episode of the first env,
    so no wave of the run waits for them; the run's episodes are not touched."""
    import pickle

    from hetsched.agents import rollout

    cfg = fast_config()
    tm = tiny_tm()
    tr = Trainer(cfg, tmp_path, throughput=tm, envs=[tiny_env(cfg.agent, tm, jobs=3)])
    path = tmp_path / "envs.pkl"
    path.write_bytes(pickle.dumps((tr.envs, cfg.agent)))
    played: list[rollout.EpisodeSpec] = []
    real = rollout.play

    def counting(env, net, conf, teacher, spec):  # type: ignore[no-untyped-def]
        played.append(spec)
        return real(env, net, conf, teacher, spec)

    monkeypatch.setattr(rollout, "play", counting)
    monkeypatch.setattr(rollout, "_W", {})
    rollout._init_worker(str(path), tr.net)
    assert "error" not in rollout._W
    assert played == [rollout.EpisodeSpec(0, 0, 0, "agent")]
    assert set(rollout._W) == {"envs", "conf", "net", "teacher"}


@pytest.mark.slow
def test_a_worker_that_cannot_start_is_an_error_not_a_hang(tmp_path: Path) -> None:
    """An env whose reset raises in a rollout worker ends the collection with a clear error
    (a pool's failing initializer would otherwise restart its worker forever)."""
    import functools

    from hetsched.agents.driver import TeamEnv
    from hetsched.agents.rollout import EpisodeSpec, RolloutWorkers

    cfg = fast_config()
    tm = tiny_tm()
    good = tiny_env(cfg.agent, tm)
    broken = TeamEnv(good.core.cluster, functools.partial(int, "x"), tm, good.core.cfg, 50)
    tr = Trainer(cfg, tmp_path, throughput=tm, envs=[good])
    workers = RolloutWorkers([broken], cfg.agent, tr.net, 2)
    try:
        with pytest.raises(RuntimeError, match="rollout worker could not start: TypeError"):
            workers.play([EpisodeSpec(0, 0, 0, "teacher")])
    finally:
        workers.close()


def test_behaviour_cloning_learns_the_teachers_resize(tmp_path: Path) -> None:
    cfg = fast_config(steps=0)  # behaviour cloning only
    cfg.agent.env.resizable = True
    cfg.agent.env.fungible = False  # one placement action per slot: the test is about resizing
    cfg.agent.teacher.resize_gain_s = 0.0
    b = cfg.agent.bc
    b.episodes, b.dagger_rounds, b.dagger_episodes, b.epochs, b.lr = 4, 1, 2, 10, 3e-3
    tm = tiny_tm()
    env = resize_env(cfg.agent, tm)
    torch.manual_seed(0)
    tr = Trainer(cfg, tmp_path, throughput=tm, envs=[env])
    assert tr.net.dims.resize_slots == cfg.agent.env.resident_slots

    def resize_state() -> None:  # the elastic job runs; the 4-GPU job waits (t=60 s)
        env.reset(np.random.default_rng(0))
        env.step(SJFTeacher.for_agent(cfg.agent).act(env.core))
        assert env.core.sim is not None and env.core.sim.time == pytest.approx(60.0)

    resize_state()
    grow = env.core.resize_offset
    assert env.core.ma.mask[0, grow] == 1 and env.core.ma.mask[0, 1 : env.core.n_place].sum() == 0
    assert SJFTeacher.for_agent(cfg.agent).act(env.core).tolist() == [grow]
    assert SJFTeacher(resize_gain_s=None).act(env.core).tolist() == [0]  # never resizes
    assert SJFTeacher(resize_gain_s=1e9).act(env.core).tolist() == [0]  # saves too little
    tr.run()
    resize_state()
    assert Acting(tr.net, cfg.agent, greedy=True).step(env.core)["actions"].tolist() == [grow]
    ck = sorted((tmp_path / "checkpoints").glob("bc_*.pt"))[-1]
    pol = MAIFSPolicy(checkpoint=ck)
    assert pol.conf.env.resizable and pol.net.dims.resize_slots == cfg.agent.env.resident_slots
