"""Logging set-up shared by the steps' command-line entry points."""

import logging
import os


def setup_logging(level: str = "INFO") -> None:
    """Log ``level`` and above to stderr, or the level named by ``LOG_LEVEL``."""
    logging.basicConfig(
        level=os.environ.get("LOG_LEVEL", level).upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
