"""What a newcomer uses to find their way: the light catalog behind `fedcluster list`, `list NAME`, `run --help`,
`--version`; none of them may import torch or scikit-learn."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import typing

import pytest

import fedcluster
from fedcluster.app.cli import main
from fedcluster.app.describe import RUN_KEY_DOCS, default_of, field_docs, type_name, value_text
from fedcluster.app.regenerate import live_params, registering_modules
from fedcluster.catalog import names
from fedcluster.catalog.param_tables import PARAMS
from fedcluster.catalog.registry import REGISTRIES
from fedcluster.config.run_config import RunConfig

ENV = {**os.environ}


def _python(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_generated_files_are_current_in_one_pass_without_optional_extras() -> None:
    """A fresh interpreter that imports only the modules that register something (read from the source, so no
    optional extra is needed) regenerates exactly the committed catalog, parameter tables, configuration reference
    and method tables; a registration made where the source reading cannot see it fails here too."""
    no_flower = ("import sys\nsys.modules['flwr'] = None  # as if the optional flwr were not installed\n"
                 "from fedcluster.app.regenerate import main\nsys.exit(main(['--check']))")
    proc = subprocess.run([sys.executable, "-c", no_flower], capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_regeneration_reads_exactly_the_registering_modules() -> None:
    """The source reading finds every module the catalog names, and no module that registers nothing."""
    modules = {module for r in REGISTRIES.values() for module, _ in r._declared.values()}
    assert set(registering_modules()) == modules


def test_every_name_loads_lazily_from_its_module() -> None:
    """In a fresh interpreter each catalog name is found by importing only what the catalog names."""
    out = _python(
        "import sys\n"
        "from fedcluster.catalog.registry import REGISTRIES\n"
        "assert 'torch' not in sys.modules\n"
        "from fedcluster.catalog.registry import ALGORITHMS\n"
        "ALGORITHMS.get('fedavg')\n"
        "print('fedcluster.algorithms.pacfl' in sys.modules, 'fedcluster.data.scenarios' in sys.modules)\n"
        "for r in REGISTRIES.values():\n"
        "    for n in r.names():\n"
        "        assert r.get(n).name == n\n")
    assert out.split() == ["False", "False"]


def test_static_parameter_tables_equal_the_dataclasses() -> None:
    """fedcluster/catalog/param_tables.py (what `list NAME` prints without importing the implementations) is what the
    registered dataclasses give: a parameter added, removed or changed in code fails here until regenerated."""
    live = live_params({key: getattr(names, key.upper()) for key in REGISTRIES})
    stale = sorted(f"{kind} {name}" for kind in live.keys() | PARAMS.keys()
                   for name in live.get(kind, {}).keys() | PARAMS.get(kind, {}).keys()
                   if live.get(kind, {}).get(name, "missing") != PARAMS.get(kind, {}).get(name, "missing"))
    assert not stale, (f"fedcluster/catalog/param_tables.py is out of date for {stale}: regenerate it with "
                       "`PYTHONPATH=src python -m fedcluster.app.regenerate`")


@pytest.mark.parametrize("argv", [["list"], ["list", "algorithms"], ["run", "--help"], ["scenario", "--help"],
                                  ["--version"], ["report", "--help"], ["list", "fedrc"],
                                  ["list", "mixed-regression"], ["compare", "--help"], ["demo", "--help"],
                                  ["benchmark", "--help"], ["benchmark", "--list"]])
def test_list_and_help_do_not_import_torch(argv: list[str]) -> None:
    out = _python("import sys\nfrom fedcluster.app.cli import main\n"
                  f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
                  "heavy = [m for m in ('torch', 'sklearn', 'scipy', 'numpy') if m in sys.modules]\n"
                  "sys.stdout.write('LOADED ' + str(heavy))")
    assert out.endswith("LOADED []")


def test_list_prints_every_registered_name(capsys) -> None:
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    for registry in REGISTRIES.values():
        for name, description in registry.descriptions().items():
            assert f"  {name}" in text and description in text


def test_run_help_lists_every_key_with_type_default_and_meaning(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    fields = [f for f in dataclasses.fields(RunConfig) if not f.name.endswith("_params")]
    docs = {**field_docs(RunConfig), **RUN_KEY_DOCS}
    assert all(docs.get(f.name) for f in fields), "document a new key in describe.RUN_KEY_DOCS (or a comment)"
    assert set(RUN_KEY_DOCS) <= {f.name for f in fields}, "describe.RUN_KEY_DOCS names a key that is gone"
    lines = text.splitlines()
    hints = typing.get_type_hints(RunConfig)
    for f in fields:
        i = next((i for i, ln in enumerate(lines) if ln.split()[:1] == [f.name]), None)
        assert i is not None, f"{f.name} missing from run --help"
        key, kind, default = lines[i].split()[:3]
        assert (kind, default) == (type_name(hints[f.name]), value_text(default_of(f)))
        assert docs[f.name] in lines[i] + lines[i + 1]
    assert next(ln for ln in lines if ln.split()[:1] == ["data_seed"]).split()[1:3] == ["int|null", "null"]


def test_list_name_prints_typed_parameters_with_defaults_and_docs(capsys) -> None:
    assert main(["list", "fedprox"]) == 0
    text = capsys.readouterr().out
    mu = next(ln for ln in text.splitlines() if "algorithm.mu" in ln).split()
    assert mu[:3] == ["algorithm.mu", "float", "0.01"] and "proximal" in " ".join(mu)
    assert main(["list", "mixed-regression"]) == 0  # a data set and a scenario of that name
    text = capsys.readouterr().out
    assert text.startswith("dataset mixed-regression") and "scenario mixed-regression" in text
    assert "scenario.config" in text


def test_list_unknown_name_is_one_line_exit_2() -> None:
    proc = subprocess.run([sys.executable, "-m", "fedcluster.app.cli", "list", "nonsense"], capture_output=True,
                          text=True, timeout=60, env=ENV)
    assert proc.returncode == 2 and "nonsense" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_every_registered_parameter_is_documented() -> None:
    for registry in REGISTRIES.values():
        for entry in registry:
            if entry.params is None:
                continue
            docs = field_docs(entry.params)
            undocumented = [f.name for f in dataclasses.fields(entry.params) if not docs.get(f.name)]
            assert not undocumented, (f"{registry.kind} {entry.name}: add a trailing comment to the fields "
                                      f"{undocumented} of {entry.params.__name__}")


def test_version(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"fedcluster {fedcluster.__version__}"


def test_python_dash_m_is_the_command() -> None:
    out = subprocess.run([sys.executable, "-m", "fedcluster", "--version"], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0 and out.stdout.strip() == f"fedcluster {fedcluster.__version__}"
