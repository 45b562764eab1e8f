"""The documentation's configuration reference (docs/reference/configuration.md), generated from the code.

Run keys come from :class:`fedcluster.config.run_config.RunConfig` with the meanings ``fedcluster run --help``
prints; the parameters of every built-in algorithm, scenario, model and data set from the registered dataclasses
(by default as :mod:`fedcluster.catalog.param_tables` holds them); the keys a resume may change from
:mod:`fedcluster.tracking.resume`. ``PYTHONPATH=src python -m fedcluster.app.regenerate`` rewrites the page with
the other generated files; tests/project/test_docs.py fails until it is current.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from fedcluster.app.describe import ParamsInfo

PAGE = Path("docs") / "reference" / "configuration.md"
KINDS = (("algorithm", "Algorithms", "algorithms"), ("scenario", "Scenarios", "scenarios"),
         ("model", "Models", "models"), ("dataset", "Data sets", "datasets"))
Names = dict[str, dict[str, tuple[str, str]]]  # registry key -> name -> (module, description)


def table_cell(text: str) -> str:
    """Prose for a table cell: one line; outside code spans, | escaped and < > as entities (not HTML tags)."""
    parts = " ".join(text.split()).split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _code(text: str) -> str:
    return "`" + " ".join(text.split()) + "`"  # MkDocs' tables keep | inside code spans


def _table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    return lines + [f"| {_code(key)} | {_code(kind)} | {_code(default)} | {table_cell(doc)} |"
                    for key, kind, default, doc in rows]


def configuration_reference(names: Names | None = None, params: dict[str, dict[str, ParamsInfo]] | None = None) -> str:
    """The whole page as Markdown, for the built-in ``names`` and their ``params`` (default: the catalog's)."""
    from fedcluster.app.describe import RUN_KEY_DOCS, field_docs, field_rows
    from fedcluster.catalog import names as catalog
    from fedcluster.catalog.param_tables import PARAMS
    from fedcluster.config.run_config import RunConfig
    from fedcluster.tracking.resume import MAY_CHANGE

    if names is None:
        names = {key: getattr(catalog, key.upper()) for _, _, key in KINDS}
    params = PARAMS if params is None else params
    docs = {**field_docs(RunConfig), **RUN_KEY_DOCS}
    run_rows = [r for r in field_rows(RunConfig, docs=docs) if not r[0].endswith("_params")]
    assert len(run_rows) == len([f for f in dataclasses.fields(RunConfig) if not f.name.endswith("_params")])
    out = ["# Configuration reference", "",
           "Generated from the code by `PYTHONPATH=src python -m fedcluster.app.regenerate`; do not edit by hand.",
           "The same keys are on the command line (`key=value`) and in YAML files (`key: value`);",
           "`fedcluster run --help` and `fedcluster list NAME` print them too. Lists are written `[a,b,c]`,",
           "`null` means none.", "", "## Run keys", "", *_table(run_rows), "",
           "`fedcluster resume RUN_DIR key=value ...` may change only "
           + ", ".join(f"`{k}`" for k in MAY_CHANGE) + "; any other key is refused.", ""]
    for kind, title, key in KINDS:
        out += [f"## {title}", "", f"Chosen with `{kind}=NAME`; parameters as `{kind}.<name>=value`."
                if kind != "dataset" else "Chosen with `dataset=NAME`.", ""]
        for name, (_, description) in sorted(names[key].items()):
            out += [f"### `{name}`", "", table_cell(description), ""]
            info = params.get(kind, {}).get(name)
            if info is None:
                out += ["No parameters.", ""] if kind != "dataset" else []
                continue
            doc, rows = info
            if doc:
                out += [table_cell(doc), ""]
            out += [*_table([(f"{kind}.{key}", *rest) for key, *rest in rows]), ""]
    out += _bounds()
    return "\n".join(out).rstrip("\n") + "\n"


def _bounds() -> list[str]:
    """The upper bounds of the size-like keys (:mod:`fedcluster.config.bounds`)."""
    from fedcluster.config.bounds import MAX_SEEDS, MAX_WAIT_SECONDS, PARAM_BOUNDS, RUN_BOUNDS

    rows = [f"| {_code(key)} | {bound:,} |" for key, bound in RUN_BOUNDS.items()]
    rows += [f"| {_code(f'<section>.{key}')} | {bound:,} |" for key, bound in sorted(PARAM_BOUNDS.items())]
    return ["## Upper bounds", "",
            "A size-like key above its bound is refused in one line before anything is allocated (for lists, "
            "every item). A parameter's bound holds in any section that has it (`algorithm.`, `scenario.`, "
            f"`model.`). `fedcluster reproduce --seeds` takes at most {MAX_SEEDS:,} seeds; "
            f"`fedcluster flower node --connect-timeout` and `flower.timeout` at most {MAX_WAIT_SECONDS:,} "
            "seconds (a week).", "", "| key | at most |", "|---|---|", *rows, ""]

