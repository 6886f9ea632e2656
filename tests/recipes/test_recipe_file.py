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


@pytest.mark.parametrize("target", ["/proc/self/mem", "/proc/self/pagemap"])
def test_a_recipe_linked_to_a_kernel_file_that_refuses_reads_is_one_line(tmp_path, target):
    recipe = tmp_path / "recipe.yaml"
    recipe.symlink_to(target)
    with pytest.raises(ValueError, match=f"^expected a readable recipe file, found {recipe}: "):
        read_mapping(recipe)


def test_a_setting_given_twice_is_refused_naming_it_and_its_line(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("epochs: 5\nlr: 0.01\nepochs: 50\n")
    with pytest.raises(ValueError, match="found 'epochs' given twice at line 3, column 1$"):
        read_mapping(recipe)


def test_a_recipe_files_name_cannot_forge_a_line_of_the_refusal(tmp_path, capsys):
    from components import train

    name = tmp_path / "x\x1b[2K\rerror: all good\n.yaml"
    name.write_text("epochs: ten\n")
    with pytest.raises(SystemExit):
        train.parse_config(["--data", "d", "--output", "o", "--preset", str(name)])
    said = capsys.readouterr().err
    assert "\x1b" not in said and "\r" not in said and said.count("\n") == 2
    assert "x\\x1b[2K\\rerror: all good\\n.yaml: expected epochs to be int" in said
