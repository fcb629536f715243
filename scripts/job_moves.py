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
from hetsched.benchmark.runner import play_cell, replay_arguments, replay_cells
from hetsched.evaluation import markdown_table
from hetsched.sim.errors import HetschedError

HEADER = ("scenario", "scheduler", "runs", "moves", "faster", "same", "slower")


def main() -> None:
    """Command line."""
    ap = replay_arguments(__doc__.splitlines()[0])
    ap.add_argument("--scheduler", nargs="+", default=["sia", "maifs_teacher", "maifs"],
                    help="conf/scheduler presets")  # fmt: skip
    args = ap.parse_args()
    sums: dict[tuple[str, str], MoveCounts] = {}  # per (scenario, scheduler) and ("all", ...)
    runs: dict[tuple[str, str], int] = {}
    for cell in tqdm(replay_cells(args), desc="job_moves", unit="run", leave=False):
        _, probe, _, _ = play_cell(cell, MoveProbe)
        for key in ((cell.scenario, cell.scheduler), ("all", cell.scheduler)):
            sums[key] = sums.get(key, MoveCounts()) + probe.policy.counts
            runs[key] = runs.get(key, 0) + 1
    rows = [{"scenario": n, "scheduler": s, "runs": runs[n, s], **c.as_dict()}
            for (n, s), c in sorted(sums.items(), key=lambda kv: kv[0][0] == "all")]  # fmt: skip
    print(markdown_table(rows, HEADER))


if __name__ == "__main__":
    try:
        main()
    except HetschedError as e:  # bad scenario, split or checkpoint: one line, exit code 2
        print(f"job_moves: {e}", file=sys.stderr)
        sys.exit(2)
