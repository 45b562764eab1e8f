"""Full citations for the reproduction pages: every paper a page names ("the FedRC paper") is cited in full."""

from __future__ import annotations

from fedcluster.catalog.papers import PAPERS, cited_in

CITATIONS = PAPERS


def cited(*texts: str) -> list[str]:
    """The paper names of :data:`fedcluster.catalog.papers.PAPERS` that ``texts`` use, in order of first use."""
    return cited_in(" ".join(texts))


def citation_lines(*texts: str) -> list[str]:
    """Markdown bullet lines ``- **FedRC paper:** full citation`` for the papers named in ``texts``."""
    return [f"- **{t}:** {CITATIONS[t]}" for t in cited(*texts)]
