#!/bin/bash
# The FedRC entries whose protocol-budget estimate is a few CPU hours, at the FedRC paper's protocol, 3 seeds, one
# worker with one thread (a shared machine). s4-table1-fmnist (about 26 CPU hours measured) waits for a GPU.
cd "$(dirname "$0")/.." || exit 1
export PYTHONPATH=$PWD/src
PY=/work/main/.venv/bin/python
OUT=protocol-runs/reproduction
for name in s4-ablation-shared-extractor s4-ablation-tehc-trhc; do
  $PY -m fedcluster reproduce "$name" --budget protocol --seeds 3 --workers 1 --set threads=1 --out $OUT
done
