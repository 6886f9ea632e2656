"""The tracking store: MLflow as the cluster uses it (a real tracking server process over
HTTP on PostgreSQL, artifacts proxied into SeaweedFS, the store Kubeflow Pipelines
installs), and the SQLite store a laptop uses."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import mlflow
import psycopg
import pytest
import requests
import torch
from mlflow.tracking import MlflowClient

from components.evaluation.config import EvaluateConfig
from components.evaluation.report import evaluate
from components.tracking.store import TrackingUnavailableError
from components.tracking.ui import experiment_url
from components.training import session
from components.training.config import TrainConfig
from tests.conftest import REPO
from tests.support.helpers import train_cli
from tests.support.processes import HANG_SECONDS
from tests.support.servers import (
    S3_KEYS,
    PostgresServer,
    deployment_container,
    free_port,
)
from tests.support.tracking_stack import BUCKET

pytestmark = pytest.mark.integration
ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture
def server(tracking_server):
    """The server, and this process pointed at it with no S3 keys of its own."""
    return tracking_server


def bucket_keys(s3) -> list[str]:
    return s3.keys(BUCKET)


def test_train_and_evaluate_over_http_with_artifacts_in_s3(small_arrays, tmp_path, server, s3):
    result = session.train(
        TrainConfig(data=str(small_arrays), output=str(tmp_path / "m"), epochs=2)
    )
    evaluate(
        EvaluateConfig(
            model_dir=str(tmp_path / "m"), data=str(small_arrays), output=str(tmp_path / "eval")
        )
    )
    client = MlflowClient(server.url)
    run = client.get_run(result.run_id)
    assert run.data.params["model"] == "tutorial_cnn"
    assert [m.step for m in client.get_metric_history(result.run_id, "val_loss")] == [1, 2]
    assert "test_accuracy" in run.data.metrics
    keys = bucket_keys(s3)  # this run's artifacts, and its logged model's
    model_id = result.model_uri.removeprefix("models:/")
    (checkpoint,) = client.search_logged_models(
        [run.info.experiment_id], filter_string="name = 'checkpoint' AND tags.epoch = '2'"
    )
    assert any(checkpoint.model_id in k and k.endswith("/checkpoint.pt") for k in keys)
    assert any(model_id in k and k.endswith("MLmodel") for k in keys)
    assert any(
        result.run_id in k and k.endswith("evaluation/test/confusion_matrix.png") for k in keys
    )
    loaded = mlflow.pytorch.load_model(result.model_uri)  # through the server's proxy
    assert loaded(torch.full((3, 1, 40, 40), 100.0)).shape == (3, 2)
    # what the run saw, read back from the server: each split, and the metric's links
    seen = {
        (d.dataset.name, {t.key: t.value for t in d.tags}["mlflow.data.context"])
        for d in run.inputs.dataset_inputs
    }
    assert seen == {
        ("petimages-archive", "source"),  # the download step's record, through preprocess
        ("train-split", "train"),
        ("val-split", "validation"),
        ("test-split", "test"),
    }
    (archive,) = [d.dataset for d in run.inputs.dataset_inputs if d.dataset.name.startswith("pet")]
    recorded = json.loads((small_arrays / "meta.json").read_text())["source"]
    assert archive.digest == recorded["sha256"][:8]
    assert json.loads(archive.source)["uri"].endswith("petimages-sample.zip")
    (linked,) = [m for m in client.get_logged_model(model_id).metrics if m.key == "test_accuracy"]
    assert linked.model_id == model_id and linked.dataset_name == "test-split"
    assert linked.value == run.data.metrics["test_accuracy"]


def test_the_server_keeps_its_runs_in_postgresql_with_the_deployments_flags(
    small_arrays, tmp_path, server, postgres
):
    if postgres is None:
        pytest.skip(PostgresServer.missing())
    assert "postgresql+psycopg://mlflow:" in " ".join(server.command)
    result = session.train(
        TrainConfig(data=str(small_arrays), output=str(tmp_path / "m"), dry_run=True)
    )
    with psycopg.connect(postgres.conninfo(postgres.DATABASE)) as db:
        stored = db.execute("SELECT status FROM runs WHERE run_uuid = %s", (result.run_id,))
        assert stored.fetchall() == [("FINISHED",)]


def test_in_cluster_host_name_is_allowed_and_a_foreign_one_refused(server):
    import requests

    def search_as(host: str) -> requests.Response:
        # an API path: MLflow checks the Host header there (never on /health)
        return requests.post(
            f"{server.url}/api/2.0/mlflow/experiments/search",
            json={"max_results": 1},
            headers={"Host": host},
            timeout=10,
        )

    assert search_as("mlflow.mlflow.svc.cluster.local:5000").status_code == 200
    assert search_as("attacker.example:5000").status_code == 403


def test_unreachable_server_fails_fast_before_training(small_arrays, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(TrackingUnavailableError, match="is unreachable"):  # not
        session.train(TrainConfig(data=str(small_arrays), output=str(tmp_path / "m")))  # retried
    assert not (tmp_path / "m").exists()


@pytest.mark.slow
def test_a_brief_outage_during_training_is_survived(small_arrays, tmp_path, server):
    env = {k: v for k, v in os.environ.items() if k not in S3_KEYS}
    output = tmp_path / "m"
    trainer = subprocess.Popen(
        train_cli(
            [
                "--data",
                str(small_arrays),
                "--output",
                str(output),
                "--epochs",
                "4",
                "--model",
                "compact_cnn",
                "--batch-size",
                "64",
            ]
        ),
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + HANG_SECONDS
    while not (output / "checkpoint.pt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    server.stop()  # the tracking server goes away mid-training ...
    time.sleep(4)
    server.start()  # ... and comes back on the same port
    _, stderr = trainer.communicate(timeout=HANG_SECONDS)
    assert trainer.returncode == 0, stderr[-4000:]
    run_id = (output / "mlflow_run_id").read_text()
    history = MlflowClient(server.url).get_metric_history(run_id, "val_accuracy")
    assert sorted({m.step for m in history}) == [1, 2, 3, 4]


SECRET = "pw-n0t-for-logs"
PLANTED_ENV = {"AWS_ACCESS_KEY_ID": "planted-id-k3y", "AWS_SECRET_ACCESS_KEY": "planted-s3cret"}
# MLflow samples system/ metrics every 10 s, so a short child may have none, or fewer
# rows than its sibling; and the compare view renders only its first 17 metric rows
NO_SYSTEM_METRICS = {"MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING": "false"}


def leaked(text: str) -> list[str]:
    return [s for s in (SECRET, *PLANTED_ENV.values()) if s in text]


@pytest.mark.slow
@pytest.mark.integration
def test_a_sweep_of_two_lands_under_one_parent_and_compares_side_by_side(
    small_sample_zip, tmp_path, server
):
    # the team's server behind a user and password, given in the URI: used, never shown
    uri = server.url.replace("http://", f"http://team-user:{SECRET}@")
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "sweep", "--local", "--source", str(small_sample_zip)]
        + ["--workdir", str(tmp_path / "w"), "epochs=1", "image_size=40", "min_accuracy=0"]
        + ["lr=0.001,0.003"],
        cwd=tmp_path,
        env={**os.environ, **PLANTED_ENV, **NO_SYSTEM_METRICS, "MLFLOW_TRACKING_URI": uri},
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    assert leaked(done.stdout + done.stderr) == []
    for path in (tmp_path / "w").rglob("*"):  # the log, every task's executor_output.json
        if path.is_file() and path.suffix not in (".npy", ".pt", ".db"):
            assert leaked(path.read_bytes().decode(errors="replace")) == [], path
    client = MlflowClient(server.url)
    for lr in ("0.001", "0.003"):  # each child's task lines name its combination
        for task in ("train-op", "evaluate-op"):
            pattern = rf"^  {task} +success in [\d.]+ s \(lr={lr}\)$"
            assert re.search(pattern, done.stdout, re.MULTILINE), (task, lr)
    parent = re.search(r"^sweep run: +(\w+)", done.stdout, re.MULTILINE).group(1)
    best = re.search(r"^best run: +(\w+)", done.stdout, re.MULTILINE).group(1)
    url = re.search(r"^compare: +(\S+)$", done.stdout, re.MULTILINE).group(1)
    assert url.startswith(f"{server.url}/#/compare-runs?")
    runs = json.loads(urllib.parse.parse_qs(url.split("?", 1)[1])["runs"][0])
    children = [client.get_run(run) for run in runs]
    # two children under one parent, each with the same param and metric names
    assert [child.data.tags["mlflow.parentRunId"] for child in children] == [parent, parent]
    assert sorted(child.data.params["lr"] for child in children) == ["0.001", "0.003"]
    assert children[0].data.params.keys() == children[1].data.params.keys()
    assert children[0].data.metrics.keys() == children[1].data.metrics.keys()
    assert {"val_accuracy", "test_accuracy"} <= children[0].data.metrics.keys()
    assert not [name for name in children[0].data.metrics if name.startswith("system/")]
    # the best by validation accuracy is marked, and it alone went through the gate
    val = {child.info.run_id: child.data.metrics["val_accuracy"] for child in children}
    assert val[best] == max(val.values())
    assert [c.info.run_id for c in children if c.data.tags.get("search.best")] == [best]
    assert client.get_run(parent).data.tags["search.best_run_id"] == best
    assert client.get_model_version_by_alias("dogs-vs-cats", "candidate").run_id == best
    gated = [
        c.info.run_id for c in children if "quality_gate" in client.get_run(c.info.run_id).data.tags
    ]
    assert gated == [best]

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("Chromium is not installed (.ci/run installs Debian's chromium)")
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "mlflow-compare-runs.png"
    # one page load: its DOM on stdout, its picture in the file
    dom = browse(
        chromium, tmp_path, "--window-size=1600,1400", "--dump-dom", f"--screenshot={shot}", url
    )
    page = visible_text(dom)
    # each child's own value, in its own column (the page rounds to 3 decimals)
    params, metrics = table(page, "Parameters"), table(page, "Metrics")
    assert params["lr"] == [child.data.params["lr"] for child in children]
    for name in ("val_accuracy", "val_loss", "test_accuracy", "test_roc_auc"):
        logged = [child.data.metrics[name] for child in children]
        shown = [float(value) for value in metrics[name]]
        assert shown == pytest.approx(logged, abs=6e-4), name
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one
    # the experiment's page, as the run prints it: its runs table, each run named by what
    # tells it apart (MLflow's UI shows an experiment as GenAI traces unless told)
    experiment = experiment_url(server.url, children[0].info.experiment_id)
    page = visible_text(
        browse(chromium, tmp_path, "--window-size=1600,1000", "--dump-dom", experiment)
    )
    assert any(text.startswith("Runs - Experiment") for text in page)  # not "Overview"
    assert "Run Name" in page and client.get_run(parent).info.run_name in page
    names = sorted(child.info.run_name for child in children)  # nested under the parent
    expected = [f"baseline petimages-small split0 seed0 lr={lr} " for lr in ("0.001", "0.003")]
    assert [name[: len(start)] for name, start in zip(names, expected, strict=True)] == expected


def visible_text(dom: str) -> list[str]:
    """The page's text nodes in document order."""
    pieces = (html.unescape(piece).strip() for piece in re.split(r"<[^>]+>", dom))
    return [piece for piece in pieces if piece]


