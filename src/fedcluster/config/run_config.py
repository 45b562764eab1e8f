"""Typed, validated run configuration: a YAML file plus ``key=value`` overrides.

Top-level keys are the fields of :class:`RunConfig`. ``algorithm.<name>``, ``scenario.<name>`` and
``model.<name>`` set the typed hyper-parameters of the chosen algorithm, scenario and model; they are
checked against the dataclass each registers. Values are parsed as YAML (``[a,b,c]`` lists, numbers,
booleans) and coerced to the declared type; every mistake raises :class:`ConfigError` naming the key
and the valid choices.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from fedcluster.catalog.registry import ALGORITHMS, DATASETS, MODELS, SCENARIOS, Registry
from fedcluster.config.bounds import FLOAT32_MAX, check_run_bounds
from fedcluster.config.validation import check_config, check_params, check_raw, hidden_character, read_config_file
from fedcluster.config.yaml_dialect import load_yaml
from fedcluster.errors import ConfigError, did_you_mean

SECTIONS = ("algorithm", "scenario", "model")
Source = str | Path | Mapping[str, Any] | None  # a YAML file, the same keys as a mapping, or None (the defaults)
MAX_CHUNK_MB = 2**30  # 1 PiB: more than any machine holds (a larger budget is no budget)
_FLOAT_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


@dataclass
class RunConfig:
    """Everything that defines a run. Defaults are the embedded demo."""

    algorithm: str = "fedavg"
    dataset: str = "digits"
    scenario: str = "concept-swap"
    model: str = "mlp"
    num_clients: int = 20
    clients_per_round: float = 1.0  # a fraction in (0, 1] (1 = every client) or a client count >= 2
    rounds: int = 60
    local_epochs: int = 1
    batch_size: int = 32
    drop_last: bool = False  # drop every epoch's short last batch (FedRC paper's code); smaller clients take no step
    lr: float = 0.1
    momentum: float = 0.0
    client_momentum: Literal["reset", "keep"] = "reset"  # keep: each client's momentum buffer across rounds
    weight_decay: float = 0.0
    global_lr: float = 1.0
    seed: int = 0
    data_seed: int | None = None  # defaults to seed
    data_dir: str | None = None
    test_fit: Literal["half", "all", "90-10"] = "half"  # test clients: fit on a share, score the rest (holdout)
    normalize: bool | None = None  # standardise image inputs per channel (data.normalize); None: dataset default
    out: str | None = None
    eval_every: int = 1
    eval_train: bool = False  # also score each client's own training data (rounds.csv train_acc)
    checkpoint_every: int = 10
    engine: Literal["auto", "dense", "vectorized", "sequential", "pool", "pool-vectorized", "unit-loop"] = "auto"
    workers: int = 2
    threads: int | None = None
    ranks: int = 1  # processes sharing each round's clients (torch.distributed); >1 starts them with torchrun
    device: Literal["auto", "cpu", "cuda"] = "auto"  # auto: CUDA when PyTorch sees a GPU
    precision: Literal["fp32", "bf16"] = "fp32"  # bf16: autocast forward/backward, fp32 weights and aggregation
    channels_last: bool = False  # CNNs, engine=sequential/pool: NHWC training (faster on the CPU, last bits differ)
    chunk_mb: float | None = None  # memory budget of one vectorised call (default: free accelerator memory)
    deterministic: bool = False  # CUDA: true = bitwise repeatable (slower kernels); the CPU always is
    progress: bool = True
    tracking: list[Literal["none", "mlflow", "tensorboard", "wandb"]] = field(default_factory=list)  # or [mlflow,wandb]
    tracking_uri: str | None = None  # MLflow tracking URI (default: sqlite:///RUNS/mlflow.db beside the run dir)
    tracking_experiment: str = "fedcluster"  # MLflow experiment name (W&B project)
    tensorboard_dir: str | None = None  # TensorBoard log dir (default: RUN_DIR/tensorboard)
    algorithm_params: dict[str, Any] = field(default_factory=dict)
    scenario_params: dict[str, Any] = field(default_factory=dict)
    model_params: dict[str, Any] = field(default_factory=dict)

    def cohort_size(self) -> int:
        c = self.clients_per_round
        return max(1, round(c * self.num_clients)) if c <= 1 else min(int(c), self.num_clients)

    def effective_data_seed(self) -> int:
        return self.seed if self.data_seed is None else self.data_seed

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for s in SECTIONS:
            d[s + "_params"] = dict(d[s + "_params"])
        return d


_TOP_FIELDS = {f.name: f for f in dataclasses.fields(RunConfig) if not f.name.endswith("_params")}
_REGISTRY_OF: dict[str, Registry[Any]] = {"algorithm": ALGORITHMS, "scenario": SCENARIOS, "model": MODELS}


def parse_value(text: str) -> Any:
    """Parse a command-line value: YAML scalars and ``[a,b,c]`` lists; ``1e-3`` is a float."""
    if hidden_character(text) is not None:  # kept whole for check_raw to refuse (YAML would read U+2028 as a break)
        return text
    number = text.strip()  # str.strip knows more whitespace (e.g. \x1f) than int() and float() do
    if _FLOAT_RE.match(number):
        if any(c in number for c in ".eE") or len(number) > 4000:  # Python refuses int() of > 4300 digits
            return float(number)
        return int(number)
    try:
        return load_yaml(text)
    except yaml.YAMLError:
        return text


def coerce(value: Any, hint: Any, key: str) -> Any:
    """Convert ``value`` to the type ``hint`` or raise a ConfigError that names ``key``."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in (a for a in args if a is not type(None)):
            try:
                return coerce(value, a, key)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[-1])
    if origin is Literal:
        if value not in args:
            hint = did_you_mean(str(value), map(str, args))
            raise ConfigError(f"{key}={value!r} is not valid;{hint} choose one of: {', '.join(map(str, args))}")
        return value
    if origin in (list, tuple) or hint in (list, tuple):
        if not isinstance(value, list | tuple):
            value = [value]
        inner = args[0] if args else Any
        return [coerce(v, inner, f"{key}[{i}]") for i, v in enumerate(value)]
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key} must be true or false, got {value!r}")
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
            raise ConfigError(f"{key} must be an integer, got {value!r}")
        return int(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key} must be a number, got {value!r}")
        return float(value)
    if hint is str:
        if isinstance(value, dict | list):
            raise ConfigError(f"{key} must be a string, got {value!r}")
        return str(value)
    return value


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def build_params(cls: type | None, values: dict[str, Any], section: str, name: str) -> Any:
    """Instantiate a registered hyper-parameter dataclass from raw values, validating every key."""
    if cls is None:
        if values:
            raise ConfigError(f"{section} {name!r} takes no parameters, got: {', '.join(values)}")
        return None
    hints = _hints(cls)
    valid = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for k, v in values.items():
        if k not in valid:
            hint = did_you_mean(f"{section}.{k}", [f"{section}.{n}" for n in valid])
            raise ConfigError(
                f"unknown key {section}.{k} for {section} {name!r};{hint} valid keys: "
                + (", ".join(f"{section}.{n}" for n in valid) or "none")
            )
        kwargs[k] = coerce(v, hints[k], f"{section}.{k}")
    try:
        params = cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{section} {name!r}: {e}") from None
    return params


