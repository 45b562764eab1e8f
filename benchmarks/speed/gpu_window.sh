#!/usr/bin/env bash
# The GPU figures that decide what to do next, in one command that fits a short GPU window.
#
# Usage (from the repository root):
#   benchmarks/speed/gpu_window.sh [--out FOLDER] [--budget SECONDS] [--quick] [--steps LIST] [--shard I/N]
# (--out defaults to $OUT, else gpu-window-TIME; --budget 450 s of work; PYTHON=... names the interpreter, default
# python3; --steps a comma list of the steps below, default all.)
#
# On a GPU machine it first installs the project offline (pip -e, no dependencies, no index), then runs, the most
# decision-relevant first, each step in its own process within its own limit and what is left of the budget (a step
# stopped at its limit keeps what it wrote; a step that fails puts its error line in summary.md):
#   fmnist      Fashion-MNIST found and readable ($FMNIST_DIR, .gpu-data/fashion-mnist/ or Debian's folder)
#   paper       the FedRC paper's Table 1 scale (300 clients × 160 samples, batch 128), FedRC then IFCA, 4 rounds,
#               median s/round of rounds 2-4, one process per mode (paper CNN fast / bf16 / deterministic, light CNN
#               fast / deterministic) and the whole table estimated from them (benchmarks/speed/paper_rounds.py)
#   resnet      ResNet-18 at 20 clients, one round: the framework-style loop, then the fast path (engine=auto:
#               unit-loop), fp32 then bf16, one process each (benchmarks/speed/engine_speed.py)
#   tests       the device test files and the files that failed on a GPU before, with tracebacks (tests.log), then
#               one shard of the rest of the default suite (--shard I/N; default: the day's shard of 3, so three
#               windows cover it); pytest-xdist when installed, a per-test timeout when pytest-timeout is
#   regression  MLP / light CNN / CNN fast path, deterministic, against the 2026-11-25 figures
# GPU utilisation and memory are sampled every second in the background (smi.csv) and summed up per step.
# Every figure is appended to FOLDER/summary.md as soon as it exists. FOLDER gets at most 5 files: summary.md,
# smi.csv, steps.log (every step's output), tests.log and runs.tar.gz (the run folders).
# --quick runs every step on the CPU with tiny settings, limits and budget 4 times longer: a check of the script.
set -u

QUICK=0
BUDGET=450
OUT_DIR="${OUT:-gpu-window-$(date -u +%Y%m%d-%H%M%S)}"
STEPS="fmnist,paper,tests,resnet,regression"
SHARD="$(( $(date -u +%s) / 86400 % 3 + 1 ))/3"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --out) OUT_DIR="$2"; shift ;;
    --budget) BUDGET="$2"; shift ;;
    --steps) STEPS="$2"; shift ;;
    --shard) SHARD="$2"; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "gpu_window: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if ! [[ "$SHARD" =~ ^([0-9]+)/([0-9]+)$ ]] || [ "${BASH_REMATCH[1]}" -lt 1 ] \
    || [ "${BASH_REMATCH[1]}" -gt "${BASH_REMATCH[2]}" ]; then
  echo "gpu_window: --shard $SHARD is not I/N with 1 <= I <= N (e.g. --shard 2/3)" >&2; exit 2
fi

SLACK=1  # --quick: every limit 4 times longer (a check on a busy CPU, not a timing) and a budget to match
if [ "$QUICK" -eq 1 ]; then SLACK=4; BUDGET=$(( BUDGET * 4 )); fi
START=$(date +%s)
PY="${PYTHON:-python3}"
read -ra PYCMD <<< "$PY"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$OUT_DIR" || { echo "gpu_window: cannot create $OUT_DIR" >&2; exit 2; }
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
WORK="$(mktemp -d)"
SUMMARY="$OUT_DIR/summary.md" LOG="$OUT_DIR/steps.log" SMI="$OUT_DIR/smi.csv" TESTLOG="$OUT_DIR/tests.log"
export FEDCLUSTER_CACHE="$WORK/cache" PYTHONUNBUFFERED=1
cd "$ROOT" || exit 2

elapsed() { echo $(( $(date +%s) - START )); }
say() { printf '%s\n' "$*" >> "$SUMMARY"; echo "gpu_window: $*"; }
wanted() { [[ ",$STEPS," == *",$1,"* ]]; }

