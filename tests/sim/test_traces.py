"""Trace loaders and generators (hetsched.sim.traces) and data paths (hetsched.sim.paths)."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import GAVEL_NAMES, gavel_like_cluster, make_trace_tm, sia_like_cluster

from hetsched.resources import CONF_DIR
from hetsched.sim import traces
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import TraceError
from hetsched.sim.paths import SHARED_DATA_ENV, shared_data, shared_data_root, shipped_data
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.traces import (
    alibaba,
    assign_models,
    check_fits,
    csv_trace,
    gavel_synthetic,
    itp,
    philly,
    pollux_philly,
    reference_work,
    sia_helios,
    sia_newtrace,
    sia_philly,
    sia_workload,
)
from hetsched.sim.workload import Workload

REPO = Path(__file__).resolve().parents[2]
CONF = CONF_DIR / "workload"


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def tidx(name: str) -> int:
    return GPU_TYPE_NAMES.index(name)


def mixed_cluster() -> Cluster:
    return Cluster.from_spec(
        "mixed",
        [
            {"gpu_type": "v100", "count": 4, "gpus": 4, "cpus": 32, "mem_gib": 244},
            {"gpu_type": "t4", "count": 4, "gpus": 4, "cpus": 48, "mem_gib": 192},
            {"gpu_type": "a100", "count": 2, "gpus": 8, "cpus": 256, "mem_gib": 1024},
        ],
    )


def have_shared(rel: str) -> bool:
    try:
        shared_data(rel)
    except TraceError:
        return False
    return True


def same(a: Workload, b: Workload) -> bool:
    return all(
        np.array_equal(getattr(a, f), getattr(b, f), equal_nan=getattr(a, f).dtype.kind == "f")
        for f in ("job_id", "arrival", "model", "work", "req_gpus", "min_gpus", "max_gpus",
                  "cpu_per_gpu", "mem_per_gpu", "queue", "allowed_types", "trace_duration")
    )  # fmt: skip


# ====================================================================== paths
def test_shipped_data_finds_gz_and_plain_files() -> None:
    p = shipped_data("traces/philly/philly_pollux.csv")
    assert p.name == "philly_pollux.csv.gz" and p.is_file()
    assert shipped_data("traces/itp/cluster10.csv").is_file()
    for lic in ("traces/itp/LICENSE", "traces/philly/LICENSE_philly-traces_CC-BY-4.0.txt",
                "traces/philly/LICENSE_adaptdl_master_Apache-2.0.txt",
                "traces/pollux/LICENSE_adaptdl_master_Apache-2.0.txt", "traces/SOURCES.md"):  # fmt: skip
        assert shipped_data(lic).is_file(), lic
    with pytest.raises(TraceError, match="not found"):
        shipped_data("traces/nope.csv")


def test_shared_data_env_and_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "x.csv.gz").write_bytes(gzip.compress(b"a\n1\n"))
    monkeypatch.setenv(SHARED_DATA_ENV, str(tmp_path))
    assert shared_data_root() == tmp_path
    assert shared_data("traces/x.csv") == tmp_path / "traces" / "x.csv.gz"
    with pytest.raises(TraceError, match=SHARED_DATA_ENV) as e:
        shared_data("traces/missing.csv")
    assert "workload.path=" in str(e.value)
    abs_file = tmp_path / "traces" / "x.csv.gz"
    assert shared_data(abs_file) == abs_file
    monkeypatch.delenv(SHARED_DATA_ENV)
    assert shared_data_root() == REPO.parent / "shared" / "data"


# ====================================================================== philly
def test_philly_default_window(trace_tm: ThroughputModel, sia_cluster: Cluster) -> None:
    wl = philly(throughput=trace_tm, cluster=sia_cluster, rng=rng())
    assert wl.name == "philly"
    assert 200 <= wl.num_jobs <= 500
    assert np.all(np.diff(wl.arrival) >= 0) and wl.arrival[0] == 0
    assert np.all(wl.work > 0) and np.all(np.isfinite(wl.work))
    assert wl.req_gpus.max() <= 24  # fits one GPU type's pool of the 64-GPU Sia cluster
    check_fits(wl, sia_cluster, trace_tm)
    assert np.array_equal(wl.min_gpus, wl.req_gpus) and np.array_equal(wl.max_gpus, wl.req_gpus)
    assert set(wl.queue_names) <= {"7f04ca", "b436b2", "11cb48", "6214e9"}
    assert wl.allowed_types.all()
    assert all(j.startswith("philly-") for j in wl.job_id)
    # Busiest: no other window of as many jobs has a shorter arrival span.
    assert wl.arrival[-1] < 3600


def test_philly_work_is_duration_times_reference_throughput(
    trace_tm: ThroughputModel, sia_cluster: Cluster
) -> None:
    wl = philly(throughput=trace_tm, cluster=sia_cluster, rng=rng())
    expect = wl.trace_duration * trace_tm.isolated(wl.model, tidx("v100"), wl.req_gpus)
    np.testing.assert_allclose(wl.work, expect)
    # Sia's GPU-time mapping (the cluster has non-Gavel types).
    gpu_h = wl.trace_duration * wl.req_gpus / 3600
    names = np.array(trace_tm.models)[wl.model]
    assert np.all(names[gpu_h < 1] == "cifar10")


def test_philly_full_trace(trace_tm: ThroughputModel, sia_cluster: Cluster) -> None:
    # Load time and memory are measured by scripts/bench_csv_memory.py, not asserted here.
    traces._read_csv_cached.cache_clear()
    wl = philly(
        throughput=trace_tm, cluster=sia_cluster, rng=rng(), num_jobs=None, busiest=False,
        max_gpus_policy="skip",
    )  # fmt: skip
    assert wl.num_jobs == 82247 - 76  # 76 jobs need more than 24 GPUs of one type
    assert np.all(np.diff(wl.arrival) >= 0)


def test_philly_vc_filter_and_unknown_vc(trace_tm: ThroughputModel, sia_cluster: Cluster) -> None:
    wl = philly(throughput=trace_tm, cluster=sia_cluster, rng=rng(), vc="103959", num_jobs=50)
    assert wl.queue_names == ("103959",) and wl.num_jobs == 50
    with pytest.raises(TraceError, match="unknown name"):
        philly(throughput=trace_tm, cluster=sia_cluster, rng=rng(), vc=["nope"])


def test_philly_big_jobs_error_cap_skip(trace_tm: ThroughputModel, sia_cluster: Cluster) -> None:
    kw: dict[str, Any] = dict(
        throughput=trace_tm, cluster=sia_cluster, num_jobs=None, busiest=False
    )
    with pytest.raises(TraceError) as e:
        philly(rng=rng(), **kw)
    msg = str(e.value)
    assert "philly_pollux.csv.gz" in msg and "GPUs" in msg and "64 GPUs" in msg
    assert "max_gpus_policy" in msg
    capped = philly(rng=rng(), max_gpus_policy="cap", **kw)
    assert capped.num_jobs == 82247 and capped.req_gpus.max() == 24


def test_philly_duration_limits(trace_tm: ThroughputModel, sia_cluster: Cluster) -> None:
    wl = philly(throughput=trace_tm, cluster=sia_cluster, rng=rng(), max_duration_s=3600)
    assert wl.trace_duration.max() <= 3600 and wl.num_jobs == 300
    wl = philly(
        throughput=trace_tm, cluster=sia_cluster, rng=rng(), max_duration_s=3600,
        duration_policy="cap", min_duration_s=120,
    )  # fmt: skip
    assert wl.trace_duration.max() <= 3600 and wl.trace_duration.min() >= 120


def test_philly_with_real_table(real_tm: ThroughputModel, sia_cluster: Cluster) -> None:
    wl = philly(throughput=real_tm, cluster=sia_cluster, rng=rng())
    assert wl.num_jobs == 300 and np.all(wl.work > 0)
    assert {real_tm.family[m] for m in wl.model} == {"sia"}
    check_fits(wl, sia_cluster, real_tm)
    g = philly(throughput=real_tm, cluster=gavel_like_cluster(), rng=rng())
    assert {real_tm.family[m] for m in g.model} == {"gavel"}


# ====================================================================== determinism
def test_same_seed_same_workload(trace_tm: ThroughputModel, sia_cluster: Cluster) -> None:
    for cl in (sia_cluster, gavel_like_cluster()):
        a = philly(throughput=trace_tm, cluster=cl, rng=rng(7))
        b = philly(throughput=trace_tm, cluster=cl, rng=rng(7))
        assert same(a, b)
    a = gavel_synthetic(
        throughput=trace_tm, cluster=gavel_like_cluster(), rng=rng(3), multi_gpu=True
    )
    b = gavel_synthetic(
        throughput=trace_tm, cluster=gavel_like_cluster(), rng=rng(3), multi_gpu=True
    )
    assert same(a, b)


def test_different_seed_different_models(trace_tm: ThroughputModel, sia_cluster: Cluster) -> None:
    g = gavel_like_cluster()
    a = philly(throughput=trace_tm, cluster=g, rng=rng(0))
    b = philly(throughput=trace_tm, cluster=g, rng=rng(1))
    assert np.array_equal(a.arrival, b.arrival)
    assert np.mean(a.model != b.model) > 0.5
    # Sia mapping: only the 1-10 GPU-h bucket is random; ITP cluster10 has many such jobs.
    a = itp(throughput=trace_tm, cluster=sia_cluster, rng=rng(0))
    b = itp(throughput=trace_tm, cluster=sia_cluster, rng=rng(1))
    assert np.any(a.model != b.model)
    a = gavel_synthetic(throughput=trace_tm, cluster=g, rng=rng(0))
    b = gavel_synthetic(throughput=trace_tm, cluster=g, rng=rng(1))
    assert np.any(a.model != b.model) and np.any(a.arrival != b.arrival)


# ====================================================================== model assignment
def test_assign_models_sia_gputime_buckets(trace_tm: ThroughputModel, sia_cluster: Cluster) -> None:
    hours = np.array([0.5, 0.99, 1.0, 5.0, 9.99, 10.0, 99.0, 100.0, 1000.0] * 50)
    m = assign_models(hours * 3600, np.ones(hours.size, int), throughput=trace_tm,
                      cluster=sia_cluster, rng=rng(), scheme="sia_gputime")  # fmt: skip
    names = np.array(trace_tm.models)[m]
    assert np.all(names[hours < 1] == "cifar10")
    mid = names[(hours >= 1) & (hours < 10)]
    assert set(mid) == {"bert", "deepspeech2"}
    assert 0.35 < np.mean(mid == "bert") < 0.65
    assert np.all(names[(hours >= 10) & (hours < 100)] == "yolov3")
    assert np.all(names[hours >= 100] == "imagenet")
    # GPU-time, not duration: 0.5 h on 4 GPUs = 2 GPU-h.
    m4 = assign_models(np.array([1800.0]), np.array([4]), throughput=trace_tm,
                       cluster=sia_cluster, rng=rng(), scheme="sia_gputime")  # fmt: skip
    assert trace_tm.models[int(m4[0])] in ("bert", "deepspeech2")


def test_assign_models_gavel_uniform(trace_tm: ThroughputModel) -> None:
    J = 3000
    g = np.where(np.arange(J) % 3 == 0, 4, 1)
    m = assign_models(np.full(J, 3600.0), g, throughput=trace_tm, cluster=gavel_like_cluster(),
                      rng=rng(), scheme="auto")  # fmt: skip
    names = np.array(trace_tm.models)[m]
    assert set(names) == set(GAVEL_NAMES)
    multi = names[g > 1]
    assert not any(n.split(" ")[0] in ("Recommendation", "A3C", "CycleGAN") for n in multi)
    assert len(set(multi)) == 19
    counts = np.bincount(m[g == 1], minlength=26)[:26]
    assert counts.min() > 0.5 * counts.mean()
    # auto on a cluster with a non-Gavel type -> Sia apps.
    m2 = assign_models(np.full(10, 60.0), np.ones(10, int), throughput=trace_tm,
                       cluster=mixed_cluster(), rng=rng())  # fmt: skip
    assert {trace_tm.models[i] for i in m2} == {"cifar10"}
    with pytest.raises(TraceError, match="model_scheme"):
        assign_models(np.ones(2), np.ones(2, int), throughput=trace_tm, cluster=mixed_cluster(),
                      rng=rng(), scheme="random")  # fmt: skip


def test_assign_models_table_without_models(sia_cluster: Cluster) -> None:
    from conftest import make_tm

    with pytest.raises(TraceError, match="cifar10"):
        assign_models(np.ones(2), np.ones(2, int), throughput=make_tm(), cluster=sia_cluster,
                      rng=rng(), scheme="sia_gputime")  # fmt: skip


# ====================================================================== reference work
def test_reference_work_fallback(trace_tm: ThroughputModel) -> None:
    rec = trace_tm.models.index("Recommendation (batch size 512)")
    base = trace_tm.isolated(rec, tidx("v100"), 1)
    w = reference_work(np.array([100.0]), np.array([rec]), np.array([4]), throughput=trace_tm)
    np.testing.assert_allclose(w, 100.0 * base * 4)  # nearest runnable count 1, scaled x4
    with pytest.raises(TraceError, match="cannot run on 4 GPUs of v100"):
        reference_work(np.array([100.0]), np.array([rec]), np.array([4]), throughput=trace_tm,
                       fallback="error", job_id=np.array(["jX"]))  # fmt: skip
    gpt = trace_tm.models.index("gpt_pmp")
    with pytest.raises(TraceError, match="any GPU count of v100"):
        reference_work(np.array([100.0]), np.array([gpt]), np.array([8]), throughput=trace_tm)
    w = reference_work(np.array([10.0]), np.array([gpt]), np.array([8]), throughput=trace_tm,
                       ref_type="a100")  # fmt: skip
    np.testing.assert_allclose(w, 10.0 * trace_tm.isolated(gpt, tidx("a100"), 8))
    with pytest.raises(TraceError, match="ref_type"):
        reference_work(np.ones(1), np.zeros(1, int), np.ones(1, int), throughput=trace_tm,
                       ref_type="h100")  # fmt: skip


# ====================================================================== ITP and CSV
def test_itp_all_shipped_clusters(trace_tm: ThroughputModel, sia_cluster: Cluster) -> None:
    sizes = {"cluster01": 1595, "cluster02": 5778, "cluster03": 3011, "cluster05": 3629,
             "cluster06": 2396, "cluster08": 13047, "cluster10": 260}  # fmt: skip
    for key, n in sizes.items():
        wl = itp(throughput=trace_tm, cluster=sia_cluster, rng=rng(), itp_cluster=key,
                 max_gpus_policy="cap")  # fmt: skip
        assert wl.num_jobs == n and wl.name == f"itp_{key}"
        assert np.all(np.diff(wl.arrival) >= 0) and np.all(wl.work > 0)
    wl = itp(throughput=trace_tm, cluster=sia_cluster, rng=rng(), itp_cluster="10")
    assert wl.num_jobs == 260 and wl.req_gpus.max() == 16
    with pytest.raises(TraceError, match="itp_cluster"):
        itp(throughput=trace_tm, cluster=sia_cluster, rng=rng(), itp_cluster="cluster04")


def test_csv_default_columns_sorted_stably(
    trace_tm: ThroughputModel, sia_cluster: Cluster, fixtures_dir: Path
) -> None:
    wl = csv_trace(
        fixtures_dir / "itp_small.csv", throughput=trace_tm, cluster=sia_cluster, rng=rng()
    )
    assert wl.name == "itp_small"
    # Sorted by arrival; ties (a, c, f at t=100) keep file order.
    assert list(wl.job_id) == [
        "job-d",
        "job-b",
        "job-a",
        "job-c",
        "job-f",
        "job-e",
        "job-g",
        "job-h",
    ]
    np.testing.assert_array_equal(wl.arrival, [0, 50, 100, 100, 100, 300, 400, 450])
    assert wl.queue_names == ("default",)
    np.testing.assert_array_equal(wl.req_gpus, [4, 2, 1, 1, 1, 8, 1, 2])
    # Default CPU/memory: Alibaba medians clipped to the scarcest node (rtx: 8 cores, 48 GiB/GPU).
    assert np.all(wl.cpu_per_gpu == 8.0) and np.all(wl.mem_per_gpu == 30.0)
    wl2 = csv_trace(fixtures_dir / "itp_small.csv", throughput=trace_tm, cluster=sia_cluster,
                    rng=rng(), cpu_per_gpu=9.8, mem_per_gpu=12, shift=False, elastic=True)  # fmt: skip
    assert np.all(wl2.cpu_per_gpu == 9.8) and np.all(wl2.mem_per_gpu == 12)
    np.testing.assert_array_equal(wl2.min_gpus, 1)
    np.testing.assert_array_equal(wl2.max_gpus, np.minimum(2 * wl2.req_gpus, 24))


def test_csv_window_and_busiest(
    trace_tm: ThroughputModel, sia_cluster: Cluster, fixtures_dir: Path
) -> None:
    p = fixtures_dir / "itp_small.csv"
    wl = csv_trace(p, throughput=trace_tm, cluster=sia_cluster, rng=rng(), start=2, num_jobs=3)
    assert list(wl.job_id) == ["job-a", "job-c", "job-f"] and wl.arrival[0] == 0
    wl = csv_trace(p, throughput=trace_tm, cluster=sia_cluster, rng=rng(), num_jobs=3, busiest=True)
    assert list(wl.job_id) == ["job-a", "job-c", "job-f"]  # span 0
    with pytest.raises(TraceError, match="start"):
        csv_trace(p, throughput=trace_tm, cluster=sia_cluster, rng=rng(), start=8)


def test_csv_column_mapping(trace_tm: ThroughputModel, fixtures_dir: Path) -> None:
    cols = {"job_id": "id", "submission_time": "submit_min", "duration": "runtime_min",
            "num_gpu": "gpus", "model": "arch", "queue": "user", "gpu_types": "types",
            "cpu_per_gpu": "cores"}  # fmt: skip
    wl = csv_trace(fixtures_dir / "mapped.csv", throughput=trace_tm, cluster=mixed_cluster(),
                   rng=rng(), columns=cols, time_unit="min", name="mine")  # fmt: skip
    assert wl.name == "mine"
    assert list(wl.job_id) == ["x1", "x3", "x2", "x4"]
    np.testing.assert_array_equal(wl.arrival, [0, 300, 600, 1200])
    np.testing.assert_array_equal(wl.trace_duration, [3600, 1800, 7200, 36000])
    assert [trace_tm.models[m] for m in wl.model] == [
        "cifar10", "ResNet-50 (batch size 64)", "bert", "yolov3"]  # fmt: skip
    assert wl.queue_names == ("alice", "bob", "carol")
    np.testing.assert_array_equal(wl.queue, [0, 0, 1, 2])
    assert wl.allowed_types[0].all()
    assert set(np.flatnonzero(wl.allowed_types[1])) == {tidx("v100"), tidx("p100")}
    assert set(np.flatnonzero(wl.allowed_types[2])) == {tidx("t4")}
    assert set(np.flatnonzero(wl.allowed_types[3])) == {tidx("a100")}
    np.testing.assert_array_equal(wl.cpu_per_gpu, [4, 8, 6, 2.5])
    assert wl.batch_size[1] == 64
    # The constraint t4 names no type of the Gavel cluster.
    with pytest.raises(TraceError, match="mapped.csv: line 3"):
        csv_trace(fixtures_dir / "mapped.csv", throughput=trace_tm, cluster=gavel_like_cluster(),
                  rng=rng(), columns=cols, time_unit="min")  # fmt: skip
    relaxed = csv_trace(fixtures_dir / "mapped.csv", throughput=trace_tm,
                        cluster=gavel_like_cluster(), rng=rng(), columns=cols, time_unit="min",
                        absent_types="relax")  # fmt: skip
    assert relaxed.allowed_types[2].all() and relaxed.num_jobs == 4
    skipped = csv_trace(fixtures_dir / "mapped.csv", throughput=trace_tm,
                        cluster=gavel_like_cluster(), rng=rng(), columns=cols, time_unit="min",
                        absent_types="skip")  # fmt: skip
    assert list(skipped.job_id) == ["x1", "x3"]


def test_csv_generated_ids_datetimes_and_gzip(
    trace_tm: ThroughputModel, sia_cluster: Cluster, tmp_path: Path
) -> None:
    text = "when,secs,n\n2020-01-01 00:10:00,60,1\n2020-01-01 00:00:00,120,2\n"
    p = tmp_path / "dt.csv.gz"
    p.write_bytes(gzip.compress(text.encode()))
    cols = {"job_id": None, "submission_time": "when", "duration": "secs", "num_gpu": "n"}
    wl = csv_trace(p, throughput=trace_tm, cluster=sia_cluster, rng=rng(), columns=cols)
    assert list(wl.job_id) == ["dt-3", "dt-2"]
    np.testing.assert_array_equal(wl.arrival, [0, 600])
    # ``foo.csv`` finds ``foo.csv.gz``.
    wl2 = csv_trace(tmp_path / "dt.csv", throughput=trace_tm, cluster=sia_cluster, rng=rng(),
                    columns=cols)  # fmt: skip
    assert same(wl, wl2)


BAD_CASES = [
    ("bad_missing_column.csv", ["bad_missing_column.csv", "'num_gpu'", "gpus"]),
    ("bad_non_numeric.csv", ["bad_non_numeric.csv", "line 3", "duration", "'abc'"]),
    (
        "bad_negative_duration.csv",
        ["bad_negative_duration.csv", "line 4", "duration = -42.0 must be a finite"],
    ),
    ("bad_zero_duration.csv", ["bad_zero_duration.csv", "line 2", "duration", "0"]),
    ("bad_zero_gpus.csv", ["bad_zero_gpus.csv", "line 3", "num_gpu = 0 must be >= 1"]),
    ("bad_fractional_gpus.csv", ["bad_fractional_gpus.csv", "line 2", "num_gpu", "1.5"]),
    (
        "bad_nonfinite.csv",
        ["bad_nonfinite.csv", "line 3", "submission_time = 'inf' is not a finite number"],
    ),
    ("bad_duplicate_ids.csv", ["bad_duplicate_ids.csv", "line 4", "'j1'", "line 2"]),
    ("bad_ragged.csv", ["bad_ragged.csv", "line 3", "3 fields"]),
    ("too_large.csv", ["too_large.csv", "'huge'", "128 GPUs", "64 GPUs", "max_gpus_policy"]),
]


@pytest.mark.parametrize(("fname", "needles"), BAD_CASES)
def test_csv_bad_inputs(
    fname: str, needles: list[str], trace_tm: ThroughputModel, sia_cluster: Cluster,
    fixtures_dir: Path,
) -> None:  # fmt: skip
    with pytest.raises(TraceError) as e:
        csv_trace(fixtures_dir / fname, throughput=trace_tm, cluster=sia_cluster, rng=rng())
    for needle in needles:
        assert needle in str(e.value), (needle, str(e.value))


INLINE_BAD = [
    ("", "the file is empty; expected a header line"),
    ("job_id,submission_time,duration,num_gpu\n", "no data rows after the header"),
    (
        "job_id,submission_time,duration,num_gpu\nj1,2024-01-01 00:00:00,10,1\n"
        "j2,2024-13-01 00:00:00,10,1\n",
        "line 3: submission_time = '2024-13-01 00:00:00' is not a date-time",
    ),
    (
        "job_id,submission_time,duration,num_gpu\nj1,soon,10,1\n",
        "line 2: submission_time = 'soon' is neither a number nor a date-time",
    ),
    (
        "job_id,submission_time,duration,num_gpu,cpu_per_gpu\nj1,0,10,1,4\nj2,1,10,1,0\n",
        "line 3: job 'j2': cpu_per_gpu = 0.0 must be a finite number > 0",
    ),
    (
        "job_id,submission_time,duration,num_gpu,batch_size\nj1,0,10,1,-32\n",
        "line 2: job 'j1': batch_size = -32 must be >= 0",
    ),
]


@pytest.mark.parametrize(("body", "needle"), INLINE_BAD)
def test_csv_bad_values_name_line_field_and_value(
    body: str, needle: str, trace_tm: ThroughputModel, sia_cluster: Cluster, tmp_path: Path
) -> None:
    path = tmp_path / "t.csv"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(TraceError) as e:
        csv_trace(path, throughput=trace_tm, cluster=sia_cluster, rng=rng())
    assert str(e.value).startswith("t.csv") and needle in str(e.value), str(e.value)


def test_csv_reads_optional_columns_by_their_own_names(
    trace_tm: ThroughputModel, sia_cluster: Cluster, tmp_path: Path
) -> None:
    path = tmp_path / "opt.csv"
    path.write_text(
        "job_id,submission_time,duration,num_gpu,cpu_per_gpu,queue,gpu_types\n"
        "a,0,100,1,6,alice,t4\nb,5,100,2,3,bob,\n",
        encoding="utf-8",
    )
    kw: dict[str, Any] = dict(throughput=trace_tm, cluster=sia_cluster, rng=rng())
    wl = csv_trace(path, **kw)
    np.testing.assert_array_equal(wl.cpu_per_gpu, [6.0, 3.0])
    assert wl.queue_names == ("alice", "bob")
    assert set(np.flatnonzero(wl.allowed_types[0])) == {tidx("t4")} and wl.allowed_types[1].all()
    ignored = csv_trace(path, columns={"cpu_per_gpu": None, "queue": None}, **kw)
    assert not np.array_equal(ignored.cpu_per_gpu, [6.0, 3.0])  # the default, not the column
    assert ignored.queue_names == ("default",)


def test_missing_csv_file_is_a_clear_error(
    trace_tm: ThroughputModel, sia_cluster: Cluster, tmp_path: Path
) -> None:
    with pytest.raises(TraceError, match=r"trace file '.*none\.csv' not found"):
        csv_trace(tmp_path / "none.csv", throughput=trace_tm, cluster=sia_cluster, rng=rng())


def test_csv_unknown_gpu_type_in_constraint(
    trace_tm: ThroughputModel, sia_cluster: Cluster, fixtures_dir: Path
) -> None:
    with pytest.raises(TraceError) as e:
        csv_trace(fixtures_dir / "bad_gpu_type.csv", throughput=trace_tm, cluster=sia_cluster,
                  rng=rng(), columns={"gpu_types": "gpu_types"})  # fmt: skip
    msg = str(e.value)
    assert "bad_gpu_type.csv" in msg and "line 3" in msg and "'h100'" in msg


def test_csv_too_large_policies(
    trace_tm: ThroughputModel, sia_cluster: Cluster, fixtures_dir: Path
) -> None:
    p = fixtures_dir / "too_large.csv"
    wl = csv_trace(p, throughput=trace_tm, cluster=sia_cluster, rng=rng(), max_gpus_policy="cap")
    np.testing.assert_array_equal(wl.req_gpus, [4, 24])
    wl = csv_trace(p, throughput=trace_tm, cluster=sia_cluster, rng=rng(), max_gpus_policy="skip")
    assert list(wl.job_id) == ["small"]
    with pytest.raises(TraceError, match="max_gpus_policy"):
        csv_trace(p, throughput=trace_tm, cluster=sia_cluster, rng=rng(), max_gpus_policy="drop")


def test_csv_bad_parameters(
    trace_tm: ThroughputModel, sia_cluster: Cluster, fixtures_dir: Path
) -> None:
    p = fixtures_dir / "itp_small.csv"
    kw: dict[str, Any] = dict(throughput=trace_tm, cluster=sia_cluster, rng=rng())
    with pytest.raises(TraceError, match="unknown field"):
        csv_trace(p, columns={"gpu": "num_gpu"}, **kw)
    with pytest.raises(TraceError, match="time_unit"):
        csv_trace(p, time_unit="days", **kw)
    with pytest.raises(TraceError, match="not found"):
        csv_trace(p.parent / "nope.csv", **kw)
    with pytest.raises(TraceError, match="is not a model"):
        csv_trace(fixtures_dir / "mapped.csv", columns={"job_id": "id", "submission_time":
                  "submit_min", "duration": "runtime_min", "num_gpu": "gpus", "model": "user"},
                  **kw)  # fmt: skip


# ====================================================================== check_fits
def test_check_fits(trace_tm: ThroughputModel, sia_cluster: Cluster, workload_factory: Any) -> None:
    ok = workload_factory([0, 1], [10.0, 10.0], [24, 1])
    check_fits(ok, sia_cluster, trace_tm)
    big = workload_factory([0, 1], [10.0, 10.0], [1, 25], name="w")
    with pytest.raises(TraceError) as e:
        check_fits(big, sia_cluster)
    msg = str(e.value)
    assert "'j1'" in msg and "25 GPUs" in msg and "64 GPUs" in msg and "24" in msg
    # A constraint to a type the cluster lacks.
    wl = workload_factory([0], [10.0], [1])
    wl.allowed_types[:] = False
    wl.allowed_types[0, tidx("k80")] = True
    with pytest.raises(TraceError, match="none of its allowed GPU types"):
        check_fits(wl, sia_cluster)
    # A model that cannot run at its size anywhere.
    rec = trace_tm.models.index("A3C")
    wl = workload_factory([0], [10.0], [2], model=[rec])
    with pytest.raises(TraceError, match="cannot run"):
        check_fits(wl, sia_cluster, trace_tm)


# ====================================================================== Alibaba
def test_alibaba_fixture(
    trace_tm: ThroughputModel, sia_cluster: Cluster, fixtures_dir: Path
) -> None:
    p = fixtures_dir / "alibaba_small.csv"
    wl = alibaba(p, throughput=trace_tm, cluster=sia_cluster, rng=rng())
    assert wl.name == "alibaba"
    assert list(wl.job_id) == ["pod-0", "pod-1", "pod-2", "pod-5", "pod-6", "pod-8"]
    np.testing.assert_array_equal(wl.arrival, [0, 100, 200, 500, 600, 800])
    np.testing.assert_array_equal(wl.trace_duration, [7200, 600, 40000, 9000, 3600, 80000])
    np.testing.assert_array_equal(wl.req_gpus, [1, 1, 8, 2, 1, 4])
    np.testing.assert_allclose(wl.cpu_per_gpu, [12, 6, 4, 8, 14, 2])
    np.testing.assert_allclose(wl.mem_per_gpu, [16, 12, 16, 30, 30, 7.5])  # pod-6: 0 -> default
    assert wl.queue_names == ("BE", "Burstable", "LS")
    assert set(np.flatnonzero(wl.allowed_types[2])) == {tidx("t4")}
    assert wl.allowed_types[3].all()  # G2: undisclosed model -> relaxed
    assert set(np.flatnonzero(wl.allowed_types[4])) == {tidx("p100"), tidx("t4")}
    assert wl.allowed_types[5].all()  # A10|T4 -> relaxed
    assert wl.allowed_types[0].all()


def test_alibaba_options(
    trace_tm: ThroughputModel, sia_cluster: Cluster, fixtures_dir: Path
) -> None:
    p = fixtures_dir / "alibaba_small.csv"
    kw: dict[str, Any] = dict(throughput=trace_tm, cluster=sia_cluster, rng=rng())
    wl = alibaba(p, unmapped="skip", **kw)
    assert list(wl.job_id) == ["pod-0", "pod-1", "pod-2", "pod-6"]
    with pytest.raises(TraceError) as e:
        alibaba(p, unmapped="error", **kw)
    assert "alibaba_small.csv" in str(e.value) and "line 7" in str(e.value)
    assert "'G2'" in str(e.value)
    mixed: dict[str, Any] = dict(throughput=trace_tm, cluster=mixed_cluster(), rng=rng())
    wl = alibaba(p, gpu_map={"G2": "v100", "A10": "t4"}, **mixed)
    assert set(np.flatnonzero(wl.allowed_types[3])) == {tidx("v100")}
    assert set(np.flatnonzero(wl.allowed_types[5])) == {tidx("t4")}
    wl = alibaba(p, include_unscheduled=True, **mixed)
    assert "pod-4" in wl.job_id and "pod-7" not in wl.job_id  # pod-7 lives 0 s
    assert set(np.flatnonzero(wl.allowed_types[list(wl.job_id).index("pod-4")])) == {tidx("v100")}
    with pytest.raises(TraceError, match="line 9"):
        alibaba(p, include_unscheduled=True, drop_zero_duration=False, **mixed)
    wl = alibaba(p, fractional_gpu="skip", **kw)
    assert "pod-1" not in wl.job_id
    wl = alibaba(p, gpu_spec=False, **kw)
    assert wl.allowed_types.all()
    with pytest.raises(TraceError, match="CPU-only"):
        alibaba(p, include_cpu_only=True, **kw)
    # pod-4 is constrained to V100, absent from the Sia cluster.
    with pytest.raises(TraceError, match="absent_types"):
        alibaba(p, include_unscheduled=True, absent_types="error", **kw)


def test_alibaba_unknown_gpu_type(
    trace_tm: ThroughputModel, sia_cluster: Cluster, fixtures_dir: Path, tmp_path: Path
) -> None:
    text = (fixtures_dir / "alibaba_small.csv").read_text().replace("P100|T4", "P100|H100")
    p = tmp_path / "pods.csv"
    p.write_text(text)
    with pytest.raises(TraceError) as e:
        alibaba(p, throughput=trace_tm, cluster=sia_cluster, rng=rng())
    msg = str(e.value)
    assert "pods.csv" in msg and "line 8" in msg and "'H100'" in msg


@pytest.mark.skipif(
    not have_shared("traces/alibaba_v2023/openb_pod_list_gpuspec33.csv"),
    reason="Alibaba v2023 is not shipped; set HETSCHED_SHARED_DATA",
)
def test_alibaba_real_file(trace_tm: ThroughputModel, sia_cluster: Cluster) -> None:
    kw: dict[str, Any] = dict(throughput=trace_tm, cluster=sia_cluster, rng=rng())
    wl = alibaba(absent_types="relax", **kw)
    assert wl.num_jobs == 8152 - 1088 - 861  # GPU pods that were scheduled
    assert np.all(wl.req_gpus >= 1) and np.all(wl.cpu_per_gpu > 0) and np.all(wl.mem_per_gpu > 0)
    assert (~wl.allowed_types.all(axis=1)).sum() > 1000  # T4-constrained pods stay constrained
    with pytest.raises(TraceError, match="absent_types"):
        alibaba(**kw)


# ====================================================================== Sia / Pollux
def test_sia_workload_fixture(
    trace_tm: ThroughputModel, sia_cluster: Cluster, fixtures_dir: Path
) -> None:
    p = fixtures_dir / "sia_small.csv"
    wl = sia_workload(p, throughput=trace_tm, cluster=sia_cluster, rng=rng())
    assert list(wl.job_id) == ["imagenet-2", "cifar10-0", "bert-1", "ncf-3"]
    np.testing.assert_array_equal(wl.arrival, [90, 107, 110, 300])  # not shifted
    np.testing.assert_array_equal(wl.req_gpus, [16, 6, 4, 1])
    np.testing.assert_array_equal(wl.min_gpus, 1)
    np.testing.assert_array_equal(wl.max_gpus, 64)
    np.testing.assert_array_equal(wl.batch_size, [3200, 2048, 12, 256])
    np.testing.assert_allclose(wl.work, trace_tm.default_work[wl.model])
    rigid = sia_workload(p, throughput=trace_tm, cluster=sia_cluster, rng=rng(), elastic=False)
    np.testing.assert_array_equal(rigid.max_gpus, rigid.req_gpus)
    with pytest.raises(TraceError) as e:
        sia_workload(fixtures_dir / "sia_bad_app.csv", throughput=trace_tm, cluster=sia_cluster,
                     rng=rng())  # fmt: skip
    assert (
        "sia_bad_app.csv" in str(e.value) and "line 3" in str(e.value) and "'gpt3'" in str(e.value)
    )


def test_pollux_philly_shipped(trace_tm: ThroughputModel, sia_cluster: Cluster) -> None:
    for i in range(1, 9):
        wl = pollux_philly(throughput=trace_tm, cluster=sia_cluster, rng=rng(), index=i,
                           max_gpus_policy="cap")  # fmt: skip
        assert wl.num_jobs == 160 and wl.name == f"pollux_philly_{i}"
        assert np.all(np.diff(wl.arrival) >= 0) and np.all(wl.work > 0)
        assert wl.req_gpus.max() <= 24
    with pytest.raises(TraceError, match="64 GPUs"):
        pollux_philly(throughput=trace_tm, cluster=sia_cluster, rng=rng(), index=1)
    big = Cluster.from_spec("homog", [{"gpu_type": "t4", "count": 16, "gpus": 4, "cpus": 48,
                                       "mem_gib": 192}])  # fmt: skip
    wl = pollux_philly(throughput=trace_tm, cluster=big, rng=rng(), index=1)
    assert wl.req_gpus.max() == 32  # uncapped (workload-1 asks for up to 32)
    with pytest.raises(TraceError, match="workload-1 .. workload-8"):
        pollux_philly(throughput=trace_tm, cluster=sia_cluster, rng=rng(), index=9)


@pytest.mark.skipif(
    not have_shared("workloads/sia/philly/workload-1.csv"),
    reason="the Sia workloads are not shipped; set HETSCHED_SHARED_DATA",
)
def test_sia_presets_from_shared_data(trace_tm: ThroughputModel, sia_cluster: Cluster) -> None:
    for fn, n, jobs in ((sia_philly, 8, 160), (sia_helios, 10, 160), (sia_newtrace, 10, 960)):
        for i in (1, n):
            wl = fn(throughput=trace_tm, cluster=sia_cluster, rng=rng(), index=i)
            assert wl.num_jobs == jobs
            assert {trace_tm.models[m] for m in wl.model} <= {
                "cifar10", "bert", "deepspeech2", "yolov3", "imagenet"}  # fmt: skip
            assert wl.req_gpus.min() >= 4 and wl.req_gpus.max() <= 16
        with pytest.raises(TraceError, match="index"):
            fn(throughput=trace_tm, cluster=sia_cluster, rng=rng(), index=n + 1)


# ====================================================================== Gavel's generator
def test_gavel_synthetic_statistics(trace_tm: ThroughputModel) -> None:
    cl = gavel_like_cluster()
    J, rate = 2000, 4.0
    wl = gavel_synthetic(throughput=trace_tm, cluster=cl, rng=rng(11), num_jobs=J,
                         jobs_per_hour=rate, multi_gpu=True)  # fmt: skip
    frac = np.array([np.mean(wl.req_gpus == s) for s in (1, 2, 4, 8)])
    np.testing.assert_allclose(frac, [0.70, 0.10, 0.15, 0.05], atol=0.03)
    measured_rate = (J - 1) / (wl.arrival[-1] / 3600)
    assert abs(measured_rate - rate) / rate < 0.08
    assert wl.arrival[0] == 0 and np.all(np.diff(wl.arrival) >= 0)
    d = wl.trace_duration
    assert d.min() >= 60 * 10**1.5 - 1e-6 and d.max() <= 60 * 10**4 + 1e-6
    assert abs(np.mean(d < 60 * 10**3) - 0.8) < 0.03
    names = np.array(trace_tm.models)[wl.model]
    assert set(names) <= set(GAVEL_NAMES) and len(set(names)) == 26
    multi = names[wl.req_gpus > 1]
    assert not any(n.split(" ")[0] in ("Recommendation", "A3C", "CycleGAN") for n in multi)
    np.testing.assert_allclose(wl.work, d * trace_tm.isolated(wl.model, tidx("v100"), wl.req_gpus))
    single = gavel_synthetic(throughput=trace_tm, cluster=cl, rng=rng(11), num_jobs=J)
    assert np.all(single.req_gpus == 1)
    static = gavel_synthetic(throughput=trace_tm, cluster=cl, rng=rng(11), num_jobs=20, static=True)
    assert np.all(static.arrival == 0)


def test_gavel_synthetic_errors(trace_tm: ThroughputModel) -> None:
    tiny = Cluster.from_spec("tiny", [{"gpu_type": "v100", "gpus": 4, "cpus": 32, "mem_gib": 128}])
    with pytest.raises(TraceError, match="scale factor 8"):
        gavel_synthetic(throughput=trace_tm, cluster=tiny, rng=rng(), multi_gpu=True)
    wl = gavel_synthetic(throughput=trace_tm, cluster=tiny, rng=rng(), multi_gpu=True,
                         max_gpus_policy="cap")  # fmt: skip
    assert wl.req_gpus.max() == 4
    with pytest.raises(TraceError, match="jobs_per_hour"):
        gavel_synthetic(throughput=trace_tm, cluster=tiny, rng=rng(), jobs_per_hour=0)


def test_gavel_synthetic_real_table(real_tm: ThroughputModel) -> None:
    wl = gavel_synthetic(
        throughput=real_tm, cluster=gavel_like_cluster(), rng=rng(), multi_gpu=True
    )
    assert wl.num_jobs == 300 and np.all(wl.work > 0)


# ====================================================================== Hydra presets
PRESETS = ["philly", "itp", "alibaba", "sia_philly", "sia_helios", "sia_newtrace",
           "pollux_philly", "gavel_synthetic", "csv"]  # fmt: skip


@pytest.mark.parametrize("preset", PRESETS)
def test_presets_instantiate(preset: str, trace_tm: ThroughputModel, fixtures_dir: Path) -> None:
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(CONF / f"{preset}.yaml")
    target = {"csv": "csv_trace", "sia_philly": "sia_trace", "sia_helios": "sia_trace",
              "sia_newtrace": "sia_trace", "pollux_philly": "sia_trace"}.get(preset, preset)  # fmt: skip
    assert cfg._target_ == f"hetsched.sim.traces.{target}"
    assert cfg._partial_ is True and isinstance(cfg.name, str | None)
    if preset == "csv":
        assert cfg.path is None and cfg.name is None  # a user CSV is named after its file
        cfg.path = str(fixtures_dir / "mapped.csv")
        cfg.columns = {"job_id": "id", "submission_time": "submit_min",
                       "duration": "runtime_min", "num_gpu": "gpus"}  # fmt: skip
    if preset == "alibaba" and not have_shared(cfg.path):
        pytest.skip("Alibaba v2023 not available")
    if preset.startswith("sia_") and not have_shared("workloads/sia/philly/workload-1.csv"):
        pytest.skip("Sia workloads not available")
    factory = instantiate(cfg)
    cl = gavel_like_cluster() if preset == "gavel_synthetic" else sia_like_cluster()
    wl = factory(throughput=trace_tm, cluster=cl, rng=rng())
    assert isinstance(wl, Workload) and wl.num_jobs > 0
    assert wl.name == (cfg.name if preset != "csv" else "mapped")


def test_philly_preset_with_real_table(real_tm: ThroughputModel) -> None:
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    factory = instantiate(OmegaConf.load(CONF / "philly.yaml"))
    wl = factory(throughput=real_tm, cluster=sia_like_cluster(), rng=rng())
    assert wl.num_jobs == 300
    check_fits(wl, sia_like_cluster(), real_tm)


def test_module_exports() -> None:
    for name in traces.__all__:
        assert hasattr(traces, name), name
    assert make_trace_tm().num_models == 33


# ====================================================================== shared options
def test_trace_options_one_object(trace_tm: ThroughputModel, sia_cluster: Cluster) -> None:
    o = traces.TraceOptions.build({"num_jobs": 5}, busiest=True)
    assert o.num_jobs == 5 and o.busiest and o.as_dict()["start"] == 0
    with pytest.raises(TraceError, match=r"unknown trace option\(s\) \['num_job'\]"):
        traces.TraceOptions.build({"num_job": 5})
    for bad, match in (({"num_jobs": 0}, "num_jobs=0"), ({"start": -1}, "start=-1"),
                       ({"unsorted": "ignore"}, "unsorted"), ({"exclude": ["Failed"]}, "exclude"),
                       ({"cpu_per_gpu": -2}, "cpu_per_gpu=-2"), ({"zero_gpus": "drop"}, "zero_gpus")):  # fmt: skip
        with pytest.raises(TraceError, match=match):
            traces.TraceOptions.build(bad)
    with pytest.raises(TraceError, match="unknown trace option"):
        philly(throughput=trace_tm, cluster=sia_cluster, rng=rng(), window=3)


def test_sia_trace_is_one_function(trace_tm: ThroughputModel, sia_cluster: Cluster) -> None:
    kw: dict[str, Any] = dict(throughput=trace_tm, cluster=sia_cluster, rng=rng())
    a = traces.sia_trace("pollux", index=2, max_gpus_policy="cap", **kw)
    b = pollux_philly(index=2, max_gpus_policy="cap", **kw)
    assert a.name == b.name == "pollux_philly_2" and same(a, b)
    with pytest.raises(TraceError, match="kind='saturn' is not one of"):
        traces.sia_trace("saturn", **kw)


def test_model_names_match_any_case_unless_ambiguous() -> None:
    from hetsched.sim.traces.models import match_models

    names = ["bert", "Bert2", "ABC", "abc"]
    got = match_models(np.array(["BERT", "bert2", "ABC", "abc", "Abc", "x"]), names)
    np.testing.assert_array_equal(got, [0, 1, 2, 3, -1, -1])
    np.testing.assert_array_equal(match_models(np.array(["Abc", "bert"]), names, {2}), [2, -1])
