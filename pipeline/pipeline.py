"""The pipelines: download -> preprocess -> train (GPU) -> evaluate -> register -> deploy.

Each pipeline function writes its parameters out, typed, with the defaults and
descriptions of the step schemas' fields of the same names
(``tests/pipeline/test_parameters.py`` holds them to the schemas), and hands them by name
to the wiring (``pipeline.wiring``), which gives each task its settings one input each.
"""

from typing import Any

from kfp import dsl

from components.downloading.config import PETIMAGES_URL
from pipeline.target import CLUSTER_TRACKING_URI, ClusterTarget
from pipeline.wiring import (
    PIPELINE_NAME,
    PipelineOutputs,
    Settings,
    SweepOutputs,
    TuneOutputs,
    wire,
    wire_sweep,
    wire_tune,
)

DESCRIPTION = "Train, evaluate and register a Dogs-vs-Cats classifier."
SWEEP_DESCRIPTION = "Train a grid of Dogs-vs-Cats recipes as child MLflow runs; register the best."
TUNE_DESCRIPTION = "Search the Dogs-vs-Cats recipe with Katib; evaluate and register the best."


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
        return wire(settings, target)

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
        return wire_sweep(settings, grid, target)

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
        return wire_tune(settings, search, target)

    return dogs_vs_cats_tune
