"""Text that documents the configuration: ``fedcluster run --help`` (every run key with its type, default and
meaning) and ``fedcluster list NAME`` (the typed hyper-parameters of one algorithm, scenario, model or
data set).

Both are generated from the dataclasses themselves, so they cannot drift: run keys from
:class:`fedcluster.config.run_config.RunConfig` plus :data:`RUN_KEY_DOCS` (a test checks every field has a line),
hyper-parameters from the registered dataclasses and the comment that ends each field's line.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import re
import textwrap
import tokenize
import types
import typing
from typing import Any, Literal

from fedcluster.config.value_text import value_text

RUN_KEY_DOCS: dict[str, str] = {
    "algorithm": "method to run (`fedcluster list algorithms`; its parameters: algorithm.<name>=value)",
    "dataset": "data source (`fedcluster list datasets`); image sets other than digits read data_dir=",
    "scenario": "how the data is split into clients and shifted (`fedcluster list scenarios`; scenario.<name>=)",
    "model": "network (`fedcluster list models`; model.<name>=value, e.g. model.hidden=[128])",
    "num_clients": "participating clients M (some scenarios fix their own population)",
    "clients_per_round": "clients sampled per round: a fraction in (0, 1] (1 = every client) or a count >= 2",
    "rounds": "communication rounds T",
    "local_epochs": "local epochs E per round",
    "batch_size": "local mini-batch size",
    "drop_last": "drop each local epoch's short last batch, as PyTorch's drop_last (a client with fewer samples "
                 "than batch_size takes no step)",
    "lr": "local SGD step size η",
    "momentum": "local SGD momentum (reset every round unless client_momentum=keep)",
    "client_momentum": "keep: every client keeps its SGD momentum buffer across rounds, one per cluster model it "
                       "trains, as the FedRC paper's code does (memory: one model's parameters per such pair, on the "
                       "run's device; engine=dense, vectorized or sequential); reset: a zero buffer every round",
    "weight_decay": "local L2 weight decay",
    "global_lr": "server step size on the averaged update (1 = plain averaging)",
    "seed": "seed of the partition, participation, initialisation and batch order",
    "data_seed": "seed of the federation only (null = seed): vary training with the data fixed",
    "data_dir": "folder of the data set files (nothing is downloaded)",
    "test_fit": "test clients fit their cluster weights on half their samples, scored on the rest (all: on all; 90-10: "
                "fit on 90 %, scored on 10 %)",
    "normalize": "standardise image inputs per channel (null = the data set's default: images but digits)",
    "out": "run directory (null = runs/<time>-<algorithm>-<scenario>/)",
    "eval_every": "evaluate every this many rounds (and always at the last round)",
    "eval_train": "also score every client on its own training data at each evaluation (rounds.csv train_acc; "
                  "costs one more prediction pass over the training data)",
    "checkpoint_every": "write checkpoint.pt every this many rounds (for `fedcluster resume`)",
    "engine": "local-training path; auto = dense for linear/MLP, pool for CNNs on the CPU; on a GPU vectorized, "
              "or unit-loop (units one by one, dense convolutions, CUDA graphs) for large models such as "
              "ResNet-18 and MobileNet-V2 (all give the same models)",
    "workers": "worker processes of the pool engines",
    "threads": "CPU threads of torch and of NumPy's BLAS during the run (null = their defaults: one per core)",
    "ranks": "processes sharing each round's clients (torch.distributed; >1 starts them with torchrun)",
    "device": "where the engine runs: auto = CUDA when PyTorch sees a GPU, else cpu",
    "precision": "fp32, or bf16 autocast of forward/backward (fp32 weights and aggregation)",
    "channels_last": "train convolution models in the channels-last (NHWC) memory format: faster steps on the CPU "
                     "(the FedRC paper's CNN: about 1.4x), results equal to the default's up to float rounding "
                     "(their last bits differ); engine=sequential or pool (what auto picks for a CNN on the CPU)",
    "chunk_mb": "memory budget of one vectorised call in MiB (null = from free accelerator memory)",
    "deterministic": "CUDA only (the CPU is always bitwise repeatable): false = fast (cuDNN autotuning, TF32 "
                     "convolutions); true = same seed, same GPU => same rounds.csv (deterministic kernels, slower)",
    "progress": "progress bars on stderr",
    "tracking": "also log to none, mlflow, tensorboard, wandb or a list [mlflow,tensorboard]",
    "tracking_uri": ("MLflow tracking URI (null = the environment's MLFLOW_TRACKING_URI if set, else "
                     "sqlite:///RUNS/mlflow.db, shared by the runs in the run directory's parent folder)"),
    "tracking_experiment": "MLflow experiment name (the W&B project with tracking=wandb)",
    "tensorboard_dir": "TensorBoard log folder (null = RUN_DIR/tensorboard)",
}


def type_name(hint: Any) -> str:
    """A short readable type: ``int``, ``float|null``, ``auto|dense|...`` for a Literal, ``list[int]``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is type(None):
        return "null"
    if origin is Literal:
        return "|".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return "|".join(type_name(a) for a in args)
    if origin in (list, tuple):
        return f"list[{type_name(args[0])}]" if args else "list"
    if hint is Any:
        return "any"
    return getattr(hint, "__name__", str(hint))


def default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _own_field_comments(cls: type) -> dict[str, str]:
    """field name -> the comment on the lines of its definition, for the fields ``cls`` itself defines."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    body = ast.parse(source).body[0]
    docs = {}
    for node in getattr(body, "body", []):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            lines = range(node.lineno, (node.end_lineno or node.lineno) + 1)
            text = " ".join(comments[n] for n in lines if n in comments)
            docs[node.target.id] = text.removeprefix("type: ignore[assignment]").strip()
    return docs


def field_docs(cls: type) -> dict[str, str]:
    """Every field's doc; a subclass that redefines a field without a comment keeps its parent's."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            docs.update({k: v for k, v in _own_field_comments(klass).items() if v})
    return docs


