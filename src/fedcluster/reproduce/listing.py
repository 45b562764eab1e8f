"""``fedcluster reproduce --list``: the verdict an experiment's stored page states, beside its budget and seeds."""

from __future__ import annotations

import re
from pathlib import Path

from fedcluster.reproduce.results import Stored
from fedcluster.reproduce.verdicts import STATUSES

PAGE_HEAD = 20_000  # characters of a page read: its verdict is on its fifth line
VERDICT_LINE = re.compile(r"^- \*\*Verdict at this budget:\*\* (.+?) — ", re.M)


def page_verdict(page: Path) -> str | None:
    """The status the page's verdict line states ("holds", "does not hold", ..., "incomplete"), or None when the
    page is missing, unreadable or states none."""
    try:
        with page.open(encoding="utf-8") as f:
            head = f.read(PAGE_HEAD)
    except (OSError, UnicodeDecodeError):
        return None
    found = VERDICT_LINE.search(head)
    return found[1] if found and found[1] in (*STATUSES, "incomplete") else None


def stated(folder: Path, stored: Stored) -> str:
    """``does not hold (protocol, 3 seeds)``: the verdict of ``folder/NAME.md`` with the stored budget and seeds;
    the budget and seeds alone when the page states no verdict."""
    where = f"{stored.budget}, {stored.seeds} seeds"
    status = page_verdict(folder / f"{stored.name}.md")
    if status is None:
        return where + ("" if stored.finished else ", incomplete")
    return f"{status} ({where})"
