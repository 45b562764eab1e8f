"""Runs over several processes (engine.distributed): two gloo ranks on the CPU give the single-process rounds.csv,
a killed rank ends the run with one line naming it, and the run resumes from rank 0's checkpoint (every method on
two ranks: tests/conformance/test_two_ranks.py).

The 2-rank jobs start two interpreters (``distributed_child.py``) with torch.distributed's env variables set
here, so that one process group serves several methods; the kill test goes through ``fedcluster run ...
ranks=2`` (torchrun's elastic agent).
"""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import fedcluster
from fedcluster.app import launch
from fedcluster.app.cli import main
from fedcluster.data.sources.fashion_mnist import DEBIAN_DIR
from fedcluster.engine.distributed.sharded import owned
from fedcluster.engine.distributed.state import state_fingerprint
from fedcluster.storage.state_file import load_state
from tests.conformance.methods import own_keys

SRC = str(Path(fedcluster.__file__).parents[1])
CHILD = str(Path(__file__).parents[1] / "support" / "distributed_child.py")
TINY = ["num_clients=6", "rounds=3", "progress=false", "model.hidden=[16]", "threads=1", "checkpoint_every=2"]


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", **extra}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rows(out: Path) -> list[dict[str, str]]:
    with (out / "rounds.csv").open() as f:
        return list(csv.DictReader(f))


def _assert_same_rounds(a: Path, b: Path) -> None:
    """Every column but the time, to float tolerance (rounds.csv keeps 6 significant digits)."""
    ra, rb = _rows(a), _rows(b)
    assert len(ra) == len(rb) and ra, (a, b)
    for x, y in zip(ra, rb, strict=True):
        assert x.keys() == y.keys()
        for k in x:
            if k != "seconds":
                np.testing.assert_allclose(float(x[k]), float(y[k]), rtol=1e-5, atol=1e-7, err_msg=f"{a} {k}")


def _rank_env(rank: int, port: str) -> dict[str, str]:
    return _env(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port)


