"""Lightweight KFP components: typed interfaces, each a few lines that call ``components``.

Each pipeline field of a step's schema is an input of its own, of the field's name and
type: KFP shows each in its UI and hands each over as it was given, so no value can
change another (``tests/pipeline/test_ops.py`` holds every component's inputs to its
schema). A body builds the step's config from its arguments by name, which checks them.

The bodies run inside our images (kfp and this project already installed), or in this
Python under ``kfp.local.SubprocessRunner``; they import what they need themselves, as
KFP requires. ``pipeline.pipeline`` sets each task's image at compile time. (No
``from __future__ import annotations`` here: KFP reads the annotations as types.)
"""

from typing import NamedTuple, Optional

from kfp import dsl
from kfp.dsl import (
    Artifact,
    ClassificationMetrics,
    Dataset,
    Input,
    Markdown,
    Metrics,
    Model,
    Output,
)

from pipeline.target import IMAGE

component = dsl.component(base_image=IMAGE, install_kfp_package=False)


@component
def preflight_op(tracking_uri: str, grid: Optional[list] = None) -> None:  # noqa: UP045 (kfp reads it)
    """Fail before anything is downloaded when the run could not finish.

    Args:
        tracking_uri: the MLflow tracking server, which must answer.
        grid: in a sweep, the combinations, which must be one or more valid ones.
    """
    from components.tracking.store import check_server, use_tracking_uri
    from components.tuning.grid import check_grid

    use_tracking_uri(tracking_uri)
    check_server()
    if grid is not None:
        check_grid(grid)


@component
def download_op(
    source: str, sha256: str, experiment: str, tracking_uri: str, dataset: Output[Dataset]
) -> str:
    """Fetch and extract the photos; record every file's sha256 in the tracking store.

    Args:
        source: https://, s3://, file:// or a path.
        sha256: the archive's expected digest; empty: not checked, only recorded.
        experiment: the MLflow experiment the source listing is recorded in.
        tracking_uri: the MLflow tracking server.
        dataset: where the archive is extracted.

    Returns:
        The MLflow run that records the source listing (evaluate checks the test split
        against it).
    """
    from pathlib import Path

    from components.core.uris import redact
    from components.downloading.fetch import fetch
    from components.tracking.source_listing import record_listing
    from components.tracking.store import use_tracking_uri

    use_tracking_uri(tracking_uri)
    record = fetch(
        source,
        Path(dataset.path),
        sha256=sha256 or None,
        record_listing=lambda data: record_listing(data, redact(source), experiment),
    )
    dataset.metadata.update(sha256=record.sha256, file_count=record.file_count)
    return str(record.listing_run)


@component
def preprocess_op(
    raw: Input[Dataset],
    arrays: Output[Dataset],
    image_size: int,
    channels: int,
    val_fraction: float,
    test_fraction: float,
    split_seed: int,
    shard_mb: int,
) -> None:
    """Decode, de-duplicate and split the images into uint8 arrays plus meta.json.

    Args:
        raw: the download step's extracted archive.
        arrays: where the arrays and meta.json are written.
        image_size: square side in pixels.
        channels: 1 = grey, 3 = RGB.
        val_fraction: share of each class held out for validation.
        test_fraction: share of each class held out for the test.
        split_seed: seed of the train/val/test split.
        shard_mb: MiB of photos a shard of the arrays holds at the most.
    """
    from components.core.schema import pick
    from components.core.shutdown import skip_final_collection
    from components.preprocessing.build import build_arrays
    from components.preprocessing.config import PreprocessConfig

    settings = pick(PreprocessConfig, locals())  # the inputs, by their schema's names
    skip_final_collection()
    meta = build_arrays(PreprocessConfig(input=raw.path, output=arrays.path, **settings))
    arrays.metadata.update(kept=meta["kept"], skipped=len(meta["skipped"]))


@component
def preprocess_plan_op(
    raw: Input[Dataset],
    plan: Output[Dataset],
    image_size: int,
    channels: int,
    val_fraction: float,
    test_fraction: float,
    split_seed: int,
    shard_mb: int,
    slices: int,
) -> None:
    """Hash every photo, drop exact copies, split them and cut the splits into shards,
    spread over ``slices`` pods: the plan each slice task decodes its part of.

    Args:
        raw: the download step's extracted archive.
        plan: where plan.json is written.
        the rest: as ``preprocess_op``'s; slices: the pods that decode the shards.
    """
    from pathlib import Path

    from components.core.schema import pick
    from components.core.shutdown import skip_final_collection
    from components.preprocessing.config import PreprocessConfig
    from components.preprocessing.decoder import Decoder
    from components.preprocessing.plan import make_plan, write_plan

    settings = pick(PreprocessConfig, locals())  # the inputs, by their schema's names
    skip_final_collection()
    cfg = PreprocessConfig(input=raw.path, output=plan.path, **settings)
    with Decoder(cfg, 1) as decoder:
        made = make_plan(cfg, decoder, slices)
    Path(plan.path).mkdir(parents=True, exist_ok=True)
    write_plan(made, Path(plan.path))
    plan.metadata.update(files=len(made.files), slices=slices)


