"""hetsched.benchmark.moves and scripts/job_moves.py: moves counted and rated."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from conftest import script_table

from hetsched.benchmark.moves import MoveProbe
from hetsched.envs.presets import resolve_cluster
from hetsched.sim.allocation import Allocation
from hetsched.sim.throughput import default_throughput
from hetsched.sim.workload import Workload

TM = default_throughput()
#: node 0: 4 K80s; node 1: 4 A100s; node 2: 4 A100s.
CLUSTER = resolve_cluster({
    "name": "k80_a100",
    "nodes": [
        {"gpu_type": "k80", "count": 1, "gpus": 4, "cpus": 32, "mem_gib": 256},
        {"gpu_type": "a100", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 256},
    ],
})  # fmt: skip


def _workload(n: int) -> Workload:
    c = TM.models.index("cifar10")
    return Workload(
        name="tiny", job_id=np.array([f"j{i}" for i in range(n)]), arrival=np.zeros(n),
        model=np.full(n, c), batch_size=np.full(n, 64), work=np.full(n, 1e6),
        req_gpus=np.ones(n, dtype=np.int64), min_gpus=np.ones(n, dtype=np.int64),
        max_gpus=np.full(n, 4, dtype=np.int64), cpu_per_gpu=np.full(n, 4.0),
        mem_per_gpu=np.full(n, 16.0),
    )  # fmt: skip


def _alloc(*entries: tuple[int, int, int]) -> Allocation:
    """Entries ``(job, node, gpus)``."""
    j, n, g = (np.array(x, dtype=np.int64) for x in zip(*entries, strict=True))
    return Allocation(job=j, node=n, gpus=g, cpus=4.0 * g, mem=16.0 * g, share=np.full_like(g, -1))


class _Script:
    """A scheduler that plays a fixed list of allocations."""

    def __init__(self, plays: list[Allocation]) -> None:
        self.plays = plays

    def decide(self, state: Any) -> Allocation:
        return self.plays.pop(0)


def test_moves_are_counted_and_rated() -> None:
    empty = Allocation.empty()
    plays = [
        _alloc((0, 0, 1), (1, 1, 1)),  # j0 on the K80 node, j1 on an A100 node
        _alloc((0, 1, 1), (1, 1, 1)),  # j0 to the A100 node: faster
        _alloc((0, 1, 2), (1, 2, 1)),  # j0 grows where it is (no move); j1 to the other A100
        _alloc((1, 2, 1)),  # j0 evicted
        empty,
        _alloc((0, 0, 2), (1, 2, 1)),  # j0 back on the K80 node: slower
    ]
    probe = MoveProbe(_Script(plays))
    state = SimpleNamespace(workload=_workload(2), cluster=CLUSTER, throughput=TM)
    for _ in range(6):
        probe.decide(state)
    c = probe.counts
    assert (c.moves, c.faster, c.same, c.slower) == (3, 1, 1, 1)
    with pytest.raises(ValueError, match="faster"):
        MoveProbe(_Script([]), faster=1.0)


def test_job_moves_script_counts_moves_per_scheduler() -> None:
    args = ["--scenario", "itp_c05_pai_busy", "--seed", "0", "--scheduler", "fifo", "sia"]
    body = script_table("job_moves.py", args)
    rows = {(r["scenario"], r["scheduler"]): r for r in body}
    assert set(rows) == {(s, p) for s in ("itp_c05_pai_busy", "all") for p in ("fifo", "sia")}
    assert rows[("all", "fifo")]["moves"] == "0"  # FIFO never preempts
    sia = rows[("all", "sia")]
    assert int(sia["moves"]) > 0  # Sia reallocates every round
    assert int(sia["faster"]) + int(sia["same"]) + int(sia["slower"]) == int(sia["moves"])
