"""The command lines as users meet them: ``--help`` answers without loading torch or MLflow."""

from __future__ import annotations

import subprocess
import sys

import pytest

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
        *((f"components.{step}", ["--help"]) for step in ("download", "preprocess", "train")),
        *((f"components.{step}", ["--help"]) for step in ("evaluate", "register", "predict")),
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
