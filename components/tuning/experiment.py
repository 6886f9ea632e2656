"""A Katib Experiment that searches the train step's recipe where its preset trains: the
cluster's GPU nodes, or for a recipe made for CPUs, CPU nodes with no GPU asked for.

Built with the typed models of Katib's own SDK (``kubeflow.katib``, v0.19 as Katib is)
and checked with the rules of Katib's validating webhook (``components.tuning.webhook``)
before anyone applies it. Each trial is a Kubernetes Job running ``python -m
components.train`` in its hardware's image, placed as the pipeline's train task is (the
``Placement``: the GPU on GPU hardware, the toleration and node selector where there are
any, ``/dev/shm``, the service account, the secrets as optional environment), reading the
arrays from the shared ReadWriteMany volume and writing its model next to them. The trial prints
each epoch's metrics for Katib's StdOut collector (``--metrics-stdout``); Katib's
``medianstop`` stops a trial whose validation accuracy falls behind the median of the
finished ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, cast

from kubeflow import katib
from kubernetes import client as k8s

from components.cluster.object_names import is_dns_label, is_dns_subdomain
from components.cluster.placement import Placement
from components.core import schema
from components.core.errors import printable
from components.core.uris import holds_credentials, redact
from components.core.workspace import workspace_env
from components.training.config import TrainConfig
from components.tuning import webhook
from components.tuning.config import TuneConfig, trial_recipe
from components.tuning.report import ADDITIONAL, OBJECTIVE
from components.tuning.search_space import CATEGORICAL, Dimension

API_VERSION, KIND = "kubeflow.org/v1beta1", "Experiment"
SUBSTITUTION = "${"  # Katib replaces ${trialParameters.…} in a trial's template
RUN_ID = re.compile(r"[A-Za-z0-9][\w-]{0,255}")  # what MLflow takes as a run id
CONTAINER = "training"  # the trial's primary container: the one the collector watches
TRIAL_NAME = "trialName"  # the trial parameter that carries ${trialSpec.Name}
APP_GID = 10001  # the image's user and group: fsGroup makes the shared volume theirs
LONGEST_NAME = 40  # Katib names trials NAME-xxxxxxxx and their Jobs' pods after them
# Katib's defaults for a batch Job trial (its mutating webhook would set the same)
SUCCESS = 'status.conditions.#(type=="Complete")#|#(status=="True")#'
FAILURE = 'status.conditions.#(type=="Failed")#|#(status=="True")#'


@dataclass(frozen=True)
class ExperimentTarget:
    """Where the Experiment and its trials run, and where they read and write."""

    name: str
    image: str
    tracking_uri: str
    namespace: str | None = None
    placement: Placement = field(default_factory=Placement)
    shared_pvc: str = "dogs-vs-cats-shared"
    shared_mount: str = "/shared"
    service_account: str = "dogs-vs-cats-pipeline"
    parent_run_id: str | None = None

    def __post_init__(self) -> None:
        if not is_dns_label(self.name, longest=LONGEST_NAME) or not self.name[0].isalpha():
            raise ValueError(
                f"expected the experiment's name as a DNS label of at most {LONGEST_NAME} "
                f"characters starting with a letter (lowercase letters, digits, -), found "
                f"{self.name!r}"
            )
        if self.namespace is not None and not is_dns_label(self.namespace):
            raise ValueError(f"expected a namespace name, found {self.namespace!r}")
        tidy = self.tracking_uri.isprintable() and not any(c.isspace() for c in self.tracking_uri)
        if holds_credentials(self.tracking_uri) or not tidy or SUBSTITUTION in self.tracking_uri:
            raise ValueError(
                "expected the tracking URI as one URI such as http://HOST:PORT, with no user, "
                "password or secret (the trials read them from the MLflow secret), found "
                f"{printable(redact(self.tracking_uri))!r:.200}"
            )
        if self.parent_run_id is not None and not RUN_ID.fullmatch(self.parent_run_id):
            raise ValueError(
                "expected --parent-run-id as an MLflow run id (letters, digits, _ and -), "
                f"found {printable(repr(self.parent_run_id))[:100]}"
            )
        if not is_dns_subdomain(self.shared_pvc):
            raise ValueError(
                f"expected --shared-pvc as a claim's name (a DNS subdomain), found "
                f"{printable(repr(self.shared_pvc))[:100]}"
            )
        if SUBSTITUTION in self.image:
            raise ValueError(
                f"expected no {SUBSTITUTION} in the trials' image, found {self.image!r}"
            )
        if not self.image or any(c.isspace() for c in self.image):
            raise ValueError(
                f"expected the trials' image as an image reference, found {self.image!r}"
            )

    @property
    def folder(self) -> str:
        """The Experiment's folder on the shared volume: arrays/ and trials/NAME/."""
        return f"{self.shared_mount}/{self.name}"


