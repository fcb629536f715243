"""A heterogeneity- and sensitivity-aware shortest-job-first teacher that acts through the env.

Used to warm-start the MAIFS-style actor by behaviour cloning (then fine-tuned with MAPPO; see
:mod:`hetsched.agents.trainer`). It sees exactly what the agents see -- the env core's window,
masks and free resources -- and emits one flat action per node, so its decisions are
expressible by the actor and the cloned data is on the env's own action grid.

Rule, at every decision step:

1. Every window job gets an estimated run time on its best legal node: remaining work divided by
   the isolated throughput of the node's GPU type at its GPU level times the sensitivity factor
   ``phi`` at the best legal CPU level (memory at the request; more memory never speeds a job up
   in the simulator's model). The GPU level is the request, except for an elastic job with
   ``elastic_share``: the fastest level legal on that node alone whose GPU count is within the
   job's share of the cluster (its GPUs over the jobs in the system, at least 1), or the
   smallest legal level when none is within it. A busy cluster starts elastic jobs small, so
   more of them run at once at better per-GPU efficiency (as elastic schedulers such as Sia
   and Pollux do by resizing); an idle one starts them large.
2. *Long* jobs (estimated time above ``long_s``, or with ``long_drain`` above that many times
   the time the cluster needs to drain the work in the system, :func:`drain_ratio`) go first,
   longest first (they bound the makespan); the others shortest estimated time first
   (``order="sjf"``, for the mean JCT) or in window order.
3. Each job goes to the free node (not yet claimed this step) with the highest rate, ties to the
   best fit (fewest free GPUs) then the lowest index. With ``order="node"`` (node-major) the
   single-node claims are made node by node instead, in the order the agents decide in under
   ``decision_order="cores"`` (each node's best rate over the jobs it may host relative to the
   best rate any node offers each job, highest first, ties to the lower index): each node
   claims, of the jobs not yet claimed, the long jobs for which it is the fastest node still
   free (longest first), else the one it runs shortest, so a node's label depends on the other
   nodes only through the jobs the nodes before it took; gangs follow as below. A long job
   waits for a faster GPU when every free node that could host it has a GPU type on which it
   runs below ``min_rel_rate`` times the isolated throughput one node of the cluster could give
   it (the fastest allowed type with a node of its GPU count; :func:`best_alone_tput`). A job
   no node can host alone is claimed by every free legal node of the GPU type with the most
   free capacity (with ``gang_fastest``, of the type that runs it fastest among those whose
   free GPUs hold it; the env fills the gang).
4. Evictions (only in the preemptive env ``hetsched/ClusterPreempt-v0``, with ``evict_ratio``
   set; the preset's rule "preemption for short jobs" written in the env's actions): shortest
   first, each window job that has waited ``evict_wait_s`` and fits on no node at its request
   (and was not claimed in step 3) takes one victim: a job held on one node, whose eviction is
   legal there, that node having no action yet, whose estimated remaining time (isolated rate
   where it runs) is more than ``evict_ratio`` times the waiting job's run time on that node's
   GPU type, and whose release gives the waiting job room there (GPUs, CPU and memory at its
   request, an allowed GPU type). With ``evict_protect``, no job is a victim whose remaining
   time is at least that fraction of the longest remaining time among the jobs that could be
   victims at this step (the longest ones bound the makespan). Of several: the fewest GPUs,
   then the longest remaining time, then the lowest node index. The freed node is offered to
   the queue at the next decision step, where step 3 places the waiting job; a job evicted this
   round comes last in step 2's order for the rest of the round, after every other window job,
   so it takes a node only where none of them claims one.
   *Migrations* (only in the preemptive env with ``EnvSettings.migrate_speedup``, with
   ``migrate_gain_s`` set): an agent with no action evicts the one-node job (or, with
   ``EnvSettings.migrate_gangs``, the gang) in its resident slots whose estimated run time left
   (isolated rate at its GPUs, as placed) shortens most by moving to a node that is free this
   step, of a GPU type the job allows, with its GPUs, cores and memory free and no window job
   that could be placed there alone (with ``EnvSettings.migrate_multinode``, or to several
   such nodes of one type that hold a gang too large for one), if the time saved, less the
   model's restart delay, exceeds ``migrate_gain_s``; one move per target node (per set of
   nodes) and per job. The job rejoins the window and step
   3 places it on the fastest free node at the next decision step. With migrations, long jobs
   need not wait for a fast GPU (``min_rel_rate=0``). With ``EnvSettings.migrate_elastic`` an
   elastic job's move is valued at the GPU count the target node gives it
   (``EvictionRules.move_targets``), so it may grow onto an emptied node or move to fewer
   faster GPUs.
   *Shrinks* (only in the preemptive env, with ``shrink_share`` set): while a window job goes
   unclaimed this step, an agent with no action evicts the resident elastic job (held whole on
   its node, above its fewest GPUs) most above ``shrink_share`` times its share of the cluster
   (:func:`over_share`); it rejoins the window and step 1 restarts it within its share. Shrinks
   come before migrations, which take only the agents still without an action. Elastic
   schedulers such as Sia resize every job every round; this is the one move that gives back
   what a job took while the cluster was emptier.
5. Resizes (only in an env with ``resizable``, with ``resize_gain_s`` set): each agent with no
   action and a legal resize (the env allows one only where no waiting job fits the node)
   doubles the resident job whose estimated run time left (isolated rate at its GPUs where it
   runs) shortens most, if the time saved, less the model's restart delay, exceeds
   ``resize_gain_s``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from hetsched.agents.signals import (
    F64,
    best_alone_tput,
    cluster_share,
    drain_ratio,
    legal_evictions,
    level_rates,
    move_saved,
    no_single_claim,
    over_share,
    preemption_room,
    seen_remaining,
    share_guard,
    window_tput,
)
from hetsched.envs.core import EPS, EnvCore

if TYPE_CHECKING:
    from hetsched.agents.config import MAIFSAgentConf


class SJFTeacher:
    """Teacher actions for an :class:`EnvCore` (see the module docstring).

    Args:
        order: ``"sjf"`` (shortest estimated time first), ``"arrival"`` (window order) or
            ``"node"`` (node-major shortest first; module docstring, step 3).
        min_rel_rate: A job waits rather than run below this fraction of its best rate.
        fungible: Use the CPU levels (False: every job at its requested 1.0 levels).
        long_s: Jobs whose estimated time exceeds this (s) go first and wait for a fast GPU.
        evict_ratio: Evict for a waiting job a running one with this many times its run time
            left (module docstring, step 4; preemptive env only). None: never evict.
        evict_wait_s: Waiting time (s) after which a job may have a victim evicted for it.
        evict_protect: With ``evict_ratio``, spare the victims whose remaining time is at least
            this fraction (0, 1] of the longest among the possible victims (module docstring,
            step 4). None: spare none.
        elastic_share: Start elastic jobs at a GPU level within their share of the cluster
            (module docstring, step 1; False: at their request).
        resize_gain_s: Double a running elastic job when that saves more than this many
            seconds (module docstring, step 5; resizable env only). None: never resize.
        migrate_gain_s: Move a running job to a faster free node when that saves more than
            this many seconds (module docstring, step 4; an env with ``migrate_speedup``
            only). None: never migrate.
        share_guard: Claim only at levels :func:`share_guard` allows (the agent's
            ``env.share_guard``), so that its labels are actions of the agent.
        share_guard_all: The guard keeps the share of every free GPU (the agent's
            ``env.share_guard_all``).
        long_drain: A job is also *long* (step 2) when its run time is more than this many
            times the cluster's drain time (:func:`drain_ratio`). None: ``long_s`` alone.
        shrink_share: Evict a running elastic job above this many times its share of the
            cluster while a window job waits (module docstring, step 4; preemptive env only).
            None: never shrink.
        gang_fastest: A gang goes to the fastest GPU type whose free nodes have room for it
            (module docstring, step 3); False: to the type with the most free GPUs.
    """

    def __init__(
        self,
        order: str = "sjf",
        min_rel_rate: float = 0.5,
        fungible: bool = True,
        long_s: float = 3 * 3600.0,
        evict_ratio: float | None = None,
        evict_wait_s: float = 2 * 3600.0,
        elastic_share: bool = True,
        resize_gain_s: float | None = None,
        migrate_gain_s: float | None = None,
        share_guard: bool = False,
        share_guard_all: bool = False,
        evict_protect: float | None = None,
        long_drain: float | None = None,
        shrink_share: float | None = None,
        gang_fastest: bool = False,
    ) -> None:
        self.gang_fastest = bool(gang_fastest)
        if shrink_share is not None and not shrink_share >= 1.0:
            raise ValueError(f"shrink_share={shrink_share!r} must be >= 1 (or None)")
        self.shrink_share = None if shrink_share is None else float(shrink_share)
        if long_drain is not None and not long_drain > 0.0:
            raise ValueError(f"long_drain={long_drain!r} must be positive (or None)")
        self.long_drain = None if long_drain is None else float(long_drain)
        if evict_protect is not None and not 0.0 < evict_protect <= 1.0:
            raise ValueError(f"evict_protect={evict_protect!r} must lie in (0, 1] (or None)")
        self.evict_protect = None if evict_protect is None else float(evict_protect)
        self.share_guard = bool(share_guard)
        self.share_guard_all = bool(share_guard_all)
        for name, v in (("resize_gain_s", resize_gain_s), ("migrate_gain_s", migrate_gain_s)):
            if v is not None and not v >= 0.0:
                raise ValueError(f"{name}={v!r} must be >= 0 seconds (or None)")
        self.migrate_gain_s = None if migrate_gain_s is None else float(migrate_gain_s)
        self.resize_gain_s = None if resize_gain_s is None else float(resize_gain_s)
        if order not in ("sjf", "arrival", "node"):
            raise ValueError(f"order={order!r} must be 'sjf', 'arrival' or 'node'")
        if not 0.0 <= min_rel_rate <= 1.0:
            raise ValueError(f"min_rel_rate={min_rel_rate!r} must lie in [0, 1]")
        self.order = order
        self.min_rel_rate = float(min_rel_rate)
        self.fungible = fungible
        self.long_s = float(long_s)
        if evict_ratio is not None and not evict_ratio > 0.0:
            raise ValueError(
                f"evict_ratio={evict_ratio!r} must be positive (or None: no evictions)"
            )
        if not evict_wait_s >= 0.0:
            raise ValueError(f"evict_wait_s={evict_wait_s!r} must be >= 0 seconds")
        self.evict_ratio = None if evict_ratio is None else float(evict_ratio)
        self.evict_wait_s = float(evict_wait_s)
        self.elastic_share = bool(elastic_share)

    @classmethod
    def for_agent(cls, conf: MAIFSAgentConf) -> SJFTeacher:
        """The teacher an agent config clones: its ``teacher`` settings, ``env.fungible``."""
        t = conf.teacher
        return cls(
            t.order,
            t.min_rel_rate,
            conf.env.fungible,
            t.long_s,
            t.evict_ratio,
            t.evict_wait_s,
            t.elastic_share,
            t.resize_gain_s,
            t.migrate_gain_s,
            conf.env.share_guard,
            conf.env.share_guard_all,
            t.evict_protect,
            t.long_drain,
            t.shrink_share,
            t.gang_fastest,
        )

    def gpu_levels(self, core: EnvCore) -> slice:
        """The GPU levels the teacher uses: every level with the elastic share (fungible),
        else the request's."""
        g1 = core.cfg.levels.one_index[0]
        return slice(None) if self.fungible and self.elastic_share else slice(g1, g1 + 1)

    def rates(
        self, core: EnvCore, guard: NDArray[np.bool_] | None = None
    ) -> tuple[F64, NDArray[np.int64], NDArray[np.int64]]:
        """Rate of each (node, slot) at its GPU level (the request, or the elastic share) and
        best CPU level, and those levels. ``guard``: :func:`share_guard` of ``core`` if already
        computed (used only with ``share_guard``).

        Returns:
            ``(rate, cpu_level, gpu_level)``, each shape (N, K); rate 0 where the job cannot
            run alone there.
        """
        assert core.jt is not None
        w = np.where(core.slot_ok, core.window, 0)
        count = core.jt.gpu_count[w]  # (K, Lg)
        if self.share_guard:
            guard = share_guard(core, self.share_guard_all) if guard is None else guard
        else:
            guard = None
        rate_l, lvl_c, ok = level_rates(core, self.gpu_levels(core), self.fungible, guard)
        # GPU level: the fastest legal one within the job's share of the cluster's GPUs; if
        # none is within it, the smallest legal one (rigid jobs only have the request).
        share = max(1.0, cluster_share(core))
        within = ok & (count[None] <= share)
        small = np.where(ok, count[None], np.iinfo(np.int64).max)
        fallback = ok & (small == small.min(axis=2, keepdims=True))
        pick = np.where(within.any(axis=2, keepdims=True), within, fallback)
        lvl_g = np.argmax(np.where(pick, rate_l, -1.0), axis=2)  # (N, K)
        rate = np.take_along_axis(rate_l, lvl_g[..., None], axis=2)[..., 0]  # 0 where no level
        rate = rate * core.slot_ok[None, :]
        lvl = np.take_along_axis(lvl_c, lvl_g[..., None], axis=2)[..., 0]
        return rate, lvl, lvl_g

    def act(self, core: EnvCore) -> NDArray[np.int64]:
        """One action per node, shape (N,) (0 = no-op)."""
        assert core.sim is not None and core.jt is not None and core.wl is not None
        N = core.N
        actions = np.zeros(N, dtype=np.int64)
        if core.any_legal:
            self._place(core, actions)
        if self.evict_ratio is not None and core.cfg.preemptive and core.any_evictable:
            self._evict(core, actions, self.evict_ratio)
        if self.shrink_share is not None and core.cfg.preemptive and core.any_evictable:
            self._shrink(core, actions, self.shrink_share)
        if self.migrate_gain_s is not None and core.any_evictable:
            self._migrate(core, actions, self.migrate_gain_s)
        if self.resize_gain_s is not None and core.any_resizable:
            self._resize(core, actions, self.resize_gain_s)
        return actions

    def _migrate(self, core: EnvCore, actions: NDArray[np.int64], gain_s: float) -> None:
        """Step 4's migrations (module docstring): evictions written into ``actions`` (N,) of
        the agents that have no action."""
        assert core.sim is not None and core.wl is not None
        if core.cfg.migrate_speedup is None:
            return
        legal = legal_evictions(core) & (actions == 0)[:, None]  # (N, R)
        if not legal.any():
            return
        # targets: free this step, with no window job that could be placed there alone
        target = (actions == 0) & no_single_claim(core)
        mv, saved = move_saved(core, legal, target)
        if mv.node.size == 0:
            return
        top = saved.max(axis=1)
        cand = np.flatnonzero(top > gain_s)
        used = np.zeros(core.N, dtype=bool)
        moved = np.zeros(core.N, dtype=bool)
        gone: set[int] = set()  # a gang is a candidate on each of its nodes: move it once
        for i in cand[np.argsort(-top[cand], kind="stable")].tolist():  # most saved first
            n, j = int(mv.node[i]), int(mv.job[i])
            best = np.where(used, -np.inf, saved[i])
            t = int(np.argmax(best))
            if moved[n] or j in gone or not best[t] > gain_s:
                continue
            if mv.pooled is not None and mv.pooled[i, t]:  # several nodes: take them all
                group = mv.pooled[i] & (core.cluster.node_type == core.cluster.node_type[t])
                if used[group].any():
                    continue
                used[group] = True
            actions[n] = core.n_place + int(mv.slot[i])
            moved[n] = used[t] = True
            gone.add(j)

    def _shrink(self, core: EnvCore, actions: NDArray[np.int64], factor: float) -> None:
        """Step 4's shrinks (module docstring): evictions written into ``actions`` (N,) of the
        agents that have no action, each of its resident job most above ``factor`` times its
        share of the cluster (:func:`over_share`), while a window job goes unclaimed."""
        free = actions == 0
        if not (core.slot_ok & ~_claimed(core, actions)).any():
            return  # every waiting window job is placed this step: nothing to shrink for
        ratio = np.where(free[:, None], over_share(core), 0.0)  # (N, R)
        slot = np.argmax(ratio, axis=1)
        go = ratio[np.arange(core.N), slot] > factor
        actions[go] = core.n_place + slot[go]

    def _resize(self, core: EnvCore, actions: NDArray[np.int64], gain_s: float) -> None:
        """Step 5 of the module docstring: resizes written into ``actions`` (N,) of the agents
        that have no action."""
        assert core.sim is not None and core.wl is not None
        ro = core.resize_offset
        legal = (core.ma.mask[:, ro:] == 1) & (actions == 0)[:, None]  # (N, R)
        if not legal.any():
            return
        cur, wl = core.running(), core.wl
        e = np.where(legal, core.resident_entries(), 0)
        job, g = cur.job[e], cur.gpus[e]
        nt = core.cluster.node_type[:, None]  # slot (n, r) is on node n
        rem = seen_remaining(core)[job]
        now = core.tm.isolated(wl.model[job], nt, g, False)
        big = core.tm.isolated(wl.model[job], nt, 2 * g, False)
        saved = rem / np.maximum(now, EPS) - rem / np.maximum(big, EPS)
        saved -= core.tm.restart_delay_s[wl.model[job]]
        saved = np.where(legal & (now > 0) & (big > now), saved, -np.inf)
        slot = np.argmax(saved, axis=1)
        best = saved[np.arange(core.N), slot]
        go = best > gain_s
        actions[go] = ro + slot[go]

    def _place(self, core: EnvCore, actions: NDArray[np.int64]) -> None:
        """Steps 1-3 of the module docstring: claims written into ``actions`` (N,)."""
        assert core.sim is not None and core.jt is not None and core.wl is not None
        N = core.N
        g1, c1, m1 = core.cfg.levels.one_index
        guard = share_guard(core, self.share_guard_all) if self.share_guard else None
        rate, lvl, lvl_g = self.rates(core, guard)
        w = np.where(core.slot_ok, core.window, 0)
        rem = seen_remaining(core)[w]
        best_any = best_alone_tput(core, w)
        here = window_tput(core, w)
        nt = core.cluster.node_type
        top = rate.max(axis=0)
        est = np.where(top > 0, rem / np.where(top > 0, top, 1.0), np.inf)
        slots = np.flatnonzero(core.slot_ok)
        long = est > self.long_s
        if self.long_drain is not None:
            long |= core.slot_ok & (drain_ratio(core, w) > self.long_drain)
        if self.order in ("sjf", "node"):
            key = np.where(long, -est, est)  # long jobs first (makespan), then shortest first
            slots = slots[np.lexsort((est[slots], key[slots]))]
        if self.evict_ratio is not None and core.cfg.preemptive:  # evicted this round: last
            ev = core.evicted_this_round[w[slots]]
            slots = np.concatenate([slots[~ev], slots[ev]])
        taken = np.zeros(N, dtype=bool)
        claimed = np.zeros(core.K, dtype=bool)
        if self.order == "node":
            self._node_major(core, actions, rate, lvl, lvl_g, rem, est, long, taken, claimed)
        legal = core.ma.legal
        levels = self.gpu_levels(core)
        for k in slots.tolist():  # at most K jobs per step
            if claimed[k]:
                continue
            r = np.where(taken, 0.0, rate[:, k])
            if r.max() > 0:
                if long[k] and here[r > 0, k].max() < self.min_rel_rate * best_any[k]:
                    continue  # every free host's GPU type is too slow for it: wait
                cand = np.flatnonzero(r >= r.max() * (1 - 1e-9))
                n = int(cand[np.lexsort((cand, core.free_g[cand]))[0]])
                actions[n] = int(core.codec.encode(k, int(lvl_g[n, k]), int(lvl[n, k]), m1))
                taken[n] = True
                continue
            if core.ma.single[:, k, levels].any():
                continue  # hosts at a GPU count it may use exist but are taken this step
            gang = legal[:, k, g1, c1, m1] & ~taken
            if guard is not None:
                gang &= guard[:, k, g1, c1, m1]
            if not gang.any():
                continue
            cap = np.bincount(nt[gang], weights=core.free_g[gang], minlength=int(nt.max()) + 1)
            t = int(np.argmax(cap))
            if self.gang_fastest:  # of the types with room for it, the fastest
                g = int(core.wl.req_gpus[w[k]])
                tput = core.tm.isolated(core.wl.model[w[k]], np.arange(cap.size), g, False)
                room = cap >= g
                if room.any():
                    t = int(np.argmax(np.where(room, tput, -1.0)))
            members = np.flatnonzero(gang & (nt == t))
            actions[members] = int(core.codec.encode(k, g1, c1, m1))
            taken[members] = True

    def _node_major(
        self,
        core: EnvCore,
        actions: NDArray[np.int64],
        rate: F64,
        lvl: NDArray[np.int64],
        lvl_g: NDArray[np.int64],
        rem: F64,
        est: F64,
        long: NDArray[np.bool_],
        taken: NDArray[np.bool_],
        claimed: NDArray[np.bool_],
    ) -> None:
        """Node-major claims (``order="node"``): the nodes in the order of their best relative
        rate over the jobs they may host (:func:`hetsched.agents.acting.cores_priority`), each
        claiming the job it runs shortest (first, longest first, the long jobs for which it is
        the fastest node still free), at the levels of :meth:`rates`."""
        m1 = core.cfg.levels.one_index[2]
        top = rate.max(axis=0)
        ok = rate > 0
        rel = np.where(ok, rate / np.where(top > 0, top, 1.0)[None, :], -1.0)
        prio = rel.max(axis=1)
        t_here = np.where(ok, rem[None, :] / np.where(ok, rate, 1.0), np.inf)
        long = long & ok.any(axis=0)  # long jobs some node may host
        for n in np.lexsort((np.arange(core.N), -prio)).tolist():
            if prio[n] < 0:
                break
            key = t_here[n]
            if long.any():  # first on the fastest node still free for it; elsewhere by run time
                best = np.where(taken[:, None], 0.0, rate).max(axis=0)
                key = np.where(long & (rate[n] >= (1 - 1e-9) * best), -est - 1e12, key)
            k_key = np.where(ok[n] & ~claimed, key, np.inf)
            k = int(np.argmin(k_key))
            if not np.isfinite(k_key[k]):
                continue
            actions[n] = int(core.codec.encode(k, int(lvl_g[n, k]), int(lvl[n, k]), m1))
            taken[n] = claimed[k] = True

    def _evict(self, core: EnvCore, actions: NDArray[np.int64], ratio: float) -> None:
        """Step 4 of the module docstring: evictions written into ``actions`` (N,) of the
        agents that have no claim."""
        assert core.sim is not None and core.jt is not None and core.wl is not None
        wl, tm, cl = core.wl, core.tm, core.cluster
        g1, c1, m1 = core.cfg.levels.one_index
        legal_ev = legal_evictions(core) & (actions == 0)[:, None]  # (N, R)
        if not legal_ev.any():
            return
        w = np.where(core.slot_ok, core.window, 0)
        claimed = _claimed(core, actions)
        waited = core.sim.time - wl.arrival[w]
        fits = core.ma.legal[:, :, g1, c1, m1].any(axis=0)  # (K,) alone or as a gang
        cand = core.slot_ok & ~claimed & ~fits & (waited >= self.evict_wait_s)
        if not cand.any():
            return
        cur = core.running()
        ns, rs = np.nonzero(legal_ev)
        e = core.resident_entries()[ns, rs]
        vj = cur.job[e]
        one_node = np.bincount(cur.job, minlength=core.J)[vj] == 1  # gangs are not victims
        ns, rs, e, vj = ns[one_node], rs[one_node], e[one_node], vj[one_node]
        if ns.size == 0:
            return
        v_rate = tm.isolated(wl.model[vj], cl.node_type[ns], cur.gpus[e], False)
        v_rem = np.full(vj.shape, np.nan)  # NaN compares False: never a victim
        np.divide(seen_remaining(core)[vj], v_rate, out=v_rem, where=v_rate > 0)
        if self.evict_protect is not None and np.isfinite(v_rem).any():  # spare the longest
            v_rem[v_rem >= self.evict_protect * np.nanmax(v_rem)] = np.nan
        ks = np.flatnonzero(cand)
        ks = ks[np.argsort(core.est_run_s(w[ks]), kind="stable")]  # shortest first
        room = preemption_room(core, cur, e, ks, v_rem, ratio)  # (C, V)
        used = np.zeros(core.N, dtype=bool)
        for i in range(ks.size):  # at most K waiting jobs, each takes one victim
            c = np.flatnonzero(room[i] & ~used[ns])
            if c.size == 0:
                continue
            c = c[np.lexsort((ns[c], -v_rem[c], cur.gpus[e][c]))[0]]
            n = int(ns[c])
            actions[n] = core.n_place + int(rs[c])
            used[n] = True  # one action per node (and so one victim: it is on this node)


def _claimed(core: EnvCore, actions: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Window slots some agent claims in ``actions`` (N,), shape (K,)."""
    claimed = np.zeros(core.K, dtype=bool)
    placing = (actions > 0) & (actions < core.n_place)
    if placing.any():
        claimed[core.codec.decode(actions[placing])[0]] = True
    return claimed
