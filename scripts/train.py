"""Train the MAIFS-style agent (a Hydra app).

Examples::

    python scripts/train.py agent=maifs workload=philly cluster=sia_64
    python scripts/train.py agent.ppo.env_steps=2000 out=checkpoints/maifs_default.pt
    python scripts/train.py resume=outputs/train/RUN/checkpoints/8000.pt hydra.run.dir=outputs/train/RUN

Writes TensorBoard logs (``tb/``) and checkpoints (``checkpoints/{step}.pt``, ``best.pt``) into
the run directory.
"""

from __future__ import annotations

from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

import hetsched.config  # noqa: F401  (registers the config schemas)
from hetsched.agents.config import TrainConfig
from hetsched.agents.trainer import Trainer


@hydra.main(config_path="../conf", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Train and print where the best checkpoint is."""
    obj = OmegaConf.to_object(cfg)
    assert isinstance(obj, TrainConfig)
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    best = Trainer(obj, run_dir).run()
    print(f"best checkpoint: {best}")


if __name__ == "__main__":
    main()
