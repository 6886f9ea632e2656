"""The register step's work: register a model only when its test accuracy is enough,
and move the alias to it only when it beats the alias's holder."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.core.identity import ModelIdentityError, sha256_of_bytes
from components.core.names import INT8_FILE, ONNX_FILE, WEIGHTS_FILE
from components.registration import rescore
from components.registration.card import model_card
from components.registration.challenge import Holder, challenge
from components.registration.confidence import accuracy_at_least
from components.registration.config import RegisterConfig
from components.registration.rescore import Rescored
from components.tracking.tags import EVALUATION_DIGEST_TAG, TEST_PHOTOS_PARAM, TEST_SPLIT_PARAM

log = logging.getLogger(__name__)

ACCURACY_TOLERANCE = 1e-6  # a given accuracy that differs from the run's by more is refused
DECISION_TAG = "quality_gate"  # the MLflow run tag that holds the decision and its reason
# the evaluate step's reports on the test split: the float32 graph's ("test") and, where
# the model has one, the int8 graph's ("test_int8")
EVALUATION = "evaluation/{prefix}/metrics.json"
MOST_REPORT_BYTES = 2**20  # a report is a few KB: metrics, counts, digests
# the challenger run's record of the holder's accuracy on its test photos, scored again
HOLDER_ACCURACY_METRIC = "challenge_holder_test_accuracy"
FLOAT_MODEL_FILES = (ONNX_FILE, WEIGHTS_FILE)  # what a float model's evaluation scores
# champion and challenger are compared on no fewer photos that neither trained on
MIN_SHARED_PHOTOS = 30


@dataclass(frozen=True)
class Decision:
    """Whether the model was registered, whether it took the alias, why, and as which
    version."""

    registered: bool
    reason: str
    version: str | None = None
    took_alias: bool = False


def register_if_accurate(cfg: RegisterConfig) -> Decision:
    """Register the run's model when its accuracy reaches the minimum with 95% confidence
    (the lower end of its Wilson interval on the test photos it was measured on: a figure
    on a handful of photos says little), and point the alias at it when it also beats the
    alias's holder on the same test split.

    Either way the decision and its reason are tagged on the MLflow run and logged.

    Args:
        cfg: the run, the minimum, the registry name and alias; a test accuracy given
            is only checked against the one the run holds.

    Returns:
        The decision, with the registered version when there is one.
    """
    from components.tracking import (  # mlflow loads when the gate runs, not for --help
        run_log,
        store,
    )

    store.check_server()  # one line at once, not a minute of retries
    reports = evaluation_reports(cfg)
    accuracies = [float(report["metrics"]["accuracy"]) for report in reports]
    accuracy = min(accuracies)  # every graph the model may be served by must pass
    count = int(reports[0]["count"])
    lowest = accuracy_at_least(accuracy, count)
    passed = lowest >= cfg.min_accuracy
    comparison = (
        f"test accuracy {accuracy:.4f} on {count} photos, at least {lowest:.4f} with 95% "
        f"confidence, {'>=' if passed else '<'} minimum {cfg.min_accuracy:.4f}"
    )
    if len(accuracies) > 1:
        comparison += (
            f" (the lower of its float32 graph's {accuracies[0]:.4f} and its int8 graph's "
            f"{accuracies[1]:.4f})"
        )
    if passed:
        decision = _register(cfg, reports[0], accuracy, comparison)
    else:
        decision = Decision(False, f"not registered: {comparison}")
    run_log.set_run_tags(cfg.mlflow_run_id, {DECISION_TAG: decision.reason})
    log.info("quality gate: %s", decision.reason)
    return decision


def _register(
    cfg: RegisterConfig, report: dict[str, Any], accuracy: float, comparison: str
) -> Decision:
    """Register the run's model with its card; the alias only as the challenge allows."""
    from components.tracking import logged_models, registry, run_log

    name, run, alias = cfg.registered_model_name, cfg.mlflow_run_id, cfg.alias
    _check_same_classes(report["classes"], registry.registered_classes(name), name, run)
    digests, params = run_log.input_digests(run), run_log.run_params(run)
    held = registry.alias_holder(name, alias)
    holder = Holder(*held) if held else None
    split, photos = report["split_sha256"], report["photos"]
    again = None
    if holder and (cfg.data is not None or not holder.tested_on(split, photos)):
        # the holder on these photos, one by one, where neither trained on them
        again = _scored_again(cfg, holder, photos, report.get("source_listing"))
    wrong = report.get("wrong")  # positions, from a report whose digest was checked
    if not (isinstance(wrong, list) and all(type(i) is int for i in wrong)):
        wrong = None  # an older report: the figures alone are compared
    verdict = challenge(holder, accuracy, split, alias, cfg.force_alias, photos, again, wrong)
    files = logged_models.recorded_identity(report["model_id"])
    description, tags = model_card(run, report, params, digests, files)
    description += f" Compared for @{alias}: {verdict.reason}."
    version = registry.register_model(
        report["model_id"],
        name,
        alias if verdict.takes_alias else None,
        description,
        tags | verdict.record,
    )
    where = f"as @{alias}" if verdict.takes_alias else f"without @{alias}"
    return Decision(
        True,
        f"registered {name} version {version} {where}: {comparison}; {verdict.reason}",
        version,
        verdict.takes_alias,
    )


