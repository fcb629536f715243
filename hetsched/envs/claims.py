"""Conflict resolution of a decision step (a mixin of :class:`~hetsched.envs.core.EnvCore`).

The rules (one winner per job among the claimants that host it alone, else a same-type gang)
are documented in :mod:`hetsched.envs.core`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from hetsched.envs.core_state import EPS, ClaimResult, CoreState, StepStats
from hetsched.sim.cluster import Cluster


def fill_gang(
    nodes: NDArray[np.int64], room: NDArray[np.int64], G: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]] | None:
    """``G`` GPUs over the fewest of ``nodes``, largest ``room`` (GPUs that fit) first.

    Ties go to the lower node index; the last node takes only what is still needed.

    Returns:
        ``(nodes, gpus per node)``, or None if the rooms add up to fewer than ``G``.
    """
    order = np.lexsort((nodes, -room))
    keep = room[order] > 0
    use_all, cap = nodes[order][keep], room[order][keep]
    cum = np.cumsum(cap)
    if cum.size == 0 or cum[-1] < G:
        return None
    cnt = int(np.searchsorted(cum, G) + 1)
    g = cap[:cnt].copy()
    g[-1] -= int(cum[cnt - 1] - G)
    return use_all[:cnt], g


def is_spread(cluster: Cluster, nodes: NDArray[np.int64], G: int) -> bool:
    """A job of ``G`` GPUs on ``nodes`` uses more nodes than the fewest that could hold it."""
    return nodes.size > -(-G // int(cluster.node_gpus[nodes].max()))


class ClaimResolver(CoreState):
    """Placement claims and evictions of one decision step, and the central placement."""

    def _commit(
        self,
        j: int,
        nodes: NDArray[np.int64],
        gpus: NDArray[np.int64],
        cpus: NDArray[np.float64],
        mem: NDArray[np.float64],
    ) -> None:
        self._add_entries(np.full(nodes.shape[0], j, dtype=np.int64), nodes, gpus, cpus, mem)

    def _gang(
        self,
        k: int,
        members: NDArray[np.int64],
        lg: int,
        lc: int,
        lm: int,
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], float] | None:
        """Fill a gang for slot ``k`` from ``members`` (one GPU type) at the given levels.

        Returns:
            ``(nodes, gpus, rate)`` of the gang, ``rate`` the job's isolated throughput there
            (work units/s, packed or spread as :func:`is_spread` rates it), or None if it
            cannot be filled or would not run.
        """
        assert self.jt is not None and self.wl is not None
        j = int(self.window[k])
        G = int(self.jt.gpu_count[j, lg])
        ma = self.ma
        cpg = ma.cpu_per_gpu[members, k, lc]
        mpg = ma.mem_per_gpu[members, k, lm]
        cap = np.minimum(
            self.free_g[members],
            np.minimum(
                np.floor(self.free_c[members] / cpg + EPS),
                np.floor(self.free_m[members] / mpg + EPS),
            ),
        ).astype(np.int64)
        cap = np.where(ma.mem_ok[members, k, lm], cap, 0)
        out = fill_gang(members, cap, G)
        if out is None:
            return None
        use, g = out
        spread = is_spread(self.cluster, use, G)
        t = int(self.cluster.node_type[use[0]])
        rate = float(self.jt.tput[j, t, lg, int(spread)])
        if not rate > 0:
            return None
        return use, g, rate

    def decision_step_of(self, actions: NDArray[np.int64]) -> tuple[ClaimResult, StepStats]:
        """One decision step of per-node actions, as every multi-agent env takes it.

        Resolves the claims and evictions (:meth:`resolve_claims`), counts them into a fresh
        :class:`StepStats` (with what happened since the last step, e.g. during reset) and
        closes the step (:meth:`end_decision`: a step that placed or evicted keeps the round
        going).

        Args:
            actions: One flat action per node, shape (N,).

        Returns:
            The per-agent outcome and the step's counts and reward inputs.
        """
        stats = StepStats()
        self.take_pending_stats(stats)
        res, placed = self.resolve_claims(actions)
        stats.placed = placed
        stats.invalid = int(np.count_nonzero(res.invalid))
        stats.conflicts = int(np.count_nonzero(res.conflict))
        stats.gang_failed = int(np.count_nonzero(res.gang_failed))
        stats.evicted = res.evicted_jobs
        stats.resized = res.resized_jobs
        self.end_decision(placed > 0 or res.evicted_jobs > 0 or res.resized_jobs > 0, stats)
        return res, stats

    def resolve_claims(self, actions: NDArray[np.int64]) -> tuple[ClaimResult, int]:
        """Resolve one decision step of per-node actions (see the module docstring).

        Claims are resolved first, then resizes (resizable envs only; their count is
        ``ClaimResult.resized_jobs``), then evictions (preemptive envs only; their count is
        ``ClaimResult.evicted_jobs``).

        Args:
            actions: One flat action per node, shape (N,); out-of-range values are invalid.

        Returns:
            The per-agent outcome and the number of jobs placed.

        Raises:
            ValueError: If ``actions`` is not one value per node.
        """
        N = self.N
        a = np.asarray(actions, dtype=np.int64)
        if a.shape != (N,):
            raise ValueError(
                f"actions has shape {a.shape}; resolve_claims needs one per node, ({N},)"
            )
        if self._claims_kernel is not None:  # the same outcome, compiled
            res, placed = self._resolve_compiled(a)
        else:
            res, placed = self._resolve_numpy(a)
        if (
            self.cfg.retry_refused
            and not (placed or res.evicted_jobs or res.resized_jobs)
            and res.gang_failed.any()
        ):
            self._refuse(a, res.gang_failed)
        return res, placed

    def _refuse(self, a: NDArray[np.int64], refused: NDArray[np.bool_]) -> None:
        """``EnvSettings.retry_refused``: mask the gang claims (legal, but not hosted by the node
        alone) of the slot each ``refused`` (N,) agent's action ``a`` (N,) claimed, for the rest
        of the round, and keep the round open. The agent's claims of that slot that its node
        hosts alone (other CPU or memory levels) stay legal."""
        agents = refused.nonzero()[0]
        slots = self.codec.decode_legal(a[agents])[0]
        ma = self.ma
        mask, legal = ma.mask.copy(), ma.legal.copy()  # masks may be shared (_empty_masks)
        gang = legal[agents, slots] & ~ma.single[agents, slots]  # (B, L_g, L_c, L_m)
        per_slot = gang[0].size  # claim actions per window slot, in the codec's order
        cols = 1 + slots[:, None] * per_slot + np.arange(per_slot)[None, :]
        mask[agents[:, None], cols] &= ~gang.reshape(agents.size, per_slot)
        legal[agents, slots] &= ~gang
        self.ma = replace(ma, mask=mask, legal=legal)
        self._any_legal = None
        self._obs_cache = self._common_cache = None
        self.refused_step = True

    def _resolve_numpy(self, a: NDArray[np.int64]) -> tuple[ClaimResult, int]:
        """:meth:`resolve_claims` on the numpy path."""
        N = self.N
        in_range = (a >= 0) & (a < self.n_actions)
        a_safe = np.where(in_range, a, 0)
        legal = in_range & (self.ma.mask[self._arange_n, a_safe] == 1)
        flags = np.zeros((4, N), dtype=bool)  # one allocation for the four outcome rows
        res = ClaimResult(
            invalid=~legal, granted=flags[0], conflict=flags[1], gang_failed=flags[2],
            evicted=flags[3],
        )  # fmt: skip
        claim = legal & (a_safe > 0) & (a_safe < self.n_place)
        placed = self._claims(claim, a_safe, res) if claim.any() else 0
        self._evict_and_resize(legal, a_safe, res)
        if placed or res.evicted_jobs or res.resized_jobs:
            self.refresh()
        return res, placed

    def _evict_and_resize(
        self, legal: NDArray[np.bool_], a: NDArray[np.int64], res: ClaimResult
    ) -> None:
        """Apply the legal resize, then eviction actions of a step (after its claims).

        Resizes go first: they keep every entry in place, so the resident slots the
        evictions name stay the ones the agents saw (an eviction takes a job's entries off
        every node, which shifts the slots of the nodes it shared). The order changes no
        outcome: a resize uses only its own node's free resources, which an eviction can
        only add to.
        """
        if self.n_actions == self.n_place:
            return
        ro = self.resize_offset
        rs = legal & (a >= ro)
        if rs.any():
            agents = rs.nonzero()[0]
            res.resized_jobs = self._resize(agents, a[agents] - ro)
        ev = legal & (a >= self.n_place) & (a < ro)
        if ev.any():
            agents = ev.nonzero()[0]
            res.evicted_jobs = self._evict(agents, a[agents] - self.n_place)
            res.evicted[agents] = True

    def _resolve_compiled(self, a: NDArray[np.int64]) -> tuple[ClaimResult, int]:
        """:meth:`resolve_claims` with the claims resolved by the compiled kernel
        (:mod:`hetsched.envs.kernels_claims`); evictions as on the numpy path."""
        kernel = self._claims_kernel
        assert self.jt is not None and kernel is not None
        N, ma = self.N, self.ma
        flags = np.empty((5, N), dtype=bool)
        ints = np.empty((3, N), dtype=np.int64)
        floats = np.empty((2, N))
        n_e, placed = kernel(
            a, self.n_place, ma.mask, self._codec_shape, self.window, self.jt.gpu_count,
            ma.single.reshape(N, -1), ma.cpu_per_gpu, ma.mem_per_gpu, ma.mem_ok, self.free_g,
            self.free_c, self.free_m, self._rule_code, self.cluster.node_type, self._n_types,
            self.cluster.node_gpus, self.jt.tput, flags, ints, floats,
        )  # fmt: skip
        res = ClaimResult(
            invalid=flags[0], granted=flags[1], conflict=flags[2], gang_failed=flags[3],
            evicted=flags[4],
        )  # fmt: skip
        if n_e:
            self._add_entries(ints[0, :n_e], ints[1, :n_e], ints[2, :n_e], floats[0, :n_e],
                              floats[1, :n_e])  # fmt: skip
        self._evict_and_resize(~res.invalid, a, res)
        if placed or res.evicted_jobs or res.resized_jobs:
            self.refresh()
        return res, int(placed)

    def _claims(self, claim: NDArray[np.bool_], a_safe: NDArray[np.int64], res: ClaimResult) -> int:
        """Resolve the legal placement claims ``claim`` (N,) of actions ``a_safe`` into ``res``;
        returns the number of jobs placed (the caller refreshes the masks)."""
        assert self.jt is not None
        N = self.N
        agents = claim.nonzero()[0]
        a_claim = a_safe[agents]
        ks, lgs, lcs, lms = self.codec.decode_legal(a_claim)
        jt, ma = self.jt, self.ma
        jobs = self.window[ks]
        G = jt.gpu_count[jobs, lgs]
        # 1) Jobs with at least one claimant that hosts them alone: one winner per job.
        single = ma.single.reshape(N, -1)[agents, a_claim - 1]  # same flat order as the codec
        placed = 0
        si = single.nonzero()[0]
        won = np.zeros(self.K, dtype=bool)
        if si.size:
            rule = self.cfg.conflict_rule
            if rule == "best_fit":
                score = self.free_g[agents[si]] - G[si]
            elif rule == "most_free":
                score = -self.free_g[agents[si]]
            else:
                score = np.zeros(si.size, dtype=np.int64)
            order = np.lexsort((agents[si], score, ks[si]))
            sk = ks[si][order]
            first = np.ones(sk.size, dtype=bool)
            first[1:] = sk[1:] != sk[:-1]
            win = si[order[first]]  # one claim per job, in window order
            nodes = agents[win]
            kw = ks[win]
            g = G[win]
            cpus = g * ma.cpu_per_gpu[nodes, kw, lcs[win]]
            mem = g * ma.mem_per_gpu[nodes, kw, lms[win]]
            self._add_entries(jobs[win], nodes, g, cpus, mem)
            res.granted[nodes] = True
            won = np.zeros(self.K, dtype=bool)
            won[kw] = True
            lost = won[ks]
            lost[win] = False
            res.conflict[agents[lost]] = True
            placed += int(win.size)
        # 2) Jobs claimed only by nodes that cannot host them alone: same-type gangs.
        rest = ~won[ks]
        if rest.any():
            nt = self.cluster.node_type
            for k in np.unique(ks[rest]).tolist():  # at most K jobs per step
                sel = ks == k
                ag, lg, lc, lm = agents[sel], lgs[sel], lcs[sel], lms[sel]
                # the fastest gang wins, then the fewest nodes, then the lowest lead index
                best: tuple[float, int, int] | None = None  # key of the best gang so far
                for t in np.unique(nt[ag]).tolist():
                    idx = np.flatnonzero(nt[ag] == t)
                    lead = int(idx[0])  # agents are sorted: the first is the lowest index
                    out = self._gang(k, ag[idx], int(lg[lead]), int(lc[lead]), int(lm[lead]))
                    if out is None:
                        continue
                    key = (-out[2], int(out[0].size), int(ag[lead]))
                    if best is None or key < best:
                        best = key
                        nodes_g, gg, c_l, m_l = out[0], out[1], int(lc[lead]), int(lm[lead])
                if best is None:
                    res.gang_failed[ag] = True
                    continue
                self._commit(
                    int(self.window[k]),
                    nodes_g,
                    gg,
                    gg * ma.cpu_per_gpu[nodes_g, k, c_l],
                    gg * ma.mem_per_gpu[nodes_g, k, m_l],
                )
                res.granted[nodes_g] = True
                res.conflict[ag[~np.isin(ag, nodes_g)]] = True
                placed += 1
        return placed

    def place_on_type(self, k: int, t: int, lg: int, lc: int, lm: int) -> bool:
        """Central placement: slot ``k`` on GPU type ``t`` at the given levels.

        The node is the best fit (fewest free GPUs that host the job alone, then lowest index,
        as the baselines' ``Placer``); if no node hosts it alone, a gang over the type's nodes
        (largest capacity first). Returns whether the job was placed.
        """
        assert self.jt is not None
        j = int(self.window[k])
        if j < 0:
            return False
        nodes = np.flatnonzero(self.cluster.node_type == t)
        single = self.ma.single[nodes, k, lg, lc, lm]
        if single.any():
            cand = nodes[single]
            n = int(cand[np.lexsort((cand, self.free_g[cand]))[0]])
            G = int(self.jt.gpu_count[j, lg])
            cpus = G * float(self.ma.cpu_per_gpu[n, k, lc])
            mem = G * float(self.ma.mem_per_gpu[n, k, lm])
            self._commit(j, np.array([n]), np.array([G]), np.array([cpus]), np.array([mem]))
        else:
            gang = self.ma.legal[nodes, k, lg, lc, lm] & ~self.ma.single[nodes, k, lg, lc, lm]
            members = nodes[gang]
            out = self._gang(k, members, lg, lc, lm) if members.size else None
            if out is None:
                return False
            use, g, _ = out
            self._commit(
                j, use, g, g * self.ma.cpu_per_gpu[use, k, lc], g * self.ma.mem_per_gpu[use, k, lm]
            )
        self.refresh()
        return True
