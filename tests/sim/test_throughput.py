"""The shipped throughput table (``hetsched/data/profiles/throughput_table.npz``) and its lookups.

Every check reads the shipped table (or small hand-made inputs); none needs ``shared/data``.
Known values come from ``data.md`` section 5 / ``gavel.md`` section 6 and ``sia.md`` section 9.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.errors import HetschedError
from hetsched.sim.throughput import DEFAULT_TABLE, ThroughputModel, default_throughput

REPO = Path(__file__).resolve().parents[2]
TABLE = REPO / "hetsched" / "data" / DEFAULT_TABLE
SIA_APPS = ("bert", "cifar10", "deepspeech2", "gpt_pmp", "imagenet", "ncf", "yolov3")
NON_DISTRIBUTED = ("Recommendation", "A3C", "CycleGAN")
LEVELS = [1, 2, 4, 8, 16, 32, 64, 128]


@pytest.fixture(scope="module")
def tm() -> ThroughputModel:
    return ThroughputModel.load()


def k(name: str) -> int:
    return GPU_TYPE_NAMES.index(name)


def li(n: int) -> int:
    return LEVELS.index(n)


def load_builder() -> ModuleType:
    """Import ``scripts/build_profiles.py`` as a module (it is not part of the package)."""
    path = REPO / "scripts" / "build_profiles.py"
    spec = importlib.util.spec_from_file_location("build_profiles", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["build_profiles"] = mod
    spec.loader.exec_module(mod)
    return mod


# ----------------------------------------------------------------------------- layout
def test_shipped_file_is_small_and_default_loader_uses_it(tm: ThroughputModel) -> None:
    assert TABLE.is_file()
    assert TABLE.stat().st_size < 1_000_000
    assert default_throughput().models == tm.models


def test_shapes_and_axes(tm: ThroughputModel) -> None:
    M, K, L = 33, len(GPU_TYPE_NAMES), 8
    assert len(tm.models) == M
    assert tm.gpu_types == GPU_TYPE_NAMES
    assert tm.count_levels.tolist() == LEVELS
    assert tm.tput.shape == (M, K, L, 2)
    assert tm.measured.shape == (M, K, L, 2)
    assert tm.pair_iota.shape == (M, M, K)
    for arr in (tm.cpu_alpha, tm.cpu_ceiling, tm.restart_delay_s, tm.default_work):
        assert arr.shape == (M,)
    assert tm.models[26:] == SIA_APPS
    assert tm.family == ("gavel",) * 26 + ("sia",) * 7
    assert tm.work_unit == ("steps",) * 26 + ("samples",) * 7
    assert len(tm.sources) >= 3


def test_gavel_names_match_oracle_keys(tm: ThroughputModel) -> None:
    gavel = tm.models[:26]
    assert len(set(gavel)) == 26
    for name in ("ResNet-18 (batch size 64)", "A3C", "CycleGAN", "LM (batch size 20)",
                 "Recommendation (batch size 512)", "ResNet-50 (batch size 128)",
                 "Transformer (batch size 256)", "LM (batch size 5)"):  # fmt: skip
        assert name in gavel
    for name in gavel:
        cls = name.split(" (")[0]
        assert cls in ("ResNet-18", "ResNet-50", "Transformer", "LM", "Recommendation", "A3C",
                       "CycleGAN")  # fmt: skip
        assert (cls in ("A3C", "CycleGAN")) == ("(batch size" not in name)


def test_values_are_finite_and_non_negative(tm: ThroughputModel) -> None:
    assert np.all(np.isfinite(tm.tput)) and np.all(tm.tput >= 0)
    # Every model runs on 1 GPU of every type.
    runs_on_one = tm.tput[:, :, 0, 0] > 0
    pmp = tm.model_index("gpt_pmp")
    runs_on_one[pmp] = True  # gpt_pmp needs whole pipelines; checked below
    assert runs_on_one.all()
    # One GPU cannot be spread over several nodes.
    np.testing.assert_array_equal(tm.tput[:, :, 0, 0], tm.tput[:, :, 0, 1])


# ----------------------------------------------------------------------------- Gavel values
def test_known_gavel_values(tm: ThroughputModel) -> None:
    a3c = tm.model_index("A3C")
    assert tm.tput[a3c, k("v100"), 0, 0] == pytest.approx(7.18, abs=0.01)
    assert tm.tput[a3c, k("p100"), 0, 0] == pytest.approx(5.68, abs=0.01)
    assert tm.tput[a3c, k("k80"), 0, 0] == pytest.approx(3.44, abs=0.01)
    assert tm.measured[a3c, k("v100"), 0, 0]
    tr = tm.model_index("Transformer (batch size 64)")
    assert tm.tput[tr, k("v100"), li(8), 0] == pytest.approx(49.7, abs=0.05)
    assert tm.tput[tr, k("v100"), li(8), 1] == pytest.approx(17.0, abs=0.05)
    assert tm.measured[tr, k("v100"), li(8)].all()
    cyc = tm.model_index("CycleGAN")
    assert tm.tput[cyc, k("v100"), 0, 0] == pytest.approx(4.43, abs=0.01)
    assert tm.tput[cyc, k("k80"), 0, 0] == pytest.approx(0.50, abs=0.01)


def test_recommendation_faster_on_p100_than_v100(tm: ThroughputModel) -> None:
    recs = [i for i, n in enumerate(tm.models) if n.startswith("Recommendation")]
    assert len(recs) == 5
    p100, v100 = tm.tput[recs, k("p100"), 0, 0], tm.tput[recs, k("v100"), 0, 0]
    assert np.all(p100 > v100)
    assert np.median(p100 / v100) > 1.5  # "about 2x faster"


def test_non_distributed_models_do_not_scale(tm: ThroughputModel) -> None:
    for i, name in enumerate(tm.models[:26]):
        if name.split(" (")[0] in NON_DISTRIBUTED:
            assert np.all(tm.tput[i, :, 1:, :] == 0), name
            assert np.all(tm.tput[i, :, 0, 0] > 0), name
        else:
            assert np.all(tm.tput[i, k("v100"), 1:, 0] > 0), name


def test_genuine_gavel_zero_is_kept(tm: ThroughputModel) -> None:
    r50 = tm.model_index("ResNet-50 (batch size 128)")
    assert tm.tput[r50, k("k80"), 0, 0] > 0
    assert np.all(tm.tput[r50, k("k80"), 1:, :] == 0)
    assert np.all(tm.tput[r50, k("v100"), 1:4, 0] > 0)


def test_gavel_extrapolation_is_projected_and_clamped(tm: ThroughputModel) -> None:
    g = slice(0, 26)
    for t in ("k80", "p100", "v100"):
        assert tm.measured[g, k(t), :4, 0].sum() > 0
        assert not tm.measured[g, k(t), 4:, :].any()
        p = tm.tput[g, k(t), :, 0]
        ok = p[:, 3] > 0
        ratio = p[ok, 4:] / p[ok, 3:-1]  # per-doubling factor above 8 GPUs
        assert np.all(ratio >= 1.0 - 1e-12) and np.all(ratio <= 2.0 + 1e-12)
        # Unmeasured spread never exceeds packed.
        s = tm.tput[g, k(t), 4:, 1]
        assert np.all(s <= tm.tput[g, k(t), 4:, 0] + 1e-9)


# ----------------------------------------------------------------------------- Sia values
def test_sia_directional_facts(tm: ThroughputModel) -> None:
    ds2 = tm.model_index("deepspeech2")
    assert tm.tput[ds2, k("rtx2080ti"), 0, 0] > tm.tput[ds2, k("a100"), 0, 0]
    bert = tm.model_index("bert")
    sia_types = [k(t) for t in ("t4", "v100", "a100", "rtx6000", "rtx2080ti")]
    one_gpu = tm.tput[bert, sia_types, 0, 0]
    assert sia_types[int(np.argmax(one_gpu))] == k("a100")
    assert tm.tput[bert, k("a100"), 0, 0] == tm.tput[bert, :, 0, 0].max()
    yolo = tm.model_index("yolov3")
    assert tm.tput[yolo, k("rtx2080ti"), 0, 0] < tm.tput[yolo, k("t4"), 0, 0]
    imnet = tm.model_index("imagenet")
    assert tm.tput[imnet, k("a100"), 0, 0] > tm.tput[imnet, k("t4"), 0, 0]


def test_sia_measured_ranges(tm: ThroughputModel) -> None:
    for app in ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"):
        m = tm.model_index(app)
        # aws profiles reach 16 nodes x 4 GPUs; azure 4 nodes x 8; dgx-ext/rtx 2 nodes x 8.
        assert tm.measured[m, k("t4"), :7, 0].all(), app
        assert tm.measured[m, k("v100"), :6, 0].all(), app
        assert tm.measured[m, k("a100"), :5, 0].all(), app
        assert tm.measured[m, k("rtx2080ti"), :5, 0].all(), app
        assert tm.measured[m, k("rtx6000"), :3, 0].all(), app
        assert not tm.measured[m, k("rtx6000"), 3:, :].any(), app  # quad: one 4-GPU node
        assert tm.measured[m, k("t4"), 1:6, 1].all(), app  # spread "11", "22", ...
        assert np.all(tm.tput[m, :, :7, 0] > 0), app
        assert tm.default_work[m] > 0
    # Sia's batch limit: bert (min local 4, max batch 384) cannot use 128 GPUs.
    assert np.all(tm.tput[tm.model_index("bert"), :, li(128), :] == 0)
    # cifar10: 100 epochs x 50,000 samples.
    assert tm.default_work[tm.model_index("cifar10")] == pytest.approx(5.0e6, rel=0.01)
    assert np.all(np.isnan(tm.default_work[:26]))


def test_gpt_pmp_whole_pipelines_only(tm: ThroughputModel) -> None:
    m = tm.model_index("gpt_pmp")
    assert np.all(tm.tput[m, :, :, 1] == 0)  # no spread placements
    assert np.all(tm.tput[m, k("rtx2080ti"), :3, 0] == 0)  # 8-stage pipeline on 11 GB GPUs
    assert np.all(tm.tput[m, k("rtx2080ti"), 3:, 0] > 0)
    assert tm.measured[m, k("rtx2080ti"), 3:, 0].all()
    assert tm.tput[m, k("a100"), 0, 0] == 0 and tm.tput[m, k("a100"), 1, 0] > 0
    for t in ("t4", "v100", "k80", "p100"):
        assert np.all(tm.tput[m, k(t), :3, 0] == 0), t
        assert tm.tput[m, k(t), 3, 0] > 0, t
    assert np.all(np.isnan(tm.pair_iota[m])) and np.all(np.isnan(tm.pair_iota[:, m]))


def test_projected_types_are_not_measured(tm: ThroughputModel) -> None:
    for t in ("t4", "a100", "rtx6000", "rtx2080ti"):
        assert not tm.measured[:26, k(t)].any(), t
    for t in ("k80", "p100"):
        assert not tm.measured[26:, k(t)].any(), t
    pmp = tm.model_index("gpt_pmp")
    for t in ("t4", "v100", "rtx6000"):
        assert not tm.measured[pmp, k(t)].any(), t
    # Projection keeps each model's scaling shape from the bridge type (v100).
    r18 = tm.model_index("ResNet-18 (batch size 64)")
    a100, v100 = tm.tput[r18, k("a100")], tm.tput[r18, k("v100")]
    np.testing.assert_allclose(a100 / a100[0, 0], v100 / v100[0, 0])
    assert a100[0, 0] > v100[0, 0] > tm.tput[r18, k("t4"), 0, 0]


# ----------------------------------------------------------------------------- lookups
def test_isolated_interpolates_in_log_log_space(tm: ThroughputModel) -> None:
    m = tm.model_index("ResNet-50 (batch size 16)")
    v = k("v100")
    t2, t4 = tm.tput[m, v, 1, 0], tm.tput[m, v, 2, 0]
    assert t2 != t4
    t3 = float(tm.isolated(np.array(m), np.array(v), np.array(3)))
    assert min(t2, t4) < t3 < max(t2, t4)
    w = np.log2(3) - 1
    assert t3 == pytest.approx(np.exp((1 - w) * np.log(t2) + w * np.log(t4)))
    # Exact levels return table values; spread uses the spread column.
    out = tm.isolated(np.array([m, m]), np.array([v, v]), np.array([8, 8]), np.array([False, True]))
    np.testing.assert_allclose(out, tm.tput[m, v, 3, :])
    # Outside 1..128 -> 0; a neighbour that cannot run -> 0.
    assert float(tm.isolated(np.array(m), np.array(v), np.array(256))) == 0.0
    a3c = tm.model_index("A3C")
    assert float(tm.isolated(np.array(a3c), np.array(v), np.array(3))) == 0.0


def test_phi(tm: ThroughputModel) -> None:
    r18 = tm.model_index("ResNet-18 (batch size 64)")
    lm = tm.model_index("LM (batch size 20)")
    rec = tm.model_index("Recommendation (batch size 512)")
    models = np.array([r18, lm, rec, tm.model_index("cifar10"), tm.model_index("bert")])
    one = tm.phi(models, np.ones(len(models)), np.ones(len(models)))
    np.testing.assert_allclose(one, 1.0)
    # Below the memory floor the job cannot run.
    below = tm.phi(models, np.ones(len(models)), np.full(len(models), tm.mem_floor - 0.05))
    np.testing.assert_array_equal(below, 0.0)
    # At the floor: mem_rho.
    at = tm.phi(np.array([r18]), np.array([1.0]), np.array([tm.mem_floor]))
    assert float(at[0]) == pytest.approx(tm.mem_rho)
    # Lots of CPU: capped by the ceiling; insensitive models stay at 1.
    big = tm.phi(models, np.full(len(models), 100.0), np.ones(len(models)))
    assert big[0] == pytest.approx(tm.cpu_ceiling[r18]) and tm.cpu_ceiling[r18] == 1.5
    assert big[1] == pytest.approx(1.0)
    assert big[2] == pytest.approx(1.5)
    assert big[4] == pytest.approx(1.0)
    # Less CPU slows sensitive models by (c/c_req)^alpha.
    half = tm.phi(np.array([r18, rec, lm]), np.full(3, 0.5), np.ones(3))
    np.testing.assert_allclose(half, [0.5**0.7, 0.5**0.3, 1.0])
    np.testing.assert_array_equal(tm.best_phi(np.array([r18, lm])), [1.5, 1.0])
    # No CPU at all: sensitive models stop, insensitive ones (alpha = 0, 0**0 = 1) do not.
    zero = tm.phi(np.array([r18, lm]), np.zeros(2), np.ones(2))
    np.testing.assert_array_equal(zero, [0.0, 1.0])


@pytest.mark.parametrize("field", ["cpu_alpha", "cpu_ceiling"])
def test_negative_cpu_parameters_are_rejected(tm: ThroughputModel, field: str) -> None:
    bad = getattr(tm, field).copy()
    bad[3] = -0.5
    with pytest.raises(HetschedError, match=f"{field}.*{re.escape(tm.models[3])}.*>= 0"):
        replace(tm, **{field: bad})


def test_cpu_classes_and_restart_delays(tm: ThroughputModel) -> None:
    expect_alpha = {"A3C": 0.7, "CycleGAN": 0.7, "cifar10": 0.7, "imagenet": 0.7, "yolov3": 0.7,
                    "ncf": 0.3, "deepspeech2": 0.3, "bert": 0.0, "gpt_pmp": 0.0,
                    "Transformer (batch size 64)": 0.0, "LM (batch size 80)": 0.0,
                    "ResNet-50 (batch size 32)": 0.7, "Recommendation (batch size 8192)": 0.3}  # fmt: skip
    for name, alpha in expect_alpha.items():
        assert tm.cpu_alpha[tm.model_index(name)] == alpha, name
    assert np.all((tm.cpu_ceiling == 1.5) == (tm.cpu_alpha > 0))
    assert np.all(tm.cpu_ceiling[tm.cpu_alpha == 0] == 1.0)
    delays = {"cifar10": 50, "deepspeech2": 25, "bert": 120, "yolov3": 80, "imagenet": 250,
              "ncf": 15, "gpt_pmp": 30, "A3C": 30}  # fmt: skip
    for name, d in delays.items():
        assert tm.restart_delay_s[tm.model_index(name)] == d, name


def test_interference(tm: ThroughputModel) -> None:
    a3c = tm.model_index("A3C")
    r50 = tm.model_index("ResNet-50 (batch size 128)")
    r18 = tm.model_index("ResNet-18 (batch size 16)")
    v = k("v100")
    # Gavel says [0, 0] for A3C with ResNet-50 bs128 on one V100.
    assert not tm.colocatable(np.array(a3c), np.array(r50), np.array(v))
    assert np.isnan(tm.pair_iota[a3c, r50, v])
    # A3C with ResNet-18 bs16 on V100: A3C keeps 5.573 of 7.176 steps/s.
    assert tm.colocatable(np.array(a3c), np.array(r18), np.array(v))
    assert tm.pair_iota[a3c, r18, v] == pytest.approx(1 - 5.5732 / 7.1758, abs=1e-3)
    finite = tm.pair_iota[np.isfinite(tm.pair_iota)]
    assert np.all(finite >= 0) and np.all(finite <= 0.95)
    # Unmeasured types reuse the pair's v100 value, [0, 0] stays NaN.
    a100 = k("a100")
    assert np.isnan(tm.pair_iota[a3c, r50, a100])
    assert tm.pair_iota[a3c, r18, a100] == tm.pair_iota[a3c, r18, v]
    # Sia apps co-locate with the per-type median (maifs.md: ~0.46 K80, 0.41 P100, 0.32 V100).
    cif, bert = tm.model_index("cifar10"), tm.model_index("bert")
    assert tm.colocatable(np.array(cif), np.array(bert), np.array(a100))
    assert tm.colocatable(np.array(cif), np.array(r18), np.array(k("t4")))
    for t, med in (("k80", 0.46), ("p100", 0.41), ("v100", 0.32)):
        assert tm.pair_iota[cif, r18, k(t)] == pytest.approx(med, abs=0.01), t
    # Fewer [0, 0] pairs on P100 than on K80, as in the oracle (20 vs 87).
    gav = tm.pair_iota[:26, :26]
    assert np.isnan(gav[:, :, k("k80")]).sum() == 87
    assert np.isnan(gav[:, :, k("p100")]).sum() == 20
    assert np.isnan(gav[:, :, v]).sum() == 40


# ----------------------------------------------------------------------------- loading
def test_load_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "table.npz"
    with pytest.raises(HetschedError, match=str(missing.name)) as err:
        ThroughputModel.load(missing)
    assert str(missing) in str(err.value)


def test_save_load_roundtrip(tm: ThroughputModel, tmp_path: Path) -> None:
    out = tmp_path / "t.npz"
    tm.save(out)
    back = ThroughputModel.load(out)
    assert back.models == tm.models and back.family == tm.family
    np.testing.assert_array_equal(back.tput, tm.tput)
    np.testing.assert_array_equal(back.measured, tm.measured)
    np.testing.assert_array_equal(back.pair_iota, tm.pair_iota)
    np.testing.assert_array_equal(back.default_work, tm.default_work)
    assert back.sources == tm.sources


def test_load_rejects_missing_field(tm: ThroughputModel, tmp_path: Path) -> None:
    bad = tmp_path / "bad.npz"
    with np.load(TABLE) as z:
        fields = {f: z[f] for f in z.files if f != "pair_iota"}
    np.savez(bad, **fields)
    with pytest.raises(HetschedError, match="pair_iota"):
        ThroughputModel.load(bad)


# ----------------------------------------------------------------------------- builder helpers
def test_fill_curve_interpolates_and_clamps_extrapolation() -> None:
    bp = load_builder()
    vals = np.array([1.0, 0.0, 4.0, 6.0, 0, 0, 0, 0])
    known = np.array([True, False, True, True, False, False, False, False])
    out, filled = bp.fill_curve(vals, known)
    assert out[1] == pytest.approx(2.0)  # geometric midpoint of 1 and 4
    assert out[4] == pytest.approx(6.0 * 1.5) and out[7] == pytest.approx(6.0 * 1.5**4)
    assert filled.tolist() == [False, True, False, False, True, True, True, True]
    # Factor above 2 is clamped to 2, below 1 to 1; values below the first known level -> 0.
    up, _ = bp.fill_curve(
        np.array([0, 1.0, 5.0, 0, 0, 0, 0, 0]), np.array([0, 1, 1, 0, 0, 0, 0, 0], dtype=bool)
    )
    assert up[0] == 0.0 and up[3] == pytest.approx(10.0) and up[7] == pytest.approx(5.0 * 2**5)
    down, _ = bp.fill_curve(
        np.array([4.0, 3.0, 0, 0, 0, 0, 0, 0]), np.array([1, 1, 0, 0, 0, 0, 0, 0], dtype=bool)
    )
    np.testing.assert_allclose(down[2:], 3.0)
    zero, _ = bp.fill_curve(
        np.array([4.0, 0.0, 0, 0, 0, 0, 0, 0]), np.array([1, 1, 0, 0, 0, 0, 0, 0], dtype=bool)
    )
    np.testing.assert_array_equal(zero[1:], 0.0)


def test_sia_packed_and_spread_selection() -> None:
    bp = load_builder()
    val = bp.Validation(m0=8.0, max_batch=64.0, var=1.0, sqr=0.0, last_progress=10.0)

    def row(pl: str, step: float) -> object:
        return bp.Row(len(pl), sum(map(int, pl)), pl, 8.0, step, 0.0)

    rows = [row("1", 1.0), row("4", 1.0), row("13", 2.0), row("22", 4.0), row("1111", 8.0),
            bp.Row(2, 8, None, 8.0, 2.0, 0.0), row("44", 1.0)]  # fmt: skip
    packed, spread = bp.sia_measured("cifar10", "aws", rows, val)
    assert packed == {1: pytest.approx(8.0), 4: pytest.approx(32.0), 8: pytest.approx(64.0)}
    # 4 GPUs: 2 nodes (twice the minimum), most balanced "22" rather than "13".
    assert spread[4] == pytest.approx(8.0)
    # 8 GPUs on 4-GPU nodes: the placement "44" is the packed one; no spread measured.
    assert 8 not in spread
    # Total batch above the largest validated batch is dropped.
    big = [bp.Row(1, 4, "4", 32.0, 1.0, 0.0)]
    assert bp.sia_measured("cifar10", "aws", big, val) == ({}, {})


def test_integer_count_lookup_equals_the_interpolation(tm: ThroughputModel) -> None:
    # Integer GPU counts come from a table built once; it must give the interpolation's numbers,
    # including 0 below 1 GPU and above the largest tabulated count.
    M, K = tm.num_models, len(tm.gpu_types)
    m, k, n, s = np.meshgrid(
        np.arange(M), np.arange(K), np.arange(-1, tm.max_count + 4), [False, True], indexing="ij"
    )
    fast = tm.isolated(m, k, n, s)
    slow = tm.isolated(m, k, n.astype(np.float64), s)  # float counts take the formula
    np.testing.assert_array_equal(fast, slow)
    assert (fast[:, :, :2] == 0).all() and (fast[:, :, -3:] == 0).all()
    assert (fast > 0).any()


def test_single_node_tput_is_zero_where_no_node_hosts_the_job_or_the_type_is_disallowed(
    tm: ThroughputModel,
) -> None:
    """A 4-GPU V100 node and a 1-GPU T4 node: a 2-GPU job runs alone only on the V100; a
    1-GPU job on both, except where its allowed types exclude one."""
    from conftest import make_cluster

    from hetsched.sim.throughput import single_node_tput

    cl = make_cluster(
        [
            {"gpu_type": "v100", "count": 1, "gpus": 4, "cpus": 32, "mem_gib": 128},
            {"gpu_type": "t4", "count": 1, "gpus": 1, "cpus": 8, "mem_gib": 32},
        ]
    )
    allowed = np.ones((3, len(GPU_TYPE_NAMES)), dtype=bool)
    allowed[2, k("t4")] = False
    out = single_node_tput(tm, cl, np.array([0, 0, 0]), np.array([2, 1, 1]), allowed)
    assert out.shape == (3, len(GPU_TYPE_NAMES))
    want_v100 = tm.isolated(0, k("v100"), np.array([2, 1, 1]))
    np.testing.assert_allclose(out[:, k("v100")], want_v100)
    assert (want_v100 > 0).all()
    np.testing.assert_allclose(out[:, k("t4")], [0.0, tm.isolated(0, k("t4"), 1), 0.0])
    assert out[1, k("t4")] > 0
    others = [i for i in range(len(GPU_TYPE_NAMES)) if i not in (k("v100"), k("t4"))]
    assert not out[:, others].any()  # no node of those types