def field_rows(cls: type, prefix: str = "", docs: dict[str, str] | None = None) -> list[tuple[str, str, str, str]]:
    """(key, type, default, meaning) per field of the dataclass ``cls``."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls) if docs is None else docs
    rows = []
    for f in dataclasses.fields(cls):
        default = default_of(f)
        rows.append((prefix + f.name, type_name(hints[f.name]),
                     "(required)" if default is dataclasses.MISSING else value_text(default), docs.get(f.name, "")))
    return rows


def table(rows: typing.Sequence[tuple[str, ...]], indent: str = "  ") -> str:
    """Aligned columns; long types and defaults push the meaning onto the next line."""
    w_key = max(len(r[0]) for r in rows)
    w_type = max([len(r[1]) for r in rows if len(r[1]) <= 24] or [4])
    w_default = max([len(r[2]) for r in rows if len(r[2]) <= 14] or [4])
    out = []
    for key, kind, default, doc in rows:
        head = f"{indent}{key:<{w_key}}  {kind:<{w_type}}  {default:<{w_default}}"
        if len(kind) > w_type or len(default) > w_default:
            out.append(f"{indent}{key:<{w_key}}  {kind}  {default}")
            if not doc:
                continue
            head = " " * (len(indent) + w_key + w_type + w_default + 4)
        out.append(f"{head}  {doc}".rstrip())
    return "\n".join(out)


def run_keys_help() -> str:
    """The ``fedcluster run --help`` epilog: every RunConfig key."""
    from fedcluster.config.run_config import RunConfig

    fields = [f for f in dataclasses.fields(RunConfig) if not f.name.endswith("_params")]
    docs = {**field_docs(RunConfig), **RUN_KEY_DOCS}  # a key added with a trailing comment is documented too
    rows = [r for r in field_rows(RunConfig, docs=docs) if not r[0].endswith("_params")]
    assert len(rows) == len(fields)
    return ("keys (key=value; in a YAML file `key: value`):\n" + table(rows) + "\n\n"
            "plus algorithm.<name>=, scenario.<name>=, model.<name>= for the typed hyper-parameters of the chosen\n"
            "algorithm, scenario and model: `fedcluster list NAME` shows them (e.g. `fedcluster list fedrc`).\n"
            "Lists are written [a,b,c]; null means none. With no arguments `fedcluster run` runs the demo.")


TIERS_NOTE = ("tiers: the four choices of the HCFL paper's framework that make up a clustered method: 1 formulation "
              "(how likely a sample is under a cluster), 2 weighting (how much a client belongs to each), "
              "3 adaptation (when K changes), 4 distance (which clients are alike); docs/extending.md, "
              "\"How a method is put together\", explains each")
ParamsInfo = tuple[str | None, tuple[tuple[str, str, str, str], ...]] | None  # (class doc, rows) or no parameters


def params_info(params: type | None) -> ParamsInfo:
    """What ``fedcluster list NAME`` shows of a hyper-parameter dataclass: its own docstring (None when it has
    only the generated signature) and a (key, type, default, meaning) row per field."""
    if params is None:
        return None
    doc = inspect.getdoc(params)
    if doc is not None and doc.startswith(params.__name__ + "("):  # dataclass's generated signature
        doc = None
    return doc, tuple(field_rows(params))


def _entry_text(kind: str, name: str, description: str, info: ParamsInfo) -> str:
    text = f"{kind} {name}: {description}"
    if info is None:
        return text + ("\n  no parameters" if kind != "dataset" else "")
    doc, rows = info
    prefixed = [(f"{kind}.{key}", *rest) for key, *rest in rows]
    return (text + ("" if doc is None else "\n" + textwrap.indent(doc, "  ")) +
            f"\n  parameters ({kind}.<name>=value):\n" + table(prefixed, "    "))


def describe_name(name: str) -> str:
    """Everything registered under ``name`` (a name can be both a data set and a scenario).

    A built-in name whose module is not imported yet is described from the generated
    :mod:`fedcluster.catalog.param_tables` (no torch, no scikit-learn); anything loaded or registered at run time
    from its live dataclass."""
    from fedcluster.catalog.papers import references
    from fedcluster.catalog.param_tables import PARAMS
    from fedcluster.catalog.registry import REGISTRIES
    from fedcluster.errors import UserError, did_you_mean

    parts = []
    for registry in REGISTRIES.values():
        if name not in registry:
            continue
        name = registry.canonical(name)
        static = PARAMS.get(registry.kind, {})
        if not registry.is_loaded(name) and name in static:
            parts.append(_entry_text(registry.kind, name, registry.descriptions()[name], static[name]))
        else:
            entry = registry.get(name)
            parts.append(_entry_text(registry.kind, name, entry.description, params_info(entry.params)))
    if not parts:
        kinds = ", ".join(REGISTRIES)
        every = [*REGISTRIES, *(n for registry in REGISTRIES.values() for n in registry.names())]
        aliases = {a: n for registry in REGISTRIES.values() for a, n in registry.aliases.items()}
        raise UserError(f"nothing is registered as {name!r};{did_you_mean(name, every, aliases)} `fedcluster list` "
                        f"shows every name (or list one kind: {kinds})")
    text = "\n\n".join(parts)
    if re.search(r"\btiers? \d", text):
        text += "\n\n" + TIERS_NOTE
    cited = references(text, name if name in REGISTRIES["algorithms"] else None)
    return text + ("\n\n" + cited if cited else "")
