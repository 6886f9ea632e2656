"""The pipelines: download -> preprocess -> train (GPU) -> evaluate -> register -> deploy.

Wiring, resources and Kubernetes configuration only; the work is in ``components``. Each
pipeline function writes its parameters out, typed, with the defaults and descriptions
of the step schemas' fields of the same names (``tests/pipeline/test_parameters.py``
holds them to the schemas), and hands each task its settings by name, one input each.
"""

from dataclasses import dataclass
from typing import Any, NamedTuple

from kfp import dsl, kubernetes

from components.cluster.placement import GPU, MLFLOW_KEYS, S3_KEYS
from components.cluster.quantities import twice_cpu, twice_memory
from components.downloading.config import PETIMAGES_URL
from pipeline import ops
from pipeline.target import CLUSTER_TRACKING_URI, ClusterTarget

PIPELINE_NAME = "dogs-vs-cats"
DESCRIPTION = "Train, evaluate and register a Dogs-vs-Cats classifier."
SWEEP_DESCRIPTION = "Train a grid of Dogs-vs-Cats recipes as child MLflow runs; register the best."
TUNE_DESCRIPTION = "Search the Dogs-vs-Cats recipe with Katib; evaluate and register the best."
S3_ENV = {key: key for key in S3_KEYS}
MLFLOW_ENV = {key: key for key in MLFLOW_KEYS}
TRAIN_RETRY_WINDOW = f"{7 * 24 * 3600}s"  # a week: longer than any training run


class PipelineOutputs(NamedTuple):
    """What a finished run hands back: where to look in MLflow, and how it went."""

    mlflow_run_id: str
    test_accuracy: float
    registration: str
    serving_url: str


class TuneOutputs(NamedTuple):
    """What a finished search hands back: the best trial's run, how it tested, the gate."""

    best_run_id: str
    test_accuracy: float
    registration: str
    serving_url: str


class SweepOutputs(NamedTuple):
    """What a finished sweep hands back: the parent run, the best child, the compare view."""

    parent_run_id: str
    best_run_id: str
    best_val_accuracy: float
    test_accuracy: float
    compare_url: str
    registration: str
    serving_url: str


@dataclass(frozen=True)
class Settings:
    """A run's settings as the wiring hands them to the tasks: each step's pipeline fields
    by name (KFP channels while the pipeline is built), and the pipeline's own."""

    download: dict[str, Any]
    preprocess: dict[str, Any]
    train: dict[str, Any]
    evaluate: dict[str, Any]
    register: dict[str, Any]
    serving: dict[str, Any]  # the deploy task's
    gpus: Any
    tracking_uri: Any
    checkpoint_root: Any
    deploy: Any


def build_pipeline(
    target: ClusterTarget | None = None, sweep: bool = False, tune: bool = False
) -> Any:
    """The ``@dsl.pipeline`` function for ``target``: compile it, or call it under kfp.local.

    With ``sweep``, the pipeline takes one more parameter, ``grid`` (a list of JSON
    objects of recipe fields), and trains and evaluates each combination as a child
    MLflow run under one parent; the best by validation accuracy is sent to registration.
    With ``tune``, the cluster's Katib searches the recipe (the search's settings added)
    and the best trial's model is evaluated and sent to registration.
    """
    target = target or ClusterTarget()
    if (sweep or tune) and target.nodes > 1:
        raise ValueError("expected a sweep or search on one node per trial, found --nodes > 1")
    if sweep and tune:
        raise ValueError("expected a sweep or a search, found both")
    if sweep:
        return _sweep_pipeline(target)
    if tune:
        return _tune_pipeline(target)
    return _pipeline(target)


