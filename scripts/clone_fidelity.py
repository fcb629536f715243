"""How closely a MAIFS network follows its teacher on the states it reaches itself.

Replays benchmark cells (exact track) with the network deciding, as ``hetsched-benchmark`` runs
them, and at every decision step asks the teacher the checkpoint was cloned from
(:meth:`hetsched.agents.teacher.SJFTeacher.for_agent`) what it would do in the same state. The
teacher only labels: the network's actions are the ones played, and of those the claims the
env granted are compared (several agents may claim one job). Nodes of one GPU type are
interchangeable, so each step compares the jobs claimed, with the GPU type of the claiming node
and the GPU level: a job the teacher claims counts as ``agree`` (the network claims it on the
same type at the same level), ``other_type``, ``other_level`` or ``net_missed`` (the network
leaves it waiting); a job only the network claims counts as ``net_extra``. Where the GPU type
or level differs, the line gives how fast the network's choice runs the job against the
teacher's (isolated throughput). Evictions and migrations are counted apart, with those by
agents the work-conserving masks made claim (their no-op is illegal in the env's masks, so the
teacher's "pass" label for them weighs 0 in training; in the ordered decision such an agent
may pass again once earlier agents took its binding claims). Run it on train and validation
scenarios to see whether the clone is limited by fitting (low agreement on the train split
too) or by generalisation (lower agreement on validation clusters only)::

    python scripts/clone_fidelity.py --split validation --seed 0 1
    python scripts/clone_fidelity.py --scenario itp_c06_pai_busy --seed 0 --checkpoint my.pt

Exit code 2 with one line for an unknown scenario or split or an unusable checkpoint.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from hetsched.sim.errors import HetschedError

KINDS = ("agree", "other_type", "other_level", "net_missed", "net_extra")


def _claims(core: Any, window: np.ndarray, actions: np.ndarray) -> dict[int, tuple[int, ...]]:
    """Placement claims of one step as ``{job: (GPU type of the claiming node, levels...)}``;
    nodes of one type are interchangeable, so which of them claims does not count."""
    idx = np.flatnonzero((actions > 0) & (actions < core.n_place))
    if idx.size == 0:
        return {}
    parts = core.codec.decode(actions[idx])
    jobs = window[parts[0]]
    types = core.cluster.node_type[idx]
    rows = np.stack([types, *parts[1:]], axis=1)
    return {int(j): tuple(int(x) for x in r) for j, r in zip(jobs, rows, strict=True)}


def _rate(core: Any, job: int, claim: tuple[int, ...]) -> float:
    """Isolated throughput of ``job`` on GPU type ``claim[0]`` at GPU level ``claim[1]``
    (work units/s; CPU and memory levels aside)."""
    count = core.jt.gpu_count[job, claim[1]]
    return float(core.tm.isolated(core.wl.model[job], claim[0], count, False)) + 1e-12


class Tally:
    """Counts of :data:`KINDS` over the jobs either side claims, and of evictions."""

    def __init__(self) -> None:
        extra = ("net_evict", "net_evict_forced", "teacher_evict", "teacher_evict_forced")
        self.counts = dict.fromkeys((*KINDS, *extra, "illegal_labels"), 0)
        self.log_ratio: list[float] = []  # log(network's rate / teacher's) per mismatch

    def add(
        self,
        core: Any,
        window: np.ndarray,
        net: np.ndarray,
        label: np.ndarray,
        forced: np.ndarray,
        legal: np.ndarray,
    ) -> None:
        """One decision step.

        Args:
            core: The env core (its codec, cluster and job table).
            window: The job ids of the window the step decided on, shape (K,).
            net: The network's granted actions (0 elsewhere), shape (N,).
            label: The teacher's labels, shape (N,).
            forced: Agents whose no-op the work-conserving semantics made illegal, (N,).
            legal: Whether each label is legal for the network, shape (N,).
        """
        c = self.counts
        mine, theirs = _claims(core, window, net), _claims(core, window, label)
        for j, want in theirs.items():
            if j not in mine:
                c["net_missed"] += 1
            elif mine[j] == want:
                c["agree"] += 1
            else:
                c["other_type" if mine[j][0] != want[0] else "other_level"] += 1
                self.log_ratio.append(np.log(_rate(core, j, mine[j]) / _rate(core, j, want)))
        c["net_extra"] += sum(1 for j in mine if j not in theirs)
        ev, tev = net >= core.n_place, label >= core.n_place
        c["net_evict"] += int(ev.sum())
        c["net_evict_forced"] += int((ev & forced).sum())
        c["teacher_evict"] += int(tev.sum())
        c["teacher_evict_forced"] += int((tev & forced).sum())
        c["illegal_labels"] += int((~legal).sum())

    def merge(self, other: Tally) -> None:
        """Add another tally's counts."""
        for k, v in other.counts.items():
            self.counts[k] += v
        self.log_ratio += other.log_ratio

    def line(self) -> str:
        """Shares of the claimed jobs, e.g. ``agree 0.91, other_type 0.03, ...``, and counts."""
        c = self.counts
        n = sum(c[k] for k in KINDS)
        parts = [f"{k} {c[k] / n:.3f}" if n else f"{k} -" for k in KINDS]
        lr = np.asarray(self.log_ratio)
        rate = (
            f"; where they differ, the network's GPUs run the job at {np.exp(lr.mean()):.2f}x "
            f"the teacher's rate (geometric mean; slower in {np.mean(lr < -1e-9):.2f})"
            if lr.size
            else ""
        )
        return (
            f"{n} claimed jobs: {', '.join(parts)}{rate}; evictions: network "
            f"{c['net_evict']} ({c['net_evict_forced']} by agents made to claim), teacher "
            f"{c['teacher_evict']} ({c['teacher_evict_forced']}); labels illegal for the "
            f"network {c['illegal_labels']}"
        )


