"""The package as pip sees it: one version, declared imports, and a wheel that carries the license, the configs
and py.typed (built in-process from a copy of the tree, no network)."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

import fedcluster
from fedcluster.app.cli import main

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_version_is_written_once() -> None:
    """pyproject.toml reads fedcluster._version.__version__ (a literal read without importing the package)."""
    assert "version" not in PROJECT["project"] and "version" in PROJECT["project"]["dynamic"]
    assert PROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "fedcluster._version.__version__"}
    init = ast.parse((ROOT / "src" / "fedcluster" / "_version.py").read_text())
    literal = [n.value.value for n in init.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
               and [getattr(t, "id", None) for t in n.targets] == ["__version__"]]
    assert literal == [fedcluster.__version__] and re.fullmatch(r"\d+\.\d+\.\d+(\S*)", fedcluster.__version__)


def test_version_flag_prints_it(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"fedcluster {fedcluster.__version__}"


def test_every_third_party_import_is_declared() -> None:
    """What src/ imports is a dependency or in an extra, not something that arrives through another package."""
    declared = {_canonical(re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0])
                for r in [*PROJECT["project"]["dependencies"],
                          *(r for extra in PROJECT["project"]["optional-dependencies"].values() for r in extra)]}
    imported = set()
    for path in (ROOT / "src" / "fedcluster").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    imported -= {*sys.stdlib_module_names, "fedcluster"}
    installed = packages_distributions()
    assert {"tomli_w", "torch", "yaml"} <= imported
    undeclared = {m: installed[m] for m in imported if m in installed
                  and not {_canonical(d) for d in installed[m]} & declared}
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"


def test_the_wheel_carries_license_configs_and_types(tmp_path: Path) -> None:
    setuptools = pytest.importorskip("setuptools")
    if tuple(int(x) for x in setuptools.__version__.split(".")[:2]) < (77, 0):
        pytest.skip(f"setuptools {setuptools.__version__} predates license expressions (the dev extra needs 77)")
    tree = tmp_path / "tree"
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tree / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "configs", tree / "configs", ignore=ignore)
    shutil.copytree(ROOT / "src", tree / "src", symlinks=True, ignore=ignore)
    build = "import setuptools.build_meta as b, sys; print(b.build_wheel(sys.argv[1]))"
    res = subprocess.run([sys.executable, "-c", build, str(tmp_path / "dist")], cwd=tree, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    wheel = zipfile.ZipFile(tmp_path / "dist" / res.stdout.strip().splitlines()[-1])
    names = set(wheel.namelist())
    info = f"fedcluster-{fedcluster.__version__}.dist-info"
    metadata = wheel.read(f"{info}/METADATA").decode()
    assert f"\nVersion: {fedcluster.__version__}\n" in metadata
    assert "\nLicense-Expression: Apache-2.0\n" in metadata and f"{info}/licenses/LICENSE" in names
    assert 'Requires-Dist: tomli-w>=1.0; extra == "flower"' in metadata
    assert "fedcluster/py.typed" in names
    shipped = {f"fedcluster/configs/{p.name}" for p in (ROOT / "configs").glob("*.yaml")}
    assert "fedcluster/configs/demo.yaml" in shipped and shipped <= names