@component
def preprocess_slice_op(
    raw: Input[Dataset], plan: Input[Dataset], index: int, shards: Output[Dataset]
) -> None:
    """Decode slice ``index`` of the plan's shards and write them, with slice.json.

    Args:
        raw: the download step's extracted archive.
        plan: the plan step's output.
        index: which slice, from 0.
        shards: where the shards and slice.json are written.
    """
    from pathlib import Path

    from components.core.shutdown import skip_final_collection
    from components.preprocessing.decoder import Decoder
    from components.preprocessing.plan import check_memory, planned_config, read_plan
    from components.preprocessing.slices import decode_slice, write_slice

    skip_final_collection()
    planned = read_plan(Path(plan.path))
    cfg = planned_config(planned, raw.path, shards.path)
    check_memory(min(planned.per_shard, len(planned.files)), cfg)  # the plan's shard size
    folder = Path(shards.path)
    folder.mkdir(parents=True, exist_ok=True)
    with Decoder(cfg, planned.per_shard) as decoder:
        written = decode_slice(planned, index, Path(raw.path), folder, decoder)
    write_slice(written, folder)


@component
def preprocess_join_op(
    raw: Input[Dataset],
    plan: Input[Dataset],
    slices: Input[list[Dataset]],
    arrays: Output[Dataset],
) -> None:
    """Join the slices' shards into the arrays and meta.json, as preprocess_op writes them.

    Args:
        raw: the download step's extracted archive (the test photos are kept from it).
        plan: the plan step's output.
        slices: every slice task's shards.
        arrays: where the arrays and meta.json are written.
    """
    from pathlib import Path

    from components.core.shutdown import skip_final_collection
    from components.preprocessing.build import join_folders
    from components.preprocessing.plan import planned_config, read_plan

    skip_final_collection()
    planned = read_plan(Path(plan.path))
    cfg = planned_config(planned, raw.path, arrays.path)
    meta = join_folders(planned, [Path(part.path) for part in slices], cfg)
    arrays.metadata.update(kept=meta["kept"], skipped=len(meta["skipped"]))


@component
def evaluate_op(
    arrays: Input[Dataset],
    model: Input[Model],
    mlflow_run_id: str,
    tracking_uri: str,
    experiment: str,
    source_listing: str,
    evaluation: Output[Artifact],
    metrics: Output[Metrics],
    classification: Output[ClassificationMetrics],
    report: Output[Markdown],
    combination: str = "",
) -> NamedTuple("EvaluateOutputs", accuracy=float, mlflow_run_id=str):  # type: ignore[valid-type]
    """Score the test split: KFP metrics, confusion matrix, ROC curve, a report.

    Args:
        arrays: the preprocess step's output.
        model: the train step's output.
        mlflow_run_id: the training run the test metrics are logged into.
        tracking_uri: the MLflow tracking server.
        experiment: the MLflow experiment of the run.
        source_listing: the download task's MLflow run that records the source listing,
            which the test split is checked against.
        evaluation: metrics.json, roc.json and the PNGs.
        metrics: scalar metrics for the KFP UI.
        classification: confusion matrix and ROC curve for the KFP UI.
        report: a Markdown summary for the KFP UI.
        combination: in a sweep, the child's recipe fields, named in the task's first line.

    Returns:
        The test accuracy and, passed through, the MLflow run id.
    """
    from components.core.shutdown import skip_final_collection
    from components.evaluation.config import EvaluateConfig
    from components.evaluation.report import evaluate
    from components.tasks.live import announce_combination
    from components.tasks.reports import publish_evaluation
    from components.tracking.store import use_tracking_uri

    skip_final_collection()
    announce_combination(combination)
    use_tracking_uri(tracking_uri)
    cfg = EvaluateConfig(
        model_dir=model.path,
        data=arrays.path,
        output=evaluation.path,
        experiment=experiment,
        mlflow_run_id=mlflow_run_id,
        source_listing=source_listing,
    )
    result = evaluate(cfg)
    publish_evaluation(result, evaluation.path, mlflow_run_id, metrics, classification, report)
    return (result["metrics"]["accuracy"], mlflow_run_id)


