"""Run any fixed baseline policy inside the multi-agent env.

:class:`PolicyAdapter` turns a policy's per-round :class:`~hetsched.sim.allocation.Allocation`
(FIFO, LAS, YARN-CS, Gavel, Sia, Hadar ... anything with ``decide(state) -> Allocation``) into
per-agent actions:

1. At the first decision step of each round it calls ``policy.decide(sim_state)`` on the env's
   simulator snapshot (exactly what :meth:`Simulator.run` would hand it).
2. If the allocation keeps every running job exactly where it is, and every newly placed job can
   be written as a claim (a window slot at GPU/CPU/memory levels that reproduce its amounts;
   one node, or a same-type gang the env fills the same way), it emits those claims over one or
   more decision steps (a node claims one job per step; a job is claimed once it is in the
   window), then all no-ops, which ends the round.
3. Otherwise -- the policy preempts or moves a running job, places a job outside the reachable
   window, uses amounts off the level grid, or a claim would not resolve to the policy's exact
   placement -- it returns the allocation itself, which :func:`run_policy` applies through the
   env's documented *allocation action* (``env.step_allocation``).

Claims are checked against the env's masks and gang rule just before they are emitted, so a
round is never advanced with an allocation different from the policy's. With
:func:`env_kwargs_for` (the policy's round length and fast-forward flags, ``skip_idle=False``)
the env then reproduces :meth:`Simulator.run` exactly, so the metrics match (see
``tests/envs/test_adapters.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.envs.cluster_env import ClusterParallelEnv
from hetsched.envs.core import EnvCore
from hetsched.sim.allocation import Allocation
from hetsched.sim.engine import SimResult

REL_TOL = 1e-6


def env_kwargs_for(policy: Any) -> dict[str, Any]:
    """Env kwargs that make the env advance time exactly as ``Simulator.run`` does for ``policy``.

    Returns:
        ``round_s`` (the policy's), ``advance`` (``"event"`` for ``event_driven`` policies,
        ``"no_pending"`` for ``static_when_no_pending`` ones, else ``"round"``) and
        ``skip_idle=False``.
    """
    rs = getattr(policy, "round_s", None)
    if getattr(policy, "event_driven", False):
        adv = "event"
    elif getattr(policy, "static_when_no_pending", False):
        adv = "no_pending"
    else:
        adv = "round"
    out: dict[str, Any] = {"advance": adv, "skip_idle": False}
    if rs:
        out["round_s"] = float(rs)
    return out


@dataclass
class AdapterStats:
    """How the adapter drove the env.

    Attributes:
        rounds: Rounds decided by the policy.
        action_rounds: Rounds written entirely as per-agent actions.
        allocation_rounds: Rounds applied through the allocation action.
        steps: Env steps taken.
        mismatches: Rounds whose applied allocation differed from the policy's (should be 0).
    """

    rounds: int = 0
    action_rounds: int = 0
    allocation_rounds: int = 0
    steps: int = 0
    mismatches: int = 0


@dataclass
class _Claim:
    job: int
    nodes: NDArray[np.int64]
    gpus: NDArray[np.int64]
    levels: tuple[int, int, int]


def same_entries(a: Allocation, b: Allocation) -> bool:
    """Whether two allocations hold the same entries (any order; CPU/memory to 1e-6)."""
    if a.size != b.size:
        return False
    if a.size == 0:
        return True
    oa = np.lexsort((a.node, a.job))
    ob = np.lexsort((b.node, b.job))
    return bool(
        np.array_equal(a.job[oa], b.job[ob])
        and np.array_equal(a.node[oa], b.node[ob])
        and np.array_equal(a.gpus[oa], b.gpus[ob])
        and np.array_equal(a.share[oa], b.share[ob])
        and np.allclose(a.cpus[oa], b.cpus[ob], rtol=REL_TOL, atol=1e-9)
        and np.allclose(a.mem[oa], b.mem[ob], rtol=REL_TOL, atol=1e-9)
    )


class PolicyAdapter:
    """Drive a :class:`ClusterParallelEnv` with a fixed scheduling policy.

    Args:
        policy: Object with ``decide(state) -> Allocation`` (and optionally ``reset``).
        prefer_actions: Write rounds as per-agent actions where possible (False: always use
            the allocation action).
    """

    def __init__(self, policy: Any, *, prefer_actions: bool = True) -> None:
        self.policy = policy
        self.prefer_actions = prefer_actions
        self.stats = AdapterStats()
        self._plan: list[list[_Claim]] | None = None
        self._alloc: Allocation | None = None
        self._step_i = 0
        self._round_key: tuple[int, float] | None = None

    def reset(self, env: ClusterParallelEnv, rng: np.random.Generator | None = None) -> None:
        """Reset the policy on the env's episode (call after ``env.reset``)."""
        core = env.core
        assert core.wl is not None
        if hasattr(self.policy, "reset"):
            self.policy.reset(
                core.cluster, core.wl, core.tm, rng if rng is not None else np.random.default_rng(0)
            )
        self.stats = AdapterStats()
        self._plan = None
        self._alloc = None
        self._round_key = None

    # ------------------------------------------------------------------ acting
    def act(self, env: ClusterParallelEnv) -> dict[str, int] | Allocation:
        """Actions for the next step, or an :class:`Allocation` for ``env.step_allocation``."""
        core = env.core
        assert core.sim is not None
        key = (int(core.sim.round_index), float(core.sim.time))
        if key != self._round_key:
            self._check_last_round(core)
            self._round_key = key
            alloc = self.policy.decide(core.sim_state())
            self.stats.rounds += 1
            self._alloc = alloc
            self._plan = self._make_plan(core, alloc) if self.prefer_actions else None
            self._step_i = 0
            if self._plan is None:
                self.stats.allocation_rounds += 1
                self._alloc = None
                return alloc
            self.stats.action_rounds += 1
        assert self._plan is not None and self._alloc is not None
        if self._step_i < len(self._plan):
            claims = self._plan[self._step_i]
            acts = self._encode(core, claims)
            if acts is None:  # the env would not reproduce the policy: apply it directly
                self.stats.action_rounds -= 1
                self.stats.allocation_rounds += 1
                alloc, self._alloc, self._plan = self._alloc, None, None
                return alloc
            self._step_i += 1
        else:
            acts = np.zeros(core.N, dtype=np.int64)
        return dict(zip(env.possible_agents, acts.tolist(), strict=True))

    def _check_last_round(self, core: EnvCore) -> None:
        if self._alloc is not None and not same_entries(core.last_alloc, self._alloc):
            self.stats.mismatches += 1
        self._alloc = None

    # ------------------------------------------------------------------ planning
    def _make_plan(self, core: EnvCore, alloc: Allocation) -> list[list[_Claim]] | None:
        """Split the round's new placements into per-step claims, or None if impossible."""
        cur = core.sim.current if core.sim is not None else Allocation.empty()
        running = np.unique(cur.job)
        kept = np.isin(alloc.job, running)
        if not same_entries(alloc.select(kept), cur):
            return None
        new = alloc.select(~kept)
        if new.size == 0:
            return []
        if np.any(new.share >= 0):
            return None
        uj, first = np.unique(new.job, return_index=True)
        claims: dict[int, _Claim] = {}
        for j in uj[np.argsort(first)].tolist():  # the jobs this round places
            c = self._claim_for(core, new, int(j))
            if c is None:
                return None
            claims[int(j)] = c
        pend = core.pending
        if not np.isin(uj, pend).all():
            return None
        placed = np.zeros(core.J, dtype=bool)
        left = set(claims)
        plan: list[list[_Claim]] = []
        while left:
            if len(plan) >= core.cfg.max_decisions_per_round:
                return None
            win = pend[~placed[pend]][: core.K]
            used: set[int] = set()
            step: list[_Claim] = []
            for j in win.tolist():
                c = claims.get(j)
                if c is None or j not in left:
                    continue
                nodes = set(c.nodes.tolist())
                if nodes & used:
                    continue
                used |= nodes
                step.append(c)
            if not step:
                return None  # a job the policy places never enters the window
            for c in step:
                placed[c.job] = True
                left.discard(c.job)
            plan.append(step)
        return plan

    def _claim_for(self, core: EnvCore, new: Allocation, j: int) -> _Claim | None:
        """Levels that reproduce job ``j``'s entries, or None."""
        assert core.jt is not None and core.wl is not None
        e = np.flatnonzero(new.job == j)
        nodes, gpus = new.node[e], new.gpus[e]
        if (
            np.unique(core.cluster.node_type[nodes]).size != 1
            or np.unique(nodes).size != nodes.size
        ):
            return None
        G = int(gpus.sum())
        lg_ok = np.flatnonzero((core.jt.gpu_count[j] == G) & core.jt.level_ok[j])
        if lg_ok.size == 0:
            return None
        wl, lv = core.wl, core.cfg.levels
        cl = core.cluster
        if lv.cap_at_node_share:
            base_c = np.minimum(wl.cpu_per_gpu[j], cl.node_cpus[nodes] / cl.node_gpus[nodes])
            base_m = np.minimum(wl.mem_per_gpu[j], cl.node_mem[nodes] / cl.node_gpus[nodes])
        else:
            base_c = np.full(nodes.size, wl.cpu_per_gpu[j])
            base_m = np.full(nodes.size, wl.mem_per_gpu[j])
        lc = _level_of(new.cpus[e] / (gpus * base_c), lv.cpu)
        lm = _level_of(new.mem[e] / (gpus * base_m), lv.mem)
        if lc is None or lm is None:
            return None
        return _Claim(j, nodes, gpus, (int(lg_ok[0]), lc, lm))

    def _encode(self, core: EnvCore, claims: list[_Claim]) -> NDArray[np.int64] | None:
        """Per-node actions of one step, checked against the env's masks and gang rule."""
        acts = np.zeros(core.N, dtype=np.int64)
        ma = core.ma
        for c in claims:
            slots = np.flatnonzero(core.window == c.job)
            if slots.size != 1:
                return None
            k = int(slots[0])
            lg, lc, lm = c.levels
            a = int(core.codec.encode(k, lg, lc, lm))
            if not np.all(ma.mask[c.nodes, a] == 1):
                return None
            single = ma.single[c.nodes, k, lg, lc, lm]
            if c.nodes.size == 1:
                if not bool(single[0]):
                    return None
            else:
                if single.any():
                    return None
                out = core._gang(k, np.sort(c.nodes), lg, lc, lm)
                if out is None:
                    return None
                use, g, _ = out
                o1, o2 = np.argsort(use), np.argsort(c.nodes)
                if not (np.array_equal(use[o1], c.nodes[o2]) and np.array_equal(g[o1], c.gpus[o2])):
                    return None
            acts[c.nodes] = a
        return acts


