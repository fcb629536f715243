"""Optional numba: one switch and one compile helper for every compiled kernel of the package.

The envs' observation and mask kernels (:mod:`hetsched.envs.kernels`) and Hadar's dual-subroutine
kernels (:mod:`hetsched.baselines.hadar_kernels`) compile with numba when it is installed and
importable, unless ``HETSCHED_NUMBA=0``; otherwise their numpy reference code runs. This module
imports nothing of the package.
"""

from __future__ import annotations

import functools
import os
from types import ModuleType
from typing import Any

#: Set to "0" to use the numpy reference paths even when numba is installed.
ENV_VAR = "HETSCHED_NUMBA"


@functools.cache
def _import_numba() -> ModuleType | None:
    """numba, or None when it is not installed or cannot be imported (e.g. with this numpy)."""
    try:
        import numba
    except Exception:
        return None
    return numba


def numba_module() -> ModuleType | None:
    """The numba module, or None when it is disabled by :data:`ENV_VAR` or not importable."""
    if os.environ.get(ENV_VAR, "1").strip() == "0":
        return None
    return _import_numba()


def jit(nb: ModuleType, py: Any) -> Any:
    """``numba.njit`` with an on-disk cache where one can be written (else compiled once per
    process, e.g. in a read-only install)."""
    try:
        return nb.njit(cache=True, error_model="numpy", nogil=True)(py)
    except RuntimeError:  # no writable cache location
        return nb.njit(cache=False, error_model="numpy", nogil=True)(py)
