"""Compare env speed and behaviour between a git revision and the working tree, in one run.

Extracts ``--base`` (default ``HEAD``) with ``git archive`` into a temporary directory, then
alternates runs of this tree's ``scripts/bench_env.py`` (the same driver for both sides) on that
code and on the working tree's (``--pairs`` pairs, so drift of a shared machine hits both sides
alike) and prints steps per CPU-second of each run,
the ratio of each pair and the median ratio. It also computes a behaviour fingerprint on both
sides: a SHA-256 of the observations, masks, rewards, infos and global states of ``--steps``
random masked steps of ``hetsched/Cluster-v0`` on ``sia_64`` and ``pai_mixed`` (and of the
central env), so a speed-up can be shown not to change what the env does.

With ``--concurrent`` the two runs of a pair execute at the same time, one per core, so that a
drift of the shared machine's speed hits both sides of every pair (on the 2-core development VM the
sequential pairs' ratios spread over +-15 %, the concurrent ones over a few per cent).

Usage::

    python scripts/bench_env_compare.py --base 08b477d            # 5 pairs on sia_64
    python scripts/bench_env_compare.py --base HEAD~3 --pairs 3 --cluster large_2048
    python scripts/bench_env_compare.py --base 37f36ca --concurrent --ignore-info reward_progress
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FINGERPRINT = r"""
import hashlib, sys
import numpy as np
from hetsched.envs import ClusterCentralEnv, ClusterParallelEnv
from hetsched.envs.testing import masked_random_actions
steps = int(sys.argv[1])
skip = {"action_mask", *sys.argv[2:]}
h = hashlib.sha256()
for cl in ["sia_64", "pai_mixed"]:
    kw = dict(seed=0, max_cycles=10**9, workload="philly", workload_kwargs={"num_jobs": 200})
    env = ClusterParallelEnv(cl, **kw)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    agents = env.possible_agents
    for _ in range(steps):
        acts = masked_random_actions(env.action_masks(), rng)
        obs, r, te, tr, inf = env.step(dict(zip(agents, acts.tolist())))
        for a in agents:
            h.update(obs[a]["observation"].tobytes())
            h.update(obs[a]["action_mask"].tobytes())
            h.update(repr(sorted((k, v) for k, v in inf[a].items() if k not in skip)).encode())
        h.update(repr(r[agents[0]]).encode())
        h.update(env.state().tobytes())
        if te[agents[0]] or tr[agents[0]]:
            env.reset()
    c = ClusterCentralEnv(cl, **kw)
    c.reset(seed=0)
    for _ in range(steps // 2):
        o, r, te, tr, _ = c.step(int(masked_random_actions(c.action_masks()[None, :], rng)[0]))
        h.update(o.tobytes())
        h.update(repr(r).encode())
        if te or tr:
            c.reset()
print(h.hexdigest())
"""


BENCH = str(ROOT / "scripts" / "bench_env.py")


def extract(rev: str, dest: Path) -> Path:
    """Files of git revision ``rev`` under ``dest / "base"`` (``git archive``; no worktree is
    registered in the repository)."""
    tar = dest / "base.tar"
    with tar.open("wb") as f:
        subprocess.run(["git", "archive", rev], cwd=ROOT, stdout=f, check=True)
    with tarfile.open(tar) as t:
        t.extractall(dest / "base", filter="data")
    return dest / "base"


def _run(tree: Path, args: list[str]) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True, check=True
    )
    return out.stdout


def _bench_args(cluster: str, steps: int) -> list[str]:
    return [BENCH, "--clusters", cluster, "--steps", str(steps)]


def _parse_speed(out: str) -> float:
    m = re.search(r"parallel_\S+: .*ma_steps_per_cpu_s=([\d.e+]+)", out)
    if m is None:
        raise RuntimeError(f"bench_env.py printed no ma_steps_per_cpu_s:\n{out}")
    return float(m.group(1))


def _speed(tree: Path, cluster: str, steps: int) -> float:
    return _parse_speed(_run(tree, _bench_args(cluster, steps)))


def _speed_concurrent(trees: list[Path], cluster: str, steps: int) -> list[float]:
    """Run bench_env.py in every tree at the same time (one process per tree)."""
    procs = [
        subprocess.Popen(
            [sys.executable, *_bench_args(cluster, steps)],
            cwd=t,
            env={**os.environ, "PYTHONPATH": str(t)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for t in trees
    ]
    outs = []
    for p in procs:
        out, err = p.communicate()
        if p.returncode:
            raise RuntimeError(f"bench_env.py failed:\n{err}")
        outs.append(out)
    return [_parse_speed(o) for o in outs]


def main() -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--base", default="HEAD", help="git revision to compare against")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--cluster", default="sia_64")
    ap.add_argument("--steps", type=int, default=3000, help="bench_env.py steps per run")
    ap.add_argument("--fingerprint-steps", type=int, default=1500)
    ap.add_argument(
        "--ignore-info",
        nargs="*",
        default=[],
        metavar="KEY",
        help="info keys left out of the fingerprint (e.g. one the working tree adds)",
    )
    ap.add_argument(
        "--concurrent",
        action="store_true",
        help="run the two sides of a pair at the same time, one per core (both see the same "
        "machine drift; needs two idle cores)",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = extract(args.base, Path(tmp))
        fp = {
            name: _run(
                tree, ["-c", FINGERPRINT, str(args.fingerprint_steps), *args.ignore_info]
            ).strip()
            for name, tree in (("base", base), ("work", ROOT))
        }
        ratios, b_all, w_all = [], [], []
        for i in range(args.pairs):
            if args.concurrent:
                b, w = _speed_concurrent([base, ROOT], args.cluster, args.steps)
            else:
                b = _speed(base, args.cluster, args.steps)
                w = _speed(ROOT, args.cluster, args.steps)
            b_all.append(b)
            w_all.append(w)
            ratios.append(w / b)
            print(f"pair {i + 1}: base {b:.0f}, working tree {w:.0f} steps/CPU-s, {w / b:.2f}x")
    print(
        f"{args.cluster}: base {args.base} {min(b_all):.0f}-{max(b_all):.0f}, working tree "
        f"{min(w_all):.0f}-{max(w_all):.0f} steps per CPU-second; pair ratios "
        f"{min(ratios):.2f}-{max(ratios):.2f}x, median {statistics.median(ratios):.2f}x"
    )
    same = fp["base"] == fp["work"]
    print(f"behaviour fingerprint: {'identical' if same else 'DIFFERENT'} ({fp['work'][:16]}...)")


if __name__ == "__main__":
    main()
