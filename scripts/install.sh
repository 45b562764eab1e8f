#!/usr/bin/env bash
# Set up fedcluster in a virtual environment at ./.venv (PEP 668: Debian's own Python refuses
# system-wide `pip install`). Installs, where missing: Debian's python3-venv and dataset-fashion-mnist
# (with sudo when not root), PyTorch, then fedcluster itself (editable) with its test tools.
# Re-running it reuses the environment and only installs what changed.
#
# PyTorch: `torch==$FEDCLUSTER_TORCH_VERSION` (default 2.13.0); the CUDA build when the machine has an
# NVIDIA GPU, else the CPU-only build (scripts/torch-choice.sh: FEDCLUSTER_TORCH_BUILD=cpu|cuda overrides the
# choice, FEDCLUSTER_TORCH_INDEX=URL installs from that index; when PyTorch's CPU index cannot be reached, one line
# says so and pip's configured index serves torch). A torch already in .venv at that version is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_VERSION="${FEDCLUSTER_TORCH_VERSION:-2.13.0}"
VENV="${FEDCLUSTER_VENV:-.venv}"
EXTRAS="${FEDCLUSTER_EXTRAS:-all}"  # all = dev (tests, lint) + flower + tracking + wandb

SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null; then SUDO="sudo"; fi
fi

missing=()
dpkg -s dataset-fashion-mnist >/dev/null 2>&1 || missing+=(dataset-fashion-mnist)
if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then missing+=(python3-venv); fi
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" != "0" ] && [ -z "$SUDO" ]; then
    echo "install.sh: needs root or sudo to install the Debian packages ${missing[*]}; install them and rerun" >&2
    exit 1
  fi
  echo "install.sh: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "install.sh: creating the virtual environment $VENV"
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip install -q --disable-pip-version-check)

if "$PY" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" >/dev/null 2>&1; then
  echo "install.sh: keeping the installed torch $("$PY" -c 'import torch; print(torch.__version__)')"
else
  # shellcheck source=scripts/torch-choice.sh
  . scripts/torch-choice.sh
  torch_args="$(torch_pip_args "$TORCH_VERSION" "$PY")"
  read -r -a torch_args <<<"$torch_args"
  "${PIP[@]}" "${torch_args[@]}"
fi
echo "install.sh: installing fedcluster[$EXTRAS]"
"${PIP[@]}" -e ".[$EXTRAS]"
echo "install.sh: done; run commands as $VENV/bin/fedcluster, or 'source $VENV/bin/activate' first"
