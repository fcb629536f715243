"""Node failures, recoveries and checkpointing (hetsched.sim.faults + the engine's use of them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import make_cluster, make_tm, make_workload

from hetsched.baselines import FIFO, LAS, YarnCS
from hetsched.sim import Allocation, AllocationError, SimConfig, Simulator
from hetsched.sim.errors import SimulationStalledError
from hetsched.sim.faults import (
    CheckpointPolicy,
    FailureModel,
    FailureSpec,
    FailureSpecError,
    load_failure_trace,
)
from hetsched.sim.metrics import compute_metrics, extended_metrics


def one_node(gpus: int = 4) -> object:
    return make_cluster(
        [{"gpu_type": "v100", "count": 1, "gpus": gpus, "cpus": 32, "mem_gib": 256}]
    )


def write_trace(tmp_path: Path, rows: list[str], header: str = "node,fail_time_s,repair_s") -> Path:
    p = tmp_path / "failures.csv"
    p.write_text("\n".join([header, *rows]) + "\n")
    return p


def test_failure_model_is_a_function_of_the_seed_only() -> None:
    a = FailureModel(8, mtbf_h=2.0, repair_h=0.5, rng=np.random.default_rng(3))
    b = FailureModel(8, mtbf_h=2.0, repair_h=0.5, rng=np.random.default_rng(3))
    # Query in different orders and at different times: the schedule must not depend on that.
    for t in (10.0, 5_000.0, 90_000.0):
        a.node_up(t)
    b.node_up(400_000.0)
    assert a.intervals(80_000.0) == b.intervals(80_000.0)
    c = FailureModel(8, mtbf_h=2.0, repair_h=0.5, rng=np.random.default_rng(4))
    assert c.intervals(80_000.0) != a.intervals(80_000.0)


def test_failure_model_rates_match_mtbf_and_repair() -> None:
    m = FailureModel(400, mtbf_h=10.0, repair_h=1.0, rng=np.random.default_rng(0))
    iv = m.intervals(2_000 * 3600.0)
    down = np.array([u - d for _, d, u in iv])
    assert abs(down.mean() / 3600.0 - 1.0) < 0.05
    # Availability ~ MTBF / (MTBF + repair) = 10/11.
    ups = np.mean([m.node_up(t).mean() for t in np.linspace(1e5, 7e6, 200)])
    assert abs(ups - 10.0 / 11.0) < 0.02


def test_failure_mid_round_loses_work_since_start_without_checkpoints(tmp_path: Path) -> None:
    # 1 node, 1 job of 1 GPU at rate 1 step/s, 1000 steps. Node fails at t=90, back at t=190.
    tm = make_tm(restart_s=30.0)
    wl = make_workload([0.0], [1000.0], [1])
    fails = load_failure_trace(write_trace(tmp_path, ["0,90,100"]), 1)
    sim = Simulator(one_node(), wl, tm, SimConfig(round_s=60.0), failures=fails)
    run = Allocation.from_entries([(0, 0, 1, 4.0, 16.0)])
    sim.advance(run)  # [0, 60]: 60 steps
    assert sim.remaining[0] == pytest.approx(940.0)
    sim.advance(run)  # [60, 120]: runs 30 s, then the node fails: all 90 steps lost
    assert sim.remaining[0] == pytest.approx(1000.0)
    assert sim.failure_restarts[0] == 1
    assert sim.lost_gpu_s[0] == pytest.approx(90.0)
    assert sim.run_s[0] == pytest.approx(90.0)  # GPUs released at the failure instant
    st = sim.state()
    assert not st.node_up[0] and st.free_gpus[0] == 0
    assert st.current.size == 0 and 0 in st.pending
    with pytest.raises(AllocationError, match="down"):
        sim.advance(run)  # t=120: node still down
    sim.advance(Allocation.empty())  # [120, 180]
    sim.advance(Allocation.empty())  # [180, 240]
    assert sim.state().node_up[0]
    sim.advance(run)  # t=240: resume pays the 30 s restart delay
    assert sim.restarts[0] == 1
    assert sim.remaining[0] == pytest.approx(1000.0 - 30.0)


def test_periodic_checkpoint_bounds_the_loss_and_costs_time(tmp_path: Path) -> None:
    tm = make_tm()
    wl = make_workload([0.0], [1000.0], [1])
    fails = load_failure_trace(write_trace(tmp_path, ["0,90,100"]), 1)
    ck = CheckpointPolicy(interval_s=40.0, cost_s=0.0)
    sim = Simulator(one_node(), wl, tm, SimConfig(round_s=60.0, checkpoint=ck), failures=fails)
    run = Allocation.from_entries([(0, 0, 1, 4.0, 16.0)])
    sim.advance(run)
    sim.advance(run)
    # Saved at 40 s and 80 s of work: only the 10 steps after the last save are lost.
    assert sim.remaining[0] == pytest.approx(1000.0 - 80.0)
    assert sim.lost_gpu_s[0] == pytest.approx(10.0)
    # Overhead: with a 10 s save every 40 s, a failure-free job progresses at 40/50 of its rate.
    ck2 = CheckpointPolicy(interval_s=40.0, cost_s=10.0)
    sim2 = Simulator(one_node(), wl, tm, SimConfig(round_s=60.0, checkpoint=ck2))
    sim2.advance(run)
    assert sim2.remaining[0] == pytest.approx(1000.0 - 60.0 * 0.8)


@pytest.mark.parametrize("policy", [FIFO, LAS, YarnCS])
def test_every_job_finishes_once_under_failures(policy: type) -> None:
    rng = np.random.default_rng(7)
    cl = make_cluster(
        [
            {"gpu_type": "v100", "count": 3, "gpus": 4, "cpus": 32, "mem_gib": 256},
            {"gpu_type": "k80", "count": 3, "gpus": 4, "cpus": 32, "mem_gib": 256},
        ]
    )
    J = 40
    arrival = np.sort(rng.uniform(0, 4 * 3600.0, J)).tolist()
    work = rng.uniform(600.0, 4 * 3600.0, J).tolist()
    gpus = rng.choice([1, 2, 4], J).tolist()
    wl = make_workload(arrival, work, gpus, model=rng.integers(0, 2, J).tolist())
    tm = make_tm(base=np.array([[1.0] * 7, [0.5] * 7]))
    fails = FailureModel(cl.num_nodes, mtbf_h=3.0, repair_h=0.5, rng=np.random.default_rng(1))
    ck = CheckpointPolicy(interval_s=600.0, cost_s=20.0)
    pol = policy()
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    sim = Simulator(cl, wl, tm, SimConfig(round_s=60.0, checkpoint=ck), failures=fails)
    res = sim.run(pol)
    assert np.isfinite(res.finish_time).all()  # nobody lost
    assert np.all(res.remaining == 0.0)
    assert np.all(res.finish_time >= wl.arrival)
    assert res.node_failures > 0 and res.failure_restarts.sum() > 0
    ext = extended_metrics(res)
    assert ext["lost_gpu_hours"] > 0 and ext["unfinished_jobs"] == 0
    row = compute_metrics(res, scheduler="x", workload="w", cluster="c", seed=0)
    for k, v in row.items():
        if isinstance(v, float):
            assert np.isfinite(v) and v >= 0, k
    # Work conservation: GPU time held >= GPU time of the work that stuck + what was lost.
    assert res.gpu_s_by_type.sum() >= res.lost_gpu_s.sum()
    # Same seed, same everything.
    pol2 = policy()
    pol2.reset(cl, wl, tm, np.random.default_rng(0))
    fails2 = FailureModel(cl.num_nodes, mtbf_h=3.0, repair_h=0.5, rng=np.random.default_rng(1))
    res2 = Simulator(cl, wl, tm, SimConfig(round_s=60.0, checkpoint=ck), failures=fails2).run(pol2)
    np.testing.assert_array_equal(res.finish_time, res2.finish_time)


def test_failures_make_things_slower_not_faster() -> None:
    cl = make_cluster([{"gpu_type": "v100", "count": 4, "gpus": 4, "cpus": 32, "mem_gib": 256}])
    J = 30
    rng = np.random.default_rng(2)
    wl = make_workload(
        np.sort(rng.uniform(0, 3600, J)).tolist(), rng.uniform(3600, 7200, J).tolist(), [2] * J
    )
    tm = make_tm()

    def avg_jct(failures: object | None) -> float:
        pol = FIFO()
        pol.reset(cl, wl, tm, np.random.default_rng(0))
        res = Simulator(cl, wl, tm, SimConfig(), failures=failures).run(pol)  # type: ignore[arg-type]
        return float(np.mean(res.finish_time - wl.arrival))

    base = avg_jct(None)
    faulty = avg_jct(FailureModel(4, mtbf_h=2.0, repair_h=1.0, rng=np.random.default_rng(0)))
    assert faulty > base


@pytest.mark.parametrize(
    ("header", "rows", "match"),
    [
        ("node,fail_time_s", ["0,10"], "missing column"),
        ("node,fail_time_s,repair_s", ["x,10,5"], "row 2"),
        ("node,fail_time_s,repair_s", ["3,10,5"], "node=3"),
        ("node,fail_time_s,repair_s", ["0,-1,5"], "fail_time_s=-1"),
        ("node,fail_time_s,repair_s", ["0,10,0"], "repair_s=0"),
        ("node,fail_time_s,repair_s", ["0,10,50", "0,30,5"], "still down"),
    ],
)
def test_bad_failure_traces_are_clear_errors(
    tmp_path: Path, header: str, rows: list[str], match: str
) -> None:
    with pytest.raises(FailureSpecError, match=match):
        load_failure_trace(write_trace(tmp_path, rows, header), 2)


def test_bad_failure_settings_are_clear_errors() -> None:
    with pytest.raises(FailureSpecError, match="mtbf_h=0"):
        FailureModel(2, mtbf_h=0.0, repair_h=1.0, rng=np.random.default_rng(0))
    with pytest.raises(FailureSpecError, match="interval_s=-5"):
        CheckpointPolicy(interval_s=-5.0)
    with pytest.raises(FailureSpecError, match="does not exist"):
        load_failure_trace("/nonexistent/f.csv", 2)
    cl = one_node()
    wl = make_workload([0.0], [10.0], [1])
    with pytest.raises(AllocationError, match="covers 3 nodes"):
        Simulator(
            cl,
            wl,
            make_tm(),
            failures=FailureModel(3, mtbf_h=1, repair_h=1, rng=np.random.default_rng(0)),
        )  # type: ignore[arg-type]


@pytest.mark.parametrize("interval", [None, 40.0])
def test_repeated_losses_without_a_checkpoint_stop_the_run(
    tmp_path: Path, interval: float | None
) -> None:
    # A 1000-step job (1 step/s) on a node that fails 100 s after every repair: without periodic
    # checkpoints it never finishes, so the third loss in a row stops the run and names the job.
    # With a save every 40 s each failure loses at most one cycle and the job finishes.
    rows = [f"0,{100 + 110 * i},10" for i in range(30)]
    fails = load_failure_trace(write_trace(tmp_path, rows), 1)
    wl = make_workload([0.0], [1000.0], [1])
    ck = CheckpointPolicy(interval_s=interval) if interval else None
    spec = FailureSpec(trace=str(tmp_path / "failures.csv"), max_lost_attempts=3)
    cfg = SimConfig(round_s=60.0, checkpoint=ck, failures=spec)
    sim = Simulator(one_node(), wl, make_tm(restart_s=0.0), cfg, failures=fails)
    if interval is None:
        with pytest.raises(SimulationStalledError, match="'j0' lost its work to node failures 3"):
            sim.run(FIFO())
        assert sim.failure_restarts[0] == 3
    else:
        res = sim.run(FIFO())
        assert np.isfinite(res.finish_time[0]) and sim.failure_restarts[0] > 3


def test_contradictory_failure_and_checkpoint_settings_are_errors(tmp_path: Path) -> None:
    with pytest.raises(FailureSpecError, match="cost_s=10.0 has no effect without interval_s"):
        CheckpointPolicy(interval_s=None, cost_s=10.0)
    with pytest.raises(FailureSpecError, match="drop one of them"):
        FailureSpec(mtbf_h=5.0, trace=str(write_trace(tmp_path, ["0,90,100"])))
    with pytest.raises(FailureSpecError, match="max_lost_attempts=0"):
        FailureSpec(mtbf_h=5.0, max_lost_attempts=0)
