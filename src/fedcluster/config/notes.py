"""One-line notices on stderr: something the user should know about a run that still goes on."""

from __future__ import annotations

import sys


def note(message: str) -> None:
    """A one-line notice on stderr (the run goes on)."""
    print(f"fedcluster: note: {message}", file=sys.stderr)
