"""Feature builder: masks from the episode's node-by-job table equal those computed per window."""

from __future__ import annotations

import dataclasses
from functools import partial

import numpy as np
import pytest

import hetsched.envs.features as features_mod
import hetsched.envs.masks as masks_mod
from hetsched.envs import ClusterParallelEnv
from hetsched.envs.testing import masked_random_actions, synthetic_workload


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
            m.setattr(masks_mod, "PER_JOB_STATIC_MAX_BYTES", 0)  # where the masks read it
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


def test_masks_equal_a_per_node_per_level_loop() -> None:
    # The vectorised masks against a plain loop over nodes, slots and level combinations:
    # a node hosts a job alone when its capacity (GPUs, CPU and memory at the chosen amounts per
    # GPU) covers the GPU count and the job runs packed on its type; otherwise it may join a gang
    # when it has room for a GPU and its type's nodes together cover the count.
    # Many 8- and 16-GPU jobs arriving close together: single-node and gang claims both occur.
    wl = partial(synthetic_workload, num_jobs=40, mean_interarrival_s=30.0,
                 gpu_choices=(1, 8, 16), gpu_probs=(0.5, 0.25, 0.25))  # fmt: skip
    env = ClusterParallelEnv("pai_mixed", workload=wl, seed=5)
    rng = np.random.default_rng(5)
    env.reset(seed=5)
    core = env.core
    nt = core.cluster.node_type
    checked = gangs = 0
    for _ in range(40):
        ma, jt = core.ma, core.jt
        assert jt is not None
        N, K, Lg, Lc, Lm = ma.legal.shape
        if core._may_fit(core.window[core.slot_ok]):
            for k in np.flatnonzero(core.slot_ok).tolist():
                j = int(core.window[k])
                for g, c, m in np.ndindex(Lg, Lc, Lm):
                    cap = np.zeros(N)
                    for n in range(N):
                        if ma.mem_ok[n, k, m] and jt.allowed[j, nt[n]] and core.node_up[n]:
                            cap[n] = min(
                                core.free_g[n],
                                np.floor(
                                    core.free_c[n] / ma.cpu_per_gpu[n, k, c] + features_mod.EPS
                                ),
                                np.floor(
                                    core.free_m[n] / ma.mem_per_gpu[n, k, m] + features_mod.EPS
                                ),
                            )
                    G = jt.gpu_count[j, g]
                    for n in range(N):
                        ok = jt.level_ok[j, g]
                        alone = cap[n] >= G
                        single = alone and ok and jt.tput[j, nt[n], g, 0] > 0
                        gang = (
                            cap[n] >= 1
                            and cap[nt == nt[n]].sum() >= G
                            and ok
                            and (jt.tput[j, nt[n], g] > 0).any()
                        )
                        assert ma.single[n, k, g, c, m] == single, (n, k, g, c, m)
                        assert ma.legal[n, k, g, c, m] == (single if alone else gang), (
                            n,
                            k,
                            g,
                            c,
                            m,
                        )
                        checked += int(ma.legal[n, k, g, c, m])
                        gangs += int(ma.legal[n, k, g, c, m] and not single)
            np.testing.assert_array_equal(ma.fits_any, ma.legal.reshape(N, K, -1).any(axis=2))
            np.testing.assert_array_equal(ma.mask[:, 1:], ma.legal.reshape(N, -1))
        acts = masked_random_actions(env.action_masks(), rng)
        _, _, term, trunc, _ = env.step(dict(zip(env.possible_agents, acts.tolist(), strict=True)))
        if term["node_0"] or trunc["node_0"]:
            env.reset()
    assert checked > 100 and gangs > 100  # the loop saw many single and gang placements


def test_node_slowdown_feature_table_grows_with_the_entry_count() -> None:
    env = ClusterParallelEnv("sia_64", workload="philly", workload_kwargs={"num_jobs": 20}, seed=0)
    env.reset(seed=0)
    core, fb = env.core, env.core.features
    N, T = fb.type_onehot.shape
    count = np.arange(N) * 7  # beyond the table built for the largest node
    assert count.max() >= fb._slowdown_by_count.shape[0]
    out = fb.node_blocks(
        np.zeros((N, fb.R, fb.layout.res_dim)), count, core.free_g, core.free_c, core.free_m,
        core.node_up,
    )  # fmt: skip
    keep = 1.0 - core.tm.node_iota
    want = np.where(count >= 1, 1.0 - keep ** np.maximum(count - 1, 0), 0.0)
    np.testing.assert_array_equal(out[:, T + 6], want)
    np.testing.assert_array_equal(out[:, :T], fb.type_onehot)
