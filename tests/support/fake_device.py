"""A CPU stand-in for an accelerator, to test on machines without one that a run keeps its tensors together.

Under :class:`FakeDevice` every tensor is either *host* (made by ``.cpu()``, ``from_numpy`` or from host
tensors only) or *device* (everything else: tensors that existed before the mode started, i.e. the moved
federation and models, and what ``.to(device)`` or a factory naming a device would put on the GPU; on a CPU
run the run's device is the CPU, so a named device is the run's). It records what would fail on CUDA: an
operation that mixes host and device tensors (other than CPU scalars, and CPU indices of ``t[i]``, which CUDA
accepts), and a device tensor read as NumPy (``.numpy()``, ``np.asarray``, ``.tolist()``) without ``.cpu()``.

A factory without a device (``torch.zeros(3)``, ``torch.as_tensor(array)``) makes a *device* tensor by default,
as under a ``torch.device`` context; with ``strict=True`` it makes a *host* tensor, as on a GPU when no global
default device is set: code that is right under ``strict`` takes its devices from its data. The device of a host
tensor (``t.device`` of a host ``t``) names the host: a factory or ``.to()`` given it makes a host tensor, as CUDA
code that takes its device from a CPU tensor puts its result on the CPU.

It also counts *host syncs* (``syncs``, each with where it happened in ``sync_sites``): a read of a device tensor on
the host (``.cpu()``, ``.item()``, ``.tolist()``, ``.numpy()``, ``bool()``/``float()``/``int()`` of one, or a copy
``.to()`` the CPU), each of which waits for the GPU to finish its queue, and a blocking copy of host data to the
device (``.to(device)`` without ``non_blocking=True``, ``as_tensor``/``tensor`` naming the device), which CUDA also
makes wait (PyTorch synchronises the stream after a blocking copy).

The ``strict_device`` fixture (tests/conftest.py) runs one test this way; ``pytest --strict-device tests/...``
runs every selected test this way (a test whose run says ``device=cpu`` is checked up to that run only).
"""

from __future__ import annotations

import traceback
import weakref
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

TO_HOST = {"cpu", "from_numpy"}
HOST_READS = {"cpu", "item", "tolist", "numpy", "__array__", "__bool__", "__float__", "__int__", "__index__"}
READS = {"numpy", "__array__", "tolist"}
INDEXING = {"__getitem__", "__setitem__", "index_put_"}  # CUDA takes CPU indices here (not in index_select & co)
CROSSING = {"copy_", "_has_compatible_shallow_copy_type"}  # copies between host and device (load_state_dict's)
FACTORIES = {"as_tensor", "tensor", "zeros", "ones", "full", "empty", "arange", "eye", "zeros_like", "ones_like",
             "empty_like", "full_like", "rand", "randn", "randint", "randperm", "linspace", "logspace"}


def _where() -> str:
    frames = [f for f in traceback.extract_stack()[:-2] if ("/fedcluster/" in f.filename or "/tests/" in f.filename)
              and not f.filename.endswith("fake_device.py")]
    return " <- ".join(f"{f.filename.split('/src/fedcluster/')[-1].split('/tests/')[-1]}:{f.lineno}"
                       for f in frames[::-1][:3])


