"""Config parsing, typing and validation."""

from __future__ import annotations

import pytest

from fedcluster.config.run_config import coerce, dump_config, load_raw, parse_value, resolve
from fedcluster.errors import ConfigError


def test_parse_value_types() -> None:
    assert parse_value("3") == 3 and parse_value("1e-3") == 0.001 and parse_value("0.5") == 0.5
    assert parse_value("[0,90,180]") == [0, 90, 180]
    assert parse_value("true") is True and parse_value("fedavg") == "fedavg"


def test_overrides_and_sections(tmp_path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("algorithm: fedprox\nrounds: 7\nalgorithm_params:\n  mu: 0.5\nmodel: mlp\n")
    cfg, typed = resolve(load_raw(f, ["rounds=9", "model.hidden=[64,32]", "scenario.alpha=0.3", "lr=1e-2"]))
    assert cfg.algorithm == "fedprox" and cfg.rounds == 9 and cfg.lr == 0.01
    assert typed["algorithm"].mu == 0.5 and typed["model"].hidden == [64, 32] and typed["scenario"].alpha == 0.3
    # the dumped config resolves to the same thing
    again = tmp_path / "again.yaml"
    again.write_text(dump_config(cfg))
    cfg2, _ = resolve(load_raw(again, []))
    assert cfg2 == cfg


@pytest.mark.parametrize(
    "override,needle",
    [
        ("algorithm=nope", "unknown algorithm 'nope'; choose one of:"),
        ("dataset=nope", "unknown dataset 'nope'"),
        ("model=nope", "unknown model 'nope'"),
        ("scenario=nope", "unknown scenario 'nope'"),
        ("roundz=3", "unknown key 'roundz'"),
        ("rounds=abc", "rounds must be an integer"),
        ("rounds=2.5", "rounds must be an integer"),
        ("num_clients=-4", "num_clients must be >= 1"),
        ("lr=0", "lr must be > 0"),
        ("algorithm.mu=1", "unknown key algorithm.mu for algorithm 'fedavg'"),
        ("algorithm.num_clusters=3", "num_clusters must be 1"),
        ("scenario.alpha=-1", "alpha"),
        ("engine=fast", "engine='fast' is not valid; choose one of: auto, dense, vectorized"),
        ("clients_per_round=2.5", "a count must be an integer"),
        ("nokey", "not of the form key=value"),
        ("foo.bar=1", "only algorithm, scenario, model take dotted sub-keys"),
    ],
)
def test_bad_values_name_the_problem(override: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=None) as e:
        resolve(load_raw(None, [override]))
    assert needle in str(e.value)


def test_missing_and_bad_files(tmp_path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_raw(tmp_path / "missing.yaml", [])
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_raw(bad, [])


def test_coerce_int_to_float_and_lists() -> None:
    assert coerce(1, float, "lr") == 1.0 and isinstance(coerce(1, float, "lr"), float)
    assert coerce(5, list[int], "x") == [5]
    with pytest.raises(ConfigError):
        coerce(True, int, "rounds")


def test_cohort_size() -> None:
    cfg, _ = resolve(load_raw(None, ["num_clients=50", "clients_per_round=0.1"]))
    assert cfg.cohort_size() == 5
    cfg, _ = resolve(load_raw(None, ["num_clients=50", "clients_per_round=7"]))
    assert cfg.cohort_size() == 7
    for every in ("1", "1.0"):
        cfg, _ = resolve(load_raw(None, ["num_clients=50", f"clients_per_round={every}"]))
        assert cfg.cohort_size() == 50


def test_overriding_the_files_algorithm_drops_only_what_the_new_one_lacks(tmp_path, capsys) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("algorithm: {name: cflgp, num_clusters: 4, period: 2}\nmodel: {name: mlp, hidden: 50}\n")
    cfg, typed = resolve(load_raw(f, ["algorithm=ifca", "model=logistic"]))
    assert cfg.algorithm == "ifca" and typed["algorithm"].num_clusters == 4  # shared key carries over
    err = capsys.readouterr().err
    assert "algorithm.period" in err and "model.hidden" in err and "dropped" in err
    with pytest.raises(ConfigError, match="algorithm.period"):  # given on the command line: still an error
        resolve(load_raw(f, ["algorithm=ifca", "algorithm.period=3"]))
    with pytest.raises(ConfigError, match="algorithm.bogus"):  # the file's own algorithm: still checked
        resolve(load_raw(f, ["algorithm.bogus=1"]))
