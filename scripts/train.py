"""Train the MAIFS-style agent: a thin wrapper of ``hetsched-train``.

Same app, same overrides (see :mod:`hetsched.cli.train` and docs/training.md)::

    python scripts/train.py agent=maifs_quick
"""

from __future__ import annotations

import sys

from hetsched.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
