"""The statuses "tie" and "not tested", and the checks that encode the papers' sentences (each fed results that
the sentence accepts or rejects)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fedcluster.reproduce.cost import paper_cpu_hours, paper_need_line
from fedcluster.reproduce.experiments import EXPERIMENTS
from fedcluster.reproduce.spec import paired
from fedcluster.reproduce.verdicts import Paired, from_table, judge, not_tested, outcome


def cells(**by_method: list[float]) -> dict[str, list[float]]:
    return dict(by_method)


def status(name: str, results: dict) -> str:
    exp = EXPERIMENTS[name]
    return exp.verdict(results)[0]  # type: ignore[misc]


def test_a_paired_lead_within_two_standard_errors_is_a_tie() -> None:
    assert outcome(Paired(1.0, 0.2), 0.0, ">=") == "pass"  # 1.0 − 0.4 > 0
    assert outcome(Paired(0.3, 0.2), 0.0, ">=") == "tie"
    assert outcome(Paired(-0.3, 0.2), 0.0, ">=") == "tie"
    assert outcome(Paired(-1.0, 0.2), 0.0, ">=") == "fail"
    assert outcome(Paired(-1.0), 0.0, ">=") == "fail" and outcome(Paired(1.0), 0.0, ">=") == "pass"  # one seed
    assert outcome(Paired(math.nan), 0.0, ">=") == "fail"
    assert outcome(Paired(0.5, 0.2), 1.0, "<=") == "pass" and outcome(Paired(0.9, 0.2), 1.0, "<=") == "tie"
    # the seed pairing: b = a − 0.13 + noise of ±9 points gives a tie, not a loss
    r = {("", "a"): {"g": [60.0, 70.0, 80.0]}, ("", "b"): {"g": [69.0, 61.0, 80.4]}}
    d = paired(r, "", "a", "b", "g")
    assert d.mean == pytest.approx(-0.13, abs=0.01) and outcome(d, 0.0, ">=") == "tie"


def test_statuses_from_the_headline_and_the_other_checks() -> None:
    ok, tie, bad = ("a", Paired(1.0, 0.1), 0.0, ">="), ("b", Paired(0.1, 0.1), 0.0, ">="), ("c", -1.0, 0.0, ">=")
    assert judge([ok, ok])[0] == "holds"
    assert judge([tie, ok])[0] == "tie"
    assert judge([bad, ok])[0] == "does not hold"
    assert judge([ok, tie])[0] == "partly" and judge([ok, bad])[0] == "partly"
    assert judge([not_tested("d", "never split"), ok])[0] == "not tested"
    assert judge([ok, not_tested("d", "never split")])[0] == "holds"
    assert "d: not tested (never split)" in judge([ok, not_tested("d", "never split")])[1]
    assert "ties (within 2 SE)" in judge([tie])[1]


def test_a_miss_anywhere_is_never_hidden_behind_a_headline_tie() -> None:
    ok, tie, bad = ("a", Paired(1.0, 0.1), 0.0, ">="), ("b", Paired(0.1, 0.1), 0.0, ">="), ("c", -1.0, 0.0, ">=")
    untested = not_tested("d", "never split")
    assert judge([tie, bad])[0] == "does not hold"  # nothing meets its bound
    assert judge([tie, bad, ok])[0] == "partly"
    assert judge([tie, tie, ok])[0] == "tie"
    assert judge([untested, bad])[0] == "does not hold" and judge([untested, bad, ok])[0] == "partly"
    assert judge([untested, tie])[0] == "not tested"
    assert judge([])[0] == "not tested"


def test_checks_from_the_table_are_shown_but_never_decide() -> None:
    ok, bad = ("a", Paired(1.0, 0.1), 0.0, ">="), ("c", -1.0, 0.0, ">=")
    status, why = judge([ok, from_table(*bad)])
    assert status == "holds" and "c [from the paper's table" in why and "misses >= 0" in why
    assert judge([from_table(*ok), bad])[0] == "does not hold"  # the first deciding check is the headline


def _mu(fedrc: tuple[float, float], fedem: tuple[float, float]) -> dict:
    noise = (0.0, 0.3, -0.3)
    out = {}
    for name, (at0, at4) in (("FedRC", fedrc), ("FedEM", fedem)):
        out[("", f"HCFL+({name}) mu_tilde=0.0")] = {"test": [at0 + n for n in noise]}
        out[("", f"HCFL+({name}) mu_tilde=0.4")] = {"test": [at4 + 2 * n for n in noise]}
    return out


def test_hcfl_table6_needs_fedrc_to_prefer_a_larger_mu() -> None:
    assert status("s1-table6-mu", _mu((70.0, 72.0), (62.0, 55.0))) == "holds"
    # lower at μ̃ = 0.4 beyond the seed noise (ours: 72.0 vs 74.1 at μ̃ = 0): the sign is reversed
    assert status("s1-table6-mu", _mu((73.0, 72.0), (62.0, 55.0))) == "does not hold"


def test_hcfl_table7_needs_scwu_better_in_validation_and_test() -> None:
    def r(delta_val: float, delta_test: float) -> dict:
        out = {}
        for name in ("FedRC", "FedEM"):
            out[("", f"HCFL+({name}) scwu=false")] = {"val": [70.0, 71.0, 72.0], "test": [60.0, 61.0, 62.0]}
            out[("", f"HCFL+({name}) scwu=true")] = {"val": [70.0 + delta_val, 71.2 + delta_val, 72.1 + delta_val],
                                                     "test": [60 + delta_test, 61.1 + delta_test, 62.2 + delta_test]}
        return out
    assert status("s1-table7-scwu", r(1.0, 1.0)) == "holds"
    assert status("s1-table7-scwu", r(1.0, -1.5)) == "partly"  # test lower with SCWU: not "better"
    assert status("s1-table7-scwu", r(-1.5, 1.0)) == "does not hold"  # validation lower: the headline (the paper's
    assert status("s1-table7-scwu", r(-1.5, -1.5)) == "does not hold"  # "both validation and test", in order)


def _table1(fesem_plus: float) -> dict:
    out = {}
    base = {"FedAvg": 50.0, "FeSEM": 62.4, "IFCA": 40.0, "FedEM": 55.0, "FedRC": 60.0}
    for x in EXPERIMENTS["s1-table1-fmnist"].methods:
        v = base.get(x.label, 50.0)
        if x.label.startswith("HCFL+("):
            v = {"FeSEM": fesem_plus, "FedEM": 64.0, "FedRC": 66.0}[x.label[6:11].rstrip(")")]
            v += 3.0 if x.label == "HCFL+(FedRC) ρ=0.3" else 0.0
        out[("", x.label)] = {"test": [v, v + 0.5, v - 0.5], "kt": [3.0] * 3}
    out[("", "HCFL+(FeSEM) ρ=0.05")]["kt"] = [9.0] * 3
    return out


def test_hcfl_table1_needs_each_hcfl_plus_variant_to_beat_its_backbone() -> None:
    assert status("s1-table1-fmnist", _table1(64.0)) == "holds"
    assert status("s1-table1-fmnist", _table1(58.6)) == "partly"  # HCFL+(FeSEM) 57.9–59.3 < FeSEM 62.4
    soft_below = _table1(64.0) | {("", "HCFL+(FeSEM) ρ=0.1"): {"test": [68.0, 68.5, 67.5], "kt": [3.0] * 3}}
    assert status("s1-table1-fmnist", soft_below) == "partly"  # B: a hard method above the soft HCFL+(FedEM)


def test_hcfl_prime_that_never_splits_is_not_tested() -> None:
    methods = EXPERIMENTS["s1-table10-prime"].methods
    r = {("", x.label): {"test": [60.0, 61.0, 62.0], "kmax": [1.0] * 3} for x in methods}
    assert status("s1-table10-prime", r) == "not tested"
    for x in ("HCFL'(FedEM)", "HCFL'(FedRC)", "HCFL'(FedSoft)"):
        r[("", x)] = {"test": [65.0, 66.0, 67.5], "kmax": [2.0, 1.0, 3.0]}
    assert status("s1-table10-prime", r) == "holds"


def _t14(global_k5: dict[str, float]) -> dict:
    k3 = {"IFCA": 50.0, "FeSEM": 45.0, "FedEM": 47.0, "FedRC": 60.0}
    out = {}
    for m, g in k3.items():
        out[("K = 3", m)] = {"local": [60.0, 61.0, 62.0], "global": [g, g + 1, g - 1]}
        out[("K = 5", m)] = {"local": [70.0, 71.0, 72.0], "global": [global_k5[m], global_k5[m] + 1, global_k5[m] - 1]}
    return out


def test_fedrc_clusters_needs_more_clusters_often_detrimental_to_global_accuracy() -> None:
    down = {"IFCA": 45.0, "FeSEM": 40.0, "FedEM": 48.0, "FedRC": 62.0}  # 2 of 4 fall, as the FedRC paper's table
    up = {"IFCA": 54.0, "FeSEM": 46.0, "FedEM": 52.0, "FedRC": 65.0}  # ours: rises for all four
    assert status("s4-ablation-clusters", _t14(down)) == "holds"
    assert status("s4-ablation-clusters", _t14(up)) == "partly"


def _fedrc_table1(ifca_global: float, ifca_local: float, ft_global: float) -> dict:
    means = {x.label: (55.0, 40.0) for x in EXPERIMENTS["s4-table1-fmnist"].methods}
    means |= {"FedRC": (72.0, 68.0), "FedSoft": (90.0, 20.0), "FedRC-FT": (89.5, ft_global),
              "IFCA": (ifca_local, ifca_global)}
    noise = {m: (0.0, 1.0, -1.0) for m in means} | {"IFCA": (2.0, -2.5, 0.5)}
    return {("", m): {"local": [lo + n for n in noise[m]], "global": [g + n * 1.1 for n in noise[m]]}
            for m, (lo, g) in means.items()}


def test_fedrc_table1_checks_the_gap_and_fedrc_ft_global_accuracy() -> None:
    assert status("s4-table1-fmnist", _fedrc_table1(60.0, 66.0, 68.5)) == "holds"
    # ours: IFCA's gap 5.3 < FedRC's (and FedRC-FT's global 34.4 vs FedRC's 69.9)
    assert status("s4-table1-fmnist", _fedrc_table1(60.0, 62.0, 68.5)) == "partly"
    assert status("s4-table1-fmnist", _fedrc_table1(60.0, 66.0, 34.4)) == "partly"
    assert status("s4-table1-fmnist", _fedrc_table1(68.1, 73.0, 68.5)) == "tie"  # IFCA within FedRC's noise
    # i) "and local accuracy": IFCA's local accuracy clearly above FedRC's
    assert status("s4-table1-fmnist", _fedrc_table1(60.0, 80.0, 68.5)) == "partly"
    assert status("s4-table1-fmnist", _fedrc_table1(68.1, 80.0, 68.5)) == "partly"  # a tie, a miss, passes


def _participation(fedrc_at_02: float) -> dict:
    out = {}
    for p in (0.2, 0.4, 0.6, 0.8, 1.0):
        s = f"participation {p}"
        g = fedrc_at_02 if p == 0.2 else 70.0
        out[(s, "FedRC")] = {"global": [g, g + 0.5, g - 0.5], "local": [70.0] * 3}
        for m in ("FedAvg", "IFCA", "FedEM"):
            out[(s, m)] = {"global": [40.0, 41.0, 39.0], "local": [60.0] * 3}
    return out


def test_fedrc_participation_needs_robustness_to_partial_participation() -> None:
    assert status("s4-ablation-participation", _participation(68.0)) == "holds"
    assert status("s4-ablation-participation", _participation(50.9)) == "does not hold"  # ours: 69.9 → 50.9 at 20 %
    beaten = _participation(68.0) | {("participation 0.4", "IFCA"): {"global": [80.0, 81.0, 79.0]}}
    assert status("s4-ablation-participation", beaten) == "holds"  # best at every rate: Table 6's, not its text


def _imbalance(fedrc: float) -> dict:
    out = {("", m): {"global": [g, g + 1.0, g - 1.0], "local": [50.0] * 3}
           for m, g in {"FeSEM": 30.0, "IFCA": 35.0, "FedEM": 33.0}.items()}
    out[("", "FedRC")] = {"global": [fedrc, fedrc + 1.2, fedrc - 0.9], "local": [50.0] * 3}
    return out


def test_fedrc_imbalance_needs_a_significant_lead() -> None:
    assert status("s4-ablation-imbalance", _imbalance(47.0)) == "holds"
    assert status("s4-ablation-imbalance", _imbalance(37.0)) == "partly"  # beyond the noise but 2 points only
    assert status("s4-ablation-imbalance", _imbalance(35.0)) == "does not hold"  # a tie, and 2 points only
    assert status("s4-ablation-imbalance", _imbalance(30.0)) == "does not hold"


def test_a_madmo_that_never_splits_is_not_tested() -> None:
    exp = EXPERIMENTS["s3-merge"]
    r = {("", m.label): {"ari": [1.0] * 3, "acc": [80.0, 81.0, 82.0]} for m in exp.methods}
    r[("", "cflgp")]["acc"] = [85.0, 86.0, 87.0]
    r[("", "cfl (MADMO)")] = {"ari": [0.0] * 3, "acc": [60.0] * 3}
    status_, why = exp.verdict(r)  # type: ignore[misc]
    assert status_ == "holds" and "MADMO's final ARI: not tested (MADMO never split" in why
    r[("", "cfl (MADMO)")]["ari"] = [0.9, 0.5, 0.8]
    assert exp.verdict(r)[0] == "partly"  # it split, and its ARI is above the CFL-GP paper's < 0.6


def test_cflgp_comparisons_are_paired_by_seed() -> None:
    """Every CFL-GP entry compares methods seed by seed: a deficit within the seed noise is a tie (s3-merge's
    recorded −0.07 ± 0.22 points), a consistent deficit a miss, a consistent lead a pass."""
    def merge(cflgp: list[float], ifca: list[float]) -> str:
        r = {("", m): {"ari": [1.0] * 3, "acc": acc} for m, acc in (("cflgp", cflgp), ("ifca", ifca))}
        r |= {("", m): {"ari": [0.0] * 3, "acc": [52.0] * 3} for m in ("cfl (MADMO)", "fedavg")}
        return EXPERIMENTS["s3-merge"].verdict(r)[1].split("; ")[1]  # type: ignore[misc]
    assert "ties (within 2 SE)" in merge([89.0, 88.5, 88.6], [88.86, 88.6, 88.84])
    assert "misses" in merge([88.0, 88.1, 88.2], [89.0, 89.1, 89.2])
    assert "meets" in merge([90.0, 90.1, 90.2], [89.0, 89.1, 89.2])

    def mixture(ari5: list[float], ifca: list[float]) -> str:
        r = {("κ=0.5", "cflgp"): {"ari5": ari5}, ("κ=0.5", "ifca"): {"ari": ifca}}
        return status("s3-mixture-kappa", r | {("κ=0.5", m): {"ari": [0.0] * 3} for m in ("cfl (MADMO)", "fedavg")})
    assert mixture([0.5, 0.2, 0.6], [0.6, 0.5, 0.5]) == "tie"
    assert mixture([0.4, 0.41, 0.42], [0.6, 0.62, 0.61]) == "does not hold"
    assert mixture([1.0, 1.0, 1.0], [0.6, 0.62, 0.61]) == "holds"


def test_fedrc_and_hcfl_method_comparisons_are_paired_by_seed() -> None:
    """A FedRC/HCFL table's "best" or "grows" check is a paired difference: within the seed noise it is a tie
    (s4-ablation-local-epochs recorded FedRC 0.13 points behind IFCA with seed spreads of 8-10 points)."""
    epochs = ("1 local epoch", "5 local epochs")

    def local_epochs(fedrc: list[float], ifca: list[float]) -> str:
        r = {(s, "FedRC"): {"global": [x + 10 * i for x in fedrc]} for i, s in enumerate(reversed(epochs))}
        r |= {(s, "IFCA"): {"global": [x + 10 * i for x in ifca]} for i, s in enumerate(reversed(epochs))}
        return status("s4-ablation-local-epochs", r)
    assert local_epochs([60.0, 75.0, 74.6], [62.0, 68.0, 80.0]) == "tie"
    assert local_epochs([60.0, 61.0, 62.0], [65.0, 66.0, 67.5]) == "does not hold"
    assert local_epochs([70.0, 71.0, 72.0], [65.0, 66.0, 67.5]) == "holds"

    def concepts(lead1: list[float], lead5: list[float]) -> str:
        r = {}
        for s, leads in (("1 concept, K = 3", lead1), ("3 concepts, K = 3", [9.0, 10.0, 11.0]),
                         ("5 concepts, K = 5", lead5)):
            r[(s, "FedAvg")] = {"global": [50.0, 60.0, 70.0]}
            r[(s, "FedEM")] = {"global": [40.0, 50.0, 60.0]}  # below FedAvg: 2) without concept shift
            r[(s, "FedRC")] = {"global": [x + d for x, d in zip((50.0, 60.0, 70.0), leads, strict=True)]}
        return status("s4-ablation-concepts", r)
    assert concepts([1.0, 2.0, 1.5], [10.0, 12.0, 11.0]) == "holds"
    assert concepts([12.0, 10.0, 11.0], [1.0, 2.0, 1.5]) == "partly"  # the lead shrinks with more concepts
    assert concepts([0.9, -2.0, 3.8], [10.0, 12.0, 11.0]) == "tie"
    assert concepts([-3.0, -2.0, -2.5], [10.0, 12.0, 11.0]) == "does not hold"  # 2) FedRC below FedAvg, 1 concept


def test_fedmd_gaps_to_the_oracle_are_paired_by_seed() -> None:
    """"Comparable to the oracle" (within 2 points): one seed that found the rotations among two that did not is a
    tie on 3 seeds; every seed far off is a miss."""
    def large(two_phase: list[float]) -> str:
        oracle = [24.0, 25.0, 24.5]
        r = {("", "oracle"): {"err": oracle}, ("", "fedavg"): {"err": [x + 7.5 for x in oracle]},
             ("", "two-phase"): {"err": [x + d for x, d in zip(oracle, two_phase, strict=True)]}}
        return status("s2-large-population", r)
    assert large([8.0, 1.0, 13.0]) == "tie"
    assert large([8.0, 9.0, 8.5]) == "does not hold"
    assert large([0.5, 1.0, 0.8]) == "holds"


def test_a_paper_budget_need_is_computed_from_the_run() -> None:
    lines = EXPERIMENTS["s3-lines-sweeps"]
    base, full = paper_cpu_hours(lines.budgets["small"], lines.budgets["paper"], 5.7 * 60, 3)
    assert base == full == pytest.approx(11.4 / 60)  # 200 / 100 rounds, same model
    text = paper_need_line(lines.budgets["small"], lines.budgets["paper"], 5.7 * 60, 3, "CMD")
    assert "about 11 CPU minutes on 2 CPU cores: a CPU can run it" in text and "GPU" not in text
    clusters = EXPERIMENTS["s4-ablation-clusters"]
    base, full = paper_cpu_hours(clusters.budgets["small"], clusters.budgets["paper"], 20 * 60, 3)
    assert full / base == pytest.approx(122.0 / 1.9)  # the CNN's step over the MLP's
    assert "it needs a GPU" in paper_need_line(clusters.budgets["small"], clusters.budgets["paper"], 20 * 60, 3, "C")
    mixture = EXPERIMENTS["s3-mixture-kappa"]  # 1,000 test images per group at small, all of them at paper
    text = paper_need_line(mixture.budgets["small"], mixture.budgets["paper"], 9.4 * 60, 3, "C")
    assert "about 94 CPU minutes" in text and "not counted: the small run scored at most 1000 test images" in text


def test_fedmd_local_steps_comparisons_are_paired_by_seed() -> None:
    """s2-local-steps compares one method at two s (and two configurations) seed by seed: B's s = 10 converging 30
    rounds sooner than s = 5 on average is a tie (the entry: partly) when the seeds disagree, a pass when they agree."""
    def judged(b5: list[float], b10: list[float]) -> str:
        def cell(hit: list[float], final: float) -> dict[str, list[float]]:
            return {"hit2": hit, "final": [final, final * 1.01, final * 0.99]}
        r = {("A", "FedAvg s=1"): cell([130.0, 135, 131], 0.041), ("A", "FedAvg s=5"): cell([43.0, 44, 42], 0.042),
             ("A", "FedAvg s=10"): cell([33.0, 34, 32], 0.043),
             ("B", "FedAvg s=5"): cell(b5, 0.0385), ("B", "FedAvg s=10"): cell(b10, 0.0404),
             ("C", "FedAvg s=5"): cell([250.0, 260, 255], 0.05)}
        return EXPERIMENTS["s2-local-steps"].judge(r, "paper")[0]
    assert judged([136.0, 137, 135], [106.0, 107, 105]) == "holds"
    assert judged([100.0, 170, 138], [130.0, 90, 98]) == "partly"  # B ties; unpaired means: 136 vs 106, a pass


def _rotation(cflgp: list[float], ifca: list[float], madmo_ari: float = 0.0,
              madmo_to1: float = math.nan, code: list[float] | None = None) -> dict:
    """Recorded first rounds of ARI 1; IFCA as the CFL-GP code runs it (``code``) as ``ifca`` unless given."""
    return {("", "cflgp"): {"ari": [1.0] * 3, "to_ari1": cflgp}, ("", "ifca"): {"ari": [0.7] * 3, "to_ari1": ifca},
            ("", "ifca (code as run)"): {"ari": [0.7] * 3, "to_ari1": ifca if code is None else code},
            ("", "cfl (MADMO)"): {"ari": [madmo_ari] * 3, "to_ari1": [madmo_to1] * 3},
            ("", "fedavg"): {"ari": [0.0] * 3, "to_ari1": [math.nan] * 3}}


def test_rotation_8_separates_the_methods_by_their_first_round_of_ari_1() -> None:
    """CFL-GP at its first clustering update, IFCA later (on the seeds that reach ARI 1 at least once: the CFL-GP
    paper's Table 3 counts those), MADMO never (from ``to_ari1``); IFCA as the CFL-GP code runs it likewise."""
    def judged(r: dict) -> str:
        return EXPERIMENTS["s3-rotation-8"].judge(r, "paper")[0]
    nan = math.nan
    assert judged(_rotation([2.0] * 3, [40.0, 90.0, 120.0])) == "holds"
    assert judged(_rotation([2.0] * 3, [40.0, nan, nan])) == "holds"  # one seed reaches ARI 1: Table 3 counts it
    assert judged(_rotation([2.0] * 3, [nan] * 3)) == "partly"  # ours: IFCA never reaches ARI 1 in 200 rounds
    assert judged(_rotation([2.0] * 3, [40.0, 90.0, 120.0], code=[nan] * 3)) == "partly"  # the code's IFCA never
    assert judged(_rotation([2.0, 12.0, 2.0], [40.0, 90.0, 120.0])) == "does not hold"  # CFL-GP not in one update
    assert judged(_rotation([2.0] * 3, [2.0] * 3)) == "partly"  # IFCA as fast: the lead misses
    assert judged(_rotation([2.0] * 3, [40.0, 90.0, 120.0], 1.0, 30.0)) == "partly"  # MADMO split and reached 1
    why = EXPERIMENTS["s3-rotation-8"].judge(_rotation([2.0] * 3, [40.0] * 3), "paper")[1]
    assert "not tested (MADMO never split" in why and "IFCA as the CFL-GP paper's code runs it: seeds that reach" in why
    assert "counted when it reaches ARI 1 at least once" in why


def test_madmo_comparisons_are_not_tested_until_it_splits() -> None:
    """Its accuracy rows equal the global model's while it never splits: a comparison with it is not tested."""
    verdict = EXPERIMENTS["s3-labelmaps-5"].verdict
    cells = {("", "cflgp"): {"ari": [1.0] * 3, "acc": [74.0, 75.0, 74.5]},
             ("", "ifca"): {"ari": [1.0] * 3, "acc": [73.0, 74.0, 73.5]},
             ("", "cfl (MADMO)"): {"ari": [0.0] * 3, "acc": [19.0, 19.5, 19.2]},
             ("", "fedavg"): {"ari": [0.0] * 3, "acc": [19.0, 19.5, 19.2]}}
    status, why = verdict(cells)
    assert status == "holds" and "minus MADMO's, paired by seed (points, the worse): not tested" in why
    split = cells | {("", "cfl (MADMO)"): {"ari": [0.2] * 3, "acc": [80.0, 81.0, 80.5]}}
    assert verdict(split)[0] == "partly"  # it split, and beat both: the comparison is tested, and misses


def test_mixreg_b_checks_that_ifca_eventually_reaches_the_oracle() -> None:
    """FedMD paper config B: "IFCA eventually also converges to the oracle estimation error" (ours: 23.9×)."""
    def judged(ifca: float) -> str:
        r = {("", m): {"ratio": [v] * 3} for m, v in (("two-phase", 1.0), ("one-shot", 2.0), ("ifca-random", ifca),
                                                        ("fedavg", 40.0), ("oracle", 1.0))}
        return EXPERIMENTS["s2-mixreg-b"].judge(r, "small")[0]
    assert judged(1.05) == "holds" and judged(23.9) == "partly"


def test_a_small_budget_equal_to_the_papers_is_labelled_paper(tmp_path: Path) -> None:
    from fedcluster.reproduce.pages import write_experiment
    from fedcluster.reproduce.results import Stored

    exp = EXPERIMENTS["s2-mixreg-a"]
    stored = Stored(exp.name, "small", 1, "cpu", [], finished=True)
    stored.records = [{"seed": 0, "setting": "", "method": m.label, "metrics": {"ratio": 1.0}, "curve": [[1, 1.0]],
                       "seconds": 1.0} for m in exp.methods]
    page = write_experiment(exp, stored, tmp_path).read_text()
    assert "| budget | paper | paper |" in page and "Paper budget: not run" not in page
