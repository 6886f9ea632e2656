"""The session's own order under pytest-xdist: the tracking stack's tests first and in one
group, then the modules holding a slow test, each module's tests together."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import STACK_FIXTURE, STACK_GROUP, group_of, ordered_for_workers
from tests.support import tracking_stack


@dataclass
class Item:
    """A collected test as the ordering reads it: its module's path, marks and fixtures."""

    path: Path
    name: str
    slow: bool = False
    fixturenames: tuple[str, ...] = ()

    @property
    def nodeid(self) -> str:
        return f"{self.path}::{self.name}"

    def get_closest_marker(self, name: str) -> object | None:
        return name == "slow" and self.slow or None


def names(items: list[Item]) -> list[str]:
    return [item.name for item in items]


def test_slow_modules_come_first_each_keeping_its_tests_in_order():
    quick, mixed, e2e = Path("test_quick.py"), Path("test_mixed.py"), Path("test_e2e.py")
    items = [
        *(Item(quick, "q1"), Item(quick, "q2"), Item(mixed, "m1"), Item(mixed, "m2", slow=True)),
        *(Item(quick, "q3"), Item(quick, "q4"), Item(e2e, "e1", slow=True)),
        *(Item(e2e, "e2"), Item(quick, "q5"), Item(quick, "q6")),
    ]
    assert names(ordered_for_workers(items)) == [
        *("m1", "m2", "e1", "e2", "q1", "q2", "q3", "q4", "q5", "q6")
    ]


def test_the_stacks_tests_lead_as_one_group_and_the_others_go_with_their_module():
    quick, store, registry = Path("test_quick.py"), Path("test_store.py"), Path("test_registry.py")
    stack = (STACK_FIXTURE,)
    assert callable(getattr(tracking_stack, STACK_FIXTURE))  # the fixture's name, kept
    items = [
        *(Item(quick, "q1"), Item(quick, "q2", slow=True)),
        *(Item(registry, "r1", fixturenames=stack), Item(registry, "r2")),
        *(Item(store, "s1", fixturenames=stack), Item(store, "s2")),
    ]
    ordered = ordered_for_workers(items)
    assert names(ordered) == ["r1", "s1", "q1", "q2", "r2", "s2"]
    assert [group_of(item) for item in ordered] == [
        *(STACK_GROUP, STACK_GROUP, "test_quick.py", "test_quick.py"),
        *("test_registry.py", "test_store.py"),
    ]


def test_under_loadgroup_this_test_carries_its_modules_group(request):
    """pytest-xdist marks a test's group in its node id; where a pytest release keeps node
    ids out of xdist's reach (9.2 does, pytest-dev/pytest-xdist#1386), the groups are lost
    without a word, and the stack's tests spread over every worker."""
    if not getattr(request.config.option, "loadgroup", False):  # set in xdist's workers
        pytest.skip("runs under pytest-xdist's loadgroup (the README's `pytest -n 3`)")
    assert request.node.nodeid.endswith("@tests/test_conftest.py")
