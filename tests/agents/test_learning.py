"""Learning test: PPO from scratch finds the known best schedule of a tiny instance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from helpers import fast_config, tiny_env, tiny_tm

from hetsched.agents.agent import Acting
from hetsched.agents.trainer import Trainer


def test_ppo_learns_fast_node_and_cpu_level(tmp_path: Path) -> None:
    cfg = fast_config(steps=384)
    tm = tiny_tm()
    env = tiny_env(cfg.agent, tm)
    tr = Trainer(cfg, tmp_path, throughput=tm, envs=[env])
    torch.manual_seed(0)
    tr.run()
    env.reset(np.random.default_rng(0))
    d = Acting(tr.net, cfg.agent, greedy=True).step(env.core)
    codec = env.core.codec
    a0, a1 = d["actions"].tolist()
    assert a0 == 0, "the T4 node should leave the job to the A100 node"
    k, g, c, m = (int(x[0]) for x in codec.decode([a1]))
    levels = env.core.cfg.levels
    assert (k, levels.gpu[g], levels.cpu[c]) == (0, 1.0, 2.0)
    assert levels.mem[m] >= 1.0  # both memory levels >= the request are optimal
