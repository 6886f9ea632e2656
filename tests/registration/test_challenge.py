"""Champion/challenger: who takes the alias, from the holder's model card alone."""

import pytest

from components.registration.challenge import (
    ACCURACY_TAG,
    TEST_DIGEST_TAG,
    TEST_PHOTOS_TAG,
    Holder,
    challenge,
)
from components.registration.rescore import Rescored

SPLIT = "a1b2c3d4"


def holder(accuracy: str = "0.8150", digest: str = SPLIT) -> Holder:
    return Holder("1", {ACCURACY_TAG: accuracy, TEST_DIGEST_TAG: digest})


def test_the_first_version_takes_the_alias():
    verdict = challenge(None, 0.6, SPLIT, "candidate", force=False)
    assert verdict.takes_alias and verdict.reason == "no version held @candidate"


def test_a_better_version_on_the_same_split_takes_the_alias():
    verdict = challenge(holder(), 0.8151, SPLIT, "candidate", force=False)
    assert verdict.takes_alias
    assert verdict.reason == "beats version 1's 0.8150 on the same test split"
    assert verdict.record == {
        "challenge.version": "1",
        "challenge.test_accuracy": "0.8150",
        "challenge.rescored": "false",
        "challenge.same_test_split": "true",
        "challenge.outcome": "won",
    }


@pytest.mark.parametrize("accuracy", [0.735, 0.815])  # worse, and a tie
def test_a_version_that_does_not_beat_the_holder_leaves_the_alias(accuracy):
    verdict = challenge(holder(), accuracy, SPLIT, "candidate", force=True)  # force: moot
    assert not verdict.takes_alias
    assert verdict.reason == (
        "does not beat version 1's 0.8150 on the same test split; @candidate stays on version 1"
    )
    assert verdict.record["challenge.outcome"] == "lost"


@pytest.mark.parametrize(
    "theirs, digest",
    [("0.8150", "ffff0000"), ("0.8150", None), ("not a number", SPLIT)],
    ids=["another split", "split unrecorded", "accuracy unrecorded"],
)
def test_figures_that_cannot_be_compared_move_the_alias_only_when_forced(theirs, digest):
    tags = {ACCURACY_TAG: theirs} | ({TEST_DIGEST_TAG: digest} if digest else {})
    kept = challenge(Holder("1", tags), 0.99, SPLIT, "candidate", force=False)
    assert not kept.takes_alias
    assert "measured on another test split, which cannot be compared" in kept.reason
    assert "--force-alias moves it" in kept.reason
    assert kept.record["challenge.same_test_split"] == "false"
    forced = challenge(Holder("1", tags), 0.5, SPLIT, "candidate", force=True)
    assert forced.takes_alias and forced.reason.startswith("moved by force")
    assert forced.record["challenge.outcome"] == "forced"


def test_the_same_photos_at_another_size_are_the_same_test_split():
    """A pretrained net's 192-pixel arrays against a from-scratch net's 96-pixel ones of
    the same photos: other arrays, the same photos and labels, so the figures compare."""
    tags = {ACCURACY_TAG: "0.9604", TEST_DIGEST_TAG: "arrays-96", TEST_PHOTOS_TAG: "photos"}
    won = challenge(Holder("1", tags), 0.9857, "arrays-192", "candidate", False, "photos")
    assert won.takes_alias and won.reason == "beats version 1's 0.9604 on the same test split"
    other = challenge(Holder("1", tags), 0.9857, "arrays-192", "candidate", False, "others")
    assert not other.takes_alias and other.record["challenge.same_test_split"] == "false"


def test_a_holder_scored_again_on_the_challengers_photos_is_compared_there():
    """Tested on other photos, scored again on the challenger's: the figures compare, and
    the reason names the photos both were scored on."""
    again = Rescored(0.81, 300, "ab" * 32, tuple(range(57)), tuple(range(300)))
    wrong = list(range(270, 300))  # 0.9
    won = challenge(holder(digest="other"), 0.9, SPLIT, "candidate", False, "photos", again, wrong)
    assert won.takes_alias and won.reason.startswith(
        "beats version 1's 0.8100 on the same 300 test photos (of test photos sha256 "
        "abababababab…), which neither trained on, version 1 scored again on them, beyond chance"
    )
    assert won.record["challenge.photos"] == "300"
    assert won.record["challenge.rescored"] == "true"
    assert won.record["challenge.test_accuracy"] == "0.8100"
    why = "it could not be scored again on this model's test photos: no such folder"
    kept = challenge(holder(digest="other"), 0.9, SPLIT, "candidate", False, "photos", why)
    assert not kept.takes_alias and f"cannot be compared ({why}); @candidate stays" in kept.reason


def test_a_challenger_scored_photo_by_photo_beats_the_holder_only_beyond_chance():
    """The same 300 photos, each model's mistakes by position: one more photo right is
    chance (McNemar), thirty more are not; either way the line says the split."""
    holder_wrong = tuple(range(0, 60))  # 60 wrong: 0.8000
    again = Rescored(0.8, 300, "ab" * 32, holder_wrong, tuple(range(300)))
    marginal = list(range(1, 60))  # one photo fewer wrong: 0.8033
    kept = challenge(
        holder(digest="other"), 241 / 300, SPLIT, "candidate", False, "photos", again, marginal
    )
    assert not kept.takes_alias and "by more than chance (McNemar p=0.5: 1 photos right" in (
        kept.reason
    )
    assert kept.reason.endswith("@candidate stays on version 1")
    clear = list(range(30, 60))  # thirty fewer wrong: 0.9000
    won = challenge(holder(digest="other"), 0.9, SPLIT, "candidate", False, "photos", again, clear)
    assert won.takes_alias and "beyond chance (McNemar p=9.31e-10: 30 photos right" in won.reason
    assert won.record["challenge.mcnemar_p"] == "9.313e-10"


def test_only_the_photos_the_holder_was_scored_on_count_for_the_challenger_too():
    """Scored again on 100 of the challenger's 300 test photos (the rest may be the
    holder's training photos): the challenger's mistakes elsewhere do not count, and a
    challenger whose report does not say which photos it got wrong is not compared."""
    again = Rescored(0.7, 100, "ab" * 32, tuple(range(30)), tuple(range(100)))
    wrong = list(range(100, 250))  # 150 wrong, none among the 100: 1.0 there
    won = challenge(holder(digest="other"), 0.5, SPLIT, "candidate", False, "photos", again, wrong)
    assert won.takes_alias and "on the same 100 test photos" in won.reason
    assert "30 photos right by it alone, 0 by version 1 alone" in won.reason
    blind = challenge(holder(digest="other"), 0.9, SPLIT, "candidate", False, "photos", again)
    assert not blind.takes_alias and "does not say which photos it got wrong" in blind.reason
