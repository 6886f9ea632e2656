"""A step's command line ends on an error in one line, Ctrl-C in 130, a defect in a trace."""

from __future__ import annotations

import pytest
from botocore.exceptions import EndpointConnectionError
from mlflow.exceptions import MlflowException

from components.core.errors import one_line_errors


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (ValueError("expected epochs >= 1,\n  found 0"), "error: expected epochs >= 1, found 0"),
        (FileExistsError("refusing to replace /"), "error: refusing to replace /"),
        (
            MlflowException("API request to http://u:pw@h/api failed"),
            "error: API request to http://***@h/api failed",
        ),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:9"), "error: Could not connect"),
    ],
)
def test_what_a_user_can_fix_ends_in_one_line(error, line):
    with pytest.raises(SystemExit) as stopped, one_line_errors():
        raise error
    assert str(stopped.value).startswith(line) and "\n" not in str(stopped.value)
    assert "pw" not in str(stopped.value)


def test_ctrl_c_ends_with_status_130():
    with pytest.raises(SystemExit) as stopped, one_line_errors():
        raise KeyboardInterrupt
    assert stopped.value.code == 130


def test_sigterms_stop_ends_with_status_143():
    from components.core.errors import Terminated

    with pytest.raises(SystemExit) as stopped, one_line_errors():
        raise Terminated("SIGTERM")
    assert stopped.value.code == 143


def test_a_defect_keeps_its_traceback():
    with pytest.raises(TypeError), one_line_errors():
        raise TypeError("unsupported operand")


def test_a_refusal_shows_a_value_briefly_never_whole():
    from components.core.errors import brief

    assert brief(list(range(10**6))) == "a list of 1000000 items"
    assert brief({"a": 1}) == "a mapping of 1 keys"
    assert brief("x" * 10**6) == repr("x" * 60) + "…"
    assert brief(3.5) == "3.5" and brief(None) == "None"
    assert brief(object()) == "a object"
