"""Where the files shipped inside the package live (presets, checkpoints, data).

Every path is resolved with :mod:`importlib.resources`, so it is the same from a source checkout,
an editable install and a wheel installed anywhere. This module imports nothing else of ours, so
any layer may use it.

* :data:`CONF_DIR` -- the Hydra presets (``hetsched/conf``: ``evaluate.yaml``, ``train.yaml`` and
  the ``cluster/``, ``workload/``, ``scheduler/``, ``agent/``, ``experiment/`` groups).
* :data:`CHECKPOINT_DIR` -- the shipped MAIFS checkpoints (``hetsched/checkpoints``).
* :data:`DATA_DIR` -- shipped traces, profiles and cluster specs (``hetsched/data``).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: The installed ``hetsched`` package directory.
PACKAGE_DIR: Path = Path(str(resources.files("hetsched")))
#: Hydra presets (``config_path`` of the command-line apps).
CONF_DIR: Path = PACKAGE_DIR / "conf"
#: Shipped MAIFS checkpoints.
CHECKPOINT_DIR: Path = PACKAGE_DIR / "checkpoints"
#: Shipped data files (traces, throughput profiles, cluster specs).
DATA_DIR: Path = PACKAGE_DIR / "data"


def preset(group: str, name: str) -> Path:
    """Path of the preset ``conf/<group>/<name>.yaml`` (which may not exist).

    Args:
        group: Config group, e.g. ``"cluster"`` or ``"workload"``.
        name: Preset name without ``.yaml``, e.g. ``"sia_64"``.
    """
    return CONF_DIR / group / f"{name}.yaml"


def checkpoint(name: str) -> Path:
    """Path of the shipped checkpoint ``name`` (e.g. ``"maifs_default.pt"``; may not exist)."""
    return CHECKPOINT_DIR / name
