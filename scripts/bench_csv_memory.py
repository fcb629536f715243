"""Peak memory and time of reading a large trace CSV (reported, never asserted in a test).

Writes a CSV of ``--rows`` jobs (columns ``job_id, submission_time, duration, num_gpu, queue``,
about 45 bytes a row) into a temporary directory and, each in a fresh subprocess, measures:

* ``parse``: parsing the file into its cached table (:func:`hetsched.sim.traces.read_table`);
* ``read``: parsing and typing every column (ids and queues as unicode strings, times and GPU
  counts as numbers), the arrays a reader builds its jobs from;
* ``workload``: the whole :func:`hetsched.sim.traces.csv_trace` (validation, sort, models, work,
  the :class:`~hetsched.sim.workload.Workload` of every row).

Peak memory is tracemalloc's peak of traced allocations (numpy buffers included) during the call,
and the growth of the process's maximum resident set (``ru_maxrss``) over the same call in a
second subprocess without tracemalloc, which also gives the time. ``--baseline REV`` adds the
same measurements for the reader of git revision ``REV`` (``hetsched/sim/traces.py`` before it
became a package), so old and new are compared in one run.

Usage::

    python scripts/bench_csv_memory.py                        # 1M rows
    python scripts/bench_csv_memory.py --rows 200000 --baseline 7f099e5
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def write_csv(path: Path, rows: int, seed: int = 0) -> None:
    """A synthetic trace: arrivals over 90 days, log-uniform durations, 1-8 GPUs, 8 queues."""
    rng = np.random.default_rng(seed)
    arrival = np.sort(rng.uniform(0, 90 * 86400, rows)).round(1)
    duration = np.exp(rng.uniform(np.log(60), np.log(86400), rows)).round(1)
    gpus = rng.choice([1, 1, 1, 2, 4, 8], rows)
    queue = rng.integers(0, 8, rows)
    with open(path, "w", encoding="utf-8") as f:
        f.write("job_id,submission_time,duration,num_gpu,queue\n")
        step = 100_000
        for lo in range(0, rows, step):
            hi = min(rows, lo + step)
            f.writelines(
                f"job-{i},{arrival[i]},{duration[i]},{gpus[i]},vc{queue[i]}\n"
                for i in range(lo, hi)
            )


def child(args: argparse.Namespace) -> None:
    """Measure one (reader, task, meter) in this process and print one JSON line."""
    import gc
    import importlib.util
    import resource
    import time
    import tracemalloc

    from hetsched.sim.cluster import Cluster
    from hetsched.sim.throughput import default_throughput

    mod: Any
    if args.impl == "new":
        from hetsched.sim import traces as mod
    else:
        spec = importlib.util.spec_from_file_location("old_traces", args.old_file)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules["old_traces"] = mod
        spec.loader.exec_module(mod)
    tm = default_throughput()
    cluster = Cluster.from_spec(
        "bench", [{"gpu_type": "v100", "count": 16, "gpus": 8, "cpus": 96, "mem_gib": 768}]
    )
    path = Path(args.csv)

    def parse() -> object:
        return mod.read_table(path) if args.impl == "new" else mod._read_csv(path)

    def read() -> object:
        if args.impl == "new":
            tab = mod.read_table(path)
            return (tab.strings("job_id"), tab.strings("queue"), tab.floats("submission_time"),
                    tab.floats("duration"), tab.ints("num_gpu"))  # fmt: skip
        tab = mod._read_csv(path)
        return (np.array([v.strip() for v in tab.col("job_id")], dtype=str),
                np.array([v.strip() for v in tab.col("queue")], dtype=str),
                mod._floats(tab, "submission_time"), mod._floats(tab, "duration"),
                mod._ints(tab, "num_gpu"))  # fmt: skip

    def workload() -> object:
        return mod.csv_trace(path, throughput=tm, cluster=cluster, rng=np.random.default_rng(0))

    fn = {"parse": parse, "read": read, "workload": workload}[args.task]
    gc.collect()
    out: dict[str, float] = {}
    if args.meter == "tracemalloc":
        tracemalloc.start()
        result = fn()
        out["peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        result = fn()
        out["time_s"] = time.perf_counter() - t0
        out["rss_growth_mb"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
    del result
    print(json.dumps(out))


def measure(csv_path: Path, impl: str, task: str, old_file: Path | None) -> dict[str, float]:
    res: dict[str, float] = {}
    for meter in ("tracemalloc", "rss"):
        cmd = [sys.executable, __file__, "--child", "--csv", str(csv_path), "--impl", impl,
               "--task", task, "--meter", meter]  # fmt: skip
        if old_file is not None:
            cmd += ["--old-file", str(old_file)]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"child failed ({impl} {task} {meter}):\n{proc.stderr[-3000:]}")
        res.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--baseline", default=None, help="git revision of the old reader to compare")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--csv", help=argparse.SUPPRESS)
    ap.add_argument("--impl", default="new", help=argparse.SUPPRESS)
    ap.add_argument("--task", default="read", help=argparse.SUPPRESS)
    ap.add_argument("--meter", default="rss", help=argparse.SUPPRESS)
    ap.add_argument("--old-file", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "bench.csv"
        write_csv(csv_path, args.rows)
        size_mb = csv_path.stat().st_size / 2**20
        impls: list[tuple[str, Path | None]] = [("new", None)]
        if args.baseline:
            old = Path(tmp) / "old_traces.py"
            text = subprocess.run(
                ["git", "show", f"{args.baseline}:hetsched/sim/traces.py"],
                capture_output=True, text=True, cwd=ROOT, check=True,
            ).stdout  # fmt: skip
            old.write_text(text, encoding="utf-8")
            impls.insert(0, ("old", old))
        print(f"{args.rows} rows, {size_mb:.1f} MB file")
        print("| reader | task | peak traced MB | x file | RSS growth MB | x file | time s |")
        print("|---|---|---|---|---|---|---|")
        for impl, old_file in impls:
            for task in ("parse", "read", "workload"):
                r = measure(csv_path, impl, task, old_file)
                print(
                    f"| {impl} | {task} | {r['peak_mb']:.0f} | {r['peak_mb'] / size_mb:.2f} | "
                    f"{r['rss_growth_mb']:.0f} | {r['rss_growth_mb'] / size_mb:.2f} | "
                    f"{r['time_s']:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
