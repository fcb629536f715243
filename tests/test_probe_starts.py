"""scripts/probe_starts.py: each class of a first start on a crafted case, the preset run, errors."""

from __future__ import annotations

import runpy
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import make_cluster, make_tm, make_workload

from hetsched.agents.policy import CoreActorPolicy
from hetsched.envs.core import EnvCore
from hetsched.envs.spaces import EnvSettings
from hetsched.sim import SimConfig, Simulator
from hetsched.sim.catalog import GPU_TYPE_NAMES
from hetsched.sim.throughput import ThroughputModel

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = runpy.run_path(str(ROOT / "scripts" / "probe_starts.py"))


def _claim(core: EnvCore, last: bool) -> np.ndarray:
    """The first window job that fits one node alone, claimed by the lowest (or highest) such
    node at the requested amounts."""
    a = np.zeros(core.N, dtype=np.int64)
    one = core.features.one
    single = core.ma.single[:, :, one[0], one[1], one[2]]
    for k in np.flatnonzero(core.slot_ok & single.any(axis=0)).tolist():
        nodes = np.flatnonzero(single[:, k])
        a[int(nodes[-1] if last else nodes[0])] = int(core.codec.encode(k, *one))
        break
    return a


def _lowest(core: EnvCore) -> np.ndarray:
    return _claim(core, last=False)


def _highest(core: EnvCore) -> np.ndarray:
    return _claim(core, last=True)


class _GuardedFirstJob(CoreActorPolicy):
    """Job 0 counts as placed by the makespan guard (so no preemption rule may take it)."""

    def reset(self, *args: Any, **kwargs: Any) -> None:
        super().reset(*args, **kwargs)
        self._critical[0] = True


