"""hetsched: a testbed for scheduling deep-learning training jobs on heterogeneous GPU clusters.

Sub-packages (dependencies point down):

* :mod:`hetsched.agents` -- MAIFS-style networks and trainer (uses envs and sim).
* :mod:`hetsched.envs` -- Gymnasium / PettingZoo adapters over the simulator.
* :mod:`hetsched.baselines` -- fixed scheduling policies (uses sim).
* :mod:`hetsched.sim` -- the numpy cluster simulator (uses nothing of ours).
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
