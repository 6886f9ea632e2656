"""``python -m pipeline tune``: the Experiment a user applies, and its flags."""

import shlex
import subprocess
import sys
from typing import NamedTuple

import pytest
import yaml

from components.recipes.presets import PRESETS
from components.tuning import webhook
from components.tuning.search_space import searched
from pipeline.__main__ import main as pipeline_main
from pipeline.target import GPU_IMAGE, IMAGE
from pipeline.tune import _enqueued
from tests.support.processes import HANG_SECONDS
from tests.support.readme import readme_command


class Done(NamedTuple):
    """How ``python -m pipeline tune ARGS`` ended, run in this process: its exit status,
    what it printed, and what went to stderr (its last line, the exit message, included)."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def tune(capsys):
    """``python -m pipeline tune`` in this process: the command's own code path, without
    a new interpreter's imports (the README's command runs as typed in a subprocess)."""

    def run(*args: str) -> Done:
        code, said = 0, ""
        try:
            pipeline_main(["tune", *map(str, args)])
        except SystemExit as end:
            code = end.code if isinstance(end.code, int) else 1
            said = "" if isinstance(end.code, int) or end.code is None else f"{end.code}\n"
        out, err = capsys.readouterr()
        return Done(code, out, err + said)

    return run


def _container(spec: dict) -> dict:
    return spec["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]["containers"][0]


def test_the_readmes_tune_command_writes_an_experiment_katib_admits(tmp_path):
    """The README's cluster search, as typed, in a clone of its own (``scratch/`` not there
    yet): the Experiment, and the Job that stages the arrays its trials read."""
    command = readme_command("Compare recipes, search them", "python -m pipeline tune --output")
    done = subprocess.run(
        [sys.executable, *shlex.split(command)[1:]],
        capture_output=True, text=True, timeout=HANG_SECONDS, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = yaml.safe_load((tmp_path / "scratch/experiment.yaml").read_text())
    assert webhook.validate(written) == []
    assert written["spec"]["maxTrialCount"] == 16 and written["metadata"]["namespace"] == "team-a"
    staging = yaml.safe_load((tmp_path / "scratch/data-job.yaml").read_text())
    staged = [
        arg for step in staging["spec"]["template"]["spec"]["initContainers"]
        + staging["spec"]["template"]["spec"]["containers"] for arg in step["args"]
    ]  # fmt: skip
    assert "--output=/shared/dogs-vs-cats-tune/arrays" in staged  # where the trials read
    assert "--data=/shared/dogs-vs-cats-tune/arrays" in _container(written["spec"])["args"]
    assert "kubectl apply -f scratch/data-job.yaml" in done.stdout
    container = _container(written["spec"])
    assert "--epochs=30" in container["args"] and "--mirror-average" in container["args"]
    # the cpu preset's recipe trains on CPU nodes: the CPU image, and no GPU asked for
    assert container["image"] == IMAGE
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    pod = written["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]
    assert "tolerations" not in pod and "nodeSelector" not in pod
    assert "on CPU nodes" in done.stdout
    assert done.stdout.index("data-job.yaml") < done.stdout.index("apply -f scratch/experiment")
    # the preset scores val after its last epoch only; the trials score it every 5th, so
    # that medianstop (from the 3rd score) can stop one before its end
    assert "--validate-every=5" in container["args"]
    assert "score val every 5 epochs (the recipe: every 30)" in done.stdout


def test_hardware_gpu_puts_a_cpu_presets_trials_back_on_gpu_nodes(tmp_path, tune):
    output = tmp_path / "experiment.yaml"
    done = tune("-o", output, "--preset", "cpu", "--trials", "2", "--hardware", "gpu")
    assert done.returncode == 0, done.stderr
    written = yaml.safe_load(output.read_text())
    assert webhook.validate(written) == []
    container = _container(written["spec"])
    assert container["image"] == GPU_IMAGE
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    pod = written["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert "on GPU nodes" in done.stdout


def test_a_searched_name_given_one_value_is_fixed_in_the_experiment(tmp_path, tune):
    output = tmp_path / "experiment.yaml"
    done = tune("--output", output, "--preset", "tutorial", "--trials", "6",
                "--namespace", "team-a", "lr=0.004")  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = yaml.safe_load(output.read_text())
    assert webhook.validate(written) == []
    assert written["spec"]["maxTrialCount"] == 6 and written["metadata"]["namespace"] == "team-a"
    assert "lr" not in [p["name"] for p in written["spec"]["parameters"]]
    args = _container(written["spec"])["args"]
    epochs = PRESETS["tutorial"]["epochs"]
    assert "--lr=0.004" in args and f"--epochs={epochs}" in args  # fixed; the preset's epochs
    assert "kubectl apply -f" in done.stdout
    assert "nothing here staged: give --data-job FILE" in done.stdout  # where the arrays come from


def test_fewer_trials_than_the_default_parallelism_still_write_an_experiment(tmp_path, tune):
    output = tmp_path / "experiment.yaml"
    done = tune("-o", output, "--trials", "2")
    assert done.returncode == 0, done.stderr
    spec = yaml.safe_load(output.read_text())["spec"]
    assert (spec["parallelTrialCount"], spec["maxFailedTrialCount"]) == (2, 2)


def test_an_enqueued_trial_is_typed_and_checked():
    space = searched({"weight_decay": 0.05}, "bn_cnn")
    assert _enqueued("lr=0.004,batch_size=128", space) == {"lr": 0.004, "batch_size": 128}
    for pair in ("learning_rate=0.1", "weight_decay=0.1", "output=/tmp/x"):  # fixed or not one
        with pytest.raises(SystemExit, match="searched fields"):
            _enqueued(pair, space)
    for pair in ("lr=5", "lr=-1", "batch_size=100", "label_smoothing=0.5"):  # outside it
        with pytest.raises(SystemExit, match="in the searched space"):
            _enqueued(pair, space)


# RFC 3986 allows '; a space or a # is refused by no one, so it must be hidden whole
@pytest.mark.parametrize("password", ["s3cret-pw", "s3cret-pw'x", "s3cret pw", "s3cret#pw"])
def test_a_password_in_the_tracking_uri_stays_out_of_the_experiment(
    tmp_path, tune, monkeypatch, password
):
    """As deploy and submit keep it out: the trials read it from the MLflow secret."""
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(name, raising=False)  # what the command may set, undone after
    output = tmp_path / "experiment.yaml"
    done = tune("-o", output, "--trials", "2", "--tracking-uri",
                f"http://team-user:{password}@mlflow.mlflow.svc.cluster.local:5000")  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = output.read_text()
    assert "s3cret" not in written + done.stdout + done.stderr
    assert "team-user" not in written and "pw" not in written
    env = {e["name"]: e for e in _container(yaml.safe_load(written)["spec"])["env"]}
    assert env["MLFLOW_TRACKING_URI"]["value"] == "http://mlflow.mlflow.svc.cluster.local:5000"
    assert env["MLFLOW_TRACKING_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == (
        "MLFLOW_TRACKING_PASSWORD"
    )
    assert "read them from the secret dogs-vs-cats-mlflow" in done.stdout


@pytest.mark.parametrize(
    "uri",
    [
        "http://mlflow:5000\nX-Forged: 1",
        "http:// a",
        "http://m/${trialParameters.lr}",
        "http://mlflow:5000/?password=s3cret-pw",  # a secret in the query: never written
        "http://mlflow:5000/?%70assword=s3cret-pw",  # its key percent-encoded
        "http://mlflow:5000/#password=s3cret-pw",  # in the fragment
        "http://mlflow:5000/?jwt=s3cret-pw",  # under a key no list names
        "http://mlflow:5000/;jwt=s3cret-pw",  # a path parameter
    ],
)
def test_a_tracking_uri_no_trial_could_use_is_refused_and_nothing_written(uri, tmp_path, tune):
    output = tmp_path / "experiment.yaml"
    done = tune("-o", output, "--tracking-uri", uri)
    assert done.returncode != 0 and not output.exists()
    assert "expected the tracking URI as one URI such as http://HOST:PORT" in done.stderr
    assert "s3cret-pw" not in done.stderr


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["experiment=${trialParameters.lr}"], "expected no ${ in a fixed setting"),
        (["--cpu-image", "img:${trialParameters.x}"], "expected no ${ in the trials' image"),
        (["--parent-run-id", "../x\n"], "expected --parent-run-id as an MLflow run id"),
        (["--shared-pvc", "Bad PVC"], "expected --shared-pvc as a claim's name"),
        (["--shm-size", "16Gi", "--memory", "12Gi"], "expected the shm size at most the memory"),
        (
            ["--start-step", "40", "epochs=10"],
            "expected start_step (--start-step) at most epochs (10)",
        ),
        (
            ["--trials", "4", "--min-trials-required", "4"],
            "expected min_trials_required (--min-trials-required) below",
        ),
        (["--trials", "1000000000000"], "expected trials from 1 to 2**31 - 1"),  # Katib's int32
        (["tracking_uri=http://mlflow:5000"], "expected the tracking server as --tracking-uri"),
    ],
)
def test_search_settings_no_trial_could_take_are_refused_and_nothing_written(
    flags, expected, tmp_path, tune
):
    output = tmp_path / "experiment.yaml"
    done = tune("-o", output, *flags)
    assert done.returncode != 0 and not output.exists(), done.stdout
    assert expected in done.stderr


def test_an_existing_file_or_link_is_replaced_only_when_told_and_never_written_through(
    tmp_path, tune
):
    target, link = tmp_path / "precious.txt", tmp_path / "experiment.yaml"
    target.write_text("not an Experiment")
    link.symlink_to(target)
    refused = tune("-o", link, "--trials", "2")
    assert refused.returncode != 0 and "exists: give --force to replace it" in refused.stderr
    forced = tune("-o", link, "--trials", "2", "--force")
    assert forced.returncode == 0, forced.stderr
    assert target.read_text() == "not an Experiment"  # the link replaced, not followed
    assert not link.is_symlink() and yaml.safe_load(link.read_text())["kind"] == "Experiment"


def test_data_job_writes_the_staging_job_beside_the_experiment_and_says_the_order(tmp_path, tune):
    experiment, data = tmp_path / "experiment.yaml", tmp_path / "data.yaml"
    data.write_text("mine")
    argv = ["-o", experiment, "--data-job", data, "--preset", "cpu", "--trials", "2"]
    argv += ["--namespace", "team-a", "--source", "s3://pets/archive.zip"]
    refused = tune(*argv)
    assert refused.returncode != 0 and f"{data} exists: give --force" in refused.stderr
    assert data.read_text() == "mine" and not experiment.exists()  # nothing written
    done = tune(*argv, "--force")
    assert done.returncode == 0, done.stderr
    job = yaml.safe_load(data.read_text())
    assert job["kind"] == "Job" and job["metadata"]["name"] == "dogs-vs-cats-tune-data"
    (download,) = job["spec"]["template"]["spec"]["initContainers"]
    assert "--source=s3://pets/archive.zip" in download["args"]
    assert download["image"] == IMAGE  # the CPU image, whatever the trials run on
    order = [f"kubectl apply -f {data}", "kubectl -n team-a wait --for=condition=complete "
             "job/dogs-vs-cats-tune-data", f"kubectl apply -f {experiment}"]  # fmt: skip
    shown = [next(i for i, line in enumerate(done.stdout.splitlines()) if o in line) for o in order]
    assert shown == sorted(shown)