def params_to_dict(params: Any) -> dict[str, Any]:
    return {} if params is None else dataclasses.asdict(params)


def _apply(raw: dict[str, Any], key: str, value: Any) -> None:
    head, _, rest = key.partition(".")
    if rest:
        if head not in SECTIONS:
            hint = did_you_mean(key, [f"{s}.{rest}" for s in SECTIONS])
            raise ConfigError(f"unknown key {key!r}:{hint} only {', '.join(SECTIONS)} take dotted sub-keys")
        raw.setdefault(head + "_params", {})[rest] = value
    else:
        raw[key] = value


def load_raw(path: str | Path | None, overrides: list[str]) -> dict[str, Any]:
    """Merge a YAML file (nested sections allowed) and ``key=value`` overrides into flat raw values."""
    raw: dict[str, Any] = {}
    if path is not None:
        from fedcluster.config.shipped import locate

        merge_mapping(raw, read_config_file(locate(path)))  # configs/NAME.yaml: the shipped copy if not here
    from_file = {s: (raw.get(s), dict(p) if isinstance(p := raw.get(s + "_params"), dict) else {}) for s in SECTIONS}
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"argument {item!r} is not of the form key=value (e.g. rounds=50)")
        key = key.strip(" ")  # spaces only: str.strip would also drop invisible separators (U+2028, ...)
        try:
            value = parse_value(text)
        except ConfigError as e:
            raise ConfigError(f"{key if key.isprintable() else repr(key)}: {e}") from None
        _apply(raw, key, value)
    if path is not None:
        _drop_foreign_file_params(raw, from_file)
    return raw


