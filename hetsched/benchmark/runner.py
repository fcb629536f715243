"""The benchmark run: every (scenario, scheduler, track, seed) cell through the evaluation runner.

A *cell* is one scheduler on one seed's workload of one scenario under one information track
(:mod:`hetsched.benchmark.info`). Each cell runs through :func:`hetsched.evaluation.run_one`, the
runner every evaluation uses, with the scheduler wrapped in

* :class:`~hetsched.benchmark.info.InfoPolicy` for the ``noisy`` and ``none`` tracks, and
* :class:`FitProbe`, which records the GPUs left idle while a waiting job fits them.

Cells run in parallel (joblib, one process per worker) and each writes its own result file
``cells/<scenario>/<scheduler>~<track>~s<seed>~<hash>.json`` atomically, where ``hash`` covers
the scheduler's settings, the track, the scenario and the engine settings; a cell whose file
exists is skipped, so an interrupted run resumes where it stopped, and a changed setting reruns
only the cells it affects. :mod:`hetsched.benchmark.leaderboard` turns the cells into the
leaderboard.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.benchmark.info import RuntimeInfo, with_info
from hetsched.benchmark.scenarios import Scenario, get_scenario
from hetsched.envs.layout import OBS_VERSION
from hetsched.evaluation import atomic_write_text, run_one
from hetsched.sim.allocation import Allocation
from hetsched.sim.errors import ConfigError
from hetsched.sim.metrics import METRICS_VERSION
from hetsched.sim.throughput import single_node_tput

#: Metrics of a cell's row (from :func:`hetsched.sim.metrics.compute_metrics` and
#: :func:`~hetsched.sim.metrics.extended_metrics`, plus ``idle_fit_gpu_h``).
CELL_METRICS: tuple[str, ...] = (
    "avg_jct_h",
    "p99_jct_h",
    "makespan_h",
    "avg_queue_h",
    "utilization",
    "restarts",
    "idle_fit_gpu_h",
    "lb_avg_jct_h",
    "unfinished_jobs",
    "decision_ms_mean",
)


#: A single-node fit on a GPU type that gives the job less than this fraction of the best
#: isolated throughput one node of the cluster could give it counts as ``slow_only``
#: (:meth:`FitProbe.idle_breakdown`).
SLOW_FRACTION = 0.5


class FitProbe:
    """Wraps a scheduler and records, at each decision, the GPUs its allocation leaves idle and
    whether a waiting job fits them.

    A waiting job (active, not in the allocation) *fits* when some GPU type it may use has at
    least its ``min_gpus`` GPUs free on nodes that are up (GPUs only: CPU and memory are not
    checked). The allocation holds until the next decision, so :meth:`idle_fit_gpu_h` integrates
    the idle GPUs over the intervals that start with a fitting waiting job.

    Args:
        policy: Any scheduler.
    """

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.times: list[float] = []
        self.idle: list[float] = []
        self.fits: list[bool] = []
        self.single: list[bool] = []  # a waiting job fits on one node's free GPUs
        self.fast: list[bool] = []  # ... on a GPU type not below SLOW_FRACTION of its best
        self.last: list[str] = []  # how the decision's final step ended (actor policies)
        self.cause: list[str] = []  # what kept fitting jobs off the idle GPUs (actor policies)

    def __getattr__(self, name: str) -> Any:
        if name == "policy":
            raise AttributeError(name)
        return getattr(self.policy, name)

    def reset(self, *args: Any, **kwargs: Any) -> None:
        """Reset the wrapped policy and the records."""
        self.times, self.idle, self.fits, self.single, self.fast = [], [], [], [], []
        self.last, self.cause = [], []
        if hasattr(self.policy, "reset"):
            self.policy.reset(*args, **kwargs)

    def decide(self, state: Any) -> Allocation:
        """The wrapped policy's decision; records idle GPUs and fitting waiting jobs."""
        alloc: Allocation = self.policy.decide(state)
        cl, wl = state.cluster, state.workload
        N = cl.num_nodes
        free = np.where(state.node_up, cl.node_gpus, 0) - alloc.used_gpus_per_node(N)
        free = np.maximum(free, 0)
        waiting = state.active[~np.isin(state.active, alloc.job)]
        fits = single = fast = False
        cause = "n/a"
        if waiting.size and free.sum() > 0:
            per_type = np.bincount(cl.node_type, weights=free, minlength=wl.allowed_types.shape[1])
            need = wl.min_gpus[waiting][:, None]
            fits = bool(((per_type[None, :] >= need) & wl.allowed_types[waiting]).any())
            host = (free[None, :] >= need) & wl.allowed_types[waiting][:, cl.node_type]  # (W, N)
            single = fast = bool(host.any())
            if single:
                fast = bool((host & _fast_types(state, waiting)[:, cl.node_type]).any())
                explain = getattr(self.policy, "idle_cause", None)
                if explain is not None:
                    w, n = np.nonzero(host)
                    cause = str(explain(waiting[w], n))
        self.times.append(float(state.time))
        self.idle.append(float(free.sum()))
        self.fits.append(fits)
        self.single.append(single)
        self.fast.append(fast)
        self.last.append(str(getattr(self.policy, "last_step", "n/a")))
        self.cause.append(cause)
        return alloc

    def _weights(self, end_s: float) -> NDArray[np.float64]:
        """GPU-hours idle while a waiting job fits, per recorded interval."""
        t = np.asarray(self.times + [max(end_s, self.times[-1])])
        return np.asarray(self.idle) * np.diff(t) * np.asarray(self.fits) / 3600.0

    def _split(self, labels: list[str], end_s: float) -> dict[str, float]:
        """:meth:`idle_fit_gpu_h` summed per label of the recorded intervals (GPU-hours)."""
        out: dict[str, float] = {}
        if self.times:
            for k, w in zip(labels, self._weights(end_s).tolist(), strict=True):
                out[k] = out.get(k, 0.0) + w
        return out

    def idle_fit_gpu_h(self, end_s: float) -> float:
        """GPU-hours idle while a waiting job fits, up to ``end_s`` (s)."""
        return float(self._weights(end_s).sum()) if self.times else 0.0

    def idle_by_last_step(self, end_s: float) -> dict[str, float]:
        """:meth:`idle_fit_gpu_h` split by how the scheduler's decision ended, in GPU-hours
        (keys of :data:`hetsched.agents.policy.LAST_STEPS` for the MAIFS network and its
        teacher: every agent passed, claims none granted, ...; ``n/a`` for other
        schedulers)."""
        return self._split(self.last, end_s)

    def idle_by_cause(self, end_s: float) -> dict[str, float]:
        """The single-node fits of :meth:`idle_breakdown` (``single`` and ``slow_only``) split
        by what kept the fitting jobs off the idle GPUs in the env's round, in GPU-hours
        (:data:`hetsched.envs.idle.IDLE_CAUSES`, for policies with an ``idle_cause`` method: the
        MAIFS network and its teacher; ``n/a`` for the other schedulers and the gang-only
        fits)."""
        return self._split(self.cause, end_s)

    def idle_breakdown(self, end_s: float) -> dict[str, float]:
        """:meth:`idle_fit_gpu_h` split by what the waiting jobs need, in GPU-hours: ``single``
        (some job fits on one node's free GPUs of an allowed type that gives it at least
        :data:`SLOW_FRACTION` of the best isolated throughput one node of the cluster could),
        ``slow_only`` (single-node fits only on slower types: waiting there may be waiting for
        a faster GPU) and ``gang_only`` (jobs fit only across several nodes of a type). The
        three add up to :meth:`idle_fit_gpu_h`."""
        if not self.times:
            return {"single": 0.0, "slow_only": 0.0, "gang_only": 0.0}
        w, one, fast = self._weights(end_s), np.asarray(self.single), np.asarray(self.fast)
        return {
            "single": float(w[one & fast].sum()),
            "slow_only": float(w[one & ~fast].sum()),
            "gang_only": float(w[~one].sum()),
        }


