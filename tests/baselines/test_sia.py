"""Sia and the Pollux-like baseline: configurations, cost pipeline, estimator, MILP, placement."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from conftest import make_cluster, make_tm, make_workload

from hetsched.baselines.goodput import GoodputEstimator
from hetsched.baselines.pollux import PolluxLike
from hetsched.baselines.sia import (
    HighsModelCache,
    MilpResult,
    Sia,
    SolverError,
    powered_matrix,
    sia_configurations,
    solve_assignment_milp,
)
from hetsched.baselines.sia_cost import job_configs
from hetsched.baselines.sia_milp import exact_shortcut
from hetsched.resources import CONF_DIR
from hetsched.sim.allocation import Allocation
from hetsched.sim.catalog import gpu_type_index
from hetsched.sim.cluster import Cluster
from hetsched.sim.engine import SimConfig, SimResult, Simulator
from hetsched.sim.faults import CheckpointPolicy, FailureSpec, load_failure_trace
from hetsched.sim.metrics import compute_metrics, extended_metrics
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.workload import Workload

T4, A100, RTX = gpu_type_index("t4"), gpu_type_index("a100"), gpu_type_index("rtx2080ti")


def sia64() -> Cluster:
    """Sia's 64-GPU heterogeneous cluster (sia.md §9)."""
    return make_cluster(
        [
            {"gpu_type": "t4", "count": 6, "gpus": 4, "cpus": 48, "mem_gib": 192},
            {"gpu_type": "rtx2080ti", "count": 3, "gpus": 8, "cpus": 64, "mem_gib": 384},
            {"gpu_type": "a100", "count": 2, "gpus": 8, "cpus": 256, "mem_gib": 1024},
        ],
        name="sia_64",
    )


def start(policy: Sia, cl: Cluster, wl: Workload, tm: ThroughputModel) -> Simulator:
    policy.reset(cl, wl, tm, np.random.default_rng(0))
    return Simulator(cl, wl, tm, SimConfig(round_s=60.0))


def job_types(sim: Simulator, alloc: Allocation) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for j, n in zip(alloc.job.tolist(), alloc.node.tolist(), strict=True):
        out.setdefault(j, set()).add(int(sim.cluster.node_type[n]))
    return out


# ---------------------------------------------------------------------- configurations
def test_configuration_set_matches_sia_table_on_sia_64() -> None:
    k, nodes, gpus = sia_configurations(sia64())
    got = list(zip(k.tolist(), nodes.tolist(), gpus.tolist(), strict=True))
    want = (
        [(T4, 1, 1), (T4, 1, 2), (T4, 1, 4)]
        + [(T4, n, 4 * n) for n in range(2, 7)]
        + [(A100, 1, 1), (A100, 1, 2), (A100, 1, 4), (A100, 1, 8), (A100, 2, 16)]
        + [(RTX, 1, 1), (RTX, 1, 2), (RTX, 1, 4), (RTX, 1, 8), (RTX, 2, 16), (RTX, 3, 24)]
    )
    assert len(got) == 19
    assert got == want


def test_configuration_caps() -> None:
    cl = make_cluster([{"gpu_type": "t4", "count": 20, "gpus": 4, "cpus": 48, "mem_gib": 192}])
    _, _, gpus = sia_configurations(cl)
    assert gpus.max() == 64  # 16 nodes x 4, not 20 x 4
    _, nodes, _ = sia_configurations(cl, max_nodes_per_type={"aws": 3})
    assert nodes.max() == 3


