"""scripts/bar_check.py: the bar per scheduler and track from a benchmark's cells, and its errors."""

from __future__ import annotations

import csv
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
COLS = ("scenario", "scheduler", "track", "seed", "avg_jct_h", "makespan_h", "idle_fit_gpu_h")


def _script() -> dict[str, Any]:
    return runpy.run_path(str(ROOT / "scripts" / "bar_check.py"))


def _write(path: Path, rows: list[tuple[Any, ...]]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    with (path / "cells.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLS)
        w.writerows(rows)
    return path


def _refs(scn: str, seed: int, sia: float = 2.0, gavel: float = 4.0) -> list[tuple[Any, ...]]:
    """Sia (avg JCT ``sia``, makespan 10, no idle), Gavel, FIFO and LAS on one cell."""
    return [
        (scn, "sia", "exact", seed, sia, 10.0, 0.0),
        (scn, "gavel", "exact", seed, gavel, 12.0, 0.0),
        (scn, "fifo", "exact", seed, 5.0, 14.0, 1.0),
        (scn, "las", "exact", seed, 4.5, 13.0, 1.0),
    ]


def test_bar_rows_score_each_part(tmp_path: Path) -> None:
    rows = [*_refs("a", 0), *_refs("a", 1), *_refs("b", 0, sia=6.0, gavel=3.0)]
    # scenario a: below FIFO/LAS, makespan 10.4 <= 1.05 * 10, no idle
    rows += [("a", "net", "exact", 0, 1.0, 10.4, 0.0), ("a", "net", "exact", 1, 3.0, 10.4, 0.0)]
    # scenario b: worse than LAS (4.5), makespan 11 > 10.5, idle 2 > 2 * 0
    rows += [("b", "net", "exact", 0, 4.8, 11.0, 2.0)]
    rows += [("a", "net", "noisy", 0, 2.0, 9.0, 0.0)]
    bar_rows: Callable[..., list[dict[str, object]]] = _script()["bar_rows"]
    with (_write(tmp_path, rows) / "cells.csv").open() as f:
        table = bar_rows(list(csv.DictReader(f)), None)
    by = {(r["scheduler"], r["track"]): r for r in table}
    assert set(by) == {("net", "exact"), ("net", "noisy")}  # references are not scored
    exact = by[("net", "exact")]
    # ratios to the best of Sia and Gavel: 1/2, 3/2, 4.8/3; the IQM of three values weighs the
    # outer two by a quarter each: (0.125 + 1.5 + 0.4) / 1.5
    assert exact["iqm_vs_best"] == pytest.approx(1.35, abs=1e-3)
    assert exact["below_fifo_las"] == "1/2"
    assert exact["makespan_ok"] == "1/2"
    assert exact["idle_ok"] == "1/2"
    assert exact["idle_gpu_h"] == pytest.approx(2.0)
    assert by[("net", "noisy")]["makespan_ok"] == "1/1"


def test_missing_reference_or_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main: Callable[[list[str]], int] = _script()["main"]
    assert main([str(tmp_path / "nowhere")]) == 2
    assert "cells.csv not found" in capsys.readouterr().err
    rows = [r for r in _refs("a", 0) if r[1] != "gavel"] + [("a", "net", "exact", 0, 1.0, 9.0, 0.0)]
    assert main([str(_write(tmp_path / "run", rows))]) == 2
    err = capsys.readouterr().err.strip()
    assert "gavel" in err and len(err.splitlines()) == 1
    bad = _write(tmp_path / "bad", [("a", "sia", "exact", 0, "n/a", 10.0, 0.0)])
    assert main([str(bad)]) == 2
    assert "line 2: avg_jct_h='n/a' is not a number" in capsys.readouterr().err
    (tmp_path / "bad" / "cells.csv").write_text("scenario,scheduler\na,sia\n")
    assert main([str(bad)]) == 2
    assert "no column track" in capsys.readouterr().err


def test_failing_lists_each_missed_part_by_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [*_refs("a", 0), *_refs("b", 0, sia=6.0, gavel=3.0)]
    rows += [("a", "net", "exact", 0, 1.0, 10.4, 0.0), ("b", "net", "exact", 0, 4.8, 11.0, 2.0)]
    failing: Callable[..., list[dict[str, object]]] = _script()["failing_rows"]
    with (_write(tmp_path, rows) / "cells.csv").open() as f:
        table = failing(list(csv.DictReader(f)), None)
    assert [r["scenario"] for r in table] == ["b"]  # a meets every part
    (b,) = table
    assert b["fails"] == "below_fifo_las makespan idle"
    assert b["jct_vs_best"] == pytest.approx(1.6)  # 4.8 over Gavel's 3
    assert b["jct_vs_fifo_las"] == pytest.approx(4.8 / 4.5, abs=1e-3)
    assert b["makespan_vs_best"] == pytest.approx(1.1)
    assert (b["idle_gpu_h"], b["sia_idle_gpu_h"]) == (2.0, 0.0)
    main: Callable[[list[str]], int] = _script()["main"]
    assert main([str(tmp_path), "--failing", "--scheduler", "net"]) == 0
    out = capsys.readouterr().out
    assert "| net | exact | b |" in out and "| net | exact | a |" not in out
    assert main([str(tmp_path), "--scheduler", "nobody"]) == 2
    assert "no cells of scheduler nobody" in capsys.readouterr().err
    good = [*_refs("a", 0), ("a", "net", "exact", 0, 1.0, 10.4, 0.0)]
    assert main([str(_write(tmp_path / "good", good)), "--failing"]) == 0
    assert "every scored scenario meets the bar" in capsys.readouterr().out


def test_rigid_itp_makespan_averages_the_rigid_itp_windows_only(tmp_path: Path) -> None:
    rows = [*_refs("itp_x_light", 0), *_refs("itp_x_busy_elastic", 0), *_refs("a", 0)]
    rows += [
        ("itp_x_light", "net", "exact", 0, 1.0, 11.0, 0.0),  # 11 over Sia's 10
        ("itp_x_busy_elastic", "net", "exact", 0, 1.0, 30.0, 0.0),  # elastic: left out
        ("a", "net", "exact", 0, 1.0, 30.0, 0.0),  # not ITP: left out
        ("a", "other", "exact", 0, 1.0, 9.0, 0.0),  # no rigid ITP window
    ]
    bar_rows: Callable[..., list[dict[str, object]]] = _script()["bar_rows"]
    with (_write(tmp_path, rows) / "cells.csv").open() as f:
        by = {r["scheduler"]: r for r in bar_rows(list(csv.DictReader(f)), None)}
    assert by["net"]["makespan_rigid_itp"] == pytest.approx(1.1)
    assert by["other"]["makespan_rigid_itp"] == "-"
