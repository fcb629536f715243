"""TorchRL: a masked random rollout through TorchRL's PettingZoo wrapper.

Needs the ``torchrl`` extra (``pip install -e ".[torchrl]"``). All agents are named
``node_<i>`` with identical specs, so TorchRL stacks them into one group ``"node"``; the
``action_mask`` observation key becomes ``("node", "action_mask")`` and masks the sampled
categorical actions. :func:`hetsched.envs.wrappers.torchrl_env` drops the info copy of the mask,
which TorchRL 0.14's wrapper cannot handle next to the observation copy.

Run: ``python docs/examples/integrations/torchrl_rollout.py`` (``HETSCHED_EXAMPLE_FAST=1`` for
a short rollout).
"""

from __future__ import annotations

import os
import warnings

from torchrl.envs.libs.pettingzoo import PettingZooWrapper
from torchrl.envs.utils import check_env_specs

from hetsched.envs.testing import small_env_kwargs
from hetsched.envs.wrappers import torchrl_env

FAST = os.environ.get("HETSCHED_EXAMPLE_FAST") == "1"
STEPS = 20 if FAST else 500


def main() -> object:
    """Build the wrapped env, check its specs and return a rollout TensorDict."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "tested against pettingzoo 1.24.3"
        env = PettingZooWrapper(
            torchrl_env(**small_env_kwargs()),  # the mask only in the observation
            use_mask=True,  # mask dead agents; ours never leave before the episode ends
            categorical_actions=True,
            return_state=True,  # adds the global state() for centralised critics
            seed=0,
        )
    check_env_specs(env)
    # Random actions drawn within the action mask (``("node", "action_mask")``).
    td = env.rollout(STEPS, break_when_any_done=True)
    print(td)
    mask = td["node", "action_mask"]
    print("agents:", mask.shape[-2], "actions:", mask.shape[-1], "steps:", td.batch_size[0])
    env.close()
    return td


if __name__ == "__main__":
    main()