def table(page: list[str], heading: str) -> dict[str, list[str]]:
    """A compare-view section as {row name: one value per run}.

    Parameters are listed row by row (name, then values); metrics list their names
    first, then the values row by row.
    """
    start = page.index(heading) + 2  # the heading, then "Show diff only"
    end = page.index("Artifacts" if heading == "Metrics" else "Metrics", start)
    cells = page[start:end]
    if heading == "Parameters":
        return {cells[i]: cells[i + 1 : i + 3] for i in range(0, len(cells), 3)}
    names = cells[: len(cells) // 3]
    values = cells[len(names) :]
    return {name: values[2 * i : 2 * i + 2] for i, name in enumerate(names)}


def browse(chromium: str, tmp_path, *args: str) -> str:
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'chromium'}",
            "--virtual-time-budget=20000",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_servers_idle_memory_fits_the_deployments_request(server):
    """Measured as the kernel charges the pod: shared pages once (PSS), all processes."""
    for _ in range(20):  # warm: the UI, the API and the artifact proxy each answered
        requests.get(f"{server.url}/", timeout=30).raise_for_status()
        MlflowClient(server.url).search_experiments()
    time.sleep(2)
    used = sum(proportional_set_size(pid) for pid in server.pids())
    request = kubernetes_quantity(deployment_container()["resources"]["requests"]["memory"])
    print(f"mlflow server idle: {len(server.pids())} processes, {used / 2**20:.0f} MiB PSS")
    assert used <= request, f"{used / 2**20:.0f} MiB used, {request / 2**20:.0f} MiB requested"


