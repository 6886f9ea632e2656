"""The session's own order: the tracking stack's tests at the front of two shares, and
each share starting with its slow modules."""

from dataclasses import dataclass
from pathlib import Path

from tests.conftest import STACK_FIXTURE, ordered_for_workers
from tests.support import tracking_stack


@dataclass
class Item:
    """A collected test as the ordering reads it: its module's path, marks and fixtures."""

    path: Path
    name: str
    slow: bool = False
    fixturenames: tuple[str, ...] = ()

    def get_closest_marker(self, name: str) -> object | None:
        return name == "slow" and self.slow or None


def names(items: list[Item]) -> list[str]:
    return [item.name for item in items]


def test_each_share_starts_with_its_slow_modules_and_keeps_its_tests():
    quick, mixed, e2e = Path("test_quick.py"), Path("test_mixed.py"), Path("test_e2e.py")
    items = [
        *(Item(quick, "q1"), Item(quick, "q2"), Item(mixed, "m1"), Item(mixed, "m2", slow=True)),
        *(Item(quick, "q3"), Item(quick, "q4"), Item(e2e, "e1", slow=True)),
        *(Item(e2e, "e2"), Item(quick, "q5"), Item(quick, "q6")),
    ]
    ordered = ordered_for_workers(items, workers=3)
    # worksteal's shares of ten over three: 3, 3 and 4 tests, each the same tests as before
    assert names(ordered) == ["m1", "q1", "q2", "m2", "q3", "q4", "e1", "e2", "q5", "q6"]
    assert names(ordered_for_workers(items, workers=1)) == [
        *("m1", "m2", "e1", "e2", "q1", "q2", "q3", "q4", "q5", "q6")
    ]


def test_the_stacks_tests_lead_two_shares_a_module_in_one():
    quick, store, registry = Path("test_quick.py"), Path("test_store.py"), Path("test_registry.py")
    stack = (STACK_FIXTURE,)
    assert callable(getattr(tracking_stack, STACK_FIXTURE))  # the fixture's name, kept
    items = [
        *(Item(quick, "q1"), Item(quick, "q2", slow=True), Item(quick, "q3")),
        *(Item(registry, "r1", fixturenames=stack), Item(registry, "r2")),
        *(Item(store, "s1", fixturenames=stack), Item(store, "s2", fixturenames=stack)),
        *(Item(quick, "q4"), Item(quick, "q5"), Item(quick, "q6"), Item(quick, "q7")),
    ]
    ordered = ordered_for_workers(items, workers=3)
    # shares of 3, 4 and 4: the store's two (the most) lead the first, the registry's
    # one the second; the rest in order behind them, slow modules first
    assert names(ordered) == ["s1", "s2", "q1", "r1", "q2", "q3", "r2", "q4", "q5", "q6", "q7"]