def _level_of(ratio: NDArray[np.float64], levels: tuple[float, ...]) -> int | None:
    """The single level index every ratio equals (relative tolerance), or None."""
    lv = np.asarray(levels)
    hit = np.isclose(ratio[:, None], lv[None, :], rtol=REL_TOL, atol=0.0).all(axis=0)
    idx = np.flatnonzero(hit)
    return int(idx[0]) if idx.size else None


def run_policy(
    env: ClusterParallelEnv,
    policy: Any,
    *,
    seed: int | None = None,
    rng: np.random.Generator | None = None,
    prefer_actions: bool = True,
) -> tuple[SimResult, AdapterStats]:
    """Run ``policy`` through ``env`` for one episode.

    Args:
        env: The multi-agent env (build it with :func:`env_kwargs_for` for exact equivalence
            with ``Simulator.run``).
        policy: The fixed policy.
        seed: Reset seed.
        rng: Generator handed to ``policy.reset``.
        prefer_actions: See :class:`PolicyAdapter`.

    Returns:
        The simulator result of the episode and the adapter's statistics.
    """
    adapter = PolicyAdapter(policy, prefer_actions=prefer_actions)
    env.reset(seed=seed)
    adapter.reset(env, rng)
    while env.agents:
        act = adapter.act(env)
        if isinstance(act, Allocation):
            env.step_allocation(act)
        else:
            env.step(act)
        adapter.stats.steps += 1
    adapter._check_last_round(env.core)
    return env.sim_result(), adapter.stats
