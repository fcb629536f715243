"""The network's run-time rank inputs read the window features they are documented to read."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import make_cluster, make_workload
from helpers import tiny_tm

from hetsched.agents.acting import agent_observations, env_settings, net_dims
from hetsched.agents.config import MAIFSAgentConf
from hetsched.agents.driver import TeamEnv
from hetsched.agents.network import MAIFSNet, NetDims
from hetsched.agents.signals import level_rates


def _env() -> tuple[TeamEnv, MAIFSAgentConf]:
    """A T4 node and an A100 node (2 GPUs each); three 1-GPU jobs waiting: 1 h, 3 h and 10 h
    of work at the A100's rate (4x the T4's)."""
    conf = MAIFSAgentConf()
    cl = make_cluster(
        [
            {"gpu_type": "t4", "count": 1, "gpus": 2, "cpus": 16, "mem_gib": 64},
            {"gpu_type": "a100", "count": 1, "gpus": 2, "cpus": 16, "mem_gib": 64},
        ]
    )
    tm = tiny_tm()
    hours = [1.0, 3.0, 10.0]
    wl = make_workload([0.0] * 3, [4.0 * 3600 * h for h in hours], [1, 1, 1])
    env = TeamEnv(cl, wl, tm, env_settings(conf.env), conf.env.max_steps)
    env.reset(np.random.default_rng(0))
    return env, conf


def test_runtime_ranks_order_the_legal_jobs_by_run_time_on_each_node() -> None:
    env, conf = _env()
    core = env.core
    obs = torch.from_numpy(agent_observations(core, conf.env))
    dims = net_dims(core.features.layout, core.cfg.levels)
    win = obs[None, :, -(dims.window * dims.job_dim + dims.global_dim) : -dims.global_dim]
    win = win.reshape(1, core.N, dims.window, dims.job_dim)
    extra = MAIFSNet._with_ranks(win)[0, :, :, -2:]  # (N, K, 2)
    slot = {int(j): k for k, j in enumerate(core.window) if core.slot_ok[k]}
    for node in range(core.N):
        ranks = [float(extra[node, slot[j], 0]) for j in range(3)]
        assert ranks == [0.0, 0.5, 1.0]  # 1 h, 3 h, 10 h: shortest first on both nodes
        gap = float(extra[node, slot[2], 1])  # 10 h over the 1 h job: log(10) squashed
        assert abs(gap - np.log(10) / (np.log(10) + 1)) < 0.02
        empty = int(np.flatnonzero(~core.slot_ok)[0])
        assert extra[node, empty].tolist() == [1.0, 1.0]  # no legal action: both read 1
    net = MAIFSNet(dims, runtime_rank=True)
    assert net.job_enc[0].in_features == dims.job_dim + 2
    assert torch.isfinite(net.encode(obs[None])[1]).all()


def test_share_feature_appends_one_column_per_window_slot_that_the_network_reads() -> None:
    """``env.share_feature``: K columns after the env's observation, the same for every agent:
    the share of the cluster's GPUs (4 GPUs over 3 jobs) over each job's request (1 GPU),
    ``(log2(4/3) + 4) / 8``, and 0 on empty slots; the network's job encoder takes them."""
    env, conf = _env()
    core = env.core
    conf.env.share_feature = True
    obs = agent_observations(core, conf.env)
    K = core.layout.window
    assert obs.shape == (core.N, core.layout.obs_dim + K)
    extra = obs[:, -K:]
    want = (np.log2(4 / 3) + 4) / 8
    assert np.allclose(extra[:, core.slot_ok], want, atol=1e-6)
    assert (extra[:, ~core.slot_ok] == 0).all()
    dims = net_dims(core.layout, core.cfg.levels, job_extra=1)
    net = MAIFSNet(dims)
    assert net.job_enc[0].in_features == dims.job_dim + 1
    assert torch.isfinite(net.encode(torch.from_numpy(obs)[None])[1]).all()


