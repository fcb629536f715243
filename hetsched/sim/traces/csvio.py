"""Reading trace CSV files into typed columns, with messages that name the file, line and value.

The reader streams the file through :mod:`csv` in blocks of rows and keeps each column as one
numpy byte-string array (one byte per character; text that is not ASCII falls back to unicode),
so a parsed file takes about its own size in memory; numbers and date-times are converted per
column on request. Parsed files are memoised per process (:func:`read_table`), keyed by path,
size and modification time, so a runner building one workload per seed or per episode parses a
large trace once.
"""

from __future__ import annotations

import csv
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hetsched.sim import tracecache
from hetsched.sim.errors import TraceError
from hetsched.sim.paths import open_text

__all__ = ["Table", "read_table", "user_path"]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

#: Rows parsed per block (bounds the memory of the transient Python objects).
_BLOCK_ROWS = 1 << 13

#: Largest accepted integer value (GPU counts, batch sizes): beyond it a value is a typo.
_MAX_INT = 2**31 - 1


@dataclass
class Table:
    """A parsed CSV file: header, one array of raw cell text per column, source line per row.

    Attributes:
        path: The file.
        header: Column names (blanks and a byte-order mark stripped).
        columns: Raw cells of each column, numpy ``S`` (or ``U``) arrays of shape (rows,).
        lines: 1-based line of each row in the file (the header is line 1), shape (rows,).

    Cells are stored with the blanks around them stripped.
    """

    path: Path
    header: list[str]
    columns: list[NDArray[Any]]
    lines: IntArray

    @property
    def label(self) -> str:
        """The file name used in messages."""
        return self.path.name

    @property
    def num_rows(self) -> int:
        """Number of data rows."""
        return int(len(self.lines))

    def has(self, col: str) -> bool:
        """Whether the header has column ``col``."""
        return col in self.header

    def raw(self, col: str) -> NDArray[Any]:
        """The raw cells of ``col`` (``S`` or ``U`` array); a missing column raises."""
        try:
            return self.columns[self.header.index(col)]
        except ValueError:
            raise TraceError(
                f"{self.label}: missing column {col!r}; the header has {self.header} "
                f"(file {self.path})"
            ) from None

    def cell(self, i: int, col: str) -> str:
        """Row ``i``'s cell of ``col`` as text."""
        v = self.raw(col)[i]
        return v.decode("utf-8") if isinstance(v, bytes) else str(v)

    def strings(self, col: str) -> NDArray[np.str_]:
        """``col`` as unicode strings (blanks around each value are stripped when read)."""
        arr = self.raw(col)
        return arr.astype(str) if arr.dtype.kind == "S" else arr.copy()

    def error(self, i: int, col: str, value: Any, what: str) -> TraceError:
        """A :class:`TraceError` naming the file, row ``i``'s line, the column and the value."""
        return TraceError(f"{self.label}: line {int(self.lines[i])}: {col} = {value!r} {what}")

    # ------------------------------------------------------------------ typed columns
    def floats(self, col: str, *, allow_empty: bool = False) -> FloatArray:
        """``col`` as float64; an empty cell becomes NaN only if ``allow_empty``."""
        raw = self.raw(col)
        if allow_empty:
            empty = np.char.str_len(raw) == 0
            if empty.any():
                raw = np.where(empty, raw.dtype.type("nan"), raw)
        try:
            arr = raw.astype(np.float64)
        except ValueError:
            for i in range(len(raw)):
                try:
                    float(raw[i])
                except ValueError:
                    raise self.error(i, col, self.cell(i, col), "is not a number") from None
            raise  # pragma: no cover - numpy and float() disagree
        if not allow_empty:
            bad = ~np.isfinite(arr)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise self.error(i, col, self.cell(i, col), "is not a finite number")
        return arr

    def ints(self, col: str) -> IntArray:
        """``col`` as int64: whole numbers of magnitude below 2**31."""
        try:  # plain integers (the common case) parse without a float copy
            whole = self.raw(col).astype(np.int64)
        except (ValueError, OverflowError):
            pass
        else:
            if whole.size == 0 or max(-int(whole.min()), int(whole.max())) <= _MAX_INT:
                return whole
        arr = self.floats(col)
        big = np.abs(arr) > _MAX_INT
        if big.any():
            i = int(np.flatnonzero(big)[0])
            raise self.error(
                i, col, self.cell(i, col), f"is too large (at most {_MAX_INT}); check the "
                "column mapping and the value"
            )  # fmt: skip
        bad = arr != np.round(arr)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise self.error(i, col, self.cell(i, col), "is not an integer")
        return arr.astype(np.int64)

    def datetimes(self, col: str) -> FloatArray:
        """Date-times (``YYYY-MM-DD HH:MM:SS``, ISO 8601) as seconds since the epoch.

        A value that is not a date-time, a bare number included (numpy would read ``2017`` or
        ``1506812400`` as a year), raises naming its line.
        """
        raw = self.raw(col)
        dash = raw.dtype.type("-")
        ok = (np.char.str_len(raw) >= 10) & (np.char.find(raw, dash) == 4)
        ok &= np.char.count(raw, dash) >= 2
        what = "is not a date-time (YYYY-MM-DD HH:MM:SS)"
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            raise self.error(i, col, self.cell(i, col), what)
        try:
            arr = raw.astype("datetime64[s]")
        except ValueError:
            for i in range(len(raw)):
                try:
                    np.datetime64(self.cell(i, col), "s")
                except ValueError:
                    raise self.error(i, col, self.cell(i, col), what) from None
            raise  # pragma: no cover
        if np.isnat(arr).any():
            i = int(np.flatnonzero(np.isnat(arr))[0])
            raise self.error(i, col, self.cell(i, col), what)
        return arr.astype(np.int64).astype(np.float64)

    def times(self, col: str, scale: float) -> FloatArray:
        """Numbers in units of ``scale`` seconds, or date-times if the first value is one."""
        first = self.cell(0, col)
        try:
            float(first)
        except ValueError:
            try:
                np.datetime64(first, "s")
            except ValueError:
                raise self.error(0, col, first, "is neither a number nor a date-time") from None
            return self.datetimes(col)
        return self.floats(col) * scale


