"""The Hydra presets compose into the typed schemas; typos fail at composition."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

import hetsched.config  # noqa: F401  (registers the schemas)
from hetsched.agents.checkpoint import conf_from_dict
from hetsched.agents.config import MAIFSAgentConf, TrainConfig
from hetsched.resources import CONF_DIR

CONF = str(CONF_DIR)


def test_train_config_composes_with_overrides() -> None:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(
            "train", overrides=["agent=maifs", "cluster=pai_mixed", "agent.net.hidden=32"]
        )
    obj = OmegaConf.to_object(cfg)
    assert isinstance(obj, TrainConfig)
    assert isinstance(obj.agent, MAIFSAgentConf)
    assert obj.agent.net.hidden == 32 and obj.cluster["name"] == "pai_mixed"
    assert obj.workload["_target_"] == "hetsched.sim.traces.philly"
    # The default curriculum is the benchmark's train split: every train scenario, nothing else.
    from hetsched.benchmark.scenarios import get_scenario, scenarios_in

    names = [c.scenario for c in obj.agent.curriculum]
    assert names == [s.name for s in scenarios_in("train")]
    scs = [get_scenario(n) for n in names if n]
    assert {s.cluster for s in scs} == {"sia_64", "pai_mixed"}
    assert {s.load for s in scs} == {"light", "busy", "overloaded"}
    assert all(c.seed_lo >= 1000 for c in obj.agent.curriculum)  # not the benchmark's seeds
    assert get_scenario(str(obj.agent.eval.scenario)).split == "validation"


def test_typo_and_bad_type_fail_at_composition() -> None:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        with pytest.raises(ConfigCompositionException):
            compose("train", overrides=["agent.net.hiden=32"])
        with pytest.raises(ConfigCompositionException):
            compose("train", overrides=["agent.ppo.lr=fast"])


def test_bad_conflict_mode_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="agent.conflict='greedy'"):
        MAIFSAgentConf(conflict="greedy")


def test_scheduler_preset_takes_a_checkpoint() -> None:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("evaluate", overrides=["scheduler=maifs", "+checkpoint=/x/y.pt"])
        plain = compose("evaluate", overrides=["scheduler=maifs"])
    assert cfg.scheduler.maifs.checkpoint == "/x/y.pt"
    assert plain.scheduler.maifs.checkpoint is None
    assert cfg.scheduler.maifs._target_ == "hetsched.agents.policy.MAIFSPolicy"


def test_teacher_preset_is_the_teacher_of_the_agent_recipe() -> None:
    """``scheduler=maifs_teacher`` is the teacher that ``agent=maifs`` clones, with the env
    settings it reads (the recipe's values, not only the schema's defaults)."""
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("evaluate", overrides=["scheduler=maifs_teacher"])
        agent = compose("train", overrides=["agent=maifs"]).agent
    t, e, tc = cfg.scheduler.maifs_teacher, agent.env, agent.teacher
    assert (t.window, t.round_s, t.fungible, t.gpu_levels) == (
        e.window,
        e.round_s,
        e.fungible,
        e.gpu_levels,
    )
    assert (t.order, t.min_rel_rate, t.long_s, t.elastic_share, t.migrate_gain_s) == (
        tc.order,
        tc.min_rel_rate,
        tc.long_s,
        tc.elastic_share,
        tc.migrate_gain_s,
    )
    assert (t.migrate_speedup, t.share_guard, t.window_backfill, t.migrate_gangs) == (
        e.migrate_speedup,
        e.share_guard,
        e.window_backfill,
        e.migrate_gangs,
    )
    assert (t.share_guard_all, t.retry_refused, t.migrate_elastic) == (
        e.share_guard_all,
        e.retry_refused,
        e.migrate_elastic,
    )
    assert e.preemptive and t.migrate_gain_s is not None  # the recipe migrates


def test_quick_preset_caps_every_phase() -> None:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("train", overrides=["agent=maifs_quick"])
    obj = OmegaConf.to_object(cfg)
    assert isinstance(obj, TrainConfig)
    assert obj.max_wall_s is not None and obj.max_wall_s <= 270
    assert obj.agent.ppo.env_steps < MAIFSAgentConf().ppo.env_steps
    assert obj.agent.bc.episodes < MAIFSAgentConf().bc.episodes


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_workers": 0}, "num_workers=0"),
        ({"max_wall_s": -1.0}, "max_wall_s=-1.0"),
        ({"max_env_steps": 0}, "max_env_steps=0"),
    ],
)
def test_train_config_checks_its_budgets(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        TrainConfig(**kwargs)  # type: ignore[arg-type]


def test_retired_settings_load_only_when_they_do_not_change_the_network() -> None:
    from hetsched.agents.checkpoint import CheckpointError

    stored = asdict(MAIFSAgentConf())
    stored["env"].update(long_guard_s=None, guard_rel_rate=0.5)
    stored["ppo"].update(rules_preset="maifs", anchor=1.0)  # how it was trained: dropped
    assert conf_from_dict(stored) == MAIFSAgentConf()
    stored["env"]["long_guard_s"] = 10800.0  # a mask rule the network acted under
    with pytest.raises(CheckpointError, match="env.long_guard_s=10800.0"):
        conf_from_dict(stored)
    with pytest.raises(CheckpointError, match="does not fit"):
        conf_from_dict({"env": {"windw": 3}})


def test_every_reward_term_has_one_agent_setting() -> None:
    """The agent's env settings take each reward weight from ``agent.env.reward_<term>``: a new
    term of the reward table needs its setting here, and a stale setting fails."""
    from dataclasses import fields

    from hetsched.agents.acting import env_settings
    from hetsched.agents.config import AgentEnvConf
    from hetsched.envs.rewards import REWARD_TERMS

    names = {f.name for f in fields(AgentEnvConf) if f.name.startswith("reward_")}
    assert names == {f"reward_{t.name}" for t in REWARD_TERMS}
    conf = AgentEnvConf(reward_makespan=0.25)
    w = env_settings(conf).reward_weights
    assert w["makespan"] == 0.25 and w["jobs"] == conf.reward_jobs


def test_curriculum_and_evaluation_refuse_test_scenarios() -> None:
    """A curriculum item naming a test scenario fails with one line before any env is built;
    a train scenario builds its cluster and seeded windows."""
    from hetsched.agents.config import CurriculumItem
    from hetsched.agents.trainer import item_source
    from hetsched.sim.errors import ConfigError

    with pytest.raises(ConfigError, match="'itp_c03_sia64_busy' is in the test split"):
        item_source(CurriculumItem(scenario="itp_c03_sia64_busy"))
    cl, wf = item_source(CurriculumItem(scenario="itp_c05_sia64_light"))
    assert cl.name == "sia_64" and callable(wf)


def test_checkpoints_without_work_conserving_load_with_it_off() -> None:
    """Checkpoints saved before ``env.work_conserving`` existed act as they were trained."""
    old = asdict(MAIFSAgentConf())
    del old["env"]["work_conserving"]
    assert conf_from_dict(old).env.work_conserving is False
    assert conf_from_dict(asdict(MAIFSAgentConf())).env.work_conserving is True


def test_an_unknown_decision_order_is_refused() -> None:
    """``agent.env.decision_order`` names one of :data:`DECISION_ORDERS`."""
    from hetsched.agents.config import DECISION_ORDERS, AgentEnvConf

    assert AgentEnvConf().decision_order in DECISION_ORDERS
    with pytest.raises(ValueError, match="decision_order='fastest'"):
        AgentEnvConf(decision_order="fastest")


def test_node_major_preset_is_the_recipe_with_the_node_major_teacher() -> None:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        base = OmegaConf.to_object(compose("train", overrides=["agent=maifs"]))
        node = OmegaConf.to_object(compose("train", overrides=["agent=maifs_node"]))
    assert isinstance(base, TrainConfig) and isinstance(node, TrainConfig)
    a, b = node.agent, base.agent
    assert (a.teacher.order, a.env.decision_order) == ("node", "cores")  # the same order
    assert a.bc.ordered_masks and a.net.runtime_rank and a.env.resizable
    assert min(a.env.gpu_levels) == 0.125 and a.teacher.resize_gain_s is not None
    # the rest is the recipe's
    assert (a.env.preemptive, a.env.migrate_speedup, a.env.window_backfill) == (
        b.env.preemptive,
        b.env.migrate_speedup,
        b.env.window_backfill,
    )


@pytest.mark.parametrize(
    ("child", "parent", "added"),
    [
        # the teacher's drain rule and the two inputs that show what its long and move rules read
        (
            "maifs_drain",
            "maifs_node",
            {("teacher", "long_drain"): 1.0, ("env", "move_feature"): True,
             ("env", "drain_feature"): True},
        ),
        # the per-level share input
        ("maifs_levels", "maifs_drain", {("env", "level_share_feature"): True}),
        # elastic migrations (the switch acts only with migrations on: checked below)
        ("maifs_elastic", "maifs_levels", {("env", "migrate_elastic"): True}),
        # lent cores
        ("maifs_reclaim", "maifs_elastic", {("env", "reclaim_cores"): True}),
        # shrinks, and the input that shows what they read
        (
            "maifs_shrink",
            "maifs_reclaim",
            {("teacher", "shrink_share"): 2.0, ("env", "shrink_feature"): True},
        ),
        # the per-level claim term
        ("maifs_level_head", "maifs_reclaim", {("net", "level_head"): True}),
        # and each level's rate
        ("maifs_level_rates", "maifs_level_head", {("env", "level_rate_feature"): True}),
        # move labels weighed in the cloning loss
        ("maifs_moves", "maifs_level_rates", {("bc", "move_weight"): 4.0}),
        # gangs move to several nodes, and start on the fastest type with room for them
        (
            "maifs_gangs",
            "maifs_moves",
            {("env", "migrate_multinode"): True, ("teacher", "gang_fastest"): True},
        ),
    ],
)  # fmt: skip
def test_each_recipe_preset_is_its_parent_plus_named_settings(
    child: str, parent: str, added: dict[tuple[str, str], object]
) -> None:
    """Each recipe preset is the one it extends with exactly the named settings; nothing else."""
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        c = OmegaConf.to_object(compose("train", overrides=[f"agent={child}"]))
        p = OmegaConf.to_object(compose("train", overrides=[f"agent={parent}"]))
    assert isinstance(c, TrainConfig) and isinstance(p, TrainConfig)
    a, b = asdict(c.agent), asdict(p.agent)
    assert a["env"]["migrate_speedup"] is not None
    for (group, key), value in added.items():
        assert a[group][key] == value and b[group][key] != value
        del a[group][key], b[group][key]
    assert a == b


def test_the_shipped_checkpoint_is_the_gangs_preset_at_seed_0() -> None:
    """The model card's command reproduces the shipped network's recipe: its stored config is
    the preset's, field for field (a change to the preset must come with a new checkpoint)."""
    import torch

    from hetsched.resources import CHECKPOINT_DIR

    ck = torch.load(CHECKPOINT_DIR / "maifs_default.pt", weights_only=True)
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        preset = OmegaConf.to_object(compose("train", overrides=["agent=maifs_gangs", "seed=0"]))
    assert isinstance(preset, TrainConfig)
    assert asdict(conf_from_dict(ck["config"])) == asdict(preset.agent)  # new fields: legacy values
    assert ck["seed"] == preset.seed == 0 and ck["step"] == 7929
    assert ck["phase"] == "bc" and preset.agent.env.migrate_multinode
    assert preset.agent.teacher.gang_fastest and preset.agent.bc.move_weight == 4.0


@pytest.mark.parametrize(
    "override", ["agent.teacher.shrink_share=2.0", "agent.env.shrink_feature=true"]
)
def test_shrinks_without_evictions_are_a_clear_error(override: str) -> None:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(
            "train", overrides=["agent=maifs_quick", "agent.env.preemptive=false", override]
        )
        with pytest.raises(ValueError, match="need evictions: set agent.env.preemptive=true"):
            OmegaConf.to_object(cfg)


def test_the_level_head_without_its_inputs_is_a_clear_error() -> None:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(
            "train",
            overrides=[
                "agent=maifs_level_head",
                "agent.env.level_share_feature=false",
            ],
        )
        with pytest.raises(ValueError, match="set agent.env.level_share_feature=true"):
            OmegaConf.to_object(cfg)