def _drop_foreign_file_params(raw: dict[str, Any], from_file: dict[str, tuple[Any, dict[str, Any]]]) -> None:
    """``configs/x.yaml algorithm=ifca``: the file's parameters of its own algorithm (scenario, model) that the
    newly chosen one does not take are dropped with a note; shared ones (e.g. num_clusters) carry over."""
    from fedcluster.config.notes import note

    for section, (file_name, file_params) in from_file.items():
        name = raw.get(section)
        if file_name is None or name == file_name or not file_params:
            continue
        try:
            cls = _REGISTRY_OF[section].get(str(name)).params
        except ConfigError:
            continue  # an unknown name: resolve() says so
        valid = {f.name for f in dataclasses.fields(cls)} if cls is not None else set()
        params = raw.get(section + "_params", {})
        dropped = [k for k, v in file_params.items() if k not in valid and params.get(k) is v]
        for k in dropped:
            del params[k]
        if dropped:
            note(f"{section}={name} replaces the file's {section} {file_name!r}: its "
                 f"{', '.join(f'{section}.{k}' for k in dropped)} do not apply and were dropped")


def merge_mapping(raw: dict[str, Any], data: dict[str, Any]) -> None:
    """Merge a YAML-style mapping into flat raw values. Three spellings of a section are accepted:
    ``algorithm: fedprox`` with ``algorithm.mu: 0.1``; the nested ``algorithm: {name: fedprox, mu: 0.1}``
    (``name`` optional: parameters only); and ``algorithm_params: {mu: 0.1}`` (what config.yaml holds)."""
    for k, v in data.items():
        key = str(k)
        if key.endswith("_params") and isinstance(v, dict):
            for sk, sv in v.items():
                _apply(raw, f"{key[:-7]}.{sk}", sv)
        elif key in SECTIONS and isinstance(v, dict):
            for sk, sv in v.items():
                _apply(raw, key if sk == "name" else f"{key}.{sk}", sv)
        else:
            _apply(raw, key, v)


