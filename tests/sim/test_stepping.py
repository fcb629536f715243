"""Engine step internals: the per-running-job rates and the state the step keeps between calls."""

from __future__ import annotations

import numpy as np
from conftest import make_cluster, make_tm, make_workload

from hetsched.baselines import FIFO, LAS
from hetsched.sim import Allocation, SimConfig, Simulator
from hetsched.sim.engine import RUNNING, group_by_job
from hetsched.sim.faults import CheckpointPolicy, FailureSpec


def _gang_sim(J: int = 10) -> Simulator:
    tm = make_tm(cpu_alpha=(0.7, 0.0), iota=0.3, node_iota=0.05)
    rng = np.random.default_rng(1)
    wl = make_workload(
        [0] * J, [1e6] * J, rng.integers(1, 5, J).tolist(), model=rng.integers(0, 2, J).tolist()
    )
    cl = make_cluster([{"gpu_type": "v100", "count": 4, "gpus": 4, "cpus": 32, "mem_gib": 128}])
    return Simulator(cl, wl, tm)


def test_running_rates_equal_the_per_job_arrays() -> None:
    # running_rates works over the entries only; it must give job_rates', gpus_per_job's and
    # _signature's numbers at the running jobs, for gangs (several entries per job) and for
    # one entry per job.
    sim = _gang_sim()
    J = sim.workload.num_jobs
    allocs = [
        # jobs 2 and 5 span two nodes each (entries out of job order), job 7 has one entry
        Allocation(
            [5, 2, 7, 2, 5],
            [0, 1, 1, 2, 3],
            [2, 1, 1, 2, 1],
            [8, 4, 4, 8, 4],
            [32, 16, 16, 32, 16],
            [-1] * 5,
        ),  # fmt: skip
        Allocation([9, 0, 4], [3, 0, 1], [1, 2, 1], [2, 8, 4], [32, 64, 16], [-1] * 3),
        Allocation([3], [2], [1], [8], [32], [-1]),
    ]
    for a in allocs:
        g = group_by_job(a)
        np.testing.assert_array_equal(g.jobs, np.unique(a.job))
        np.testing.assert_array_equal(g.jobs[g.row], a.job)
        rate, iso, gpus, sig = sim.running_rates(g, a)
        want_rate, want_iso = sim.job_rates(a)
        np.testing.assert_array_equal(rate, want_rate[g.jobs])
        np.testing.assert_array_equal(iso, want_iso[g.jobs])
        np.testing.assert_array_equal(gpus, a.gpus_per_job(J)[g.jobs])
        np.testing.assert_array_equal(sig, sim._signature(a)[g.jobs])
        assert (rate > 0).all()


def test_kept_step_state_matches_the_status_array() -> None:
    # The step keeps the jobs that ran in it and the count of finished jobs instead of scanning
    # the (J,) status; after every step they must agree with it, through preemptions (LAS),
    # node failures and checkpoints.
    rng = np.random.default_rng(4)
    J = 40
    wl = make_workload(
        np.sort(rng.uniform(0, 4 * 3600, J)).tolist(),
        rng.uniform(600, 4 * 3600, J).tolist(),
        rng.choice([1, 2, 4], J).tolist(),
    )
    cl = make_cluster([{"gpu_type": "v100", "count": 3, "gpus": 4, "cpus": 32, "mem_gib": 128}])
    configs = [
        SimConfig(round_s=300),
        SimConfig(round_s=300, failures=FailureSpec(mtbf_h=6.0, repair_h=0.5)),
        SimConfig(
            round_s=300,
            failures=FailureSpec(mtbf_h=6.0, repair_h=0.5),
            checkpoint=CheckpointPolicy(interval_s=1200.0, cost_s=10.0),
        ),
    ]
    steps = failures = preemptions = 0
    for cfg in configs:
        for policy in (FIFO(), LAS()):
            sim = Simulator(cl, wl, make_tm(), cfg, seed=2)

            def check(_rec: object, sim: Simulator = sim) -> None:
                active = sim.active_jobs()
                assert sim._next_arrival - sim._n_finished == active.size
                np.testing.assert_array_equal(sim._running, active[sim.status[active] == RUNNING])

            res = sim.run(policy, on_step=lambda rec, check=check: check(rec))
            steps += len(res.decision_s)
            failures += res.node_failures
            preemptions += int(res.preemptions.sum())
            assert np.isfinite(res.finish_time).all()
    assert steps > 100 and failures > 0 and preemptions > 0  # every path was exercised
