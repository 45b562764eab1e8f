"""Property-based: damaged run-directory files, crafted checkpoints, unusable output paths and oversized requests
are refused with one line, exit 2 (the counterpart of test_bad_input_properties for what a run leaves behind).

A finished run (IFCA, 6 clients, 2 rounds) is made once; each case copies it, damages one thing and calls the
CLI's ``main()`` in-process: ``report``, ``compare`` and ``resume`` must refuse with exactly one
``fedcluster: error:`` line naming the file. Checkpoints are rewritten with a valid SHA-256 (the checksum proves
integrity, not structure), so only the schema check can refuse them.
"""

from __future__ import annotations

import io
import json
import shutil
import string
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fedcluster.app.cli import main
from fedcluster.storage.state_file import load_state, save_state
from fedcluster.tracking.run_files import ROUND_COLUMNS

FAST = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
RUN = ["run", "num_clients=4", "rounds=1", "progress=false"]


def outcome(argv: list[str]) -> tuple[int, list[str]]:
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code
    lines = [ln for ln in err.getvalue().splitlines() if not ln.startswith("fedcluster: note:")]
    return rc, lines


def refused(argv: list[str], needle: str) -> str:
    rc, lines = outcome(argv)
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("fedcluster: error: "), (argv, rc, lines[-5:])
    assert needle in lines[0], (needle, lines[0])
    return lines[0]


def fresh_copy(finished: Path, tmp_path: Path) -> Path:
    run = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
    shutil.copytree(finished, run)
    for lock in run.glob("*.lock"):
        lock.unlink()
    return run


def plant(path: Path, data: bytes | None) -> None:
    path.unlink(missing_ok=True)
    if data is None:
        path.mkdir()
    else:
        path.write_bytes(data)


# -- rounds.csv ---------------------------------------------------------------------------------------------
def _cells(text: str) -> list[list[str]]:
    return [line.split(",") for line in text.splitlines()]


def _joined(cells: list[list[str]]) -> bytes:
    return ("\n".join(",".join(r) for r in cells) + "\n").encode()


def rounds_damage() -> st.SearchStrategy[Callable[[str], bytes | None]]:
    """A function from the good rounds.csv text to damaged bytes (None: a folder in its place)."""
    word = st.text(string.ascii_letters + "_-/ ", min_size=1, max_size=12).filter(
        lambda w: w.strip().lower() not in ("nan", "inf", "infinity", "e", "") and not w.strip().startswith(("e",)))

    def text_cell(row: int, col: int, w: str) -> Callable[[str], bytes]:
        def f(t: str) -> bytes:
            cells = _cells(t)
            cells[1 + row % (len(cells) - 1)][col % len(cells[0])] = w
            return _joined(cells)
        return f

    def drop_column(col: int) -> Callable[[str], bytes]:
        def f(t: str) -> bytes:
            c = col % len(ROUND_COLUMNS)
            return _joined([r[:c] + r[c + 1:] for r in _cells(t)])
        return f

    def short_row(row: int, keep: int) -> Callable[[str], bytes]:
        def f(t: str) -> bytes:
            cells = _cells(t)
            r = 1 + row % (len(cells) - 1)
            cells[r] = cells[r][: keep % (len(cells[r]) - 1) + 1][: len(cells[r]) - 1]
            return _joined(cells)
        return f

    def round_not_increasing(v: str) -> Callable[[str], bytes]:
        def f(t: str) -> bytes:
            cells = _cells(t)
            cells[-1][0] = v
            return _joined(cells)
        return f

    return st.one_of(
        st.builds(text_cell, st.integers(0, 9), st.integers(0, 20), word),
        st.builds(drop_column, st.integers(0, 20)),
        st.builds(short_row, st.integers(0, 9), st.integers(0, 9)),
        st.builds(round_not_increasing, st.sampled_from(["0", "1", "-3", "1.5", "nan", "inf", "x"])),
        st.builds(lambda b: lambda t: b"\x00" + b, st.binary(max_size=200)),
        st.builds(lambda i: lambda t: t.encode()[:i] + b"\xff\xfe" + t.encode()[i:], st.integers(0, 300)),
        st.just(lambda t: None),
        st.just(lambda t: b"a,b\n1,2\n"),
    )


