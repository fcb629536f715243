"""Seeds vary the workload: every env preset and every scenario, N seeds -> N workloads."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.benchmark import SCENARIOS, scenarios_in
from hetsched.benchmark.windows import at_load, offered_load, seeded_windows
from hetsched.envs import ClusterCentralEnv
from hetsched.envs.presets import (
    env_workload,
    resolve_cluster,
    resolve_throughput,
    resolve_workload,
)
from hetsched.sim.paths import shared_data_root
from hetsched.sim.workload import Workload

N = 4
#: The workload presets the envs take by name, with a cluster each runs on.
ENV_PRESETS = [
    ("philly", "sia_64", {"num_jobs": 48}),
    ("sia_philly", "sia_64", {}),
    ("sia_helios", "sia_64", {}),
    ("sia_newtrace", "sia_64", {}),
    ("pollux_philly", "sia_64", {"max_gpus_policy": "cap"}),
    ("alibaba", "pai_mixed", {}),
    ("itp", "sia_64", {}),
    ("gavel_synthetic", "gavel_108", {}),
]


def fingerprint(wl: Workload) -> bytes:
    """The jobs' arrivals, models, work and requests (ids alone may repeat across windows)."""
    return b"|".join(a.tobytes() for a in (wl.arrival, wl.model, wl.work, wl.req_gpus, wl.max_gpus))


def draws(factory: object, cluster: str, seeds: range) -> list[Workload]:
    tm = resolve_throughput(None)
    cl = resolve_cluster(cluster)
    assert callable(factory)
    return [factory(throughput=tm, cluster=cl, rng=np.random.default_rng(s)) for s in seeds]


SHARED = ("sia_philly", "sia_helios", "sia_newtrace", "alibaba")


@pytest.mark.parametrize(("preset", "cluster", "kw"), ENV_PRESETS)
def test_env_presets_give_one_workload_per_seed(preset: str, cluster: str, kw: dict) -> None:
    if preset in SHARED and not shared_data_root().is_dir():
        pytest.skip(f"{preset} reads the shared data directory, absent here")
    wls = draws(env_workload(preset, kw), cluster, range(N))
    assert len({fingerprint(w) for w in wls}) == N
    again = draws(env_workload(preset, kw), cluster, range(N))  # same seed, same workload
    assert [fingerprint(w) for w in again] == [fingerprint(w) for w in wls]


def test_env_resets_draw_new_windows_of_the_default_preset() -> None:
    env = ClusterCentralEnv()  # philly, 48 jobs
    seen = []
    for seed in (0, 1, 2):
        env.reset(seed=seed)
        assert env.core.wl is not None and env.core.wl.num_jobs == 48
        seen.append(fingerprint(env.core.wl))
    assert len(set(seen)) == 3
    env.reset(seed=1)
    assert env.core.wl is not None and fingerprint(env.core.wl) == seen[1]


def test_a_pinned_window_stays_fixed() -> None:
    kw = {"num_jobs": 30, "start": 100, "busiest": False}
    wls = draws(env_workload("philly", kw), "sia_64", range(3))
    ids = {w.job_id.tobytes() for w in wls}
    assert len(ids) == 1  # the same jobs; only the models assigned differ
    assert (
        wls[0].job_id[0]
        == resolve_workload("philly", kw)(  # type: ignore[operator]
            throughput=resolve_throughput(None),
            cluster=resolve_cluster("sia_64"),
            rng=np.random.default_rng(0),
        ).job_id[0]
    )


@pytest.mark.parametrize("name", [s.name for s in scenarios_in("quick")])
def test_quick_scenarios_vary_with_the_seed(name: str) -> None:
    sc = SCENARIOS[name]
    wls = draws(sc.factory(), sc.cluster, range(N))
    assert len({fingerprint(w) for w in wls}) == N
    assert all(w.num_jobs == sc.num_jobs and w.name == name for w in wls)


@pytest.mark.slow
def test_every_scenario_varies_with_the_seed_and_hits_its_load() -> None:
    tm = resolve_throughput(None)
    for sc in SCENARIOS.values():
        wls = draws(sc.factory(), sc.cluster, range(N))
        assert len({fingerprint(w) for w in wls}) == N, sc.name
        cl = resolve_cluster(sc.cluster)
        for w in wls:
            assert offered_load(w, tm, cl) == pytest.approx(sc.offered_load, rel=1e-9), sc.name


def test_at_load_rescales_arrivals() -> None:
    tm = resolve_throughput(None)
    cl = resolve_cluster("sia_64")
    wl = draws(env_workload("itp", {"num_jobs": 50}), "sia_64", range(1))[0]
    rho = offered_load(wl, tm, cl)
    twice = at_load(wl, 2 * rho, tm, cl)
    assert np.allclose(twice.arrival, wl.arrival / 2)
    with pytest.raises(ValueError, match="load=-1"):
        at_load(wl, -1.0, tm, cl)


def test_bad_window_arguments() -> None:
    base = resolve_workload("sia_helios")
    with pytest.raises(ValueError, match=r"indices=\[11\]"):
        seeded_windows(base, indices=[11])
    with pytest.raises(ValueError, match="num_jobs=0"):
        seeded_windows(base, num_jobs=0)
    with pytest.raises(ValueError, match="not a preset of a trace loader"):
        seeded_windows(lambda **kw: None)


def test_seeded_windows_pickle_and_draw_the_same_after_a_round_trip() -> None:
    """Training sends envs built on scenario factories to worker processes (spawn)."""
    import pickle

    from hetsched.benchmark.scenarios import get_scenario
    from hetsched.envs.presets import resolve_cluster
    from hetsched.sim.throughput import default_throughput

    sc = get_scenario("itp_c05_sia64_light")
    f = sc.factory()
    g = pickle.loads(pickle.dumps(f))
    cl, tm = resolve_cluster(sc.cluster), default_throughput()
    a = f(throughput=tm, cluster=cl, rng=np.random.default_rng(7))
    b = g(throughput=tm, cluster=cl, rng=np.random.default_rng(7))
    assert a.num_jobs == b.num_jobs == sc.num_jobs
    assert np.array_equal(a.arrival, b.arrival) and np.array_equal(a.work, b.work)
