"""The README's commands, run as a new user would, in a fresh virtual environment (slow: ``pytest -m slow``).

The environment is made with ``--system-site-packages`` and sees the test's own environment's packages (so
PyTorch and the other dependencies already installed are used and nothing large is downloaded), then the
README's pip block is run line by line in a copy of the checkout, then every command of its other bash blocks
and its Python block in an empty folder. Covered as written: the pip block (its PyTorch line finds torch already
there), the demo, ``list``, ``--help``, ``report``, ``scenario``, ``compare``, ``reproduce --list``, ``init``,
the library block. Run shorter than written (the same command with fewer rounds, listed in ``SHORTER``): the
Fashion-MNIST runs, ``resume`` and ``sweep``. Not run: ``bash scripts/install.sh`` (it installs Debian packages
as root), the README's ``pip install fedcluster`` (no release yet, as the README says) and the two ``reproduce
s3-merge`` runs (minutes to hours; ``reproduce`` has its own tests).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()
SHORTER = {"rounds=200": "rounds=3", "rounds=100": "rounds=2", "rounds=20 ": "rounds=2 ",  # longest first
           "seed=0,1,2   # a grid": "seed=0 rounds=2   # a grid"}
NOT_RUN = ("scripts/install.sh", "source .venv", "reproduce s3-merge")


def commands(language: str) -> list[list[str]]:
    """The README's ``language`` blocks, each a list of commands (continuation lines joined, comments dropped)."""
    out = []
    for block in re.findall(rf"```{language}\n(.*?)```", README, re.S):
        lines = []
        for line in block.replace("\\\n", " ").splitlines():
            for old, new in SHORTER.items():
                line = line.replace(old, new)
            line = re.split(r"\s#\s|^#", line)[0].strip()
            if line and not any(skip in line for skip in NOT_RUN):
                lines.append(line)
        out.append(lines)
    return out


def test_every_readme_command_works_in_a_fresh_environment(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(ROOT, clone, ignore=shutil.ignore_patterns(".git", ".venv", "runs", "*.egg-info", "__pycache__",
                                                               ".pytest_cache", "build", "dist"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # this environment's packages (PyTorch, ...) seen from the new one, as a system's would be: nothing downloaded
    Path(site, "_test_parent.pth").write_text("\n".join(p for p in sys.path if p.endswith("site-packages")) + "\n")
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}
    env.pop("PYTHONPATH", None)
    blocks = commands("bash")
    pip_block = next(b for b in blocks if any(line.startswith("pip install") for line in b))
    for line in pip_block:
        done = subprocess.run(line, shell=True, cwd=clone, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{line}\n{done.stderr[-2000:]}"
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import fedcluster; print(fedcluster.__file__)"],
                           env=env, capture_output=True, text=True, check=True).stdout
    assert str(clone) in where  # the environment runs the copy it installed
    work = tmp_path / "work"
    work.mkdir()
    for block in blocks:
        if block is pip_block:
            continue
        for line in block:
            done = subprocess.run(line, shell=True, cwd=work, env=env, capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, f"{line}\n{done.stderr[-2000:]}"
    for block in re.findall(r"```python\n(.*?)```", README, re.S):
        done = subprocess.run([str(venv / "bin" / "python"), "-c", block], cwd=work, env=env, capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, f"{block}\n{done.stderr[-2000:]}"
