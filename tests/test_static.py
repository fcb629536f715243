"""Lint, format and type checks run as part of the suite (the project's standard: ruff and mypy
clean), and the user docs hold together (links resolve, the README stays short)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PY_DIRS = ["hetsched", "scripts", "tests", "docs/examples"]
#: Pages other branches add (linked from the README and the docs already).
PENDING_PAGES: set[str] = set()
#: The README is a page for users, not a log.
README_MAX_LINES = 150


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


def _doc_files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_relative_links_in_the_docs_resolve() -> None:
    link = re.compile(r"\]\(([^)\s]+)\)")
    broken = []
    for page in _doc_files():
        for target in link.findall(page.read_text()):
            if re.match(r"[a-z]+://|mailto:|#", target):
                continue
            path = (page.parent / target.split("#")[0]).resolve()
            rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
            if not path.exists() and rel not in PENDING_PAGES:
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_readme_is_short() -> None:
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n < README_MAX_LINES, f"README.md has {n} lines; keep it under {README_MAX_LINES}"


#: The developers' guide keeps modules under about 600 lines; this check fails above 650.
MODULE_MAX_LINES = 650
#: ... and classes under 400 lines (``end_lineno - lineno`` of the class statement).
CLASS_MAX_LINES = 400
#: Modules still over the limit, to be split (each entry must still be over it).
LARGE_MODULES: set[str] = set()
#: Classes still over the limit, as ``path::Class`` (each entry must still be over it).
LARGE_CLASSES: set[str] = set()


def _package_modules() -> list[Path]:
    return sorted((ROOT / "hetsched").rglob("*.py"))


def test_modules_stay_small() -> None:
    sizes = {
        p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines()) for p in _package_modules()
    }
    over = {f for f, n in sizes.items() if n > MODULE_MAX_LINES}
    new = sorted(f"{f} ({sizes[f]} lines)" for f in over - LARGE_MODULES)
    assert not new, (
        f"modules over {MODULE_MAX_LINES} lines: {', '.join(new)}; split them (developers' guide: "
        "under ~600 lines)"
    )
    fixed = sorted(LARGE_MODULES - over)
    assert not fixed, f"no longer over {MODULE_MAX_LINES} lines: remove {fixed} from LARGE_MODULES"


def test_classes_stay_small() -> None:
    import ast

    sizes: dict[str, int] = {}
    for p in _package_modules():
        rel = p.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(p.read_text(), filename=rel)):
            if isinstance(node, ast.ClassDef):
                assert node.end_lineno is not None
                sizes[f"{rel}::{node.name}"] = node.end_lineno - node.lineno
    over = {c for c, n in sizes.items() if n > CLASS_MAX_LINES}
    new = sorted(f"{c} ({sizes[c]} lines)" for c in over - LARGE_CLASSES)
    assert not new, f"classes over {CLASS_MAX_LINES} lines: {', '.join(new)}; split them"
    fixed = sorted(LARGE_CLASSES - over)
    assert not fixed, f"no longer over {CLASS_MAX_LINES} lines: remove {fixed} from LARGE_CLASSES"
