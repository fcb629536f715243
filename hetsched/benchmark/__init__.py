"""The benchmark: scenarios, splits, declared information and the leaderboard.

* :mod:`hetsched.benchmark.scenarios` -- named (trace family, window sampler, cluster, load)
  scenarios and :func:`check_trainable`;
* :mod:`hetsched.benchmark.splits` -- train / validation / test by trace family and cluster;
* :mod:`hetsched.benchmark.windows` -- seeded windows (each seed its own stretch of a trace);
* :mod:`hetsched.benchmark.info` -- the information tracks (``runtime_info``);
* :mod:`hetsched.benchmark.runner` -- the benchmark run and its leaderboard
  (``scripts/benchmark.py``; imported on demand, it pulls in the schedulers).

This package's modules other than the runner depend on :mod:`hetsched.sim` only, so the envs may
import them.
"""

from __future__ import annotations

from hetsched.benchmark.info import TRACKS, RuntimeInfo
from hetsched.benchmark.scenarios import (
    FAMILIES,
    LOADS,
    SCENARIOS,
    Scenario,
    check_trainable,
    check_trainable_preset,
    get_scenario,
    scenarios_in,
)
from hetsched.benchmark.splits import SELECTIONS, SPLITS, split_names

__all__ = [
    "FAMILIES",
    "LOADS",
    "SCENARIOS",
    "SELECTIONS",
    "SPLITS",
    "TRACKS",
    "RuntimeInfo",
    "Scenario",
    "check_trainable",
    "check_trainable_preset",
    "get_scenario",
    "scenarios_in",
    "split_names",
]
