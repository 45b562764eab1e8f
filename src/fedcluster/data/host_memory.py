"""How much memory this process may still use: /proc/meminfo, a cgroup limit, or sysconf (no psutil)."""

from __future__ import annotations

import os
from pathlib import Path

from fedcluster.errors import UserError

_MEMINFO = Path("/proc/meminfo")
_CGROUP = Path("/sys/fs/cgroup")


def _meminfo_available() -> int | None:
    try:
        for line in _MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_headroom() -> int | None:
    """Limit minus usage of a cgroup v2 memory limit, if this process runs under one."""
    try:
        limit = (_CGROUP / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return max(0, int(limit) - int((_CGROUP / "memory.current").read_text()))
    except (OSError, ValueError):
        return None


def _sysconf_available() -> int | None:
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def available_bytes() -> int | None:
    """Bytes that can still be allocated without swapping; None when the system does not say.

    ``FEDCLUSTER_MEMORY_LIMIT`` (bytes, or with a K/M/G suffix) overrides the measurement: set it to
    share a machine, or to test the refusal paths.
    """
    override = os.environ.get("FEDCLUSTER_MEMORY_LIMIT")
    if override:
        return parse_size(override)
    found = [v for v in (_meminfo_available() or _sysconf_available(), _cgroup_headroom()) if v is not None]
    return min(found) if found else None


def parse_size(text: str) -> int:
    """``"512M"`` → 536870912; plain numbers are bytes."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    try:
        value = float(t[:-1] if scale > 1 else t) * scale
    except ValueError:
        value = -1.0
    if not 0 <= value < 2**63:
        raise UserError(f"FEDCLUSTER_MEMORY_LIMIT={text!r} is not a size; write e.g. 8G, 512M or a byte count")
    return int(value)


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover
