"""MAIFS-style actor-critic network (PyTorch): shared node encoder, multi-agent attention,
soft coordination graph, fungible-action head and a centralised critic.

Shapes: ``B`` batch (decision steps), ``N`` agents (nodes; any number, parameters are shared),
``D`` observation length, ``K`` window slots, ``L = L_g L_c L_m`` level combinations,
``R`` resident slots, ``A = 1 + K L`` actions (``1 + K L + R`` with eviction actions, the
preemptive env ``hetsched/ClusterPreempt-v0``), ``H`` hidden size.

1. **Node encoder** (shared by all agents). The observation
   (:mod:`hetsched.envs.features`) is split into its blocks: a learned GPU-type embedding (from
   the one-hot), the node's resource scalars, the resident slots (a per-slot MLP, summed), the
   candidate window (a per-slot job MLP; the job encodings also feed the action head) and the
   global block. ``e_i = MLP([...])``.
2. **Multi-agent attention** (MAAC-style, ``heads`` heads):
   ``beta_ij = softmax_{j != i}((W_q e_i)^T (W_k e_j) / sqrt(d))``,
   ``x_i = concat_h sum_j beta_ij LeakyReLU(W_v e_j)``; context ``c_i = W_o [e_i; x_i]``. The
   squared attention logits are returned for the L2 penalty.
3. **Soft coordination graph** (DICG-style) over the step's graph ``E_t`` (agents with
   overlapping candidate jobs, :mod:`hetsched.agents.coordination`, plus self-loops):
   ``mu_ij = softmax_{j in E_t(i)}(c_i^T W_a c_j)``, ``E^{l+1} = tanh(mu E^l W^l)``,
   ``h_i = c_i + E^L_i``.
4. **Actor** (fungible head): ``z_ik = ReLU(U h_i + V job_ik)`` and
   ``logit(i, k, :) = W z_ik + b``, one logit per level combination ``l`` (GPU, CPU and memory
   levels chosen jointly with the job); the no-op logit is linear in ``h_i``. Masked entries
   get ``-1e9`` before the softmax. With eviction actions (``NetDims.evict_slots = R``), each
   resident slot's encoding ``u_ir`` (the per-slot MLP of step 1) gives one more logit,
   ``w_e^T ReLU(U_e h_i + V_e u_ir) + b_e``, appended after the claims.
   **Per-level claim term** (``level_head=True``; needs ``NetDims.level_bits = L_g``): each
   GPU level ``g`` of a claim also gets ``w_g^T ReLU(U_g z_ik + F_g [b_ikg; b_ik(g+1)] + e_g)``,
   added to the logits of every CPU and memory level at that GPU level, where ``b_ikg`` is
   the slot's input for GPU level ``g`` (the level's GPU count within the job's share of the
   cluster, ``agent.env.level_share_feature``; ``b_ik(L_g) = 0``) and ``e_g`` a learned
   embedding of the level. Each level's logit thus reads its own input and the next larger
   level's directly instead of through the job MLP. With ``NetDims.level_rates`` the pair
   per level is ``[b; r]``, ``r_ikg`` the job's rate at level ``g`` on node ``i`` over its best
   there (``agent.env.level_rate_feature``); the job MLP reads those rates too.
5. **Centralised critic**: ``V(s) = MLP([mean_i h_i; max_i h_i; global])`` -- size-agnostic.

Ablation switches: ``attention=False`` (no step 2: ``c_i = e_i``), ``graph=False`` (no step 3).

**Run-time ranks** (``runtime_rank=True``): the job MLP of step 1 gets two more inputs per
slot, computed here from the observation: each window job's estimated run time on the agent's
GPU type, ``t_ik = t_k / rho_ik`` (``t_k`` the remaining time at the fastest allowed type,
unsquashed from its window feature; ``rho_ik`` the relative throughput on the node's type),
as its rank among the slots with a legal action on that node (``#{j : t_ij < t_ik} / (n_i - 1)``)
and as ``squash(log(t_ik / min_j t_ij), 1)``; 1 for a slot with no legal action. Both are
scale-free: a trace family whose jobs run for days reads like one whose jobs run for minutes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

NEG = -1e9
#: Per-slot offsets, from the slot's end, of the window features the run-time ranks read
#: (:mod:`hetsched.envs.features`: the estimated remaining time is the last node-independent
#: feature, followed by the six node-specific ones [cpu, memory, relative throughput, allowed,
#: any legal action, fits at 1x]).
EST_FROM_END, REL_FROM_END, LEGAL_FROM_END = 7, 4, 2
#: Modules of the eviction head (present only with ``NetDims.evict_slots > 0``).
EVICT_HEAD: tuple[str, ...] = ("ev_h", "ev_r", "ev_out")
#: Modules of the resize head (present only with ``NetDims.resize_slots > 0``).
RESIZE_HEAD: tuple[str, ...] = ("rs_h", "rs_r", "rs_out")


@dataclass(frozen=True)
class NetDims:
    """Observation layout the network parses (from :class:`hetsched.envs.features.ObsLayout`).

    Attributes:
        obs_dim: D.
        num_types: GPU types T (one-hot width).
        node_head: Node scalars after the one-hot.
        resident_slots: R.
        res_dim: Features per resident slot.
        window: K.
        job_dim: Features per window slot.
        global_dim: Global block length.
        num_levels: ``L = L_g L_c L_m``.
        evict_slots: Eviction actions (0, or R for the preemptive env).
        resize_slots: Resize actions after them (0, or R for an env with ``resizable``).
        job_extra: Per-window-slot features the agent appends after the env's observation.
        res_extra: Per-resident-slot features the agent appends after those.
        level_bits: The last ``level_bits`` of a slot's ``job_extra`` features are one input per
            GPU level (``L_g`` of them; 0: none), which the per-level claim term reads.
        level_rates: Per node, window slot and GPU level, the job's rate at that level over its
            best (``L_g`` of them, after every block above; 0: none); the job MLP and the
            per-level claim term read them.
    """

    obs_dim: int
    num_types: int
    node_head: int
    resident_slots: int
    res_dim: int
    window: int
    job_dim: int
    global_dim: int
    num_levels: int
    evict_slots: int = 0
    resize_slots: int = 0
    job_extra: int = 0
    res_extra: int = 0
    level_bits: int = 0
    level_rates: int = 0

    def __post_init__(self) -> None:
        if self.level_bits and (
            self.level_bits > self.job_extra or self.num_levels % self.level_bits
        ):
            raise ValueError(
                f"level_bits={self.level_bits} must be at most job_extra={self.job_extra} and "
                f"divide num_levels={self.num_levels} (one input per GPU level)"
            )
        if self.level_bits and self.level_rates not in (0, self.level_bits):
            raise ValueError(
                f"level_rates={self.level_rates} must be 0 or level_bits={self.level_bits}"
            )
        for name, what in (("evict_slots", "eviction"), ("resize_slots", "resize")):
            if getattr(self, name) not in (0, self.resident_slots):
                raise ValueError(
                    f"{name}={getattr(self, name)} must be 0 (no {what} actions) or "
                    f"resident_slots={self.resident_slots} (one per resident slot)"
                )
        total = (
            self.extra_start
            + self.window * self.job_extra
            + self.resident_slots * self.res_extra
            + self.window * self.level_rates
        )
        if total != self.obs_dim:
            raise ValueError(f"observation blocks sum to {total}, not obs_dim={self.obs_dim}")

    @property
    def extra_start(self) -> int:
        """Offset of the first block the agent appends to the env's observation (the
        ``job_extra`` features)."""
        return (
            self.num_types
            + self.node_head
            + self.resident_slots * self.res_dim
            + self.window * self.job_dim
            + self.global_dim
        )

    @property
    def level_rates_start(self) -> int:
        """Offset of the ``level_rates`` block (the observation's last)."""
        return self.obs_dim - self.window * self.level_rates

    @property
    def num_actions(self) -> int:
        """A."""
        return 1 + self.window * self.num_levels + self.evict_slots + self.resize_slots

    def as_dict(self) -> dict[str, int]:
        """Plain dict (stored in checkpoints)."""
        return asdict(self)


def _mlp(i: int, h: int, o: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o), nn.ReLU())


class MAIFSNet(nn.Module):
    """The actor-critic (see the module docstring).

    Args:
        dims: Observation layout.
        hidden: Hidden size H.
        heads: Attention heads.
        graph_layers: Soft-graph layers.
        type_emb: GPU-type embedding size.
        attention: Use multi-agent attention.
        graph: Use the soft coordination graph.
        evict_bias: Initial bias of the eviction logits (negative: evict rarely at first, e.g.
            when a trained non-preemptive network starts a preemptive run).
        runtime_rank: Give the job MLP the run-time ranks (module docstring).
        level_head: Add the per-level claim term (module docstring); needs
            ``dims.level_bits``.
    """

    def __init__(
        self,
        dims: NetDims,
        hidden: int = 64,
        heads: int = 4,
        graph_layers: int = 2,
        type_emb: int = 16,
        attention: bool = True,
        graph: bool = True,
        evict_bias: float = 0.0,
        runtime_rank: bool = False,
        level_head: bool = False,
    ) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden={hidden} must be divisible by heads={heads}")
        if level_head and not dims.level_bits:
            raise ValueError(
                "level_head needs one input per GPU level (agent.env.level_share_feature=true)"
            )
        self.dims = dims
        self.hidden = hidden
        self.heads = heads
        self.use_attention = attention
        self.use_graph = graph
        self.runtime_rank = runtime_rank
        self.level_head = level_head
        H = hidden
        self.type_emb = nn.Embedding(dims.num_types, type_emb)
        self.res_enc = _mlp(dims.res_dim + dims.res_extra, H, H)
        ranks = 2 if runtime_rank else 0
        self.job_enc = _mlp(dims.job_dim + dims.job_extra + dims.level_rates + ranks, H, H)
        self.node_enc = _mlp(type_emb + dims.node_head + 2 * H + dims.global_dim, H, H)
        self.wq = nn.Linear(H, H, bias=False)
        self.wk = nn.Linear(H, H, bias=False)
        self.wv = nn.Linear(H, H, bias=False)
        self.wo = nn.Linear(2 * H, H)
        self.wa = nn.Linear(H, H, bias=False)
        self.gw = nn.ModuleList([nn.Linear(H, H, bias=False) for _ in range(graph_layers)])
        self.act_h = nn.Linear(H, H)
        self.act_j = nn.Linear(H, H, bias=False)
        self.act_out = nn.Linear(H, dims.num_levels)
        self.noop = nn.Linear(H, 1)
        if level_head:
            G, Hl = dims.level_bits, max(H // 4, 1)
            self.lv_z = nn.Linear(H, Hl)
            self.lv_f = nn.Linear(4 if dims.level_rates else 2, Hl, bias=False)
            self.lv_e = nn.Parameter(torch.zeros(G, Hl))
            self.lv_out = nn.Linear(Hl, 1)
        if dims.evict_slots:
            self.ev_h = nn.Linear(H, H)
            self.ev_r = nn.Linear(H, H, bias=False)
            self.ev_out = nn.Linear(H, 1)
            nn.init.constant_(self.ev_out.bias, float(evict_bias))
        if dims.resize_slots:
            self.rs_h = nn.Linear(H, H)
            self.rs_r = nn.Linear(H, H, bias=False)
            self.rs_out = nn.Linear(H, 1)
        self.critic = nn.Sequential(
            nn.Linear(2 * H + dims.global_dim, H),
            nn.ReLU(),
            nn.Linear(H, H),
            nn.ReLU(),
            nn.Linear(H, 1),
        )

    # ------------------------------------------------------------------ parts
    def encode(self, obs: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Node encodings ``(B, N, H)``, job encodings ``(B, N, K, H)``, global ``(B, G)`` and
        resident-slot encodings ``(B, N, R, H)`` (zero for empty slots)."""
        d = self.dims
        B, N, _ = obs.shape
        o = 0
        onehot = obs[..., o : o + d.num_types]
        o += d.num_types
        head = obs[..., o : o + d.node_head]
        o += d.node_head
        res = obs[..., o : o + d.resident_slots * d.res_dim].reshape(
            B, N, d.resident_slots, d.res_dim
        )
        o += d.resident_slots * d.res_dim
        win = obs[..., o : o + d.window * d.job_dim].reshape(B, N, d.window, d.job_dim)
        o += d.window * d.job_dim
        glob = obs[:, 0, o : o + d.global_dim]
        o += d.global_dim
        if d.job_extra:
            extra = obs[..., o : o + d.window * d.job_extra].reshape(B, N, d.window, d.job_extra)
            o += d.window * d.job_extra
        res_in = res
        if d.res_extra:
            rx = obs[..., o : o + d.resident_slots * d.res_extra]
            rx = rx.reshape(B, N, d.resident_slots, d.res_extra)
            res_in = torch.cat([res, rx.to(res.dtype)], dim=-1)
        temb = self.type_emb(onehot.argmax(dim=-1))
        res_e = self.res_enc(res_in) * res[..., :1]
        r = res_e.sum(dim=2) / d.resident_slots
        present = win[..., :1]
        win_in = self._with_ranks(win) if self.runtime_rank else win
        if d.job_extra:
            win_in = torch.cat([win_in, extra.to(win_in.dtype)], dim=-1)
        if d.level_rates:
            lr = obs[..., d.level_rates_start :].reshape(B, N, d.window, d.level_rates)
            win_in = torch.cat([win_in, lr.to(win_in.dtype)], dim=-1)
        jobs = self.job_enc(win_in) * present
        jpool = jobs.sum(dim=2) / present.sum(dim=2).clamp(min=1.0)
        e = self.node_enc(
            torch.cat([temb, head, r, jpool, glob[:, None, :].expand(B, N, -1)], dim=-1)
        )
        return e, jobs, glob, res_e

    @staticmethod
    def _with_ranks(win: Tensor) -> Tensor:
        """``win`` ``(B, N, K, job_dim)`` with the two run-time rank inputs appended."""
        J = win.shape[-1]
        s = win[..., J - EST_FROM_END].float().clamp(0.0, 0.9999)
        rel = win[..., J - REL_FROM_END].float()
        legal = (win[..., J - LEGAL_FROM_END] > 0.5) & (rel > 0)
        t = s / (1.0 - s) / rel.clamp(min=1e-6) + 1e-6  # hours on this node's type
        t = torch.where(legal, t, torch.full_like(t, float("inf")))
        n = legal.sum(dim=-1, keepdim=True)
        below = (t[..., None, :] < t[..., :, None]).sum(dim=-1)  # (B, N, K)
        rank = below / (n - 1).clamp(min=1)
        lo = t.min(dim=-1, keepdim=True).values
        lr = torch.log(t / lo)
        gap = lr / (lr + 1.0)
        one = torch.ones_like(rank)
        extra = torch.stack([torch.where(legal, rank, one), torch.where(legal, gap, one)], -1)
        return torch.cat([win, extra.to(win.dtype)], dim=-1)

    def attend(self, e: Tensor) -> tuple[Tensor, Tensor]:
        """MAAC-style attention over the other agents: context ``(B, N, H)``, logit L2 ``()``."""
        B, N, H = e.shape
        if not self.use_attention or N < 2:
            return e, e.new_zeros(())
        nh, dh = self.heads, H // self.heads
        q = self.wq(e).view(B, N, nh, dh).transpose(1, 2)  # (B, nh, N, dh)
        k = self.wk(e).view(B, N, nh, dh).transpose(1, 2)
        v = nn.functional.leaky_relu(self.wv(e)).view(B, N, nh, dh).transpose(1, 2)
        logits = q @ k.transpose(-1, -2) / dh**0.5  # (B, nh, N, N)
        eye = torch.eye(N, dtype=torch.bool, device=e.device)
        beta = torch.softmax(logits.masked_fill(eye, NEG), dim=-1)
        x = (beta @ v).transpose(1, 2).reshape(B, N, H)
        reg = (logits.masked_fill(eye, 0.0) ** 2).mean()
        return self.wo(torch.cat([e, x], dim=-1)), reg

    def attention_weights(self, e: Tensor) -> Tensor:
        """Attention weights ``beta`` of every head, shape (B, heads, N, N) (zero diagonal)."""
        B, N, H = e.shape
        nh, dh = self.heads, H // self.heads
        q = self.wq(e).view(B, N, nh, dh).transpose(1, 2)
        k = self.wk(e).view(B, N, nh, dh).transpose(1, 2)
        eye = torch.eye(N, dtype=torch.bool, device=e.device)
        return torch.softmax((q @ k.transpose(-1, -2) / dh**0.5).masked_fill(eye, NEG), dim=-1)

    def coordinate(self, c: Tensor, adj: Tensor) -> Tensor:
        """Soft coordination graph over ``adj`` ``(B, N, N)`` bool (self-loops added)."""
        if not self.use_graph:
            return c
        N = c.shape[1]
        eye = torch.eye(N, dtype=torch.bool, device=c.device)
        a = adj | eye
        score = (self.wa(c) @ c.transpose(-1, -2)) / c.shape[-1] ** 0.5
        mu = torch.softmax(score.masked_fill(~a, NEG), dim=-1)
        h = c
        for w in self.gw:
            h = torch.tanh(mu @ w(h))
        return c + h

    def level_inputs(self, obs: Tensor) -> Tensor:
        """Each window slot's per-GPU-level inputs (its share input, and its rate with
        ``dims.level_rates``) and the next larger level's, shape ``(B, N, K, L_g, 2)`` or
        ``(B, N, K, L_g, 4)`` (the last level's next is 0)."""
        d = self.dims
        B, N, _ = obs.shape
        o = d.extra_start
        extra = obs[..., o : o + d.window * d.job_extra].reshape(B, N, d.window, d.job_extra)
        cols = [extra[..., d.job_extra - d.level_bits :].float()]  # (B, N, K, G)
        if d.level_rates:
            rates = obs[..., d.level_rates_start :]
            cols.append(rates.reshape(B, N, d.window, d.level_rates).float())
        nxt = [torch.cat([c[..., 1:], torch.zeros_like(c[..., :1])], dim=-1) for c in cols]
        return torch.stack([*cols, *nxt], dim=-1)

    def heads_out(
        self, h: Tensor, jobs: Tensor, glob: Tensor, res: Tensor, lvl: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Unmasked logits ``(B, N, A)`` and values ``(B,)`` (``res``: resident encodings;
        ``lvl``: :meth:`level_inputs`, with ``level_head``)."""
        B, N, H = h.shape
        z = torch.relu(self.act_h(h)[:, :, None, :] + self.act_j(jobs))  # (B, N, K, H)
        claim = self.act_out(z)  # (B, N, K, L)
        if self.level_head:
            assert lvl is not None
            K, G = z.shape[2], self.dims.level_bits
            u = torch.relu(self.lv_z(z)[:, :, :, None, :] + self.lv_f(lvl) + self.lv_e)
            term = self.lv_out(u)  # (B, N, K, G, 1)
            claim = (claim.reshape(B, N, K, G, -1) + term).reshape(B, N, K, -1)
        claim = claim.reshape(B, N, -1)  # (B, N, K * L)
        parts = [self.noop(h), claim]
        if self.dims.evict_slots:
            u = torch.relu(self.ev_h(h)[:, :, None, :] + self.ev_r(res))  # (B,N,R,H)
            parts.append(self.ev_out(u)[..., 0])
        if self.dims.resize_slots:
            u = torch.relu(self.rs_h(h)[:, :, None, :] + self.rs_r(res))  # (B,N,R,H)
            parts.append(self.rs_out(u)[..., 0])
        logits = torch.cat(parts, dim=-1)
        value = self.critic(torch.cat([h.mean(dim=1), h.max(dim=1).values, glob], dim=-1))
        return logits, value[:, 0]

    def forward(self, obs: Tensor, mask: Tensor, adj: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Masked logits ``(B, N, A)``, values ``(B,)`` and the attention-logit L2 ``()``.

        Args:
            obs: Observations, shape (B, N, D).
            mask: Legal actions, shape (B, N, A) bool.
            adj: Coordination graph, shape (B, N, N) bool.
        """
        if obs.shape[-1] != self.dims.obs_dim:
            raise ValueError(
                f"observation size {obs.shape[-1]} != the network's {self.dims.obs_dim}; the env "
                "settings (window, resident slots, levels, model table) differ from training"
            )
        e, jobs, glob, res = self.encode(obs)
        c, reg = self.attend(e)
        h = self.coordinate(c, adj)
        lvl = self.level_inputs(obs) if self.level_head else None
        logits, value = self.heads_out(h, jobs, glob, res, lvl)
        return logits.masked_fill(~mask, NEG), value, reg