def _instrument(tally: list[Tally]) -> None:
    """Make every :class:`MAIFSPolicy` label its states with its teacher into ``tally[0]``.

    The network's side of a step is what the env granted of its claims (several agents may
    claim one job; one wins), compared with the teacher's labels of the state before it.
    """
    from hetsched.agents.acting import agent_masks
    from hetsched.agents.driver import StateCore
    from hetsched.agents.policy import MAIFSPolicy
    from hetsched.agents.teacher import SJFTeacher

    teachers: dict[int, SJFTeacher] = {}
    pending: dict[int, tuple[np.ndarray, ...]] = {}
    act_plain, resolve_plain = MAIFSPolicy.act, StateCore.resolve_claims

    def act(self: MAIFSPolicy, core: Any) -> np.ndarray:
        t = teachers.setdefault(id(self), SJFTeacher.for_agent(self.conf))
        label = t.act(core)  # the teacher only reads the state
        mask, _ = agent_masks(core, self.conf.env)
        legal = mask[np.arange(core.N), label] != 0
        pending[id(core)] = (core.window.copy(), label, mask[:, 0] == 0, legal)
        return act_plain(self, core)

    def resolve(self: StateCore, actions: np.ndarray) -> Any:
        out = resolve_plain(self, actions)
        if id(self) in pending:
            window, label, forced, legal = pending.pop(id(self))
            res = out[0]
            net = np.where(res.granted | res.evicted, actions, 0)
            tally[0].add(self, window, net, label, forced, legal)
        return out

    MAIFSPolicy.act = act  # type: ignore[method-assign,assignment]
    StateCore.resolve_claims = resolve  # type: ignore[method-assign,assignment]


def main() -> None:
    """Command line."""
    from hetsched.benchmark.runner import Cell, play_cell, preset_node, replay_arguments
    from hetsched.benchmark.scenarios import scenario_names

    args = replay_arguments(__doc__.splitlines()[0]).parse_args()
    names = scenario_names(args.split, args.scenario)
    node = preset_node("maifs", args.checkpoint)
    tally = [Tally()]
    _instrument(tally)
    total = Tally()
    for name in names:
        for seed in args.seed:
            tally[0] = Tally()
            out, _, _, _ = play_cell(Cell(name, "maifs", node, "exact", 0.0, seed))
            print(f"{name} seed {seed}: avg JCT {out.row['avg_jct_h']:.3f} h; {tally[0].line()}")
            total.merge(tally[0])
    if len(names) * len(args.seed) > 1:
        print(f"total of {len(names) * len(args.seed)} runs: {total.line()}")


if __name__ == "__main__":
    try:
        main()
    except (HetschedError, ValueError, FileNotFoundError) as e:
        print(f"clone_fidelity: {e}", file=sys.stderr)
        sys.exit(2)
