"""spec.json: the net's spec beside its weights, read back only as the data contract allows."""

from __future__ import annotations

import json

import pytest

from components.core.identity import sha256_of
from components.core.names import SPEC_FILE
from components.networks.spec import MOST_SPEC_BYTES, read_spec, write_spec
from tests.support.models import SPEC as TUTORIAL_SPEC

SPEC = {**TUTORIAL_SPEC, "mirror_average": True}


def test_a_written_spec_reads_back_and_its_digest_is_the_files(tmp_path):
    digest = write_spec(tmp_path, SPEC)
    assert digest == sha256_of(tmp_path / SPEC_FILE)
    assert read_spec(tmp_path / SPEC_FILE) == SPEC


def test_a_spec_saved_before_the_view_flags_reads_with_them_off(tmp_path):
    older = {key: value for key, value in SPEC.items() if not key.endswith("_average")}
    (tmp_path / SPEC_FILE).write_text(json.dumps(older))
    spec = read_spec(tmp_path / SPEC_FILE)
    assert (spec["mirror_average"], spec["shift_average"]) == (False, False)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"\xff\xfe not json", "expected a JSON spec in"),
        (b" " * (MOST_SPEC_BYTES + 1), f"expected a spec of at most {MOST_SPEC_BYTES} bytes"),
        (json.dumps({**SPEC, "channels": 2}).encode(), "channels 1 or 3, found 2"),
        (json.dumps({**SPEC, "model": None}).encode(), "expected a model name"),
        (json.dumps([SPEC]).encode(), "expected a mapping of image fields"),
    ],
    ids=["not JSON", "oversized", "two channels", "no net name", "a list"],
)
def test_a_spec_outside_the_contract_is_refused_naming_it(tmp_path, content, said):
    (tmp_path / SPEC_FILE).write_bytes(content)
    with pytest.raises(ValueError, match=said):
        read_spec(tmp_path / SPEC_FILE)
