"""Champion/challenger: a new version takes the alias only when it beats the version
that holds it on the same test photos, photos neither of them trained on: the
challenger's test photos that are in the holder's test share too, with the holder scored
again on them (``rescore``), photo by photo and beyond chance; where they are not at
hand, the holder's card figure when it was measured on the same arrays (their sha256) or
the same photos at another size (the preprocess step's photos digest)."""

from __future__ import annotations

from dataclasses import dataclass

from components.registration.confidence import better_beyond_chance
from components.registration.rescore import Rescored

TEST_DIGEST_TAG = "data.test-split.sha256"  # the model card's record of its test split
TEST_PHOTOS_TAG = "data.test-photos.sha256"  # and of which photos it holds, at any size
# the test fraction of its test share, where its split was checked against the source's
# listing (components.data.test_share): it trained on no photo below it
TEST_SHARE_TAG = "data.test-share"
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

    @property
    def share(self) -> float | None:
        """The test fraction of its test share, where its split was checked against its
        source's listing: then it trained on no photo in that share."""
        try:
            return float(self.tags[TEST_SHARE_TAG])
        except (KeyError, ValueError):
            return None

    def tested_on(self, test_digest: str | None, test_photos: str | None) -> bool:
        """Whether its card's figure was measured on these arrays or these photos."""
        return any(
            mine is not None and self.tags.get(tag) == mine
            for tag, mine in ((TEST_DIGEST_TAG, test_digest), (TEST_PHOTOS_TAG, test_photos))
        )


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
    again: Rescored | str | None = None,
    wrong: list[int] | None = None,
) -> Verdict:
    """Judge a challenger of ``accuracy`` on the test split ``test_digest`` (its arrays;
    ``test_photos``: its photos at any size) against the alias's ``holder``; ``again``:
    the holder scored again on the challenger's test photos (those neither trained on),
    or why it could not be; ``wrong``: the positions of the photos the challenger got
    wrong.

    Beating means a higher accuracy on the same photos; a tie keeps the holder. Where both
    were scored photo by photo on the same photos (the holder scored again), it means
    more beyond chance too: McNemar's test on the photos only one of them got right.
    Figures from other photos are not compared: the alias moves then only when ``force``.
    """
    if holder is None:
        return Verdict(True, f"no version held @{alias}", {"challenge.outcome": "first"})
    theirs, where = holder.accuracy, "on the same test split"
    if isinstance(again, Rescored) and wrong is not None:  # these photos, one by one
        theirs = again.accuracy
        wrong = sorted(set(wrong) & set(again.positions))
        accuracy = 1 - len(wrong) / again.count
        where = (
            f"on the same {again.count} test photos (of test photos sha256 "
            f"{again.photos[:12]}…), which neither trained on, version {holder.version} "
            "scored again on them"
        )
    elif isinstance(again, Rescored):
        theirs, again = None, "the challenger's report does not say which photos it got wrong"
    elif not holder.tested_on(test_digest, test_photos):
        theirs = None
    record = {
        "challenge.version": holder.version,
        "challenge.test_accuracy": "unknown" if theirs is None else f"{theirs:.4f}",
        "challenge.rescored": str(isinstance(again, Rescored) and theirs is not None).lower(),
        **({"challenge.photos": str(again.count)} if isinstance(again, Rescored) else {}),
    }
    if theirs is None:
        return _not_comparable(
            holder, alias, force, again if isinstance(again, str) else "", record
        )
    record["challenge.same_test_split"] = "true"
    if isinstance(again, Rescored) and wrong is not None and accuracy > theirs:
        beyond, p_value = better_beyond_chance(set(wrong), set(again.wrong))
        split = (
            f"McNemar p={p_value:.3g}: {len(set(again.wrong) - set(wrong))} photos right by it "
            f"alone, {len(set(wrong) - set(again.wrong))} by version {holder.version} alone"
        )
        record["challenge.mcnemar_p"] = f"{p_value:.4g}"
        if not beyond:
            return Verdict(
                False,
                f"does not beat version {holder.version}'s {theirs:.4f} {where} by more than "
                f"chance ({split}); @{alias} stays on version {holder.version}",
                record | {"challenge.outcome": "lost"},
            )
        where += f", beyond chance ({split})"
    if accuracy > theirs:
        return Verdict(
            True,
            f"beats version {holder.version}'s {theirs:.4f} {where}",
            record | {"challenge.outcome": "won"},
        )
    return Verdict(
        False,
        f"does not beat version {holder.version}'s {theirs:.4f} {where}; @{alias} stays on "
        f"version {holder.version}",
        record | {"challenge.outcome": "lost"},
    )


def _not_comparable(
    holder: Holder, alias: str, force: bool, why: str, record: dict[str, str]
) -> Verdict:
    record["challenge.same_test_split"] = "false"
    measured = "unknown" if holder.accuracy is None else f"{holder.accuracy:.4f}"
    because = f" ({why})" if why else ""
    if force:
        return Verdict(
            True,
            f"moved by force: version {holder.version}'s {measured} was measured on another "
            f"test split and cannot be compared{because}",
            record | {"challenge.outcome": "forced"},
        )
    return Verdict(
        False,
        f"version {holder.version} holds @{alias} with {measured} measured on another test "
        f"split, which cannot be compared{because}; @{alias} stays (--force-alias moves it)",
        record | {"challenge.outcome": "not comparable"},
    )
