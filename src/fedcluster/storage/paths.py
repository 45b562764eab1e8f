"""Output paths given by the user (``out=``, ``--out``, ``tensorboard_dir=``, an SQLite file), checked before use.

:func:`output_path` turns the text into a usable path or raises :class:`UserError` in one line: a ``~user``
that does not exist, a symlink loop, a name longer than the file system allows, a place under /proc, /sys
or /dev, a file where a folder must be (or the reverse), an existing parent that is not writable.
Standard library only (``compare`` and the Flower commands use it without importing torch).
"""

from __future__ import annotations

import os
from pathlib import Path

from fedcluster.errors import UserError

SPECIAL = ("/proc", "/sys", "/dev")
NAME_MAX = 255  # bytes in one path component (ext4, xfs, btrfs, tmpfs)
PATH_MAX = 4096  # bytes in a whole path (Linux)


def output_path(text: str | Path, what: str, folder: bool) -> Path:
    """``text`` as a path where a folder (``folder``) or a file can be created or reused; ``what`` names the
    option in messages (e.g. ``out=runs/x``, ``--out x.png``)."""
    raw = str(text)
    if len(what) > 100:  # a very long path is not repeated whole in the message
        what = what[:60] + "..." + what[-30:]
    if not raw.strip():
        raise UserError(f"{what}: the path is empty; give a {'folder' if folder else 'file'} name")
    try:
        p = Path(raw).expanduser()
    except RuntimeError:  # ~nosuchuser
        user = raw[1:].split("/", 1)[0]
        raise UserError(f"{what}: there is no user {user!r} whose home folder ~{user} could stand for; "
                        "write the path out") from None
    long = next((part for part in p.parts if len(os.fsencode(part)) > NAME_MAX), None)
    if long is not None:
        raise UserError(f"{what}: the name {long[:40]}... is {len(os.fsencode(long))} bytes, more than the {NAME_MAX} "
                        "a file system allows; choose a shorter name")
    if len(os.fsencode(str(p.absolute()))) > PATH_MAX:
        raise UserError(f"{what}: the path is longer than the {PATH_MAX} bytes Linux allows ({len(p.parts)} "
                        "levels); choose a shorter path")
    try:
        resolved = p.resolve()
    except (RuntimeError, OSError) as e:  # a symlink loop (RuntimeError before Python 3.13)
        raise UserError(f"{what}: the path cannot be followed ({_reason(e)}); remove the symlink loop or choose "
                        "another path") from None
    special = next((s for s in SPECIAL if resolved == Path(s) or Path(s) in resolved.parents), None)
    if special is not None:
        raise UserError(f"{what} is inside {special}, which is not for files; choose a folder such as runs/")
    try:
        return _check_existing(p, what, folder)
    except OSError as e:
        raise UserError(f"{what}: the path cannot be used ({_reason(e)}); choose another path") from None


def _check_existing(p: Path, what: str, folder: bool) -> Path:
    if p.exists():
        if folder and not p.is_dir():
            raise UserError(f"{what} is an existing file, not a folder; choose a folder")
        if not folder and p.is_dir():
            raise UserError(f"{what} is an existing folder, not a file; choose a file name")
    existing = next((a for a in (p, *p.parents) if a.exists()), None)
    if existing is not None and existing != p and not existing.is_dir():
        raise UserError(f"{what}: {existing} is a file, so nothing can be made inside it; choose another path")
    if existing is not None and not os.access(existing if existing.is_dir() else existing.parent, os.W_OK | os.X_OK):
        raise UserError(f"{what}: {existing} is not writable; choose a place you can write to")
    return p


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror.lower()
    return "symlink loop" if "loop" in str(e).lower() else type(e).__name__


PICTURE_EXTENSIONS = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".eps", ".ps")


def picture_path(text: str | Path, what: str, default_name: str) -> Path:
    """Where to draw a picture: ``text`` itself (a file name with a picture extension), or ``default_name``
    inside ``text`` when it is an existing folder."""
    p = output_path(text, what, folder=False) if not _is_dir(text) else Path(text).expanduser()
    if _is_dir(p):
        return p / default_name
    if p.suffix.lower() not in PICTURE_EXTENSIONS:
        shown = f"ends in {p.suffix!r}" if p.suffix else "has no extension"
        raise UserError(f"{what} {shown}, not a picture type; end it with {', '.join(PICTURE_EXTENSIONS[:3])} "
                        "(or pass an existing folder to draw into)")
    return p


def _is_dir(text: str | Path) -> bool:
    try:
        return Path(text).expanduser().is_dir()
    except (RuntimeError, OSError):
        return False
