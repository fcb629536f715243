"""Exceptions raised by the simulator.

Every error names the offending file, row, field or value and, where possible, how to fix it.
All of them derive from :class:`HetschedError` (itself a :class:`ValueError`), so callers can catch
one type.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])


class HetschedError(ValueError):
    """Base class of every error raised for bad input or an invalid schedule."""


class TraceError(HetschedError):
    """A workload trace file or workload specification is malformed."""


class ClusterSpecError(HetschedError):
    """A cluster specification (YAML, preset or machine list) is invalid."""


class UnknownGpuTypeError(ClusterSpecError):
    """A GPU type name is not in the catalogue."""


class AllocationError(HetschedError):
    """A scheduler returned an allocation the engine cannot apply."""


class SimulationStalledError(HetschedError):
    """The simulation cannot make progress (e.g. the policy never schedules a pending job)."""


def _project_error(exc: BaseException) -> HetschedError | None:
    """``exc`` or the error it wraps (e.g. Hydra's instantiation error), if one of ours."""
    seen = 0
    cur: BaseException | None = exc
    while cur is not None and seen < 5:
        if isinstance(cur, HetschedError):
            return cur
        cur, seen = cur.__cause__, seen + 1
    return None


def exit_on_input_error(main: _F) -> _F:
    """Decorate a command-line ``main``: one of our errors prints ``error: <message>`` as one
    line on stderr and exits with status 2, without a traceback (``HYDRA_FULL_ERROR=1`` re-raises
    it with the traceback)."""

    @functools.wraps(main)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return main(*args, **kwargs)
        except Exception as e:
            ours = _project_error(e)
            if ours is None or os.environ.get("HYDRA_FULL_ERROR") == "1":
                raise
            print("error: " + " ".join(str(ours).splitlines()), file=sys.stderr)
            raise SystemExit(2) from None

    return wrapper  # type: ignore[return-value]
