"""Shared test set-up: federations are cached in a per-session temporary folder, never in ~/.cache."""

from __future__ import annotations

import dataclasses
import io
import signal
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors import safe_open

from fedcluster.catalog.registry import load_builtins
from fedcluster.data.federation import Federation, Split
from fedcluster.engine import runner
from fedcluster.engine.device import check_engine
from fedcluster.engine.training.kernels import auto_path
from fedcluster.reproduce import run_common
from fedcluster.storage import state_file
from tests.support.fake_device import FakeDevice

load_builtins()  # every built-in method, data set, scenario and model registered
# read once, before a test hides the GPU from the processes it starts: CUDA fixes this process's devices here
GPU_PRESENT = torch.cuda.is_available()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "device: a test about devices; it keeps device=auto's meaning (the GPU where "
                                       "one is present), every other test runs device=auto on the CPU")
    config.addinivalue_line("markers", "host_only(reason): --strict-device runs this test on the host, as without it "
                                       "(its tensors are the host's by design; the reason says why)")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--strict-device", action="store_true",
                     help="run every test on a simulated accelerator (tests/support/fake_device.py, strict): a test "
                          "whose code mixes host and device tensors, or relies on a global default device, fails")


def _moved(fed: Federation, device: torch.device | str) -> Federation:
    """``Federation.to`` that always copies (tensors a test built are host tensors until moved to the device)."""
    return dataclasses.replace(fed, **{k: Split(s.x.to(device), s.y.to(device), s.ptr)
                                       for k, s in (("train", fed.train), ("val", fed.val), ("test", fed.test))})


@pytest.fixture
def strict_device(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDevice]:
    """The test runs on a simulated accelerator with no global default device: tensors built from NumPy or by
    a factory without a device are host tensors, the federation the runner moves (``Federation.to``) and the
    models are device tensors; a run picks its engine as on a GPU (engine=auto is vectorised, CPU-only engines
    are refused). A run with ``device=cpu`` ends the simulation for the rest of the test (its tensors are all
    on the CPU). The test asserts ``strict_device.problems`` is empty."""
    accelerator, fake = torch.device("cuda"), FakeDevice(strict=True)

    class HostFile:  # state files (cached federations, checkpoints) load onto the host
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.file = safe_open(*args, **kwargs)

        def __enter__(self) -> HostFile:
            self.file.__enter__()
            return self

        def __exit__(self, *exc: object) -> None:
            self.file.__exit__(*exc)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.file, name)

        def get_tensor(self, name: str) -> torch.Tensor:
            return fake.on_host(self.file.get_tensor(name))

        def get_slice(self, name: str) -> HostSlice:
            return HostSlice(self.file.get_slice(name))

    class HostSlice:  # rows read from a state file (data/sharded.py's partial reads) land on the host too
        def __init__(self, part: Any) -> None:
            self.part = part

        def __getattr__(self, name: str) -> Any:
            return getattr(self.part, name)

        def __getitem__(self, index: Any) -> torch.Tensor:
            return fake.on_host(self.part[index])

    def resolve_device(name: str) -> torch.device:  # the simulated accelerator, unless a run asks for the CPU
        fake.paused = fake.paused or name == "cpu"
        return torch.device("cpu")

    monkeypatch.setattr(state_file, "safe_open", HostFile)
    monkeypatch.setattr(runner, "resolve_device", resolve_device)
    monkeypatch.setattr(run_common, "device_overrides",  # `reproduce --device auto` picks the accelerator
                        lambda name: ("cpu", ["device=cpu"]) if name == "cpu" else ("cuda", ["device=cuda"]))
    monkeypatch.setattr(Federation, "to", _moved)
    monkeypatch.setattr(runner, "auto_path", lambda model, device="cpu", precision="fp32", **kw:
                        auto_path(model, device if fake.paused else accelerator, precision, **kw))
    monkeypatch.setattr(runner, "check_engine", lambda engine, device, precision:
                        check_engine(engine, device if fake.paused else accelerator, precision))
    with fake:
        yield fake


@pytest.fixture(autouse=True)
def _cpu_unless_about_devices(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test not marked ``device`` runs as on a machine without a GPU, also where one is present: ``device=auto``
    (and ``reproduce --device auto``) is the CPU, in this process and in the processes it starts; so the suite's
    numbers and engine choices are the CPU's everywhere, and only the device tests use the GPU."""
    if request.node.get_closest_marker("device") is None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture(autouse=True)
def _strict_device_everywhere(request: pytest.FixtureRequest) -> Iterator[None]:
    if (not request.config.getoption("--strict-device") or "strict_device" in request.fixturenames
            or request.node.get_closest_marker("host_only")):
        yield
        return
    fake = request.getfixturevalue("strict_device")
    yield
    assert not fake.problems, "\n".join(sorted(set(fake.problems)))


@pytest.fixture(autouse=True, scope="session")
def _federation_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    mp = pytest.MonkeyPatch()
    mp.setenv("FEDCLUSTER_CACHE", str(tmp_path_factory.mktemp("cache")))
    yield
    mp.undo()


@pytest.fixture
def terminal_ctrl_c() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt, as in a terminal, even when pytest was started in the background
    (a shell starts background jobs with SIGINT ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run directory (IFCA, 6 clients, 2 rounds), made once: tests copy it before changing anything."""
    from fedcluster.app.cli import main

    out = tmp_path_factory.mktemp("finished") / "run"
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        rc = main(["run", "algorithm=ifca", "num_clients=6", "rounds=2", "progress=false", f"out={out}"])
    assert rc == 0, err.getvalue()
    return out