# ---------------------------------------------------------------------- cost pipeline
def test_normalise_restart_power_round_clip_by_hand() -> None:
    G = np.array([[2.0, 4.0, 8.0], [1.0, 1e-5, 3.0], [1.0, 2.0, 3.0]])
    valid = np.array([[True, True, True], [True, False, True], [True, True, True]])
    current = np.array([[False, True, False], [False, False, False], [True, False, False]])
    A = powered_matrix(
        G,
        valid,
        n_min=np.array([1.0, 2.0, 1.0]),
        restart_factor=np.array([0.5, 1.0, 0.0]),
        current=current,
        p=-0.5,
        clip=3000.0,
        invalid_gain=1e-4,
    )
    # Row 0: normalised [1, 2, 4]; r = 0.5 on the non-current columns -> [0.5, 2, 2].
    # Row 1: min valid 1 -> x2 (N_min = 2) -> [2, invalid 1e-4, 6].
    # Row 2: r = 0 on the non-current columns -> 0 ** -0.5 = inf -> clipped to 3000.
    want = np.array(
        [
            [round(0.5**-0.5, 2), round(2**-0.5, 2), round(2**-0.5, 2)],
            [round(2**-0.5, 2), 100.0, round(6**-0.5, 2)],
            [1.0, 3000.0, 3000.0],
        ]
    )
    np.testing.assert_allclose(A, want)
    assert A[0, 0] == 1.41 and A[1, 2] == 0.41


# ---------------------------------------------------------------------- heterogeneity
def test_sia_gives_the_fast_type_to_the_job_that_gains_most() -> None:
    base = np.ones((2, 7))
    base[0, A100], base[0, T4] = 10.0, 1.0  # job 0: A100 is 10x faster
    base[1, A100], base[1, T4] = 2.0, 1.5  # job 1: A100 is only 1.33x faster
    tm = make_tm(base)
    cl = make_cluster(
        [
            {"gpu_type": "t4", "count": 1, "gpus": 1, "cpus": 8, "mem_gib": 64},
            {"gpu_type": "a100", "count": 1, "gpus": 1, "cpus": 8, "mem_gib": 64},
        ]
    )
    # Job 1 is listed first so that arrival order cannot explain the outcome.
    wl = make_workload([0.0, 0.0], [1e5, 1e5], [1, 1], model=[1, 0])
    for policy in (Sia(), Sia(p=0.5)):
        sim = start(policy, cl, wl, tm)
        types = job_types(sim, policy.decide(sim.state(60.0)))
        assert types == {1: {A100}, 0: {T4}}


def test_pollux_estimates_do_not_depend_on_gpu_type() -> None:
    base = np.ones((2, 7))
    base[0, A100] = 10.0
    tm = make_tm(base)
    cl = make_cluster(
        [
            {"gpu_type": "t4", "count": 1, "gpus": 4, "cpus": 8, "mem_gib": 64},
            {"gpu_type": "a100", "count": 1, "gpus": 4, "cpus": 8, "mem_gib": 64},
        ]
    )
    wl = make_workload([0.0], [1e5], [1], elastic=([1], [4]))
    pol = PolluxLike()
    start(pol, cl, wl, tm)
    est = pol.estimator.estimate(np.array([0]))
    np.testing.assert_allclose(est[0, 0], est[0, 1])
    assert est[0, 0, 0] == pytest.approx((1.0 + 10.0) / 2)  # mean of the 1-GPU profiles
    sia = Sia()
    start(sia, cl, wl, tm)
    est = sia.estimator.estimate(np.array([0]))
    assert est[0, 1, 0] == pytest.approx(10.0 * est[0, 0, 0])


