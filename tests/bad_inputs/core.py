"""The bad-input net's parts every family shares: a case, a finished run to damage, planted files, the
environment a case sets, and how an outcome is counted."""


import io
import os
import shutil
import signal
import struct
import traceback
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedcluster.app.cli import main

RUN = ["run", "num_clients=4", "rounds=1", "progress=false"]
MNIST = {"train_images": "train-images-idx3-ubyte", "train_labels": "train-labels-idx1-ubyte",
         "test_images": "t10k-images-idx3-ubyte", "test_labels": "t10k-labels-idx1-ubyte"}


@dataclass
class Case:
    family: str
    name: str
    argv: Callable[[Path], list[str]] | None = None  # built inside the case's folder
    setup: Callable[[Path], None] | None = None
    expect: str = "refuse"  # refuse | ok | either (a refusal or the check passing)
    check: Callable[[Path, str], bool] | None = None  # for ok/either: (folder, stdout+stderr) -> passed
    call: Callable[[Path], Any] | None = None  # a library call instead of argv
    tags: list[str] = field(default_factory=list)


# -- a finished run to damage ----------------------------------------------------------------------------
BASE: dict[str, Path] = {}


def base_run(root: Path, algorithm: str = "ifca") -> Path:
    if algorithm not in BASE:
        out = root / f"base-{algorithm}"
        _quiet(["run", f"algorithm={algorithm}", "num_clients=6", "rounds=2", "progress=false", f"out={out}"])
        BASE[algorithm] = out
    return BASE[algorithm]


def _quiet(argv: list[str]) -> int:
    with redirect_stderr(io.StringIO()), redirect_stdout(io.StringIO()):
        return main(argv)


def copy_run(root: Path, d: Path, algorithm: str = "ifca") -> Path:
    run = d / "run"
    shutil.copytree(base_run(root, algorithm), run)
    for lock in run.glob("*.lock"):
        lock.unlink()
    return run


def plant(d: Path, name: str, data: bytes | None) -> None:
    """Replace ``run/name`` with ``data`` (None: a directory)."""
    p = d / "run" / name
    p.unlink(missing_ok=True)
    if data is None:
        p.mkdir()
    else:
        p.write_bytes(data)


def edit_checkpoint(d: Path, change: Callable[[dict[str, Any]], None]) -> None:
    from fedcluster.storage.state_file import load_state, save_state

    path = d / "run" / "checkpoint.pt"
    state = load_state(path, "checkpoint")
    change(state)
    save_state(path, state, "checkpoint")  # a valid checksum over a wrong structure


def deep_json(n: int) -> bytes:
    return ("[" * n + "]" * n).encode()


ROUNDS_BAD = {
    "text in a numeric column": lambda t: t.replace("\n1,", "\n1,abc,", 1),
    "missing round column": lambda t: "\n".join(",".join(c for c in line.split(",")[1:]) for line in t.split("\n")),
    "short row": lambda t: t + "3,0.5\n",
    "header only": lambda t: t.split("\n")[0] + "\n",
    "text round column": lambda t: "\n".join(("x" + line[1:]) if line[:1].isdigit() else line
                                             for line in t.split("\n")),
    "empty file": lambda t: "",
    "foreign csv": lambda t: "a,b\n1,2\n",
    "nan round": lambda t: t.replace("\n1,", "\nnan,", 1),
    "negative round": lambda t: t.replace("\n1,", "\n-5,", 1),
    "huge field": lambda t: t.replace("\n1,", "\n1," + "9" * 200_000, 1),
}
BYTES_BAD = {
    "binary": b"\x00\x01\x02\xff" * 64,
    "non-UTF-8": b"round,val_acc\n1,\xff\xfe\n",
    "deep JSON": deep_json(100_000),
    "JSON list": b"[1, 2, 3]\n",
}


def _drop(*keys: str) -> Callable[[dict[str, Any]], None]:
    def change(s: dict[str, Any]) -> None:
        target = s
        for k in keys[:-1]:
            target = target[k]
        del target[keys[-1]]
    return change


