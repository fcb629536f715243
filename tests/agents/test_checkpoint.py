"""Checkpoints: round trip, clear mismatch errors, exact resume; the policy loads them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import fast_config, tiny_env, tiny_tm

from hetsched.agents.checkpoint import CheckpointError, load_checkpoint, net_from_checkpoint
from hetsched.agents.policy import MAIFSPolicy
from hetsched.agents.trainer import Trainer
from hetsched.resources import CHECKPOINT_DIR
from hetsched.sim.engine import SimConfig, Simulator


def _train(tmp: Path, steps: int, resume: Path | None = None) -> Trainer:
    cfg = fast_config(steps=steps)
    cfg.checkpoint_every = 32
    cfg.resume = str(resume) if resume else None
    tm = tiny_tm()
    tr = Trainer(cfg, tmp, throughput=tm, envs=[tiny_env(cfg.agent, tm, jobs=2)])
    tr.run()
    return tr


@pytest.fixture(scope="module")
def run_a(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Trainer]:
    d = tmp_path_factory.mktemp("a")
    return d, _train(d, 96)


def test_round_trip_and_policy(run_a: tuple[Path, Trainer]) -> None:
    d, tr = run_a
    ck = load_checkpoint(d / "checkpoints" / "ppo_96.pt", obs_dim=tr.dims.obs_dim)
    assert ck["env_id"] == "hetsched/Cluster-v0" and ck["step"] == 96
    net, conf = net_from_checkpoint(ck)
    for k, v in tr.net.state_dict().items():
        assert torch.equal(v, net.state_dict()[k])
    assert conf.env.window == tr.conf.env.window
    # The checkpoint runs as a scheduler on the simulator.
    tm = tiny_tm()
    env = tiny_env(conf, tm, jobs=2)
    pol = MAIFSPolicy(checkpoint=d / "checkpoints" / "ppo_96.pt")
    pol.reset(env.core.cluster, env.core.workload_source, tm, np.random.default_rng(0))  # type: ignore[arg-type]
    sim = Simulator(env.core.cluster, env.core.workload_source, tm, SimConfig(round_s=60))  # type: ignore[arg-type]
    res = sim.run(pol)
    assert np.isfinite(res.finish_time).all()


def test_mismatch_errors(run_a: tuple[Path, Trainer], tmp_path: Path) -> None:
    d, tr = run_a
    src = d / "checkpoints" / "ppo_96.pt"
    with pytest.raises(CheckpointError, match="observations of size"):
        load_checkpoint(src, obs_dim=tr.dims.obs_dim + 1)
    ck = torch.load(src, weights_only=True)
    ck["env_id"] = "hetsched/Cluster-v9"
    bad = tmp_path / "bad.pt"
    torch.save(ck, bad)
    with pytest.raises(CheckpointError, match="Cluster-v9"):
        load_checkpoint(bad)
    with pytest.raises(FileNotFoundError, match="checkpoint="):
        load_checkpoint(tmp_path / "missing.pt")
    # The shipped-table policy refuses a checkpoint trained on another observation size.
    from hetsched.envs.presets import resolve_cluster
    from hetsched.sim.throughput import default_throughput

    pol = MAIFSPolicy(checkpoint=src)
    big = default_throughput()
    with pytest.raises(CheckpointError, match="size"):
        pol.reset(
            resolve_cluster("sia_64"),
            tiny_env(tr.conf, tiny_tm()).core.workload_source,  # type: ignore[arg-type]
            big,
            np.random.default_rng(0),
        )


def test_resume_is_exact(run_a: tuple[Path, Trainer], tmp_path: Path) -> None:
    d, tr = run_a
    tb = _train(tmp_path, 96, resume=d / "checkpoints" / "ppo_64.pt")
    assert tb.env_steps == tr.env_steps == 96
    for k, v in tr.net.state_dict().items():
        assert torch.equal(v, tb.net.state_dict()[k]), k


class _Evil:
    """Unpickling this would run code; weights_only loading must refuse it."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (print, ("code ran",))


