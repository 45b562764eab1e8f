#!/usr/bin/env bash
# Reproduction records built up in a short GPU window: each NAME:BUDGET given runs with `fedcluster reproduce
# NAME --budget BUDGET --seeds 3 --device cuda --time-limit ...` until the window's minutes are spent, continuing
# from the records stored in docs/reproduction/in-progress/gpu-BUDGET/NAME.json (when there are some).
#
# Usage (from the repository root, Fashion-MNIST's four files in .gpu-data/fashion-mnist/):
#   benchmarks/fidelity/gpu_records.sh --out FOLDER --minutes M [--workers N] NAME:BUDGET [NAME:BUDGET ...]
# e.g. benchmarks/fidelity/gpu_records.sh --out "$OUT" --minutes 8 s4-table1-fmnist:protocol s4-table1-fmnist:paper
#
# FOLDER gets gpu-BUDGET/NAME.json for each entry (the stored runs, old and new) and records.log; copy each JSON back
# into docs/reproduction/in-progress/gpu-BUDGET/, and once every seed is in, into docs/reproduction/ and publish it
# with `fedcluster reproduce NAME --report-only --publish`. Entries run in the order given, each with what is left
# of the minutes (an entry whose runs are all stored ends at once). PYTHON names the interpreter (default python3);
# --no-install skips the offline `pip install -e .`; --stored DIR reads the stored records from DIR/gpu-BUDGET/
# instead; DEVICE=cpu runs the same on the CPU (a check of this script); DATA_DIR names another Fashion-MNIST folder
# (keep it the same from one window to the next: it is part of the stored records' settings). --workers N (default
# 4) keeps N runs going at once on the one GPU, each within its share of the memory plan; every finished run is kept
# in a run store that comes back as FOLDER/store.tar.gz (unpack it into docs/reproduction/ to give docs/reproduction/store/), and the GPU's
# utilisation, sampled every second by nvidia-smi where it exists, as FOLDER/gpu-utilisation.csv.
set -u

OUT_DIR="" MINUTES="" INSTALL=1 ENTRIES=() STORED="docs/reproduction/in-progress" WORKERS=4
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT_DIR="$2"; shift ;;
    --minutes) MINUTES="$2"; shift ;;
    --no-install) INSTALL=0 ;;
    --stored) STORED="$2"; shift ;;
    --workers) WORKERS="$2"; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "gpu_records: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) ENTRIES+=("$1") ;;
  esac
  shift
done
if [ -z "$OUT_DIR" ] || ! [[ "$MINUTES" =~ ^[0-9]+([.][0-9]+)?$ ]] || [ "${#ENTRIES[@]}" -eq 0 ] \
    || ! [[ "$WORKERS" =~ ^[1-9][0-9]?$ ]]; then
  echo "gpu_records: give --out FOLDER, --minutes M (a number), --workers N (1-99) and at least one NAME:BUDGET" \
       "(see --help)" >&2
  exit 2
fi
for entry in "${ENTRIES[@]}"; do
  if ! [[ "$entry" =~ ^[a-z0-9-]+:(small|protocol|paper)$ ]]; then
    echo "gpu_records: $entry is not NAME:BUDGET with BUDGET one of small, protocol, paper" >&2; exit 2
  fi
done
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT" || exit 2
mkdir -p "$OUT_DIR" || { echo "gpu_records: cannot create $OUT_DIR" >&2; exit 2; }
LOG="$OUT_DIR/records.log"
PY="${PYTHON:-python3}"
read -ra PYCMD <<< "$PY"
START=$(date +%s)
export PYTHONUNBUFFERED=1 FEDCLUSTER_CACHE="${FEDCLUSTER_CACHE:-$(mktemp -d)}"
if [ "$INSTALL" -eq 1 ]; then
  "${PYCMD[@]}" -m pip install -q --no-deps --no-build-isolation --no-index -e . >> "$LOG" 2>&1 \
    || { echo "gpu_records: the offline install failed (see $LOG)" | tee -a "$LOG" >&2; exit 2; }
fi
SAMPLER=""
if command -v nvidia-smi > /dev/null 2>&1; then
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 1 > "$OUT_DIR/gpu-utilisation.csv" 2>/dev/null &
  SAMPLER=$!
fi
for entry in "${ENTRIES[@]}"; do
  name="${entry%%:*}" budget="${entry##*:}"
  left=$("${PYCMD[@]}" -c "print(round($MINUTES - ($(date +%s) - $START) / 60, 2))")
  if "${PYCMD[@]}" -c "import sys; sys.exit(0 if $left >= 0.5 else 1)"; then :; else
    echo "$entry: skipped, ${left} min left" | tee -a "$LOG"; continue
  fi
  dir="$OUT_DIR/gpu-$budget"
  mkdir -p "$dir"
  stored="$STORED/gpu-$budget/$name.json"
  [ -f "$stored" ] && [ ! -f "$dir/$name.json" ] && cp "$stored" "$dir/"
  echo "== $entry: at most $left min ($(( $(date +%s) - START )) s in)" | tee -a "$LOG"
  "${PYCMD[@]}" -m fedcluster reproduce "$name" --budget "$budget" --seeds 3 --device "${DEVICE:-cuda}" --time-limit "$left" \
    --workers "$WORKERS" --store "$OUT_DIR/store" --set "data_dir=${DATA_DIR:-.gpu-data/fashion-mnist}" \
    --set progress=false --out "$dir" >> "$LOG" 2>&1
  echo "$entry: exit $? after $(( $(date +%s) - START )) s" | tee -a "$LOG"
done
[ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null
# the pages the command writes beside each JSON stay on the machine: only the records travel back, the store as one file
if [ -d "$OUT_DIR/store" ]; then
  tar czf "$OUT_DIR/store.tar.gz" -C "$OUT_DIR" store && rm -rf "$OUT_DIR/store"
fi
find "$OUT_DIR" -mindepth 2 -type f ! -name '*.json' -delete
echo "total $(( $(date +%s) - START )) s" | tee -a "$LOG"
