"""Per-process memo of the trace loaders' parsed and selected jobs (numpy only).

A trace loader (:func:`hetsched.sim.traces.philly`, ``alibaba``, ``csv_trace``) does two kinds of
work: preparing the jobs (read the file, convert its columns, sort, filter), which depends only
on the loader's arguments and the file, and building the workload from them (pick the window,
assign models, work, resources), which also depends on the window (``start``, ``num_jobs``,
``busiest``) and draws from ``rng``. An RL env or a seed sweep calls the same loader once per
episode or seed, often with another window; re-preparing an 82k-row trace each time took
about a tenth of a second of CPU.

:func:`memoised` wraps such a loader. The first call with given arguments runs it and keeps the
selected jobs that the loader hands to its build step (:func:`record`, called by the loader's
pipeline); later calls with equal arguments apart from the window's values skip straight to
the build step with a copy of those jobs, their own window and the new ``rng``. The build step is the same code on both paths and draws the
same numbers from ``rng``, so a cached call returns exactly the workload an uncached one would.

* Keys: the loader, its arguments (lists, tuples and mappings compared by value), the working
  directory and ``$HETSCHED_SHARED_DATA`` (against which paths resolve), and the
  ``throughput`` and ``cluster`` objects by identity (the entry keeps them alive, so an
  identity is never reused while cached). ``rng`` and the window's values are not part of the
  key (which window options a call names is). A call whose
  arguments cannot be compared by value (an unknown object) is not cached.
* Files: every file the loader read (:func:`note_file`) is checked by size and modification
  time on each hit; a changed file is read again.
* Sharing: the cached jobs' arrays are read-only and every hit gets its own copy, so a
  workload's arrays can be written without touching the cache or other workloads.
* Size: the :data:`MAX_ENTRIES` most recently used entries; :func:`clear` empties it.

:func:`memoised_fixed` wraps a loader that does not use ``rng`` at all (e.g.
:func:`hetsched.sim.traces.sia_workload`): its whole workload is kept, and each call gets a copy.
"""

from __future__ import annotations

import copy
import functools
import os
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import PurePath
from typing import Any, TypeVar

import numpy as np

from hetsched.sim.paths import SHARED_DATA_ENV

#: Cached selections kept per process (least recently used dropped first).
MAX_ENTRIES = 16
#: The loader options that pick the window from the prepared jobs (applied on every call).
WINDOW_KEYS = ("start", "num_jobs", "busiest")

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class _Recording:
    """What one uncached loader call read and selected."""

    files: list[tuple[str, int, int]] = field(default_factory=list)
    jobs: Any = None
    opts: Any = None
    name: str = ""
    build: Callable[..., Any] | None = None


@dataclass(frozen=True)
class _Entry:
    files: tuple[tuple[str, int, int], ...]
    hold: tuple[Any, ...]  # the objects keyed by identity, kept alive
    jobs: Any
    opts: Any
    name: str
    build: Callable[..., Any]


_CACHE: OrderedDict[tuple[Any, ...], _Entry] = OrderedDict()
_ACTIVE: ContextVar[_Recording | None] = ContextVar("hetsched_trace_recording", default=None)
#: Calls answered from the cache and calls that ran the loader (for tests and benchmarks).
stats = {"hits": 0, "misses": 0}


class _UnkeyableError(Exception):
    """An argument that cannot be compared by value."""


def _freeze(v: Any) -> Any:
    """A hashable, type-tagged value-equal form of ``v``; raises :class:`_UnkeyableError`."""
    if v is None or isinstance(v, str | bytes | bool | int | float):
        return (type(v).__name__, v)
    if isinstance(v, PurePath):
        return ("path", str(v))
    if isinstance(v, np.generic):
        return _freeze(v.item())
    if isinstance(v, Mapping):
        return ("map", tuple(sorted((str(k), _freeze(x)) for k, x in v.items())))
    if isinstance(v, Sequence):
        return ("seq", tuple(_freeze(x) for x in v))
    raise _UnkeyableError(type(v).__name__)


def _copy_arrays(obj: Any) -> Any:
    """A shallow copy of ``obj`` (a dataclass) with every array field copied (writable)."""
    out = copy.copy(obj)
    for f in fields(obj):
        v = getattr(obj, f.name)
        if isinstance(v, np.ndarray):
            setattr(out, f.name, v.copy())
    return out


