"""Where a scheduler's idle GPU-hours come from: single-node fits, slow fits or gangs only.

Replays benchmark cells exactly as ``hetsched-benchmark`` runs them (the exact track, or
``--runtime-info noisy`` / ``none``) and splits each
cell's ``idle_fit_gpu_h`` by what the waiting jobs need (:meth:`FitProbe.idle_breakdown`; the
benchmark counts all three): ``single`` when some waiting job fits on one node's free GPUs of an
allowed type at least half as fast for it as the best single node of the cluster, ``slow_only``
when waiting jobs fit on one node only on slower types (waiting for a faster GPU), ``gang_only``
when they fit only across several nodes of a type. For the MAIFS network and its teacher a
second line splits the same GPU-hours by how the decision before each idle interval ended
(:meth:`FitProbe.idle_by_last_step`): every agent passed (``pass``), claims were made but none
granted (``failed``: e.g. a gang claim that too few nodes made), no legal action (``none``), a
placement or eviction (``moved``). A third line splits the single-node fits (fast or slow) by
what kept the jobs off the idle GPUs in the env's round (:func:`hetsched.envs.idle.idle_cause`):
outside the window, no GPU level that fits, no cores or memory, or claimable.

    python scripts/idle_breakdown.py --scenario itp_c06_pai_busy --seed 0 1 --scheduler maifs
    python scripts/idle_breakdown.py --scenario itp_c06_pai_busy --seed 1 --checkpoint my.pt
    python scripts/idle_breakdown.py --split validation --seed 0 1 --scheduler maifs_teacher
    python scripts/idle_breakdown.py --split validation --seed 0 1 --runtime-info noisy
"""

from __future__ import annotations

import sys

from hetsched.agents.policy import LAST_STEPS
from hetsched.benchmark.info import DEFAULT_SIGMA, TRACKS
from hetsched.benchmark.runner import Cell, play_cell, preset_node, replay_arguments
from hetsched.benchmark.scenarios import scenario_names
from hetsched.envs.idle import IDLE_CAUSES
from hetsched.sim.errors import HetschedError


def main() -> None:
    """Command line."""

    ap = replay_arguments(__doc__.splitlines()[0])
    ap.add_argument("--scheduler", default="maifs", help="a conf/scheduler preset")
    ap.add_argument(
        "--runtime-info",
        default="exact",
        choices=TRACKS,
        help=f"information track (noisy: sigma {DEFAULT_SIGMA:g}, as the benchmark's default)",
    )
    args = ap.parse_args()
    sigma = DEFAULT_SIGMA if args.runtime_info == "noisy" else 0.0
    names = scenario_names(args.split, args.scenario)
    node = preset_node(args.scheduler, args.checkpoint)
    total = dict.fromkeys(("all", "single", "slow_only", "gang_only"), 0.0)
    by_last: dict[str, float] = {}
    by_cause: dict[str, float] = {}
    for name in names:
        for seed in args.seed:
            out, probe, _, _ = play_cell(
                Cell(name, args.scheduler, node, args.runtime_info, sigma, seed)
            )
            end = float(out.result.end_time)
            parts = {"all": probe.idle_fit_gpu_h(end), **probe.idle_breakdown(end)}
            total = {k: total[k] + parts[k] for k in total}
            print(f"{name} seed {seed} {args.scheduler}: avg JCT {out.row['avg_jct_h']:.3f} h; "
                  + _parts(parts))  # fmt: skip
            last = probe.idle_by_last_step(end)
            for k, v in last.items():
                by_last[k] = by_last.get(k, 0.0) + v
            if set(last) - {"n/a"}:
                print("  by the decision's final step: " + _last(last))
            cause = probe.idle_by_cause(end)
            for k, v in cause.items():
                by_cause[k] = by_cause.get(k, 0.0) + v
            if set(cause) - {"n/a"}:
                print("  single-node fits by what kept the job off: " + _cause(cause))
    if len(names) * len(args.seed) > 1:
        print(f"total of {len(names) * len(args.seed)} runs: " + _parts(total))
        if set(by_last) - {"n/a"}:
            print("  by the decision's final step: " + _last(by_last))
        if set(by_cause) - {"n/a"}:
            print("  single-node fits by what kept the job off: " + _cause(by_cause))


def _cause(p: dict[str, float]) -> str:
    """One line of the split by cause (GPU-hours)."""
    return ", ".join(f"{k} {p.get(k, 0.0):.1f}" for k in IDLE_CAUSES)


def _last(p: dict[str, float]) -> str:
    """One line of the split by the decision's final step (GPU-hours)."""
    return ", ".join(f"{k} {p.get(k, 0.0):.1f}" for k in LAST_STEPS)


def _parts(p: dict[str, float]) -> str:
    """One line of an idle split (GPU-hours)."""
    return (
        f"idle GPU-h while a fitting job waits {p['all']:.1f} = single-node fits "
        f"{p['single']:.1f} + on slow types only {p['slow_only']:.1f} + gang-only fits "
        f"{p['gang_only']:.1f}"
    )


if __name__ == "__main__":
    try:
        main()
    except HetschedError as e:  # bad input: one line, exit code 2
        print(f"idle_breakdown: {e}", file=sys.stderr)
        sys.exit(2)