def _fast_types(state: Any, jobs: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Which GPU types run each of ``jobs`` at ``min_gpus`` at least at :data:`SLOW_FRACTION`
    of the best isolated throughput one node of the cluster could give it, shape (len(jobs), T)
    (the GPU-type axis of ``allowed_types``)."""
    wl = state.workload
    tput = single_node_tput(
        state.throughput, state.cluster, wl.model[jobs], wl.min_gpus[jobs], wl.allowed_types[jobs]
    )  # 0 on types with no node that hosts the job alone (no single-node fit there either)
    return np.asarray(tput >= SLOW_FRACTION * tput.max(axis=1, keepdims=True), dtype=bool)


def checkpoint_digest(node: Mapping[str, Any]) -> str | None:
    """SHA-1 of the checkpoint a MAIFS scheduler node reads (its ``checkpoint``, or the shipped
    default when null); None for every other scheduler or a missing file (its run fails)."""
    if not str(node.get("_target_", "")).endswith("MAIFSPolicy"):
        return None
    from hetsched.resources import checkpoint

    path = Path(str(node.get("checkpoint") or checkpoint("maifs_default.pt")))
    try:
        st = path.stat()
    except OSError:
        return None
    return _file_sha1(str(path.resolve()), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=64)
def _file_sha1(path: str, mtime_ns: int, size: int) -> str:
    """A file's SHA-1 (cached per path, modification time and size)."""
    return hashlib.sha1(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class Cell:
    """One benchmark cell.

    Attributes:
        scenario: Scenario name.
        scheduler: Scheduler label (a ``conf/scheduler`` preset, or ``maifs[<checkpoint>]``).
        node: The scheduler's config (a plain mapping with ``_target_``).
        mode: Information track mode.
        sigma: The ``noisy`` track's sigma.
        seed: Seed.
        sim: Engine settings (:class:`hetsched.sim.engine.SimConfig` fields).
    """

    scenario: str
    scheduler: str
    node: Mapping[str, Any]
    mode: str
    sigma: float
    seed: int
    sim: Mapping[str, Any] = field(default_factory=dict)

    @property
    def info(self) -> RuntimeInfo:
        """The cell's information track."""
        return RuntimeInfo(self.mode, self.sigma)

    @property
    def config_hash(self) -> str:
        """Hash of everything that defines the cell's result except the seed (a learned
        scheduler's checkpoint by its contents, so a retrained file is a new cell, and the
        observations it saw by :data:`hetsched.envs.layout.OBS_VERSION`; the metric definitions
        by :data:`hetsched.sim.metrics.METRICS_VERSION`)."""
        sc = get_scenario(self.scenario)
        key: dict[str, Any] = {
            "scheduler": self.node,
            "track": self.info.track,
            "scenario": asdict(sc),
            "sim": self.sim,
            "metrics": METRICS_VERSION,
        }
        digest = checkpoint_digest(self.node)
        if digest is not None:  # only learned schedulers: other cells keep their hashes
            key["checkpoint_sha1"] = digest
            key["observations"] = OBS_VERSION
        blob = json.dumps(
            key,
            sort_keys=True,
            default=str,
        )
        return hashlib.sha1(blob.encode()).hexdigest()[:10]

    def path(self, out_dir: Path) -> Path:
        """The cell's result file."""
        label = self.scheduler.replace("/", "_").replace("[", "(").replace("]", ")")
        name = f"{label}~{self.info.track}~s{self.seed}~{self.config_hash}.json"
        return Path(out_dir) / "cells" / self.scenario / name


def make_cells(
    scenarios: Sequence[Scenario],
    schedulers: Mapping[str, Mapping[str, Any]],
    tracks: Sequence[RuntimeInfo],
    seeds: Sequence[int],
    sim: Mapping[str, Any] | None = None,
) -> list[Cell]:
    """Every cell, scenario-major, then seed, scheduler and track."""
    return [
        Cell(sc.name, name, dict(node), tr.mode, tr.sigma, int(seed), dict(sim or {}))
        for sc in scenarios
        for seed in seeds
        for name, node in schedulers.items()
        for tr in tracks
    ]


def _sim_config(sim: Mapping[str, Any]) -> Any:
    """The engine settings of ``cfg.sim`` (a plain mapping; empty: the defaults)."""
    from omegaconf import OmegaConf

    from hetsched.config import SimSettings, sim_config_from

    merged = OmegaConf.merge(OmegaConf.structured(SimSettings), dict(sim))
    return sim_config_from(merged)


def play_cell(
    cell: Cell, wrap: Callable[[Any], Any] | None = None
) -> tuple[Any, FitProbe, float, float]:
    """Simulate one cell: its workload and policy generator from the cell's seed, the policy
    behind its information track and a :class:`FitProbe`.

    Args:
        cell: The cell.
        wrap: Applied to the scheduler (behind its track) inside the probe, e.g. another probe
            (:class:`hetsched.benchmark.moves.MoveProbe`); it is ``probe.policy``.

    Returns:
        ``(outcome of hetsched.evaluation.run_one, the probe, wall s, process CPU s)``.
    """
    from hydra.utils import instantiate

    from hetsched.envs.presets import resolve_cluster, resolve_throughput

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover - torch is a dependency of the agents only
        pass
    sc = get_scenario(cell.scenario)
    tm = resolve_throughput(None)
    cl = resolve_cluster(sc.cluster)
    root = np.random.default_rng(cell.seed)
    wl_rng, pol_rng = root.spawn(2)  # the workload's child is the same as evaluate()'s
    wl = sc.factory()(throughput=tm, cluster=cl, rng=wl_rng)
    inner = with_info(instantiate(dict(cell.node)), cell.info, cell.seed)
    policy = FitProbe(inner if wrap is None else wrap(inner))
    t0, c0 = time.perf_counter(), time.process_time()
    out = run_one(
        policy,
        name=cell.scheduler,
        cluster=cl,
        workload=wl,
        throughput=tm,
        sim_config=_sim_config(cell.sim),
        seed=cell.seed,
        rng=pol_rng,
    )
    return out, policy, time.perf_counter() - t0, time.process_time() - c0


def run_cell(cell: Cell, out_dir: Path | None = None) -> dict[str, Any]:
    """Run one cell (:func:`play_cell`); write its result file if ``out_dir`` is given.

    Returns:
        The cell's row: its keys (scenario, split, family, cluster, load, scheduler, track,
        seed, config hash), :data:`CELL_METRICS`, ``wall_s`` and ``cpu_s`` (wall-clock and
        process CPU seconds the run took).
    """
    out, policy, wall, cpu = play_cell(cell)
    sc = get_scenario(cell.scenario)
    end = float(out.result.end_time)
    metrics = {**out.row, **out.extra, "idle_fit_gpu_h": policy.idle_fit_gpu_h(end)}
    row: dict[str, Any] = {
        "scenario": sc.name,
        "split": sc.split,
        "family": sc.family,
        "cluster": sc.cluster,
        "load": sc.load,
        "scheduler": cell.scheduler,
        "track": cell.info.track,
        "seed": cell.seed,
        "config_hash": cell.config_hash,
        **{k: float(metrics.get(k, float("nan"))) for k in CELL_METRICS},
        "wall_s": wall,
        "cpu_s": cpu,
    }
    if out_dir is not None:
        atomic_write_text(cell.path(out_dir), json.dumps(row, sort_keys=True) + "\n")
    return row


def _run_safe(cell: Cell, out_dir: Path) -> dict[str, Any]:
    """:func:`run_cell`, or an ``error`` row naming the cell and the error (not written, so a
    rerun tries the cell again)."""
    try:
        return run_cell(cell, out_dir)
    except Exception as err:  # noqa: BLE001 - reported in the leaderboard, never dropped
        return {
            "scenario": cell.scenario,
            "scheduler": cell.scheduler,
            "track": cell.info.track,
            "seed": cell.seed,
            "error": f"{type(err).__name__}: {err}".splitlines()[0][:300],
        }


def read_cell(path: Path) -> dict[str, Any] | None:
    """A finished cell's row, or ``None`` if the file is missing or unreadable."""
    try:
        row = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return row if isinstance(row, dict) and "avg_jct_h" in row else None


def run_cells(
    cells: Sequence[Cell],
    out_dir: Path,
    *,
    n_jobs: int = 1,
    resume: bool = True,
    progress: bool = True,
) -> tuple[list[dict[str, Any]], int]:
    """Run the cells not finished yet (in parallel) and return every cell's row.

    Args:
        cells: The cells.
        out_dir: The benchmark's output directory (cell files under ``cells/``).
        n_jobs: Worker processes (joblib; 1 runs in this process).
        resume: Skip cells whose result file exists.
        progress: Print one line per finished cell.

    Returns:
        (rows in the order of ``cells``, number of cells run now). A cell that raised gives a
        row with an ``error`` field instead of metrics.
    """
    from joblib import Parallel, delayed

    done = [read_cell(c.path(out_dir)) if resume else None for c in cells]
    idx = [i for i, r in enumerate(done) if r is None]
    todo = [cells[i] for i in idx]
    if progress:
        print(f"benchmark: {len(cells)} cells, {len(cells) - len(todo)} done, {len(todo)} to run")
    if todo:
        if n_jobs == 1:
            results = (_run_safe(c, out_dir) for c in todo)
        else:
            results = Parallel(n_jobs=n_jobs, return_as="generator")(
                delayed(_run_safe)(c, out_dir) for c in todo
            )
        for i, (k, c, row) in enumerate(zip(idx, todo, results, strict=True), 1):
            done[k] = row
            if progress and "error" in row:
                print(f"[{i}/{len(todo)}] {c.scenario} {c.scheduler} {c.info.track} "
                      f"seed={c.seed}: FAILED {row['error']}", flush=True)  # fmt: skip
            elif progress:
                print(
                    f"[{i}/{len(todo)}] {c.scenario} {c.scheduler} {c.info.track} seed={c.seed}: "
                    f"avg JCT {row['avg_jct_h']:.3f} h ({row['wall_s']:.1f} s, CPU {row['cpu_s']:.1f} s)",
                    flush=True,
                )
    return [r for r in done if r is not None], len(todo)


def quick_selection(cfg: Any) -> bool:
    """Whether ``cfg`` runs the quick selection itself (``split=quick``, no ``scenarios`` list):
    only then do the ``cheap`` settings apply."""
    return str(cfg.split) == "quick" and not cfg.scenarios


def scheduler_nodes(cfg: Any) -> dict[str, dict[str, Any]]:
    """Scheduler label -> plain config mapping: ``cfg.scheduler``'s presets, the ``cheap``
    overrides for the quick selection (:func:`quick_selection`), and one ``maifs[<stem>]`` per
    checkpoint."""
    from omegaconf import OmegaConf

    nodes: dict[str, dict[str, Any]] = {}
    for name, node in cfg.scheduler.items():
        d = OmegaConf.to_container(node, resolve=True)
        assert isinstance(d, dict)
        if quick_selection(cfg) and name in (cfg.cheap or {}):
            d.update(dict(cfg.cheap[name]))
        nodes[str(name)] = {str(k): v for k, v in d.items()}
    for path in cfg.checkpoints or ():
        p = Path(str(path))
        if not p.is_file():
            raise ConfigError(f"checkpoints: {str(path)!r} is not a file (give a .pt path)")
        nodes[f"maifs[{p.stem}]"] = preset_node("maifs", str(p))
    return nodes


def preset_node(name: str, checkpoint: str | None = None) -> dict[str, Any]:
    """The plain config of the scheduler preset ``name`` for a :class:`Cell`, unresolved. A
    preset with a ``checkpoint`` field (its interpolation needs the app's config) gets
    ``checkpoint`` there (None: the shipped network).

    Raises:
        ValueError: If there is no such preset; the message lists those there are.
    """
    from omegaconf import OmegaConf

    from hetsched.envs.presets import scheduler_node

    raw = OmegaConf.to_container(scheduler_node(name), resolve=False)
    assert isinstance(raw, dict)
    node = {str(k): v for k, v in raw.items()}
    if "checkpoint" in node:
        node["checkpoint"] = checkpoint
    return node


def benchmark_cells(cfg: Any) -> list[Cell]:
    """The cells of a benchmark config (see :class:`hetsched.benchmark.config.BenchmarkConfig`).

    Schedulers that read no remaining work (:func:`~hetsched.benchmark.info.uses_remaining`)
    run the ``exact`` track only: their results are the same on every track.

    Raises:
        ValueError: For an unknown split, scenario or track, or a negative sigma.
    """
    from omegaconf import OmegaConf

    from hetsched.benchmark.info import uses_remaining
    from hetsched.benchmark.scenarios import scenarios_in
    from hetsched.evaluation import seeds_from

    if cfg.scenarios:
        scenarios = [get_scenario(str(n)) for n in cfg.scenarios]
    else:
        scenarios = scenarios_in(str(cfg.split))
    tracks = [RuntimeInfo(str(m), float(cfg.runtime_sigma)) for m in cfg.runtime_info]
    if not tracks:
        raise ConfigError("runtime_info is empty; give e.g. runtime_info=[exact,noisy]")
    seeds = seeds_from(
        OmegaConf.to_container(cfg.seed) if not isinstance(cfg.seed, int) else cfg.seed
    )
    sim_node = OmegaConf.to_container(cfg.sim, resolve=True)
    assert isinstance(sim_node, dict)
    sim = {str(k): v for k, v in sim_node.items()}
    nodes = scheduler_nodes(cfg)
    cells = []
    for cell in make_cells(scenarios, nodes, tracks, seeds, sim):
        if cell.mode == "exact" or uses_remaining(cell.scheduler):
            cells.append(cell)
    exact_missing = [n for n in nodes if not uses_remaining(n)]
    if exact_missing and all(t.mode != "exact" for t in tracks):
        cells += [
            Cell(c.scenario, c.scheduler, c.node, "exact", c.sigma, c.seed, c.sim)
            for c in make_cells(
                scenarios, {n: nodes[n] for n in exact_missing}, tracks[:1], seeds, sim
            )
        ]
    return cells


def replay_arguments(description: str) -> argparse.ArgumentParser:
    """The command line shared by the scripts that replay benchmark cells: ``--scenario`` or
    ``--split`` (one of them), ``--seed`` (one or more) and ``--checkpoint`` (MAIFS); callers add
    their own arguments and resolve the names with :func:`hetsched.benchmark.scenarios.
    scenario_names`."""
    ap = argparse.ArgumentParser(description=description)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--scenario", help="benchmark scenario name")
    where.add_argument("--split", help="every scenario of a split")
    ap.add_argument("--seed", type=int, nargs="+", default=[0])
    ap.add_argument("--checkpoint", default=None, help="MAIFS checkpoint (default: shipped)")
    return ap


def replay_cells(args: argparse.Namespace) -> list[Cell]:
    """The exact-track cells that :func:`replay_arguments`' ``args`` name, for every scheduler
    preset of ``args.scheduler`` (a list): scenario by scenario, then seed, then scheduler.

    Raises:
        hetsched.sim.errors.ConfigError: For an unknown scenario or split.
        ValueError: For an unknown scheduler preset (:func:`preset_node`).
    """
    from hetsched.benchmark.scenarios import scenario_names

    names = scenario_names(args.split, args.scenario)
    nodes = {s: preset_node(s, args.checkpoint) for s in args.scheduler}
    return [
        Cell(n, s, nodes[s], "exact", 0.0, seed)
        for n in names
        for seed in args.seed
        for s in args.scheduler
    ]
