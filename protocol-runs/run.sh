#!/bin/bash
# The FedRC entries at the FedRC paper's protocol, one worker, one thread each (shared machine).
cd "$(dirname "$0")/.." || exit 1
export PYTHONPATH=$PWD/src
PY=/work/main/.venv/bin/python
OUT=protocol-runs/reproduction
for name in s4-table1-fmnist s4-ablation-tehc-trhc s4-ablation-shared-extractor; do
  $PY -m fedcluster reproduce "$name" --budget protocol --estimate --workers 1 --set threads=1 --out $OUT
done
for name in s4-table1-fmnist s4-ablation-tehc-trhc s4-ablation-shared-extractor; do
  $PY -m fedcluster reproduce "$name" --budget protocol --seeds 3 --workers 1 --set threads=1 --out $OUT
done
