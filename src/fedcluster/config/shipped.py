"""The example and paper configs shipped with the package (``configs/`` of the source tree, package data).

The CLI's hints name ``configs/demo.yaml`` and ``configs/``. In a clone those files are there; after
``pip install fedcluster`` they are not, so :func:`locate` lets ``configs/NAME.yaml`` fall back to the shipped
copy (with a note), and ``fedcluster init`` (:func:`copy_into`) writes the copies into a folder to edit.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from fedcluster.errors import UserError

FOLDER = "configs"
SHIPPED = Path(__file__).resolve().parents[1] / FOLDER  # in the source tree a link to the clone's configs/
_NOTED: set[tuple[Path, Path]] = set()  # (folder, name) whose fallback was noted: said once per process


def names() -> list[str]:
    """The shipped config files' names, sorted."""
    return sorted(p.name for p in SHIPPED.glob("*.yaml")) if SHIPPED.is_dir() else []


def locate(path: str | Path) -> Path:
    """``path`` itself when it exists or is not ``configs/NAME``; else the shipped ``configs/NAME`` if there is one
    (noted once per folder and process)."""
    p = Path(path)
    if p.exists() or p.is_absolute() or p.parent != Path(FOLDER) or p.name not in names():
        return p
    from fedcluster.config.notes import note

    if (Path.cwd(), p) not in _NOTED:  # a notebook or a sweep loads it many times: one note
        _NOTED.add((Path.cwd(), p))
        note(f"{p} is not in this folder: using the copy shipped with fedcluster "
             "(`fedcluster init` copies configs/ here to edit)")
    return SHIPPED / p.name


def copy_into(folder: str | Path, force: bool = False) -> tuple[list[Path], list[Path]]:
    """Copy the shipped configs into ``folder/configs``; a file already there is kept, or with ``force``
    replaced by the shipped one (after an upgrade). (written, kept)."""
    shipped = names()
    if not shipped:
        raise UserError("this installation of fedcluster holds no configs/ (a broken install?): reinstall it")
    target = Path(folder) / FOLDER
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create {target}: {e.strerror or e}; pass a writable folder") from None
    written, kept = [], []
    for name in shipped:
        source, dest = SHIPPED / name, target / name
        if dest.exists() and (not force or dest.resolve() == source.resolve()):  # the user's edits (or, in a
            # clone, the shipped file itself)
            kept.append(dest)
            continue
        try:
            shutil.copyfile(source, dest)
        except OSError as e:
            raise UserError(f"cannot write {dest}: {e.strerror or e}; pass a writable folder") from None
        written.append(dest)
    return written, kept
