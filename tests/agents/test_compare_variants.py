"""scripts/compare_variants.py: paired comparisons of scheduler=maifs variants, with a cache."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cv() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "compare_variants", ROOT / "scripts/compare_variants.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["compare_variants"] = mod  # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return mod


SETS = (("sia_64", 1250, False), ("sia_64", 3750, False))


def _fake_runs(cv: ModuleType, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Stub the simulation: the baseline gets 1 h / 10 h everywhere; ``shipped`` 0.8 / 10;
    a variant whose settings set ``wake="all"`` 0.5 / 12 on seed 1 and 0.9 / 10 on seed 2.
    Returns the list of tasks actually simulated (cache misses)."""
    ran: list[Any] = []

    def fake(task: Any) -> dict[str, float]:
        ran.append(task)
        if task.settings is None:
            return {"jct_h": 1.0, "mk_h": 10.0}
        if task.settings["wake"] == "all":
            return {"jct_h": 0.5, "mk_h": 12.0} if task.seed == 1 else {"jct_h": 0.9, "mk_h": 10.0}
        return {"jct_h": 0.8, "mk_h": 10.0}

    monkeypatch.setattr(cv, "run_task", fake)
    return ran


def test_resolve_variant_starts_from_the_preset_and_refuses_unknown_settings(
    cv: ModuleType,
) -> None:
    base = cv.resolve_variant({})
    assert base["wake"] == "starve" and base["starve_guard_s"] == 21600
    assert Path(base["checkpoint"]).name == "maifs_default.pt" and len(base["ensemble"]) == 4
    v = cv.resolve_variant({"wake": "all", "ensemble": [Path("a.pt")]})
    assert v["wake"] == "all" and v["ensemble"] == ["a.pt"] and v["preempt_ratio"] == 2.5
    with pytest.raises(ValueError, match=r"unknown variant setting\(s\) \['nope'\]"):
        cv.resolve_variant({"nope": 1})


def test_cache_keys_follow_the_policy_not_its_display_name(cv: ModuleType) -> None:
    s = cv.resolve_variant({})
    key = cv.Task("shipped", s, SETS[0], 1).key()
    assert cv.Task("E7b", dict(s), SETS[0], 1).key() == key  # same policy, another name
    assert cv.Task("shipped", cv.resolve_variant({"wake": "all"}), SETS[0], 1).key() != key
    assert cv.Task("shipped", s, SETS[1], 1).key() != key
    assert cv.Task("shipped", s, SETS[0], 2).key() != key
    assert cv.Task("sia", None, SETS[0], 1).key() != cv.Task("gavel", None, SETS[0], 1).key()


def test_cache_keys_leave_out_settings_at_their_schema_default(cv: ModuleType) -> None:
    s = cv.resolve_variant({})
    key = cv.Task("shipped", s, SETS[0], 1).key()
    # A switch at its default (as a newly added one is) does not change the key ...
    without = {k: v for k, v in s.items() if k != "eft_elastic"}
    assert s["eft_elastic"] is False and cv.Task("shipped", without, SETS[0], 1).key() == key
    # ... set away from it, it does; and 0 is not mistaken for a default False or 0.0.
    assert cv.Task("shipped", {**s, "eft_elastic": True}, SETS[0], 1).key() != key
    assert cv.Task("shipped", {**s, "starve_first": 0}, SETS[0], 1).key() != key


