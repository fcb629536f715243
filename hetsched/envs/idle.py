"""Why GPUs idle while a job that fits them waits: what kept the job off them in the env's round.

A diagnostic for policies that act through the env's rounds (the MAIFS network and its teacher,
:class:`hetsched.agents.policy.ActorPolicy`): after a round, for waiting jobs that fit some
node's free GPUs, :func:`idle_cause` names the first thing in the env's rules that kept each
job off such a node, and reports the one closest to being claimable:

* ``window`` -- the job was not in the candidate window (the agents never saw it);
* ``level`` -- it was in the window, but none of its GPU levels fits the node's free GPUs
  (e.g. an elastic job whose smallest level is above its ``min_gpus``);
* ``cpu_mem`` -- a GPU level fits, but the env's mask allows no claim that the node hosts
  alone: too few free cores or too little free memory at every CPU and memory level (or no
  positive throughput);
* ``claimable`` -- the env's mask allowed a claim that the node hosts alone, and the agents did
  not make it (they passed, or the agent's own semantics, e.g. the share guard, forbade it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from hetsched.envs.core import EnvCore

#: The causes, from farthest from a claim to claimable (:func:`idle_cause`).
IDLE_CAUSES: tuple[str, ...] = ("window", "level", "cpu_mem", "claimable")


def idle_cause(core: EnvCore, jobs: NDArray[np.int64], nodes: NDArray[np.int64]) -> str:
    """The cause, among :data:`IDLE_CAUSES`, closest to a claim over ``(job, node)`` pairs.

    Args:
        core: The env core after the round's last decision step (window and masks current).
        jobs: Waiting jobs, shape (B,), each paired with the node of ``nodes`` whose free GPUs it
            fits, shape (B,).

    Returns:
        The largest cause in :data:`IDLE_CAUSES` order over the pairs (``window`` for none).
    """
    jt = core.jt
    assert jt is not None
    in_slot = (jobs[:, None] == core.window[None, :]) & core.slot_ok[None, :]  # (B, K)
    seen = in_slot.any(axis=1)
    if not seen.any():
        return IDLE_CAUSES[0]
    j, n, k = jobs[seen], nodes[seen], in_slot[seen].argmax(axis=1)
    ma = core.ma
    legal = (ma.legal[n, k] & ma.single[n, k]).reshape(j.size, -1).any(axis=1)  # hosts it alone
    if legal.any():
        return IDLE_CAUSES[3]
    fits = ((jt.gpu_count[j] <= core.free_g[n][:, None]) & jt.level_ok[j]).any(axis=1)
    return IDLE_CAUSES[2] if fits.any() else IDLE_CAUSES[1]