@component
def register_op(
    arrays: Input[Dataset],
    mlflow_run_id: str,
    test_accuracy: float,
    tracking_uri: str,
    min_accuracy: float,
    registered_model_name: str,
    force_alias: bool,
) -> NamedTuple("RegisterOutputs", registered=bool, took_alias=bool, reason=str, version=str):  # type: ignore[valid-type]
    """Register the model only if it is accurate enough; as ``candidate`` only if it also
    beats the version holding that alias on the same test photos (the holder scored again
    on these arrays' test photos where it was tested on others).

    Args:
        arrays: the preprocess step's output the model was tested on.
        mlflow_run_id: the training run whose model is judged.
        test_accuracy: its test accuracy.
        tracking_uri: the MLflow tracking server.
        min_accuracy: lowest test accuracy that is registered.
        registered_model_name: name in the MLflow Model Registry.
        force_alias: move the alias when the holder was tested on another split.

    Returns:
        Whether the model was registered, whether it took the alias, why, and its version
        ("" when it was not registered).
    """
    from components.core.shutdown import skip_final_collection
    from components.registration.config import RegisterConfig
    from components.registration.decision import register_if_accurate
    from components.tracking.store import use_tracking_uri

    skip_final_collection()
    use_tracking_uri(tracking_uri)
    cfg = RegisterConfig(
        mlflow_run_id=mlflow_run_id,
        test_accuracy=test_accuracy,
        min_accuracy=min_accuracy,
        registered_model_name=registered_model_name,
        force_alias=force_alias,
        data=arrays.path,
    )
    decision = register_if_accurate(cfg)
    return (decision.registered, decision.took_alias, decision.reason, decision.version or "")


@component
def deploy_op(
    deploy: bool,
    took_alias: bool,
    model_version: str,
    mlflow_run_id: str,
    registered_model_name: str,
    deployment_mode: str,
    canary_percent: int,
    tracking_uri: str,
    image: str,
) -> NamedTuple("DeployOutputs", url=str, reason=str):  # type: ignore[valid-type]
    """Serve the registered version on KServe in this run's namespace, when asked to and
    when the gate gave it the alias; record where on the MLflow run.

    Args:
        deploy: the pipeline's switch; off: nothing is deployed.
        took_alias: whether the gate registered the model and gave it the alias.
        model_version: the version it registered.
        mlflow_run_id: the training run, tagged with the serving URL.
        registered_model_name: name in the MLflow Model Registry.
        deployment_mode: KServe's mode, Standard or Knative.
        canary_percent: the new version's share while another serves (0: none); below 100
            a canary until ``python -m components.rollout promote`` or ``rollback``.
        tracking_uri: the MLflow tracking server, which the model server loads through.
        image: the image with components.serve.

    Returns:
        The InferenceService's URL ("" when nothing was deployed), and why.
    """
    if not deploy:
        return ("", "not deployed: the run's deploy parameter is off")
    if not took_alias:
        return ("", "not deployed: the quality gate did not give the model the alias")
    from components.cluster import kube
    from components.deploying.config import DeployConfig
    from components.deploying.steps import serve_and_record
    from components.tracking.store import use_tracking_uri

    use_tracking_uri(tracking_uri)
    cfg = DeployConfig(
        model_version=model_version,
        registered_model_name=registered_model_name,
        deployment_mode=deployment_mode,
        canary_percent=canary_percent,
        tracking_uri=tracking_uri,
        image=image,
        namespace=kube.current_namespace(),
    )
    url = serve_and_record(cfg, mlflow_run_id, kube.in_cluster_client())
    return (url, f"serving {cfg.model_uri} at {url}")


@component
def sweep_parent_op(
    grid: list, experiment: str, tracking_uri: str, kfp_run_id: str, pipeline_name: str
) -> str:
    """Open the sweep's parent MLflow run, which the children are nested under.

    Args:
        grid: the combinations, each a JSON object of recipe fields.
        experiment: the MLflow experiment.
        tracking_uri: the MLflow tracking server.
        kfp_run_id: this pipeline run, tagged on the parent.
        pipeline_name: tagged on the parent too.

    Returns:
        The parent run's id.
    """
    from components.tracking.store import use_tracking_uri
    from components.tuning.runs import open_grid

    use_tracking_uri(tracking_uri)
    return open_grid(experiment, grid, kfp_run_id, pipeline_name)


@component
def sweep_best_op(parent_run_id: str, child_run_ids: list, tracking_uri: str) -> NamedTuple(  # type: ignore[valid-type]
    "BestOutputs", mlflow_run_id=str, val_accuracy=float, test_accuracy=float, compare_url=str
):
    """Mark the child with the best validation accuracy and end the parent run.

    Args:
        parent_run_id: the sweep's parent MLflow run.
        child_run_ids: every child's MLflow run.
        tracking_uri: the MLflow tracking server.

    Returns:
        The best child's run id and accuracies, and the MLflow UI's compare view of all.
    """
    from components.tracking.store import use_tracking_uri
    from components.tuning.runs import close_search, grid_trials

    use_tracking_uri(tracking_uri)
    best = close_search(parent_run_id, grid_trials(child_run_ids))
    return (best.run_id, best.val_accuracy, best.test_accuracy, best.compare_url)
