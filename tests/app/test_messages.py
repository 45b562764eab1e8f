"""Messages that read right: a multi-line "not found" message as one readable line, singular counts, the
Tiny-ImageNet folder a missing ``val/`` is in, ``init --force``."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedcluster.app.cli import main, one_line
from fedcluster.data.federation import _count
from fedcluster.data.sources.base import DatasetNotFoundError
from fedcluster.data.sources.tiny_imagenet import locate


def test_a_multi_line_message_becomes_one_line_with_its_parts_apart() -> None:
    e = DatasetNotFoundError("mnist", [Path("/d")], ["train-images-idx3-ubyte", "t10k-images-idx3-ubyte"],
                             "download them")
    line = one_line(str(e))
    assert "\n" not in line
    assert line == ("mnist not found. Looked in: /d; Expected these files there: train-images-idx3-ubyte, "
                    "t10k-images-idx3-ubyte; To get them: download them")


def test_counts_of_one_are_singular() -> None:
    assert (_count(1, "test client"), _count(3, "concept"), _count(1, "class", "classes"),
            _count(10, "class", "classes")) == ("1 test client", "3 concepts", "1 class", "10 classes")


def test_a_missing_val_folder_is_named_in_the_copy_that_lacks_it(tmp_path: Path) -> None:
    copy = tmp_path / "tiny-imagenet-200"
    (copy / "train").mkdir(parents=True)
    (copy / "wnids.txt").write_text("n01443537\n")
    with pytest.raises(DatasetNotFoundError) as caught:
        locate(tmp_path)
    assert f"Incomplete copy in {copy}; missing: val" in str(caught.value)


def test_init_force_replaces_the_configs_already_there(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path)]) == 0
    demo = tmp_path / "configs" / "demo.yaml"
    shipped = demo.read_text()
    demo.write_text("rounds: 1\n")
    assert main(["init", str(tmp_path)]) == 0 and demo.read_text() == "rounds: 1\n"
    assert "--force" in capsys.readouterr().out
    assert main(["init", str(tmp_path), "--force"]) == 0 and demo.read_text() == shipped


def test_list_natural_says_where_the_permutation_map_is(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "natural"]) == 0
    assert "fedrc, hcfl-beta or shift (permutation: concept-swap only)" in capsys.readouterr().out
