"""Reading a run directory's text files as untrusted input: ``rounds.csv``, ``clusters.jsonl``, ``summary.json``.

A run directory can be damaged (a disk error, a hand edit) or hold another program's files under the same
names. Every reader here checks what it returns — text that is UTF-8 without NUL bytes, a regular file, the
columns and types the run directory contract promises — and raises :class:`RunFileError` (one line naming
the file, the line and what to do) instead of letting a later step crash on it or use it silently.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from fedcluster.errors import UserError

ROUND_COLUMNS = ["round", "val_acc", "test_acc", "ari", "num_clusters", "bytes_up", "bytes_down", "seconds"]
MAX_RUN_FILE_BYTES = 1 << 30  # a run's text files are a few MB at most; larger is not one of them
MAX_JSON_DEPTH = 20  # clusters.jsonl and summary.json nest 4 levels


class RunFileError(UserError):
    """A run-directory file is damaged or not what fedcluster wrote there."""


def damaged(path: Path, problem: str) -> RunFileError:
    return RunFileError(f"{path} {problem}: it is damaged or not a fedcluster run file; restore it from a backup "
                        "or start the run again with another out=")


def read_text(path: Path) -> str | None:
    """The file's text, or None when it does not exist; refuses folders, binary and non-UTF-8 files."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return None
    if not path.is_file():
        raise damaged(path, "is not a regular file (a folder or a broken link)")
    try:
        if path.stat().st_size > MAX_RUN_FILE_BYTES:
            raise damaged(path, f"is larger than {MAX_RUN_FILE_BYTES >> 30} GiB")
        raw = path.read_bytes()
    except OSError as e:
        raise RunFileError(f"{path} cannot be read ({e.strerror or e}); check its permissions") from None
    if b"\x00" in raw:
        raise damaged(path, "is binary (holds NUL bytes)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise damaged(path, f"is not UTF-8 text (bad byte 0x{raw[e.start]:02x} on line {line})") from None


# -- rounds.csv ------------------------------------------------------------------------------------------------
def parse_rounds(path: Path, required: list[str], torn_tail: bool = False) -> tuple[list[str], list[list[str]]]:
    """The header and rows of a ``rounds.csv`` (empty when the file does not exist).

    Every row has a value per column, every value is a number (``nan`` allowed) and ``round`` is a positive
    integer that increases. ``torn_tail``: a last line without its newline (a write cut by a crash) is dropped
    instead of refused.
    """
    text = read_text(path)
    if text is None:
        return [], []
    if torn_tail and text and not text.endswith("\n") and text[text.rfind("\n") + 1:][:1].isdigit():
        text = text[: text.rfind("\n") + 1]  # a row cut short by a crash (rows start with their round)
    csv.field_size_limit(1 << 20)
    try:
        lines = list(csv.reader(io.StringIO(text)))
    except csv.Error as e:
        raise damaged(path, f"is not a readable CSV file ({e})") from None
    if not lines:
        return [], []
    header, rows = lines[0], lines[1:]
    missing = [c for c in required if c not in header]
    if missing:
        raise damaged(path, f"has no {', '.join(missing)} column{'s' if len(missing) > 1 else ''}")
    if len(set(header)) != len(header):
        raise damaged(path, "names a column twice")
    last = 0
    at = header.index("round")
    for i, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise damaged(path, f"line {i} has {len(row)} values for {len(header)} columns")
        for column, value in zip(header, row, strict=True):
            _number(path, i, column, value)
        r = float(row[at])
        if not (r.is_integer() and r > last):
            raise damaged(path, f"line {i}: round {row[at]!r} is not a round number after round {last}")
        last = int(r)
    return header, rows


def _number(path: Path, line: int, column: str, value: str) -> float:
    text = value.strip()
    try:
        if len(text) > 64:
            raise ValueError
        return float(text)
    except ValueError:
        raise damaged(path, f"line {line}: column {column} holds {text[:20]!r}, not a number") from None


def rows_as_floats(header: list[str], rows: list[list[str]]) -> list[dict[str, float]]:
    return [{k: float(v) for k, v in zip(header, row, strict=True)} for row in rows]


# -- JSON files ------------------------------------------------------------------------------------------------
def _json(path: Path, text: str, line: int | None = None) -> Any:
    where = f" (line {line})" if line is not None else ""
    depth = 0
    for ch in text:  # refuse deep nesting before json (recursive) sees it
        depth += ch in "[{"
        depth -= ch in "]}"
        if depth > MAX_JSON_DEPTH:
            raise damaged(path, f"nests JSON more than {MAX_JSON_DEPTH} levels deep{where}")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise damaged(path, f"is not valid JSON{where} ({' '.join(str(e).split())[:80]})") from None


def parse_summary(path: Path) -> dict[str, Any] | None:
    """``summary.json`` as a mapping whose ``final`` and ``best`` entries are mappings (None when absent)."""
    text = read_text(path)
    if text is None:
        return None
    data = _json(path, text)
    if not isinstance(data, dict):
        raise damaged(path, f"holds a JSON {type(data).__name__}, not an object")
    for key in ("final", "best", "at_best_val"):
        if not isinstance(data.get(key, {}), dict):
            raise damaged(path, f"has a {key!r} entry that is not an object")
    if not all(isinstance(v, dict) for v in data.get("best", {}).values()):
        raise damaged(path, "has a 'best' entry whose values are not objects")
    return data


GROUPINGS = ("concept", "class", "style")  # the groupings of clusters.jsonl (tracking.clusters)


def parse_jsonl(path: Path, torn_tail: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """(line, record) of every line of a per-round JSON-lines file; each record is an object with an integer
    ``round`` and, for every grouping, ``names`` (strings) and ``mass`` (a row of numbers per cluster, one
    number per name)."""
    text = read_text(path)
    if text is None:
        return []
    if torn_tail and text and not text.endswith("\n") and text[text.rfind("\n") + 1:].startswith('{"round": '):
        text = text[: text.rfind("\n") + 1]  # a record cut short by a crash (records start with their round)
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        rec = _json(path, line, i)
        if not isinstance(rec, dict):
            raise damaged(path, f"line {i} holds a JSON {type(rec).__name__}, not an object")
        r = rec.get("round")
        if isinstance(r, bool) or not isinstance(r, int) or r < 1:
            raise damaged(path, f"line {i}: round {r!r} is not a round number")
        for key, group in rec.items():
            if key in GROUPINGS and not isinstance(group, dict):
                raise damaged(path, f"line {i}: {key} is a {type(group).__name__}, not names and mass per cluster")
            if isinstance(group, dict) and (key in GROUPINGS or "names" in group or "mass" in group):
                _check_group(path, i, key, group)
        out.append((line, rec))
    return out


def _check_group(path: Path, line: int, key: str, group: dict[str, Any]) -> None:
    names, mass = group.get("names"), group.get("mass")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise damaged(path, f"line {line}: {key}.names is not a list of names")
    if not isinstance(mass, list) or not mass or not all(
            isinstance(row, list) and len(row) == len(names) for row in mass):
        raise damaged(path, f"line {line}: {key}.mass is not one row of {len(names)} numbers per cluster")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for row in mass
               for v in row):
        raise damaged(path, f"line {line}: {key}.mass holds a value that is not a finite number")
