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


# a repository path with a file's extension, or ending in a slash (a folder)
CITED = re.compile(
    r"(?<![\w/.-])((?:components|pipeline|tests|docs|benchmarks|manifests|images)/"
    r"[\w./-]*(?:\.[a-z]+|/))(?![\w*])"
)
CITING = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    *(
        p
        for top in ("components", "pipeline", "tests", "benchmarks")
        for p in (REPO / top).rglob("*.py")
    ),
]


def cited_paths() -> list[tuple[str, str]]:
    found = set()
    for document in CITING:
        for path in CITED.findall(document.read_text()):
            found.add((str(document.relative_to(REPO)), path.rstrip(".")))
    return sorted(found)


def exists(where: str, path: str) -> bool:
    """From the repository's root, or (a doc's link) from the citing file's folder."""
    return (REPO / path).exists() or (REPO / where).parent.joinpath(path).exists()


def test_every_path_a_doc_or_a_comment_cites_exists():
    missing = [f"{where}: {path}" for where, path in cited_paths() if not exists(where, path)]
    assert not missing, "\n".join(missing)