# util_since LINE: mean and max GPU utilisation and the largest memory use sampled since line LINE of smi.csv
util_since() {
  [ -s "$SMI" ] || { echo "no GPU samples"; return; }
  tail -n +"$(( $1 + 1 ))" "$SMI" | awk -F', *' '$2 ~ /^[0-9]+$/ {n++; s+=$2; if ($2>m) m=$2; if ($4>u) u=$4}
    END {if (n) printf "GPU util mean %.0f %%, max %d %%, memory max %d MiB (%d samples)", s/n, m, u, n;
         else printf "no GPU samples"}'
}

# step NAME CAP COMMAND...: COMMAND for at most CAP seconds and what is left of the budget; output to steps.log
step() {
  local name="$1" cap="$(( $2 * SLACK ))"; shift 2
  local left=$(( BUDGET - $(elapsed) ))
  [ "$cap" -lt "$left" ] && left="$cap"
  if [ "$left" -lt 5 ]; then
    say "- $name: skipped (no time left of the $BUDGET s budget)"
    return 99
  fi
  local t0 lines rc log_lines
  t0=$(date +%s)
  lines=$(wc -l < "$SMI" 2>/dev/null || echo 0)
  log_lines=$(wc -l < "$LOG")
  printf '\n===== %s (limit %s s): %s\n' "$name" "$left" "$*" >> "$LOG"
  timeout --signal=INT --kill-after=15 "$left" "$@" >> "$LOG" 2>&1
  rc=$?
  local note="exit $rc"
  [ "$rc" -eq 124 ] && note="stopped at its ${left} s limit"
  say "- $name: $note, $(( $(date +%s) - t0 )) s; $(util_since "$lines")"
  if [ "$rc" -ne 0 ]; then  # the step's own last error line (e.g. a refusal), so the summary says why
    local why
    why=$(tail -n +"$(( log_lines + 1 ))" "$LOG" | grep -E '(Error|error|Exception)[:]' | tail -1 | cut -c1-400)
    [ -n "$why" ] && say "  $why"
  fi
  return "$rc"
}

printf '# fedcluster GPU window (%s)\n\ncommit %s, budget %s s of work, quick=%s\n\n' \
  "$(date -u '+%Y-%m-%d %H:%M UTC')" "$(git rev-parse --short HEAD 2>/dev/null || echo '?')" "$BUDGET" "$QUICK" \
  > "$SUMMARY"
: > "$LOG"
: > "$SMI"

if [ "$QUICK" -eq 0 ]; then
  step install 60 "${PYCMD[@]}" -m pip install -q --no-deps --no-build-isolation --no-index -e . \
    || { say "the offline install failed (steps.log); stopping"; exit 2; }
fi

SMI_PID=
if command -v nvidia-smi > /dev/null 2>&1; then
  nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used,memory.total \
    --format=csv,noheader,nounits -l 1 > "$SMI" 2>/dev/null &
  SMI_PID=$!
fi
stop_sampler() { [ -n "$SMI_PID" ] && kill "$SMI_PID" 2>/dev/null; SMI_PID=; }
trap stop_sampler EXIT

ENV=$("${PYCMD[@]}" - <<'EOF' 2>&1
import importlib.util, sys, torch
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
extras = ", ".join(f"{m} {'yes' if importlib.util.find_spec(m) else 'no'}" for m in ("xdist", "pytest_timeout"))
print(f"Python {sys.version.split()[0]}, torch {torch.__version__} (CUDA {torch.version.cuda}), {gpu}; {extras}")
EOF
)
say "$ENV"
if [ "$QUICK" -eq 0 ] && ! "${PYCMD[@]}" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  say "PyTorch sees no GPU here; run with --quick for the CPU check of this script"
  exit 2
fi
if [ "$QUICK" -eq 1 ]; then DEV=cpu; else DEV=cuda; fi

# -- fmnist ---------------------------------------------------------------------------------------------------
FMNIST=
for d in "${FMNIST_DIR:-}" "$ROOT/.gpu-data/fashion-mnist" /usr/share/datasets/fashion-mnist; do
  if [ -n "$d" ] && [ -e "$d/train-images-idx3-ubyte.gz" -o -e "$d/train-images-idx3-ubyte" ]; then FMNIST="$d"; break; fi
