"""The policy ensemble: its arithmetic, its layout checks, and how the scheduler builds it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import fast_config, preempt_env, tiny_env, tiny_tm

from hetsched.agents.agent import (
    Acting,
    CheckpointError,
    build_net,
    ensemble_from_checkpoints,
    load_checkpoint,
    net_dims,
)
from hetsched.agents.network import NEG, MAIFSNet, NetDims, PolicyEnsemble
from hetsched.agents.policy import DEFAULT_CHECKPOINT, DEFAULT_ENSEMBLE, MAIFSPolicy
from hetsched.agents.teacher import SJFTeacher
from hetsched.agents.trainer import Trainer

CKPTS = DEFAULT_CHECKPOINT.parent


def _nets(
    n: int, seed: int = 0
) -> tuple[list[MAIFSNet], NetDims, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` differently initialised nets of the tiny env's layout and one observed step."""
    conf = fast_config().agent
    tm = tiny_tm()
    env = tiny_env(conf, tm, jobs=2)
    env.reset(np.random.default_rng(0))
    dims = net_dims(env.core.layout, env.core.cfg.levels)
    nets = []
    for i in range(n):
        torch.manual_seed(seed + i)
        nets.append(build_net(conf.net, dims).eval())
    obs, mask = env.observe()
    N = obs.shape[0]
    o = torch.from_numpy(obs)[None]
    m = torch.from_numpy(mask.astype(bool))[None]
    g = torch.ones((1, N, N), dtype=torch.bool)
    return nets, dims, o, m, g


def test_ensemble_is_the_mean_of_the_members_log_probabilities() -> None:
    nets, _, o, m, g = _nets(3)
    with torch.no_grad():
        logp, value, _ = PolicyEnsemble(nets)(o, m, g)
        per = [net(o, m, g) for net in nets]
    want = torch.stack([torch.log_softmax(x[0], dim=-1) for x in per]).mean(dim=0)
    # Bit for bit: greedy decisions follow argmaxes, and a rounding difference of 1e-7 flipped
    # enough of them to move a validation score by 0.017 (docs/maifs_log.md).
    assert torch.equal(logp[m], want[m])
    assert (logp[~m] == NEG).all()  # illegal actions stay masked
    assert torch.allclose(value, torch.stack([x[1] for x in per]).mean(dim=0))
    # Its softmax is a distribution over the legal actions (the normalised geometric mean).
    p = torch.softmax(logp, dim=-1)
    assert torch.allclose(p.sum(-1), torch.ones_like(p.sum(-1)))
    assert float(p[~m].max()) == 0.0


def test_one_member_or_copies_act_like_the_network() -> None:
    nets, _, o, m, g = _nets(2)
    with torch.no_grad():
        single = torch.log_softmax(nets[0](o, m, g)[0], dim=-1)
        one = PolicyEnsemble([nets[0]])(o, m, g)[0]
        twice = PolicyEnsemble([nets[0], nets[0]])(o, m, g)[0]
        mixed = PolicyEnsemble(nets)(o, m, g)[0]
    assert torch.allclose(one[m], single[m], atol=1e-6)
    assert torch.allclose(twice[m], single[m], atol=1e-6)
    assert not torch.allclose(mixed[m], single[m])  # a second network changes the policy


def test_ensemble_acts_through_acting() -> None:
    conf = fast_config().agent
    tm = tiny_tm()
    env = tiny_env(conf, tm, jobs=2)
    env.reset(np.random.default_rng(0))
    nets, *_ = _nets(2)
    acts = Acting(PolicyEnsemble(nets), conf, greedy=True)(env.core)
    assert acts.shape == (env.core.N,)
    obs, mask = env.observe()
    assert (mask[np.arange(env.core.N), acts] == 1).all()  # legal actions only


def test_layout_checks() -> None:
    nets, dims, *_ = _nets(1)
    with pytest.raises(ValueError, match="at least one"):
        PolicyEnsemble([])
    other = dataclasses.replace(dims, num_levels=dims.num_levels + 1)
    conf = fast_config().agent
    with pytest.raises(ValueError, match="ensemble member 1 has layout"):
        PolicyEnsemble([nets[0], build_net(conf.net, other)])


