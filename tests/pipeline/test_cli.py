"""python -m pipeline's command line: its help and its refusals."""

from __future__ import annotations

import pytest

from components.recipes.presets import CLUSTER_PRESET, DEFAULT_PRESET, PRESETS
from components.recipes.recipe import load_recipe
from pipeline.__main__ import main as pipeline_main
from pipeline.cli import CLUSTER_USAGE, PROG
from pipeline.parameters import DESCRIPTIONS, parameters_of
from pipeline.target import CLUSTER_ONLY, LOCAL_TRACKING


def help_of(argv: list[str], capsys) -> str:
    """What ``python -m pipeline ARGV --help`` prints."""
    with pytest.raises(SystemExit):
        pipeline_main([*argv, "--help"])
    return capsys.readouterr().out


def test_help_lists_subcommands_and_the_pipelines_parameters(capsys):
    for argv in (["--help"], ["run", "--help"]):
        with pytest.raises(SystemExit):
            pipeline_main(argv)
    top, run = capsys.readouterr().out.split("usage: python -m pipeline run", 1)
    assert "write the pipeline spec for a cluster" in top and "kfp.local" in top
    assert "epochs=10" in run and "min_accuracy=0.85" in run
    assert "[--local]" in run  # shown as the option it is, not as required


def test_an_unknown_parameter_is_refused_naming_the_close_one_or_the_valid_ones():
    with pytest.raises(SystemExit, match="unknown setting 'epoch' in 'epoch=3': did you mean"):
        pipeline_main(["submit", "--host", "http://127.0.0.1:9", "epoch=3"])
    with pytest.raises(SystemExit, match="unknown setting 'qqq' .*expected one of: source"):
        pipeline_main(["submit", "--host", "http://127.0.0.1:9", "qqq=3"])


@pytest.mark.parametrize(
    ("command", "preset"),
    [
        ("compile", CLUSTER_PRESET),
        ("submit", CLUSTER_PRESET),
        ("run", DEFAULT_PRESET),
        ("sweep", DEFAULT_PRESET),
    ],
)
def test_every_command_lists_each_parameter_with_default_and_description(command, preset, capsys):
    """compile and submit show the defaults the compiled spec holds: its preset's; a run
    here shows its own tracking store and none of what only a cluster uses."""
    shown = help_of([command], capsys)
    flat = " ".join(shown.split())
    here = command in ("run", "sweep")
    for name, (kind, default) in parameters_of(recipe=load_recipe(preset)).items():
        if here and name in CLUSTER_ONLY:
            assert f"  {name}=" not in shown, name
            continue
        value = LOCAL_TRACKING if here and name == "tracking_uri" else repr(default)
        assert f"{name}={value} ({kind.__name__})" in shown, name
        assert " ".join(DESCRIPTIONS[name].split()) in flat, name  # as the compiled spec says
    assert f"(defaults: {preset}'s;" in shown


@pytest.mark.parametrize("argv", [["compile"], ["run"], ["tune"]])
def test_help_names_the_default_and_lists_the_presets_one_line_each(argv, capsys):
    shown = help_of(argv, capsys)
    flat = " ".join(shown.split())
    assert f"without --preset: {DEFAULT_PRESET}" in flat and f"{CLUSTER_PRESET} for compile" in flat
    for name in PRESETS:
        assert any(line.split()[:1] == [name] for line in shown.splitlines()), name
    assert "{'image_size'" not in shown  # no preset shown as a dict


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--local", "--preset", "tutorail"],
        ["compile", "--preset", "tutorail"],
        ["submit", "--host", "http://127.0.0.1:9", "--preset=tutorail"],
        ["tune", "--local", "--preset", "tutorail"],
    ],
)
def test_a_mistyped_preset_is_refused_in_two_lines_naming_the_close_one(argv, capsys):
    with pytest.raises(SystemExit) as refused:
        pipeline_main(argv)
    assert refused.value.code == 2
    said = capsys.readouterr().err.splitlines()
    assert len(said) <= 6 and said[0].startswith("usage: python -m pipeline")
    assert "unknown preset 'tutorail'; did you mean tutorial?" in said[-1]


