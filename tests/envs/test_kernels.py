"""The compiled kernels (hetsched.envs.kernels) give exactly the numpy reference's numbers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence

from hetsched import numba_support
from hetsched.envs import ClusterParallelEnv, features, kernels, masks
from hetsched.envs.testing import masked_random_actions, small_env_kwargs

pytest.importorskip("numba")

MASK_FIELDS = ("mask", "legal", "single", "cpu_per_gpu", "mem_per_gpu", "mem_ok")
MASK_FIELDS += ("fits_any", "fits_one")


def _pair(monkeypatch: pytest.MonkeyPatch, **kw: Any) -> tuple[ClusterParallelEnv, ...]:
    """The same env twice: with the compiled kernels, and on the numpy path."""
    monkeypatch.delenv(numba_support.ENV_VAR, raising=False)
    fast = ClusterParallelEnv(**kw)
    monkeypatch.setenv(numba_support.ENV_VAR, "0")
    ref = ClusterParallelEnv(**kw)
    monkeypatch.delenv(numba_support.ENV_VAR)
    for env, on in ((fast, True), (ref, False)):
        f = env.core.features
        for kernel in (f.mask_kernel, f.observe_kernel, env.core._resident_kernel):
            assert (kernel is not None) == on
    return fast, ref


def _same_masks(a: features.MaskArrays, b: features.MaskArrays) -> None:
    for name in MASK_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.shape == y.shape and x.dtype == y.dtype, name
        np.testing.assert_array_equal(x, y, err_msg=name)


def _lockstep(fast: ClusterParallelEnv, ref: ClusterParallelEnv, steps: int, seed: int) -> int:
    """Step both envs with the same random legal actions; everything must be identical."""
    o1, _ = fast.reset(seed=seed)
    o2, _ = ref.reset(seed=seed)
    rng = np.random.default_rng(seed)
    agents = fast.possible_agents
    placed = 0
    for _ in range(steps):
        for a in agents:
            np.testing.assert_array_equal(o1[a]["observation"], o2[a]["observation"])
            np.testing.assert_array_equal(o1[a]["action_mask"], o2[a]["action_mask"])
        _same_masks(fast.core.ma, ref.core.ma)
        np.testing.assert_array_equal(fast.core._resident(), ref.core._resident())  # float64
        np.testing.assert_array_equal(fast.state(), ref.state())
        draw = masked_random_actions(fast.action_masks(), rng).tolist()
        acts = dict(zip(agents, draw, strict=True))
        o1, r1, t1, u1, i1 = fast.step(acts)
        o2, r2, t2, u2, i2 = ref.step(acts)
        assert r1 == r2 and t1 == t2 and u1 == u2
        assert data_equivalence(i1, i2)  # exact, arrays included
        placed += int(i1[agents[0]]["placed_jobs"])
        if t1[agents[0]] or u1[agents[0]]:
            m1, m2 = fast.episode_metrics(), ref.episode_metrics()
            assert m1.keys() == m2.keys()
            for k in m1:  # NaN (no decision timings in an env episode) equals NaN
                assert m1[k] == m2[k] or (m1[k] != m1[k] and m2[k] != m2[k]), k
            o1, _ = fast.reset()
            o2, _ = ref.reset()
    return placed


@pytest.mark.parametrize(
    "kw",
    [
        pytest.param(small_env_kwargs(num_jobs=24), id="small"),
        pytest.param(
            small_env_kwargs(num_jobs=24, failures={"mtbf_h": 1.0, "repair_h": 0.25}),
            id="failures",
        ),
        pytest.param(
            small_env_kwargs(num_jobs=24, levels={"cap_at_node_share": False}), id="no_cap"
        ),
        pytest.param(
            small_env_kwargs(
                num_jobs=24, levels={"gpu": [0.5, 1.0, 2.0], "cpu": [1.0], "mem": [1.0, 2.0]}
            ),
            id="other_levels",
        ),
        pytest.param(
            {"cluster": "pai_mixed", "workload": "philly", "workload_kwargs": {"num_jobs": 60}},
            id="pai_mixed",
        ),
    ],
)
def test_kernels_match_numpy_in_lockstep(monkeypatch: pytest.MonkeyPatch, kw: Any) -> None:
    fast, ref = _pair(monkeypatch, **kw)
    assert _lockstep(fast, ref, steps=300, seed=3) > 0  # jobs were placed along the way


def test_mask_kernel_without_the_per_job_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above PER_JOB_STATIC_MAX_BYTES the window's parts are built per window: same masks."""
    monkeypatch.setattr(masks, "PER_JOB_STATIC_MAX_BYTES", 0)  # where the masks read it
    fast, ref = _pair(monkeypatch, **small_env_kwargs(num_jobs=24))
    assert _lockstep(fast, ref, steps=150, seed=5) > 0
    assert fast.core.features._per_job_static(fast.core.jt, fast.core.wl) is None


