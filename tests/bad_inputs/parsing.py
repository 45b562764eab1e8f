"""Numbers, YAML and idx files past what the parsers take; resources asked for beyond reason."""


import json
from pathlib import Path

import numpy as np

from tests.bad_inputs.core import RUN, Case, _yaml_file, copy_run, mnist_files


def parsing_cases() -> list[Case]:
    big = "9" * 5000
    deep = "[" * 5000 + "]" * 5000
    yaml_run = lambda d: ["run", str(d / "c.yaml"), "num_clients=4", "progress=false", f"out={d / 'r'}"]  # noqa: E731
    mnist = lambda *extra: lambda d: [*RUN, "dataset=mnist", f"data_dir={d}", f"out={d / 'r'}", *extra]  # noqa: E731
    rng = np.random.default_rng(0)
    return [
        Case("parsing", "rounds= 5000 digits", lambda d: [*RUN, f"rounds={big}"]),
        Case("parsing", "seed= -5000 digits", lambda d: [*RUN, f"seed=-{big}"]),
        Case("parsing", "YAML 5000-digit int", yaml_run, _yaml_file(f"rounds: {big}\n")),
        Case("parsing", "YAML 5000-deep list", yaml_run, _yaml_file(f"rounds: {deep}\n")),
        Case("parsing", "YAML 5000-deep mapping", yaml_run,
             _yaml_file("a: " * 5000 + "1\n")),
        Case("parsing", "override 5000-deep list", lambda d: [*RUN, f"algorithm.x={deep}"]),
        Case("parsing", "override 5000-deep mapping", lambda d: [*RUN, "algorithm.x=" + "{a: " * 5000 + "}" * 5000]),
        Case("parsing", "duplicate YAML keys", yaml_run,
             _yaml_file("rounds: 2\nrounds: 3\n")),
        Case("parsing", "duplicate nested YAML keys", yaml_run,
             _yaml_file("rounds: 1\nalgorithm:\n  name: ifca\n  name: cfl\n")),
        Case("parsing", "YAML sexagesimal rounds: 1:0", yaml_run,
             _yaml_file("rounds: 1:0\n")),
        Case("parsing", "override rounds=1:0", lambda d: [*RUN[:-2], "progress=false", "rounds=1:0"]),
        Case("parsing", "YAML octal seed: 0777", lambda d: ["run", str(d / "c.yaml"), f"out={d / 'r'}"],
             _yaml_file("seed: 0777\nnum_clients: 4\nrounds: 1\nprogress: false\n"), expect="either",
             check=lambda d, out: _seed_of(d / "r") == 777),
        Case("parsing", "override seed=0777", lambda d: [*RUN, "seed=0777", f"out={d / 'r'}"], expect="either",
             check=lambda d, out: _seed_of(d / "r") == 777),
        Case("parsing", "fedmd num_anchors=-1", lambda d: [*RUN, "algorithm=fedmd", "algorithm.num_anchors=-1"]),
        Case("parsing", "fedmd without delta on real data", lambda d: [*RUN, "algorithm=fedmd"]),
        Case("parsing", "cflgp t_cl=-1", lambda d: [*RUN, "algorithm=cflgp", "algorithm.t_cl=-1"]),
        Case("parsing", "idx images of zero width", mnist(), mnist_files(np.zeros((12, 6, 0)))),
        Case("parsing", "idx images 1x1 with the CNN", mnist("model=cnn"),
             mnist_files(rng.integers(0, 256, (12, 1, 1))), expect="either", check=lambda d, out: True),
        Case("parsing", "idx images 1x1 with the light CNN", mnist("model=cnn-light"),
             mnist_files(rng.integers(0, 256, (12, 1, 1))), expect="either", check=lambda d, out: True),
        Case("parsing", "idx images of 1e300", mnist(), mnist_files(np.full((12, 6, 6), 1e300), 0x0E)),
        Case("parsing", "idx images of -1e300", mnist(), mnist_files(np.full((12, 6, 6), -1e300), 0x0E)),
        Case("parsing", "run an unparseable secret file", lambda d: ["run", str(d / "shadow")],
             lambda d: (d / "shadow").write_text("root:$6$SECRETHASH:19000:0:99999:7:::\nx: [\n")),
    ]


def _seed_of(run: Path) -> int | None:
    import yaml
    try:
        return yaml.safe_load((run / "config.yaml").read_text())["seed"]
    except (OSError, KeyError, TypeError):
        return None


def resource_cases() -> list[Case]:
    def many_names(d: Path) -> None:
        names = [f"n{i}" for i in range(100_000)]
        rec = {"round": 1, "class": {"names": names, "mass": [[1.0] * len(names)]}}
        (d / "run" / "clusters.jsonl").write_text(json.dumps(rec) + "\n")

    return [
        Case("resources", "scenario.replicate=1000000", lambda d: [*RUN, "scenario=diverse-shift",
                                                                    "scenario.replicate=1000000"]),
        Case("resources", "report: clusters.jsonl with 100k names", lambda d: ["report", str(d / "run")],
             lambda d: (copy_run(d.parent, d), many_names(d)), expect="either",
             check=lambda d, out: "note" in out),
    ]
