"""Dynamic coordination graph and conflict resolution of the node agents' claims.

At every decision step the graph is rebuilt from the action masks (maifs.md section 5.3)::

    C_i = { window slots k : agent i has a legal claim on k }
    E_t = { (i, j), i != j : C_i and C_j intersect }

Two ways to settle conflicting placements are implemented; ``conflict="ordered"`` is the
default and ``"maxsum"`` the ablation switch (``"none"`` leaves conflicts to the env's
arbitration, the "without coordination graph" ablation):

* **Ordered decision along the graph** (:func:`ordered_actions`). Agents decide one after the
  other, in the order of a given priority (the agent's node's relative rate on the jobs it may
  claim, ``agent.env.decision_order="rate"``), then most confident first (highest best-claim
  probability); once an agent claims a job that
  it can host alone, that job is masked for every later agent *adjacent in* ``E_t`` (only
  neighbours can claim it). No conflict can occur, and -- the reason it is the default -- the
  joint action has an exact log-probability, the sum of each agent's log-probability under the
  mask it actually saw, which is what the clipped PPO ratio needs. Cost: one pass over N agents
  with precomputed logits.
* **DCG max-sum** (:func:`maxsum_actions`). Utilities ``f_i`` are the actor's masked
  log-probabilities; pairwise payoffs ``f_ij(a_i, a_j) = -P`` when both claim the same
  singly-hostable job (``P`` much larger than any ``|f_i|``). Max-sum message passing over
  ``E_t`` for a fixed number of iterations (messages mean-centred), keeping the best joint
  action seen. It is greedy (no sampling distribution), so it is used at evaluation time only.

Both take the preemptive env's eviction actions (``extra`` trailing actions): they are no
claims, so they have no edge and no payoff; an agent may take one whatever its neighbours do.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

NEG = -1e9


def candidate_sets(mask: NDArray[np.integer], window: int) -> NDArray[np.bool_]:
    """Candidate jobs of every agent: slots with at least one legal claim.

    Args:
        mask: Flat action masks, shape (N, A) with ``A = 1 + window * L``.
        window: Window size K.

    Returns:
        Shape (N, K) bool.
    """
    N, A = mask.shape
    if (A - 1) % window:
        raise ValueError(f"mask width {A} is not 1 + window ({window}) * levels")
    return np.asarray(mask[:, 1:].reshape(N, window, -1).any(axis=2), dtype=bool)


def coordination_graph(cand: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Edges between agents whose candidate sets overlap (no self-loops).

    Args:
        cand: Candidate sets, shape (N, K) bool.

    Returns:
        Adjacency, shape (N, N) bool, symmetric, zero diagonal.
    """
    c = cand.astype(np.float32)
    adj = (c @ c.T) > 0
    np.fill_diagonal(adj, False)
    return np.asarray(adj, dtype=bool)


def _log_softmax(x: NDArray[np.float64]) -> NDArray[np.float64]:
    m = x.max(axis=-1, keepdims=True)
    z = x - m
    return np.asarray(z - np.log(np.exp(z).sum(axis=-1, keepdims=True)), dtype=np.float64)


