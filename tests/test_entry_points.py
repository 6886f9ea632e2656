"""The steps' entry points, all alike: thin (``build_parser``, ``main``), and ``--help``
answers without loading torch or MLflow."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys

import pytest

from tests.conftest import REPO

STEPS = sorted(p.stem for p in (REPO / "components").glob("*.py") if p.stem != "__init__")

HEAVY = ("torch", "mlflow")
# runs a module as `python -m` would, with --help, then names the heavy modules it loaded
PROBE = """
import runpy, sys
sys.argv = [{module!r}, *{argv!r}]
try:
    runpy.run_module({module!r}, run_name="__main__")
except SystemExit:
    pass
print(sorted(name for name in {heavy!r} if name in sys.modules))
"""


@pytest.mark.parametrize(
    "module, argv",
    [
        *((f"components.{step}", ["--help"]) for step in STEPS),
        ("pipeline", ["--help"]),
        ("pipeline", ["run", "--help"]),
        ("pipeline", ["compile", "--help"]),
    ],
)
def test_help_loads_neither_torch_nor_mlflow(module, argv):
    code = PROBE.format(module=module, argv=argv, heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "usage: python -m" in done.stdout
    assert done.stdout.splitlines()[-1] == "[]"


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