def _scored_again(
    cfg: RegisterConfig, holder: Holder, photos: str | None, source: object
) -> Rescored | str:
    """The alias's holder scored on the challenger's test photos that neither trained on
    (recorded in the challenger's run beside its own figure), or why it could not be:
    the photos of the challenger's test split, checked against its source's listing
    (``source``, the report's record of the check), that are in the holder's test share
    too, its split checked alike."""
    from components.tracking import run_log

    if not isinstance(source, dict):
        return (
            "this model's test split was not checked against the source listing a download "
            "step recorded"
        )
    if holder.share is None:
        return (
            f"version {holder.version}'s test split was not checked against a source listing, "
            "so which photos it trained on is not known"
        )
    if cfg.data is None or photos is None:
        return "no test photos to score it again on (--data)"
    model = f"models:/{cfg.registered_model_name}/{holder.version}"
    try:
        again = rescore.score_holder(model, Path(cfg.data), photos, holder.share)
    except (OSError, ValueError, ModelIdentityError) as err:
        return f"it could not be scored again on this model's test photos: {err}"
    if again.count < MIN_SHARED_PHOTOS:
        return (
            f"only {again.count} of this model's test photos are test photos of version "
            f"{holder.version}'s too, photos neither trained on; {MIN_SHARED_PHOTOS} are "
            "needed at the least"
        )
    run_log.log_metrics_into(cfg.mlflow_run_id, {HOLDER_ACCURACY_METRIC: again.accuracy})
    return again


def evaluation_reports(cfg: RegisterConfig) -> list[dict[str, Any]]:
    """The evaluations the evaluate step recorded in the run, once each is known to have
    scored the very files of the model the run logged: the float32 graph's, and the int8
    graph's where the model has one. Their test accuracies are what is judged.

    Not the run's ``test_accuracy`` metric: anyone may log another value under that name
    later, into any run. The evaluate step's report (``evaluation/test/metrics.json``)
    names the logged model and the digests of the files it scored; the tracking store
    records the digests of that model's files (``components.core.identity``).

    Raises:
        LookupError: the run holds no evaluation on the test split (it was not evaluated),
            or none of the int8 graph its model has.
        ValueError: an evaluation scored other files than the run's model's, on a test
            split without both classes, or ``cfg.test_accuracy`` is given and is not the
            float32 graph's.
    """
    from components.tracking import logged_models, run_log

    run = cfg.mlflow_run_id
    _check_finished(run_log.run_status(run), run)
    model_id = logged_models.logged_model_id(run)
    recorded = logged_models.recorded_identity(model_id)
    params = run_log.run_params(run)
    graphs = [("test", FLOAT_MODEL_FILES)] + (
        [("test_int8", (INT8_FILE,))] if INT8_FILE in recorded else []
    )
    reports = [
        _verified_report(run, model_id, recorded, params, prefix, files) for prefix, files in graphs
    ]
    accuracy = reports[0]["metrics"]["accuracy"]
    if cfg.test_accuracy is not None and abs(cfg.test_accuracy - accuracy) > ACCURACY_TOLERANCE:
        raise ValueError(
            f"refusing to judge MLflow run {run} by a test accuracy of {cfg.test_accuracy}: "
            f"the run's own, from the evaluate step, is {accuracy}"
        )
    return reports


