#!/usr/bin/env bash
# Run the test suite on the oldest PyTorch that pyproject.toml declares (`torch>=X`), in a separate
# virtual environment, so the lower bound stays one that was actually tested (the suite passed on it).
#
#   bash scripts/check-torch-lower-bound.sh                 # torch==X from pyproject, venv ./.venv-torch-min
#   FEDCLUSTER_TORCH_VERSION=2.5.1 bash scripts/check-torch-lower-bound.sh   # another version
#   FEDCLUSTER_VENV=/tmp/v FEDCLUSTER_EXTRAS=dev,tracking bash scripts/check-torch-lower-bound.sh -x
#
# X is read from the `"torch>=X"` line of pyproject.toml and installed as torch==X. torch is held at that
# version with a pip constraints file while fedcluster and its extras install, so nothing upgrades it. On PyPI the Linux
# x86-64 wheel is the CUDA build (several GB of nvidia-* packages; it runs on the CPU where there is no
# GPU); FEDCLUSTER_TORCH_INDEX picks another index, e.g. PyTorch's CPU wheel index. Extra arguments go
# to pytest. The default extras are dev, tracking and flower (the whole default suite); with no `flower`
# extra the three Flower test files are left out.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${FEDCLUSTER_VENV:-.venv-torch-min}"
EXTRAS="${FEDCLUSTER_EXTRAS:-dev,tracking,flower}"
if [ -z "${FEDCLUSTER_TORCH_VERSION:-}" ]; then
  FEDCLUSTER_TORCH_VERSION="$(sed -n 's/^ *"torch>=\([0-9.]*\)".*/\1/p' pyproject.toml)"
  if [ -z "$FEDCLUSTER_TORCH_VERSION" ]; then
    echo "check-torch-lower-bound.sh: no \"torch>=X\" line in pyproject.toml" >&2
    exit 1
  fi
fi
TORCH_VERSION="$FEDCLUSTER_TORCH_VERSION"

if [ ! -x "$VENV/bin/python" ]; then
  echo "check-torch-lower-bound.sh: creating the virtual environment $VENV"
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip install -q --disable-pip-version-check)
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
echo "torch==$TORCH_VERSION" >"$constraints"

if ! "$PY" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" >/dev/null 2>&1; then
  echo "check-torch-lower-bound.sh: installing torch==$TORCH_VERSION"
  if [ -n "${FEDCLUSTER_TORCH_INDEX:-}" ]; then
    "${PIP[@]}" --index-url "$FEDCLUSTER_TORCH_INDEX" "torch==$TORCH_VERSION"
  else
    "${PIP[@]}" "torch==$TORCH_VERSION"
  fi
fi
echo "check-torch-lower-bound.sh: installing fedcluster[$EXTRAS] with torch held at $TORCH_VERSION"
"${PIP[@]}" -c "$constraints" -e ".[$EXTRAS]"
"$PY" -c "import torch, numpy; print('check-torch-lower-bound.sh: torch', torch.__version__, 'numpy', numpy.__version__)"

ignore=()
case ",$EXTRAS," in
  *,flower,*|*,all,*) ;;
  *) ignore=(--ignore=tests/flower/test_flower_deploy.py --ignore=tests/flower/test_flower_cli.py --ignore=tests/flower/test_flower_faults.py) ;;
esac
exec "$PY" -m pytest -p no:cacheprovider -rs "${ignore[@]}" "$@"
