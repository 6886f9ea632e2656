#!/usr/bin/env bash
# A few hundred photos: the few-photos preset against the pretrained preset's linear probe
# (probe_photos=4000 lr=0.0002 epochs=10, the probe kept), both train steps on the same
# flower photos split three ways (split seeds 0, 1, 2: 50 val photos each, the test split
# the same sha256 share in all three). Prints the machine, then each run's val accuracy
# after each epoch and the train step's seconds.
#
#   bash benchmarks/few_photos.sh 2>&1 | tee docs/bench-results/few-photos-DATE-MACHINE.txt
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=${BENCH:-runs/bench}/few-photos
SOURCE=${SOURCE:-../shared/data/flowers-sample.zip}
mkdir -p "$BENCH"
export MLFLOW_TRACKING_URI="sqlite:///$PWD/$BENCH/mlflow.db"
lscpu | grep -E "^Model name|^CPU\(s\)"
lscpu | grep -o -E "avx512_bf16|amx_bf16|avx512_vnni" | sort -u | tr '\n' ' '; echo
rm -rf "$BENCH/raw"
python -m components.download --source "$SOURCE" --output "$BENCH/raw" 2>/dev/null
for seed in 0 1 2; do
  rm -rf "$BENCH/arrays$seed"
  python -m components.preprocess --preset pretrained --input "$BENCH/raw" \
    --output "$BENCH/arrays$seed" --split-seed "$seed" 2>/dev/null
done
train() {  # NAME SEED FLAGS...: one train step, its val accuracy by epoch and its seconds
  local name=$1 seed=$2; shift 2
  local out="$BENCH/out-$name-$seed" start=$SECONDS
  python -m components.train --data "$BENCH/arrays$seed" --output "$out" --overwrite "$@" \
    > "$out.log" 2>&1
  python -c "import json, sys; h = json.load(open(sys.argv[1])); \
print(sys.argv[2], 'seed', sys.argv[3], [round(e['val_accuracy'], 2) for e in h \
if 'val_accuracy' in e], sys.argv[4], 's')" \
    "$out/history.json" "$name" "$seed" "$((SECONDS - start))"
}
for seed in 0 1 2; do
  train probe "$seed" --preset pretrained --probe-photos 4000 --lr 0.0002 --epochs 10
  train few-photos "$seed" --preset few-photos
done
