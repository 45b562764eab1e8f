"""Every file generated from the registrations, written in one pass:
``PYTHONPATH=src python -m fedcluster.app.regenerate`` (``--check`` writes nothing, names the stale files and exits 1).

A registration, ``ALGORITHMS.register(name, description, params, paper=...)`` and the like, is the one declaration
of a name. From the registrations come fedcluster/catalog/names.py (what is registered where, with its description
and paper, so that `fedcluster list` imports no implementation), fedcluster/catalog/param_tables.py (the parameter
tables of `fedcluster list NAME`), docs/reference/configuration.md and the generated tables of docs/methods.md. Only the
modules that register something are imported, found by reading the package's source, so no optional extra is
needed; tests/app/test_discoverability.py fails until the files are current.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import sys
from pathlib import Path

import fedcluster
from fedcluster.app.describe import ParamsInfo, params_info

PACKAGE = Path(fedcluster.__file__).resolve().parent
REPO = PACKAGE.parents[1]  # the checkout (src layout); its docs/ is regenerated when present
REGISTRY_NAMES = ("ALGORITHMS", "DATASETS", "SCENARIOS", "MODELS")
REGISTERING = ("register", "add")  # the Registry methods that register a name
COMMAND = "PYTHONPATH=src python -m fedcluster.app.regenerate"
Names = dict[str, dict[str, tuple[str, str]]]  # registry key -> name -> (module, description)
Papers = dict[str, dict[str, str]]  # registry kind -> name -> declared paper


def module_name(path: Path) -> str:
    return ".".join(["fedcluster", *path.relative_to(PACKAGE).with_suffix("").parts]).removesuffix(".__init__")


def registers(source: str) -> bool:
    """Whether the module calls ``register``/``add`` on a registry of :mod:`fedcluster.catalog.registry`."""
    tree = ast.parse(source)
    imported = {alias.asname or alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "fedcluster.catalog.registry"
                for alias in node.names if alias.name in REGISTRY_NAMES}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in REGISTERING:
            target = node.func.value
            if (isinstance(target, ast.Name) and target.id in imported) or (
                    isinstance(target, ast.Attribute) and target.attr in REGISTRY_NAMES):
                return True
    return False


def registering_modules() -> list[str]:
    """The package's modules that register a name, read from their source (nothing is imported)."""
    return [module_name(path) for path in sorted(PACKAGE.rglob("*.py"))
            if path.parent.name != "catalog" and registers(path.read_text(encoding="utf-8"))]


def import_registering_modules() -> None:
    for name in registering_modules():
        importlib.import_module(name)


def unread_registrations() -> list[str]:
    """Names registered by a module the source reading missed: imports every other module of the package
    (those that need a missing optional extra are passed over) and returns what they added."""
    from fedcluster.catalog.registry import REGISTRIES

    before = {k: {e.name for e in r.registered()} for k, r in REGISTRIES.items()}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        if name.endswith("__main__"):
            continue
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as err:
            if (err.name or "fedcluster").split(".")[0] == "fedcluster":
                raise
    return [f"{r.kind} {e.name} ({getattr(e.obj, '__module__', '?')})"
            for k, r in REGISTRIES.items() for e in r.registered() if e.name not in before[k]]


def live_names() -> Names:
    """registry key -> name -> (the module that registers it, its description), from the registrations made."""
    from fedcluster.catalog.registry import REGISTRIES

    return {key: {e.name: (getattr(e.obj, "__module__", None) or type(e.obj).__module__, e.description)
                  for e in registry.registered()}
            for key, registry in REGISTRIES.items()}


def live_papers() -> Papers:
    """registry kind -> name -> the paper its registration declares (names that declare none left out)."""
    from fedcluster.catalog.registry import REGISTRIES

    return {r.kind: {e.name: e.paper for e in r.registered() if e.paper is not None} for r in REGISTRIES.values()}