def proportional_set_size(pid: int) -> int:
    """A process's share of the memory it maps, in bytes (its ``Pss`` in smaps_rollup)."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    raise ValueError(f"no Pss line for process {pid}")


def kubernetes_quantity(value: str) -> int:
    """Bytes of a Kubernetes memory quantity such as ``512Mi`` or ``1G``."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "K": 10**3, "M": 10**6, "G": 10**9}
    for suffix, factor in units.items():
        if value.endswith(suffix):
            return int(float(value.removesuffix(suffix)) * factor)
    return int(value)


@pytest.mark.integration
def test_a_password_in_an_unreachable_tracking_uri_is_never_shown(small_arrays, tmp_path):
    """The refusal names the server, not its password (the sweep above trains, evaluates
    and registers through a URI with one, and shows it nowhere)."""
    unreachable = subprocess.run(
        [sys.executable, "-m", "components.train", "--data", str(small_arrays), "--output", "x"],
        cwd=tmp_path,
        env={**os.environ, **PLANTED_ENV, "MLFLOW_TRACKING_URI": f"http://u:{SECRET}@127.0.0.1:9"},
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert unreachable.returncode == 1 and "is unreachable" in unreachable.stderr
    assert "server at http://127.0.0.1:9 is unreachable" in unreachable.stderr
    assert leaked(unreachable.stdout + unreachable.stderr) == []


@pytest.mark.parametrize("secret_part", [f"?jwt={SECRET}", f";jwt={SECRET}"])
def test_a_secret_in_an_unreachable_tracking_uri_is_not_shown_by_the_gate(secret_part):
    """urllib3 names the request it could not send without its scheme: ``url: /?jwt=S``."""
    refused = subprocess.run(
        [sys.executable, "-m", "components.register", "--mlflow-run-id", "0123456789abcdef"]
        + ["--min-accuracy", "0.5"],
        env={**os.environ, "MLFLOW_TRACKING_URI": f"http://127.0.0.1:9/{secret_part}"},
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert refused.returncode == 1 and "127.0.0.1" in refused.stderr
    assert leaked(refused.stdout + refused.stderr) == []


@pytest.mark.parametrize(
    "uri",
    [
        f"http://team-user:{SECRET}@mlflow.example:5000",
        f"http://alice:{SECRET}'x@mlflow:5000",  # RFC 3986 allows ' in user info
        f"http://alice:{SECRET}'x@mlflow:5000/?a=1",
        f'http://alice:{SECRET}"x@mlflow:5000',
        f"http://alice:{SECRET}<x>@mlflow:5000",
        f"http://mlflow:5000/;jwt={SECRET}",  # a path parameter
    ],
)
def test_a_run_on_a_cluster_refuses_a_tracking_uri_holding_a_password(uri):
    refused = subprocess.run(
        [
            *(sys.executable, "-m", "pipeline", "submit", "--host", "http://127.0.0.1:9"),
            f"tracking_uri={uri}",
        ],
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert refused.returncode == 1 and "holds a password or a secret" in refused.stderr
    assert leaked(refused.stderr) == []


def test_a_sqlite_store_keeps_its_artifacts_beside_the_database_not_in_the_working_folder(
    small_arrays, tmp_path, monkeypatch
):
    store, elsewhere = tmp_path / "store", tmp_path / "elsewhere"
    store.mkdir()
    elsewhere.mkdir()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store / 'mlflow.db'}")
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    monkeypatch.chdir(elsewhere)  # where the user happens to be
    result = session.train(
        TrainConfig(data=str(small_arrays), output=str(tmp_path / "m"), dry_run=True)
    )
    assert list(elsewhere.iterdir()) == []  # no ./mlruns
    checkpoints = list((store / "mlartifacts").rglob("checkpoint.pt"))  # its checkpoint model's
    (model,) = MlflowClient().search_logged_models(
        [MlflowClient().get_run(result.run_id).info.experiment_id],
        filter_string="name = 'checkpoint'",
    )
    assert [model.model_id in str(path) for path in checkpoints] == [True]


def test_commands_started_at_once_on_a_fresh_store_all_work(tmp_path, monkeypatch):
    """Two commands (`tune --local` and `train`, say) at once on a fresh SQLite store, one
    on the default ``runs/mlflow.db``, the other naming the same file in
    ``MLFLOW_TRACKING_URI``: one of them makes the store's tables, the other waits, both
    log."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    code = (
        "import sys\nfrom components.tracking import run_log\n"
        "with run_log.start_run(f'race-{sys.argv[1]}') as run_id:\n    pass\n"
    )
    store = tmp_path / "runs/mlflow.db"
    store.parent.mkdir()  # the folder the default store makes, there for the named one
    default = {**os.environ, "PYTHONPATH": str(REPO)}
    named = {**default, "MLFLOW_TRACKING_URI": f"sqlite:///{store}"}
    started = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(i)],
            cwd=tmp_path,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        for i, env in enumerate((default, named))
    ]
    said = [process.communicate(timeout=HANG_SECONDS)[1][-2000:] for process in started]
    assert [process.returncode for process in started] == [0] * 2, said
    client = MlflowClient(f"sqlite:///{store}")
    experiments = {e.name: e.experiment_id for e in client.search_experiments()}
    assert {"race-0", "race-1"} <= experiments.keys()  # each command's experiment, one store
    assert len(client.search_runs(list(experiments.values()))) == 2


def test_mlflows_progress_bars_show_on_a_terminal_only():
    """Redirected, a step's output holds no tqdm bar of MLflow's artifact transfers."""
    switch = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    code = (
        "from components.tracking.store import tracking_uri; import os; tracking_uri(); "
        f"print(os.environ['{switch}'])"
    )
    env = {k: v for k, v in os.environ.items() if k != switch}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO,
        timeout=HANG_SECONDS,
    )  # fmt: skip
    assert done.stdout.strip() == "false", done.stderr[-2000:]
