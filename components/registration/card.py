"""The registered version's model card: a description and tags that say what the model
is, what it was trained and judged on, and which run made it, on the registry's page."""

from __future__ import annotations

from typing import Any

RECIPE = ("model", "epochs", "batch_size", "lr", "weight_decay", "augment", "seed")
DATA = ("image_size", "channels", "split_seed")


def model_card(
    run_id: str, report: dict[str, Any], params: dict[str, str], digests: dict[str, str]
) -> tuple[str, dict[str, str]]:
    """(description, tags) for the version the gate registers from ``run_id``.

    Args:
        run_id: the training run.
        report: the evaluate step's report on the test split (metrics, count, weights).
        params: the run's MLflow params (the recipe and the data's shape).
        digests: the run's input datasets' digests by name (``train-split``, ``test-split``).
    """
    metrics = report["metrics"]
    recipe = {key: params[key] for key in RECIPE if key in params}
    shape = f"{params.get('channels', '?')}×{params.get('image_size', '?')}²"
    description = (
        f"Dogs-vs-cats classifier ({recipe.get('model', '?')}, {shape} pixels): test accuracy "
        f"{metrics['accuracy']:.4f} on {report['count']} held-out photos (ROC AUC "
        f"{metrics['roc_auc']:.4f}; cats {metrics['cat_accuracy']:.4f}, dogs "
        f"{metrics['dog_accuracy']:.4f}), measured by the evaluate step on these very weights "
        f"(sha256 {report['weights_sha256'][:12]}…). Trained by MLflow run {run_id}: "
        + ", ".join(f"{key}={value}" for key, value in recipe.items())
        + "."
    )
    tags = {
        "mlflow_run_id": run_id,
        "weights_sha256": report["weights_sha256"],
        "test_accuracy": f"{metrics['accuracy']:.4f}",
        "test_roc_auc": f"{metrics['roc_auc']:.4f}",
        "test_count": str(report["count"]),
        **{f"recipe.{key}": str(value) for key, value in recipe.items()},
        **{f"data.{key}": params[key] for key in DATA if key in params},
        **{f"data.{name}.digest": digest for name, digest in sorted(digests.items())},
    }
    return description, tags