def test_truncated_foreign_and_crafted_files_are_clear_errors(
    run_a: tuple[Path, Trainer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d, _ = run_a
    src = (d / "checkpoints" / "ppo_96.pt").read_bytes()
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(src[: len(src) // 2])
    foreign = tmp_path / "foreign.pt"
    foreign.write_text("step,loss\n1,0.5\n")
    crafted = tmp_path / "crafted.pt"
    torch.save({"model": _Evil(), "config": {}, "env_id": "x", "dims": {}}, crafted)
    not_dict = tmp_path / "list.pt"
    torch.save([1, 2, 3], not_dict)
    for path in (truncated, foreign, crafted):
        with pytest.raises(CheckpointError, match="cannot be read as a MAIFS checkpoint"):
            load_checkpoint(path)
    assert "code ran" not in capsys.readouterr().out
    with pytest.raises(CheckpointError, match="holds a list"):
        load_checkpoint(not_dict)


SHIPPED = sorted(CHECKPOINT_DIR.glob("*.pt"))


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_checkpoints_load_and_schedule(path: Path) -> None:
    """Every checkpoint in ``checkpoints/`` loads (current env id and layout) and schedules;
    each has a model card in ``checkpoints/README.md``."""
    assert "maifs_default.pt" in {p.name for p in SHIPPED}
    assert f"`{path.name}`" in (path.parent / "README.md").read_text()
    ck = load_checkpoint(path)
    assert ck["env_id"] in ("hetsched/ClusterPreempt-v0", "hetsched/Cluster-v0")
    assert path.stat().st_size < 4 * 2**20  # "small: a few MB at most"
    from hetsched.envs.presets import resolve_cluster
    from hetsched.envs.testing import synthetic_workload
    from hetsched.sim.throughput import default_throughput

    tm, cl = default_throughput(), resolve_cluster("sia_64")
    rng = np.random.default_rng(0)
    wl = synthetic_workload(
        throughput=tm, cluster=cl, rng=rng, num_jobs=12, mean_interarrival_s=60.0
    )
    pol = MAIFSPolicy(checkpoint=path)
    pol.reset(cl, wl, tm, np.random.default_rng(1))
    res = Simulator(cl, wl, tm, SimConfig()).run(pol)
    assert np.isfinite(res.finish_time).all()  # every job was placed and finished


@pytest.mark.parametrize("cluster", ["sia_64", "pai_mixed", "gavel_108", "large_2048"])
def test_default_scheduler_runs_on_every_cluster_preset(cluster: str) -> None:
    """Size-agnostic: ``scheduler=maifs`` (the shipped network) needs no retraining for
    another node count or other GPU types; one agent per node."""
    from hetsched.envs.presets import resolve_cluster, scheduler_factory
    from hetsched.envs.testing import synthetic_workload
    from hetsched.sim.throughput import default_throughput

    tm, cl = default_throughput(), resolve_cluster(cluster)
    wl = synthetic_workload(
        throughput=tm, cluster=cl, rng=np.random.default_rng(0), num_jobs=16,
        mean_interarrival_s=30.0,
    )  # fmt: skip
    pol = scheduler_factory("maifs")()
    assert isinstance(pol, MAIFSPolicy)
    pol.reset(cl, wl, tm, np.random.default_rng(1))
    assert pol.core is not None
    n_agents = pol.core.N
    assert n_agents == cl.num_nodes
    res = Simulator(cl, wl, tm, SimConfig()).run(pol)
    assert np.isfinite(res.finish_time).all()
    assert pol.run_stats()["decision_steps"] > 0


def test_non_finite_weights_are_refused_on_save_and_load(
    run_a: tuple[Path, Trainer], tmp_path: Path
) -> None:
    """A checkpoint with NaN weights used to load and evaluate as if nothing were wrong."""
    from hetsched.agents.checkpoint import save_checkpoint

    d, _ = run_a
    ck = torch.load(d / "checkpoints" / "ppo_96.pt", weights_only=True)
    ck["model"]["noop.bias"] = torch.full_like(ck["model"]["noop.bias"], float("nan"))
    nan = tmp_path / "nan.pt"
    torch.save(ck, nan)
    with pytest.raises(CheckpointError, match="non-finite weights \\(noop.bias\\)"):
        load_checkpoint(nan)
    with pytest.raises(CheckpointError, match="non-finite weights"):
        MAIFSPolicy(checkpoint=nan)
    with pytest.raises(CheckpointError, match="refusing to write"):
        save_checkpoint(tmp_path / "out.pt", ck)
    assert not (tmp_path / "out.pt").exists()


def test_env_id_and_eviction_actions_must_match(
    run_a: tuple[Path, Trainer], tmp_path: Path
) -> None:
    d, tr = run_a
    ck = torch.load(d / "checkpoints" / "ppo_96.pt", weights_only=True)
    ck["env_id"] = "hetsched/ClusterPreempt-v0"  # config still says preemptive=false
    bad = tmp_path / "bad_id.pt"
    torch.save(ck, bad)
    with pytest.raises(CheckpointError, match="means 'hetsched/Cluster-v0'"):
        load_checkpoint(bad)
    ck["config"]["env"]["preemptive"] = True  # consistent, but the network has no eviction head
    crafted = tmp_path / "no_head.pt"
    torch.save(ck, crafted)
    pol = MAIFSPolicy(checkpoint=crafted)
    tm = tiny_tm()
    env = tiny_env(tr.conf, tm, jobs=2)
    with pytest.raises(CheckpointError, match="actions per node"):
        pol.reset(env.core.cluster, env.core.workload_source, tm, np.random.default_rng(0))  # type: ignore[arg-type]


def test_init_starts_a_preemptive_run_from_a_plain_checkpoint(
    run_a: tuple[Path, Trainer], tmp_path: Path
) -> None:
    d, tr = run_a
    cfg = fast_config(steps=0)
    cfg.agent.env.preemptive = True
    cfg.agent.net.evict_bias = -3.0
    cfg.init = str(d / "checkpoints" / "ppo_96.pt")
    tm = tiny_tm()
    tp = Trainer(cfg, tmp_path / "p", throughput=tm, envs=[tiny_env(cfg.agent, tm, jobs=2)])
    assert tp.net.dims.evict_slots == cfg.agent.env.resident_slots
    new = tp.net.state_dict()
    for k, v in tr.net.state_dict().items():
        assert torch.equal(v, new[k]), k
    assert torch.equal(new["ev_out.bias"], torch.tensor([-3.0]))
    cfg.agent.net.hidden = 16  # other sizes: nothing fits
    with pytest.raises(CheckpointError, match="does not fit this network"):
        Trainer(cfg, tmp_path / "q", throughput=tm, envs=[tiny_env(cfg.agent, tm, jobs=2)])


def test_the_shipped_checkpoint_holds_cpu_tensors_only() -> None:
    """Whichever device trained it, it must load as it is on a machine without a GPU (the
    trainer writes every optimizer tensor on the CPU)."""
    import torch

    from hetsched.agents.trainer import on_cpu
    from hetsched.resources import CHECKPOINT_DIR

    ck = torch.load(CHECKPOINT_DIR / "maifs_default.pt", weights_only=True)
    seen: list[str] = []

    def walk(o: object) -> None:
        if isinstance(o, torch.Tensor):
            seen.append(o.device.type)
        elif isinstance(o, dict):
            for v in o.values():
                walk(v)
        elif isinstance(o, list | tuple):
            for v in o:
                walk(v)

    walk(ck)
    assert seen and set(seen) == {"cpu"}
    nested = on_cpu({"a": [torch.zeros(2), (torch.ones(1), 3)], "b": "x"})
    assert (
        nested["b"] == "x"
        and nested["a"][1][1] == 3
        and torch.equal(nested["a"][0], torch.zeros(2))
    )


def test_settings_added_later_load_with_their_legacy_values() -> None:
    """A checkpoint config written before a setting existed loads with the value it was trained
    with (:data:`LEGACY`), not today's default; a config that has the setting keeps it."""
    from omegaconf import OmegaConf

    from hetsched.agents.checkpoint import LEGACY, conf_from_dict
    from hetsched.agents.config import AGENT_GPU_LEVELS, MAIFSAgentConf

    full = OmegaConf.to_container(OmegaConf.structured(MAIFSAgentConf()), resolve=True)
    assert isinstance(full, dict)
    old = {k: dict(v) if isinstance(v, dict) else v for k, v in full.items()}
    for group, key in LEGACY:
        del old[group][key]
    conf = conf_from_dict(old)
    assert conf.env.gpu_levels == [0.5, 1.0, 2.0] and not conf.teacher.elastic_share
    assert (conf.env.wait_below, conf.env.work_conserving) == (0.0, False)
    assert conf.env.decision_order == "confidence"
    new = conf_from_dict(full)
    assert new.env.decision_order == "rate"
    assert tuple(new.env.gpu_levels) == AGENT_GPU_LEVELS and new.teacher.elastic_share
