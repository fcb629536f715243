"""Glue between the env core and the network: settings, masks, acting and checkpoints.

A checkpoint (``torch.save`` of plain containers and tensors, loadable with
``torch.load(weights_only=True)``) holds::

    model, optimizer            state dicts
    config                      the resolved agent config (a plain dict)
    env_id, package_version     the env id (:func:`env_id_of` the config) and hetsched.__version__
    dims                        the observation layout the network parses (NetDims)
    step, phase                 env steps so far and the training phase
    rng                         numpy bit-generator state and torch RNG state (exact resume)

It is written atomically (temp file in the same directory, then ``os.replace``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

import hetsched
from hetsched.agents.config import AgentEnvConf, MAIFSAgentConf, NetConf
from hetsched.agents.coordination import (
    candidate_sets,
    coordination_graph,
    maxsum_actions,
    ordered_actions,
)
from hetsched.agents.driver import ENV_ID, PREEMPT_ENV_ID
from hetsched.agents.network import MAIFSNet, NetDims, PolicyEnsemble
from hetsched.envs.core import EnvCore
from hetsched.envs.features import ObsLayout
from hetsched.envs.spaces import EnvSettings, LevelSets, RewardWeights
from hetsched.sim.errors import HetschedError


class CheckpointError(HetschedError):
    """A checkpoint that does not match this package, env or observation layout."""


def env_id_of(config: dict[str, Any]) -> str:
    """The env id of a plain agent config (``PREEMPT_ENV_ID`` when ``env.preemptive``)."""
    env = config.get("env") if isinstance(config, dict) else None
    preemptive = bool(env.get("preemptive", False)) if isinstance(env, dict) else False
    return PREEMPT_ENV_ID if preemptive else ENV_ID


def env_settings(conf: AgentEnvConf) -> EnvSettings:
    """The env settings of the agent (``advance="event"``, see :mod:`hetsched.agents.driver`)."""
    return EnvSettings(
        window=conf.window,
        resident_slots=conf.resident_slots,
        levels=LevelSets(),
        reward_weights=RewardWeights(
            jobs=conf.reward_jobs,
            makespan=conf.reward_makespan,
            conflict=conf.reward_conflict,
            invalid=conf.reward_invalid,
            progress=conf.reward_progress,
        ),
        round_s=conf.round_s,
        max_decisions_per_round=conf.max_decisions_per_round,
        advance="event",
        window_order=conf.window_order,
        preemptive=conf.preemptive,
        evict_max=conf.evict_max,
    )


def net_dims(layout: ObsLayout, levels: LevelSets, *, preemptive: bool = False) -> NetDims:
    """The network's view of an observation layout (with eviction actions if preemptive)."""
    lg, lc, lm = levels.sizes
    return NetDims(
        obs_dim=layout.obs_dim,
        num_types=layout.num_types,
        node_head=7,
        resident_slots=layout.resident_slots,
        res_dim=layout.res_dim,
        window=layout.window,
        job_dim=layout.job_dim,
        global_dim=layout.global_dim,
        num_levels=lg * lc * lm,
        evict_slots=layout.resident_slots if preemptive else 0,
    )


def build_net(conf: NetConf, dims: NetDims) -> MAIFSNet:
    """A fresh network."""
    return MAIFSNet(
        dims,
        hidden=conf.hidden,
        heads=conf.heads,
        graph_layers=conf.graph_layers,
        type_emb=conf.type_emb,
        attention=conf.attention,
        graph=conf.graph,
        evict_bias=conf.evict_bias,
    )


