"""RLlib: parameter-shared PPO on the multi-agent env with action masking (new API stack).

Needs the ``rllib`` extra (``pip install -e ".[rllib]"``). RLlib pins its own gymnasium
version, so install it in a separate virtual environment if your main one must keep a newer
gymnasium (see docs/integrations.md).

Run: ``python docs/examples/integrations/rllib_ppo.py`` (``HETSCHED_EXAMPLE_FAST=1`` for a
smoke-sized run: 1 training iteration on a 5-node cluster).
"""

from __future__ import annotations

import os

import ray
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule
from ray.tune.registry import register_env

from hetsched.envs.testing import small_env_kwargs
from hetsched.envs.wrappers import rllib_env

FAST = os.environ.get("HETSCHED_EXAMPLE_FAST") == "1"
ITERS = 1 if FAST else 20
BATCH = 256 if FAST else 4000


def make_env(config: dict) -> ParallelPettingZooEnv:
    """RLlib env creator: our env with RLlib's mask keys, in RLlib's PettingZoo wrapper."""
    return ParallelPettingZooEnv(rllib_env(**small_env_kwargs(num_jobs=config.get("jobs", 16))))


def main() -> dict:
    """Train and return the last result dict."""
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    register_env("hetsched_cluster", make_env)
    config = (
        PPOConfig()
        .environment("hetsched_cluster", env_config={"jobs": 8 if FAST else 32})
        .env_runners(num_env_runners=0)
        .learners(num_learners=0)
        .multi_agent(
            policies={"shared"},
            policy_mapping_fn=lambda agent_id, episode, **kw: "shared",  # parameter sharing
        )
        .rl_module(
            rl_module_spec=MultiRLModuleSpec(
                rl_module_specs={
                    "shared": RLModuleSpec(
                        module_class=ActionMaskingTorchRLModule,
                        model_config={"head_fcnet_hiddens": [64, 64]},
                    )
                }
            )
        )
        .training(train_batch_size_per_learner=BATCH, minibatch_size=128, num_epochs=1, lr=3e-4)
    )
    algo = config.build_algo()
    result: dict = {}
    for i in range(ITERS):
        result = algo.train()
        runners = result.get("env_runners", {})
        print(f"iter {i}: env steps {runners.get('num_env_steps_sampled_lifetime')}")
    algo.stop()
    ray.shutdown()
    return result


if __name__ == "__main__":
    main()
