#!/usr/bin/env bash
# The package as a user installs it, outside the clone: builds the sdist and the wheel (python -m build, from a
# copy of the tracked files), checks their metadata (twine check --strict), installs the wheel with its extras
# into a fresh virtual environment beside the CPU build of torch, and from an empty folder runs
# `fedcluster --version`, `fedcluster list`, the demo, the demo's next step (`configs/demo.yaml`, shipped with the
# package), `fedcluster init`, a run logged to MLflow and `fedcluster flower --help`. .ci/run calls it.
#
#   FEDCLUSTER_TORCH_VERSION=2.x.y   torch installed first (default 2.13.0; the CPU build as scripts/install.sh
#                                    chooses it: FEDCLUSTER_TORCH_INDEX=URL installs from that index)
#   FEDCLUSTER_WHEEL_EXTRAS=...      the wheel's extras (default flower,tracking; empty: none)
#   FEDCLUSTER_KEEP=1                keep the scratch folder (its path is printed)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
TORCH_VERSION="${FEDCLUSTER_TORCH_VERSION:-2.13.0}"
EXTRAS="${FEDCLUSTER_WHEEL_EXTRAS-flower,tracking}"
work="$(mktemp -d)"
if [ "${FEDCLUSTER_KEEP:-0}" = 1 ]; then echo "check-wheel.sh: scratch folder $work"; else trap 'rm -rf "$work"' EXIT; fi
say() { echo "check-wheel.sh: $*"; }
pip_install() { "$1" -m pip install -q --disable-pip-version-check "${@:2}"; }

say "building the sdist and the wheel"
mkdir "$work/tree"
git ls-files -z --cached --others --exclude-standard | tar -C "$ROOT" --null -T - -cf - | tar -C "$work/tree" -xf -
python3 -m venv "$work/tools"
pip_install "$work/tools/bin/python" build twine
(cd "$work/tree" && "$work/tools/bin/python" -m build --outdir "$work/dist" . >"$work/build.log" 2>&1) \
  || { tail -n 30 "$work/build.log"; exit 1; }
"$work/tools/bin/twine" check --strict "$work"/dist/*
wheel="$(ls "$work"/dist/fedcluster-*.whl)"

say "installing $(basename "$wheel")${EXTRAS:+[$EXTRAS]} into a fresh virtual environment"
python3 -m venv "$work/venv"
PY="$work/venv/bin/python"
# shellcheck source=scripts/torch-choice.sh
. scripts/torch-choice.sh
read -r -a torch_args <<<"$(FEDCLUSTER_TORCH_BUILD=cpu torch_pip_args "$TORCH_VERSION" "$PY")"
pip_install "$PY" "${torch_args[@]}"
pip_install "$PY" "$wheel${EXTRAS:+[$EXTRAS]}"

say "running it from a folder outside the clone"
mkdir "$work/outside"
cd "$work/outside"
export PATH="$work/venv/bin:$PATH"
where="$("$PY" -c 'import fedcluster; print(fedcluster.__file__)')"
case "$where" in "$work/venv/"*) ;; *) say "fedcluster was imported from $where, not the wheel"; exit 1 ;; esac
fedcluster --version
fedcluster list >list.txt
grep -q '^algorithms:' list.txt && grep -q ' fedrc ' list.txt
fedcluster run --help >/dev/null
fedcluster run 2>demo.err | tee demo.txt
grep -qE '^cfl +[0-9.]+ +[0-9.]+ +1\.00 +3 ' demo.txt  # CFL finds the three concepts
next="$(sed -n 's/^another method: *//p' demo.txt)"  # the demo's own next step, configs/demo.yaml included
say "the demo's next step: $next rounds=2"
# shellcheck disable=SC2086
$next rounds=2 progress=false out=next >next.txt
grep -q '^done: 2 rounds' next.txt
fedcluster init >init.txt
cmp configs/demo.yaml "$ROOT/configs/demo.yaml"
if [[ ",$EXTRAS," == *",tracking,"* ]]; then
  fedcluster run configs/demo.yaml rounds=2 progress=false tracking=mlflow out=studies/tracked >/dev/null
  "$PY" -c 'import mlflow, sys; mlflow.set_tracking_uri("sqlite:///studies/mlflow.db")
sys.exit(len(mlflow.search_runs(search_all_experiments=True)) != 1)'
fi
if [[ ",$EXTRAS," == *",flower,"* ]]; then
  fedcluster flower --help >/dev/null
  "$PY" -c 'import flwr, tomli_w; print("flwr", flwr.__version__)'
fi
say "passed ($("$PY" -c 'import torch; print("torch", torch.__version__)'))"