def live_params(names: Names) -> dict[str, dict[str, ParamsInfo]]:
    """kind -> name -> its :func:`~fedcluster.app.describe.params_info`, for ``names`` (each looked up, so its
    module is imported)."""
    from fedcluster.catalog.registry import REGISTRIES

    return {registry.kind: {name: params_info(registry.get(name).params) for name in sorted(names[key])}
            for key, registry in REGISTRIES.items()}


def names_catalog_source(names: Names, papers: Papers) -> str:
    """The text of fedcluster/catalog/names.py."""
    lines = [f'"""Generated by `{COMMAND}` from the registrations: do not edit.',
             "What is registered where, readable without importing any implementation (so `fedcluster list` starts",
             "at once): name -> (module that registers it, one-line description), and the paper each registration",
             "declares. Each registration is declared once, by the ``register``/``add`` call of its module;",
             'tests/app/test_discoverability.py fails until this file matches them."""',
             "# ruff: noqa: E501",
             "",
             "from __future__ import annotations",
             ""]
    for key, entries in names.items():
        lines.append(f"{key.upper()}: dict[str, tuple[str, str]] = {{")
        lines += [f"    {name!r}: ({module!r}, {description!r})," for name, (module, description) in entries.items()]
        lines.append("}")
    lines.append("PAPER_OF: dict[str, dict[str, str]] = {")
    for kind, declared in papers.items():
        if not declared:
            lines.append(f"    {kind!r}: {{}},")
            continue
        lines.append(f"    {kind!r}: {{")
        lines += [f"        {name!r}: {paper!r}," for name, paper in sorted(declared.items())]
        lines.append("    },")
    lines.append("}")
    return "\n".join([*lines, ""])


def params_catalog_source(params: dict[str, dict[str, ParamsInfo]]) -> str:
    """The text of fedcluster/catalog/param_tables.py."""
    lines = [f'"""Generated by `{COMMAND}` from the registered hyper-parameter',
             "dataclasses: do not edit. What `fedcluster list NAME` prints for a built-in name without importing its",
             "module; tests/app/test_discoverability.py fails until this file matches the code.",
             '"""',
             "# ruff: noqa: E501",
             "",
             "from __future__ import annotations",
             "",
             "PARAMS: dict[str, dict[str, tuple[str | None, tuple[tuple[str, str, str, str], ...]] | None]] = {"]
    for kind, entries in params.items():
        lines.append(f"    {kind!r}: {{")
        for name, info in entries.items():
            if info is None:
                lines.append(f"        {name!r}: None,")
                continue
            doc, rows = info
            lines.append(f"        {name!r}: ({doc!r}, (")
            lines += [f"            {row!r}," for row in rows]
            lines.append("        )),")
        lines.append("    },")
    return "\n".join([*lines, "}", ""])


def generated_files() -> dict[Path, str]:
    """Every generated file -> its current text, from the registrations (call after they are made)."""
    from fedcluster.app import methods_page, reference_page

    names, papers = live_names(), live_papers()
    params = live_params(names)
    files = {PACKAGE / "catalog" / "names.py": names_catalog_source(names, papers),
             PACKAGE / "catalog" / "param_tables.py": params_catalog_source(params)}
    if (REPO / "docs").is_dir() and (REPO / "pyproject.toml").is_file():
        files[REPO / reference_page.PAGE] = reference_page.configuration_reference(names, params)
        page = REPO / methods_page.PAGE
        files[page] = methods_page.fill(page.read_text(encoding="utf-8"), names["algorithms"], papers["algorithm"])
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fedcluster.app.regenerate", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; name the stale files, exit 1 if any")
    args = parser.parse_args(argv)
    import_registering_modules()
    if args.check and (unread := unread_registrations()):
        print("registered where the source reading cannot see it (call a registry's register or add by name): "
              + ", ".join(unread))
        return 1
    files = generated_files()
    stale = [path for path, text in files.items() if not path.is_file() or path.read_text(encoding="utf-8") != text]
    for path in stale:
        shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        if args.check:
            print(f"{shown} is out of date: regenerate with `{COMMAND}`")
        else:
            path.write_text(files[path], encoding="utf-8")
            print(f"wrote {shown}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