def _pipeline(target: ClusterTarget) -> Any:
    @dsl.pipeline(name=PIPELINE_NAME, description=DESCRIPTION)
    def dogs_vs_cats(
        source: str = PETIMAGES_URL,
        sha256: str = "",
        image_size: int = 50,
        channels: int = 1,
        val_fraction: float = 0.1,
        test_fraction: float = 0.1,
        split_seed: int = 0,
        model: str = "tutorial_cnn",
        epochs: int = 10,
        batch_size: int = 100,
        lr: float = 0.001,
        weight_decay: float = 0.0,
        schedule: str = "constant",
        augment: bool = True,
        min_crop_area: float = 1.0,
        label_smoothing: float = 0.0,
        mirror_average: bool = False,
        shift_average: bool = False,
        amp: bool = True,
        compile: bool = False,
        seed: int = 0,
        experiment: str = "dogs-vs-cats",
        min_accuracy: float = 0.85,
        registered_model_name: str = "dogs-vs-cats",
        force_alias: bool = False,
        deployment_mode: str = "Standard",
        canary_percent: int = 100,
        gpus: int = 1,
        tracking_uri: str = CLUSTER_TRACKING_URI,
        checkpoint_root: str = "",
        deploy: bool = False,
    ) -> PipelineOutputs:
        """Train, evaluate and register a Dogs-vs-Cats classifier.

        Args:
            source: https://, http://, s3://BUCKET/KEY, file:// or a path to a .zip, .tar.gz
                or directory
            sha256: expected sha256 of the archive, a mismatch is an error; empty: only
                recorded
            image_size: square side in pixels
            channels: 1 = grey, 3 = RGB (one of: 1, 3)
            val_fraction: share of each class held out for validation
            test_fraction: share of each class held out for the test
            split_seed: seed of the train/val/test split (training has its own seed)
            model: network (one of: tutorial_cnn, compact_cnn, five_conv_cnn, bn_cnn,
                resnet18)
            epochs: passes over the train split
            batch_size: images per optimiser step, over all processes
            lr: peak learning rate
            weight_decay: AdamW weight decay
            schedule: learning-rate schedule (one of: constant, onecycle)
            augment: random flips (and crops for all nets but tutorial_cnn)
            min_crop_area: below 1: random resized crops, each keeping this share of the
                image or more (aspect 3:4 to 4:3), instead of shifted crops
            label_smoothing: share of each label's weight spread over both classes
            mirror_average: predict (validation, test, the logged model) with the mean of
                each image's and its mirror image's class probabilities
            shift_average: predict also with four copies of each image shifted 2 pixels
                diagonally, averaging the class probabilities of all five (ten views with
                mirror_average)
            amp: bf16 autocast in training: on CUDA, and on CPUs with AMX or AVX512-BF16
            compile: torch.compile the net: faster epochs after a minute or so of compiling
            seed: seed of the initial weights, the order and the augmentation
            experiment: MLflow experiment
            min_accuracy: lowest test accuracy that is registered
            registered_model_name: name in the MLflow Model Registry
            force_alias: move the alias to the new version when the holder's test accuracy
                was measured on another test split (figures that cannot be compared)
            deployment_mode: KServe's deployment mode: Standard (Deployments; KServe's
                default since 0.15) or Knative (revisions, scale to zero, canaries) (one of:
                Standard, Knative)
            canary_percent: share of traffic a new version gets while another serves: 100
                rolls it out whole; below 100 it is a canary (0: deployed, no traffic) until
                `python -m components.rollout promote` or `rollback` (Standard mode: KServe
                0.20 or later)
            gpus: GPUs for the train task (torchrun when more than 1)
            tracking_uri: MLflow tracking server every step logs to
            checkpoint_root: durable checkpoints: s3://BUCKET/PREFIX or a path; empty:
                MLflow's
            deploy: serve the model on KServe in the run's namespace once the gate gives it
                the alias (an InferenceService named dogs-vs-cats; a canary when another
                version serves)
        """
        settings = Settings(
            download=dict(source=source, sha256=sha256),
            preprocess=dict(
                image_size=image_size,
                channels=channels,
                val_fraction=val_fraction,
                test_fraction=test_fraction,
                split_seed=split_seed,
            ),
            train=dict(
                model=model,
                epochs=epochs,
                batch_size=batch_size,
                lr=lr,
                weight_decay=weight_decay,
                schedule=schedule,
                augment=augment,
                min_crop_area=min_crop_area,
                label_smoothing=label_smoothing,
                mirror_average=mirror_average,
                shift_average=shift_average,
                amp=amp,
                compile=compile,
                seed=seed,
                experiment=experiment,
            ),
            evaluate=dict(experiment=experiment),
            register=dict(
                min_accuracy=min_accuracy,
                registered_model_name=registered_model_name,
                force_alias=force_alias,
            ),
            serving=dict(
                registered_model_name=registered_model_name,
                deployment_mode=deployment_mode,
                canary_percent=canary_percent,
            ),
            gpus=gpus,
            tracking_uri=tracking_uri,
            checkpoint_root=checkpoint_root,
            deploy=deploy,
        )
        return _wire(settings, target)

    return dogs_vs_cats


