"""The learning steps of the MAIFS-style agent: behaviour-cloning fits and PPO updates.

Both take whole :class:`~hetsched.agents.rollout.Episode` objects and shuffle their steps into
minibatches within one episode (one cluster, so one agent count). Each raises
:class:`TrainingDivergedError` as soon as a loss or a weight is no longer finite, before the
optimizer's step is kept, so no later step reads or writes NaN weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import NDArray
from torch.nn import functional

from hetsched.agents.config import BCConf, PPOConf
from hetsched.agents.network import MAIFSNet
from hetsched.agents.rollout import Episode
from hetsched.sim.errors import HetschedError


class TrainingDivergedError(HetschedError, RuntimeError):
    """A loss or a weight became NaN or infinite."""


@dataclass
class _Fwd:
    """The network's outputs on a minibatch (B steps, N agents)."""

    taken: torch.Tensor  # (B, N) log-probs of the recorded actions
    ent: torch.Tensor  # (B, N) entropies
    value: torch.Tensor  # (B,) critic values
    active: torch.Tensor  # (B, N) 1.0 where the agent had a legal non-no-op action
    reg: torch.Tensor  # () attention-logit L2


def _device(net: MAIFSNet) -> torch.device:
    return next(net.parameters()).device


def forward(net: MAIFSNet, ep: Episode, idx: NDArray[np.int64]) -> _Fwd:
    """The network on steps ``idx`` of ``ep`` (on the network's device)."""
    dev = _device(net)
    obs = torch.from_numpy(ep.obs[idx]).to(dev).float()
    mask = torch.from_numpy(ep.mask[idx]).to(dev)
    adj = torch.from_numpy(ep.adj[idx]).to(dev)
    act = torch.from_numpy(ep.actions[idx]).to(dev)
    logits, value, reg = net(obs, mask, adj)
    lp = torch.log_softmax(logits, dim=-1)
    taken = lp.gather(2, act[..., None])[..., 0]
    ent = -(lp.exp() * lp).sum(dim=-1)
    active = mask[..., 1:].any(dim=-1).float()
    return _Fwd(taken, ent, value, active, reg)


def minibatches(
    eps: list[Episode], batch: int, rng: np.random.Generator
) -> list[tuple[Episode, NDArray[np.int64]]]:
    """Shuffled minibatches of ``batch`` steps, each within one episode."""
    out = []
    for ep in eps:
        perm = rng.permutation(ep.length)
        out += [(ep, perm[i : i + batch]) for i in range(0, ep.length, batch)]
    order = rng.permutation(len(out))
    return [out[i] for i in order]


def _step(
    net: MAIFSNet, opt: torch.optim.Optimizer, loss: torch.Tensor, clip: float, what: str
) -> torch.Tensor:
    """Backward, clip, step; :class:`TrainingDivergedError` on a non-finite loss or weight."""
    if not bool(torch.isfinite(loss)):
        raise TrainingDivergedError(f"the {what} loss is {loss.item()}")
    opt.zero_grad()
    loss.backward()
    gn = torch.nn.utils.clip_grad_norm_(net.parameters(), clip)
    opt.step()
    for name, p in net.named_parameters():
        if not bool(torch.isfinite(p).all()):
            raise TrainingDivergedError(f"weight {name} is no longer finite after a {what} step")
    return gn


def bc_fit(
    net: MAIFSNet,
    opt: torch.optim.Optimizer,
    data: list[Episode],
    bc: BCConf,
    attn_reg: float,
    rng: np.random.Generator,
) -> dict[str, float]:
    """``bc.epochs`` passes of cross-entropy to the teacher's labels and critic regression on
    the returns; the mean losses."""
    net.train()
    ces, vls = [], []
    for _ in range(bc.epochs):
        for ep, idx in minibatches(data, bc.batch, rng):
            f = forward(net, ep, idx)
            assert ep.ret is not None
            ret = torch.from_numpy(ep.ret[idx]).to(f.value.device).float()
            wa = torch.from_numpy(ep.weight[idx]).to(f.value.device) * f.active
            ce = -(f.taken * wa).sum() / wa.sum().clamp(min=1.0)
            vl = functional.smooth_l1_loss(f.value, ret)
            _step(net, opt, ce + bc.value_coef * vl + attn_reg * f.reg, 5.0, "behaviour-cloning")
            ces.append(ce.item())
            vls.append(vl.item())
    return {"bc_ce": float(np.mean(ces)), "bc_value_loss": float(np.mean(vls))} if ces else {}


def ppo_update(
    net: MAIFSNet,
    opt: torch.optim.Optimizer,
    eps: list[Episode],
    p: PPOConf,
    rng: np.random.Generator,
) -> dict[str, float]:
    """PPO epochs over the collected episodes (advantages filled in); mean losses and
    diagnostics."""
    net.train()
    adv_all = np.concatenate([e.adv for e in eps if e.adv is not None])
    mu, sd = float(adv_all.mean()), float(adv_all.std() + 1e-8)
    acc: dict[str, list[float]] = {}
    for _ in range(p.epochs):
        for ep, idx in minibatches(eps, p.batch, rng):
            assert ep.adv is not None and ep.ret is not None
            f = forward(net, ep, idx)
            dev = f.value.device
            old = torch.from_numpy(ep.logp[idx]).to(dev)
            adv = torch.from_numpy((ep.adv[idx] - mu) / sd).to(dev).float()[:, None]
            ret = torch.from_numpy(ep.ret[idx]).to(dev).float()
            ratio = torch.exp(f.taken - old)
            surr = torch.min(ratio * adv, ratio.clamp(1 - p.clip, 1 + p.clip) * adv)
            na = f.active.sum().clamp(min=1.0)
            pg = -(surr * f.active).sum() / na
            entropy = (f.ent * f.active).sum() / na
            vl = functional.smooth_l1_loss(f.value, ret)
            loss = pg + p.vf_coef * vl - p.ent_coef * entropy + p.attn_reg * f.reg
            gn = _step(net, opt, loss, p.max_grad_norm, "PPO")
            with torch.no_grad():
                kl = (((ratio - 1) - (f.taken - old)) * f.active).sum() / na
                cf = (((ratio - 1).abs() > p.clip).float() * f.active).sum() / na
            for k, v in (
                ("policy_loss", pg),
                ("value_loss", vl),
                ("entropy", entropy),
                ("approx_kl", kl),
                ("clip_frac", cf),
                ("grad_norm", gn),
                ("attn_l2", f.reg),
            ):
                acc.setdefault(k, []).append(float(v.detach()))
    return {k: float(np.mean(v)) for k, v in acc.items()}
