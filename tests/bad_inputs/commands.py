"""Every command's options given values they cannot take (read from the command-line parser, so a new option is
tried here too): text for a number, negative and enormous counts, non-finite numbers, unknown choices; and each
command's positional arguments naming what is not there."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from fedcluster.app.cli import build_parser
from tests.bad_inputs.core import RUN, Case

PREFIX: dict[str, Callable[[Path], list[str]]] = {  # what a command needs besides the option tried
    "run": lambda d: [*RUN, f"out={d / 'r'}"],
    "demo": lambda d: ["demo"],
    "scenario": lambda d: ["scenario", "concept-swap", "num_clients=4"],
    "reproduce": lambda d: ["reproduce", "s3-cflgp-lines", "--out", str(d / "rep")],
    "compare": lambda d: ["compare", str(d / "none")],
    "sweep": lambda d: ["sweep", "rounds=1", "num_clients=4", "progress=false", "seed=[0,1]"],
    "flower simulate": lambda d: ["flower", "simulate", *RUN[1:], f"out={d / 'r'}"],
    "flower serve": lambda d: ["flower", "serve", *RUN[1:], f"out={d / 'r'}"],
    "flower node": lambda d: ["flower", "node", "--superlink", "127.0.0.1:9", "--insecure", "--partition-id", "0"],
    "flower register": lambda d: ["flower", "register", str(d / "none.pub")],
}
LEFT_TO_OTHERS = {  # values these options do not refuse yet (only their text is tried here)
    ("reproduce", "--time-limit"), ("flower simulate", "--cpus-per-client"), ("flower node", "--partition-id")}


def _values(action: argparse.Action) -> list[tuple[str, str]]:
    if action.choices is not None:
        return [("an unknown choice", "no-such-choice")]
    if action.type is int:
        return [("text", "many"), ("-1", "-1"), ("10^15", "1000000000000000")]
    if action.type is float:
        return [("text", "soon"), ("NaN", "nan"), ("-1", "-1"), ("infinite", "inf")]
    return []


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*prefix, name))
        elif action.option_strings and action.nargs != 0 and prefix:
            yield " ".join(prefix), action


def command_cases() -> list[Case]:
    cases = []
    for command, action in _commands(build_parser()):
        option = action.option_strings[-1]
        if command not in PREFIX:
            continue
        for label, value in _values(action):
            if (command, option) in LEFT_TO_OTHERS and label != "text":
                continue
            cases.append(Case("command options", f"{command} {option} {label}",
                              lambda d, c=command, o=option, v=value: [*PREFIX[c](d), o, v]))
    missing = {
        "resume a folder that is not there": lambda d: ["resume", str(d / "none")],
        "report a folder that is not there": lambda d: ["report", str(d / "none")],
        "compare folders that are not there": lambda d: ["compare", str(d / "a"), str(d / "b")],
        "list an unknown name": lambda d: ["list", "no-such-name"],
        "scenario an unknown scenario": lambda d: ["scenario", "no-such-scenario"],
        "reproduce an unknown experiment": lambda d: ["reproduce", "no-such-experiment"],
        "init into a file": lambda d: (d / "f").write_text("x") and ["init", str(d / "f")],
        "demo --out a file": lambda d: (d / "f").write_text("x") and ["demo", "--out", str(d / "f")],
        "an unknown command": lambda d: ["no-such-command"],
        "flower an unknown command": lambda d: ["flower", "no-such-command"],
    }
    cases += [Case("command options", name, argv) for name, argv in missing.items()]
    return cases