def _sweep_pipeline(target: ClusterTarget) -> Any:
    @dsl.pipeline(name=f"{PIPELINE_NAME}-sweep", description=SWEEP_DESCRIPTION)
    def dogs_vs_cats_sweep(
        source: str = PETIMAGES_URL,
        sha256: str = "",
        image_size: int = 50,
        channels: int = 1,
        val_fraction: float = 0.1,
        test_fraction: float = 0.1,
        split_seed: int = 0,
        model: str = "tutorial_cnn",
        epochs: int = 10,
        batch_size: int = 100,
        lr: float = 0.001,
        weight_decay: float = 0.0,
        schedule: str = "constant",
        augment: bool = True,
        min_crop_area: float = 1.0,
        label_smoothing: float = 0.0,
        mirror_average: bool = False,
        shift_average: bool = False,
        amp: bool = True,
        compile: bool = False,
        seed: int = 0,
        experiment: str = "dogs-vs-cats",
        min_accuracy: float = 0.85,
        registered_model_name: str = "dogs-vs-cats",
        force_alias: bool = False,
        deployment_mode: str = "Standard",
        canary_percent: int = 100,
        gpus: int = 1,
        tracking_uri: str = CLUSTER_TRACKING_URI,
        checkpoint_root: str = "",
        deploy: bool = False,
        grid: list = [],  # noqa: B006 (KFP reads it as the default, never mutated)
    ) -> SweepOutputs:
        """Train a grid of Dogs-vs-Cats recipes as child MLflow runs; register the best.

        Args:
            source: https://, http://, s3://BUCKET/KEY, file:// or a path to a .zip, .tar.gz
                or directory
            sha256: expected sha256 of the archive, a mismatch is an error; empty: only
                recorded
            image_size: square side in pixels
            channels: 1 = grey, 3 = RGB (one of: 1, 3)
            val_fraction: share of each class held out for validation
            test_fraction: share of each class held out for the test
            split_seed: seed of the train/val/test split (training has its own seed)
            model: network (one of: tutorial_cnn, compact_cnn, five_conv_cnn, bn_cnn,
                resnet18)
            epochs: passes over the train split
            batch_size: images per optimiser step, over all processes
            lr: peak learning rate
            weight_decay: AdamW weight decay
            schedule: learning-rate schedule (one of: constant, onecycle)
            augment: random flips (and crops for all nets but tutorial_cnn)
            min_crop_area: below 1: random resized crops, each keeping this share of the
                image or more (aspect 3:4 to 4:3), instead of shifted crops
            label_smoothing: share of each label's weight spread over both classes
            mirror_average: predict (validation, test, the logged model) with the mean of
                each image's and its mirror image's class probabilities
            shift_average: predict also with four copies of each image shifted 2 pixels
                diagonally, averaging the class probabilities of all five (ten views with
                mirror_average)
            amp: bf16 autocast in training: on CUDA, and on CPUs with AMX or AVX512-BF16
            compile: torch.compile the net: faster epochs after a minute or so of compiling
            seed: seed of the initial weights, the order and the augmentation
            experiment: MLflow experiment
            min_accuracy: lowest test accuracy that is registered
            registered_model_name: name in the MLflow Model Registry
            force_alias: move the alias to the new version when the holder's test accuracy
                was measured on another test split (figures that cannot be compared)
            deployment_mode: KServe's deployment mode: Standard (Deployments; KServe's
                default since 0.15) or Knative (revisions, scale to zero, canaries) (one of:
                Standard, Knative)
            canary_percent: share of traffic a new version gets while another serves: 100
                rolls it out whole; below 100 it is a canary (0: deployed, no traffic) until
                `python -m components.rollout promote` or `rollback` (Standard mode: KServe
                0.20 or later)
            gpus: GPUs for the train task (torchrun when more than 1)
            tracking_uri: MLflow tracking server every step logs to
            checkpoint_root: durable checkpoints: s3://BUCKET/PREFIX or a path; empty:
                MLflow's
            deploy: serve the model on KServe in the run's namespace once the gate gives it
                the alias (an InferenceService named dogs-vs-cats; a canary when another
                version serves)
            grid: the combinations to train: a list of JSON strings, each an object of
                recipe settings, e.g. ['{"lr": 0.001}', '{"lr": 0.003}'] (`python -m pipeline
                submit --sweep lr=0.001,0.003` builds it); an empty list is refused before
                anything runs
        """
        settings = Settings(
            download=dict(source=source, sha256=sha256),
            preprocess=dict(
                image_size=image_size,
                channels=channels,
                val_fraction=val_fraction,
                test_fraction=test_fraction,
                split_seed=split_seed,
            ),
            train=dict(
                model=model,
                epochs=epochs,
                batch_size=batch_size,
                lr=lr,
                weight_decay=weight_decay,
                schedule=schedule,
                augment=augment,
                min_crop_area=min_crop_area,
                label_smoothing=label_smoothing,
                mirror_average=mirror_average,
                shift_average=shift_average,
                amp=amp,
                compile=compile,
                seed=seed,
                experiment=experiment,
            ),
            evaluate=dict(experiment=experiment),
            register=dict(
                min_accuracy=min_accuracy,
                registered_model_name=registered_model_name,
                force_alias=force_alias,
            ),
            serving=dict(
                registered_model_name=registered_model_name,
                deployment_mode=deployment_mode,
                canary_percent=canary_percent,
            ),
            gpus=gpus,
            tracking_uri=tracking_uri,
            checkpoint_root=checkpoint_root,
            deploy=deploy,
        )
        return _wire_sweep(settings, grid, target)

    return dogs_vs_cats_sweep


