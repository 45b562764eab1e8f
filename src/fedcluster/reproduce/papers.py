"""Full citations of the papers the reproduction pages name by tag (S1 … S4), for every page's first mention."""

from __future__ import annotations

import re

CITATIONS: dict[str, str] = {
    "S1": "Y. Guo, X. Tang, T. Lin. *Enhancing Clustered Federated Learning: Integration of Strategies and Improved "
          "Methodologies* (HCFL / HCFL+). ICLR 2025. Code: github.com/LINs-lab/HCFL",
    "S2": "L. Su, J. Xu, P. Yang. *Global Convergence of Federated Learning for Mixed Regression* (FedMD). IEEE "
          "Transactions on Information Theory, 2024",
    "S3": "H. Kim, H. Kim, G. de Veciana. *Clustered Federated Learning via Gradient-based Partitioning* (CFL-GP). "
          "ICML 2024",
    "S4": "Y. Guo, X. Tang, T. Lin. *FedRC: Tackling Diverse Distribution Shifts Challenge in Federated Learning by "
          "Robust Clustering*. ICML 2024. Code: github.com/LINs-lab/FedRC",
}


def cited(*texts: str) -> list[str]:
    """The tags (in S1 … S4 order) that occur in ``texts`` as words."""
    found = set(re.findall(r"\bS[1-4]\b", " ".join(texts)))
    return [t for t in CITATIONS if t in found]


def citation_lines(*texts: str) -> list[str]:
    """Markdown bullet lines ``- **S4:** full citation`` for the tags used in ``texts``."""
    return [f"- **{t}:** {CITATIONS[t]}" for t in cited(*texts)]
