"""The install as the README says: `pip check` finds nothing wrong with what it installs
but the one conflict requirements-katib.txt explains."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import REPO

# Katib's SDK declares protobuf<5 for gRPC stubs the project never imports; kfp needs 6
KNOWN = re.compile(r"^kubeflow-katib \S+ has requirement protobuf<5")


def installed_by_the_readme() -> set[str]:
    """The distributions the README's two install lines pin, by normalised name."""
    names = set()
    for requirements in ("requirements.lock", "requirements-katib.txt"):
        for line in (REPO / requirements).read_text().splitlines():
            if match := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", line):
                names.add(normalised(match[1]))
    return names


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_pip_check_finds_only_the_katib_sdks_protobuf_pin():
    done = subprocess.run(
        [sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120
    )
    ours = installed_by_the_readme()
    assert "kfp" in ours and "retrying" in ours
    # lines about distributions the README installs; others are the machine's own
    about_ours = [
        line for line in done.stdout.splitlines() if line and normalised(line.split()[0]) in ours
    ]
    assert [line for line in about_ours if not KNOWN.match(line)] == []
