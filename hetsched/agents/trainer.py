"""Training of the MAIFS-style agent: behaviour-cloning warm start, then MAPPO fine-tuning.

The loop (:meth:`Trainer.run`) reads top to bottom:

1. **Behaviour cloning** (phase ``"bc"``): the teacher (:mod:`hetsched.agents.teacher`) acts in
   the training env on episodes drawn from the curriculum; the actor is fit to its actions
   (cross-entropy over each agent's masked logits) and the critic to its discounted returns.
   Then ``bc.dagger_rounds`` DAgger rounds: the greedy network acts, the teacher labels.
2. **MAPPO** (phase ``"ppo"``), repeated until ``ppo.env_steps``: collect whole episodes with
   sampled actions (ordered decisions along the coordination graph,
   :mod:`hetsched.agents.coordination`) until ``rollout_steps``; GAE with semi-MDP discounting
   ``gamma ** (dt / gamma_ref_s)`` on the team reward; ``epochs`` passes of minibatches with the
   per-agent clipped surrogate (shared team advantage), the centralised critic's Huber loss, an
   entropy bonus and the attention-logit L2 penalty; gradient-norm clipping
   (:mod:`hetsched.agents.learner`).
3. Every ``eval.every`` env steps: greedy evaluation through the same runner as every scheduler
   (:func:`hetsched.evaluation.evaluate`) on a validation window, beside a fixed baseline; the
   best checkpoint so far is ``best.pt``. Every ``checkpoint_every`` steps and at the end of
   each phase: ``{phase}_{step}.pt``.

``max_wall_s`` and ``max_env_steps`` cap the whole run, both phases. A loss or weight that
stops being finite ends the run with :class:`~hetsched.agents.learner.TrainingDivergedError`; no
checkpoint with such weights is written. Episodes are played here or by ``num_workers`` worker
processes (:mod:`hetsched.agents.rollout`), the same episodes either way. Episodes never
straddle an update, so a checkpoint (network, optimizer, counters, RNG states) taken after an
update resumes the run exactly.

TensorBoard tags, all on one step axis (env steps): ``rollout/*``, ``train/*``,
``reward/<component>``, ``cluster/*``, ``eval/*``.
"""

from __future__ import annotations

import copy
import functools
import math
import shutil
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from hetsched.agents.acting import (
    build_net,
    env_settings,
    job_extra,
    level_bits,
    level_rate_count,
    net_dims,
    res_extra,
)
from hetsched.agents.checkpoint import (
    init_weights,
    load_checkpoint,
    numpy_state,
    save_checkpoint,
    set_numpy_state,
)
from hetsched.agents.config import ClusterDrawConf, CurriculumItem, TrainConfig
from hetsched.agents.driver import TeamEnv
from hetsched.agents.learner import TrainingDivergedError, bc_fit, ppo_update
from hetsched.agents.rollout import (
    Episode,
    RolloutWorkers,
    discounts,
    episode_spec,
    gae,
    play,
    rollout_scalars,
)
from hetsched.agents.teacher import SJFTeacher
from hetsched.benchmark.job_draw import JobMixDraw
from hetsched.benchmark.scenarios import check_trainable, get_scenario
from hetsched.config import changed_settings
from hetsched.envs.presets import (
    WorkloadFactory,
    resolve_cluster,
    resolve_workload,
    scheduler_factory,
)
from hetsched.envs.spaces import EnvSettings
from hetsched.sim.cluster import Cluster
from hetsched.sim.cluster_draw import ClusterDraw
from hetsched.sim.throughput import ThroughputModel, default_throughput


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


def on_cpu(obj: Any) -> Any:
    """``obj`` with every tensor in it moved to the CPU (a checkpoint written by a GPU learner
    loads on a machine without one)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: on_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(on_cpu(v) for v in obj)
    return obj


def learner_device(name: str) -> torch.device:
    """The learner's device: ``cpu``, ``cuda`` (``cuda:N``) or ``auto`` (CUDA when available).

    Raises:
        ValueError: If the name is unknown, or CUDA is asked for and not available.
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu" or name.startswith("cuda"):
        if name.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device={name!r}: CUDA is not available here; use device=cpu")
        return torch.device(name)
    raise ValueError(f"device={name!r} is not one of auto, cpu, cuda")