def agent_masks(core: EnvCore, conf: AgentEnvConf) -> tuple[NDArray[np.int8], NDArray[np.bool_]]:
    """Action masks ``(N, A)`` and single-host flags ``(N, A - 1)`` for the agent.

    On top of the env's feasibility masks:

    * ``conf.fungible=False`` keeps only the request levels (1.0 GPU, CPU and memory);
    * the **long-job guard** (``conf.long_guard_s``, null = off; the teacher's makespan rule as
      an action-mask prior): a job whose estimated run time on its fastest allowed GPU type
      exceeds ``long_guard_s`` may not be claimed alone by a node whose best possible rate
      (isolated throughput at the request times the CPU-sensitivity ceiling) is below
      ``guard_rel_rate`` times that fastest rate -- it waits for a fast GPU; and a node fast
      enough to host such a job now may only claim long jobs (or pass). Not applied when
      it would leave an idle cluster with no legal claim (so the agents never stall).
    """
    ma = core.ma
    N = core.N
    P = core.n_place  # placement actions; eviction actions (preemptive) follow, unguarded
    mask = ma.mask.copy()
    single = ma.single.reshape(N, -1)
    if not conf.fungible:
        g1, c1, m1 = core.cfg.levels.one_index
        keep = np.zeros(ma.legal.shape[2:], dtype=bool)
        keep[g1, c1, m1] = True
        mask[:, 1:P] &= np.tile(keep.ravel(), core.K).astype(np.int8)[None, :]
    if conf.long_guard_s is not None and core.any_legal:
        assert core.sim is not None and core.jt is not None and core.wl is not None
        jt, wl = core.jt, core.wl
        g1 = core.cfg.levels.one_index[0]
        w = np.where(core.slot_ok, core.window, 0)
        ceil = core.tm.best_phi(wl.model[w])
        best = jt.best_tput[w] * ceil  # (K,)
        est = np.where(best > 0, core.sim.remaining[w] / np.where(best > 0, best, 1.0), 0.0)
        nt = core.cluster.node_type
        rate = core.tm.isolated(
            wl.model[w][None, :], nt[:, None], jt.gpu_count[w, g1][None, :], False
        )
        slow = (rate * ceil[None, :] < conf.guard_rel_rate * best[None, :]) & (
            est > conf.long_guard_s
        )[None, :]  # (N, K)
        single3 = single.reshape(N, core.K, -1)
        legal3 = mask[:, 1:P].reshape(N, core.K, -1).astype(bool)
        long = np.asarray((est > conf.long_guard_s) & core.slot_ok, dtype=bool)  # (K,)
        # Fast nodes that can host a long job now serve long jobs first.
        serve = np.asarray(
            (long[None, :] & ~slow & (legal3 & single3).any(axis=2)).any(axis=1), dtype=bool
        )  # (N,)
        blocked = (slow[:, :, None] & single3) | (serve[:, None] & ~long[None, :])[:, :, None]
        guarded = mask[:, 1:P] & ~blocked.reshape(N, -1)
        if guarded.any() or core.round_allocation().size:
            mask[:, 1:P] = guarded
            mask[serve, 0] = 0  # a serving node does not pass
    return mask, single


def graph_of(mask: NDArray[np.integer], window: int, extra: int = 0) -> NDArray[np.bool_]:
    """The step's coordination graph (:func:`coordination_graph` of the candidate sets).

    Args:
        mask: Action masks, shape (N, A).
        window: Window size K.
        extra: Trailing eviction actions of ``mask`` (not claims; no edges).
    """
    return coordination_graph(candidate_sets(mask[:, : mask.shape[1] - extra], window))


