"""A fingerprint of the files under a data folder: what the federation cache is keyed by, so that a changed folder,
or another folder under the same typed relative path, is read afresh rather than served from the cache."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path


def data_location(data_dir: str | os.PathLike[str] | None, default: Path | None = None) -> Path | None:
    """The absolute folder ``data_dir`` names (symbolic links resolved), or ``default`` when none is given."""
    chosen = default if data_dir is None else Path(data_dir)
    if chosen is None:
        return None
    try:
        return Path(chosen).expanduser().resolve()
    except (OSError, RuntimeError):  # a symbolic-link loop: the loader says what is wrong with it
        return Path(os.path.abspath(chosen))


def fingerprint(location: Path | None) -> str:
    """A digest of every entry under ``location`` (relative name, kind, size, modification time in ns); a file
    renamed, resized, rewritten or removed, or a file added, changes it. "missing" when there is no such path."""
    if location is None:
        return "none"
    digest = hashlib.sha256()
    try:
        top = location.stat()
    except OSError:
        return "missing"
    if not stat.S_ISDIR(top.st_mode):
        digest.update(_line(".", top))
        return digest.hexdigest()[:20]
    digest.update(b"".join(sorted(_walk(str(location)))))
    return digest.hexdigest()[:20]


def _line(name: str, info: os.stat_result) -> bytes:
    return f"{name}\0{stat.S_IFMT(info.st_mode)}\0{info.st_size}\0{info.st_mtime_ns}\n".encode(
        errors="surrogateescape")


def _walk(root: str) -> list[bytes]:
    """One :func:`_line` per entry below ``root`` (named relative to it); links followed to files, not into
    folders (no cycles); an entry that vanishes or cannot be read counts as gone."""
    found: list[bytes] = []
    pending, skip = [root], len(root) + 1
    while pending:
        folder = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                found.append(_line(entry.path[skip:], entry.stat()))
            except OSError:
                found.append(f"{entry.path[skip:]}\0gone\n".encode(errors="surrogateescape"))
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
    return found
