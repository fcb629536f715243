"""scripts/makespan_job.py: one row per run, naming the job that finished last."""

from __future__ import annotations

from conftest import script_table


def test_makespan_job_prints_the_last_job_of_each_run() -> None:
    args = ["--scenario", "itp_c05_pai_busy", "--seed", "0", "--scheduler", "fifo", "las"]
    body = script_table("makespan_job.py", args)
    assert list(body[0])[:4] == ["scenario", "seed", "scheduler", "makespan_h"]
    assert [r["scheduler"] for r in body] == ["fifo", "las"]
    for r in body:
        assert r["scenario"] == "itp_c05_pai_busy" and r["seed"] == "0"
        # the last job finishes at the makespan: arrival + wait + run (hours after the first
        # arrival), and it cannot run faster than alone at its best
        end = float(r["arrival_h"]) + float(r["wait_h"]) + float(r["run_h"])
        assert abs(end - float(r["makespan_h"])) < 3e-3  # four figures rounded to 1e-3
        assert float(r["run_over_best"]) >= 1.0 - 1e-6
        assert r["gpu_type"] and int(r["restarts"]) >= 0