@FAST
@given(damage=rounds_damage(), command=st.sampled_from(["report", "compare"]))
def test_damaged_rounds_csv_is_refused_by_report_and_compare(finished: Path, tmp_path: Path,
                                                           damage: Callable[[str], bytes | None],
                                                           command: str) -> None:
    run = fresh_copy(finished, tmp_path)
    plant(run / "rounds.csv", damage((finished / "rounds.csv").read_text()))
    argv = ["report", str(run)] if command == "report" else ["compare", str(run), "--out", str(tmp_path / "c")]
    refused(argv, "rounds.csv")


@pytest.mark.parametrize("text", ["", "HEADER", "HEADER+x"])
def test_resume_refuses_a_rounds_csv_without_the_checkpoints_rounds(finished: Path, tmp_path: Path,
                                                                   text: str) -> None:
    """Header-only, empty, or a text round: resume must not continue from a round whose rows are gone."""
    run = fresh_copy(finished, tmp_path)
    header = (finished / "rounds.csv").read_text().splitlines()[0]
    body = {"": "", "HEADER": header + "\n", "HEADER+x": header + "\nx" + ",0" * (len(header.split(",")) - 1)
            + "\n"}[text]
    (run / "rounds.csv").write_text(body)
    refused(["resume", str(run), "rounds=3", "progress=false"], "rounds.csv")


# -- clusters.jsonl and summary.json ------------------------------------------------------------------------
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8)


def bad_record() -> st.SearchStrategy[bytes]:
    """A clusters.jsonl line that is no record: not an object, a bad round, or a grouping of the wrong shape."""
    not_object = JSON.filter(lambda v: not isinstance(v, dict)).map(lambda v: json.dumps(v).encode())
    bad_round = st.one_of(st.integers(max_value=0), st.text(max_size=4), st.floats(allow_nan=False), st.none()).map(
        lambda r: json.dumps({"round": r, "concept": {"names": ["a"], "mass": [[1.0]]}}).encode())
    bad_group = st.tuples(st.lists(st.text(max_size=3), max_size=3), JSON).filter(
        lambda nm: not (isinstance(nm[1], list) and nm[1] and all(
            isinstance(r, list) and len(r) == len(nm[0]) and all(isinstance(v, int | float) and not isinstance(v, bool)
                                                                for v in r) for r in nm[1]))).map(
        lambda nm: json.dumps({"round": 1, "class": {"names": nm[0], "mass": nm[1]}}).encode())
    deep = st.integers(30, 50_000).map(lambda n: b"[" * n + b"]" * n)
    return st.one_of(not_object, bad_round, bad_group, deep, st.binary(min_size=1).map(lambda b: b"\x00" + b),
                     st.just(b'{"round": 1}\n\xff'))


@FAST
@given(line=bad_record())
def test_damaged_clusters_jsonl_is_refused_by_report(finished: Path, tmp_path: Path, line: bytes) -> None:
    run = fresh_copy(finished, tmp_path)
    good = (finished / "clusters.jsonl").read_bytes()
    plant(run / "clusters.jsonl", good + line + b"\n")
    refused(["report", str(run)], "clusters.jsonl")


@FAST
@given(data=st.one_of(JSON.filter(lambda v: not isinstance(v, dict)).map(lambda v: json.dumps(v).encode()),
                      st.integers(30, 50_000).map(lambda n: b"[" * n + b"]" * n),
                      st.binary(min_size=1).map(lambda b: b"\x00" + b), st.just(None),
                      st.sampled_from([b'{"final": 1}', b'{"best": {"val_acc": 3}}', b'{"final": {}, "best": []}'])))
def test_damaged_summary_json_is_refused_by_compare(finished: Path, tmp_path: Path, data: bytes | None) -> None:
    run = fresh_copy(finished, tmp_path)
    plant(run / "summary.json", data)
    refused(["compare", str(run), "--out", str(tmp_path / "c")], "summary.json")


def test_report_caps_a_heatmap_of_100k_names_with_a_note(finished: Path, tmp_path: Path) -> None:
    run = fresh_copy(finished, tmp_path)
    names = [f"n{i}" for i in range(100_000)]
    (run / "clusters.jsonl").write_text(json.dumps({"round": 1, "class": {"names": names,
                                                                          "mass": [[1.0] * len(names)]}}) + "\n")
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        assert main(["report", str(run)]) == 0
    assert "at most 60 groups" in err.getvalue() and (run / "clusters.png").stat().st_size < 2_000_000


