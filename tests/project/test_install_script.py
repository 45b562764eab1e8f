"""scripts/install.sh's choice of PyTorch build (scripts/torch-choice.sh), with fake nvidia-smi, lspci, a fake
/proc/driver/nvidia and a fake python whose `pip index versions` says what the configured index serves."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _tool(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


def _choose(tmp_path: Path, *, smi: str | None = None, lspci: str = "", proc_gpu: bool = False,
            served: str = "2.13.0, 2.12.0", cpu_index: str | None = "2.13.0+cpu, 2.12.0+cpu",
            **env: str) -> tuple[int, str, str]:
    """Runs torch_pip_args 2.13.0 on a machine described by the arguments; (exit status, stdout, stderr).
    served: what pip's configured index lists; cpu_index: what PyTorch's CPU index lists (None: unreachable)."""
    bin_dir, proc = tmp_path / "bin", tmp_path / "proc"
    bin_dir.mkdir(exist_ok=True)
    (proc / "gpus").mkdir(parents=True, exist_ok=True)
    if proc_gpu:
        (proc / "gpus" / "0000:01:00.0").mkdir(exist_ok=True)
    # a real nvidia-smi on a GPU machine is shadowed: without a GPU the fake one fails as the real one does
    _tool(bin_dir, "nvidia-smi", f"echo '{smi}'\n" if smi else "echo 'NVIDIA-SMI has failed' >&2; exit 9\n")
    _tool(bin_dir, "lspci", f"echo '{lspci}'\n")
    probe = f"-m pip index versions torch --disable-pip-version-check --index-url {CPU_INDEX} --retries 0 --timeout 15"
    answer = (f"echo 'torch (2.13.0)'; echo 'Available versions: {cpu_index}'" if cpu_index is not None
              else "echo 'ERROR: No matching distribution found for torch' >&2; exit 1")
    _tool(bin_dir, "fakepython", f'if [ "$*" = "{probe}" ]; then {answer}; exit; fi\n'
                                 '[ "$*" = "-m pip index versions torch --disable-pip-version-check" ] || exit 1\n'
                                 f"echo 'torch (2.13.0)'\necho 'Available versions: {served}'\n")
    res = subprocess.run(["bash", "-c", '. scripts/torch-choice.sh && torch_pip_args 2.13.0 "$1"', "_",
                          str(bin_dir / "fakepython")], cwd=ROOT, capture_output=True, text=True, timeout=30,
                         env={"PATH": f"{bin_dir}:/usr/bin:/bin", "FEDCLUSTER_NVIDIA_PROC": str(proc), **env})
    return res.returncode, res.stdout.strip(), res.stderr.strip()


def test_no_gpu_takes_the_cpu_build_from_pytorchs_cpu_index(tmp_path: Path) -> None:
    rc, args, said = _choose(tmp_path)
    assert rc == 0 and args == f"--index-url {CPU_INDEX} torch==2.13.0"
    assert "no NVIDIA GPU" in said and "CPU build" in said and "FEDCLUSTER_TORCH_BUILD=cuda" in said


def test_no_gpu_takes_the_cpu_wheel_the_configured_index_already_serves(tmp_path: Path) -> None:
    """Offline-friendly: a local mirror or wheel folder serving torch==X+cpu is used, nothing else is asked."""
    rc, args, said = _choose(tmp_path, served="2.15.0, 2.13.0+cpu, 2.13.0")
    assert rc == 0 and args == "torch==2.13.0+cpu" and "configured index" in said
    rc, args, _ = _choose(tmp_path, served="2.13.0, 2.12.0+cpu")  # another version's CPU wheel does not count
    assert args == f"--index-url {CPU_INDEX} torch==2.13.0"


def test_an_unreachable_cpu_index_falls_back_to_the_configured_index_in_one_line(tmp_path: Path) -> None:
    """A machine that reaches only PyPI (or a company mirror): say so once and take the configured index's build."""
    rc, args, said = _choose(tmp_path, cpu_index=None)
    assert rc == 0 and args == "torch==2.13.0"
    assert said.count("\n") == 0 and "cannot be reached" in said and CPU_INDEX in said
    assert "FEDCLUSTER_TORCH_INDEX" in said
    rc, args, said = _choose(tmp_path, cpu_index="2.12.0+cpu")  # reachable, but without this version
    assert args == "torch==2.13.0" and "cannot be reached (or lacks torch==2.13.0)" in said


