"""Champion/challenger: a new version takes the alias only when it beats the version
that holds it, on the same test split: the same arrays (their sha256), or the same
photos with the same labels at another size (the preprocess step's photos digest), as a
pretrained net's 192-pixel arrays and a from-scratch net's 96-pixel ones of one archive."""

from __future__ import annotations

from dataclasses import dataclass

TEST_DIGEST_TAG = "data.test-split.sha256"  # the model card's record of its test split
TEST_PHOTOS_TAG = "data.test-photos.sha256"  # and of which photos it holds, at any size
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
    holder: Holder | None,
    accuracy: float,
    test_digest: str | None,
    alias: str,
    force: bool,
    test_photos: str | None = None,
) -> Verdict:
    """Judge a challenger of ``accuracy`` on the test split ``test_digest`` (its arrays;
    ``test_photos``: its photos at any size) against the alias's ``holder``.

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
    same_split = any(
        mine is not None and holder.tags.get(tag) == mine
        for tag, mine in ((TEST_DIGEST_TAG, test_digest), (TEST_PHOTOS_TAG, test_photos))
    )
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
