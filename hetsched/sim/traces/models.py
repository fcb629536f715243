"""Models for trace jobs (traces have none) and the conversion of traced durations to work."""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Sequence

import numpy as np
from numpy.typing import NDArray

from hetsched.sim.catalog import GPU_TYPE_NAMES, canonical_gpu_type
from hetsched.sim.cluster import Cluster
from hetsched.sim.errors import HetschedError, TraceError
from hetsched.sim.throughput import ThroughputModel
from hetsched.sim.traces.options import choice

__all__ = [
    "GAVEL_GPU_TYPES",
    "SIA_INITIAL_BATCH",
    "assign_models",
    "batch_sizes",
    "gavel_types",
    "match_models",
    "reference_work",
]

logger = logging.getLogger("hetsched.sim.traces")

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

#: Submitted batch size given to jobs of Sia apps when the trace has none: the smallest validated
#: batch size M0 of each app (sia.md section 2.1).
SIA_INITIAL_BATCH: dict[str, int] = {
    "bert": 12, "cifar10": 128, "deepspeech2": 20, "gpt_pmp": 48,
    "imagenet": 200, "ncf": 256, "yolov3": 8,
}  # fmt: skip

#: GPU types Gavel profiled; ``model_scheme="auto"`` picks Gavel job types on clusters of only these.
GAVEL_GPU_TYPES = ("k80", "p100", "v100")


def match_models(
    values: NDArray[np.str_], names: Sequence[str], allowed: Collection[int] | None = None
) -> IntArray:
    """Index into ``names`` of each (stripped) model name in ``values``; -1 where none matches.

    An exact name always matches; a name in another case matches when exactly one model (of
    those ``allowed``, default all) has that spelling case-insensitively.
    """
    exact = {n: i for i, n in enumerate(names) if allowed is None or i in allowed}
    folded: dict[str, int] = {}
    clash: set[str] = set()
    for n, i in exact.items():
        low = n.lower()
        if low in folded:
            clash.add(low)
        folded.setdefault(low, i)
    for low in clash:
        del folded[low]
    uniq, inv = np.unique(values, return_inverse=True)
    found = np.array(
        [exact.get(u, folded.get(u.lower(), -1)) for u in uniq.tolist()], dtype=np.int64
    )
    return np.asarray(found[inv].reshape(-1), dtype=np.int64)


def _model_indices(throughput: ThroughputModel, family: str) -> IntArray:
    return np.array([i for i, f in enumerate(throughput.family) if f == family], dtype=np.int64)


def _require_models(throughput: ThroughputModel, names: Sequence[str], why: str) -> IntArray:
    missing = [n for n in names if n not in throughput.models]
    if missing:
        raise TraceError(
            f"{why} needs models {missing}, which the throughput table does not have "
            f"(it has {list(throughput.models)})"
        )
    return np.array([throughput.models.index(n) for n in names], dtype=np.int64)


def gavel_types(throughput: ThroughputModel) -> tuple[IntArray, IntArray]:
    """All Gavel job types and the distributed ones (those that run on 2 GPUs of some type)."""
    allm = _model_indices(throughput, "gavel")
    if allm.size == 0:
        raise TraceError(
            "model_scheme 'gavel_uniform' needs Gavel job types (family 'gavel') in the "
            f"throughput table; it has {list(throughput.models)}"
        )
    two = throughput.isolated(allm[:, None], np.arange(len(throughput.gpu_types))[None, :], 2)
    dist = allm[(two > 0).any(axis=1)]
    return allm, dist


def assign_models(
    duration_s: NDArray[np.floating],
    num_gpus: NDArray[np.integer],
    *,
    throughput: ThroughputModel,
    cluster: Cluster,
    rng: np.random.Generator,
    scheme: str = "auto",
) -> IntArray:
    """Give each trace job a model (index into ``throughput.models``).

    Schemes:

    * ``"sia_gputime"`` -- Sia's mapping of GPU-time ``duration * num_gpus`` (sia.md section 10):
      < 1 h cifar10; [1, 10) h deepspeech2 or bert (50:50); [10, 100) h yolov3; >= 100 h imagenet.
    * ``"gavel_uniform"`` -- uniform over Gavel's 26 job types; a job with more than one GPU draws
      uniformly among the distributed types (those whose throughput on 2 GPUs is positive on some
      type: ResNet-18/50, Transformer, LM), as Gavel's generator redraws until distributed.
    * ``"auto"`` -- ``gavel_uniform`` if every GPU type of the cluster is one Gavel profiled (k80,
      p100, v100), else ``sia_gputime``.

    The random draws have a fixed size (two per job), so the result depends only on the inputs
    and the state of ``rng``.

    Raises:
        TraceError: For an unknown scheme or a table lacking the needed models.
    """
    d = np.asarray(duration_s, dtype=np.float64)
    g = np.asarray(num_gpus, dtype=np.int64)
    scheme = choice(scheme, ("auto", "sia_gputime", "gavel_uniform"), "model_scheme")
    if scheme == "auto":
        present = {GPU_TYPE_NAMES[k] for k in cluster.types_present}
        scheme = "gavel_uniform" if present <= set(GAVEL_GPU_TYPES) else "sia_gputime"
    u = rng.random(len(d))
    v = rng.random(len(d))
    if scheme == "sia_gputime":
        names = ["cifar10", "deepspeech2", "bert", "yolov3", "imagenet"]
        idx = _require_models(throughput, names, "model_scheme 'sia_gputime'")
        gpu_h = d * g / 3600.0
        pick = np.select(
            [gpu_h < 1.0, gpu_h < 10.0, gpu_h < 100.0],
            [0, np.where(u < 0.5, 1, 2), 3],
            default=4,
        )
        return idx[pick]
    allm, dist = gavel_types(throughput)
    single = allm[np.minimum((u * len(allm)).astype(np.int64), len(allm) - 1)]
    if dist.size == 0:
        if np.any(g > 1):
            raise TraceError(
                "model_scheme 'gavel_uniform': the throughput table has no distributed Gavel "
                "job type for multi-GPU jobs"
            )
        return single
    multi = dist[np.minimum((v * len(dist)).astype(np.int64), len(dist) - 1)]
    return np.where(g > 1, multi, single)


