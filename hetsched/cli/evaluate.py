"""``hetsched-evaluate``: schedulers head to head on one cluster and workload (a Hydra app).

Examples::

    hetsched-evaluate                                         # the default comparison, 5 seeds
    hetsched-evaluate scheduler=fifo workload=philly cluster=sia_64 seed=0
    hetsched-evaluate 'scheduler=[fifo,las]' 'seed=[0,1,2]'
    hetsched-evaluate num_seeds=10 load=2.0                   # seeds 0..9, double arrival rate
    hetsched-evaluate workload=csv workload.path=/abs/my.csv \\
        'workload.columns={submission_time: submit, duration: runtime, num_gpu: gpus}'
    hetsched-evaluate -m hydra/launcher=joblib scheduler=fifo,las seed=0,1   # sweep

(``python scripts/evaluate.py`` and ``python -m hetsched evaluate`` are the same app.)

Writes ``results.csv``, ``results_extended.csv``, ``summary.csv``, ``results.md``, ``jobs.csv``,
``timeline.csv``, ``plots/*.png`` and TensorBoard events (``tb/``) into the run directory
(``hydra.run.dir=DIR`` or ``output.dir=DIR``; ``output.plots=false`` / ``output.tensorboard=false``
turn those off), then the completion marker ``run.json`` (a hash of the resolved config and a
digest of every result file), and prints the summary table. With ``skip_done=true`` a run whose
directory holds a valid marker for the same config is skipped; any other run first removes the
directory's old marker and results. Settings and the output directory are checked before any
simulation runs: a bad value or unknown key exits with status 2 and a one-line message. See
docs/evaluation.md and docs/reliability.md.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hydra
import numpy as np
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from hetsched.cli import check_complete, run_app, short_errors

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
from hetsched.resources import CONF_DIR
from hetsched.sim.errors import ConfigError
from hetsched.sim.throughput import ThroughputModel, default_throughput


def _policy_factories(cfg: DictConfig) -> dict[str, Any]:
    if not isinstance(cfg.scheduler, DictConfig) or len(cfg.scheduler) == 0:
        raise ConfigError(
            "no scheduler selected; use e.g. scheduler=fifo or 'scheduler=[fifo,las]'"
        )
    return {str(name): _Factory(node) for name, node in cfg.scheduler.items()}


class _Factory:
    """Builds a scheduler preset; :meth:`check` builds the first one before any simulation (so a
    bad knob or checkpoint fails early) and the first run then uses it."""

    def __init__(self, node: Any) -> None:
        self.node = node
        self.first: Any = None

    def check(self) -> None:
        self.first = instantiate(self.node)

    def __call__(self) -> Any:
        out, self.first = self.first, None
        return out if out is not None else instantiate(self.node)


#: Settings that change what is written or shown, not the results (left out of the run hash).
NOT_HASHED = ("output", "progress", "skip_done", "seed", "seeds", "num_seeds")


def run_hash(cfg: DictConfig, seeds: list[int]) -> str:
    """Hash of everything that determines a run's results (see :func:`config_hash`)."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(plain, dict)
    body: dict[str, Any] = {str(k): v for k, v in plain.items() if k not in NOT_HASHED}
    body["seeds"] = seeds
    return config_hash(body)


def _plain(value: Any) -> Any:
    return OmegaConf.to_object(value) if OmegaConf.is_config(value) else value


def writable_dir(path: Path, field: str) -> Path:
    """Create ``path`` (with parents) and check that it can be written, before any work runs.

    Args:
        path: The output directory.
        field: The setting that named it (for the message), e.g. ``"output.dir"``.

    Raises:
        ConfigError: If it is a file, cannot be created or is not writable.
    """
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{field}={path} is a file, not a directory; choose a directory path")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(
            f"{field}={path}: cannot create the directory ({err.strerror}); choose a writable path"
        ) from err
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"{field}={path} is not writable; choose a writable directory")
    return path


def _checked_seeds(cfg: DictConfig) -> list[int]:
    try:
        return resolve_seeds(_plain(cfg.seed), _plain(cfg.seeds), cfg.num_seeds)
    except ValueError as err:
        raise ConfigError(str(err)) from err


def outputs_line(out_dir: Path) -> str:
    """The closing message: every output the run wrote (those that exist)."""
    names = [
        "results.csv",
        "results.md",
        "results_extended.csv",
        "summary.csv",
        "jobs.csv",
        "timeline.csv",
    ]
    files = [n for n in names if (out_dir / n).is_file()]
    files += sorted(p.name for p in out_dir.glob("*.log"))  # Hydra's log of the run (INFO lines)
    dirs = [f"{d}/" for d in ("plots", "tb") if (out_dir / d).is_dir()]
    return f"outputs in {out_dir}: " + ", ".join(files + dirs)


@hydra.main(config_path=str(CONF_DIR), config_name="evaluate", version_base="1.3")
@short_errors
def app(cfg: DictConfig) -> None:
    """Run the evaluation described by ``cfg`` and write its results."""
    check_complete(cfg)
    validate_config(cfg)
    field = "output.dir" if cfg.output.dir else "hydra.run.dir"
    out_dir = Path(cfg.output.dir) if cfg.output.dir else Path(HydraConfig.get().runtime.output_dir)
    writable_dir(out_dir, field)
    seeds = _checked_seeds(cfg)
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
    try:
        workload_factory = with_load(instantiate(cfg.workload), float(cfg.load))
    except ValueError as err:
        if isinstance(err, ConfigError):
            raise
        raise ConfigError(str(err)) from err
    sim_config = sim_config_from(cfg.sim)
    # Everything that can be checked is checked before the first simulation: the failure spec,
    # the workload (trace files are parsed once per process, so this costs one draw) and the
    # schedulers (checkpoints load).
    if sim_config.failures is not None:
        sim_config.failures.build(cluster.num_nodes, seeds[0])
    workload_factory(throughput=tm, cluster=cluster, rng=np.random.default_rng(seeds[0]))
    for factory in policies.values():
        factory.check()
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
    print(outputs_line(out_dir))


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point of ``hetsched-evaluate``; returns the exit code.

    Args:
        argv: Hydra overrides (default: the command line).
    """
    return run_app(app, argv)
