"""The run directory and what it holds (the contract scripts rely on).

``config.yaml`` (fully resolved), ``rounds.csv`` (one row per round, written as the run goes),
``clients.csv``, ``summary.json``, ``checkpoint.pt`` (for ``fedcluster resume``) and ``accuracy.png``;
clustered methods add ``clusters.jsonl`` (per round, each cluster's data by concept/class/style).

Safety: one process per directory (``run_lock``); whole files are written atomically; ``checkpoint.pt``
is a checksummed safetensors + JSON state file (``storage.state_file``), never a pickle; a folder with
other files is never written into, and a run that stopped before its first checkpoint starts over
with no stale file left.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

from fedcluster.errors import ConfigError, ResourceError, UserError
from fedcluster.storage import folders
from fedcluster.storage.atomic import atomic_write, remove_stale_temporaries, storage_error, writing
from fedcluster.storage.state_file import StateFileError, load_state, save_state
from fedcluster.tracking.checkpoint_schema import check_header
from fedcluster.tracking.run_files import ROUND_COLUMNS, RunFileError, parse_jsonl, parse_rounds, rows_as_floats
from fedcluster.tracking.run_lock import MARKER, RunLock

CLIENT_COLUMNS = ["client", "true_cluster", "cluster", "val_acc"]
END_FILES = ("clients.csv", "summary.json", "accuracy.png", "curves.png", "num_clusters.png", "clusters.png")


def default_run_dir(algorithm: str, scenario: str) -> Path:
    """A new, empty ``runs/<time>-<algorithm>-<scenario>/`` (``-2``, ``-3``, ... appended when it is taken)."""
    return folders.claim_new_dir(Path("runs") / f"{folders.stamp()}-{algorithm}-{scenario}")


def _fmt(v: Any) -> Any:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.6g}"
    return v


def _size(n: int) -> str:
    """``n`` bytes in kB, MB or GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _csv_text(rows: list[list[Any]]) -> str:
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    return buf.getvalue()


