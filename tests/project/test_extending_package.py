"""docs/guide/extending-the-package.md, followed step by step in a copy of the package: the two files its code blocks
show are written where their titles say, the one command it names regenerates the catalog in one pass, and the new
method is listed (with its parameters and paper, without importing torch), documented and runs its own test."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide" / "extending-the-package.md"
BLOCK = re.compile(r'^```python title="([^"]+)"\n(.*?)^```$', re.M | re.S)
COMMAND = "PYTHONPATH=src python -m fedcluster.app.regenerate"


def guide_files() -> dict[str, str]:
    """Path in the checkout -> the file the guide shows for it."""
    return {path: text for path, text in BLOCK.findall(GUIDE.read_text(encoding="utf-8"))}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package and of the generated documents, with the guide's two files added."""
    root = tmp_path_factory.mktemp("checkout")
    shutil.copytree(ROOT / "src" / "fedcluster", root / "src" / "fedcluster",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "docs/methods.md", "docs/reference/configuration.md"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, root / name)
    for path, text in guide_files().items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    return root


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "FEDCLUSTER_CACHE": str(root / "cache")}
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def regenerated(checkout: Path) -> subprocess.CompletedProcess[str]:
    """The guide's command, run once in the copy."""
    return _run(checkout, "-m", "fedcluster.app.regenerate")


def test_the_guide_shows_one_method_file_one_test_and_one_command() -> None:
    assert sorted(guide_files()) == ["src/fedcluster/algorithms/soft_ifca.py", "tests/algorithms/test_soft_ifca.py"]
    assert COMMAND in GUIDE.read_text(encoding="utf-8")


def test_one_command_regenerates_the_catalog_in_one_pass(checkout: Path,
                                                        regenerated: subprocess.CompletedProcess[str]) -> None:
    first = regenerated
    assert first.returncode == 0, first.stderr
    assert sorted(first.stdout.split()[1::2]) == ["docs/methods.md", "docs/reference/configuration.md",
                                                  "src/fedcluster/catalog/names.py",
                                                  "src/fedcluster/catalog/param_tables.py"]
    again = _run(checkout, "-m", "fedcluster.app.regenerate")
    assert again.returncode == 0 and again.stdout == "", again.stdout + again.stderr
    names = (checkout / "src/fedcluster/catalog/names.py").read_text(encoding="utf-8")
    assert "'soft-ifca': ('fedcluster.algorithms.soft_ifca', 'soft IFCA:" in names
    row = next(ln for ln in (checkout / "docs/methods.md").read_text(encoding="utf-8").splitlines()
               if ln.startswith("| `soft-ifca` |"))
    assert "Ghosh" in row and "softmax" in row
    assert "### `soft-ifca`" in (checkout / "docs/reference/configuration.md").read_text(encoding="utf-8")


def test_the_new_method_is_listed_without_importing_torch(checkout: Path, regenerated: object) -> None:
    code = ("import sys\nfrom fedcluster.app.cli import main\nmain(['list', 'soft-ifca'])\n"
            "print('heavy:', [m for m in ('torch', 'sklearn') if m in sys.modules])")
    out = _run(checkout, "-c", code)
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if "algorithm.temperature" in ln)
    assert line.split()[1:3] == ["float", "0.1"]
    assert "soft-ifca: Avishek Ghosh" in out.stdout and out.stdout.rstrip().endswith("heavy: []")


def test_the_new_method_passes_its_own_test(checkout: Path, regenerated: object) -> None:
    out = _run(checkout, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q",
               "tests/algorithms/test_soft_ifca.py")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "3 passed" in out.stdout


def test_the_guide_files_are_lint_clean(checkout: Path) -> None:
    pytest.importorskip("ruff")
    out = _run(checkout, "-m", "ruff", "check", "--no-cache", *guide_files())
    assert out.returncode == 0, out.stdout + out.stderr
