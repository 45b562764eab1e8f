"""The Algorithm protocol the runner drives (methods in ``fedcluster.algorithms`` implement it): the run
context and K models with weights Ω (the round result is the contract's, :mod:`fedcluster.engine.protocol`).

The server of a clustered-FL method keeps K models (stacked parameters) and a client × cluster
weight matrix Ω (one-hot for hard methods, a simplex row for soft ones). What it predicts with is computed by
:mod:`fedcluster.engine.evaluation.prediction` from the models, Ω and the method's rule for test clients.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fedcluster.config.run_config import RunConfig
from fedcluster.data.federation import Federation, Split
from fedcluster.engine.evaluation import prediction as predicting
from fedcluster.engine.evaluation.inference import StackForward
from fedcluster.engine.params import Params, get_params, num_units, stack
from fedcluster.engine.protocol import RoundResult, Trainer
from fedcluster.engine.solver import Solver
from fedcluster.engine.transfer import to_device
from fedcluster.models.base import SplitModel, build_model
from fedcluster.tiers.cluster_state import ClusterState
from fedcluster.tiers.saved_fields import StateField, declared
from fedcluster.tiers.saved_kinds import Kind, Limits, Rows, Weights, kinds_problem


@dataclass
class Context:
    """Everything an algorithm needs from the run."""

    cfg: RunConfig
    fed: Federation
    module: SplitModel
    trainer: Trainer
    solver: Solver

    @property
    def device(self) -> torch.device:
        """Where the run computes: the device of the federation's tensors (the runner moved them there)."""
        return self.fed.train.device

    def fresh_models(self, k: int, stream: int = 0) -> Params:
        """K independently initialised models, seeded by (seed, stream); initialised on the CPU (the same
        numbers on every device), then moved to the run's device."""
        gen_state = torch.random.get_rng_state()
        models = []
        with torch.device("cpu"):
            for i in range(k):
                torch.manual_seed(int(np.random.default_rng([self.cfg.seed, 3, stream, i]).integers(2**31)))
                models.append(get_params(build_model(self.cfg.model, self.fed.input_shape, self.fed.output_dim,
                                                     self.cfg.model_params)))
        torch.random.set_rng_state(gen_state)
        return {n: v.to(self.device) for n, v in stack(models).items()}


