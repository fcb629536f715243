"""Checkpoint I/O of the MAIFS-style agent.

A checkpoint (``torch.save`` of plain containers and tensors, loadable with
``torch.load(weights_only=True)``) holds::

    model, optimizer            state dicts
    config                      the resolved agent config (a plain dict)
    env_id, package_version     the env id (:func:`env_id_of` the config) and hetsched.__version__
    dims                        the observation layout the network parses (NetDims)
    step, phase                 env steps so far and the training phase
    rng                         numpy bit-generator state and torch RNG state (exact resume)

It is written atomically (temp file in the same directory, then ``os.replace``), and never with
non-finite weights: :func:`save_checkpoint` refuses them and :func:`load_checkpoint` rejects a
file that holds them.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

import hetsched
from hetsched.agents.acting import build_net
from hetsched.agents.config import MAIFSAgentConf
from hetsched.agents.driver import ENV_ID, PREEMPT_ENV_ID
from hetsched.agents.network import EVICT_HEAD, RESIZE_HEAD, MAIFSNet, NetDims
from hetsched.sim.errors import HetschedError

#: Settings of older checkpoints that no longer exist, with the value under which the network
#: acts as it does now (None: any value; they only described how the network was trained).
RETIRED: dict[tuple[str, str], object] = {
    ("env", "long_guard_s"): None,
    ("env", "guard_rel_rate"): ...,
    ("bc", "evict_only"): ...,
    ("bc", "anchor"): ...,
    ("bc", "long_weight"): ...,
    ("ppo", "rules_preset"): ...,
    ("ppo", "anchor"): ...,
}


#: Settings added after checkpoints were first written, with the value that reproduces how a
#: checkpoint saved without them acts (``(group, key)``: value).
LEGACY: dict[tuple[str, str], object] = {
    ("env", "work_conserving"): False,
    ("env", "wait_below"): 0.0,
    ("env", "gpu_levels"): [0.5, 1.0, 2.0],
    ("teacher", "elastic_share"): False,
    ("env", "decision_order"): "confidence",
    ("env", "resizable"): False,
    ("env", "migrate_speedup"): None,
    ("env", "gang_binding"): False,
    ("env", "share_guard"): False,
    ("teacher", "migrate_gain_s"): None,
    ("env", "window_backfill"): 0,
    ("env", "migrate_gangs"): False,
    ("env", "share_guard_all"): False,
    ("env", "retry_refused"): False,
    ("env", "migrate_elastic"): False,
    ("env", "reclaim_cores"): False,
    ("env", "migrate_multinode"): False,
    ("teacher", "gang_fastest"): False,
}


class CheckpointError(HetschedError):
    """A checkpoint that does not match this package, env or observation layout."""


def env_id_of(config: dict[str, Any]) -> str:
    """The env id of a plain agent config (``PREEMPT_ENV_ID`` when ``env.preemptive``)."""
    env = config.get("env") if isinstance(config, dict) else None
    preemptive = bool(env.get("preemptive", False)) if isinstance(env, dict) else False
    return PREEMPT_ENV_ID if preemptive else ENV_ID


def non_finite(state: dict[str, Any]) -> list[str]:
    """Names of the tensors of a state dict that hold NaN or infinite values."""
    return [
        k
        for k, v in state.items()
        if isinstance(v, torch.Tensor) and v.is_floating_point() and not bool(v.isfinite().all())
    ]


def numpy_state(rng: np.random.Generator) -> dict[str, int]:
    """A PCG64 generator's state as plain integers (stored in checkpoints)."""
    bg = rng.bit_generator.state
    return {
        "state": int(bg["state"]["state"]),
        "inc": int(bg["state"]["inc"]),
        "has_uint32": int(bg["has_uint32"]),
        "uinteger": int(bg["uinteger"]),
    }


def set_numpy_state(rng: np.random.Generator, r: dict[str, Any]) -> None:
    """Restore a PCG64 generator from :func:`numpy_state`'s dict."""
    rng.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": int(r["state"]), "inc": int(r["inc"])},
        "has_uint32": int(r["has_uint32"]),
        "uinteger": int(r["uinteger"]),
    }


