"""The env's engine round as compiled calls (optional: used when numba is installed).

:meth:`Simulator.advance <hetsched.sim.stepping.RoundStepper.advance>` is the reference: the
engine (:mod:`hetsched.sim`) stays numpy-only, and :meth:`EngineRound.advance` reproduces its
numbers bit for bit (the same IEEE operations in the same order) for the rounds the env hands
it:

* a trusted allocation (built by the env's own checked placement, not validated again);
* no space sharing, no node failures, no periodic checkpoints, no GPU type outside the
  catalogue;
* GPU counts within the engine's signature table and node co-runner counts within its
  interference table.

Any other call returns None before touching the simulator, and the caller runs the engine.

A round is two compiled calls, with numpy between and after them:

1. ``prepare``: the per-job GPU, CPU and memory totals and, per entry, the CPU ratio clamped
   at 0, the model's CPU exponent and the memory factor (``RateModel._resource_ratios`` and
   :meth:`ThroughputModel.phi <hetsched.sim.throughput.ThroughputModel.phi>` less its power);
2. ``np.power`` of the CPU ratios, by numpy as in the engine (numba's ``pow`` may round
   differently);
3. ``round``: grouping by job, rates and placement hashes, restarts and preemptions, the number
   of rounds at once, progress, accounting, the jobs-in-system terms, status updates, the
   timeline's GPUs per type, the idle check and the next round boundary's admissions;
4. the sums of the jobs-in-system terms and of the allocation's CPUs and memory, by numpy
   (``ndarray.sum``'s pairwise summation).

The numbers that a round does not change stay in the simulator's own code: a stalled run is
reported by its idle check, a finished one by ``advance``. :meth:`EngineRound.usage` is the
start of the env's next round (free resources per node, running and waiting jobs) in one
compiled call.

The kernels' sources are in :mod:`hetsched.envs.kernels_engine_src`. Like
:mod:`hetsched.envs.kernels`, they compile on first use and are cached on disk
(about 7 s once on the loaded 2-core development machine; later processes load them).

``tests/envs/test_kernels_engine.py`` runs every compiled round of rolled-out env episodes
against the engine on a copy of the simulator and compares every state array, and steps envs
with and without the compiled round in lockstep.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from hetsched.envs.kernels_engine_src import _DONE as _DONE
from hetsched.envs.kernels_engine_src import (
    _FIN,
    _ISCR_ROWS,
    _MAX_IDLE,
    _PRE,
    _RESTARTED,
    _RUN,
    _prepare_py,
    _round_py,
    _usage_py,
)
from hetsched.envs.kernels_engine_src import _PENDING as _PENDING
from hetsched.envs.kernels_engine_src import _RUNNING as _RUNNING
from hetsched.numba_support import jit, numba_module
from hetsched.sim.state import RoundRecord, _positive_seconds

if TYPE_CHECKING:
    from hetsched.sim.allocation import Allocation
    from hetsched.sim.engine import Simulator

_compiled: dict[str, Any] = {}


def available() -> bool:
    """Whether the compiled round runs: numba importable and not disabled.

    The first time it is true it builds the kernels' dispatchers (numba compiles them on their
    first call, or loads them from its on-disk cache), so a caller that saw True keeps them
    even if ``HETSCHED_NUMBA`` changes later.
    """
    nb = numba_module()
    if nb is None:
        return False
    if not _compiled:
        _compiled["prepare"] = jit(nb, _prepare_py)
        _compiled["round"] = jit(nb, _round_py)
        _compiled["usage"] = jit(nb, _usage_py)
    return True


def _kernels() -> tuple[Any, Any, Any]:
    """The compiled ``prepare``, ``round`` and ``usage`` kernels (built here on first use in a
    process, e.g. a rollout worker that received an env whose parent saw :func:`available`)."""
    if not _compiled and not available():
        raise RuntimeError("kernels_engine needs numba: check kernels_engine.available() first")
    return _compiled["prepare"], _compiled["round"], _compiled["usage"]


class EngineRound:
    """The compiled round for one simulator: its constant tables and scratch arrays.

    Args:
        sim: The simulator whose rounds it runs (its workload, cluster and throughput model
            are fixed for the simulator's life; ``reset`` keeps them).
    """

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        _kernels()  # raises without the compiled kernels
        wl, cl, tm = sim.workload, sim.cluster, sim.tm
        J, N = wl.num_jobs, cl.num_nodes
        self.K = K = int(sim.gpu_s_by_type.shape[1])
        self.J = J
        # Per-job constants (model, CPUs and memory per GPU) and arrival times.
        self.model = np.ascontiguousarray(wl.model, dtype=np.int64)
        self.per_gpu = np.ascontiguousarray(np.stack([wl.cpu_per_gpu, wl.mem_per_gpu]), np.float64)
        self.arrival = np.ascontiguousarray(wl.arrival, dtype=np.float64)
        # Per node: GPU type and GPUs.
        self.nodes = np.ascontiguousarray(np.stack([cl.node_type, cl.node_gpus]), dtype=np.int64)
        self.node_res = (
            np.ascontiguousarray(cl.node_gpus, dtype=np.int64),
            np.ascontiguousarray(cl.node_cpus, dtype=np.float64),
            np.ascontiguousarray(cl.node_mem, dtype=np.float64),
        )
        # Per model: CPU exponent, CPU ceiling, restart delay (s).
        self.per_model = np.ascontiguousarray(
            np.stack([tm.cpu_alpha, tm.cpu_ceiling, tm.restart_delay_s]), dtype=np.float64
        )
        self.iso_int = np.ascontiguousarray(tm._iso_int, dtype=np.float64)
        self.max_count = int(tm.max_count)
        # ThroughputModel.phi's memory constants, by the same Python float operations.
        self.mem = np.array(
            [tm.mem_floor - 1e-12, tm.mem_floor, tm.mem_rho, 1.0 - tm.mem_rho,
             max(1.0 - tm.mem_floor, 1e-9)], dtype=np.float64,
        )  # fmt: skip
        # Scratch, left as found by every call: per-job sums and rows, per-node counts.
        self.sums = np.zeros((3, J))
        self.ints = np.full(J + N, -1, dtype=np.int64)
        self.ints[J:] = 0
        # Per entry (grown with the allocation): CPU ratio, CPU exponent, memory factor; row.
        self.ent = np.zeros((3, 64))
        self.erow = np.zeros(64, dtype=np.int64)
        self.keep_e = np.zeros(64, dtype=np.bool_)
        # Per running job: scratch rows (see _round_py) and the running, finished and
        # restarted jobs; per-job floats; the timeline's GPUs per type and the jobs-in-system
        # terms.
        self.iscr = np.zeros((_ISCR_ROWS, J), dtype=np.int64)
        self.sig_scr = np.zeros(J, dtype=np.uint64)
        self.fscr = np.zeros((3, J))
        self.by_type = np.zeros(K)
        self.in_sys = np.zeros(J)
        self._round_s = float("nan")  # the last round length checked

    def advance(self, alloc: Allocation, round_s: float, max_rounds: int) -> RoundRecord | None:
        """:meth:`Simulator.advance` of a trusted allocation, compiled; None when not covered.

        Args:
            alloc: The round's allocation (the env's own: not validated).
            round_s: Round length (s).
            max_rounds: As :meth:`Simulator.advance`'s.

        Returns:
            The step's :class:`RoundRecord`, or None (nothing changed) when the call is outside
            the compiled case; the caller then runs :meth:`Simulator.advance`.

        Raises:
            SimulationStalledError: As :meth:`Simulator.advance`.
        """
        sim = self.sim
        if (
            sim.failures is not None
            or sim.config.checkpoint is not None
            or sim._speed is not None  # GPU types outside the catalogue (not in the envs)
            or sim.done  # the engine raises its error
        ):
            return None
        prepare, round_kernel, _ = _kernels()
        keep = sim._keep_by_count
        E = alloc.size
        if self.keep_e.shape[0] < E:  # grow the per-entry buffers
            self.ent = np.zeros((3, 2 * E))
            self.erow = np.zeros(2 * E, dtype=np.int64)
            self.keep_e = np.zeros(2 * E, dtype=np.bool_)
        ent = self.ent
        state = prepare(
            alloc.job, alloc.node, alloc.gpus, alloc.cpus, alloc.mem, alloc.share,
            self.model, self.per_gpu, self.per_model, self.mem, self.sums, self.ints,
            keep.shape[0], sim._sig_table.shape[1], ent,
        )  # fmt: skip
        if state < 0:  # space sharing, or counts outside the engine's tables
            return None
        if round_s != self._round_s:
            self._round_s = _positive_seconds(round_s, "round_s")
        rs = self._round_s
        pc = np.power(ent[0, :E], ent[1, :E])  # numpy's pow, as in ThroughputModel.phi
        t0 = sim.time
        n_active = sim._next_arrival - sim._n_finished
        last = np.zeros(self.J)  # a fresh array: earlier snapshots keep theirs
        cfg = sim.config
        R, n_keep, n_fin, n_restart, n_rounds, busy, stalled, active_lo, next_arr, idle, dt, t1 = (
            round_kernel(
                alloc.job, alloc.node, alloc.gpus, pc, ent, state == 1,
                self.model, self.nodes, self.per_model, self.iso_int, self.max_count,
                keep, sim._sig_table, self.arrival,
                sim.status, sim.remaining, sim.attained_gpu_s, sim.run_s, sim.start_time,
                sim.finish_time, sim.restarts, sim.preemptions, sim.delay_left,
                sim.gpu_s_by_type, sim.effective_gpu_s, sim.sig, sim._running,
                self.ints, self.iscr, self.sig_scr, self.fscr, self.erow,
                last, self.keep_e, self.by_type, self.in_sys,
                t0, rs, max_rounds, float(cfg.max_time_s), sim._next_arrival, n_active,
                sim._active_lo, sim._idle_rounds, min(cfg.max_idle_rounds, _MAX_IDLE),
            )
        )  # fmt: skip
        jobs = self.iscr
        fin_idx = jobs[_FIN, :n_fin].copy()
        sim.last_rate = last
        sim._running = jobs[_RUN, :n_keep].copy()
        sim._n_finished += n_fin
        sim.current = alloc.select(self.keep_e[:E]) if n_fin else alloc
        add = np.add.reduce  # ndarray.sum's reduction (the same pairwise sums)
        if cfg.record_timeline:
            present = sim._types_present
            # np.bincount of an empty allocation gives integer zeros: the same row values.
            per_type = self.by_type[present].tolist() if E else [0] * present.shape[0]
            sim._timeline.append(
                (t0, dt, float(busy), float(R), float(n_active - R),
                 float(add(alloc.cpus)), float(add(alloc.mem)), *per_type)
            )  # fmt: skip
        if stalled:  # the engine's idle check raises (nothing further changed)
            sim._check_idle(R, n_active, n_rounds)
        sim._idle_rounds = idle
        sim.time = t1
        sim.round_index += n_rounds
        sim._active_lo = active_lo
        sim._next_arrival = next_arr
        return RoundRecord(
            t0=t0,
            dt=dt,
            rounds=n_rounds,
            completed=fin_idx,
            restarted=jobs[_RESTARTED, :n_restart].copy(),
            busy_gpus=busy,
            jobs_in_system_s=float(add(self.in_sys[:n_active])),
        )

    def usage(
        self, cur: Allocation
    ) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64], NDArray[np.int64], int,
               NDArray[np.int64]] | None:  # fmt: skip
        """What a new env round starts from, compiled: free resources, entries per node, running
        jobs and waiting jobs.

        The same numbers as the numpy code of ``RoundFlow._start_round`` (free GPUs, CPUs and
        memory per node: capacity less the ``np.bincount`` of ``cur``; entries per node; the
        number of distinct jobs of ``cur``) and :meth:`Simulator.pending_jobs`.

        Args:
            cur: The simulator's current allocation.

        Returns:
            ``(free_g, free_c, free_m, count, n_jobs, pending)`` (fresh arrays; shapes (N,) and
            (P,)), or None when ``cur`` shares GPUs (the caller's numpy code handles that).
        """
        sim = self.sim
        N = self.node_res[0].shape[0]
        free_g = np.empty(N, dtype=np.int64)
        free_c = np.empty(N)
        free_m = np.empty(N)
        count = np.empty(N, dtype=np.int64)
        pend = self.iscr[_PRE]  # scratch between rounds
        n_jobs, n_pend = _kernels()[2](
            cur.job, cur.node, cur.gpus, cur.cpus, cur.mem, cur.share, *self.node_res,
            self.ints, free_g, free_c, free_m, count, sim.status, sim._active_lo,
            sim._next_arrival, pend,
        )  # fmt: skip
        if n_jobs < 0:
            return None
        return free_g, free_c, free_m, count, n_jobs, pend[:n_pend].copy()


def engine_round(sim: Simulator) -> EngineRound:
    """The :class:`EngineRound` of ``sim`` (built on first use and kept on it)."""
    er: EngineRound | None = sim.__dict__.get("_engine_round")
    if er is None:
        er = EngineRound(sim)
        sim.__dict__["_engine_round"] = er
    return er


def fast_advance(
    sim: Simulator, alloc: Allocation, round_s: float, max_rounds: int
) -> RoundRecord | None:
    """The compiled round of ``sim`` (built on first use and kept on it), or None.

    See :meth:`EngineRound.advance`.
    """
    return engine_round(sim).advance(alloc, round_s, max_rounds)
