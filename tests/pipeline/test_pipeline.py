"""The pipelines' settings in the compiled spec: each reaches its task as an input of its
own, described for the KFP UI."""

from __future__ import annotations

import json
import re

import pytest

from components.networks.registry import NETS


@pytest.mark.parametrize("sweep", [False, True], ids=["pipeline", "sweep"])
def test_each_setting_reaches_its_task_as_an_input_of_its_own(compiled, compiled_sweep, sweep):
    spec = compiled_sweep[0] if sweep else compiled[2]
    root_parameters = set(spec["root"]["inputDefinitions"]["parameters"])
    fed = set()
    for component, name, source in parameter_feeds(spec):
        # no value is pasted into a string: a constant is a whole placeholder or none
        constant = json.dumps(source.get("runtimeValue", {}).get("constant", ""))
        assert "{{" not in constant or WHOLE_PLACEHOLDER.fullmatch(constant), (component, name)
        parent = source.get("componentInputParameter")
        if parent in root_parameters:  # one name, one meaning (a loop body prefixes it)
            assert name in (parent, f"pipelinechannel--{parent}"), (component, name, parent)
            fed.add(parent)
    assert fed == root_parameters


WHOLE_PLACEHOLDER = re.compile(
    r"\"\{\{\$\.(inputs\.parameters\['[\w-]+'\]|pipeline_job_uuid)\}\}\""
)


def parameter_feeds(spec) -> list[tuple[str, str, dict]]:
    """Every (component, input, source) of the spec's tasks, the sweep's loop body too."""
    dags = [spec["root"]["dag"], *(c["dag"] for c in spec["components"].values() if "dag" in c)]
    return [
        (task["componentRef"]["name"], name, source)
        for dag in dags
        for task in dag["tasks"].values()
        for name, source in task["inputs"].get("parameters", {}).items()
    ]


def test_the_training_seed_and_the_split_seed_feed_different_tasks(compiled):
    _, _, spec, _ = compiled
    takers = {}
    for component, name, source in parameter_feeds(spec):
        if source.get("componentInputParameter") in ("seed", "split_seed"):
            takers.setdefault(name, set()).add(component)
    assert takers == {"seed": {"comp-train-op"}, "split_seed": {"comp-preprocess-op"}}


def test_every_parameter_is_described_for_the_kfp_ui_with_its_choices(compiled, compiled_sweep):
    _, _, spec, _ = compiled
    parameters = spec["root"]["inputDefinitions"]["parameters"]
    assert parameters and all(p.get("description") for p in parameters.values())
    described = {name: " ".join(p["description"].split()) for name, p in parameters.items()}
    assert described["model"].endswith(f"(one of: {', '.join(NETS)})")
    assert "(one of: constant, onecycle)" in described["schedule"]
    sweep_parameters = compiled_sweep[0]["root"]["inputDefinitions"]["parameters"]
    assert "empty list is refused" in " ".join(sweep_parameters["grid"]["description"].split())


def pick_parameters(values: dict) -> dict:
    """A preset's pipeline parameters (the rest place the train task)."""
    from pipeline.parameters import PARAMETERS

    return {name: value for name, value in values.items() if name in PARAMETERS}


def defaults(spec) -> dict:
    parameters = spec["root"]["inputDefinitions"]["parameters"]
    return {name: p.get("defaultValue") for name, p in parameters.items()}


def test_the_compiled_defaults_are_the_gpu_presets_its_gate_included(compiled, compiled_sweep):
    """The spec's train task runs on a GPU node: its defaults are the accurate preset's,
    so a run submitted as compiled trains what its own gate can pass."""
    from components.recipes.recipe import recipe_values

    accurate = recipe_values("accurate")
    for spec in (compiled[2], compiled_sweep[0]):
        found = defaults(spec)
        assert {k: found[k] for k in accurate if k in found} == pick_parameters(accurate)


def test_compile_preset_sets_the_defaults_as_run_and_submit_take_it(tmp_path):
    import yaml

    from components.recipes.recipe import recipe_values
    from pipeline.__main__ import main as pipeline_main

    path = tmp_path / "cpu.yaml"
    pipeline_main(["compile", "--preset", "cpu", "--output", str(path)])
    spec, _ = yaml.safe_load_all(path.read_text())
    found = defaults(spec)
    cpu = recipe_values("cpu")
    assert {k: found[k] for k in cpu if k in found} == pick_parameters(cpu)
    assert found["min_accuracy"] == 0.93 and found["model"] == "stem16_residual_cnn"
