"""Engine: hand-computed tiny cases, validation errors, invariants over random instances."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_cluster, make_tm, make_workload
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetsched.baselines import FIFO, LAS, YarnCS
from hetsched.sim import (
    Allocation,
    AllocationError,
    SimConfig,
    SimulationStalledError,
    Simulator,
    TraceError,
    compute_metrics,
)
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.engine import PENDING
from hetsched.sim.metrics import (
    best_solo_time,
    extended_metrics,
    idle_gpu_hours_waiting,
    makespan_job,
)

V100 = GPU_TYPE_NAMES.index("v100")
K80 = GPU_TYPE_NAMES.index("k80")


def one_node(gpus: int = 4, gpu_type: str = "v100", count: int = 1) -> object:
    return make_cluster(
        [
            {
                "gpu_type": gpu_type,
                "count": count,
                "gpus": gpus,
                "cpus": 8 * gpus,
                "mem_gib": 32 * gpus,
            }
        ]
    )


class Fixed:
    """Runs a fixed allocation every round (filtered to unfinished jobs)."""

    def __init__(self, alloc: Allocation) -> None:
        self.alloc = alloc

    def decide(self, state):  # type: ignore[no-untyped-def]
        return self.alloc.for_jobs(state.active)


def test_fifo_hand_computed_metrics() -> None:
    cl = one_node(4)
    # Job 0: 4 GPUs, 1 h of work at 4 units/s; jobs 1, 2: 2 GPUs each, 1 h and 0.5 h.
    wl = make_workload([0, 0, 0], [4 * 3600, 2 * 3600, 3600], [4, 2, 2])
    res = Simulator(cl, wl, make_tm(), SimConfig(round_s=60)).run(FIFO())
    np.testing.assert_allclose(res.start_time, [0, 3600, 3600])
    np.testing.assert_allclose(res.finish_time, [3600, 7200, 5400])
    row = compute_metrics(res, scheduler="fifo", workload="w", cluster="c", seed=0)
    assert row["avg_jct_h"] == pytest.approx((1 + 2 + 1.5) / 3)
    assert row["makespan_h"] == pytest.approx(2.0)
    assert row["gpu_hours"] == pytest.approx(4 + 2 + 1)
    assert row["avg_queue_h"] == pytest.approx(2 / 3)
    assert row["utilization"] == pytest.approx(7 / 8)
    assert row["p99_jct_h"] == pytest.approx(np.percentile([1, 2, 1.5], 99))
    assert row["restarts"] == 0


def test_makespan_job_hand_computed() -> None:
    cl = one_node(4)
    # As above: job 1 (2 GPUs, 1 h of work) waits behind job 0 and finishes last, at 2 h.
    wl = make_workload([0, 0, 0], [4 * 3600, 2 * 3600, 3600], [4, 2, 2])
    res = Simulator(cl, wl, make_tm(), SimConfig(round_s=60)).run(FIFO())
    last = makespan_job(res)
    assert last["index"] == 1 and last["req_gpus"] == 2 and last["gpu_type"] == "v100"
    assert last["arrival_h"] == pytest.approx(0.0)
    assert last["wait_h"] == pytest.approx(1.0)
    assert last["run_h"] == pytest.approx(1.0)
    assert last["gpus_held"] == pytest.approx(2.0)
    assert last["best_solo_h"] <= last["run_h"] + 1e-9
    assert last["restarts"] == 0
    none = Simulator(cl, wl, make_tm(), SimConfig(round_s=60, max_time_s=600)).run(FIFO())
    assert makespan_job(none) == {}


def test_idle_gpu_hours_while_jobs_wait_hand_computed() -> None:
    cl = one_node(4)
    # Strict FIFO: job 0 holds 2 GPUs for 1 h; job 1 (4 GPUs, 1 h) blocks job 2 (1 GPU, 0.5 h)
    # behind it, so 2 GPUs idle for 1 h while two jobs wait; then nothing idles while job 2 waits.
    wl = make_workload([0, 0, 0], [2 * 3600, 4 * 3600, 1800], [2, 4, 1])
    res = Simulator(cl, wl, make_tm(), SimConfig(round_s=60)).run(FIFO())
    np.testing.assert_allclose(res.start_time, [0, 3600, 7200])
    assert idle_gpu_hours_waiting(res) == pytest.approx(2.0)
    assert extended_metrics(res)["idle_gpu_hours_waiting"] == pytest.approx(2.0)
    # Back-filling starts job 2 beside job 0: 1 GPU idles for 0.5 h, then 2 for 0.5 h.
    res_bf = Simulator(cl, wl, make_tm(), SimConfig(round_s=60)).run(FIFO(backfill=True))
    assert idle_gpu_hours_waiting(res_bf) == pytest.approx(1 * 0.5 + 2 * 0.5)
    # No timeline kept: the figure is undefined, not 0.
    res_nt = Simulator(cl, wl, make_tm(), SimConfig(round_s=60, record_timeline=False)).run(FIFO())
    assert np.isnan(idle_gpu_hours_waiting(res_nt))


def test_completion_inside_round_is_exact() -> None:
    wl = make_workload([0], [100.0], [1])
    res = Simulator(one_node(1), wl, make_tm(), SimConfig(round_s=360)).run(FIFO(round_s=360))
    assert res.finish_time[0] == pytest.approx(100.0)
    assert res.run_s[0] == pytest.approx(100.0)


def test_arrivals_admitted_at_round_boundaries_and_idle_time_skipped() -> None:
    wl = make_workload([30.0, 10_000.0], [60.0, 60.0], [1, 1])
    sim = Simulator(one_node(1), wl, make_tm(), SimConfig(round_s=60))
    assert sim.time == pytest.approx(30.0)  # jumped to the first arrival
    res = sim.run(FIFO())
    assert res.start_time[0] == pytest.approx(30.0)
    assert res.start_time[1] == pytest.approx(10_000.0)  # idle gap skipped to the arrival
    assert res.finish_time[1] == pytest.approx(10_060.0)


def test_restart_delay_and_counting_on_placement_change() -> None:
    cl = one_node(2)
    wl = make_workload([0], [600.0], [1])
    tm = make_tm(restart_s=30.0)
    sim = Simulator(cl, wl, tm, SimConfig(round_s=60))
    a0 = Allocation.from_entries([(0, 0, 1, 8.0, 32.0)])
    sim.advance(a0)  # runs 60 s: 60 units done
    assert sim.remaining[0] == pytest.approx(540.0)
    sim.advance(a0)  # same placement: no restart
    assert sim.restarts[0] == 0
    # Move to another node: placement changes -> restart, 30 s without progress.
    cl2 = one_node(1, count=2)
    sim2 = Simulator(cl2, wl, tm, SimConfig(round_s=60))
    sim2.advance(Allocation.from_entries([(0, 0, 1, 8.0, 32.0)]))
    sim2.advance(Allocation.from_entries([(0, 1, 1, 8.0, 32.0)]))
    assert sim2.restarts[0] == 1
    assert sim2.remaining[0] == pytest.approx(600 - 60 - 30)
    # Preempt then resume: one preemption, one more restart.
    sim2.advance(Allocation.empty())
    sim2.advance(Allocation.from_entries([(0, 1, 1, 8.0, 32.0)]))
    assert sim2.preemptions[0] == 1
    assert sim2.restarts[0] == 2


def test_interference_and_sharing_rates() -> None:
    cl = one_node(2)
    tm = make_tm(iota=0.4, node_iota=0.1)
    wl = make_workload([0, 0], [1e6, 1e6], [1, 1])
    sim = Simulator(cl, wl, tm)
    # Different GPUs of one node: node-level interference only.
    rate, _ = sim.job_rates(Allocation.from_entries([(0, 0, 1, 8, 32), (1, 0, 1, 8, 32)]))
    np.testing.assert_allclose(rate, [0.9, 0.9])
    # Sharing the same GPU: the pair factor only.
    a = Allocation.from_entries([(0, 0, 1, 8, 32, 0), (1, 0, 1, 8, 32, 0)])
    rate, _ = sim.job_rates(a)
    np.testing.assert_allclose(rate, [0.6, 0.6])
    assert a.used_gpus_per_node(1)[0] == 1


def test_cpu_memory_sensitivity_changes_rate() -> None:
    tm = make_tm(cpu_alpha=(0.7, 0.0))
    wl = make_workload([0, 0], [1e6, 1e6], [1, 1], model=[0, 1], cpu=4.0, mem=16.0)
    sim = Simulator(one_node(2), wl, tm)
    a = Allocation.from_entries([(0, 0, 1, 8.0, 16.0), (1, 0, 1, 8.0, 16.0)])
    rate, _ = sim.job_rates(a)
    assert rate[0] == pytest.approx(min(1.5, 2.0**0.7))  # sensitive model, capped
    assert rate[1] == pytest.approx(1.0)  # insensitive model
    a = Allocation.from_entries([(0, 0, 1, 4.0, 12.0)])
    rate, _ = sim.job_rates(a)
    assert rate[0] == pytest.approx(0.1 + 0.9 * (0.75 - 0.5) / 0.5)  # memory below request


def test_spread_and_mixed_type_rates() -> None:
    base = np.ones((2, len(GPU_TYPE_NAMES)))
    base[:, K80] = 0.25
    tm = make_tm(base, spread_factor=0.5)
    cl = make_cluster(
        [
            {"gpu_type": "v100", "count": 2, "gpus": 2, "cpus": 16, "mem_gib": 64},
            {"gpu_type": "k80", "count": 1, "gpus": 2, "cpus": 16, "mem_gib": 64},
        ]
    )
    wl = make_workload([0], [1e6], [2])
    sim = Simulator(cl, wl, tm)
    rate, _ = sim.job_rates(Allocation.from_entries([(0, 0, 2, 8, 32)]))
    assert rate[0] == pytest.approx(2.0)
    rate, _ = sim.job_rates(Allocation.from_entries([(0, 0, 1, 4, 16), (0, 1, 1, 4, 16)]))
    assert rate[0] == pytest.approx(1.0)  # spread over two nodes
    rate, _ = sim.job_rates(Allocation.from_entries([(0, 0, 1, 4, 16), (0, 2, 1, 4, 16)]))
    assert rate[0] == pytest.approx(0.25 * 2 * 0.5)  # slowest type sets the pace


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        ([(5, 0, 1, 1, 1)], "unknown job index 5"),
        ([(0, 3, 1, 1, 1)], "unknown node 3"),
        ([(0, 0, 3, 1, 1)], "over-allocated: 3 GPUs"),
        ([(0, 0, 2, 100, 1)], "cpus assigned"),
        ([(0, 0, 2, 1, 1000)], "mem assigned"),
        ([(0, 0, 1, 1, 1)], "given 1 GPUs; it runs on 2..2"),
        ([(0, 0, 1, 1, 64), (0, 0, 1, 1, 64)], "several entries on node 0"),
        ([(0, 0, 0, 1, 1)], "gpus=0 is invalid"),
        ([(0, 0, 2, 8, 4)], "below the floor"),
    ],
)
def test_invalid_allocations_raise_clear_errors(entries: list[tuple], match: str) -> None:
    wl = make_workload([0, 100], [1e4, 1e4], [2, 1])
    sim = Simulator(one_node(2), wl, make_tm())
    with pytest.raises(AllocationError, match=match):
        sim.advance(Allocation.from_entries(entries))


def test_allocation_for_unarrived_or_finished_job_rejected() -> None:
    wl = make_workload([0, 1000], [10.0, 10.0], [1, 1])
    sim = Simulator(one_node(2), wl, make_tm())
    with pytest.raises(AllocationError, match="'j1'.*has not arrived"):
        sim.advance(Allocation.from_entries([(1, 0, 1, 1, 32)]))
    sim.advance(Allocation.from_entries([(0, 0, 1, 1, 32)]))
    assert sim.status[0] == 3
    with pytest.raises(AllocationError, match="'j0'.*already finished"):
        sim.advance(Allocation.from_entries([(0, 0, 1, 1, 32)]))


def test_non_distributed_gang_rejected() -> None:
    tm = make_tm()
    tm.tput[0, :, 1:, :] = 0.0  # model 'a' cannot use more than one GPU
    tm.__post_init__()
    wl = make_workload([0], [10.0], [2], model=[1])
    wl.model[:] = 0
    with pytest.raises(TraceError, match="cannot run on any GPU type"):
        Simulator(one_node(2), wl, tm)


def test_job_larger_than_cluster_is_a_clear_error() -> None:
    wl = make_workload([0], [10.0], [8])
    with pytest.raises(TraceError, match="'j0' needs at least 8 GPUs.*at most 4"):
        Simulator(one_node(4), wl, make_tm())


def test_model_index_beyond_the_table_is_a_clear_error() -> None:
    tm = make_tm()
    wl = make_workload([0, 5], [10.0, 10.0], [1, 1], model=[0, tm.num_models])
    with pytest.raises(TraceError) as info:
        Simulator(one_node(4), wl, tm)
    assert str(info.value) == (
        f"workload 'wl': job 'j1' has model index {tm.num_models} but the throughput table "
        f"has {tm.num_models} models"
    )


def test_stalled_policy_detected() -> None:
    class Never:
        def decide(self, state):  # type: ignore[no-untyped-def]
            return Allocation.empty()

    wl = make_workload([0], [10.0], [1])
    sim = Simulator(one_node(1), wl, make_tm(), SimConfig(max_idle_rounds=5))
    with pytest.raises(SimulationStalledError, match="no job has run"):
        sim.run(Never())


def test_fast_forward_matches_round_by_round() -> None:
    rng = np.random.default_rng(3)
    J = 40
    arr = np.sort(rng.uniform(0, 20_000, J))
    work = rng.uniform(100, 20_000, J)
    gpus = rng.choice([1, 2, 4], J)
    wl = make_workload(arr.tolist(), work.tolist(), gpus.tolist())
    cl = one_node(4, count=3)

    class SlowFIFO(FIFO):
        event_driven = False

    fast = Simulator(cl, wl, make_tm()).run(FIFO())
    slow = Simulator(cl, wl, make_tm()).run(SlowFIFO())
    np.testing.assert_allclose(fast.finish_time, slow.finish_time)
    np.testing.assert_allclose(fast.gpu_s_by_type, slow.gpu_s_by_type)
    assert len(fast.decision_s) < len(slow.decision_s)


def test_event_driven_policy_is_asked_again_at_its_wake_time() -> None:
    # One long job runs; nothing arrives or completes until it ends at 10,000 s.
    wl = make_workload([0.0], [10_000.0], [1])

    class Waker(FIFO):
        """FIFO that asks to decide again 1,030 s after each decision (once only)."""

        def __init__(self, wake: bool) -> None:
            super().__init__()
            self.wake, self.times = wake, []

        def decide(self, state):  # type: ignore[no-untyped-def]
            self.times.append(state.time)
            self.wake_time = state.time + 1030.0 if self.wake and state.time == 0 else None
            return super().decide(state)

    runs = {}
    for wake in (False, True):
        pol = Waker(wake)
        res = Simulator(one_node(1), wl, make_tm(), SimConfig(round_s=60)).run(pol)
        runs[wake] = (res, pol.times)
    (plain, t_plain), (woken, t_woken) = runs[False], runs[True]
    assert t_plain == [0.0]  # event-driven: the run ends without another decision
    assert t_woken == [0.0, 1080.0]  # the first round boundary at or after 1,030 s
    np.testing.assert_allclose(plain.finish_time, woken.finish_time)


def test_lower_bound_holds() -> None:
    rng = np.random.default_rng(0)
    J = 30
    wl = make_workload(
        np.sort(rng.uniform(0, 5000, J)).tolist(), rng.uniform(100, 5000, J).tolist(),
        rng.choice([1, 2], J).tolist(),
    )  # fmt: skip
    res = Simulator(one_node(4), wl, make_tm()).run(LAS())
    t_star, g_star = best_solo_time(res)
    jct = res.finish_time - wl.arrival
    assert np.all(jct >= t_star - 1e-6)
    assert res.gpu_s_by_type.sum() >= g_star.sum() - 1e-6
    ext = extended_metrics(res)
    assert ext["slowdown_mean"] >= 1.0


def test_lower_bound_holds_where_the_table_rates_a_spread_placement_faster() -> None:
    """A 4-GPU job spread 2 + 2 over two 4-GPU nodes, under a table that rates spread
    placements 1.5x packed ones (as some measured rows do): the bound stays below the run."""

    class Spread:
        def decide(self, state: object) -> Allocation:
            return Allocation.from_entries([(0, 0, 2, 8.0, 32.0), (0, 1, 2, 8.0, 32.0)])

    wl = make_workload([0.0], [4 * 3600.0], [4])
    sim = Simulator(one_node(4, count=2), wl, make_tm(spread_factor=1.5), SimConfig(round_s=60))
    res = sim.run(Spread())
    t_star, g_star = best_solo_time(res)
    jct = res.finish_time - wl.arrival
    assert jct[0] == pytest.approx(3600.0 / 1.5, rel=1e-2)  # it ran at the spread rate
    assert jct[0] >= t_star[0] - 1e-6
    assert res.gpu_s_by_type.sum() >= g_star.sum() - 1e-6


# ---------------------------------------------------------------------- invariants
@st.composite
def instances(draw: st.DrawFn) -> tuple:
    n_nodes = draw(st.integers(1, 4))
    groups = []
    for _ in range(n_nodes):
        groups.append(
            {
                "gpu_type": draw(st.sampled_from(["v100", "k80", "t4", "a100"])),
                "gpus": draw(st.sampled_from([1, 2, 4, 8])),
                "cpus": draw(st.sampled_from([8, 32, 64])),
                "mem_gib": draw(st.sampled_from([64, 256])),
            }
        )
    J = draw(st.integers(1, 25))
    max_g = max(g["gpus"] for g in groups)
    arr = sorted(draw(st.lists(st.floats(0, 50_000), min_size=J, max_size=J)))
    work = draw(st.lists(st.floats(10, 20_000), min_size=J, max_size=J))
    gpus = draw(
        st.lists(st.sampled_from([g for g in (1, 2, 4, 8) if g <= max_g]), min_size=J, max_size=J)
    )
    models = draw(st.lists(st.integers(0, 1), min_size=J, max_size=J))
    return groups, arr, work, gpus, models


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances(), policy=st.sampled_from(["fifo", "las", "yarn_cs", "fifo_bf"]))
def test_invariants_random_instances(inst: tuple, policy: str) -> None:
    groups, arr, work, gpus, models = inst
    base = np.random.default_rng(len(arr)).uniform(0.2, 2.0, (2, len(GPU_TYPE_NAMES)))
    tm = make_tm(base, scaling=0.9, cpu_alpha=(0.7, 0.0), node_iota=0.02)
    cl = make_cluster(groups)
    wl = make_workload(arr, work, gpus, model=models, cpu=2.0, mem=8.0)
    pol = {"fifo": FIFO(), "las": LAS(), "yarn_cs": YarnCS(), "fifo_bf": FIFO(backfill=True)}[
        policy
    ]
    sim = Simulator(cl, wl, tm, SimConfig(round_s=300))
    prev_remaining = sim.remaining.copy()
    orig_validate = sim.validate

    def checked_validate(a: Allocation) -> None:
        orig_validate(a)
        N = cl.num_nodes
        assert np.all(a.used_gpus_per_node(N) <= cl.node_gpus)
        assert np.all(a.used_cpus_per_node(N) <= cl.node_cpus + 1e-9)
        assert np.all(a.used_mem_per_node(N) <= cl.node_mem + 1e-9)

    sim.validate = checked_validate  # type: ignore[method-assign]
    while not sim.done:
        state = sim.state(pol.round_s)
        sim.advance(pol.decide(state), round_s=pol.round_s)
        assert np.all(sim.remaining <= prev_remaining + 1e-9)  # progress is monotone
        assert np.all(sim.remaining >= 0)
        prev_remaining = sim.remaining.copy()
    res = sim.result()
    assert np.all(np.isfinite(res.finish_time))  # every job completes (work-conserving)
    assert np.all(res.finish_time >= wl.arrival)
    assert np.all(res.start_time >= wl.arrival)
    row = compute_metrics(res, scheduler=policy, workload="w", cluster="c", seed=0)
    for k in ("avg_jct_h", "makespan_h", "gpu_hours", "utilization", "ftf_rho_mean"):
        assert np.isfinite(row[k]) and row[k] >= 0
    assert row["utilization"] <= 1.0 + 1e-9


def test_one_entry_per_job_rates_equal_the_general_reduction() -> None:
    # The fast path (every job on one node) must give exactly the per-job reductions' numbers.
    tm = make_tm(cpu_alpha=(0.7, 0.0), iota=0.3, node_iota=0.05)
    rng = np.random.default_rng(0)
    J = 12
    wl = make_workload([0] * J, [1e6] * J, [1] * J, model=rng.integers(0, 2, J).tolist())
    cl = make_cluster([{"gpu_type": "v100", "count": 3, "gpus": 4, "cpus": 32, "mem_gib": 128}])
    sim = Simulator(cl, wl, tm)
    jobs = rng.permutation(J)[:10]
    nodes = np.repeat(np.arange(3), 4)[:10]
    share = np.where(np.arange(10) < 4, np.arange(10) // 2, -1)  # two shared GPUs on node 0
    a = Allocation(jobs, nodes, np.ones(10), rng.uniform(1, 8, 10), rng.uniform(8, 40, 10), share)
    assert sim._one_per_job(a)
    fast = sim.job_rates(a, one_per_job=True)
    slow = sim.job_rates(a, one_per_job=False)
    for f, s in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(f, s)
    assert (fast[0][jobs] > 0).all() and (fast[0][np.setdiff1d(np.arange(J), jobs)] == 0).all()


def test_placement_signature_table_equals_the_hash_formula() -> None:
    # The precomputed (node, GPUs) hash table gives the formula's per-job sums, and counts the
    # table does not hold fall back to the formula.
    from hetsched.sim.engine import _entry_hash

    wl = make_workload([0] * 6, [1e6] * 6, [1] * 6)
    cl = make_cluster([{"gpu_type": "v100", "count": 3, "gpus": 4, "cpus": 32, "mem_gib": 128}])
    sim = Simulator(cl, wl, make_tm())
    jobs, nodes = np.array([0, 1, 1, 3, 5]), np.array([0, 1, 2, 0, 2])
    for gpus in (np.array([1, 2, 2, 4, 3]), np.array([1, 9, 2, 4, 3])):  # 9 > any node's GPUs
        a = Allocation(jobs, nodes, gpus, np.ones(5), np.ones(5), np.full(5, -1))
        h = _entry_hash(nodes.astype(np.uint64), gpus.astype(np.uint64))
        want = np.zeros(6, dtype=np.uint64)
        np.add.at(want, jobs, h)
        np.testing.assert_array_equal(sim._signature(a), want)
    assert (want[[0, 1, 3, 5]] != 0).all() and want[2] == want[4] == 0


def test_co_runner_factor_table_equals_the_formula_and_grows() -> None:
    # The node co-runner factor is tabulated by entry count; counts beyond the table (GPU
    # sharing can put more entries on a node than it has GPUs) extend it with the same formula.
    node_iota = 0.07
    J = 8
    wl = make_workload([0] * J, [1e6] * J, [1] * J)
    sim = Simulator(one_node(2), wl, make_tm(node_iota=node_iota))
    size = sim._keep_by_count.shape[0]
    share = np.arange(J) // 2  # four GPU-sharing pairs on a 2-GPU node: 8 entries on one node
    a = Allocation(np.arange(J), np.zeros(J), np.ones(J), np.ones(J), np.ones(J), share)
    assert size < J + 1
    undo = 1.0 / (1.0 - node_iota)
    pair = 1.0 - sim.tm.pair_iota[0, 0, V100]
    want = np.minimum((1.0 - node_iota) ** (J - 1) * pair * undo, 1.0)
    np.testing.assert_allclose(sim._interference(a), np.full(J, want), rtol=1e-12)
    assert sim._keep_by_count.shape[0] == J + 1
    np.testing.assert_array_equal(
        sim._keep_by_count[1:], (1.0 - node_iota) ** (np.arange(1, J + 1) - 1)
    )


def test_pending_jobs_are_the_waiting_active_jobs() -> None:
    wl = make_workload([0, 0, 0, 50, 5000], [1e4] * 5, [1, 1, 1, 1, 1])
    sim = Simulator(one_node(2), wl, make_tm())
    for _ in range(4):
        act = sim.active_jobs()
        np.testing.assert_array_equal(sim.pending_jobs(), act[sim.status[act] == PENDING])
        run = sim.pending_jobs()[:1]
        sim.advance(Allocation.from_entries([(int(j), 0, 1, 8.0, 32.0) for j in run]))
    assert sim.pending_jobs().dtype == np.int64