done
if wanted fmnist || wanted paper; then
  if [ -z "$FMNIST" ]; then
    say "- fmnist: Fashion-MNIST not found (FMNIST_DIR, .gpu-data/fashion-mnist/, /usr/share/datasets/fashion-mnist);"\
" the paper step is skipped"
  else
    step fmnist 30 "${PYCMD[@]}" -c "from fedcluster.data.sources.fashion_mnist import load_fashion_mnist as f; \
d = f('$FMNIST'); print(d.x_train.shape if hasattr(d, 'x_train') else d)" || FMNIST=
    [ -n "$FMNIST" ] && say "  Fashion-MNIST read from $FMNIST"
  fi
fi

# -- paper: the FedRC paper's Table 1 scale, per device mode --------------------------------------------------------
if wanted paper && [ -n "$FMNIST" ]; then
  say ""
  say "## FedRC paper Table 1 scale: seconds per round (IFCA, FedRC, K = 3)"
  if [ "$QUICK" -eq 1 ]; then
    PAPER=(--clients 4 --fraction 0.003 --test-size 20 --rounds 2 --set device=cpu)
    PAPER_MODES="paper-fast light-det"
  else
    PAPER=(--rounds 4 --set device=cuda)
    PAPER_MODES="paper-fast paper-bf16 paper-det light-fast light-det"
  fi
  header=()
  for mode in $PAPER_MODES; do  # one process per mode: a refusal or a crash costs that mode only
    step "paper-$mode" 40 "${PYCMD[@]}" benchmarks/speed/paper_rounds.py "${PAPER[@]}" --modes "$mode" --methods fedrc,ifca \
      --set "data_dir=$FMNIST" --set progress=false --summary "$SUMMARY" --out "$WORK/paper" "${header[@]}"
    [ "$(grep -c '^| mode | model | method' "$SUMMARY")" -gt 0 ] && header=(--no-header)
  done
fi

# -- resnet: the large-model path -----------------------------------------------------------------------------------
if wanted resnet; then
  say ""
  say "## ResNet-18, 20 clients × 600 samples, batch 32: s/round, one round (engine_speed.py)"
  if [ "$QUICK" -eq 1 ]; then
    RESNET=(--device cpu --models mlp --clients 2 --rounds 1 --fedrc none)
  else
    RESNET=(--device cuda --models resnet18 --clients 20 --rounds 1 --fedrc none)
  fi
  for precision in fp32 bf16; do
    for path in framework fast; do  # one process each: every figure lands in summary.md when it exists
      before=$(wc -l < "$LOG")
      step "resnet-$precision-$path" 35 "${PYCMD[@]}" benchmarks/speed/engine_speed.py "${RESNET[@]}" \
        --precision "$precision" --paths "$path"
      tail -n +"$(( before + 1 ))" "$LOG" | grep -E '^(resnet18|mlp) ' | tr -s ' ' \
        | sed "s/^/  $precision, $path (framework, sequential, fast path columns): /" >> "$SUMMARY"
    done
  done
fi

