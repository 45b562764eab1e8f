"""What a user reads (README, the documentation site, `fedcluster list`, the reproduction catalogue) speaks to
a user: no references to development documents or issues, papers named by their method and cited in full."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fedcluster.app.describe import describe_name, run_keys_help
from fedcluster.catalog import names as catalog
from fedcluster.catalog import papers
from fedcluster.catalog.param_tables import PARAMS
from fedcluster.reproduce.experiments import EXPERIMENTS

ROOT = Path(__file__).resolve().parents[2]
INTERNAL = re.compile(r"CATALOG|\.\./shared|\bissue \d|\bS[1-4]\b(?![-_])")
# pages `fedcluster reproduce` writes from the experiments' specs (checked through the specs below)
GENERATED = {ROOT / "docs" / "REPRODUCTION.md", *(ROOT / "docs" / "reproduction").glob("*.md")}


def _pages() -> list[Path]:
    """README, the site's pages, and what scripts and config files print or say at their top."""
    return [ROOT / "README.md", *(p for p in sorted((ROOT / "docs").rglob("*.md")) if p not in GENERATED),
            *sorted((ROOT / "configs").glob("*.yaml")), *sorted((ROOT / "benchmarks").rglob("*.py"))]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_have_no_internal_references(page: Path) -> None:
    hits = [line for line in page.read_text(encoding="utf-8").splitlines() if INTERNAL.search(line)]
    assert not hits, hits


DEVELOPMENT_LOG = re.compile(r"\bthis VM\b|\bload average\b|\bthe\s+the\b", re.IGNORECASE)


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_carry_no_development_log(page: Path) -> None:
    """Measurements say what was measured on what hardware, not the state of the machine of the day."""
    assert DEVELOPMENT_LOG.findall(page.read_text(encoding="utf-8")) == []


def test_list_texts_have_no_internal_references() -> None:
    texts = [desc for table in (catalog.ALGORITHMS, catalog.DATASETS, catalog.SCENARIOS, catalog.MODELS)
             for _, desc in table.values()]
    for kind in PARAMS.values():
        for info in kind.values():
            if info is not None:
                texts += [info[0] or "", *(row[3] for row in info[1])]
    texts.append(run_keys_help())
    assert [t for t in texts if INTERNAL.search(t)] == []


def test_reproduction_specs_have_no_internal_references() -> None:
    for exp in EXPERIMENTS.values():
        text = " ".join(str(v) for v in vars(exp).values())
        assert not INTERNAL.search(text), (exp.name, INTERNAL.findall(text))


def test_list_cites_the_papers_it_names() -> None:
    text = describe_name("hcfl-plus")
    assert "HCFL paper" in text and text.endswith(f"HCFL paper: {papers.PAPERS['HCFL paper']}")
    assert f"ifca: {papers.paper_of('ifca')}" in describe_name("ifca") and "Ghosh" in papers.paper_of("ifca")
    rotation = describe_name("rotation")  # a scenario: the papers its text names, nothing else
    assert papers.PAPERS["CFL-GP paper"] in rotation and papers.PAPERS["FedMD paper"] in rotation
    assert "papers:" not in describe_name("logistic")


def test_every_registered_paper_method_has_a_citation() -> None:
    for name in catalog.ALGORITHMS:
        assert papers.paper_of(name) is not None or name in ("oracle",), name


def test_api_reference_docstrings_have_no_internal_references() -> None:
    """The modules docs/reference/api.md renders."""
    import inspect

    from fedcluster import errors
    from fedcluster.app import api
    from fedcluster.catalog import registry
    from fedcluster.config import run_config as config

    texts = []
    for module in (api, errors, registry, papers):
        texts.append(inspect.getdoc(module) or "")
        texts += [inspect.getdoc(obj) or "" for _, obj in inspect.getmembers(module)
                  if getattr(obj, "__module__", None) == module.__name__]
    texts.append(inspect.getdoc(config.RunConfig) or "")
    assert [t for t in texts if INTERNAL.search(t)] == []
