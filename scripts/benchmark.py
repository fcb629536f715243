"""Run the benchmark over a split: a thin wrapper of ``hetsched-benchmark``.

Same app, same overrides (see :mod:`hetsched.benchmark.cli` and docs/benchmark.md)::

    python scripts/benchmark.py split=quick
"""

from __future__ import annotations

import sys

from hetsched.benchmark.cli import main

if __name__ == "__main__":
    sys.exit(main())
