"""``hetsched-benchmark``: the benchmark app (``hetsched.benchmark.cli``) behind the CLI's error
handling. When the installed package has no benchmark module it says so in one line (exit 2).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from hetsched.cli import EXIT_BAD_INPUT, run_app


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point of ``hetsched-benchmark``; returns the exit code.

    Args:
        argv: Hydra overrides (default: the command line).
    """
    try:
        mod = importlib.import_module("hetsched.benchmark.cli")
    except ModuleNotFoundError as err:
        if err.name not in ("hetsched.benchmark", "hetsched.benchmark.cli"):
            raise
        print(
            "error: this hetsched installation has no benchmark module (hetsched.benchmark.cli); "
            "reinstall hetsched from a version that ships it",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    app = getattr(mod, "app", None) or mod.main
    return run_app(app, argv)
