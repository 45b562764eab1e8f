"""Scenario library: every named scenario's ground truth matches its definition in the paper it comes from.

Built on scikit-learn's digits (1,437 train / 360 test images, 8×8) so that every test is fast; images
of a federation are traced back to the source pool by their bytes.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import torch

from fedcluster.catalog.registry import SCENARIOS
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.build import build_federation, cache_path
from fedcluster.data.federation import Federation
from fedcluster.data.shifts.concept import hcfl_beta_label_maps
from fedcluster.data.shifts.corruptions import CORRUPTIONS
from fedcluster.data.shifts.geometric import downsample, rotate
from fedcluster.data.sources.digits import load_digits
from fedcluster.data.sources.fashion_mnist import DEBIAN_DIR
from fedcluster.errors import ConfigError

IMAGE_SCENARIOS = ["iid", "label-skew", "concept-swap", "diverse-shift", "hcfl-shift", "rotation", "mixture",
                   "label-noise"]


def build(scenario: str, *overrides: str, seed: int = 0, cache: bool = False) -> Federation:
    cfg, typed = resolve(load_raw(None, [f"scenario={scenario}", f"data_seed={seed}", *overrides]))
    return build_federation(cfg, typed["scenario"], use_cache=cache)


@pytest.fixture(scope="module")
def digits():
    return load_digits()


def key(img: np.ndarray) -> bytes:
    return np.round(np.asarray(img, dtype=np.float64), 5).tobytes()


def lookup(images: np.ndarray) -> dict[bytes, int]:
    """Image bytes → row in ``images``; images that occur twice map to -1 (ambiguous)."""
    out: dict[bytes, int] = {}
    for i, img in enumerate(images):
        k = key(img)
        out[k] = -1 if k in out else i
    return out


def client_xy(fed: Federation, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Training and validation samples of client i together."""
    (xt, yt), (xv, yv) = fed.train.client(i), fed.val.client(i)
    return torch.cat([xt, xv]).numpy(), torch.cat([yt, yv]).numpy()


def same(a: Federation, b: Federation) -> bool:
    return all(torch.equal(getattr(a, s).x, getattr(b, s).x) and torch.equal(getattr(a, s).y, getattr(b, s).y)
               for s in ("train", "val", "test")) and np.array_equal(a.true_cluster, b.true_cluster)


# -- every image scenario ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", IMAGE_SCENARIOS)
def test_scenario_builds_valid_federation(name: str) -> None:
    fed = build(name)
    assert fed.num_clients == 20 and fed.info["name"] == name
    assert fed.train.x.dtype == torch.float32 and fed.train.y.dtype == torch.int64
    assert float(fed.train.x.min()) >= 0 and float(fed.train.x.max()) <= 1
    assert set(fed.test_cluster.tolist()) <= set(fed.true_cluster.tolist()) | set(range(fed.num_concepts))
    assert np.all(fed.train.sizes > 0) and fed.test.num_clients >= 1
    assert SCENARIOS.get(name).params is not None  # every parameter is settable as scenario.<name>


@pytest.mark.parametrize("name", IMAGE_SCENARIOS)
def test_same_seed_same_federation_different_seed_different(name: str) -> None:
    a, b, c = build(name, seed=3), build(name, seed=3), build(name, seed=4)
    assert same(a, b) and np.array_equal(a.style, b.style)
    assert not same(a, c)


def test_cache_hit_returns_identical_data() -> None:
    cfg, typed = resolve(load_raw(None, ["scenario=hcfl-shift", "num_clients=10", "data_seed=11"]))
    path = cache_path(cfg, typed["scenario"])
    assert not path.exists()
    first = build_federation(cfg, typed["scenario"])
    assert path.is_file()
    second = build_federation(cfg, typed["scenario"])
    assert same(first, second) and np.array_equal(first.style, second.style)
    assert np.array_equal(first.extras["severity"], second.extras["severity"]) and first.info == second.info
    other = resolve(load_raw(None, ["scenario=hcfl-shift", "num_clients=10", "data_seed=11", "scenario.beta=0.4"]))
    assert cache_path(other[0], other[1]["scenario"]) != path  # the key covers every scenario parameter