def test_scheduler_builds_the_shipped_ensemble() -> None:
    assert all(p.is_file() for p in DEFAULT_ENSEMBLE), "a shipped ensemble member is missing"
    pol = MAIFSPolicy()
    assert isinstance(pol.net, PolicyEnsemble) and len(pol.net) == 1 + len(DEFAULT_ENSEMBLE)
    # Naming the default checkpoint is the same as leaving it out.
    named = MAIFSPolicy(checkpoint=str(DEFAULT_CHECKPOINT))
    assert isinstance(named.net, PolicyEnsemble) and len(named.net) == len(pol.net)
    for a, b in zip(pol.net.members, named.net.members, strict=True):
        for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
            assert ka == kb and torch.equal(va, vb)
    # [] is the default network alone; another checkpoint acts alone unless given members.
    assert isinstance(MAIFSPolicy(ensemble=[]).net, MAIFSNet)
    assert isinstance(MAIFSPolicy(checkpoint=CKPTS / "maifs_default_seed5.pt").net, MAIFSNet)
    two = MAIFSPolicy(
        checkpoint=CKPTS / "maifs_default_seed5.pt", ensemble=[CKPTS / "maifs_default.pt"]
    )
    assert isinstance(two.net, PolicyEnsemble) and len(two.net) == 2
    # The teacher ablation takes no network's decisions, so it loads no members.
    assert isinstance(MAIFSPolicy(actor="teacher").net, MAIFSNet)


def test_member_mismatches_are_clear_errors(tmp_path: Path) -> None:
    primary = load_checkpoint(DEFAULT_CHECKPOINT)
    # maifs_multitrace.pt predates the shortest-first window: other env settings.
    with pytest.raises(CheckpointError, match=r"env\.window_order='arrival' \(not 'sjf'\)"):
        ensemble_from_checkpoints(primary, [CKPTS / "maifs_multitrace.pt"])
    # A checkpoint of another observation layout (the tests' tiny env).
    nets, dims, *_ = _nets(1)
    ck = torch.load(DEFAULT_CHECKPOINT, weights_only=True)
    ck["dims"] = dims.as_dict()
    ck["model"] = nets[0].state_dict()
    small = tmp_path / "small.pt"
    torch.save(ck, small)
    with pytest.raises(CheckpointError, match="expects observations of size"):
        MAIFSPolicy(ensemble=[small])
    with pytest.raises(FileNotFoundError, match=r"ensemble member .*no_such.pt not found.*\[\]"):
        MAIFSPolicy(ensemble=[tmp_path / "no_such.pt"])
    with pytest.raises(ValueError, match="ensemble= needs checkpoint files"):
        MAIFSPolicy(net=(nets[0], fast_config().agent), ensemble=[small])


