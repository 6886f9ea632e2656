"""The training components: on this node (``train_op``), across nodes as a Kubeflow
Trainer TrainJob (``trainjob_op``), or a Katib search (``tune_op``).

Each takes the train step's recipe as inputs of their own, one a ``TrainConfig`` pipeline
field, of its name and type, as ``pipeline.ops`` says of every component; a body picks
them from its arguments by the schema's names (``pick(TrainConfig, locals())``), so the
recipe is written once here, in each signature. (No ``from __future__ import
annotations``: KFP reads the annotations as types.)
"""

from kfp.dsl import Dataset, Input, Model, Output

from pipeline.ops import component


@component
def train_op(
    arrays: Input[Dataset],
    trained_model: Output[Model],
    gpus: int,
    tracking_uri: str,
    checkpoint_root: str,
    kfp_run_id: str,
    pipeline_name: str,
    model: str,
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    schedule: str,
    augment: bool,
    min_crop_area: float,
    label_smoothing: float,
    start_size: int,
    cutmix: float,
    frozen_blocks: int,
    frozen_statistics: bool,
    probe_photos: int,
    cached_views: int,
    memory_budget_mb: int,
    train_photos: int,
    int8: bool,
    mirror_average: bool,
    shift_average: bool,
    amp: bool,
    compile: bool,
    validate_every: int,
    seed: int,
    experiment: str,
    recipe_name: str,
    combination: str = "",
) -> str:
    """Train on this node (torchrun, one process per GPU, when gpus > 1).

    A retried task resumes from this KFP run's last checkpoint. Where KFP tracks the
    pipeline run in MLflow (KFP >= 2.17), the task's run that KFP made is the training's.

    Args:
        arrays: the preprocess step's output.
        trained_model: where model.pt, the checkpoint and the history are written.
        gpus: processes to start, one per GPU.
        tracking_uri: the MLflow tracking server.
        checkpoint_root: durable checkpoint prefix; empty: the MLflow run's artifacts.
        kfp_run_id: this pipeline run, which the MLflow run is tagged with.
        pipeline_name: tagged on the MLflow run too.
        the rest: the train step's recipe and per-run fields, one input each, named as
            ``TrainConfig``'s pipeline fields (which say what each means).
        combination: in a sweep, this child's recipe fields as a JSON object (from
            ``components.tuning.grid.grid``), over the ones above; the run is nested under the
            sweep's parent run of the same KFP run.

    Returns:
        The MLflow run id.
    """
    from components.core.schema import pick
    from components.core.shutdown import skip_final_collection
    from components.tasks.live import announce_combination
    from components.tasks.train_config import pipeline_train_config
    from components.tracking.kfp_tracking import kfp_task
    from components.tracking.store import use_tracking_uri
    from components.training.config import TrainConfig
    from components.training.processes import train_processes

    recipe = pick(TrainConfig, locals())  # the recipe inputs, by their schema's names
    skip_final_collection()

    announce_combination(combination)
    use_tracking_uri(tracking_uri)
    task = kfp_task()  # KFP's own run for this task, where KFP tracks runs in MLflow
    cfg = pipeline_train_config(
        arrays=arrays.path,
        output=trained_model.path,
        recipe=recipe,
        checkpoint_root=checkpoint_root,
        kfp_run_id=kfp_run_id,
        pipeline_name=pipeline_name,
        combination=combination,
        mlflow_run_id=task.run_id if task else None,
    )
    run_id = train_processes(cfg, gpus)
    trained_model.metadata["mlflow_run_id"] = run_id
    return run_id


