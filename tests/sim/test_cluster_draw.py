"""Random cluster shapes (hetsched.sim.cluster_draw)."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.cluster_draw import ClusterDraw
from hetsched.sim.errors import ClusterSpecError

KW = dict(
    gpu_types=["k80", "v100", "t4", "a100"],
    groups=[2, 3],
    nodes=[1, 6],
    gpus_per_node=[1, 4, 8],
    cpus_per_gpu=[8, 16],
    mem_gib_per_gpu=[32, 64],
    total_gpus=[16, 96],
)


def test_draws_respect_every_range_and_differ_by_seed() -> None:
    d = ClusterDraw.build(**KW)  # type: ignore[arg-type]
    allowed = {GPU_TYPE_NAMES.index(t) for t in KW["gpu_types"]}  # type: ignore[union-attr]
    shapes = set()
    for seed in range(40):
        c = d(np.random.default_rng(seed))
        types = set(np.unique(c.node_type).tolist())
        assert types <= allowed and 2 <= len(types) <= 3
        assert 16 <= c.num_gpus <= 96
        assert set(np.unique(c.node_gpus).tolist()) <= {1, 4, 8}
        assert set(np.unique(c.node_cpus / c.node_gpus).tolist()) <= {8.0, 16.0}
        assert set(np.unique(c.node_mem / c.node_gpus).tolist()) <= {32.0, 64.0}
        for t in types:  # one node size per group (GPU type)
            assert len(np.unique(c.node_gpus[c.node_type == t])) == 1
        shapes.add((c.node_type.tobytes(), c.node_gpus.tobytes()))
    assert len(shapes) > 30  # different seeds give different clusters


def test_same_seed_same_cluster() -> None:
    d = ClusterDraw.build(**KW)  # type: ignore[arg-type]
    a, b = d(np.random.default_rng(7)), d(np.random.default_rng(7))
    for f in ("node_type", "node_gpus", "node_cpus", "node_mem"):
        assert np.array_equal(getattr(a, f), getattr(b, f))


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("gpu_types", ["v100", "h9000"], "h9000"),
        ("gpu_types", ["v100", "v100"], "distinct"),
        ("groups", [3, 2], "cluster_draw.groups"),
        ("groups", [1, 5], "at most 4 groups"),
        ("nodes", [0, 3], "cluster_draw.nodes"),
        ("gpus_per_node", [1.5], "whole numbers"),
        ("cpus_per_gpu", [], "cluster_draw.cpus_per_gpu"),
        ("mem_gib_per_gpu", [-1], "cluster_draw.mem_gib_per_gpu"),
    ],
)
def test_bad_settings_are_one_line_errors(field: str, value: object, says: str) -> None:
    with pytest.raises(ClusterSpecError, match=says):
        ClusterDraw.build(**{**KW, field: value})  # type: ignore[arg-type]


def test_an_unreachable_gpu_total_is_an_error_not_a_hang() -> None:
    d = ClusterDraw.build(**{**KW, "total_gpus": [1000, 2000]})  # type: ignore[arg-type]
    with pytest.raises(ClusterSpecError, match="widen total_gpus"):
        d(np.random.default_rng(0))