class FakeDevice(TorchFunctionMode):
    def __init__(self, strict: bool = False) -> None:
        super().__init__()
        self.strict = strict
        self.paused = False  # while True nothing is tagged or recorded (e.g. after a run chose device=cpu)
        self._host: dict[int, weakref.ref] = {}
        self._host_devices: dict[int, torch.device] = {}  # ``.device`` of host tensors (kept alive: ids stay unique)
        self.problems: list[str] = []
        self.syncs = 0  # host syncs (module docstring)
        self.sync_sites: list[str] = []

    def __enter__(self):
        # torch.from_numpy bypasses __torch_function__: wrap it while the mode is on (always a host tensor)
        self._from_numpy = torch.from_numpy

        def from_numpy(a):
            out = self._from_numpy(a)
            self._mark(out)
            return out

        torch.from_numpy = from_numpy
        # Module.to parses its device into a new object: the device of a host tensor stays the host's through it
        self._parse_to = torch._C._nn._parse_to

        def parse_to(*args, **kwargs):
            out = self._parse_to(*args, **kwargs)
            if self._names_host(args, kwargs) and isinstance(out[0], torch.device):
                self._host_devices[id(out[0])] = out[0]
            return out

        torch._C._nn._parse_to = parse_to
        return super().__enter__()

    def __exit__(self, *exc):
        torch.from_numpy = self._from_numpy
        torch._C._nn._parse_to = self._parse_to
        return super().__exit__(*exc)

    def host(self, t: torch.Tensor) -> bool:
        r = self._host.get(id(t))
        return r is not None and r() is t

    def on_host(self, t: torch.Tensor) -> torch.Tensor:
        """Tag ``t`` (made outside PyTorch's functions, e.g. read from a file onto the CPU) as a host tensor."""
        self._mark(t)
        return t

    def _mark(self, out: Any) -> None:
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self._host[id(t)] = weakref.ref(t)

    def _names_host(self, args: tuple, kwargs: dict) -> bool:
        """Whether a ``to``/factory call names the device of a host tensor (then it stays on, or goes to, the host)."""
        return any(id(a) in self._host_devices for a in (*args, *kwargs.values()) if isinstance(a, torch.device))

    @staticmethod
    def _names_device(args: tuple, kwargs: dict) -> bool:
        """Whether a ``to``/``as_tensor``/factory call names a device (then it lands on the run's device)."""
        for a in (*args, *kwargs.values()):
            if isinstance(a, torch.device):
                return True
            if isinstance(a, str):
                try:
                    torch.device(a)
                    return True
                except (RuntimeError, TypeError):
                    continue
        return False

    def _count_sync(self, name: str, args: tuple, kwargs: dict) -> None:
        first = args[0] if args else None
        if isinstance(first, torch.Tensor) and not self.host(first):
            if name in HOST_READS:
                self._sync(f"{name}() of a device tensor")
            return  # .to(the run's device) of a device tensor: no copy
        if name not in ("to", "as_tensor", "tensor") or kwargs.get("non_blocking") or True in args[2:3]:
            return
        if self._names_device(args[1:], kwargs):  # host data copied to the run's device, blocking
            self._sync(f"{name}() of host data to the device")

    def _sync(self, what: str) -> None:
        self.syncs += 1
        self.sync_sites.append(f"{what} at {_where()}")

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.paused:
            return func(*args, **kwargs)
        name = getattr(func, "__name__", str(func))
        if name == "__get__" and getattr(func, "__self__", None) is torch.Tensor.device:
            out = func(*args, **kwargs)
            if self.host(args[0]):
                self._host_devices[id(out)] = out
            return out
        if name == "__set__" and getattr(func, "__self__", None) is torch.Tensor.data:  # Module.to moves in place
            out = func(*args, **kwargs)
            if self.host(args[1]):
                self._mark(args[0])
            else:
                self._host.pop(id(args[0]), None)
            return out
        if (name == "to" or name in FACTORIES) and self._names_host(args[1:] if name == "to" else args, kwargs):
            if name == "to" and isinstance(args[0], torch.Tensor) and not self.host(args[0]):
                self._sync("to() of a device tensor to the host")
            out = func(*args, **kwargs)
            if name == "to" and out is args[0]:  # no copy on the CPU: tag an alias, not the original
                out = out.view_as(out)
            self._mark(out)
            return out
        if name in READS and isinstance(args[0], torch.Tensor) and not self.host(args[0]):
            self.problems.append(f"{name}() of a device tensor at {_where()}")
        self._count_sync(name, args, kwargs)
        out = func(*args, **kwargs)
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        if name in TO_HOST:
            if out is args[0]:  # .cpu() of a CPU tensor is the tensor itself: tag an alias, not the original
                out = out.view_as(out)
            self._mark(out)
            return out
        if name == "to" or name in FACTORIES:
            if self._names_device(args[1:] if name == "to" else args, kwargs):
                if out is args[0] and self.host(out):  # .to(device) of a CPU tensor on a CPU run: no copy
                    out = out.view_as(out)
                return out  # on the run's device
            if name in FACTORIES and self.strict and not any(isinstance(t, torch.Tensor) for t in args[:1]):
                self._mark(out)  # no global default device: a factory without a device makes a host tensor
                return out
        if name in INDEXING:
            tensors = [t for t in (args[0], *args[2:3]) if isinstance(t, torch.Tensor)]  # the tensor and values
        if not tensors or name in CROSSING:
            return out  # a factory without a device: the runner's device context puts it on the device
        big = [t for t in tensors if t.dim() > 0]
        flags = [self.host(t) for t in (big or tensors)]
        if big and any(flags) and not all(flags):
            kinds = ", ".join(f"{'host' if h else 'device'} {list(t.shape)}" for t, h in zip(big, flags, strict=True))
            self.problems.append(f"{name} mixes host and device tensors ({kinds}) at {_where()}")
        if all(flags):
            self._mark(out)
        return out

