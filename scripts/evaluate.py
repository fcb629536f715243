"""Evaluate schedulers head to head: a thin wrapper of ``hetsched-evaluate``.

Same app, same overrides (see :mod:`hetsched.cli.evaluate` and docs/evaluation.md)::

    python scripts/evaluate.py scheduler=fifo workload=philly cluster=sia_64 seed=0
"""

from __future__ import annotations

import sys

from hetsched.cli.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