def test_mask_kernel_on_random_free_resources(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random free GPUs, CPU and memory (down nodes included) over a full window."""
    fast, ref = _pair(monkeypatch, **small_env_kwargs(num_jobs=40))
    fast.reset(seed=1)
    ref.reset(seed=1)
    core, fb = fast.core, fast.core.features
    jt, wl = core.jt, core.wl
    assert jt is not None and wl is not None
    rng = np.random.default_rng(7)
    N, K = core.N, core.K
    cl = core.cluster
    checked_legal = 0
    for _ in range(200):
        window = rng.choice(wl.num_jobs, size=K, replace=False).astype(np.int64)
        slot_ok = rng.random(K) < 0.8
        window[~slot_ok] = -1
        free_g = rng.integers(0, cl.node_gpus + 1)
        free_c = rng.random(N) * cl.node_cpus
        free_m = rng.random(N) * cl.node_mem
        node_up = rng.random(N) < 0.9
        args = (jt, wl, window, slot_ok, free_g, free_c, free_m, node_up)
        a = fb.masks(*args)
        b = ref.core.features.masks(*args)
        _same_masks(a, b)
        checked_legal += int(a.legal.sum())
    assert checked_legal > 0


def test_env_var_selects_the_numpy_path(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (kernels.EPS, kernels.HOUR) == (features.EPS, features.HOUR)  # compiled-in copies
    monkeypatch.setenv(numba_support.ENV_VAR, "0")
    assert kernels.numba_module() is None and kernels.get("mask") is None
    monkeypatch.delenv(numba_support.ENV_VAR)
    assert kernels.numba_module() is not None and kernels.get("resident") is not None
    with pytest.raises(KeyError):
        kernels.get("no_such_kernel")


def test_kernels_compile_without_a_cache_location(monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only install (numba finds nowhere to cache) still gets working kernels."""
    from numba.core import caching

    monkeypatch.setattr(caching.CacheImpl, "_locator_classes", [])
    monkeypatch.setattr(kernels, "_compiled", {})
    fast = ClusterParallelEnv(**small_env_kwargs(num_jobs=24))
    assert fast.core.features.mask_kernel is not None
    monkeypatch.setenv(numba_support.ENV_VAR, "0")
    ref = ClusterParallelEnv(**small_env_kwargs(num_jobs=24))
    assert _lockstep(fast, ref, steps=60, seed=2) > 0


def test_env_with_kernels_pickles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Vector-env workers and RLlib ship envs by pickle: the copy keeps its kernels."""
    import pickle

    fast, ref = _pair(monkeypatch, **small_env_kwargs(num_jobs=24))
    copy = pickle.loads(pickle.dumps(fast))
    assert copy.core.features.mask_kernel is not None
    assert _lockstep(copy, ref, steps=60, seed=4) > 0


def test_missing_numba_falls_back_to_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an importable numba the env runs on the numpy path (no error)."""
    import sys

    monkeypatch.setitem(sys.modules, "numba", None)  # `import numba` raises ImportError
    monkeypatch.setattr(kernels, "_compiled", {})
    numba_support._import_numba.cache_clear()
    try:
        assert kernels.numba_module() is None and kernels.get("observe") is None
        env = ClusterParallelEnv(**small_env_kwargs(num_jobs=8))
        assert env.core.features.mask_kernel is None and env.core._resident_kernel is None
        env.reset(seed=0)
    finally:
        numba_support._import_numba.cache_clear()  # the next caller imports the real numba again


@pytest.mark.parametrize("mode", ["noisy", "none"])
def test_kernels_match_numpy_under_an_information_track(
    monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """The resident slots show the track's remaining work on both paths, not the true one."""
    from hetsched.benchmark.info import RuntimeInfo

    fast, ref = _pair(monkeypatch, **small_env_kwargs(num_jobs=24))
    for env in (fast, ref):
        env.core.features.set_runtime_info(RuntimeInfo(mode), seed=5)
    assert _lockstep(fast, ref, steps=300, seed=3) > 0
