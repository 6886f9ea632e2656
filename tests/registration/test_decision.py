"""Registration: a model is registered only when the evaluation the evaluate step
recorded of its own weights reaches the minimum; nothing else can talk the gate into it."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from components import register
from components.core import identity
from components.core.identity import ModelIdentityError
from components.data.arrays import load_split, save_split
from components.evaluation.config import EvaluateConfig
from components.evaluation.report import evaluate
from components.registration.confidence import accuracy_at_least
from components.registration.config import RegisterConfig
from components.registration.decision import register_if_accurate
from components.tracking import logged_models
from components.tracking.tags import EVALUATION_DIGEST_TAG
from components.training import session
from components.training.config import TrainConfig


def trained(arrays: Path, output: Path, seed: int = 0):
    return session.train(TrainConfig(data=str(arrays), output=str(output), dry_run=True, seed=seed))


def evaluated(arrays: Path, model_dir: Path, run_id: str | None = None) -> float:
    """The test accuracy the evaluate step measured and recorded (into ``run_id``, or the
    run recorded beside the model)."""
    report = evaluate(
        EvaluateConfig(
            model_dir=str(model_dir),
            data=str(arrays),
            output=str(model_dir.parent / f"{model_dir.name}-eval"),
            mlflow_run_id=run_id,
        )
    )
    return report["metrics"]["accuracy"]


def relogged_with_its_digest(store: str, run_id: str, report: dict) -> None:
    """``report`` logged as the run's evaluation, its digest recorded as evaluate records
    it: what only someone who can write the tracking store as well could do."""
    data = json.dumps(report).encode()
    client = MlflowClient(store)
    client.log_dict(run_id, json.loads(data), "evaluation/test/metrics.json")
    logged = client.download_artifacts(run_id, "evaluation/test/metrics.json")
    digest = hashlib.sha256(Path(logged).read_bytes()).hexdigest()
    client.set_tag(run_id, EVALUATION_DIGEST_TAG.format(prefix="test"), digest)


def refused_and_nothing_registered(run_id: str, store: str, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        register_if_accurate(RegisterConfig(mlflow_run_id=run_id, min_accuracy=0.0))
    assert MlflowClient(store).search_registered_models() == []


def test_a_model_below_the_minimum_is_not_registered_and_the_run_says_why(
    small_arrays, tmp_path, mlflow_store, capsys
):
    result = trained(small_arrays, tmp_path / "m")
    accuracy = evaluated(small_arrays, tmp_path / "m")
    register.main(
        [
            *("--mlflow-run-id", result.run_id),
            *("--min-accuracy", f"{accuracy + 0.01:.4f}", "--registered-model-name", "pets"),
        ]
    )
    reason = capsys.readouterr().out.strip()
    lowest = accuracy_at_least(accuracy, 100)  # small_arrays: 100 test photos
    assert reason == (
        f"not registered: test accuracy {accuracy:.4f} on 100 photos, at least {lowest:.4f} "
        f"with 95% confidence, < minimum {accuracy + 0.01:.4f}"
    )
    client = MlflowClient(mlflow_store)
    assert client.get_run(result.run_id).data.tags["quality_gate"] == reason
    assert client.search_registered_models() == []


def test_a_model_at_the_minimum_is_registered_by_its_logged_model_id(
    small_arrays, tmp_path, mlflow_store, caplog
):
    result = trained(small_arrays, tmp_path / "m")
    accuracy = evaluated(small_arrays, tmp_path / "m")
    lowest = accuracy_at_least(accuracy, 100)
    refused = register_if_accurate(
        RegisterConfig(mlflow_run_id=result.run_id, min_accuracy=accuracy)
    )
    assert not refused.registered  # 100 photos cannot show the figure itself with confidence
    with caplog.at_level(logging.WARNING):
        decision = register_if_accurate(
            RegisterConfig(mlflow_run_id=result.run_id, min_accuracy=round(lowest - 5e-5, 4))
        )
    assert decision.registered and decision.version == "1"
    client = MlflowClient(mlflow_store)
    version = client.get_model_version_by_alias("dogs-vs-cats", "candidate")
    assert version.source == result.model_uri  # models:/m-…, the logged model itself
    assert version.run_id == result.run_id
    assert "registering model based on" not in caplog.text  # MLflow's runs:/ fallback
    # the registry page reads as a model card
    assert f"test accuracy {accuracy:.4f}" in version.description
    assert version.tags["mlflow_run_id"] == result.run_id
    assert version.tags["recipe.model"] == "tutorial_cnn"
    assert {"data.train-split.digest", "data.val-split.digest", "data.test-split.digest"} <= set(
        version.tags
    )


def test_the_evaluation_is_linked_to_the_model_and_the_data_it_was_measured_on(
    small_arrays, tmp_path, mlflow_store
):
    result = trained(small_arrays, tmp_path / "m")
    evaluated(small_arrays, tmp_path / "m")
    client = MlflowClient(mlflow_store)
    model_id = result.model_uri.removeprefix("models:/")
    linked = {m.key: m for m in client.get_logged_model(model_id).metrics}
    assert linked["test_accuracy"].model_id == model_id
    assert linked["test_accuracy"].dataset_name == "test-split"
    (test_input,) = [
        d
        for d in client.get_run(result.run_id).inputs.dataset_inputs
        if d.dataset.name == "test-split"
    ]
    assert {t.key: t.value for t in test_input.tags}["mlflow.data.context"] == "test"
    assert test_input.dataset.digest == linked["test_accuracy"].dataset_digest


def test_an_evaluation_of_another_model_is_never_logged_into_a_run(
    small_arrays, tmp_path, mlflow_store
):
    trained(small_arrays, tmp_path / "good")
    weak = trained(small_arrays, tmp_path / "weak", seed=1)
    with pytest.raises(
        ModelIdentityError,
        match=rf"refusing {tmp_path / 'good'}/model\.(onnx|pt): its sha256 is .*, MLflow run "
        f"{weak.run_id}'s model",
    ):
        evaluated(small_arrays, tmp_path / "good", run_id=weak.run_id)
    assert "test_accuracy" not in MlflowClient(mlflow_store).get_run(weak.run_id).data.metrics
    refused_and_nothing_registered(
        weak.run_id, mlflow_store, LookupError, "expected the evaluate step's report"
    )


def test_a_test_accuracy_logged_by_hand_later_is_not_what_is_judged(
    small_arrays, tmp_path, mlflow_store
):
    weak = trained(small_arrays, tmp_path / "weak")
    accuracy = evaluated(small_arrays, tmp_path / "weak")
    client = MlflowClient(mlflow_store)
    client.log_metric(weak.run_id, "test_accuracy", 0.99, step=7)  # a teammate's "fix"
    decision = register_if_accurate(
        RegisterConfig(mlflow_run_id=weak.run_id, min_accuracy=min(1.0, accuracy + 0.01))
    )
    assert not decision.registered and f"test accuracy {accuracy:.4f} on 100" in decision.reason
    assert "< minimum" in decision.reason
    assert client.search_registered_models() == []


def test_an_evaluation_report_of_other_weights_copied_into_a_run_is_refused(
    small_arrays, tmp_path, mlflow_store
):
    trained(small_arrays, tmp_path / "good")
    weak = trained(small_arrays, tmp_path / "weak", seed=1)
    evaluated(small_arrays, tmp_path / "good")
    MlflowClient(mlflow_store).log_artifact(
        weak.run_id, str(tmp_path / "good-eval/metrics.json"), "evaluation/test"
    )
    refused_and_nothing_registered(  # the weak run was never evaluated: no digest
        weak.run_id, mlflow_store, LookupError, "found no digest: evaluate the model first"
    )
    report = json.loads((tmp_path / "good-eval/metrics.json").read_text())
    relogged_with_its_digest(mlflow_store, weak.run_id, report)  # and the tracking store
    refused_and_nothing_registered(
        weak.run_id, mlflow_store, ValueError, "expected the evaluate step's report on logged model"
    )


def test_a_weak_run_holding_a_stronger_runs_graph_is_never_registered(
    small_arrays, tmp_path, mlflow_store
):
    """The weak run's folder with the strong run's model.onnx (and its record) copied in:
    evaluate refuses it against the tracking store's record, and a report relabelled as
    the weak model's is refused by the gate, whatever the minimum."""
    strong = trained(small_arrays, tmp_path / "strong")
    weak = trained(small_arrays, tmp_path / "weak", seed=1)
    for name in ("model.onnx", identity.RECORD):
        shutil.copyfile(tmp_path / "strong" / name, tmp_path / "weak" / name)
    with pytest.raises(ModelIdentityError, match=r"refusing .*weak/model\.onnx: its sha256"):
        evaluated(small_arrays, tmp_path / "weak")
    assert "test_accuracy" not in MlflowClient(mlflow_store).get_run(weak.run_id).data.metrics
    evaluated(small_arrays, tmp_path / "strong")
    report = json.loads((tmp_path / "strong-eval/metrics.json").read_text())
    report["model_id"] = logged_models.logged_model_id(weak.run_id)  # the strong graph's scores
    relogged_with_its_digest(mlflow_store, weak.run_id, report)
    refused_and_nothing_registered(
        weak.run_id, mlflow_store, ValueError, "did not score the files of the model the run"
    )
    assert strong.run_id != weak.run_id


