"""Property-based: every malformed config, override, YAML file and data file is refused with one line, exit 2.

Each case calls the CLI's ``main()`` in-process (a few real subprocesses at the end) and asserts: exit
status 2, exactly one line on stderr, starting ``fedcluster: error:``, naming the key or the file. The
default suite runs a few hundred cases; ``pytest -m slow`` runs the same properties with many more.
``CASES`` counts the cases actually run (printed by ``test_zz_report_case_count``).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import pickle
import string
import struct
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedcluster.app.cli import main
from fedcluster.config.run_config import RunConfig

CASES: Counter[str] = Counter()
FAST = settings(max_examples=100, deadline=None, derandomize=True,  # the same cases every run (MANY explores)
                 suppress_health_check=[HealthCheck.too_slow])
MANY = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RUN = ["run", "num_clients=4", "rounds=1", "progress=false"]
TOP_KEYS = {f.name for f in RunConfig.__dataclass_fields__.values()}


def rejected(argv: list[str], needle: str, family: str) -> str:
    """Run ``main(argv)``; assert exit 2 and one error line containing ``needle``; return the line."""
    err, out = io.StringIO(), io.StringIO()
    with redirect_stderr(err), redirect_stdout(out):
        try:
            rc = main(argv)
        except SystemExit as e:  # argparse's own usage errors (e.g. an argument that starts with '-')
            rc = e.code
    lines = err.getvalue().splitlines()
    assert rc == 2, (argv, rc, err.getvalue()[-2000:])
    assert len(lines) == 1 and lines[0].startswith("fedcluster: error: "), (argv, err.getvalue()[-2000:])
    assert needle in lines[0], (needle, lines[0])
    CASES[family] += 1
    return lines[0]


def both(fast_or_many: settings, *strategies: st.SearchStrategy, **kw: st.SearchStrategy) -> Callable:
    return lambda fn: settings(fast_or_many)(given(*strategies, **kw)(fn))


# -- key=value overrides ---------------------------------------------------------------------------------------
NON_FINITE = st.sampled_from(["nan", ".nan", "NaN", "inf", "-inf", ".inf", "-.inf", "1e400", "-1e999"]) | st.builds(
    lambda m, e: f"{m}e{e}", st.integers(1, 9), st.integers(309, 100_000))
FLOAT_KEYS = st.sampled_from([
    ([], "lr"), ([], "momentum"), ([], "global_lr"), ([], "weight_decay"), ([], "clients_per_round"),
    (["algorithm=fedprox"], "algorithm.mu"), (["algorithm=cfl"], "algorithm.tol1"),
    (["algorithm=cfl"], "algorithm.tol2"), (["algorithm=hcfl"], "algorithm.rho"),
    (["scenario=label-skew"], "scenario.alpha"), (["scenario=label-skew"], "scenario.val_fraction"),
])
INT_KEYS = ["num_clients", "rounds", "local_epochs", "batch_size", "eval_every", "checkpoint_every", "workers"]
IDENT = st.text(string.ascii_lowercase + string.digits + "_", min_size=1, max_size=12)


def override_case() -> st.SearchStrategy[tuple[list[str], str, str]]:
    """(extra argv, text that must appear in the error, family)."""
    non_finite = st.builds(lambda kv, v: ([*kv[0], f"{kv[1]}={v}"], kv[1], "non-finite"), FLOAT_KEYS, NON_FINITE)
    seeds = st.builds(lambda k, v: ([f"{k}={v}"], k, "seed range"), st.sampled_from(["seed", "data_seed"]),
                      st.integers(max_value=-1) | st.integers(min_value=2**32))
    not_positive = st.builds(lambda k, v: ([f"{k}={v}"], k, "int range"), st.sampled_from(INT_KEYS),
                             st.integers(max_value=0))
    not_int = st.builds(lambda k, v: ([f"{k}={v}"], k, "int type"), st.sampled_from(INT_KEYS),
                        st.sampled_from(["1.5", "abc", "[1, 2]", "{a: 1}", "true", "''", "0x"]))
    negative = st.builds(lambda k, v: ([f"{k}={v}"], k, "float range"),
                         st.sampled_from(["lr", "global_lr", "momentum", "weight_decay"]),
                         st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False).map(repr))
    section_scalar = st.builds(lambda s, v: ([f"{s}_params={v}"], f"{s}_params", "section not a mapping"),
                               st.sampled_from(["algorithm", "scenario", "model"]),
                               st.sampled_from(["3", "[1, 2]", "abc", "true", "1.5", "[]"]))
    unknown_section = st.builds(lambda n: ([f"{n}_params=3"], f"{n}_params", "unknown section"),
                                IDENT.filter(lambda n: n not in ("algorithm", "scenario", "model")))
    unknown_key = st.builds(lambda n, v: ([f"{n}={v}"], n, "unknown key"),
                            IDENT.filter(lambda n: n not in TOP_KEYS), st.integers())
    unknown_sub = st.builds(lambda s, n: ([f"{s}.{n}=1"], f"{s}.{n}", "unknown sub-key"),
                            st.sampled_from(["algorithm", "scenario", "model"]),
                            IDENT.filter(lambda n: n not in ("num_clusters", "hidden", "concepts")))
    bad_name = st.builds(lambda k, n: ([f"{k}={n}"], n, "unknown name"),
                         st.sampled_from(["algorithm", "scenario", "model", "dataset"]),
                         IDENT.filter(lambda n: n not in ("fedavg", "mlp", "digits", "cnn")).map(lambda n: "x" + n))
    bad_out = st.builds(lambda p: ([f"out={p}"], "out=", "bad out="),
                        st.sampled_from(["/dev/null", "/proc/x", "/proc/self/y", "/sys/z", "/dev/shm/../null"]))
    threads = st.builds(lambda v: ([f"threads={v}"], "threads", "threads range"), st.integers(max_value=0))
    return st.one_of(non_finite, seeds, not_positive, not_int, negative, section_scalar, unknown_section,
                     unknown_key, unknown_sub, bad_name, bad_out, threads)


def _check_override(case: tuple[list[str], str, str]) -> None:
    extra, needle, family = case
    rejected([*RUN, *extra], needle, family)


@both(FAST, override_case())
def test_bad_overrides_are_one_line(case: tuple[list[str], str, str]) -> None:
    _check_override(case)


@pytest.mark.slow
@both(MANY, override_case())
def test_bad_overrides_are_one_line_many(case: tuple[list[str], str, str]) -> None:
    _check_override(case)


@FAST
@given(st.text(min_size=1, max_size=30).filter(lambda k: "=" not in k and k.strip() not in TOP_KEYS),
       st.text(max_size=30))
def test_any_unknown_key_text_is_one_line(key: str, value: str) -> None:
    """Arbitrary unicode keys (control characters, dots, spaces): one line that says which key, no traceback."""
    line = rejected([*RUN, f"{key}={value}"], "", "unicode key")
    assert "key" in line or (key.startswith("-") and "argument" in line), line  # argparse: '-x' is an option


# -- YAML documents --------------------------------------------------------------------------------------------
SCALARS = st.one_of(st.integers(-5, 5), st.booleans(), st.text(string.ascii_letters, max_size=5),
                    st.floats(allow_nan=False, allow_infinity=False))


def yaml_case() -> st.SearchStrategy[tuple[bytes, str | None, str]]:
    """(file bytes, text the error must contain (None: the file name), family)."""
    good = st.dictionaries(st.sampled_from(["rounds", "lr", "seed"]), st.integers(1, 5), max_size=3)
    dump = lambda d: yaml.safe_dump(d).encode()  # noqa: E731
    odd_key = st.builds(lambda d, k, v: (dump({**d, k: v}), None, "non-string key"), good,
                        st.one_of(st.integers(), st.none(), st.booleans(), st.floats(allow_nan=False)), SCALARS)
    odd_sub_key = st.builds(lambda k: (dump({"algorithm_params": {k: 1}}), None, "non-string sub-key"),
                            st.one_of(st.integers(), st.none()))
    not_mapping = st.builds(lambda v: (dump(v), None, "not a mapping"),
                            st.lists(SCALARS, min_size=1, max_size=4) | st.text(string.ascii_letters, min_size=1)
                            | st.integers())
    syntax = st.builds(lambda d, bad, at: (_insert_line(dump(d), bad, at), "line ", "syntax"),
                       st.dictionaries(st.sampled_from(["rounds", "lr", "seed"]), st.integers(1, 5), min_size=1),
                       st.sampled_from([b"lr: [1, 2", b"\tseed: 1", b"rounds: {a: 1", b"- x", b"a: b: c",
                                        b"'unclosed: 1", b"lr: *nope", b"%YAML 9.9"]), st.integers(0, 3))
    non_utf8 = st.builds(lambda d, junk, at: (_insert_line(dump(d), b"note: " + junk, at), "UTF-8", "non-UTF-8"),
                         good, st.sampled_from([b"\xff", b"\xfe\xfe", b"\xc3\x28", b"\xe2\x82", b"\x80abc",
                                                b"\xf0\x28\x8c\x28"]), st.integers(0, 3))
    binary = st.builds(lambda b, at: (b[:at] + b"\x00" + b[at:], "binary", "binary"),
                       st.binary(max_size=200), st.integers(0, 200))
    bad_value = st.builds(lambda k, v: (f"{k}: {v}\n".encode(), k, "bad value in file"),
                          st.sampled_from(["lr", "momentum", "global_lr"]),
                          st.sampled_from([".nan", ".inf", "-.inf", "1e400", "-1", "abc", "[1]"]))
    bad_section = st.builds(lambda s, v: (f"{s}_params: {v}\n".encode(), f"{s}_params", "section in file"),
                            st.sampled_from(["algorithm", "scenario", "model"]), st.sampled_from(["3", "[1, 2]", "x"]))
    return st.one_of(odd_key, odd_sub_key, not_mapping, syntax, non_utf8, binary, bad_value, bad_section)


def _insert_line(doc: bytes, line: bytes, at: int) -> bytes:
    lines = doc.splitlines() if doc.strip() != b"{}" else []
    at = min(at, len(lines))
    return b"\n".join([*lines[:at], line, *lines[at:]]) + b"\n"


def _check_yaml(case: tuple[bytes, str | None, str]) -> None:
    data, needle, family = case
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "exp.yaml"
        path.write_bytes(data)
        line = rejected(["run", str(path), "progress=false", f"out={Path(d) / 'r'}"], needle or str(path), family)
        if family in ("syntax", "non-UTF-8", "binary", "non-string key", "not a mapping"):
            assert str(path) in line


@both(FAST, yaml_case())
def test_bad_yaml_files_are_one_line(case: tuple[bytes, str | None, str]) -> None:
    _check_yaml(case)


@pytest.mark.slow
@both(MANY, yaml_case())
def test_bad_yaml_files_are_one_line_many(case: tuple[bytes, str | None, str]) -> None:
    _check_yaml(case)


# -- data files ------------------------------------------------------------------------------------------------
MNIST = {"train_images": "train-images-idx3-ubyte", "train_labels": "train-labels-idx1-ubyte",
         "test_images": "t10k-images-idx3-ubyte", "test_labels": "t10k-labels-idx1-ubyte"}


def idx_bytes(a: np.ndarray, code: int = 0x08) -> bytes:
    dtype = {0x08: ">u1", 0x0D: ">f4", 0x0C: ">i4"}[code]
    return bytes([0, 0, code, a.ndim]) + struct.pack(f">{a.ndim}I", *a.shape) + a.astype(dtype).tobytes()


def good_mnist(n: int = 12, side: int = 6) -> dict[str, bytes]:
    rng = np.random.default_rng(0)
    return {
        MNIST["train_images"]: idx_bytes(rng.integers(0, 256, (n, side, side))),
        MNIST["train_labels"]: idx_bytes(np.arange(n) % 10),
        MNIST["test_images"]: idx_bytes(rng.integers(0, 256, (n // 2, side, side))),
        MNIST["test_labels"]: idx_bytes(np.arange(n // 2) % 10),
    }


def idx_corruption() -> st.SearchStrategy[tuple[str, bytes, bool, str]]:
    """(which file, its corrupted bytes, gzip it?, family); the result is never a valid file."""
    names = st.sampled_from(sorted(MNIST.values()))
    good = good_mnist()
    truncated = st.builds(lambda f, frac, gz: (f, good[f][: int(len(good[f]) * frac)], gz, "truncated"),
                          names, st.floats(0, 0.99), st.booleans())
    bad_magic = st.builds(lambda f, m, gz: (f, m + good[f][4:], gz, "bad magic"), names,
                          st.binary(min_size=4, max_size=4).filter(
                              lambda m: m[0] or m[1] or m[2] not in (8, 9, 11, 12, 13, 14)), st.booleans())
    bad_dims = st.builds(lambda f, dims, gz: (f, _with_dims(good[f], dims), gz, "bad header dims"), names,
                         st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=3), st.booleans())
    labels_out = st.builds(
        lambda f, v, gz: (f, idx_bytes(np.full(12 if "train" in f else 6, v)), gz, "labels out of range"),
        st.sampled_from([MNIST["train_labels"], MNIST["test_labels"]]), st.integers(10, 255), st.booleans())
    float_labels = st.builds(lambda f, gz: (f, idx_bytes(np.zeros(12 if "train" in f else 6), 0x0D), gz,
                                            "float labels"),
                             st.sampled_from([MNIST["train_labels"], MNIST["test_labels"]]), st.booleans())
    nan_images = st.builds(
        lambda f, bad, gz: (f, idx_bytes(np.full((12 if "train" in f else 6, 6, 6), bad, np.float32), 0x0D), gz,
                            "non-finite images"),
        st.sampled_from([MNIST["train_images"], MNIST["test_images"]]),
        st.sampled_from([np.nan, np.inf, -np.inf]), st.booleans())
    garbage_gz = st.builds(lambda f, junk: (f, b"\x1f\x8b" + junk, False, "garbage gzip"), names,
                           st.binary(max_size=300))
    bomb = st.builds(lambda f, extra: (f, gzip.compress(good[f] + bytes(extra)), False, "inflates beyond header"),
                     names, st.integers(1, 5_000_000))
    return st.one_of(truncated, bad_magic, bad_dims, labels_out, float_labels, nan_images, garbage_gz, bomb)


def _with_dims(data: bytes, dims: list[int]) -> bytes:
    ndim = data[3]
    new = struct.pack(f">{len(dims)}I", *dims)
    if len(dims) == ndim and new == data[4: 4 + 4 * ndim]:
        new = struct.pack(">I", dims[0] + 1) + new[4:] if dims[0] + 1 < 2**32 else struct.pack(">I", 0) + new[4:]
    return data[:3] + bytes([len(dims)]) + new + data[4 + 4 * ndim:]


def _check_idx(case: tuple[str, bytes, bool, str]) -> None:
    name, data, gz, family = case
    with tempfile.TemporaryDirectory() as d:
        for f, good in good_mnist().items():
            if f != name:
                (Path(d) / f).write_bytes(good)
        target = Path(d) / (name + ".gz" if gz else name)
        target.write_bytes(gzip.compress(data) if gz else data)
        rejected([*RUN, "dataset=mnist", f"data_dir={d}", f"out={Path(d) / 'r'}"], target.name, family)


@both(FAST, idx_corruption())
def test_corrupt_idx_files_are_one_line(case: tuple[str, bytes, bool, str]) -> None:
    _check_idx(case)


@pytest.mark.slow
@both(MANY, idx_corruption())
def test_corrupt_idx_files_are_one_line_many(case: tuple[str, bytes, bool, str]) -> None:
    _check_idx(case)


CIFAR_FILES = [*(f"data_batch_{i}" for i in range(1, 6)), "test_batch"]


def _cifar_batch(n: int = 4) -> dict[bytes, Any]:
    return {b"data": np.zeros((n, 3072), np.uint8), b"labels": list(range(n))}


def cifar_corruption() -> st.SearchStrategy[tuple[str, bytes, str]]:
    names = st.sampled_from(CIFAR_FILES)
    pk = lambda obj: pickle.dumps(obj, protocol=2)  # noqa: E731
    garbage = st.builds(lambda f, b: (f, b, "garbage pickle"), names, st.binary(max_size=400))
    truncated = st.builds(lambda f, frac: (f, pk(_cifar_batch())[: int(len(pk(_cifar_batch())) * frac)], "truncated"),
                          names, st.floats(0, 0.99))
    wrong_obj = st.builds(lambda f, o: (f, pk(o), "not a batch"), names,
                          st.sampled_from([[1, 2], {b"labels": [1]}, "text", 3, None, {"data": 1}]))
    bad_data = st.builds(lambda f, a: (f, pk({b"data": a, b"labels": [0] * len(a)}), "bad data array"), names,
                         st.sampled_from([np.zeros((2, 100), np.uint8), np.zeros((2, 3072), np.float32),
                                          np.full((2, 3072), np.nan, np.float64), np.zeros(3072, np.uint8)]))
    bad_labels = st.builds(lambda f, y: (f, pk({b"data": np.zeros((2, 3072), np.uint8), b"labels": y}), "bad labels"),
                           names, st.sampled_from([[10, 0], [-1, 0], [0], [0, 1, 2], ["a", "b"], [0.5, 1e30]]))
    foreign = st.builds(lambda f, o: (f, pk({b"data": np.zeros((1, 3072), np.uint8), b"labels": [0], b"x": o}),
                                      "disallowed global"), names, st.sampled_from([Path("/"), os.getcwd, print]))
    return st.one_of(garbage, truncated, wrong_obj, bad_data, bad_labels, foreign)


def _check_cifar(case: tuple[str, bytes, str]) -> None:
    name, data, family = case
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d) / "cifar-10-batches-py"
        folder.mkdir()
        for f in CIFAR_FILES:
            (folder / f).write_bytes(data if f == name else pickle.dumps(_cifar_batch(), protocol=2))
        rejected([*RUN, "dataset=cifar10", f"data_dir={d}", f"out={Path(d) / 'r'}"], str(folder / name), family)


@both(FAST, cifar_corruption())
def test_corrupt_cifar_batches_are_one_line(case: tuple[str, bytes, str]) -> None:
    _check_cifar(case)


@pytest.mark.slow
@both(MANY, cifar_corruption())
def test_corrupt_cifar_batches_are_one_line_many(case: tuple[str, bytes, str]) -> None:
    _check_cifar(case)


# -- invisible characters: NUL bytes, controls, line separators in keys and values, by every channel -----------
HIDDEN = st.sampled_from(["\x00", "\u2028", "\u2029", "\x85", "\u200b", "\ufeff", "\x1f", "\t", "\n", "\r",
                          "\u200e", "\x7f"])
TEXT_KEYS = st.sampled_from(["out", "tensorboard_dir", "tracking_uri", "tracking_experiment", "data_dir",
                             "scenario.maps"])


def hidden_case() -> st.SearchStrategy[tuple[str, str, Any]]:
    """(channel, key, value) with an invisible character in the key or the value."""
    in_value = st.builds(lambda k, a, c, b: (k, a + c + b), TEXT_KEYS, st.text(string.ascii_letters, max_size=4),
                         HIDDEN,
                         st.text(string.ascii_letters, max_size=4))
    in_key = st.builds(lambda k, c, front: (c + k if front else k + c, 2), st.sampled_from(["rounds", "lr", "seed"]),
                       HIDDEN.filter(lambda c: c not in "\t\n\r"), st.booleans())
    return st.builds(lambda ch, kv: (ch, *kv), st.sampled_from(["cli", "yaml", "api"]), in_value | in_key)


def _check_hidden(case: tuple[str, str, Any]) -> None:
    channel, key, value = case
    with tempfile.TemporaryDirectory() as d, contextlib.chdir(d):  # a run that `out=` sends nowhere stays in d
        if channel == "api":
            import fedcluster
            from fedcluster.errors import ConfigError

            with pytest.raises(ConfigError, match="invisible character|not of the form|unknown key"):
                fedcluster.load_config({key: value, "out": str(Path(d) / "r")} if key != "out" else {key: value})
            CASES["hidden api"] += 1
            return
        if channel == "yaml":
            import json

            (Path(d) / "c.yaml").write_text(f"{json.dumps(key)}: {json.dumps(value)}\nrounds: 1\n"
                                            if key != "rounds" else f"{json.dumps(key)}: {json.dumps(value)}\n")
            out = [f"out={Path(d) / 'r'}"] if key != "out" else []
            rejected(["run", str(Path(d) / "c.yaml"), "num_clients=4", *out], "", "hidden yaml")
            return
        rejected([*RUN, f"{key}={value}", *([f"out={Path(d) / 'r'}"] if key != "out" else [])], "", "hidden cli")


@both(FAST, hidden_case())
def test_invisible_characters_are_one_line(case: tuple[str, str, Any]) -> None:
    _check_hidden(case)


@pytest.mark.slow
@both(MANY, hidden_case())
def test_invisible_characters_are_one_line_many(case: tuple[str, str, Any]) -> None:
    _check_hidden(case)


# -- environment variables and ranks -------------------------------------------------------------------------
BAD_SECONDS = st.sampled_from(["abc", "nan", "NaN", "inf", "-inf", "0", "-1", "1e400", "0x10", "1e9", "--5", "5s",
                               "1_0_"]) | st.floats(max_value=0, allow_nan=False).map(repr)
NOT_INT = st.sampled_from(["abc", "1.5", "nan", "", "2x", "0x2", "1e3"]).filter(bool) | st.text(
    string.ascii_letters, min_size=1, max_size=8)


def env_case() -> st.SearchStrategy[tuple[dict[str, str], list[str], str, str]]:
    """(environment, extra argv, text the error must contain, family)."""
    timeout = st.builds(lambda v: ({"FEDCLUSTER_COLLECTIVE_TIMEOUT": v}, ["ranks=2"],
                                   "FEDCLUSTER_COLLECTIVE_TIMEOUT", "env timeout"), BAD_SECONDS)
    world = st.builds(lambda name, v, master: ({name: v, **master}, [], name, "env world"),
                      st.sampled_from(["WORLD_SIZE", "RANK"]), NOT_INT,
                      st.sampled_from([{}, {"MASTER_ADDR": "localhost"}]))
    out_of_range = st.builds(lambda r, w: ({"RANK": str(r), "WORLD_SIZE": str(w), "MASTER_ADDR": "localhost"}, [],
                                           "RANK=", "env rank range"),
                             st.integers(-5, 50), st.integers(-3, 4)).filter(
        lambda c: not 0 <= int(c[0]["RANK"]) < max(int(c[0]["WORLD_SIZE"]), 0) and c[0]["RANK"] + c[0][
            "WORLD_SIZE"] not in ("01", "00", "0-1", "0-2", "0-3"))
    too_many = st.builds(lambda k: ({}, [f"ranks={k}"], "clients", "ranks above clients"), st.integers(5, 10**7))
    machine = st.builds(lambda k: ({}, ["num_clients=100000", f"ranks={k}"], "at most", "ranks above the machine"),
                        st.integers(4 * (os.cpu_count() or 1) * 8 + 1, 100000))
    return st.one_of(timeout, world, out_of_range, too_many, machine)


def _check_env(case: tuple[dict[str, str], list[str], str, str]) -> None:
    env, extra, needle, family = case
    saved = {k: os.environ.get(k) for k in ("FEDCLUSTER_COLLECTIVE_TIMEOUT", "WORLD_SIZE", "RANK", "MASTER_ADDR")}
    try:
        for k in saved:
            os.environ.pop(k, None)
        os.environ.update(env)
        with tempfile.TemporaryDirectory() as d:
            rejected([*RUN, *extra, f"out={Path(d) / 'r'}"], needle, family)
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v


@both(FAST, env_case())
def test_bad_environment_and_ranks_are_one_line(case: tuple[dict[str, str], list[str], str, str]) -> None:
    _check_env(case)


@pytest.mark.slow
@both(MANY, env_case())
def test_bad_environment_and_ranks_are_one_line_many(case: tuple[dict[str, str], list[str], str, str]) -> None:
    _check_env(case)


def test_environment_a_run_in_one_process_does_not_need(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad collective timeout does not concern a run in one process; RANK/WORLD_SIZE left by an outer job
    without MASTER_ADDR are ignored with one warning."""
    monkeypatch.setenv("FEDCLUSTER_COLLECTIVE_TIMEOUT", "abc")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        assert main([*RUN, f"out={tmp_path / 'r'}"]) == 0, err.getvalue()
    assert err.getvalue().count("MASTER_ADDR is not") == 1 and (tmp_path / "r" / "summary.json").is_file()
    CASES["env ignored"] += 1


