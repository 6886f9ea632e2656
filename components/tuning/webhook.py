"""The rules Katib's validating webhook applies to a new Experiment, in Python.

Katib's CRDs carry no schema: what the API server accepts is what its admission webhook
(kubeflow/katib ``pkg/webhook/v1beta1/experiment/validator``, v0.19) lets through. This
module applies its rules for a new Experiment to the manifest, rule for rule, in its
order, with the algorithms and collectors of the ``katib-config`` Kubeflow installs:
the name, the trial counts, objective, algorithm, early stopping, resume policy, the
trial template (every parameter substituted, no name or namespace, a Job that converts
to ``batch/v1`` without losing a field), the parameters and the metrics collector.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kubernetes import client as k8s

# katib-config as Kubeflow installs it (manifests: katib-config.yaml)
SUGGESTIONS = (
    "random", "tpe", "grid", "hyperband", "bayesianoptimization", "cmaes", "sobol",
    "multivariate-tpe", "enas", "darts", "pbt",
)  # fmt: skip
EARLY_STOPPINGS = ("medianstop",)
PARAMETER_TYPES = ("int", "double", "categorical", "discrete", "")
DISTRIBUTIONS = ("uniform", "logUniform", "normal", "logNormal", "")
RESUME_POLICIES = ("", "Never", "LongRunning", "FromVolume")
META_KEYS = ("Name", "Namespace", "Kind", "APIVersion", "Labels", "Annotations")
NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?")  # as Katib's: a prefix match (Go's MatchString)
PARAMETER_PLACEHOLDER = re.compile(r"\$\{trialParameters\..+?\}")
META_REFERENCE = re.compile(r"\$\{trialSpec\.(.+?)\}")
META_INDEXED = re.compile(r"(.+)\[(.+)]")
TWO_GROUPS = re.compile(r".*\(.*\).*\(.*\).*")


def validate(experiment: dict[str, Any]) -> list[str]:
    """Each rule ``experiment`` breaks, as ``path: why``; empty when Katib would admit it."""
    spec = experiment.get("spec") or {}
    errors = _counts(experiment.get("metadata", {}).get("name", ""), spec)
    objective = _objective(spec.get("objective"))
    if objective:
        return errors + objective  # Katib stops here too
    errors += _algorithm(spec.get("algorithm"))
    errors += _early_stopping(spec.get("earlyStopping"))
    if spec.get("resumePolicy", "") not in RESUME_POLICIES:
        errors.append(f"spec.resumePolicy: invalid ResumePolicyType {spec['resumePolicy']!r}")
    errors += _trial_template(spec)
    parameters = spec.get("parameters") or []
    if not parameters and not spec.get("nasConfig"):
        errors.append("spec: spec.parameters or spec.nasConfig must be specified")
    if parameters and spec.get("nasConfig"):
        errors.append("spec: only one of spec.parameters and spec.nasConfig can be specified")
    errors += _parameters(parameters)
    return errors + _metrics_collector(spec.get("metricsCollectorSpec") or {})


def _counts(name: str, spec: dict[str, Any]) -> list[str]:
    errors = []
    if not NAME.match(name):
        errors.append(f"metadata.name: {name!r} must start with a lowercase letter")
    trials, parallel, failed = (
        spec.get(key) for key in ("maxTrialCount", "parallelTrialCount", "maxFailedTrialCount")
    )
    if failed is not None and failed < 0:
        errors.append(f"spec.maxFailedTrialCount: {failed} should not be less than 0")
    if trials is not None and trials <= 0:
        errors.append(f"spec.maxTrialCount: {trials} must be greater than 0")
    if parallel is not None and parallel <= 0:
        errors.append(f"spec.parallelTrialCount: {parallel} must be greater than 0")
    if failed is not None and trials is not None and failed > trials:
        errors.append(f"spec.maxFailedTrialCount: {failed} should be <= spec.maxTrialCount")
    if parallel is not None and trials is not None and parallel > trials:
        errors.append(f"spec.parallelTrialCount: {parallel} should be <= spec.maxTrialCount")
    return errors


def _objective(objective: dict[str, Any] | None) -> list[str]:
    if objective is None:
        return ["spec.objective: must be specified"]
    errors = []
    if objective.get("type") not in ("minimize", "maximize"):
        errors.append(
            f"spec.objective.type: {objective.get('type')!r} must be minimize or maximize"
        )
    name = objective.get("objectiveMetricName", "")
    if not name:
        errors.append("spec.objective.objectiveMetricName: must be specified")
    if name in (objective.get("additionalMetricNames") or []):
        errors.append("spec.objective.additionalMetricNames: should not contain the objective")
    return errors


def _algorithm(algorithm: dict[str, Any] | None) -> list[str]:
    if algorithm is None:
        return ["spec.algorithm: must be specified"]
    name = algorithm.get("algorithmName", "")
    if not name:
        return ["spec.algorithm.algorithmName: must be specified"]
    if name not in SUGGESTIONS:
        return [f"spec.algorithm.algorithmName: no Suggestion config for algorithm {name!r}"]
    return []


def _early_stopping(early: dict[str, Any] | None) -> list[str]:
    if early is None:
        return []
    name = early.get("algorithmName", "")
    if not name:
        return ["spec.earlyStopping.algorithmName: must be specified"]
    if name not in EARLY_STOPPINGS:
        return [f"spec.earlyStopping.algorithmName: no EarlyStopping config for {name!r}"]
    return []


def _parameters(parameters: list[dict[str, Any]]) -> list[str]:
    errors = []
    for i, parameter in enumerate(parameters):
        path, kind = f"spec.parameters[{i}]", parameter.get("parameterType", "")
        space = parameter.get("feasibleSpace") or {}
        if kind not in PARAMETER_TYPES:
            errors.append(f"{path}.parameterType: {kind!r} is not supported")
        if space.get("distribution", "") not in DISTRIBUTIONS:
            errors.append(
                f"{path}.feasibleSpace.distribution: {space['distribution']!r} is not supported"
            )
        if not any(space.values()):
            errors.append(f"{path}.feasibleSpace: feasibleSpace must be specified")
        elif kind in ("double", "int"):
            if space.get("list"):
                errors.append(f"{path}.feasibleSpace.list: not supported for {kind}")
            if not space.get("max") or not space.get("min"):
                errors.append(f"{path}.feasibleSpace.max: max and min must be specified for {kind}")
        elif kind in ("categorical", "discrete"):
            if space.get("max") or space.get("min") or space.get("step"):
                errors.append(f"{path}.feasibleSpace: max, min and step not supported for {kind}")
    return errors


def _trial_template(spec: dict[str, Any]) -> list[str]:
    template = spec.get("trialTemplate")
    path = "spec.trialTemplate"
    if template is None:
        return [f"{path}: must be specified"]
    errors = []
    if not template.get("primaryContainerName"):
        errors.append(f"{path}.primaryContainerName: must be specified")
    if not template.get("successCondition") or not template.get("failureCondition"):
        errors.append(f"{path}: successCondition and failureCondition must be specified")
    if template.get("trialParameters") is None:
        return errors + [f"{path}.trialParameters: must be specified"]
    if template.get("trialSpec") is None and template.get("configMap") is None:
        return errors + [f"{path}: trialSpec or configMap must be specified"]
    if template.get("trialSpec") is not None and template.get("configMap") is not None:
        return errors + [f"{path}: only one of trialSpec or configMap can be specified"]
    if template.get("configMap") is not None:
        return errors + [f"{path}.configMap: this project checks trialSpec templates only"]
    return errors + _substitutions(spec, template)


def _substitutions(spec: dict[str, Any], template: dict[str, Any]) -> list[str]:
    """Every trial parameter used and defined once; then the Job the template becomes."""
    path = "spec.trialTemplate.trialParameters"
    text = json.dumps(template["trialSpec"])  # Katib reads the template as a string too
    names = {parameter.get("name") for parameter in spec.get("parameters") or []}
    seen_names: set[str] = set()
    seen_references: set[str] = set()
    errors = []
    for i, parameter in enumerate(template["trialParameters"]):
        name, reference = parameter.get("name", ""), parameter.get("reference", "")
        if not name or not reference or "{" in name or "}" in name:
            errors.append(f"{path}[{i}]: name and reference must be specified, no {{ or }}")
            continue
        if name in seen_names or reference in seen_references:
            errors.append(f"{path}[{i}]: name {name!r} or reference {reference!r} is duplicated")
            continue
        seen_names.add(name)
        seen_references.add(reference)
        if names and not _is_meta_key(reference) and reference not in names:
            errors.append(f"{path}[{i}].reference: {reference!r} is not in spec.parameters")
        placeholder = f"${{trialParameters.{name}}}"
        if placeholder not in text:
            return errors + [f"{path}[{i}].name: {name!r} is not used in the trial template"]
        text = text.replace(placeholder, "test-value")
    left = PARAMETER_PLACEHOLDER.findall(text)
    if left:
        errors.append(f"spec.trialTemplate: {left} are not in spec.trialTemplate.trialParameters")
    return errors + _trial_job(json.loads(text))


def _trial_job(job: dict[str, Any]) -> list[str]:
    """Katib converts a ``batch/v1`` Job to the typed Job and back: nothing may be lost."""
    path = "spec.trialTemplate"
    metadata = job.get("metadata") or {}
    errors = []
    if metadata.get("name") or metadata.get("namespace"):
        errors.append(f"{path}: metadata.name and metadata.namespace must be omitted")
    if not job.get("apiVersion") or not job.get("kind"):
        errors.append(f"{path}: apiVersion and kind must be specified")
    if job.get("apiVersion") != "batch/v1" or job.get("kind") != "Job":
        return errors  # Katib converts only Jobs; other kinds are the cluster's to check
    api = k8s.ApiClient()
    typed = api._ApiClient__deserialize(job, "V1Job")  # the client's own decoding
    lost = _differences(job, api.sanitize_for_serialization(typed))
    if lost:
        errors.append(f"{path}: does not convert to a batch/v1 Job at {', '.join(lost)}")
    return errors


def _differences(before: Any, after: Any, at: str = "") -> list[str]:
    """Paths where ``after`` lost or changed what ``before`` had (resources excepted)."""
    if "/resources/limits" in at or "/resources/requests" in at:
        return []  # Katib skips these too: device plugins add resource names
    if isinstance(before, dict) and isinstance(after, dict):
        return [
            difference
            for key, value in before.items()
            for difference in _differences(value, after.get(key), f"{at}/{key}")
        ]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [
            d
            for i, pair in enumerate(zip(before, after, strict=True))
            for d in _differences(*pair, f"{at}/{i}")
        ]
    return [] if before == after else [at or "/"]


def _is_meta_key(reference: str) -> bool:
    match = META_REFERENCE.search(reference)
    if not match:
        return False
    key = match[1]
    indexed = META_INDEXED.search(key)
    return key in META_KEYS or bool(indexed and indexed[1] in META_KEYS)


def _metrics_collector(spec: dict[str, Any]) -> list[str]:
    path = "spec.metricsCollectorSpec"
    collector = spec.get("collector") or {}
    kind = collector.get("kind", "")
    source = spec.get("source") or {}
    file_path = source.get("fileSystemPath") or {}
    absolute = str(file_path.get("path", "")).startswith("/")
    errors = []
    if kind == "File":
        if file_path.get("kind") != "File" or not absolute:
            errors.append(f"{path}.source.fileSystemPath.path: a metrics file path is required")
        if file_path.get("format") not in ("TEXT", "JSON"):
            errors.append(f"{path}.source.fileSystemPath.format: TEXT or JSON is required")
        if file_path.get("format") == "JSON" and source.get("filter") is not None:
            errors.append(f"{path}.source.filter: must be nil when the format is JSON")
    elif kind == "TensorFlowEvent":
        if file_path.get("kind") != "Directory" or not absolute:
            errors.append(f"{path}.source: an event file directory path is required")
        if file_path.get("format"):
            errors.append(f"{path}.source.fileSystemPath.format: must be empty")
    elif kind == "PrometheusMetric":
        http_get = source.get("httpGet") or {}
        if not str(http_get.get("port", "")).isdigit() or int(http_get["port"]) <= 0:
            errors.append(f"{path}.source.httpGet.port: must be a positive integer")
        if not str(http_get.get("path", "")).startswith("/"):
            errors.append(f"{path}.source.httpGet.path: must start with /")
    elif kind == "Custom":
        if not collector.get("customCollector"):
            errors.append(f"{path}.collector.customCollector: required for kind Custom")
    elif kind not in ("StdOut", "Push"):
        errors.append(f"{path}.collector.kind: invalid metrics collector kind {kind!r}")
    return errors + _filters(path, source)


def _filters(path: str, source: dict[str, Any]) -> list[str]:
    """Each filter a regular expression with two groups: the metric's name, its value."""
    errors = []
    for pattern in (source.get("filter") or {}).get("metricsFormat") or []:
        try:
            re.compile(pattern)
        except re.error as err:
            errors.append(f"{path}.source.filter.metricsFormat: invalid filter {pattern!r}: {err}")
            continue
        if not TWO_GROUPS.match(pattern):
            errors.append(f"{path}.source.filter.metricsFormat: two top subexpressions required")
    return errors
