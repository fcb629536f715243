"""PettingZoo: build the multi-agent env by id, act with masks, read infos and the state.

Run: ``python docs/examples/integrations/pettingzoo_basics.py`` (``HETSCHED_EXAMPLE_FAST=1``
uses a 16-job workload; the default is the Philly preset with 200 jobs on ``sia_64``).
"""

from __future__ import annotations

import os

import numpy as np
import pettingzoo
from pettingzoo.utils import parallel_to_aec

import hetsched.envs  # noqa: F401  (registers hetsched/Cluster-v0)
from hetsched.envs.testing import masked_random_actions, small_env_kwargs

FAST = os.environ.get("HETSCHED_EXAMPLE_FAST") == "1"


def main() -> dict[str, float]:
    """One episode with a uniformly random legal action per agent."""
    kw = small_env_kwargs() if FAST else {"cluster": "sia_64", "workload": "philly",
                                          "workload_kwargs": {"num_jobs": 200}}  # fmt: skip
    env = pettingzoo.make("parallel", "hetsched/Cluster-v0", **kw)
    obs, infos = env.reset(seed=0)
    sl = env.unwrapped.observation_slices()  # named slices of obs[agent]["observation"]
    print("agents:", env.possible_agents[:3], "...", "window slice:", sl["window"])
    rng = np.random.default_rng(0)
    steps, conflicts = 0, 0.0
    while env.agents:
        masks = np.stack([obs[a]["action_mask"] for a in env.possible_agents])
        acts = masked_random_actions(masks, rng)
        obs, rew, term, trunc, infos = env.step(
            dict(zip(env.possible_agents, acts.tolist(), strict=True))
        )
        conflicts += infos["node_0"]["conflicts"]
        steps += 1
    m = env.unwrapped.episode_metrics()
    print(f"{steps} steps, {conflicts:.0f} conflicts, avg JCT {m['avg_jct_h']:.2f} h")
    print("state():", env.state().shape)
    aec = parallel_to_aec(pettingzoo.make("parallel", "hetsched/Cluster-v0", **kw))
    aec.reset(seed=0)  # the AEC view (e.g. for Tianshou's PettingZooEnv)
    return {"steps": float(steps), "avg_jct_h": float(m["avg_jct_h"])}


if __name__ == "__main__":
    main()
