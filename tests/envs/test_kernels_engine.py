"""The compiled engine round (hetsched.envs.kernels_engine) gives exactly the engine's numbers."""

from __future__ import annotations

import copy
import pickle
from functools import partial
from typing import Any

import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence

from hetsched import numba_support
from hetsched.envs import ClusterParallelEnv, kernels_engine, rounds
from hetsched.envs.presets import resolve_cluster
from hetsched.envs.testing import masked_random_actions, synthetic_workload
from hetsched.sim import state as sim_state
from hetsched.sim.allocation import Allocation
from hetsched.sim.engine import SimConfig, Simulator
from hetsched.sim.errors import SimulationStalledError
from hetsched.sim.faults import FailureSpec
from hetsched.sim.throughput import default_throughput

pytest.importorskip("numba")

RECORD_FIELDS = ("t0", "dt", "rounds", "completed", "restarted", "busy_gpus", "jobs_in_system_s")
ALLOC_FIELDS = ("job", "node", "gpus", "cpus", "mem", "share")


def _same(a: Any, b: Any, what: str) -> None:
    """Equal bit for bit (arrays: dtype, shape and bytes; scalars: type and value, NaN = NaN)."""
    assert type(a) is type(b), what
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, what
        assert a.tobytes() == b.tobytes(), what
    elif isinstance(a, float):
        assert a == b or (a != a and b != b), what
    else:
        assert a == b, what


def _same_sim(sim: Simulator, ref: Simulator) -> None:
    """Every attribute of two simulators agrees (the compiled round's buffers aside)."""
    mine = {k: v for k, v in vars(sim).items() if k != "_engine_round"}
    theirs = {k: v for k, v in vars(ref).items() if k != "_engine_round"}
    assert mine.keys() == theirs.keys()
    for k, v in mine.items():
        w = theirs[k]
        if isinstance(v, Allocation):
            for f in ALLOC_FIELDS:
                _same(getattr(v, f), getattr(w, f), f"{k}.{f}")
        elif k == "_timeline":
            assert len(v) == len(w)
            for row, ref_row in zip(v, w, strict=True):
                assert len(row) == len(ref_row)
                for x, y in zip(row, ref_row, strict=True):
                    _same(x, y, k)
        elif isinstance(v, np.ndarray | int | float | bool):
            _same(v, w, k)


class _Checked:
    """Stands in for ``fast_advance`` in the env: runs every compiled round and the engine's
    ``advance`` on a copy of the simulator taken before it, and compares everything."""

    def __init__(self) -> None:
        self.compiled = 0
        self.gangs = 0  # rounds with a job on several nodes
        self.finished = 0
        self.restarted = 0
        self.preempted = 0
        self.jumps = 0  # rounds that simulated several rounds at once

    def __call__(self, sim: Simulator, alloc: Allocation, rs: float, mr: int) -> Any:
        ref = copy.deepcopy(sim)
        ref.__dict__.pop("_engine_round", None)
        preempted = int(sim.preemptions.sum())
        rec = kernels_engine.fast_advance(sim, alloc, rs, mr)
        assert rec is not None  # every round of these envs is in the compiled case
        want = Simulator.advance(ref, alloc, round_s=rs, max_rounds=mr)
        for f in RECORD_FIELDS:
            _same(getattr(rec, f), getattr(want, f), f)
        _same_sim(sim, ref)
        self.compiled += 1
        self.gangs += bool(alloc.size and np.bincount(alloc.job).max() > 1)
        self.finished += bool(rec.completed.size)
        self.restarted += bool(rec.restarted.size)
        self.preempted += int(sim.preemptions.sum()) > preempted
        self.jumps += rec.rounds > 1
        return rec


def _roll(env: ClusterParallelEnv, steps: int, seed: int) -> None:
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    agents = env.possible_agents
    for _ in range(steps):
        acts = masked_random_actions(env.action_masks(), rng)
        _, _, term, trunc, _ = env.step(dict(zip(agents, acts.tolist(), strict=True)))
        if term[agents[0]] or trunc[agents[0]]:
            env.reset()


ELASTIC = partial(synthetic_workload, num_jobs=60, mean_interarrival_s=60.0, elastic_frac=0.5)
PHILLY: dict[str, Any] = {"workload": "philly", "workload_kwargs": {"num_jobs": 100}}


