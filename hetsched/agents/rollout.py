"""Episodes of the training env: play them here or in worker processes.

An episode is fixed by an :class:`EpisodeSpec` (curriculum item, env seed, sampling seed, who
acts), drawn from the run's seed and the episode's index alone (:func:`episode_spec`). So the
same run plays the same episodes whether they are played in this process or spread over
``num_workers`` worker processes (:class:`RolloutWorkers`, a ``torch.multiprocessing`` pool
whose workers each hold the curriculum's envs and a copy of the network).
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from hetsched.agents.acting import Acting, agent_masks, agent_observations, graph_of
from hetsched.agents.config import CurriculumItem, MAIFSAgentConf
from hetsched.agents.driver import TeamEnv
from hetsched.agents.network import MAIFSNet
from hetsched.agents.teacher import SJFTeacher
from hetsched.envs.core import EnvCore

KEYS = ("obs", "mask", "adj", "actions", "logp", "value", "weight")
#: Who acts in an episode: the sampling network (PPO), the teacher (behaviour cloning) or the
#: greedy network with the teacher's labels recorded (DAgger).
MODES = ("agent", "teacher", "dagger")


@dataclass
class Episode:
    """One episode's arrays (T steps, N agents)."""

    obs: NDArray[Any]  # (T, N, D) float32 (float16 for teacher labels)
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


@dataclass(frozen=True)
class EpisodeSpec:
    """What fixes an episode: curriculum item, env seed, sampling seed and mode."""

    item: int
    env_seed: int
    act_seed: int
    mode: str


def episode_spec(seed: int, index: int, items: list[CurriculumItem], mode: str) -> EpisodeSpec:
    """Episode ``index`` of a run seeded ``seed``: an item uniformly, a seed in its range."""
    rng = np.random.default_rng([int(seed), int(index)])
    i = int(rng.integers(len(items)))
    it = items[i]
    return EpisodeSpec(i, int(rng.integers(it.seed_lo, it.seed_hi)), int(rng.integers(2**62)), mode)


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


def show_track(core: EnvCore, conf: MAIFSAgentConf, spec: EpisodeSpec) -> bool:
    """Set the information track the agents' features show in this episode; whether noisy.

    With ``agent.bc.noisy_fraction`` > 0, a teacher or DAgger episode shows the ``noisy`` track
    with that probability (drawn from the episode's sampling seed, on a stream of its own);
    every other episode shows the true run times.
    """
    from hetsched.benchmark.info import DEFAULT_SIGMA, RuntimeInfo

    rng = np.random.default_rng([spec.act_seed, 1])
    if spec.mode == "agent" or not rng.random() < conf.bc.noisy_fraction:
        core.features.set_runtime_info(None, 0)
        return False
    sigma = DEFAULT_SIGMA if conf.bc.noisy_sigma is None else conf.bc.noisy_sigma
    core.features.set_runtime_info(RuntimeInfo("noisy", sigma), int(rng.integers(2**62)))
    return True


def label_weights(
    mask: NDArray[np.bool_], label: NDArray[np.int64], n_place: int, move_weight: float
) -> NDArray[np.float32]:
    """Each agent's weight in the cloning loss, shape (N,).

    A teacher label the agent's action semantics forbid (it passes where the agent must claim)
    teaches nothing: weight 0. A label past the placement actions (``label >= n_place``: an
    eviction, a migration or a resize) weighs ``move_weight`` (``agent.bc.move_weight``);
    every other legal label 1.

    Args:
        mask: (N, A) the masks the labels are recorded under.
        label: (N,) the teacher's actions.
        n_place: Placement actions per agent, the no-op included.
        move_weight: Weight of a legal label past the placement actions.
    """
    legal = mask[np.arange(label.shape[0]), label]
    w = np.where(label >= n_place, np.float32(move_weight), np.float32(1.0))
    return np.where(legal, w, np.float32(0.0)).astype(np.float32)


def play(
    env: TeamEnv, net: MAIFSNet, conf: MAIFSAgentConf, teacher: SJFTeacher, spec: EpisodeSpec
) -> Episode:
    """Play one episode (module docstring).

    In modes ``"teacher"`` and ``"dagger"`` the recorded masks are the env's (the teacher's
    actions are legal there), the recorded actions are the teacher's labels, and the
    observations are stored as float16 (all features lie in [0, 1]).
    """
    if spec.mode not in MODES:
        raise ValueError(f"mode={spec.mode!r}; choose one of {', '.join(MODES)}")
    net.eval()
    acting = Acting(
        net, conf, greedy=spec.mode != "agent", rng=np.random.default_rng(spec.act_seed)
    )
    env.reset(np.random.default_rng(spec.env_seed))
    show_track(env.core, conf, spec)
    buf: dict[str, list[Any]] = {k: [] for k in KEYS}
    rew: list[float] = []
    dts: list[float] = []
    parts: dict[str, float] = {}
    while True:
        core = env.core
        d: dict[str, Any]
        if spec.mode == "agent":
            d = acting.step(core)
            d["weight"] = np.ones(core.N, dtype=np.float32)
            run = d["actions"]
        else:
            env_mask, _ = agent_masks(core, conf.env)
            with core.features.true_view():  # the privileged teacher reads the truth
                label = teacher.act(core)
            adj = graph_of(env_mask, core.K, core.n_actions - core.n_place)
            mask = (
                acting.label_masks(core, label) if conf.bc.ordered_masks else env_mask.astype(bool)
            )
            weight = label_weights(mask, label, core.n_place, conf.bc.move_weight)
            d = {
                "obs": agent_observations(core, conf.env).astype(np.float16),
                "mask": mask,
                "adj": adj,
                "actions": label,
                "logp": np.zeros(core.N, dtype=np.float32),
                "value": np.float32(0.0),
                "weight": weight,
            }
            run = label if spec.mode == "teacher" else acting(core)
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


