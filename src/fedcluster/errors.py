"""Errors that reach the user as one clear line (the CLI turns them into exit status 2)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class UserError(ValueError):
    """Bad input from the user: a config key, a value, a file. The message says how to fix it."""


class ConfigError(UserError):
    """A configuration key or value is wrong."""


class DataFileError(UserError):
    """A data file is corrupt, truncated, of the wrong format, or would not fit in memory."""


class ResourceError(UserError):
    """The configuration needs more memory than is available; the message names the knob to turn."""


class DivergedError(Exception):
    """Training produced non-finite losses or weights; the CLI exits with status 3."""


class InterruptedRun(Exception):  # noqa: N818 (it is a KeyboardInterrupt with the run's whereabouts)
    """Ctrl-C during a run; the message says where the results are and how to continue (exit 130)."""


def did_you_mean(word: str, choices: Iterable[str], aliases: Mapping[str, str] | None = None) -> str:
    """``" did you mean 'rounds'?"`` for the choice closest to a mistyped ``word`` (difflib), else ``""``; a
    closest ``aliases`` key (another spelling of a choice) suggests the choice it spells."""
    import difflib

    aliases = aliases or {}
    close = difflib.get_close_matches(word, [*choices, *aliases], n=1, cutoff=0.6)
    return f" did you mean {aliases.get(close[0], close[0])!r}?" if close else ""
