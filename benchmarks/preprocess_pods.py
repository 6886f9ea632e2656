"""Preprocess over two pods on 92,000 photos: the plan, slice and join tasks' bodies, one
per command (plan, slice0, slice1, join), each called as KFP calls it.

    for step in "plan 2" "slice0 4" "slice1 4" "join 1"; do set -- $step
      python -m benchmarks.memory_group --limit-gib $2 -- python -m benchmarks.preprocess_pods $1
    done
"""

from __future__ import annotations

import sys

from kfp.dsl import Dataset

from pipeline import ops

BENCH = "runs/bench"
SETTINGS = {  # the pretrained preset's photos
    "image_size": 260,
    "channels": 3,
    "val_fraction": 0.1,
    "test_fraction": 0.1,
    "split_seed": 0,
    "shard_mb": 1024,
}


def main(step: str) -> None:
    raw = Dataset(name="raw", uri=f"{BENCH}/archive92k", metadata={})
    plan = Dataset(name="plan", uri=f"{BENCH}/pods/plan", metadata={})
    parts = [Dataset(name="shards", uri=f"{BENCH}/pods/slice{i}", metadata={}) for i in (0, 1)]
    if step == "plan":
        ops.preprocess_plan_op.python_func(raw=raw, plan=plan, slices=2, **SETTINGS)
    elif step in ("slice0", "slice1"):
        index = int(step[-1])
        ops.preprocess_slice_op.python_func(raw=raw, plan=plan, index=index, shards=parts[index])
    else:
        arrays = Dataset(name="arrays", uri=f"{BENCH}/pods/arrays", metadata={})
        ops.preprocess_join_op.python_func(raw=raw, plan=plan, slices=parts, arrays=arrays)
        print(arrays.metadata)


if __name__ == "__main__":
    main(sys.argv[1])