# ---------------------------------------------------------------------- estimator
def test_estimator_bootstraps_then_converges_to_observations() -> None:
    base = np.ones((1, 7))
    base[0, A100] = 4.0
    tm = make_tm(base, scaling=0.6)
    cl = make_cluster(
        [
            {"gpu_type": "t4", "count": 2, "gpus": 4, "cpus": 8, "mem_gib": 64},
            {"gpu_type": "a100", "count": 2, "gpus": 4, "cpus": 8, "mem_gib": 64},
        ]
    )
    wl = make_workload([0.0], [1e5], [1], elastic=([1], [8]))
    est = GoodputEstimator(tm, cl, wl, obs_weight=0.5, max_count=8)
    e = est.estimate(np.array([0]))[0]  # (Kp=2, 8): rows t4, a100
    # Profiled 1-GPU rates, then perfect 2x scaling for the first doubling.
    np.testing.assert_allclose(e[:, 0], [1.0, 4.0])
    np.testing.assert_allclose(e[:, 1], [2.0, 8.0])
    np.testing.assert_array_equal(est.max_count_allowed(np.array([0])), [2])
    # The first observation of a configuration replaces the assumption...
    true2 = float(tm.isolated(0, T4, 2))
    est.observe(np.array([0]), np.array([T4]), np.array([2]), np.array([true2]))
    assert est.estimate(np.array([0]))[0, 0, 1] == pytest.approx(true2)
    # ... and later ones move the estimate geometrically (weight 1/2) toward the new rate.
    slower = 0.8 * true2
    errs = []
    for _ in range(8):
        est.observe(np.array([0]), np.array([T4]), np.array([2]), np.array([slower]))
        errs.append(abs(est.estimate(np.array([0]))[0, 0, 1] / slower - 1.0))
    assert errs[0] > 0.05 and errs[-1] < 1e-2
    assert all(b < a for a, b in zip(errs, errs[1:], strict=False))
    est.observe(np.array([0]), np.array([T4]), np.array([2]), np.array([true2]))
    est.obs_weight = 1.0
    est.observe(np.array([0]), np.array([T4]), np.array([2]), np.array([true2]))
    e = est.estimate(np.array([0]))[0]
    # The log-log slope fitted on T4 extrapolates to 4 GPUs close to the truth (a power law).
    assert e[0, 3] == pytest.approx(float(tm.isolated(0, T4, 4)), rel=0.02)
    # A100 has no multi-GPU observation: projected from T4 with the 1-GPU ratio.
    np.testing.assert_allclose(e[1, 1:], 4.0 * e[0, 1:])
    np.testing.assert_array_equal(est.max_count_allowed(np.array([0])), [4])
    # Once observed multi-GPU on A100 the projection is dropped for A100.
    est.observe(np.array([0]), np.array([A100]), np.array([2]), np.array([5.0]))
    assert est.estimate(np.array([0]))[0, 1, 1] == pytest.approx(5.0)


def test_estimates_in_a_run_match_observed_rates() -> None:
    base = np.ones((2, 7))
    base[0, A100], base[1, RTX] = 3.0, 2.0
    tm = make_tm(base, scaling=0.8)
    cl = sia64()
    wl = make_workload(
        [0.0] * 6, [5e4] * 6, [1] * 6, model=[0, 1, 0, 1, 0, 1], elastic=([1] * 6, [16] * 6)
    )
    pol = Sia(obs_weight=1.0)
    sim = start(pol, cl, wl, tm)
    for _ in range(6):
        sim.advance(pol.decide(sim.state(60.0)), round_s=60.0)
    st = sim.state(60.0)
    pol.decide(st)  # ingests the last round's observations
    jobs, k, n = job_configs(st)
    est = pol.estimator.estimate(jobs)
    got = est[np.arange(jobs.size), pol.estimator.type_pos[k], n - 1]
    np.testing.assert_allclose(got, st.last_rate[jobs], rtol=1e-9)
    assert n.max() > 2  # they did grow past the bootstrap


# ---------------------------------------------------------------------- doubling cap / pinning
def test_doubling_cap_limits_growth_per_round() -> None:
    tm = make_tm(scaling=0.95)
    cl = make_cluster([{"gpu_type": "a100", "count": 4, "gpus": 8, "cpus": 64, "mem_gib": 512}])
    wl = make_workload([0.0], [1e7], [1], elastic=([1], [32]))
    pol = Sia(lambda_a=0.0)  # no allocation-change penalty: any gain is worth the restart
    sim = start(pol, cl, wl, tm)
    counts = []
    for _ in range(7):
        a = pol.decide(sim.state(60.0))
        counts.append(int(a.gpus.sum()))
        sim.advance(a, round_s=60.0)
    assert counts[0] == 2
    assert counts[:5] == [2, 4, 8, 16, 32]
    assert all(c <= 2 * max([1, *counts[:i]]) for i, c in enumerate(counts))