def test_scores_margin_rule_and_report(cv: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_runs(cv, monkeypatch)
    res = cv.compare({"W": {"wake": "all"}}, SETS, [1, 2], cache=None)
    sc = cv.seed_scores(res, "sia")
    assert sc["sia"][1].score == pytest.approx(2.0)
    assert sc["shipped"][1].score == pytest.approx(1.8) and sc["shipped"][1].at_or_below == 2
    assert sc["W"][1].score == pytest.approx(0.5 + 1.2) and sc["W"][1].at_or_below == 0
    assert sc["W"][2].score == pytest.approx(1.9)
    text = cv.report(res, "sia", margin=0.01, rows=True)
    assert "| W | 1.70000 (0/2, -0.10000) | 1.90000 (2/2, +0.10000) |" in text
    assert "- W: no" in text  # below shipped on seed 1 only
    assert "- W, seed 2, sia_64 1250 False: +0.100 (0.90 / 10.0 against 0.80 / 10.0" in text

    # Lower than shipped on every seed by more than the margin: the rule says yes.
    def better(t: Any) -> dict[str, float]:
        if t.settings is None:
            return {"jct_h": 1.0, "mk_h": 10.0}
        return {"jct_h": 0.5 if t.settings["wake"] == "all" else 0.8, "mk_h": 10.0}

    monkeypatch.setattr(cv, "run_task", better)
    res = cv.compare({"W": {"wake": "all"}}, SETS, [1, 2], cache=None)
    assert "- W: yes" in cv.report(res, "sia", margin=0.01)
    assert "- W: no" in cv.report(res, "sia", margin=0.5)  # 0.3 below: not by 0.5


def test_results_are_cached_and_reused(
    cv: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ran = _fake_runs(cv, monkeypatch)
    first = cv.compare({"W": {"wake": "all"}}, SETS, [1], cache=tmp_path)
    assert len(ran) == 6 and len(list(tmp_path.glob("*.json"))) == 6
    rec = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert {"jct_h", "mk_h", "name", "set", "seed"} <= set(rec)
    again = cv.compare({"W2": {"wake": "all"}}, SETS, [1], cache=tmp_path)  # renamed: cached
    assert len(ran) == 6 and again["W2"] == first["W"]
    cv.compare({"W": {"wake": "all"}}, SETS, [1, 2], cache=tmp_path)  # a new seed only
    assert len(ran) == 12


def test_main_prints_the_report_and_checks_its_arguments(
    cv: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ran = _fake_runs(cv, monkeypatch)
    out = tmp_path / "r.md"
    argv = ["--variants", '{"W": {"wake": "all"}}', "--clusters", "sia_64", "--seeds", "1"]
    argv += ["--cache", str(tmp_path / "c"), "--margin", "0.01", "--out", str(out)]
    cv.main(argv)
    n = sum(s[0] == "sia_64" for s in cv.SET_GROUPS["shifted"])  # its sia_64 stretches
    assert len(ran) == 3 * n  # shipped, W and the baseline on each
    assert "| W | " in capsys.readouterr().out and "- W: yes" in out.read_text()
    cv.main([*argv, "--fresh"])  # the cached results are run again
    assert len(ran) == 6 * n
    variants = tmp_path / "v.json"
    variants.write_text('{"W": {"wake": "all"}}')
    cv.main([*argv[2:], "--variants", f"@{variants}"])  # from a file, all cached
    assert len(ran) == 6 * n
    bad = {
        "seeds 100 and up are the test seeds": ["--seeds", "100"],
        "names the shipped configuration": ["--variants", '{"shipped": {}}'],
        "names the baseline": ["--variants", '{"sia": {}}'],
        "not valid JSON": ["--variants", "{"],
        "give an object of objects": ["--variants", '{"W": 1}'],
        "unknown variant setting": ["--variants", '{"W": {"nope": 1}}'],
        "no set of --sets shifted runs on it": ["--clusters", "nowhere"],
        "--jobs 0": ["--jobs", "0"],
    }
    for msg, extra in bad.items():
        with pytest.raises(SystemExit):
            cv.main([*argv, *extra])
        assert msg in capsys.readouterr().err, msg


def test_elastic_groups_hold_files_that_exist_and_never_the_test_file(cv: ModuleType) -> None:
    from hetsched.sim.traces import _SIA_INDEX_RANGE

    kind = {"sia_helios": "saturn", "sia_philly": "philly", "sia_newtrace": "newtrace"}
    kind["pollux_philly"] = "philly"  # Pollux's workloads count as Sia's Philly files (1..8)
    late = cv.SET_GROUPS["elastic_late"]
    for cluster, index, busiest, trace in cv.SET_GROUPS["elastic"] + late:
        assert cluster in ("sia_64", "pai_mixed")
        assert 2 <= index <= _SIA_INDEX_RANGE[kind[trace]] and busiest
    assert len(cv.SET_GROUPS["elastic"]) == 48 and len(late) == 16
    assert not set(cv.SET_GROUPS["elastic"]) & set(late)


def test_elastic_philly_sets_are_the_philly_windows_with_elastic_jobs(cv: ModuleType) -> None:
    import numpy as np

    from hetsched.envs.presets import resolve_cluster
    from hetsched.sim.throughput import default_throughput

    vm = sys.modules["validate_maifs"]
    sets = cv.SET_GROUPS["elastic_philly"]
    assert len(sets) == 17 and {v[3] for v in sets} == {vm.PHILLY_ELASTIC}
    rigid_sets = vm.VALIDATION_SETS + vm.LOADED_SETS
    assert [v[:2] for v in sets] == [v[:2] for v in rigid_sets]
    assert [v[2] for v in sets] == [v[2] if len(v) > 2 else True for v in rigid_sets]
    cl = resolve_cluster("sia_64")
    make = vm.workload_factory(sets[0])
    wl = make(throughput=default_throughput(), cluster=cl, rng=np.random.default_rng(0))
    rigid = vm.workload_factory(vm.VALIDATION_SETS[0])(
        throughput=default_throughput(), cluster=cl, rng=np.random.default_rng(0)
    )
    assert wl.num_jobs == 300 and (wl.min_gpus < wl.max_gpus).any()
    assert (rigid.min_gpus == rigid.max_gpus).all()
    np.testing.assert_array_equal(wl.job_id, rigid.job_id)  # the same jobs, made elastic