def _tune_pipeline(target: ClusterTarget) -> Any:
    @dsl.pipeline(name=f"{PIPELINE_NAME}-tune", description=TUNE_DESCRIPTION)
    def dogs_vs_cats_tune(
        source: str = PETIMAGES_URL,
        sha256: str = "",
        image_size: int = 50,
        channels: int = 1,
        val_fraction: float = 0.1,
        test_fraction: float = 0.1,
        split_seed: int = 0,
        model: str = "tutorial_cnn",
        epochs: int = 10,
        batch_size: int = 100,
        lr: float = 0.001,
        weight_decay: float = 0.0,
        schedule: str = "constant",
        augment: bool = True,
        min_crop_area: float = 1.0,
        label_smoothing: float = 0.0,
        mirror_average: bool = False,
        shift_average: bool = False,
        amp: bool = True,
        compile: bool = False,
        seed: int = 0,
        experiment: str = "dogs-vs-cats",
        min_accuracy: float = 0.85,
        registered_model_name: str = "dogs-vs-cats",
        force_alias: bool = False,
        deployment_mode: str = "Standard",
        canary_percent: int = 100,
        gpus: int = 1,
        tracking_uri: str = CLUSTER_TRACKING_URI,
        checkpoint_root: str = "",
        deploy: bool = False,
        algorithm: str = "tpe",
        trials: int = 12,
        parallel_trials: int = 3,
        max_failed_trials: int = 3,
        min_trials_required: int = 3,
        start_step: int = 3,
        search_seed: int = 0,
    ) -> TuneOutputs:
        """Search the Dogs-vs-Cats recipe with Katib; evaluate and register the best.

        Args:
            source: https://, http://, s3://BUCKET/KEY, file:// or a path to a .zip, .tar.gz
                or directory
            sha256: expected sha256 of the archive, a mismatch is an error; empty: only
                recorded
            image_size: square side in pixels
            channels: 1 = grey, 3 = RGB (one of: 1, 3)
            val_fraction: share of each class held out for validation
            test_fraction: share of each class held out for the test
            split_seed: seed of the train/val/test split (training has its own seed)
            model: network (one of: tutorial_cnn, compact_cnn, five_conv_cnn, bn_cnn,
                resnet18)
            epochs: passes over the train split
            batch_size: images per optimiser step, over all processes
            lr: peak learning rate
            weight_decay: AdamW weight decay
            schedule: learning-rate schedule (one of: constant, onecycle)
            augment: random flips (and crops for all nets but tutorial_cnn)
            min_crop_area: below 1: random resized crops, each keeping this share of the
                image or more (aspect 3:4 to 4:3), instead of shifted crops
            label_smoothing: share of each label's weight spread over both classes
            mirror_average: predict (validation, test, the logged model) with the mean of
                each image's and its mirror image's class probabilities
            shift_average: predict also with four copies of each image shifted 2 pixels
                diagonally, averaging the class probabilities of all five (ten views with
                mirror_average)
            amp: bf16 autocast in training: on CUDA, and on CPUs with AMX or AVX512-BF16
            compile: torch.compile the net: faster epochs after a minute or so of compiling
            seed: seed of the initial weights, the order and the augmentation
            experiment: MLflow experiment
            min_accuracy: lowest test accuracy that is registered
            registered_model_name: name in the MLflow Model Registry
            force_alias: move the alias to the new version when the holder's test accuracy
                was measured on another test split (figures that cannot be compared)
            deployment_mode: KServe's deployment mode: Standard (Deployments; KServe's
                default since 0.15) or Knative (revisions, scale to zero, canaries) (one of:
                Standard, Knative)
            canary_percent: share of traffic a new version gets while another serves: 100
                rolls it out whole; below 100 it is a canary (0: deployed, no traffic) until
                `python -m components.rollout promote` or `rollback` (Standard mode: KServe
                0.20 or later)
            gpus: GPUs for the train task (torchrun when more than 1)
            tracking_uri: MLflow tracking server every step logs to
            checkpoint_root: durable checkpoints: s3://BUCKET/PREFIX or a path; empty:
                MLflow's
            deploy: serve the model on KServe in the run's namespace once the gate gives it
                the alias (an InferenceService named dogs-vs-cats; a canary when another
                version serves)
            algorithm: search algorithm (Katib's names); tpe learns from earlier trials (one
                of: tpe, multivariate-tpe, random)
            trials: trials in all (Katib's maxTrialCount)
            parallel_trials: trials at once on the cluster
            max_failed_trials: failed trials that end the search
            min_trials_required: median rule: finished trials needed before any trial is
                stopped
            start_step: median rule: epochs a trial reports before it may be stopped
            search_seed: seed of the search algorithm
        """
        settings = Settings(
            download=dict(source=source, sha256=sha256),
            preprocess=dict(
                image_size=image_size,
                channels=channels,
                val_fraction=val_fraction,
                test_fraction=test_fraction,
                split_seed=split_seed,
            ),
            train=dict(
                model=model,
                epochs=epochs,
                batch_size=batch_size,
                lr=lr,
                weight_decay=weight_decay,
                schedule=schedule,
                augment=augment,
                min_crop_area=min_crop_area,
                label_smoothing=label_smoothing,
                mirror_average=mirror_average,
                shift_average=shift_average,
                amp=amp,
                compile=compile,
                seed=seed,
                experiment=experiment,
            ),
            evaluate=dict(experiment=experiment),
            register=dict(
                min_accuracy=min_accuracy,
                registered_model_name=registered_model_name,
                force_alias=force_alias,
            ),
            serving=dict(
                registered_model_name=registered_model_name,
                deployment_mode=deployment_mode,
                canary_percent=canary_percent,
            ),
            gpus=gpus,
            tracking_uri=tracking_uri,
            checkpoint_root=checkpoint_root,
            deploy=deploy,
        )
        search = dict(
            algorithm=algorithm,
            trials=trials,
            parallel_trials=parallel_trials,
            max_failed_trials=max_failed_trials,
            min_trials_required=min_trials_required,
            start_step=start_step,
            search_seed=search_seed,
        )
        return _wire_tune(settings, search, target)

    return dogs_vs_cats_tune