# -- tests --------------------------------------------------------------------------------------------------------
count_tests() {  # count_tests LOG: "N passed, M failed or errors" from a pytest -v log (plain or xdist)
  local passed failed
  passed=$(grep -oE 'tests/[^ ]+::[^ ]+ PASSED|PASSED tests/[^ ]+::[^ ]+' "$1" | grep -oE 'tests/[^ ]+::[^ ]+' \
    | sort -u | wc -l)
  failed=$(grep -oE 'tests/[^ ]+::[^ ]+ (FAILED|ERROR)|(FAILED|ERROR) tests/[^ ]+::[^ ]+' "$1" \
    | grep -oE 'tests/[^ ]+::[^ ]+' | sort -u | wc -l)
  echo "$passed passed, $failed failed or errors"
}
# test_step NAME CAP WHAT FILES...: pytest on FILES as step NAME, its log (tracebacks of every failure: pytest prints
# them when it ends, and when the step's limit interrupts it) appended to tests.log, its counts to summary.md
test_step() {
  local name="$1" cap="$2" what="$3" part="$WORK/$1.log"; shift 3
  : > "$part"
  step "$name" "$cap" bash -c '"$@" > "'"$part"'" 2>&1' _ "${PYTEST[@]}" "$@"
  { printf '\n===== %s: %s\n' "$name" "$what"; cat "$part"; } >> "$TESTLOG"
  say "  $what: $(count_tests "$part")"
  grep -oE 'tests/[^ ]+::[^ ]+ (FAILED|ERROR)|(FAILED|ERROR) tests/[^ ]+::[^ ]+' "$part" \
    | grep -oE 'tests/[^ ]+::[^ ]+' | sort -u | head -20 | sed 's/^/    FAILED /' >> "$SUMMARY"
}
if wanted tests; then
  say ""
  say "## Tests on this machine"
  PYTEST=("${PYCMD[@]}" -m pytest -p no:cacheprovider -vv -rfE --tb=short -m "not slow"
          -o console_output_style=classic)
  if "${PYCMD[@]}" -c 'import xdist' 2> /dev/null; then
    PYTEST+=(-n "$(( $(nproc) > 4 ? $(nproc) - 4 : 2 ))")
  fi
  "${PYCMD[@]}" -c 'import pytest_timeout' 2> /dev/null && PYTEST+=(--timeout 40)
  # the files whose tests use the GPU (marked `device`) or check device handling, and those that failed on a GPU
  DEVICE_TESTS=(tests/engine/test_device.py tests/engine/test_device_modes.py tests/engine/test_device_memory.py
                tests/engine/test_device_pin.py tests/engine/test_padding.py tests/engine/test_looped.py
                tests/models/test_big_models.py tests/engine/test_inference_launches.py)
  FAILED_BEFORE=(tests/engine/test_client_momentum.py tests/app/test_discoverability.py tests/engine/test_hard_prediction.py)
  if [ "$QUICK" -eq 1 ]; then
    DEVICE_TESTS=(tests/engine/test_padding.py::test_step_groups_cover_every_unit_once_within_the_tolerance)
    FAILED_BEFORE=(tests/engine/test_client_momentum.py::test_kept_momentum_is_refused_where_it_cannot_be_kept)
  fi
  : > "$TESTLOG"
  test_step tests-device 60 "device test files" "${DEVICE_TESTS[@]}"
  test_step tests-failed 45 "files that failed on a GPU before" "${FAILED_BEFORE[@]}"
  # the rest, sharded by file: every N-th of the sorted files from the I-th on (--shard I/N)
  REST=()
  if [ "$QUICK" -eq 1 ]; then
    REST=(tests/engine/test_device_pin.py)
  else
    i=0
    for f in tests/*/test_*.py; do
      case "$f" in tests/conformance/*) continue ;; esac  # the test files of the package's folders, as before
      case " ${DEVICE_TESTS[*]} ${FAILED_BEFORE[*]} tests/project/test_gpu_window.py " in *" $f "*) continue ;; esac
      [ $(( i % ${SHARD#*/} + 1 )) -eq "${SHARD%/*}" ] && REST+=("$f")
      i=$(( i + 1 ))
    done
  fi
  test_step tests-rest 90 "the rest, shard $SHARD (${#REST[@]} files)" "${REST[@]}"
fi

# -- regression: the small models' fast path ----------------------------------------------------------------------
if wanted regression; then
  say ""
  say "## Regression: fast path, deterministic, 100 clients × 600, batch 32 (2026-11-25 on one H100:"\
" mlp 0.078, light-cnn 0.258, cnn 0.423 s/round)"
  if [ "$QUICK" -eq 1 ]; then
    REG=(--device cpu --models logistic --clients 2 --rounds 1)
  else
    REG=(--device cuda --models mlp,light-cnn,cnn --rounds 2)
  fi
  before=$(wc -l < "$LOG")
  step regression 40 "${PYCMD[@]}" benchmarks/speed/engine_speed.py "${REG[@]}" --fedrc none --paths fast --deterministic
  { echo '```'; tail -n +"$(( before + 1 ))" "$LOG" | grep -E '^(torch|model|mlp|light-cnn|cnn|logistic) '; echo '```'; } \
    >> "$SUMMARY"
fi

stop_sampler
tar -czf "$OUT_DIR/runs.tar.gz" -C "$WORK" --exclude=cache . 2>> "$LOG"
rm -rf "$WORK"
say ""
say "total $(elapsed) s; files: $(cd "$OUT_DIR" && ls | tr '\n' ' ')"
