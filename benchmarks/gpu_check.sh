#!/usr/bin/env bash
# Every GPU figure and the CUDA test results of fedcluster into one folder, in one command, within a time budget.
#
# Usage (from the repository root, with the project's Python environment active or PYTHON=...):
#   benchmarks/gpu_check.sh [--quick] [--budget SECONDS] [--out FOLDER]
# (budget: 600 s, --quick 900 s; PYTHON=... names the interpreter, e.g. PYTHON=".venv/bin/python")
#
# Steps, each with its own time limit and log (FOLDER/<step>.log), the exit status and seconds of each in
# FOLDER/summary.md:
#   env       python/torch/numpy versions and nvidia-smi
#   tests     the default test suite (pytest -m 'not slow'; with pytest-xdist, on all but two cores), JUnit XML
#   speed     benchmarks/engine_speed.py --device cuda (fp32, deterministic), MLP/CNNs/ResNet-18, FedRC round
#   bf16      the same with --precision bf16 (MLP and CNNs)
#   resnet    ResNet-18 fast path with --nondeterministic (TF32, cuDNN autotuning): what determinism costs
#   scaling   benchmarks/scaling.py --devices cuda (FedAvg and FedRC at 100, 1,000 and 10,000 clients)
#   paper     benchmarks/diverse_shift.py --scale paper --seeds 0 (the FedRC paper Table 1's setting, one seed) with the
#             time left; its run folders keep every finished round if the time runs out
# --quick runs every step on the CPU with tiny settings (2-5 minutes): a check of the script itself.
set -u

QUICK=0
BUDGET=
OUT="gpu-check-$(date -u +%Y%m%d-%H%M%S)"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --budget) BUDGET="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "gpu_check: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

[ -z "$BUDGET" ] && { [ "$QUICK" -eq 1 ] && BUDGET=900 || BUDGET=600; }
PY="${PYTHON:-python}"  # may carry a prefix, e.g. PYTHON="env PYTHONPATH=src .venv/bin/python"
read -ra PYCMD <<< "$PY"
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
mkdir -p "$OUT" || { echo "gpu_check: cannot create $OUT" >&2; exit 2; }
OUT="$(cd "$OUT" && pwd)"
START=$(date +%s)
SUMMARY="$OUT/summary.md"
printf '# fedcluster GPU check (%s)\n\nbudget %s s, quick=%s, commit %s\n\n| step | exit | seconds | command |\n|---|---|---|---|\n' \
  "$(date -u '+%Y-%m-%d %H:%M UTC')" "$BUDGET" "$QUICK" "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')" \
  > "$SUMMARY"

left() { echo $(( BUDGET - ($(date +%s) - START) )); }

# step NAME CAP_SECONDS COMMAND...: runs COMMAND (from the repository root) for at most CAP seconds and what is
# left of the budget less RESERVE (kept for the later steps), logs it and adds a summary row.
step() {
  local name="$1" cap="$2"; shift 2
  [ "$QUICK" -eq 1 ] && cap=$(( cap * 3 ))  # a shared CPU runs even tiny settings slowly
  local limit
  limit=$(( $(left) - RESERVE ))
  [ "$cap" -lt "$limit" ] && limit="$cap"
  if [ "$limit" -lt 5 ]; then
    printf '| %s | skipped (no time left) | 0 | `%s` |\n' "$name" "$*" >> "$SUMMARY"
    return
  fi
  local t0=$(date +%s)
  (cd "$ROOT" && timeout --signal=INT --kill-after=20 "$limit" "$@") > "$OUT/$name.log" 2>&1
  local rc=$?
  local note="$rc"
  [ "$rc" -eq 124 ] && note="124 (stopped at its ${limit} s limit)"
  printf '| %s | %s | %s | `%s` |\n' "$name" "$note" "$(( $(date +%s) - t0 ))" "$*" >> "$SUMMARY"
  echo "gpu_check: $name: exit $rc, log $OUT/$name.log"
}

if [ "$QUICK" -eq 1 ]; then
  DEV=cpu
  TESTS=(tests/test_chunk_planner.py tests/test_inference_launches.py)
  SPEED=(--device cpu --models logistic --clients 2 --rounds 1 --fedrc none)
  BF16=(--device cpu --precision bf16 --models logistic --clients 2 --rounds 1 --fedrc none)
  RESNET=(--device cpu --models logistic --clients 2 --rounds 1 --fedrc none --nondeterministic)
  SCALING=(--devices cpu --clients 20 --methods fedavg,fedrc --rounds 1)
  PAPER=(--scale small --clients 6 --fraction 0.05 --test-size 30 --rounds 2 --lr 0.01 --methods fedavg,ifca
         --seeds 0 --set device=cpu --set progress=false)
else
  DEV=cuda
  TESTS=()
  SPEED=(--device cuda --rounds 2)
  BF16=(--device cuda --precision bf16 --models mlp,light-cnn,cnn --fedrc none --rounds 2)
  RESNET=(--device cuda --models resnet18 --fedrc none --rounds 1 --nondeterministic)
  SCALING=(--devices cuda --rounds 2)
  PAPER=(--scale paper --seeds 0 --methods fedavg,ifca,fesem,fedrc --set device=cuda --set progress=false)
fi

RESERVE=0
step env 30 bash -c "$PY -c 'import sys, torch, numpy; print(sys.version); print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"available\", torch.cuda.is_available()); print(\"numpy\", numpy.__version__)'; nvidia-smi || true"
if [ "$DEV" = cuda ] && ! "${PYCMD[@]}" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_check: PyTorch sees no GPU here; run with --quick for the CPU check of this script" >&2
  exit 2
fi

PARALLEL=()
if "${PYCMD[@]}" -c 'import xdist' 2>/dev/null; then
  PARALLEL=(-n "$(( $(nproc) > 4 ? $(nproc) - 2 : 2 ))")
fi
RESERVE=$(( BUDGET * 55 / 100 ))  # the benchmarks need more than half of the budget
step tests 240 "${PYCMD[@]}" -m pytest -p no:cacheprovider -q "${PARALLEL[@]}" --junitxml "$OUT/tests.xml" "${TESTS[@]}"
RESERVE=$(( BUDGET * 30 / 100 ))
step speed 150 "${PYCMD[@]}" benchmarks/engine_speed.py "${SPEED[@]}"
RESERVE=$(( BUDGET * 25 / 100 ))
step bf16 45 "${PYCMD[@]}" benchmarks/engine_speed.py "${BF16[@]}"
step resnet 45 "${PYCMD[@]}" benchmarks/engine_speed.py "${RESNET[@]}"
step scaling 45 "${PYCMD[@]}" benchmarks/scaling.py "${SCALING[@]}" --out "$OUT/scaling.csv"
RESERVE=5
step paper 100000 "${PYCMD[@]}" benchmarks/diverse_shift.py "${PAPER[@]}" --out "$OUT/paper"

{
  printf '\n## Failing tests\n\n'
  grep -E '^(FAILED|ERROR) ' "$OUT/tests.log" | head -200 || true
  printf '\n## Tables\n\n```\n'
  for s in speed bf16 resnet scaling; do
    echo "== $s"; grep -vE '^\s*$|Warning|warn' "$OUT/$s.log" | tail -20
  done
  echo "== paper"; tail -25 "$OUT/paper.log"
  printf '```\n\ntotal %s s\n' "$(( $(date +%s) - START ))"
} >> "$SUMMARY"
echo "gpu_check: everything is in $OUT (summary: $SUMMARY)"
