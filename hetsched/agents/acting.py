"""Glue between the env core and the network: env settings, masks and acting.

:class:`Acting` takes one decision step for an :class:`hetsched.envs.core.EnvCore`: the
observations and the env's action masks go through the network, and the ordered decision along
the coordination graph (:mod:`hetsched.agents.coordination`) turns its logits into one legal
action per node. Training (:mod:`hetsched.agents.rollout`) and evaluation
(:class:`hetsched.agents.policy.MAIFSPolicy`) use the same object, so the network acts in
evaluation exactly as it acted in training.

One constraint completes the env's masks, in training and evaluation alike: on an idle cluster
(nothing runs and nothing is placed this round) with a legal claim, the joint no-op is not an
action. If every agent passes there, the agent with the highest claim logit takes its
highest-logit claim -- the network's own choice among the claims -- and, when that claim is a
gang (no node hosts the job alone at those levels), every other node for which the same claim is
legal makes it too, so that the env can fill the gang. Without it an event-driven
scheduler that passes on an idle cluster waits for an arrival that may never come; the shipped
checkpoint was trained with it.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from hetsched.agents.config import AgentEnvConf, MAIFSAgentConf, NetConf
from hetsched.agents.coordination import (
    candidate_sets,
    coordination_graph,
    maxsum_actions,
    ordered_actions,
)
from hetsched.agents.network import MAIFSNet, NetDims
from hetsched.agents.signals import (
    best_alone_tput,
    cluster_share,
    drain_ratio,
    level_rates,
    move_savings,
    over_share,
    share_guard,
    window_tput,
)
from hetsched.agents.teacher import SJFTeacher
from hetsched.envs.core import EnvCore
from hetsched.envs.features import ObsLayout
from hetsched.envs.rewards import REWARD_TERMS
from hetsched.envs.spaces import EnvSettings, LevelSets, RewardWeights


def env_settings(conf: AgentEnvConf) -> EnvSettings:
    """The env settings of the agent (``advance="event"``, see :mod:`hetsched.agents.driver`)."""
    return EnvSettings(
        window=conf.window,
        resident_slots=conf.resident_slots,
        levels=LevelSets(gpu=tuple(conf.gpu_levels)),
        # one agent setting per term of the reward table (``reward_<term>``)
        reward_weights=RewardWeights(
            **{t.name: getattr(conf, f"reward_{t.name}") for t in REWARD_TERMS}
        ),
        round_s=conf.round_s,
        max_decisions_per_round=conf.max_decisions_per_round,
        advance="event",
        window_order=conf.window_order,
        window_backfill=conf.window_backfill,
        preemptive=conf.preemptive,
        evict_max=conf.evict_max,
        resizable=conf.resizable,
        migrate_speedup=conf.migrate_speedup,
        migrate_gangs=conf.migrate_gangs,
        migrate_multinode=conf.migrate_multinode,
        retry_refused=conf.retry_refused,
        migrate_elastic=conf.migrate_elastic,
        reclaim_cores=conf.reclaim_cores,
    )


def net_dims(
    layout: ObsLayout,
    levels: LevelSets,
    *,
    preemptive: bool = False,
    resizable: bool = False,
    job_extra: int = 0,
    res_extra: int = 0,
    level_bits: int = 0,
    level_rates: int = 0,
) -> NetDims:
    """The network's view of an observation layout (with eviction actions if preemptive, resize
    actions if resizable; ``level_bits``: :func:`level_bits`; ``level_rates``:
    :func:`level_rate_count`)."""
    lg, lc, lm = levels.sizes
    return NetDims(
        obs_dim=layout.obs_dim
        + layout.window * (job_extra + level_rates)
        + layout.resident_slots * res_extra,
        num_types=layout.num_types,
        node_head=7,
        resident_slots=layout.resident_slots,
        res_dim=layout.res_dim,
        window=layout.window,
        job_dim=layout.job_dim,
        global_dim=layout.global_dim,
        num_levels=lg * lc * lm,
        evict_slots=layout.resident_slots if preemptive else 0,
        resize_slots=layout.resident_slots if resizable else 0,
        job_extra=job_extra,
        res_extra=res_extra,
        level_bits=level_bits,
        level_rates=level_rates,
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
        runtime_rank=conf.runtime_rank,
        level_head=conf.level_head,
    )


def agent_masks(core: EnvCore, conf: AgentEnvConf) -> tuple[NDArray[np.int8], NDArray[np.bool_]]:
    """Action masks ``(N, A)`` and single-host flags ``(N, A - 1)`` for the agent.

    The env's feasibility masks; with ``conf.fungible=False`` (the ablation without fungible
    levels) only the request levels (1.0 GPU, CPU and memory) stay legal. With
    ``conf.work_conserving`` the no-op is illegal for an agent with a legal binding claim
    (:func:`binding_claims`; :func:`hetsched.agents.coordination.ordered_actions` makes it legal
    again for an agent whose binding claims were all taken by the agents that decided before it).
    """
    mask, single, _ = masks_and_binding(core, conf)
    return mask, single


Rates = tuple[NDArray[np.float64], NDArray[np.float64]]


def window_rates(core: EnvCore) -> Rates | None:
    """Isolated throughput of each window job at its request on each node's GPU type, shape
    (N, K) (:func:`hetsched.agents.signals.window_tput`), and the best one node of the cluster
    could give it, shape (K,) (:func:`hetsched.agents.signals.best_alone_tput`); None before
    a workload is bound. Empty slots are computed as job 0 (callers mask them)."""
    if core.wl is None or core.jt is None:
        return None
    w = np.where(core.slot_ok, core.window, 0)
    return window_tput(core, w), best_alone_tput(core, w)


def masks_and_binding(
    core: EnvCore, conf: AgentEnvConf, rates: Rates | None = None
) -> tuple[NDArray[np.int8], NDArray[np.bool_], NDArray[np.bool_] | None]:
    """:func:`agent_masks` and the binding claims it used, shape (N, P - 1) (None without the
    work-conserving semantics); ``rates``: :func:`window_rates` if already computed."""
    ma = core.ma
    mask = ma.mask.copy()
    single = ma.single.reshape(core.N, -1)
    P = core.n_place  # placement actions; eviction actions (preemptive) follow
    if not conf.fungible:
        g1, c1, m1 = core.cfg.levels.one_index
        keep = np.zeros(ma.legal.shape[2:], dtype=bool)
        keep[g1, c1, m1] = True
        mask[:, 1:P] &= np.tile(keep.ravel(), core.K).astype(np.int8)[None, :]
    if conf.share_guard:
        mask[:, 1:P] &= share_guard(core, conf.share_guard_all).reshape(core.N, -1)
    bind = None
    if conf.work_conserving:
        bind = binding_claims(core, conf, single, rates)
        mask[((mask[:, 1:P] == 1) & bind).any(axis=1), 0] = 0
    return mask, single, bind


def binding_claims(
    core: EnvCore, conf: AgentEnvConf, single: NDArray[np.bool_], rates: Rates | None = None
) -> NDArray[np.bool_]:
    """Which claims forbid the no-op under the work-conserving semantics, shape (N, P - 1):
    single-node claims, except (with ``conf.wait_below > 0``) claims of a job that would run
    on the agent's GPU type at less than ``wait_below`` times the best isolated throughput one
    node of the cluster could give it (:func:`hetsched.agents.signals.best_alone_tput`): for
    those the agent may wait for a faster GPU. With ``conf.gang_binding`` the claims of a job no
    node can host alone (a gang) bind too. ``rates``: :func:`window_rates` if already
    computed."""
    P = core.n_place
    bind = single[:, : P - 1]
    if conf.wait_below > 0:
        if rates is None:
            rates = window_rates(core)
        if rates is not None:
            tput, best = rates
            fast = tput >= conf.wait_below * best[None, :]
            bind = bind & np.repeat(fast, (P - 1) // core.K, axis=1)
    if conf.gang_binding:  # claims of jobs no node can host alone bind too
        L = (P - 1) // core.K
        gang_only = ~single[:, : P - 1].reshape(core.N, core.K, L).any(axis=(0, 2))  # (K,)
        bind = bind | np.repeat(gang_only, L)[None, :]
    return bind


def rate_priority(
    core: EnvCore, mask: NDArray[np.integer], rates: Rates | None = None
) -> NDArray[np.float64]:
    """Each agent's decision priority under ``decision_order="rate"``, shape (N,).

    For every window job the agent may claim (a legal placement action in ``mask``), the
    isolated throughput of the job at its request on the agent's GPU type over the best one
    node of the cluster could give it (:func:`hetsched.agents.signals.best_alone_tput`); the
    priority is the largest of these ratios, -1 for an agent with no legal claim. An agent
    whose node serves some waiting job well decides before one whose node serves every job it
    could take slowly, so a slow node cannot take a job before a fast one has chosen.

    Args:
        core: The env core at the decision step.
        mask: The agent's action masks, shape (N, A) (placement actions first).
        rates: :func:`window_rates` if already computed.
    """
    N = core.N
    if rates is None:
        rates = window_rates(core)
    if rates is None:
        return np.zeros(N)
    tput, best = rates
    return _best_ratio(core, mask, tput, best, core.slot_ok[None, :])


def _best_ratio(
    core: EnvCore,
    mask: NDArray[np.integer],
    rate: NDArray[np.float64],
    best: NDArray[np.float64],
    ok: NDArray[np.bool_],
) -> NDArray[np.float64]:
    """Per agent, the largest ``rate / best`` over the window jobs it may claim (a legal
    placement in ``mask`` where ``ok``), -1 for none; shapes (N, K), (K,), (N, K) or (1, K)."""
    N, K = core.N, core.K
    rel = rate / np.where(best > 0, best, np.inf)[None, :]
    L = (core.n_place - 1) // K
    legal = (mask[:, 1 : core.n_place] == 1).reshape(N, K, L).any(axis=2) & ok
    return np.asarray(np.where(legal, rel, -1.0).max(axis=1), dtype=np.float64)


def cores_priority(
    core: EnvCore, mask: NDArray[np.integer], teacher: SJFTeacher
) -> NDArray[np.float64]:
    """Each agent's decision priority under ``decision_order="cores"``, shape (N,).

    Like :func:`rate_priority`, with the teacher's rate model
    (:meth:`hetsched.agents.teacher.SJFTeacher.rates`: the job's GPU level, and the CPU level
    the node's free cores allow, counted): for every window job the agent may claim alone, its
    rate on the agent's node over the best rate any node offers it now; the priority is the
    largest of these ratios, -1 for an agent with no such claim. The node the teacher would
    give a job to has ratio 1 for it, so it decides before a node that serves every job it
    could take worse.

    Args:
        core: The env core at the decision step.
        mask: The agent's action masks, shape (N, A) (placement actions first).
        teacher: The teacher whose rate model ranks the agents.
    """
    if core.wl is None or core.jt is None:
        return np.zeros(core.N)
    rate = teacher.rates(core)[0]  # (N, K), 0 where the job cannot run alone there
    return _best_ratio(core, mask, rate, rate.max(axis=0), rate > 0)


@functools.lru_cache(maxsize=16)
def identity_columns(layout: ObsLayout) -> NDArray[np.bool_]:
    """Observation columns that carry identities, shape (D,): the own node's GPU-type one-hot
    and the model one-hot of every resident slot and window slot (see
    :mod:`hetsched.envs.features`)."""
    sl = layout.slices()
    cols = np.zeros(layout.obs_dim, dtype=bool)
    cols[sl["gpu_type_onehot"]] = True
    M = layout.num_models
    r0 = sl["resident_slots"].start
    for r in range(layout.resident_slots):  # [present, model one-hot, ...]
        o = r0 + r * layout.res_dim + 1
        cols[o : o + M] = True
    w0 = sl["window"].start
    for k in range(layout.window):  # [present, req, min, max, elastic, model one-hot, ...]
        o = w0 + k * layout.job_dim + 5
        cols[o : o + M] = True
    return cols


def agent_observations(core: EnvCore, conf: AgentEnvConf) -> NDArray[np.float32]:
    """The env's observations ``(N, D)`` (a new array each call), with the identity columns
    zeroed unless ``conf.identity``."""
    obs = core.observations()
    if not conf.identity:
        obs[:, identity_columns(core.layout)] = 0.0
    parts = [obs]
    if job_extra(conf):
        assert core.wl is not None
        w = np.where(core.slot_ok, core.window, 0)
        cols = []
        share = cluster_share(core)  # GPUs per job in the system
        if conf.share_feature:
            cols.append(share / np.maximum(core.wl.req_gpus[w], 1))
        if conf.drain_feature:
            d = drain_ratio(core, w)
            cols.append(np.where(d >= 1.0, d, 0.0))  # a step: 0 below a ratio of 1
        blocks = []
        if cols:
            with np.errstate(divide="ignore"):
                v = (np.log2(np.stack(cols, axis=1)) + 4.0) / 8.0  # (K, extra)
            blocks.append(np.clip(v, 0.0, 1.0))
        if conf.level_share_feature:  # (K, Lg): the level's GPUs within the job's share
            assert core.jt is not None
            count = core.jt.gpu_count[w]
            blocks.append(((count > 0) & (count <= max(1.0, share))).astype(np.float64))
        flat = (np.concatenate(blocks, axis=1) * core.slot_ok[:, None]).astype(obs.dtype)
        flat = flat.reshape(-1)
        parts.append(np.broadcast_to(flat, (core.N, flat.shape[0])))
    res = []  # (N, R) each; appended slot by slot, each slot's inputs together
    if conf.move_feature:
        h = move_savings(core) / 3600.0  # hours a move saves, 0: none
        res.append(h / (h + 1.0))
    if conf.shrink_feature:
        x = over_share(core)  # GPUs over the share, 0: no shrink possible
        with np.errstate(divide="ignore"):
            res.append(np.where(x > 0, np.clip((np.log2(x) + 4.0) / 8.0, 0.0, 1.0), 0.0))
    if res:
        parts.append(np.stack(res, axis=2).reshape(core.N, -1).astype(obs.dtype))
    if conf.level_rate_feature:  # (N, K, Lg): the rate at each GPU level over the best one
        g1 = core.cfg.levels.one_index[0]
        guard = share_guard(core, conf.share_guard_all) if conf.share_guard else None
        levels = slice(None) if conf.fungible else slice(g1, g1 + 1)
        rate = level_rates(core, levels, conf.fungible, guard)[0] * core.slot_ok[None, :, None]
        best = rate.max(axis=2, keepdims=True)
        rel = np.divide(rate, best, out=np.zeros_like(rate), where=best > 0)
        parts.append(rel.reshape(core.N, -1).astype(obs.dtype))
    return np.concatenate(parts, axis=1) if len(parts) > 1 else obs


def job_extra(conf: AgentEnvConf) -> int:
    """Per-window-slot features :func:`agent_observations` appends (``NetDims.job_extra``)."""
    levels = len(conf.gpu_levels) if conf.level_share_feature else 0
    return int(conf.share_feature) + int(conf.drain_feature) + levels


def level_rate_count(conf: AgentEnvConf) -> int:
    """Per-slot GPU-level rates :func:`agent_observations` appends last
    (``NetDims.level_rates``)."""
    return len(conf.gpu_levels) if conf.level_rate_feature else 0


def level_bits(conf: AgentEnvConf) -> int:
    """Per-GPU-level inputs ending each slot's :func:`job_extra` (``NetDims.level_bits``)."""
    return len(conf.gpu_levels) if conf.level_share_feature else 0


def res_extra(conf: AgentEnvConf) -> int:
    """Per-resident-slot features :func:`agent_observations` appends (``NetDims.res_extra``)."""
    return int(conf.move_feature) + int(conf.shrink_feature)


def graph_of(mask: NDArray[np.integer], window: int, extra: int = 0) -> NDArray[np.bool_]:
    """The step's coordination graph (:func:`coordination_graph` of the candidate sets).

    Args:
        mask: Action masks, shape (N, A).
        window: Window size K.
        extra: Trailing eviction and resize actions of ``mask`` (not claims; no edges).
    """
    return coordination_graph(candidate_sets(mask[:, : mask.shape[1] - extra], window))


class Acting:
    """Network-driven actions for an env core (one decision step at a time).

    Args:
        net: The network.
        conf: The agent config (conflict mode, fungible levels).
        greedy: Argmax instead of sampling.
        rng: Sampling generator (required unless greedy).
    """

    def __init__(
        self,
        net: MAIFSNet,
        conf: MAIFSAgentConf,
        *,
        greedy: bool,
        rng: np.random.Generator | None = None,
    ) -> None:
        if not greedy and rng is None:
            raise ValueError("sampling (greedy=False) needs rng=")
        self.net = net
        self.conf = conf
        self.greedy = greedy
        self.rng = rng
        self.teacher = SJFTeacher.for_agent(conf) if conf.env.decision_order == "cores" else None

    @torch.no_grad()
    def step(self, core: EnvCore) -> dict[str, Any]:
        """Decide one step: actions, the effective masks, per-agent log-probs, value, inputs."""
        obs = agent_observations(core, self.conf.env)
        env = self.conf.env
        by_rate = env.decision_order == "rate"
        # the window's rates, once per step, for the wait rule and the rate order
        need = by_rate or (env.work_conserving and env.wait_below > 0)
        rates = window_rates(core) if need else None
        mask, single, bind = masks_and_binding(core, env, rates)
        extra = core.n_actions - core.n_place
        adj = graph_of(mask, core.K, extra)
        o = torch.from_numpy(obs)[None]
        g = torch.from_numpy(adj)[None]
        # Unmasked logits: each agent is masked once, by the mask it decides under (``eff``:
        # the env's, less its neighbours' claims, plus the no-op where it is legal again),
        # which is the mask recorded and scored under in training.
        logits, value, _ = self.net(o, torch.ones((1, *mask.shape), dtype=torch.bool), g)
        lg = logits[0].double().numpy()
        rng = None if self.greedy else self.rng
        if self.conf.conflict == "maxsum" and self.greedy:
            slot_single = np.asarray(
                single.reshape(core.N, core.K, -1).any(axis=(0, 2)), dtype=bool
            )
            actions = maxsum_actions(
                lg, mask, slot_single, core.K, iters=self.conf.maxsum_iters, extra=extra
            )
            eff = mask.astype(bool)
        else:
            actions, eff = self._ordered(core, lg, mask, single, bind, rates, rng)
        if not (actions > 0).any() and core.any_legal and core.round_allocation().size == 0:
            # The joint no-op is not an action on an idle cluster (module docstring).
            claims = np.where(eff[:, 1 : core.n_place], lg[:, 1 : core.n_place], -np.inf)
            i = int(np.argmax(claims.max(axis=1)))
            a = 1 + int(np.argmax(claims[i]))
            actions[i] = a
            if not single[i, a - 1]:  # a gang: every node that may claim it does
                actions[mask[:, a] == 1] = a
            eff[actions == a, a] = True  # what is taken is in the mask it is scored under
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

    def label_masks(self, core: EnvCore, label: NDArray[np.int64]) -> NDArray[np.bool_]:
        """The masks ``(N, A)`` each agent decides under in the ordered decision when every
        agent plays ``label`` (the teacher's joint action), as :meth:`step` orders it."""
        env = self.conf.env
        need = env.decision_order == "rate" or (env.work_conserving and env.wait_below > 0)
        rates = window_rates(core) if need else None
        mask, single, bind = masks_and_binding(core, env, rates)
        teach = np.where(np.arange(core.n_actions)[None, :] == label[:, None], 0.0, -50.0)
        return self._ordered(core, teach, mask, single, bind, rates, None)[1]

    def _ordered(
        self,
        core: EnvCore,
        logits: NDArray[np.float64],
        mask: NDArray[np.int8],
        single: NDArray[np.bool_],
        bind: NDArray[np.bool_] | None,
        rates: Rates | None,
        rng: np.random.Generator | None,
    ) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
        """:func:`ordered_actions` under this agent config: actions and effective masks."""
        env = self.conf.env
        if not (env.wait_below > 0 or env.gang_binding):
            bind = None  # every single-node claim binds: pass once every claim is taken
        actions, eff = ordered_actions(
            logits,
            mask,
            single,
            core.K,
            rng,
            graph=self.conf.conflict != "none",
            extra=core.n_actions - core.n_place,
            binding=bind,
            priority=self.priority(core, mask, rates),
            gang_type=core.cluster.node_type if env.gang_binding else None,
        )
        return actions, np.asarray(eff, dtype=bool)

    def priority(
        self, core: EnvCore, mask: NDArray[np.int8], rates: Rates | None = None
    ) -> NDArray[np.float64] | None:
        """The decision order's priorities, shape (N,) (None: the most confident first);
        ``rates``: :func:`window_rates` if already computed."""
        order = self.conf.env.decision_order
        if order == "cores":
            assert self.teacher is not None
            return cores_priority(core, mask, self.teacher)
        if order == "rate":
            return rate_priority(core, mask, rates)
        return None

    def __call__(self, core: EnvCore) -> NDArray[np.int64]:
        """Actions only (the :class:`~hetsched.agents.policy.ActorPolicy` actor)."""
        return np.asarray(self.step(core)["actions"], dtype=np.int64)
