"""Train the MAIFS-style agent (a Hydra app; the logic is :class:`hetsched.agents.trainer.Trainer`).

Examples::

    python scripts/train.py agent=maifs_quick                 # end to end in about 4 minutes
    python scripts/train.py agent=maifs num_workers=2 out=my_maifs.pt
    python scripts/train.py resume=outputs/train/RUN/checkpoints/ppo_8192.pt \\
        hydra.run.dir=outputs/train/RUN

Writes TensorBoard logs (``tb/``) and checkpoints (``checkpoints/{phase}_{step}.pt``,
``best.pt``) into the run directory. A run that diverges (NaN or infinite loss or weights) or a
checkpoint that cannot be used stops with a one-line error and exit code 2. Guide:
``docs/maifs.md``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

import hetsched.config  # noqa: F401  (registers the config schemas)
from hetsched.agents.checkpoint import CheckpointError
from hetsched.agents.config import TrainConfig
from hetsched.agents.learner import TrainingDivergedError
from hetsched.agents.trainer import Trainer


@hydra.main(config_path="../conf", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Train and print where the result is."""
    obj = OmegaConf.to_object(cfg)
    assert isinstance(obj, TrainConfig)
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        best = Trainer(obj, run_dir).run()
    except (TrainingDivergedError, CheckpointError) as err:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    print(f"best checkpoint: {best}")
    print(f"run directory: {run_dir} (checkpoints/, tb/: tensorboard --logdir {run_dir / 'tb'})")


if __name__ == "__main__":
    main()
