"""scripts/bench_env.py runs end to end and reports what its docstring promises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_env_reports_speed_and_breakdown(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    cmd = [sys.executable, "scripts/bench_env.py", "--clusters", "sia_64", "--steps", "40"]
    cmd += ["--jobs", "30", "--breakdown", "--out", str(out)]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True, timeout=300)
    res = json.loads(out.read_text())
    par, bd = res["parallel_sia_64"], res["breakdown_sia_64"]
    assert par["steps"] == 40 and par["ma_steps_per_s"] > 0 and 0 < par["sim_share"] < 1
    assert res["central_sia_64"]["central_steps_per_s"] > 0
    # Every step is timed once; the parts it calls take less time than the step itself.
    assert bd["ClusterParallelEnv.step_calls"] == 1.0
    step_us = bd["ClusterParallelEnv.step_us"]
    assert 0 < bd["FeatureBuilder.masks_us"] < step_us and 0 < bd["Simulator.advance_us"] < step_us