@pytest.mark.parametrize("command", ["compile", "submit", "run"])
def test_help_after_a_preset_shows_that_presets_values_and_placement(command, capsys):
    shown = help_of([command, "--preset", "cpu"], capsys)
    for name, (kind, default) in parameters_of(recipe=load_recipe("cpu"), on_gpu=False).items():
        if not (command == "run" and name in (*CLUSTER_ONLY, "tracking_uri")):
            assert f"{name}={default!r} ({kind.__name__})" in shown, name
    assert "defaults: cpu's" in shown
    if command != "run":  # where the train task runs: the cpu preset's CPU node
        flat = " ".join(shown.split())
        assert "(default: cpu)" in flat and "(default: 8Gi)" in flat


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nodes", "0"], "expected 1 to 2147483647 training nodes, found 0"),
        (["--nodes", "1000000000000"], "training nodes, found 1000000000000"),
        (["--kfp-backend", "99.x"], "expected a KFP backend version such as 2.5, found '99.x'"),
        (["--kfp-backend", "99.0"], "KFP backend 99.0 is newer than the newest"),
        (["--kfp-backend", "2.5.0.1"], "expected a KFP backend version such as 2.5"),
        (["--trainer-runtime", "../x\ny"], "expected the trainer runtime as a ClusterTraining"),
        (["--memory", "1Ki"], "memory as a quantity of 1Mi or more"),
        (["--memory", "99999999999999999999E"], "memory as a quantity of at most 8Ei"),
        (["--image", ""], "expected the image as an image reference, found ''"),
        (["--node-selector", "=x"], "node selector KEY=VALUE"),
    ],
)
def test_compile_refuses_what_kubernetes_would_with_one_line(argv, message, tmp_path):
    with pytest.raises(SystemExit) as stopped:
        pipeline_main(["compile", "--output", str(tmp_path / "p.yaml"), *argv])
    assert str(stopped.value).startswith("error: ") and message in str(stopped.value)
    assert not (tmp_path / "p.yaml").exists()


def test_compile_into_a_folder_is_one_line(tmp_path):
    (tmp_path / "p.yaml").mkdir()
    with pytest.raises(SystemExit, match="^error: .*p.yaml"):
        pipeline_main(["compile", "--output", str(tmp_path / "p.yaml")])


def test_a_local_run_that_asks_to_deploy_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(SystemExit, match="deploy=true needs KServe on a cluster"):
        pipeline_main(["run", "--local", "--workdir", str(tmp_path / "w"), "deploy=true"])
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize(
    ("command", "where"),
    [
        ("run", "on this machine with kfp.local"),
        ("sweep", "on this machine"),
        ("compile", "runs nothing"),
        ("submit", "it runs there, not here"),
    ],
)
def test_each_commands_help_says_where_it_runs(command, where, capsys):
    assert where in " ".join(help_of([command], capsys).split())


@pytest.mark.parametrize(("command", "there"), [("run", "submit"), ("sweep", "submit --sweep")])
def test_a_run_here_says_so_with_local_and_the_cluster_way_without(command, there, tmp_path):
    with pytest.raises(SystemExit) as refused:
        pipeline_main([command, "--workdir", str(tmp_path / "w"), "epochs=1"])
    assert str(refused.value) == (
        f"python -m pipeline {command} runs on this machine with kfp.local: add --local; "
        f"to run on a cluster: python -m pipeline {there}"
    )
    assert not (tmp_path / "w").exists()


def test_a_source_given_twice_is_refused(tmp_path):
    for name in ("a.zip", "b.zip"):
        (tmp_path / name).write_bytes(b"PK")
    with pytest.raises(SystemExit, match="expected the source once"):
        pipeline_main(
            ["run", "--local", "--source", str(tmp_path / "a.zip"), f"source={tmp_path}/b.zip"]
        )


def test_help_texts_say_what_each_flag_does(capsys):
    from components import train

    with pytest.raises(SystemExit):
        train.main(["--help"])
    flags = " ".join(capsys.readouterr().out.split())
    assert "--no-amp turn off: bf16 autocast in training" in flags
    compile_help = " ".join(help_of(["compile"], capsys).split())
    assert "compile takes none: give them when a run starts" in compile_help
    run_help = " ".join(help_of(["run"], capsys).split())
    assert "run on this machine with kfp's local runner" in run_help


@pytest.mark.parametrize("command", list(CLUSTER_USAGE))
def test_a_bad_flag_value_to_compile_or_submit_gets_a_short_usage(command, capsys):
    with pytest.raises(SystemExit):
        pipeline_main([command, "--nodes", "many"])
    said = capsys.readouterr().err.splitlines()
    assert said[0] == f"usage: {PROG} {command} {CLUSTER_USAGE[command]}"
    assert len(said) == 2 and "--nodes: invalid int value: 'many'" in said[1]


def test_compiles_help_lists_gpus_only_for_a_recipe_on_a_gpu_node(capsys):
    assert "  gpus=1 (int)" in help_of(["compile"], capsys)  # accurate: a GPU node
    assert "  gpus=" not in help_of(["compile", "--preset", "cpu"], capsys)
