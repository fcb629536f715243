"""What the teacher's rules read, shared with the agent's features.

Estimates over an :class:`hetsched.envs.core.EnvCore`'s state: run times and throughputs of
window jobs, the job's share of the cluster, the drain-time ratio, the time a migration would
save, and the guards on CPU and memory shares. :class:`hetsched.agents.teacher.SJFTeacher`
decides with them; :func:`hetsched.agents.acting.agent_observations` shows some of them to the
agents (``agent.env.share_feature``, ``drain_feature``, ``move_feature``), so that what the
teacher's labels depend on is in the agents' observation.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from hetsched.envs.core import EPS, EnvCore
from hetsched.envs.evictions import MoveTargets
from hetsched.sim.allocation import Allocation
from hetsched.sim.throughput import single_node_tput

F64 = NDArray[np.float64]


def seen_remaining(core: EnvCore) -> NDArray[np.float64]:
    """Remaining work per job as the env's information track shows it (exact by default)."""
    assert core.sim is not None and core.wl is not None
    return core.features.observed_remaining(core.wl, core.sim.remaining)[0]


def window_tput(core: EnvCore, w: NDArray[np.int64]) -> NDArray[np.float64]:
    """Isolated throughput of window jobs ``w`` at their requested GPU count on each node's GPU
    type, packed on one node, shape (N, len(w))."""
    assert core.wl is not None and core.jt is not None
    G = core.jt.gpu_count[w, core.cfg.levels.one_index[0]]
    nt = core.cluster.node_type
    return np.asarray(
        core.tm.isolated(core.wl.model[w][None, :], nt[:, None], G[None, :], False),
        dtype=np.float64,
    )


def level_rates(
    core: EnvCore, gpu_levels: slice, fungible: bool, guard: NDArray[np.bool_] | None = None
) -> tuple[F64, NDArray[np.int64], NDArray[np.bool_]]:
    """Each window job's rate on each node at each GPU level, as the teacher's rate model
    values it: the isolated throughput at the level's GPU count on the node's type times the
    CPU sensitivity ``phi`` at the best CPU level legal for a claim on that node alone (memory
    at the request; among equal ``phi``, the smallest CPU level).

    Args:
        core: The env core at the decision step.
        gpu_levels: The GPU levels considered (others read as not legal).
        fungible: Consider every CPU level (False: only the request's).
        guard: :func:`share_guard` to apply, or None.

    Returns:
        ``(rate, cpu_level, legal)``, each shape (N, K, L_g): the rate (0 where not legal),
        the CPU level it is at, and whether some such claim is legal.
    """
    assert core.wl is not None and core.jt is not None
    wl, ma = core.wl, core.ma
    _, c1, m1 = core.cfg.levels.one_index
    w = np.where(core.slot_ok, core.window, 0)
    count = core.jt.gpu_count[w]  # (K, Lg)
    nt = core.cluster.node_type
    tput = np.asarray(
        core.tm.isolated(wl.model[w][None, :, None], nt[:, None, None], count[None], False),
        dtype=np.float64,
    )  # (N, K, Lg)
    ratio = ma.cpu_per_gpu / wl.cpu_per_gpu[w][None, :, None]  # (N, K, Lc)
    phi = core.tm.phi(wl.model[w][None, :, None], ratio, np.ones_like(ratio))
    lg, lc_n, _ = core.cfg.levels.sizes
    only = np.zeros((lg, lc_n), dtype=bool)  # the GPU and CPU levels considered
    only[gpu_levels, slice(None) if fungible else slice(c1, c1 + 1)] = True
    single = ma.single[:, :, :, :, m1] & only  # (N, K, Lg, Lc)
    if guard is not None:
        single = single & guard[..., m1]
    lc = np.asarray(core.cfg.levels.cpu)
    score = np.where(single, phi[:, :, None, :] - 1e-6 * lc, -np.inf)  # (N, K, Lg, Lc)
    lvl_c = np.argmax(score, axis=3)
    phi4 = np.broadcast_to(phi[:, :, None, :], score.shape)
    best_phi = np.take_along_axis(phi4, lvl_c[..., None], axis=3)[..., 0]  # (N, K, Lg)
    ok = np.isfinite(np.max(score, axis=3))  # (N, K, Lg)
    return np.where(ok, tput * best_phi, 0.0), lvl_c, ok


