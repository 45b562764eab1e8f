"""Every size-like key has a documented upper bound, refused in one line before anything is allocated."""

from __future__ import annotations

import dataclasses
import io
import operator
import typing
from contextlib import redirect_stderr, redirect_stdout

import pytest

from fedcluster.app.cli import main
from fedcluster.catalog.registry import ALGORITHMS, MODELS, SCENARIOS
from fedcluster.config.bounds import PARAM_BOUNDS, RUN_BOUNDS
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.errors import ConfigError

SECTIONS = (("algorithm", ALGORITHMS), ("scenario", SCENARIOS), ("model", MODELS))


def _holder(param: str) -> tuple[str, str, object]:
    """(section, registered name, field default) of the first registered entry with the whole-number parameter
    ``param`` (another entry's parameter of that name may hold other numbers: rotation's angle ``groups``)."""
    for section, registry in SECTIONS:
        for entry in registry:
            if entry.params is not None:
                for f in dataclasses.fields(entry.params):
                    if f.name == param and _whole_numbers(typing.get_type_hints(entry.params)[f.name]):
                        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
                        return section, entry.name, default
    raise AssertionError(f"no registered parameter {param!r}: drop it from PARAM_BOUNDS")


def _over(default: object, bound: int) -> object:
    return [bound + 1] if isinstance(default, list | tuple) else bound + 1


@pytest.mark.parametrize("key", list(RUN_BOUNDS))
def test_a_run_key_above_its_bound_is_refused(key: str) -> None:
    with pytest.raises(ConfigError, match=f"{key}=.*upper bound"):
        resolve(load_raw(None, [f"{key}={RUN_BOUNDS[key] + 1}"]))
    resolve(load_raw(None, [f"{key}={min(RUN_BOUNDS[key], 2)}"]))


@pytest.mark.parametrize("param", sorted(PARAM_BOUNDS))
def test_a_parameter_above_its_bound_is_refused(param: str) -> None:
    section, name, default = _holder(param)
    value = _over(default, PARAM_BOUNDS[param])
    text = str(value).replace(" ", "")
    with pytest.raises(ConfigError, match=param):  # the bound, or the method's own range check before it
        resolve(load_raw(None, [f"{section}={name}", f"{section}.{param}={text}"]))


def _whole_numbers(annotation: object) -> bool:
    """Whether a parameter's type holds whole numbers: int, int | None, list[int], list[list[int]] (not bool)."""
    if annotation is int:
        return True
    return any(_whole_numbers(a) for a in typing.get_args(annotation)) and typing.get_origin(annotation) is not \
        typing.Literal


def _capped(f: dataclasses.Field) -> bool:
    """Whether the field's declared range (fedcluster.config.ranges) has an upper end."""
    allowed = f.metadata.get("range")
    return allowed is not None and any(test in (operator.le, operator.lt, operator.eq) for test, _ in allowed.tests)


def test_every_whole_number_parameter_of_every_registered_entry_has_an_upper_bound() -> None:
    """A loop count or an allocation size without a bound runs for ever or asks for terabytes on a typo."""
    unbounded = [f"{section}={entry.name} {section}.{f.name}" for section, registry in SECTIONS for entry in registry
                 if entry.params is not None for f in dataclasses.fields(entry.params)
                 if _whole_numbers(typing.get_type_hints(entry.params)[f.name]) and f.name not in PARAM_BOUNDS
                 and not _capped(f)]
    assert not unbounded, f"add these to fedcluster.config.bounds.PARAM_BOUNDS: {unbounded}"


@pytest.mark.parametrize("param", ["personal_lr", "beta", "lam"])
def test_a_method_rate_past_float32_is_refused_up_front(param: str) -> None:
    with pytest.raises(ConfigError, match=f"algorithm.{param}=1e\\+300 is beyond the float32 range"):
        resolve(load_raw(None, ["algorithm=pfedme", f"algorithm.{param}=1e300"]))


def _cli(argv: list[str]) -> tuple[int, list[str]]:
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = int(e.code or 0)
    return rc, [ln for ln in err.getvalue().splitlines() if ln.strip()]


@pytest.mark.parametrize("argv", [
    ["run", "algorithm=fedgroup", "algorithm.pretrain_steps=1000000000", "rounds=1"],
    ["run", "algorithm=fedgwc", "algorithm.loss_sampling_size=10000000000", "rounds=1"],
    ["run", "rounds=1000000000000"],
    ["run", "algorithm=cgpfl", "algorithm.n_init=1000000000", "rounds=1"],
    ["run", "algorithm=wecfl", "algorithm.n_init=1000000000", "rounds=1"],
    ["run", "algorithm=lcfed", "algorithm.rank=1000000000", "rounds=1"],
    ["run", "algorithm=pfedme", "algorithm.inner_steps=1000000000", "rounds=1"],
    ["run", "algorithm=pfedme", "algorithm.personal_lr=1e300", "rounds=1"],
    ["run", "model=mlp", "model.hidden=[100000000]", "rounds=1"],
    ["reproduce", "s3-cflgp-lines", "--seeds", "1000000000"],
    ["flower", "node", "--superlink", "127.0.0.1:9092", "--partition-id", "0", "--insecure",
     "--connect-timeout", "inf"],
    ["flower", "node", "--superlink", "127.0.0.1:9092", "--partition-id", "0", "--insecure",
     "--connect-timeout", "nan"],
], ids=["pretrain_steps", "loss_sampling_size", "rounds", "cgpfl n_init", "wecfl n_init", "lcfed rank",
        "pfedme inner_steps", "pfedme personal_lr", "hidden", "seeds", "connect-timeout inf",
        "connect-timeout nan"])
def test_the_reported_oversized_requests_are_one_line(argv: list[str]) -> None:
    rc, lines = _cli(argv)
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("fedcluster: error:"), (rc, lines[-3:])