def batch_sizes(throughput: ThroughputModel, model: IntArray) -> IntArray:
    """Submitted batch size implied by a model: Gavel's ``(batch size B)``, Sia's M0, else 0."""
    per_model = np.zeros(throughput.num_models, dtype=np.int64)
    for i, name in enumerate(throughput.models):
        m = re.search(r"batch size (\d+)", name)
        if m:
            per_model[i] = int(m.group(1))
        elif name in SIA_INITIAL_BATCH:
            per_model[i] = SIA_INITIAL_BATCH[name]
    return per_model[model]


# ====================================================================== duration -> work
def reference_work(
    duration_s: NDArray[np.floating],
    model: NDArray[np.integer],
    num_gpus: NDArray[np.integer],
    *,
    throughput: ThroughputModel,
    ref_type: str = "v100",
    fallback: str = "nearest",
    job_id: NDArray[np.str_] | None = None,
    source: str = "workload",
) -> FloatArray:
    """Total work of jobs that ran ``duration_s`` on ``num_gpus`` GPUs of ``ref_type``.

    ``work = duration * T[model, ref_type, num_gpus]`` (isolated, packed). Where that throughput is
    0, ``fallback="nearest"`` uses the nearest table count ``c`` with positive throughput (log2
    distance, the smaller count on ties) scaled linearly, ``T[c] * num_gpus / c``;
    ``fallback="error"`` raises.

    Raises:
        TraceError: Naming the job, if its model cannot run on ``ref_type`` at all (or at its
            count with ``fallback="error"``).
    """
    fallback = choice(fallback, ("nearest", "error"), "ref_fallback")
    try:
        k = throughput.type_index(canonical_gpu_type(ref_type, where="ref_type"))
    except HetschedError as e:
        raise TraceError(f"ref_type={ref_type!r}: {e}") from None
    d = np.asarray(duration_s, dtype=np.float64)
    m = np.asarray(model, dtype=np.int64)
    n = np.asarray(num_gpus, dtype=np.int64)
    t = throughput.isolated(m, k, n, False)
    bad = np.flatnonzero(t <= 0)
    if bad.size:
        levels = throughput.count_levels
        tl = throughput.isolated(m[bad, None], k, levels[None, :], False)  # (B, L)
        ok = tl > 0
        none = ~ok.any(axis=1)
        if fallback == "error" or none.any():
            b = int(np.flatnonzero(none)[0]) if none.any() else 0
            i = int(bad[b])
            jid = f"job {str(job_id[i])!r}" if job_id is not None else f"job {i}"
            why = (
                f"cannot run on any GPU count of {ref_type}"
                if none.any()
                else f"cannot run on {int(n[i])} GPUs of {ref_type}"
            )
            raise TraceError(
                f"{source}: {jid} (model {throughput.models[m[i]]!r}, {int(n[i])} GPUs) {why}, "
                "so its traced duration cannot be converted to work; choose another ref_type"
                + (" or ref_fallback='nearest'" if not none.any() else "")
            )
        dist = np.abs(np.log2(levels)[None, :] - np.log2(n[bad])[:, None])
        dist = np.where(ok, dist, np.inf)
        c = np.argmin(dist, axis=1)  # first minimum = smaller count on ties
        t = t.copy()
        t[bad] = tl[np.arange(bad.size), c] * n[bad] / levels[c]
        logger.info(
            "%s: %d job(s) cannot run on their GPU count of %s; their work uses the nearest "
            "runnable count scaled linearly (ref_fallback='nearest')",
            source, bad.size, ref_type,
        )  # fmt: skip
    return np.asarray(d * t, dtype=np.float64)
