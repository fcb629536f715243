"""The clairvoyant reference: heterogeneity-aware SRPT."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.baselines.srpt import SRPT
from hetsched.benchmark.scenarios import get_scenario
from hetsched.envs.presets import resolve_cluster, resolve_throughput
from hetsched.sim.engine import SimConfig, Simulator


def _state(name: str) -> tuple[Simulator, SRPT]:
    sc = get_scenario(name)
    tm, cl = resolve_throughput(None), resolve_cluster(sc.cluster)
    wl = sc.factory()(throughput=tm, cluster=cl, rng=np.random.default_rng(0))
    wl = wl.subset(np.arange(wl.num_jobs))
    wl.arrival[:] = 0.0  # everyone waits at once
    sim = Simulator(cl, wl, tm, SimConfig(), seed=0)
    pol = SRPT()
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    return sim, pol


def test_ranks_by_remaining_time_at_the_fastest_rate_and_starts_the_shortest() -> None:
    sim, pol = _state("itp_c10_sia64_busy")
    st = sim.state(60.0)
    order = pol.ranked(st)
    best = pol._rate[order].max(axis=1)
    est = st.remaining[order] / best
    assert np.all(np.diff(est) >= 0)
    alloc = pol.decide(st)
    assert int(order[0]) in set(alloc.job.tolist())  # the shortest job starts
    j = int(order[0])
    types = st.cluster.node_type[alloc.node[alloc.job == j]]
    assert np.all(pol._rate[j, types] == pol._rate[j].max())  # on its fastest type


def test_min_speed_keeps_jobs_off_slow_types() -> None:
    sim, _ = _state("itp_c10_sia64_busy")
    st = sim.state(60.0)
    strict = SRPT(min_speed=1.0)
    strict.reset(st.cluster, st.workload, st.throughput, np.random.default_rng(0))
    alloc = strict.decide(st)
    for j in np.unique(alloc.job).tolist():
        types = st.cluster.node_type[alloc.node[alloc.job == j]]
        assert np.all(strict._rate[j, types] == strict._rate[j].max())
    with pytest.raises(ValueError, match="min_speed=0"):
        SRPT(min_speed=0.0)
