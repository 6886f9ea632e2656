"""The README's commands, read from the file itself, for the tests that run them as typed."""

from __future__ import annotations

import re

from tests.conftest import REPO


def readme_block(heading: str) -> str:
    """The first ```bash block under ``heading`` in README.md."""
    text = (REPO / "README.md").read_text()
    section = text[text.index(f"## {heading}\n") :]
    return re.search(r"```bash\n(.*?)```", section, re.DOTALL)[1]


def readme_command(heading: str, start: str) -> str:
    """The command of the block under ``heading`` that begins with ``start``, its
    continued lines joined."""
    commands = readme_block(heading).replace("\\\n", " ").splitlines()
    (command,) = [" ".join(line.split()) for line in commands if line.startswith(start)]
    return command