def test_the_cpu_index_probe_asks_a_real_pip_once_and_fails_fast_offline(tmp_path: Path) -> None:
    """The real probe through a real pip, with every index behind a proxy that refuses connections: no network,
    no pip retries (a few seconds), and the fallback's one line."""
    import sys
    import time

    config = tmp_path / "pip.conf"
    config.write_text("[global]\n")  # none of this machine's local wheel folders or mirrors
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PIP_CONFIG_FILE": str(config),
           "PIP_PROXY": "http://127.0.0.1:9", "PIP_RETRIES": "0", "PIP_TIMEOUT": "5",
           "FEDCLUSTER_TORCH_BUILD": "cpu"}
    start = time.monotonic()
    res = subprocess.run(["bash", "-c", '. scripts/torch-choice.sh && torch_pip_args 2.13.0 "$1"', "_",
                          sys.executable], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0 and res.stdout.strip() == "torch==2.13.0", res.stderr
    assert res.stderr.strip().count("\n") == 0 and "cannot be reached" in res.stderr
    assert time.monotonic() - start < 60


@pytest.mark.parametrize(("machine", "seen"), [
    ({"smi": "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1234)"}, "nvidia-smi"),
    ({"proc_gpu": True}, "gpus"),
    ({"lspci": "01:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)"}, "lspci"),
])
def test_an_nvidia_gpu_takes_the_cuda_build(tmp_path: Path, machine: dict, seen: str) -> None:
    rc, args, said = _choose(tmp_path, served="2.13.0+cpu, 2.13.0", **machine)
    assert rc == 0 and args == "torch==2.13.0"
    assert "NVIDIA GPU was found" in said and seen in said and "FEDCLUSTER_TORCH_BUILD=cpu" in said


def test_other_vendors_display_controllers_are_not_a_gpu_for_cuda(tmp_path: Path) -> None:
    rc, args, _ = _choose(tmp_path, lspci="00:02.0 VGA compatible controller: Intel Corporation UHD Graphics 630")
    assert rc == 0 and args.endswith(f"{CPU_INDEX} torch==2.13.0")


def test_the_environment_overrides_the_detection(tmp_path: Path) -> None:
    gpu = "GPU 0: NVIDIA A100"
    assert _choose(tmp_path, smi=gpu, FEDCLUSTER_TORCH_BUILD="cpu")[1] == f"--index-url {CPU_INDEX} torch==2.13.0"
    rc, args, said = _choose(tmp_path, FEDCLUSTER_TORCH_BUILD="cuda")
    assert args == "torch==2.13.0" and "FEDCLUSTER_TORCH_BUILD=cuda" in said
    url = "https://download.pytorch.org/whl/cu126"
    assert _choose(tmp_path, FEDCLUSTER_TORCH_INDEX=url)[1] == f"--index-url {url} torch==2.13.0"
    rc, args, said = _choose(tmp_path, FEDCLUSTER_TORCH_BUILD="gpu")
    assert rc == 2 and args == "" and "auto, cpu or cuda" in said and said.count("\n") == 0


def test_install_sh_installs_what_the_choice_says() -> None:
    text = (ROOT / "scripts" / "install.sh").read_text()
    assert ". scripts/torch-choice.sh" in text and 'torch_pip_args "$TORCH_VERSION" "$PY"' in text
    assert '"${PIP[@]}" "${torch_args[@]}"' in text
