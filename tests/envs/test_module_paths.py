"""The env and engine modules are split into smaller ones; every name keeps its old import path."""

from __future__ import annotations

import importlib

import pytest

MOVED = {
    "hetsched.sim.engine": {
        "hetsched.sim.state": ["FUTURE", "PENDING", "RUNNING", "DONE", "SimConfig", "SimState",
                               "RoundRecord", "SimResult", "PolicyLike", "reproduction_throughput"],
        "hetsched.sim.rates": ["_entry_hash", "_sum_by", "group_by_job", "JobGroups"],
    },
    "hetsched.envs.core": {
        "hetsched.envs.core_state": ["StepStats", "ClaimResult", "EnvNotResetError", "EPS",
                                     "BIG_ROUNDS"],
        "hetsched.envs.claims": ["fill_gang", "is_spread"],
        "hetsched.envs.evictions": ["slot_ranks"],
    },
    "hetsched.envs.features": {
        "hetsched.envs.layout": ["ObsLayout", "JobTable", "MaskArrays", "build_job_table",
                                 "gpu_level_counts", "squash", "NUM_TYPES", "EPS", "HOUR", "F32"],
        "hetsched.envs.masks": ["PER_JOB_STATIC_MAX_BYTES"],
    },
}  # fmt: skip


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_import_paths_give_the_same_objects(old: str) -> None:
    old_mod = importlib.import_module(old)
    for new, names in MOVED[old].items():
        new_mod = importlib.import_module(new)
        for name in names:
            assert getattr(old_mod, name) is getattr(new_mod, name), f"{old}.{name}"


def test_split_classes_keep_their_methods() -> None:
    from hetsched.envs.core import EnvCore
    from hetsched.envs.features import FeatureBuilder
    from hetsched.sim.engine import Simulator

    for cls, methods in (
        (Simulator, ["advance", "validate", "job_rates", "running_rates", "state", "run"]),
        (EnvCore, ["resolve_claims", "end_decision", "refresh", "observations", "state",
                   "place_on_type", "release_entries", "decision_step_of", "apply_allocation"]),
        (FeatureBuilder, ["masks", "window_amounts", "observations", "node_blocks", "state"]),
    ):  # fmt: skip
        for m in methods:
            assert callable(getattr(cls, m, None)), f"{cls.__name__}.{m}"
