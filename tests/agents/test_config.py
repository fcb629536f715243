"""The Hydra presets compose into the typed schemas; typos fail at composition."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

import hetsched.config  # noqa: F401  (registers the schemas)
from hetsched.agents.agent import conf_from_dict
from hetsched.agents.config import MAIFSAgentConf, TrainConfig
from hetsched.resources import CHECKPOINT_DIR, CONF_DIR

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
    assert len(obj.agent.curriculum) >= 3  # several traces/windows and cluster shapes
    assert {c.cluster for c in obj.agent.curriculum} >= {"sia_64", "pai_mixed"}


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


def test_multitrace_preset_adds_alibaba_to_the_philly_curriculum() -> None:
    with initialize_config_dir(config_dir=CONF, version_base=None):
        base = compose("train", overrides=["agent=maifs"])
        mt = compose("train", overrides=["agent=maifs_multitrace"])
    items = [dict(i) for i in mt.agent.curriculum]
    assert items[: len(base.agent.curriculum)] == [dict(i) for i in base.agent.curriculum]
    ali = [i for i in items if i["workload"] == "alibaba"]
    assert {i["cluster"] for i in ali} == {"sia_64", "pai_mixed"}
    # Consecutive stretches before the held-out busiest window (pods 5609-6108).
    assert all(not i["workload_kwargs"]["busiest"] for i in ali)
    assert all(
        i["workload_kwargs"]["start"] + i["workload_kwargs"]["num_jobs"] <= 5609 for i in ali
    )
    assert mt.agent.bc == base.agent.bc and mt.agent.net == base.agent.net


def test_scheduler_preset_ensemble_setting() -> None:
    """``ensemble`` composes as null (the shipped members) and takes ``[]`` or a list."""
    from hydra.utils import instantiate

    from hetsched.agents.network import MAIFSNet, PolicyEnsemble

    ckpts = CHECKPOINT_DIR
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        plain = compose("evaluate", overrides=["scheduler=maifs"])
        alone = compose("evaluate", overrides=["scheduler=maifs", "scheduler.maifs.ensemble=[]"])
        two = compose(
            "evaluate",
            overrides=[
                "scheduler=maifs",
                f"scheduler.maifs.ensemble=[{ckpts / 'maifs_default_seed5.pt'}]",
            ],
        )
        with pytest.raises(ConfigCompositionException):
            compose("evaluate", overrides=["scheduler=maifs", "scheduler.maifs.ensemble=7"])
    assert plain.scheduler.maifs.ensemble is None
    assert isinstance(instantiate(plain.scheduler.maifs).net, PolicyEnsemble)
    assert isinstance(instantiate(alone.scheduler.maifs).net, MAIFSNet)
    pol = instantiate(two.scheduler.maifs)
    assert isinstance(pol.net, PolicyEnsemble) and len(pol.net) == 2
    assert plain.scheduler.maifs.evict_only is False


def test_scheduler_preset_evict_only_setting() -> None:
    """``evict_only=true``: the default network decides evictions, the members place."""
    from hydra.utils import instantiate

    from hetsched.agents.network import PolicyEnsemble

    sjf = CHECKPOINT_DIR / "maifs_sjf.pt"
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(
            "evaluate",
            overrides=[
                "scheduler=maifs",
                "scheduler.maifs.evict_only=true",
                f"scheduler.maifs.ensemble=[{sjf}]",
            ],
        )
    pol = instantiate(cfg.scheduler.maifs)
    assert isinstance(pol.net, PolicyEnsemble)
    assert pol.net.placers == [False, True] and pol.net.evictors == [True, False]


def test_scheduler_preset_evict_allowance_reaches_the_policy() -> None:
    """``evict_allowance`` and ``evict_critical`` (rules of the preset) reach the policy."""
    from hydra.utils import instantiate

    from hetsched.agents.config import MAIFS_RULES, preset_rules

    rules = preset_rules()
    assert {"evict_allowance", "evict_critical"} <= set(MAIFS_RULES)
    assert rules["evict_allowance"] is False and rules["evict_critical"] is True
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(
            "evaluate",
            overrides=[
                "scheduler=maifs",
                "scheduler.maifs.evict_allowance=true",
                "scheduler.maifs.evict_critical=false",
            ],
        )
    pol = instantiate(cfg.scheduler.maifs)
    assert pol.evict_allowance is True and pol.evict_critical is False and pol.settings.preemptive


@pytest.mark.parametrize(
    ("preset", "member"), [("maifs_elastic", "elastic"), ("maifs_loaded", "loaded")]
)
def test_member_presets_reproduce_the_stored_curricula(preset: str, member: str) -> None:
    """``agent=maifs_elastic|maifs_loaded`` (with the recipe's overrides) compose to exactly
    the agent config stored in the ensemble member they made (``hetsched/checkpoints/README.md``)."""
    import torch

    recipe = [
        "agent.env.window_order=sjf",
        "agent.bc.episodes=16",
        "agent.bc.dagger_rounds=3",
        "agent.bc.dagger_episodes=6",
        "agent.ppo.env_steps=16000",
    ]
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("train", overrides=[f"agent={preset}", *recipe])
    ck = CHECKPOINT_DIR / f"maifs_default_{member}.pt"
    stored = torch.load(ck, weights_only=True)["config"]
    # Fields added to the schema since (e.g. env.preemptive) load with their defaults.
    composed = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(MAIFSAgentConf), cfg.agent))
    assert asdict(conf_from_dict(stored)) == asdict(composed)  # type: ignore[call-overload]
    assert set(stored["env"]) <= set(OmegaConf.to_container(cfg.agent.env))  # type: ignore[arg-type]
