"""The tests mirror the code: each source module with logic has its test module beside it.

``components/data/archives.py`` is tested by ``tests/data/test_archives.py``,
``pipeline/ops.py`` by ``tests/pipeline/test_ops.py``; the steps' entry points
(``components/*.py``) all by ``tests/test_entry_points.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO

# modules with no logic of their own to test, each with the reason
NO_LOGIC = {
    "components/core/names.py": "constants",
    "components/core/s3.py": "a boto3 client's timeouts; used against S3 in data/test_sources",
    "components/evaluation/config.py": "fields without checks",
    "components/tracking/tags.py": "constants",
    "components/recipes/presets.py": "the presets table; tests/recipes/test_recipe.py checks each",
    "pipeline/__main__.py": "dispatch to the commands; run by tests/pipeline/test_cli.py",
}


def source_modules() -> list[str]:
    found = [*REPO.glob("components/**/*.py"), *REPO.glob("pipeline/**/*.py")]
    return sorted(str(p.relative_to(REPO)) for p in found if p.name != "__init__.py")


def test_module_for(source: str) -> Path:
    path = Path(source)
    if path.parent == Path("components"):
        return REPO / "tests/test_entry_points.py"
    package = path.parent.relative_to("components") if path.parts[0] == "components" else "pipeline"
    return REPO / "tests" / package / f"test_{path.stem}.py"


test_module_for.__test__ = False  # a helper, not a test


@pytest.mark.parametrize("source", source_modules())
def test_each_source_module_with_logic_has_its_test_module(source):
    if source in NO_LOGIC:
        assert (REPO / source).is_file()  # an exemption for a module that went is stale
        return
    tests = test_module_for(source)
    assert tests.is_file(), f"{source} has no {tests.relative_to(REPO)}"
    if tests.name == "test_entry_points.py":
        return  # it runs every components/*.py it finds
    stem = Path(source).stem
    module = ".".join(Path(source).with_suffix("").parts)
    text = tests.read_text()
    assert module in text or stem in text, f"{tests.relative_to(REPO)} never names {module}"
