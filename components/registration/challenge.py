"""Champion/challenger: a new version takes the alias only when it beats the version
that holds it, on the same test split (the same data digest)."""

from __future__ import annotations

from dataclasses import dataclass

TEST_DIGEST_TAG = "data.test-split.digest"  # the model card's record of its test split
ACCURACY_TAG = "test_accuracy"


@dataclass(frozen=True)
class Holder:
    """The version that holds the alias, as its model card recorded it."""

    version: str
    tags: dict[str, str]

    @property
    def accuracy(self) -> float | None:
        try:
            return float(self.tags[ACCURACY_TAG])
        except (KeyError, ValueError):
            return None


@dataclass(frozen=True)
class Verdict:
    """Whether the challenger takes the alias, why (one clause), and the model card's
    record of what it was compared against."""

    takes_alias: bool
    reason: str
    record: dict[str, str]


def challenge(
    holder: Holder | None, accuracy: float, test_digest: str | None, alias: str, force: bool
) -> Verdict:
    """Judge a challenger of ``accuracy`` on the test split ``test_digest`` against the
    alias's ``holder``.

    Beating means a higher accuracy on the same split; a tie keeps the holder. Figures
    from different splits are not compared: the alias moves then only when ``force``.
    """
    if holder is None:
        return Verdict(True, f"no version held @{alias}", {"challenge.outcome": "first"})
    theirs = holder.accuracy
    record = {
        "challenge.version": holder.version,
        "challenge.test_accuracy": "unknown" if theirs is None else f"{theirs:.4f}",
    }
    same_split = test_digest is not None and holder.tags.get(TEST_DIGEST_TAG) == test_digest
    if not same_split or theirs is None:
        record["challenge.same_test_split"] = "false"
        measured = "unknown" if theirs is None else f"{theirs:.4f}"
        if force:
            return Verdict(
                True,
                f"moved by force: version {holder.version}'s {measured} was measured on "
                "another test split and cannot be compared",
                record | {"challenge.outcome": "forced"},
            )
        return Verdict(
            False,
            f"version {holder.version} holds @{alias} with {measured} measured on another "
            f"test split, which cannot be compared; @{alias} stays (--force-alias moves it)",
            record | {"challenge.outcome": "not comparable"},
        )
    record["challenge.same_test_split"] = "true"
    if accuracy > theirs:
        return Verdict(
            True,
            f"beats version {holder.version}'s {theirs:.4f} on the same test split",
            record | {"challenge.outcome": "won"},
        )
    return Verdict(
        False,
        f"does not beat version {holder.version}'s {theirs:.4f} on the same test split; "
        f"@{alias} stays on version {holder.version}",
        record | {"challenge.outcome": "lost"},
    )