def _frozen(obj: Any) -> Any:
    """``obj`` (a dataclass) with read-only copies of its array fields."""
    out = _copy_arrays(obj)
    for f in fields(out):
        v = getattr(out, f.name)
        if isinstance(v, np.ndarray):
            v.setflags(write=False)
    return out


def _where() -> tuple[str, str]:
    """What relative and shared-data paths resolve against: the working directory and
    ``$HETSCHED_SHARED_DATA``."""
    return os.getcwd(), os.environ.get(SHARED_DATA_ENV, "")


def _files_unchanged(files: tuple[tuple[str, int, int], ...]) -> bool:
    for path, size, mtime in files:
        try:
            st = os.stat(path)
        except OSError:
            return False
        if st.st_size != size or st.st_mtime_ns != mtime:
            return False
    return True


def note_file(path: str, size: int, mtime_ns: int) -> None:
    """Tell the running :func:`memoised` call (if any) that it read ``path`` in this state."""
    rec = _ACTIVE.get()
    if rec is not None:
        rec.files.append((str(path), int(size), int(mtime_ns)))


def record(jobs: Any, opts: Any, name: str, build: Callable[..., Any]) -> None:
    """Keep the selected ``jobs`` (a dataclass of arrays) of the running :func:`memoised` call.

    Args:
        jobs: The selected jobs, handed unchanged to ``build`` by the loader.
        opts: The options ``build`` takes with them.
        name: The workload's name.
        build: ``build(jobs, opts, *, name, throughput, cluster, rng) -> Workload``.
    """
    rec = _ACTIVE.get()
    if rec is not None and is_dataclass(jobs):
        rec.jobs, rec.opts, rec.name, rec.build = _frozen(jobs), opts, name, build


def memoised(loader: F) -> F:
    """Wrap a trace loader ``loader(*args, throughput=, cluster=, rng=, **kw)`` (see the module
    docstring)."""
    return _memo(loader, fixed=False)


def memoised_fixed(loader: F) -> F:
    """Wrap a loader whose workload does not depend on ``rng`` (the files fix everything): the
    whole workload is kept, and every later call with equal arguments gets a copy of it."""
    return _memo(loader, fixed=True)


def _memo(loader: F, *, fixed: bool) -> F:
    @functools.wraps(loader)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        tm, cl, rng = kwargs.get("throughput"), kwargs.get("cluster"), kwargs.get("rng")
        rest = {k: v for k, v in kwargs.items() if k not in ("throughput", "cluster", "rng")}
        # The window's values are not part of the key (only which of them the call names, so
        # that the loader's own defaults stand for the others): a new window of a kept trace
        # costs only the window and the build.
        window = {} if fixed else {k: rest.pop(k) for k in WINDOW_KEYS if k in rest}
        try:
            key = (loader.__module__, loader.__qualname__, id(tm), id(cl), _freeze(args),
                   _freeze(rest), tuple(sorted(window)), _where())  # fmt: skip
        except _UnkeyableError:
            return loader(*args, **kwargs)
        hit = _CACHE.get(key)
        if hit is not None and _files_unchanged(hit.files):
            _CACHE.move_to_end(key)
            stats["hits"] += 1
            if fixed:
                return _copy_arrays(hit.jobs)
            opts = replace(hit.opts, **window) if window else hit.opts
            return hit.build(
                _copy_arrays(hit.jobs), opts, name=hit.name, throughput=tm, cluster=cl, rng=rng,
            )  # fmt: skip
        rec = _Recording()
        token = _ACTIVE.set(rec)
        try:
            out = loader(*args, **kwargs)
        finally:
            _ACTIVE.reset(token)
        stats["misses"] += 1
        if fixed and is_dataclass(out):
            rec.jobs, rec.build = _frozen(out), _copy_arrays
        if rec.build is not None:
            _CACHE[key] = _Entry(tuple(rec.files), (tm, cl), rec.jobs, rec.opts, rec.name,
                                 rec.build)  # fmt: skip
            _CACHE.move_to_end(key)
            while len(_CACHE) > MAX_ENTRIES:
                _CACHE.popitem(last=False)
        return out

    return wrapper  # type: ignore[return-value]


def clear() -> None:
    """Forget every cached selection."""
    _CACHE.clear()
