"""The Algorithm protocol the runner drives (methods in ``fedcluster.algorithms`` implement it): the run
context, the round result, and K models with weights Ω.

The server of a clustered-FL method keeps K models (stacked parameters) and a client × cluster
weight matrix Ω (one-hot for hard methods, a simplex row for soft ones). Prediction for a client
mixes the models' softmax outputs with its row of Ω: Σ_k ω_{i;k} softmax(m_k(x)) (FedEM/FedRC's
rule; for one-hot rows it is the assigned model's prediction).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from fedcluster.config.run_config import RunConfig
from fedcluster.data.federation import Federation, Split
from fedcluster.engine import inference
from fedcluster.engine.backends.protocol import Backend
from fedcluster.engine.evaluation import mix_predictions, per_sample_losses
from fedcluster.engine.inference import StackForward
from fedcluster.engine.params import Params, get_params, num_units, stack
from fedcluster.engine.solver import Solver
from fedcluster.engine.transfer import to_device
from fedcluster.models.base import SplitModel, build_model
from fedcluster.tiers.cluster_state import ClusterState, StateField, restored, saved


@dataclass
class Context:
    """Everything an algorithm needs from the run."""

    cfg: RunConfig
    fed: Federation
    module: SplitModel
    trainer: Backend
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


@dataclass
class RoundResult:
    """Communication of one round (bytes actually exchanged) and algorithm-specific metrics."""

    bytes_up: int
    bytes_down: int
    extra: dict[str, float] = field(default_factory=dict)
    clusters: dict[str, Any] | None = None  # per-cluster data makeup (tracking.clusters), → clusters.jsonl


class Algorithm(ABC):
    """One clustered-FL method: K models, client weights Ω and a round procedure. The server state is one
    :class:`~fedcluster.tiers.cluster_state.ClusterState` (``self.state``); ``models`` and ``omega`` are its fields.

    A checkpoint holds the attributes every class along the method's bases names in ``saved`` (base first), each
    under its name: :class:`~fedcluster.tiers.cluster_state.StateField` attributes through the state's own
    save/load, the others as they are (a cluster book or random generator as plain data). An attribute an older
    checkpoint lacks keeps its fresh value, or takes the one ``saved_defaults`` makes; :meth:`after_load` derives
    what follows from the loaded ones."""

    fixed_clusters = False  # True: K never changes in a run (a checkpoint must hold the configured K models)
    saved: ClassVar[tuple[str, ...]] = ("models", "omega")  # the attributes a checkpoint holds
    saved_defaults: ClassVar[dict[str, Callable[[Any], Any]]] = {}  # name -> its value when a checkpoint lacks it
    models: Params = StateField()  # type: ignore[assignment]
    omega: np.ndarray = StateField()  # type: ignore[assignment]

    def __init__(self, ctx: Context, params: Any) -> None:
        self.ctx = ctx
        self.params = params
        self.state = ClusterState(models={}, omega=np.zeros((ctx.fed.num_clients, 0)))
        self._forward = StackForward(ctx.module)  # inference-optimised forward of the K models

    def reads_every_input(self) -> str | None:
        """What in the method's parameters makes the server read clients' inputs row by row, beyond the per-client
        computations it asks of the trainer (``Backend.per_client``, ``losses``); None when nothing does.
        A run spread over processes, where each process holds only its clients' inputs, refuses it."""
        return None

    @classmethod
    def streams_aggregation(cls, params: Any) -> bool:
        """Whether the method, with ``params``, knows its aggregation weights before local training and folds each
        vectorised call's trained models into its K weighted sums as the call finishes (engine.fold), so that its
        training memory does not grow with clients × K; False for methods that read every client's trained model."""
        return False

    @abstractmethod
    def run_round(self, round_: int, clients: np.ndarray) -> RoundResult:
        """Train the sampled ``clients`` and update the server state."""

    @property
    def num_clusters(self) -> int:
        return num_units(self.models)

    def assignment(self) -> np.ndarray:
        """Each client's cluster (argmax of its Ω row)."""
        return self.omega.argmax(1)

    def test_weights(self, outputs: torch.Tensor, split: Split) -> torch.Tensor:
        """Ω rows of non-participating test clients: the cluster with the lowest loss on their
        labelled data (how the FedRC paper's reference code assigns test clients for hard methods)."""
        losses = per_sample_losses(outputs, split.y, self.ctx.fed.task).double()  # [K, N], on the device
        index = to_device(split.owner(), outputs.device)
        total = losses.new_zeros((len(losses), split.num_clients)).index_add_(1, index, losses)  # in row order
        return torch.nn.functional.one_hot(total.argmin(0), self.num_clusters).float()

    def fit_weights(self, outputs: torch.Tensor, split: Split) -> torch.Tensor | np.ndarray:
        """``test_weights`` fitted on the rows of ``split`` in its ``fit`` mask only (engine.holdout), so that a
        test client's cluster choice is not made on the labels it is scored on (all rows without a mask)."""
        if split.fit is None:
            return self.test_weights(outputs, split)
        return self.test_weights(outputs[:, to_device(split.fit, outputs.device)], split.rows(split.fit))

    def prediction(self, split: Split, participating: bool) -> tuple[torch.Tensor, torch.Tensor | np.ndarray]:
        """What to predict with (the one evaluation hook): [K', N, out] outputs on every sample of ``split`` and the
        [clients, K'] weights that mix them. Here the K models with Ω rows (val: the clients trained) or
        ``fit_weights`` (test clients)."""
        return self.omega_prediction(split, self.omega) if participating else self.test_prediction(split)

    body_shared = False  # True: the K models share one feature extractor (``body.*`` stored once)

    def outputs(self, x: torch.Tensor, models: Params | None = None) -> torch.Tensor:
        """[K, N, out] outputs of the K models (inference-optimised)."""
        return self._forward(self.models if models is None else models, x, self.body_shared)

    def chosen_outputs(self, split: Split, cluster: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Each client's rows through its ``cluster``'s model alone (CPU): [1, N, out] with weight 1, the Ω-mix of a
        one-hot Ω without running the other K − 1 models on every row."""
        outputs = self._forward.chosen(self.models, split.x, np.asarray(cluster)[split.owner()], self.body_shared)
        return outputs, torch.ones(split.num_clients, 1, device=split.x.device)

    def omega_prediction(self, split: Split, omega: np.ndarray) -> tuple[torch.Tensor, torch.Tensor | np.ndarray]:
        """Clients mixing the K models with Ω rows ``omega``; on the CPU, when every row is one-hot (a hard method),
        each client's own model only (:meth:`chosen_outputs`: the same predictions, 1/K of the work)."""
        if inference.row_budget(split.x.device) is None and one_hot_rows(omega):
            return self.chosen_outputs(split, on_host(omega).argmax(1))
        return self.outputs(split.x), omega

    def test_prediction(self, split: Split) -> tuple[torch.Tensor, torch.Tensor | np.ndarray]:
        """Test clients, weighted by ``fit_weights``. On the CPU with a ``fit`` mask (engine.holdout) the K models
        run on the rows that choose the weights only (with K > 1); when the choice is hard, each client's other rows
        run its chosen model alone (:meth:`chosen_outputs`), otherwise the K models run on them too."""
        if inference.row_budget(split.x.device) is not None or split.fit is None or self.num_clusters == 1:
            outputs = self.outputs(split.x)
            return outputs, self.fit_weights(outputs, split)
        fit = np.asarray(split.fit, dtype=bool)
        fit_rows, other_rows = torch.as_tensor(np.flatnonzero(fit)), torch.as_tensor(np.flatnonzero(~fit))
        fitted = self.outputs(split.x[fit_rows])
        weights = self.test_weights(fitted, split.rows(fit))
        if one_hot_rows(weights):
            return self.chosen_outputs(split, on_host(weights).argmax(1))
        outputs = fitted.new_empty((len(fitted), len(split.x), *fitted.shape[2:]))
        outputs[:, fit_rows] = fitted
        outputs[:, other_rows] = self.outputs(split.x[other_rows])
        return outputs, weights

    def predict(self, split: Split, participating: bool) -> torch.Tensor:
        """Mixed predictions Σ_k w_{i;k} p_k(x) for every sample of ``split`` from :meth:`prediction`."""
        outputs, weights = self.prediction(split, participating)
        w = to_device(weights, outputs.device, torch.float32)
        return mix_predictions(outputs, w, split.owner(), self.ctx.fed.task)

    def saved_fields(self) -> tuple[str, ...]:
        """The attributes a checkpoint holds: ``saved`` of every class along the bases, base first."""
        names: list[str] = []
        for cls in reversed(type(self).__mro__):
            names += [n for n in vars(cls).get("saved", ()) if n not in names]
        return tuple(names)

    def _saved_split(self) -> tuple[dict[str, str], list[str]]:
        """The saved attributes as (entry -> path in the cluster state, the method's own attributes)."""
        state_keys: dict[str, str] = {}
        own: list[str] = []
        for name in self.saved_fields():
            attr = getattr(type(self), name, None)
            if isinstance(attr, StateField) and attr.path is not None:
                state_keys[name] = attr.path
            else:
                own.append(name)
        return state_keys, own

    def state_dict(self) -> dict[str, Any]:
        state_keys, own = self._saved_split()
        return {**self.state.save(state_keys), **{name: saved(getattr(self, name)) for name in own}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state_keys, own = self._saved_split()
        self.state.load(state, state_keys)
        for name in own:
            if name in state:
                setattr(self, name, restored(getattr(self, name), state[name]))
        for name, default in self.saved_defaults.items():
            if name not in state:
                setattr(self, name, default(self))
        self.after_load()

    def after_load(self) -> None:
        """Hook: what follows from the loaded attributes (caches dropped, derived values recomputed)."""
        return None

    def state_problem(self, state: dict[str, Any], rounds: int) -> str | None:
        """What is wrong with the values of a saved state whose structure fits this run (a cluster position past
        the models, a per-cluster list of another length, a counter past the ``rounds`` the checkpoint has run,
        ...), as one phrase; None when nothing is. Called on resume before :meth:`load_state_dict`; methods with
        such values extend it."""
        return None

    def client_sizes(self, clients: np.ndarray) -> torch.Tensor:
        return to_device(self.ctx.fed.train.sizes[clients], self.ctx.device, torch.float64)


def one_hot_rows(weights: np.ndarray | torch.Tensor) -> bool:
    """Whether every row of ``weights`` (on the host or the CPU) is one-hot: a hard assignment."""
    w = on_host(weights)
    return w.ndim == 2 and bool(((w == 0) | (w == 1)).all() and (w.sum(1) == 1).all())


def on_host(weights: np.ndarray | torch.Tensor) -> np.ndarray:
    """``weights`` as a NumPy array (a tensor copied to the host first)."""
    return weights.cpu().numpy() if isinstance(weights, torch.Tensor) else np.asarray(weights)
