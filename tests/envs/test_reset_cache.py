"""Traces are parsed once per process: env resets reuse the selected jobs
(:mod:`hetsched.sim.tracecache`) and still give exactly the workloads of an uncached load."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from hetsched.envs import ClusterParallelEnv
from hetsched.envs.presets import resolve_cluster
from hetsched.sim import tracecache, traces
from hetsched.sim.throughput import default_throughput
from hetsched.sim.workload import Workload

TM = default_throughput()


def _same(a: Workload, b: Workload) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=f.name)
        else:
            assert x == y, f.name


@pytest.mark.parametrize(
    ("loader", "kw"),
    [
        (traces.philly, {"num_jobs": 120, "model_scheme": "gavel_uniform"}),
        (
            traces.alibaba,
            {"num_jobs": 150, "absent_types": "relax", "model_scheme": "gavel_uniform"},
        ),
    ],
)
def test_a_cached_load_equals_an_uncached_one(loader: object, kw: dict[str, object]) -> None:
    cl = resolve_cluster("sia_64")

    def load(seed: int) -> Workload:
        out = loader(throughput=TM, cluster=cl, rng=np.random.default_rng(seed), **kw)  # type: ignore[operator]
        assert isinstance(out, Workload)
        return out

    tracecache.clear()
    cold = load(1)
    hits = tracecache.stats["hits"]
    warm = load(1)
    assert tracecache.stats["hits"] == hits + 1  # answered from the cache
    _same(cold, warm)
    other = load(2)  # another seed: the same jobs, other model draws
    np.testing.assert_array_equal(other.job_id, cold.job_id)
    assert not np.array_equal(other.model, cold.model)
    # A workload's arrays are its own: writing into one leaves the cache and the next load alone.
    warm.req_gpus[:] = 99
    warm.work[:] = -1.0
    _same(cold, load(1))


def test_a_changed_file_is_read_again(tmp_path: Path) -> None:
    cl = resolve_cluster("sia_64")
    p = tmp_path / "jobs.csv"
    rows = ["job_id,submission_time,duration,num_gpu"]
    rows += [f"j{i},{60 * i},{600 + i},{1 + i % 2}" for i in range(6)]
    p.write_text("\n".join(rows) + "\n")
    tracecache.clear()
    first = traces.csv_trace(p, throughput=TM, cluster=cl, rng=np.random.default_rng(0))
    assert first.num_jobs == 6
    p.write_text("\n".join([*rows, "j6,400,700,4"]) + "\n")
    second = traces.csv_trace(p, throughput=TM, cluster=cl, rng=np.random.default_rng(0))
    assert second.num_jobs == 7 and int(second.req_gpus[-1]) == 4


def test_env_resets_parse_the_trace_once() -> None:
    tracecache.clear()
    env = ClusterParallelEnv(
        "sia_64",
        workload="philly",
        workload_kwargs={"num_jobs": 30, "model_scheme": "gavel_uniform"},
        seed=0,
    )
    before = dict(tracecache.stats)
    models = []
    for s in range(4):
        env.reset(seed=s)
        assert env.core.wl is not None
        models.append(env.core.wl.model.copy())
    assert tracecache.stats["misses"] == before["misses"] + 1  # parsed at the first reset only
    assert tracecache.stats["hits"] >= before["hits"] + 3  # every later reset (another window)
    assert any(not np.array_equal(models[0], m) for m in models[1:])  # seeds still differ


def test_arguments_that_cannot_be_compared_are_not_cached() -> None:
    calls = []

    @tracecache.memoised
    def loader(x: object, *, throughput: object, cluster: object, rng: object) -> int:
        calls.append(x)
        return 0

    loader(object(), throughput=None, cluster=None, rng=None)
    loader(object(), throughput=None, cluster=None, rng=None)
    assert len(calls) == 2


def test_fixed_workloads_are_copied_from_the_cache() -> None:
    # The Sia/Pollux loader does not use rng: its whole workload is kept; each call gets a copy.
    cl = resolve_cluster("sia_64")
    tracecache.clear()
    first = traces.pollux_philly(
        throughput=TM, cluster=cl, rng=np.random.default_rng(0), max_gpus_policy="cap"
    )
    hits = tracecache.stats["hits"]
    first.work[:] = 1.0  # the caller's own arrays
    again = traces.pollux_philly(
        throughput=TM, cluster=cl, rng=np.random.default_rng(5), max_gpus_policy="cap"
    )
    assert tracecache.stats["hits"] == hits + 1
    tracecache.clear()
    _same(
        again,
        traces.pollux_philly(
            throughput=TM, cluster=cl, rng=np.random.default_rng(0), max_gpus_policy="cap"
        ),
    )


def test_relative_paths_resolve_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cl = resolve_cluster("sia_64")
    for sub, n in (("a", 3), ("b", 5)):
        (tmp_path / sub).mkdir()
        rows = ["job_id,submission_time,duration,num_gpu"] + [f"j{i},{i},600,1" for i in range(n)]
        (tmp_path / sub / "t.csv").write_text("\n".join(rows) + "\n")
    tracecache.clear()
    sizes = []
    for sub in ("a", "b"):
        monkeypatch.chdir(tmp_path / sub)
        wl = traces.csv_trace("t.csv", throughput=TM, cluster=cl, rng=np.random.default_rng(0))
        sizes.append(wl.num_jobs)
    assert sizes == [3, 5]  # the same argument, another file: not a cache hit


def test_another_window_reuses_the_prepared_trace_and_equals_an_uncached_load() -> None:
    cl = resolve_cluster("sia_64")

    def load(start: int) -> Workload:
        return traces.philly(
            throughput=TM, cluster=cl, rng=np.random.default_rng(7), start=start, num_jobs=40,
            busiest=False, model_scheme="gavel_uniform",
        )  # fmt: skip

    tracecache.clear()
    load(0)
    hits = tracecache.stats["hits"]
    cached = load(5000)
    assert tracecache.stats["hits"] == hits + 1  # the window changed; the trace was not re-read
    tracecache.clear()
    _same(cached, load(5000))
    assert not np.array_equal(cached.arrival, load(0).arrival)  # the window really moved
