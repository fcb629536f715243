"""Why a rule-based MAIFS policy starts jobs off their fastest GPU type: a decision probe.

Runs one scheduler preset built on :class:`~hetsched.agents.policy.CoreActorPolicy`
(``maifs``, ``maifs_teacher``) through the same runner as ``scripts/evaluate.py`` and looks at
every *first start* of a job (of the ``--models`` given, or of every model). Each start is put in
one class (:data:`REASONS`) by what ran on the job's fastest allowed GPU type at that moment:

* ``fastest``: it started on a node of its fastest allowed GPU type present.
* ``room``: elsewhere, although a node of its fastest type still had its requested GPUs free
  after the round (the actor or a rule chose a slower type).
* ``victim``: elsewhere, while a job that had run on the fastest type since an earlier round
  was a victim the preemption rules accept by its kind: on one node (with ``preempt_gangs``,
  or a gang on the fewest nodes that hold it), not placed by the makespan guard, preempted
  fewer times than the rules allow it (``preempt_max``, plus one per ``preempt_every_s``
  seconds it has held GPUs), and with more than ``preempt_ratio`` times the
  starting job's run time there left (isolated rates). Room and memory are not checked, so
  this is an upper bound on what preemption could have done.
* ``protected``: elsewhere; some job on the fastest type had that much time left, but each such
  job was protected: placed by the makespan guard, preempted as often as the rules allow it
  already, or held on several nodes (more than the fewest that hold it, with
  ``preempt_gangs``).
* ``short``: elsewhere; no job on the fastest type had that much time left (or preemption is
  off), so preempting there would not pay by the rules' own ratio.

The counts are summed over seeds. It is a diagnosis tool: it chooses nothing, and the runs are
exactly those of ``scripts/evaluate.py`` with the same preset, workload and seeds.

Examples::

    python scripts/probe_starts.py --workload-start 30000 --quiet --cluster sia_64 \\
        --seeds 100 101 102 --models bert
    python scripts/probe_starts.py --scheduler maifs_teacher --workload-start 35000 --quiet
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hetsched.agents.policy import CoreActorPolicy  # noqa: E402
from hetsched.envs.presets import (  # noqa: E402
    resolve_cluster,
    resolve_workload,
    scheduler_factory,
)
from hetsched.evaluation import evaluate, markdown_table  # noqa: E402
from hetsched.sim.allocation import Allocation  # noqa: E402
from hetsched.sim.engine import SimConfig, SimState  # noqa: E402
from hetsched.sim.throughput import default_throughput  # noqa: E402

#: The classes of a first start, in table order (see the module docstring).
REASONS: tuple[str, ...] = ("fastest", "room", "victim", "protected", "short")


def classify_start(policy: CoreActorPolicy, state: SimState, alloc: Allocation, job: int) -> str:
    """The class (one of :data:`REASONS`) of ``job``'s first start in the round that ``policy``
    decided from ``state`` with result ``alloc`` (``job`` must hold GPUs in ``alloc``).

    Raises:
        ValueError: If ``job`` holds no GPUs in ``alloc``.
    """
    core = policy.core
    if core is None or core.wl is None:
        raise RuntimeError("classify_start() before the policy's reset()")
    wl, tm, cl = core.wl, core.tm, core.cluster
    mine = alloc.job == job
    if not mine.any():
        raise ValueError(f"job {job} holds no GPUs in the round's allocation")
    G = int(wl.req_gpus[job])
    present = np.unique(cl.node_type)
    rate_t = np.where(
        wl.allowed_types[job][present],
        tm.isolated(wl.model[job], present, G, False),
        0.0,
    )  # (T,) work units / s on each GPU type present
    fastest = int(present[int(np.argmax(rate_t))])
    if (cl.node_type[alloc.node[mine]] == fastest).all():
        return "fastest"
    used = np.bincount(alloc.node, weights=alloc.gpus, minlength=cl.node_gpus.size)
    home = (cl.node_type == fastest) & state.node_up
    if ((cl.node_gpus - used)[home] >= G).any():
        return "room"
    ratio = policy.preempt_ratio
    if ratio is None:
        return "short"
    # Jobs that ran on the fastest type before this round and still do.
    kept = np.isin(alloc.job, state.current.job) & home[alloc.node]
    if not kept.any():
        return "short"
    run_s = state.remaining[job] / float(rate_t.max())  # the job's run time there (s)
    rem = policy._running_remaining(core, state, alloc)  # (E,) s
    shape_ok = policy._victim_shape(core, alloc)  # (E,) one node, or a gang the rules take
    long_enough = kept & (rem > ratio * run_s)
    if not long_enough.any():
        return "short"
    v = alloc.job[long_enough]
    free = (
        shape_ok[long_enough]
        & (policy._preempted[v] < policy._allowance(state, v))
        & ~policy._critical[v]
    )
    return "victim" if free.any() else "protected"


def spy_on(
    policy: CoreActorPolicy,
    counts: dict[str, Counter[str]],
    models: Sequence[str] | None = None,
) -> CoreActorPolicy:
    """Make ``policy`` count its jobs' first starts by class (:func:`classify_start`) into
    ``counts`` (model name -> counter over :data:`REASONS`) as it runs; return it.

    Args:
        policy: A fresh rule-based policy, before the runner resets it.
        counts: Counters to add to.
        models: Model names to count (None: every model).
    """
    decide = policy.decide
    started: set[int] = set()

    def spy(state: SimState) -> Allocation:
        alloc = decide(state)
        core = policy.core
        assert core is not None and core.wl is not None  # decide() needs them
        for j in np.unique(alloc.job).tolist():
            if j in started:
                continue
            started.add(j)
            name = core.tm.models[int(core.wl.model[j])]
            if models is None or name in models:
                counts.setdefault(name, Counter())[classify_start(policy, state, alloc, j)] += 1
        return alloc

    policy.decide = spy  # type: ignore[method-assign]
    return policy


def probe(
    scheduler: str,
    cluster: str,
    workload: str,
    workload_kwargs: dict[str, object],
    seeds: Sequence[int],
    models: Sequence[str] | None = None,
) -> dict[str, Counter[str]]:
    """Run ``scheduler`` on each seed (:func:`hetsched.evaluation.evaluate`, so the same runs as
    ``scripts/evaluate.py``) and count its jobs' first starts by class, per model.

    Args:
        scheduler: A scheduler preset whose policy is a :class:`CoreActorPolicy`.
        cluster: Cluster preset.
        workload: Workload preset.
        workload_kwargs: Overrides of the workload preset (e.g. ``{"start": 30000}``).
        seeds: Seeds.
        models: Model names to count (None: every model).

    Returns:
        Model name -> counter over :data:`REASONS`, summed over seeds.

    Raises:
        ValueError: If the preset's policy is not rule-based, or a model name is unknown.
    """
    tm = default_throughput()
    unknown = sorted(set(models or ()) - set(tm.models))
    if unknown:
        raise ValueError(
            f"unknown model(s) {unknown}; the throughput table has {sorted(tm.models)}"
        )
    make = scheduler_factory(scheduler)
    counts: dict[str, Counter[str]] = {}

    def spied() -> CoreActorPolicy:
        pol = make()
        if not isinstance(pol, CoreActorPolicy):
            raise ValueError(
                f"scheduler {scheduler!r} builds {type(pol).__name__}; the probe needs a "
                "rule-based MAIFS policy (maifs, maifs_teacher)"
            )
        return spy_on(pol, counts, models)

    factory = resolve_workload(workload, workload_kwargs)
    assert callable(factory)  # a preset name always gives a factory
    evaluate(
        {scheduler: spied},
        cluster=resolve_cluster(cluster),
        workload_factory=factory,
        throughput=tm,
        seeds=list(seeds),
        sim_config=SimConfig(),
    )
    return counts


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--scheduler", default="maifs")
    ap.add_argument("--cluster", default="sia_64")
    ap.add_argument("--workload", default="philly")
    ap.add_argument("--workload-start", type=int, default=None, help="the preset's start")
    ap.add_argument(
        "--quiet",
        action="store_true",
        help="consecutive jobs from the start (busiest=false), as the loaded windows",
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--models", nargs="+", default=None)
    args = ap.parse_args(argv)
    kw: dict[str, object] = {}
    if args.workload_start is not None:
        kw["start"] = args.workload_start
    if args.quiet:
        kw["busiest"] = False
    try:
        counts = probe(args.scheduler, args.cluster, args.workload, kw, args.seeds, args.models)
    except ValueError as err:
        ap.error(str(err))
    rows = [
        {"model": m, **{r: c[r] for r in REASONS}, "starts": sum(c.values())}
        for m, c in sorted(counts.items())
    ]
    print(markdown_table(rows, ["model", *REASONS, "starts"]))


if __name__ == "__main__":
    main()