# -- label skew ----------------------------------------------------------------------------------------
def test_label_skew_classes_per_client(digits) -> None:
    fed = build("label-skew", "scenario.split=classes", "scenario.classes_per_client=3")
    for i in range(fed.num_clients):
        assert len(np.unique(client_xy(fed, i)[1])) == 3
    assert len(fed.train.x) + len(fed.val.x) == len(digits.y_train)  # every sample assigned


def test_label_skew_dirichlet_variants(digits) -> None:
    glob = build("label-skew", "scenario.split=dirichlet-global")
    sizes = glob.train.sizes + glob.val.sizes
    assert np.all(sizes == len(digits.y_train) // 20)  # FedRC-code variant: equal sizes
    held = {a: (build("label-skew", f"scenario.alpha={a}").label_histogram() > 0).sum(1).mean() for a in (0.1, 100)}
    assert held[0.1] < held[100]  # Dirichlet skew responds to α
    plain = build("label-skew")  # the pre-existing defaults still work
    assert plain.info["alpha"] == 0.5 and plain.info["split"] == "dirichlet"


# -- concept swap --------------------------------------------------------------------------------------
def check_label_maps(fed: Federation, digits, maps: np.ndarray) -> None:
    """Every traceable training sample carries ``maps[concept, original label]``; test clients likewise."""
    where = lookup(digits.x_train)
    checked, total = 0, 0
    for i in np.flatnonzero(fed.style <= 0):  # corrupted images cannot be traced back
        x, y = client_xy(fed, i)
        rows = np.array([where.get(key(img), -1) for img in x])
        ok = rows >= 0
        assert np.array_equal(y[ok], maps[fed.true_cluster[i]][digits.y_train[rows[ok]]])
        checked, total = checked + ok.sum(), total + len(x)
    assert checked > 0.9 * total
    for t in range(fed.test.num_clients):
        xt, yt = fed.test.client(t)
        assert np.array_equal(yt.numpy(), maps[fed.test_cluster[t]][digits.y_test])


def test_concept_swap_fedrc_maps(digits) -> None:
    fed = build("concept-swap")
    maps = fed.extras["label_maps"]
    assert maps[1].tolist() == [9, 8, 7, 6, 5, 4, 3, 2, 1, 0] and maps[2].tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 9, 0]
    check_label_maps(fed, digits, maps)
    assert sorted(np.bincount(fed.true_cluster).tolist()) == [6, 7, 7]


def test_concept_swap_options(digits) -> None:
    fed = build("concept-swap", "scenario.maps=hcfl-beta", "scenario.beta=0.4", "scenario.ratios=[8,1,1]")
    assert np.bincount(fed.true_cluster).tolist() == [16, 2, 2]
    assert np.array_equal(fed.extras["label_maps"], hcfl_beta_label_maps(10, 3, 0.4))
    check_label_maps(fed, digits, fed.extras["label_maps"])
    shift = build("concept-swap", "scenario.maps=shift", "scenario.concepts=2", "scenario.split=iid")
    assert shift.extras["label_maps"][1].tolist() == [(y + 5) % 10 for y in range(10)]  # S3 App. F.7
    check_label_maps(shift, digits, shift.extras["label_maps"])
    perm = [[1, 0, 2, 3, 4, 5, 6, 7, 8, 9], [0, 1, 2, 3, 4, 5, 6, 7, 9, 8]]
    p = build("concept-swap", "scenario.maps=permutation", f"scenario.perms={perm}".replace(" ", ""))
    assert p.info["concepts"] == 2 and p.extras["label_maps"].tolist() == perm
    check_label_maps(p, digits, p.extras["label_maps"])


