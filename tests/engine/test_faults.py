"""Fault injection: kill -9, Ctrl-C, corrupt and hostile files, a full disk, two runs on one folder, divergence.

Each case checks that nothing was lost (rounds.csv, the last checkpoint, a resumed run equal to a straight
one) and that the user sees one line. Killed and interrupted runs are forked children of the test
process (a real SIGKILL/SIGINT, without paying for a fresh interpreter each time); they train with one
thread, as the engine's forked pool workers do.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

import fedcluster.engine.trainers.local as local_backend
import fedcluster.storage.atomic as atomic
from fedcluster.app.cli import main
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.build import build_federation, cache_key, cache_path
from fedcluster.data.federation import Federation
from fedcluster.storage.state_file import load_state
from fedcluster.tracking.run_dir import RunDir
from tests.support.fault_child import kill_self_at

# Faults of the process, on the CPU: a forked child cannot use CUDA once the parent has (and the CPU engines are
# what some of these tests break on purpose), so with a GPU present device=auto would test something else.
FAST = ["num_clients=6", "progress=false", "model.hidden=[16]", "checkpoint_every=2", "device=cpu"]


def _rows(out: Path) -> list[dict[str, str]]:
    with (out / "rounds.csv").open() as f:
        return list(csv.DictReader(f))


def _numbers(out: Path) -> list[list[str]]:
    return [[v for k, v in r.items() if k != "seconds"] for r in _rows(out)]


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("fedcluster:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _leftover_temporaries(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


# -- forked children ---------------------------------------------------------------------------------
def _fork(target: Callable[[], int], log: Path) -> int:
    """Run ``target`` in a child process (its own process group, output in ``log``); return its pid."""
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        code = 1
        try:
            torch.set_num_threads(1)  # the parent's OpenMP thread pool does not survive fork()
            signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, even under `&`
            os.setpgid(0, 0)
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            code = target()
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def _spawn(phase: str, n: int, args: list[str], log: Path) -> subprocess.Popen:
    """A fresh interpreter (its own session) running ``fault_child.py``: the engine's process pool cannot
    be forked again from a forked copy of the multi-threaded test process."""
    child = Path(__file__).parents[1] / "support" / "fault_child.py"
    with log.open("w") as f:
        return subprocess.Popen([sys.executable, str(child), phase, str(n), *args], stdout=f, stderr=f,
                                start_new_session=True, env=os.environ)


def _reap(proc: subprocess.Popen, timeout: float = 300, log: Path | None = None) -> int:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        if log is None:
            raise
        proc.send_signal(signal.SIGUSR1)  # fault_child dumps every thread's stack into the log
        time.sleep(2)
        raise AssertionError(f"still running {timeout:g} s later; its log:\n{log.read_text()}") from None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # orphaned pool workers, if any


def _wait(pid: int, timeout: float = 300) -> int:
    """The child's exit status (-signal when killed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        time.sleep(0.05)
    os.killpg(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError("child did not finish")


def _wait_for_rows(out: Path, n: int, alive: Callable[[], bool], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (out / "rounds.csv").exists() and len(_rows(out)) >= n:
            return
        assert alive(), "the run ended too early"
        time.sleep(0.05)
    raise AssertionError("the run made no progress")


# -- kill -9 at a random round, then resume ------------------------------------------------------
KILLS = [
    pytest.param("fedavg", [], "row", id="fedavg-row"),
    pytest.param("fedavg", ["engine=pool", "workers=2"], "row", id="fedavg-pool-row"),
    pytest.param("ifca", ["algorithm.num_clusters=2"], "checkpoint", id="ifca-mid-checkpoint"),
    pytest.param("cfl", [], "row", id="cfl-row"),
    pytest.param("fedem", ["algorithm.num_clusters=2"], "checkpoint", id="fedem-mid-checkpoint",
                 marks=pytest.mark.slow),
    # one anchor candidate (a single largest client) < k: every Phase-1 round draws random models from its RNG
    pytest.param("fedmd", ["algorithm.delta=1"], "row", id="fedmd-phase1-row", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("algorithm,extra,phase", KILLS)
def test_kill9_then_resume_equals_straight_run(tmp_path: Path, algorithm: str, extra: list[str],
                                               phase: str) -> None:
    args = [*FAST, f"algorithm={algorithm}", *extra, "rounds=6"]
    assert main(["run", *args, f"out={tmp_path / 'straight'}"]) == 0
    killed = tmp_path / "killed"
    at = random.randint(1, 5) if phase == "row" else random.randint(1, 2)  # a round, or the 1st/2nd checkpoint
    if "engine=pool" in extra:
        status = _reap(_spawn(phase, at, ["run", *args, f"out={killed}"], tmp_path / "log"))
    else:
        status = _wait(_fork(lambda: (kill_self_at(phase, at), main(["run", *args, f"out={killed}"]))[1],
                             tmp_path / "log"))
    assert status == -signal.SIGKILL, (tmp_path / "log").read_text()
    assert main(["resume", str(killed)]) == 0, f"{phase} {at}"
    assert _numbers(killed) == _numbers(tmp_path / "straight"), f"killed at {phase} {at}"
    assert _leftover_temporaries(killed) == []
    assert (killed / "summary.json").is_file() and (killed / "clients.csv").is_file()


# FedMD keeps drawing from its own generator after the start: random models for missing anchor groups (fewer
# anchors than k) and Algorithm 3's starting basis Q_0 (subspace=orthogonal). Stopped and resumed inside Phase 1.
FEDMD = ["num_clients=6", "progress=false", "device=cpu", "algorithm=fedmd", "scenario=mixed-regression",
         "dataset=mixed-regression", "scenario.config=custom", "scenario.d=10", "model=linear-nobias",
         "algorithm.num_clusters=3", "algorithm.phase1_rounds=5", "checkpoint_every=1"]


@pytest.mark.parametrize("extra", [["algorithm.num_anchors=2"], ["algorithm.subspace=orthogonal"]],
                         ids=["fewer-anchors-than-k", "orthogonal-iteration"])
def test_fedmd_resume_inside_phase1_equals_straight_run(tmp_path: Path, extra: list[str]) -> None:
    assert main(["run", *FEDMD, *extra, "rounds=6", f"out={tmp_path / 'straight'}"]) == 0
    resumed = tmp_path / "resumed"
    assert main(["run", *FEDMD, *extra, "rounds=3", f"out={resumed}"]) == 0
    assert main(["resume", str(resumed), "rounds=6"]) == 0
    assert _numbers(resumed) == _numbers(tmp_path / "straight")
    a, b = (load_state(out / "checkpoint.pt", "checkpoint")["algorithm"] for out in (tmp_path / "straight", resumed))
    assert torch.equal(a["models"]["head.weight"], b["models"]["head.weight"])
    np.testing.assert_array_equal(a["anchor_theta"], b["anchor_theta"])
    assert a["rng"] == b["rng"]


# -- Ctrl-C ----------------------------------------------------------------------------------------
def test_sigint_prints_the_real_run_directory_and_keeps_results(tmp_path: Path) -> None:
    out = tmp_path / "interrupted"
    proc = _spawn("none", 0, ["run", *FAST, "engine=pool", "workers=2", "rounds=100000", f"out={out}"],
                  tmp_path / "log")
    try:
        _wait_for_rows(out, 3, lambda: proc.poll() is None)
        os.killpg(proc.pid, signal.SIGINT)  # like Ctrl-C in a terminal: the whole group, pool workers too
    finally:
        status = _reap(proc, timeout=120, log=tmp_path / "log")
    assert status == 130, (tmp_path / "log").read_text()
    line = _one_line((tmp_path / "log").read_text())
    assert f"fedcluster resume {out}" in line and "RUN_DIR" not in line
    rounds = [int(r["round"]) for r in _rows(out)]
    assert rounds == list(range(1, len(rounds) + 1)) and len(rounds) >= 3
    done = load_state(out / "checkpoint.pt", "checkpoint")["round"]
    assert 2 <= done <= len(rounds) and f"checkpoint of round {done}" in line
    assert _leftover_temporaries(out) == []


@pytest.mark.parametrize("moment", ["after_the_row", "after_the_checkpoint"])
def test_sigint_while_a_round_is_written_tells_the_truth(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch,
                                                        moment: str, terminal_ctrl_c: None) -> None:
    """Ctrl-C that lands between a round's row and its checkpoint (or just after the checkpoint): the message
    names the rounds really in rounds.csv and the checkpoint really on disk (a CI run once said round 2 for 4)."""
    write = {"after_the_row": RunDir.append_round, "after_the_checkpoint": RunDir.save_checkpoint}[moment]

    def then_ctrl_c(self: RunDir, payload: dict) -> None:
        write(self, payload)
        if payload["round"] == 4:
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(RunDir, write.__name__, then_ctrl_c)
    out = tmp_path / "interrupted"
    assert main(["run", *FAST, "rounds=10", f"out={out}"]) == 130
    line = _one_line(capsys.readouterr().err)
    assert [int(r["round"]) for r in _rows(out)] == [1, 2, 3, 4]
    assert load_state(out / "checkpoint.pt", "checkpoint")["round"] == 4
    assert "interrupted in round 5; rounds 1-4 are in" in line and "checkpoint of round 4" in line, line


# -- two runs, one folder --------------------------------------------------------------------------
def test_second_run_on_the_same_folder_is_refused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "shared"
    pid = _fork(lambda: main(["run", *FAST, "rounds=100000", f"out={out}"]), tmp_path / "log")
    try:
        _wait_for_rows(out, 1, lambda: os.waitpid(pid, os.WNOHANG)[0] == 0)
        assert main(["run", *FAST, "rounds=3", f"out={out}"]) == 2
        assert f"in use by another fedcluster process (pid {pid})" in _one_line(capsys.readouterr().err)
        assert main(["resume", str(out)]) == 2
        assert f"pid {pid}" in _one_line(capsys.readouterr().err)
    finally:
        os.killpg(pid, signal.SIGINT)
        assert _wait(pid) == 130
    rounds = [int(r["round"]) for r in _rows(out)]
    assert rounds == list(range(1, len(rounds) + 1))  # one writer: no interleaved or repeated rows


# -- hostile and corrupt checkpoints ---------------------------------------------------------------
class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # what an attacker plants: unpickling runs a shell command
        return os.system, (f"touch {self.marker}",)


def _plant_pickle(path: Path, marker: Path, zipped: bool) -> None:
    if zipped:
        torch.save({"round": 1, "algorithm": _Payload(marker)}, path)
    else:
        path.write_bytes(pickle.dumps({"round": 1, "algorithm": _Payload(marker)}))


@pytest.mark.parametrize("zipped", [True, False], ids=["torch.save", "pickle"])
def test_planted_pickle_checkpoint_is_never_executed(tmp_path: Path, capsys, zipped: bool) -> None:
    out, marker = tmp_path / "run", tmp_path / "pwned"
    assert main(["run", *FAST, "rounds=2", f"out={out}"]) == 0
    _plant_pickle(out / "checkpoint.pt", marker, zipped)
    capsys.readouterr()
    assert main(["resume", str(out), "rounds=3"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "checkpoint.pt" in line and "pickle" in line and "never unpickled" in line
    assert not marker.exists()


def _tensor_region(path: Path) -> tuple[int, int]:
    """Byte range of the tensor data in a safetensors file (after the 8-byte length and the header)."""
    data = path.read_bytes()
    return 8 + int.from_bytes(data[:8], "little"), len(data)


@pytest.mark.parametrize("damage", ["flip-weight-byte", "truncate", "flip-metadata-byte"])
def test_corrupt_checkpoint_is_refused_and_the_run_can_still_be_redone(tmp_path: Path, capsys,
                                                                       damage: str) -> None:
    out = tmp_path / "run"
    assert main(["run", *FAST, "rounds=2", f"out={out}"]) == 0
    ck = out / "checkpoint.pt"
    data = bytearray(ck.read_bytes())
    lo, hi = _tensor_region(ck)
    if damage == "flip-weight-byte":
        data[(lo + hi) // 2] ^= 0x01  # one bit of a float inside a weight tensor
    elif damage == "flip-metadata-byte":
        i = data.index(b"round")
        data[i] = ord("R")  # the JSON still parses; only the checksum can tell
    else:
        del data[-100:]
    ck.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["resume", str(out), "rounds=3"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert str(ck) in line and "not loaded" in line
    assert ("truncated" in line) if damage == "truncate" else ("checksum" in line)


# -- the federation cache --------------------------------------------------------------------------
def _cfg(data_seed: int, *extra: str):
    """A config whose federation no other test caches (the key covers data_seed)."""
    cfg, typed = resolve(load_raw(None, ["num_clients=6", f"data_seed={data_seed}", *extra]))
    return cfg, typed["scenario"]


def _same(a: Federation, b: Federation) -> bool:
    return all(torch.equal(getattr(a, s).x, getattr(b, s).x) and torch.equal(getattr(a, s).y, getattr(b, s).y)
               for s in ("train", "val", "test")) and np.array_equal(a.true_cluster, b.true_cluster)


DAMAGES = ["truncate", "flip-data-byte", "other-config", "pickle-payload"]


@pytest.mark.parametrize("damage", DAMAGES)
def test_bad_cache_file_is_discarded_and_rebuilt(tmp_path: Path, capsys, damage: str) -> None:
    cfg, params = _cfg(1000 + DAMAGES.index(damage))
    path, marker = cache_path(cfg, params), tmp_path / "pwned"
    fresh = build_federation(cfg, params, use_cache=False)
    build_federation(cfg, params)
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:-1000])
    elif damage == "flip-data-byte":
        data = bytearray(path.read_bytes())
        lo, hi = _tensor_region(path)
        data[lo + (hi - lo) // 3] ^= 0x10
        path.write_bytes(bytes(data))
    elif damage == "other-config":
        other_cfg, other_params = _cfg(1000 + DAMAGES.index(damage), "scenario.concepts=2")
        build_federation(other_cfg, other_params)
        shutil.copy(cache_path(other_cfg, other_params), path)
    else:
        _plant_pickle(path, marker, zipped=True)
    capsys.readouterr()
    fed = build_federation(cfg, params)
    err = capsys.readouterr().err
    assert "discarding it and building it again" in _one_line(err) and str(path) in err
    assert _same(fed, fresh) and not marker.exists()
    assert _same(Federation.load(path, cache_key(cfg, params)), fresh)  # the rebuilt file is good again


def test_planted_cache_pickle_is_never_executed_by_a_plain_run(tmp_path: Path, capsys) -> None:
    cfg, params = _cfg(1077)
    marker = tmp_path / "pwned"
    cache_path(cfg, params).parent.mkdir(parents=True, exist_ok=True)
    _plant_pickle(cache_path(cfg, params), marker, zipped=True)
    assert main(["run", *FAST, "data_seed=1077", "rounds=1", f"out={tmp_path / 'r'}"]) == 0
    assert "pickle" in capsys.readouterr().err and not marker.exists()


# -- a full disk -----------------------------------------------------------------------------------
def _enospc_on(monkeypatch: pytest.MonkeyPatch, name: str, nth: int) -> None:
    """Make the ``nth`` fsync of a temporary file for ``name`` fail as if the disk were full."""
    fsync, count = os.fsync, [0]

    def full(fd: int) -> None:
        if f".{name}." in os.readlink(f"/proc/self/fd/{fd}"):
            count[0] += 1
            if count[0] >= nth:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", full)


def test_disk_full_while_checkpointing_keeps_the_last_checkpoint(tmp_path: Path, capsys,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    args = [*FAST, "rounds=6"]
    assert main(["run", *args, f"out={tmp_path / 'straight'}"]) == 0
    out = tmp_path / "full"
    _enospc_on(monkeypatch, "checkpoint.pt", nth=2)
    capsys.readouterr()
    assert main(["run", *args, f"out={out}"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "No space left on device" in line and f"fedcluster resume {out}" in line
    assert _leftover_temporaries(out) == []
    assert load_state(out / "checkpoint.pt", "checkpoint")["round"] == 2  # the last good one, intact
    monkeypatch.undo()
    assert main(["resume", str(out)]) == 0
    assert _numbers(out) == _numbers(tmp_path / "straight")


def test_disk_full_on_the_cache_warns_and_the_run_goes_on(tmp_path: Path, capsys,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, params = _cfg(1005)
    _enospc_on(monkeypatch, cache_path(cfg, params).name, nth=1)
    assert main(["run", *FAST, "data_seed=1005", "rounds=1", f"out={tmp_path / 'r'}"]) == 0
    line = _one_line(capsys.readouterr().err)
    assert "not cached" in line and "No space left on device" in line
    assert not cache_path(cfg, params).exists() and _leftover_temporaries(cache_path(cfg, params).parent) == []


def test_a_full_out_folder_is_said_before_the_federation_is_built(tmp_path: Path, capsys,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from fedcluster.engine import runner

    _enospc_on(monkeypatch, "write-probe", nth=1)
    monkeypatch.setattr(runner, "build_federation", lambda *args: pytest.fail("the federation was built"))
    out = tmp_path / "r"
    assert main(["run", *FAST, "rounds=1", f"out={out}"]) == 2
    err = capsys.readouterr().err
    assert "No space left on device" in _one_line(err) and str(out) in err and not out.exists()


def test_too_little_room_for_the_checkpoints_is_said_before_the_summary(tmp_path: Path, capsys,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from fedcluster.tracking import run_dir

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(run_dir.shutil, "disk_usage", lambda path: usage._replace(free=10_000))
    out = tmp_path / "r"
    assert main(["run", *FAST, "rounds=1", f"out={out}"]) == 2
    err = capsys.readouterr().err
    line = _one_line(err)
    assert "10.0 kB free" in line and "checkpoints need about" in line, line
    assert "concept-swap:" not in err and not out.exists()  # no federation summary, no trace


def _unshare_works() -> bool:
    if not shutil.which("unshare"):
        return False
    probe = "d=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs $d && umount $d && rmdir $d"
    return subprocess.run(["unshare", "-r", "-m", "sh", "-c", probe], capture_output=True, timeout=30).returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _unshare_works(), reason="needs unshare -r -m and tmpfs mounts (a private mount namespace)")
@pytest.mark.parametrize("size,words", [("100k", "checkpoints need about"), ("16k", "No space left on device")])
def test_real_full_tmpfs(tmp_path: Path, size: str, words: str) -> None:
    """A small tmpfs for out= and for the cache: one clear line before the federation's summary (a 100 kB one
    cannot hold two 62 kB checkpoints; a 16 kB one not even a probe file), no temporary file, no run folder left."""
    args = ["num_clients=6", "progress=false", "checkpoint_every=1", "rounds=5", "device=cpu"]  # 62 kB checkpoints
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    script = (f"mount -t tmpfs -o size={size} tmpfs {mnt} && mkdir {mnt}/cache && "
              f"FEDCLUSTER_CACHE={mnt}/cache {sys.executable} -m fedcluster.app.cli run {' '.join(args)} "
              f"out={mnt}/run; echo rc=$?; ls -a {mnt} {mnt}/cache/federations")
    proc = subprocess.run(["unshare", "-r", "-m", "sh", "-c", script], capture_output=True, text=True,
                          timeout=300, env=os.environ)
    assert "rc=2" in proc.stdout, proc.stdout + proc.stderr
    err = proc.stderr
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("fedcluster: error")]
    assert len(errors) == 1 and words in errors[0], err
    assert "concept-swap:" not in err  # the federation's summary ("concept-swap: 6 clients ...") is not printed
    assert ".tmp" not in proc.stdout and "run" not in proc.stdout.split()  # no temporary file, no run folder


# -- divergence ------------------------------------------------------------------------------------
def test_divergence_at_round_one_exits_3_and_the_folder_can_be_reused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "nan"
    assert main(["run", *FAST, "rounds=3", "lr=1e30", f"out={out}"]) == 3
    line = _one_line(capsys.readouterr().err)
    assert "diverged at round 1" in line and "client(s) 0, 1, 2, 3, 4, 5" in line and "lr" in line
    assert not (out / "checkpoint.pt").exists()
    assert main(["run", *FAST, "rounds=2", f"out={out}"]) == 0  # a run with no checkpoint starts over


def test_divergence_keeps_the_last_good_checkpoint(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    args = [*FAST, "rounds=4", "eval_every=2"]  # round 3 is not evaluated: the weights alone must tell
    assert main(["run", *args, f"out={tmp_path / 'straight'}"]) == 0
    dense, calls = local_backend.train_dense, [0]

    def nan_in_round_3(*a, **k):  # one client's local training blows up in the 3rd round
        out = dense(*a, **k)
        calls[0] += 1
        if calls[0] == 3:
            next(iter(out.values()))[0].fill_(float("nan"))
        return out

    monkeypatch.setattr(local_backend, "train_dense", nan_in_round_3)
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["run", *args, f"out={out}"]) == 3
    line = _one_line(capsys.readouterr().err)
    assert "diverged at round 3: local training of client(s) " in line and "checkpoint of round 2 is kept" in line
    state = load_state(out / "checkpoint.pt", "checkpoint")
    assert state["round"] == 2 and all(torch.isfinite(v).all() for v in state["algorithm"]["models"].values())
    assert [int(r["round"]) for r in _rows(out)] == [1, 2]
    monkeypatch.undo()
    assert main(["resume", str(out)]) == 0  # the kept checkpoint continues as if nothing happened
    assert _numbers(out) == _numbers(tmp_path / "straight")