@pytest.mark.parametrize(
    ("cluster", "kw"),
    [
        pytest.param("sia_64", PHILLY, id="sia_64-philly"),
        pytest.param(
            "sia_64",
            {"workload": ELASTIC, "preemptive": True, "max_decisions_per_round": 3},
            id="sia_64-elastic-evict",
        ),
        pytest.param(
            "pai_mixed",
            {**PHILLY, "preemptive": True, "max_decisions_per_round": 3},
            id="pai_mixed-philly-evict",
        ),
        pytest.param("pai_mixed", {"workload": ELASTIC}, id="pai_mixed-elastic"),
    ],
)
def test_compiled_rounds_match_the_engine_on_env_episodes(
    monkeypatch: pytest.MonkeyPatch, cluster: str, kw: dict[str, Any]
) -> None:
    monkeypatch.delenv(numba_support.ENV_VAR, raising=False)
    check = _Checked()
    monkeypatch.setattr(rounds, "fast_advance", check)
    env = ClusterParallelEnv(cluster, max_cycles=10**9, **kw)
    assert env.core._engine_compiled
    _roll(env, 250, seed=3)
    # The episodes exercised what the round has to get right.
    assert check.compiled > 50 and check.gangs and check.finished and check.jumps
    if env.core.cfg.preemptive:
        assert check.restarted and check.preempted


def _envs(monkeypatch: pytest.MonkeyPatch, **kw: Any) -> tuple[ClusterParallelEnv, ...]:
    """The same env with the compiled round and with the engine's code (other kernels on)."""
    monkeypatch.delenv(numba_support.ENV_VAR, raising=False)
    fast, ref = ClusterParallelEnv(**kw), ClusterParallelEnv(**kw)
    ref.core._engine_compiled = False
    return fast, ref


@pytest.mark.parametrize(
    ("kw", "compiled"),
    [
        pytest.param(
            {"cluster": "sia_64", **PHILLY, "preemptive": True, "max_decisions_per_round": 2},
            True,
            id="compiled",
        ),
        pytest.param(
            {"cluster": "sia_64", "workload": ELASTIC, "failures": {"mtbf_h": 2.0}},
            False,
            id="failures-fall-back",
        ),
        pytest.param(
            {"cluster": "pai_mixed", **PHILLY, "validate_allocations": True},
            False,
            id="untrusted-fall-back",
        ),
    ],
)
def test_env_steps_identical_with_and_without_the_compiled_round(
    monkeypatch: pytest.MonkeyPatch, kw: dict[str, Any], compiled: bool
) -> None:
    fast, ref = _envs(monkeypatch, max_cycles=10**9, **kw)
    ran = [0, 0]  # compiled rounds, rounds left to the engine

    def counted(*a: Any) -> Any:
        rec = kernels_engine.fast_advance(*a)
        ran[rec is None] += 1
        return rec

    monkeypatch.setattr(rounds, "fast_advance", counted)
    o1, _ = fast.reset(seed=5)
    o2, _ = ref.reset(seed=5)
    rng = np.random.default_rng(5)
    agents = fast.possible_agents
    for _ in range(150):
        assert data_equivalence(o1, o2)
        np.testing.assert_array_equal(fast.state(), ref.state())
        for name in ("free_g", "free_c", "free_m", "_count", "pending"):
            _same(getattr(fast.core, name), getattr(ref.core, name), name)
        assert fast.core._n_cur_jobs == ref.core._n_cur_jobs
        assert fast.core.sim is not None and ref.core.sim is not None
        _same_sim(fast.core.sim, ref.core.sim)
        draw = masked_random_actions(fast.action_masks(), rng).tolist()
        acts = dict(zip(agents, draw, strict=True))
        o1, r1, t1, u1, i1 = fast.step(acts)
        o2, r2, t2, u2, i2 = ref.step(acts)
        assert r1 == r2 and t1 == t2 and u1 == u2 and data_equivalence(i1, i2)
        if t1[agents[0]] or u1[agents[0]]:
            o1, _ = fast.reset()
            o2, _ = ref.reset()
    assert (ran[0] > 50) if compiled else (ran[0] == 0)  # ref never calls it


# ---------------------------------------------------------------------- the simulator alone
def _sim(**config: Any) -> Simulator:
    cluster = resolve_cluster("sia_64")
    tm = default_throughput()
    wl = synthetic_workload(  # gangs that fit on one node (the first fit below)
        throughput=tm,
        cluster=cluster,
        rng=np.random.default_rng(0),
        num_jobs=12,
        gpu_choices=(1, 2, 4),
        gpu_probs=(0.5, 0.3, 0.2),
    )
    return Simulator(cluster, wl, tm, SimConfig(**config))