# ====================================================================== reading
def read_table(path: Path, required: Sequence[str] = ()) -> Table:
    """Read a (possibly gzipped) CSV with a header; blank lines are ignored.

    Args:
        path: The file.
        required: Columns that must be in the header.

    Raises:
        TraceError: For a missing file, an unreadable file, an empty file, duplicate header
            columns, a row whose field count differs from the header's, or a missing column.
    """
    try:
        st = Path(path).stat()
    except FileNotFoundError:
        raise TraceError(f"trace file {path} not found") from None
    tracecache.note_file(str(path), st.st_size, st.st_mtime_ns)
    tab = _read_csv_cached(str(path), st.st_size, st.st_mtime_ns)
    for col in required:
        tab.raw(col)
    return tab


@functools.lru_cache(maxsize=8)
def _read_csv_cached(path_str: str, size: int, mtime_ns: int) -> Table:
    """The memoised parse behind :func:`read_table` (size and mtime are cache keys only)."""
    del size, mtime_ns
    path = Path(path_str)
    try:
        with open_text(path) as f:
            reader = csv.reader(f)
            header_row: list[str] | None = None
            for row in reader:
                if row:
                    header_row = row
                    break
            if header_row is None:
                raise TraceError(
                    f"{path.name}: the file is empty; expected a header line (file {path})"
                )
            header = _header(header_row, path)
            blocks = list(_blocks(reader, len(header), header, path))
    except FileNotFoundError:
        raise TraceError(f"trace file {path} not found") from None
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as e:
        raise TraceError(f"{path.name}: cannot read as CSV ({e}) (file {path})") from None
    if not blocks:
        raise TraceError(f"{path.name}: no data rows after the header (file {path})")
    lines = np.concatenate([b[0] for b in blocks])
    columns = []
    for c in range(len(header)):
        parts = [b[1][c] for b in blocks]
        columns.append(parts[0] if len(parts) == 1 else np.concatenate(parts))
        for b in blocks:  # free each block's copy as soon as it is joined
            b[1][c] = parts[0][:0]
    lines.setflags(write=False)
    for col in columns:
        col.setflags(write=False)
    return Table(path, header, columns, lines)


def _header(row: list[str], path: Path) -> list[str]:
    header = [h.strip().lstrip("\ufeff").strip() for h in row]
    seen: dict[str, int] = {}
    for j, h in enumerate(header):
        if h in seen:
            raise TraceError(
                f"{path.name}: line 1: column {h!r} appears twice in the header (fields "
                f"{seen[h] + 1} and {j + 1}); rename or remove one (file {path})"
            )
        seen[h] = j
    return header


def _blocks(
    reader: Any, width: int, header: list[str], path: Path
) -> Iterator[tuple[IntArray, list[NDArray[Any]]]]:
    """Blocks of (lines, one array per column) from ``reader``, skipping blank lines."""
    rows: list[list[str]] = []
    nums: list[int] = []
    for row in reader:
        if not row:
            continue
        if len(row) != width:
            raise TraceError(
                f"{path.name}: line {reader.line_num} has {len(row)} fields but the header has "
                f"{width} ({header})"
            )
        rows.append(row)
        nums.append(reader.line_num)
        if len(rows) == _BLOCK_ROWS:
            yield _block(rows, nums)
            rows, nums = [], []
    if rows:
        yield _block(rows, nums)


def _block(rows: list[list[str]], nums: list[int]) -> tuple[IntArray, list[NDArray[Any]]]:
    cols: list[NDArray[Any]] = []
    for values in zip(*rows, strict=True):
        try:
            arr = np.array(values, dtype="S")
        except UnicodeEncodeError:
            arr = np.array(values, dtype=str)
        cols.append(np.char.strip(arr))
    return np.array(nums, dtype=np.int64), cols


def user_path(path: str | Path) -> Path:
    """A user's trace file, relative to the current directory; ``foo.csv`` also finds ``.gz``."""
    p = Path(path).expanduser()
    if not p.exists():
        gz = p.with_name(p.name + ".gz")
        if gz.exists():
            return gz
        raise TraceError(
            f"trace file {str(path)!r} not found (relative paths are taken from the current "
            f"directory {Path.cwd()}); pass an absolute path, e.g. workload.path=/abs/file.csv"
        )
    return p
