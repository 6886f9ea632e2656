"""Logging set-up shared by the steps' command-line entry points."""

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from components.core.uris import redact

# libraries that narrate each of their own passes at INFO (the ONNX exporter's optimizer)
NARRATING_LIBRARIES = ("onnxscript", "onnx_ir")


class RedactCredentials(logging.Filter):
    """Every log line with the credentials in its URIs replaced by ``***``."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if redact(message) != message:
            record.msg, record.args = redact(message), None
        return True


def setup_logging(level: str = "INFO") -> None:
    """Log ``level`` and above to stderr, or the level named by ``LOG_LEVEL``; the
    narrating libraries' warnings only, but at DEBUG."""
    logging.basicConfig(
        level=os.environ.get("LOG_LEVEL", level).upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if logging.getLogger().level > logging.DEBUG:
        for name in NARRATING_LIBRARIES:
            logging.getLogger(name).setLevel(logging.WARNING)
    loggers = [logging.getLogger(), *logging.root.manager.loggerDict.values()]
    for logger in loggers:  # the root's handlers, and a library's own (MLflow has one)
        for handler in getattr(logger, "handlers", []):
            if not any(isinstance(f, RedactCredentials) for f in handler.filters):
                handler.addFilter(RedactCredentials())


class Shown(logging.Filter):
    """Warnings and errors, and the INFO lines of ``loggers``: what a terminal shows of a
    long run whose whole log goes to a file."""

    def __init__(self, loggers: tuple[str, ...]):
        super().__init__()
        self.loggers = loggers

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or record.name in self.loggers


@contextlib.contextmanager
def logged_to_file(path: Path, shown: tuple[str, ...]) -> Iterator[None]:
    """For a block: everything at INFO into ``path``, and on the terminal only warnings and
    the INFO lines of ``shown`` loggers; the root logger's handlers and level come back
    after it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    screen = logging.StreamHandler()
    screen.setFormatter(logging.Formatter("  %(message)s"))
    screen.addFilter(Shown(shown))
    to_file = logging.FileHandler(path, encoding="utf-8")
    to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    level, handlers = root.level, root.handlers[:]
    for handler in (screen, to_file):
        handler.addFilter(RedactCredentials())
    root.handlers, root.level = [screen, to_file], logging.INFO
    try:
        yield
    finally:
        root.handlers, root.level = handlers, level
        to_file.close()
