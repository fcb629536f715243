"""How often each scheduler moves running jobs, and to what rate.

Replays benchmark cells exactly as ``hetsched-benchmark`` runs them (exact track) with
:class:`hetsched.benchmark.moves.MoveProbe` around the scheduler and prints one row per scenario
and scheduler, summed over the seeds: the moves (a job that runs on another set of nodes than
it last did) and how many went to at least 1.25x the job's isolated throughput (``faster``),
to about the same (``same``) or to at most 1/1.25 of it (``slower``)::

    python scripts/job_moves.py --split validation --seed 0 1 2 3 --scheduler maifs_teacher maifs
    python scripts/job_moves.py --scenario itp_c06_sia64_busy --seed 0 --checkpoint my.pt

Exit code 2 with one line for an unknown scenario or split or an unusable checkpoint.
"""

from __future__ import annotations

import sys

from tqdm import tqdm

from hetsched.benchmark.moves import MoveCounts, MoveProbe
from hetsched.benchmark.runner import Cell, play_cell, preset_node, replay_arguments
from hetsched.benchmark.scenarios import scenario_names
from hetsched.evaluation import markdown_table
from hetsched.sim.errors import HetschedError

HEADER = ("scenario", "scheduler", "runs", "moves", "faster", "same", "slower")


def main() -> None:
    """Command line."""
    ap = replay_arguments(__doc__.splitlines()[0])
    ap.add_argument("--scheduler", nargs="+", default=["sia", "maifs_teacher", "maifs"],
                    help="conf/scheduler presets")  # fmt: skip
    args = ap.parse_args()
    names = scenario_names(args.split, args.scenario)
    nodes = {s: preset_node(s, args.checkpoint) for s in args.scheduler}
    cells = [(n, seed, s) for n in names for s in args.scheduler for seed in args.seed]
    sums: dict[tuple[str, str], tuple[int, MoveCounts]] = {}
    for name, seed, sched in tqdm(cells, desc="job_moves", unit="run", leave=False):
        _, probe, _, _ = play_cell(Cell(name, sched, nodes[sched], "exact", 0.0, seed), MoveProbe)
        c = probe.policy.counts
        runs, acc = sums.get((name, sched), (0, MoveCounts()))
        for k, v in c.as_dict().items():
            setattr(acc, k, getattr(acc, k) + v)
        sums[(name, sched)] = (runs + 1, acc)
    rows = [
        {"scenario": n, "scheduler": s, "runs": runs, **acc.as_dict()}
        for (n, s), (runs, acc) in sums.items()
    ]
    total: dict[str, tuple[int, MoveCounts]] = {}
    for (_, s), (runs, acc) in sums.items():
        r0, t = total.get(s, (0, MoveCounts()))
        for k, v in acc.as_dict().items():
            setattr(t, k, getattr(t, k) + v)
        total[s] = (r0 + runs, t)
    rows += [
        {"scenario": "all", "scheduler": s, "runs": r, **t.as_dict()} for s, (r, t) in total.items()
    ]
    print(markdown_table(rows, HEADER))


if __name__ == "__main__":
    try:
        main()
    except HetschedError as e:  # bad scenario, split or checkpoint: one line, exit code 2
        print(f"job_moves: {e}", file=sys.stderr)
        sys.exit(2)