class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.rounds_csv = self.path / "rounds.csv"
        self.checkpoint = self.path / "checkpoint.pt"
        self._columns: list[str] | None = None
        self._lock = RunLock(self.path)

    @property
    def hint(self) -> str:
        """What to do after a failed write: free space, then resume."""
        return f"free some space, then `fedcluster resume {self.path}` continues from the last checkpoint"

    # -- room to write ------------------------------------------------------------------------
    PROBE_BYTES = 64 * 1024  # a probe file's size: the run's first files are of this order

    def check_writable(self) -> None:
        """Refuse, before anything is built, a folder this run cannot write: a probe file written, flushed to
        disk and removed (a full disk or a read-only folder is said now, not after the federation's summary)."""
        probe = self.path / f".write-probe.{os.getpid()}.tmp"
        try:
            with probe.open("wb") as f:
                f.write(b"\0" * self.PROBE_BYTES)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            raise storage_error(e, self.path, f"free some space in {self.path} or pass out= another "
                                "folder") from None
        finally:
            with contextlib.suppress(OSError):
                probe.unlink()

    def check_space(self, checkpoint_bytes: int) -> None:
        """Refuse a run whose checkpoints cannot fit in the folder's free space: the new one is written beside the
        old before it replaces it (twice ``checkpoint_bytes``), with room for the round files."""
        need = 2 * checkpoint_bytes + self.PROBE_BYTES
        try:
            free = shutil.disk_usage(self.path).free
        except OSError:
            return  # no figure to compare with: the writes themselves say it
        if free < need:
            raise ResourceError(f"out={self.path} has {_size(free)} free, but this run's checkpoints need about "
                                f"{_size(need)}: free some space or pass out= another folder")

    # -- ownership -----------------------------------------------------------------------------
    def acquire(self, new: bool) -> bool:
        """Lock the directory for this process. ``new``: for a fresh run, which refuses a folder with other
        files and a run that has a checkpoint, and clears a run that stopped before its first checkpoint
        (returns True then). Leftover temporary files are removed either way."""
        if self._lock.held:
            return False
        if self.path.exists() and not self.path.is_dir():
            raise UserError(f"out={self.path} is a file, not a folder; pass out= a new or empty folder")
        if new:
            self._refuse_foreign_files()
        self._lock.acquire()
        remove_stale_temporaries(self.path, everyone=True)
        if not new:
            return False
        if self.checkpoint.exists():
            self._lock.release()
            raise ConfigError(f"run directory {str(self.path)!r} already holds a run; continue it with "
                              f"`fedcluster resume {self.path}` or pass another out=")
        stale = [p for p in self.path.iterdir() if p.is_file() and p.name != MARKER]
        with writing(self.path, "check the folder's permissions"):
            for p in stale:
                p.unlink()
        return bool(stale)

    def _refuse_foreign_files(self) -> None:
        if not self.path.is_dir() or (self.path / MARKER).exists():
            return
        entries = sorted(p.name for p in self.path.iterdir())
        if entries and ("checkpoint.pt" in entries or "rounds.csv" in entries):
            raise UserError(f"out={self.path} holds a run of an older fedcluster version (no {MARKER}); "
                            "pass another out=")
        if entries:
            raise UserError(f"out={self.path} is a folder with other files ({', '.join(entries[:3])}"
                            f"{', ...' if len(entries) > 3 else ''}), not a fedcluster run; pass a new or empty "
                            "folder as out=")

    def release(self) -> None:
        self._lock.release()

    def abandon(self) -> None:
        """Undo :meth:`acquire` of a new run refused before it wrote anything: remove the marker and the
        folder if nothing else is in it (a refused run leaves no trace)."""
        self.release()
        with contextlib.suppress(OSError):
            if [p.name for p in self.path.iterdir()] == [MARKER]:
                (self.path / MARKER).unlink()
                self.path.rmdir()

    def create(self, config_yaml: str) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.write_config(config_yaml)

    def write_config(self, config_yaml: str) -> None:
        atomic_write(self.path / "config.yaml", config_yaml.encode(), self.hint)

    def restart_at(self, completed: int) -> list[dict[str, float]]:
        """Prepare a resumed run from round ``completed``: later rows and records go, and so do the
        end-of-run files (they described another final round); returns the rows kept."""
        with writing(self.path, self.hint):
            for name in END_FILES:
                (self.path / name).unlink(missing_ok=True)
        self.truncate_jsonl("clusters.jsonl", completed)
        return self.truncate_rounds(completed)

    # -- rounds --------------------------------------------------------------------------------
    def append_round(self, row: dict[str, Any]) -> None:
        lines = []
        if self._columns is None:
            self._columns = ROUND_COLUMNS + [k for k in row if k not in ROUND_COLUMNS]
            if not self.rounds_csv.exists():
                lines.append(self._columns)
        lines.append([_fmt(row.get(c, float("nan"))) for c in self._columns])
        self._append(self.rounds_csv, _csv_text(lines))

    def _append(self, path: Path, text: str) -> None:
        """Append ``text`` whole or not at all (a failed write is cut off again: no torn row)."""
        with path.open("a", newline="") as f:
            start = f.tell()
            try:
                f.write(text)
                f.flush()
            except OSError as e:
                with contextlib.suppress(OSError):
                    os.truncate(path, start)
                raise storage_error(e, path, self.hint) from None

    def read_rounds(self) -> list[dict[str, float]]:
        """The rows of ``rounds.csv`` as numbers (checked: a damaged or foreign file is refused in one line)."""
        return rows_as_floats(*parse_rounds(self.rounds_csv, ROUND_COLUMNS))

    def truncate_rounds(self, completed: int) -> list[dict[str, float]]:
        """Keep the rows of rounds ≤ ``completed`` (a resumed run rewrites the rest; a row torn by a
        crash is dropped). The kept rows must be rounds 1..``completed``, one each: a checkpoint of round
        ``completed`` beside a ``rounds.csv`` that lacks some of them is refused."""
        if completed == 0:  # the run starts over: nothing of the file is kept
            with writing(self.rounds_csv, self.hint):
                self.rounds_csv.unlink(missing_ok=True)
            self._columns = None
            return []
        header, rows = parse_rounds(self.rounds_csv, ROUND_COLUMNS, torn_tail=True)
        rows = [r for r in rows if float(r[header.index("round")]) <= completed]
        rounds = [int(float(r[header.index("round")])) for r in rows]
        if rounds != list(range(1, completed + 1)):
            raise RunFileError(f"{self.rounds_csv} has {_rounds_text(rounds)} but the checkpoint is of round "
                               f"{completed}: the file is damaged or from another run; restore it from a backup or "
                               "start the run again with another out=")
        atomic_write(self.rounds_csv, _csv_text([header] + rows).encode(), self.hint)
        self._columns = list(header)
        return rows_as_floats(header, rows)

    # -- per-round JSON lines (e.g. clusters.jsonl) --------------------------------------------
    def append_jsonl(self, name: str, record: dict[str, Any]) -> None:
        self._append(self.path / name, json.dumps(record) + "\n")

    def read_jsonl(self, name: str) -> list[dict[str, Any]]:
        return [rec for _, rec in parse_jsonl(self.path / name)]

    def truncate_jsonl(self, name: str, completed: int) -> None:
        """Keep the records of rounds ≤ ``completed`` (a resumed run rewrites the rest; a line torn by a
        crash is dropped)."""
        path = self.path / name
        if completed == 0:
            with writing(path, self.hint):
                path.unlink(missing_ok=True)
        elif path.exists() or path.is_symlink():
            keep = [line for line, rec in parse_jsonl(path, torn_tail=True) if rec["round"] <= completed]
            atomic_write(path, "".join(line + "\n" for line in keep).encode(), self.hint)

    # -- end-of-run files ----------------------------------------------------------------------
    def write_clients(self, rows: list[dict[str, Any]]) -> None:
        columns = CLIENT_COLUMNS + [k for k in rows[0] if k not in CLIENT_COLUMNS]
        text = _csv_text([columns] + [[_fmt(r[c]) for c in columns] for r in rows])
        atomic_write(self.path / "clients.csv", text.encode(), self.hint)

    def write_summary(self, summary: dict[str, Any]) -> None:
        text = json.dumps(summary, indent=2, default=str) + "\n"
        atomic_write(self.path / "summary.json", text.encode(), self.hint)

    # -- checkpoints ---------------------------------------------------------------------------
    def save_checkpoint(self, state: dict[str, Any]) -> None:
        """Atomically (the previous checkpoint stays intact if this write fails)."""
        save_state(self.checkpoint, state, "checkpoint", hint=self.hint)

    def load_checkpoint(self) -> dict[str, Any]:
        """The last checkpoint, verified; a corrupt, modified or pickled file is refused in one line."""
        try:
            state = load_state(self.checkpoint, "checkpoint")
        except StateFileError as e:
            raise UserError(f"checkpoint {e}; it was not loaded: restore it from a backup or start the run "
                            "again with another out=") from None
        check_header(state, str(self.checkpoint))
        return state


def rounds_span(first: int, last: int) -> str:
    """``round 3`` or ``rounds 1-5``."""
    return f"round {first}" if first == last else f"rounds {first}-{last}"


def _rounds_text(rounds: list[int]) -> str:
    if not rounds:
        return "no rows"
    return f"{len(rounds)} row{'s' if len(rounds) > 1 else ''} ({rounds_span(rounds[0], rounds[-1])})"
