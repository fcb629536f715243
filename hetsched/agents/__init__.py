"""MAIFS-style multi-agent RL scheduler (PyTorch): network, coordination, training, policy.

* :mod:`hetsched.agents.network` -- node encoder, multi-agent attention, soft coordination
  graph, fungible action head, centralised critic.
* :mod:`hetsched.agents.coordination` -- per-step coordination graph, ordered decisions
  (default) and DCG max-sum conflict resolution.
* :mod:`hetsched.agents.acting` -- env settings, masks and one decision step of the network.
* :mod:`hetsched.agents.driver` -- the training env loop over :class:`hetsched.envs.core.EnvCore`
  and its twin bound to a :class:`~hetsched.sim.engine.SimState`.
* :mod:`hetsched.agents.teacher` -- the behaviour-cloning teacher heuristic.
* :mod:`hetsched.agents.rollout` -- episodes, played here or in worker processes.
* :mod:`hetsched.agents.learner` -- behaviour-cloning fits and PPO updates (NaN guard).
* :mod:`hetsched.agents.trainer` -- the training run: phases, budgets, TensorBoard, checkpoints.
* :mod:`hetsched.agents.checkpoint` -- checkpoint files.
* :mod:`hetsched.agents.policy` -- ``MAIFSPolicy`` (the network) and ``TeacherPolicy`` for the
  evaluation runner.
* :mod:`hetsched.agents.config` -- typed Hydra schemas, every default.

Guide: ``docs/maifs.md``; shipped checkpoint: ``hetsched/checkpoints/maifs_default.pt``
(``hetsched/checkpoints/README.md``).
"""
