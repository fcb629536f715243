"""``python -m hetsched evaluate|train|benchmark [overrides...]``: the command-line apps."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

USAGE = (
    "usage: python -m hetsched {evaluate,train,benchmark} [hydra overrides ...]\n"
    "  evaluate   schedulers head to head (hetsched-evaluate)\n"
    "  train      train the MAIFS agent (hetsched-train)\n"
    "  benchmark  the benchmark splits (hetsched-benchmark)"
)


def _apps() -> dict[str, Callable[[Sequence[str] | None], int]]:
    def evaluate(argv: Sequence[str] | None) -> int:
        from hetsched.cli.evaluate import main

        return main(argv)

    def train(argv: Sequence[str] | None) -> int:
        from hetsched.cli.train import main

        return main(argv)

    def benchmark(argv: Sequence[str] | None) -> int:
        from hetsched.benchmark.cli import main

        return main(argv)

    return {"evaluate": evaluate, "train": train, "benchmark": benchmark}


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to the app named by the first argument; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    apps = _apps()
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    if args[0] not in apps:
        print(f"error: unknown command {args[0]!r}; choose one of {sorted(apps)}", file=sys.stderr)
        return 2
    return apps[args[0]](args[1:])


if __name__ == "__main__":
    sys.exit(main())