def hardware(device: torch.device, workers: int) -> str:
    """One line naming where the run learnt and played (for checkpoints' model cards)."""
    import os
    import platform

    where = f"{os.cpu_count()} CPU cores ({platform.machine()})"
    if device.type == "cuda":
        where = f"learner on {torch.cuda.get_device_name(device)}, " + where
    return f"{where}, {workers} rollout process(es), torch {torch.__version__}"


def item_source(it: CurriculumItem) -> tuple[Cluster, Any]:
    """The cluster and workload (factory) of a curriculum item: its benchmark scenario's
    (refused if in the test split), else its cluster and workload presets."""
    if it.scenario:
        check_trainable(it.scenario)
        sc = get_scenario(it.scenario)
        return resolve_cluster(sc.cluster), sc.factory()
    return resolve_cluster(it.cluster), resolve_workload(it.workload, dict(it.workload_kwargs))


def curriculum_envs(
    cfg: TrainConfig, tm: ThroughputModel, settings: EnvSettings, envs: list[TeamEnv] | None
) -> tuple[list[CurriculumItem], list[TeamEnv]]:
    """The curriculum's items and one training env per item (ready-made ``envs`` when given;
    ``agent.curriculum=[]``: the app's cluster and workload)."""
    items = list(cfg.agent.curriculum)
    max_steps = cfg.agent.env.max_steps
    if envs is not None:
        items = items or [CurriculumItem()]
        return [items[min(i, len(items) - 1)] for i in range(len(envs))], envs
    draw = cluster_draw(cfg.agent.cluster_draw)
    jd = cfg.agent.job_draw
    sources = [item_source(it) for it in items] or [
        (app_cluster(cfg.cluster), app_workload(cfg.workload))
    ]
    if jd.fraction > 0:  # job-mix randomisation of every factory-drawn window
        sources = [
            (cl, JobMixDraw.build(wf, jd.fraction, jd.share, jd.gpus) if callable(wf) else wf)
            for cl, wf in sources
        ]
    envs = [TeamEnv(cl, wf, tm, settings, max_steps, draw) for cl, wf in sources]
    return items or [CurriculumItem()], envs


