"""scripts/makespan_job.py: one row per run, naming the job that finished last."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_makespan_job_prints_the_last_job_of_each_run() -> None:
    script = ROOT / "scripts" / "makespan_job.py"
    args = ["--scenario", "itp_c05_pai_busy", "--seed", "0", "--scheduler", "fifo", "las"]
    proc = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header[:4] == ["scenario", "seed", "scheduler", "makespan_h"]
    body = [dict(zip(header, (c.strip() for c in ln.strip("|").split("|")), strict=True))
            for ln in lines[2:]]  # fmt: skip
    assert [r["scheduler"] for r in body] == ["fifo", "las"]
    for r in body:
        assert r["scenario"] == "itp_c05_pai_busy" and r["seed"] == "0"
        # the last job finishes at the makespan: arrival + wait + run (hours after the first
        # arrival), and it cannot run faster than alone at its best
        end = float(r["arrival_h"]) + float(r["wait_h"]) + float(r["run_h"])
        assert abs(end - float(r["makespan_h"])) < 3e-3  # four figures rounded to 1e-3
        assert float(r["run_over_best"]) >= 1.0 - 1e-6
        assert r["gpu_type"] and int(r["restarts"]) >= 0
