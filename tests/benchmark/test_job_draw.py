"""Job-mix randomisation (:mod:`hetsched.benchmark.job_draw`)."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.benchmark.job_draw import JobMixDraw
from hetsched.benchmark.scenarios import get_scenario
from hetsched.benchmark.windows import best_isolated_s, offered_load
from hetsched.envs.presets import resolve_cluster, resolve_throughput
from hetsched.sim.errors import ConfigError

SCENARIO = "itp_c01_sia64_busy"  # a train window of 1-GPU jobs (99 %)


def _draw(fraction: float, seed: int, gpus: tuple[int, ...] = (2, 4, 8, 16)):  # type: ignore[no-untyped-def]
    sc = get_scenario(SCENARIO)
    tm, cl = resolve_throughput(None), resolve_cluster(sc.cluster)
    d = JobMixDraw.build(sc.factory(), fraction, [0.3, 0.6], gpus)
    inner = sc.factory()(throughput=tm, cluster=cl, rng=np.random.default_rng(seed))
    return inner, d(throughput=tm, cluster=cl, rng=np.random.default_rng(seed)), tm, cl


def test_fraction_zero_returns_the_inner_window() -> None:
    inner, out, _, _ = _draw(0.0, 3)
    for f in ("req_gpus", "min_gpus", "max_gpus", "work", "arrival", "model"):
        np.testing.assert_array_equal(getattr(out, f), getattr(inner, f))


def test_a_redrawn_window_keeps_its_load_and_its_job_lengths() -> None:
    inner, out, tm, cl = _draw(1.0, 3)
    changed = out.req_gpus != inner.req_gpus
    assert 0.2 < changed.mean() < 0.7  # a share in [0.3, 0.6], less counts equal to the old one
    assert set(out.req_gpus[changed].tolist()) <= {2, 4, 8, 16}
    np.testing.assert_array_equal(out.min_gpus, out.req_gpus)  # rigid jobs stay rigid
    np.testing.assert_array_equal(out.max_gpus, out.req_gpus)
    assert offered_load(out, tm, cl) == pytest.approx(offered_load(inner, tm, cl))
    np.testing.assert_allclose(best_isolated_s(out, tm, cl), best_isolated_s(inner, tm, cl))
    np.testing.assert_array_equal(out.model, inner.model)  # the same jobs, other requests
    # more GPU-time at the same load: the arrivals spread out
    assert out.arrival[-1] - out.arrival[0] > inner.arrival[-1] - inner.arrival[0]


def test_a_count_larger_than_every_allowed_pool_leaves_the_job_as_it_was() -> None:
    inner, out, _, cl = _draw(1.0, 3, gpus=(4096,))
    assert cl.num_gpus < 4096
    np.testing.assert_array_equal(out.req_gpus, inner.req_gpus)


def test_the_draw_is_seeded() -> None:
    _, a, _, _ = _draw(1.0, 4)
    _, b, _, _ = _draw(1.0, 4)
    _, c, _, _ = _draw(1.0, 5)
    np.testing.assert_array_equal(a.req_gpus, b.req_gpus)
    np.testing.assert_array_equal(a.arrival, b.arrival)
    assert not np.array_equal(a.req_gpus, c.req_gpus[: len(a.req_gpus)])


@pytest.mark.parametrize(
    ("fraction", "share", "gpus", "field"),
    [
        (1.5, [0.2, 0.7], [2], "fraction"),
        (0.5, [0.7, 0.2], [2], "share"),
        (0.5, [0.2, 1.2], [2], "share"),
        (0.5, [0.2, 0.7], [], "gpus"),
        (0.5, [0.2, 0.7], [0, 2], "gpus"),
    ],
)
def test_bad_settings_are_refused_by_name(
    fraction: float, share: list[float], gpus: list[int], field: str
) -> None:
    with pytest.raises(ConfigError, match=f"agent.job_draw.{field}="):
        JobMixDraw.build(lambda **_: None, fraction, share, gpus)
