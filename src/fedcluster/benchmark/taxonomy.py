"""The taxonomy of heterogeneity: which shift each benchmark scenario carries, the registered scenario (with its
ground truth) that makes it, and the budgets that size every federation.

Plain data (no PyTorch): ``fedcluster benchmark --list`` reads it at once. Every scenario is a registered one of
:data:`fedcluster.catalog.registry.SCENARIOS` with a few of its parameters set; its true number of clusters is the
number of concepts of the federation it builds (its ``true_cluster``), which the fixed-K methods are given. The
concept-drift slot takes the first registered scenario whose name starts with ``drift-``; a version without one
lists the slot as not available.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedcluster.errors import UserError, did_you_mean

DRIFT_PREFIX = "drift-"
DRIFT_PREFERRED = "drift-sudden"


@dataclass(frozen=True)
class BenchBudget:
    """How large every run is: clients, rounds, the share of Fashion-MNIST's samples kept per client, the images
    kept per test client and the samples per client of the regression scenario."""

    name: str
    clients: int
    rounds: int
    image_fraction: float  # share of each Fashion-MNIST client's train/validation samples kept
    test_size: int  # images kept per test client (0 = all)
    regression_samples: int  # samples per client of the mixed linear regression
    regression_dim: int  # its feature dimension d
    about: str


BUDGETS: dict[str, BenchBudget] = {b.name: b for b in (
    BenchBudget("tiny", 6, 2, 0.02, 40, 30, 5, "a few seconds a run, to try the command (its numbers say nothing)"),
    BenchBudget("default", 20, 25, 0.1, 500, 100, 20,
                "20 clients, 25 rounds, an MLP (about 240 Fashion-MNIST images a client): the whole benchmark on "
                "a CPU in hours"),
    BenchBudget("large", 50, 100, 0.5, 2000, 200, 50,
                "50 clients, 100 rounds, half of Fashion-MNIST's images: for a GPU window"),
)}
DEFAULT_BUDGET = "default"


@dataclass(frozen=True)
class Scenario:
    """One kind of shift: its name in the tables, the shift in words, the registered scenario and data set that
    make it, and their parameters."""

    name: str
    shift: str
    scenario: str
    dataset: str
    params: tuple[str, ...] = ()  # scenario.<key>=value (and any other run-config override of this scenario)
    task: str = "classification"
    one_concept: bool = False  # every client shares one concept: ARI is not defined, and one cluster is right

    def overrides(self, budget: BenchBudget) -> list[str]:
        """The run-config overrides of this scenario at ``budget`` (data, scenario, model, size)."""
        over = [f"dataset={self.dataset}", f"scenario={self.scenario}", f"num_clients={budget.clients}",
                f"rounds={budget.rounds}", *self.params]
        if self.task == "regression":
            over += ["scenario.config=custom", "scenario.k=3", f"scenario.d={budget.regression_dim}",
                     f"scenario.sizes={budget.regression_samples}x{budget.clients}", "scenario.test_size=500",
                     "model=linear-nobias", "lr=0.04"]
        return over

    def fraction(self, budget: BenchBudget) -> float:
        """The share of every client's samples kept at ``budget`` (the digits are small enough to keep whole)."""
        return budget.image_fraction if self.dataset == "fashion-mnist" else 1.0

    def test_size(self, budget: BenchBudget) -> int:
        return 0 if self.task == "regression" else budget.test_size

    def picture(self) -> str:
        """The command that prints this federation's summary and draws it."""
        return " ".join(["fedcluster scenario", self.scenario, f"dataset={self.dataset}", *self.params])


TAXONOMY: tuple[Scenario, ...] = (
    Scenario("label-skew", "label-distribution skew: each client's classes drawn from Dirichlet(α = 0.1); one "
             "concept, so the right clustering keeps every client together", "label-skew", "digits",
             ("scenario.alpha=0.1",), one_concept=True),
    Scenario("feature-shift", "feature shift: every client's images carry one of the MNIST-C corruptions (style "
             "and severity drawn per client) under one concept", "hcfl-shift", "fashion-mnist",
             ("scenario.family=mnist-c", "scenario.concepts=1"), one_concept=True),
    Scenario("concept-shift", "concept shift: three groups of clients label the same images by three label maps "
             "(y, C−1−y, y+1 mod C), over a Dirichlet(α = 1) label skew", "concept-swap", "digits",
             ("scenario.concepts=3", "scenario.maps=fedrc")),
    Scenario("rotation", "rotations (the IFCA / CFL-GP standard): four groups of clients see the images turned by "
             "0°, 90°, 180° and 270°", "rotation", "digits",
             ("scenario.angles=[0,90,180,270]", "scenario.group_by=angle")),
    Scenario("diverse-mix", "the FedRC paper's diverse mix: label skew, MNIST-C corruptions and three label-map "
             "concepts together (30% clean, 20% corrupted, 25% per swapped concept)", "diverse-shift",
             "fashion-mnist", ("scenario.family=mnist-c",)),
    Scenario("label-noise", "label noise: 20% of every client's training labels flipped uniformly at random, over a "
             "Dirichlet(α = 1) label skew; one concept", "label-noise", "digits",
             ("scenario.noise=symmetric", "scenario.noise_rate=0.2"), one_concept=True),
    Scenario("mixed-regression", "mixed linear regression (the FedMD paper's generator): three true parameter "
             "vectors θ*, each client's responses from one of them", "mixed-regression", "mixed-regression",
             task="regression"),
)
DRIFT_SHIFT = "concept drift over rounds: clients change concept during training"


def drift_scenario(registered: list[str]) -> Scenario | None:
    """The concept-drift slot: ``drift-sudden`` if registered, else the first ``drift-*`` scenario; None without."""
    drifts = sorted(n for n in registered if n.startswith(DRIFT_PREFIX))
    if not drifts:
        return None
    name = DRIFT_PREFERRED if DRIFT_PREFERRED in drifts else drifts[0]
    return Scenario("concept-drift", f"{DRIFT_SHIFT} ({name})", name, "digits")


def taxonomy() -> tuple[list[Scenario], str | None]:
    """Every scenario of this version, and the concept-drift slot's note when it is not available."""
    from fedcluster.catalog.registry import SCENARIOS

    drift = drift_scenario(SCENARIOS.names())
    if drift is None:
        return list(TAXONOMY), "concept-drift: not available in this version (no drift-* scenario is registered)"
    return [*TAXONOMY, drift], None


def select_scenarios(spec: str | None) -> list[Scenario]:
    """The scenarios ``--scenarios a,b`` names (None: all), in the taxonomy's order; an unknown one is refused."""
    every, _ = taxonomy()
    if spec is None:
        return every
    names = [n.strip() for n in spec.split(",") if n.strip()]
    known = {s.name: s for s in every}
    for n in names:
        if n not in known:
            raise UserError(f"--scenarios: unknown scenario {n!r};{did_you_mean(n, list(known))} choose from "
                            f"{', '.join(known)} (see `fedcluster benchmark --list`)")
    if not names:
        raise UserError("--scenarios: name at least one scenario (see `fedcluster benchmark --list`)")
    return [s for s in every if s.name in names]


def budget_of(name: str) -> BenchBudget:
    return BUDGETS[name]
