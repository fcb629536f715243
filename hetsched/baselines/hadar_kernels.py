"""Compiled kernels of Hadar's dual subroutine (optional: used when numba is installed).

The vectorised numpy code of :mod:`hetsched.baselines.hadar_dual` (with its pieces in
:mod:`hetsched.baselines.hadar_candidates` and :mod:`hetsched.baselines.hadar_schedule`) is the
reference: it is what the docstrings specify and what runs without numba. On ``sia_64``
(11 nodes) one subroutine call is several hundred numpy calls on arrays of a few hundred
elements, so its time is mostly per-call overhead, and busy rounds make hundreds of calls
(re-plans of waiting jobs, backfilling). Two compiled calls replace it:

* ``slots`` (:func:`hadar_kernel_place.slot_choices_dense`): the cheapest placement per unit
  of progress in every slot for every speed floor, with the reference placement and the
  restart discount;
* ``best`` (:func:`hadar_kernel_search.best_plan`): for every floor, the greedy search over
  completion slots (``schedule``), the utility, the stabilised placement entries (``plan``),
  and the floor with the best payoff.

The kernels perform the same IEEE operations in the same order as the reference (sequential
sums where numpy sums sequentially, numpy's pairwise order where it sums pairwise, a stable
sort), so their plans are identical bit for bit; ``tests/baselines/test_hadar.py`` checks every
subroutine call of random runs against both numpy forms, and the decision fingerprint. They
cover the ``linear``, ``step`` and ``constant`` utilities (``sigmoid`` uses numpy's ``exp``,
which a compiled ``exp`` may not match in the last bit) and windows of two or more computed
columns (numpy sums a single column pairwise).

numba ships in the ``rl`` extra. ``HETSCHED_NUMBA=0`` in the environment selects the numpy path
(the same switch as :mod:`hetsched.envs.kernels`); so does a missing or broken numba. The
kernels are compiled on first use and cached on disk (numba's ``cache=True``), so only the first
process after an install or a change of their source pays the compile time (tens of seconds on
the 2-core development machine); later processes load them in well under a second.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from hetsched.baselines import hadar_kernel_place as _place
from hetsched.baselines import hadar_kernel_search as _search
from hetsched.baselines.hadar_plan import FloatArray, HadarPlan, IntArray, _JobInfo
from hetsched.numba_support import jit, numba_module

if TYPE_CHECKING:
    from hetsched.baselines.hadar_dual import HadarDual

#: Utility shapes the kernels evaluate themselves (``sigmoid`` needs numpy's ``exp``).
UTILITY_CODES = {"linear": 0, "step": 1, "constant": 2}


_compiled: dict[str, Any] = {}
_KERNELS = {
    "schedule": _search.schedule_search,
    "slots": _place.slot_choices_dense,
    "plan": _place.plan_entries,
    "best": _search.best_plan,
}


def get(name: str) -> Any | None:
    """The compiled kernel ``name`` (``"schedule"``, ``"slots"``, ``"plan"`` or ``"best"``), or
    None without numba."""
    if numba_module() is None:
        return None
    return compiled(name)


def compiled(name: str) -> Any:
    """The compiled kernel ``name``; only call it when :func:`numba_module` is not None.

    A kernel's helpers are globals of its module, looked up when it compiles: they are replaced
    by their compiled forms first.
    """
    fn = _compiled.get(name)
    if fn is not None:
        return fn
    nb = numba_module()
    assert nb is not None, "compiled() needs numba: check numba_module() first"
    if "rate" not in _compiled:
        _compiled["rate"] = _place._rate_of = jit(nb, _place._rate_of_py)
        _compiled["block"] = _place._block_sum = jit(nb, _place._block_sum_py)
        psum = jit(nb, _place._pairwise_sum_py)
        _compiled["psum"] = _place._pairwise_sum = _search._pairwise_sum = psum
        _compiled["utility"] = _search._utility = jit(nb, _search._utility_py)
    if name == "best":
        _search._schedule = compiled("schedule")
        _search._plan = compiled("plan")
    fn = jit(nb, _KERNELS[name])
    _compiled[name] = fn
    return fn


def compiled_plan(
    pol: HadarDual,
    j: int,
    info: _JobInfo,
    ref: tuple[IntArray, IntArray] | None,
    W: float,
    levels: FloatArray,
    free: IntArray,
    price: FloatArray,
    order: IntArray,
) -> HadarPlan | None:
    """``pol.dual_subroutine(j, ...)`` by the ``slots`` and ``best`` kernels (the same plan).

    Args:
        pol: The policy (its settings, node sizes and current time).
        j: Job index. info: its constants. ref: its current placement, if any. W: work to plan.
        levels: The job's speed floors, fastest first, shape (Lv,) (Lv >= 1).
        free, price, order: The window's computed columns (``HadarDual._window``), shape
            (N, He) with He >= 2.

    Returns:
        The best plan, or None when no slot of the window can run the job.
    """
    price = np.ascontiguousarray(price)  # one array layout: one compiled specialisation
    order = np.ascontiguousarray(order)
    z = np.zeros(0, dtype=np.int64)
    ref_n, ref_g = (ref[0], ref[1]) if ref is not None and ref[0].size else (z, z)
    D = pol.round_s
    disc = max(0.0, 1.0 - info.restart_s / D) if pol.switch_aware else 1.0
    take, _, b_cost, b_prog, kind, level, single_node, rn, rg, rcnt = compiled("slots")(
        info.rate,
        info.rate_spread,
        pol._size,
        levels,
        free,
        price,
        order,
        info.n,
        pol._cmax,
        D,
        disc,
        pol.sticky,
        np.ascontiguousarray(ref_n, dtype=np.int64),
        np.ascontiguousarray(ref_g, dtype=np.int64),
        pol.horizon,
    )
    fl, slots, prog, e_s, e_n, e_g, cost, util, mu, finish, partial = compiled("best")(
        b_cost,
        b_prog,
        kind,
        level,
        single_node,
        rn,
        rg,
        rcnt,
        take,
        order,
        free,
        price,
        W,
        pol.now_time,
        info.arrival,
        D,
        info.t_star,
        UTILITY_CODES[pol.utility],
        pol.weight,
        pol.kappa,
        pol.utility_floor,
        info.n,
        pol._size,
        info.rate,
        info.rate_spread,
        disc,
    )
    if fl < 0:
        return None
    return HadarPlan(
        job=j,
        slots=slots,
        progress=prog,
        entry_slot=e_s,
        entry_node=e_n,
        entry_gpus=e_g,
        cost=float(cost),
        utility=float(util),
        mu=float(mu),
        finish_s=float(finish),
        partial=bool(partial),
    )