def cluster_share(core: EnvCore) -> float:
    """A job's share of the cluster's GPUs: all GPUs over the jobs in the system (the teacher's
    elastic-share rule, step 1, takes at least 1; ``agent.env.share_feature`` shows it)."""
    return float(core.cluster.num_gpus) / max(1, core.jobs_in_system)


def drain_ratio(core: EnvCore, w: NDArray[np.int64]) -> NDArray[np.float64]:
    """Each of window jobs ``w``'s run time over the time the cluster needs to drain the work
    in the system, shape (len(w),).

    A job's run time is its remaining work (as the information track shows it) over its
    isolated throughput at its request on the fastest GPU type present that it allows. The
    drain time is the GPU-seconds of every job in the system (waiting at the round's start or
    running; each its run time times its requested GPUs) over the cluster's GPUs. A job whose
    ratio is near 1 or above bounds the makespan if it starts last: the teacher's ``long_drain``
    rule starts it first, and ``agent.env.drain_feature`` shows the ratio. Jobs no present type
    can run count as infinitely long and add nothing to the drain time.
    """
    assert core.jt is not None
    rem = seen_remaining(core)
    best = core.jt.best_tput
    live = np.unique(np.concatenate([core.pending, core.running().job]))

    def run_s(j: NDArray[np.int64]) -> NDArray[np.float64]:
        out = np.full(j.shape, np.inf)
        np.divide(rem[j], best[j], out=out, where=best[j] > 0)
        return out

    assert core.wl is not None
    t = run_s(live) * core.wl.req_gpus[live]
    drain = float(t[np.isfinite(t)].sum()) / max(1, int(core.cluster.num_gpus))
    return np.asarray(run_s(w) / max(drain, EPS), dtype=np.float64)


def no_single_claim(core: EnvCore) -> NDArray[np.bool_]:
    """Nodes where no window job could be placed alone, shape (N,)."""
    return np.asarray(~core.ma.single.reshape(core.N, -1).any(axis=1), dtype=bool)


def move_saved(
    core: EnvCore, legal: NDArray[np.bool_], target: NDArray[np.bool_]
) -> tuple[MoveTargets, F64]:
    """The moves of the jobs in resident slots ``legal`` (N, R) to nodes ``target`` (N,) and
    the time each saves (s): the run time left where the job runs, less that on the target
    node, less the model's restart delay; -inf where it may not move there (a move to several
    nodes, ``EnvSettings.migrate_multinode``, counts only nodes of ``target``). Returns
    ``(moves, saved)``, ``saved`` shape (S, N) for the S candidate slots of ``moves``."""
    assert core.wl is not None
    mv = core.move_targets(legal, target)
    rem = seen_remaining(core)[mv.job]
    t_there = rem[:, None] / np.maximum(mv.there, EPS)
    saved = rem[:, None] / np.maximum(mv.here, EPS)[:, None] - t_there
    saved -= core.tm.restart_delay_s[core.wl.model[mv.job]][:, None]
    return mv, np.where(mv.ok & target[None, :], saved, -np.inf)


def legal_evictions(core: EnvCore) -> NDArray[np.bool_]:
    """Whether each agent's eviction of each resident slot is legal this step, shape (N, R): the
    R actions after the placements (never the resize actions a resizable env appends)."""
    return core.ma.mask[:, core.n_place : core.n_place + core.cfg.resident_slots] == 1