def test_a_report_changed_in_the_artifact_store_alone_is_refused(
    small_arrays, tmp_path, mlflow_store
):
    """Someone who can write the artifact store but not the tracking store raises a weak
    run's accuracy in its report: the digest the evaluate step recorded no longer holds."""
    weak = trained(small_arrays, tmp_path / "weak")
    evaluated(small_arrays, tmp_path / "weak")
    report = json.loads((tmp_path / "weak-eval/metrics.json").read_text())
    report["metrics"]["accuracy"] = 0.99
    MlflowClient(mlflow_store).log_dict(weak.run_id, report, "evaluation/test/metrics.json")
    refused_and_nothing_registered(
        weak.run_id, mlflow_store, ValueError, "the artifact was changed after evaluation"
    )


def test_a_report_planted_into_a_run_never_evaluated_is_refused(
    small_arrays, tmp_path, mlflow_store
):
    """The planted report carries the run's model id and the digests of its files, which
    anyone who reads the tracking store can copy: no digest of it is recorded."""
    weak = trained(small_arrays, tmp_path / "weak")
    model_id = logged_models.logged_model_id(weak.run_id)
    files = logged_models.recorded_identity(model_id)
    report = {
        "model_id": model_id,
        "scored": "model.onnx",
        "sha256": {name: files[name] for name in ("model.pt", "model.onnx")},
        "metrics": {"accuracy": 0.95, "roc_auc": 0.99, "cat_recall": 0.95, "dog_recall": 0.95},
        "confusion_matrix": [[48, 2], [3, 47]],
        "count": 100,
    }
    MlflowClient(mlflow_store).log_dict(weak.run_id, report, "evaluation/test/metrics.json")
    refused_and_nothing_registered(
        weak.run_id, mlflow_store, LookupError, "found no digest: evaluate the model first"
    )


