"""CFL-GP on small rotated clients: do the accumulated gradient profiles follow the rotations or the clients'
label histograms? (docs/fidelity.md, investigation 2.)

Runs CFL-GP (K = 4) on scikit-learn digits rotated by 0/90/180/270°, then clusters (CFL-GP paper Alg. 3 features,
k-means) the full profiles, their output-layer blocks and their other blocks, and correlates the output-layer
profile distances with the label-histogram distances.

    python benchmarks/investigations/cflgp_profile_parts.py --clients 40 --rounds 40
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common, _synthetic

import _common  # noqa: F401  (first: pins BLAS threads before numpy/torch load)
import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score

from fedcluster.algorithms.spectral import spectral_features
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.runner import Run  # internal: reads the trained algorithm's gradient profiles (run.alg)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    m = args.clients
    cfg, typed = resolve(load_raw(None, [
        "dataset=digits", "scenario=rotation", "scenario.angles=[0,90,180,270]", "scenario.group_by=angle",
        f"num_clients={m}", "model=mlp", "threads=1", "progress=false", f"out={tempfile.mkdtemp()}/run",
        "algorithm=cflgp", "algorithm.num_clusters=4", f"rounds={args.rounds}", "batch_size=10", "lr=0.1",
        "algorithm.stable_stop=false", "normalize=false", f"seed={args.seed}"]))
    run = Run(cfg, typed)
    summary = run.execute()
    alg, fed = run.alg, run.fed
    prof = alg.profiles.reshape(m, 4, -1)
    head = np.concatenate([np.full(v[0].numel(), n.startswith("head.")) for n, v in alg.models.items()])
    hist = fed.label_histogram() / fed.train.sizes[:, None]
    true = fed.true_cluster

    def ari_of(feat: np.ndarray) -> float:
        labels = KMeans(4, n_init=10, random_state=0).fit_predict(spectral_features(feat, 4))
        return adjusted_rand_score(true, labels)

    print(f"clients={m} samples/client={int(np.median(fed.train.sizes))} rounds={args.rounds} "
          f"final ARI={summary['final']['ari']:.3f}")
    full, out_layer, others = (ari_of(p.reshape(m, -1)) for p in (prof, prof[:, :, head], prof[:, :, ~head]))
    print(f" ARI of spectral k-means on: full profile {full:.3f} | output-layer blocks {out_layer:.3f} | "
          f"other blocks {others:.3f}")
    hb = prof[:, :, head].reshape(m, -1)
    d = np.linalg.norm(hb[:, None] - hb[None], axis=-1)
    h = np.linalg.norm(hist[:, None] - hist[None], axis=-1)
    iu = np.triu_indices(m, 1)
    print(f" corr(output-layer profile distance, label-histogram distance) = {np.corrcoef(d[iu], h[iu])[0, 1]:.3f}")


if __name__ == "__main__":
    main()