@component
def trainjob_op(
    arrays: Input[Dataset],
    trained_model: Output[Model],
    nodes: int,
    gpus: int,
    image: str,
    runtime: str,
    shared_pvc: str,
    placement: str,
    tracking_uri: str,
    checkpoint_root: str,
    kfp_run_id: str,
    pipeline_name: str,
    model: str,
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    schedule: str,
    augment: bool,
    min_crop_area: float,
    label_smoothing: float,
    start_size: int,
    cutmix: float,
    frozen_blocks: int,
    frozen_statistics: bool,
    probe_photos: int,
    cached_views: int,
    memory_budget_mb: int,
    train_photos: int,
    int8: bool,
    mirror_average: bool,
    shift_average: bool,
    amp: bool,
    compile: bool,
    validate_every: int,
    seed: int,
    experiment: str,
    recipe_name: str,
) -> str:
    """Train across ``nodes`` nodes as a Kubeflow Trainer TrainJob.

    Args:
        arrays: the preprocess step's output, copied to the shared volume.
        trained_model: where the trained model is copied back to.
        nodes: nodes to train on.
        gpus: GPUs (and processes) per node.
        image: the image the job's pods run (CUDA's on GPU hardware).
        runtime: the ClusterTrainingRuntime the TrainJob refers to.
        shared_pvc: the ReadWriteMany claim the pods and this task share.
        placement: where the pods run, as ``Placement.to_json()``.
        tracking_uri: the MLflow tracking server.
        checkpoint_root: durable checkpoint prefix; empty: the MLflow run's artifacts.
        kfp_run_id: this pipeline run.
        pipeline_name: tagged on the MLflow run.
        the rest: the train step's recipe and per-run fields, one input each, named as
            ``TrainConfig``'s pipeline fields (which say what each means).

    Returns:
        The MLflow run id.
    """
    from components.cluster import kube, trainjob
    from components.cluster.placement import Placement
    from components.core.schema import pick
    from components.tasks.train_config import pipeline_train_config
    from components.tracking.kfp_tracking import kfp_task
    from components.tracking.store import use_tracking_uri
    from components.training.config import TrainConfig

    recipe = pick(TrainConfig, locals())  # the recipe inputs, by their schema's names

    use_tracking_uri(tracking_uri)
    task = kfp_task()  # KFP's own run for this task: the nodes' rank 0 trains in it
    cfg = pipeline_train_config(
        arrays=arrays.path,
        output=trained_model.path,
        recipe=recipe,
        checkpoint_root=checkpoint_root,
        kfp_run_id=kfp_run_id,
        pipeline_name=pipeline_name,
        mlflow_run_id=task.run_id if task else None,
    )
    job = trainjob.ClusterJob(
        name=trainjob.trainjob_name(kfp_run_id),
        namespace=kube.current_namespace(),
        image=image,
        nodes=nodes,
        gpus_per_node=gpus,
        tracking_uri=tracking_uri,
        shared_pvc=shared_pvc,
        runtime=runtime,
        placement=Placement.from_json(placement),
    )
    run_id = trainjob.train_on_cluster(cfg, job, kube.in_cluster_client())
    trained_model.metadata["mlflow_run_id"] = run_id
    return run_id


@component
def tune_op(
    arrays: Input[Dataset],
    trained_model: Output[Model],
    image: str,
    shared_pvc: str,
    placement: str,
    tracking_uri: str,
    kfp_run_id: str,
    pipeline_name: str,
    model: str,
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    schedule: str,
    augment: bool,
    min_crop_area: float,
    label_smoothing: float,
    start_size: int,
    cutmix: float,
    frozen_blocks: int,
    frozen_statistics: bool,
    probe_photos: int,
    cached_views: int,
    memory_budget_mb: int,
    train_photos: int,
    int8: bool,
    mirror_average: bool,
    shift_average: bool,
    amp: bool,
    compile: bool,
    validate_every: int,
    seed: int,
    experiment: str,
    recipe_name: str,
    algorithm: str,
    trials: int,
    parallel_trials: int,
    max_failed_trials: int,
    min_trials_required: int,
    start_step: int,
    search_seed: int,
) -> str:
    """Search the recipe with the cluster's Katib; the best trial's model comes back.

    Args:
        arrays: the preprocess step's output, copied to the shared volume.
        trained_model: where the best trial's model is copied back to.
        image: the image the trials run (CUDA's on GPU hardware).
        shared_pvc: the ReadWriteMany claim the trials and this task share.
        placement: where the trials run, as ``Placement.to_json()``.
        tracking_uri: the MLflow tracking server (each trial checkpoints into its run).
        kfp_run_id: this pipeline run; the Experiment is named after it.
        pipeline_name: tagged on the MLflow runs.
        the rest: the recipe searched around, named as ``TrainConfig``'s pipeline fields
            (the searched fields take the trials' values), then the search, named as
            ``TuneConfig``'s (each says what it means).

    Returns:
        The best trial's MLflow run id.
    """
    from components.cluster import kube
    from components.cluster.placement import Placement
    from components.core.schema import pick
    from components.tasks.train_config import pipeline_train_config
    from components.tracking.store import use_tracking_uri
    from components.training.config import TrainConfig
    from components.tuning.cluster import tune_on_cluster
    from components.tuning.config import TuneConfig
    from components.tuning.experiment import ExperimentTarget, experiment_name
    from components.tuning.search_space import search_space

    recipe = pick(TrainConfig, locals())  # the recipe inputs, by their schema's names
    search = pick(TuneConfig, locals())

    use_tracking_uri(tracking_uri)
    cfg = pipeline_train_config(
        arrays=arrays.path,
        output=trained_model.path,
        recipe=recipe,
        checkpoint_root="",
        kfp_run_id=kfp_run_id,
        pipeline_name=pipeline_name,
    )
    target = ExperimentTarget(
        name=experiment_name(kfp_run_id),
        namespace=kube.current_namespace(),
        image=image,
        tracking_uri=tracking_uri,
        placement=Placement.from_json(placement),
        shared_pvc=shared_pvc,
    )
    tune = TuneConfig(**search)
    run_id = tune_on_cluster(tune, cfg, target, search_space(cfg.model), kube.in_cluster_client())
    trained_model.metadata["mlflow_run_id"] = run_id
    return run_id
