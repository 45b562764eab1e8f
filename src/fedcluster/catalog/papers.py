"""The papers fedcluster implements, with their full citations (no imports: `fedcluster list` prints them).

User-facing text names a paper by its method ("the FedRC paper Table 1"); :func:`cited_in` finds the names a
text uses so that `fedcluster list NAME` can print their citations, and the documentation's method catalogue
is built from the same table.
"""

from __future__ import annotations

import re

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

# The baselines' own papers, by registered name (as the papers above cite them).
BASELINES: dict[str, str] = {
    "fedavg": "H. Brendan McMahan, Eider Moore, Daniel Ramage, Seth Hampson, Blaise Agüera y Arcas. "
              "Communication-Efficient Learning of Deep Networks from Decentralized Data. AISTATS, PMLR 54, 2017.",
    "fedprox": "Tian Li, Anit Kumar Sahu, Manzil Zaheer, Maziar Sanjabi, Ameet Talwalkar, Virginia Smith. "
               "Federated Optimization in Heterogeneous Networks. Proceedings of Machine Learning and Systems "
               "(MLSys) 2, 2020.",
    "ifca": "Avishek Ghosh, Jichan Chung, Dong Yin, Kannan Ramchandran. An Efficient Framework for Clustered "
            "Federated Learning. Advances in Neural Information Processing Systems (NeurIPS) 33, 2020.",
    "fesem": "Guodong Long, Ming Xie, Tao Shen, Tianyi Zhou, Xianzhi Wang, Jing Jiang. Multi-center Federated "
             "Learning: Clients Clustering for Better Personalization. World Wide Web 26(1):481–500, 2023.",
    "fedem": "Othmane Marfoq, Giovanni Neglia, Aurélien Bellet, Laetitia Kameni, Richard Vidal. Federated "
             "Multi-Task Learning under a Mixture of Distributions. Advances in Neural Information Processing "
             "Systems (NeurIPS) 34, 2021.",
    "fedsoft": "Yichen Ruan, Carlee Joe-Wong. FedSoft: Soft Clustered Federated Learning with Proximal Local "
               "Updating. Proceedings of the AAAI Conference on Artificial Intelligence 36, 2022.",
    "cfl": "Felix Sattler, Klaus-Robert Müller, Wojciech Samek. Clustered Federated Learning: Model-Agnostic "
           "Distributed Multitask Optimization Under Privacy Constraints. IEEE Transactions on Neural Networks and "
           "Learning Systems 32(8):3710–3722, 2021.",
    "icfl": "Yihan Yan, Xiaojun Tong, Shen Wang. Clustered Federated Learning in Heterogeneous Environment. IEEE "
            "Transactions on Neural Networks and Learning Systems, 2023.",
    "stocfl": "Dun Zeng, Xiangjing Hu, Shiyu Liu, Yue Yu, Qifan Wang, Zenglin Xu. Stochastic Clustered Federated "
              "Learning. arXiv:2303.00897, 2023.",
    "pacfl": "Saeed Vahidian, Mahdi Morafah, Weijia Wang, Vyacheslav Kungurtsev, Chen Chen, Mubarak Shah, Bill Lin. "
             "Efficient Distribution Similarity Identification in Clustered Federated Learning via Principal "
             "Angles between Client Data Subspaces. Proceedings of the AAAI Conference on Artificial Intelligence "
             "37, 2023.",
    "oneshot": "Avishek Ghosh, Justin Hong, Dong Yin, Kannan Ramchandran. Robust Federated Learning in a "
               "Heterogeneous Environment. arXiv:1906.06629, 2019.",
    # the personalised methods of the FedRC paper's Table 4
    "pfedme": "Canh T. Dinh, Nguyen H. Tran, Tuan Dung Nguyen. Personalized Federated Learning with Moreau "
              "Envelopes. Advances in Neural Information Processing Systems (NeurIPS) 33, 2020.",
    "apfl": "Yuyang Deng, Mohammad Mahdi Kamani, Mehrdad Mahdavi. Adaptive Personalized Federated Learning. "
            "arXiv:2003.13461, 2020.",
    # clustered-FL methods beyond the four papers' comparisons
    "flhc": "Christopher Briggs, Zhong Fan, Peter Andras. Federated Learning with Hierarchical Clustering of Local "
            "Updates to Improve Training on Non-IID Data. International Joint Conference on Neural Networks (IJCNN), "
            "2020.",
    "fedgroup": "Moming Duan, Duo Liu, Xinyuan Ji, Renping Liu, Liang Liang, Xianzhang Chen, Yujuan Tan. FedGroup: "
                "Efficient Federated Learning via Decomposed Similarity-Based Clustering. IEEE International "
                "Symposium on Parallel and Distributed Processing with Applications (ISPA), 2021 (arXiv:2010.06870).",
    "fedgwc": "Alessandro Licciardi, Davide Leo, Eros Fanì, Barbara Caputo, Marco Ciccone. Interaction-Aware "
              "Gaussian Weighting for Clustered Federated Learning. International Conference on Machine Learning "
              "(ICML), PMLR 267, 2025.",
    "clove": "Randeep Bhatia, Nikos Papadis, Murali Kodialam, TV Lakshman, Sayak Chakrabarty. CLoVE: Personalized "
             "Federated Learning through Clustering of Loss Vector Embeddings. International Conference on Machine "
             "Learning (ICML), PMLR 306, 2026 (arXiv:2506.22427).",
}

# Registered algorithms that come from one of PAPERS.
FROM_PAPER: dict[str, str] = {
    "hcfl": "HCFL paper", "hcfl-plus": "HCFL paper", "hcfl-prime": "HCFL paper",
    "fedrc": "FedRC paper", "fedrc-adaptive": "FedRC paper", "local": "FedRC paper",
    "cflgp": "CFL-GP paper",
    "fedmd": "FedMD paper",
}

_NAMES = re.compile("|".join(re.escape(n) for n in PAPERS))


def cited_in(text: str) -> list[str]:
    """The names of :data:`PAPERS` that ``text`` uses, in order of first use."""
    return list(dict.fromkeys(_NAMES.findall(text)))


def paper_of(algorithm: str) -> str | None:
    """The full citation of the paper a registered algorithm comes from (None when fedcluster's own)."""
    return PAPERS[FROM_PAPER[algorithm]] if algorithm in FROM_PAPER else BASELINES.get(algorithm)


def references(text: str, algorithm: str | None = None) -> str:
    """Lines citing the algorithm's own paper and every paper ``text`` names (empty when there is none)."""
    lines = [f"  {n}: {PAPERS[n]}" for n in cited_in(text)]
    own = paper_of(algorithm) if algorithm else None
    if own is not None and f"  {FROM_PAPER.get(algorithm, '')}: {own}" not in lines:
        lines.insert(0, f"  {algorithm}: {own}")
    return "\n".join(["papers:", *lines]) if lines else ""
