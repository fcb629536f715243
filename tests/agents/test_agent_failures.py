"""The shipped MAIFS checkpoint (and its teacher) run to completion under node failures."""

from __future__ import annotations

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from hetsched.config import sim_config_from
from hetsched.evaluation import run_one
from hetsched.resources import CONF_DIR
from hetsched.sim import default_throughput

CONF = CONF_DIR


@pytest.mark.parametrize("scheduler", ["maifs", "maifs_teacher"])
def test_runs_to_completion_under_failures(scheduler: str) -> None:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            "evaluate",
            overrides=[
                f"scheduler=[{scheduler}]",
                "workload.num_jobs=60",
                "sim.failures.mtbf_h=2",
                "sim.failures.repair_h=0.5",
                "sim.checkpoint.interval_s=900",
                "sim.checkpoint.cost_s=15",
            ],
        )
    tm = default_throughput()
    cluster = instantiate(cfg.cluster)
    wl = instantiate(cfg.workload)(throughput=tm, cluster=cluster, rng=np.random.default_rng(0))
    out = run_one(
        instantiate(cfg.scheduler[scheduler]),
        name=scheduler,
        cluster=cluster,
        workload=wl,
        throughput=tm,
        sim_config=sim_config_from(cfg.sim),
        seed=0,
        rng=np.random.default_rng(1),
    )
    res = out.result
    assert res.node_failures > 0 and res.failure_restarts.sum() > 0
    assert np.isfinite(res.finish_time).all() and np.all(res.remaining == 0.0)
    assert out.extra["unfinished_jobs"] == 0 and out.extra["lost_gpu_hours"] > 0
    for k, v in out.row.items():
        if isinstance(v, float):
            assert np.isfinite(v) and v >= 0, k
