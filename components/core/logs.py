"""Logging set-up shared by the steps' command-line entry points."""

import logging
import os


def setup_logging() -> None:
    """Log INFO and above to stderr, or the level named by ``LOG_LEVEL``."""
    logging.basicConfig(
        level=os.environ.get("LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
