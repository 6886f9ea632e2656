"""The session's own order: the tracking stack's tests in one worker's share, and each
share starting with its slow modules."""

from dataclasses import dataclass
from pathlib import Path

from tests.conftest import STACK_FIXTURE, ordered_for_workers, slow_modules_first
from tests.support import tracking_stack


@dataclass
class Item:
    """A collected test as the ordering reads it: its module's path and its marks."""

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
    ordered = slow_modules_first(items, workers=3)
    # worksteal's shares of ten over three: 3, 3 and 4 tests, each the same tests as before
    assert names(ordered) == ["m1", "q1", "q2", "m2", "q3", "q4", "e1", "e2", "q5", "q6"]
    assert names(slow_modules_first(items, workers=1)) == [
        *("m1", "m2", "e1", "e2", "q1", "q2", "q3", "q4", "q5", "q6")
    ]


def test_the_tests_that_use_the_tracking_stack_come_first_in_one_share():
    quick, store, e2e = Path("test_quick.py"), Path("test_store.py"), Path("test_e2e.py")
    stack = (STACK_FIXTURE,)
    items = [
        *(Item(e2e, "e1", slow=True), Item(quick, "q1"), Item(quick, "q2")),
        *(Item(store, "s1", fixturenames=stack), Item(store, "s2")),
        *(Item(store, "s3", slow=True, fixturenames=stack), Item(quick, "q3")),
    ]
    assert callable(getattr(tracking_stack, STACK_FIXTURE))  # the fixture's name, kept
    ordered = ordered_for_workers(items, workers=2)
    # shares of 3 and 4: the stack's two tests and the next; the rest, slow modules first
    assert names(ordered) == ["s1", "s3", "e1", "s2", "q1", "q2", "q3"]