def cluster_draw(conf: ClusterDrawConf) -> tuple[ClusterDraw, float] | None:
    """The training envs' cluster randomisation (``agent.cluster_draw``), None when off."""
    if not conf.fraction > 0:
        return None
    d = ClusterDraw.build(
        gpu_types=conf.gpu_types,
        groups=conf.groups,
        nodes=conf.nodes,
        gpus_per_node=conf.gpus_per_node,
        cpus_per_gpu=conf.cpus_per_gpu,
        mem_gib_per_gpu=conf.mem_gib_per_gpu,
        total_gpus=conf.total_gpus,
    )
    return d, float(conf.fraction)


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
        self.items, self.envs = curriculum_envs(cfg, self.tm, self.settings, envs)
        dims = {
            net_dims(
                e.core.layout,
                self.settings.levels,
                preemptive=self.settings.preemptive,
                resizable=self.settings.resizable,
                job_extra=job_extra(self.conf.env),
                res_extra=res_extra(self.conf.env),
                level_bits=level_bits(self.conf.env),
                level_rates=level_rate_count(self.conf.env),
            )
            for e in self.envs
        }
        if len(dims) != 1:
            raise ValueError(f"curriculum items give different observation layouts: {dims}")
        self.dims = dims.pop()
        self.net = build_net(self.conf.net, self.dims)  # acting copy (CPU, shared with workers)
        self.device = learner_device(cfg.device)
        # The learner: the acting network itself on a CPU, else a copy on the accelerator whose
        # weights are copied back into the acting network after every fit or update.
        self.learner = self.net if self.device.type == "cpu" else copy.deepcopy(self.net)
        self.learner.to(self.device)
        self.opt = torch.optim.Adam(self.learner.parameters(), lr=self.conf.bc.lr)
        self.rng = np.random.default_rng(cfg.seed)  # minibatch shuffling
        self.teacher = SJFTeacher.for_agent(self.conf)
        self.phase = "bc"
        self.env_steps = 0
        self.ppo_steps = 0
        self.episodes = 0  # episodes played so far: the next episode's index
        self.bc_rounds = 0  # behaviour-cloning rounds done
        self.updates = 0
        self.best = math.inf
        self.last_eval = 0
        self.last_ckpt = 0
        self.baseline: dict[str, float] | None = None
        self.writer: Any = None
        self.workers: RolloutWorkers | None = None
        self._t0 = time.monotonic()
        if self.conf.eval.every > 0:
            self._baseline_factory()  # an unknown preset fails now, not after hours of training
        if cfg.init and not cfg.resume:
            init_weights(self.net, self.dims, Path(cfg.init))
        if cfg.resume:
            self._restore(Path(cfg.resume))
        self._to_learner()

    def _to_learner(self) -> None:
        """Copy the acting network's weights into the learner (no-op when they are one)."""
        if self.learner is not self.net:
            self.learner.load_state_dict(self.net.state_dict())

    def _from_learner(self) -> None:
        """Copy the learner's weights into the acting network, in place (workers see them)."""
        if self.learner is not self.net:
            self.net.load_state_dict(self.learner.state_dict())

    # ------------------------------------------------------------------ main loop
    def run(self) -> Path:
        """Train to the configured budget; return the best checkpoint's path.

        Raises:
            TrainingDivergedError: If a loss or weight stops being finite (the message names the
                step, the phase and the last checkpoint written).
        """
        from torch.utils.tensorboard import SummaryWriter

        self._t0 = time.monotonic()
        self.writer = SummaryWriter(str(self.run_dir / "tb"), purge_step=self.env_steps or None)
        if self.cfg.num_workers > 1:
            self.workers = RolloutWorkers(self.envs, self.conf, self.net, self.cfg.num_workers)
        try:
            if self.phase == "bc":
                self.behaviour_cloning()
                self.checkpoint()  # bc_{step}.pt
                self.phase = "ppo"
                self.opt = torch.optim.Adam(self.learner.parameters(), lr=self.conf.ppo.lr)
            self.train_ppo()
            self.maybe_evaluate(force=self.last_eval != self.env_steps)
            final = self.checkpoint()
        except TrainingDivergedError as err:
            last = sorted((self.run_dir / "checkpoints").glob("*_*.pt"), key=_step_of)
            where = f"last good checkpoint {last[-1]}" if last else "no checkpoint written"
            raise TrainingDivergedError(
                f"training diverged at env step {self.env_steps} (phase {self.phase}): {err}; "
                f"{where}; lower the learning rate (agent.{self.phase}.lr="
                f"{self.opt.param_groups[0]['lr']:g})"
            ) from None
        finally:
            self.writer.close()
            if self.workers is not None:
                self.workers.close()
                self.workers = None
        best = self.run_dir / "checkpoints" / "best.pt"
        src = best if best.is_file() else final
        if self.cfg.out:
            out = Path(self.cfg.out)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, out)
        return src

    def out_of_budget(self) -> bool:
        """Whether ``max_wall_s`` or ``max_env_steps`` is spent (they cap both phases)."""
        c = self.cfg
        if c.max_env_steps is not None and self.env_steps >= c.max_env_steps:
            return True
        return c.max_wall_s is not None and time.monotonic() - self._t0 >= c.max_wall_s

    def _bar(self, total: int, initial: int, desc: str, unit: str) -> Any:
        from tqdm.auto import tqdm

        return tqdm(
            total=total, initial=initial, desc=desc, unit=unit, disable=not self.cfg.progress
        )

    # ------------------------------------------------------------------ episodes
    def play_episodes(self, n: int, mode: str) -> list[Episode]:
        """Play the run's next ``n`` episodes (here, or on the workers in one wave)."""
        specs = [episode_spec(self.cfg.seed, self.episodes + i, self.items, mode) for i in range(n)]
        if self.workers is not None:
            return self.workers.play(specs)
        return [play(self.envs[s.item], self.net, self.conf, self.teacher, s) for s in specs]

    def collect(self) -> list[Episode]:
        """Whole episodes with sampled actions until ``rollout_steps``; GAE filled in.

        With workers, episodes are played in waves of ``num_workers`` and kept in order up to
        the first that reaches ``rollout_steps`` (the rest are played again, identically, in
        the next collection), so the kept episodes do not depend on the worker count.
        """
        p = self.conf.ppo
        out: list[Episode] = []
        n = 0
        while n < p.rollout_steps:
            for ep in self.play_episodes(self.cfg.num_workers, "agent"):
                self.episodes += 1
                disc = discounts(ep.dt, p.gamma, p.gamma_ref_s)
                ep.adv, ep.ret = gae(ep.reward, ep.value.astype(np.float64), disc, p.gae_lambda)
                out.append(ep)
                n += ep.length
                if n >= p.rollout_steps:
                    break
        return out

    # ------------------------------------------------------------------ phases
    def behaviour_cloning(self) -> None:
        """DAgger: fit the actor to the teacher's actions and the critic to the returns.

        Round 0 plays ``bc.episodes`` teacher episodes; each of the ``bc.dagger_rounds`` further
        rounds plays ``bc.dagger_episodes`` episodes with the greedy agent, labelled by the
        teacher. After every round the net is fit for ``bc.epochs`` passes over the last
        ``bc.buffer_episodes`` episodes. Stops early when the run's budget is spent.
        """
        b, p = self.conf.bc, self.conf.ppo
        sizes = [b.episodes] + [b.dagger_episodes] * b.dagger_rounds
        bar = self._bar(sum(sizes), sum(sizes[: self.bc_rounds]), "maifs bc", "episode")
        data: list[Episode] = []
        try:
            for r in range(self.bc_rounds, len(sizes)):
                mode = "teacher" if r == 0 else "dagger"
                jcts = []
                left = sizes[r]
                while left > 0 and not self.out_of_budget():
                    for ep in self.play_episodes(min(left, self.cfg.num_workers), mode):
                        self.episodes += 1
                        left -= 1
                        disc = discounts(ep.dt, p.gamma, p.gamma_ref_s)
                        _, ep.ret = gae(ep.reward, np.zeros(ep.length), disc, 1.0)
                        data.append(ep)
                        self.env_steps += ep.length
                        if ep.metrics:
                            jcts.append(ep.metrics["avg_jct_h"])
                        bar.update(1)
                data = data[-b.buffer_episodes :]
                if jcts:
                    self.log_scalars("rollout", {f"{mode}_avg_jct_h": float(np.mean(jcts))})
                fit = bc_fit(self.learner, self.opt, data, b, p.attn_reg, self.rng)
                self._from_learner()
                self.log_scalars("train", fit)
                self.bc_rounds = r + 1
                self.maybe_evaluate(force=True)
                if self.env_steps - self.last_ckpt >= self.cfg.checkpoint_every:
                    self.checkpoint()
                if self.out_of_budget():
                    break
        finally:
            bar.close()

    def train_ppo(self) -> None:
        """MAPPO updates until ``ppo.env_steps`` or the run's budget."""
        total = self.conf.ppo.env_steps
        for g in self.opt.param_groups:
            g["lr"] = self.conf.ppo.lr
        bar = self._bar(total, min(self.ppo_steps, total), "maifs ppo", "step")
        try:
            while self.ppo_steps < total and not self.out_of_budget():
                t0 = time.perf_counter()
                episodes = self.collect()
                n = sum(e.length for e in episodes)
                rate = n / max(time.perf_counter() - t0, 1e-9)
                self.ppo_steps += n
                self.env_steps += n
                stats = ppo_update(self.learner, self.opt, episodes, self.conf.ppo, self.rng)
                self._from_learner()
                self.updates += 1
                self.log_rollout(episodes, rate)
                self.log_scalars("train", stats)
                bar.update(min(n, total - bar.n))
                bar.set_postfix(ret=f"{np.mean([e.reward.sum() for e in episodes]):.2f}")
                self.maybe_evaluate()
                if self.env_steps - self.last_ckpt >= self.cfg.checkpoint_every:
                    self.checkpoint()
        finally:
            bar.close()

    # ------------------------------------------------------------------ evaluation
    def evaluate_now(self) -> dict[str, float]:
        """Greedy agent and the fixed baseline on the validation item (same runner)."""
        from hetsched.agents.policy import MAIFSPolicy
        from hetsched.evaluation import evaluate
        from hetsched.sim.engine import SimConfig

        e = self.conf.eval
        if e.scenario:
            sc = get_scenario(e.scenario)
            cl, wf = resolve_cluster(sc.cluster), sc.factory()
        else:
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
        ``env.fungible``, :meth:`TeacherPolicy.for_agent`), or a scheduler preset."""
        if self.conf.eval.baseline == "teacher":
            from hetsched.agents.policy import TeacherPolicy

            return lambda: TeacherPolicy.for_agent(self.conf)
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
    def log_scalars(self, ns: str, d: dict[str, float]) -> None:
        """Write ``ns/key`` scalars at the current env step (the one step axis of every tag)."""
        for k, v in d.items():
            self.writer.add_scalar(f"{ns}/{k}", v, self.env_steps)

    def log_rollout(self, eps: list[Episode], rate: float) -> None:
        """Rollout, reward-component and cluster metrics of the collected episodes."""
        for ns, d in rollout_scalars(eps, rate).items():
            self.log_scalars(ns, d)

    # ------------------------------------------------------------------ checkpoints
    def _payload(self) -> dict[str, Any]:
        cfg_dict = OmegaConf.to_container(OmegaConf.structured(self.conf), resolve=True)
        return {
            "model": self.net.state_dict(),
            "optimizer": on_cpu(self.opt.state_dict()),
            "config": cfg_dict,
            "dims": self.dims.as_dict(),
            "step": self.env_steps,
            "ppo_steps": self.ppo_steps,
            "episodes": self.episodes,
            "bc_rounds": self.bc_rounds,
            "updates": self.updates,
            "phase": self.phase,
            "best": self.best,
            "last_eval": self.last_eval,
            "baseline": self.baseline or {},
            "rng": {"numpy": numpy_state(self.rng), "torch": torch.get_rng_state()},
            "seed": int(self.cfg.seed),
            "hardware": hardware(self.device, self.cfg.num_workers),
        }

    def checkpoint(self) -> Path:
        """Write ``{phase}_{step}.pt`` (atomically)."""
        self.last_ckpt = self.env_steps
        name = f"{self.phase}_{self.env_steps}.pt"
        return save_checkpoint(self.run_dir / "checkpoints" / name, self._payload())

    def _restore(self, path: Path) -> None:
        ck = load_checkpoint(path, obs_dim=self.dims.obs_dim)
        now = self._payload()
        old = {"agent": ck.get("config") or {}, "seed": ck.get("seed", now["seed"])}
        changed = changed_settings(old, {"agent": now["config"], "seed": now["seed"]})
        if changed:  # the new command line's values win; say so rather than take them silently
            warnings.warn(
                f"resume={path}: settings differ from the run that wrote the checkpoint: "
                f"{changed}; the resumed run uses the new values",
                stacklevel=2,
            )
        self.net.load_state_dict(ck["model"])
        self._to_learner()
        self.phase = str(ck["phase"])
        if self.phase == "ppo":
            self.opt = torch.optim.Adam(self.learner.parameters(), lr=self.conf.ppo.lr)
        self.opt.load_state_dict(ck["optimizer"])
        self.env_steps = int(ck["step"])
        self.ppo_steps = int(ck["ppo_steps"])
        self.episodes = int(ck.get("episodes", 0))
        self.bc_rounds = int(ck.get("bc_rounds", 0))
        self.updates = int(ck["updates"])
        self.best = float(ck["best"])
        self.last_eval = int(ck["last_eval"])
        self.last_ckpt = self.env_steps
        self.baseline = dict(ck["baseline"]) or None
        set_numpy_state(self.rng, ck["rng"]["numpy"])
        torch.set_rng_state(ck["rng"]["torch"])


def _step_of(path: Path) -> int:
    """The env step in a checkpoint name ``{phase}_{step}.pt`` (-1 if none)."""
    tail = path.stem.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else -1
