"""scripts/validate_maifs.py: checkpoint scores relative to the teacher on validation windows."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hetsched.resources import CHECKPOINT_DIR, CONF_DIR

ROOT = Path(__file__).resolve().parents[2]


def _load() -> object:
    spec = importlib.util.spec_from_file_location(
        "validate_maifs", ROOT / "scripts/validate_maifs.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_teacher_scores_two_and_checkpoint_is_scored() -> None:
    mod = _load()
    ck = CHECKPOINT_DIR / "maifs_default.pt"
    scores, rows = mod.score_checkpoints([ck], sets=[("sia_64", 62000)], seeds=[50])  # type: ignore[attr-defined]
    assert scores["teacher"] == pytest.approx(2.0)
    assert set(scores) == {"teacher", str(ck)}
    assert 0.5 < scores[str(ck)] < 10.0
    assert {r["name"] for r in rows} == {"teacher", str(ck)}
    assert all(r["jct_h"] > 0 and r["mk_h"] > 0 for r in rows)


def test_quiet_set_runs_consecutive_jobs_not_the_busiest_window() -> None:
    mod = _load()
    ck = CHECKPOINT_DIR / "maifs_default.pt"
    kw = {"seeds": [50]}
    _, quiet = mod.score_checkpoints([ck], sets=[("pai_mixed", 20000, False)], **kw)  # type: ignore[attr-defined]
    _, busy = mod.score_checkpoints([ck], sets=[("pai_mixed", 20000)], **kw)  # type: ignore[attr-defined]
    assert {r["start"] for r in quiet} == {"20000 (quiet)"} and {r["start"] for r in busy} == {
        20000
    }
    q = {r["name"]: r["mk_h"] for r in quiet}
    b = {r["name"]: r["mk_h"] for r in busy}
    assert q["teacher"] != b["teacher"]  # a different stretch of the trace


def test_validation_sets_avoid_the_test_windows() -> None:
    mod = _load()
    sets = mod.VALIDATION_SETS  # type: ignore[attr-defined]
    starts = {s[1] for s in sets}
    # docs/results.md test windows: the default busiest window (search from 0), after 44000, from 30000.
    assert not starts & {0, 30000, 44000}
    # A quiet stretch is 300 consecutive jobs: it must not reach into test window t3 [30000, 30300).
    quiet = [s[1] for s in sets if len(s) > 2 and not s[2]]
    assert quiet and all(q + 300 <= 30000 or q >= 30300 for q in quiet)
    assert all(seed < 100 for seed in mod.SEEDS)  # type: ignore[attr-defined]


def _have_alibaba() -> bool:
    from hetsched.sim.errors import TraceError
    from hetsched.sim.paths import shared_data

    try:
        shared_data("traces/alibaba_v2023/openb_pod_list_gpuspec33.csv")
    except TraceError:
        return False
    return True


def test_alibaba_sets_sit_between_training_and_test_stretches() -> None:
    mod = _load()
    sets = mod.ALIBABA_SETS  # type: ignore[attr-defined]
    assert {s[3] for s in sets} == {"alibaba"} and not any(s[2] for s in sets)
    for s in sets:  # 300 consecutive pods: clear of agent=maifs_multitrace's training stretches
        lo, hi = s[1], s[1] + 300  # (3000-3299, 4200-4499) and of the busiest 500 (5609-6108)
        assert hi <= 5609 and all(hi <= a or lo >= a + 300 for a in (3000, 4200))


@pytest.mark.skipif(not _have_alibaba(), reason="needs the Alibaba trace in ../shared/data")
def test_alibaba_set_runs_the_named_trace() -> None:
    mod = _load()
    ck = CHECKPOINT_DIR / "maifs_default.pt"
    _, rows = mod.score_checkpoints([ck], sets=[("sia_64", 4700, False, "alibaba")], seeds=[50])  # type: ignore[attr-defined]
    assert {r["start"] for r in rows} == {"alibaba 4700"}
    assert all(r["jct_h"] > 0 and r["mk_h"] > 0 for r in rows)


def test_loaded_sets_share_no_job_with_the_test_windows() -> None:
    import numpy as np

    from hetsched.envs.presets import resolve_workload

    mod = _load()

    from hetsched.envs.presets import resolve_cluster
    from hetsched.sim.throughput import default_throughput

    tm, cl = default_throughput(), resolve_cluster("sia_64")

    def jobs(start: int, busiest: bool) -> set[str]:
        f = resolve_workload("philly", {"start": start, "num_jobs": 300, "busiest": busiest})
        assert callable(f)
        wl = f(throughput=tm, cluster=cl, rng=np.random.default_rng(0))
        return set(wl.job_id.tolist())

    tests = jobs(0, True) | jobs(44000, True) | jobs(30000, False)  # t1, t2, t3
    sets = mod.LOADED_SETS  # type: ignore[attr-defined]
    assert len(sets) == 6 and not any(s[2] for s in sets)
    for start in {s[1] for s in sets}:
        held = jobs(start, False)
        assert len(held) == 300 and not held & tests


def test_scan_sets_share_no_job_with_the_test_windows_or_the_other_sets() -> None:
    import numpy as np

    from hetsched.envs.presets import resolve_workload

    mod = _load()
    from hetsched.envs.presets import resolve_cluster
    from hetsched.sim.errors import TraceError
    from hetsched.sim.throughput import default_throughput

    tm = default_throughput()

    def jobs(start: int, busiest: bool, cluster: str = "pai_mixed") -> set[str]:
        f = resolve_workload("philly", {"start": start, "num_jobs": 300, "busiest": busiest})
        assert callable(f)
        wl = f(throughput=tm, cluster=resolve_cluster(cluster), rng=np.random.default_rng(0))
        return set(wl.job_id.tolist())

    taken = jobs(0, True) | jobs(44000, True) | jobs(30000, False)  # t1, t2, t3
    for s in mod.LOADED_SETS + mod.VALIDATION_SETS:  # type: ignore[attr-defined]
        if len(s) > 2 and not s[2]:
            taken |= jobs(s[1], False)
    sets = mod.SCAN_SETS  # type: ignore[attr-defined]
    assert len(sets) == 51 and not any(s[2] for s in sets)
    for start in sorted({s[1] for s in sets}):
        held = jobs(start, False)
        assert len(held) == 300 and not held & taken, start
        taken |= held  # the stretches do not overlap each other either
    # Every sia_64 stretch fits that cluster (the others raise a TraceError there).
    for start in mod.SCAN_STARTS["sia_64"]:  # type: ignore[attr-defined]
        assert len(jobs(start, False, "sia_64")) == 300
    # The shifted scan: halfway between, overlapping none of the above nor each other.
    shifted = mod.SHIFTED_SCAN_SETS  # type: ignore[attr-defined]
    starts = mod.SHIFTED_SCAN_STARTS  # type: ignore[attr-defined]
    assert len(shifted) == 62 and not any(s[2] for s in shifted)
    for start in starts["pai_mixed"]:
        held = jobs(start, False)
        assert len(held) == 300 and not held & taken, start
        taken |= held
    for start in starts["sia_64"]:
        assert len(jobs(start, False, "sia_64")) == 300
    for start in sorted(set(starts["pai_mixed"]) - set(starts["sia_64"])):
        with pytest.raises(TraceError):
            jobs(start, False, "sia_64")
    with pytest.raises(TraceError):  # the next start, 81,250, fits neither cluster
        jobs(81250, False)


def test_only_flags_exclude_each_other() -> None:
    import subprocess
    import sys

    ckpt = str(CHECKPOINT_DIR / "maifs_default.pt")  # exists, so the sets are checked next
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts/validate_maifs.py"), ckpt, "--only-scan"]
        + ["--only-scan-shifted"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "--only-scan and --only-scan-shifted exclude each other" in out.stderr


def test_elastic_sets_avoid_the_helios_test_file() -> None:
    mod = _load()
    sets = mod.ELASTIC_SETS  # type: ignore[attr-defined]
    assert {s[3] for s in sets} == {"sia_helios"} and {s[0] for s in sets} == {
        "sia_64",
        "pai_mixed",
    }
    assert 1 not in {s[1] for s in sets}  # file 1 is workload=sia_helios, the test trace
    assert mod.workload_kwargs("sia_helios", 3, True) == {"index": 3}  # type: ignore[attr-defined]
    assert mod.workload_kwargs("philly", 20000, False) == {  # type: ignore[attr-defined]
        "start": 20000,
        "num_jobs": 300,
        "busiest": False,
    }
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts/validate_maifs.py"), "x.pt", "--elastic-files", "1"],
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0 and "test trace" in out.stderr


def test_elastic_sets_of_other_traces_avoid_their_test_files() -> None:
    mod = _load()
    make = mod.elastic_validation_sets  # type: ignore[attr-defined]
    traces = list(mod.ELASTIC_TRACES)  # type: ignore[attr-defined]
    sets = make(traces, (2, 5))
    assert len(sets) == len(traces) * 2 * 2
    assert {s[3] for s in sets} == set(traces) and {s[1] for s in sets} == {2, 5}
    for t in traces:  # every elastic preset's default file is 1: its test trace
        assert mod.workload_kwargs(t, 2, True) == {"index": 2}  # type: ignore[attr-defined]
        cfg = (CONF_DIR / "workload" / f"{t}.yaml").read_text()
        assert "\nindex: 1\n" in cfg
    with pytest.raises(ValueError, match="test trace"):
        make(traces, (1, 2))
    with pytest.raises(ValueError, match="unknown elastic traces"):
        make(["philly"], (2,))


def test_at_or_below_counts_the_sets_where_both_metrics_are_no_worse() -> None:
    mod = _load()
    rows = [
        {"cluster": "c", "start": 1, "name": "base", "jct_h": 2.0, "mk_h": 10.0},
        {"cluster": "c", "start": 1, "name": "a", "jct_h": 1.0, "mk_h": 10.0},  # level: counts
        {"cluster": "c", "start": 2, "name": "base", "jct_h": 2.0, "mk_h": 10.0},
        {"cluster": "c", "start": 2, "name": "a", "jct_h": 1.0, "mk_h": 10.5},  # makespan worse
        {"cluster": "d", "start": 1, "name": "base", "jct_h": 2.0, "mk_h": 10.0},
        {"cluster": "d", "start": 1, "name": "a", "jct_h": 2.1, "mk_h": 9.0},  # JCT worse
    ]
    assert mod.at_or_below(rows, "base") == {"a": [True, False, False]}  # type: ignore[attr-defined]
    # Relative score: mean of jct/base + makespan/base over the three sets; base is 2.0.
    score = mod.score_vs(rows, "base")  # type: ignore[attr-defined]
    assert score["base"] == pytest.approx(2.0)
    assert score["a"] == pytest.approx(((0.5 + 1.0) + (0.5 + 1.05) + (1.05 + 0.9)) / 3)


def test_a_baseline_runs_beside_the_checkpoints() -> None:
    mod = _load()
    ck = CHECKPOINT_DIR / "maifs_default.pt"
    fifo = mod.baseline_factory("fifo")  # type: ignore[attr-defined]
    scores, rows = mod.score_checkpoints(  # type: ignore[attr-defined]
        [ck], sets=[("sia_64", 62000)], seeds=[50], baselines={"fifo": fifo}
    )
    assert set(scores) == {"teacher", str(ck), "fifo"}
    assert {r["name"] for r in rows} == {"teacher", str(ck), "fifo"}
    assert len(mod.at_or_below(rows, "fifo")[str(ck)]) == 1  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="--vs nonesuch: unknown scheduler preset 'nonesuch'"):
        mod.baseline_factory("nonesuch")  # type: ignore[attr-defined]


def test_preset_flag_reads_the_rules_scheduler_maifs_runs() -> None:
    mod = _load()
    # The rules of hetsched/conf/scheduler/maifs.yaml spelled out as flags (the preset of docs/results.md).
    import shlex

    flags = shlex.split(
        "--starve-guard-s 21600 --migrate-gain 0.1 --preempt-ratio 2.5 --preempt-max 3 "
        "--preempt-every-s 14400 "
        "--preempt-wait-s 7200 --fast-wait-s 0 --fast-max-s 10800 --window-order typed "
        "--keep-memory --elastic-gain 2.0 --grow-gain 0.05 --grow-factor 8 --grow-at-request "
        "--shrink-order restart_cost --shrink-fastest --critical-s 36000 --critical-wait-s 10800 "
        "--mem-hold-phi 0.4 --preempt-fast 2 --wake starve "
        "--critical-min-rel 0.25 --eft-gain 0.1 --critical-spread-cpu --critical-min-rel-s 86400 "
        "--critical-slow-eft --elastic-teacher --grow-new"
    )
    rules = mod.RULES  # type: ignore[attr-defined]
    _, spelled = mod.parse_args(["x.pt", *flags])  # type: ignore[attr-defined]
    _, preset = mod.parse_args(["x.pt", "--preset"])  # type: ignore[attr-defined]
    assert {k: getattr(preset, k) for k in rules} == {k: getattr(spelled, k) for k in rules}
    assert preset.preempt_fast == 2.0 and preset.window_order == "typed"
    # A rule flag given with --preset overrides the preset's value.
    _, over = mod.parse_args(["x.pt", "--preset", "--preempt-fast", "3"])  # type: ignore[attr-defined]
    assert over.preempt_fast == 3.0 and over.starve_guard_s == 21600.0
    # Without --preset the rules are off, and every rule of the schema has a flag.
    _, bare = mod.parse_args(["x.pt"])  # type: ignore[attr-defined]
    assert bare.preempt_fast is None and bare.starve_guard_s is None and bare.wake is None
    assert all(hasattr(bare, k) for k in rules) and "mem_hold_phi" in rules
    # The ablation switches: the preset's agents are the network, each with its own conflict rule.
    assert preset.actor == "network" and preset.conflict is None
    _, abl = mod.parse_args(["x.pt", "--preset", "--actor", "teacher", "--conflict", "none"])  # type: ignore[attr-defined]
    assert abl.actor == "teacher" and abl.conflict == "none" and abl.eft_gain == 0.1


class _BuiltError(Exception):
    """Raised by the fake runner once every policy factory has been called."""


def _scored_with(
    mod: object, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> dict[str, object]:
    """Run the script's ``main()`` on ``argv`` with the scoring stubbed out; return the policy
    keyword arguments it passed (and the ``sets`` under that key)."""
    seen: dict[str, object] = {}

    def fake_score(paths: object, *, policy_kwargs: dict[str, object], **kw: object) -> None:
        seen.update(policy_kwargs)
        seen["sets"] = kw["sets"]
        raise _BuiltError

    monkeypatch.setattr(mod, "score_checkpoints", fake_score)
    monkeypatch.setattr("sys.argv", ["validate_maifs.py", *argv])
    with pytest.raises(_BuiltError):
        mod.main()  # type: ignore[attr-defined]
    return seen


def test_checkpoints_are_scored_alone_unless_members_are_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``score_checkpoints`` runs a checkpoint file alone (also the default one, which
    ``scheduler=maifs`` runs as an ensemble) unless ``ensemble`` members are passed."""
    from hetsched.agents.network import MAIFSNet, PolicyEnsemble

    mod = _load()
    built: list[object] = []

    def fake_evaluate(policies: dict[str, object], **_: object) -> None:
        built.extend(f() for name, f in policies.items() if name != "teacher")  # type: ignore[operator]
        raise _BuiltError

    monkeypatch.setattr(mod, "evaluate", fake_evaluate)
    ck = CHECKPOINT_DIR / "maifs_default.pt"
    member = CHECKPOINT_DIR / "maifs_default_seed5.pt"
    with pytest.raises(_BuiltError):
        mod.score_checkpoints([ck], sets=[("sia_64", 62000)], seeds=[50])  # type: ignore[attr-defined]
    with pytest.raises(_BuiltError):
        mod.score_checkpoints(  # type: ignore[attr-defined]
            [ck], sets=[("sia_64", 62000)], seeds=[50], policy_kwargs={"ensemble": [member]}
        )
    alone, pair = built
    assert isinstance(alone.net, MAIFSNet)  # type: ignore[attr-defined]
    assert isinstance(pair.net, PolicyEnsemble) and len(pair.net) == 2  # type: ignore[attr-defined]


