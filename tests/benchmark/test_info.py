"""Information tracks: estimates, the policy view, the env features and the teacher."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hetsched.benchmark.info import (
    FLOOR,
    INFO_TABLE,
    InfoPolicy,
    RuntimeInfo,
    noise_rng,
    uses_remaining,
    with_info,
)
from hetsched.benchmark.runner import Cell, run_cell
from hetsched.envs import ClusterCentralEnv
from hetsched.envs.presets import make_env


def test_exact_is_the_truth_and_noisy_is_lognormal() -> None:
    rem, work = np.array([5.0, 0.0, 10.0]), np.array([10.0, 4.0, 10.0])
    prior = np.ones(3)
    exact = RuntimeInfo("exact")
    r, w = exact.estimate(rem, work, exact.factors(3, noise_rng(0)), prior)
    assert np.array_equal(r, rem) and np.array_equal(w, work)
    noisy = RuntimeInfo("noisy", sigma=0.7)
    f = noisy.factors(20_000, noise_rng(3))
    assert np.std(np.log(f)) == pytest.approx(0.7, rel=0.03)
    assert np.array_equal(f, noisy.factors(20_000, noise_rng(3)))  # seeded
    r, w = noisy.estimate(rem, work, f[:3], prior)
    assert r[1] == 0.0  # finished stays finished
    assert r[0] == pytest.approx(max(10.0 * f[0] - 5.0, FLOOR * 10.0 * f[0]))
    assert np.allclose(w - r, work - rem)  # progress is observable
    zero = RuntimeInfo("noisy", sigma=0.0)
    assert np.allclose(zero.estimate(rem, work, zero.factors(3, noise_rng(0)), prior)[0], rem)


def test_none_sees_no_remaining_work() -> None:
    none = RuntimeInfo("none")
    prior = np.array([2.0, 2.0])
    work_a, work_b = np.array([10.0, 100.0]), np.array([50.0, 7.0])
    rem_a = work_a - np.array([1.0, 3.0])  # the same progress, different true work
    rem_b = work_b - np.array([1.0, 3.0])
    ra = none.estimate(rem_a, work_a, np.ones(2), prior)[0]
    rb = none.estimate(rem_b, work_b, np.ones(2), prior)[0]
    assert np.array_equal(ra, rb)
    assert np.array_equal(ra, [2.0, 3.0])  # as long again as it ran, at least the prior


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"mode": "noisy", "sigma": -0.1}, r"runtime_sigma=-0.1 must be a finite number >= 0"),
        ({"mode": "noisy", "sigma": float("nan")}, "runtime_sigma=nan"),
        ({"mode": "oracle"}, r"runtime_info='oracle' is not one of \['exact', 'noisy', 'none'\]"),
    ],
)
def test_bad_tracks_are_refused(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RuntimeInfo(**kw)


def test_info_table_names_every_scheduler_preset() -> None:
    from hetsched.envs.presets import CONF_DIR

    presets = {p.stem for p in (CONF_DIR / "scheduler").glob("*.yaml")}
    assert presets <= set(INFO_TABLE)
    assert uses_remaining("srpt") and uses_remaining("maifs[foo]") and not uses_remaining("sia")


class _Spy:
    """A policy that records the remaining work and total work it is shown."""

    name = "spy"
    event_driven = True

    def __init__(self) -> None:
        self.seen: list[np.ndarray] = []
        self.work: np.ndarray | None = None

    def reset(self, cluster: Any, workload: Any, throughput: Any, rng: Any) -> None:
        self.work = workload.work.copy()

    def decide(self, state: Any) -> Any:
        from hetsched.baselines.heuristics import FIFO

        self.seen.append(state.remaining.copy())
        return FIFO().decide(state)


def test_info_policy_shows_estimates_and_forwards_attributes() -> None:
    spy = _Spy()
    assert with_info(spy, RuntimeInfo("exact"), 0) is spy
    wrapped = with_info(spy, RuntimeInfo("noisy", 0.5), seed=4)
    assert isinstance(wrapped, InfoPolicy) and wrapped.event_driven and wrapped.name == "spy"
    from hetsched.benchmark.scenarios import get_scenario
    from hetsched.envs.presets import resolve_cluster, resolve_throughput
    from hetsched.evaluation import run_one
    from hetsched.sim.engine import SimConfig

    sc = get_scenario("itp_c10_sia64_busy")
    tm, cl = resolve_throughput(None), resolve_cluster(sc.cluster)
    wl = sc.factory()(throughput=tm, cluster=cl, rng=np.random.default_rng(0))
    out = run_one(
        wrapped, name="spy", cluster=cl, workload=wl, throughput=tm, sim_config=SimConfig(),
        seed=0, rng=np.random.default_rng(1),
    )  # fmt: skip
    assert spy.work is not None and not np.allclose(spy.work, wl.work)
    f = RuntimeInfo("noisy", 0.5).factors(wl.num_jobs, noise_rng(4))
    assert np.allclose(spy.work, wl.work * f)
    fifo = {"_target_": "hetsched.baselines.heuristics.FIFO"}
    srpt = {"_target_": "hetsched.baselines.srpt.SRPT"}
    a, b = (
        run_cell(Cell("philly_sia64_overloaded", "srpt", srpt, m, 1.0, 0))
        for m in ("exact", "none")
    )
    assert a["avg_jct_h"] != b["avg_jct_h"]  # SRPT ranks by the remaining work it is shown
    c, d = (
        run_cell(Cell("philly_sia64_overloaded", "fifo", fifo, m, 1.0, 0))
        for m in ("exact", "none")
    )
    assert c["avg_jct_h"] == d["avg_jct_h"]
    assert np.all(np.isfinite(out.result.finish_time))  # the truth still drives the engine


@pytest.mark.slow
def test_tracks_change_a_duration_scheduler_not_a_blind_one() -> None:
    def jct(sched: str, node: dict[str, Any], mode: str) -> float:
        cell = Cell("itp_c10_sia64_busy", sched, node, mode, 1.0, 0)
        return float(run_cell(cell)["avg_jct_h"])

    srpt = {"_target_": "hetsched.baselines.srpt.SRPT"}
    fifo = {"_target_": "hetsched.baselines.heuristics.FIFO"}
    assert len({jct("srpt", srpt, m) for m in ("exact", "noisy", "none")}) == 3
    assert len({jct("fifo", fifo, m) for m in ("exact", "noisy", "none")}) == 1


def _window_remaining_feature(env: ClusterCentralEnv) -> np.ndarray:
    core = env.core
    assert core.wl is not None and core.sim is not None
    return core.features.observed_remaining(core.wl, core.sim.remaining)[0]


@pytest.mark.parametrize("mode", ["noisy", "none"])
def test_env_features_and_teacher_honour_the_track(mode: str) -> None:
    base = make_env(ClusterCentralEnv, workload="itp", seed=0)
    env = make_env(ClusterCentralEnv, workload="itp", seed=0, runtime_info=mode, runtime_sigma=1.0)
    o0, _ = base.reset(seed=0)
    o1, _ = env.reset(seed=0)
    assert np.array_equal(base.core.wl.work, env.core.wl.work)  # the same workload
    assert not np.array_equal(o0, o1)  # the remaining-work features differ
    true = env.core.sim.remaining
    seen = _window_remaining_feature(env)
    assert not np.allclose(seen, true)
    from hetsched.agents import signals

    assert np.array_equal(signals.seen_remaining(env.core), seen)
    exact = make_env(ClusterCentralEnv, workload="itp", seed=0, runtime_info="exact")
    exact.reset(seed=0)
    assert np.array_equal(signals.seen_remaining(exact.core), exact.core.sim.remaining)


@pytest.mark.slow
def test_maifs_teacher_runs_on_every_track() -> None:
    from omegaconf import OmegaConf

    from hetsched.envs.presets import scheduler_node

    raw = OmegaConf.to_container(scheduler_node("maifs_teacher"), resolve=True)
    assert isinstance(raw, dict)
    d = {str(k): v for k, v in raw.items()}
    res = {
        m: run_cell(Cell("pollux_sia64_busy_elastic", "maifs_teacher", d, m, 0.5, 0))
        for m in ("exact", "noisy", "none")
    }
    assert all(r["unfinished_jobs"] == 0 for r in res.values())
    assert res["exact"]["avg_jct_h"] != res["none"]["avg_jct_h"]


def test_make_env_rejects_a_scenario_with_its_own_workload() -> None:
    with pytest.raises(ValueError, match="drop \\['workload'\\] or the scenario"):
        make_env(ClusterCentralEnv, scenario="itp_c10_sia64_busy", workload="philly")
