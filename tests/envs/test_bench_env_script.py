"""scripts/bench_env.py and scripts/bench_reset.py run end to end and report what their docstrings
promise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import script_module

ROOT = Path(__file__).resolve().parents[2]


def _bench(tmp_path: Path, *args: str) -> dict[str, Any]:
    """Run ``scripts/bench_env.py --clusters sia_64 ARGS`` and return its JSON figures."""
    out = tmp_path / "bench.json"
    cmd = [sys.executable, "scripts/bench_env.py", "--clusters", "sia_64", *args, "--out", str(out)]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True, timeout=300)
    res: dict[str, Any] = json.loads(out.read_text())
    return res


def test_bench_env_reports_speed_and_breakdown(tmp_path: Path) -> None:
    res = _bench(tmp_path, "--steps", "40", "--jobs", "30", "--breakdown")
    par, bd = res["parallel_sia_64"], res["breakdown_sia_64"]
    assert par["steps"] == 40 and par["ma_steps_per_s"] > 0 and 0 < par["sim_share"] < 1
    assert res["central_sia_64"]["central_steps_per_s"] > 0
    assert res["kernels"].startswith(("numba ", "numpy"))
    # Every step is timed once; the parts it calls take less time than the step itself.
    assert bd["ClusterParallelEnv.step_calls"] == 1.0
    step_us = bd["ClusterParallelEnv.step_us"]
    # The engine round: compiled (hetsched.envs.kernels_engine) with numba, else the engine's.
    engine_us = bd.get("EngineRound.advance_us", bd.get("Simulator.advance_us"))
    assert 0 < bd["FeatureBuilder.masks_us"] < step_us and engine_us and 0 < engine_us < step_us


def test_compare_fingerprint_ignores_only_the_named_info_keys() -> None:
    mod = script_module("bench_env_compare.py")

    def fp(*ignore: str) -> str:
        cmd = [sys.executable, "-c", mod.FINGERPRINT, "6", *ignore]
        return subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout

    base = fp()
    assert fp("no_such_key") == base  # nothing to leave out: same hash
    assert fp("reward_progress") != base  # the key is left out of every info
    assert mod._parse_speed("parallel_sia_64: steps=3, ma_steps_per_cpu_s=123.5, x=1") == 123.5


def test_breakdown_leaves_episode_resets_out(tmp_path: Path) -> None:
    # Tiny episodes, so many resets: a reset starts a round without an engine advance, while
    # inside steps every round starts right after one. So the counts match only if the
    # breakdown leaves the resets out.
    res = _bench(tmp_path, "--steps", "120", "--jobs", "15", "--breakdown")
    assert res["parallel_sia_64"]["episodes_finished"] >= 5
    bd = res["breakdown_sia_64"]
    advances = bd.get("EngineRound.advance_calls", bd.get("Simulator.advance_calls"))
    assert bd["EnvCore._start_round_calls"] == advances and advances > 0


def test_numpy_flag_selects_the_reference_path(tmp_path: Path) -> None:
    res = _bench(tmp_path, "--steps", "20", "--jobs", "20", "--numpy")
    assert res["kernels"] == "numpy" and res["parallel_sia_64"]["steps"] == 20


def test_bench_reset_reports_every_preset_asked(tmp_path: Path) -> None:
    out = tmp_path / "reset.json"
    cmd = [sys.executable, "scripts/bench_reset.py", "--presets", "gavel_synthetic", "csv",
           "--resets", "2", "--out", str(out)]  # fmt: skip
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True, timeout=300)
    res = json.loads(out.read_text())["work"]
    g = res["gavel_synthetic"]
    assert g["jobs"] > 0 and 0 < g["reset_ms_median"] <= g["reset_ms_max"]
    assert "error" in res["csv"]  # the csv preset needs a path: listed, not fatal


@pytest.mark.slow
def test_bench_reset_pairs_against_a_base_tree(tmp_path: Path) -> None:
    out = tmp_path / "reset.json"
    cmd = [sys.executable, "scripts/bench_reset.py", "--presets", "itp", "--resets", "2",
           "--pairs", "2", "--base-dir", str(ROOT), "--out", str(out)]  # fmt: skip
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True, timeout=600)
    res = json.loads(out.read_text())
    assert len(res["base"]) == len(res["work"]) == 2 and res["ratio_median"]["itp"] > 0