def test_restoring_job_is_pinned() -> None:
    def run(restart_s: float) -> tuple[list[dict[int, int]], Sia]:
        tm = make_tm(scaling=0.95, restart_s=restart_s)
        cl = make_cluster([{"gpu_type": "a100", "count": 1, "gpus": 4, "cpus": 64, "mem_gib": 512}])
        wl = make_workload([0.0, 100.0], [1e7, 1e7], [1, 1], elastic=([1, 1], [8, 8]))
        pol = Sia()
        sim = start(pol, cl, wl, tm)
        out = []
        for _ in range(6):
            a = pol.decide(sim.state(60.0))
            out.append({int(j): int(a.gpus[a.job == j].sum()) for j in np.unique(a.job)})
            sim.advance(a, round_s=60.0)
        return out, pol

    # Job 0 grows 2 -> 4 GPUs at t = 60 s (a restart). With a 200 s restore it is pinned at 4 GPUs
    # until t = 260 s, so job 1 (arrived at 100 s) waits until the 300 s round.
    slow, pol = run(200.0)
    assert [r.get(0) for r in slow] == [2, 4, 4, 4, 4, 2]
    assert [r.get(1, 0) for r in slow] == [0, 0, 0, 0, 0, 2]
    assert pol.stats["pinned"] == 3
    # With a 10 s restore nothing is pinned and Sia shares the GPUs from the 180 s round on.
    fast, pol = run(10.0)
    assert [r.get(1, 0) for r in fast][:4] == [0, 0, 0, 2]
    assert pol.stats["pinned"] == 0


# ---------------------------------------------------------------------- never rejected
def random_case(seed: int) -> tuple[Cluster, Workload, ThroughputModel]:
    rng = np.random.default_rng(seed)
    types = rng.choice(["t4", "a100", "rtx2080ti", "v100"], size=rng.integers(1, 4), replace=False)
    groups = []
    for t in types:
        for g in rng.choice([1, 2, 4, 8], size=rng.integers(1, 3), replace=False):
            groups.append(
                {
                    "gpu_type": str(t),
                    "count": int(rng.integers(1, 4)),
                    "gpus": int(g),
                    "cpus": 4 * int(g),
                    "mem_gib": 16.0 * int(g),
                }
            )
    cl = make_cluster(groups)
    per_type = cl.gpus_per_type()
    biggest = int(per_type.max())
    J = int(rng.integers(4, 14))
    arrival = np.sort(rng.uniform(0, 1500, J)).tolist()
    lo = rng.integers(1, 4, J)
    hi = lo + rng.integers(0, 9, J)
    rigid = rng.random(J) < 0.3
    hi = np.where(rigid, lo, hi)
    lo, hi = np.minimum(lo, biggest), np.minimum(hi, biggest)
    base = rng.uniform(0.5, 3.0, (2, 7))
    tm = make_tm(base, scaling=float(rng.uniform(0.5, 1.0)), restart_s=float(rng.choice([10, 90])))
    wl = make_workload(
        arrival,
        rng.uniform(200, 3000, J).tolist(),
        lo.tolist(),
        model=rng.integers(0, 2, J).tolist(),
        cpu=4.0,
        mem=16.0,
        elastic=(lo.tolist(), hi.tolist()),
    )
    return cl, wl, tm


@pytest.mark.parametrize("policy_cls", [Sia, PolluxLike])
@pytest.mark.parametrize("seed", range(6))
def test_full_runs_never_produce_rejected_allocations(policy_cls: type[Sia], seed: int) -> None:
    cl, wl, tm = random_case(seed)
    pol = policy_cls()
    sim = start(pol, cl, wl, tm)
    res = sim.run(pol)  # the engine validates every round; AllocationError would fail here
    assert np.all(np.isfinite(res.finish_time)), "every job must finish"
    assert pol.stats["solver_failures"] == 0
    assert len(pol.stats["solve_s"]) == len(res.decision_s)


# ---------------------------------------------------------------------- solver failure
def congested() -> tuple[Cluster, Workload, ThroughputModel]:
    tm = make_tm(scaling=0.9)
    cl = make_cluster([{"gpu_type": "a100", "count": 1, "gpus": 2, "cpus": 16, "mem_gib": 64}])
    wl = make_workload([0.0] * 4, [1e5] * 4, [1] * 4, elastic=([1] * 4, [4] * 4))
    return cl, wl, tm


