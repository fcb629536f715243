"""The teacher's preemption rule (``evict_ratio``): a job evicted this round is placed after the
other waiting jobs rather than skipped (so it can take a node that frees in the same round, by a
migration say), ``evict_protect`` spares the longest victims, and the rule works with
migrations."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_cluster, make_workload
from helpers import tiny_tm

from hetsched.agents.driver import TeamEnv
from hetsched.agents.teacher import SJFTeacher
from hetsched.envs.spaces import EnvSettings

SETTINGS = EnvSettings(window=4, advance="event", round_s=60, preemptive=True)


def _two_long_one_short(work: tuple[float, float]) -> TeamEnv:
    """Two one-GPU A100 nodes running long jobs 0 and 1 (``work``) from t=0; a short job 2
    arrives at t=60 s and fits nowhere. Returned at the t=60 s round."""
    cl = make_cluster([{"gpu_type": "a100", "count": 2, "gpus": 1, "cpus": 16, "mem_gib": 64}])
    wl = make_workload([0.0, 0.0, 60.0], [work[0], work[1], 600.0], [1, 1, 1])
    env = TeamEnv(cl, wl, tiny_tm(), SETTINGS)
    env.reset(np.random.default_rng(0))
    core = env.core
    env.step(SJFTeacher(min_rel_rate=0.0).act(core))  # jobs 0 and 1 start
    assert core.sim is not None and core.sim.time == 60.0
    assert core.pending.tolist() == [2] and core.free_g.tolist() == [0, 0]
    return env


def test_an_evicted_job_comes_after_the_others_but_still_takes_a_free_node() -> None:
    env = _two_long_one_short((4e6, 4e6))
    core = env.core
    P = core.n_place
    env.step(np.array([P, P]))  # both nodes evict their job: both are free, three jobs wait
    assert core.free_g.tolist() == [1, 1] and sorted(core.pending.tolist()) == [0, 1, 2]
    teacher = SJFTeacher(min_rel_rate=0.0, evict_ratio=2.0, evict_wait_s=0.0)
    actions = teacher.act(core)
    assert (actions > 0).all() and (actions < P).all()  # both nodes claim a job
    claimed = core.window[core.codec.decode(actions)[0]].tolist()
    assert 2 in claimed  # the short job first ...
    assert len(set(claimed)) == 2  # ... and an evicted job on the other node, not skipped


@pytest.mark.parametrize("protect", [None, 0.8])
def test_evict_protect_spares_the_victim_with_the_longest_remaining_time(
    protect: float | None,
) -> None:
    env = _two_long_one_short((8e6, 2e6))  # job 0 has four times job 1's work left
    teacher = SJFTeacher(min_rel_rate=0.0, evict_ratio=2.0, evict_wait_s=0.0, evict_protect=protect)
    actions = teacher.act(env.core)
    P = env.core.n_place
    # without protection the longest job goes; with it, the shorter one is the victim
    assert actions.tolist() == ([P, 0] if protect is None else [0, P])


def test_evictions_and_migrations_together_and_protect_is_checked() -> None:
    t = SJFTeacher(evict_ratio=2.0, migrate_gain_s=300.0, evict_protect=1.0)
    assert t.evict_ratio == 2.0 and t.migrate_gain_s == 300.0
    with pytest.raises(ValueError, match=r"evict_protect=0.0 must lie in \(0, 1\]"):
        SJFTeacher(evict_ratio=2.0, evict_protect=0.0)
