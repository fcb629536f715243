"""Cluster presets, factories and user cluster files."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from hetsched.resources import CONF_DIR
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster import Cluster
from hetsched.sim.clusters import (
    load_pai_machines,
    pai_cluster,
    sample_pai_machines,
    scaled_cluster,
    spec_cluster,
    yaml_cluster,
)
from hetsched.sim.errors import ClusterSpecError, UnknownGpuTypeError

ROOT = Path(__file__).resolve().parents[2]
PRESETS = CONF_DIR / "cluster"
SHIPPED_PAI = ROOT / "hetsched" / "data" / "clusters" / "pai_machine_spec.csv"
T = {name: i for i, name in enumerate(GPU_TYPE_NAMES)}


def load_preset(name: str) -> Cluster:
    cluster = instantiate(OmegaConf.load(PRESETS / f"{name}.yaml"))
    assert isinstance(cluster, Cluster)
    return cluster


def per_type(cluster: Cluster) -> dict[str, int]:
    per = cluster.gpus_per_type()
    return {GPU_TYPE_NAMES[k]: int(per[k]) for k in np.flatnonzero(per)}


# ------------------------------------------------------------------------------------ presets
def test_gavel_108_preset() -> None:
    c = load_preset("gavel_108")
    assert c.name == "gavel_108"
    assert c.num_gpus == 108
    assert per_type(c) == {"k80": 36, "p100": 36, "v100": 36}
    assert c.num_nodes == 27
    assert set(c.node_gpus.tolist()) == {4}
    assert np.all(c.node_cpus == 32)
    assert sorted(set(c.node_mem.tolist())) == [244.0, 488.0]


def test_sia_64_preset() -> None:
    c = load_preset("sia_64")
    assert c.name == "sia_64"
    assert c.num_gpus == 64
    assert per_type(c) == {"t4": 24, "rtx2080ti": 24, "a100": 16}
    assert c.num_nodes == 11
    assert c.max_node_gpus_per_type()[T["t4"]] == 4
    assert c.max_node_gpus_per_type()[T["a100"]] == 8
    dgx = c.node_type == T["a100"]
    assert np.all(c.node_cpus[dgx] == 256) and np.all(c.node_mem[dgx] == 1024)
    assert c.describe() == "sia_64: 64 GPUs (24 t4, 16 a100, 24 rtx2080ti), 11 nodes"


def test_large_2048_is_sia_64_times_32() -> None:
    c = load_preset("large_2048")
    base = load_preset("sia_64")
    assert c.name == "large_2048"
    assert c.num_gpus == 2048
    assert per_type(c) == {"t4": 768, "rtx2080ti": 768, "a100": 512}
    assert c.num_nodes == 32 * base.num_nodes
    # node shapes unchanged
    for k in base.types_present:
        assert set(c.node_cpus[c.node_type == k]) == set(base.node_cpus[base.node_type == k])
        assert set(c.node_mem[c.node_type == k]) == set(base.node_mem[base.node_type == k])


def test_pai_mixed_preset() -> None:
    c = load_preset("pai_mixed")
    assert c.name == "pai_mixed"
    assert 24 <= c.num_nodes <= 40
    assert 64 <= c.num_gpus <= 128
    assert set(per_type(c)) <= {"p100", "t4", "v100"}
    assert len(per_type(c)) == 3  # all three kept types appear at this size
    again = load_preset("pai_mixed")
    for f in ("node_type", "node_gpus", "node_cpus", "node_mem"):
        np.testing.assert_array_equal(getattr(c, f), getattr(again, f))


def test_custom_preset_with_example_file() -> None:
    cfg = OmegaConf.load(PRESETS / "custom.yaml")
    assert OmegaConf.is_missing(cfg, "path")
    cfg = OmegaConf.merge(
        cfg, OmegaConf.from_dotlist([f"path={ROOT / 'docs/examples/my_cluster.yaml'}"])
    )
    c = instantiate(cfg)
    assert c.name == "my_cluster"
    assert per_type(c) == {"v100": 16, "t4": 12, "a100": 16}
    renamed = instantiate(OmegaConf.merge(cfg, OmegaConf.from_dotlist(["name=mine"])))
    assert renamed.name == "mine" and renamed.num_gpus == 44


def test_every_preset_has_a_name_field() -> None:
    for f in ("gavel_108", "sia_64", "large_2048", "pai_mixed"):
        assert OmegaConf.load(PRESETS / f"{f}.yaml").name == f


# ------------------------------------------------------------------------------ spec / scaled
def test_spec_cluster_accepts_omegaconf_and_plain() -> None:
    groups = [{"gpu_type": "V100M32", "count": 2, "gpus": 8, "cpus": 96, "mem_gib": 384}]
    plain = spec_cluster("x", groups)
    conf = spec_cluster("x", OmegaConf.create(groups))
    np.testing.assert_array_equal(plain.node_type, conf.node_type)
    assert plain.num_gpus == conf.num_gpus == 16
    assert per_type(conf) == {"v100": 16}


def test_spec_cluster_rejects_non_list_nodes() -> None:
    with pytest.raises(ClusterSpecError, match="`nodes` must be a list"):
        spec_cluster("x", {"gpu_type": "v100", "gpus": 1, "cpus": 1, "mem_gib": 1})


def test_scaled_cluster_counts_and_bad_factor() -> None:
    base = [
        {"gpu_type": "k80", "gpus": 2, "cpus": 8, "mem_gib": 32},
        {"gpu_type": "v100", "count": 3, "gpus": 4, "cpus": 16, "mem_gib": 64},
    ]
    c = scaled_cluster("s", base, 5)
    assert c.num_nodes == 5 * 4
    assert per_type(c) == {"k80": 10, "v100": 60}
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ClusterSpecError, match="factor"):
            scaled_cluster("s", base, bad)  # type: ignore[arg-type]
    with pytest.raises(UnknownGpuTypeError, match="h100"):
        scaled_cluster("s", [{"gpu_type": "h100", "gpus": 1, "cpus": 1, "mem_gib": 1}], 2)


# ------------------------------------------------------------------------------ Cluster helpers
def test_cluster_helpers() -> None:
    c = spec_cluster(
        "mix",
        [
            {"gpu_type": "v100", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 244},
            {"gpu_type": "v100", "count": 1, "gpus": 8, "cpus": 64, "mem_gib": 488},
            {"gpu_type": "k80", "count": 3, "gpus": 2, "cpus": 8, "mem_gib": 61},
        ],
    )
    expected = np.zeros(len(GPU_TYPE_NAMES), dtype=np.int64)
    expected[T["v100"]] = 16
    expected[T["k80"]] = 6
    np.testing.assert_array_equal(c.gpus_per_type(), expected)
    maxg = np.zeros(len(GPU_TYPE_NAMES), dtype=np.int64)
    maxg[T["v100"]] = 8
    maxg[T["k80"]] = 2
    np.testing.assert_array_equal(c.max_node_gpus_per_type(), maxg)
    assert c.describe() == "mix: 22 GPUs (6 k80, 16 v100), 6 nodes"
    np.testing.assert_array_equal(c.types_present, [T["k80"], T["v100"]])


# ------------------------------------------------------------------------------ yaml_cluster
GOOD = """\
name: lab
description: a test cluster
nodes:
  - {gpu_type: a100, count: 2, gpus: 8, cpus: 256, mem_gib: 1024}
  - gpu_type: rtx
    gpus: 8
    cpus: 64
    mem_gib: 384
