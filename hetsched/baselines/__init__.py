"""Fixed scheduling policies behind one interface (:class:`SchedulingPolicy`)."""

from __future__ import annotations

from hetsched.baselines.base import BasePolicy, Placer, SchedulingPolicy
from hetsched.baselines.heuristics import FIFO, LAS, YarnCS

__all__ = ["FIFO", "LAS", "BasePolicy", "Placer", "SchedulingPolicy", "YarnCS"]