def rollout_scalars(eps: list[Episode], rate: float) -> dict[str, dict[str, float]]:
    """TensorBoard scalars of a PPO collection by namespace: ``rollout`` (return, length,
    env steps/s), ``reward`` (each component's mean episode sum) and ``cluster`` (metrics of
    the finished episodes)."""
    out = {
        "rollout": {
            "episode_return": float(np.mean([e.reward.sum() for e in eps])),
            "episode_length": float(np.mean([e.length for e in eps])),
            "steps_per_s": rate,
        },
        "reward": {
            k.removeprefix("reward_"): float(np.mean([e.parts.get(k, 0.0) for e in eps]))
            for k in sorted({k for e in eps for k in e.parts})
        },
    }
    fin = [e.metrics for e in eps if e.metrics]
    if fin:
        out["cluster"] = {
            k: float(np.mean([m[k] for m in fin])) for k in ("avg_jct_h", "makespan_h", "restarts")
        }
    return out


# ---------------------------------------------------------------------- worker processes
_W: dict[str, Any] = {}  # a worker's envs, network, config and teacher


def _init_worker(path: str, net: MAIFSNet) -> None:
    # An exception escaping a pool's initializer makes the pool start the worker again, forever;
    # it is kept instead and raised by the worker's first episode, which reaches the trainer.
    try:
        torch.set_num_threads(1)
        with open(path, "rb") as f:
            envs, conf = pickle.load(f)
        for env in envs:  # parse the traces now, not in the first episode
            env.reset(np.random.default_rng(0))
        teacher = SJFTeacher.for_agent(conf)
        # One throwaway episode pays the process's first-call costs (compiled kernels, torch's
        # first forward) now, in parallel with the other workers, not in a wave that waits for it.
        play(envs[0], net, conf, teacher, EpisodeSpec(0, 0, 0, "agent"))
        _W.update(envs=envs, conf=conf, net=net, teacher=teacher)
    except Exception as e:
        _W["error"] = e


def _play_remote(spec: EpisodeSpec) -> Episode:
    if "error" in _W:
        err = _W["error"]
        raise RuntimeError(f"a rollout worker could not start: {type(err).__name__}: {err}")
    return play(_W["envs"][spec.item], _W["net"], _W["conf"], _W["teacher"], spec)


class RolloutWorkers:
    """A pool of worker processes that play episodes (``torch.multiprocessing``, spawn).

    The network's weights are moved to shared memory (``share_memory()``): the workers read the
    very tensors the optimizer updates in place, so no weights are sent per episode. Updates
    happen only between collections, while no worker plays.

    The envs and the config reach the workers through a temporary file, not the pipe that
    starts each process: a start message larger than the pipe's buffer holds the parent until
    the child has imported what unpickling it needs, which starts the workers one after another.
    Each worker plays one throwaway episode as it starts (:func:`_init_worker`), so no wave waits
    for a worker's first-call costs.

    Args:
        envs: The curriculum's envs (each worker gets a copy).
        conf: The agent config.
        net: The trained network (its parameters are moved to shared memory).
        num_workers: Processes (>= 2; with one, play in the trainer's process instead).
    """

    def __init__(
        self, envs: list[TeamEnv], conf: MAIFSAgentConf, net: MAIFSNet, num_workers: int
    ) -> None:
        import torch.multiprocessing as mp

        self.num_workers = int(num_workers)
        net.share_memory()
        self._dir = tempfile.mkdtemp(prefix="hetsched_workers_")
        path = os.path.join(self._dir, "envs.pkl")
        with open(path, "wb") as f:
            pickle.dump((envs, conf), f, protocol=pickle.HIGHEST_PROTOCOL)
        ctx = mp.get_context("spawn")
        self.pool = ctx.Pool(self.num_workers, initializer=_init_worker, initargs=(path, net))

    def play(self, specs: list[EpisodeSpec]) -> list[Episode]:
        """Play ``specs`` with the network's current weights; episodes in the specs' order."""
        return list(self.pool.map(_play_remote, specs, chunksize=1))

    def close(self) -> None:
        """Stop the workers and remove the envs' file."""
        self.pool.close()
        self.pool.join()
        shutil.rmtree(self._dir, ignore_errors=True)
