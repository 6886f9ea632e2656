"""The README's commands as typed: the step-by-step tour, run by bash on the sample.

Only the sample's path changes (a fifth of it, for time); everything else, the flags and
the ``$(cat …)`` included, is the README's text.
"""

import os
import re
import subprocess

import pytest

from components.recipes.presets import PRESETS
from tests.conftest import SAMPLE_ZIP
from tests.support.processes import HANG_SECONDS
from tests.support.readme import readme_block

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_the_step_by_step_tour_runs_as_typed(small_sample_zip, tmp_path):
    tour = readme_block("Run the steps one at a time")
    assert "tests/fixtures/petimages-sample.zip" in tour and "--preset tutorial" in tour
    script = tour.replace("tests/fixtures/petimages-sample.zip", str(small_sample_zip))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING"] = "false"  # the store is the default one
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG_SECONDS,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"(not )?registered.*", lines[-2])  # the gate's one line
    assert re.fullmatch(r"runs/raw/PetImages/Cat/1\.jpg\t(cat|dog)\t[01]\.\d+", lines[-1])
    history = (tmp_path / "runs/model/history.json").read_text()
    assert history.count('"epoch"') == PRESETS["tutorial"]["epochs"]
    assert SAMPLE_ZIP.name in tour