def _verified_report(
    run: str,
    model_id: str,
    recorded: dict[str, str],
    params: dict[str, str],
    prefix: str,
    model_files: tuple[str, ...],
) -> dict[str, Any]:
    """The run's report ``evaluation/{prefix}/metrics.json``, once it scored one of
    ``model_files`` of the run's model, as the tracking store ``recorded`` them, on both
    classes of the test split the training recorded (``params``)."""
    report = _recorded_report(run, prefix)
    where = EVALUATION.format(prefix=prefix)
    scored = _scored_files(report, model_id, model_files, where)
    accuracy = report["metrics"].get("accuracy")
    if any(recorded.get(name) != digest for name, digest in scored.items()) or not _is_accuracy(
        accuracy
    ):
        raise ValueError(
            f"refusing to judge MLflow run {run}: its recorded evaluation {where} did not "
            f"score the files of the model the run logged ({model_id}): "
            + ", ".join(
                f"{name} {digest[:12]}… scored, {str(recorded.get(name))[:12]}… logged"
                for name, digest in sorted(scored.items())
            )
            + "; evaluate the run's own model"
        )
    _check_every_class(report, params, run, where)
    _check_recorded_split(report, params, run, where)
    if type(report.get("count")) is not int or report["count"] < 1:
        raise ValueError(
            f"refusing to judge MLflow run {run}: expected {where} to say how many test photos "
            f"it scored, found {report.get('count')!r:.40}"
        )
    return report


def _check_finished(status: str, run: str) -> None:
    """Refuse a run whose training did not end well: a model is judged only once the run
    that trained it is FINISHED (not RUNNING, FAILED or KILLED).

    Raises:
        ValueError: the run's status is another.
    """
    if status != "FINISHED":
        raise ValueError(
            f"refusing to judge MLflow run {run}: expected a FINISHED training run, found "
            f"{status}; train it to the end (--resume) and evaluate it again"
        )


def _recorded_report(run: str, prefix: str) -> dict[str, Any]:
    """The evaluate step's report ``evaluation/{prefix}/metrics.json`` in the run's
    artifacts, once its bytes are the ones whose digest the evaluate step recorded in the
    tracking store: a report changed or planted in the artifact store alone is refused.

    Raises:
        LookupError: the run holds no report, or no digest of one (it was not evaluated).
        ValueError: the report's digest is not the recorded one, or it is not JSON.
    """
    from components.tracking import run_log

    tag, where = EVALUATION_DIGEST_TAG.format(prefix=prefix), EVALUATION.format(prefix=prefix)
    recorded = run_log.run_tag(run, tag)
    data = run_log.load_run_bytes(run, where, MOST_REPORT_BYTES)
    if data is None or recorded is None:
        evaluate = (
            "evaluate the model on a CPU (--runtime auto scores its int8 graph too)"
            if prefix.endswith("int8")
            else "evaluate the model first"
        )
        raise LookupError(
            f"expected the evaluate step's report {where} in MLflow run {run} and its "
            f"digest in tag {tag}, found {'no report' if data is None else 'no digest'}: "
            f"{evaluate}"
        )
    found = sha256_of_bytes(data)
    if found != recorded:
        raise ValueError(
            f"refusing to judge MLflow run {run}: its report {where} has sha256 "
            f"{found[:12]}…, the evaluate step recorded {recorded[:12]}… in the tracking "
            "store; the artifact was changed after evaluation: evaluate the model again"
        )
    try:
        report: dict[str, Any] = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"expected a JSON report {where} in run {run}: {err}") from err
    return report


