"""The steps' entry points, all alike: thin (``build_parser``, ``main``), and ``--help``
answers without loading torch or MLflow."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.support.processes import HANG_SECONDS

STEPS = sorted(p.stem for p in (REPO / "components").glob("*.py") if p.stem != "__init__")

HEAVY = ("torch", "mlflow")
HELPS = [
    *((f"components.{step}", ["--help"]) for step in STEPS),
    ("pipeline", ["--help"]),
    ("pipeline", ["run", "--help"]),
    ("pipeline", ["compile", "--help"]),
    ("pipeline", ["tune", "--help"]),
]
# one fresh Python runs each module as `python -m` would, with its help flags, and names
# after each the heavy modules loaded so far: none may be, so each names its own
PROBE = """
import contextlib, io, json, runpy, sys
for module, argv in {helps!r}:
    sys.argv = [module, *argv]
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        try:
            runpy.run_module(module, run_name="__main__")
        except SystemExit:
            pass
    heavy = sorted(name for name in {heavy!r} if name in sys.modules)
    print(json.dumps([module, argv, "usage: python -m" in shown.getvalue(), heavy]))
"""


def test_help_loads_neither_torch_nor_mlflow():
    code = PROBE.format(helps=HELPS, heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
        check=True,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(module, argv) for module, argv, *_ in answers] == HELPS
    assert [(module, argv) for module, argv, usage, _ in answers if not usage] == []
    assert [(module, argv, heavy) for module, argv, _, heavy in answers if heavy] == []


@pytest.mark.parametrize("step", STEPS)
def test_every_step_is_a_thin_entry_point_over_its_package(step):
    tree = ast.parse((REPO / "components" / f"{step}.py").read_text())
    functions = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert {"build_parser", "main"} <= set(functions)
    assert not [node.name for node in tree.body if isinstance(node, ast.ClassDef)]
    assert len(functions) <= 3, functions  # the work lives in its package


@pytest.mark.parametrize("step", ["train", "evaluate", "register", "download"])
def test_help_says_how_long_each_wait_is(step):
    text = importlib.import_module(f"components.{step}").build_parser().format_help()
    shown = " ".join(text.split()).replace("- ", "-")  # as argparse wrapped it
    if step == "download":
        assert "given up after retries × stall-seconds plus back-off" in shown
    else:
        assert "each MLflow call waits at most 30 s and is tried 5 times" in shown


def deploy_cli(tmp_path, kubeconfig: str, *flags: str) -> subprocess.CompletedProcess:
    """``python -m components.deploy`` as a user runs it, outside any pod."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "KUBECONFIG": kubeconfig,
        "PYTHONPATH": str(REPO),
    }
    return subprocess.run(
        [
            *(sys.executable, "-m", "components.deploy", "--model-version", "3"),
            *("--tracking-uri", "http://mlflow.mlflow.svc.cluster.local:5000"),
            *("--image", "registry.example/dogs-vs-cats:0.1.0", "--namespace", "team-a"),
            *flags,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=HANG_SECONDS,
    )


def test_deploy_without_a_kubeconfig_ends_in_one_line(tmp_path):
    done = deploy_cli(tmp_path, str(tmp_path / "missing"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: no usable Kubernetes context in ") and "KUBECONFIG" in line


def test_deploy_against_an_api_that_never_answers_ends_within_its_timeout(tmp_path):
    """The deadline ends the wait (the stand-in hangs for a minute): the step's own line
    says so; a hang would only meet the subprocess's limit."""
    from tests.support.kube_api import FakeKServeApi, write_kubeconfig

    with FakeKServeApi() as api:
        api.hang = True
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url)
        done = deploy_cli(tmp_path, str(kubeconfig), "--timeout-seconds", "2")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        "error: no answer within 2 s to read InferenceService team-a/dogs-vs-cats"
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--model-version", "١"), "expected a registered model version"),
        (("--name", "x/.."), "expected the name as a DNS label"),
        (("--image", "img\nx"), "expected an image reference"),
        (("--poll-seconds", "nan"), "expected poll_seconds above 0"),
        (("--timeout-seconds", "-1"), "expected timeout_seconds above 0"),
    ],
)
def test_deploy_refuses_what_kubernetes_would_refuse_before_any_request(tmp_path, flags, message):
    done = deploy_cli(tmp_path, str(tmp_path / "missing"), *flags)  # no API to ask: none asked
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert message in done.stderr.splitlines()[-1]


# the clients a step needs only where it places or serves something on a cluster
CLUSTER_CLIENTS = ("kubernetes", "kubernetes_validate", "kfp")


@pytest.mark.parametrize("step", STEPS)
def test_importing_a_step_loads_no_cluster_client_nor_mlflows_server(step):
    """Each pod, each --help, each debugging session pays only for what the step uses."""
    probe = (
        f"import sys, components.{step}\n"
        "print([m for m in sys.modules if m.split('.')[0] in "
        f"{CLUSTER_CLIENTS!r} or m.startswith('mlflow.server')])"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=HANG_SECONDS
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
