"""Parameter ranges are declared on the field (``ranged``) and checked in one place: every declared range of every
registered method refuses a value just outside it with one line naming the key, a subclass that changes a
field's default keeps its parent's range, and the command line turns the refusal into a one-line error."""

from __future__ import annotations

import dataclasses
import operator
from pathlib import Path

import pytest

from fedcluster.app.cli import main
from fedcluster.catalog.registry import ALGORITHMS, load_builtins
from fedcluster.config.ranges import Range, check_ranges, parse_range, ranged

_OUTSIDE = {operator.ge: -1, operator.gt: 0, operator.le: 1, operator.lt: 0, operator.eq: 1}


def _params_classes() -> list[type]:
    load_builtins()
    ALGORITHMS.load_all()
    return [e.params for e in ALGORITHMS.registered() if e.params is not None]


def _ranges(cls: type) -> dict[str, Range]:
    return {f.name: f.metadata["range"] for f in dataclasses.fields(cls) if "range" in f.metadata}


def test_each_range_form_reads_as_written() -> None:
    cases = {">= 0": (0, -1), "> 1": (1.5, 1), "< 2": (1, 2), "<= 2": (2, 2.5), "[0, 1)": (0, 1), "(0, 1]": (1, 0),
             "[-1, 1]": (-1, -1.5), "1..10": (10, 11), "== 1": (1, 2)}
    for spec, (inside, outside) in cases.items():
        allowed = parse_range(spec)
        assert allowed.holds(inside) and not allowed.holds(outside), spec
    assert parse_range("[0, 1)").message("floor", 2.0) == "floor must be in [0, 1), got 2.0"
    assert parse_range("== 1", "one global model").message("num_clusters", 3) == \
        "num_clusters must be 1 (one global model), got 3"
    with pytest.raises(ValueError, match="unknown range"):
        parse_range("positive")


def test_a_value_outside_any_declared_range_is_refused_in_one_line() -> None:
    checked = 0
    for cls in _params_classes():
        for name, allowed in _ranges(cls).items():
            for test, bound in allowed.tests:
                value = bound + _OUTSIDE[test]
                field_type = next(f.type for f in dataclasses.fields(cls) if f.name == name)
                value = int(value) if str(field_type).startswith("int") else float(value)
                with pytest.raises(ValueError) as err:
                    cls(**{name: value})
                text = str(err.value)
                assert text.startswith(f"{name} must be ") and "\n" not in text, (cls.__name__, text)
                checked += 1
    assert checked > 60  # every method's declared ranges, both ends of the two-sided ones


def test_a_subclass_that_changes_a_default_keeps_the_parents_range() -> None:
    for cls in _params_classes():
        own = _ranges(cls)
        for base in cls.__mro__[1:]:
            if dataclasses.is_dataclass(base):
                lost = set(_ranges(base)) - set(own)
                assert not lost, f"{cls.__name__} redefines {sorted(lost)} without the range of {base.__name__}"


def test_none_is_unset_and_passes() -> None:
    @dataclasses.dataclass
    class P:
        cap: int | None = ranged(None, ">= 1")

    check_ranges(P())
    with pytest.raises(ValueError, match="cap must be >= 1, got 0"):
        check_ranges(P(0))


def test_the_command_line_names_the_key_and_its_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", "algorithm=cfl", "algorithm.tol1=-1", "rounds=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "tol1 must be >= 0, got -1.0" in err and len(err.splitlines()) == 1, err
