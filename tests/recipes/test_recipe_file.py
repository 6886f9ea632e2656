"""A recipe file read as bounded data: no anchors, aliases or merge keys, shallow
nesting, regular files only, refusals in one short line."""

from __future__ import annotations

import os

import pytest

from components.recipes.recipe_file import MOST_RECIPE_BYTES, read_mapping


def billion_laughs(levels: int = 9) -> str:
    """A few hundred bytes of anchors and aliases, 9**levels strings once expanded."""
    lines = ['- &l0 "lol"']
    lines += [f"- &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "epochs:\n" + "\n".join("  " + line for line in lines) + "\n"


def merge_bomb(levels: int = 9) -> str:
    """Merge keys that PyYAML copies into every node: the bomb goes off in safe_load."""
    lines = ["m0: &m0 {a: 1}"]
    lines += [
        f"m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * 9)}]}}" for i in range(1, levels + 1)
    ]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "text, message",
    [
        (billion_laughs(), "found a YAML anchor or alias at line 2"),
        ("preset: *l9\n" + billion_laughs().replace("epochs:", "x:"), "anchor or alias at line 1"),
        (merge_bomb(), "found a YAML anchor or alias at line 1"),
        ("a: {<<: {epochs: 2}}\n", "found a YAML merge key (<<) at line 1"),
        ("epochs: " + "[" * 20_000 + "]" * 20_000 + "\n", "nested at most 3 deep, found deeper"),
    ],
)
def test_a_yaml_bomb_or_deep_nesting_is_refused_before_anything_is_built(tmp_path, text, message):
    recipe = tmp_path / "bomb.yaml"
    recipe.write_text(text)
    assert len(text) < MOST_RECIPE_BYTES
    with pytest.raises(ValueError) as refused:
        read_mapping(recipe)
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert len(str(refused.value)) < 300


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_a_recipe_path_that_is_not_a_regular_file_is_refused_without_waiting(tmp_path, kind):
    path = tmp_path / "recipe.yaml"
    if kind == "fifo":
        os.mkfifo(path)  # nobody writes it: open() without O_NONBLOCK would wait for ever
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to("/dev/zero")  # endless: read whole, it would fill the memory
    with pytest.raises(ValueError, match="expected a (readable )?recipe file"):
        read_mapping(path)