class Acting:
    """Network-driven actions for an env core (one decision step at a time).

    Args:
        net: The network, or an ensemble of networks acting as one.
        conf: The agent config (conflict mode, fungible levels).
        greedy: Argmax instead of sampling.
        rng: Sampling generator (required unless greedy).
        conflict: Override ``conf.conflict``.
    """

    def __init__(
        self,
        net: MAIFSNet | PolicyEnsemble,
        conf: MAIFSAgentConf,
        *,
        greedy: bool,
        rng: np.random.Generator | None = None,
        conflict: str | None = None,
    ) -> None:
        if not greedy and rng is None:
            raise ValueError("sampling (greedy=False) needs rng=")
        self.net = net
        self.conf = conf
        self.greedy = greedy
        self.rng = rng
        self.conflict = conflict or conf.conflict

    @torch.no_grad()
    def step(self, core: EnvCore) -> dict[str, Any]:
        """Decide one step: actions, the effective masks, per-agent log-probs, value, inputs."""
        obs = core.observations()
        mask, single = agent_masks(core, self.conf.env)
        extra = core.n_actions - core.n_place
        adj = graph_of(mask, core.K, extra)
        o = torch.from_numpy(obs)[None]
        m = torch.from_numpy(mask.astype(bool))[None]
        g = torch.from_numpy(adj)[None]
        logits, value, _ = self.net(o, m, g)
        lg = logits[0].double().numpy()
        rng = None if self.greedy else self.rng
        if self.conflict == "maxsum" and self.greedy:
            slot_single = np.asarray(
                single.reshape(core.N, core.K, -1).any(axis=(0, 2)), dtype=bool
            )
            actions = maxsum_actions(
                lg, mask, slot_single, core.K, iters=self.conf.maxsum_iters, extra=extra
            )
            eff = mask.astype(bool)
        else:
            actions, eff = ordered_actions(
                lg, mask, single, core.K, rng, graph=self.conflict != "none", extra=extra
            )
        if not (actions > 0).any() and core.any_legal and core.round_allocation().size == 0:
            # Work-conserving guard: an idle cluster with placeable jobs never passes (the
            # simulator would stall); the most confident agent takes its best claim.
            claims = np.where(eff[:, 1 : core.n_place], lg[:, 1 : core.n_place], -np.inf)
            i = int(np.argmax(claims.max(axis=1)))
            actions[i] = 1 + int(np.argmax(claims[i]))
        lp = torch.log_softmax(logits[0].masked_fill(~torch.from_numpy(eff), -1e9), dim=-1)
        logp = lp.gather(1, torch.from_numpy(actions)[:, None])[:, 0].numpy()
        return {
            "obs": obs,
            "mask": eff,
            "adj": adj,
            "actions": actions,
            "logp": logp.astype(np.float32),
            "value": np.float32(value.item()),
        }

    def __call__(self, core: EnvCore) -> NDArray[np.int64]:
        """Actions only (the :class:`~hetsched.agents.policy.CoreActorPolicy` actor)."""
        return self.step(core)["actions"]


# ---------------------------------------------------------------------- checkpoints
def save_checkpoint(path: Path, payload: dict[str, Any]) -> Path:
    """Write a checkpoint atomically (temp file + ``os.replace``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    env_id = env_id_of(payload.get("config", {}))
    full = {"env_id": env_id, "package_version": hetsched.__version__, **payload}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save(full, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | Path, *, obs_dim: int | None = None) -> dict[str, Any]:
    """Load and check a checkpoint (``weights_only=True``).

    Args:
        path: Checkpoint file.
        obs_dim: Expected observation size (None: not checked here).

    Raises:
        FileNotFoundError: If the file does not exist.
        CheckpointError: If it was written for another env version or observation size.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(
            f"checkpoint {p} not found; train one with scripts/train.py or pass checkpoint=PATH"
        )
    try:
        ck: dict[str, Any] = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated zip, foreign file, or a pickle weights_only refuses
        raise CheckpointError(
            f"{p} cannot be read as a MAIFS checkpoint ({type(e).__name__}: {str(e)[:200]}); "
            "it is truncated, not a torch checkpoint, or holds objects other than tensors and "
            "plain data (loading uses weights_only=True, so no code in it ever runs); "
            "re-download or retrain it with scripts/train.py"
        ) from None
    if not isinstance(ck, dict):
        raise CheckpointError(f"{p} holds a {type(ck).__name__}, not a MAIFS checkpoint dict")
    for key in ("model", "config", "env_id", "dims"):
        if key not in ck:
            raise CheckpointError(f"{p} is not a MAIFS checkpoint (no {key!r} entry)")
    if ck["env_id"] not in (ENV_ID, PREEMPT_ENV_ID):
        raise CheckpointError(
            f"{p} was trained on env {ck['env_id']!r}, this package provides {ENV_ID!r} and "
            f"{PREEMPT_ENV_ID!r}; retrain the agent for this env version"
        )
    want_id = env_id_of(ck["config"])
    if ck["env_id"] != want_id:
        raise CheckpointError(
            f"{p} says env {ck['env_id']!r} but its config (env.preemptive) means {want_id!r}; "
            "the file was edited or written by another tool: retrain it with scripts/train.py"
        )
    got = int(ck["dims"]["obs_dim"])
    if obs_dim is not None and got != obs_dim:
        raise CheckpointError(
            f"{p} expects observations of size {got}, the env gives {obs_dim}: the window, "
            "resident slots, level sets or throughput-table models differ from training"
        )
    return ck


