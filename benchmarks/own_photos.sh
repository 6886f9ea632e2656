#!/usr/bin/env bash
# Your own photos: the pipeline on five flower classes by the few-photos preset, beside two
# baselines in the same run (the pretrained preset's linear probe, kept through a short
# fine-tune; the tutorial preset), each registered under a name of its own; then each
# registered @candidate names the test photos preprocess kept, through components.predict
# from the registry as typed. Prints the machine, then every command and its output.
#
#   bash benchmarks/own_photos.sh 2>&1 | tee docs/bench-results/own-photos-DATE-MACHINE.txt
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=${BENCH:-runs/bench}/own-photos
SOURCE=$(realpath "${SOURCE:-../shared/data/flowers-sample.zip}")
rm -rf "$BENCH" && mkdir -p "$BENCH"
export MLFLOW_TRACKING_URI="sqlite:///$(realpath "$BENCH")/mlflow.db"
lscpu | grep -E "^Model name|^CPU\(s\)|^CPU family|^Model:"
lscpu | grep -o -E "avx512_bf16|amx_bf16|avx512_vnni" | sort -u | tr '\n' ' '; echo
run() {  # WORKDIR NAME PRESET SETTINGS...: the pipeline, then its model from the registry
  local workdir=$1 name=$2 preset=$3; shift 3
  set -x
  /usr/bin/time -f "%e s" python -m pipeline run --local --preset "$preset" --source "$SOURCE" \
    --workdir "$BENCH/$workdir" registered_model_name="$name" "$@"
  { set +x; } 2>/dev/null
  local arrays
  arrays=$(ls -d "$BENCH/$workdir"/outputs/*/preprocess-op/arrays | head -1)
  python -m benchmarks.predict_runtimes --model "models:/$name@candidate" --data "$arrays" \
    --runtimes auto --rounds 1 || echo "no @candidate under $name: nothing to predict with"
}
run few flowers few-photos
run probe flowers-probe pretrained probe_photos=4000 lr=0.0002 epochs=10 min_accuracy=0.75
run tutorial flowers-tutorial tutorial min_accuracy=0.4
