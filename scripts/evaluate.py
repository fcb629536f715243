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
those off) and prints the summary table, then the completion marker ``run.json`` (a hash of the
resolved config and a digest of every result file). With ``skip_done=true`` a run whose directory
holds a valid marker for the same config is skipped (to resume an interrupted sweep, rerun the
same command with the same ``hydra.sweep.dir``); any other run first removes the directory's old
marker and results. Every setting is checked before any simulation: a bad value or unknown key
exits with status 2 and a one-line message. See docs/evaluation.md and docs/reliability.md.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

# (importing hetsched.config registers the config schemas)
from hetsched.config import sim_config_from, validate_config
from hetsched.evaluation import (
    clear_run,
    config_hash,
    evaluate,
    resolve_seeds,
    run_done,
    with_load,
    write_outputs,
)
from hetsched.sim.errors import HetschedError
from hetsched.sim.throughput import ThroughputModel, default_throughput

#: Settings that change what is written or shown, not the results (left out of the run hash).
NOT_HASHED = ("output", "progress", "skip_done", "seed", "seeds", "num_seeds")


def _policy_factories(cfg: DictConfig) -> dict[str, Any]:
    if not isinstance(cfg.scheduler, DictConfig) or len(cfg.scheduler) == 0:
        raise ValueError("no scheduler selected; use e.g. scheduler=fifo or 'scheduler=[fifo,las]'")
    # Each scheduler is built once here, so its constructor checks its settings before any
    # simulation; the first run uses that instance, later runs build fresh ones.
    built = {str(name): instantiate(node) for name, node in cfg.scheduler.items()}
    out: dict[str, Any] = {}
    for name, node in cfg.scheduler.items():
        out[str(name)] = lambda n=str(name), node=node: built.pop(n, None) or instantiate(node)
    return out


def _plain(value: Any) -> Any:
    return OmegaConf.to_object(value) if OmegaConf.is_config(value) else value


def run_hash(cfg: DictConfig, seeds: list[int]) -> str:
    """Hash of everything that determines a run's results (see :func:`config_hash`)."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(plain, dict)
    body: dict[str, Any] = {str(k): v for k, v in plain.items() if k not in NOT_HASHED}
    body["seeds"] = seeds
    return config_hash(body)


@hydra.main(config_path="../conf", config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Run the evaluation described by ``cfg``; a bad setting exits 2 with a one-line message."""
    try:
        _main(cfg)
    except HetschedError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except InstantiationException as e:
        cause = e.__cause__  # else e.g. an unknown field of a cluster or workload preset
        msg = str(cause) if isinstance(cause, HetschedError) else " ".join(str(e).split())
        print(f"error: {msg}", file=sys.stderr)
        sys.exit(2)


def _main(cfg: DictConfig) -> None:
    out_dir = Path(cfg.output.dir) if cfg.output.dir else Path(HydraConfig.get().runtime.output_dir)
    validate_config(cfg)
    seeds = resolve_seeds(_plain(cfg.seed), _plain(cfg.seeds), cfg.num_seeds)
    workload_factory = with_load(instantiate(cfg.workload), cfg.load)
    sim_config = sim_config_from(cfg.sim)
    policies = _policy_factories(cfg)
    digest = run_hash(cfg, seeds)
    if cfg.skip_done and run_done(out_dir, digest):
        print(f"skip_done: {out_dir} already holds this run (same config); skipped")
        return
    clear_run(out_dir)  # nothing of an earlier run stays, even if this one fails
    cluster = instantiate(cfg.cluster)
    tm = (
        ThroughputModel.load(cfg.throughput_table) if cfg.throughput_table else default_throughput()
    )
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
        config_hash=digest,
    )
    print(cluster.describe())
    print(summary_md)
    print(f"results written to {out_dir}/results.csv and results.md (per-seed rows included)")


if __name__ == "__main__":
    main()
