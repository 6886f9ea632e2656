"""Preprocess spread over pods: a plan task, slice tasks in a ParallelFor, a join task.

The slices run here one after another through their components' bodies, and on kfp.local
as a real ParallelFor; either way the arrays are byte for byte those one preprocess task
writes. The compiled spec is read as KFP's backend reads it.
"""

from pathlib import Path

import pytest
import yaml
from kfp import dsl, local
from kfp.dsl import Dataset

from components.core.names import TEST_PHOTOS_DIR
from components.preprocessing.build import build_arrays
from components.preprocessing.config import PreprocessConfig
from pipeline import ops
from pipeline.__main__ import main as pipeline_main
from pipeline.local import kfp_swaps_undone
from tests.pipeline.conftest import GPU_IMAGE, IMAGE, task

SETTINGS = {
    "image_size": 24,
    "channels": 3,
    "val_fraction": 0.1,
    "test_fraction": 0.1,
    "split_seed": 4,
    "shard_mb": 1,  # 24×24 RGB: 606 photos a shard, so each split is several shards
}


def same_arrays(a: Path, b: Path) -> None:
    """The two outputs hold the same files, byte for byte, kept photos included."""
    names = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    assert sum(name.startswith("train_images_") for name in names) >= 2
    assert any(name.startswith(TEST_PHOTOS_DIR) for name in names)
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.mark.slow
def test_slices_one_after_another_write_what_one_preprocess_writes(sample_images, tmp_path):
    alone = tmp_path / "alone"
    build_arrays(PreprocessConfig(input=str(sample_images), output=str(alone), **SETTINGS))
    raw = Dataset(name="raw", uri=str(sample_images), metadata={})
    plan = Dataset(name="plan", uri=str(tmp_path / "plan"), metadata={})
    ops.preprocess_plan_op.python_func(raw=raw, plan=plan, slices=3, **SETTINGS)
    parts = []
    for index in (2, 0, 1):  # in any order
        part = Dataset(name="shards", uri=str(tmp_path / f"slice{index}"), metadata={})
        ops.preprocess_slice_op.python_func(raw=raw, plan=plan, index=index, shards=part)
        parts.append(part)
    arrays = Dataset(name="arrays", uri=str(tmp_path / "joined"), metadata={})
    ops.preprocess_join_op.python_func(raw=raw, plan=plan, slices=parts, arrays=arrays)
    same_arrays(alone, tmp_path / "joined")


def test_a_join_missing_a_slice_is_refused_and_writes_nothing(sample_images, tmp_path):
    raw = Dataset(name="raw", uri=str(sample_images), metadata={})
    plan = Dataset(name="plan", uri=str(tmp_path / "plan"), metadata={})
    ops.preprocess_plan_op.python_func(raw=raw, plan=plan, slices=2, **SETTINGS)
    part = Dataset(name="shards", uri=str(tmp_path / "slice0"), metadata={})
    ops.preprocess_slice_op.python_func(raw=raw, plan=plan, index=0, shards=part)
    arrays = Dataset(name="arrays", uri=str(tmp_path / "joined"), metadata={})
    with pytest.raises(ValueError, match=r"the train split's shards 0 to 2 once each .* \[0, 2\]"):
        ops.preprocess_join_op.python_func(raw=raw, plan=plan, slices=[part], arrays=arrays)
    assert not (tmp_path / "joined").exists()


@dsl.pipeline(name="preprocess-in-slices")
def preprocess_in_slices(raw_path: str) -> Dataset:
    """The data tasks of a pipeline compiled with --preprocess-pods 2, on a folder."""
    raw = dsl.importer(artifact_uri=raw_path, artifact_class=Dataset, reimport=False)
    plan = ops.preprocess_plan_op(raw=raw.output, slices=2, **SETTINGS)
    with dsl.ParallelFor([0, 1]) as index:
        part = ops.preprocess_slice_op(raw=raw.output, plan=plan.outputs["plan"], index=index)
    join = ops.preprocess_join_op(
        raw=raw.output, plan=plan.outputs["plan"], slices=dsl.Collected(part.outputs["shards"])
    )
    return join.outputs["arrays"]


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_kfp_local_runs_the_slices_as_a_parallel_for(sample_images, tmp_path):
    alone = tmp_path / "alone"
    build_arrays(PreprocessConfig(input=str(sample_images), output=str(alone), **SETTINGS))
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path / "root"))
    with kfp_swaps_undone():  # the slices run in threads
        joined = preprocess_in_slices(raw_path=str(sample_images)).output
    same_arrays(alone, Path(joined.path))


def test_compiled_with_preprocess_pods_the_slices_are_a_parallel_for_joined_once(tmp_path):
    path = tmp_path / "pipeline.yaml"
    pipeline_main(
        [
            *("compile", "--output", str(path), "--image", IMAGE, "--gpu-image", GPU_IMAGE),
            *("--preprocess-pods", "4"),
        ]
    )
    spec, _ = yaml.safe_load_all(path.read_text())
    tasks = spec["root"]["dag"]["tasks"]
    assert "preprocess-op" not in tasks
    assert (
        task(spec, "preprocess-plan-op")["inputs"]["parameters"]["slices"]["runtimeValue"][
            "constant"
        ]
        == 4
    )
    (loop,) = [name for name, t in tasks.items() if "parameterIterator" in t]
    assert tasks[loop]["parameterIterator"]["items"]["raw"] == "[0, 1, 2, 3]"
    inner = spec["components"][tasks[loop]["componentRef"]["name"]]["dag"]["tasks"]
    assert set(inner) == {"preprocess-slice-op"}
    joined = task(spec, "preprocess-join-op")["inputs"]["artifacts"]["slices"]
    assert joined["taskOutputArtifact"]["producerTask"] == loop
    arrays = task(spec, "train-op")["inputs"]["artifacts"]["arrays"]["taskOutputArtifact"]
    assert arrays["producerTask"] == "preprocess-join-op"


def test_preprocess_pods_outside_the_bounds_are_refused():
    from pipeline.target import ClusterTarget

    with pytest.raises(ValueError, match="expected 1 to 256 preprocess pods, found 0"):
        ClusterTarget(preprocess_pods=0)


def test_a_slice_holds_the_plans_shard_to_the_memory_it_has(sample_images, tmp_path, monkeypatch):
    """A plan's shard size is checked where the slice runs: another pod, another limit."""
    from components.preprocessing import plan as planning

    raw = Dataset(name="raw", uri=str(sample_images), metadata={})
    plan = Dataset(name="plan", uri=str(tmp_path / "plan"), metadata={})
    ops.preprocess_plan_op.python_func(raw=raw, plan=plan, slices=2, **SETTINGS)
    monkeypatch.setattr(planning, "available_memory", lambda: 100_000)  # 100 KB left
    part = Dataset(name="shards", uri=str(tmp_path / "slice0"), metadata={})
    with pytest.raises(MemoryError, match=r"expected a shard that fits in memory: 606 images"):
        ops.preprocess_slice_op.python_func(raw=raw, plan=plan, index=0, shards=part)
