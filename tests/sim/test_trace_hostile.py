"""Hostile trace inputs, met the way a user meets them: ``scripts/evaluate.py workload=csv``.

Each bad input ends in one ``error:`` line on stderr naming the file, line, field or value and
the fix, with exit status 2 and no traceback; inputs in other layouts (inter-arrival gaps, row
filters, a byte-order mark, model names in another case) load as documented.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import make_trace_tm, sia_like_cluster

from hetsched.sim.errors import TraceError
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.traces import csv_trace, csvio

ROOT = Path(__file__).resolve().parents[2]
HEADER = "job_id,submission_time,duration,num_gpu"


def evaluate(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    """Run the evaluate app on one seed with FIFO and no plots; return the finished process."""
    return subprocess.run(
        [
            sys.executable, str(ROOT / "scripts" / "evaluate.py"), "scheduler=fifo", "seed=0",
            "workload=csv", "progress=false", "output.plots=false", "output.tensorboard=false",
            f"hydra.run.dir={tmp_path / 'run'}", *overrides,
        ],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip


def rejected(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Assert a one-line error with exit status 2 that contains every needle; return it."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, proc.stderr[-2000:]
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def write(tmp_path: Path, name: str, body: str, encoding: str = "utf-8") -> Path:
    p = tmp_path / name
    p.write_text(body, encoding=encoding)
    return p


# ====================================================================== item 4: silent wrong inputs
def test_number_in_a_datetime_column_is_an_error(tmp_path: Path) -> None:
    p = write(tmp_path, "dates.csv", f"{HEADER}\na,2024-01-01 00:00:00,60,1\nb,5,60,1\n")
    rejected(evaluate(tmp_path, f"workload.path={p}"), "dates.csv", "line 3", "'5'", "date-time")


def test_cpu_request_beyond_every_node_is_an_error(tmp_path: Path) -> None:
    # sia_64's largest node has 256 cores and 1024 GiB.
    p = write(tmp_path, "cpu.csv", f"{HEADER},cpu_per_gpu\na,0,60,1,8\nb,1,60,2,300\n")
    rejected(
        evaluate(tmp_path, f"workload.path={p}"),
        "cpu.csv", "line 3", "'b'", "cpu_per_gpu = 300", "256", "columns={cpu_per_gpu: null}",
    )  # fmt: skip
    p = write(tmp_path, "mem.csv", f"{HEADER},mem_per_gpu\na,0,60,1,4096\n")
    kw: dict[str, Any] = dict(
        throughput=make_trace_tm(), cluster=sia_like_cluster(), rng=np.random.default_rng(0)
    )
    with pytest.raises(TraceError, match=r"mem.csv: line 2: job 'a' requests mem_per_gpu = 4096"):
        csv_trace(p, **kw)


def test_huge_gpu_count_is_an_error_not_an_overflow(tmp_path: Path) -> None:
    p = write(tmp_path, "huge.csv", f"{HEADER}\na,0,60,1\nb,1,60,1e20\n")
    rejected(evaluate(tmp_path, f"workload.path={p}"), "huge.csv", "line 3", "'1e20'", "too large")


def test_duplicate_header_column_is_an_error(tmp_path: Path) -> None:
    p = write(tmp_path, "dup.csv", f"{HEADER},duration\na,0,60,1,99\n")
    rejected(evaluate(tmp_path, f"workload.path={p}"), "dup.csv", "'duration' appears twice")


# ====================================================================== item 5: other layouts
def test_unsorted_arrivals_warn_by_default_and_can_be_an_error(
    trace_tm: ThroughputModel, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    p = write(
        tmp_path, "gaps.csv", "job_id,interval,duration,num_gpu\na,0,60,1\nb,30,60,1\nc,5,60,1\n"
    )
    mapped = "workload.columns={submission_time: interval}"
    rejected(
        evaluate(tmp_path, f"workload.path={p}", mapped, "workload.unsorted=error"),
        "gaps.csv", "line 4", "columns.interarrival",
    )  # fmt: skip
    kw: dict[str, Any] = dict(
        throughput=trace_tm, cluster=sia_like_cluster(), rng=np.random.default_rng(0)
    )
    with caplog.at_level("WARNING", logger="hetsched.sim.traces"):
        csv_trace(p, columns={"submission_time": "interval"}, **kw)
    assert "not sorted" in caplog.text and "line 4" in caplog.text


def test_interarrival_column_is_cumulated(trace_tm: ThroughputModel, tmp_path: Path) -> None:
    p = write(
        tmp_path, "gaps.csv", "job_id,interval,duration,num_gpu\na,10,60,1\nb,30,60,1\nc,5,60,1\n"
    )
    kw: dict[str, Any] = dict(
        throughput=trace_tm, cluster=sia_like_cluster(), rng=np.random.default_rng(0)
    )
    wl = csv_trace(p, columns={"interarrival": "interval"}, shift=False, **kw)
    np.testing.assert_array_equal(wl.arrival, [10, 40, 45])
    assert list(wl.job_id) == ["a", "b", "c"]
    wl = csv_trace(p, columns={"interarrival": "interval"}, time_unit="min", **kw)
    np.testing.assert_array_equal(wl.arrival, [0, 1800, 2100])
    with pytest.raises(TraceError, match="either submission_time"):
        csv_trace(p, columns={"interarrival": "interval", "submission_time": "x"}, **kw)
    neg = write(tmp_path, "neg.csv", "job_id,interval,duration,num_gpu\na,10,60,1\nb,-3,60,1\n")
    with pytest.raises(TraceError, match=r"line 3: interval = '-3' is a negative gap"):
        csv_trace(neg, columns={"interarrival": "interval"}, **kw)


def test_row_filters_are_options_and_counted(
    trace_tm: ThroughputModel, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    body = f"{HEADER},status\na,0,60,1,Pass\nb,1,60,0,Pass\nc,2,60,2,Failed\nd,3,60,1, Killed\n"
    p = write(tmp_path, "jobs.csv", body)
    rejected(evaluate(tmp_path, f"workload.path={p}"), "line 3", "num_gpu = 0", "zero_gpus=skip")
    kw: dict[str, Any] = dict(
        throughput=trace_tm, cluster=sia_like_cluster(), rng=np.random.default_rng(0)
    )
    with caplog.at_level("INFO", logger="hetsched.sim.traces"):
        wl = csv_trace(p, zero_gpus="skip", exclude={"status": ["Failed", "Killed"]}, **kw)
    assert list(wl.job_id) == ["a"]
    assert "2 of 4 jobs with status in ['Failed', 'Killed'] skipped" in caplog.text
    assert "1 of 2 jobs with 0 GPUs (CPU-only) skipped" in caplog.text
    kept = csv_trace(p, include={"status": "Pass"}, zero_gpus="skip", **kw)
    assert list(kept.job_id) == ["a"]
    with pytest.raises(TraceError, match="missing column 'state'"):
        csv_trace(p, exclude={"state": ["Failed"]}, **kw)
    with pytest.raises(TraceError, match="unknown trace option"):
        csv_trace(p, drop_failed=True, **kw)


def test_user_csv_is_named_by_its_stem_and_models_match_any_case(tmp_path: Path) -> None:
    body = f"{HEADER},model\na,0,600,1,CIFAR10\nb,5,600,2,Bert\n"
    p = write(tmp_path, "my_cluster_trace.csv", body)
    proc = evaluate(tmp_path, f"workload.path={p}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(tmp_path / "run" / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["workload"] for r in rows} == {"my_cluster_trace"}


# ====================================================================== item 7: the reader
def test_blocked_reader_matches_a_single_block(
    trace_tm: ThroughputModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [f"j{i},{i * 7 % 50},{60 + i},{1 + i % 3},q{i % 2},é{i % 3}" for i in range(40)]
    p = write(tmp_path, "blocks.csv", f"{HEADER},queue,note\n" + "\n\n".join(rows) + "\n")
    kw: dict[str, Any] = dict(throughput=trace_tm, cluster=sia_like_cluster(), unsorted="sort")
    one = csv_trace(p, rng=np.random.default_rng(3), **kw)
    csvio._read_csv_cached.cache_clear()
    monkeypatch.setattr(csvio, "_BLOCK_ROWS", 7)
    tab = csvio.read_table(p)
    assert tab.num_rows == 40 and tab.lines[-1] == 80 and tab.strings("note")[4] == "é1"
    many = csv_trace(p, rng=np.random.default_rng(3), **kw)
    for f in ("job_id", "arrival", "work", "req_gpus", "queue", "model"):
        np.testing.assert_array_equal(getattr(one, f), getattr(many, f))
    csvio._read_csv_cached.cache_clear()


# ====================================================================== item 8: confusing errors
def test_bom_with_quoted_header_reads(trace_tm: ThroughputModel, tmp_path: Path) -> None:
    body = '"job_id","submission_time","duration","num_gpu"\r\n"a","0","60","1"\r\n'
    p = write(tmp_path, "bom.csv", body, encoding="utf-8-sig")
    assert p.read_bytes().startswith(b'\xef\xbb\xbf"job_id"')
    kw: dict[str, Any] = dict(
        throughput=trace_tm, cluster=sia_like_cluster(), rng=np.random.default_rng(0)
    )
    wl = csv_trace(p, **kw)
    assert list(wl.job_id) == ["a"]


def test_csv_workload_without_a_path_names_the_field(tmp_path: Path) -> None:
    rejected(evaluate(tmp_path), "workload.path=")
