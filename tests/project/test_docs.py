"""The documentation site's generated parts are current: the configuration reference is what the code says
(regenerate with `PYTHONPATH=src python -m fedcluster.app.regenerate`), the method catalogue cites every paper."""

from __future__ import annotations

from pathlib import Path

import yaml

from fedcluster.app.reference_page import PAGE, configuration_reference
from fedcluster.catalog import names as catalog
from fedcluster.catalog import papers

ROOT = Path(__file__).resolve().parents[2]


def test_configuration_reference_is_current() -> None:
    assert (ROOT / PAGE).read_text(encoding="utf-8") == configuration_reference(), (
        "docs/reference/configuration.md is stale: run `PYTHONPATH=src python -m fedcluster.app.regenerate`")


def test_configuration_reference_covers_every_name_and_key() -> None:
    page = configuration_reference()
    for table in (catalog.ALGORITHMS, catalog.SCENARIOS, catalog.MODELS, catalog.DATASETS):
        assert all(f"### `{name}`" in page for name in table)
    assert "| `test_fit` | `half|all|90-10` | `half` |" in page and "`algorithm.num_clusters`" in page


def test_method_catalogue_cites_every_paper_in_full() -> None:
    page = (ROOT / "docs" / "methods.md").read_text(encoding="utf-8")
    for citation in [*papers.PAPERS.values(), *(papers.paper_of(name) or "" for name in catalog.ALGORITHMS)]:
        assert citation in page, citation
    assert all(f"`{name}`" in page for name in catalog.ALGORITHMS)


def test_every_page_is_in_the_site_nav() -> None:
    """Pages outside the nav build but cannot be found (the reproduction pages too; their readings are included)."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8").replace("!!", ""))["nav"]

    def files(entries: list) -> set[str]:
        out: set[str] = set()
        for entry in entries:
            for value in (entry.values() if isinstance(entry, dict) else [entry]):
                out |= files(value) if isinstance(value, list) else {value}
        return out

    listed = files(nav)
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")
             if not p.name.endswith(".reading.md")}
    assert pages <= listed, pages - listed
    assert all((ROOT / "docs" / f).is_file() for f in listed)
