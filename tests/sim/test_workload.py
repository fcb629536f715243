"""Workload construction: dtype coercion, defaults, validation errors, subset and shift."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.errors import TraceError
from hetsched.sim.workload import Workload


def _fields(**over: Any) -> dict[str, Any]:
    """Keyword arguments of a valid three-job workload, with ``over`` replacing fields."""
    kw: dict[str, Any] = dict(
        name="w",
        job_id=["a", "b", "c"],
        arrival=[10.0, 20.0, 20.0],
        model=[0, 1, 0],
        batch_size=[32, 64, 32],
        work=[100.0, 50.0, 10.0],
        req_gpus=[1, 2, 4],
        min_gpus=[1, 1, 4],
        max_gpus=[1, 4, 4],
        cpu_per_gpu=[4.0, 4.0, 2.0],
        mem_per_gpu=[16.0, 8.0, 8.0],
    )
    kw.update(over)
    return kw


def test_valid_workload_gets_dtypes_and_defaults() -> None:
    wl = Workload(**_fields())
    assert wl.num_jobs == 3
    assert wl.arrival.dtype == np.float64 and wl.req_gpus.dtype == np.int64
    assert wl.job_id.tolist() == ["a", "b", "c"]
    np.testing.assert_array_equal(wl.queue, [0, 0, 0])
    assert wl.allowed_types.shape == (3, len(GPU_TYPE_NAMES)) and wl.allowed_types.all()
    assert np.isnan(wl.trace_duration).all() and wl.trace_duration.shape == (3,)


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"work": [100.0, 50.0]}, "field work has 2 rows, want 3"),
        ({"allowed_types": np.ones((3, 1), dtype=bool)}, "allowed_types must be (J,"),
        (
            {"arrival": [10.0, -1.0, 20.0]},
            "job 'b' (row 1) has arrival=-1.0 (must be finite and >= 0 seconds)",
        ),
        ({"arrival": [10.0, np.nan, 20.0]}, "job 'b' (row 1) has arrival=nan (must be finite"),
        ({"arrival": [10.0, 30.0, 20.0]}, "arrivals are not sorted at job 'c' (row 2)"),
        ({"work": [100.0, 0.0, 10.0]}, "job 'b' (row 1) has work=0.0 (must be finite and > 0)"),
        ({"work": [100.0, 50.0, np.inf]}, "job 'c' (row 2) has work=inf (must be finite and > 0)"),
        ({"min_gpus": [0, 1, 4]}, "job 'a' (row 0) has min_gpus=0 (must be >= 1)"),
        ({"req_gpus": [1, 2, 3]}, "job 'c' (row 2) has req_gpus=3 (must be >= min_gpus=4)"),
        ({"max_gpus": [1, 1, 4]}, "job 'b' (row 1) has max_gpus=1 (must be >= req_gpus=2)"),
        (
            {"cpu_per_gpu": [4.0, 0.0, 2.0]},
            "job 'b' (row 1) has cpu_per_gpu=0.0 (must be finite and > 0)",
        ),
        (
            {"mem_per_gpu": [16.0, 8.0, -8.0]},
            "job 'c' (row 2) has mem_per_gpu=-8.0 (must be finite and > 0)",
        ),
        ({"model": [0, -1, 0]}, "job 'b' (row 1) has model=-1 (must be a model index >= 0)"),
        ({"queue": [0, 1, 0]}, "job 'b' (row 1) has queue=1 (must be in 0..0: len(queue_names)=1)"),
        (
            {"queue": [0, 0, -1]},
            "job 'c' (row 2) has queue=-1 (must be in 0..0: len(queue_names)=1)",
        ),
        (
            {"allowed_types": np.eye(3, len(GPU_TYPE_NAMES), dtype=bool) * [[1], [0], [1]]},
            "job 'b' (row 1) may run on no GPU type (its allowed_types row is all False)",
        ),
    ],
)
def test_invalid_workload_names_job_and_field(over: dict[str, Any], needle: str) -> None:
    with pytest.raises(TraceError) as info:
        Workload(**_fields(**over))
    msg = str(info.value)
    assert msg.startswith("workload 'w'")
    assert needle in msg


def test_empty_workload_says_how_to_fix() -> None:
    empty = {k: [] for k in _fields() if k != "name"}
    with pytest.raises(TraceError, match="has no jobs; check the trace window and filters"):
        Workload(name="w", **empty)


def test_subset_and_shifted_keep_every_field_aligned() -> None:
    wl = Workload(**_fields(queue=[0, 1, 1], queue_names=("x", "y")))
    sub = wl.subset(np.array([0, 2]), name="w2")
    assert sub.name == "w2" and sub.queue_names == ("x", "y")
    assert sub.job_id.tolist() == ["a", "c"]
    np.testing.assert_array_equal(sub.queue, [0, 1])
    np.testing.assert_array_equal(sub.work, [100.0, 10.0])
    assert sub.allowed_types.shape == (2, len(GPU_TYPE_NAMES))
    shifted = wl.subset(slice(1, None)).shifted()
    np.testing.assert_array_equal(shifted.arrival, [0.0, 0.0])
    np.testing.assert_array_equal(wl.arrival, [10.0, 20.0, 20.0])  # the original is unchanged
