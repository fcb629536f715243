"""Training of the MAIFS-style agent: behaviour-cloning warm start, then MAPPO fine-tuning.

The loop (:meth:`Trainer.run`) reads top to bottom:

1. **Behaviour cloning** (phase ``"bc"``): the teacher (:mod:`hetsched.agents.teacher`) acts in
   the training env on episodes drawn from the curriculum; the actor is fit to its actions
   (cross-entropy over each agent's masked logits) and the critic to its discounted returns.
   With ``bc.evict_only`` (preemptive env) only the teacher's eviction decisions are cloned: an
   agent that could evict is fit to "evict slot r" or "do not evict" (the summed probability of
   its placement actions), so a new eviction head learns on a trained placement network.
2. **MAPPO** (phase ``"ppo"``), repeated until ``ppo.env_steps``:
   collect whole episodes with sampled actions (ordered decisions along the coordination graph,
   :mod:`hetsched.agents.coordination`) until ``rollout_steps``; GAE with semi-MDP discounting
   ``gamma ** (dt / gamma_ref_s)`` on the team reward; ``epochs`` passes of minibatches with the
   per-agent clipped surrogate (shared team advantage), the centralised critic's Huber loss, an
   entropy bonus and the attention-logit L2 penalty; gradient-norm clipping. With
   ``ppo.anchor`` (and ``bc.anchor`` in phase 1) a KL penalty keeps the placement choice near
   the ``init=`` network's (a frozen reference), so that the placements do not drift while an
   eviction head learns.
3. Every ``eval.every`` env steps: greedy evaluation through the same runner as every scheduler
   (:func:`hetsched.evaluation.evaluate`) on a validation window, beside a fixed baseline; the
   best checkpoint so far is ``best.pt``. Every ``checkpoint_every`` steps: ``{step}.pt``.

Episodes never straddle an update, so a checkpoint (network, optimizer, counters, numpy and
torch RNG states) taken after an update resumes the run exactly.

TensorBoard tags: ``rollout/*``, ``train/*``, ``reward/<component>``, ``cluster/avg_jct_h``,
``eval/*``.
"""

from __future__ import annotations

import functools
import math
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from omegaconf import OmegaConf
from torch.nn import functional

from hetsched.agents.agent import (
    Acting,
    CheckpointError,
    agent_masks,
    build_net,
    env_settings,
    graph_of,
    load_checkpoint,
    net_dims,
    save_checkpoint,
)
from hetsched.agents.config import CurriculumItem, TrainConfig, preset_rules
from hetsched.agents.driver import TeamEnv
from hetsched.agents.network import EVICT_HEAD, MAIFSNet
from hetsched.agents.teacher import SJFTeacher
from hetsched.config import changed_settings
from hetsched.envs.core import EnvCore
from hetsched.envs.presets import (
    WorkloadFactory,
    resolve_cluster,
    resolve_workload,
    scheduler_factory,
)
from hetsched.sim.cluster import Cluster
from hetsched.sim.metrics import compute_metrics
from hetsched.sim.throughput import ThroughputModel, default_throughput

KEYS = ("obs", "mask", "adj", "actions", "logp", "value", "weight")


@dataclass
class Episode:
    """One episode's arrays (T steps, N agents)."""

    obs: NDArray[np.float32]  # (T, N, D)
    mask: NDArray[np.bool_]  # (T, N, A) the masks the agents decided under
    adj: NDArray[np.bool_]  # (T, N, N)
    actions: NDArray[np.int64]  # (T, N)
    logp: NDArray[np.float32]  # (T, N)
    value: NDArray[np.float32]  # (T,)
    weight: NDArray[np.float32]  # (T, N) behaviour-cloning loss weight of each agent
    reward: NDArray[np.float64]  # (T,)
    dt: NDArray[np.float64]  # (T,) simulated seconds per step
    parts: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    adv: NDArray[np.float64] | None = None
    ret: NDArray[np.float64] | None = None

    @property
    def length(self) -> int:
        """Steps T."""
        return int(self.reward.shape[0])


@dataclass
class _Fwd:
    """The network's outputs on a minibatch (B steps, N agents, A actions)."""

    taken: torch.Tensor  # (B, N) log-probs of the recorded actions
    ent: torch.Tensor  # (B, N) entropies
    value: torch.Tensor  # (B,) critic values
    active: torch.Tensor  # (B, N) 1.0 where the agent had a legal non-no-op action
    reg: torch.Tensor  # () attention-logit L2
    lp: torch.Tensor  # (B, N, A) log-probs of every action
    anchor: torch.Tensor  # () placement anchor KL (0 without a reference network)