def _set(value: Any, *keys: str) -> Callable[[dict[str, Any]], None]:
    def change(s: dict[str, Any]) -> None:
        target = s
        for k in keys[:-1]:
            target = target[k]
        target[keys[-1]] = value(target[keys[-1]]) if callable(value) else value
    return change


def _yaml_file(text: str | bytes) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        (d / "c.yaml").write_bytes(text if isinstance(text, bytes) else text.encode())
    return setup


def idx(a: np.ndarray, code: int = 0x08) -> bytes:
    dtype = {0x08: ">u1", 0x0D: ">f4", 0x0E: ">f8", 0x0C: ">i4"}[code]
    return bytes([0, 0, code, a.ndim]) + struct.pack(f">{a.ndim}I", *a.shape) + a.astype(dtype).tobytes()


def mnist_files(images: np.ndarray, code: int = 0x08) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        n = len(images)
        (d / MNIST["train_images"]).write_bytes(idx(images, code))
        (d / MNIST["train_labels"]).write_bytes(idx(np.arange(n) % 10))
        (d / MNIST["test_images"]).write_bytes(idx(images[: n // 2], code))
        (d / MNIST["test_labels"]).write_bytes(idx(np.arange(n // 2) % 10))
    return setup


def _with_env(env: dict[str, str], argv: Callable[[Path], list[str]]) -> Callable[[Path], Any]:
    """A call of ``main(argv)`` with ``env`` set (and restored after)."""
    def call(d: Path) -> int:
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            return main(argv(d))
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v
    return call


def _mnist_folder(folder: Path, train: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for name, n in (("train", train), ("t10k", 10)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        (folder / f"{name}-images-idx3-ubyte").write_bytes(idx(images))
        (folder / f"{name}-labels-idx1-ubyte").write_bytes(idx(rng.integers(0, 10, n).astype(np.uint8)))


def _in_folder(folder: Callable[[Path], Path], argv: Callable[[Path], list[str]]) -> Callable[[Path], Any]:
    def call(d: Path) -> int:
        here = Path.cwd()
        os.chdir(folder(d))
        try:
            return main(argv(d))
        finally:
            os.chdir(here)
    return call


class Hang(BaseException):
    """A case ran past its time (a blocked read, a wait without end)."""


def _expire(*_: object) -> None:
    raise Hang


def outcome(case: Case, d: Path, seconds: int = 120) -> tuple[str, str]:
    err, out = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _expire)
    signal.alarm(seconds)
    try:
        if case.setup is not None:
            case.setup(d)
        with redirect_stderr(err), redirect_stdout(out):
            try:
                rc = case.call(d) if case.call is not None else main(case.argv(d))
            except SystemExit as e:
                rc = e.code
    except Hang:
        return "hang", f"still running after {seconds} s"
    except RecursionError:
        return "traceback", "RecursionError"
    except MemoryError:
        return "traceback", "MemoryError"
    except Exception as e:  # noqa: BLE001 (counting what escapes is the point)
        return "traceback", "".join(traceback.format_exception_only(e)).strip()[-300:]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    text = err.getvalue() + out.getvalue()
    errors = [line for line in err.getvalue().splitlines() if not line.startswith("fedcluster: note:")
              and not line.startswith("  ") and "%|" not in line]
    errors = [line for line in errors if line.startswith("fedcluster: error") or rc == 2]
    ok_check = case.check is not None and rc == 0 and case.check(d, text)
    if case.call is not None and case.expect == "refuse" and rc == 2:  # a UserError of one line
        return "clean", "UserError"
    if case.expect in ("refuse", "either") and rc == 2 and len(errors) == 1:
        return "clean", errors[0][:200]
    if case.expect in ("ok", "either") and ok_check:
        return "clean", "ok"
    if rc == 0:
        return "silent", text.strip().splitlines()[-1][:200] if text.strip() else "exit 0"
    return "other", f"exit {rc}: {text.strip()[-300:]}"
