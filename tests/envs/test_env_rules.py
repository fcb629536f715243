"""Decision rules of the multi-agent env: masks, conflicts, gangs, invalid actions, rounds, reward."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from env_helpers import TM, act, jobs, tiny_central, tiny_env

from hetsched.envs import INFO_KEYS, REWARD_KEYS, ClusterParallelEnv


def test_spaces_slices_and_bounds() -> None:
    env = tiny_env(jobs([4, 8]))
    obs, infos = env.reset(seed=0)
    sl = env.observation_slices()
    D = env.core.layout.obs_dim
    covered = np.zeros(D, dtype=int)
    for s in sl.values():
        covered[s] += 1
    assert np.all(covered == 1), "slices must tile the observation exactly once"
    a100 = 4  # catalogue index of a100
    for a in env.possible_agents:
        o = obs[a]["observation"]
        assert o.dtype == np.float32 and o.min() >= 0.0 and o.max() <= 1.0
        assert np.array_equal(np.flatnonzero(o[sl["gpu_type_onehot"]]), [a100])
        assert o[sl["free_gpu_frac"]][0] == 1.0 and o[sl["node_up"]][0] == 1.0
        assert env.observation_space(a) is env.observation_space(a)
        assert set(infos[a]) == set(INFO_KEYS)
    st = env.state()
    assert env.state_space.contains(st) and st.shape == env.state_space.shape


def test_full_node_has_only_noop_and_stays_an_agent() -> None:
    env = tiny_env(jobs([4, 4, 4]))
    env.reset(seed=0)
    # node_0 takes slot 0 (4 GPUs): it is then full, node_1 still can take the next job.
    obs, *_, infos = env.step(act(env, node_0=1))
    assert infos["node_0"]["placed"] == 1.0
    assert env.agents == env.possible_agents
    m0 = obs["node_0"]["action_mask"]
    assert m0[0] == 1 and m0[1:].sum() == 0
    assert infos["node_0"]["num_legal_actions"] == 1.0
    assert obs["node_1"]["action_mask"][1] == 1


def test_conflict_lowest_index_wins_and_is_reported() -> None:
    env = tiny_env(jobs([4, 4]), reward_weights={"conflict": 0.5})
    env.reset(seed=0)
    _, rew, _, _, infos = env.step(act(env, node_0=1, node_1=1))  # both claim slot 0
    assert infos["node_0"]["placed"] == 1.0 and infos["node_0"]["conflict"] == 0.0
    assert infos["node_1"]["placed"] == 0.0 and infos["node_1"]["conflict"] == 1.0
    assert infos["node_1"]["conflicts"] == 1.0 and infos["node_1"]["reward_conflict"] == -0.5
    alloc = env.core.round_allocation()
    assert alloc.job.tolist() == [0] and alloc.node.tolist() == [0]


def test_conflict_rule_best_fit() -> None:
    env = tiny_env(jobs([2, 2, 2]), conflict_rule="best_fit", window=3)
    env.reset(seed=0)
    env.step(act(env, node_1=1))  # node_1 holds 2 GPUs of 4
    # both claim the next job (now slot 0): best fit picks node_1 (fewest GPUs left)
    _, _, _, _, infos = env.step(act(env, node_0=1, node_1=1))
    assert infos["node_1"]["placed"] == 1.0 and infos["node_0"]["conflict"] == 1.0


def test_gang_across_nodes_and_failed_gang() -> None:
    env = tiny_env(jobs([8]))
    env.reset(seed=0)
    m = env.action_masks()
    assert m[0, 1] == 1 and m[1, 1] == 1  # each node may contribute to the 8-GPU gang
    _, _, _, _, infos = env.step(act(env, node_0=1))  # one claim alone cannot fill it
    assert infos["node_0"]["gang_failed"] == 1.0 and infos["node_0"]["placed"] == 0.0
    env.reset(seed=0)
    _, _, _, _, infos = env.step(act(env, node_0=1, node_1=1))
    assert infos["node_0"]["placed_jobs"] == 1.0
    alloc = env.core.last_alloc
    assert sorted(alloc.node.tolist()) == [0, 1] and alloc.gpus.tolist() == [4, 4]


#: Two 4-GPU T4 nodes (indices 0, 1) before two 4-GPU A100 nodes (2, 3).
SLOW_FIRST: dict[str, Any] = {
    "name": "t4_then_a100",
    "nodes": [
        {"gpu_type": "t4", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 256},
        {"gpu_type": "a100", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 256},
    ],
}


@pytest.mark.parametrize("compiled", [True, False])
def test_a_gang_claimed_by_two_types_goes_to_the_faster_one(compiled: bool) -> None:
    # Both types' gangs fill with two nodes; the lower-index T4s used to win the tie.
    env = ClusterParallelEnv(
        SLOW_FIRST, jobs([8]), throughput=TM, window=2,
        levels={"gpu": [1.0], "cpu": [1.0], "mem": [1.0]},
    )  # fmt: skip
    env.reset(seed=0)
    if not compiled:
        env.core._claims_kernel = None  # the numpy path
    _, _, _, _, infos = env.step(act(env, node_0=1, node_1=1, node_2=1, node_3=1))
    alloc = env.core.last_alloc
    assert sorted(alloc.node.tolist()) == [2, 3] and alloc.gpus.tolist() == [4, 4]
    assert infos["node_0"]["conflict"] == 1.0 and infos["node_2"]["placed_jobs"] == 1.0
    jt = env.core.jt
    assert jt is not None
    t4, a100 = TM.gpu_types.index("t4"), TM.gpu_types.index("a100")
    assert jt.tput[0, a100, 0, 1] > jt.tput[0, t4, 0, 1] > 0  # the premise: A100 is faster
    # With only the T4s claiming, they still get it (speed ranks gangs, it forbids none).
    env.reset(seed=0)
    if not compiled:
        env.core._claims_kernel = None
    env.step(act(env, node_0=1, node_1=1))
    assert sorted(env.core.last_alloc.node.tolist()) == [0, 1]


LEVELS = {"gpu": [0.5, 1.0], "cpu": [1.0], "mem": [1.0]}  # two claims per window slot


@pytest.mark.parametrize("compiled", [True, False])
def test_retry_refused_masks_the_failed_gang_and_keeps_the_round(compiled: bool) -> None:
    # An 8-GPU job (a gang of both 4-GPU nodes) and a 2-GPU job; node_0 claims the gang alone.
    env = tiny_env(jobs([8, 2], seconds=3600.0), retry_refused=True, levels=LEVELS)
    env.reset(seed=0)
    if not compiled:
        env.core._claims_kernel = None  # the numpy path
    per_slot = env.core.codec.n // env.core.K  # claims per window slot (lg * lc * lm)
    gang = int(np.flatnonzero(env.action_masks()[0, 1 : 1 + per_slot])[-1]) + 1  # slot 0
    _, _, _, _, infos = env.step(act(env, node_0=gang))
    assert infos["node_0"]["gang_failed"] == 1.0 and infos["node_0"]["placed"] == 0.0
    # the round goes on: no time passed, and node_0 may no longer claim slot 0 this round ...
    assert infos["node_0"]["rounds_advanced"] == 0.0 and infos["node_0"]["sim_time_s"] == 0.0
    assert infos["node_0"]["decision_step"] == 1.0
    m = env.action_masks()
    assert m[0, 1 : 1 + per_slot].sum() == 0 and m[0, 1 + per_slot :].sum() > 0
    assert m[1, 1 : 1 + per_slot].sum() > 0  # ... node_1 still may (its claim was not refused)
    assert infos["node_0"]["action_mask"][1 : 1 + per_slot].sum() == 0  # what the agent sees
    _, _, _, _, infos = env.step(act(env, node_0=1 + per_slot + 1))  # slot 1 at the 1x level
    assert infos["node_0"]["placed"] == 1.0
    # Off (the default), the refused step closes the round.
    env = tiny_env(jobs([8, 2], seconds=3600.0), levels=LEVELS)
    env.reset(seed=0)
    _, _, _, _, infos = env.step(act(env, node_0=gang))
    assert infos["node_0"]["gang_failed"] == 1.0 and infos["node_0"]["decision_step"] == 0.0
    with pytest.raises(ValueError, match="retry_refused"):
        tiny_env(jobs([2]), retry_refused="yes")


def test_retry_refused_keeps_the_claims_the_node_hosts_alone() -> None:
    # A 4-GPU job on a 4-GPU node: at 4x its cores (64 > 32) the claim is a gang contribution.
    levels = {"gpu": [1.0], "cpu": [1.0, 4.0], "mem": [1.0]}  # actions 1, 2: slot 0 at 1x, 4x
    env = tiny_env(jobs([4, 2], seconds=3600.0), retry_refused=True, levels=levels)
    env.reset(seed=0)
    assert env.core.ma.single[0, 0].ravel().tolist() == [True, False]
    _, _, _, _, infos = env.step(act(env, node_0=2))  # 4x cores alone: the gang is refused
    assert infos["node_0"]["gang_failed"] == 1.0 and infos["node_0"]["decision_step"] == 1.0
    assert env.action_masks()[0, 1:3].tolist() == [1, 0]  # the 1x claim stays legal
    _, _, _, _, infos = env.step(act(env, node_0=1))
    assert infos["node_0"]["placed"] == 1.0


@pytest.mark.parametrize("bad", [-1, 3, 10**9, None, "x", 1.5, [1, 2], np.int64(2)])
def test_invalid_actions_never_raise(bad: object) -> None:
    env = tiny_env(jobs([4, 4], seconds=3600.0))
    env.reset(seed=0)
    env.step(act(env, node_0=1))  # node_0 is full (same round): its claims are masked
    assert env.core.decision_step == 1 and env.action_masks()[0, 1:].sum() == 0
    acts: dict[str, object] = dict(act(env))
    acts["node_0"] = bad
    _, rew, _, _, infos = env.step(acts)
    assert infos["node_0"]["invalid_action"] == 1.0
    assert infos["node_0"]["invalid_actions"] == 1.0
    assert infos["node_0"]["reward_invalid"] == pytest.approx(-0.01)
    assert infos["node_1"]["invalid_action"] == 0.0


def test_round_advances_when_all_pass_or_nothing_fits() -> None:
    env = tiny_env(jobs([2, 2, 2], arrival=[0.0, 0.0, 0.0], seconds=3600.0), window=3)
    env.reset(seed=0)
    _, _, _, _, infos = env.step(act(env, node_0=1))
    assert infos["node_0"]["rounds_advanced"] == 0.0 and infos["node_0"]["sim_time_s"] == 0.0
    assert infos["node_0"]["decision_step"] == 1.0
    _, _, _, _, infos = env.step(act(env))  # everyone passes: the round's time advances
    assert infos["node_0"]["rounds_advanced"] >= 1.0 and infos["node_0"]["sim_time_s"] > 0.0
    assert infos["node_0"]["decision_step"] == 0.0


def _episode_last_legal(env: ClusterParallelEnv) -> list[dict[str, Any]]:
    """Run an episode where every agent takes its last legal action; node_0's infos per step.

    Checks at every step that the reward is the sum of its components, and that the episode
    terminates (every job finished).
    """
    env.reset(seed=0)
    out: list[dict[str, Any]] = []
    term: dict[str, bool] = {}
    while env.agents:
        m = env.action_masks()
        a = {ag: int(np.flatnonzero(m[i])[-1]) for i, ag in enumerate(env.possible_agents)}
        _, rew, term, _, infos = env.step(a)
        i0 = infos["node_0"]
        assert rew["node_0"] == pytest.approx(sum(i0[k] for k in REWARD_KEYS))
        out.append(i0)
    assert term["node_0"]
    return out


def test_reward_components_and_weights() -> None:
    wl = jobs([4, 4, 4], arrival=[0.0, 0.0, 100.0])
    env = tiny_env(wl, reward_weights={"jobs": 2.0, "makespan": 1.0})
    steps = _episode_last_legal(env)
    jobs_part = sum(i["reward_jobs"] for i in steps)
    last = steps[-1]
    res = env.sim_result()
    jct = float((res.finish_time - wl.arrival).sum())
    assert jobs_part == pytest.approx(-2.0 * jct / env.z, rel=1e-9)
    makespan = float(np.nanmax(res.finish_time) - wl.arrival.min())
    assert last["reward_makespan"] == pytest.approx(-makespan / 3600.0)


@pytest.mark.parametrize("weight", [0.0, 0.5])
def test_progress_shaping_telescopes_to_the_work_and_is_off_by_default(weight: float) -> None:
    wl = jobs([4, 2, 4], arrival=[0.0, 0.0, 100.0], seconds=900.0)
    env = tiny_env(wl, reward_weights={"progress": weight})
    prog = [i["reward_progress"] for i in _episode_last_legal(env)]
    # Every job finished: the potential fell from sum_j G_j work_j / v_j to 0.
    work_gpu_s = float((wl.req_gpus * wl.work / env.core.jt.best_tput).sum())
    assert work_gpu_s == pytest.approx(4 * 900 + 2 * 900 + 4 * 900)
    assert sum(prog) == pytest.approx(weight * work_gpu_s / env.z, rel=1e-9)
    if weight:
        assert min(prog) >= 0.0 and sum(p > 0 for p in prog) >= 2  # credited as work is done
    else:
        assert all(p == 0.0 for p in prog)


def test_truncation_at_max_cycles_never_after_step_one() -> None:
    env = tiny_env(jobs([4, 4, 4, 4], arrival=[0, 50, 100, 150]), max_cycles=2)
    env.reset(seed=0)
    _, _, term, trunc, _ = env.step(act(env))
    assert not trunc["node_0"] and not term["node_0"] and env.agents
    _, _, term, trunc, _ = env.step(act(env))
    assert trunc["node_0"] and not term["node_0"] and env.agents == []
    with pytest.raises(ValueError, match="max_cycles"):
        tiny_env(jobs([4]), max_cycles=1)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"conflict_rule": "nope"}, r"conflict_rule='nope' is not one of \['lowest_index'"),
        ({"advance": "tick"}, r"advance='tick' is not one of"),
        ({"window": 0}, r"window=0 must be an integer >= 1"),
        ({"window": 2.5}, r"window=2.5 must be an integer >= 1"),
        ({"resident_slots": True}, r"resident_slots=True must be an integer >= 1"),
        ({"max_decisions_per_round": 0}, r"max_decisions_per_round=0 must be an integer"),
        ({"round_s": 0.0}, r"round_s=0.0 must be a positive number of seconds"),
        ({"round_s": float("nan")}, r"round_s=nan must be a positive number of seconds"),
        ({"max_time_s": -5.0}, r"max_time_s=-5.0 must be > 0 or None"),
        ({"levels": {"gpu": [2.0]}}, r"levels.gpu=\[2.0\] lacks the 1.0 level"),
        ({"levels": {"cpu": []}}, r"levels.cpu is empty; give at least the 1.0 level"),
        ({"levels": {"mem": [1.0, -0.5]}}, r"levels.mem=\[1.0, -0.5\] must hold positive finite"),
        ({"levels": {"cpu": [1.0, 1.0]}}, r"levels.cpu=\[1.0, 1.0\] has duplicates"),
        ({"levels": {"gpu": "big"}}, r"levels.gpu='big' must be a sequence of positive numbers"),
        ({"levels": {"disk": [1.0]}}, r"unknown level set key\(s\) \['disk'\]; allowed:"),
        ({"levels": [1.0]}, r"levels=\[1.0\] must be a LevelSets, a mapping or None"),
        ({"reward_weights": {"jct": 1.0}}, r"unknown reward component\(s\) \['jct'\]"),
        ({"reward_weights": {"jobs": float("inf")}}, r"reward weight jobs=inf must be finite"),
        ({"reward_weights": {"jobs": "x"}}, r"reward weight jobs='x' must be a number"),
        ({"reward_weights": 3}, r"reward_weights=3 must be a RewardWeights, a mapping or None"),
    ],
)
def test_settings_errors_name_the_value(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        tiny_env(jobs([4]), **kw)


def test_fungible_levels_change_amounts() -> None:
    env = tiny_env(
        jobs([2], elastic=True), levels={"gpu": [1.0, 2.0], "cpu": [1.0, 2.0], "mem": [1.0]}
    )
    env.reset(seed=0)
    a = int(env.core.codec.encode(0, 1, 1, 0)[()])  # slot 0, 2x GPUs, 2x CPU
    _, _, _, _, infos = env.step(act(env, node_1=a))
    assert infos["node_1"]["placed"] == 1.0
    alloc = env.core.last_alloc
    assert alloc.gpus.tolist() == [4] and alloc.cpus.tolist() == [4 * 8.0]


def test_central_env_places_and_masks() -> None:
    env = tiny_central(jobs([4, 8]))
    obs, info = env.reset(seed=0)
    m = env.action_masks()
    assert m.dtype == bool and m.shape == (env.codec.n,) and m[0]
    assert np.array_equal(m.astype(np.int8), info["action_mask"])
    obs, r, term, trunc, info = env.step(1)  # slot 0 on the only type (a100)
    assert info["placed"] == 1.0 and env.observation_space.contains(obs)
    obs, r, term, trunc, info = env.step(10**6)
    assert info["invalid_action"] == 1.0 and not trunc


def test_failed_node_stays_an_agent_with_only_the_noop() -> None:
    from hetsched.envs import ClusterParallelEnv
    from hetsched.envs.testing import masked_random_actions, small_env_kwargs

    kw = small_env_kwargs(num_jobs=16, failures={"mtbf_h": 3.0, "repair_h": 2.0})
    env = ClusterParallelEnv(**kw, validate_allocations=True)  # the engine re-checks every round
    obs, _ = env.reset(seed=0)
    up = env.observation_slices()["node_up"]
    rng = np.random.default_rng(0)
    seen_down = 0
    while env.agents:
        assert env.agents == env.possible_agents
        for i, a in enumerate(env.possible_agents):
            if obs[a]["observation"][up][0] == 0.0:
                seen_down += 1
                assert not env.core.node_up[i]
                assert obs[a]["action_mask"][1:].sum() == 0 and obs[a]["action_mask"][0] == 1
        acts = masked_random_actions(env.action_masks(), rng)
        obs, _, term, trunc, _ = env.step(
            dict(zip(env.possible_agents, acts.tolist(), strict=True))
        )
    assert seen_down > 0, "the failure model should take some node down during the episode"
    assert term["node_0"] and env.sim_result().node_failures > 0
    with pytest.raises(ValueError, match="fields are mtbf_h"):
        ClusterParallelEnv(**small_env_kwargs(failures={"mtbf": 1.0}))


@pytest.mark.parametrize("skip_idle", [True, False])
def test_unplaceable_job_truncates_as_stalled(skip_idle: bool) -> None:
    # Job 1 asks for more memory per GPU than a node has: no action can ever place it.
    wl = replace(jobs([1, 1]), mem_per_gpu=np.array([16.0, 1000.0]))
    env = tiny_env(wl, skip_idle=skip_idle, max_cycles=1000)
    obs, _ = env.reset(seed=0)
    steps = 0
    while env.agents:
        legal = obs["node_0"]["action_mask"][1] == 1
        obs, _, terms, truncs, infos = env.step(act(env, node_0=1) if legal else act(env))
        steps += 1
    assert truncs["node_0"] and not terms["node_0"]
    assert infos["node_0"]["stalled"] == 1.0
    assert steps < 20  # detected once job 0 ends (10 rounds), not run out to max_cycles
    central = tiny_central(wl, skip_idle=skip_idle, max_cycles=1000)
    central.reset(seed=0)
    n, done, info = 0, False, {}
    while not done:
        m = central.action_masks()
        _, _, term, trunc, info = central.step(int(np.flatnonzero(m)[-1]))
        done, n = term or trunc, n + 1
    assert trunc and info["stalled"] == 1.0 and n < 20


@pytest.mark.parametrize(("order", "window"), [("arrival", [0, 1]), ("sjf", [1, 2])])
def test_window_order_sjf_shows_the_shortest_jobs_first(order: str, window: list[int]) -> None:
    wl = jobs([1, 1, 1])
    wl = replace(wl, work=wl.work * np.array([10.0, 0.1, 1.0]))  # j0 long, j1 short, j2 medium
    env = tiny_env(wl, window=2, window_order=order)
    env.reset(seed=0)
    assert env.core.window.tolist() == window
    with pytest.raises(ValueError, match="window_order='shortest'"):
        tiny_env(wl, window_order="shortest")


def test_window_order_typed_gives_each_gpu_type_its_shortest_jobs() -> None:
    # One A100 node and one T4 node. bert runs 10.2x faster on an A100 than on a T4,
    # deepspeech2 only 1.45x. Two short bert jobs and a longer deepspeech2 job arrive:
    # "sjf" shows only the bert jobs (shortest on the A100), which barely run on the T4;
    # "typed" shows each type's shortest job on it, so the T4 sees deepspeech2.
    cluster = {
        "name": "a100_t4",
        "nodes": [
            {"gpu_type": "a100", "count": 1, "gpus": 4, "cpus": 32, "mem_gib": 256},
            {"gpu_type": "t4", "count": 1, "gpus": 4, "cpus": 32, "mem_gib": 256},
        ],
    }
    bert, ds2 = TM.models.index("bert"), TM.models.index("deepspeech2")
    a100, t4 = TM.gpu_types.index("a100"), TM.gpu_types.index("t4")
    model = np.array([bert, bert, ds2])
    a100_s = np.array([100.0, 110.0, 300.0])  # seconds alone on one A100
    wl = replace(
        jobs([1, 1, 1]), model=model, work=TM.isolated(model, np.full(3, a100), 1) * a100_s
    )
    t4_s = wl.work / TM.isolated(model, np.full(3, t4), 1)
    assert t4_s[2] < t4_s[0] < t4_s[1]  # 436 s < 1020 s < 1122 s
    windows = {}
    for order in ("sjf", "typed"):
        env = ClusterParallelEnv(cluster, wl, throughput=TM, window=2, window_order=order)
        env.reset(seed=0)
        windows[order] = env.core.window.tolist()
        assert env.core.pending.tolist() == ([0, 1, 2] if order == "sjf" else [2, 0, 1])
    # Types in index order (t4 = 3 before a100 = 4): the T4's first job, the A100's first, ...
    assert windows == {"sjf": [0, 1], "typed": [2, 0]}


@pytest.mark.parametrize(("backfill", "window"), [(0, [1, 2]), (1, [1, 3]), (2, [3])])
def test_window_backfill_shows_jobs_that_fit_behind_a_blocked_head(
    backfill: int, window: list[int]
) -> None:
    # Job 0 takes node_0's 4 GPUs; then jobs 1 and 2 (8 GPUs each) cannot run on the 4 free
    # GPUs, job 3 (1 GPU) can. The first K = 2 waiting jobs hide it; a backfill slot shows it.
    env = tiny_env(jobs([4, 8, 8, 1]), window=2, window_backfill=backfill)
    env.reset(seed=0)
    assert env.core.window.tolist() == [0, 1]  # everything may fit the empty cluster
    obs, *_ = env.step(act(env, node_0=1))
    shown = env.core.window[env.core.slot_ok].tolist()
    assert shown[: len(window)] == window
    assert env.core.window_jobs().tolist() == shown  # the numpy reference agrees
    if 3 in shown:  # node_1 may claim it (action 1 + slot with 1x levels only)
        assert obs["node_1"]["action_mask"][1 + shown.index(3)] == 1


def test_window_backfill_falls_back_to_queue_order_and_is_validated() -> None:
    env = tiny_env(jobs([4, 8, 8, 8]), window=2, window_backfill=1)
    env.reset(seed=0)
    env.step(act(env, node_0=1))
    assert env.core.window.tolist() == [1, 2]  # nothing behind the head may fit: queue order
    with pytest.raises(ValueError, match="window_backfill=3"):
        tiny_env(jobs([1]), window=2, window_backfill=3)
