"""A run's last lines: the MLflow UI's command and what to type next."""

from pipeline.next_steps import closing_lines, next_step


def test_a_run_the_gate_refuses_says_why_and_exactly_what_to_type():
    said = next_step(
        "not registered: test accuracy 0.6789 on 200 photos, at least 0.6118 with 95% "
        "confidence, < minimum 0.8500",
        0.6789,
        "sqlite:///runs/local/mlflow.db",
        {},
    )
    assert said.startswith(
        "the gate wants a test accuracy of at least 0.85 with 95% confidence and this model "
        "reached 0.6789, at least 0.6118"
    )
    assert said.endswith("run again with a lower gate: add min_accuracy=0.61")  # what passes


def test_a_version_the_alias_stayed_away_from_is_named_beside_the_alias():
    said = next_step(
        "registered pets version 2 without @candidate: test accuracy 0.7350 >= minimum "
        "0.6000; does not beat version 1's 0.8150 on the same test split; @candidate stays "
        "on version 1",
        0.735,
        "sqlite:///runs/mlflow.db",
        {"registered_model_name": "pets"},
    )
    assert said == (
        "@candidate stays on the better version: serve it with MLFLOW_TRACKING_URI="
        "sqlite:///runs/mlflow.db python -m components.serve --model models:/pets@candidate "
        "--port 8080, or this one with models:/pets/2"
    )


def test_the_mlflow_ui_line_is_for_a_store_on_this_machine_only():
    here = closing_lines("registered x version 1 as @candidate", 0.9, "sqlite:///r/m.db", {})
    assert here[0] == (
        "MLflow UI:     mlflow ui --backend-store-uri sqlite:///r/m.db (then open the pages above)"
    )
    served = closing_lines("registered x version 1 as @candidate", 0.9, "http://mlflow:5000", {})
    assert len(served) == 1 and served[0].startswith("next:          serve it: ")
