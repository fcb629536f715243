"""Exceptions raised by the simulator.

Every error names the offending file, row, field or value and, where possible, how to fix it.
All of them derive from :class:`HetschedError` (itself a :class:`ValueError`), so callers can catch
one type.
"""

from __future__ import annotations


class HetschedError(ValueError):
    """Base class of every error raised for bad input or an invalid schedule."""


class ConfigError(HetschedError):
    """A setting (a Hydra override, a preset field, an output path) has a value that cannot work."""


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


class SettingError(HetschedError):
    """A setting is out of range, not a number, or contradicts another setting."""