class Algorithm(ABC):
    """One clustered-FL method: K models, client weights Ω and a round procedure. The server state is one
    :class:`~fedcluster.tiers.cluster_state.ClusterState` (``self.state``); ``models`` and ``omega`` are its fields.

    A checkpoint holds the attributes the classes along the method's bases declare as saved fields
    (:mod:`fedcluster.tiers.saved_fields`), each once with its type and kind (what its values may be: cluster
    positions, simplex rows, counts, ...), under its name: ``Saved`` attributes of the method itself,
    ``StateField`` attributes of its cluster state (a cluster book or random generator as plain data). A resume
    checks every value against its kind before loading; a field declared ``kept=`` is saved only when the run keeps
    it, and one an older checkpoint lacks keeps its fresh value, or takes the one its ``default=`` makes;
    :meth:`after_load` derives what follows from the loaded ones."""

    fixed_clusters = False  # True: K never changes in a run (a checkpoint must hold the configured K models)
    models = StateField[Params](Weights())  # the K stacked models
    omega = StateField[np.ndarray](Rows(cluster_axis=1))  # [M, K] client weights Ω

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for old in ("saved", "saved_when_kept", "saved_defaults"):
            if old in vars(cls):
                raise TypeError(f"{cls.__name__}.{old}: declare each saved attribute once, with its kind, e.g. "
                                "alpha = Saved[np.ndarray](Reals(low=0, high=1)) (fedcluster.tiers.saved_fields, "
                                "kinds in fedcluster.tiers.saved_kinds), so that a resume can check the saved values")

    def __init__(self, ctx: Context, params: Any) -> None:
        self.ctx = ctx
        self.params = params
        self.state = ClusterState(models={}, omega=np.zeros((ctx.fed.num_clients, 0)))
        self._forward = StackForward(ctx.module)  # inference-optimised forward of the K models

    def reads_every_input(self) -> str | None:
        """What in the method's parameters makes the server read clients' inputs row by row, beyond the per-client
        computations it asks of the trainer (``Trainer.per_client``, ``losses``); None when nothing does.
        A run spread over processes, where each process holds only its clients' inputs, refuses it."""
        return None

    @classmethod
    def streams_aggregation(cls, params: Any) -> bool:
        """Whether the method, with ``params``, knows its aggregation weights before local training and folds each
        vectorised call's trained models into its K weighted sums as the call finishes (backends.fold), so that its
        training memory does not grow with clients × K; False for methods that read every client's trained model."""
        return False

    def data_changed(self, clients: np.ndarray) -> None:  # noqa: B027  (a hook: nothing cached here)
        """The labels of ``clients`` changed in place before this round (a drifting federation, data.drift): drop
        what the method cached from them. The method's state (models, Ω) is kept: following the drift is its own
        business."""

    @abstractmethod
    def run_round(self, round_: int, clients: np.ndarray) -> RoundResult:
        """Train the sampled ``clients`` and update the server state."""

    @property
    def num_clusters(self) -> int:
        return num_units(self.models)

    def assignment(self) -> np.ndarray:
        """Each client's cluster (argmax of its Ω row)."""
        return self.omega.argmax(1)

    def test_weights(self, outputs: torch.Tensor, split: Split) -> torch.Tensor | np.ndarray:
        """The rule for clients that never trained (test clients): weights from the K models' ``outputs`` on their
        labelled rows; here the cluster with the lowest loss (engine.evaluation.prediction)."""
        return predicting.lowest_loss_weights(outputs, split, self.ctx.fed.task, self.num_clusters)

    def fit_weights(self, outputs: torch.Tensor, split: Split) -> torch.Tensor | np.ndarray:
        """``test_weights`` fitted on the rows of ``split`` in its ``fit`` mask only (evaluation.holdout), so that a
        test client's cluster choice is not made on the labels it is scored on (all rows without a mask)."""
        return predicting.fit_weights(outputs, split, self.test_weights)

    def scoring_omega(self) -> np.ndarray:
        """Ω as evaluation mixes the participating clients' predictions with (methods may fill rows first)."""
        return self.omega

    def prediction(self, split: Split, participating: bool) -> predicting.Prediction:
        """What to predict with (the one evaluation hook): [K', N, out] outputs on every sample of ``split`` and the
        [clients, K'] weights that mix them. Here the K models with the rows of :meth:`scoring_omega` (val: the
        clients trained) or ``test_weights`` fitted on the test clients' ``fit`` rows (engine.evaluation.prediction)."""
        if participating:
            return predicting.omega_prediction(self._forward, self.models, split, self.scoring_omega(),
                                               self.body_shared)
        return predicting.test_prediction(self._forward, self.models, split, self.test_weights, self.body_shared)

    @property
    def body_shared(self) -> bool:
        """True: the K models share one feature extractor (``body.*`` stored once)."""
        return False

    def outputs(self, x: torch.Tensor, models: Params | None = None) -> torch.Tensor:
        """[K, N, out] outputs of the K models (inference-optimised)."""
        return self._forward(self.models if models is None else models, x, self.body_shared)

    def chosen_outputs(self, split: Split, cluster: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Each client's rows through its ``cluster``'s model alone (engine.evaluation.prediction)."""
        return predicting.chosen_outputs(self._forward, self.models, split, cluster, self.body_shared)

    def predict(self, split: Split, participating: bool) -> torch.Tensor:
        """Mixed predictions Σ_k w_{i;k} p_k(x) for every sample of ``split`` from :meth:`prediction`."""
        return predicting.mixed(self.prediction(split, participating), split, self.ctx.fed.task)

    def saved_fields(self) -> tuple[str, ...]:
        """The attributes a checkpoint of this run holds, in its order: the declared fields along the bases, base
        first, those always saved, then those kept now (``kept=``); the cluster state's fields before the method's
        own."""
        fields = declared(type(self))
        names = [*(n for n, f in fields.items() if f.kept is None),
                 *(n for n, f in fields.items() if f.kept is not None and f.kept(self))]
        return tuple(sorted(names, key=lambda n: not isinstance(fields[n], StateField)))

    @classmethod
    def saved_kinds(cls) -> dict[str, Kind]:
        """Every attribute a checkpoint of this method can hold, with its kind (the declared fields along the
        bases, those kept only in some runs included)."""
        return {name: f.kind for name, f in declared(cls).items()}

    def state_dict(self) -> dict[str, Any]:
        fields = declared(type(self))
        return {name: fields[name].save(self) for name in self.saved_fields()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        fields = declared(type(self))
        for name in self.saved_fields():
            field = fields[name]
            if name in state:
                field.load(self, state[name])
            elif field.default is not None:  # a checkpoint written before the field was saved
                field.__set__(self, field.default(self))
        self.after_load()

    def after_load(self) -> None:
        """Hook: what follows from the loaded attributes (caches dropped, derived values recomputed)."""
        return None

    def state_problem(self, state: dict[str, Any], rounds: int) -> str | None:
        """What is wrong with the values of a saved state whose structure fits this run, as one phrase; None when
        nothing is. Called on resume before :meth:`load_state_dict`: every saved field against its kind (a
        cluster position past the models, a non-finite number, a row off the simplex, a counter past the
        ``rounds`` the checkpoint has run, ...); methods extend it with what relates several fields."""
        kinds = self.saved_kinds()
        return kinds_problem(state, {n: kinds[n] for n in self.saved_fields() if n in kinds},
                             Limits.of(state, rounds, self.ctx.fed.num_clients))

    def client_sizes(self, clients: np.ndarray) -> torch.Tensor:
        return to_device(self.ctx.fed.train.sizes[clients], self.ctx.device, torch.float64)

