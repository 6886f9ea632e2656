"""The compiled spec, parsed strictly with the protos of the oldest KFP backends supported.

A KFP backend's driver reads each task's Kubernetes config with ``json_format`` and
refuses a field it does not know, which fails every task before it starts. These tests
parse the spec with the message types of the releases named in tests/fixtures/kfp-protos,
read from the files PyPI serves; no KFP backend runs here, so this is the check.
"""

from __future__ import annotations

import ast
import io
import logging
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from kfp.pipeline_spec import pipeline_spec_pb2  # noqa: F401  (registers its dependencies)

from pipeline.__main__ import main as pipeline_main
from tests.conftest import REPO
from tests.pipeline.conftest import GPU_IMAGE, IMAGE

PROTOS = REPO / "tests/fixtures/kfp-protos"
OLDEST_KUBERNETES = "kfp-kubernetes-1.5.0.tar.gz"
OLDEST_PIPELINE_SPEC = "kfp_pipeline_spec-0.6.0-py3-none-any.whl"
FIRST_WITH_OPTIONAL_SECRETS = "kfp_kubernetes-2.15.0-py3-none-any.whl"


def generated_module(archive: Path, suffix: str) -> str:
    """The text of the generated ``*_pb2.py`` inside a wheel or an sdist."""
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as wheel:
            (name,) = [n for n in wheel.namelist() if n.endswith(suffix)]
            return wheel.read(name).decode()
    with tarfile.open(archive) as sdist:
        (member,) = [m for m in sdist.getmembers() if m.name.endswith(suffix)]
        return io.TextIOWrapper(sdist.extractfile(member)).read()


def serialized_descriptor(source: str) -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto a generated module registers (read, never executed)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "AddSerializedFile":
            return descriptor_pb2.FileDescriptorProto.FromString(node.args[0].value)
    raise ValueError("no AddSerializedFile call in the generated module")


def old_pool(*files: descriptor_pb2.FileDescriptorProto) -> descriptor_pool.DescriptorPool:
    """A pool of the given old files, on the well-known Google types they import."""
    pool = descriptor_pool.DescriptorPool()
    ours = {f.name for f in files}
    added: set[str] = set()

    def add_well_known(name: str) -> None:
        if name in added or name in ours:
            return
        found = descriptor_pool.Default().FindFileByName(name)
        for dependency in found.dependencies:
            add_well_known(dependency.name)
        proto = descriptor_pb2.FileDescriptorProto()
        found.CopyToProto(proto)
        pool.Add(proto)
        added.add(name)

    for file in files:
        for dependency in file.dependency:
            add_well_known(dependency)
        pool.Add(file)
    return pool


def message(pool, name: str):
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def kubernetes_config(kubernetes_archive: str):
    """KubernetesExecutorConfig of that kfp-kubernetes, on the oldest pipeline spec."""
    spec = serialized_descriptor(
        generated_module(PROTOS / OLDEST_PIPELINE_SPEC, "pipeline_spec_pb2.py")
    )
    platform = serialized_descriptor(
        generated_module(PROTOS / kubernetes_archive, "kubernetes_executor_config_pb2.py")
    )
    files = [spec, platform] if "pipeline_spec.proto" in platform.dependency else [platform]
    return message(old_pool(*files), "kfp_kubernetes.KubernetesExecutorConfig")


def compiled(tmp_path, *flags: str) -> tuple[dict, dict]:
    path = tmp_path / "pipeline.yaml"
    pipeline_main(["compile", "--output", str(path), *flags])
    spec, platform = yaml.safe_load_all(path.read_text())
    return spec, platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]


def parse_all(executors: dict, config_type) -> None:
    for name, config in executors.items():
        try:
            json_format.ParseDict(config, config_type())  # unknown fields are errors
        except json_format.ParseError as err:
            raise AssertionError(f"{name}: {err}") from err


def test_the_default_spec_parses_with_the_protos_of_kfp_2_15(tmp_path):
    _, executors = compiled(tmp_path)
    assert any(s.get("optional") for e in executors.values() for s in e.get("secretAsEnv", []))
    parse_all(executors, kubernetes_config(FIRST_WITH_OPTIONAL_SECRETS))


@pytest.mark.parametrize("nodes", ["1", "2"], ids=["one node", "multi-node job"])
def test_a_spec_for_kfp_2_5_parses_with_its_protos(tmp_path, nodes):
    spec, executors = compiled(tmp_path, "--kfp-backend", "2.5", "--nodes", nodes)
    parse_all(executors, kubernetes_config(OLDEST_KUBERNETES))
    pipeline_type = message(
        old_pool(
            serialized_descriptor(
                generated_module(PROTOS / OLDEST_PIPELINE_SPEC, "pipeline_spec_pb2.py")
            )
        ),
        "ml_pipelines.PipelineSpec",
    )
    json_format.ParseDict(spec, pipeline_type())
    # the secrets are all still there, only no longer optional
    secrets = {s["secretName"] for e in executors.values() for s in e.get("secretAsEnv", [])}
    assert secrets == {"dogs-vs-cats-s3", "dogs-vs-cats-mlflow"}


def test_the_strict_parse_catches_a_field_an_old_backend_does_not_know(tmp_path):
    _, executors = compiled(tmp_path)
    with pytest.raises(AssertionError, match='no field named "optional"'):
        parse_all(executors, kubernetes_config(OLDEST_KUBERNETES))


def test_a_backend_older_than_the_oldest_supported_is_refused(tmp_path):
    with pytest.raises(
        SystemExit, match="^error: KFP backend 2.4 is older than the oldest supported, 2.5$"
    ):
        compiled(tmp_path, "--kfp-backend", "2.4")


def test_compiling_with_image_tags_warns_and_digests_do_not(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        pipeline_main(["compile", "--output", str(tmp_path / "tags.yaml")])
    assert caplog.text.count("is a tag, not a digest") == 2
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        pipeline_main(
            [
                *("compile", "--output", str(tmp_path / "digests.yaml")),
                *("--image", IMAGE, "--gpu-image", GPU_IMAGE),
            ]
        )
    assert "not a digest" not in caplog.text


def test_a_spec_labelled_for_kueue_parses_with_the_oldest_backends_protos(tmp_path):
    """The pod labels Kueue admits the train task by are a field KFP 2.5 already knows."""
    _, executors = compiled(tmp_path, "--kfp-backend", "2.5", "--queue-name", "team-a-gpu")
    assert executors["exec-train-op"]["podMetadata"]["labels"] == {
        "kueue.x-k8s.io/queue-name": "team-a-gpu"
    }
    parse_all(executors, kubernetes_config(OLDEST_KUBERNETES))