# -- diverse shift -------------------------------------------------------------------------------------
@pytest.mark.parametrize("clients, expect", [(20, {(0, 0): 6, (0, 1): 4, (1, 0): 4, (1, 1): 1, (2, 0): 4,
                                                   (2, 1): 1}),
                                             (100, {(0, 0): 30, (0, 1): 20, (1, 0): 20, (1, 1): 5, (2, 0): 20,
                                                    (2, 1): 5})])
def test_diverse_shift_proportions_exact(digits, clients: int, expect: dict) -> None:
    fed = build("diverse-shift", f"num_clients={clients}")
    corrupted = fed.style > 0
    cells = {(c, k): int(((fed.true_cluster == c) & (corrupted == k)).sum()) for c in range(3) for k in (0, 1)}
    assert cells == expect  # S4 H.8: 30% clean, 20% corrupted, 25% per extra concept with a fifth corrupted
    assert np.all(fed.style >= 0) and fed.style_names == list(CORRUPTIONS)
    sev = fed.extras["severity"]
    assert np.all((sev == 0) == ~corrupted) and set(sev[corrupted].tolist()) <= {1, 2, 3, 4, 5}
    # clean clients hold untouched source images, corrupted clients altered ones
    where = lookup(digits.x_train)
    for i in range(fed.num_clients):
        found = np.mean([key(img) in where for img in client_xy(fed, i)[0]])
        assert found == 1.0 if not corrupted[i] else found < 0.5, (i, fed.style_names[fed.style[i]])
    # non-participating test clients: official test set, one per concept, FedRC's maps, uncorrupted
    assert fed.test_cluster.tolist() == [0, 1, 2]
    for t in range(3):
        xt, yt = fed.test.client(t)
        assert torch.equal(xt, torch.from_numpy(digits.x_test))
    check_label_maps(fed, digits, fed.extras["label_maps"])


def test_diverse_shift_uniform_variant(digits) -> None:
    fed = build("diverse-shift", "scenario.assignment=uniform", "num_clients=60", "scenario.corrupt_test=true")
    assert 0 in fed.style and len(np.unique(fed.style)) > 10  # styles drawn from all 20 incl. "original"
    assert len(np.unique(fed.true_cluster)) == 3
    assert not torch.equal(fed.test.client(0)[0], torch.from_numpy(digits.x_test))  # E.4-12 switch
    ratio = build("diverse-shift", "scenario.assignment=uniform", "scenario.ratios=[8,1,1]")
    assert np.bincount(ratio.true_cluster).tolist() == [16, 2, 2]  # S4 Fig. 6b imbalance


def test_hcfl_shift(digits) -> None:
    fed = build("hcfl-shift", "num_clients=40", "scenario.beta=0.4", "scenario.styles=[original,fog,contrast]")
    assert np.array_equal(fed.extras["label_maps"], hcfl_beta_label_maps(10, 3, 0.4))
    assert {fed.style_names[s] for s in fed.style} == {"original", "fog", "contrast"}
    check_label_maps(fed, digits, fed.extras["label_maps"])
    noisy = build("hcfl-shift", "scenario.noise=symmetric", "scenario.noise_rate=0.4")
    assert 0.35 < noisy.extras["flipped"].mean() < 0.45


