"""Which job sets each scheduler's makespan, and why it finishes when it does.

Replays benchmark cells exactly as ``hetsched-benchmark`` runs them (exact track) and prints one
row per scenario, seed and scheduler: the makespan and, for the job that finished last
(:func:`hetsched.sim.metrics.makespan_job`), its GPUs requested, arrival, queueing delay, run
time from first start to finish against its best solo time, the GPU type of most of its
GPU-seconds, the GPUs it held on average and its restarts. A makespan set by a long job run on
a slow type or at fewer GPUs shows as ``run / best`` well above 1; one set by waiting shows in
``wait``::

    python scripts/makespan_job.py --scenario itp_c06_sia64_light --seed 0 1
    python scripts/makespan_job.py --split validation --scheduler sia gavel maifs --checkpoint my.pt
"""

from __future__ import annotations

import sys

from tqdm import tqdm

from hetsched.benchmark.runner import play_cell, replay_arguments, replay_cells
from hetsched.evaluation import markdown_table
from hetsched.sim.errors import HetschedError
from hetsched.sim.metrics import compute_metrics, makespan_job

HEADER = (
    "scenario", "seed", "scheduler", "makespan_h", "job_id", "job_gpus", "arrival_h", "wait_h",
    "run_h", "best_solo_h", "run_over_best", "gpu_type", "gpus_held", "restarts",
)  # fmt: skip


def main() -> None:
    """Command line."""
    ap = replay_arguments(__doc__.splitlines()[0])
    ap.add_argument("--scheduler", nargs="+", default=["sia", "gavel", "maifs"],
                    help="conf/scheduler presets")  # fmt: skip
    args = ap.parse_args()
    rows = []
    for cell in tqdm(replay_cells(args), desc="makespan_job", unit="run", leave=False):
        name, seed, sched = cell.scenario, cell.seed, cell.scheduler
        out, _, _, _ = play_cell(cell)
        res = out.result
        m = compute_metrics(res, scheduler=sched, workload="", cluster="", seed=seed)
        j = makespan_job(res)
        row = {"scenario": name, "seed": seed, "scheduler": sched, "makespan_h": m["makespan_h"]}
        if j:
            row.update(
                job_gpus=j["req_gpus"], run_over_best=j["run_h"] / j["best_solo_h"],
                **{k: j[k] for k in HEADER if k in j},
            )  # fmt: skip
        rows.append(row)
    print(markdown_table(rows, HEADER))


if __name__ == "__main__":
    try:
        main()
    except HetschedError as e:  # bad input: one line, exit code 2
        print(f"makespan_job: {e}", file=sys.stderr)
        sys.exit(2)