def ordered_actions(
    logits: NDArray[np.float64],
    mask: NDArray[np.integer],
    single: NDArray[np.bool_],
    window: int,
    rng: np.random.Generator | None,
    *,
    graph: bool = True,
    extra: int = 0,
    binding: NDArray[np.bool_] | None = None,
    priority: NDArray[np.float64] | None = None,
    gang_type: NDArray[np.int64] | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Ordered decision: sample (or argmax) agent by agent, masking claimed jobs for neighbours.

    Args:
        logits: Actor logits, shape (N, A).
        mask: Action masks, shape (N, A) (column 0 is the no-op; an agent left without a
            legal action after its neighbours' claims may always pass).
        single: Whether each claim hosts its job alone on the agent, shape (N, A - 1).
        window: Window size K.
        rng: Sampling generator; ``None`` = greedy (argmax).
        graph: Mask a claimed job for the claimant's graph neighbours (False: independent
            decisions, conflicts left to the env).
        extra: Trailing actions that are not claims (the preemptive env's evictions, shape
            ``A = 1 + K L + extra``): never masked by a neighbour's claim, no edges.
        binding: The claims that made the no-op illegal, shape (N, A - 1 - extra)
            (:func:`hetsched.agents.acting.binding_claims`); given, passing is legal again once
            the agent's binding claims are all taken (None: once every claim is taken).
        priority: Decision order, shape (N,): higher decides first; ties (and None: all) to
            the most confident agent, then the lowest index.
        gang_type: Each agent's GPU type, shape (N,), to open gangs (``agent.env.gang_binding``):
            once an agent claims a job as a gang, the later agents of its GPU type may not
            claim another job as a gang, so they fill that one instead of splitting between
            two that neither fill (None: no such masking).

    Returns:
        ``(actions (N,), effective masks (N, A))``: the mask each agent decided under.
    """
    N, A = mask.shape
    P = A - extra  # no-op and claims
    L = (P - 1) // window
    eff = mask.astype(bool).copy()
    actions = np.zeros(N, dtype=np.int64)
    legal_logits = np.where(eff, logits, NEG)
    if not graph:
        return _pick(legal_logits, rng), eff
    adj = coordination_graph(candidate_sets(mask[:, :P], window))
    best = np.where(eff[:, 1:].any(axis=1), _log_softmax(legal_logits)[:, 1:].max(axis=1), NEG)
    keys = (np.arange(N), -best) if priority is None else (np.arange(N), -best, -priority)
    order = np.lexsort(keys)
    taken = np.zeros((N, window), dtype=bool)  # job k already claimed, as seen by agent i
    gang_open: dict[int, int] = {}  # GPU type -> the job slot claimed there as a gang
    slots = np.arange(P - 1) // L
    for i in order.tolist():  # one pass over the agents
        cut = np.repeat(taken[i], L)
        if gang_type is not None and int(gang_type[i]) in gang_open:
            cut |= ~single[i, : P - 1] & (slots != gang_open[int(gang_type[i])])
        if cut.any():
            eff[i, 1:P] &= ~cut
            if binding is not None:  # its binding claims taken: passing is legal again
                eff[i, 0] |= not (eff[i, 1:P] & binding[i]).any()
            elif not eff[i].any():  # every claim taken: passing is legal again
                eff[i, 0] = True
        row = np.where(eff[i], logits[i], NEG)
        a = int(_pick(row[None, :], rng)[0])
        actions[i] = a
        if 0 < a < P:
            k = (a - 1) // L
            if single[i, a - 1]:
                taken[adj[i], k] = True
            elif gang_type is not None:
                gang_open.setdefault(int(gang_type[i]), k)
    return actions, eff


def _pick(logits: NDArray[np.float64], rng: np.random.Generator | None) -> NDArray[np.int64]:
    if rng is None:
        return np.asarray(np.argmax(logits, axis=1), dtype=np.int64)
    p = np.exp(_log_softmax(logits))
    u = rng.random((logits.shape[0], 1))
    idx = (np.cumsum(p, axis=1) < u).sum(axis=1)
    return np.asarray(np.minimum(idx, logits.shape[1] - 1), dtype=np.int64)


def maxsum_actions(
    logits: NDArray[np.float64],
    mask: NDArray[np.integer],
    slot_single: NDArray[np.bool_],
    window: int,
    *,
    iters: int = 6,
    penalty: float = 1e3,
    extra: int = 0,
) -> NDArray[np.int64]:
    """DCG-style greedy joint action by max-sum over the coordination graph.

    Args:
        logits: Actor logits, shape (N, A).
        mask: Env action masks, shape (N, A).
        slot_single: Whether each window job is hosted by one node (claims conflict), (K,).
        window: Window size K.
        iters: Message-passing iterations.
        penalty: Payoff ``P`` of two agents claiming the same singly-hostable job.
        extra: Trailing actions that are not claims (the preemptive env's evictions, shape
            ``A = 1 + K L + extra``): like the no-op, no payoff with any neighbour's action.

    Returns:
        Joint greedy action, shape (N,).
    """
    N, A = mask.shape
    P = A - extra  # no-op and claims
    L = (P - 1) // window
    legal = mask.astype(bool)
    util = np.where(legal, _log_softmax(np.where(legal, logits, NEG)), NEG)  # (N, A)
    adj = coordination_graph(candidate_sets(mask[:, :P], window))
    none = np.full(extra, -1)  # the evictions: no slot, no conflict
    slot = np.concatenate([[-1], np.repeat(np.arange(window), L), none])  # (A,) slot per action
    conflict_slot = np.concatenate([[False], np.repeat(slot_single, L), np.zeros(extra, bool)])
    msg = np.zeros((N, N, A))  # msg[i, j] = m_{i -> j}(a_j)
    best_a = np.argmax(util, axis=1)
    best_v = _joint_value(best_a, util, adj, slot, conflict_slot, penalty)
    for _ in range(iters):
        belief = util + msg.sum(axis=0)  # (N, A): f_i + sum of incoming messages
        new = np.zeros_like(msg)
        for i in range(N):  # agents; vectorised over neighbours and actions
            nbrs = np.flatnonzero(adj[i])
            if nbrs.size == 0:
                continue
            b = belief[i][None, :] - msg[nbrs, i]  # exclude the message from j: (n, A)
            per_slot = np.full((nbrs.size, window), NEG)
            acts = np.arange(1, P)
            np.maximum.at(per_slot.T, slot[acts], b[:, 1:P].T)
            all_best = b.max(axis=1)  # (n,)
            free = np.max(np.delete(b, acts, axis=1), axis=1)  # best no-op or eviction
            # max over a_i of b(a_i) - P [slot(a_i) == slot(a_j), conflicting]
            k = slot[1:P]
            same = per_slot[:, k]  # (n, P - 1)
            other = _best_excluding(per_slot, free)[:, k]
            val = np.maximum(other, same - penalty)
            out = np.where(conflict_slot[1:P][None, :], val, all_best[:, None])
            rest = np.repeat(all_best[:, None], extra, axis=1)  # a_j an eviction: no payoff
            m = np.concatenate([all_best[:, None], out, rest], axis=1)
            m = np.where(legal[nbrs], m, NEG)
            lm = legal[nbrs]
            mean = (np.where(lm, m, 0.0).sum(axis=1) / np.maximum(lm.sum(axis=1), 1))[:, None]
            new[i, nbrs] = np.where(lm, m - mean, 0.0)
        msg = new
        a = np.argmax(np.where(legal, util + msg.sum(axis=0), NEG), axis=1)
        v = _joint_value(a, util, adj, slot, conflict_slot, penalty)
        if v > best_v:
            best_a, best_v = a, v
    return np.asarray(best_a, dtype=np.int64)


def _best_excluding(
    per_slot: NDArray[np.float64], noop: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Per (row, slot k): the best value over the no-op and every slot other than k."""
    n, K = per_slot.shape
    out = np.empty((n, K))
    for k in range(K):  # K window slots
        rest = np.delete(per_slot, k, axis=1)
        out[:, k] = np.maximum(noop, rest.max(axis=1) if rest.size else NEG)
    return out


def _joint_value(
    a: NDArray[np.int64],
    util: NDArray[np.float64],
    adj: NDArray[np.bool_],
    slot: NDArray[np.int64],
    conflict_slot: NDArray[np.bool_],
    penalty: float,
) -> float:
    """Sum of utilities minus the penalty per conflicting neighbour pair."""
    u = float(util[np.arange(a.shape[0]), a].sum())
    s = slot[a]
    c = conflict_slot[a]
    same = (s[:, None] == s[None, :]) & c[:, None] & c[None, :] & adj
    return u - penalty * float(np.triu(same, 1).sum())