def _wire(s: Settings, target: ClusterTarget) -> PipelineOutputs:
    arrays = _data_tasks(s, target, _preflight_task(s, target))
    training = _training_inputs(s, arrays)
    if target.nodes > 1:  # compiled for several nodes: a Kubeflow Trainer TrainJob trains
        train = ops.trainjob_op(
            nodes=target.nodes,
            gpus=s.gpus,
            gpu_image=target.gpu_image,
            runtime=target.trainer_runtime,
            shared_pvc=target.shared_pvc,
            placement=target.training.to_json(),
            **training,
        )
        _cpu_task(train, target, cpu="1", memory="4Gi").set_caching_options(False)
        _retry_training(train, target)
        kubernetes.mount_pvc(train, pvc_name=target.shared_pvc, mount_path="/shared")
        _with_mlflow_secret(train, target)
    else:
        train = ops.train_op(gpus=s.gpus, **training)
        _gpu_task(train, target, s.gpus)
    evaluate = _evaluate_task(s, arrays, train, target)
    register = _register_task(s, train.outputs["Output"], evaluate.outputs["accuracy"], target)
    deploy = _deploy_task(s, register, train.outputs["Output"], target)
    return PipelineOutputs(
        mlflow_run_id=evaluate.outputs["mlflow_run_id"],
        test_accuracy=evaluate.outputs["accuracy"],
        registration=register.outputs["reason"],
        serving_url=deploy.outputs["url"],
    )