def test_drain_feature_follows_the_share_feature_slot_by_slot() -> None:
    """``env.drain_feature``: a second column per slot after the share feature's, each job's
    run time over the cluster's drain time (1 h, 3 h and 10 h of A100 work on 4 GPUs: 3.5 h),
    ``(log2(x) + 4) / 8`` where it is at least 1 and 0 below; the network reads both."""
    env, conf = _env()
    core = env.core
    conf.env.share_feature = conf.env.drain_feature = True
    obs = agent_observations(core, conf.env)
    K = core.layout.window
    extra = obs[:, core.layout.obs_dim :].reshape(core.N, K, 2)
    slot = {int(j): k for k, j in enumerate(core.window) if core.slot_ok[k]}
    for j, hours in enumerate([1.0, 3.0, 10.0]):
        assert np.allclose(extra[:, slot[j], 0], (np.log2(4 / 3) + 4) / 8, atol=1e-6)
        want = (np.log2(hours / 3.5) + 4) / 8 if hours >= 3.5 else 0.0
        assert np.allclose(extra[:, slot[j], 1], want, atol=1e-6)
    assert (extra[:, ~core.slot_ok] == 0).all()
    dims = net_dims(core.layout, core.cfg.levels, job_extra=2)
    assert MAIFSNet(dims).job_enc[0].in_features == dims.job_dim + 2


def test_level_share_feature_marks_the_gpu_levels_within_the_jobs_share() -> None:
    """``env.level_share_feature``: per slot, one column per GPU level after the share
    feature's: 1 where the level's GPU count is within the job's share of the cluster. Two
    A100 nodes of 4 GPUs; two elastic 4-GPU jobs (1-8 GPUs) and a rigid 1-GPU job: a share of
    8/3 GPUs, so levels 1/4 and 1/2 (1 and 2 GPUs) are within it for the elastic jobs and the
    request (4) and 2x (8) are not; the rigid job's only count, 1 GPU, is within it."""
    conf = MAIFSAgentConf()
    conf.env.share_feature = conf.env.level_share_feature = True
    cl = make_cluster([{"gpu_type": "a100", "count": 2, "gpus": 4, "cpus": 64, "mem_gib": 256}])
    wl = make_workload(
        [0.0] * 3, [3600.0] * 3, [4, 4, 1], cpu=2.0, mem=8.0, elastic=([1, 1, 1], [8, 8, 1])
    )
    env = TeamEnv(cl, wl, tiny_tm(), env_settings(conf.env), conf.env.max_steps)
    env.reset(np.random.default_rng(0))
    core = env.core
    assert core.jt is not None
    Lg, K = len(conf.env.gpu_levels), core.layout.window
    obs = agent_observations(core, conf.env)
    assert obs.shape == (core.N, core.layout.obs_dim + K * (1 + Lg))
    extra = obs[:, core.layout.obs_dim :].reshape(core.N, K, 1 + Lg)
    slot = {int(j): k for k, j in enumerate(core.window) if core.slot_ok[k]}
    counts = core.jt.gpu_count[core.window[slot[0]]]
    assert counts.tolist() == [1, 2, 4, 8]  # the levels 1/4, 1/2, 1 and 2 of a 4-GPU request
    for j in (0, 1):
        assert extra[:, slot[j], 1:].tolist() == [[1.0, 1.0, 0.0, 0.0]] * core.N
    rigid = core.jt.gpu_count[2]
    assert extra[0, slot[2], 1:].tolist() == [float(0 < c <= 8 / 3) for c in rigid]
    assert (extra[:, ~core.slot_ok] == 0).all()
    dims = net_dims(core.layout, core.cfg.levels, job_extra=1 + Lg)
    net = MAIFSNet(dims)
    assert net.job_enc[0].in_features == dims.job_dim + 1 + Lg
    assert torch.isfinite(net.encode(torch.from_numpy(obs)[None])[1]).all()


def _level_net() -> tuple[MAIFSNet, NetDims, torch.Tensor]:
    """A per-level-term network over the observation of :func:`_env` with the share and
    per-level inputs (1 + L_g extras per slot)."""
    env, conf = _env()
    conf.env.share_feature = conf.env.level_share_feature = True
    core = env.core
    Lg = len(conf.env.gpu_levels)
    dims = net_dims(core.layout, core.cfg.levels, job_extra=1 + Lg, level_bits=Lg)
    torch.manual_seed(0)
    net = MAIFSNet(dims, level_head=True)
    obs = torch.from_numpy(agent_observations(core, conf.env))[None]
    return net, dims, obs


