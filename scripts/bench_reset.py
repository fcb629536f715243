"""Env reset benchmark: milliseconds per ``reset()`` of ``hetsched/Cluster-v0`` on every
workload preset, optionally against another revision of the code in the same run.

For each preset of ``conf/workload`` the worker builds the multi-agent env on ``--cluster``
(default ``sia_64``; the preset's defaults, i.e. 48 jobs for ``philly`` as the env's own
default), resets it once (the first reset may read and parse the trace), then times
``--resets`` more resets with new seeds and reports the median and the largest wall time and
the median CPU time per reset (on a loaded machine the wall time includes waiting for a core;
the CPU time does not). A preset that cannot be built with its defaults (``csv`` needs a path)
is listed with its error.

With ``--base REV`` (a git revision, extracted with ``git archive`` into a temporary
directory) or ``--base-dir DIR`` (a checkout) the same worker also runs on that code, in a
separate process, alternating with the working tree for ``--pairs`` rounds, and the script
prints per preset the ratio base / working tree of the median CPU times per reset of each pair
(the median over the pairs; CPU time, because waiting for a core on a loaded machine inflates
the wall time of either side at random), next to the wall times.

Usage::

    python scripts/bench_reset.py                                # this tree only
    python scripts/bench_reset.py --base 7f099e5 --pairs 3       # paired ratios vs a revision
    python scripts/bench_reset.py --presets philly alibaba --resets 20 --out reset.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from hetsched.resources import CONF_DIR
from hetsched.sim.paths import SHARED_DATA_ENV, shared_data_root

ROOT = Path(__file__).resolve().parents[1]

#: Runs in a fresh interpreter with PYTHONPATH set to the tree under test; uses only API that
#: every revision of the env has (the constructor and ``reset(seed=)``).
WORKER = r"""
import json, logging, statistics, sys, time, warnings
warnings.simplefilter("ignore")
logging.disable(logging.WARNING)
from hetsched.envs import ClusterParallelEnv
cluster, resets, presets = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
out = {}
for name in presets:
    try:
        t = time.perf_counter()
        env = ClusterParallelEnv(cluster, workload=name, seed=0)
        build = time.perf_counter() - t
        t = time.perf_counter()
        env.reset(seed=0)
        first = time.perf_counter() - t
        wall, cpu = [], []
        for s in range(1, resets + 1):
            w0, c0 = time.perf_counter(), time.process_time()
            env.reset(seed=s)
            wall.append(time.perf_counter() - w0)
            cpu.append(time.process_time() - c0)
        out[name] = {
            "jobs": env.core.J,
            "build_s": build,
            "first_reset_ms": 1e3 * first,
            "reset_ms_median": 1e3 * statistics.median(wall),
            "reset_ms_max": 1e3 * max(wall),
            "reset_cpu_ms_median": 1e3 * statistics.median(cpu),
        }
    except Exception as e:  # reported, not fatal: one preset may need arguments
        out[name] = {"error": f"{type(e).__name__}: {e}".splitlines()[0][:200]}
print(json.dumps(out))
"""


def presets() -> list[str]:
    """Every workload preset of ``hetsched/conf/workload``."""
    return sorted(p.stem for p in (CONF_DIR / "workload").glob("*.yaml"))


def run_worker(tree: Path, cluster: str, resets: int, names: list[str]) -> dict[str, Any]:
    """The worker's figures for ``names`` with the code of ``tree`` (and this tree's shared data,
    so that an extracted revision finds the raw traces too)."""
    env = {SHARED_DATA_ENV: str(shared_data_root()), **os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-c", WORKER, cluster, str(resets), *names]
    out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(f"reset worker failed in {tree}:\n{out.stderr[-2000:]}")
    res: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return res


def extract(rev: str, dest: Path) -> Path:
    """Files of git revision ``rev`` under ``dest`` (``git archive``)."""
    tar = dest / "base.tar"
    with tar.open("wb") as f:
        subprocess.run(["git", "archive", rev], cwd=ROOT, stdout=f, check=True)
    with tarfile.open(tar) as t:
        t.extractall(dest / "base", filter="data")
    return dest / "base"


def _fmt(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"error: {r['error']}"
    return (
        f"{r['jobs']} jobs, first reset {r['first_reset_ms']:.0f} ms, then median "
        f"{r['reset_ms_median']:.1f} ms (max {r['reset_ms_max']:.1f}, CPU "
        f"{r['reset_cpu_ms_median']:.1f})"
    )


def main() -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cluster", default="sia_64")
    ap.add_argument("--presets", nargs="+", default=None, help="default: every preset")
    ap.add_argument("--resets", type=int, default=10, help="timed resets per preset")
    ap.add_argument("--base", default=None, help="git revision to compare against")
    ap.add_argument("--base-dir", type=Path, default=None, help="checkout to compare against")
    ap.add_argument("--pairs", type=int, default=3, help="alternating runs per side")
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    args = ap.parse_args()
    if args.resets < 1 or args.pairs < 1:
        ap.error("--resets and --pairs must be >= 1")
    names = args.presets or presets()
    report: dict[str, Any] = {"cluster": args.cluster, "load_avg_1m": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        base = args.base_dir
        if args.base is not None:
            base = extract(args.base, Path(tmp))
        if base is None:
            work = run_worker(ROOT, args.cluster, args.resets, names)
            report["work"] = work
            for n in names:
                print(f"{n}: {_fmt(work[n])}")
        else:
            runs: dict[str, list[dict[str, Any]]] = {"base": [], "work": []}
            for _ in range(args.pairs):
                runs["base"].append(run_worker(base, args.cluster, args.resets, names))
                runs["work"].append(run_worker(ROOT, args.cluster, args.resets, names))
            report.update(runs)
            ratios: dict[str, float] = {}
            for n in names:
                pairs = list(zip(runs["base"], runs["work"], strict=True))
                if any("error" in b[n] or "error" in w[n] for b, w in pairs):
                    print(f"{n}: base {_fmt(pairs[0][0][n])}; work {_fmt(pairs[0][1][n])}")
                    continue
                rs = [b[n]["reset_cpu_ms_median"] / w[n]["reset_cpu_ms_median"] for b, w in pairs]
                ratios[n] = statistics.median(rs)
                bm = statistics.median(b[n]["reset_ms_median"] for b, _ in pairs)
                wm = statistics.median(w[n]["reset_ms_median"] for _, w in pairs)
                wx = max(w[n]["reset_ms_max"] for _, w in pairs)
                bc = statistics.median(b[n]["reset_cpu_ms_median"] for b, _ in pairs)
                wc = statistics.median(w[n]["reset_cpu_ms_median"] for _, w in pairs)
                print(
                    f"{n}: base CPU {bc:.1f} ms (wall {bm:.1f}), working tree CPU {wc:.1f} ms "
                    f"(wall {wm:.1f}, max {wx:.1f}) per reset; CPU pair ratios "
                    f"{min(rs):.2f}-{max(rs):.2f}x, median {ratios[n]:.2f}x"
                )
            report["ratio_median"] = ratios
    report["load_avg_1m_end"] = os.getloadavg()[0]
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