def _case() -> tuple[Any, ThroughputModel]:
    # Node 0: one A100; node 1: one T4. Model 'a' runs 5x faster on the A100.
    cl = make_cluster(
        [
            {"gpu_type": "a100", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
            {"gpu_type": "t4", "count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64},
        ]
    )
    base = np.ones((2, len(GPU_TYPE_NAMES)))
    base[:, GPU_TYPE_NAMES.index("a100")] = 5.0
    return cl, make_tm(base)


def _run(
    pol: CoreActorPolicy, cl: Any, wl: Any, tm: ThroughputModel, models: list[str] | None = None
) -> dict[str, Counter[str]]:
    """First starts of one run of ``pol``, by model and class."""
    counts: dict[str, Counter[str]] = {}
    SCRIPT["spy_on"](pol, counts, models)
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    res = Simulator(cl, wl, tm, SimConfig(round_s=60)).run(pol)
    assert np.isfinite(res.finish_time).all()
    return counts


@pytest.mark.parametrize(
    ("policy_cls", "actor", "ratio", "work0", "expected"),
    [
        # Job 0 (7,200 s on the A100) holds it when job 1 (120 s there) arrives at 120 s and
        # starts on the T4: with preemption off, job 0 is no victim by the rules' ratio.
        (CoreActorPolicy, _lowest, None, 36000.0, "short"),
        # Ratio 4: job 0's 7,080 s left exceed 4 x 120 s, and nothing protects it.
        (CoreActorPolicy, _lowest, 4.0, 36000.0, "victim"),
        # The same, but job 0 was placed by the makespan guard.
        (_GuardedFirstJob, _lowest, 4.0, 36000.0, "protected"),
        # Job 0 runs 400 s: its 280 s left are under 4 x 120 s.
        (CoreActorPolicy, _lowest, 4.0, 2000.0, "short"),
        # The actor takes the T4 while the A100 is free, so job 0 starts there; job 1 then
        # finds only the A100 free (its first start there counts as "fastest").
        (CoreActorPolicy, _highest, 4.0, 36000.0, "room"),
    ],
)
def test_each_class_of_a_start_off_the_fastest_type(
    policy_cls: type[CoreActorPolicy],
    actor: Any,
    ratio: float | None,
    work0: float,
    expected: str,
) -> None:
    cl, tm = _case()
    wl = make_workload([0.0, 120.0], [work0, 600.0], [1, 1])
    pol = policy_cls(EnvSettings(window=4, advance="event", round_s=60), actor, preempt_ratio=ratio)
    counts = _run(pol, cl, wl, tm)
    # Job 0 starts on the free A100 (or, for the actor taking the highest node, on the T4).
    assert counts == {"a": Counter({"fastest": 1, expected: 1})}


def _gang_on_a100s(core: EnvCore) -> np.ndarray:
    """:func:`_lowest`, or else the first window job claimed as a gang by the A100 nodes."""
    a = _lowest(core)
    if a.any():
        return a
    one = core.features.one
    legal = core.ma.legal[:, :, one[0], one[1], one[2]]
    a100 = core.cluster.node_type == GPU_TYPE_NAMES.index("a100")
    for k in np.flatnonzero(core.slot_ok & (legal & a100[:, None]).any(axis=0)).tolist():
        a[legal[:, k] & a100] = int(core.codec.encode(k, *one))
        break
    return a


@pytest.mark.parametrize(("gangs", "expected"), [(False, "protected"), (True, "victim")])
def test_a_gang_on_the_fewest_nodes_is_a_victim_only_with_preempt_gangs(
    gangs: bool, expected: str
) -> None:
    # Two 1-GPU A100 nodes and a T4 node: job 0 (2 GPUs, long) runs as a gang on both A100s,
    # the fewest nodes that hold it; job 1 arrives at 120 s and starts on the T4.
    node = {"count": 1, "gpus": 1, "cpus": 16, "mem_gib": 64}
    cl = make_cluster([{"gpu_type": "a100", **{**node, "count": 2}}, {"gpu_type": "t4", **node}])
    base = np.ones((2, len(GPU_TYPE_NAMES)))
    base[:, GPU_TYPE_NAMES.index("a100")] = 5.0
    tm = make_tm(base)
    wl = make_workload([0.0, 120.0], [72000.0, 600.0], [2, 1])
    pol = CoreActorPolicy(
        EnvSettings(window=4, advance="event", round_s=60),
        _gang_on_a100s,
        preempt_ratio=4.0,
        preempt_gangs=gangs,
    )
    assert _run(pol, cl, wl, tm) == {"a": Counter({"fastest": 1, expected: 1})}


def test_models_filter_and_counts_add_up() -> None:
    cl, tm = _case()
    wl = make_workload([0.0, 120.0, 130.0], [36000.0, 600.0, 600.0], [1, 1, 1], model=[0, 1, 1])
    pol = CoreActorPolicy(EnvSettings(window=4, advance="event", round_s=60), _lowest)
    counts = _run(pol, cl, wl, tm, models=["b"])
    assert list(counts) == ["b"] and sum(counts["b"].values()) == 2


def test_classify_start_needs_a_started_job_and_a_reset_policy() -> None:
    cl, tm = _case()
    pol = CoreActorPolicy(EnvSettings(window=4, advance="event", round_s=60), _lowest)
    with pytest.raises(RuntimeError, match="before the policy's reset"):
        SCRIPT["classify_start"](pol, None, None, 0)
    wl = make_workload([0.0], [600.0], [1])
    pol.reset(cl, wl, tm, np.random.default_rng(0))
    sim = Simulator(cl, wl, tm, SimConfig(round_s=60))
    state = sim.state()
    alloc = pol.decide(state)
    assert SCRIPT["classify_start"](pol, state, alloc, 0) == "fastest"
    with pytest.raises(ValueError, match="job 0 holds no GPUs"):
        SCRIPT["classify_start"](pol, state, alloc.select(alloc.job != 0), 0)


@pytest.mark.slow
def test_the_preset_run_counts_every_first_start(capsys: pytest.CaptureFixture[str]) -> None:
    SCRIPT["main"](["--workload-start", "7500", "--quiet", "--seeds", "0"])
    out = capsys.readouterr().out
    rows = [ln.strip("|").split("|") for ln in out.splitlines()[2:]]
    assert rows, out
    total = 0
    for r in rows:
        cells = [c.strip() for c in r]
        nums = [int(c) for c in cells[1:]]
        assert sum(nums[:-1]) == nums[-1]  # the classes add up to the starts
        total += nums[-1]
    assert total == 300  # every job of the stretch starts once


def test_cli_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        SCRIPT["main"](["--models", "no_such_model"])
    assert "unknown model(s) ['no_such_model']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        SCRIPT["main"](["--scheduler", "fifo", "--workload-start", "7500", "--quiet"])
    assert "needs a rule-based MAIFS policy" in capsys.readouterr().err