def discounts(dt: NDArray[np.float64], gamma: float, ref_s: float) -> NDArray[np.float64]:
    """Semi-MDP discount of each step, ``gamma ** (dt / ref_s)``, shape (T,)."""
    return np.asarray(gamma ** (dt / ref_s), dtype=np.float64)


def gae(
    reward: NDArray[np.float64],
    value: NDArray[np.float64],
    disc: NDArray[np.float64],
    lam: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """GAE over one terminated episode: advantages and returns, each shape (T,)."""
    T = reward.shape[0]
    adv = np.zeros(T)
    nxt_v, nxt_a = 0.0, 0.0
    for t in range(T - 1, -1, -1):  # backwards over time
        delta = reward[t] + disc[t] * nxt_v - value[t]
        nxt_a = delta + disc[t] * lam * nxt_a
        adv[t] = nxt_a
        nxt_v = value[t]
    return adv, adv + value


def app_cluster(node: Any) -> Cluster:
    """The training app's ``cluster``: a preset name or a composed preset (``_target_``)."""
    if isinstance(node, str):
        return resolve_cluster(node)
    from hydra.utils import instantiate

    obj = instantiate(node)
    if not isinstance(obj, Cluster):
        raise ValueError(f"cluster={node!r} did not build a Cluster; use e.g. cluster=sia_64")
    return obj


def app_workload(node: Any) -> WorkloadFactory:
    """The training app's ``workload``: a preset name or a composed ``_partial_`` preset."""
    if isinstance(node, str):
        wf = resolve_workload(node)
    else:
        from hydra.utils import instantiate

        wf = instantiate(node)
    if not callable(wf):
        raise ValueError(f"workload={node!r} did not build a workload factory; use workload=philly")
    return wf


class Trainer:
    """Behaviour cloning + MAPPO on a curriculum (see the module docstring).

    Args:
        cfg: The training config.
        run_dir: Output directory (TensorBoard under ``tb/``, checkpoints under
            ``checkpoints/``).
        throughput: Throughput model (default: the shipped table).
        envs: Ready-made training envs (one per curriculum item; tests and custom clusters),
            drawn with the items' seed ranges (the first item's when there are fewer items).
    """

    def __init__(
        self,
        cfg: TrainConfig,
        run_dir: Path,
        throughput: ThroughputModel | None = None,
        envs: list[TeamEnv] | None = None,
    ) -> None:
        self.cfg = cfg
        self.conf = cfg.agent
        self.run_dir = Path(run_dir)
        torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        self.tm = throughput or default_throughput()
        self.settings = env_settings(self.conf.env)
        items = list(self.conf.curriculum)
        if envs is not None:
            items = items or [CurriculumItem()]
            items = [items[min(i, len(items) - 1)] for i in range(len(envs))]
            self.envs = envs
        elif items:
            self.envs = [
                TeamEnv(
                    resolve_cluster(it.cluster),
                    resolve_workload(it.workload, dict(it.workload_kwargs)),
                    self.tm,
                    self.settings,
                    self.conf.env.max_steps,
                )
                for it in items
            ]
        else:  # agent.curriculum=[]: train on the app's cluster and workload
            items = [CurriculumItem()]
            self.envs = [
                TeamEnv(
                    app_cluster(cfg.cluster),
                    app_workload(cfg.workload),
                    self.tm,
                    self.settings,
                    self.conf.env.max_steps,
                )
            ]
        self.items = items
        dims = {
            net_dims(e.core.layout, self.settings.levels, preemptive=self.settings.preemptive)
            for e in self.envs
        }
        if len(dims) != 1:
            raise ValueError(f"curriculum items give different observation layouts: {dims}")
        self.dims = dims.pop()
        self.net = build_net(self.conf.net, self.dims)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=self.conf.bc.lr)
        self.rng = np.random.default_rng(cfg.seed)
        self.teacher = SJFTeacher.for_agent(self.conf)
        self.phase = "bc"
        self.env_steps = 0
        self.ppo_steps = 0
        self.updates = 0
        self.best = math.inf
        self.last_eval = 0
        self.last_ckpt = 0
        self.baseline: dict[str, float] | None = None
        self.writer: Any = None
        if self.conf.eval.every > 0:
            self._baseline_factory()  # an unknown preset fails now, not after hours of training
        if self.conf.bc.evict_only and not self.settings.preemptive:
            raise ValueError(
                "agent.bc.evict_only clones evictions; it needs agent.env.preemptive=true"
            )
        self.n_place = self.dims.num_actions - self.dims.evict_slots  # no-op + claims
        self.ref_net: MAIFSNet | None = None
        if self.conf.ppo.anchor > 0 or self.conf.bc.anchor > 0:
            if not cfg.init:
                raise ValueError(
                    "agent.ppo.anchor / agent.bc.anchor keep the placements near a reference "
                    "network: pass init=PATH (the reference), or set both anchors to 0"
                )
            self.ref_net = build_net(self.conf.net, self.dims)
            self._init_from(Path(cfg.init), self.ref_net)  # loaded on resume too
            self.ref_net.eval()
            self.ref_net.requires_grad_(False)
        if cfg.init and not cfg.resume:
            self._init_from(Path(cfg.init))
        if cfg.resume:
            self._restore(Path(cfg.resume))

    def _init_from(self, path: Path, net: MAIFSNet | None = None) -> None:
        """Load a checkpoint's weights into ``net`` (default: the trained network; ``init=PATH``).

        A checkpoint without eviction actions may start a preemptive run
        (``agent.env.preemptive=true``): every weight it has is loaded and the eviction head
        keeps its fresh initialisation (``agent.net.evict_bias`` sets how rarely it evicts at
        first). Any other difference of layout is a :class:`CheckpointError`.
        """
        net = self.net if net is None else net
        ck = load_checkpoint(path, obs_dim=self.dims.obs_dim)
        fix = (
            "; init needs the same agent.net sizes (an eviction head may only be new, when a "
            "non-preemptive checkpoint starts a preemptive run)"
        )
        try:
            missing, unexpected = net.load_state_dict(ck["model"], strict=False)
        except RuntimeError as e:  # a tensor of another shape
            raise CheckpointError(
                f"init={path} does not fit this network: {e}"[:1500] + fix
            ) from None
        head = [k for k in missing if k.split(".")[0] in EVICT_HEAD]
        if unexpected or len(head) != len(missing):
            raise CheckpointError(
                f"init={path} does not fit this network: missing {sorted(missing)}, "
                f"unexpected {sorted(unexpected)}" + fix
            )

    # ------------------------------------------------------------------ main loop
    def run(self) -> Path:
        """Train to the configured budget; return the best checkpoint's path."""
        from torch.utils.tensorboard import SummaryWriter
        from tqdm.auto import tqdm

        self.writer = SummaryWriter(str(self.run_dir / "tb"), purge_step=self.env_steps or None)
        total = self.conf.ppo.env_steps
        bar = tqdm(
            total=total,
            initial=self.ppo_steps,
            desc="maifs",
            unit="step",
            disable=not self.cfg.progress,
        )
        try:
            if self.phase == "bc":
                self.behaviour_cloning()
                self.phase = "ppo"
                self.opt = torch.optim.Adam(self.net.parameters(), lr=self.conf.ppo.lr)
                self.checkpoint()
            for g in self.opt.param_groups:
                g["lr"] = self.conf.ppo.lr
            t_start = time.monotonic()
            budget = self.cfg.max_wall_s
            while self.ppo_steps < total:
                if budget is not None and time.monotonic() - t_start > budget:
                    break
                t0 = time.perf_counter()
                episodes = self.collect()
                n = sum(e.length for e in episodes)
                rate = n / max(time.perf_counter() - t0, 1e-9)
                self.ppo_steps += n
                self.env_steps += n
                stats = self.update(episodes)
                self.updates += 1
                self.log_rollout(episodes, rate)
                self.log_scalars("train", stats)
                bar.update(n)
                bar.set_postfix(ret=f"{np.mean([e.reward.sum() for e in episodes]):.2f}")
                self.maybe_evaluate()
                if self.env_steps - self.last_ckpt >= self.cfg.checkpoint_every:
                    self.checkpoint()
            self.maybe_evaluate(force=self.last_eval != self.env_steps)
            final = self.checkpoint()
        finally:
            bar.close()
            self.writer.close()
        best = self.run_dir / "checkpoints" / "best.pt"
        src = best if best.is_file() else final
        if self.cfg.out:
            out = Path(self.cfg.out)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, out)
        return src

    # ------------------------------------------------------------------ episodes
    def draw_env(self) -> TeamEnv:
        """Reset a curriculum env (item and seed drawn from the trainer's generator)."""
        i = int(self.rng.integers(len(self.envs)))
        it = self.items[i]
        seed = int(self.rng.integers(it.seed_lo, it.seed_hi))
        env = self.envs[i]
        env.reset(np.random.default_rng(seed))
        return env

    def run_episode(self, env: TeamEnv, mode: str = "agent") -> Episode:
        """Play one episode.

        Args:
            env: A reset env.
            mode: ``"agent"`` (sampled actions, for PPO), ``"teacher"`` (the teacher acts and
                its actions are recorded) or ``"dagger"`` (the greedy agent acts, the teacher's
                actions in the visited states are recorded as labels). In the last two the
                recorded masks are the env's (the teacher's actions are legal there) and the
                observations are stored as float16 (all features lie in [0, 1]).
        """
        acting = Acting(self.net, self.conf, greedy=mode != "agent", rng=self.rng)
        buf: dict[str, list[Any]] = {k: [] for k in KEYS}
        rew: list[float] = []
        dts: list[float] = []
        parts: dict[str, float] = {}
        while True:
            core = env.core
            d: dict[str, Any]
            if mode == "agent":
                d = acting.step(core)
                d["weight"] = np.ones(core.N, dtype=np.float32)
                run = d["actions"]
            else:
                mask, _ = agent_masks(core, self.conf.env)
                label = self.teacher.act(core)
                d = {
                    "obs": core.observations().astype(np.float16),
                    "mask": mask.astype(bool),
                    "adj": graph_of(mask, core.K, core.n_actions - core.n_place),
                    "actions": label,
                    "logp": np.zeros(core.N, dtype=np.float32),
                    "value": np.float32(0.0),
                    "weight": self._label_weights(core, label),
                }
                run = label if mode == "teacher" else acting(core)
            out = env.step(run)
            for k in KEYS:
                buf[k].append(d[k])
            rew.append(out.reward)
            dts.append(out.dt_s)
            for k, v in out.parts.items():
                parts[k] = parts.get(k, 0.0) + v
            if out.done:
                break
        return Episode(
            obs=np.stack(buf["obs"]),
            mask=np.stack(buf["mask"]),
            adj=np.stack(buf["adj"]),
            actions=np.stack(buf["actions"]),
            logp=np.stack(buf["logp"]),
            value=np.asarray(buf["value"], dtype=np.float32),
            weight=np.stack(buf["weight"]),
            reward=np.asarray(rew),
            dt=np.asarray(dts),
            parts=parts,
            metrics=env.metrics() if env.core.all_finished else {},
        )

    def run_rules_episode(self, env: TeamEnv, preset: str) -> Episode | None:
        """One PPO episode with a scheduler preset's rules in the loop (``ppo.rules_preset``).

        The drawn env's cluster and workload run on the simulator under
        :class:`~hetsched.agents.policy.MAIFSPolicy` with the preset's rules and this network
        sampling; every decision step of the network is recorded. Step ``k``'s reward is the
        env's: ``-w_jobs * J_k / Z`` with ``J_k`` the jobs-in-system integral from its decision
        to the next one (exact, from the jobs' arrival and finish times), plus the terminal
        makespan term on the last step; ``dt_k`` is that interval. With the preset's
        ``elastic_teacher`` the teacher takes the steps whose window holds elastic jobs only, as
        in :class:`~hetsched.agents.policy.MAIFSPolicy`; those steps are not recorded.

        Returns:
            The episode, or None if the network made no decision (the rules and the teacher
            did everything).

        Raises:
            ValueError: If progress shaping is on (not defined with the rules in the loop).
        """
        from hetsched.agents.policy import MAIFSPolicy, elastic_split
        from hetsched.sim.engine import SimConfig, Simulator

        w = env.weights
        if w.progress != 0.0:
            raise ValueError(
                "agent.ppo.rules_preset needs agent.env.reward_progress=0 (progress shaping is "
                "defined for the bare env only)"
            )
        core = env.core
        assert core.wl is not None
        wl, cl = core.wl, core.cluster
        rules = preset_rules(preset)
        # The teacher's steps (elastic windows, with elastic_teacher) are taken as the preset
        # takes them but not recorded: the network learns from the steps it takes itself.
        split = bool(rules.pop("elastic_teacher", False))
        pol = MAIFSPolicy(net=(self.net, self.conf), greedy=False, **rules)
        pol.reset(cl, wl, core.tm, np.random.default_rng(int(self.rng.integers(2**62))))
        acting = pol.actor
        assert isinstance(acting, Acting)  # the network actor (MAIFSPolicy.reset)
        steps: list[dict[str, Any]] = []

        def record(c: EnvCore) -> NDArray[np.int64]:
            d = acting.step(c)
            assert c.sim is not None
            d["time"] = float(c.sim.time)
            steps.append(d)
            return np.asarray(d["actions"], dtype=np.int64)

        pol.actor = elastic_split(self.teacher.act, record) if split else record
        res = Simulator(cl, wl, core.tm, SimConfig()).run(pol)
        if not steps:
            return None
        t = np.asarray([d["time"] for d in steps])
        fin = res.finish_time
        done = np.isfinite(fin)  # all, unless a horizon cut the run short
        end = float(fin[done].max()) if done.any() else float(t[-1])
        fin = np.where(done, fin, end)
        t_next = np.append(t[1:], end)
        lo = np.maximum(wl.arrival[None, :], t[:, None])
        hi = np.minimum(fin[None, :], t_next[:, None])
        jobs_s = np.clip(hi - lo, 0.0, None).sum(axis=1)  # (T,) job-seconds per step
        reward = -w.jobs * jobs_s / env.z
        makespan_h = (end - float(wl.arrival.min())) / 3600.0
        reward[-1] -= w.makespan * makespan_h
        row = compute_metrics(res, scheduler="maifs", workload="", cluster="", seed=0)
        return Episode(
            obs=np.stack([d["obs"] for d in steps]),
            mask=np.stack([d["mask"] for d in steps]),
            adj=np.stack([d["adj"] for d in steps]),
            actions=np.stack([d["actions"] for d in steps]),
            logp=np.stack([d["logp"] for d in steps]),
            value=np.asarray([d["value"] for d in steps], dtype=np.float32),
            weight=np.ones((len(steps), core.N), dtype=np.float32),
            reward=reward,
            dt=t_next - t,
            parts={
                "reward_jobs": float(-w.jobs * jobs_s.sum() / env.z),
                "reward_makespan": float(-w.makespan * makespan_h),
            },
            metrics={k: float(v) for k, v in row.items() if isinstance(v, int | float)},
        )

    def _label_weights(self, core: EnvCore, label: NDArray[np.int64]) -> NDArray[np.float32]:
        """Loss weight per agent: ``bc.long_weight`` where the teacher claims a long job.

        A job is long when its remaining work on its fastest allowed type at the request takes
        more than ``teacher.long_s`` (the teacher's makespan rule; such decisions are rare).
        """
        w = np.ones(core.N, dtype=np.float32)
        lw = self.conf.bc.long_weight
        claim = label > 0
        if lw == 1.0 or not claim.any():
            return w
        assert core.sim is not None and core.jt is not None
        k = core.codec.decode(label[claim])[0]
        j = core.window[k]
        best = core.jt.best_tput[j]
        est = np.where(best > 0, core.sim.remaining[j] / np.where(best > 0, best, 1.0), 0.0)
        w[np.flatnonzero(claim)[est > self.conf.teacher.long_s]] = lw
        return w

    def collect(self) -> list[Episode]:
        """Whole episodes with sampled actions until ``rollout_steps``; GAE filled in."""
        p = self.conf.ppo
        self.net.eval()
        out: list[Episode] = []
        n = 0
        empty = 0
        while n < p.rollout_steps:
            if p.rules_preset:
                maybe = self.run_rules_episode(self.draw_env(), p.rules_preset)
                if maybe is None:  # the rules decided everything: nothing to learn from
                    empty += 1
                    if empty >= 100:
                        raise RuntimeError(
                            f"100 episodes in a row with agent.ppo.rules_preset="
                            f"{p.rules_preset!r} gave the network no decision; check the "
                            "preset's rules and the curriculum"
                        )
                    continue
                ep = maybe
            else:
                ep = self.run_episode(self.draw_env(), "agent")
            disc = discounts(ep.dt, p.gamma, p.gamma_ref_s)
            ep.adv, ep.ret = gae(ep.reward, ep.value.astype(np.float64), disc, p.gae_lambda)
            out.append(ep)
            n += ep.length
        return out

    # ------------------------------------------------------------------ learning
    def _forward(self, ep: Episode, idx: NDArray[np.int64], anchor: float) -> _Fwd:
        """The network on steps ``idx`` of ``ep`` (see :class:`_Fwd`); the anchor's KL only
        when its weight ``anchor`` is positive (else 0, without the reference's forward)."""
        obs = torch.from_numpy(ep.obs[idx]).float()
        mask = torch.from_numpy(ep.mask[idx])
        adj = torch.from_numpy(ep.adj[idx])
        act = torch.from_numpy(ep.actions[idx])
        logits, value, reg = self.net(obs, mask, adj)
        lp = torch.log_softmax(logits, dim=-1)
        taken = lp.gather(2, act[..., None])[..., 0]
        ent = -(lp.exp() * lp).sum(dim=-1)
        active = mask[..., 1:].any(dim=-1).float()
        kl = self._anchor_kl(obs, mask, adj, logits) if anchor > 0 else torch.zeros(())
        return _Fwd(taken, ent, value, active, reg, lp, kl)

    def _anchor_kl(
        self, obs: torch.Tensor, mask: torch.Tensor, adj: torch.Tensor, logits: torch.Tensor
    ) -> torch.Tensor:
        """``KL(ref || net)`` of the placement choice (no-op and claims, renormalised without
        the evictions), averaged over the agents with a legal claim; 0 without a reference."""
        if self.ref_net is None:
            return torch.zeros(())
        P = self.n_place
        with torch.no_grad():
            ref_logits, _, _ = self.ref_net(obs, mask, adj)
            ref_lp = torch.log_softmax(ref_logits[..., :P], dim=-1)
        cur_lp = torch.log_softmax(logits[..., :P], dim=-1)
        m = mask[..., :P]
        kl = torch.where(m, ref_lp.exp() * (ref_lp - cur_lp), torch.zeros(())).sum(dim=-1)
        has = mask[..., 1:P].any(dim=-1).float()
        return (kl * has).sum() / has.sum().clamp(min=1.0)

    def _evict_ll(self, f: _Fwd, ep: Episode, idx: NDArray[np.int64]) -> torch.Tensor:
        """Log-likelihood of the teacher's eviction decision per agent (B, N): ``log p(label)``
        where it evicts, else ``log`` of the total probability of not evicting
        (``bc.evict_only``)."""
        act = torch.from_numpy(ep.actions[idx])
        keep = torch.logsumexp(f.lp[..., : self.n_place], dim=-1)
        return torch.where(act >= self.n_place, f.taken, keep)

    def behaviour_cloning(self) -> None:
        """DAgger: fit the actor to the teacher's actions and the critic to the returns.

        Round 0 plays ``bc.episodes`` teacher episodes; each of the ``bc.dagger_rounds`` further
        rounds plays ``bc.dagger_episodes`` episodes with the greedy agent, labelled by the
        teacher. After every round the net is fit for ``bc.epochs`` passes over the last
        ``bc.buffer_episodes`` episodes.
        """
        b, p = self.conf.bc, self.conf.ppo
        data: list[Episode] = []
        it = 0
        for r in range(b.dagger_rounds + 1):
            mode = "teacher" if r == 0 else "dagger"
            jcts = []
            self.net.eval()
            for _ in range(b.episodes if r == 0 else b.dagger_episodes):
                ep = self.run_episode(self.draw_env(), mode)
                disc = discounts(ep.dt, p.gamma, p.gamma_ref_s)
                _, ep.ret = gae(ep.reward, np.zeros(ep.length), disc, 1.0)
                data.append(ep)
                self.env_steps += ep.length
                if ep.metrics:
                    jcts.append(ep.metrics["avg_jct_h"])
            data = data[-b.buffer_episodes :]
            if jcts:
                self.log_scalars("rollout", {f"{mode}_avg_jct_h": float(np.mean(jcts))})
            self.net.train()
            for _ in range(b.epochs):
                for ep, idx in self._minibatches(data, b.batch):
                    f = self._forward(ep, idx, b.anchor)
                    assert ep.ret is not None
                    ret = torch.from_numpy(ep.ret[idx]).float()
                    wa = torch.from_numpy(ep.weight[idx])
                    if b.evict_only:  # agents that could evict: evict (which slot) or not
                        wa = wa * torch.from_numpy(ep.mask[idx][..., self.n_place :].any(-1))
                        ll = self._evict_ll(f, ep, idx)
                    else:
                        wa, ll = wa * f.active, f.taken
                    ce = -(ll * wa).sum() / wa.sum().clamp(min=1.0)
                    vl = functional.smooth_l1_loss(f.value, ret)
                    loss = ce + b.value_coef * vl + p.attn_reg * f.reg + b.anchor * f.anchor
                    self.opt.zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(self.net.parameters(), 5.0)
                    self.opt.step()
                    it += 1
                    if it % 20 == 0:
                        self.log_scalars(
                            "train",
                            {
                                "bc_ce": ce.item(),
                                "bc_value_loss": vl.item(),
                                "anchor_kl": f.anchor.item(),
                            },
                            it,
                        )
            self.maybe_evaluate(force=True)

    def _minibatches(
        self, eps: list[Episode], batch: int
    ) -> list[tuple[Episode, NDArray[np.int64]]]:
        """Shuffled minibatches, each within one episode (one cluster, so one agent count)."""
        out = []
        for ep in eps:
            perm = self.rng.permutation(ep.length)
            out += [(ep, perm[i : i + batch]) for i in range(0, ep.length, batch)]
        order = self.rng.permutation(len(out))
        return [out[i] for i in order]

    def update(self, eps: list[Episode]) -> dict[str, float]:
        """PPO epochs over the collected episodes; mean losses and diagnostics."""
        p = self.conf.ppo
        self.net.train()
        adv_all = np.concatenate([e.adv for e in eps if e.adv is not None])
        mu, sd = float(adv_all.mean()), float(adv_all.std() + 1e-8)
        acc: dict[str, list[float]] = {}
        for _ in range(p.epochs):
            for ep, idx in self._minibatches(eps, p.batch):
                assert ep.adv is not None and ep.ret is not None
                f = self._forward(ep, idx, p.anchor)
                taken, ent, value, active, reg = f.taken, f.ent, f.value, f.active, f.reg
                old = torch.from_numpy(ep.logp[idx])
                adv = torch.from_numpy((ep.adv[idx] - mu) / sd).float()[:, None]
                ret = torch.from_numpy(ep.ret[idx]).float()
                ratio = torch.exp(taken - old)
                surr = torch.min(ratio * adv, ratio.clamp(1 - p.clip, 1 + p.clip) * adv)
                na = active.sum().clamp(min=1.0)
                pg = -(surr * active).sum() / na
                entropy = (ent * active).sum() / na
                vl = functional.smooth_l1_loss(value, ret)
                loss = pg + p.vf_coef * vl - p.ent_coef * entropy + p.attn_reg * reg
                loss = loss + p.anchor * f.anchor
                self.opt.zero_grad()
                loss.backward()
                gn = torch.nn.utils.clip_grad_norm_(self.net.parameters(), p.max_grad_norm)
                self.opt.step()
                with torch.no_grad():
                    kl = (((ratio - 1) - torch.log(ratio)) * active).sum() / na
                    cf = (((ratio - 1).abs() > p.clip).float() * active).sum() / na
                for k, v in (
                    ("policy_loss", pg),
                    ("value_loss", vl),
                    ("entropy", entropy),
                    ("approx_kl", kl),
                    ("clip_frac", cf),
                    ("grad_norm", gn),
                    ("attn_l2", reg),
                    ("anchor_kl", f.anchor),
                ):
                    acc.setdefault(k, []).append(
                        float(v.detach()) if isinstance(v, torch.Tensor) else float(v)
                    )
        return {k: float(np.mean(v)) for k, v in acc.items()}

    # ------------------------------------------------------------------ evaluation
    def evaluate_now(self) -> dict[str, float]:
        """Greedy agent and the fixed baseline on the validation item (same runner)."""
        from hetsched.agents.policy import MAIFSPolicy
        from hetsched.evaluation import evaluate
        from hetsched.sim.engine import SimConfig

        e = self.conf.eval
        cl = resolve_cluster(e.cluster) if e.cluster else app_cluster(self.cfg.cluster)
        base = resolve_workload(e.workload) if e.workload else app_workload(self.cfg.workload)
        if not callable(base):
            raise ValueError(f"eval.workload={e.workload!r} must name a workload preset")
        wf = functools.partial(base, **dict(e.workload_kwargs))
        self.net.eval()
        pols: dict[str, Any] = {"maifs": lambda: MAIFSPolicy(net=(self.net, self.conf))}
        if self.baseline is None:
            pols["baseline"] = self._baseline_factory()
        outs = evaluate(
            pols,
            cluster=cl,
            workload_factory=wf,
            throughput=self.tm,
            seeds=list(e.seeds),
            sim_config=SimConfig(round_s=60.0),
        )
        res: dict[str, float] = {}
        for name in ("maifs", "baseline"):
            rows = [o.row for o in outs if o.row["scheduler"] == name]
            if rows:
                res[f"{name}_avg_jct_h"] = float(np.mean([r["avg_jct_h"] for r in rows]))
                res[f"{name}_makespan_h"] = float(np.mean([r["makespan_h"] for r in rows]))
        if self.baseline is None:
            self.baseline = {k: v for k, v in res.items() if k.startswith("baseline")}
        res.update(self.baseline)
        return res

    def _baseline_factory(self) -> Callable[[], Any]:
        """Fresh policies of ``eval.baseline``: the teacher this run clones (its settings and
        ``env.fungible``, as :meth:`SJFTeacher.for_agent`), or a scheduler preset."""
        if self.conf.eval.baseline == "teacher":
            from hetsched.agents.policy import TeacherPolicy

            t, window = SJFTeacher.for_agent(self.conf), self.conf.env.window
            return lambda: TeacherPolicy(window, t.order, t.min_rel_rate, t.fungible, t.long_s)
        try:
            return scheduler_factory(self.conf.eval.baseline)
        except ValueError as err:
            raise ValueError(
                f"agent.eval.baseline={self.conf.eval.baseline!r}: {err}; or 'teacher'"
            ) from None

    def maybe_evaluate(self, force: bool = False) -> None:
        """Evaluate every ``eval.every`` env steps (0: never); keep ``best.pt`` (lowest avg JCT)."""
        if self.conf.eval.every <= 0:
            return
        if not force and self.env_steps - self.last_eval < self.conf.eval.every:
            return
        self.last_eval = self.env_steps
        res = self.evaluate_now()
        self.log_scalars("eval", res)
        score = res["maifs_avg_jct_h"]
        if math.isfinite(score) and score < self.best:
            self.best = score
            save_checkpoint(self.run_dir / "checkpoints" / "best.pt", self._payload())

    # ------------------------------------------------------------------ logging
    def log_scalars(self, ns: str, d: dict[str, float], step: int | None = None) -> None:
        """Write ``ns/key`` scalars at ``step`` (default: env steps)."""
        for k, v in d.items():
            self.writer.add_scalar(f"{ns}/{k}", v, self.env_steps if step is None else step)

    def log_rollout(self, eps: list[Episode], rate: float) -> None:
        """Rollout, reward-component and cluster metrics of the collected episodes."""
        self.log_scalars(
            "rollout",
            {
                "episode_return": float(np.mean([e.reward.sum() for e in eps])),
                "episode_length": float(np.mean([e.length for e in eps])),
                "steps_per_s": rate,
            },
        )
        keys = sorted({k for e in eps for k in e.parts})
        self.log_scalars(
            "reward",
            {
                k.removeprefix("reward_"): float(np.mean([e.parts.get(k, 0.0) for e in eps]))
                for k in keys
            },
        )
        fin = [e.metrics for e in eps if e.metrics]
        if fin:
            self.log_scalars(
                "cluster",
                {
                    "avg_jct_h": float(np.mean([m["avg_jct_h"] for m in fin])),
                    "makespan_h": float(np.mean([m["makespan_h"] for m in fin])),
                    "restarts": float(np.mean([m["restarts"] for m in fin])),
                },
            )

    # ------------------------------------------------------------------ checkpoints
    def _payload(self) -> dict[str, Any]:
        cfg_dict = OmegaConf.to_container(OmegaConf.structured(self.conf), resolve=True)
        bg = self.rng.bit_generator.state
        return {
            "model": self.net.state_dict(),
            "optimizer": self.opt.state_dict(),
            "config": cfg_dict,
            "seed": int(self.cfg.seed),
            "dims": self.dims.as_dict(),
            "step": self.env_steps,
            "ppo_steps": self.ppo_steps,
            "updates": self.updates,
            "phase": self.phase,
            "best": self.best,
            "last_eval": self.last_eval,
            "baseline": self.baseline or {},
            "rng": {
                "numpy": {
                    "state": int(bg["state"]["state"]),
                    "inc": int(bg["state"]["inc"]),
                    "has_uint32": int(bg["has_uint32"]),
                    "uinteger": int(bg["uinteger"]),
                },
                "torch": torch.get_rng_state(),
            },
        }

    def checkpoint(self) -> Path:
        """Write ``{step}.pt`` (atomically)."""
        self.last_ckpt = self.env_steps
        return save_checkpoint(
            self.run_dir / "checkpoints" / f"{self.env_steps}.pt", self._payload()
        )

    def _restore(self, path: Path) -> None:
        ck = load_checkpoint(path, obs_dim=self.dims.obs_dim)
        self.net.load_state_dict(ck["model"])
        self.phase = str(ck["phase"])
        if self.phase == "ppo":
            self.opt = torch.optim.Adam(self.net.parameters(), lr=self.conf.ppo.lr)
        self.opt.load_state_dict(ck["optimizer"])
        self.env_steps = int(ck["step"])
        self.ppo_steps = int(ck["ppo_steps"])
        self.updates = int(ck["updates"])
        self.best = float(ck["best"])
        self.last_eval = int(ck["last_eval"])
        self.last_ckpt = self.env_steps
        self.baseline = dict(ck["baseline"]) or None
        r = ck["rng"]["numpy"]
        self.rng.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": int(r["state"]), "inc": int(r["inc"])},
            "has_uint32": int(r["has_uint32"]),
            "uinteger": int(r["uinteger"]),
        }
        torch.set_rng_state(ck["rng"]["torch"])
        now = self._payload()
        old = {"agent": ck.get("config") or {}, "seed": ck.get("seed", now["seed"])}
        changed = changed_settings(old, {"agent": now["config"], "seed": now["seed"]})
        if changed:  # the new command line's values win; say so rather than take them silently
            warnings.warn(
                f"resume={path}: settings differ from the run that wrote the checkpoint: "
                f"{changed}; the resumed run uses the new values",
                stacklevel=2,
            )