def _first_fit(sim: Simulator, share: int = -1) -> Allocation:
    """The running jobs' entries plus one entry per pending job on the first node with room
    (the jobs' requested GPUs)."""
    free = sim.state().free_gpus.copy()
    wl, rows = sim.workload, []
    for j in sim.pending_jobs():
        g = int(wl.req_gpus[j])
        n = np.flatnonzero(free >= g)
        if n.size and sim.tm.isolated(wl.model[j], sim.cluster.node_type[n[0]], g) > 0:
            free[n[0]] -= g
            c, m = float(wl.cpu_per_gpu[j] * g), float(wl.mem_per_gpu[j] * g)
            rows.append((int(j), int(n[0]), g, c, m, share))
    return Allocation.concat([sim.current, Allocation.from_entries(rows)])


def test_rounds_outside_the_compiled_case_change_nothing() -> None:
    sim = _sim()
    alloc = _first_fit(sim)
    before = copy.deepcopy(sim)
    shared = _first_fit(sim, share=0)  # space sharing
    shared.share[1:] = -1  # one entry "shares" alone: the compiled round leaves it to the engine
    assert kernels_engine.fast_advance(sim, shared, 60.0, 1) is None
    _same_sim(sim, before)
    failing = _sim(failures=FailureSpec(mtbf_h=5.0))
    assert kernels_engine.fast_advance(failing, _first_fit(failing), 60.0, 1) is None
    assert kernels_engine.fast_advance(sim, alloc, 60.0, 1) is not None  # the plain case runs


def test_a_finished_run_is_left_to_the_engine() -> None:
    sim = _sim()
    for _ in range(1000):
        if sim.done:
            break
        assert kernels_engine.fast_advance(sim, _first_fit(sim), 60.0, 1 << 40) is not None
    assert sim.done
    assert kernels_engine.fast_advance(sim, Allocation.empty(), 60.0, 1) is None
    with pytest.raises(SimulationStalledError, match="finished"):
        sim.advance(Allocation.empty())


def test_stall_is_reported_as_by_the_engine() -> None:
    """Nothing placed while jobs wait: the same error after the same number of rounds."""
    sims = [_sim(max_idle_rounds=3), _sim(max_idle_rounds=3)]
    errors = []
    for i, sim in enumerate(sims):
        with pytest.raises(SimulationStalledError) as info:
            for _ in range(10):
                if i == 0:
                    assert kernels_engine.fast_advance(sim, Allocation.empty(), 60.0, 1)
                else:
                    sim.advance(Allocation.empty(), round_s=60.0)
        errors.append(str(info.value))
    assert errors[0] == errors[1]
    _same_sim(sims[0], sims[1])


def test_bad_round_length_is_rejected_as_by_the_engine() -> None:
    sim = _sim()
    with pytest.raises(Exception, match="round_s") as got:
        kernels_engine.fast_advance(sim, _first_fit(sim), float("nan"), 1)
    with pytest.raises(type(got.value), match="round_s"):
        _sim().advance(Allocation.empty(), round_s=float("nan"))


def test_status_codes_are_the_engines() -> None:
    codes = (kernels_engine._PENDING, kernels_engine._RUNNING, kernels_engine._DONE)
    assert codes == (sim_state.PENDING, sim_state.RUNNING, sim_state.DONE)


def test_env_var_selects_the_engines_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(numba_support.ENV_VAR, "0")
    env = ClusterParallelEnv("sia_64", **PHILLY)
    assert not kernels_engine.available() and not env.core._engine_compiled
    _roll(env, 5, seed=0)
    assert "_engine_round" not in vars(env.core.sim)


def test_env_keeps_its_compiled_round_when_the_env_var_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(numba_support.ENV_VAR, raising=False)
    env = ClusterParallelEnv("sia_64", **PHILLY)
    monkeypatch.setenv(numba_support.ENV_VAR, "0")  # decided when the env was built
    _roll(env, 5, seed=0)
    assert env.core._engine_compiled and "_engine_round" in vars(env.core.sim)


def test_env_with_the_compiled_round_pickles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(numba_support.ENV_VAR, raising=False)
    env = ClusterParallelEnv("sia_64", **PHILLY)
    _roll(env, 5, seed=0)
    assert "_engine_round" in vars(env.core.sim)
    copy_ = pickle.loads(pickle.dumps(env))
    rng = np.random.default_rng(1)
    draw = masked_random_actions(env.action_masks(), rng).tolist()
    acts = dict(zip(env.possible_agents, draw, strict=True))
    assert data_equivalence(env.step(acts), copy_.step(acts))
