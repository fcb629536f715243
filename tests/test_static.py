"""Lint, format and type checks run as part of the suite (the project's standard: ruff and mypy clean)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PY_DIRS = ["hetsched", "scripts", "tests"]


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_lint_and_format() -> None:
    pytest.importorskip("ruff", reason="ruff not installed (dev extra)")
    lint = _run([sys.executable, "-m", "ruff", "check", *PY_DIRS])
    assert lint.returncode == 0, f"ruff check failed (fix with `ruff check --fix`):\n{lint.stdout}"
    fmt = _run([sys.executable, "-m", "ruff", "format", "--check", *PY_DIRS])
    assert fmt.returncode == 0, f"ruff format would change files (run `ruff format`):\n{fmt.stdout}"


@pytest.mark.slow
def test_mypy_clean() -> None:
    pytest.importorskip("mypy", reason="mypy not installed (dev extra)")
    out = _run([sys.executable, "-m", "mypy"])  # files and options from pyproject.toml
    assert out.returncode == 0, f"mypy found type errors:\n{out.stdout}\n{out.stderr}"
