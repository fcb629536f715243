"""MAIFS-style multi-agent RL scheduler (PyTorch): network, coordination, trainer, policy.

* :mod:`hetsched.agents.network` -- node encoder, multi-agent attention, soft coordination
  graph, fungible action head, centralised critic.
* :mod:`hetsched.agents.coordination` -- per-step coordination graph, ordered decisions
  (default) and DCG max-sum conflict resolution.
* :mod:`hetsched.agents.driver` -- the training env loop over :class:`hetsched.envs.core.EnvCore`
  and its twin bound to a :class:`~hetsched.sim.engine.SimState`.
* :mod:`hetsched.agents.teacher` -- the behaviour-cloning teacher heuristic.
* :mod:`hetsched.agents.agent` -- masks, acting, checkpoints.
* :mod:`hetsched.agents.trainer` -- behaviour cloning (DAgger) + MAPPO, TensorBoard, checkpoints.
* :mod:`hetsched.agents.policy` -- ``MAIFSPolicy`` / ``TeacherPolicy`` for the evaluation runner.
* :mod:`hetsched.agents.config` -- typed Hydra schemas.

Results: ``docs/results.md``; shipped agent: ``checkpoints/maifs_default.pt`` acting with the
four ``checkpoints/maifs_default_*.pt`` members (:class:`~hetsched.agents.network.PolicyEnsemble`).
"""