def experiment_name(kfp_run_id: str) -> str:
    """A name per KFP run that Katib accepts: ``tune-`` and the run id, lowercase, cut."""
    label = re.sub(r"[^a-z0-9-]", "-", f"tune-{kfp_run_id}".lower())
    return label[:LONGEST_NAME].rstrip("-")


def build_experiment(
    tune: TuneConfig, target: ExperimentTarget, recipe: TrainConfig, space: tuple[Dimension, ...]
) -> katib.V1beta1Experiment:
    """The Experiment searching ``space`` around ``recipe`` (its other fields stay fixed,
    but for how often a trial scores val: ``trial_recipe``)."""
    if not space:
        raise ValueError("expected at least one searched dimension, found every one fixed")
    recipe = trial_recipe(recipe, tune)
    return katib.V1beta1Experiment(
        api_version=API_VERSION,
        kind=KIND,
        metadata=k8s.V1ObjectMeta(
            name=target.name,
            namespace=target.namespace,
            labels={"app.kubernetes.io/part-of": "dogs-vs-cats"},
        ),
        spec=katib.V1beta1ExperimentSpec(
            objective=katib.V1beta1ObjectiveSpec(
                type="maximize",
                objective_metric_name=OBJECTIVE,
                additional_metric_names=list(ADDITIONAL),
                # the model a trial writes is its last epoch's: judge it by that epoch
                metric_strategies=[katib.V1beta1MetricStrategy(name=OBJECTIVE, value="latest")],
            ),
            algorithm=katib.V1beta1AlgorithmSpec(
                algorithm_name=tune.algorithm,
                algorithm_settings=[_setting("random_state", tune.search_seed)],
            ),
            early_stopping=katib.V1beta1EarlyStoppingSpec(
                algorithm_name="medianstop",
                algorithm_settings=[
                    _setting("min_trials_required", tune.min_trials_required),
                    _setting("start_step", tune.start_step),
                ],
            ),
            max_trial_count=tune.trials,
            parallel_trial_count=tune.parallel_trials,
            max_failed_trial_count=tune.max_failed_trials,
            resume_policy="Never",
            metrics_collector_spec=katib.V1beta1MetricsCollectorSpec(
                collector=katib.V1beta1CollectorSpec(kind="StdOut")
            ),
            parameters=[_parameter(dimension) for dimension in space],
            trial_template=_trial_template(target, recipe, space),
        ),
    )


def to_manifest(experiment: katib.V1beta1Experiment) -> dict[str, Any]:
    """The Experiment as the API takes it, refused where Katib's webhook would refuse it.

    Raises:
        ValueError: each rule it breaks, by field path.
    """
    manifest = katib.ApiClient().sanitize_for_serialization(experiment)
    errors = webhook.validate(manifest)
    if errors:
        raise ValueError("Katib's webhook would refuse the Experiment: " + "; ".join(errors))
    return cast(dict[str, Any], manifest)


def trial_arguments(
    target: ExperimentTarget, recipe: TrainConfig, space: tuple[Dimension, ...]
) -> list[str]:
    """The train step's flags in a trial: the fixed recipe, then each searched value."""
    fixed = replace(
        recipe,
        data=f"{target.folder}/arrays",
        output=f"{target.folder}/trials/${{trialParameters.{TRIAL_NAME}}}",
        trial=f"${{trialParameters.{TRIAL_NAME}}}",
        parent_run_id=target.parent_run_id,
        metrics_stdout=True,
        device="auto",
        # each trial is a run of its own: no shared checkpoint store, nothing to resume
        checkpoint_uri=None,
        resume=False,
        mlflow_run_id=None,
        combination=None,
    )
    searched = {schema.flag(dimension.name) for dimension in space}
    kept = [arg for arg in schema.to_argv(recipe) if arg.partition("=")[0] not in searched]
    if smuggled := [arg for arg in kept if SUBSTITUTION in arg]:
        raise ValueError(  # Katib would substitute it into every trial
            f"expected no {SUBSTITUTION} in a fixed setting, found {printable(smuggled[0])!r:.200}"
        )
    kept = [arg for arg in schema.to_argv(fixed) if arg.partition("=")[0] not in searched]
    return kept + [
        f"{schema.flag(dimension.name)}=${{trialParameters.{dimension.name}}}"
        for dimension in space
    ]


def _setting(name: str, value: object) -> katib.V1beta1AlgorithmSetting:
    return katib.V1beta1AlgorithmSetting(name=name, value=str(value))


def _parameter(dimension: Dimension) -> katib.V1beta1ParameterSpec:
    if dimension.kind == CATEGORICAL:
        space = katib.V1beta1FeasibleSpace(list=[str(choice) for choice in dimension.choices])
    else:
        space = katib.V1beta1FeasibleSpace(
            min=str(dimension.low),
            max=str(dimension.high),
            distribution="logUniform" if dimension.log else "uniform",
        )
    return katib.V1beta1ParameterSpec(
        name=dimension.name, parameter_type=dimension.kind, feasible_space=space
    )


