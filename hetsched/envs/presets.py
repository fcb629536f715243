"""Resolve the env's ``cluster`` / ``workload`` / ``throughput`` arguments.

* ``cluster``: a :class:`~hetsched.sim.cluster.Cluster`, a preset name (``hetsched/conf/cluster/<name>.yaml``,
  e.g. ``"sia_64"``), or a spec mapping ``{"name": ..., "nodes": [...]}`` for
  :meth:`Cluster.from_spec`.
* ``workload``: a :class:`~hetsched.sim.workload.Workload` (replayed as is every episode), a
  preset name (``hetsched/conf/workload/<name>.yaml``, e.g. ``"philly"``) whose fields can be overridden
  with ``workload_kwargs`` (``{"num_jobs": 40}`` becomes the Hydra override
  ``workload.num_jobs=40``), or any factory called as ``factory(throughput=, cluster=, rng=)``.
* ``throughput``: a :class:`~hetsched.sim.throughput.ThroughputModel`, a path to a table
  ``.npz``, or ``None`` for the shipped table.

Presets are composed with Hydra from the packaged ``hetsched/conf/`` directory (the same way
``scripts/evaluate.py`` does) and cached per process.

The envs take a workload preset through :func:`env_workload`: unless the caller pins the window
(``start``, ``busiest`` or ``index`` in ``workload_kwargs``), each reset draws its own window of
the trace from the episode's generator (:mod:`hetsched.benchmark.windows`), so different seeds
give different workloads. The registered envs also accept ``scenario=<name>`` (a benchmark
scenario: its cluster and workload) and ``runtime_info`` / ``runtime_sigma`` (the information
track of the remaining-work features; :mod:`hetsched.benchmark.info`); see :func:`make_env`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from hetsched.resources import CONF_DIR
from hetsched.sim.cluster import Cluster
from hetsched.sim.faults import FailureSpec
from hetsched.sim.throughput import ThroughputModel, default_throughput
from hetsched.sim.workload import Workload

#: A workload factory: ``factory(throughput=, cluster=, rng=) -> Workload``.
WorkloadFactory = Callable[..., Workload]


_CACHE: dict[tuple[str, ...], Any] = {}


def _evaluate_config(group: str, name: str, overrides: tuple[str, ...]) -> Any:
    """``hetsched/conf/evaluate.yaml`` composed with ``<group>=<name>`` and ``overrides`` (not cached).

    Raises:
        ValueError: If there is no such preset (naming those there are), or it does not
            compose with the overrides.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    import hetsched.config  # noqa: F401  (registers the schemas)

    preset = CONF_DIR / group / f"{name}.yaml"
    if not preset.is_file():
        avail = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
        what = {"cluster": "Cluster", "workload": "Workload or factory"}.get(group)
        raise ValueError(
            f"unknown {group} preset {name!r} (no {preset}); available: {avail or 'none'}"
            + (f"; or pass a {what} object" if what else "")
        )
    ovr = [f"{group}={name}", *overrides]
    try:
        if GlobalHydra.instance().is_initialized():
            return compose("evaluate", overrides=ovr)
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose("evaluate", overrides=ovr)
    except HydraException as err:
        raise ValueError(
            f"cannot compose {group} preset {name!r} with {list(overrides)}: {err}"
        ) from err


def _compose(group: str, name: str, overrides: tuple[str, ...]) -> Any:
    """Instantiate ``conf/<group>/<name>.yaml`` (with overrides) through Hydra, cached."""
    key = (group, name, *overrides)
    if key in _CACHE:
        return _CACHE[key]
    from hydra.utils import instantiate
    from omegaconf.errors import MissingMandatoryValue

    try:
        obj = instantiate(_evaluate_config(group, name, overrides)[group])
    except MissingMandatoryValue as err:
        field = str(err.full_key)
        raise ValueError(
            f"{group} preset {name!r} needs a value for {field} (it is '???' in "
            f"conf/{group}/{name}.yaml); give it, e.g. the Hydra override {field}=..."
        ) from None
    _CACHE[key] = obj
    return obj


def scheduler_node(name: str) -> Any:
    """The config node of the scheduler preset ``hetsched/conf/scheduler/<name>.yaml``, composed as
    ``scripts/evaluate.py`` composes it (``hydra.utils.instantiate`` builds the policy).

    Raises:
        ValueError: If there is no such preset; the message lists those there are.
    """
    return _evaluate_config("scheduler", name, ())["scheduler"][name]


def scheduler_factory(name: str) -> Callable[[], Any]:
    """A factory of fresh policies of the scheduler preset ``name`` (e.g. ``"fifo"``,
    ``"sia"``): each call instantiates the preset anew, since policies keep per-run state.

    Raises:
        ValueError: If there is no such preset; the message lists those there are.
    """
    from hydra.utils import instantiate

    node = scheduler_node(name)
    return lambda: instantiate(node)


def resolve_throughput(throughput: ThroughputModel | str | Path | None) -> ThroughputModel:
    """The throughput model named by the env argument."""
    if throughput is None:
        return default_throughput()
    if isinstance(throughput, ThroughputModel):
        return throughput
    if isinstance(throughput, str | Path):
        return ThroughputModel.load(throughput)
    raise ValueError(f"throughput={throughput!r} must be a ThroughputModel, a .npz path or None")