# -- checkpoints with a valid checksum and a wrong structure -----------------------------------------------
def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    return out


def _get(state: Any, path: tuple) -> Any:
    for k in path:
        state = state[k]
    return state


OTHER_KIND = {  # a value of another kind than the one found
    "tensor": lambda v: v.numpy() if v.numel() else "x", "array": lambda v: torch.as_tensor(v),
    "int": lambda v: "3", "float": lambda v: [v], "str": lambda v: 3, "dict": lambda v: [1, 2],
    "list": lambda v: {"a": 1}, "bool": lambda v: "yes",
}


def _kind(v: Any) -> str | None:
    for name, cls in (("tensor", torch.Tensor), ("array", np.ndarray), ("bool", bool), ("int", int),
                      ("float", float), ("str", str), ("dict", dict), ("list", list)):
        if isinstance(v, cls):
            return name
    return None


def checkpoint_change() -> st.SearchStrategy[tuple[str, int]]:
    return st.tuples(st.sampled_from(["drop", "kind", "dtype", "shape"]), st.integers(0, 10_000))


def apply_change(state: dict[str, Any], how: str, pick: int) -> bool:
    """Change ``state`` in place; False when this pick does not apply (e.g. no tensor to reshape)."""
    paths = [p for p in _paths(state) if p[0] != "config" and p[-1] not in ("estimated", "rows")]
    if how == "drop":
        p = paths[pick % len(paths)]
        del _get(state, p[:-1])[p[-1]]
        return True
    if how == "kind":
        paths = [p for p in paths if _kind(_get(state, p)) is not None]
        p = paths[pick % len(paths)]
        _get(state, p[:-1])[p[-1]] = OTHER_KIND[_kind(_get(state, p))](_get(state, p))
        return True
    tensors = [p for p in paths if isinstance(_get(state, p), torch.Tensor | np.ndarray)]
    p = tensors[pick % len(tensors)]
    v = _get(state, p)
    if how == "dtype":
        new = v.to(torch.int32) if isinstance(v, torch.Tensor) else v.astype(np.int32 if v.dtype != np.int32
                                                                              else np.float64)
    else:
        new = v[None]  # one more dimension
        if p[1] == "models":  # a weight: keep its dimensions, change its shape
            new = torch.zeros((*v.shape[:-1], v.shape[-1] + 1), dtype=v.dtype)
    _get(state, p[:-1])[p[-1]] = new
    return True


@FAST
@given(change=checkpoint_change())
def test_a_crafted_checkpoint_with_a_valid_checksum_is_refused(finished: Path, tmp_path: Path,
                                                              change: tuple[str, int]) -> None:
    run = fresh_copy(finished, tmp_path)
    state = load_state(run / "checkpoint.pt", "checkpoint")
    assume(apply_change(state, *change))
    save_state(run / "checkpoint.pt", state, "checkpoint")
    refused(["resume", str(run), "rounds=3", "progress=false"], "checkpoint")


def checkpoint_damage() -> st.SearchStrategy[Callable[[dict[str, Any]], str]]:
    """A change to the IFCA checkpoint's algorithm state that its checksum cannot see, and the entry the refusal
    must name: an empty entry, a NaN Ω, another number of clusters, a data-sized axis of another size."""
    def empty(key: str) -> Callable[[dict[str, Any]], str]:
        def f(alg: dict[str, Any]) -> str:
            alg[key] = None
            return key
        return f

    def nan_omega(value: float) -> Callable[[dict[str, Any]], str]:
        def f(alg: dict[str, Any]) -> str:
            alg["omega"] = np.full_like(alg["omega"], value)
            return "omega"
        return f

    def clusters(k: int) -> Callable[[dict[str, Any]], str]:
        def f(alg: dict[str, Any]) -> str:
            alg["models"] = {n: v[:1].repeat(k, *([1] * (v.ndim - 1))) for n, v in alg["models"].items()}
            alg["omega"] = np.eye(max(k, 1))[np.zeros(len(alg["omega"]), dtype=np.int64)][:, :k]
            alg["gamma"] = alg["gamma"][:, :1].repeat(k, 1) if k else alg["gamma"][:, :0]
            return "cluster"
        return f

    def rows(key: str, cut: int) -> Callable[[dict[str, Any]], str]:
        def f(alg: dict[str, Any]) -> str:
            alg[key] = alg[key][: max(0, len(alg[key]) - cut)]
            return key
        return f

    return st.one_of(st.sampled_from(["models", "omega", "gamma"]).map(empty),
                     st.sampled_from([float("nan"), float("inf"), -1.0]).map(nan_omega),
                     st.sampled_from([0, 1, 2, 4, 9]).map(clusters),
                     st.builds(rows, st.sampled_from(["omega", "gamma"]), st.integers(1, 5)))


