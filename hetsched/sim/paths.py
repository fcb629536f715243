"""Where data files live: shipped with the package, or raw files read by path.

* :func:`shipped_data` -- files under ``hetsched/data/`` (installed with the package; resolved with
  :mod:`importlib.resources`, so it works from a source checkout and from a wheel).
* :func:`shared_data` -- raw files that may not be redistributed (Alibaba v2023, the Sia-authored
  workloads, ...). They are read from ``$HETSCHED_SHARED_DATA`` if set, else from
  ``<repository root>/../shared/data`` (the layout of a source checkout next to ``shared/``).

Both resolve a missing ``foo.csv`` to ``foo.csv.gz`` when only the compressed copy exists, and
readers open ``.gz`` files transparently (:func:`open_text`).
"""

from __future__ import annotations

import gzip
import io
import os
from importlib import resources
from pathlib import Path
from typing import TextIO

from hetsched.sim.errors import TraceError

#: Environment variable naming the directory that holds the raw (non-shipped) data.
SHARED_DATA_ENV = "HETSCHED_SHARED_DATA"


def _with_gz(path: Path) -> Path | None:
    """``path`` if it exists, else ``path.gz`` if that exists, else None."""
    if path.exists():
        return path
    gz = path.with_name(path.name + ".gz")
    if gz.exists():
        return gz
    return None


def shipped_data(relpath: str | os.PathLike[str]) -> Path:
    """Path of a file shipped under ``hetsched/data/`` (e.g. ``"traces/itp/cluster10.csv"``).

    Args:
        relpath: Path relative to ``hetsched/data``. ``foo.csv`` also finds ``foo.csv.gz``.

    Raises:
        TraceError: If the file is not in the installed package.
    """
    root = Path(str(resources.files("hetsched").joinpath("data")))
    p = root / Path(relpath)
    found = _with_gz(p)
    if found is None:
        raise TraceError(
            f"shipped data file {p} not found; the hetsched installation is incomplete "
            "(reinstall the package, or pass an explicit path)"
        )
    return found


def shared_data_root() -> Path:
    """Directory of the raw shared data: ``$HETSCHED_SHARED_DATA`` or ``<repo>/../shared/data``."""
    env = os.environ.get(SHARED_DATA_ENV)
    if env:
        return Path(env).expanduser()
    repo_root = Path(__file__).resolve().parents[2]
    return repo_root.parent / "shared" / "data"


def shared_data(relpath: str | os.PathLike[str]) -> Path:
    """Resolve a raw data file that is read by path (not shipped).

    Args:
        relpath: An absolute path (returned as is if it exists), or a path relative to the shared
            data directory (``$HETSCHED_SHARED_DATA``, default ``<repo root>/../shared/data``),
            e.g. ``"traces/alibaba_v2023/openb_pod_list_gpuspec33.csv"``.

    Raises:
        TraceError: If the file does not exist, telling how to point at it.
    """
    rel = Path(relpath).expanduser()
    if rel.is_absolute():
        found = _with_gz(rel)
        if found is None:
            raise TraceError(f"data file {rel} not found")
        return found
    root = shared_data_root()
    found = _with_gz(root / rel)
    if found is None:
        src = (
            f"${SHARED_DATA_ENV}={os.environ[SHARED_DATA_ENV]}"
            if os.environ.get(SHARED_DATA_ENV)
            else f"the default {root} (${SHARED_DATA_ENV} is not set)"
        )
        raise TraceError(
            f"data file {str(rel)!r} not found under {src}. This file is not shipped with "
            f"hetsched (its licence does not allow it); set {SHARED_DATA_ENV} to the directory "
            "holding the raw data (the one with traces/ and workloads/), or pass an absolute "
            "path, e.g. workload.path=/abs/path/to/file.csv"
        )
    return found


def open_text(path: str | os.PathLike[str]) -> TextIO:
    """Open a text file for reading: ``.gz`` decompressed, UTF-8, a leading byte-order mark
    dropped, ``newline=""``."""
    p = Path(path)
    if p.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(p, "rb"), encoding="utf-8-sig", newline="")
    return open(p, encoding="utf-8-sig", newline="")  # noqa: SIM115 - caller closes