def failing_solver(*args: object, **kwargs: object) -> MilpResult:
    return MilpResult(None, "error", "solver exploded (test)")


def test_solver_failure_raises_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("hetsched.baselines.sia.solve_assignment_milp", failing_solver)
    cl, wl, tm = congested()
    pol = Sia(on_solver_failure="raise")
    sim = start(pol, cl, wl, tm)
    with pytest.raises(SolverError, match="no solution.*solver exploded.*on_solver_failure"):
        pol.decide(sim.state(60.0))


def test_solver_failure_greedy_fallback_is_not_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("hetsched.baselines.sia.solve_assignment_milp", failing_solver)
    cl, wl, tm = congested()
    pol = Sia()
    sim = start(pol, cl, wl, tm)
    with pytest.warns(RuntimeWarning, match="greedy fallback"):
        alloc = pol.decide(sim.state(60.0))
    sim.validate(alloc)
    assert int(alloc.gpus.sum()) == 2  # both GPUs used (two jobs at 1 GPU each)
    assert pol.stats["solver_failures"] == 1


def test_solver_agrees_with_brute_force() -> None:
    rng = np.random.default_rng(3)
    from itertools import product

    from scipy import sparse

    for _ in range(5):
        A, C = 3, 4
        gp = np.array([1, 2, 4, 1])
        tp = np.array([0, 0, 0, 1])
        cost = np.round(rng.uniform(-1.1, 0.5, (A, C)), 2)
        va, vc = np.nonzero(np.ones((A, C), bool))
        V = va.size
        M = sparse.csc_array(
            (
                np.concatenate([np.ones(V), gp[vc].astype(float)]),
                (np.concatenate([va, A + tp[vc]]), np.concatenate([np.arange(V)] * 2)),
            ),
            shape=(A + 2, V),
        )
        ub = np.array([1, 1, 1, 4, 1], dtype=float)
        res = solve_assignment_milp(cost[va, vc], M, ub, np.zeros(V))
        assert res.x is not None
        best = 0.0
        for choice in product(range(-1, C), repeat=A):
            use = np.zeros(2)
            val = 0.0
            for a, c in enumerate(choice):
                if c >= 0:
                    use[tp[c]] += gp[c]
                    val += cost[a, c]
            if np.all(use <= ub[A:]):
                best = min(best, val)
        assert float(cost[va, vc] @ res.x) == pytest.approx(best)


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="p=0"):
        Sia(p=0.0)
    with pytest.raises(ValueError, match="on_solver_failure"):
        Sia(on_solver_failure="ignore")
    with pytest.raises(ValueError, match="obs_weight"):
        GoodputEstimator(make_tm(), sia64(), make_workload([0.0], [1.0], [1]), obs_weight=0.0)


def test_hydra_presets_instantiate() -> None:
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    import hetsched.config  # noqa: F401

    conf = CONF_DIR
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose(
            config_name="evaluate",
            overrides=["scheduler=[sia,pollux]", "~workload", "scheduler.sia.p=-0.25"],
        )
    sia, pol = instantiate(cfg.scheduler.sia), instantiate(cfg.scheduler.pollux)
    assert isinstance(sia, Sia) and sia.p == -0.25 and sia.type_aware
    assert isinstance(pol, PolluxLike) and pol.p == -1.0 and not pol.type_aware


def test_exact_shortcut_matches_the_milp() -> None:
    from scipy import sparse

    rng = np.random.default_rng(7)
    pol = Sia()
    start(pol, sia64(), make_workload([0.0], [1.0], [1]), make_tm())
    cap = pol.type_gpus[pol.types]
    hits = 0
    for _ in range(40):
        A = int(rng.integers(1, 6))
        valid = rng.random((A, 19)) < 0.5
        va, vc = np.nonzero(valid)
        gpus, tp = pol.std_n[vc], pol.estimator.type_pos[pol.std_k[vc]]
        coef = np.round(rng.uniform(-1.1, 0.3, va.size), 2)
        lb = np.zeros(va.size)
        pick = exact_shortcut(coef, va, gpus, tp, lb, A, cap)
        if pick is None:
            continue
        hits += 1
        V = va.size
        M = sparse.csc_array(
            (
                np.concatenate([np.ones(V), gpus.astype(float)]),
                (np.concatenate([va, A + tp]), np.concatenate([np.arange(V)] * 2)),
            ),
            shape=(A + cap.size, V),
        )
        res = solve_assignment_milp(coef, M, np.concatenate([np.ones(A), cap]), lb)
        assert res.x is not None
        assert float(coef[pick].sum()) == pytest.approx(float(coef @ res.x))
        assert np.bincount(va[pick], minlength=A).max() <= 1
    assert hits >= 10


