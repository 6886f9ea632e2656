"""What the docs promise exists: every test docs/safety.md names is a test of the suite, and
every presets table states the presets as they are."""

from __future__ import annotations

import re
from pathlib import Path

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


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# a link followed by the heading it cites: [text](FILE.md), "The heading"
CITED_HEADING = re.compile(r"\]\(([^)#\s]+\.md)\),?\s+\"([^\"]+)\"")
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def headings(document) -> set[str]:
    return {
        line.lstrip("#").strip()
        for line in document.read_text().splitlines()
        if line.startswith("#")
    }


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation gone, spaces to hyphens."""
    kept = re.sub(r"[^\w\- ]", "", heading.lower())
    return kept.replace(" ", "-")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_every_relative_link_and_cited_heading_resolves_from_its_own_file(document):
    """As a reader's browser follows it: relative to the file that holds the link."""
    broken = []
    for target in LINK.findall(document.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, fragment = target.partition("#")
        resolved = (document.parent / path).resolve() if path else document
        if not resolved.exists():
            broken.append(f"{target}: no {resolved.relative_to(REPO.resolve())}")
        elif fragment and fragment not in {anchor(h) for h in headings(resolved)}:
            broken.append(f"{target}: no heading #{fragment}")
    for path, heading in CITED_HEADING.findall(document.read_text()):
        resolved = (document.parent / path).resolve()
        if resolved.exists() and heading not in headings(resolved):
            broken.append(f'{path}, "{heading}": no such heading')
    assert not broken, "\n".join(broken)


def preset_table(document: Path) -> tuple[list[str], dict[str, list[str]]]:
    """The header of ``document``'s presets table and its rows' cells by preset name."""
    lines = document.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| preset |"))
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        rows[cells[0].strip("`")] = cells
    return header, rows


@pytest.mark.parametrize("document", ["README.md", "docs/reference.md"])
def test_each_presets_table_states_every_preset_as_the_table_of_presets_holds_it(document):
    from components.recipes.presets import PRESETS
    from components.recipes.recipe import placement_of

    header, rows = preset_table(REPO / document)
    assert list(rows) == list(PRESETS)
    images, recipe = header.index("images"), header.index("recipe")
    gate = next(i for i, name in enumerate(header) if name.startswith("gate"))
    for name, cells in rows.items():
        values = PRESETS[name]
        side = values["image_size"]
        kind = "grey" if values["channels"] == 1 else "RGB"
        assert cells[images] == f"{kind} {side}×{side}", name
        assert float(cells[gate]) == values["min_accuracy"], name
        assert f"`{values['model']}`" in cells[recipe], name
        assert f"{values['epochs']} epochs" in cells[recipe], name
        if "trains on" in header:
            place = placement_of(values, {})
            gpu = f"1 {place.gpu_resource}, " if place.on_gpu else ""
            where = f"{place.hardware.upper()}: {gpu}{place.cpu} CPUs, {place.memory}"
            assert cells[header.index("trains on")] == where, name


def markdown_table(document: Path, first_header: str) -> list[list[str]]:
    """The rows of the table in ``document`` whose header starts ``| first_header |``."""
    lines = document.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_the_nets_table_is_the_registry_and_names_every_net_train_offers(capsys):
    from components import train
    from components.networks.registry import NETS

    rows = markdown_table(REPO / "docs/reference.md", "net | starts from")
    assert [row[0] for row in rows] == [f"`{name}`" for name in NETS]
    for (_, start, summary), net in zip(rows, NETS.values(), strict=True):
        assert summary == net.summary
        assert start == ("its ImageNet weights" if net.pretrained else "random weights")
    with pytest.raises(SystemExit):
        train.main(["--help"])
    offered = re.search(r"--model \{([^}]*)\}", capsys.readouterr().out)
    assert offered and offered[1].split(",") == list(NETS)


def test_the_pretrained_weights_table_is_the_catalogue():
    from components.networks.backbones import BACKBONES

    rows = markdown_table(REPO / "docs/reference.md", "net | package (Apache-2.0)")
    assert [row[0] for row in rows] == [f"`{name}`" for name in BACKBONES]
    for row, backbone in zip(rows, BACKBONES.values(), strict=True):
        assert row[1].startswith(f"`{backbone.package}` ")
        assert row[2:] == [
            str(backbone.input_size),
            str(backbone.blocks),
            f"{backbone.parameters:,}",
            f"{backbone.imagenet_top1:g}%",
            f"{backbone.dropout:g}",
            f"{backbone.crop_fraction:g}, {backbone.interpolation}",
        ]


def test_the_readmes_first_ten_minutes_read_nothing_beside_the_clone():
    text = (REPO / "README.md").read_text()
    section = text[text.index("## The first ten minutes\n") : text.index("## Set up and test\n")]
    commands = "\n".join(re.findall(r"```bash\n(.*?)```", section, re.DOTALL))
    assert "../" not in commands
    read = re.findall(r"(?:--source|unzip -o) (\S+)", commands)
    assert read and all((REPO / path).is_file() for path in read), read