def move_savings(core: EnvCore) -> F64:
    """The most time (s) a migration would save each resident job, shape (N, R); 0 where the
    slot is empty, its eviction is not legal, or no move saves time.

    A move goes to a node of a GPU type the job allows, with the GPUs, cores and memory it
    holds free, that runs it at least ``EnvSettings.migrate_speedup`` times as fast, and where
    no window job could be placed alone (the teacher's step 4, without its "no action yet this
    step" condition, which depends on the other agents). ``agent.env.move_feature`` shows it.
    """
    out = np.zeros((core.N, core.cfg.resident_slots))
    if core.cfg.migrate_speedup is None or not core.any_evictable:
        return out
    legal = legal_evictions(core)
    if not legal.any():
        return out
    mv, saved = move_saved(core, legal, no_single_claim(core))
    if mv.node.size:
        out[mv.node, mv.slot] = np.maximum(saved.max(axis=1), 0.0)
    return out


def over_share(core: EnvCore) -> F64:
    """Each resident job's GPUs over its share of the cluster (:func:`cluster_share`, at least
    1), shape (N, R); 0 where the slot's eviction is not legal or its job is not an elastic job
    held whole on this node above its fewest GPUs (a restart there could give it fewer).

    The teacher's ``shrink_share`` rule evicts the jobs above a multiple of their share while
    a window job waits, and ``agent.env.shrink_feature`` shows the ratio.
    """
    out = np.zeros((core.N, core.cfg.resident_slots))
    if not core.cfg.preemptive or not core.any_evictable or core.wl is None:
        return out
    legal = legal_evictions(core)
    if not legal.any():
        return out
    cur, wl = core.running(), core.wl
    e = np.where(legal, core.resident_entries(), 0)
    job, g = cur.job[e], cur.gpus[e]
    one_node = np.bincount(cur.job, minlength=core.J)[job] == 1
    ok = legal & one_node & (wl.min_gpus[job] < wl.max_gpus[job]) & (g > wl.min_gpus[job])
    out[ok] = g[ok] / max(1.0, cluster_share(core))
    return out


def best_alone_tput(core: EnvCore, w: NDArray[np.int64]) -> NDArray[np.float64]:
    """The best isolated throughput each of jobs ``w`` could get on one node of the cluster at
    its request, shape (len(w),): on the fastest GPU type it allows that has a node with that
    many GPUs (0: no node could host it alone)."""
    assert core.wl is not None
    wl = core.wl
    tput = single_node_tput(core.tm, core.cluster, wl.model[w], wl.req_gpus[w], wl.allowed_types[w])
    return np.asarray(tput.max(axis=1), dtype=np.float64)


def preemption_room(
    core: EnvCore,
    cur: Allocation,
    v: NDArray[np.int64],
    ks: NDArray[np.int64],
    v_rem: NDArray[np.float64],
    ratio: float,
) -> NDArray[np.bool_]:
    """Which running entries may give way to which waiting jobs, shape (C, V).

    The check of the teacher's evictions (step 4): window slot ``ks[i]``'s job may take the place of entry ``v[j]`` of ``cur`` iff the entry's
    node is of a GPU type the job allows, releasing the entry leaves the job room there at its
    request (GPUs, CPU and memory), and the entry's job has more than ``ratio`` times the
    waiting job's run time there left.

    Args:
        core: The env core of the round.
        cur: The running entries (:meth:`EnvCore.running`).
        v: Candidate victim entries of ``cur``, shape (V,).
        ks: Candidate window slots, shape (C,).
        v_rem: The victims' estimated remaining times (s), shape (V,); NaN: never a victim.
        ratio: The least ratio of the victim's remaining time to the waiting job's run time.
    """
    wl, tm, jt = core.wl, core.tm, core.jt
    assert wl is not None and jt is not None and core.sim is not None
    _, c1, m1 = core.cfg.levels.one_index
    vn, vg = cur.node[v], cur.gpus[v]
    vt = core.cluster.node_type[vn]
    wj = core.window[ks]
    G = wl.req_gpus[wj]
    rate = tm.isolated(wl.model[wj][:, None], vt[None, :], G[:, None], False)  # (C, V)
    t_w = seen_remaining(core)[wj][:, None] / np.where(rate > 0, rate, np.nan)
    # Amounts at the request (the masks are skipped when nothing fits anywhere).
    cpg, mpg, mem_ok = core.features.window_amounts(jt, wl, core.window, core.slot_ok, core.node_up)
    need_c = cpg[vn[None, :], ks[:, None], c1] * G[:, None]
    need_m = mpg[vn[None, :], ks[:, None], m1] * G[:, None]
    return np.asarray(
        wl.allowed_types[wj][:, vt]
        & mem_ok[vn[None, :], ks[:, None], m1]
        & (core.free_g[vn][None, :] + vg[None, :] >= G[:, None])
        & (core.free_c[vn][None, :] + cur.cpus[v][None, :] >= need_c - EPS)
        & (core.free_m[vn][None, :] + cur.mem[v][None, :] >= need_m - EPS)
        & (v_rem[None, :] > ratio * t_w),  # NaN compares False
        dtype=bool,
    )