def test_infeasible_model_raises_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A genuinely infeasible model (every variable pinned to 1) is reported, never ignored."""
    real = solve_assignment_milp

    def pin_everything(cost, matrix, row_upper, lower, **kw):  # type: ignore[no-untyped-def]
        return real(cost, matrix, row_upper, np.ones_like(lower), **kw)

    monkeypatch.setattr("hetsched.baselines.sia.solve_assignment_milp", pin_everything)
    cl, wl, tm = congested()
    pol = Sia(on_solver_failure="raise")
    sim = start(pol, cl, wl, tm)
    with pytest.raises(SolverError, match="status infeasible.*4 jobs"):
        pol.decide(sim.state(60.0))
    pol = Sia()
    sim = start(pol, cl, wl, tm)
    with pytest.warns(RuntimeWarning, match="infeasible.*greedy fallback"):
        alloc = pol.decide(sim.state(60.0))
    sim.validate(alloc)
    assert alloc.size > 0 and pol.stats["solver_failures"] == 1


def test_model_cache_reuses_and_matches_fresh_solves() -> None:
    """Re-solving the kept HiGHS model gives the same optimum as building it afresh."""
    from scipy import sparse

    rng = np.random.default_rng(11)
    A, C = 6, 5
    gp = np.array([1, 2, 4, 1, 2])
    tp = np.array([0, 0, 0, 1, 1])
    va, vc = np.nonzero(rng.random((A, C)) < 0.8)
    V = va.size
    M = sparse.csc_array(
        (
            np.concatenate([np.ones(V), gp[vc].astype(float)]),
            (np.concatenate([va, A + tp[vc]]), np.concatenate([np.arange(V)] * 2)),
        ),
        shape=(A + 2, V),
    )
    ub = np.concatenate([np.ones(A), [5.0, 3.0]])
    cache = HighsModelCache()
    fractional = 0
    for _ in range(12):
        cost = np.round(rng.uniform(-1.1, 0.2, V), 2)
        lb = np.zeros(V)
        if rng.random() < 0.3:
            lb[int(rng.integers(V))] = 1.0
        warm = solve_assignment_milp(cost, M, ub, lb, cache=cache)
        cold = solve_assignment_milp(cost, M, ub, lb)
        assert warm.x is not None and cold.x is not None
        assert float(cost @ warm.x) == pytest.approx(float(cost @ cold.x), abs=1e-9)
        assert np.all(warm.x >= lb) and np.all(M @ warm.x <= ub + 1e-9)
        fractional += int(not cold.lp_integral)
    assert cache.rebuilds == 1 and cache.reuses == 11
    assert fractional > 0  # the MIP phase ran, so integrality was reset on reuse
    # A different matrix rebuilds the model.
    solve_assignment_milp(np.zeros(V - 1), M[:, : V - 1], ub, np.zeros(V - 1), cache=cache)
    assert cache.rebuilds == 2


def test_lambda_a_does_not_preempt_for_a_negligible_gain() -> None:
    """A newcomer 2.5 % better on the A100 than the job running there does not evict it."""
    base = np.ones((3, 7))
    base[0, A100], base[1, A100] = 2.0, 2.05  # model 2 is equally fast on both types
    tm = make_tm(base, restart_s=30.0, cpu_alpha=(0.0, 0.0, 0.0))
    cl = make_cluster(
        [
            {"gpu_type": "t4", "count": 1, "gpus": 1, "cpus": 8, "mem_gib": 64},
            {"gpu_type": "a100", "count": 1, "gpus": 1, "cpus": 8, "mem_gib": 64},
        ]
    )
    wl = make_workload([0.0, 0.0, 120.0], [1e4] * 3, [1, 1, 1], model=[0, 2, 1])
    restarts = {}
    for la in (0.0, 0.01):
        pol = Sia(lambda_a=la)
        sim = start(pol, cl, wl, tm)
        res = sim.run(pol)
        assert np.all(np.isfinite(res.finish_time))
        restarts[la] = int(res.restarts.sum())
    # Without the penalty (Sia's simulator) the newcomer takes the A100 and job 0 restarts.
    assert restarts == {0.0: 1, 0.01: 0}
    with pytest.raises(ValueError, match="lambda_a=-1"):
        Sia(lambda_a=-1.0)


# ---------------------------------------------------------------------- node failures
@pytest.mark.parametrize("policy_cls", [Sia, PolluxLike])
@pytest.mark.parametrize("seed", [1, 4])
def test_runs_under_node_failures_finish_every_job_once(policy_cls: type[Sia], seed: int) -> None:
    cl, wl, tm = random_case(seed)
    cfg = SimConfig(
        round_s=60.0,
        failures=FailureSpec(mtbf_h=0.5, repair_h=0.2),
        checkpoint=CheckpointPolicy(interval_s=300.0, cost_s=10.0),
    )
    finish: list[np.ndarray] = []

    def run() -> tuple[SimResult, Sia, np.ndarray]:
        pol = policy_cls()
        pol.reset(cl, wl, tm, np.random.default_rng(0))
        done: list[np.ndarray] = []
        res = Simulator(cl, wl, tm, cfg, seed=0).run(
            pol, on_step=lambda r: done.append(r.completed)
        )
        finish.append(res.finish_time)
        return res, pol, np.concatenate(done)

    res, pol, completed = run()  # the engine rejects any allocation naming a down node
    assert np.array_equal(np.bincount(completed, minlength=wl.num_jobs), np.ones(wl.num_jobs))
    assert np.all(np.isfinite(res.finish_time)) and np.all(res.remaining == 0.0)
    assert np.all(res.finish_time >= wl.arrival)
    assert res.node_failures > 0 and res.failure_restarts.sum() > 0
    assert pol.stats["down_node_rounds"] > 0 and pol.stats["solver_failures"] == 0
    row = compute_metrics(res, scheduler=pol.name, workload="w", cluster="c", seed=0)
    for k, v in {**row, **extended_metrics(res)}.items():
        if isinstance(v, float):
            assert np.isfinite(v), k
    assert extended_metrics(res)["lost_gpu_hours"] >= 0
    run()  # same seed, same failures, same schedule
    np.testing.assert_array_equal(finish[0], finish[1])


def failure_cluster() -> tuple[Cluster, Workload, ThroughputModel]:
    tm = make_tm(scaling=0.9, restart_s=10.0)
    cl = make_cluster(
        [
            {"gpu_type": "a100", "count": 2, "gpus": 2, "cpus": 16, "mem_gib": 64},
            {"gpu_type": "t4", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 128},
        ]
    )
    wl = make_workload([0.0] * 5, [1e5] * 5, [1] * 5, elastic=([1] * 5, [4] * 5))
    return cl, wl, tm


def test_sia_never_places_on_a_down_node(tmp_path: Path) -> None:
    cl, wl, tm = failure_cluster()
    pol = Sia()
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    first = pol.decide(Simulator(cl, wl, tm, SimConfig(round_s=60.0)).state(60.0))
    fail = np.unique(first.node)[:2]  # two nodes in use fail mid-round
    trace = tmp_path / "fail.csv"
    trace.write_text("node,fail_time_s,repair_s\n" + "".join(f"{n},30,600\n" for n in fail))
    sim = Simulator(
        cl, wl, tm, SimConfig(round_s=60.0), failures=load_failure_trace(trace, cl.num_nodes)
    )
    sim.advance(first, round_s=60.0)
    st = sim.state(60.0)
    assert np.flatnonzero(~st.node_up).tolist() == fail.tolist()
    lost = np.setdiff1d(first.job, st.current.job)
    assert lost.size > 0 and sim.failure_restarts[lost].min() == 1
    alloc = pol.decide(st)
    sim.validate(alloc)  # the engine's own check: no down node
    assert not np.isin(alloc.node, fail).any()
    used = np.bincount(cl.node_type[alloc.node], weights=alloc.gpus, minlength=7)
    assert np.all(used <= Sia.up_capacity(st))
    assert np.isin(lost, alloc.job).any()  # jobs that lost their nodes are re-placed
    # A state whose previous allocation still names down nodes (the engine never reports one):
    # those jobs are treated as not running and are never kept there.
    down = np.unique(st.current.node)
    up = ~np.isin(np.arange(cl.num_nodes), down)
    fake = dataclasses.replace(st, node_up=up, free_gpus=np.where(up, cl.node_gpus, 0))
    alloc2 = pol.decide(fake)
    assert alloc2.size > 0 and not np.isin(alloc2.node, down).any()
    used2 = np.bincount(cl.node_type[alloc2.node], weights=alloc2.gpus, minlength=7)
    assert np.all(used2 <= Sia.up_capacity(fake))
    assert np.isin(st.current.job, alloc2.job).any()  # re-placed on the up nodes


def test_capacity_change_updates_the_kept_model_in_place() -> None:
    cl, wl, tm = failure_cluster()
    pol = Sia()
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    st = Simulator(cl, wl, tm, SimConfig(round_s=60.0)).state(60.0)
    masks = [[True] * 4, [False, True, True, True], [False, True, False, True], [True] * 4]
    for i, m in enumerate(masks):
        up = np.array(m)
        s = dataclasses.replace(st, node_up=up, free_gpus=np.where(up, cl.node_gpus, 0))
        alloc = pol.decide(s)
        assert not np.any(~up[alloc.node])
        used = np.bincount(cl.node_type[alloc.node], weights=alloc.gpus, minlength=7)
        assert np.all(used <= Sia.up_capacity(s))
        assert alloc.gpus.sum() == min(10, Sia.up_capacity(s).sum())  # 5 jobs x 2 (doubling cap)
        assert pol.stats["milp_calls"] == i + 1
    # Same jobs and valid set every time: one model build, then bound/RHS updates only.
    assert pol.stats["model_rebuilds"] == 1 and pol.stats["model_reuses"] == 3
    assert pol.stats["cache_hits"] == 0  # a capacity change invalidates the cached answer


#: Sia's allocations on the scenario of ``test_hadar._fingerprint`` (Sia's 64-GPU mix, 96 elastic
#: Philly jobs arriving within 600 s; about 95 rounds of 60 s, with MILP solves by branch and
#: bound, exact shortcuts, cached answers and evictions), recorded before the module was split.
SIA_FINGERPRINTS = {
    "sia": "270f7a84389b64e3",
    "sia_lambda_a_0": "2ce6955c4c4f80c8",
    "pollux": "76e1b31c08f15b51",
    "sia_greedy_fallback": "324c4c1cb5ba548b",
}


def test_decisions_match_the_recorded_fingerprints(monkeypatch: pytest.MonkeyPatch) -> None:
    from test_hadar import _fingerprint

    sia = Sia()
    assert _fingerprint(sia) == SIA_FINGERPRINTS["sia"]
    # The run exercises the MILP's branch and bound, the shortcut, the cache and eviction.
    assert sia.stats["milp_calls"] > sia.stats["lp_integral"] > 0
    assert sia.stats["shortcuts"] > 0 and sia.stats["cache_hits"] > 0
    assert sia.stats["evictions"] > 0
    assert _fingerprint(Sia(lambda_a=0.0)) == SIA_FINGERPRINTS["sia_lambda_a_0"]
    assert _fingerprint(PolluxLike()) == SIA_FINGERPRINTS["pollux"]
    monkeypatch.setattr("hetsched.baselines.sia.solve_assignment_milp", failing_solver)
    greedy = Sia()
    with pytest.warns(RuntimeWarning, match="greedy fallback"):
        assert _fingerprint(greedy) == SIA_FINGERPRINTS["sia_greedy_fallback"]
    assert greedy.stats["solver_failures"] > 0