def read(source: Source, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Flat raw values of a configuration given as the library takes it: a YAML path, a mapping with the same keys
    (nested sections or dotted keys) or None, with ``overrides`` (the same keys) winning."""
    if source is None or isinstance(source, Mapping):
        raw: dict[str, Any] = {}
        merge_mapping(raw, plain(dict(source or {})))
    elif isinstance(source, str | Path):
        raw = load_raw(source, [])
    else:
        raise ConfigError(f"a configuration is a YAML path, a mapping or None, got {type(source).__name__}")
    merge_mapping(raw, plain(dict(overrides)))
    return raw


def load(source: Source = None, overrides: Mapping[str, Any] | None = None) -> tuple[RunConfig, dict[str, Any]]:
    """The validated :class:`RunConfig` and the typed algorithm/scenario/model parameters of a configuration."""
    return resolve(read(source, overrides or {}))


def plain(value: Any) -> Any:
    """``value`` with NumPy scalars (``np.int64(4)``, ``np.float32(0.1)``, ``np.bool_``) as Python numbers, in
    mappings and lists too: they are what a user's NumPy code passes."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return value.item()
    return value


def resolve(raw: dict[str, Any]) -> tuple[RunConfig, dict[str, Any]]:
    """Validate raw values; return the config and the typed params of algorithm, scenario and model."""
    check_raw(raw)
    hints = _hints(RunConfig)
    kwargs: dict[str, Any] = {}
    for k, v in raw.items():
        if k.endswith("_params"):
            continue
        if k not in _TOP_FIELDS:
            raise ConfigError(f"unknown key {k!r};{did_you_mean(k, _TOP_FIELDS)} valid keys: "
                              f"{', '.join(sorted(_TOP_FIELDS))}, "
                              "and algorithm.<name>, scenario.<name>, model.<name>")
        kwargs[k] = coerce(v, hints[k], k)
    if "dataset" in kwargs:  # another spelling of a data set's name (dataset=fmnist) is that data set
        kwargs["dataset"] = DATASETS.canonical(kwargs["dataset"])
    cfg = RunConfig(**kwargs)
    _check_ranges(cfg)
    check_config(cfg)
    typed = {}
    for section in SECTIONS:
        name = getattr(cfg, section)
        entry = _REGISTRY_OF[section].get(name)
        params = build_params(entry.params, raw.get(section + "_params", {}), section, name)
        typed[section] = params
        setattr(cfg, section + "_params", params_to_dict(params))
        check_params(section, getattr(cfg, section + "_params"))
    DATASETS.get(cfg.dataset)
    return cfg, typed


def _check_ranges(cfg: RunConfig) -> None:
    positive = ("num_clients", "rounds", "local_epochs", "batch_size", "eval_every", "checkpoint_every",
                "workers", "ranks")
    for k in positive:
        if getattr(cfg, k) < 1:
            raise ConfigError(f"{k} must be >= 1, got {getattr(cfg, k)}")
    if cfg.clients_per_round <= 0:
        raise ConfigError(f"clients_per_round must be a fraction in (0, 1] or a count >= 2, "
                          f"got {cfg.clients_per_round}")
    if cfg.clients_per_round > 1 and cfg.clients_per_round != int(cfg.clients_per_round):
        raise ConfigError(f"clients_per_round={cfg.clients_per_round}: a count must be an integer")
    for k in ("lr", "global_lr"):
        if getattr(cfg, k) <= 0:
            raise ConfigError(f"{k} must be > 0, got {getattr(cfg, k)}")
    for k in ("momentum", "weight_decay"):
        if getattr(cfg, k) < 0:
            raise ConfigError(f"{k} must be >= 0, got {getattr(cfg, k)}")
    for k in ("lr", "global_lr", "momentum", "weight_decay"):  # training computes in float32
        if not getattr(cfg, k) <= FLOAT32_MAX:
            raise ConfigError(f"{k}={getattr(cfg, k):g} is beyond the float32 range training computes in "
                              f"(about 3.4e38): give a smaller {k}")
    if cfg.threads is not None and cfg.threads < 1:
        raise ConfigError(f"threads must be >= 1, got {cfg.threads}")
    if cfg.chunk_mb is not None and not 0 < cfg.chunk_mb <= MAX_CHUNK_MB:
        raise ConfigError(f"chunk_mb must be a positive number of MiB up to {MAX_CHUNK_MB} (1 PiB), got {cfg.chunk_mb}")
    check_run_bounds(cfg)


def dump_config(cfg: RunConfig) -> str:
    """The fully resolved config as YAML (sections nested), loadable again with ``load_raw``."""
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)