def _wire_sweep(s: Settings, grid: Any, target: ClusterTarget) -> SweepOutputs:
    preflight = _preflight_task(s, target, grid)
    arrays = _data_tasks(s, target, preflight)
    parent = ops.sweep_parent_op(
        grid=grid,
        experiment=s.train["experiment"],
        tracking_uri=s.tracking_uri,
        kfp_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        pipeline_name=PIPELINE_NAME,
    ).after(preflight)
    _cpu_task(parent, target, cpu="500m", memory="1Gi").set_caching_options(False)
    _with_mlflow_secret(parent, target)
    with dsl.ParallelFor(grid, parallelism=target.sweep_parallelism) as combination:
        # the child finds its parent run by the KFP run they share: kfp.local hands a
        # ParallelFor body the loop item in place of an outer task's output parameter
        train = ops.train_op(
            gpus=s.gpus, combination=combination, **_training_inputs(s, arrays)
        ).after(parent)
        _gpu_task(train, target, s.gpus)
        evaluate = _evaluate_task(s, arrays, train, target, combination)
    best = ops.sweep_best_op(
        parent_run_id=parent.output,
        child_run_ids=dsl.Collected(evaluate.outputs["mlflow_run_id"]),
        tracking_uri=s.tracking_uri,
    )
    _cpu_task(best, target, cpu="500m", memory="1Gi").set_caching_options(False)
    _with_mlflow_secret(best, target)
    register = _register_task(
        s, best.outputs["mlflow_run_id"], best.outputs["test_accuracy"], target
    )
    deploy = _deploy_task(s, register, best.outputs["mlflow_run_id"], target)
    return SweepOutputs(
        parent_run_id=parent.output,
        best_run_id=best.outputs["mlflow_run_id"],
        best_val_accuracy=best.outputs["val_accuracy"],
        test_accuracy=best.outputs["test_accuracy"],
        compare_url=best.outputs["compare_url"],
        registration=register.outputs["reason"],
        serving_url=deploy.outputs["url"],
    )


