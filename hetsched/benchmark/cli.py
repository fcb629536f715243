"""``hetsched-benchmark``: run the benchmark over a split and print its leaderboard (a Hydra app).

Examples::

    python scripts/benchmark.py split=quick                     # the main job (a few minutes)
    python scripts/benchmark.py split=test 'scheduler=[fifo,sia,srpt]'
    python scripts/benchmark.py split=validation 'runtime_info=[exact,noisy,none]'
    python scripts/benchmark.py 'checkpoints=[outputs/train/RUN/checkpoints/best.pt]' 'scheduler=[sia]'

Writes ``cells/`` (one file per scenario, scheduler, track and seed; finished cells are skipped
on a rerun), ``cells.csv``, ``leaderboard.csv``, ``aggregate.csv``, ``leaderboard.md`` and
``plots/`` under ``out_dir`` (``outputs/benchmark/<split>``), prints the leaderboard and the
run's wall time. Bad input (an unknown split, scenario or track, a negative sigma) stops with a
one-line error and exit code 2. ``python scripts/benchmark.py``, ``hetsched-benchmark`` and
``python -m hetsched benchmark`` are the same app. See docs/benchmark.md.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from hetsched.benchmark.config import register_benchmark_config
from hetsched.cli import run_app, short_errors
from hetsched.resources import CONF_DIR
from hetsched.sim.errors import ConfigError

register_benchmark_config()


def run(cfg: DictConfig) -> str:
    """Run the cells of ``cfg`` not finished yet and write the leaderboard; return its text."""
    from hetsched.benchmark.leaderboard import write_leaderboard
    from hetsched.benchmark.runner import benchmark_cells, quick_selection, run_cells

    if not isinstance(cfg.scheduler, DictConfig) or len(cfg.scheduler) == 0:
        raise ConfigError("no scheduler selected; use e.g. 'scheduler=[fifo,sia]'")
    out_dir = Path(str(cfg.out_dir))
    cells = benchmark_cells(cfg)
    t0 = time.perf_counter()
    rows, ran = run_cells(cells, out_dir, n_jobs=int(cfg.n_jobs), resume=bool(cfg.resume))
    wall = time.perf_counter() - t0
    cheap = OmegaConf.to_container(cfg.cheap) if quick_selection(cfg) else {}
    scen = sorted({c.scenario for c in cells})
    header = "\n".join(
        [
            f"{'Scenarios' if cfg.scenarios else f'Split `{cfg.split}`'}: {len(scen)} scenarios ({', '.join(scen)}); seeds "
            f"{sorted({c.seed for c in cells})}; tracks {list(cfg.runtime_info)}"
            + (f" (sigma {cfg.runtime_sigma:g})" if "noisy" in cfg.runtime_info else "")
            + ".",
            f"Cheaper settings: {cheap}." if cheap else "",
            f"Wall time: {wall:.0f} s for {ran} of {len(cells)} cells on {cfg.n_jobs} workers; "
            f"CPU time of all cells {sum(float(r.get('cpu_s', 0.0)) for r in rows):.0f} s.",
        ]
    )
    return write_leaderboard(
        rows,
        out_dir,
        reference=str(cfg.reference),
        header=header,
        plots=bool(cfg.plots),
        reps=int(cfg.bootstrap),
    )


@hydra.main(config_path=str(CONF_DIR), config_name="benchmark", version_base="1.3")
@short_errors
def app(cfg: DictConfig) -> None:
    """Run, print the leaderboard; bad input prints one line and exits with code 2."""
    md = run(cfg)
    print(md)
    print(f"leaderboard written to {cfg.out_dir}/leaderboard.md (and .csv, aggregate.csv, plots/)")


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point of ``hetsched-benchmark``; returns the exit code.

    Args:
        argv: Hydra overrides (default: the command line).
    """
    return run_app(app, argv)
