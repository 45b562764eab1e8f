"""The papers fedcluster implements, with their full citations (nothing heavy imported: `fedcluster list` prints them).

User-facing text names a paper by its method ("the FedRC paper Table 1"); :func:`cited_in` finds the names a
text uses so that `fedcluster list NAME` can print their citations, and the documentation's method catalogue
is built from the same table. Every other paper is cited by the registration of the method it describes
(``ALGORITHMS.register(..., paper="Authors. Title. Venue, year.")``), which also names the method that comes
from one of these four (``paper="FedRC paper"``).
"""

from __future__ import annotations

import re

from fedcluster.catalog.registry import ALGORITHMS

# name in text -> full citation. The four papers whose methods and experiments fedcluster reproduces first.
PAPERS: dict[str, str] = {
    "HCFL paper": "Yongxin Guo, Xiaoying Tang, Tao Lin. Enhancing Clustered Federated Learning: Integration of "
                  "Strategies and Improved Methodologies. International Conference on Learning Representations "
                  "(ICLR), 2025.",
    "FedRC paper": "Yongxin Guo, Xiaoying Tang, Tao Lin. FedRC: Tackling Diverse Distribution Shifts Challenge in "
                   "Federated Learning by Robust Clustering. International Conference on Machine Learning (ICML), "
                   "PMLR 235, 2024.",
    "CFL-GP paper": "Heasung Kim, Hyeji Kim, Gustavo de Veciana. Clustered Federated Learning via Gradient-based "
                    "Partitioning. International Conference on Machine Learning (ICML), PMLR 235, 2024.",
    "FedMD paper": "Lili Su, Jiaming Xu, Pengkun Yang. Global Convergence of Federated Learning for Mixed "
                   "Regression. IEEE Transactions on Information Theory 70, 2024, doi:10.1109/TIT.2024.3425758 "
                   "(an earlier version at NeurIPS 2022).",
}

_NAMES = re.compile("|".join(re.escape(n) for n in PAPERS))


def cited_in(text: str) -> list[str]:
    """The names of :data:`PAPERS` that ``text`` uses, in order of first use."""
    return list(dict.fromkeys(_NAMES.findall(text)))


def citation(paper: str | None) -> str | None:
    """The full citation of a declared paper: a name of :data:`PAPERS` or a citation written out."""
    return PAPERS.get(paper, paper) if paper is not None else None


def paper_of(algorithm: str) -> str | None:
    """The full citation of the paper a registered algorithm comes from (None when fedcluster's own)."""
    return citation(ALGORITHMS.paper(algorithm))


def references(text: str, algorithm: str | None = None) -> str:
    """Lines citing the algorithm's own paper and every paper ``text`` names (empty when there is none)."""
    lines = [f"  {n}: {PAPERS[n]}" for n in cited_in(text)]
    declared = ALGORITHMS.paper(algorithm) if algorithm else None
    own = citation(declared)
    if own is not None and f"  {declared}: {own}" not in lines:
        lines.insert(0, f"  {algorithm}: {own}")
    return "\n".join(["papers:", *lines]) if lines else ""
