"""Where each cluster's data comes from: the mass Σ_j γ_{j;k} of every cluster k per true concept, class
and feature style (what FedRC's Figure 3 plots), one JSON line per round in ``clusters.jsonl``.

A record holds, for each grouping, ``mass[k][g]`` = Σ over training samples j of group g of γ_{j;k}
(the sample's current weight on cluster k) and the group names. Dividing a column by its sum gives the
share of group g's data assigned to cluster k (FedRC Fig. 3); dividing a row gives cluster k's makeup. The
record itself is built by the method's cluster state (:meth:`fedcluster.tiers.cluster_state.ClusterState.record`);
here are the groups of every training sample.
"""

from __future__ import annotations

import numpy as np

from fedcluster.data.federation import Federation


def sample_groups(fed: Federation) -> dict[str, tuple[np.ndarray, list[str]]]:
    """Group id of every training sample and the group names, per grouping (concept, class, style)."""
    owner = fed.train.owner()
    concept = fed.sample_concept if fed.sample_concept is not None else fed.true_cluster[owner]
    n_concepts = int(max(concept.max(initial=0) + 1, fed.num_concepts))
    out = {"concept": (np.asarray(concept, dtype=np.int64), [str(c) for c in range(n_concepts)])}
    if fed.task == "classification":
        out["class"] = (fed.train.y.cpu().numpy().astype(np.int64), [str(c) for c in range(fed.num_classes)])
    style = np.asarray(fed.style, dtype=np.int64)[owner]
    if (style >= 0).any():
        names = list(fed.style_names) or [str(s) for s in range(int(style.max()) + 1)]
        names = names + ["none"]  # clients without a style (-1) form the last group
        out["style"] = (np.where(style < 0, len(names) - 1, style), names)
    return out
