"""Where a MAIFS clone's gap to its teacher comes from: its moves, its claims, its GPU levels.

Replays benchmark cells (exact track) as ``hetsched-benchmark`` runs them and prints, per run
and over all runs:

* the avg JCT over the better of Sia's and Gavel's on the same cell (their cells are read from,
  or written to, ``--bench``, the benchmark's output directory, under the same config hash) and
  the interquartile mean of that ratio over the runs;
* ``--moves``: ``own`` (as trained), ``none`` (every move, an action past the claims, replaced
  by a pass) or ``teacher`` (the network's actions, plus a move wherever the teacher would move
  a job in that state). These are diagnostics, not schedulers;
* for the network: label accuracy on its own states, by the teacher's label (``pass``,
  ``claim``, ``move``). Each agent's greedy choice is taken under the mask it decides under in
  the ordered decision when the agents before it (in the checkpoint's decision order) act as
  the teacher would; a claim of the teacher's job at another level is ``claim_other_level``,
  of another job ``claim_other_job`` (with the median of that job's estimated run time over the
  teacher's job's, ``EnvCore.est_run_s``). Labels illegal under that mask are counted apart;
* the GPU levels (index into the level set, smallest first) of the network's claims and of the
  teacher's labels in the same states, and, for ``claim_other_level``, which levels differ
  (``gpu (same count)``: another GPU level that gives the job the same GPUs, e.g. a level
  below a 1-GPU job's request);
* the agents whose best move (``hetsched.agents.signals.move_savings``) saves more than the
  teacher's ``migrate_gain_s``, by the rank of that saving among them in the step (0: the
  largest): how often the teacher and the network move there;
* per GPU type (the type of most of a job's GPU-seconds): jobs and their mean run time (h).

``--scheduler maifs_teacher`` plays the teacher preset instead (``--moves none``: without its
migrations), for the last two lines' comparison::

    python scripts/clone_gap.py --split validation --seed 0 1 2 3 --moves none
    python scripts/clone_gap.py --scenario itp_c06_sia64_busy --seed 0 --scheduler maifs_teacher --moves none

Exit code 2 with one line for an unknown scenario, split or move mode, or an unusable checkpoint.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path
from typing import Any

import numpy as np

from hetsched.sim.errors import HetschedError

MOVES = ("own", "none", "teacher")


def _kind(a: int, P: int) -> str:
    return "pass" if a == 0 else ("claim" if a < P else "move")


def label_outcome(label: int, net: int, P: int, L: int) -> str:
    """How the network's choice ``net`` compares with the teacher's ``label`` (actions of one
    agent; ``P`` placement actions including the no-op, ``L`` levels per window slot)."""
    if label == net:
        return "same_" + _kind(label, P)
    ka, kb = _kind(label, P), _kind(net, P)
    if ka == kb == "claim":
        return "claim_other_level" if (label - 1) // L == (net - 1) // L else "claim_other_job"
    return f"{ka}->{kb}"


class Probe:
    """Counts over the decision steps of the runs (see the module docstring)."""

    def __init__(self) -> None:
        self.labels: collections.Counter[str] = collections.Counter()
        self.levels: dict[str, collections.Counter[int]] = {
            "network": collections.Counter(),
            "teacher": collections.Counter(),
        }
        self.run_ratio: list[float] = []  # other job's estimated run time over the label's
        self.level_parts: collections.Counter[str] = collections.Counter()  # which levels differ
        # (rank bucket, teacher kind, network kind) of agents whose best move saves more than
        # the teacher's migrate_gain_s
        self.move_rank: collections.Counter[tuple[str, str, str]] = collections.Counter()

    def step(self, policy: Any, core: Any, label: np.ndarray, played: np.ndarray) -> None:
        """Record one step of a :class:`MAIFSPolicy`: its teacher's ``label`` and the actions
        ``played`` (each shape (N,))."""
        import torch

        from hetsched.agents.acting import agent_observations, graph_of, masks_and_binding

        env = policy.conf.env
        mask = masks_and_binding(core, env)[0]
        P, K, A = core.n_place, core.K, core.n_actions
        L = (P - 1) // K
        eff = policy.actor.label_masks(core, label)
        obs = torch.from_numpy(agent_observations(core, env))[None]
        adj = torch.from_numpy(graph_of(mask, K, A - P))[None]
        with torch.no_grad():
            lg, _, _ = policy.net(obs, torch.ones((1, *mask.shape), dtype=torch.bool), adj)
        net = np.where(eff, lg[0].double().numpy(), -np.inf).argmax(axis=1)
        legal = eff[np.arange(core.N), label]
        active = eff[:, 1:].any(axis=1)
        w = np.where(core.slot_ok, core.window, 0)
        for i in np.flatnonzero(active & legal):
            kind = label_outcome(int(label[i]), int(net[i]), P, L)
            self.labels[kind] += 1
            if kind == "claim_other_level":
                k, g, c, m = (int(x[0]) for x in core.codec.decode([int(net[i])]))
                _, tg, tc, tm = (int(x[0]) for x in core.codec.decode([int(label[i])]))
                count = core.jt.gpu_count[w[k]] if core.jt is not None else None
                same = count is not None and count[g] == count[tg]
                gpu = "gpu (same count)" if same else "gpu"
                parts = [n for n, a, b in ((gpu, g, tg), ("cpu", c, tc), ("mem", m, tm)) if a != b]
                self.level_parts["+".join(parts)] += 1
            if kind == "claim_other_job":
                run = core.est_run_s(w[[(int(net[i]) - 1) // L, (int(label[i]) - 1) // L]])
                self.run_ratio.append(float(run[0] / max(run[1], 1e-9)))
        self.labels["illegal_label"] += int((active & ~legal).sum())
        self._move_ranks(policy, core, label, net, active & legal)
        for who, acts in (("network", played), ("teacher", label)):
            claims = acts[(acts > 0) & (acts < P)]
            if claims.size:
                self.levels[who].update(core.codec.decode(claims)[1].tolist())

    def add(self, other: Probe) -> None:
        """Add another run's counts to these."""
        self.labels.update(other.labels)
        self.run_ratio += other.run_ratio
        self.level_parts.update(other.level_parts)
        self.move_rank.update(other.move_rank)
        for who, c in other.levels.items():
            self.levels[who].update(c)

    def _move_ranks(
        self, policy: Any, core: Any, label: np.ndarray, net: np.ndarray, ok: np.ndarray
    ) -> None:
        """Bucket the agents whose best move saves more than the teacher's gain by the rank
        of that saving among all such agents this step (0: the largest), with both kinds."""
        from hetsched.agents.signals import move_savings

        gain = policy.conf.teacher.migrate_gain_s
        if gain is None or core.cfg.migrate_speedup is None:
            return
        best = move_savings(core).max(axis=1)  # (N,) s
        cand = np.flatnonzero(best > gain)
        if cand.size == 0:
            return
        rank = np.empty(core.N, dtype=np.int64)
        rank[cand[np.argsort(-best[cand], kind="stable")]] = np.arange(cand.size)
        P = core.n_place
        for i in cand[ok[cand]].tolist():
            b = "rank 0" if rank[i] == 0 else ("rank 1-2" if rank[i] <= 2 else "rank 3+")
            self.move_rank[(b, _kind(int(label[i]), P), _kind(int(net[i]), P))] += 1

    def lines(self) -> list[str]:
        """The label and level lines."""
        n = sum(v for k, v in self.labels.items() if k != "illegal_label")
        shares = ", ".join(
            f"{k} {v / n:.3f}" for k, v in sorted(self.labels.items()) if k != "illegal_label"
        )
        out = [f"labels ({n} legal, {self.labels['illegal_label']} illegal): {shares}"]
        if self.run_ratio:
            out.append(
                "other job's estimated run time over the teacher's job's: median "
                f"{np.median(self.run_ratio):.3f} ({len(self.run_ratio)} claims)"
            )
        if self.level_parts:
            out.append(f"claim_other_level, the levels that differ: {dict(self.level_parts)}")
        for who, c in self.levels.items():
            out.append(f"GPU levels of the {who}'s claims: {dict(sorted(c.items()))}")
        for b in ("rank 0", "rank 1-2", "rank 3+"):
            mr = {(t, m): v for (bb, t, m), v in self.move_rank.items() if bb == b}
            if not mr:
                continue
            tm = sum(v for (t, _), v in mr.items() if t == "move")
            hit = mr.get(("move", "move"), 0)
            nm = sum(v for (_, m), v in mr.items() if m == "move")
            out.append(
                f"agents whose best move saves more than the teacher's gain, {b}: "
                f"{sum(mr.values())}; the teacher moves in {tm}, the network in {nm}, "
                f"both in {hit}"
            )
        return out


