"""``hetsched-train``: train the MAIFS-style agent (a Hydra app).

Examples::

    hetsched-train agent=maifs_quick                 # end to end in a few minutes on 2 cores
    hetsched-train agent=maifs num_workers=2 out=my_maifs.pt
    hetsched-train resume=outputs/train/RUN/checkpoints/ppo_8192.pt hydra.run.dir=outputs/train/RUN

(``python scripts/train.py`` and ``python -m hetsched train`` are the same app.)

Writes TensorBoard logs (``tb/``) and checkpoints (``checkpoints/{phase}_{step}.pt``, ``best.pt``)
into the run directory. A run that diverges (NaN or infinite loss or weights) or a checkpoint that
cannot be used stops with a one-line error and exit code 2. Training needs the ``agents`` extra
(PyTorch). Guide: docs/training.md and docs/maifs.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

import hetsched.config  # noqa: F401  (registers the config schemas)
from hetsched.cli import check_complete, run_app, short_errors
from hetsched.resources import CONF_DIR
from hetsched.sim.errors import ConfigError


@hydra.main(config_path=str(CONF_DIR), config_name="train", version_base="1.3")
@short_errors
def app(cfg: DictConfig) -> None:
    """Train and print where the best checkpoint and the logs are."""
    check_complete(cfg)
    from hetsched.agents.config import TrainConfig
    from hetsched.agents.trainer import Trainer
    from hetsched.cli.evaluate import writable_dir

    obj = OmegaConf.to_object(cfg)
    if not isinstance(obj, TrainConfig):
        raise ConfigError(f"train config composed to {type(obj).__name__}, not TrainConfig")
    # Test families and clusters are held out whole (docs/benchmark.md): refuse them up front.
    from hetsched.benchmark.scenarios import check_trainable, check_trainable_preset

    for item in obj.agent.curriculum:
        if item.scenario:
            check_trainable(item.scenario)
        else:
            check_trainable_preset(item.workload, item.workload_kwargs, item.cluster)
    ev = obj.agent.eval  # checkpoints are chosen on it: a validation window, never a test one
    cluster = _preset_name(cfg.cluster, "cluster")
    workload = _preset_name(cfg.workload, "workload")
    if ev.scenario:
        check_trainable(ev.scenario)
    # the app's and the evaluation's presets too (used when no scenario or curriculum is set)
    check_trainable_preset(ev.workload or workload, ev.workload_kwargs, ev.cluster or cluster)
    if not obj.agent.curriculum:
        check_trainable_preset(workload, {}, cluster)
    run_dir = writable_dir(Path(HydraConfig.get().runtime.output_dir), "hydra.run.dir")
    if obj.out:
        writable_dir(Path(obj.out).expanduser().resolve().parent, "out (its directory)")
    best = Trainer(obj, run_dir).run()
    extra = sorted(p.name for p in run_dir.glob("*.log"))
    extra += [f"{d}/" for d in ("tb", "checkpoints") if (run_dir / d).is_dir()]
    print(f"best checkpoint: {best}")
    print(f"outputs in {run_dir}: " + ", ".join(extra))


def _preset_name(node: object, group: str) -> str:
    """The preset name of the app's ``cluster`` / ``workload`` (a name, or a composed preset)."""
    if isinstance(node, str):
        return node
    choice = HydraConfig.get().runtime.choices.get(group)
    return str(choice) if choice else str(getattr(node, "name", ""))


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point of ``hetsched-train``; returns the exit code.

    Args:
        argv: Hydra overrides (default: the command line).
    """
    return run_app(app, argv)
