"""Feature builder: masks from the episode's node-by-job table equal those computed per window."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import hetsched.envs.features as features_mod
from hetsched.envs import ClusterParallelEnv
from hetsched.envs.testing import masked_random_actions


@pytest.mark.parametrize("cap", [True, False])
@pytest.mark.parametrize("cluster", ["sia_64", "pai_mixed"])
def test_per_job_static_masks_equal_direct_masks(
    cluster: str, cap: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = ClusterParallelEnv(
        cluster,
        workload="philly",
        workload_kwargs={"num_jobs": 60},
        seed=3,
        levels={"cap_at_node_share": cap},
    )
    assert env.core.features.levels.cap_at_node_share is cap
    rng = np.random.default_rng(3)
    env.reset(seed=3)
    core = env.core
    fb = core.features
    checked = 0
    for _ in range(150):
        assert core.jt is not None and core.wl is not None
        args = (core.jt, core.wl, core.window, core.slot_ok, core.free_g, core.free_c,
                core.free_m, core.node_up)  # fmt: skip
        fb._static_cache = None
        fast = fb.masks(*args)
        assert fb._per_job_cache is not None and fb._per_job_cache[1] is not None
        with monkeypatch.context() as m:
            m.setattr(features_mod, "PER_JOB_STATIC_MAX_BYTES", 0)
            fb._static_cache = None
            fb._per_job_cache = None
            slow = fb.masks(*args)
            assert fb._per_job_cache is not None and fb._per_job_cache[1] is None
        fb._per_job_cache = None
        for f in dataclasses.fields(slow):
            np.testing.assert_array_equal(getattr(fast, f.name), getattr(slow, f.name), f.name)
        checked += int(core.slot_ok.any())
        acts = masked_random_actions(env.action_masks(), rng)
        _, _, term, trunc, _ = env.step(dict(zip(env.possible_agents, acts.tolist(), strict=True)))
        if term["node_0"] or trunc["node_0"]:
            env.reset()
    assert checked > 50  # most steps had jobs in the window


def test_decode_legal_equals_decode_for_every_placement_action() -> None:
    from hetsched.envs.spaces import ActionCodec, LevelSets

    for groups in (1, 3):
        codec = ActionCodec(5, LevelSets(), groups=groups)
        a = np.arange(1, codec.n)
        np.testing.assert_array_equal(codec.decode_legal(a), np.stack(codec.decode(a)))