def type_line(result: Any) -> str:
    """Jobs and their mean run time (h) by the GPU type of most of their GPU-seconds."""
    from hetsched.sim.catalog import GPU_TYPE_NAMES

    typ = np.asarray(result.gpu_s_by_type).argmax(axis=1)
    run = (np.asarray(result.finish_time) - np.asarray(result.start_time)) / 3600.0
    parts = [
        f"{GPU_TYPE_NAMES[t]} {int((typ == t).sum())} jobs {run[typ == t].mean():.2f} h"
        for t in np.unique(typ)
    ]
    return "by GPU type: " + ", ".join(parts)


def _instrument(mode: str, probe: list[Probe]) -> None:
    """Make every :class:`MAIFSPolicy` apply ``mode`` to its moves and record into
    ``probe[0]``."""
    from hetsched.agents.policy import MAIFSPolicy
    from hetsched.agents.teacher import SJFTeacher

    teachers: dict[int, SJFTeacher] = {}
    plain = MAIFSPolicy.act

    def act(self: MAIFSPolicy, core: Any) -> np.ndarray:
        t = teachers.setdefault(id(self), SJFTeacher.for_agent(self.conf))
        label = t.act(core)  # the teacher only reads the state
        a = plain(self, core).copy()
        moves = a >= core.n_place
        if mode == "none":
            a[moves] = 0
        elif mode == "teacher":
            tm = label >= core.n_place
            a[tm] = label[tm]
        probe[0].step(self, core, label, a)
        return a

    MAIFSPolicy.act = act  # type: ignore[method-assign,assignment]


