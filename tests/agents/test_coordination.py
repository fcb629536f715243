"""Unit tests: coordination graph, ordered decisions, max-sum, attention and graph masking."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hetsched.agents.coordination import (
    candidate_sets,
    coordination_graph,
    maxsum_actions,
    ordered_actions,
)
from hetsched.agents.network import MAIFSNet, NetDims

K, L = 3, 2
A = 1 + K * L


def _mask(rows: list[list[int]]) -> np.ndarray:
    """Masks from per-agent lists of legal slots (every level legal for a legal slot)."""
    m = np.zeros((len(rows), A), dtype=np.int8)
    m[:, 0] = 1
    for i, slots in enumerate(rows):
        for k in slots:
            m[i, 1 + k * L : 1 + (k + 1) * L] = 1
    return m


def test_graph_edges_iff_candidates_overlap() -> None:
    m = _mask([[0], [0, 1], [2], []])
    cand = candidate_sets(m, K)
    assert cand.tolist() == [
        [True, False, False],
        [True, True, False],
        [False, False, True],
        [False, False, False],
    ]
    adj = coordination_graph(cand)
    assert adj[0, 1] and adj[1, 0]
    assert not adj[0, 2] and not adj[1, 2] and not adj[2, 3]
    assert not adj.diagonal().any()


def test_ordered_decision_follows_the_priority_before_confidence() -> None:
    """A higher ``priority`` decides first whatever the logits; equal priorities fall back to
    the most confident, then the lowest index."""
    m = _mask([[0], [0], [0]])
    single = np.ones((3, A - 1), dtype=bool)
    logits = np.zeros((3, A))
    logits[:, 1] = [6.0, 5.0, 4.0]  # agent 0 the most confident
    acts, _ = ordered_actions(logits, m, single, K, None, priority=np.array([0.2, 0.2, 0.9]))
    assert acts.tolist() == [0, 0, 1]  # agent 2 first: slot 0 is then taken for the others
    acts, _ = ordered_actions(logits, m, single, K, None, priority=np.array([0.5, 0.5, 0.1]))
    assert acts.tolist() == [1, 0, 0]  # a tie between 0 and 1: the more confident, agent 0
    acts, _ = ordered_actions(logits, m, single, K, None)
    assert acts.tolist() == [1, 0, 0]


def test_ordered_decision_avoids_conflicts_and_respects_masks() -> None:
    m = _mask([[0, 1], [0, 1], [0], [2]])
    single = np.ones((4, A - 1), dtype=bool)
    logits = np.zeros((4, A))
    logits[:, 1] = 5.0  # everybody wants slot 0
    logits[0, 1] = 6.0  # agent 0 most of all
    acts, eff = ordered_actions(logits, m, single, K, None)
    assert acts[0] == 1  # the most confident agent gets slot 0
    claimed = [(a - 1) // L for a in acts if a > 0]
    assert len(claimed) == len(set(claimed))  # no job claimed twice
    assert acts[2] == 0  # its only job was taken: it passes
    assert all(m[i, a] == 1 for i, a in enumerate(acts))
    assert not eff[1, 1 : 1 + L].any()  # the effective mask removed the taken job
    rng = np.random.default_rng(0)
    for _ in range(50):
        a, e = ordered_actions(rng.normal(size=(4, A)), m, single, K, rng)
        assert all(e[i, x] for i, x in enumerate(a))
        sl = [(x - 1) // L for x in a if x > 0]
        assert len(sl) == len(set(sl))


def test_without_graph_agents_decide_independently() -> None:
    m = _mask([[0], [0]])
    logits = np.zeros((2, A))
    logits[:, 1] = 10.0
    acts, _ = ordered_actions(logits, m, np.ones((2, A - 1), dtype=bool), K, None, graph=False)
    assert acts.tolist() == [1, 1]  # both claim: the env arbitrates


def test_gang_claims_are_not_masked_for_others() -> None:
    m = _mask([[0], [0]])
    logits = np.zeros((2, A))
    logits[:, 1] = 10.0
    acts, _ = ordered_actions(logits, m, np.zeros((2, A - 1), dtype=bool), K, None)
    assert acts.tolist() == [1, 1]  # a multi-node job needs both claims


def test_maxsum_resolves_a_conflict() -> None:
    m = _mask([[0, 1], [0, 1]])
    logits = np.full((2, A), -5.0)
    logits[:, 0] = -1.0
    logits[0, 1], logits[0, 3] = 3.0, 2.0
    logits[1, 1], logits[1, 3] = 3.0, 0.5
    acts = maxsum_actions(logits, m, np.array([True, True, True]), K, iters=4)
    slots = sorted((a - 1) // L for a in acts)
    assert slots == [0, 1]  # independent argmax would put both on slot 0
    assert acts.tolist() == [3, 1]  # agent 0 gives way: it loses less by moving to slot 1


def _with_evictions(
    m: np.ndarray, logits: np.ndarray, legal: list[list[int]], value: float
) -> tuple[np.ndarray, np.ndarray, int]:
    """Masks and logits with R = 2 trailing eviction actions (legal ones at ``value``)."""
    R = 2
    me = np.concatenate([m, np.zeros((m.shape[0], R), dtype=np.int8)], axis=1)
    le = np.concatenate([logits, np.full((m.shape[0], R), -5.0)], axis=1)
    for i, slots in enumerate(legal):
        for r in slots:
            me[i, A + r] = 1
            le[i, A + r] = value
    return me, le, R


def test_maxsum_with_evictions_illegal_is_maxsum_without_them() -> None:
    m = _mask([[0, 1], [0, 1]])
    logits = np.full((2, A), -5.0)
    logits[:, 0] = -1.0
    logits[0, 1], logits[0, 3] = 3.0, 2.0
    logits[1, 1], logits[1, 3] = 3.0, 0.5
    me, le, R = _with_evictions(m, logits, [[], []], 0.0)
    single = np.array([True, True, True])
    acts = maxsum_actions(le, me, single, K, iters=4, extra=R)
    assert acts.tolist() == maxsum_actions(logits, m, single, K, iters=4).tolist() == [3, 1]


def test_maxsum_evictions_have_no_payoff_with_neighbours() -> None:
    m = _mask([[0], [0]])
    logits = np.full((2, A), -5.0)
    logits[:, 1] = 3.0  # both want slot 0 most ...
    # ... but agent 0 rates an eviction nearly as high: it evicts, agent 1 claims slot 0.
    me, le, R = _with_evictions(m, logits, [[1], []], 2.9)
    acts = maxsum_actions(le, me, np.array([True, True, True]), K, iters=4, extra=R)
    assert acts.tolist() == [A + 1, 1]
    # Two evictions by neighbours never conflict: both keep their best action.
    me, le, R = _with_evictions(m, logits, [[0], [1]], 4.0)
    acts = maxsum_actions(le, me, np.array([True, True, True]), K, iters=4, extra=R)
    assert acts.tolist() == [A, A + 1]


def _dims(N_types: int = 7) -> NetDims:
    return NetDims(
        obs_dim=7 + 7 + 2 * 3 + K * 4 + 5,
        num_types=N_types,
        node_head=7,
        resident_slots=2,
        res_dim=3,
        window=K,
        job_dim=4,
        global_dim=5,
        num_levels=L,
    )


def test_attention_excludes_self_and_masked_logits() -> None:
    torch.manual_seed(0)
    d = _dims()
    net = MAIFSNet(d, hidden=16, heads=4)
    e = torch.randn(2, 5, 16)
    beta = net.attention_weights(e)
    assert torch.allclose(beta.diagonal(dim1=-2, dim2=-1), torch.zeros(2, 4, 5))
    assert torch.allclose(beta.sum(-1), torch.ones(2, 4, 5))
    obs = torch.rand(1, 5, d.obs_dim)
    mask = torch.zeros(1, 5, d.num_actions, dtype=torch.bool)
    mask[..., 0] = True
    mask[0, 2, 3] = True
    logits, value, _ = net(obs, mask, torch.zeros(1, 5, 5, dtype=torch.bool))
    p = torch.softmax(logits, -1)
    assert float(p.detach()[~mask].max()) == 0.0
    assert value.shape == (1,)


def test_soft_graph_ignores_non_neighbours() -> None:
    torch.manual_seed(1)
    net = MAIFSNet(_dims(), hidden=16, heads=4)
    c = torch.randn(1, 3, 16)
    adj = torch.zeros(1, 3, 3, dtype=torch.bool)
    adj[0, 0, 1] = adj[0, 1, 0] = True  # agent 2 is isolated
    h1 = net.coordinate(c, adj)
    c2 = c.clone()
    c2[0, 2] += 5.0
    h2 = net.coordinate(c2, adj)
    assert torch.allclose(h1[0, :2], h2[0, :2])  # 0 and 1 do not see agent 2
    assert not torch.allclose(h1[0, 2], h2[0, 2])


def test_evictions_are_never_masked_by_claims_and_add_no_edges() -> None:
    R = 2
    m = np.hstack([_mask([[0], [0]]), np.ones((2, R), dtype=np.int8)])  # both may evict
    single = np.ones((2, A - 1), dtype=bool)
    logits = np.zeros((2, A + R))
    logits[0, 1] = 10.0  # agent 0 claims slot 0 first ...
    logits[1, 1] = 5.0
    logits[1, A + 1] = 4.0  # ... so agent 1 evicts its slot-1 job instead
    acts, eff = ordered_actions(logits, m, single, K, None, extra=R)
    assert acts.tolist() == [1, A + 1]
    assert eff[1, A:].all() and not eff[1, 1 : 1 + L].any()
    only_ev = np.hstack([_mask([[], []]), np.ones((2, R), dtype=np.int8)])
    assert not coordination_graph(candidate_sets(only_ev[:, :A], K)).any()


def test_eviction_head_scores_resident_slots_and_respects_masks() -> None:
    torch.manual_seed(0)
    d = NetDims(**{**_dims().as_dict(), "evict_slots": _dims().resident_slots})
    assert d.num_actions == 1 + K * L + d.resident_slots
    net = MAIFSNet(d, hidden=16, heads=4)
    obs = torch.rand(1, 3, d.obs_dim)
    mask = torch.zeros(1, 3, d.num_actions, dtype=torch.bool)
    mask[..., 0] = True
    mask[0, 1, -1] = True  # node 1 may evict its last slot
    logits, _, _ = net(obs, mask, torch.zeros(1, 3, 3, dtype=torch.bool))
    assert logits.shape == (1, 3, d.num_actions)
    p = torch.softmax(logits, -1).detach()
    assert float(p[~mask].max()) == 0.0 and float(p[0, 1, -1]) > 0.0
    # Slot 0's eviction logit reads that slot's features.
    lay = d.num_types + d.node_head
    obs2 = obs.clone()
    obs2[0, 1, lay + 1 : lay + d.res_dim] += 0.5  # slot 0 of node 1 (its present flag kept)
    full = torch.ones_like(mask)
    a, _, _ = net(obs, full, torch.zeros(1, 3, 3, dtype=torch.bool))
    b, _, _ = net(obs2, full, torch.zeros(1, 3, 3, dtype=torch.bool))
    ev0 = 1 + K * L
    assert not torch.allclose(a[0, 1, ev0], b[0, 1, ev0])
    with pytest.raises(ValueError, match="evict_slots=1 must be 0"):
        NetDims(**{**_dims().as_dict(), "evict_slots": 1})


def test_work_conserving_masks_pass_only_while_a_claim_is_left() -> None:
    """With the no-op illegal (a work-conserving agent mask), an agent whose jobs were all taken
    by the agents before it may pass again; the others claim even when they prefer to pass."""
    m = _mask([[0], [0], [1]])
    m[:, 0] = 0  # every agent starts with a legal single-node claim
    single = np.ones((3, A - 1), dtype=bool)
    logits = np.zeros((3, A))
    logits[:, 0] = 10.0  # every agent would rather pass
    logits[0, 1] = 1.0
    acts, eff = ordered_actions(logits, m, single, K, None)
    assert acts[2] > 0 and (acts[2] - 1) // L == 1  # must claim its job
    claimed = sorted((a - 1) // L for a in acts if a > 0)
    assert claimed == [0, 1]  # slot 0 went to one of agents 0 and 1
    loser = 1 if acts[0] > 0 else 0
    assert acts[loser] == 0 and eff[loser, 0] and not eff[loser, 1:].any()
    assert all(eff[i, a] for i, a in enumerate(acts))
