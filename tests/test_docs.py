"""What the docs promise exists: every test that docs/safety.md names is a test of the suite."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO

NAMED = re.compile(r"`(tests/[\w/]+\.py)(?:::(test_\w+))?`")


def named_tests() -> list[tuple[str, str | None]]:
    return sorted(set(NAMED.findall((REPO / "docs/safety.md").read_text())))


def test_the_safety_page_names_tests():
    assert len(named_tests()) > 20


@pytest.mark.parametrize(("path", "name"), named_tests())
def test_each_test_the_safety_page_names_exists(path, name):
    module = REPO / path
    assert module.is_file(), path
    if name:
        assert re.search(rf"^def {name}\(", module.read_text(), re.MULTILINE), f"{path}::{name}"
