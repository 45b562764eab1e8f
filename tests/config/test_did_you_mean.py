"""A mistyped key, name or choice gets the closest valid one as a suggestion (difflib), in its one-line error."""

from __future__ import annotations

import pytest

from fedcluster.app.cli import main
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.errors import ConfigError, did_you_mean


@pytest.mark.parametrize(("override", "suggestion"), [
    ("round=3", "did you mean 'rounds'?"),
    ("num_client=8", "did you mean 'num_clients'?"),
    ("algorithm=ifac", "did you mean 'ifca'?"),
    ("dataset=fashion-mnst", "did you mean 'fashion-mnist'?"),
    ("dataset=fmnst", "did you mean 'fashion-mnist'?"),  # near another spelling: the name it spells
    ("scenario=concept_swap", "did you mean 'concept-swap'?"),
    ("model=lenet", "did you mean"),
    ("algorithm.num_cluster=3", "did you mean 'algorithm.num_clusters'?"),
    ("algoritm.mu=0.1", "did you mean 'algorithm.mu'?"),
    ("engine=vectorised", "did you mean 'vectorized'?"),
])
def test_a_near_miss_is_suggested(override: str, suggestion: str) -> None:
    with pytest.raises(ConfigError) as e:
        resolve(load_raw(None, ["algorithm=ifca", override] if "num_cluster=" in override else [override]))
    assert suggestion in str(e.value)


def test_a_mistyped_section_of_a_file_is_suggested(tmp_path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("algorithm: fedprox\nalgoritm_params:\n  mu: 0.1\n")
    with pytest.raises(ConfigError, match="did you mean 'algorithm.mu'"):
        resolve(load_raw(config, []))


def test_nothing_close_gets_no_guess() -> None:
    assert did_you_mean("zzzz", ["rounds", "lr"]) == ""
    with pytest.raises(ConfigError) as e:
        resolve(load_raw(None, ["algorithm=nope"]))
    assert "did you mean" not in str(e.value) and "choose one of:" in str(e.value)


def test_the_cli_prints_the_suggestion_in_one_line(capsys) -> None:
    assert main(["run", "roudns=5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown key 'roudns'; did you mean 'rounds'? valid keys:" in err


@pytest.mark.parametrize(("alias", "name"), [("fmnist", "fashion-mnist"), ("fashion_mnist", "fashion-mnist"),
                                             ("cifar-10", "cifar10"), ("tinyimagenet", "tiny-imagenet")])
def test_a_data_set_spelt_as_papers_do_is_that_data_set(alias: str, name: str, capsys) -> None:
    assert resolve(load_raw(None, [f"dataset={alias}"]))[0].dataset == name  # run, config.yaml, cache: the name
    assert main(["list", alias]) == 0
    assert capsys.readouterr().out.startswith(f"dataset {name}:")


@pytest.mark.parametrize(("argv", "suggestion"), [
    (["rnu"], "did you mean 'run'?"), (["lsit"], "did you mean 'list'?"), (["sweeep", "x=1"], "did you mean 'sweep'?"),
    (["list", "fedcr"], "did you mean 'fedrc'?"), (["list", "algoritms"], "did you mean 'algorithms'?"),
    (["list", "fmnst"], "did you mean 'fashion-mnist'?"),
    (["reproduce", "--list", "--budget", "smal"], "did you mean 'small'?"),
])
def test_a_mistyped_subcommand_or_list_name_is_suggested(argv: list[str], suggestion: str, capsys) -> None:
    try:
        status = main(argv)
    except SystemExit as e:  # argparse's own mistakes end in exit()
        status = e.code
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and suggestion in err, err


def test_every_data_set_spelling_names_a_data_set_and_shadows_none() -> None:
    from fedcluster.catalog.registry import DATASETS

    assert DATASETS.aliases and all(name in DATASETS.names() for name in DATASETS.aliases.values())
    assert not set(DATASETS.aliases) & set(DATASETS.names())
