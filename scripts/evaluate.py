"""Evaluate schedulers head to head on one cluster and workload (a Hydra app).

Examples::

    python scripts/evaluate.py                                  # simple schedulers, 5 seeds
    python scripts/evaluate.py scheduler=fifo workload=philly cluster=sia_64 seed=0
    python scripts/evaluate.py 'scheduler=[fifo,las]' 'seed=[0,1,2]'
    python scripts/evaluate.py num_seeds=10 load=2.0            # seeds 0..9, double arrival rate
    python scripts/evaluate.py workload=csv workload.path=/abs/my.csv \\
        'workload.columns={submission_time: submit, duration: runtime, num_gpu: gpus}'
    python scripts/evaluate.py -m hydra/launcher=joblib scheduler=fifo,las seed=0,1  # sweep

Writes ``results.csv``, ``results_extended.csv``, ``summary.csv``, ``results.md``, ``jobs.csv``,
``timeline.csv``, ``plots/*.png`` and TensorBoard events (``tb/``) into the run directory
(``hydra.run.dir=DIR`` to choose it; ``output.plots=false`` / ``output.tensorboard=false`` to turn
those off) and prints the summary table. With ``skip_done=true`` a run whose directory already
holds a complete ``results.csv`` is skipped (to resume an interrupted sweep, rerun the same
command with the same ``hydra.sweep.dir``). See docs/evaluation.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from hetsched.config import sim_config_from  # (importing it registers the config schemas)
from hetsched.evaluation import (
    evaluate,
    resolve_seeds,
    results_complete,
    with_load,
    write_outputs,
)
from hetsched.sim.errors import exit_on_input_error
from hetsched.sim.throughput import ThroughputModel, default_throughput


def _policy_factories(cfg: DictConfig) -> dict[str, Any]:
    if not isinstance(cfg.scheduler, DictConfig) or len(cfg.scheduler) == 0:
        raise ValueError("no scheduler selected; use e.g. scheduler=fifo or 'scheduler=[fifo,las]'")
    out: dict[str, Any] = {}
    for name, node in cfg.scheduler.items():
        out[str(name)] = lambda node=node: instantiate(node)
    return out


def _plain(value: Any) -> Any:
    return OmegaConf.to_object(value) if OmegaConf.is_config(value) else value


@hydra.main(config_path="../conf", config_name="evaluate", version_base="1.3")
@exit_on_input_error
def main(cfg: DictConfig) -> None:
    """Run the evaluation described by ``cfg`` and write its results."""
    out_dir = Path(cfg.output.dir) if cfg.output.dir else Path(HydraConfig.get().runtime.output_dir)
    seeds = resolve_seeds(_plain(cfg.seed), _plain(cfg.seeds), cfg.num_seeds)
    policies = _policy_factories(cfg)
    cluster = instantiate(cfg.cluster)
    if cfg.skip_done and results_complete(out_dir, policies, seeds, cluster.name):
        print(f"skip_done: {out_dir}/results.csv already holds every run; skipped")
        return
    tm = (
        ThroughputModel.load(cfg.throughput_table) if cfg.throughput_table else default_throughput()
    )
    workload_factory = with_load(instantiate(cfg.workload), float(cfg.load))
    sim_config = sim_config_from(cfg.sim)
    outs = evaluate(
        policies,
        cluster=cluster,
        workload_factory=workload_factory,
        throughput=tm,
        seeds=seeds,
        sim_config=sim_config,
        progress=bool(cfg.progress),
    )
    summary_md = write_outputs(
        outs,
        out_dir,
        jobs=bool(cfg.output.jobs),
        timeline=bool(cfg.output.timeline),
        plots=bool(cfg.output.plots),
        tensorboard=bool(cfg.output.tensorboard),
    )
    print(cluster.describe())
    print(summary_md)
    print(f"results written to {out_dir}/results.csv and results.md (per-seed rows included)")


if __name__ == "__main__":
    main()
