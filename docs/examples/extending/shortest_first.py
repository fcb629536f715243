"""A scheduler in one file: shortest remaining work first, non-preemptive.

Used with the preset ``conf/scheduler/shortest_first.yaml`` next to it (docs/extending.md)::

    PYTHONPATH=docs/examples/extending hetsched-evaluate \
        'hydra.searchpath=[file://docs/examples/extending/conf]' 'scheduler=[shortest_first,fifo]'
"""

from __future__ import annotations

import numpy as np

from hetsched.baselines.base import BasePolicy, Placer
from hetsched.sim.allocation import Allocation
from hetsched.sim.engine import SimState


class ShortestFirst(BasePolicy):
    """Start waiting jobs in order of remaining work; running jobs keep their GPUs.

    Args:
        round_s: Round length in seconds.
    """

    name = "shortest_first"
    event_driven = True  # the decision changes only when a job arrives or finishes

    def __init__(self, round_s: float = 60.0) -> None:
        self.round_s = round_s

    def decide(self, state: SimState) -> Allocation:
        """Keep running jobs; place waiting ones, least remaining work first, while they fit."""
        placer = Placer(state, keep=state.current)
        pending = state.pending
        order = pending[np.argsort(state.remaining[pending], kind="stable")]
        for j in order.tolist():
            if placer.total_free == 0:
                break
            placer.place(j, int(state.workload.req_gpus[j]))
        return placer.allocation()