"""


def write(tmp_path: Path, text: str, name: str = "cluster.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_yaml_cluster_good_file(tmp_path: Path) -> None:
    c = yaml_cluster(write(tmp_path, GOOD))
    assert c.name == "lab"
    assert per_type(c) == {"a100": 16, "rtx2080ti": 8}
    assert c.num_nodes == 3
    np.testing.assert_array_equal(c.node_cpus, [256, 256, 64])
    assert yaml_cluster(str(tmp_path / "cluster.yaml"), name="renamed").name == "renamed"


def test_yaml_cluster_accepts_a_copied_spec_preset() -> None:
    c = yaml_cluster(PRESETS / "sia_64.yaml")
    assert c.name == "sia_64" and c.num_gpus == 64


BAD_FILES = [
    # (case, text, error type, fragments the message must contain besides the file name)
    (
        "unknown_gpu",
        GOOD.replace("gpu_type: rtx", "gpu_type: h100"),
        UnknownGpuTypeError,
        ["nodes[1].gpu_type", "'h100'"],
    ),
    ("zero_nodes", "name: lab\nnodes: []\n", ClusterSpecError, ["no node groups", "nodes"]),
    (
        "zero_count",
        GOOD.replace("count: 2", "count: 0"),
        ClusterSpecError,
        ["nodes[0].count=0"],
    ),
    ("missing_nodes", "name: lab\n", ClusterSpecError, ["'nodes'"]),
    ("missing_name", GOOD.replace("name: lab\n", ""), ClusterSpecError, ["'name'"]),
    (
        "missing_mem",
        GOOD.replace("    mem_gib: 384\n", ""),
        ClusterSpecError,
        ["nodes[1]", "'mem_gib'"],
    ),
    ("negative_cpus", GOOD.replace("cpus: 64", "cpus: -4"), ClusterSpecError, ["nodes[1].cpus=-4"]),
    (
        "non_numeric_gpus",
        GOOD.replace("gpus: 8\n", "gpus: eight\n"),
        ClusterSpecError,
        ["nodes[1].gpus='eight'"],
    ),
    (
        "fractional_gpus",
        GOOD.replace("gpus: 8\n", "gpus: 2.5\n"),
        ClusterSpecError,
        ["nodes[1].gpus=2.5"],
    ),
    ("zero_mem", GOOD.replace("mem_gib: 384", "mem_gib: 0"), ClusterSpecError, ["mem_gib=0"]),
    (
        "yaml_syntax",
        "name: lab\nnodes:\n  - {gpu_type: v100, gpus: 4\n",
        ClusterSpecError,
        ["YAML syntax error", "line"],
    ),
    ("unknown_top", GOOD + "nodez: 3\n", ClusterSpecError, ["nodez"]),
    (
        "unknown_node_field",
        GOOD.replace("cpus: 64", "cpu: 64"),
        ClusterSpecError,
        ["nodes[1]", "'cpu'"],
    ),
    ("not_mapping", "- a\n- b\n", ClusterSpecError, ["top level"]),
    ("empty", "", ClusterSpecError, ["empty"]),
    ("nodes_not_list", "name: lab\nnodes: 4\n", ClusterSpecError, ["'nodes'", "list"]),
    ("bad_name", GOOD.replace("name: lab", "name: ''"), ClusterSpecError, ["name"]),
]


@pytest.mark.parametrize(
    ("case", "text", "exc", "fragments"), BAD_FILES, ids=[b[0] for b in BAD_FILES]
)
def test_yaml_cluster_bad_files(
    tmp_path: Path, case: str, text: str, exc: type[Exception], fragments: list[str]
) -> None:
    path = write(tmp_path, text, f"{case}.yaml")
    with pytest.raises(exc) as info:
        yaml_cluster(path)
    msg = str(info.value)
    assert str(path) in msg, msg
    for frag in fragments:
        assert frag in msg, (frag, msg)


def test_yaml_cluster_syntax_error_reports_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: lab\nnodes:\n  - gpu_type: v100\n   gpus: 4\n")
    with pytest.raises(ClusterSpecError, match=r"YAML syntax error at line 4"):
        yaml_cluster(path)


def test_yaml_cluster_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ClusterSpecError, match="nope.yaml not found"):
        yaml_cluster(tmp_path / "nope.yaml")


# ------------------------------------------------------------------------------ PAI sample
def file_rows() -> dict[str, tuple[str, float, float, int]]:
    with SHIPPED_PAI.open() as fh:
        return {r[0]: (r[1], float(r[2]), float(r[3]), int(r[4])) for r in csv.reader(fh)}


def test_shipped_pai_copy_is_complete() -> None:
    rows = file_rows()
    assert len(rows) == 1897
    assert sum(r[3] for r in rows.values()) == 6742
    assert (
        (SHIPPED_PAI.parent / "LICENSE")
        .read_text(encoding="utf-8-sig")
        .startswith("Attribution 4.0 International")
    )
    header = (SHIPPED_PAI.parent / "pai_machine_spec.header").read_text().strip()
    assert header == "machine,gpu_type,cap_cpu,cap_mem,cap_gpu"
    assert len(load_pai_machines()) == 1897


def test_pai_nodes_are_real_distinct_machines() -> None:
    rows = file_rows()
    picked = sample_pai_machines(num_nodes=32, seed=0)
    c = pai_cluster(num_nodes=32, seed=0)
    assert len(picked) == c.num_nodes == 32
    assert len({m.machine for m in picked}) == 32
    for i, m in enumerate(picked):
        label, cpus, mem, gpus = rows[m.machine]
        assert label == m.gpu_type and label not in ("CPU", "MISC")
        assert (c.node_cpus[i], c.node_mem[i], c.node_gpus[i]) == (cpus, mem, gpus)
        expect = "v100" if label.startswith("V100") else label.lower()
        assert GPU_TYPE_NAMES[c.node_type[i]] == expect


def test_pai_sampling_is_stratified_and_deterministic() -> None:
    n = 40
    picked = sample_pai_machines(num_nodes=n, seed=3)
    assert [m.machine for m in picked] == [m.machine for m in sample_pai_machines(n, 3)]
    kept = [m for m in load_pai_machines() if m.gpu_type not in ("CPU", "MISC")]
    for label in ("P100", "T4", "V100", "V100M32"):
        share = sum(m.gpu_type == label for m in kept) / len(kept)
        got = sum(m.gpu_type == label for m in picked)
        assert abs(got - n * share) < 1.0, (label, got, n * share)
    other = sample_pai_machines(num_nodes=n, seed=4)
    assert {m.machine for m in other} != {m.machine for m in picked}


def test_pai_options() -> None:
    only_v100 = pai_cluster(num_nodes=10, gpu_types=["v100"])
    assert per_type(only_v100) == {"v100": 80}
    gb = pai_cluster(num_nodes=5, mem_unit="GB")
    gib = pai_cluster(num_nodes=5)
    np.testing.assert_allclose(gb.node_mem, gib.node_mem * 1e9 / 2**30)
    with pytest.raises(UnknownGpuTypeError, match=r"pai_machine_spec\.csv:\d+.*MISC"):
        pai_cluster(exclude_types=["CPU"])
    with pytest.raises(ClusterSpecError, match="num_nodes"):
        pai_cluster(num_nodes=0)
    with pytest.raises(ClusterSpecError, match="num_nodes=5000"):
        pai_cluster(num_nodes=5000)
    with pytest.raises(ClusterSpecError, match="mem_unit"):
        pai_cluster(mem_unit="TB")


@pytest.mark.parametrize(
    ("body", "kw", "match"),
    [
        (
            "m1,T4,96,512,2\nm2,T4,ninety,512,2\n",
            {},
            r"spec\.csv:2: cap_cpu='ninety' is not a number",
        ),
        ("m1,T4,96,-512,2\n", {}, r"spec\.csv:1: cap_mem='-512' must be >= 0"),
        ("m1,T4,96,512,inf\n", {}, r"spec\.csv:1: cap_gpu='inf' must be >= 0"),
        ("m1,T4,96,512,1.5\n", {}, r"spec\.csv:1: cap_gpu=1.5 is not an integer"),
        ("m1,T4,96,512\n", {}, r"spec\.csv:1: expected 5 fields \(machine,gpu_type,cap_cpu,"),
        ("\n\n", {}, r"spec\.csv: no machine rows"),
        ("m1,T4,96,512,2\n", {"gpu_types": ["v100"]}, r"no machine of gpu_types=\['v100'\]"),
        ("m1,T4,0,512,2\n", {}, r"spec\.csv:1: machine m1 \(T4\) has cap_gpu=2, cap_cpu=0.0"),
        ("m1,H800,96,512,2\n", {}, r"spec\.csv:1 \(machine m1, gpu_type\); add 'H800' to exclude"),
        ("m1,T4,96,512,2\n", {"seed": 1.5}, r"pai_cluster: seed=1.5 must be an integer"),
    ],
)
def test_pai_custom_file_errors(
    tmp_path: Path, body: str, kw: dict[str, object], match: str
) -> None:
    bad = write(tmp_path, body, "spec.csv")
    with pytest.raises(ClusterSpecError, match=match):
        pai_cluster(num_nodes=1, path=bad, **kw)  # type: ignore[arg-type]


def test_pai_missing_file_and_header_file(tmp_path: Path) -> None:
    with pytest.raises(ClusterSpecError, match=r"PAI machine spec .*nope\.csv not found"):
        pai_cluster(num_nodes=1, path=tmp_path / "nope.csv")
    spec = write(tmp_path, "T4,m1,2,96,512\n", "cols.csv")
    write(tmp_path, "gpu_type,machine,cap_gpu,cap_cpu,cap_mem\n", "cols.header")
    assert pai_cluster(num_nodes=1, path=spec).describe().endswith("2 GPUs (2 t4), 1 nodes")
    write(tmp_path, "gpu_type,machine,cap_gpu\n", "cols.header")
    with pytest.raises(
        ClusterSpecError, match=r"header file lacks column\(s\) \['cap_cpu', 'cap_mem'\]"
    ):
        pai_cluster(num_nodes=1, path=spec)


def test_pai_good_custom_file(tmp_path: Path) -> None:
    good = write(tmp_path, "m1,T4,96,512,2\nm2,V100M32,96,384,8\nm3,CPU,96,512,0\n", "ok.csv")
    c = pai_cluster(name="tiny", num_nodes=2, path=good)
    assert c.describe() == "tiny: 10 GPUs (8 v100, 2 t4), 2 nodes"
