"""FedMD paper (FedMD + FedX+clustering): mixed linear regression configurations A/B/C and the large MNIST-style
population."""

from __future__ import annotations

from fedcluster.reproduce.spec import Budget, Experiment, Method, Metric, Results, mean_of
from fedcluster.reproduce.verdicts import judge

# Phase-2 step sizes in the engine's scale (loss (ŷ − y)², lr = η_S2/2): γ = η‖X_i‖²/n_i ≈ 0.5 for the smallest
# clients.
MIXREG_LR = {"A": 0.04, "B": 0.0125, "C": 0.0125}
MIXREG_PAPER = {  # qualitative (FedMD paper has no tables)
    "A": {"two-phase": "≈ oracle", "fedavg": "plateaus high", "one-shot": "performs well",
          "ifca-random": "stuck on an error floor", "oracle": "reference"},
    "B": {"two-phase": "≈ oracle", "fedavg": "plateaus high", "one-shot": "degrades (small clients mis-clustered)",
          "ifca-random": "reaches the oracle after a long plateau", "oracle": "reference"},
    "C": {"two-phase": "≈ oracle (slower)", "fedavg": "plateaus high", "one-shot": "performs poorly",
          "ifca-random": "plateau", "oracle": "reference"},
}
MIXREG_CLIENTS = {"A": 200, "B": 920, "C": 920}
MIXREG_METRICS = (Metric("err5", "error @5", ".4f"), Metric("err105", "error @105", ".4f"),
                  Metric("final", "final error", ".4f"), Metric("ratio", "final / oracle"),
                  Metric("hit", "first round ≤ 1.1·oracle", ".0f"))


def _mixreg_verdict(config: str):
    def verdict(r: Results) -> tuple[str, str]:
        checks = [("two-phase final / oracle", mean_of(r, "", "two-phase", "ratio"), 1.1, "<="),
                  ("FedAvg final / oracle", mean_of(r, "", "fedavg", "ratio"), 2.0, ">=")]
        one_shot = mean_of(r, "", "one-shot", "ratio")
        checks.append(("one-shot final / oracle", one_shot, 1.1, "<=") if config == "A"
                      else ("one-shot final / oracle", one_shot, 1.1, ">="))
        if config == "A":
            checks.append(("IFCA (random start) final / oracle", mean_of(r, "", "ifca-random", "ratio"), 1.1, ">="))
        return judge(checks)
    return verdict


def _mixreg(config: str) -> Experiment:
    budget = Budget(MIXREG_CLIENTS[config], 405, "linear regression without bias, d = 100",
                    (f"lr={MIXREG_LR[config]}",),
                    note="the FedMD paper's own population (it is small): the small and paper budgets are the same")
    return Experiment(
        name=f"s2-mixreg-{config.lower()}",
        title=f"FedMD paper Fig. {'ABC'.index(config) + 1}: mixed linear regression, configuration {config}",
        source=f"FedMD paper §V-A..C, Fig. {'ABC'.index(config) + 1}",
        claim=("two-phase (moment-descent init + FedX clustering) reaches the oracle's estimation error; FedAvg "
               "plateaus high; " + MIXREG_PAPER[config]["one-shot"].join(["one-shot clustering ", ""])),
        kind="mixreg", budgets={"small": budget, "paper": budget},
        methods=tuple(Method(m, (), {"final": MIXREG_PAPER[config][m]})
                      for m in ("two-phase", "fedavg", "one-shot", "ifca-random", "oracle")),
        metrics=MIXREG_METRICS, read="error", curve="param_error", overrides=(f"scenario.config={config}",),
        differences=("FedMD paper does not report the Phase-2 step size: lr is chosen so that γ = η‖X_i‖²/n_i ≈ 0.5 "
                     "for the "
                     "smallest clients",
                     "FedMD paper writes N = 1000 samples, contradicting its own (M, n_i); we follow (M, n_i), N = "
                     "10,000",
                     "the baselines run 405 Phase-2 rounds, two-phase 5 Phase-1 + 400 Phase-2 rounds"),
        verdict=_mixreg_verdict(config), tiny_rounds=8)


def _large_population_verdict(r: Results) -> tuple[str, str]:
    oracle = mean_of(r, "", "oracle", "err")
    return judge([("two-phase error − oracle error (points)", mean_of(r, "", "two-phase", "err") - oracle, 2.0, "<="),
                  ("FedAvg error − oracle error (points)", mean_of(r, "", "fedavg", "err") - oracle, 2.0, ">=")])


S2_LARGE = Experiment(
    name="s2-large-population",
    title="FedMD paper Figs. 4–5: FedMD on a large population of tiny rotated-image clients (k = 2)",
    source="FedMD paper §V-D, Figs. 4–5",
    claim="two-phase reaches the oracle's test error; random-start IFCA can stall; FedAvg is clearly worse",
    kind="s2-rotation",
    budgets={"small": Budget(10000, 100, "multinomial logistic regression on 14×14 images",
                             note="10,000 tiny clients instead of 25,000; 100 Phase-2 rounds instead of 200"),
             "paper": Budget(25000, 200, "multinomial logistic regression on 14×14 images")},
    methods=(Method("two-phase", ("algorithm=fedmd", "algorithm.init=fedmd"), {"err": "≈ oracle"}),
             Method("ifca-random", ("algorithm=fedmd", "algorithm.init=random"), {"err": "slow / can stall"}),
             Method("fedavg", ("algorithm=fedavg",), {"err": "clearly worse"}),
             Method("oracle", ("algorithm=oracle",), {"err": "reference"})),
    metrics=(Metric("err10", "test error % @10"), Metric("err", "final test error %"),
             Metric("ari", "final ARI", ".3f")),
    read="error", curve="test_acc",
    differences=("Fashion-MNIST instead of MNIST (no MNIST files on this machine)",
                 "Δ (the FedMD paper's separation) is set to 1 and only enters the stopping rule",
                 "k = 2 rotations {0°, 90°} only (FedMD paper also runs k = 4)"),
    verdict=_large_population_verdict, tiny_rounds=3)

EXPERIMENTS = (_mixreg("A"), _mixreg("B"), _mixreg("C"), S2_LARGE)
