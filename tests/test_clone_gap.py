"""scripts/clone_gap.py: how a clone's choice is compared with its teacher's label."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import script_module

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "clone_gap.py"


def _module() -> Any:
    return script_module("clone_gap.py")


def test_label_outcomes_tell_jobs_levels_passes_and_moves_apart() -> None:
    out = _module().label_outcome
    P, L = 1 + 3 * 2, 2  # three window slots of two levels each, then moves
    assert out(0, 0, P, L) == "same_pass"
    assert out(3, 3, P, L) == "same_claim"
    assert out(3, 4, P, L) == "claim_other_level"  # slot 1, levels 0 and 1
    assert out(3, 5, P, L) == "claim_other_job"  # slot 1 against slot 2
    assert out(P, P, P, L) == "same_move"
    assert out(P, 0, P, L) == "move->pass"
    assert out(0, 1, P, L) == "pass->claim"


def test_an_unknown_move_mode_is_one_line_and_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--scenario", "itp_c06_pai_busy", "--moves", "some"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--moves 'some' is not one of" in lines[0], proc.stderr


def test_the_total_over_runs_adds_every_count_the_move_ranks_included() -> None:
    mod = _module()
    a, b, total = mod.Probe(), mod.Probe(), mod.Probe()
    a.labels["same_move"] += 2
    a.move_rank[("rank 0", "move", "move")] += 2
    b.labels["move->pass"] += 1
    b.move_rank[("rank 0", "move", "pass")] += 1
    b.levels["network"][3] += 1
    total.add(a)
    total.add(b)
    assert total.labels == {"same_move": 2, "move->pass": 1}
    assert total.levels["network"] == {3: 1}
    line = [ln for ln in total.lines() if "rank 0" in ln]
    assert line == [
        "agents whose best move saves more than the teacher's gain, rank 0: 3; the teacher "
        "moves in 3, the network in 2, both in 2"
    ]