def test_members_flag_reaches_the_policies_and_missing_files_are_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = _load()
    ck = str(CHECKPOINT_DIR / "maifs_default.pt")
    member = str(CHECKPOINT_DIR / "maifs_default_seed5.pt")
    assert _scored_with(mod, monkeypatch, [ck, "--members", member])["ensemble"] == [member]
    # Without the flag each checkpoint is scored alone.
    assert _scored_with(mod, monkeypatch, [ck])["ensemble"] == []
    monkeypatch.setattr("sys.argv", ["validate_maifs.py", ck, "--members", "no_such.pt"])
    with pytest.raises(SystemExit):
        mod.main()  # type: ignore[attr-defined]
    assert "no such checkpoint file: no_such.pt" in capsys.readouterr().err


def test_evict_only_flag_reaches_the_policies_and_needs_members(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = _load()
    ck = str(CHECKPOINT_DIR / "maifs_default.pt")
    member = str(CHECKPOINT_DIR / "maifs_sjf.pt")
    seen = _scored_with(mod, monkeypatch, [ck, "--evict-only", "--members", member])
    assert seen["evict_only"] is True and seen["ensemble"] == [member]
    assert "evict_only" not in _scored_with(mod, monkeypatch, [ck, "--members", member])
    monkeypatch.setattr("sys.argv", ["validate_maifs.py", ck, "--evict-only"])
    with pytest.raises(SystemExit):
        mod.main()  # type: ignore[attr-defined]
    assert "--evict-only: the --members vote on placements" in capsys.readouterr().err


def test_evict_allowance_spare_critical_and_starve_first_flags_reach_the_policies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mod = _load()
    ck = str(CHECKPOINT_DIR / "maifs_default.pt")
    assert _scored_with(mod, monkeypatch, [ck, "--evict-allowance"])["evict_allowance"] is True
    assert _scored_with(mod, monkeypatch, [ck])["evict_allowance"] is False
    assert _scored_with(mod, monkeypatch, [ck, "--spare-critical"])["evict_critical"] is False
    assert _scored_with(mod, monkeypatch, [ck])["evict_critical"] is True
    assert _scored_with(mod, monkeypatch, [ck, "--starve-first"])["starve_first"] is True
    assert _scored_with(mod, monkeypatch, [ck])["starve_first"] is False
    assert _scored_with(mod, monkeypatch, [ck, "--critical-spread-cpu"])["critical_spread_cpu"]
    assert _scored_with(mod, monkeypatch, [ck, "--critical-slow-eft"])["critical_slow_eft"]
    assert _scored_with(mod, monkeypatch, [ck, "--eft-elastic"])["eft_elastic"]
    assert _scored_with(mod, monkeypatch, [ck])["eft_elastic"] is False
    assert _scored_with(mod, monkeypatch, [ck, "--grow-waiting"])["grow_waiting"]
    assert _scored_with(mod, monkeypatch, [ck, "--grow-new"])["grow_new"] is True
    assert _scored_with(mod, monkeypatch, [ck])["grow_new"] is False
    assert _scored_with(mod, monkeypatch, [ck, "--elastic-teacher"])["elastic_teacher"]
    assert _scored_with(mod, monkeypatch, [ck])["elastic_teacher"] is False
    seen = _scored_with(mod, monkeypatch, [ck, "--critical-min-rel-s", "86400"])
    assert seen["critical_min_rel_s"] == 86400.0


def test_clusters_and_rules_off_reach_the_scoring(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = _load()
    ck = str(CHECKPOINT_DIR / "maifs_default.pt")
    argv = ["validate_maifs.py", ck, "--preset", "--only-scan-shifted", "--clusters", "sia_64"]
    seen = _scored_with(
        mod, monkeypatch, [*argv[1:], "--rules-off", "preempt_ratio", "preempt_fast"]
    )
    sets = seen["sets"]
    assert sets and {s[0] for s in sets} == {"sia_64"}  # type: ignore[attr-defined]
    assert len(sets) == sum(s[0] == "sia_64" for s in mod.SHIFTED_SCAN_SETS)  # type: ignore[arg-type, attr-defined]
    assert seen["preempt_ratio"] is None and seen["preempt_fast"] is None
    assert seen["starve_guard_s"] == 21600.0  # the other rules stay as in the preset
    monkeypatch.setattr("sys.argv", [*argv[:-1], "nowhere"])
    with pytest.raises(SystemExit):
        mod.main()  # type: ignore[attr-defined]
    assert "--clusters nowhere: no chosen set runs on it" in capsys.readouterr().err
    monkeypatch.setattr("sys.argv", [*argv, "--rules-off", "keep_memory"])  # a switch
    with pytest.raises(SystemExit):
        mod.main()  # type: ignore[attr-defined]
    assert "invalid choice: 'keep_memory'" in capsys.readouterr().err
    assert "preempt_max" not in mod.OFFABLE and "keep_memory" not in mod.OFFABLE  # type: ignore[attr-defined]
