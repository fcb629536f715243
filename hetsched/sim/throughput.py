"""Throughput model: how fast a job runs on a given allocation.

A job of model ``m`` holding ``n`` GPUs whose slowest type is ``k``, given ``c`` CPU cores and
``g`` GiB of memory, co-located with a set ``S`` of other jobs, progresses at

    rate = T[m, k, n, spread] * phi_m(c / c_req, g / g_req) * prod_{l in S} (1 - iota)

in **work units per second** (each model states its unit in :attr:`ThroughputModel.work_unit`:
``steps`` for Gavel job types, ``samples`` (goodput in samples/s at the smallest validated batch
size) for Sia/Pollux applications).

Modelling choices and their sources (the table itself is built by ``scripts/build_profiles.py``
from ``shared/data`` and shipped as ``hetsched/data/profiles/throughput_table.npz``; see
``hetsched/data/SOURCES.md``):

* **Isolated throughput** ``T[m, k, n, spread]`` -- measured per model, GPU type and GPU count.
  Gavel's oracle (MIT) gives steps/s for 26 job types on K80/P100/V100 at 1/2/4/8 GPUs,
  consolidated and unconsolidated (``spread``). Sia's placement profiles (SOSP'23 artifact; the
  T4 files are Pollux's Apache-2.0 profiles) give step time per placement and local batch on
  T4, V100, A100, Quadro RTX 6000 and RTX 2080 Ti; the table stores the Pollux goodput
  (throughput x statistical efficiency) at the best batch size. Counts between measured levels
  are interpolated linearly in log-log space; entries outside the measured range are projected
  (see ``measured``).
* **Spread placement** -- a job on more nodes than it needs (``spread=True``) runs at the
  unconsolidated throughput (Gavel) or at the multi-node placement's throughput (Sia).
* **Mixed GPU types** -- a job whose tasks sit on several types runs at the pace of the slowest
  (bulk-synchronous data parallelism, Hadar's ``sync`` rule).
* **CPU / memory sensitivity** (fungible resources) -- parametric, as in ``maifs.md`` §6, since
  no CPU x memory table ships: ``phi_cpu = min(ceiling, (c/c_req) ** alpha)``; memory below the
  request degrades linearly from 1 to ``mem_rho`` at ``mem_floor`` x request, below which the job
  cannot run. ``alpha`` is per model class (0 insensitive, 0.3 moderate, 0.7 data-loading bound;
  Synergy's measurements motivate the shape).
* **Interference** -- two jobs sharing the same GPUs (space sharing) slow each other by the
  pairwise factors of Gavel's co-location measurements: ``iota = clip(1 - T_pair/T_iso, 0, 0.95)``;
  ``nan`` marks pairs that cannot be co-located. Jobs on different GPUs of one node slow each other
  by ``node_iota`` per co-runner (default 0.02).
* **Restarts** -- a job whose placement changes pays ``restart_delay_s[m]`` seconds without
  progress (Sia's simulated restart delays).
* **Reproduction modes** -- :data:`REPRODUCTION` lists, per paper, the effects above that its
  simulator lacks; :func:`for_reproduction` returns the model with them off (the engine applies
  it for ``SimConfig.reproduction``).
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hetsched.sim.errors import HetschedError

if TYPE_CHECKING:
    from hetsched.sim.cluster import Cluster

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

#: Default location of the shipped table inside the package.
DEFAULT_TABLE = "profiles/throughput_table.npz"


@dataclass
class ThroughputModel:
    """Vectorised lookups of job throughput.

    Attributes:
        models: Model (job type) names, index ``m``. Shape (M,).
        gpu_types: GPU type names (catalogue order), index ``k``. Shape (K,).
        count_levels: GPU counts at which ``tput`` is tabulated, powers of two starting at 1.
            Shape (L,).
        tput: Isolated throughput in work units/s, shape (M, K, L, 2); last axis 0 = packed on the
            fewest nodes, 1 = spread over more nodes than needed. 0 means "cannot run".
        measured: Whether each ``tput`` entry comes from a measurement (True) or a projection.
        pair_iota: Slowdown of model a when sharing its GPUs with model b on type k, shape
            (M, M, K), values in [0, 0.95]; NaN = the pair cannot share a GPU.
        cpu_alpha: CPU-sensitivity exponent per model, shape (M,).
        cpu_ceiling: Maximum speed-up from extra CPU per model, shape (M,).
        restart_delay_s: Checkpoint-restart delay per model in seconds, shape (M,).
        family: Data source family per model (``"gavel"`` or ``"sia"``), shape (M,).
        work_unit: Unit of work per model (``"steps"`` or ``"samples"``), shape (M,).
        default_work: Work to completion of a model when the workload does not give a duration
            (Sia/Pollux apps: ``max_epochs`` epochs), in work units; NaN if undefined. (M,).
        mem_floor: Memory below ``mem_floor`` x request makes a job unable to run.
        mem_rho: Relative speed at the memory floor.
        node_iota: Slowdown per co-runner on the same node (different GPUs).
        sources: Free-text provenance, one line per source.
    """

    models: tuple[str, ...]
    gpu_types: tuple[str, ...]
    count_levels: IntArray
    tput: FloatArray
    measured: BoolArray
    pair_iota: FloatArray
    cpu_alpha: FloatArray
    cpu_ceiling: FloatArray
    restart_delay_s: FloatArray
    family: tuple[str, ...]
    work_unit: tuple[str, ...]
    default_work: FloatArray = field(default_factory=lambda: np.zeros(0))
    mem_floor: float = 0.5
    mem_rho: float = 0.1
    node_iota: float = 0.02
    sources: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        M, K, L = len(self.models), len(self.gpu_types), len(self.count_levels)
        self.count_levels = np.asarray(self.count_levels, dtype=np.int64)
        self.tput = np.asarray(self.tput, dtype=np.float64)
        self.measured = np.asarray(self.measured, dtype=bool)
        self.pair_iota = np.asarray(self.pair_iota, dtype=np.float64)
        self.cpu_alpha = np.asarray(self.cpu_alpha, dtype=np.float64)
        self.cpu_ceiling = np.asarray(self.cpu_ceiling, dtype=np.float64)
        self.restart_delay_s = np.asarray(self.restart_delay_s, dtype=np.float64)
        if len(self.default_work) == 0:
            self.default_work = np.full(M, np.nan)
        self.default_work = np.asarray(self.default_work, dtype=np.float64)
        expect = {
            "tput": (self.tput.shape, (M, K, L, 2)),
            "measured": (self.measured.shape, (M, K, L, 2)),
            "pair_iota": (self.pair_iota.shape, (M, M, K)),
            "cpu_alpha": (self.cpu_alpha.shape, (M,)),
            "cpu_ceiling": (self.cpu_ceiling.shape, (M,)),
            "restart_delay_s": (self.restart_delay_s.shape, (M,)),
            "default_work": (self.default_work.shape, (M,)),
        }
        for name, (got, want) in expect.items():
            if got != want:
                raise HetschedError(f"throughput table field {name!r} has shape {got}, want {want}")
        if len(self.family) != M or len(self.work_unit) != M:
            raise HetschedError("throughput table: family/work_unit must have one entry per model")
        if not np.all(self.count_levels == 2 ** np.arange(L)):
            raise HetschedError(
                f"throughput table count_levels must be 1, 2, 4, ...; got {self.count_levels}"
            )
        for name in ("cpu_alpha", "cpu_ceiling"):
            v = getattr(self, name)
            if np.any(~np.isfinite(v)) or np.any(v < 0):
                i = int(np.flatnonzero(~np.isfinite(v) | (v < 0))[0])
                raise HetschedError(
                    f"throughput table field {name!r}: model {self.models[i]!r} has {v[i]}; "
                    "it must be finite and >= 0"
                )
        if np.any(~np.isfinite(self.tput)) or np.any(self.tput < 0):
            raise HetschedError("throughput table has negative or non-finite throughputs")
        self._model_index = {name: i for i, name in enumerate(self.models)}
        self._type_index = {name: i for i, name in enumerate(self.gpu_types)}
        # Padded copy so that interpolation at the top level can read index L safely.
        self._tput_pad = np.concatenate([self.tput, np.zeros((M, K, 1, 2))], axis=2)
        self._log_tput = np.log(np.where(self._tput_pad > 0, self._tput_pad, 1.0))
        # Integer GPU counts 0..max_count, and max_count + 1 standing for "too many" (0), looked
        # up directly: the engine asks for integer counts every round.
        C = self.max_count + 2
        grid = np.ix_(np.arange(M), np.arange(K), np.arange(C), np.arange(2))
        self._iso_int = self._isolated_formula(*grid)
        self._iso_int[:, :, C - 1, :] = 0.0

    # ------------------------------------------------------------------ lookups
    @property
    def num_models(self) -> int:
        """Number of models M."""
        return len(self.models)

    @property
    def max_count(self) -> int:
        """Largest tabulated GPU count."""
        return int(self.count_levels[-1])

    def model_index(self, name: str, *, where: str = "") -> int:
        """Index of a model name; raises a clear error naming the known models."""
        try:
            return self._model_index[name]
        except KeyError:
            loc = f" in {where}" if where else ""
            raise HetschedError(
                f"unknown model {name!r}{loc}; known models: {', '.join(self.models)}"
            ) from None

    def type_index(self, name: str) -> int:
        """Index of a canonical GPU type name in :attr:`gpu_types`."""
        try:
            return self._type_index[name]
        except KeyError:
            raise HetschedError(
                f"GPU type {name!r} is not in the throughput table ({', '.join(self.gpu_types)})"
            ) from None

    def isolated(
        self,
        model: ArrayLike,
        gpu_type: ArrayLike,
        n_gpus: ArrayLike,
        spread: ArrayLike = False,
    ) -> FloatArray:
        """Isolated throughput (work units/s) of ``model`` on ``n_gpus`` GPUs of ``gpu_type``.

        All arguments broadcast against each other. Non-power-of-two counts are interpolated
        linearly in log-log space between the neighbouring levels; if either neighbour cannot run
        (0), the result is 0. Counts above :attr:`max_count` or below 1 give 0.

        Args:
            model: Model indices.
            gpu_type: GPU type indices.
            n_gpus: GPU counts (>= 1).
            spread: True where the job is placed on more nodes than it needs.

        Returns:
            Throughput array of the broadcast shape.
        """
        n_arr = np.asarray(n_gpus)
        if n_arr.dtype.kind in "iub":  # integer counts: one table lookup
            idx = np.maximum(np.minimum(n_arr, self.max_count + 1), 0)  # (np.clip is slower)
            si = np.asarray(spread).astype(np.int64)
            return np.asarray(
                self._iso_int[np.asarray(model), np.asarray(gpu_type), idx, si], dtype=np.float64
            )
        return self._isolated_formula(model, gpu_type, n_arr, spread)

    def _isolated_formula(
        self, model: ArrayLike, gpu_type: ArrayLike, n_gpus: ArrayLike, spread: ArrayLike
    ) -> FloatArray:
        """:meth:`isolated` by log-log interpolation between the tabulated power-of-two levels."""
        m, k, n, s = np.broadcast_arrays(
            np.asarray(model), np.asarray(gpu_type), np.asarray(n_gpus), np.asarray(spread)
        )
        nf = np.maximum(n.astype(np.float64), 1.0)
        lg = np.log2(nf)
        lo = np.floor(lg + 1e-9).astype(np.int64)
        lo = np.clip(lo, 0, len(self.count_levels))
        frac = lg - lo
        si = s.astype(np.int64)
        t_lo = self._tput_pad[m, k, lo, si]
        exact = frac < 1e-9
        hi = np.minimum(lo + 1, len(self.count_levels))
        t_hi = self._tput_pad[m, k, hi, si]
        interp = np.exp(
            (1.0 - frac) * self._log_tput[m, k, lo, si] + frac * self._log_tput[m, k, hi, si]
        )
        out = np.where(exact, t_lo, np.where((t_lo > 0) & (t_hi > 0), interp, 0.0))
        out = np.where((n >= 1) & (n <= self.max_count), out, 0.0)
        return np.asarray(out, dtype=np.float64)

    def phi(
        self,
        model: ArrayLike,
        cpu_ratio: ArrayLike,
        mem_ratio: ArrayLike,
    ) -> FloatArray:
        """CPU/memory sensitivity factor; equals 1 at the requested amounts.

        Args:
            model: Model indices.
            cpu_ratio: Given / requested CPU cores (per GPU), >= 0.
            mem_ratio: Given / requested memory (per GPU), >= 0.

        Returns:
            Multiplicative speed factor; 0 where memory is below the floor.
        """
        m = np.asarray(model)
        c = np.maximum(np.asarray(cpu_ratio, dtype=np.float64), 0.0)
        g = np.asarray(mem_ratio, dtype=np.float64)
        # c >= 0 and alpha >= 0 (checked at construction): c**alpha is 0 at c = 0 when alpha > 0
        # and 1 wherever alpha = 0 (0**0 = 1), with no warning.
        phi_cpu = np.minimum(np.power(c, self.cpu_alpha[m]), self.cpu_ceiling[m])
        span = max(1.0 - self.mem_floor, 1e-9)
        phi_mem = np.where(
            g >= 1.0,
            1.0,
            np.where(
                g >= self.mem_floor - 1e-12,
                self.mem_rho + (1.0 - self.mem_rho) * (g - self.mem_floor) / span,
                0.0,
            ),
        )
        return np.asarray(phi_cpu * phi_mem, dtype=np.float64)

    def best_phi(self, model: ArrayLike) -> FloatArray:
        """The largest sensitivity factor reachable by a model (its CPU ceiling, or 1)."""
        m = np.asarray(model)
        return np.where(self.cpu_alpha[m] > 0, self.cpu_ceiling[m], 1.0)

    def node_keep_by_count(self, size: int) -> FloatArray:
        """Node co-runner factor ``(1 - node_iota) ** (c - 1)`` for ``c = 0 .. size - 1`` entries.

        Entry ``c`` is the rate factor of each of ``c`` jobs on one node (different GPUs); shape
        (size,). Entry 0 is not a count that occurs (``1 / (1 - node_iota)``).
        """
        return np.asarray((1.0 - self.node_iota) ** (np.arange(size) - 1), dtype=np.float64)

    def colocatable(self, model_a: ArrayLike, model_b: ArrayLike, gpu_type: ArrayLike) -> BoolArray:
        """Whether models a and b may share GPUs of the given type (both directions measured)."""
        a, b, k = np.asarray(model_a), np.asarray(model_b), np.asarray(gpu_type)
        return np.asarray(
            np.isfinite(self.pair_iota[a, b, k]) & np.isfinite(self.pair_iota[b, a, k]), dtype=bool
        )

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, path: str | Path | None = None) -> ThroughputModel:
        """Load a table written by ``scripts/build_profiles.py``.

        Args:
            path: An ``.npz`` file; ``None`` loads the table shipped with the package.

        Raises:
            HetschedError: If the file is missing, not an ``.npz`` archive or lacks a field.
        """
        if path is None:
            ref = resources.files("hetsched").joinpath("data").joinpath(DEFAULT_TABLE)
            path = Path(str(ref))
        path = Path(path)
        if not path.is_file():
            raise HetschedError(
                f"throughput table {path} not found; rebuild it with "
                "`python scripts/build_profiles.py` or pass an existing .npz path"
            )
        if not zipfile.is_zipfile(path):
            raise HetschedError(
                f"throughput table {path} is not an .npz archive; give a table written by "
                "`python scripts/build_profiles.py` (or ThroughputModel.save), or leave "
                "throughput_table unset for the shipped one"
            )
        with np.load(path, allow_pickle=False) as z:
            need = [
                "models", "gpu_types", "count_levels", "tput", "measured", "pair_iota",
                "cpu_alpha", "cpu_ceiling", "restart_delay_s", "family", "work_unit",
            ]  # fmt: skip
            missing = [f for f in need if f not in z.files]
            if missing:
                raise HetschedError(f"throughput table {path} lacks fields {missing}")
            scalars = {
                name: float(z[name]) for name in ("mem_floor", "mem_rho", "node_iota") if name in z
            }
            return cls(
                models=tuple(str(x) for x in z["models"]),
                gpu_types=tuple(str(x) for x in z["gpu_types"]),
                count_levels=z["count_levels"],
                tput=z["tput"],
                measured=z["measured"],
                pair_iota=z["pair_iota"],
                cpu_alpha=z["cpu_alpha"],
                cpu_ceiling=z["cpu_ceiling"],
                restart_delay_s=z["restart_delay_s"],
                family=tuple(str(x) for x in z["family"]),
                work_unit=tuple(str(x) for x in z["work_unit"]),
                default_work=z["default_work"] if "default_work" in z.files else np.zeros(0),
                sources=tuple(str(x) for x in z["sources"]) if "sources" in z.files else (),
                **scalars,
            )

    def save(self, path: str | Path) -> None:
        """Write the table as a compressed ``.npz`` readable by :meth:`load`."""
        np.savez_compressed(
            Path(path),
            models=np.array(self.models),
            gpu_types=np.array(self.gpu_types),
            count_levels=self.count_levels,
            tput=self.tput,
            measured=self.measured,
            pair_iota=self.pair_iota,
            cpu_alpha=self.cpu_alpha,
            cpu_ceiling=self.cpu_ceiling,
            restart_delay_s=self.restart_delay_s,
            family=np.array(self.family),
            work_unit=np.array(self.work_unit),
            default_work=self.default_work,
            mem_floor=np.float64(self.mem_floor),
            mem_rho=np.float64(self.mem_rho),
            node_iota=np.float64(self.node_iota),
            sources=np.array(self.sources, dtype=str),
        )


#: Reproduction modes: per paper, the effects hetsched models that the paper's own simulator
#: lacks (``SimConfig.reproduction``). ``node_iota``: the slowdown of jobs sharing a node on
#: different GPUs; ``restart_delay``: the checkpoint-restart delay of a placement change;
#: ``spread``: the lower (unconsolidated) throughput of a gang on more nodes than it needs (Gavel's
#: simulator reads only consolidated throughputs). Sia's simulator charges restart delays (the
#: shipped ones are its values) and has per-placement throughputs, so those stay on for it.
#: Node failures and periodic checkpoints are in no paper's simulator (the engine rejects them).
REPRODUCTION: dict[str, frozenset[str]] = {
    "gavel": frozenset({"node_iota", "restart_delay", "spread"}),
    "hadar": frozenset({"node_iota", "restart_delay", "spread"}),
    "sia": frozenset({"node_iota"}),
}


def without_effects(tm: ThroughputModel, effects: frozenset[str] | set[str]) -> ThroughputModel:
    """``tm`` with the named effects (keys used in :data:`REPRODUCTION`) turned off.

    Args:
        tm: A throughput model.
        effects: Any of ``node_iota`` (set to 0), ``restart_delay`` (every delay 0) and
            ``spread`` (spread throughputs equal to the packed ones).

    Returns:
        A new model (``tm`` itself when ``effects`` is empty).
    """
    unknown = set(effects) - {"node_iota", "restart_delay", "spread"}
    if unknown:
        raise HetschedError(f"unknown simulator effects {sorted(unknown)}")
    if not effects:
        return tm
    changes: dict[str, Any] = {}
    if "node_iota" in effects:
        changes["node_iota"] = 0.0
    if "restart_delay" in effects:
        changes["restart_delay_s"] = np.zeros_like(tm.restart_delay_s)
    if "spread" in effects:
        changes["tput"] = np.repeat(tm.tput[..., :1], 2, axis=-1)
        changes["measured"] = np.repeat(tm.measured[..., :1], 2, axis=-1)
    return replace(tm, **changes)


def for_reproduction(tm: ThroughputModel, mode: str | None) -> ThroughputModel:
    """``tm`` with every effect the paper ``mode``'s simulator lacks turned off (None: ``tm``).

    Raises:
        HetschedError: If ``mode`` is not a key of :data:`REPRODUCTION`.
    """
    if mode is None:
        return tm
    if mode not in REPRODUCTION:
        raise HetschedError(
            f"sim reproduction={mode!r} is unknown; use one of {sorted(REPRODUCTION)} or null"
        )
    return without_effects(tm, REPRODUCTION[mode])


_DEFAULT: ThroughputModel | None = None


def single_node_tput(
    tm: ThroughputModel,
    cluster: Cluster,
    model: NDArray[np.int64],
    gpus: NDArray[np.int64],
    allowed: NDArray[np.bool_],
) -> FloatArray:
    """Isolated throughput (work units/s) of jobs packed on one node of each catalogue GPU type,
    shape (J, T): 0 where the job may not use the type or no node of the type has its GPUs.

    Args:
        tm: Throughput model.
        cluster: The cluster (its largest node per type).
        model: Model index per job, shape (J,).
        gpus: GPU count per job, shape (J,).
        allowed: Allowed catalogue GPU types per job, shape (J, T).
    """
    T = allowed.shape[1]
    g = np.asarray(gpus)[:, None]
    tput = tm.isolated(np.asarray(model)[:, None], np.arange(T)[None, :], g, False)
    hosts = cluster.max_node_gpus_per_type()[None, :T] >= g
    return np.asarray(np.where(allowed & hosts, tput, 0.0), dtype=np.float64)


def default_throughput() -> ThroughputModel:
    """The shipped throughput table, loaded once per process."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = ThroughputModel.load()
    return _DEFAULT
