"""Hadar's prices, utilities and plan records (see :mod:`hetsched.baselines.hadar`).

The closed-form pieces of the reconstruction: the exponential price, the utility of a completion
time, the greedy schedule search over completion slots, and the records the dual subroutine
(:mod:`hetsched.baselines.hadar_dual`) and the policy exchange.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
#: All stored plans of the policy, concatenated: ``(job, slot, node, gpus)`` per placement entry,
#: then ``(job, slot, progress)`` per planned slot (absolute slots).
PlanTables = tuple[IntArray, IntArray, IntArray, IntArray, IntArray, IntArray, FloatArray]

UTILITIES = ("linear", "sigmoid", "step", "constant")


def exp_price(
    util: FloatArray | float, low: FloatArray | float, high: FloatArray | float
) -> FloatArray:
    """Exponential resource price ``low * (high / low) ** util``.

    Args:
        util: Utilisation in [0, 1] (reserved / capacity), any shape.
        low: Price at zero utilisation L (> 0), broadcastable to ``util``.
        high: Price at full utilisation U (>= L), broadcastable to ``util``.

    Returns:
        Price per GPU-slot, the broadcast shape.
    """
    u = np.asarray(util, dtype=np.float64)
    lo = np.asarray(low, dtype=np.float64)
    hi = np.asarray(high, dtype=np.float64)
    return np.asarray(lo * np.power(hi / lo, u), dtype=np.float64)


def utility_value(
    kind: str,
    jct_s: FloatArray | float,
    t_star_s: float,
    *,
    weight: float = 1.0,
    kappa: float = 10.0,
    floor: float = 0.01,
) -> FloatArray:
    """Utility f_i of a job completing after ``jct_s`` seconds (non-increasing in the JCT).

    Args:
        kind: ``linear``: ``w * (1 - (d - T*) / (kappa T*))``; ``sigmoid``: a smooth step centred
            at ``(1 + kappa/2) T*``; ``step``: ``w`` up to the deadline ``kappa T*``;
            ``constant``: ``w``.
        jct_s: Estimated JCT(s) in seconds, any shape.
        t_star_s: The job's best solo time T* in seconds (> 0).
        weight: w_i.
        kappa: Time scale in multiples of T*.
        floor: f^min as a fraction of ``weight``; every value is clipped to [floor w, w].

    Returns:
        Utility values, the shape of ``jct_s``.

    Raises:
        ValueError: For an unknown ``kind``.
    """
    d = np.asarray(jct_s, dtype=np.float64) / max(t_star_s, 1e-9)
    if kind == "linear":
        v = 1.0 - (d - 1.0) / kappa
    elif kind == "sigmoid":
        z = np.clip((d - 1.0 - 0.5 * kappa) * (8.0 / kappa), -50.0, 50.0)
        v = 1.0 / (1.0 + np.exp(z))
    elif kind == "step":
        v = np.where(d <= kappa, 1.0, 0.0)
    elif kind == "constant":
        v = np.ones_like(d)
    else:
        raise ValueError(f"hadar utility={kind!r} is unknown; use one of {UTILITIES}")
    return np.asarray(weight * np.clip(v, floor, 1.0), dtype=np.float64)


def _greedy_cuts(
    sig: IntArray,
    p_sig: FloatArray,
    c_sig: FloatArray,
    pos: BoolArray,
    taus: IntArray,
    Wt: float,
    blocks: bool = True,
) -> tuple[IntArray, FloatArray, IntArray]:
    """Greedy schedules for several completion slots (the OASiS search of the dual subroutine).

    For completion slot tau, the slots ``<= tau`` with progress are taken in the rank order
    ``sig`` until their progress reaches ``Wt``. The cut (in rank) never grows with tau, so the
    rows are processed in blocks of growing size, each only as wide as its first row's cut.

    Args:
        sig: Slots by rank (cheapest per progress first), shape (S,).
        p_sig: Progress of each ranked slot, shape (S,).
        c_sig: Cost of each ranked slot, shape (S,).
        pos: Whether each ranked slot has progress, shape (S,).
        taus: Completion slots, ascending; the first reaches ``Wt``, shape (R,).
        Wt: Work to reach.
        blocks: Blocks of growing size (large searches); off: one block as wide as ``sig``.

    Returns:
        ``(k, cost, last)`` per completion slot, shape (R,): the rank of the last slot taken,
        the summed cost in rank order and the latest slot taken.
    """
    R = taus.size
    edges = [0]
    b = 2
    while blocks and b < R:
        edges.append(b)
        b *= 4
    edges.append(R)
    if blocks:
        heads = taus[edges[:-1]]
        mh = (sig[None, :] <= heads[:, None]) & pos[None, :]
        kh = (np.cumsum(np.where(mh, p_sig[None, :], 0.0), axis=1) >= Wt).argmax(axis=1)
    else:
        kh = np.array([sig.size - 1])
    k = np.zeros(R, dtype=np.int64)
    cost = np.zeros(R)
    last = np.zeros(R, dtype=np.int64)
    for h in range(len(edges) - 1):
        lo, hi, w = edges[h], edges[h + 1], int(kh[h]) + 1
        m = (sig[None, :w] <= taus[lo:hi, None]) & pos[None, :w]
        kk = (np.cumsum(np.where(m, p_sig[None, :w], 0.0), axis=1) >= Wt).argmax(axis=1)
        rows = np.arange(hi - lo)
        k[lo:hi] = kk
        cost[lo:hi] = np.cumsum(np.where(m, c_sig[None, :w], 0.0), axis=1)[rows, kk]
        last[lo:hi] = np.maximum.accumulate(np.where(m, sig[None, :w], -1), axis=1)[rows, kk]
    return k, cost, last


@dataclass
class HadarPlan:
    """One job's schedule found by the dual subroutine (slots relative to the current slot).

    Attributes:
        job: Job index.
        slots: Chosen slots, ascending, relative to the current slot (0 = now), shape (S,).
        progress: Estimated progress per chosen slot in work units, shape (S,).
        entry_slot: Relative slot of each placement entry, shape (E,).
        entry_node: Node of each entry, shape (E,).
        entry_gpus: GPUs of each entry, shape (E,).
        cost: Sum of the prices of the reserved GPU-slots (extrapolated to the whole work for a
            partial plan).
        utility: f_i at the estimated completion.
        mu: ``utility - cost`` (the job's dual payoff).
        finish_s: Estimated completion time, absolute seconds.
        partial: Whether the plan covers only part of the work (the job outlasts the window).
    """

    job: int
    slots: IntArray
    progress: FloatArray
    entry_slot: IntArray
    entry_node: IntArray
    entry_gpus: IntArray
    cost: float
    utility: float
    mu: float
    finish_s: float
    partial: bool = False


@dataclass
class _JobInfo:
    """Per-job planning constants (computed at first sight)."""

    n: int
    t_star: float
    rate: FloatArray  # (N,) packed isolated rate x CPU/mem factor per node, 0 = ineligible
    rate_spread: FloatArray  # (N,) the same when the gang is spread over extra nodes
    restart_s: float
    arrival: float


@dataclass
class _SlotChoice:
    """Per-slot cheapest placement of one job (internal to the dual subroutine)."""

    cost: FloatArray  # (H,)
    prog: FloatArray  # (H,) 0 = infeasible
    kind: IntArray  # (He,) 0 multi-node, 1 single node, 2 reference placement
    level: IntArray  # (He,)
    single: IntArray  # (He,) node of the single-node candidate
    take: IntArray  # (Lv, P, He) GPUs per visited position of the multi candidates
    tnode: IntArray  # (Lv, P, He) node at each visited position
    ref_nodes: IntArray
    ref_gpus: IntArray
    He: int
    free: IntArray  # (N, He) free GPUs per node and slot (the job's own plan released)
    price: FloatArray  # (N, He)