def resolve_cluster(cluster: Cluster | str | Mapping[str, Any]) -> Cluster:
    """The cluster named by the env argument."""
    if isinstance(cluster, Cluster):
        return cluster
    if isinstance(cluster, str):
        obj = _compose("cluster", cluster, ())
        if not isinstance(obj, Cluster):
            raise ValueError(
                f"cluster preset {cluster!r} did not build a Cluster (got {type(obj)})"
            )
        return obj
    if isinstance(cluster, Mapping):
        if "nodes" not in cluster:
            raise ValueError("a cluster spec mapping needs 'nodes' (and optionally 'name')")
        return Cluster.from_spec(str(cluster.get("name", "custom")), cluster["nodes"])
    raise ValueError(
        f"cluster={cluster!r} must be a Cluster, a preset name such as 'sia_64', or a spec mapping"
    )


def resolve_workload(
    workload: Workload | str | WorkloadFactory,
    workload_kwargs: Mapping[str, Any] | None = None,
) -> Workload | WorkloadFactory:
    """A fixed workload, or a factory called once per episode with the episode's generator."""
    kw = dict(workload_kwargs or {})
    if isinstance(workload, Workload):
        if kw:
            raise ValueError("workload_kwargs only apply to a workload preset name or a factory")
        return workload
    if isinstance(workload, str):
        overrides = tuple(f"workload.{k}={_hydra_value(v)}" for k, v in sorted(kw.items()))
        factory = _compose("workload", workload, overrides)
        if not callable(factory):
            raise ValueError(f"workload preset {workload!r} did not build a factory")
        return factory
    if callable(workload):
        return partial(workload, **kw) if kw else workload
    raise ValueError(
        f"workload={workload!r} must be a Workload, a preset name such as 'philly', or a factory"
    )


def env_workload(
    workload: Workload | str | WorkloadFactory,
    workload_kwargs: Mapping[str, Any] | None = None,
) -> Workload | WorkloadFactory:
    """:func:`resolve_workload` for the envs: a preset name not pinned to one window draws a
    seeded window per episode (:func:`hetsched.benchmark.windows.env_preset_factory`)."""
    out = resolve_workload(workload, workload_kwargs)
    if isinstance(workload, str):
        from hetsched.benchmark.windows import env_preset_factory

        return env_preset_factory(out, dict(workload_kwargs or {}))
    return out


def scenario_env_kwargs(scenario: str) -> dict[str, Any]:
    """The env arguments of a benchmark scenario: ``cluster`` and ``workload`` (a factory).

    Raises:
        ValueError: If there is no such scenario (the message lists them).
    """
    from hetsched.benchmark.scenarios import get_scenario

    sc = get_scenario(scenario)
    return {"cluster": sc.cluster, "workload": sc.factory()}


def make_env(
    cls: Callable[..., Any],
    *,
    scenario: str | None = None,
    runtime_info: str = "exact",
    runtime_sigma: float | None = None,
    **kwargs: Any,
) -> Any:
    """Build an env of class (or factory) ``cls``, optionally from a scenario and with an
    information track.

    Args:
        cls: The env class or factory (e.g. :class:`~hetsched.envs.ClusterCentralEnv`).
        scenario: A benchmark scenario name (``hetsched.benchmark.SCENARIOS``); sets
            ``cluster`` and ``workload``, which must then not be given.
        runtime_info: ``exact``, ``noisy`` or ``none``: what the remaining-work features show
            (see :mod:`hetsched.benchmark.info`).
        runtime_sigma: Sigma of the ``noisy`` track's log-normal error (default 0.5).
        **kwargs: The env's own arguments.

    Raises:
        ValueError: For an unknown scenario or track, a negative sigma, or ``scenario`` given
            together with ``cluster`` or ``workload``.
    """
    from hetsched.benchmark.info import DEFAULT_SIGMA, RuntimeInfo

    info = RuntimeInfo(
        str(runtime_info), DEFAULT_SIGMA if runtime_sigma is None else float(runtime_sigma)
    )
    if scenario is not None:
        both = sorted({"cluster", "workload"} & set(kwargs))
        if both:
            raise ValueError(
                f"scenario={scenario!r} sets the cluster and workload; drop {both} or the scenario"
            )
        kwargs.update(scenario_env_kwargs(scenario))
    env = cls(**kwargs)
    if info.mode != "exact":
        seed = kwargs.get("seed")
        env.unwrapped.core.features.set_runtime_info(info, 0 if seed is None else int(seed))
    return env


def central_env(**kwargs: Any) -> Any:
    """The entry point of ``hetsched/ClusterCentral-v0``: :func:`make_env` of
    :class:`~hetsched.envs.ClusterCentralEnv`."""
    from hetsched.envs.central_env import ClusterCentralEnv

    return make_env(ClusterCentralEnv, **kwargs)


def _hydra_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, list | tuple):
        return "[" + ",".join(_hydra_value(x) for x in v) + "]"
    return str(v)


def as_failure_spec(failures: FailureSpec | Mapping[str, Any] | None) -> FailureSpec | None:
    """The env's ``failures`` argument as a :class:`FailureSpec` (None: no failures)."""
    if failures is None or isinstance(failures, FailureSpec):
        return failures
    if isinstance(failures, Mapping):
        try:
            return FailureSpec(**dict(failures))
        except TypeError as err:
            raise ValueError(
                f"failures={dict(failures)!r}: {err}; fields are mtbf_h, repair_h, "
                "fixed_repair, trace"
            ) from None
    raise ValueError(
        f"failures={failures!r} must be a FailureSpec, a mapping of its fields or None"
    )


def make_workload(
    source: Workload | WorkloadFactory,
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
) -> Workload:
    """The episode's workload: ``source`` itself, or ``source(throughput=, cluster=, rng=)``."""
    if isinstance(source, Workload):
        return source
    wl = source(throughput=throughput, cluster=cluster, rng=rng)
    if not isinstance(wl, Workload):
        raise ValueError(f"workload factory {source!r} returned {type(wl)}, not a Workload")
    return wl
