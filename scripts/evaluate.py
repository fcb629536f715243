"""Evaluate schedulers head to head on one cluster and workload (a Hydra app).

Examples::

    python scripts/evaluate.py                                  # simple schedulers, defaults
    python scripts/evaluate.py scheduler=fifo workload=philly cluster=sia_64 seed=0
    python scripts/evaluate.py 'scheduler=[fifo,las]' 'seed=[0,1,2]'
    python scripts/evaluate.py -m scheduler=fifo,las seed=0,1  # Hydra multirun

Writes ``results.csv``, ``results.md``, ``results_extended.csv``, ``jobs.csv`` and
``timeline.csv`` into the run directory (``hydra.run.dir=DIR`` to choose it) and prints the table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from hetsched.config import sim_config_from  # (importing it registers the config schemas)
from hetsched.evaluation import evaluate, markdown_table, seeds_from, write_outputs
from hetsched.sim.throughput import ThroughputModel, default_throughput


def _policy_factories(cfg: DictConfig) -> dict[str, Any]:
    if not isinstance(cfg.scheduler, DictConfig) or len(cfg.scheduler) == 0:
        raise ValueError("no scheduler selected; use e.g. scheduler=fifo or 'scheduler=[fifo,las]'")
    out: dict[str, Any] = {}
    for name, node in cfg.scheduler.items():
        out[str(name)] = lambda node=node: instantiate(node)
    return out


@hydra.main(config_path="../conf", config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Run the evaluation described by ``cfg`` and write its results."""
    tm = (
        ThroughputModel.load(cfg.throughput_table) if cfg.throughput_table else default_throughput()
    )
    cluster = instantiate(cfg.cluster)
    workload_factory = instantiate(cfg.workload)
    sim_config = sim_config_from(cfg.sim)
    outs = evaluate(
        _policy_factories(cfg),
        cluster=cluster,
        workload_factory=workload_factory,
        throughput=tm,
        seeds=seeds_from(
            OmegaConf.to_object(cfg.seed) if OmegaConf.is_config(cfg.seed) else cfg.seed
        ),
        sim_config=sim_config,
        progress=bool(cfg.progress),
    )
    out_dir = Path(cfg.output.dir) if cfg.output.dir else Path(HydraConfig.get().runtime.output_dir)
    write_outputs(outs, out_dir, jobs=bool(cfg.output.jobs), timeline=bool(cfg.output.timeline))
    print(cluster.describe())
    print(markdown_table([o.row for o in outs]))
    print(f"\nresults written to {out_dir}/results.csv and results.md")


if __name__ == "__main__":
    main()