@FAST
@given(damage=checkpoint_damage())
def test_a_checkpoint_that_does_not_fit_the_runs_data_or_clusters_is_refused(
        finished: Path, tmp_path: Path, damage: Callable[[dict[str, Any]], str]) -> None:
    """None entries, a NaN Ω, K ≠ the run's, data-keyed arrays of another size: exit 2 naming the file (never
    exit 3 "diverged", never a traceback)."""
    run = fresh_copy(finished, tmp_path)
    state = load_state(run / "checkpoint.pt", "checkpoint")
    needle = damage(state["algorithm"])
    save_state(run / "checkpoint.pt", state, "checkpoint")
    line = refused(["resume", str(run), "rounds=3", "progress=false"], "checkpoint.pt")
    assert needle in line, line


# -- state files crafted below the structure: dtypes, sizes and nesting the writer never writes -----------
def craft(path: Path, tree: str, tensors: dict[str, torch.Tensor], kind: str = "checkpoint", key: str = "") -> None:
    """Write a state file with ``tree`` as its structure and a valid SHA-256 (what anyone can do)."""
    from safetensors.torch import save

    from fedcluster.storage.state_file import FORMAT, VERSION, _digest

    header = {"format": FORMAT, "version": VERSION, "kind": kind, "key": key, "tree": tree}
    path.write_bytes(save(tensors, metadata={**header, "sha256": _digest(header, tensors)}))


def crafted_tree() -> st.SearchStrategy[tuple[str, str]]:
    """(a structure over one float32 tensor "0" of 1,000 items, a word the refusal must contain)."""
    array = st.sampled_from(["V1000000000", "V100000", "|O", "<U100000000", "S1000", "<M8[ns]", "<f8", "<i8",
                             "<c16", "?", "", "[1]", 7]).map(
        lambda d: (json.dumps({"dict": [["a", {"ndarray": "0", "dtype": d}]]}), "dtype"))
    scalar = st.sampled_from([("V1000000000", 5), ("|O", 1), ("<u1", -1), ("<i8", 10**30), ("<M8[ns]", 1),
                              ("<f4", [1, 2])]).map(
        lambda dv: (json.dumps({"dict": [["a", {"np": dv[0], "value": dv[1]}]]}), "structure"))
    deep = st.integers(66, 200_000).map(lambda n: ("[" * n + "]" * n, "structure"))
    deep_dict = st.integers(66, 3000).map(lambda n: ('{"dict": [["a", ' * n + "1" + "]]}" * n, "structure"))
    return st.one_of(array, scalar, deep, deep_dict)


@FAST
@given(tree=crafted_tree())
def test_a_crafted_state_file_is_refused_within_bounded_memory(finished: Path, tmp_path: Path,
                                                               tree: tuple[str, str]) -> None:
    import resource

    run = fresh_copy(finished, tmp_path)
    craft(run / "checkpoint.pt", tree[0], {"0": torch.zeros(1000)})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    line = refused(["resume", str(run), "rounds=3", "progress=false"], "checkpoint.pt")
    assert tree[1] in line or "malformed" in line, line
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # kB: nothing big was allocated


def test_a_checkpoint_missing_one_weight_does_not_resume_silently(finished: Path, tmp_path: Path) -> None:
    run = fresh_copy(finished, tmp_path)
    state = load_state(run / "checkpoint.pt", "checkpoint")
    del state["algorithm"]["models"]["head.bias"]
    save_state(run / "checkpoint.pt", state, "checkpoint")
    assert "head.bias" in refused(["resume", str(run), "rounds=3", "progress=false"], "checkpoint")