def _trial_template(
    target: ExperimentTarget, recipe: TrainConfig, space: tuple[Dimension, ...]
) -> katib.V1beta1TrialTemplate:
    parameters = [
        katib.V1beta1TrialParameterSpec(
            name=TRIAL_NAME, reference="${trialSpec.Name}", description="the trial's name"
        ),
        *(
            katib.V1beta1TrialParameterSpec(
                name=dimension.name,
                reference=dimension.name,
                description=schema.flag(dimension.name),
            )
            for dimension in space
        ),
    ]
    return katib.V1beta1TrialTemplate(
        primary_container_name=CONTAINER,
        success_condition=SUCCESS,
        failure_condition=FAILURE,
        retain=False,
        trial_parameters=parameters,
        trial_spec=k8s.ApiClient().sanitize_for_serialization(_job(target, recipe, space)),
    )


def _job(target: ExperimentTarget, recipe: TrainConfig, space: tuple[Dimension, ...]) -> k8s.V1Job:
    """One trial: the train step placed as the pipeline's train task (one GPU on GPU
    hardware, none on CPU hardware)."""
    place = target.placement
    resources = {"cpu": place.cpu, "memory": place.memory}
    if place.on_gpu:
        resources[place.gpu_resource] = "1"
    container = k8s.V1Container(
        name=CONTAINER,
        image=target.image,
        command=["python", "-m", "components.train"],
        args=trial_arguments(target, recipe, space),
        env=step_env(target),
        resources=k8s.V1ResourceRequirements(
            requests=resources, limits={**resources, "cpu": place.cpu_limit}
        ),
        volume_mounts=[
            k8s.V1VolumeMount(name="dshm", mount_path="/dev/shm"),
            k8s.V1VolumeMount(name="shared", mount_path=target.shared_mount),
        ],
        # at container level: Katib injects its collector beside it, which runs as root
        security_context=locked_down(),
    )
    pod = k8s.V1PodSpec(
        restart_policy="Never",
        service_account_name=target.service_account,
        security_context=pod_security(),
        tolerations=[
            k8s.V1Toleration(key=place.toleration_key, operator="Exists", effect="NoSchedule")
        ]
        if place.toleration_key
        else None,
        node_selector=dict([place.node_label]) if place.node_label else None,
        containers=[container],
        volumes=[
            k8s.V1Volume(
                name="dshm",
                empty_dir=k8s.V1EmptyDirVolumeSource(medium="Memory", size_limit=place.shm_size),
            ),
            shared_volume(target),
        ],
    )
    return k8s.V1Job(
        api_version="batch/v1",
        kind="Job",
        # Kueue's batch/Job integration admits each trial by its queue label
        metadata=k8s.V1ObjectMeta(labels=place.kueue_labels) if place.kueue_labels else None,
        spec=k8s.V1JobSpec(
            backoff_limit=0,  # a failed trial is Katib's to count, not retried under it
            template=k8s.V1PodTemplateSpec(
                metadata=k8s.V1ObjectMeta(
                    labels={"app.kubernetes.io/part-of": "dogs-vs-cats"},
                    # Istio's sidecar never exits, so the Job would never complete
                    annotations={"sidecar.istio.io/inject": "false"},
                ),
                spec=pod,
            ),
        ),
    )


def step_env(target: ExperimentTarget) -> list[k8s.V1EnvVar]:
    """MLflow's address (and workspace), and each secret key as an optional variable (as in
    the pipeline)."""
    workspace = [k8s.V1EnvVar(name=name, value=value) for name, value in workspace_env().items()]
    tracking = k8s.V1EnvVar(name="MLFLOW_TRACKING_URI", value=target.tracking_uri)
    return [tracking, *workspace, *secret_env(target.placement.secret_keys)]


def secret_env(secret_keys: dict[str, tuple[str, ...]]) -> list[k8s.V1EnvVar]:
    """Each key of each secret as an optional variable of the same name."""
    return [
        k8s.V1EnvVar(
            name=key,
            value_from=k8s.V1EnvVarSource(
                secret_key_ref=k8s.V1SecretKeySelector(name=secret, key=key, optional=True)
            ),
        )
        for secret, keys in secret_keys.items()
        for key in keys
    ]


def locked_down() -> k8s.V1SecurityContext:
    """A container that runs non-root with nothing to escalate."""
    return k8s.V1SecurityContext(
        allow_privilege_escalation=False,
        run_as_non_root=True,
        capabilities=k8s.V1Capabilities(drop=["ALL"]),
    )


def pod_security() -> k8s.V1PodSecurityContext:
    """The image's group owns the shared volume; the runtime's default seccomp profile."""
    return k8s.V1PodSecurityContext(
        fs_group=APP_GID, seccomp_profile=k8s.V1SeccompProfile(type="RuntimeDefault")
    )


def shared_volume(target: ExperimentTarget) -> k8s.V1Volume:
    """The ReadWriteMany claim the arrays and the trials' models live on."""
    return k8s.V1Volume(
        name="shared",
        persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(
            claim_name=target.shared_pvc
        ),
    )