def test_a_run_that_is_not_finished_is_never_judged(small_arrays, tmp_path, mlflow_store):
    result = trained(small_arrays, tmp_path / "m")
    evaluated(small_arrays, tmp_path / "m")
    MlflowClient(mlflow_store).update_run(result.run_id, status="RUNNING")
    refused_and_nothing_registered(
        result.run_id, mlflow_store, ValueError, "expected a FINISHED training run, found RUNNING"
    )


def test_a_test_split_of_one_class_is_never_judged(small_arrays, tmp_path, mlflow_store):
    weak = trained(small_arrays, tmp_path / "weak")
    evaluated(small_arrays, tmp_path / "weak")
    report = json.loads((tmp_path / "weak-eval/metrics.json").read_text())
    report["confusion_matrix"] = [[0, 0], [3, 97]]  # dogs alone
    relogged_with_its_digest(mlflow_store, weak.run_id, report)
    refused_and_nothing_registered(
        weak.run_id,
        mlflow_store,
        ValueError,
        r"expected a test split holding photos of every class, found \[0, 100\]",
    )


def test_a_test_accuracy_the_run_does_not_hold_is_refused_and_nothing_registered(
    small_arrays, tmp_path, mlflow_store
):
    result = trained(small_arrays, tmp_path / "m")
    argv = ["--mlflow-run-id", result.run_id, "--test-accuracy", "0.91"]
    with pytest.raises(SystemExit, match="^error: expected the evaluate step's report"):
        register.main(argv)  # not evaluated yet
    accuracy = evaluated(small_arrays, tmp_path / "m")
    refused = f"by a test accuracy of 0.91: the run's own, from the evaluate step, is {accuracy}"
    with pytest.raises(SystemExit, match=refused.replace(".", "\\.")):
        register.main(argv)  # the README's own example, talked up
    client = MlflowClient(mlflow_store)
    assert client.search_registered_models() == []
    assert "quality_gate" not in client.get_run(result.run_id).data.tags
    decision = register_if_accurate(
        RegisterConfig(mlflow_run_id=result.run_id, test_accuracy=accuracy, min_accuracy=0.0)
    )
    assert decision.registered  # the run's own number, given, is only checked


