"""Imports run one way: each package of ``components/`` imports only itself and the tiers
below it, the steps' entry points import packages, and ``pipeline/`` sits on top."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

TIERS = [  # lowest first; a package imports its own tier's packages never, lower ones freely
    {"core"},
    {"data", "tracking"},
    {"networks"},
    {"scoring"},
    {"training"},
    {"cluster", "downloading", "preprocessing", "evaluation", "registration", "serving"},
    {"deploying", "tuning", "recipes"},
    {"tasks"},
]
TIER_OF = {package: rank for rank, tier in enumerate(TIERS) for package in tier}
ENTRY_POINTS = len(TIERS)  # components/*.py
PIPELINE = ENTRY_POINTS + 1


def layer(module: str) -> tuple[int, str]:
    """The tier and package of a dotted module name of this project's."""
    parts = module.split(".")
    if parts[0] == "pipeline":
        return PIPELINE, "pipeline"
    if len(parts) == 2 and (REPO / "components" / f"{parts[1]}.py").is_file():
        return ENTRY_POINTS, parts[1]
    return TIER_OF[parts[1]], parts[1]


def imported(path: Path) -> set[str]:
    """Every project module ``path`` imports, in functions too."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] not in ("components", "pipeline"):
                continue
            *package, last = name.split(".")
            is_module = (REPO / Path(*package, last)).is_dir() or (
                REPO / Path(*package, f"{last}.py")
            ).is_file()
            found.add(name if is_module else ".".join(package))
    return found - {"components", "pipeline"}


SOURCES = sorted(
    str(p.relative_to(REPO))
    for p in [*REPO.glob("components/**/*.py"), *REPO.glob("pipeline/*.py")]
)


def test_every_package_has_its_tier():
    packages = {p.name for p in (REPO / "components").iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(TIER_OF)


@pytest.mark.parametrize("source", SOURCES)
def test_a_module_imports_only_its_own_package_and_lower_tiers(source):
    module = ".".join(Path(source).with_suffix("").parts).removesuffix(".__init__")
    tier, package = layer(module) if module.count(".") else (PIPELINE, "pipeline")
    upward = [
        name
        for name in sorted(imported(REPO / source))
        if layer(name)[1] != package and layer(name)[0] >= tier
    ]
    assert upward == [], f"{source} imports its own tier or a higher one"