def _two_ranks(root: Path, specs: dict[str, list[str]], timeout: float = 600) -> None:
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, CHILD, str(root), json.dumps(specs)], env=_rank_env(r, port),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
    logs = [p.communicate(timeout=timeout)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(logs)


def _spec(method: str, *args: str) -> list[str]:
    return [*TINY, f"algorithm={method}", *own_keys(method), *args]  # the conformance suite's keys


def _check(tmp_path: Path, specs: dict[str, list[str]]) -> None:
    for label, args in specs.items():
        assert main(["run", *args, f"out={tmp_path / 'one' / label}"]) == 0
    _two_ranks(tmp_path / "two", specs)
    for label in specs:
        _assert_same_rounds(tmp_path / "one" / label, tmp_path / "two" / label)
        # rank 0 alone wrote the run directory: one row per round, and the end-of-run files
        assert len(_rows(tmp_path / "two" / label)) == 3
        assert (tmp_path / "two" / label / "summary.json").is_file()


def _check_methods(tmp_path: Path, methods: list[str]) -> None:
    _check(tmp_path, {m: _spec(m) for m in methods})


# fedrc: training, E-step losses and soft weights; hcfl-plus: shared body + K heads, splits on prototype distances
# computed by each client where its data are, and removals
REPRESENTATIVE = ["fedrc", "hcfl-plus"]


def test_two_ranks_give_the_single_process_rounds(tmp_path: Path) -> None:
    _check_methods(tmp_path, REPRESENTATIVE)


def test_server_steps_on_client_data_give_the_single_process_rounds(tmp_path: Path) -> None:
    """The server-side computations that read clients' data, each done by the rank that holds the client:
    PACFL's signatures, FedMD's one-shot estimates and lowest-loss picks (and the regression metrics), a
    clustered method's Ω for clients never sampled (partial participation), HCFL's prototypes per cluster.
    Every run's federation is cached by the single-process run first: rank 1 reads its clients' part of it."""
    regression = ["num_clients=6", "rounds=3", "progress=false", "threads=1", "dataset=mixed-regression",
                  "scenario=mixed-regression", "model=linear-nobias", "algorithm=fedmd", "algorithm.init=oneshot"]
    _check(tmp_path, {"pacfl": _spec("pacfl"), "fedmd": _spec("fedmd"),
                      # standardised inputs: rank 1 applies rank 0's statistics to the rows it reads
                      "pacfl-standardised": _spec("pacfl", "normalize=true"),
                      "fedem-partial": _spec("fedem", "clients_per_round=2"),
                      "fesem-partial": _spec("fesem", "clients_per_round=2"),
                      "hcfl-prototypes": _spec("hcfl", "algorithm.adaptive=split", "algorithm.split=false",
                                               "algorithm.distance=prototype-cscp", "algorithm.rho=0.0"),
                      "fedmd-regression": regression,
                      # train_acc: each rank scores its own clients' training rows
                      "fedrc-train-acc": _spec("fedrc", "eval_train=true")})


MEMORY_CHILD = str(Path(__file__).parents[2] / "benchmarks" / "speed" / "distributed_memory.py")  # its --child mode
# 8 clients and 4 test clients (one per angle): every split divides evenly over 2 ranks
EVEN = ["num_clients=8", "scenario=rotation", "scenario.angles=[0,90,180,270]", "algorithm=fedavg", "progress=false",
        "threads=1"]


def _held(out: Path, args: list[str], ranks: int) -> list[dict[str, int]]:
    """What each process of a run with ``ranks`` processes holds once the run is built."""
    port = str(_free_port())
    envs = [_env()] if ranks == 1 else [_rank_env(r, port) for r in range(ranks)]
    procs = [subprocess.Popen([sys.executable, MEMORY_CHILD, "--child", *args, f"out={out}"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for env in envs]
    done = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * ranks, done
    return [json.loads(stdout.strip().splitlines()[-1]) for stdout, _ in done]


def test_each_rank_holds_only_its_clients_inputs(tmp_path: Path) -> None:
    """Bytes of the data tensors (inputs and labels of train, val and test) a rank keeps, and those its trainer
    reads, against the single process: at most 0.6× on 2 ranks for an even split; no client lost or held twice."""
    one = _held(tmp_path / "one", EVEN, 1)[0]
    two = _held(tmp_path / "two", EVEN, 2)
    for rank in two:
        assert rank["held"] <= 0.6 * one["held"], (rank, one)
        assert rank["trainer"] <= 0.6 * one["trainer"], (rank, one)
    assert sum(r["inputs"] for r in two) == one["inputs"]


@pytest.mark.slow
@pytest.mark.skipif(not Path(DEBIAN_DIR).is_dir(), reason="Fashion-MNIST (dataset-fashion-mnist) not installed")
def test_a_rank_keeps_less_resident_memory_than_the_single_process(tmp_path: Path) -> None:
    """Fashion-MNIST, 8 clients: rank 1 of 2 (which reads only its clients' inputs from the federation cache)
    keeps at least 0.3× the whole federation's data bytes less resident memory of its own than the single
    process (half of it, less the noise of what else the process allocates)."""
    args = ["algorithm=fedavg", "dataset=fashion-mnist", "model=mlp", "num_clients=8", "progress=false", "threads=1"]
    one = _held(tmp_path / "one", args, 1)[0]  # builds the federation and caches it
    one = _held(tmp_path / "again", args, 1)[0]  # reads the cache, as the ranks do
    two = _held(tmp_path / "two", args, 2)
    assert one["anon"] - two[1]["anon"] >= 0.3 * one["held"], (one, two)


def test_a_method_that_reads_every_input_on_the_server_is_refused_in_one_line(tmp_path: Path) -> None:
    port = str(_free_port())
    specs = {"joint": _spec("fedem", "algorithm.formulation=joint")}
    procs = [subprocess.Popen([sys.executable, CHILD, str(tmp_path), json.dumps(specs)], env=_rank_env(r, port),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [2, 2], errs
    lines = [line for err in errs for line in err.splitlines() if line.startswith("fedcluster:")]
    assert len(lines) == 1 and "formulation=joint" in lines[0] and "ranks=1" in lines[0], errs
    assert not any("Traceback" in err for err in errs) and not (tmp_path / "joint").exists()


SHARE = """
import json, numpy as np, torch, torch.distributed as dist
from fedcluster.engine.distributed.group import leave_group
from fedcluster.engine.distributed.state import share_state
dist.init_process_group("gloo")
r = dist.get_rank()
class Method:  # a state that differs on the two ranks, as after a non-deterministic server step
    def __init__(self):
        self.state = {"models": {"w": torch.full((2, 3), r + 0.5), "b": torch.zeros(0)}, "omega": np.eye(2) * (r + 1),
                      "held": np.array([True, r == 0]), "k": r, "name": f"rank{r}", "big": 2**70 + r, "none": None}
    def state_dict(self): return self.state
    def load_state_dict(self, state): self.state = state
m = Method()
share_state(m, torch.device("cpu"))
s = m.state
print(json.dumps([s["models"]["w"].tolist(), str(s["models"]["w"].dtype), list(s["models"]["b"].shape),
                  s["omega"].tolist(), s["held"].tolist(), str(s["held"].dtype), s["k"], s["name"], s["big"],
                  s["none"]]))
leave_group()
"""


def test_every_rank_takes_rank_0s_state_after_a_round() -> None:
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, "-c", SHARE], env=_rank_env(r, port), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    done = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], done
    states = [json.loads(out.strip().splitlines()[-1]) for out, _ in done]
    assert states[0] == states[1] == [[[0.5] * 3] * 2, "torch.float32", [0], [[1.0, 0.0], [0.0, 1.0]],
                                      [True, True], "bool", 0, "rank0", 2**70, None]


def test_every_client_belongs_to_exactly_one_rank() -> None:
    clients = np.array([5, 0, 3, 3, 8, 1, 2, 7, 5])  # units of a round: clients repeat (client × cluster)
    parts = [owned(clients, r, 3) for r in range(3)]
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(clients)))
    for r, p in enumerate(parts):
        assert set((clients[p] % 3).tolist()) <= {r}


def test_state_fingerprint_tells_states_apart() -> None:
    state = {"models": {"w": torch.arange(6.0).view(2, 3)}, "omega": np.eye(2), "k": 2, "ids": [0, 1]}
    same = {"models": {"w": torch.arange(6.0).view(2, 3)}, "omega": np.eye(2), "k": 2, "ids": [0, 1]}
    assert torch.equal(state_fingerprint(state), state_fingerprint(same))
    for other in ({**state, "k": 3}, {**state, "ids": [0, 1, 2]}, {**state, "omega": np.eye(2) * 2},
                  {**state, "models": {"w": torch.full((2, 3), float("nan"))}}):
        assert not torch.equal(state_fingerprint(state), state_fingerprint(other))


def test_the_failed_rank_is_named_not_those_torchrun_stopped(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "config.yaml").write_text("")
    fail = SimpleNamespace(failures={0: SimpleNamespace(exitcode=-signal.SIGTERM, timestamp=5),
                                     1: SimpleNamespace(exitcode=-signal.SIGKILL, timestamp=5),
                                     2: SimpleNamespace(exitcode=launch.EXIT_RANK_LOST, timestamp=4)})
    assert launch._report_failure(fail, tmp_path) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("fedcluster: rank 1 was killed by SIGKILL") and f"fedcluster resume {tmp_path}" in err


def test_ranks_must_be_positive(capsys: pytest.CaptureFixture) -> None:
    assert main(["run", "ranks=0"]) == 2
    assert "ranks must be >= 1" in capsys.readouterr().err


def _rank_pid(parent: int, rank: int) -> int | None:
    """The worker of ``parent`` (torchrun's agent) whose environment says RANK=rank."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) != parent:
                continue
            if f"RANK={rank}".encode() in (d / "environ").read_bytes().split(b"\0"):
                return int(d.name)
        except (OSError, ValueError, IndexError):
            continue
    return None


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the rank's process through /proc")
def test_a_killed_rank_ends_the_run_in_one_line_and_resume_loses_nothing(tmp_path: Path) -> None:
    args = [a for a in TINY if not a.startswith(("rounds=", "checkpoint_every="))] + ["checkpoint_every=1"]
    killed = tmp_path / "killed"
    job = subprocess.Popen([sys.executable, "-m", "fedcluster", "run", *args, "rounds=500", "ranks=2",
                            f"out={killed}"], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 300
        while time.monotonic() < end and job.poll() is None:
            if (killed / "rounds.csv").is_file() and len((killed / "rounds.csv").read_text().splitlines()) > 2:
                break
            time.sleep(0.05)
        pid = _rank_pid(job.pid, 1)
        assert pid is not None, job.communicate(timeout=60)
        os.kill(pid, signal.SIGKILL)
        _, err = job.communicate(timeout=120)  # no hang: the agent stops rank 0 when rank 1 dies
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 1, err
    lines = [line for line in err.splitlines() if line.startswith("fedcluster:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("fedcluster: rank 1 was killed by SIGKILL") and f"resume {killed}" in lines[0]
    done = int(load_state(killed / "checkpoint.pt", "checkpoint")["round"])  # rank 0's last checkpoint
    assert 1 <= done < 500
    # the checkpoint of a 2-rank run continues in one process (ranks may change on resume) with nothing lost
    assert main(["resume", str(killed), f"rounds={done + 2}", "ranks=1"]) == 0
    straight = tmp_path / "straight"
    assert main(["run", *args, f"rounds={done + 2}", f"out={straight}"]) == 0
    _assert_same_rounds(straight, killed)


@pytest.mark.slow
def test_a_two_rank_run_resumes_on_two_ranks_like_a_straight_run(tmp_path: Path) -> None:
    args = [a for a in TINY if not a.startswith("rounds=")] + ["algorithm=fedrc", "checkpoint_every=1"]
    resumed, straight = tmp_path / "resumed", tmp_path / "straight"
    fed = [sys.executable, "-m", "fedcluster"]
    for cmd in (["run", *args, "rounds=3", "ranks=2", f"out={resumed}"], ["resume", str(resumed), "rounds=5"]):
        done = subprocess.run([*fed, *cmd], env=_env(), capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
    again = subprocess.run([*fed, "resume", str(resumed)], env=_env(), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stderr  # rank 1 does not wait for it
    assert main(["run", *args, "rounds=5", f"out={straight}"]) == 0
    _assert_same_rounds(straight, resumed)
