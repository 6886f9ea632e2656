"""Starting runs on a KFP API: the real kfp CLI and `python -m pipeline submit`, on a stand-in."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from pipeline.__main__ import main as pipeline_main
from tests.support.kfp_api import FakeKfpApi
from tests.support.processes import HANG_SECONDS


def test_kfp_run_submit_sends_the_spec_and_parameters_intact(compiled):
    path, _, spec, _ = compiled
    kfp_cli = shutil.which("kfp") or pytest.fail("the kfp CLI is not on PATH")
    with FakeKfpApi() as api:
        done = subprocess.run(
            [
                kfp_cli,
                "--endpoint",
                api.endpoint,
                "run",
                "submit",
                "-e",
                "dogs-vs-cats",
                "-f",
                str(path),
                "epochs=10",
                "model=bn_cnn",
            ],
            capture_output=True,
            text=True,
            timeout=HANG_SECONDS,
        )
        assert done.returncode == 0, done.stderr
        assert api.unknown == []
        (run,) = api.runs.values()
    assert run["runtime_config"]["parameters"] == {"epochs": 10, "model": "bn_cnn"}
    assert run["pipeline_spec"]["pipeline_spec"] == spec
    assert run["experiment_id"] == "exp-1" and "run-1" in done.stdout


HOSTILE = 'experiment=say "hi" \\t\n"alias": "champion", ü'


def test_python_submit_converts_parameter_types(capsys):
    with FakeKfpApi() as api:
        pipeline_main(
            ["submit", "--host", api.endpoint, "epochs=3", "lr=0.01", "channels=3", HOSTILE]
        )
        (run,) = api.runs.values()
    assert run["runtime_config"]["parameters"] == {
        "epochs": 3,
        "lr": 0.01,
        "channels": 3,
        "experiment": HOSTILE.removeprefix("experiment="),  # as it was typed
    }
    out = capsys.readouterr().out
    assert f"submitted run run-1: {api.endpoint}/#/runs/details/run-1" in out
    assert run["service_account"] == "dogs-vs-cats-pipeline"  # what manifests/pipeline makes


def test_an_unreachable_kfp_api_is_one_line_that_says_what_was_tried():
    from tests.support.servers import free_port

    host = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(SystemExit) as stopped:
        pipeline_main(["submit", "--host", host, "epochs=3"])
    message = str(stopped.value)
    assert message.startswith(f"cannot reach the Kubeflow Pipelines API at {host}")
    assert "ConnectionError" in message and "\n" not in message
    assert "use --host http://localhost:8888" in message  # the README's port-forward


@pytest.fixture
def precompiled(compiled, monkeypatch):
    """The module's compiled spec in place of compiling again: these tests are about the
    API conversation (test_python_submit_converts_parameter_types compiles for real)."""

    def copy_spec(output, target, sweep, tune, preset):
        shutil.copyfile(compiled[0], output)
        return output

    monkeypatch.setattr("pipeline.spec.compile_pipeline", copy_spec)


def test_a_profile_run_goes_to_its_namespace_with_the_token_name_and_experiment(
    capsys, monkeypatch, precompiled
):
    monkeypatch.setenv("KF_PIPELINES_TOKEN", "secret-token")
    with FakeKfpApi(token="secret-token", namespaces={"team-a"}) as api:
        flags = ["--namespace", "team-a", "--run-name", "first try", "--service-account", ""]
        pipeline_main(["submit", "--host", api.endpoint, *flags, "epochs=3"])
        (experiment,) = api.experiments.values()
        (run,) = api.runs.values()
        assert api.unknown == []
    assert experiment["namespace"] == "team-a" and experiment["display_name"] == "dogs-vs-cats"
    assert run["display_name"] == "first try"
    assert run["experiment_id"] == experiment["experiment_id"]
    assert not run.get("service_account")  # '': the namespace's default-editor
    assert "secret-token" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("version", "plugins_input"),
    [("2.17.0", {"mlflow": {"experiment_name": "team-exp"}}), ("2.15.2", None)],
)
def test_a_kfp_that_tracks_runs_in_mlflow_is_told_the_pipelines_experiment(
    version, plugins_input, precompiled
):
    """KFP >= 2.17 puts its own MLflow runs in the experiment named at run creation (else
    ``Default``): the one the steps log into. An older API is sent no such field."""
    with FakeKfpApi(version=version) as api:
        pipeline_main(["submit", "--host", api.endpoint, "experiment=team-exp"])
        (run,) = api.runs.values()
    assert run.get("plugins_input") == plugins_input


@pytest.mark.parametrize(
    ("api_settings", "flags", "expected"),
    [
        (
            {"token": "t", "namespaces": {"team-a"}},
            ["--namespace", "team-a"],
            "refused the request: 401 Unauthorized: ",
        ),
        (
            {"token": "t", "namespaces": {"team-a"}},
            ["--namespace", "team-b", "--token", "t"],
            "(namespace team-b) refused the request: 403 Forbidden: ",
        ),
        ({"namespaces": {"team-a"}}, [], "is multi-user: give --namespace"),
        ({}, ["--experiment", "dogs-vs-cat"], "no experiment named 'dogs-vs-cat': create it"),
    ],
    ids=["no token", "not a profile of this identity", "no namespace", "no such experiment"],
)
def test_each_refusal_is_one_line_that_says_what_to_do(
    api_settings, flags, expected, monkeypatch, precompiled
):
    monkeypatch.delenv("KF_PIPELINES_TOKEN", raising=False)
    with FakeKfpApi(**api_settings) as api:
        with pytest.raises(SystemExit) as stopped:
            pipeline_main(["submit", "--host", api.endpoint, *flags, "epochs=3"])
        assert api.runs == {}
    message = str(stopped.value)
    assert expected in message and "\n" not in message, message


def test_an_api_that_answers_its_health_check_then_nothing_ends_within_the_timeout(
    precompiled, monkeypatch
):
    """The deadline reaches the wait for kfp's client and ends it: measured from the wait's
    start (compiling before it takes what the machine takes), and bounded only against a
    hang."""
    import time

    from pipeline import submit

    waits = []

    def timed_within(seconds, host, work):
        started = time.monotonic()
        try:
            return real_within(seconds, host, work)
        finally:
            waits.append((seconds, time.monotonic() - started))

    real_within = submit.within
    monkeypatch.setattr(submit, "within", timed_within)
    with FakeKfpApi() as api:
        api.hang_after_health = True
        with pytest.raises(SystemExit) as stopped:
            pipeline_main(
                ["submit", "--host", api.endpoint, "--timeout-seconds", "1.5", "epochs=3"]
            )
        assert api.seen[0] == "/healthz" and len(api.seen) > 1  # it got past the check
    assert str(stopped.value) == (
        f"the Kubeflow Pipelines API at {api.endpoint} did not answer within 1.5 s "
        "(--timeout-seconds); nothing is known to have started"
    )
    ((deadline, waited),) = waits
    assert deadline == 1.5 and 1.5 <= waited < 60  # the deadline ended it, not the hang (60 s)


def test_a_live_host_that_is_not_a_kfp_api_is_one_line_at_once(tmp_path, capsys):
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    (tmp_path / "index.html").write_text("<html>a login page</html>")
    handler = lambda *a: SimpleHTTPRequestHandler(*a, directory=str(tmp_path))  # noqa: E731
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as web:
        Thread(target=web.serve_forever, daemon=True).start()
        host = f"http://127.0.0.1:{web.server_port}"
        with pytest.raises(SystemExit) as stopped:
            pipeline_main(["submit", "--host", host, "epochs=3"])
        web.shutdown()
    assert str(stopped.value).startswith(f"{host} answered {host}/apis/v2beta1/healthz with 404")
    assert "not as the Kubeflow Pipelines API does" in str(stopped.value)
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("password", ["PW x", "PW\tx", "PW#x"])
def test_a_tracking_uri_with_a_password_is_refused_without_showing_it(password, capsys):
    with FakeKfpApi() as api:
        uri = f"tracking_uri=http://alice:{password}@mlflow.example:5000"
        with pytest.raises(SystemExit) as stopped:
            pipeline_main(["submit", "--host", api.endpoint, uri])
        assert api.seen == []
    said = str(stopped.value) + capsys.readouterr().err
    assert "PW" not in said and "http://***@mlflow.example:5000" in said


def test_a_password_in_the_host_is_refused_and_never_shown(capsys):
    with FakeKfpApi() as api:
        host = api.endpoint.replace("http://", "http://bob:p@ss-w0rd@")
        with pytest.raises(SystemExit) as stopped:
            pipeline_main(["submit", "--host", host, "epochs=3"])
        assert api.seen == []  # nothing sent
    said = str(stopped.value) + capsys.readouterr().err
    assert "ss-w0rd" not in said and "http://***@127.0.0.1" in said


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--namespace", "Team_A"], "expected --namespace as a Kubernetes namespace"),
        (["--namespace", "team-a/../x"], "expected --namespace as a Kubernetes namespace"),
        (["--service-account", "pipeline runner"], "expected --service-account as a Kub"),
        (["--run-name", "a\nb"], r"expected --run-name as one line"),
        (["--timeout-seconds", "nan"], "expected --timeout-seconds above 0"),
    ],
)
def test_names_kubernetes_would_refuse_are_refused_before_any_request(flags, expected):
    with FakeKfpApi() as api:
        with pytest.raises(SystemExit, match=expected):
            pipeline_main(["submit", "--host", api.endpoint, *flags, "epochs=3"])
        assert api.seen == []


def test_text_from_the_api_is_escaped_in_the_one_line(precompiled):
    with FakeKfpApi() as api:
        api.refuse_with = (403, "denied\nsubmitted run run-9: ok\x1b[2J")
        with pytest.raises(SystemExit) as stopped:
            pipeline_main(["submit", "--host", api.endpoint, "epochs=3"])
    message = str(stopped.value)
    assert "\n" not in message and "\x1b" not in message and "\\x1b[2J" in message


def test_a_run_id_from_the_api_is_printed_escaped_and_an_echoed_token_masked(
    precompiled, monkeypatch, capsys
):
    with FakeKfpApi() as api:
        api.next_run_id = "run-1\nsubmitted run run-9: ok\x1b[2J"
        pipeline_main(["submit", "--host", api.endpoint, "epochs=3"])
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if line.startswith("submitted run")]
    assert "\x1b" not in out and line.startswith("submitted run run-1\\nsubmitted run run-9")
    monkeypatch.setenv("KF_PIPELINES_TOKEN", "tok-3cho3d")
    with FakeKfpApi() as api:
        api.refuse_with = (401, "invalid bearer token tok-3cho3d")
        with pytest.raises(SystemExit) as stopped:
            pipeline_main(["submit", "--host", api.endpoint, "epochs=3"])
    assert "tok-3cho3d" not in str(stopped.value) and "invalid bearer token ***" in str(
        stopped.value
    )


def test_submit_tune_starts_the_search_pipeline_as_the_readme_types_it(monkeypatch, capsys):
    """README: ``python -m pipeline submit --tune --host … --namespace team-a trials=16``."""
    monkeypatch.setenv("KF_PIPELINES_TOKEN", "secret-token")
    with FakeKfpApi(token="secret-token", namespaces={"team-a"}) as api:
        pipeline_main(
            ["submit", "--tune", "--host", api.endpoint, "--namespace", "team-a", "trials=16"]
        )
        (experiment,) = api.experiments.values()
        (run,) = api.runs.values()
        assert api.unknown == []
    assert experiment["namespace"] == "team-a"
    assert run["runtime_config"]["parameters"] == {"trials": 16}
    spec = run["pipeline_spec"]["pipeline_spec"]
    assert spec["pipelineInfo"]["name"] == "dogs-vs-cats-tune"
    assert "exec-tune-op" in spec["deploymentSpec"]["executors"]
    assert spec["root"]["inputDefinitions"]["parameters"]["trials"]["defaultValue"] == 12
    assert "submitted run run-1" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        (["trials=-1"], "expected trials from 1 to 2**31 - 1, found -1"),
        (["trials=0"], "expected trials from 1 to 2**31 - 1, found 0"),
        (["trials=4", "parallel_trials=99"], "expected 1 <= parallel trials <= trials"),
        (["algorithm=grid"], "unknown algorithm 'grid'"),
        (["search_seed=-1"], "expected a search seed from 0 to 2**31 - 1"),
        (
            ["min_trials_required=16", "trials=16"],
            "expected min_trials_required (--min-trials-required) below trials (16)",
        ),
        (["start_step=1000"], "expected start_step (--start-step) at most epochs (10)"),
    ],
)
def test_submit_tune_checks_the_search_settings_before_any_request(pairs, expected):
    """What ``tune --output`` refuses, ``submit --tune`` refuses too, before the API."""
    with FakeKfpApi() as api:
        with pytest.raises(SystemExit) as stopped:
            pipeline_main(["submit", "--tune", "--host", api.endpoint, *pairs])
        assert api.seen == [] and api.runs == {}
    assert str(stopped.value).startswith("refused before the run starts: ")
    assert expected in str(stopped.value)


def test_more_than_one_gpu_on_a_cpu_preset_is_refused_before_any_request():
    """A CPU preset's train task asks for no GPU: gpus=2 would be ignored, so it is refused."""
    with FakeKfpApi() as api:
        with pytest.raises(SystemExit) as stopped:
            pipeline_main(["submit", "--host", api.endpoint, "--preset", "cpu", "gpus=2"])
        assert api.seen == [] and api.runs == {}
    assert "expected no gpus= on CPU hardware" in str(stopped.value)
    assert "--hardware gpu" in str(stopped.value)