def _wire_tune(s: Settings, search: dict[str, Any], target: ClusterTarget) -> TuneOutputs:
    arrays = _data_tasks(s, target, _preflight_task(s, target))
    training = _training_inputs(s, arrays)
    del training["checkpoint_root"]  # each trial checkpoints into its own MLflow run
    tune = ops.tune_op(
        gpu_image=target.gpu_image,
        shared_pvc=target.shared_pvc,
        placement=target.training.to_json(),
        **training,
        **search,
    )
    # it only waits on Katib: small, and retried like training (an attempt finds the
    # Experiment of the one before and waits for it)
    _cpu_task(tune, target, cpu="500m", memory="2Gi").set_caching_options(False)
    _retry_training(tune, target)
    kubernetes.mount_pvc(tune, pvc_name=target.shared_pvc, mount_path="/shared")
    _with_mlflow_secret(tune, target)
    evaluate = _evaluate_task(s, arrays, tune, target)
    register = _register_task(s, tune.outputs["Output"], evaluate.outputs["accuracy"], target)
    deploy = _deploy_task(s, register, tune.outputs["Output"], target)
    return TuneOutputs(
        best_run_id=evaluate.outputs["mlflow_run_id"],
        test_accuracy=evaluate.outputs["accuracy"],
        registration=register.outputs["reason"],
        serving_url=deploy.outputs["url"],
    )


def _preflight_task(s: Settings, target: ClusterTarget, grid: Any = None) -> Any:
    """Check the tracking server (and a sweep's grid) before anything is downloaded."""
    sweep = {} if grid is None else {"grid": grid}
    preflight = ops.preflight_op(tracking_uri=s.tracking_uri, **sweep)
    _cpu_task(preflight, target, cpu="250m", memory="512Mi").set_caching_options(False)
    _with_mlflow_secret(preflight, target)
    return preflight


def _data_tasks(s: Settings, target: ClusterTarget, preflight: Any) -> Any:
    """Download and preprocess, once ``preflight`` passed; the arrays."""
    download = ops.download_op(**s.download).after(preflight)
    _cpu_task(download, target, cpu="1", memory="2Gi")
    # no KFP retry: the step retries transient errors itself, within its deadline, and a
    # refused archive or a digest mismatch would only fail again
    _with_secret(download, target.training.s3_secret, S3_ENV, target)
    preprocess = ops.preprocess_op(raw=download.outputs["dataset"], **s.preprocess)
    _cpu_task(preprocess, target, cpu="2", memory="4Gi")
    return preprocess.outputs["arrays"]


def _training_inputs(s: Settings, arrays: Any) -> dict[str, Any]:
    return dict(
        arrays=arrays,
        tracking_uri=s.tracking_uri,
        checkpoint_root=s.checkpoint_root,
        kfp_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        pipeline_name=PIPELINE_NAME,
        **s.train,
    )


def _evaluate_task(
    s: Settings, arrays: Any, train: Any, target: ClusterTarget, combination: Any = ""
) -> Any:
    evaluate = ops.evaluate_op(
        arrays=arrays,
        model=train.outputs["trained_model"],
        mlflow_run_id=train.outputs["Output"],
        tracking_uri=s.tracking_uri,
        combination=combination,
        **s.evaluate,
    )
    _cpu_task(evaluate, target, cpu="2", memory="8Gi").set_caching_options(False)
    _with_mlflow_secret(evaluate, target)
    return evaluate


