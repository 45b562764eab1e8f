"""Where a run computes: ``device=auto|cpu|cuda``, ``precision=fp32|bf16`` and the deterministic settings.

The device is a property of the run, owned by the runner: the federation is moved there once, the models,
batches, E-steps, evaluation and aggregation stay there, and only metrics come back. No global default device
is set: a tensor a method builds (from NumPy, or a factory) names the device of the data and models it is
combined with, so a method is right when called directly too (a benchmark, a library user, a test).

Two modes on CUDA (the CPU is always bitwise repeatable: same seed, same ``rounds.csv``):

* fast (``deterministic=false``, the default): PyTorch's own defaults plus cuDNN autotuning — cuDNN times its
  convolution algorithms once per shape and keeps the fastest (vectorised units run as grouped convolutions,
  where the heuristic choice is often slow), convolutions may use TF32 (PyTorch's default), fp32 matmuls do not
  (PyTorch's default too). Repeated runs agree to float tolerance, not bit for bit.
* ``deterministic=true``: deterministic kernels (``torch.use_deterministic_algorithms``), cuDNN autotuning off,
  TF32 off everywhere: the same seed on the same device gives the same ``rounds.csv``, and CPU and CUDA agree to
  float tolerance. Cost: slower deterministic kernels and heuristic convolution algorithms.

``CUBLAS_WORKSPACE_CONFIG`` (needed by deterministic cuBLAS) is read once, when cuBLAS starts: ``import
fedcluster`` sets it (``:4096:8``, unless the user set it), before any CUDA work of the process.
"""

from __future__ import annotations

import os

import torch

from fedcluster.errors import ConfigError


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA when PyTorch sees a GPU, else the CPU; ``cuda`` without one is a user error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            build = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
            raise ConfigError(f"device={name} but PyTorch sees no CUDA GPU (torch {torch.__version__}, {build}); "
                              "use device=cpu or device=auto")
        return torch.device(name)
    if name == "cpu":
        return torch.device("cpu")
    raise ConfigError(f"device={name!r} is not valid; choose one of: auto, cpu, cuda")


def check_client_momentum(engine: str, client_momentum: str) -> None:
    """The pool engines' workers return models only: they cannot keep the clients' momentum buffers."""
    if client_momentum == "keep" and engine in ("pool", "pool-vectorized"):
        raise ConfigError(f"client_momentum=keep is not offered by engine={engine}; use engine=dense, vectorized "
                          "or sequential")


def check_channels_last(engine: str, channels_last: bool) -> None:
    """Channels-last training is offered by the per-unit paths, which train a real module (engine.training.kernels
    .train_sequential); the vectorised and dense paths have no such layout."""
    if channels_last and engine not in ("sequential", "pool"):
        raise ConfigError(f"channels_last=true is offered by engine=sequential or pool (this run's engine is "
                          f"{engine}); choose one of them, or channels_last=false")


def check_engine(engine: str, device: torch.device, precision: str) -> None:
    """Engines that exist only on the CPU, and the dense path's fp32-only maths, as one-line errors."""
    if device.type != "cpu" and engine in ("dense", "pool", "pool-vectorized"):
        raise ConfigError(f"engine={engine} runs on the CPU only; with device={device} use engine=vectorized, "
                          "sequential or auto")
    if engine == "dense" and precision != "fp32":
        raise ConfigError("engine=dense computes in fp32; use precision=fp32, or engine=vectorized (or auto) "
                          "for bf16")


CUBLAS_SETTING = ":4096:8"  # deterministic cuBLAS workspaces (PyTorch's reproducibility notes)


def set_cublas_workspace() -> None:
    """``CUBLAS_WORKSPACE_CONFIG`` for deterministic cuBLAS, unless the user chose one; called on ``import
    fedcluster``, i.e. before any CUDA work of a process that runs fedcluster."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_SETTING)


def modes(deterministic: bool) -> dict[str, bool]:
    """The CUDA settings of a mode (see the module docstring)."""
    return {"cudnn.benchmark": not deterministic, "cudnn.deterministic": deterministic,
            "cudnn.allow_tf32": not deterministic, "matmul.allow_tf32": False,
            "deterministic_algorithms": deterministic}


def configure(device: torch.device, deterministic: bool) -> None:
    """Process-wide numerics for a run on ``device`` (nothing changes for CPU runs)."""
    if device.type != "cuda":
        return
    set_cublas_workspace()  # a no-op after ``import fedcluster``; kept for code that imported the engine alone
    m = modes(deterministic)
    torch.backends.cudnn.benchmark = m["cudnn.benchmark"]
    torch.backends.cudnn.deterministic = m["cudnn.deterministic"]
    torch.backends.cudnn.allow_tf32 = m["cudnn.allow_tf32"]
    torch.backends.cuda.matmul.allow_tf32 = m["matmul.allow_tf32"]
    torch.use_deterministic_algorithms(m["deterministic_algorithms"], warn_only=True)


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
