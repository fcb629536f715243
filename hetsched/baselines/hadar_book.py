"""Hadar's committed plans: reservations, release, restore and payoffs (see
:mod:`hetsched.baselines.hadar`).

A mixin of :class:`hetsched.baselines.hadar.Hadar` over its price window
(:class:`~hetsched.baselines.hadar_prices.HadarPrices`). A committed plan is stored in absolute
slot numbers and reserves its GPUs in the window (raising prices); releasing it frees the GPUs
it holds from the current slot on and records that prices fell. All stored plans are also kept
concatenated (:meth:`HadarBook._tables`), rebuilt only after a plan changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetsched.baselines.hadar_kernel_search import _utility_py as scalar_utility
from hetsched.baselines.hadar_kernels import UTILITY_CODES
from hetsched.baselines.hadar_plan import (
    BoolArray,
    FloatArray,
    HadarPlan,
    IntArray,
    PlanTables,
    utility_value,
)
from hetsched.baselines.hadar_prices import HadarPrices


@dataclass
class _Stored:
    """A committed plan in absolute slot numbers."""

    slot: IntArray  # (E,) absolute slot of each entry
    node: IntArray
    gpus: IntArray
    pslot: IntArray  # (S,) absolute slots
    pprog: FloatArray  # (S,) estimated progress
    finish_s: float
    epoch: int


class HadarBook(HadarPrices):
    """Plan bookkeeping of :class:`~hetsched.baselines.hadar.Hadar` (a mixin)."""

    utility: str
    kappa: float
    _plans: dict[int, _Stored]
    _accepted: BoolArray

    def _commit(self, plan: HadarPlan) -> None:
        """Store a plan of the dual subroutine and reserve its GPUs; the job is accepted."""
        rel = plan.entry_slot
        self._reserve(rel, plan.entry_node, plan.entry_gpus, +1)
        self._plans[plan.job] = _Stored(
            slot=rel + self.now_slot,
            node=plan.entry_node,
            gpus=plan.entry_gpus,
            pslot=plan.slots + self.now_slot,
            pprog=plan.progress,
            finish_s=plan.finish_s,
            epoch=self._epoch,
        )
        self._accepted[plan.job] = True

    def _release(self, j: int) -> _Stored | None:
        """Remove job j's reservations from the current slot on; return the old plan."""
        old = self._plans.pop(j, None)
        if old is None:
            return None
        fut = old.slot >= self.now_slot
        if fut.any():
            self._reserve(old.slot[fut] - self.now_slot, old.node[fut], old.gpus[fut], -1)
            later = old.slot[fut] > self.now_slot
            if later.any():
                self._bump(int(old.slot[fut][later].min()))  # future prices fell
        self._table = None
        return old

    def _plan_cost_now(self, old: _Stored) -> float:
        """Cost of a stored (released) plan at the current prices."""
        self._refresh_prices()
        fut = old.slot >= self.now_slot
        rel = old.slot[fut] - self.now_slot
        return float((old.gpus[fut] * self._price[old.node[fut], rel]).sum())

    def _restore(self, j: int, old: _Stored) -> None:
        """Commit again what is left, from the current slot on, of a released plan of job j."""
        fut = old.slot >= self.now_slot
        self._reserve(old.slot[fut] - self.now_slot, old.node[fut], old.gpus[fut], +1)
        keep = old.pslot >= self.now_slot
        self._plans[j] = _Stored(
            old.slot[fut],
            old.node[fut],
            old.gpus[fut],
            old.pslot[keep],
            old.pprog[keep],
            old.finish_s,
            self._epoch,
        )

    def _tables(self) -> PlanTables:
        """All stored plans concatenated (cached until a plan changes).

        Returns:
            ``(job, slot, node, gpus)`` per placement entry (absolute slots), then
            ``(job, slot, progress)`` per planned slot.
        """
        if self._table is None:
            z = np.zeros(0, dtype=np.int64)
            if not self._plans:
                self._table = (z, z, z, z, z, z, np.zeros(0))
            else:
                jobs = np.fromiter(self._plans.keys(), dtype=np.int64, count=len(self._plans))
                plans = list(self._plans.values())
                e_sz = np.array([p.slot.size for p in plans])
                p_sz = np.array([p.pslot.size for p in plans])
                self._table = (
                    np.repeat(jobs, e_sz),
                    np.concatenate([p.slot for p in plans]),
                    np.concatenate([p.node for p in plans]),
                    np.concatenate([p.gpus for p in plans]),
                    np.repeat(jobs, p_sz),
                    np.concatenate([p.pslot for p in plans]),
                    np.concatenate([p.pprog for p in plans]),
                )
        return self._table

    def _stored_mu(self, j: int, old: _Stored) -> float:
        """Payoff ``f - cost`` of a released stored plan at the current prices."""
        info = self._info[j]
        jct = old.finish_s - info.arrival
        code = UTILITY_CODES.get(self.utility)
        if code is not None:  # scalar arithmetic: the same IEEE operations as utility_value
            f_old = scalar_utility(
                code, jct, info.t_star, self.weight, self.kappa, self.utility_floor
            )
        else:
            f_old = float(
                utility_value(
                    self.utility,
                    jct,
                    info.t_star,
                    weight=self.weight,
                    kappa=self.kappa,
                    floor=self.utility_floor,
                )
            )
        return f_old - self._plan_cost_now(old)