def test_replicate_tiles_the_pool(digits) -> None:
    fed = build("diverse-shift", "scenario.replicate=3", "num_clients=30", "scenario.styles=[original]")
    assert len(fed.train.x) + len(fed.val.x) == 30 * (3 * len(digits.y_train) // 30)


# -- rotation -----------------------------------------------------------------------------------------
def test_rotation_ground_truth_groups_nearby_angles() -> None:
    fed = build("rotation", "num_clients=32")
    quadrant = {0: 0, 15: 0, 90: 1, 105: 1, 180: 2, 195: 2, 270: 3, 275: 3}
    assert [quadrant[int(a)] for a in fed.extras["angle"]] == fed.true_cluster.tolist()
    assert np.bincount(fed.true_cluster).tolist() == [8, 8, 8, 8]  # C/8 clients per angle
    assert fed.test_cluster.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [fed.style_names[s] for s in fed.style] == [f"rot{int(a)}" for a in fed.extras["angle"]]
    each = build("rotation", "num_clients=16", "scenario.group_by=angle")
    assert len(np.unique(each.true_cluster)) == 8
    custom = build("rotation", "scenario.angles=[0,10,200]", "scenario.groups=[[0,10],[200]]")
    assert custom.test_cluster.tolist() == [0, 0, 1]


def test_rotation_rotates_disjoint_parts(digits) -> None:
    fed = build("rotation", "scenario.angles=[0,90,180,270]", "scenario.val_fraction=0.3")
    assert fed.true_cluster.tolist() == (fed.extras["angle"] // 90).astype(int).tolist()
    where = lookup(digits.x_train)
    seen: list[int] = []
    for i in range(fed.num_clients):
        x, _ = client_xy(fed, i)
        rows = [where.get(key(img)) for img in rotate(x, -fed.extras["angle"][i])]
        assert all(r is not None for r in rows)
        seen += [r for r in rows if r >= 0]
        n_val = fed.val.sizes[i]
        assert n_val == round(0.3 * len(x))  # S3: 70/30 local split
    assert len(seen) == len(set(seen))  # parts are disjoint
    t1, _ = fed.test.client(1)
    assert torch.equal(t1, torch.from_numpy(rotate(digits.x_test, 90)))


def test_downsampling_image_size(digits) -> None:
    fed = build("iid", "scenario.image_size=4")
    assert fed.input_shape == (1, 4, 4)
    small = lookup(downsample(digits.x_train, 4))
    assert all(key(img) in small for img in fed.train.x.numpy())
    rot = build("rotation", "scenario.angles=[0,180]", "scenario.image_size=4")
    assert rot.input_shape == (1, 4, 4) and rot.test.x.shape[1:] == (1, 4, 4)


# -- mixture ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kappa", [0.1, 0.3, 0.8])
def test_mixture_kappa_realised(digits, kappa: float) -> None:
    fed = build("mixture", "num_clients=12", f"scenario.kappa={kappa}", "scenario.val_fraction=0")
    assert np.bincount(fed.true_cluster).tolist() == [4, 4, 4]  # S3: 3 subsets × 4 clients
    owner = fed.train.owner()
    where = lookup(digits.x_train)
    for i in range(fed.num_clients):
        sc = fed.sample_concept[owner == i]
        if fed.true_cluster[i] < 2:
            assert np.all(sc == fed.true_cluster[i])
        else:
            assert (sc == 0).sum() == round(kappa * len(sc))  # exactly κ from the 0° distribution
        x = fed.train.client(i)[0].numpy()
        back = np.where((sc == 0)[:, None, None, None], x, rotate(x, 180))  # undo each sample's rotation
        assert all(key(img) in where for img in back)


def test_mixture_binomial_option() -> None:
    fed = build("mixture", "num_clients=12", "scenario.kappa=0.5", "scenario.exact=false")
    mixed = fed.true_cluster[fed.train.owner()] == 2
    assert 0.3 < (fed.sample_concept[mixed] == 0).mean() < 0.7


# -- label noise -------------------------------------------------------------------------------------
@pytest.mark.parametrize("noise", ["symmetric", "pair"])
def test_label_noise_flips_exact_share(noise: str) -> None:
    fed = build("label-noise", f"scenario.noise={noise}", "scenario.noise_rate=0.2")
    flipped, clean, y = fed.extras["flipped"], fed.extras["clean_label"], fed.train.y.numpy()
    owner = fed.train.owner()
    for i in range(fed.num_clients):
        assert flipped[owner == i].sum() == round(0.2 * fed.train.sizes[i])
    assert np.array_equal(y[~flipped], clean[~flipped]) and np.all(y[flipped] != clean[flipped])
    if noise == "pair":
        assert np.array_equal(y[flipped], (clean[flipped] + 1) % 10)


# -- synthetic ----------------------------------------------------------------------------------------
def test_mixed_regression_configs() -> None:
    b = build("mixed-regression", "dataset=mixed-regression", "scenario.config=B")
    assert b.num_clients == 920 and b.task == "regression"
    assert b.train.sizes.tolist() == [10] * 900 + [50] * 20 and b.extras["theta_star"].shape == (3, 100)
    custom = build("mixed-regression", "dataset=mixed-regression", "scenario.config=custom", "num_clients=30",
                   "scenario.k=4", "scenario.d=5", "scenario.sizes=20x30")
    assert custom.num_clients == 30 and custom.extras["theta_star"].shape == (4, 5)
    c = build("mixed-regression", "dataset=mixed-regression", "scenario.config=c", "scenario.d=20")
    assert c.info["p"] == [0.2, 0.3, 0.5] and c.input_shape == (20,)


def test_cflgp_lines_scenario() -> None:
    fed = build("cflgp-lines", "dataset=cflgp-lines", "num_clients=12", "scenario.delta_phi=40")
    assert np.bincount(fed.true_cluster).tolist() == [4, 4, 4]
    assert np.allclose(fed.extras["theta_star"][:, 0], np.tan(np.deg2rad([40, 0, -40])))


def test_synthetic_dataset_scenario_mismatch() -> None:
    with pytest.raises(ConfigError, match="dataset=mixed-regression"):
        build("mixed-regression")  # digits with a synthetic scenario
    with pytest.raises(ConfigError, match="synthetic"):
        build("iid", "dataset=cflgp-lines")


# -- parameter validation ----------------------------------------------------------------------------
@pytest.mark.parametrize("scenario, override, words", [
    ("concept-swap", "scenario.maps=permutation", "needs perms"),
    ("concept-swap", "scenario.ratios=[1,1]", "one entry per concept"),
    ("concept-swap", "scenario.perms=[[0,0,1]]", "only used with maps=permutation"),
    ("concept-swap", "scenario.split=lda", "choose one of"),
    ("diverse-shift", "scenario.styles=[fog,smoke]", "unknown corruption styles"),
    ("diverse-shift", "scenario.ratios=[8,1,1]", "assignment=uniform"),
    ("hcfl-shift", "scenario.severities=[0,6]", "severities"),
    ("rotation", "scenario.angles=[0,360]", "distinct"),
    ("rotation", "scenario.groups=[[0]]", "in no group"),
    ("mixture", "scenario.kappa=1.5", "kappa"),
    ("label-noise", "scenario.noise_rate=-0.1", "noise_rate"),
    ("mixed-regression", "scenario.config=D", "config must be one of"),
    ("iid", "scenario.image_size=0", "image_size"),
])
def test_bad_params_name_the_problem(scenario: str, override: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        resolve(load_raw(None, [f"scenario={scenario}", override]))


def test_build_time_errors_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="permute 10 classes"):
        build("concept-swap", "scenario.maps=permutation", "scenario.perms=[[1,0,2]]")
    with pytest.raises(ConfigError, match="at least 8 clients"):
        build("rotation", "num_clients=4")
    with pytest.raises(ConfigError, match="size"):
        build("iid", "scenario.image_size=9")


# -- the paper-sized build ---------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not Path(DEBIAN_DIR).is_dir(), reason="Fashion-MNIST (dataset-fashion-mnist) not installed")
def test_diverse_shift_fashion_mnist_300_clients_under_a_minute() -> None:
    start = time.perf_counter()
    fed = build("diverse-shift", "dataset=fashion-mnist", "num_clients=300", cache=True)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    again = build("diverse-shift", "dataset=fashion-mnist", "num_clients=300", cache=True)
    assert cold < 60 and time.perf_counter() - start < cold
    assert fed.num_clients == 300 and (fed.style > 0).sum() == 90 and same(fed, again)
