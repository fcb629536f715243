"""The round-start and node-head kernels (hetsched.envs.kernels_step) match their references."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hetsched import numba_support
from hetsched.envs import ClusterParallelEnv, features, kernels_step
from hetsched.envs.testing import masked_random_actions, small_env_kwargs
from hetsched.sim.allocation import Allocation

pytest.importorskip("numba")


def _env(monkeypatch: pytest.MonkeyPatch, numpy: bool) -> ClusterParallelEnv:
    monkeypatch.setenv(numba_support.ENV_VAR, "0" if numpy else "1")
    env = ClusterParallelEnv(**small_env_kwargs(num_jobs=40))
    monkeypatch.delenv(numba_support.ENV_VAR)
    assert (env.core._round_kernel is None) == numpy and (env.core._head_kernel is None) == numpy
    return env


def _random_alloc(rng: np.random.Generator, N: int, J: int, E: int, shared: bool) -> Allocation:
    share = rng.integers(-1, 2, size=E) if shared else np.full(E, -1)
    return Allocation(
        job=rng.integers(0, J, size=E),
        node=rng.integers(0, N, size=E),
        gpus=rng.integers(1, 4, size=E),
        cpus=rng.random(E) * 7.3,
        mem=rng.random(E) * 41.7,
        share=share,
    )


def test_round_start_matches_bincount(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random allocations: the same free resources (bit for bit), counts and distinct jobs as
    the numpy path; an allocation with space sharing is refused (-1)."""
    fast, ref = _env(monkeypatch, False), _env(monkeypatch, True)
    kernel = kernels_step.get("round_start")
    cl = fast.core.cluster
    N, J = cl.num_nodes, 30
    rng = np.random.default_rng(3)
    for _ in range(50):
        a = _random_alloc(rng, N, J, int(rng.integers(1, 40)), shared=False)
        out = (np.empty(N, dtype=np.int64), np.empty(N), np.empty(N), np.empty(N, dtype=np.int64))
        n = kernel(a.node, a.job, a.gpus, a.cpus, a.mem, a.share, J, cl.node_gpus, cl.node_cpus,
                   cl.node_mem, *out)  # fmt: skip
        ref.core._free_of(a)
        assert n == np.unique(a.job).size
        want_all = (ref.core.free_g, ref.core.free_c, ref.core.free_m)
        for got, want in zip(out[:3], want_all, strict=True):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(out[3], np.bincount(a.node, minlength=N))
    shared = _random_alloc(rng, N, J, 20, shared=True)
    assert (shared.share >= 0).any()
    out = (np.empty(N, dtype=np.int64), np.empty(N), np.empty(N), np.empty(N, dtype=np.int64))
    assert kernel(shared.node, shared.job, shared.gpus, shared.cpus, shared.mem, shared.share, J,
                  cl.node_gpus, cl.node_cpus, cl.node_mem, *out) == -1  # fmt: skip


def test_node_parts_match_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Along a rollout, the compiled node and global blocks equal the numpy ones; also with
    more entries on a node than the slowdown table holds (the table grows)."""
    fast, ref = _env(monkeypatch, False), _env(monkeypatch, True)
    fast.reset(seed=2)
    ref.reset(seed=2)
    rng = np.random.default_rng(2)
    agents = fast.possible_agents
    for _ in range(120):
        for env in (fast, ref):
            env.core._obs_cache = None
        n1, g1 = fast.core._node_parts()
        n2, g2 = ref.core._node_parts()
        np.testing.assert_array_equal(n1, n2)
        np.testing.assert_array_equal(g1, g2)
        acts = dict(
            zip(agents, masked_random_actions(fast.action_masks(), rng).tolist(), strict=True)
        )
        out = fast.step(acts)
        ref.step(acts)
        if out[2][agents[0]] or out[3][agents[0]]:
            fast.reset()
            ref.reset()
    f = fast.core.features
    f._slowdown_by_count = f._slowdown_by_count[:1]  # any entry on a node overflows it
    ref.core.features._slowdown_by_count = ref.core.features._slowdown_by_count[:1]
    assert fast.core._count.max() >= 1
    for env in (fast, ref):
        env.core._obs_cache = None
    n1, g1 = fast.core._node_parts()
    n2, g2 = ref.core._node_parts()
    np.testing.assert_array_equal(n1, n2)
    np.testing.assert_array_equal(g1, g2)
    assert f._slowdown_by_count.size > 1


def test_window_matches_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random waiting queues, placed flags, free GPUs, down nodes and backfill slots: the same
    window and fit test as the numpy path, including fits that need a whole GPU type (a gang)
    and none."""
    ref = _env(monkeypatch, True)
    ref.reset(seed=0)
    core = ref.core
    kernel = kernels_step.get("window")
    cl, J, K = core.cluster, core.J, core.K
    rng = np.random.default_rng(4)
    outcomes: set[tuple[bool, bool]] = set()
    backfilled: set[bool] = set()
    for trial in range(300):
        pending = rng.permutation(J)[: int(rng.integers(0, 3 * K))].astype(np.int64)
        core._placed = rng.random(J) < 0.3
        core.free_g = rng.integers(0, cl.node_gpus + 1) // int(rng.integers(1, 5))
        core.node_up = rng.random(cl.num_nodes) < 0.8
        use_up = bool(trial % 2)
        monkeypatch.setattr(core, "failures", object() if use_up else None)
        backfill = int(rng.choice([0, 1, K // 2, K]))
        monkeypatch.setattr(core, "cfg", dataclasses.replace(core.cfg, window_backfill=backfill))
        core.pending = pending
        win, ok = np.empty(K, dtype=np.int64), np.empty(K, dtype=bool)
        fits = kernel(pending, core._placed, core.jt.min_gpus, core.free_g, core.node_up, use_up,
                      cl.node_type, features.NUM_TYPES, win, ok, backfill,
                      core.jt.allowed)  # fmt: skip
        rest = core.window_jobs()
        if backfill == 0:
            np.testing.assert_array_equal(rest, pending[~core._placed[pending]][:K])
        else:
            backfilled.add(bool(set(rest) - set(pending[~core._placed[pending]][:K])))
        np.testing.assert_array_equal(win[: rest.size], rest)
        assert (win[rest.size :] == -1).all()
        np.testing.assert_array_equal(ok, win >= 0)
        assert fits == core._may_fit(rest)
        up_free = np.where(core.node_up, core.free_g, 0) if use_up else core.free_g
        alone = rest.size > 0 and up_free.max() >= core.jt.min_gpus[rest].min()
        outcomes.add((bool(fits), bool(alone)))
    assert outcomes == {(True, True), (True, False), (False, False)}  # every branch was taken
    assert backfilled == {True, False}  # backfill slots changed some windows, not all
