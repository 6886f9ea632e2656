"""The steps' logging: every line with the credentials in its URIs replaced by ***."""

from __future__ import annotations

import logging

from components.core.logs import RedactCredentials, setup_logging


def test_a_log_line_holding_a_uri_is_redacted_before_it_is_written():
    record = logging.LogRecord("x", logging.INFO, "f", 1, "at %s", ("http://u:pw@h",), None)
    RedactCredentials().filter(record)
    assert record.getMessage() == "at http://***@h"


def test_the_steps_logging_redacts_every_handlers_lines(capsys):
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = [logging.StreamHandler()]
    try:
        setup_logging()
        logging.getLogger("mlflow.store").warning("cannot reach http://me:pw@mlflow:5000")
    finally:
        root.handlers = saved
    err = capsys.readouterr().err
    assert "http://***@mlflow:5000" in err and "pw" not in err


def test_a_long_runs_terminal_shows_its_chosen_lines_and_the_file_holds_them_all(tmp_path, capsys):
    from components.core.logs import logged_to_file

    root = logging.getLogger()
    before = root.handlers[:]
    with logged_to_file(tmp_path / "run.log", ("shown.here",)):
        logging.getLogger("shown.here").info("trial 1 started")
        logging.getLogger("elsewhere").info("found 8000 image files")
        logging.getLogger("elsewhere").warning("a warning at http://u:pw@host")
    screen = capsys.readouterr().err
    assert "  trial 1 started" in screen and "found 8000" not in screen
    assert "a warning at http://***@host" in screen
    kept = (tmp_path / "run.log").read_text()
    assert "found 8000 image files" in kept and "pw@" not in kept
    assert root.handlers == before