# -- a few real processes --------------------------------------------------------------------------------------
def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-m", "fedcluster.app.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)


def test_real_processes_one_line_exit_2(tmp_path: Path) -> None:
    """Three real ``fedcluster run`` processes: a bad value, a broken YAML file, a truncated data file."""
    res = _cli("run", "num_clients=4", "rounds=1", "progress=false", "seed=-1", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "seed=-1" in res.stderr, res.stderr
    (tmp_path / "bad.yaml").write_bytes(b"rounds: 3\nlr: [1, 2\n")
    res = _cli("run", str(tmp_path / "bad.yaml"), cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "line 3" in res.stderr, res.stderr
    files = good_mnist()
    for f, b in files.items():
        (tmp_path / f).write_bytes(b)
    (tmp_path / MNIST["train_images"]).write_bytes(files[MNIST["train_images"]][:50])
    res = _cli("run", "dataset=mnist", f"data_dir={tmp_path}", "num_clients=4", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and MNIST["train_images"] in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    CASES["subprocess"] += 3


def test_an_ascii_terminal_gets_no_unicode_error(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "PYTHONIOENCODING": "ascii"}
    for args in (["list", "fedprox"], ["list"], ["run", "num_clients=4", "rounds=1", "rounds\u2028=2"]):
        res = subprocess.run([sys.executable, "-m", "fedcluster.app.cli", *args], capture_output=True, text=True,
                             env=env, cwd=tmp_path, timeout=120, encoding="ascii", errors="replace")
        assert res.returncode in (0, 2) and "Traceback" not in res.stderr, res.stderr[-2000:]
    CASES["subprocess"] += 3


def test_zz_report_case_count() -> None:
    """Runs last in this file: prints how many malformed inputs were checked (captured: visible with -s or -rP)."""
    print(f"\nbad-input cases run: {sum(CASES.values())} ({dict(CASES)})")