def conf_from_dict(d: dict[str, Any]) -> MAIFSAgentConf:
    """Rebuild the agent config stored in a checkpoint (unknown keys are an error)."""
    from omegaconf import OmegaConf

    base = OmegaConf.structured(MAIFSAgentConf)
    merged = OmegaConf.merge(base, d)
    obj = OmegaConf.to_object(merged)
    assert isinstance(obj, MAIFSAgentConf)
    return obj


def net_from_checkpoint(ck: dict[str, Any]) -> tuple[MAIFSNet, MAIFSAgentConf]:
    """The network (weights loaded, eval mode) and the agent config of a checkpoint."""
    conf = conf_from_dict(ck["config"])
    known = {f.name for f in fields(NetDims)}
    dims = NetDims(**{k: int(v) for k, v in ck["dims"].items() if k in known})
    net = build_net(conf.net, dims)
    net.load_state_dict(ck["model"])
    net.eval()
    return net, conf


def ensemble_from_checkpoints(
    primary: dict[str, Any],
    members: Sequence[str | Path],
    *,
    primary_path: str | Path = "?",
    evict_only: bool = False,
) -> tuple[PolicyEnsemble, MAIFSAgentConf]:
    """A :class:`PolicyEnsemble` of a loaded checkpoint and further checkpoint files.

    The primary checkpoint's agent config (conflict mode, teacher, env settings) is the
    ensemble's; every member must share its env id, observation layout and env settings (the
    window, levels and order the agents see), so that one observation and mask serve all. One
    exception: members trained with and without eviction actions (the preemptive env) may act
    together. The primary decides whether the ensemble evicts; a member without evictions, or
    any member when the primary has none, takes part in the placement choice only
    (:class:`~hetsched.agents.network.PolicyEnsemble`). With ``evict_only`` the primary
    decides the evictions only and the members alone vote on placements.

    Args:
        primary: A checkpoint from :func:`load_checkpoint`.
        members: Further checkpoint files.
        primary_path: The primary's file, for error messages.
        evict_only: Keep the primary out of the placement vote.

    Raises:
        FileNotFoundError: If a member file does not exist.
        CheckpointError: If a member was trained for another layout or other env settings,
            or ``evict_only`` is asked of a primary without an eviction head.
        ValueError: If ``evict_only`` is asked without members.
    """
    net, conf = net_from_checkpoint(primary)
    if evict_only and not members:
        raise ValueError(
            f"evict_only=true keeps {primary_path} out of the placement vote, so the ensemble "
            "needs members to place (ensemble=[A.pt, ...])"
        )
    if evict_only and net.dims.evict_slots == 0:
        raise CheckpointError(
            f"evict_only=true needs a checkpoint with an eviction head (trained with "
            f"agent.env.preemptive=true); {primary_path} has none"
        )
    nets = [net]
    want = asdict(conf.env)
    for path in members:
        if not Path(path).is_file():
            raise FileNotFoundError(
                f"ensemble member {path} not found; restore it (hetsched/checkpoints/README.md says how "
                "each member was trained) or run the checkpoint alone with ensemble=[] "
                "(scheduler.maifs.ensemble=[])"
            )
        ck = load_checkpoint(path, obs_dim=net.dims.obs_dim)
        m_net, m_conf = net_from_checkpoint(ck)  # PolicyEnsemble checks the full layout
        got = asdict(m_conf.env)
        if want["preemptive"] != got["preemptive"]:  # it places; the primary decides evictions
            got.update(preemptive=want["preemptive"], evict_max=want["evict_max"])
        diff = sorted(k for k in want if got.get(k) != want[k])
        if diff:
            shown = ", ".join(f"env.{k}={got.get(k)!r} (not {want[k]!r})" for k in diff)
            raise CheckpointError(
                f"ensemble member {path} was trained with other env settings than "
                f"{primary_path}: {shown}; members must see the same window and levels"
            )
        nets.append(m_net)
    return PolicyEnsemble(nets, placers=[not evict_only] + [True] * len(members)), conf
