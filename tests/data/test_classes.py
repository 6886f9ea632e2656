"""A data set's class names: their limits, and the keys MLflow takes them by."""

from __future__ import annotations

import pytest

from components.data.classes import MAX_CLASSES, check_classes, metric_keys


def test_two_to_a_hundred_printable_names_are_a_class_list():
    assert check_classes(["cat", "dog"], "meta.json") == ("cat", "dog")
    many = [f"class {i}" for i in range(MAX_CLASSES)]
    assert check_classes(many, "meta.json") == tuple(many)


@pytest.mark.parametrize(
    ("classes", "refusal"),
    [
        ("cat,dog", "a list of class names in meta.json, found str"),
        (["cat"], "2 to 100 classes in meta.json, found 1: cat"),
        ([f"c{i}" for i in range(101)], "2 to 100 classes in meta.json, found 101"),
        (["cat", 7], "class names of a string, found int in meta.json"),
        (["cat", ""], "1 to 50 characters, found 0"),
        (["cat", "d" * 51], "1 to 50 characters, found 51"),
        (["cat", "a/b"], "without / or \\\\, found 'a/b'"),
        (["cat", "a\\b"], "without / or \\\\, found 'a\\\\\\\\b'"),
        (["cat", ".."], "found '..'"),
        (["cat", "dog\n"], "printable characters"),
        (["cat", " dog"], "no space at either end, found ' dog'"),
        (["dog", "cat", "dog"], r"distinct class names in meta.json, found \['dog'\] twice"),
    ],
)
def test_a_class_list_outside_the_limits_is_refused_naming_the_name(classes, refusal):
    with pytest.raises(ValueError, match=refusal):
        check_classes(classes, "meta.json")


def test_names_mlflow_refuses_become_distinct_keys():
    assert metric_keys(["cat", "dog"]) == ["cat", "dog"]
    keys = metric_keys(["café crème", "a+b", "a_b", "a?b"])
    assert keys == ["café crème", "a_b", "a_b_2", "a_b_3"]