def share_guard(core: EnvCore, every_gpu: bool = False) -> NDArray[np.bool_]:
    """Claims that leave a node's other free GPUs their share of its CPU cores and memory,
    shape (N, K, L_g, L_c, L_m) (``agent.env.share_guard``).

    A claim passes iff the cores and memory it takes leave at least the node's cores (memory) per
    GPU times the GPUs it leaves free that the other window jobs could use (at most the sum of
    their ``min_gpus`` over the jobs whose GPU types include the node's; for a gang claim, every
    GPU it leaves free); with ``every_gpu`` (``agent.env.share_guard_all``) times every GPU it
    leaves free, so that jobs arriving later find their share too. A gang member is counted with
    the GPUs it can give at the claim's levels (its free GPUs, its cores and memory over the
    levels' per-GPU amounts, at most the job's GPUs). Every level of a (node, job) pair none of
    whose legal claims would pass stays legal: the guard never makes a job unplaceable on a
    node, it only takes away the levels that strand GPUs (free GPUs no job can use for want of
    cores or memory) where others exist.
    """
    assert core.jt is not None
    ma, cl = core.ma, core.cluster
    w = np.where(core.slot_ok, core.window, 0)
    G = core.jt.gpu_count[w].astype(np.float64)[None, :, :, None, None]  # (1, K, L_g, 1, 1)
    cpg = ma.cpu_per_gpu[:, :, None, :, None]  # (N, K, 1, L_c, 1)
    mpg = ma.mem_per_gpu[:, :, None, None, :]  # (N, K, 1, 1, L_m)
    fg, fc, fm = (x[:, None, None, None, None] for x in (core.free_g, core.free_c, core.free_m))
    cap = np.minimum(fg, np.minimum(np.floor(fc / cpg + EPS), np.floor(fm / mpg + EPS)))
    give = np.minimum(G, np.maximum(cap, 0.0))  # GPUs the claim takes on this node
    assert core.wl is not None
    need = np.where(core.slot_ok, core.wl.min_gpus[w], 0)[None, :]  # (1, K)
    need = need * core.wl.allowed_types[w][:, cl.node_type].T  # (N, K): usable on each node
    others = (need.sum(axis=1, keepdims=True) - need)[:, :, None, None, None]
    # free GPUs left that other waiting jobs could use; a gang member's are always counted (a
    # level whose cores or memory cut the GPUs a member gives leaves the rest stranded)
    left = fg - give if every_gpu else np.where(ma.single, np.minimum(fg - give, others), fg - give)
    per_c = (cl.node_cpus / cl.node_gpus)[:, None, None, None, None]
    per_m = (cl.node_mem / cl.node_gpus)[:, None, None, None, None]
    ok_c: NDArray[np.bool_] = fc - give * cpg >= left * per_c - EPS
    ok: NDArray[np.bool_] = ok_c & (fm - give * mpg >= left * per_m - EPS)
    some = np.asarray((ma.legal & ok).reshape(core.N, core.K, -1).any(axis=2), dtype=bool)
    return np.asarray(ok | ~some[:, :, None, None, None], dtype=bool)  # some: (N, K)