def test_the_level_term_reads_each_levels_input_and_the_next_ones() -> None:
    """``level_inputs`` is each slot's last ``L_g`` extras, paired with the next larger level's
    (0 after the last level)."""
    net, dims, obs = _level_net()
    G, K = dims.level_bits, dims.window
    base = dims.obs_dim - K * dims.job_extra - dims.resident_slots * dims.res_extra
    bits = torch.rand(1, obs.shape[1], K, G)
    o = obs.clone()
    o[..., base:].reshape(1, -1, K, dims.job_extra)[..., 1:] = bits
    lvl = net.level_inputs(o)
    assert lvl.shape == (1, obs.shape[1], K, G, 2)
    assert torch.equal(lvl[..., 0], bits)
    assert torch.equal(lvl[..., :-1, 1], bits[..., 1:])
    assert (lvl[..., -1, 1] == 0).all()


def test_the_level_term_moves_every_cpu_and_memory_level_of_a_gpu_level_together() -> None:
    """With the joint level map zeroed, a claim's logits depend on its GPU level only; the
    term is what separates the GPU levels. Without the per-level inputs the head is refused."""
    net, dims, obs = _level_net()
    with torch.no_grad():
        net.act_out.weight.zero_()
        net.act_out.bias.zero_()
        net.lv_out.bias.fill_(0.5)
    N = obs.shape[1]
    mask = torch.ones(1, N, dims.num_actions, dtype=torch.bool)
    adj = torch.ones(1, N, N, dtype=torch.bool)
    logits = net(obs, mask, adj)[0]
    G = dims.level_bits
    claim = logits[0, :, 1 : 1 + dims.window * dims.num_levels].reshape(N, dims.window, G, -1)
    assert torch.allclose(claim, claim[..., :1].expand_as(claim))
    assert not torch.allclose(claim[..., 0], claim[..., :1, 0].expand(-1, -1, G))
    plain = NetDims(**{**dims.as_dict(), "level_bits": 0})
    with pytest.raises(ValueError, match="level_share_feature=true"):
        MAIFSNet(plain, level_head=True)
    with pytest.raises(ValueError, match="level_bits=3 must be at most"):
        NetDims(**{**dims.as_dict(), "job_extra": 2, "level_bits": 3, "obs_dim": 1})


def test_level_rate_feature_is_each_levels_rate_over_the_best_on_the_node() -> None:
    """``env.level_rate_feature``: per node, slot and GPU level, the rate at that level over the
    best (:func:`level_rates`), appended last; 0 for a level no claim on the node can take (8
    GPUs on a 4-GPU node) and on empty slots; the network's job MLP and level term read it."""
    conf = MAIFSAgentConf()
    conf.env.level_share_feature = conf.env.level_rate_feature = True
    cl = make_cluster([{"gpu_type": "a100", "count": 2, "gpus": 4, "cpus": 64, "mem_gib": 256}])
    wl = make_workload([0.0] * 2, [3600.0] * 2, [4, 1], cpu=2.0, mem=8.0, elastic=([1, 1], [8, 1]))
    env = TeamEnv(cl, wl, tiny_tm(), env_settings(conf.env), conf.env.max_steps)
    env.reset(np.random.default_rng(0))
    core = env.core
    Lg, K = len(conf.env.gpu_levels), core.layout.window
    obs = agent_observations(core, conf.env)
    assert obs.shape == (core.N, core.layout.obs_dim + K * Lg + K * Lg)
    rel = obs[:, -K * Lg :].reshape(core.N, K, Lg)
    rate = level_rates(core, slice(None), True)[0]
    slot = {int(j): k for k, j in enumerate(core.window) if core.slot_ok[k]}
    e, r = slot[0], slot[1]
    assert core.jt is not None and core.jt.gpu_count[0].tolist() == [1, 2, 4, 8]
    np.testing.assert_allclose(rel[:, e], rate[:, e] / rate[:, e].max(axis=1, keepdims=True))
    assert (rel[:, e, 3] == 0).all() and (rel[:, e].max(axis=1) == 1).all()
    assert (np.diff(rel[:, e, :3], axis=1) > 0).all()  # more GPUs, faster, up to the node's 4
    assert (rel[:, r].max(axis=1) == 1).all()  # the rigid job: its one level
    assert (rel[:, ~core.slot_ok] == 0).all()
    dims = net_dims(core.layout, core.cfg.levels, job_extra=Lg, level_bits=Lg, level_rates=Lg)
    net = MAIFSNet(dims, level_head=True)
    assert net.job_enc[0].in_features == dims.job_dim + 2 * Lg
    lvl = net.level_inputs(torch.from_numpy(obs)[None])
    assert lvl.shape == (1, core.N, K, Lg, 4)
    assert torch.equal(lvl[0, ..., 1], torch.from_numpy(rel))
