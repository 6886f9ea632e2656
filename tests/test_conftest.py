"""The session's own order: each worker's share starts with its slow modules."""

from dataclasses import dataclass
from pathlib import Path

from tests.conftest import slow_modules_first


@dataclass
class Item:
    """A collected test as the ordering reads it: its module's path and its marks."""

    path: Path
    name: str
    slow: bool = False

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
