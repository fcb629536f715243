"""Stable-Baselines3: PPO and sb3-contrib MaskablePPO on the central env.

``hetsched/ClusterCentral-v0`` is a plain Gymnasium env (flat ``Box`` observation, ``Discrete``
action) with an ``action_masks()`` method, which MaskablePPO reads. Plain PPO ignores the mask:
its masked-out actions become no-ops, counted in ``info["invalid_action"]`` (and penalised by
the ``invalid`` reward weight).

Run: ``python docs/examples/integrations/sb3_central.py`` (``HETSCHED_EXAMPLE_FAST=1`` for a
smoke-sized run).
"""

from __future__ import annotations

import os

import gymnasium
import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO

import hetsched.envs  # noqa: F401  (registers hetsched/ClusterCentral-v0)
from hetsched.envs.testing import small_env_kwargs

FAST = os.environ.get("HETSCHED_EXAMPLE_FAST") == "1"
STEPS = 512 if FAST else 4096


def make(max_cycles: int = 1000) -> gymnasium.Env:
    """The central env on a 5-node cluster with short synthetic episodes."""
    kw = small_env_kwargs(num_jobs=12, max_cycles=max_cycles)
    return gymnasium.make("hetsched/ClusterCentral-v0", **kw)


def evaluate(model: PPO | MaskablePPO, episodes: int = 1, max_cycles: int = 200) -> float:
    """Mean return of the deterministic policy (masked for MaskablePPO) over short episodes."""
    env = make(max_cycles)
    masked = isinstance(model, MaskablePPO)
    returns = []
    for ep in range(episodes):
        obs, _ = env.reset(seed=100 + ep)
        done, ret = False, 0.0
        while not done:
            kw = {"action_masks": env.unwrapped.action_masks()} if masked else {}  # type: ignore[attr-defined]
            a, _ = model.predict(obs, deterministic=True, **kw)
            obs, r, term, trunc, _ = env.step(int(a))
            ret += float(r)
            done = term or trunc
        returns.append(ret)
    return float(np.mean(returns))


def main() -> dict[str, float]:
    """Train both algorithms briefly; return their evaluation returns."""
    torch.set_num_threads(1)  # small MLPs: extra threads only contend on a shared CPU
    out = {}
    for algo in (PPO, MaskablePPO):
        model = algo("MlpPolicy", make(), n_steps=256, batch_size=64, n_epochs=2, seed=0, verbose=0)
        model.learn(total_timesteps=STEPS)
        out[algo.__name__] = evaluate(model)
        print(f"{algo.__name__}: {STEPS} steps, eval return {out[algo.__name__]:.3f}")
    return out


if __name__ == "__main__":
    main()
