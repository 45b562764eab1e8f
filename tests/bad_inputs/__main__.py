"""Try a generated set of bad inputs against the CLI and the library in-process; count the outcomes.

    PYTHONPATH=src python -m tests.bad_inputs [--only FAMILY] [--show]

Every case is an argv for ``fedcluster.app.cli.main`` (or a library call) after an optional setup that plants
files (a damaged run directory, a crafted checkpoint, a data file). Outcomes:

* clean: what the case expects — exit 2 with one ``fedcluster: error:`` line (a bad input), or exit 0 with
  the check passing (an input that is fine, e.g. ``np.int64`` values, ``scenario --out FOLDER``);
* traceback: an exception escaped ``main``;
* silent: exit 0 where a refusal was due, or a wrong result;
* hang: still running after ``--case-seconds`` (default 120);
* other: another exit status, or more than one error line.
"""



import argparse
import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

from tests.bad_inputs.api import api_cases, more_api_cases, smaller_cases
from tests.bad_inputs.bounds import bound_cases
from tests.bad_inputs.commands import command_cases
from tests.bad_inputs.core import copy_run, outcome
from tests.bad_inputs.environment import cache_key_cases, environment_cases, ranks_cases, round_four_environment_cases
from tests.bad_inputs.params import param_cases
from tests.bad_inputs.parsing import parsing_cases, resource_cases
from tests.bad_inputs.paths import path_cases
from tests.bad_inputs.readers import reader_cases
from tests.bad_inputs.run_dirs import checkpoint_cases, crafted_file_cases, new_method_state_cases, run_dir_cases
from tests.bad_inputs.state import state_cases
from tests.bad_inputs.surface import surface_cases

ALL = (run_dir_cases, checkpoint_cases, path_cases, parsing_cases, resource_cases, api_cases, smaller_cases,
       crafted_file_cases, environment_cases, ranks_cases, more_api_cases, cache_key_cases, new_method_state_cases,
       reader_cases, bound_cases, round_four_environment_cases,
       param_cases, command_cases, state_cases, surface_cases)




def main_cli() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="run one family (e.g. 'checkpoint schema')")
    ap.add_argument("--show", action="store_true", help="print every case, not only the failures")
    ap.add_argument("--skip", action="append", default=[],
                    help="skip the cases whose name holds this text (e.g. to spare a machine an older version's "
                         "out-of-memory cases)")
    ap.add_argument("--case-seconds", type=int, default=120, help="a case running longer counts as a hang")
    args = ap.parse_args()
    counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ.setdefault("FEDCLUSTER_CACHE", str(root / "cache"))
        cases = [c for make in ALL for c in make() if args.only in (None, c.family)
                 and not any(text in c.name for text in args.skip)]
        for i, case in enumerate(cases):
            d = root / f"case{i}"
            d.mkdir()
            if case.family in ("run-dir files", "checkpoint schema", "crafted files"):
                copy_run(root, d)
            result, detail = outcome(case, d, args.case_seconds)
            counts[result] += 1
            if args.show or result != "clean":
                print(f"{result:9s} [{case.family}] {case.name}: {' '.join(detail.split())[:240]}", flush=True)
            shutil.rmtree(d, ignore_errors=True)
    for family, n in sorted(Counter(c.family for c in cases).items()):
        print(f"  {family}: {n}")
    print(f"tried {sum(counts.values())}: clean {counts['clean']}, traceback {counts['traceback']}, "
          f"silent {counts['silent']}, hang {counts['hang']}, other {counts['other']}")
    return 0 if counts["clean"] == sum(counts.values()) else 1


if __name__ == "__main__":
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    sys.exit(main_cli())
