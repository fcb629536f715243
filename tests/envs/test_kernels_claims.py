"""The compiled claim resolution (hetsched.envs.kernels_claims) matches the numpy reference."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence

from hetsched import numba_support
from hetsched.envs import ClusterParallelEnv, core_state, kernels_claims
from hetsched.envs.core import EnvCore
from hetsched.envs.spaces import CONFLICT_RULES
from hetsched.envs.testing import masked_random_actions, small_env_kwargs

pytest.importorskip("numba")

FLAGS = ("invalid", "granted", "conflict", "gang_failed", "evicted")


def _pair(monkeypatch: pytest.MonkeyPatch, **kw: Any) -> tuple[ClusterParallelEnv, ...]:
    """The same env twice: claims resolved by the kernel, and on the numpy path."""
    monkeypatch.delenv(numba_support.ENV_VAR, raising=False)
    fast = ClusterParallelEnv(**kw)
    monkeypatch.setenv(numba_support.ENV_VAR, "0")
    ref = ClusterParallelEnv(**kw)
    monkeypatch.delenv(numba_support.ENV_VAR)
    assert fast.core._claims_kernel is not None and ref.core._claims_kernel is None
    return fast, ref


def _herd(core: EnvCore, rng: np.random.Generator, mask: np.ndarray) -> np.ndarray:
    """Every agent claims one slot (drawn among the slots someone may claim) where it can, at
    random legal levels: many claimants per job, so conflicts and gangs."""
    N, P, K = core.N, core.n_place, core.K
    per_slot = mask[:, 1:P].reshape(N, K, -1)
    open_slots = np.flatnonzero(per_slot.any(axis=(0, 2)))
    acts = masked_random_actions(mask, rng)
    if open_slots.size == 0:
        return acts
    k = int(rng.choice(open_slots))
    sub = per_slot[:, k, :]
    has = sub.any(axis=1)
    pick = masked_random_actions(np.where(has[:, None], sub, 1), rng)
    acts[has] = 1 + k * sub.shape[1] + pick[has]
    return acts


def _work_conserving(core: EnvCore, rng: np.random.Generator, mask: np.ndarray) -> np.ndarray:
    """Agents with a legal single-node claim take one (as ``AgentEnvConf.work_conserving``
    masks the no-op), the others act at random."""
    P = core.n_place
    single = core.ma.single.reshape(core.N, -1)
    hosts = (mask[:, 1:P] == 1) & single
    acts = masked_random_actions(mask, rng)
    has = hosts.any(axis=1)
    acts[has] = 1 + masked_random_actions(hosts[has], rng)
    return acts


def _actions(core: EnvCore, rng: np.random.Generator, kind: str) -> np.ndarray:
    mask = core.ma.mask
    if kind == "legal":
        return masked_random_actions(mask, rng)
    if kind == "herd":
        return _herd(core, rng, mask)
    if kind == "work_conserving":
        return _work_conserving(core, rng, mask)
    # "any": uniform over every action and a few out-of-range values (mostly invalid)
    return rng.integers(-2, core.n_actions + 2, size=core.N)


def _same_outcome(fast: EnvCore, ref: EnvCore, out_f: Any, out_r: Any) -> None:
    (res_f, placed_f), (res_r, placed_r) = out_f, out_r
    assert placed_f == placed_r and isinstance(placed_f, int)
    assert res_f.evicted_jobs == res_r.evicted_jobs
    for name in FLAGS:
        x, y = getattr(res_f, name), getattr(res_r, name)
        assert x.dtype == y.dtype == np.bool_ and x.shape == y.shape == (fast.N,), name
        np.testing.assert_array_equal(x, y, err_msg=name)
    a, b = fast.round_allocation(), ref.round_allocation()
    for f in ("job", "node", "gpus", "cpus", "mem", "share"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype, f
        np.testing.assert_array_equal(x, y, err_msg=f)  # same order, same bits
    for f in ("free_g", "free_c", "free_m", "_count", "_placed", "window"):
        np.testing.assert_array_equal(getattr(fast, f), getattr(ref, f), err_msg=f)
    assert fast._n_new_jobs == ref._n_new_jobs
    np.testing.assert_array_equal(fast.ma.mask, ref.ma.mask)


@pytest.mark.parametrize("rule", CONFLICT_RULES)
def test_claims_match_numpy_on_random_actions(monkeypatch: pytest.MonkeyPatch, rule: str) -> None:
    """Along a random rollout, each state's claims resolved both ways from copies of the core,
    with legal, herding (conflicts and gangs), work-conserving and arbitrary actions."""
    fast, _ = _pair(monkeypatch, **small_env_kwargs(num_jobs=40, conflict_rule=rule))
    fast.reset(seed=11)
    rng = np.random.default_rng(11)
    seen = dict.fromkeys(("placed", "conflict", "gang", "gang_failed", "invalid"), 0)
    for _ in range(40):
        for kind in ("legal", "herd", "work_conserving", "any"):
            acts = _actions(fast.core, rng, kind)
            c_fast = copy.deepcopy(fast.core)
            c_ref = copy.deepcopy(fast.core)
            c_ref._claims_kernel = None
            out_f = c_fast.resolve_claims(acts)
            out_r = c_ref.resolve_claims(acts)
            _same_outcome(c_fast, c_ref, out_f, out_r)
            res = out_f[0]
            seen["placed"] += out_f[1]
            seen["conflict"] += int(res.conflict.sum())
            seen["gang_failed"] += int(res.gang_failed.sum())
            seen["invalid"] += int(res.invalid.sum())
            new = c_fast.round_allocation().job[c_fast._cur.size :]
            seen["gang"] += int(new.size > np.unique(new).size)  # a job on several nodes
        acts = masked_random_actions(fast.action_masks(), rng)
        _, _, term, trunc, _ = fast.step(
            dict(zip(fast.possible_agents, acts.tolist(), strict=True))
        )
        if term[fast.possible_agents[0]] or trunc[fast.possible_agents[0]]:
            fast.reset()
    assert all(v > 0 for v in seen.values()), seen  # every case was exercised


@pytest.mark.parametrize(
    "kw",
    [
        pytest.param(small_env_kwargs(num_jobs=40, conflict_rule="best_fit"), id="best_fit"),
        pytest.param(small_env_kwargs(num_jobs=40, conflict_rule="most_free"), id="most_free"),
        pytest.param(small_env_kwargs(num_jobs=40, preemptive=True), id="preemptive"),
        pytest.param(
            small_env_kwargs(num_jobs=40, failures={"mtbf_h": 1.0, "repair_h": 0.25}),
            id="failures",
        ),
        pytest.param(
            {"cluster": "pai_mixed", "workload": "philly", "workload_kwargs": {"num_jobs": 60}},
            id="pai_mixed",
        ),
    ],
)
def test_rollouts_match_numpy(monkeypatch: pytest.MonkeyPatch, kw: Any) -> None:
    """Two envs in lockstep (compiled claims and numpy claims) under herding, work-conserving
    and arbitrary actions: the same observations, rewards, infos and allocations every step."""
    fast, ref = _pair(monkeypatch, **kw)
    o1, _ = fast.reset(seed=5)
    o2, _ = ref.reset(seed=5)
    rng = np.random.default_rng(5)
    agents = fast.possible_agents
    kinds = ("herd", "work_conserving", "legal", "any")
    conflicts = evicted = 0
    for t in range(240):
        assert data_equivalence(o1, o2)
        acts = dict(zip(agents, _actions(fast.core, rng, kinds[t % 4]).tolist(), strict=True))
        o1, r1, t1, u1, i1 = fast.step(acts)
        o2, r2, t2, u2, i2 = ref.step(acts)
        assert r1 == r2 and t1 == t2 and u1 == u2
        assert data_equivalence(i1, i2)
        a, b = fast.core.round_allocation(), ref.core.round_allocation()
        for f in ("job", "node", "gpus", "cpus", "mem"):
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
        conflicts += int(i1[agents[0]]["conflicts"])
        evicted += int(i1[agents[0]]["evicted_jobs"])
        if t1[agents[0]] or u1[agents[0]]:
            o1, _ = fast.reset()
            o2, _ = ref.reset()
    assert conflicts > 0
    if fast.core.cfg.preemptive:
        assert evicted > 0


def test_kernel_switch_and_constants(monkeypatch: pytest.MonkeyPatch) -> None:
    assert kernels_claims.EPS == core_state.EPS  # the compiled-in copy
    assert set(kernels_claims.RULE_CODES) == set(CONFLICT_RULES)
    monkeypatch.setenv(numba_support.ENV_VAR, "0")
    assert kernels_claims.get() is None
    monkeypatch.delenv(numba_support.ENV_VAR)
    assert kernels_claims.get() is not None


@pytest.mark.parametrize("numpy_path", [False, True])
def test_wrong_number_of_actions_is_refused(
    monkeypatch: pytest.MonkeyPatch, numpy_path: bool
) -> None:
    fast, ref = _pair(monkeypatch, **small_env_kwargs(num_jobs=8))
    env = ref if numpy_path else fast
    env.reset(seed=0)
    for bad in (np.zeros(env.core.N + 1, dtype=np.int64), np.zeros((1, env.core.N))):
        with pytest.raises(ValueError, match=r"one per node"):
            env.core.resolve_claims(bad)