def test_a_worse_model_is_registered_without_the_alias_and_the_card_says_why(
    small_arrays, tmp_path, mlflow_store
):
    """Two models on one test split, the better registered first: the worse one gets a
    version but not @candidate, and both figures are in the gate's line."""
    scored = {}
    for seed in (0, 1):
        result = trained(small_arrays, tmp_path / f"m{seed}", seed=seed)
        scored[result.run_id] = evaluated(small_arrays, tmp_path / f"m{seed}")
    better, worse = sorted(scored, key=scored.get, reverse=True)
    first = register_if_accurate(RegisterConfig(mlflow_run_id=better, min_accuracy=0.0))
    assert first.took_alias and first.reason.endswith("no version held @candidate")
    second = register_if_accurate(RegisterConfig(mlflow_run_id=worse, min_accuracy=0.0))
    assert second.registered and not second.took_alias and second.version == "2"
    assert second.reason == (
        f"registered dogs-vs-cats version 2 without @candidate: test accuracy "
        f"{scored[worse]:.4f} on 100 photos, at least "
        f"{accuracy_at_least(scored[worse], 100):.4f} with 95% confidence, >= minimum 0.0000; "
        f"does not beat version 1's "
        f"{scored[better]:.4f} on the same test split; @candidate stays on version 1"
    )
    client = MlflowClient(mlflow_store)
    assert client.get_model_version_by_alias("dogs-vs-cats", "candidate").run_id == better
    card = client.get_model_version("dogs-vs-cats", "2")
    assert card.tags["challenge.version"] == "1"
    assert card.tags["challenge.outcome"] == "lost"
    assert "Compared for @candidate: does not beat version 1's" in card.description
    assert client.get_run(worse).data.tags["quality_gate"] == second.reason


def test_a_model_tested_on_another_split_takes_the_alias_only_when_forced(
    small_arrays, sample_arrays, tmp_path, mlflow_store, capsys
):
    holder = trained(small_arrays, tmp_path / "holder")
    evaluated(small_arrays, tmp_path / "holder")
    register_if_accurate(RegisterConfig(mlflow_run_id=holder.run_id, min_accuracy=0.0))
    other = trained(sample_arrays, tmp_path / "other", seed=1)
    report = evaluate(  # the whole sample's test split: another digest
        EvaluateConfig(
            model_dir=str(tmp_path / "other"), data=str(sample_arrays), output=str(tmp_path / "e")
        )
    )
    assert report["count"] != 100
    kept = register_if_accurate(RegisterConfig(mlflow_run_id=other.run_id, min_accuracy=0.0))
    assert not kept.took_alias and "which cannot be compared" in kept.reason
    client = MlflowClient(mlflow_store)
    assert str(client.get_model_version_by_alias("dogs-vs-cats", "candidate").version) == "1"
    capsys.readouterr()
    register.main(["--mlflow-run-id", other.run_id, "--min-accuracy", "0", "--force-alias"])
    forced = capsys.readouterr().out.strip()  # the README's flag, on the step's command line
    assert forced.startswith("registered dogs-vs-cats version 3 as @candidate")
    assert "moved by force" in forced
    assert str(client.get_model_version_by_alias("dogs-vs-cats", "candidate").version) == "3"
    assert client.get_model_version("dogs-vs-cats", "3").tags["challenge.outcome"] == "forced"


def test_a_tracking_server_that_does_not_answer_is_one_line_at_once(monkeypatch):
    """The health check's own error: MLflow's client, which retries for minutes, was
    never asked."""
    from components.tracking.store import TrackingUnavailableError
    from tests.support.servers import free_port

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(TrackingUnavailableError, match="unreachable"):
        register_if_accurate(RegisterConfig(mlflow_run_id="abc", min_accuracy=0.5))


def copied_arrays(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def test_a_test_split_cherry_picked_after_training_is_never_scored(
    small_arrays, tmp_path, mlflow_store
):
    """A net that answers "dog" would score high on the dogs and two cats kept, counts in
    meta.json made to match: evaluate holds the split to the training run's record."""
    arrays = copied_arrays(small_arrays, tmp_path / "arrays")
    result = trained(arrays, tmp_path / "m")
    images, labels = load_split(arrays, "test")
    kept = np.concatenate([np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)[:2]])
    meta = json.loads((arrays / "meta.json").read_text())
    meta["shards"]["test"] = save_split(arrays, "test", images[kept], labels[kept])
    meta["counts"]["test"] = {"cat": 2, "dog": int((labels == 1).sum())}
    (arrays / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="expected the split its training recorded") as refused:
        evaluated(arrays, tmp_path / "m")
    assert ", 2 cat, " in str(refused.value)
    assert not (tmp_path / "m-eval").exists()
    assert "test_accuracy" not in MlflowClient(mlflow_store).get_run(result.run_id).data.metrics