def _scored_files(
    report: object, model_id: str, model_files: tuple[str, ...], where: str
) -> dict[str, str]:
    """The digests of the files the evaluation ``where`` read, once it names ``model_id``
    and one of ``model_files`` among them.

    Raises:
        ValueError: a report of another model, or one that does not say what it scored.
    """
    fits = (
        isinstance(report, dict)
        and isinstance(report.get("metrics"), dict)
        and report.get("model_id") == model_id
        and report.get("scored") in model_files
        and isinstance(report.get("sha256"), dict)
        and report["scored"] in report["sha256"]
        and all(isinstance(digest, str) for digest in report["sha256"].values())
    )
    if not fits:
        found = (
            {key: report.get(key) for key in ("model_id", "scored")}
            if isinstance(report, dict)
            else type(report).__name__
        )
        raise ValueError(
            f"refusing to judge the run by {where}: expected the evaluate step's report "
            f"on logged model {model_id} naming the file it scored and its sha256, found "
            f"{str(found)[:200]}"
        )
    assert isinstance(report, dict)
    return dict(report["sha256"])


def _check_every_class(
    report: dict[str, Any], params: dict[str, str], run: str, where: str
) -> None:
    """Refuse an evaluation of other classes than the training run recorded, or on a
    test split that lacks one: its accuracy says nothing of the class it lacks (a net
    that answers "dog" always scores 1.0 on dogs alone)."""
    classes, matrix = report.get("classes"), report.get("confusion_matrix")
    rows = [sum(row) for row in matrix] if isinstance(matrix, list) else []
    trained = json.loads(params["data_classes"]) if "data_classes" in params else classes
    if not (isinstance(classes, list) and len(rows) == len(classes) >= 2) or min(rows) <= 0:
        raise ValueError(
            f"refusing to judge MLflow run {run}: expected a test split holding photos of "
            f"every class, found {str(rows or 'no confusion matrix')[:200]} photos by class "
            f"in {where}"
        )
    if classes != trained:
        raise ValueError(
            f"refusing to judge MLflow run {run}: its report {where} scored the classes "
            f"{str(classes)[:200]}, its training recorded {str(trained)[:200]}"
        )


def _check_same_classes(classes: list[str], held: list[list[str]], name: str, run: str) -> None:
    """Refuse a model whose classes are not those of the versions registered under
    ``name``: its answers would replace theirs under the same name, and its figures
    cannot be compared with theirs."""
    others = [listed for listed in held if listed != classes]
    if others:
        raise ValueError(
            f"refusing to register MLflow run {run}'s model of the classes "
            f"{', '.join(classes)[:300]} under registered_model_name={name}: its versions "
            f"are of the classes {', '.join(others[0])[:300]}; give these photos' model "
            "another registered_model_name"
        )


def _check_recorded_split(
    report: dict[str, Any], params: dict[str, str], run: str, where: str
) -> None:
    """Refuse a report on a test split other than the one the training run recorded (the
    arrays' sha256 and the photos'): the gate compares what evaluate scored, nothing else.

    Raises:
        ValueError: the report names other arrays or photos, or none.
    """
    scored = (report.get("split_sha256"), report.get("photos"))
    recorded = (params.get(TEST_SPLIT_PARAM), params.get(TEST_PHOTOS_PARAM))
    proven = scored[1] is None or scored[1] == recorded[1]  # None: no photo files were kept
    if scored[0] != recorded[0] or recorded[0] is None or not proven:
        raise ValueError(
            f"refusing to judge MLflow run {run}: its report {where} scored the test "
            f"split with arrays sha256 {str(scored[0])[:12]}… and photos {str(scored[1])[:12]}…, "
            f"its training recorded {str(recorded[0])[:12]}… and {str(recorded[1])[:12]}…; "
            "evaluate the model on the arrays it was trained beside"
        )


def _is_accuracy(value: object) -> bool:
    return isinstance(value, int | float) and 0 <= value <= 1