def _register_task(s: Settings, run_id: Any, test_accuracy: Any, target: ClusterTarget) -> Any:
    register = ops.register_op(
        mlflow_run_id=run_id,
        test_accuracy=test_accuracy,
        tracking_uri=s.tracking_uri,
        **s.register,
    )
    _cpu_task(register, target, cpu="500m", memory="1Gi").set_caching_options(False)
    _with_mlflow_secret(register, target)
    return register


def _deploy_task(s: Settings, register: Any, run_id: Any, target: ClusterTarget) -> Any:
    """After the gate: serves the version it gave the alias when ``deploy`` is on; else it
    only says why not (a task either way, so the run's ``serving_url`` always has a value)."""
    deploy = ops.deploy_op(
        deploy=s.deploy,
        took_alias=register.outputs["took_alias"],
        model_version=register.outputs["version"],
        mlflow_run_id=run_id,
        tracking_uri=s.tracking_uri,
        image=target.image,
        **s.serving,
    )
    _cpu_task(deploy, target, cpu="250m", memory="512Mi").set_caching_options(False)
    _with_mlflow_secret(deploy, target)
    return deploy


def _cpu_task(task: Any, target: ClusterTarget, cpu: str, memory: str) -> Any:
    """CPU image; requests as given, limits twice that."""
    task.set_container_image(target.image)
    return (
        task.set_cpu_request(cpu)
        .set_cpu_limit(twice_cpu(cpu))
        .set_memory_request(memory)
        .set_memory_limit(twice_memory(memory))
    )


def _retry_training(task: Any, target: ClusterTarget) -> None:
    """Retries of a training task (or of the TrainJob launcher): training resumes."""
    # Argo counts the retry window from the first attempt's start and cuts a retried pod
    # at its end; KFP's default of an hour would leave multi-hour training unretried
    task.set_retry(
        num_retries=target.train_retries,
        backoff_duration="60s",
        backoff_factor=2,
        backoff_max_duration=TRAIN_RETRY_WINDOW,
    )


def _gpu_task(task: Any, target: ClusterTarget, gpus: Any) -> None:
    """CUDA image placed as ``target.training`` says: GPUs, toleration, shm, retries."""
    placement = target.training
    task.set_container_image(target.gpu_image)
    task.set_cpu_request(placement.cpu).set_cpu_limit(placement.cpu_limit)
    task.set_memory_request(placement.memory).set_memory_limit(placement.memory)
    task.set_accelerator_type(GPU).set_accelerator_limit(gpus)
    _retry_training(task, target)
    task.set_caching_options(False)
    if placement.toleration_key:
        kubernetes.add_toleration(
            task, key=placement.toleration_key, operator="Exists", effect="NoSchedule"
        )
    if placement.node_label:
        kubernetes.add_node_selector(task, *placement.node_label)
    kubernetes.empty_dir_mount(
        task,
        volume_name="dshm",
        mount_path="/dev/shm",
        medium="Memory",
        size_limit=placement.shm_size,
    )
    _with_secret(task, placement.s3_secret, S3_ENV, target)
    _with_mlflow_secret(task, target)


def _with_mlflow_secret(task: Any, target: ClusterTarget) -> None:
    _with_secret(task, target.training.mlflow_secret, MLFLOW_ENV, target)


def _with_secret(task: Any, secret: str, env: dict[str, str], target: ClusterTarget) -> None:
    """The secret's keys as env: optional where the backend allows, else it must exist."""
    if target.optional_secrets:
        kubernetes.use_secret_as_env(task, secret, env, optional=True)
    else:
        kubernetes.use_secret_as_env(task, secret, env)