def main() -> None:
    """Command line."""
    from hetsched.benchmark.leaderboard import iqm
    from hetsched.benchmark.runner import (
        Cell,
        play_cell,
        preset_node,
        read_cell,
        replay_arguments,
        run_cell,
    )
    from hetsched.benchmark.scenarios import scenario_names

    ap = replay_arguments(__doc__.splitlines()[0])
    ap.add_argument("--moves", default="own", help=f"one of {list(MOVES)}")
    ap.add_argument("--scheduler", default="maifs", help="maifs or maifs_teacher")
    ap.add_argument("--bench", default="outputs/benchmark/clone_gap", help="reference cells")
    args = ap.parse_args()
    if args.moves not in MOVES:
        raise ValueError(f"--moves {args.moves!r} is not one of {list(MOVES)}")
    if args.scheduler not in ("maifs", "maifs_teacher"):
        raise ValueError(f"--scheduler {args.scheduler!r} is not maifs or maifs_teacher")
    names = scenario_names(args.split, args.scenario)
    node = dict(preset_node(args.scheduler, args.checkpoint))
    if args.scheduler == "maifs_teacher" and args.moves == "none":
        node["migrate_gain_s"] = None
    elif args.scheduler == "maifs_teacher" and args.moves == "teacher":
        raise ValueError("--moves teacher is for the network (--scheduler maifs)")
    probe = [Probe()]
    if args.scheduler == "maifs":
        _instrument(args.moves, probe)
    total, ratios = Probe(), []
    bench = Path(args.bench)
    for name in names:
        for seed in args.seed:
            best = np.inf
            for ref in ("sia", "gavel"):
                cell = Cell(name, ref, preset_node(ref), "exact", 0.0, seed)
                row = read_cell(cell.path(bench)) or run_cell(cell, bench)
                best = min(best, float(row["avg_jct_h"]))
            probe[0] = Probe()
            out, _, _, _ = play_cell(Cell(name, args.scheduler, node, "exact", 0.0, seed))
            jct = float(out.row["avg_jct_h"])
            ratios.append(jct / best)
            print(
                f"{name} seed {seed}: avg JCT {jct:.3f} h ({jct / best:.3f}x the better of Sia "
                f"and Gavel); {type_line(out.result)}"
            )
            if args.scheduler == "maifs":
                print("  " + "\n  ".join(probe[0].lines()))
                total.add(probe[0])
    print(f"{len(ratios)} runs: IQM {iqm(np.asarray(ratios)):.3f}x the better of Sia and Gavel")
    if args.scheduler == "maifs":
        print("\n".join(total.lines()))


if __name__ == "__main__":
    try:
        main()
    except (HetschedError, ValueError, FileNotFoundError) as e:
        print(f"clone_gap: {e}", file=sys.stderr)
        sys.exit(2)
