"""The generated tables of the documentation's method catalogue (docs/methods.md): the four papers with the methods
that come from each, and every registered method with its description and the paper its registration declares.

Each table stands between ``<!-- generated: NAME -->`` and ``<!-- end generated: NAME -->``; the prose around them is
written by hand. ``PYTHONPATH=src python -m fedcluster.app.regenerate`` rewrites them with the other generated files.
"""

from __future__ import annotations

import re
from pathlib import Path

from fedcluster.app.reference_page import table_cell
from fedcluster.catalog.papers import PAPERS

PAGE = Path("docs") / "methods.md"


def four_papers(papers: dict[str, str]) -> list[str]:
    """The four papers, cited in full, with the registered methods that declare each."""
    rows = ["| name used here | citation | registered methods |", "|---|---|---|"]
    for name, citation in PAPERS.items():
        methods = ", ".join(f"`{m}`" for m, paper in sorted(papers.items()) if paper == name)
        rows.append(f"| {name} | {table_cell(citation)} | {methods} |")
    return rows


def every_method(names: dict[str, tuple[str, str]], papers: dict[str, str]) -> list[str]:
    """One row per registered algorithm: its description and its paper (a full citation unless one of the four)."""
    rows = ["| method | what it does | paper |", "|---|---|---|"]
    for name, (_, description) in sorted(names.items()):
        paper = papers.get(name)
        source = "fedcluster's own" if paper is None else f"the {paper}" if paper in PAPERS else paper
        rows.append(f"| `{name}` | {table_cell(description)} | {table_cell(source)} |")
    return rows


def fill(page: str, names: dict[str, tuple[str, str]], papers: dict[str, str]) -> str:
    """``page`` with its generated tables rewritten from the algorithms' ``names`` and declared ``papers``."""
    for block, rows in (("four-papers", four_papers(papers)), ("every-method", every_method(names, papers))):
        pattern = re.compile(rf"(<!-- generated: {block} -->\n).*?(<!-- end generated: {block} -->)", re.S)
        if not pattern.search(page):
            raise ValueError(f"{PAGE} has no <!-- generated: {block} --> ... <!-- end generated: {block} --> block")
        def filled(m: re.Match[str], rows: list[str] = rows) -> str:
            return m.group(1) + "\n".join(rows) + "\n" + m.group(2)

        page = pattern.sub(filled, page, count=1)
    return page