# -- output paths -------------------------------------------------------------------------------------------
def bad_out() -> st.SearchStrategy[Callable[[Path], str]]:
    """A function from a scratch folder to an ``out=`` path that cannot be used."""
    long_name = st.integers(256, 600).map(lambda n: lambda d: str(d / ("x" * n)))
    deep = st.integers(2100, 3000).map(lambda n: lambda d: str(d) + "/a" * n)
    no_user = st.text(string.ascii_lowercase, min_size=6, max_size=12).map(lambda u: lambda d: f"~zz{u}/run")

    def loop(suffix: str) -> Callable[[Path], str]:
        def f(d: Path) -> str:
            if not (d / "a").is_symlink():
                (d / "a").symlink_to(d / "b")
                (d / "b").symlink_to(d / "a")
            return str(d / "a" / suffix) if suffix else str(d / "a")
        return f

    def under_file(suffix: str) -> Callable[[Path], str]:
        def f(d: Path) -> str:
            (d / "f").write_text("x")
            return str(d / "f" / suffix)
        return f

    special = st.builds(lambda root, s: lambda d: f"{root}/{s}", st.sampled_from(["/proc", "/sys", "/dev"]),
                        st.text(string.ascii_lowercase, min_size=1, max_size=8))
    name = st.text(string.ascii_lowercase, max_size=8)
    return st.one_of(long_name, deep, no_user, name.map(loop), name.filter(bool).map(under_file), special)


@FAST
@given(out=bad_out(), key=st.sampled_from(["out", "tensorboard_dir", "tracking_uri"]))
def test_unusable_output_paths_are_one_line(tmp_path: Path, out: Callable[[Path], str], key: str) -> None:
    path = out(tmp_path)
    value = f"sqlite:///{path}" if key == "tracking_uri" else path
    extra = [] if key == "out" else [f"out={tmp_path / 'r'}"]
    refused([*RUN, *extra, f"{key}={value}"], f"{key}=")


@FAST
@given(out=bad_out(), command=st.sampled_from(["compare", "scenario", "reproduce", "demo"]))
def test_unusable_out_options_are_one_line(finished: Path, tmp_path: Path, out: Callable[[Path], str],
                                           command: str) -> None:
    path = out(tmp_path)
    argv = {"compare": ["compare", str(finished), "--out", path],
            "scenario": ["scenario", "concept-swap", "num_clients=4", "--out", path + "/p.png"],
            "reproduce": ["reproduce", "--list", "--out", path], "demo": ["demo", "--out", path]}[command]
    refused(argv, "--out")


@FAST
@given(ext=st.text(string.ascii_letters + string.digits, min_size=1, max_size=6).filter(
    lambda e: "." + e.lower() not in (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".eps",
                                      ".ps")))
def test_scenario_refuses_an_unknown_picture_extension(tmp_path: Path, ext: str) -> None:
    refused(["scenario", "concept-swap", "num_clients=4", "--out", str(tmp_path / f"pic.{ext}")], "--out")


def test_scenario_out_folder_draws_inside_it(tmp_path: Path) -> None:
    rc, lines = outcome(["scenario", "concept-swap", "num_clients=4", "--out", str(tmp_path)])
    assert rc == 0, lines
    assert (tmp_path / "concept-swap-digits.png").stat().st_size > 0


# -- resources ---------------------------------------------------------------------------------------------
@FAST
@given(copies=st.integers(10**6, 2**62))
def test_replicas_beyond_memory_are_refused(tmp_path: Path, copies: int) -> None:
    refused([*RUN, "scenario=diverse-shift", f"scenario.replicate={copies}", f"out={tmp_path / 'r'}"],
            "scenario.replicate")


# -- and no false refusals: every method's own checkpoint fits its schema --------------------------------------
SLOW_METHODS = ["cfl", "fedem", "fedprox", "fedrc", "fedrc-adaptive", "fedsoft", "fesem", "hcfl-plus", "hcfl-prime",
                "icfl", "oneshot", "oracle", "pacfl", "stocfl", "fedmd"]


@pytest.mark.parametrize("algorithm", ["fedavg", "hcfl", "cflgp",
                                       *(pytest.param(a, marks=pytest.mark.slow) for a in SLOW_METHODS)])
def test_every_methods_checkpoint_resumes(tmp_path: Path, algorithm: str) -> None:
    extra = ["algorithm.delta=1.0"] if algorithm == "fedmd" else []
    out = tmp_path / "run"
    rc, lines = outcome(["run", f"algorithm={algorithm}", "num_clients=6", "rounds=3", "progress=false",
                         f"out={out}", *extra])
    assert rc == 0, lines
    rc, lines = outcome(["resume", str(out), "rounds=4", "progress=false"])
    assert rc == 0, lines
