"""What a newcomer mistypes first, refused before any task starts and before kfp, torch
or MLflow load: a local source that is not there, a setting that does not exist."""

import subprocess
import sys

import pytest

from tests.support.processes import HANG_SECONDS

# the command's own entry point, then which heavy libraries it had loaded when it ended
ENTRY = """
import sys
from pipeline.__main__ import main
try:
    main(sys.argv[1:])
finally:
    print(sorted(name for name in ("kfp", "torch", "mlflow") if name in sys.modules))
"""


def refused(tmp_path, *argv: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, *argv, "--workdir", str(tmp_path / "w")],
        capture_output=True, text=True, timeout=HANG_SECONDS, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode != 0
    assert done.stdout.strip() == "[]"  # nothing heavy loaded
    assert not (tmp_path / "w").exists() and not (tmp_path / "runs").exists()  # no task ran
    return done


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_mistyped_local_source_is_refused_naming_the_file_meant(command, tmp_path):
    (tmp_path / "petimages-sample.zip").write_bytes(b"PK")
    (tmp_path / "petimages-sample.zip.sha256").write_text("0" * 64)  # its digest: no source
    typo = tmp_path / "petimages-sampel.zip"
    axes = ["lr=0.001,0.003"] if command == "sweep" else []
    done = refused(tmp_path, command, "--local", "--source", str(typo), *axes)
    assert done.stderr.splitlines()[-1] == (
        f"refused before the run starts: expected the source as a .zip, .tar.gz or folder at "
        f"{typo}, found nothing there; did you mean {tmp_path / 'petimages-sample.zip'}?"
    )


def test_an_unknown_setting_is_refused_with_the_name_meant(tmp_path):
    done = refused(tmp_path, "run", "--local", "epoch=1")
    assert done.stderr.splitlines()[-1] == (
        "unknown setting 'epoch' in 'epoch=1': did you mean epochs=?"
    )


def test_tune_local_refuses_a_missing_source_before_any_download(tmp_path):
    done = refused(tmp_path, "tune", "--local", "--source", str(tmp_path / "none.zip"))
    assert "found nothing there" in done.stderr.splitlines()[-1]
