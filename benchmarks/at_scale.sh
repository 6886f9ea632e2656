#!/usr/bin/env bash
# Photos at any size: the pretrained preset's preprocess, train and evaluate steps on the
# 23,000-photo set and on 92,000 photos grown from it, each step inside a memory cgroup at
# its pod's limit (preprocess 4 GiB, train 8 GiB on 23,000 and 6 GiB on 92,000, evaluate
# 8 GiB). Prints the machine, then each step's log and its benchmarks.memory_group line.
#
#   bash benchmarks/at_scale.sh 2>&1 | tee docs/bench-results/at-scale-DATE-MACHINE.txt
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=${BENCH:-runs/bench}
export MLFLOW_TRACKING_URI="sqlite:///$PWD/$BENCH/at-scale-mlflow.db"
lscpu | grep -E "^Model name|^CPU\(s\)"
lscpu | grep -o -E "avx512_bf16|amx_bf16|avx512_vnni" | sort -u | tr '\n' ' '; echo
if [ ! -d "$BENCH/archive92k" ]; then
  python -m benchmarks.grow_archive --source ../shared/data/petimages-23k.zip \
    --output "$BENCH/archive92k" --times 4
fi
in_group() {  # LIMIT_GIB COMMAND...: the command inside a memory cgroup of that limit
  local limit=$1; shift
  echo "== $* (limit ${limit} GiB)"
  python -m benchmarks.memory_group --limit-gib "$limit" -- "$@"
}
for photos in 23k 92k; do
  rm -rf "$BENCH/arrays$photos"
  in_group 4 python -m components.preprocess --input "$BENCH/archive$photos" \
    --output "$BENCH/arrays$photos" --preset pretrained
done
in_group 8 python -m components.train --data "$BENCH/arrays23k" --output "$BENCH/model23k" \
  --preset pretrained --overwrite
rm -rf "$BENCH/eval23k"
in_group 8 python -m components.evaluate --model-dir "$BENCH/model23k" \
  --data "$BENCH/arrays23k" --output "$BENCH/eval23k"
in_group 6 python -m components.train --data "$BENCH/arrays92k" --output "$BENCH/model92k" \
  --preset pretrained --epochs 1 --overwrite
