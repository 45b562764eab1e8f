"""What is registered where, readable without importing any implementation (so `fedcluster list` starts
at once): name -> (module that registers it, one-line description).

The registries import a module the first time one of its names is used; the modules' own
``register``/``add`` calls stay the source of truth (tests/test_catalog.py checks this table against
them and prints the lines to paste when a registration is added or changed)."""

from __future__ import annotations

ALGORITHMS: dict[str, tuple[str, str]] = {
    'cfl': ('fedcluster.algorithms.cfl',
        'CFL (Sattler et al.): split a cluster when ‖mean Δθ‖ < tol1 and max ‖Δθ_i‖ > tol2'),
    'cflgp': ('fedcluster.algorithms.cflgp',
        'CFL-GP: spectral clustering of accumulated gradient profiles (CFL-GP paper)'),
    'clove': ('fedcluster.algorithms.clove',
        'CLoVE: k-means of per-client loss vectors over K̂ models, K^t by silhouette, min-cost cluster-model '
        'matching'),
    'fedavg': ('fedcluster.algorithms.fedavg',
        'FedAvg: one global model, N_i-weighted model averaging'),
    'fedem': ('fedcluster.algorithms.fedem',
        'FedEM: soft EM over K models, client-wise mixture weights, ensemble prediction'),
    'fedgroup': ('fedcluster.algorithms.fedgroup',
        'FedGroup: K groups by K-means on decomposed update directions (EDC), newcomer cold start, FedAvg '
        'per group (inter_lr: inter-group aggregation)'),
    'fedgwc': ('fedcluster.algorithms.fedgwc',
        'FedGWC: Gaussian rewards of client losses, interaction matrix, recursive spectral splits; '
        'Wasserstein Adjusted Score in rounds.csv'),
    'fedmd': ('fedcluster.algorithms.fedmd',
        'FedMD + FedX+clustering: moment-descent init, then lowest-loss FedAvg (FedMD paper)'),
    'fedprox': ('fedcluster.algorithms.fedavg',
        'FedProx: FedAvg with the proximal term (μ/2)‖θ − θ^t‖²'),
    'fedrc': ('fedcluster.algorithms.fedrc',
        'FedRC: robust clustering, EM with exp(-loss)/C_{y,k} (variants: ft, hard, adam)'),
    'fedrc-adaptive': ('fedcluster.algorithms.hcfl_presets',
        'adaptive FedRC (FedRC paper App. H.4): start with K0 models, remove those with mass below delta'),
    'fedsoft': ('fedcluster.algorithms.fedsoft',
        'FedSoft: importance weights from per-cluster losses, proximal personal models'),
    'fesem': ('fedcluster.algorithms.fesem',
        'FeSEM: hard assignment by parameter distance to the cluster models'),
    'flhc': ('fedcluster.algorithms.flhc',
        'FL+HC: FedAvg, then agglomerative clustering of client updates once, then FedAvg per cluster'),
    'hcfl': ('fedcluster.algorithms.hcfl',
        'HCFL composition: formulation × weights (tiers 1–2) × adaptive × distance (tiers 3–4)'),
    'hcfl-plus': ('fedcluster.algorithms.hcfl_presets',
        'HCFL+ (HCFL paper): φ + K heads, sample-wise EM, split by eq. 8 on prototype distances, remove; '
        'backbone=fesem|fedem|fedrc|fedsoft'),
    'hcfl-prime': ('fedcluster.algorithms.hcfl_presets',
        "HCFL' (HCFL paper Table 10): backbone tiers 1–2 + CFL tiers 3–4 + the extractor/head split"),
    'icfl': ('fedcluster.algorithms.icfl',
        'ICFL: split clusters whose update-similarity connectivity falls below α_t (α*(0), ε1)'),
    'ifca': ('fedcluster.algorithms.ifca',
        'IFCA: hard assignment by lowest local loss (variant=model|gradient averaging)'),
    'oneshot': ('fedcluster.algorithms.oneshot',
        'one-shot clustering: local models, k-means once, then FedAvg per cluster'),
    'oracle': ('fedcluster.algorithms.oracle',
        'oracle: each client trains the model of its true cluster (upper reference)'),
    'pacfl': ('fedcluster.algorithms.pacfl',
        'PACFL: one-shot clustering of data-subspace signatures (angle threshold ν), then FedAvg per cluster'),
    'stocfl': ('fedcluster.algorithms.stocfl',
        'StoCFL: one cluster per client, merge clusters with update cosine > τ; prox λ toward a global model'),
}
DATASETS: dict[str, tuple[str, str]] = {
    'cflgp-lines': ('fedcluster.data.datasets',
        'CFL-GP paper synthetic three-lines regression (scenario=cflgp-lines scenario.delta_phi=20)'),
    'cifar10': ('fedcluster.data.datasets',
        'CIFAR-10 32×32 RGB from the python pickle batches in data_dir='),
    'cifar100': ('fedcluster.data.datasets',
        'CIFAR-100 32×32 RGB (fine labels) from the python pickle batches in data_dir='),
    'digits': ('fedcluster.data.datasets',
        "scikit-learn's bundled 8×8 handwritten digits (1,797 images, 10 classes)"),
    'emnist': ('fedcluster.data.datasets',
        'EMNIST (balanced split) 28×28 from idx files in data_dir='),
    'fashion-mnist': ('fedcluster.data.datasets',
        'Fashion-MNIST 28×28 (70,000 images; Debian package dataset-fashion-mnist or data_dir=)'),
    'mixed-regression': ('fedcluster.data.datasets',
        'FedMD paper synthetic mixed linear regression (scenario=mixed-regression scenario.config=A|B|C)'),
    'mnist': ('fedcluster.data.datasets',
        'MNIST 28×28 from idx files in data_dir='),
}
SCENARIOS: dict[str, tuple[str, str]] = {
    'cflgp-lines': ('fedcluster.data.scenarios.synthetic',
        'CFL-GP paper §5.1 three noisy lines at angles (Δφ, 0, −Δφ), clients split equally'),
    'concept-swap': ('fedcluster.data.scenarios.basic',
        'label skew + label-map concepts (maps=fedrc|hcfl-beta|shift|permutation, ratios=[8,1,1]); one test '
        'client per concept'),
    'diverse-shift': ('fedcluster.data.scenarios.diverse',
        'FedRC benchmark (FedRC paper H.8): LDA + 30% clean / 20% corrupted / 25% per swapped concept (1/5 '
        'corrupted); assignment=uniform for FedRC paper §3'),
    'hcfl-shift': ('fedcluster.data.scenarios.diverse',
        'HCFL benchmark (HCFL paper §5.1): LDA + one of 20 styles + one of 3 β-rule concepts per client (uniform '
        'draws)'),
    'iid': ('fedcluster.data.scenarios.basic',
        'uniform random split, one concept (sanity baseline)'),
    'label-noise': ('fedcluster.data.scenarios.noisy',
        'label skew + symmetric/pair label flips at rate χ on training labels (HCFL paper Table 4, FedRC paper '
        'Table 13)'),
    'label-skew': ('fedcluster.data.scenarios.basic',
        'label shift only: Dirichlet(α) (split=dirichlet|dirichlet-global) or C classes per client (split=classes)'),
    'mixed-regression': ('fedcluster.data.scenarios.synthetic',
        'FedMD paper mixed linear regression (config=A|B|C|custom; k, d, sizes, p, noise override)'),
    'mixture': ('fedcluster.data.scenarios.mixture',
        'CFL-GP paper §5.2 mixture: clients of A (0°), B (180°) and C (each sample 0° with ratio κ, else 180°)'),
    'rotation': ('fedcluster.data.scenarios.rotation',
        'rotated images, one disjoint part per angle (angles=[0,15,90,105,...] CFL-GP paper, [0,90,180,270] FedMD '
        'paper); '
        'nearby angles share a cluster'),
}
MODELS: dict[str, tuple[str, str]] = {
    'cnn': ('fedcluster.models.zoo',
        'two-conv CNN of the FedAvg paper (5×5 conv 32/64, max-pool, FC 512)'),
    'light-cnn': ('fedcluster.models.zoo',
        'lighter two-conv CNN (16/32 channels, FC 128)'),
    'linear': ('fedcluster.models.zoo',
        "linear regression ŷ = <θ, x> + b (init_range=a: CFL-GP paper's θ_1 ~ U(−a, a), θ_2 = 0)"),
    'linear-nobias': ('fedcluster.algorithms.fedmd',
        "linear regression ŷ = <θ, x> without bias (the FedMD paper's mixed-regression model)"),
    'logistic': ('fedcluster.models.zoo',
        'multinomial logistic regression (flatten → linear)'),
    'mobilenet-v2': ('fedcluster.models.mobilenet',
        'MobileNet-V2, CIFAR stem, GroupNorm (2.2M parameters on 3×32×32)'),
    'resnet18': ('fedcluster.models.resnet',
        'ResNet-18, CIFAR stem, GroupNorm (11.2M parameters on 3×32×32)'),
    'mlp': ('fedcluster.models.zoo',
        'multi-layer perceptron, ReLU (default 784-200-10 as in CFL-GP)'),
}
