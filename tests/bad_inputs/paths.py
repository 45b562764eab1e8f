"""Paths a run, compare, scenario, reproduce, tracking and demo cannot use."""


from collections.abc import Callable
from pathlib import Path

from tests.bad_inputs.core import RUN, Case, base_run


def path_cases() -> list[Case]:
    def loop(d: Path) -> None:
        (d / "a").symlink_to(d / "b")
        (d / "b").symlink_to(d / "a")

    def afile(d: Path) -> None:
        (d / "f").write_text("x")

    cases = [
        Case("paths", "out= 300-character name", lambda d: [*RUN, f"out={d / ('x' * 300)}"]),
        Case("paths", "out= 2100 levels", lambda d: [*RUN, "out=" + str(d) + "/a" * 2100]),
        Case("paths", "out=~nosuchuser", lambda d: [*RUN, "out=~nosuchuser/x"]),
        Case("paths", "out= symlink loop", lambda d: [*RUN, f"out={d / 'a' / 'x'}"], loop),
        Case("paths", "out= symlink loop itself", lambda d: [*RUN, f"out={d / 'a'}"], loop),
        Case("paths", "data_dir= symlink loop", lambda d: [*RUN, "dataset=mnist", f"data_dir={d / 'a'}"], loop),
    ]
    for where in ("/proc/fedcluster-x", "/sys/fedcluster-x", "FILE/x", "LOOP/x"):
        def argv_of(kind: str, w: str = where) -> Callable[[Path], list[str]]:
            def argv(d: Path) -> list[str]:
                p = w.replace("FILE", str(d / "f")).replace("LOOP", str(d / "a"))
                return {"compare": ["compare", str(base_run(d.parent)), "--out", p],
                        "reproduce": ["reproduce", "--out", p, "--list"],
                        "scenario": ["scenario", "concept-swap", "num_clients=4", "--out", p + ".png"],
                        "tensorboard": [*RUN, "tracking=[tensorboard]", f"tensorboard_dir={p}", f"out={d / 'r'}"],
                        "sqlite": [*RUN, "tracking=[mlflow]", f"tracking_uri=sqlite:///{p}.db", f"out={d / 'r'}"],
                        "demo": ["demo", "--out", p]}[kind]
            return argv
        for kind in ("compare", "reproduce", "scenario", "tensorboard", "sqlite", "demo"):
            cases.append(Case("paths", f"{kind} under {where}", argv_of(kind), lambda d: (afile(d), loop(d))))
    cases += [
        Case("paths", "scenario --out unknown extension",
             lambda d: ["scenario", "concept-swap", "num_clients=4", "--out", str(d / "x.pnq")]),
        Case("paths", "scenario --out no extension",
             lambda d: ["scenario", "concept-swap", "num_clients=4", "--out", str(d / "x")], expect="either",
             check=lambda d, out: any(d.glob("x*"))),
        Case("paths", "scenario --out a folder",
             lambda d: ["scenario", "concept-swap", "num_clients=4", "--out", str(d)], expect="either",
             check=lambda d, out: any(d.glob("*.png"))),
        Case("paths", "compare --out a file", lambda d: ["compare", str(base_run(d.parent)), "--out", str(d / "f")],
             afile),
    ]
    return cases
