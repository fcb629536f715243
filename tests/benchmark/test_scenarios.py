"""Scenario suite and splits: coverage, one table of record, enforcement, env hook."""

from __future__ import annotations

import re
from pathlib import Path

import gymnasium as gym
import pytest

import hetsched.envs  # noqa: F401  (registers the env ids)
from hetsched.benchmark import (
    FAMILIES,
    LOADS,
    SCENARIOS,
    SELECTIONS,
    SPLITS,
    check_trainable,
    check_trainable_preset,
    get_scenario,
    scenarios_in,
)
from hetsched.benchmark.splits import split_of

DOCS = Path(__file__).resolve().parents[2] / "docs" / "benchmark.md"


def test_suite_covers_families_clusters_loads_and_elasticity() -> None:
    scen = list(SCENARIOS.values())
    assert {s.cluster for s in scen} == {"sia_64", "pai_mixed", "rtx_64", "gavel_108"}
    assert {s.load for s in scen} == set(LOADS)
    assert {s.elastic for s in scen} == {True, False}
    assert set(FAMILIES) == {s.family for s in scen}
    for fam in ("philly", "helios", "alibaba", "pollux", "gavel"):
        assert any(s.family == fam for s in scen)
    assert sum(f.startswith("itp_") for f in FAMILIES) >= 3
    for s in scen:
        assert s.name.startswith(s.family) and s.stresses and s.load in s.stresses


def test_the_validation_cluster_is_held_whole_and_has_an_untrained_gpu_type() -> None:
    """``rtx_64`` puts every scenario on it in validation (a train family too), and one of its
    GPU types is on no training or test cluster."""
    from hetsched.benchmark.splits import split_of
    from hetsched.envs.presets import resolve_cluster

    on = [s for s in SCENARIOS.values() if s.cluster == "rtx_64"]
    assert on and all(s.split == "validation" for s in on)
    assert split_of("philly", "rtx_64") == "validation" and split_of("philly", "sia_64") == "train"
    types = {
        c: set(resolve_cluster(c).node_type.tolist()) for c in ("sia_64", "pai_mixed", "rtx_64")
    }
    assert types["rtx_64"] - types["sia_64"] - types["pai_mixed"]


def test_splits_hold_whole_families_and_clusters() -> None:
    fams = [f for sp in SPLITS.values() for f in sp.families]
    assert sorted(fams) == sorted(FAMILIES)  # every family in exactly one split
    test = SPLITS["test"]
    assert sum(f.startswith("itp_") for f in test.families) >= 2
    assert any(not f.startswith("itp_") for f in test.families)
    assert test.clusters  # a cluster held out whole
    for s in SCENARIOS.values():
        in_test = s.family in test.families or s.cluster in test.clusters
        assert (s.split == "test") == in_test
    for split in SPLITS:
        got = scenarios_in(split)
        assert got and all(s.split == split for s in got)
    assert sum(len(scenarios_in(s)) for s in SPLITS) == len(SCENARIOS)


def test_quick_is_small_and_mixed() -> None:
    quick = scenarios_in("quick")
    assert 3 <= len(quick) <= 5
    assert len({s.family for s in quick}) == len(quick)
    assert len({s.load for s in quick}) >= 2
    assert set(SELECTIONS) == {"quick"}


def test_check_trainable() -> None:
    for s in scenarios_in("train") + scenarios_in("validation"):
        check_trainable(s.name)
    with pytest.raises(ValueError, match=r"^scenario 'itp_c03_sia64_busy' is in the test split"):
        check_trainable("itp_c03_sia64_busy")
    with pytest.raises(ValueError, match="cluster 'gavel_108'"):
        check_trainable("itp_c10_gavel108_busy")
    with pytest.raises(ValueError, match=r"^unknown scenario 'itp_c3_busy'; known: \["):
        check_trainable("itp_c3_busy")


def test_check_trainable_preset() -> None:
    check_trainable_preset("philly", {}, "sia_64")
    check_trainable_preset("itp", {"itp_cluster": "cluster01"}, "sia_64")
    with pytest.raises(ValueError, match="test family 'itp_c03'"):
        check_trainable_preset("itp", {"itp_cluster": "cluster03"}, "sia_64")
    with pytest.raises(ValueError, match="test family 'itp_c10'"):
        check_trainable_preset("itp", {}, "sia_64")  # the preset's default cluster10
    with pytest.raises(ValueError, match="cluster 'gavel_108' is held out"):
        check_trainable_preset("philly", {}, "gavel_108")


def test_unknown_split_and_family() -> None:
    with pytest.raises(ValueError, match=r"^unknown split 'tset'; known: \['train'"):
        scenarios_in("tset")
    with pytest.raises(ValueError, match="trace family 'mars' is in no split"):
        split_of("mars", "sia_64")


def test_docs_give_the_split_table_and_every_scenario() -> None:
    text = DOCS.read_text()
    for name, sp in SPLITS.items():
        assert re.search(rf"\| {name} +\| {', '.join(sp.families)} +\|", text), name
    for name in SCENARIOS:
        assert f"`{name}`" in text, name


def test_registered_envs_build_from_a_scenario() -> None:
    env = gym.make("hetsched/ClusterCentral-v0", scenario="itp_c10_sia64_busy")
    env.reset(seed=0)
    core = env.unwrapped.core  # type: ignore[attr-defined]
    assert core.cluster.name == "sia_64" and core.wl.name == "itp_c10_sia64_busy"
    assert core.wl.num_jobs == get_scenario("itp_c10_sia64_busy").num_jobs
    from hetsched.envs import make_parallel

    par = make_parallel(scenario="alibaba_pai_busy")
    par.reset(seed=0)
    assert par.core.cluster.name == "pai_mixed"
    with pytest.raises(ValueError, match="unknown scenario 'nope'"):
        gym.make("hetsched/ClusterCentral-v0", scenario="nope")


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("cluster=gavel_108", "gavel_108"),
        ("agent.eval.cluster=gavel_108", "gavel_108"),
        ("agent.eval.workload=gavel_synthetic", "test family 'gavel'"),
    ],
)
def test_the_training_app_refuses_test_families_and_clusters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], override: str, needle: str
) -> None:
    from hetsched.cli import EXIT_BAD_INPUT
    from hetsched.cli import train as train_cli

    code = train_cli.main(["agent=maifs_quick", override, f"hydra.run.dir={tmp_path / 'run'}"])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT and needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_scenario_names_of_a_split_or_one_scenario() -> None:
    from hetsched.benchmark.scenarios import scenario_names, scenarios_in
    from hetsched.sim.errors import ConfigError

    assert scenario_names("validation") == [s.name for s in scenarios_in("validation")]
    assert scenario_names(scenario="itp_c06_pai_busy") == ["itp_c06_pai_busy"]
    for bad in ({"split": "nope"}, {"scenario": "nope"}, {}):
        with pytest.raises(ConfigError):
            scenario_names(**bad)