def _preempt_step() -> tuple[MAIFSNet, MAIFSNet, torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """A net with an eviction head, one without, and a step of the preemptive env where both
    placements and evictions are legal (helpers.preempt_env at the short job's arrival)."""
    cfg = fast_config()
    cfg.agent.env.preemptive = True
    env = preempt_env(cfg.agent, tiny_tm())
    env.reset(np.random.default_rng(0))
    env.step(SJFTeacher().act(env.core))  # the long job starts; the short one arrives
    core = env.core
    dims = net_dims(core.layout, core.cfg.levels, preemptive=True)
    torch.manual_seed(0)
    ev = build_net(cfg.agent.net, dims).eval()
    plain = build_net(cfg.agent.net, dataclasses.replace(dims, evict_slots=0)).eval()
    obs, mask = env.observe()
    assert mask[0, core.n_place :].any(), "an eviction is legal at this step"
    o = torch.from_numpy(obs)[None]
    m = torch.from_numpy(mask.astype(bool))[None]
    g = torch.ones((1, 1, 1), dtype=torch.bool)
    return ev, plain, o, m, g, core.n_place


def test_members_without_an_eviction_head_join_the_placement_choice_only() -> None:
    ev, plain, o, m, g, P = _preempt_step()
    with torch.no_grad():
        lp_ev = torch.log_softmax(ev(o, m, g)[0], dim=-1)
        lp_pl = torch.log_softmax(plain(o, m[..., :P], g)[0], dim=-1)
        mixed = PolicyEnsemble([ev, plain])(o, m, g)[0]
        alone = PolicyEnsemble([ev])(o, m, g)[0]
    with torch.no_grad():  # led by the plain member: no evictions, the two placement choices
        led = PolicyEnsemble([plain, ev])(o, m[..., :P], g)[0]
    assert PolicyEnsemble([plain, ev]).dims == plain.dims and led.shape[-1] == P
    cond = lp_ev[..., :P] - torch.logsumexp(lp_ev[..., :P], dim=-1, keepdim=True)
    mp = m[..., :P]
    assert torch.allclose(led[mp], ((lp_pl + cond) / 2)[mp], atol=1e-5)
    assert torch.allclose(alone[m], lp_ev[m], atol=1e-6)  # one member: its own policy
    p = torch.softmax(mixed, dim=-1)[0, 0]
    pe = lp_ev.exp()[0, 0]
    # Evictions (and so "do not evict") keep the evicting member's probabilities ...
    assert torch.allclose(p[P:], pe[P:], atol=1e-5)
    # ... and the placement choice given no eviction is the two members' geometric mean.
    # Bit for bit, the plain member's own log-probabilities enter the placement mean.
    k = torch.logsumexp(lp_ev[..., :P], dim=-1, keepdim=True)
    exact = torch.cat([torch.stack([lp_ev[..., :P] - k, lp_pl]).mean(0) + k, lp_ev[..., P:]], -1)
    assert torch.equal(mixed[m], exact[m])
    keep = m[0, 0, :P]
    cond_ev = lp_ev[0, 0, :P] - torch.logsumexp(lp_ev[0, 0, :P], dim=-1)
    want = torch.softmax(torch.where(keep, (cond_ev + lp_pl[0, 0]) / 2, NEG), dim=-1)
    assert torch.allclose(p[:P] / p[:P].sum(), want, atol=1e-5)


def _evicting_and_plain(tmp_path: Path) -> tuple[Path, Path, int]:
    """Untrained checkpoints of the preemptive env with and without an eviction head, and the
    number of eviction actions (resident slots)."""
    cfg = fast_config(steps=0)
    tm = tiny_tm()
    for d, preemptive in (("ev", True), ("pl", False)):
        cfg.agent.env.preemptive = preemptive
        Trainer(cfg, tmp_path / d, throughput=tm, envs=[preempt_env(cfg.agent, tm)]).run()
    ev, pl = (tmp_path / d / "checkpoints" / "0.pt" for d in ("ev", "pl"))
    return ev, pl, cfg.agent.env.resident_slots


def test_a_preemptive_checkpoint_leads_members_without_evictions(tmp_path: Path) -> None:
    ev, pl, slots = _evicting_and_plain(tmp_path)
    net, conf = ensemble_from_checkpoints(load_checkpoint(ev), [pl])
    assert conf.env.preemptive and net.evictors == [True, False]
    assert net.dims.evict_slots == slots
    # Under a primary without evictions the evicting member only places.
    net, conf = ensemble_from_checkpoints(load_checkpoint(pl), [ev])
    assert not conf.env.preemptive and net.evictors == [False, False]
    assert net.dims.evict_slots == 0


def test_an_evict_only_member_leaves_the_placements_to_the_others() -> None:
    ev, plain, o, m, g, P = _preempt_step()
    torch.manual_seed(1)
    other = build_net(fast_config(steps=0).agent.net, plain.dims).eval()
    with torch.no_grad():
        lp_ev = torch.log_softmax(ev(o, m, g)[0], dim=-1)
        placers_only = PolicyEnsemble([plain, other])(o, m[..., :P], g)[0]
        mixed = PolicyEnsemble([ev, plain, other], placers=[False, True, True])(o, m, g)[0]
    k = torch.logsumexp(lp_ev[..., :P], dim=-1, keepdim=True)
    mp = m[..., :P]
    # The placements are the plain members' ensemble, bit for bit, shifted per agent by the
    # evictor's log p(not evict); the evictions are the evictor's own.
    assert torch.equal(mixed[..., :P][mp], (placers_only + k)[mp])
    assert torch.equal(mixed[..., P:][m[..., P:]], lp_ev[..., P:][m[..., P:]])
    # So each agent's placement ranking is the plain members' one.
    want = placers_only.masked_fill(~mp, NEG).argmax(-1)
    assert torch.equal(mixed[..., :P].masked_fill(~mp, NEG).argmax(-1), want)


def test_placers_are_checked() -> None:
    ev, plain, *_ = _preempt_step()
    with pytest.raises(ValueError, match="placers has 1 entries for 2"):
        PolicyEnsemble([ev, plain], placers=[False])
    with pytest.raises(ValueError, match="no ensemble member votes"):
        PolicyEnsemble([ev], placers=[False])
    with pytest.raises(ValueError, match="member 1 is kept out .* would do nothing"):
        PolicyEnsemble([ev, plain], placers=[True, False])
    with pytest.raises(ValueError, match="member 0 is kept out"):  # no evictions to decide
        PolicyEnsemble([plain, ev], placers=[False, True])


def test_evict_only_checkpoints(tmp_path: Path) -> None:
    ev, pl, _ = _evicting_and_plain(tmp_path)
    net, conf = ensemble_from_checkpoints(load_checkpoint(ev), [pl], evict_only=True)
    assert net.placers == [False, True] and net.evictors == [True, False]
    assert conf.env.preemptive
    with pytest.raises(ValueError, match="needs members to place"):
        ensemble_from_checkpoints(load_checkpoint(ev), [], evict_only=True)
    with pytest.raises(CheckpointError, match="needs a checkpoint with an eviction head"):
        ensemble_from_checkpoints(load_checkpoint(pl), [ev], evict_only=True, primary_path=pl)
    with pytest.raises(ValueError, match="needs members to place"):
        MAIFSPolicy(checkpoint=ev, ensemble=[], evict_only=True)
    pol = MAIFSPolicy(checkpoint=ev, ensemble=[pl], evict_only=True)
    assert isinstance(pol.net, PolicyEnsemble) and pol.net.placers == [False, True]