def save_checkpoint(path: Path, payload: dict[str, Any]) -> Path:
    """Write a checkpoint atomically (temp file + ``os.replace``).

    Raises:
        CheckpointError: If ``payload["model"]`` holds non-finite weights (nothing is written).
    """
    path = Path(path)
    bad = non_finite(payload.get("model", {}))
    if bad:
        raise CheckpointError(
            f"refusing to write {path}: weights {', '.join(bad[:3])} hold NaN or inf"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    env_id = env_id_of(payload.get("config", {}))
    full = {"env_id": env_id, "package_version": hetsched.__version__, **payload}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save(full, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | Path, *, obs_dim: int | None = None) -> dict[str, Any]:
    """Load and check a checkpoint (``weights_only=True``).

    Args:
        path: Checkpoint file.
        obs_dim: Expected observation size (None: not checked here).

    Raises:
        FileNotFoundError: If the file does not exist.
        CheckpointError: If it was written for another env version or observation size, or
            its weights are not all finite.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(
            f"checkpoint {p} not found; train one with scripts/train.py or pass checkpoint=PATH"
        )
    try:
        ck: dict[str, Any] = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated zip, foreign file, or a pickle weights_only refuses
        raise CheckpointError(
            f"{p} cannot be read as a MAIFS checkpoint ({type(e).__name__}: {str(e)[:200]}); "
            "it is truncated, not a torch checkpoint, or holds objects other than tensors and "
            "plain data (loading uses weights_only=True, so no code in it ever runs); "
            "re-download or retrain it with scripts/train.py"
        ) from None
    if not isinstance(ck, dict):
        raise CheckpointError(f"{p} holds a {type(ck).__name__}, not a MAIFS checkpoint dict")
    for key in ("model", "config", "env_id", "dims"):
        if key not in ck:
            raise CheckpointError(f"{p} is not a MAIFS checkpoint (no {key!r} entry)")
    if ck["env_id"] not in (ENV_ID, PREEMPT_ENV_ID):
        raise CheckpointError(
            f"{p} was trained on env {ck['env_id']!r}, this package provides {ENV_ID!r} and "
            f"{PREEMPT_ENV_ID!r}; retrain the agent for this env version"
        )
    want_id = env_id_of(ck["config"])
    if ck["env_id"] != want_id:
        raise CheckpointError(
            f"{p} says env {ck['env_id']!r} but its config (env.preemptive) means {want_id!r}; "
            "the file was edited or written by another tool: retrain it with scripts/train.py"
        )
    bad = non_finite(ck["model"])
    if bad:
        raise CheckpointError(
            f"{p} holds non-finite weights ({', '.join(bad[:3])}): training diverged; use an "
            "earlier checkpoint of the run or retrain with a lower agent.ppo.lr"
        )
    got = int(ck["dims"]["obs_dim"])
    if obs_dim is not None and got != obs_dim:
        raise CheckpointError(
            f"{p} expects observations of size {got}, the env gives {obs_dim}: the window, "
            "resident slots, level sets or throughput-table models differ from training"
        )
    return ck


def conf_from_dict(d: dict[str, Any]) -> MAIFSAgentConf:
    """Rebuild the agent config stored in a checkpoint.

    Settings in :data:`RETIRED` are dropped when they leave the network acting as it does now.

    Raises:
        CheckpointError: If a retired setting changes how the network acts, or a key is unknown.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    d = {k: dict(v) if isinstance(v, dict) else v for k, v in d.items()}
    for (group, key), legacy in LEGACY.items():
        sub = d.get(group)
        if isinstance(sub, dict) and key not in sub:
            sub[key] = legacy
    for (group, key), neutral in RETIRED.items():
        sub = d.get(group)
        if isinstance(sub, dict) and key in sub:
            value = sub.pop(key)
            if neutral is not ... and value != neutral:
                raise CheckpointError(
                    f"the checkpoint was trained with {group}.{key}={value!r}, a setting this "
                    "version no longer has (a rule around the network); retrain it"
                )
    try:
        merged = OmegaConf.merge(OmegaConf.structured(MAIFSAgentConf), d)
    except OmegaConfBaseException as e:
        raise CheckpointError(f"the checkpoint's config does not fit this version: {e}") from None
    obj = OmegaConf.to_object(merged)
    assert isinstance(obj, MAIFSAgentConf)
    return obj


def net_from_checkpoint(ck: dict[str, Any]) -> tuple[MAIFSNet, MAIFSAgentConf]:
    """The network (weights loaded, eval mode) and the agent config of a checkpoint."""
    conf = conf_from_dict(ck["config"])
    known = {f.name for f in fields(NetDims)}
    dims = NetDims(**{k: int(v) for k, v in ck["dims"].items() if k in known})
    net = build_net(conf.net, dims)
    net.load_state_dict(ck["model"])
    net.eval()
    return net, conf


def init_weights(net: MAIFSNet, dims: NetDims, path: Path) -> None:
    """Load a checkpoint's weights into ``net`` (``init=PATH``).

    A checkpoint without eviction actions may start a preemptive run
    (``agent.env.preemptive=true``), and one without resize actions a resizable run
    (``agent.env.resizable=true``): every weight it has is loaded and the new head keeps
    its fresh initialisation (``agent.net.evict_bias`` sets how rarely it evicts at
    first). Any other difference of layout is a :class:`CheckpointError`.
    """
    ck = load_checkpoint(path, obs_dim=dims.obs_dim)
    fix = (
        "; init needs the same agent.net sizes (an eviction or resize head may only be new, "
        "when a checkpoint without those actions starts a run with them)"
    )
    try:
        missing, unexpected = net.load_state_dict(ck["model"], strict=False)
    except RuntimeError as e:  # a tensor of another shape
        raise CheckpointError(f"init={path} does not fit this network: {e}"[:1500] + fix) from None
    head = [k for k in missing if k.split(".")[0] in (*EVICT_HEAD, *RESIZE_HEAD)]
    if unexpected or len(head) != len(missing):
        raise CheckpointError(
            f"init={path} does not fit this network: missing {sorted(missing)}, "
            f"unexpected {sorted(unexpected)}" + fix
        )
