"""Long-lived worker processes that run a sweep's points: each imports fedcluster (and PyTorch) once, then runs
``fedcluster run`` / ``fedcluster resume`` commands one after the other, in the same way as a fresh process would.

A worker puts back, before each command, what a fresh process starts with and a run may change: PyTorch's default
random generator and its thread count, the environment variables, the warnings' filters (a warning shown by an
earlier run is shown again). Each command's output goes to its log file. Workers run in their own process group:
the sweep passes Ctrl-C (SIGINT) and SIGTERM on to them itself, once, so that each run keeps its checkpoint; a
worker whose sweep dies (even by SIGKILL) gets SIGTERM from Linux and stops its run the same way. A worker that
dies is replaced.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import multiprocessing
import os
import signal
import sys
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

EXIT_FAILED = 1
PR_SET_PDEATHSIG = 1


@dataclass
class Task:
    """One command (``["run", ...]`` or ``["resume", ...]``) and the log file its output goes to."""

    key: str
    argv: list[str]
    log: Path


def _on_parent_death(signum: int) -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)


def _redirect(path: Path | None) -> None:
    """Point this process's stdout and stderr (file descriptors 1 and 2) at ``path`` (None: /dev/null)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    fd = os.open(path if path is not None else os.devnull, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _entry(entry: str) -> Callable[[list[str]], int]:
    """``"package.module:function"`` -> the function (named, not imported here: the command line imports this)."""
    module, _, name = entry.partition(":")
    return getattr(importlib.import_module(module), name)


def _run_command(main: Callable[[list[str]], int], argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as e:  # argparse
        return e.code if isinstance(e.code, int) else EXIT_FAILED
    except KeyboardInterrupt:
        print("fedcluster: interrupted", file=sys.stderr)
        return 130
    except BaseException:  # a bug: its traceback goes to the run's log, the sweep goes on
        traceback.print_exc()
        return EXIT_FAILED


def serve(conn: Connection, entry: str) -> None:
    """A worker's loop: receive a task, run it with ``entry`` (the command line's main function), send back its exit
    status; None ends the loop."""
    os.setpgrp()  # Ctrl-C in the terminal reaches the sweep only; it passes it on once
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda signum, frame: signal.raise_signal(signal.SIGINT))
    _on_parent_death(signal.SIGTERM)
    _redirect(None)
    import torch

    main = _entry(entry)  # imported once, before the first task

    seed, threads, environ = torch.initial_seed(), torch.get_num_threads(), dict(os.environ)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if task is None:
            return
        torch.manual_seed(seed)
        torch.set_num_threads(threads)
        os.environ.clear()
        os.environ.update(environ)
        _redirect(task.log)
        try:
            with warnings.catch_warnings():  # its own filters; warnings shown before are shown again
                rc = _run_command(main, task.argv)
        except KeyboardInterrupt:  # a second Ctrl-C while the run was already stopping
            rc = 130
        _redirect(None)
        try:
            conn.send(rc)
        except (OSError, KeyboardInterrupt):
            return


class Worker:
    def __init__(self, context: Any, entry: str) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(target=serve, args=(child, entry), daemon=False,
                                       name="fedcluster-sweep-worker")
        self.process.start()
        child.close()
        self.task: Task | None = None

    def give(self, task: Task) -> None:
        self.task = task
        self.conn.send(task)

    def send_signal(self, signum: int) -> None:
        if self.process.pid is not None and self.process.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signum)

    def close(self, timeout: float = 5.0) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


class Pool:
    """``size`` workers that run tasks with ``entry`` (``"package.module:function"``, the command line's main);
    :meth:`submit` a task to an idle one, :meth:`results` the tasks that ended."""

    def __init__(self, size: int, entry: str) -> None:
        self.context = multiprocessing.get_context("spawn")  # no fork of a process that holds torch threads
        self.entry = entry
        self.workers = [Worker(self.context, entry) for _ in range(size)]

    def idle(self) -> list[Worker]:
        return [w for w in self.workers if w.task is None]

    def busy(self) -> list[Worker]:
        return [w for w in self.workers if w.task is not None]

    def submit(self, task: Task) -> None:
        worker = self.idle()[0]
        try:
            worker.give(task)
        except OSError:  # it died while idle: a new one takes the task
            self._replace(worker).give(task)

    def results(self, timeout: float | None) -> list[tuple[Task, int]]:
        """The tasks that ended within ``timeout`` seconds, with their exit status (a worker that died: its
        negative signal number, or its exit status, and it is replaced)."""
        busy = {w.conn: w for w in self.busy()} | {w.process.sentinel: w for w in self.busy()}
        out = []
        for ready in wait(list(busy), timeout):
            worker = busy[ready]
            if worker.task is None:
                continue
            task = worker.task
            try:
                rc = worker.conn.recv() if worker.conn.poll() else None
            except (EOFError, OSError):
                rc = None
            worker.task = None
            if rc is None:
                worker.process.join(1.0)
                code = worker.process.exitcode
                rc = code if code not in (None, 0) else EXIT_FAILED
                self._replace(worker)
            out.append((task, rc))
        return out

    def send_signal(self, signum: int) -> None:
        for w in self.busy():
            w.send_signal(signum)

    def _replace(self, worker: Worker) -> Worker:
        with contextlib.suppress(Exception):
            worker.close(timeout=0.1)
        fresh = Worker(self.context, self.entry)
        self.workers[self.workers.index(worker)] = fresh
        return fresh

    def close(self) -> None:
        for w in self.workers:
            w.close()
