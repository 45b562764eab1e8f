# Which PyTorch build scripts/install.sh installs; sourced by it (and by tests/project/test_install_script.py).
#
#   FEDCLUSTER_TORCH_BUILD=auto (default) | cpu | cuda
#       auto: the CUDA build when the machine has an NVIDIA GPU (nvidia-smi lists one, the driver's
#       /proc/driver/nvidia/gpus is not empty, or lspci shows an NVIDIA display controller), else the CPU build.
#   FEDCLUSTER_TORCH_INDEX=URL  install from this index and nothing else decides (e.g. a given CUDA build:
#       https://download.pytorch.org/whl/cu126).
#
# The CPU build comes from pip's configured indexes when they already serve `torch==VERSION+cpu` (a local
# mirror or wheel folder: nothing is fetched from elsewhere), else from PyTorch's CPU index; when that index
# cannot be reached (a machine that reaches only PyPI or a company mirror of it), the script says so in one
# line and installs `torch==VERSION` from pip's configured index (on Linux PyPI's build, with CUDA libraries).
# The CUDA build is PyPI's Linux wheel, i.e. whatever pip's configured indexes serve for `torch==VERSION`.

TORCH_CPU_INDEX="https://download.pytorch.org/whl/cpu"

# Prints how an NVIDIA GPU was seen and returns 0, or returns 1 when none was.
nvidia_gpu() {
  local gpus="${FEDCLUSTER_NVIDIA_PROC:-/proc/driver/nvidia}/gpus"
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "nvidia-smi"
  elif [ -d "$gpus" ] && [ -n "$(ls -A "$gpus" 2>/dev/null)" ]; then
    echo "$gpus"
  elif command -v lspci >/dev/null 2>&1 && lspci 2>/dev/null | grep -iE 'vga|3d controller|display' | grep -qi nvidia; then
    echo "lspci"
  else
    return 1
  fi
}

# True when pip's configured indexes (and find-links) serve torch==VERSION+cpu. $1: version, $2: python.
configured_index_serves_cpu_torch() {
  "$2" -m pip index versions torch --disable-pip-version-check 2>/dev/null \
    | grep -i '^Available versions:' | tr ',' '\n' | sed 's/^.*: //; s/ //g' | grep -qxF "$1+cpu"
}

# True when PyTorch's CPU index answers pip and serves torch==VERSION (+cpu). $1: version, $2: python.
# One try, no retries: an unreachable index fails in seconds instead of pip's five retries.
cpu_index_serves_torch() {
  "$2" -m pip index versions torch --disable-pip-version-check --index-url "$TORCH_CPU_INDEX" --retries 0 \
      --timeout 15 2>/dev/null \
    | grep -i '^Available versions:' | tr ',' '\n' | sed 's/^.*: //; s/ //g' | grep -qxE "${1//./\\.}(\+cpu)?"
}

# Prints the `pip install` arguments for torch==VERSION ($1) with python $2 on one line, and on stderr one line
# saying which build was chosen, why, and how to choose the other. Returns 2 on a bad FEDCLUSTER_TORCH_BUILD.
torch_pip_args() {
  local version="$1" py="$2" build="${FEDCLUSTER_TORCH_BUILD:-auto}" why seen
  if [ -n "${FEDCLUSTER_TORCH_INDEX:-}" ]; then
    echo "install.sh: torch==$version from FEDCLUSTER_TORCH_INDEX=$FEDCLUSTER_TORCH_INDEX" >&2
    echo "--index-url $FEDCLUSTER_TORCH_INDEX torch==$version"
    return 0
  fi
  case "$build" in
    auto)
      if seen="$(nvidia_gpu)"; then build=cuda; why="an NVIDIA GPU was found ($seen)"
      else build=cpu; why="no NVIDIA GPU was found (nvidia-smi, /proc/driver/nvidia, lspci)"; fi ;;
    cpu | cuda) why="FEDCLUSTER_TORCH_BUILD=$build" ;;
    *)
      echo "install.sh: FEDCLUSTER_TORCH_BUILD must be auto, cpu or cuda, not '$build'" >&2
      return 2 ;;
  esac
  if [ "$build" = cuda ]; then
    echo "install.sh: $why: installing the CUDA build of torch==$version from pip's configured index" \
      "(several GB; FEDCLUSTER_TORCH_BUILD=cpu installs the CPU-only build)" >&2
    echo "torch==$version"
  elif [ "$(uname -s)" != Linux ]; then
    echo "install.sh: $why: installing torch==$version from pip's configured index (CPU-only on $(uname -s))" >&2
    echo "torch==$version"
  elif configured_index_serves_cpu_torch "$version" "$py"; then
    echo "install.sh: $why: installing the CPU build torch==$version+cpu from pip's configured index" \
      "(FEDCLUSTER_TORCH_BUILD=cuda installs the CUDA build)" >&2
    echo "torch==$version+cpu"
  elif cpu_index_serves_torch "$version" "$py"; then
    echo "install.sh: $why: installing the CPU build of torch==$version from $TORCH_CPU_INDEX" \
      "(FEDCLUSTER_TORCH_BUILD=cuda installs the CUDA build)" >&2
    echo "--index-url $TORCH_CPU_INDEX torch==$version"
  else
    echo "install.sh: $why, but PyTorch's CPU index $TORCH_CPU_INDEX cannot be reached (or lacks" \
      "torch==$version): installing torch==$version from pip's configured index instead (on Linux PyPI's build," \
      "several GB with its CUDA libraries; FEDCLUSTER_TORCH_INDEX=URL names an index that serves the CPU build)" >&2
    echo "torch==$version"
  fi
}