@pytest.mark.parametrize("photos", ["ab" * 32, ["ab" * 32]])
def test_a_photos_digest_edited_after_training_is_never_scored_or_read_as_code(
    small_arrays, tmp_path, mlflow_store, photos
):
    """An artifact writer claims the champion's photos for a challenger's arrays."""
    arrays = copied_arrays(small_arrays, tmp_path / "arrays")
    trained(arrays, tmp_path / "m")
    meta = json.loads((arrays / "meta.json").read_text())
    meta["photos_sha256"] = {"test": photos}
    (arrays / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="expected (photos_sha256|the split its training)"):
        evaluated(arrays, tmp_path / "m")
    assert not (tmp_path / "m-eval").exists()


def test_arrays_forged_with_another_split_s_photos_kept_beside_them_are_never_scored(
    sample_arrays, tmp_path, mlflow_store
):
    """Written before training, so the training records the forgery too: the test arrays
    are of other photos than the files kept beside them, which the claim is made from."""
    arrays = copied_arrays(sample_arrays, tmp_path / "arrays")
    images, labels = load_split(arrays, "test")
    meta = json.loads((arrays / "meta.json").read_text())
    meta["shards"]["test"] = save_split(arrays, "test", images[::-1].copy(), labels[::-1].copy())
    (arrays / "meta.json").write_text(json.dumps(meta))  # other pixels a place, recorded
    trained(arrays, tmp_path / "m")
    with pytest.raises(ValueError, match="to be the photo of its place in the test arrays"):
        evaluated(arrays, tmp_path / "m")
    assert not (tmp_path / "m-eval").exists()


def test_a_report_naming_another_split_than_the_training_recorded_is_refused(
    small_arrays, tmp_path, mlflow_store
):
    """Relogged with its digest (a writer of the tracking store too): the gate still
    compares only what the training run recorded of its test split."""
    weak = trained(small_arrays, tmp_path / "weak")
    evaluated(small_arrays, tmp_path / "weak")
    report = json.loads((tmp_path / "weak-eval/metrics.json").read_text())
    report["photos"] = "cd" * 32  # the champion's photos, claimed
    relogged_with_its_digest(mlflow_store, weak.run_id, report)
    refused_and_nothing_registered(weak.run_id, mlflow_store, ValueError, "its training recorded")


def test_a_huge_report_is_refused_before_it_is_downloaded(small_arrays, tmp_path, mlflow_store):
    """3 MB of report, its digest recorded: refused by the size the artifact store lists."""
    weak = trained(small_arrays, tmp_path / "weak")
    evaluated(small_arrays, tmp_path / "weak")
    report = json.loads((tmp_path / "weak-eval/metrics.json").read_text())
    report["padding"] = "x" * 3_000_000
    relogged_with_its_digest(mlflow_store, weak.run_id, report)
    refused_and_nothing_registered(
        weak.run_id, mlflow_store, ValueError, "at most 1048576 bytes, found 3.* not downloaded"
    )


def test_too_few_photos_neither_trained_on_leave_the_two_not_compared(monkeypatch, tmp_path):
    """The holder's test share and the challenger's test photos overlap in 5 photos: a
    figure on 5 photos decides nothing, so the two are not compared."""
    from components.registration import decision, rescore
    from components.registration.challenge import Holder
    from components.registration.rescore import Rescored

    scored = []

    def five_photos(model, data, photos, share):
        scored.append((model, share))
        return Rescored(0.4, 5, photos, (0, 1, 2), (0, 1, 2, 3, 4))

    monkeypatch.setattr(rescore, "score_holder", five_photos)
    cfg = RegisterConfig(mlflow_run_id="run", min_accuracy=0.0, data=str(tmp_path))
    holder = Holder("3", {"data.test-share": "0.001"})
    why = decision._scored_again(cfg, holder, "ab" * 32, {"run": "r", "test_fraction": 0.1})
    assert scored == [("models:/dogs-vs-cats/3", 0.001)]
    assert why == (
        "only 5 of this model's test photos are test photos of version 3's too, photos "
        "neither trained on; 30 are needed at the least"
    )
