"""Where a scheduler's idle GPU-hours come from: single-node fits or gangs only.

Replays benchmark cells exactly as ``hetsched-benchmark`` runs them (exact track) and splits each
cell's ``idle_fit_gpu_h`` by what the waiting jobs need: ``single`` when some waiting job fits on
one node's free GPUs of an allowed type, ``gang_only`` when waiting jobs fit only across several
nodes of a type (the benchmark counts both; :meth:`FitProbe.idle_breakdown`).

    python scripts/idle_breakdown.py --scenario itp_c06_pai_busy --seed 0 1 --scheduler maifs
    python scripts/idle_breakdown.py --scenario itp_c06_pai_busy --seed 1 --checkpoint my.pt
"""

from __future__ import annotations

import argparse

from hetsched.benchmark.runner import Cell, play_cell
from hetsched.benchmark.scenarios import get_scenario


def main() -> None:
    """Command line."""
    from omegaconf import OmegaConf

    from hetsched.envs.presets import scheduler_node

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", required=True, help="benchmark scenario name")
    ap.add_argument("--seed", type=int, nargs="+", default=[0])
    ap.add_argument("--scheduler", default="maifs", help="a conf/scheduler preset")
    ap.add_argument("--checkpoint", default=None, help="MAIFS checkpoint (default: shipped)")
    args = ap.parse_args()
    get_scenario(args.scenario)  # an unknown name fails before any simulation
    raw = OmegaConf.to_container(scheduler_node(args.scheduler), resolve=False)
    assert isinstance(raw, dict)
    node = {str(k): v for k, v in raw.items()}
    if "checkpoint" in node:  # the preset's interpolation needs the app's config: set it here
        node["checkpoint"] = args.checkpoint
    for seed in args.seed:
        cell = Cell(args.scenario, args.scheduler, node, "exact", 0.0, seed)
        out, probe, _, _ = play_cell(cell)
        end = float(out.result.end_time)
        parts = probe.idle_breakdown(end)
        print(
            f"{args.scenario} seed {seed} {args.scheduler}: avg JCT {out.row['avg_jct_h']:.3f} h; "
            f"idle GPU-h while a fitting job waits {probe.idle_fit_gpu_h(end):.1f} = single-node "
            f"fits {parts['single']:.1f} + gang-only fits {parts['gang_only']:.1f}"
        )


if __name__ == "__main__":
    main()
