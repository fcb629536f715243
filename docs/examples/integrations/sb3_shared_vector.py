"""Parameter-sharing PPO on the multi-agent env through the in-repo SB3 vector adapter.

:class:`hetsched.envs.vector.PettingZooToSB3VecEnv` turns every agent (node) of one or more
``ClusterParallelEnv`` into one SB3 vec-env slot, so a single policy learns from every node's
experience (independent learners with shared parameters). Its ``env_method("action_masks")``
returns each slot's mask, so sb3-contrib's MaskablePPO masks every node's action; plain PPO
works too (illegal actions become counted no-ops).

Run: ``python docs/examples/integrations/sb3_shared_vector.py`` (``HETSCHED_EXAMPLE_FAST=1`` for
a smoke-sized run).
"""

from __future__ import annotations

import os

import numpy as np
import torch
from sb3_contrib import MaskablePPO

from hetsched.envs import ClusterParallelEnv
from hetsched.envs.testing import small_env_kwargs
from hetsched.envs.vector import PettingZooToSB3VecEnv

FAST = os.environ.get("HETSCHED_EXAMPLE_FAST") == "1"
STEPS = 1000 if FAST else 20_000  # vec-env steps summed over slots (agents)


def main() -> dict[str, float]:
    """Train a shared masked policy, then roll it out for one episode on every node."""
    torch.set_num_threads(1)
    envs = [ClusterParallelEnv(**small_env_kwargs(num_jobs=12, max_cycles=500)) for _ in range(2)]
    venv = PettingZooToSB3VecEnv(envs, seed=0)  # 2 envs x 5 nodes = 10 slots
    model = MaskablePPO("MlpPolicy", venv, n_steps=50, batch_size=100, n_epochs=2, seed=0)
    model.learn(total_timesteps=STEPS)

    env = ClusterParallelEnv(**small_env_kwargs(num_jobs=12, max_cycles=500))
    obs, _ = env.reset(seed=123)
    ret, invalid = 0.0, 0.0
    while env.agents:
        x = np.stack([obs[a]["observation"] for a in env.possible_agents])
        acts, _ = model.predict(x, action_masks=env.action_masks(), deterministic=True)
        obs, rew, _, _, infos = env.step(dict(zip(env.possible_agents, acts.tolist(), strict=True)))
        ret += rew["node_0"]
        invalid += infos["node_0"]["invalid_actions"]
    metrics = env.episode_metrics()
    print(f"return {ret:.3f}, invalid actions {invalid:.0f}, avg JCT {metrics['avg_jct_h']:.2f} h")
    return {"return": ret, "invalid": invalid, "timesteps": float(model.num_timesteps)}


if __name__ == "__main__":
    main()
