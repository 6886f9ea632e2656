"""How a step's command line ends on an error: one line that says what is wrong, not a trace.

Exit status 1 for what a user can fix (a refused setting, a missing or foreign folder, a
file that is not what it should be, a server that does not answer), 130 for Ctrl-C and 143
for SIGTERM (128 plus the signal's number, as a shell reports it). The traceback is logged
at DEBUG (``LOG_LEVEL=DEBUG`` shows it).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from components.core.uris import redact

log = logging.getLogger(__name__)
STOPPED_BY_CTRL_C, STOPPED_BY_SIGTERM = 130, 143


class Terminated(KeyboardInterrupt):
    """SIGTERM's stop, taken as Ctrl-C's (a run ends KILLED), with SIGTERM's exit status."""


USER_ERRORS = (ValueError, OSError, LookupError, MemoryError, RuntimeError)
# the services a step talks to: their errors say what the service answered, or that it did not
SERVICE_ERRORS = ("mlflow.", "botocore.", "boto3.", "requests.", "urllib3.")


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn a user error into ``SystemExit('error: …')``, Ctrl-C into exit status 130 and
    SIGTERM's stop (``Terminated``) into 143."""
    try:
        yield
    except Terminated:
        raise SystemExit(STOPPED_BY_SIGTERM) from None
    except KeyboardInterrupt:
        raise SystemExit(STOPPED_BY_CTRL_C) from None
    except Exception as err:
        if not (isinstance(err, USER_ERRORS) or type(err).__module__.startswith(SERVICE_ERRORS)):
            raise  # a defect of the project: its traceback is what fixes it
        log.debug("the step stopped", exc_info=True)
        message = printable(redact(" ".join(str(err).split()))) or type(err).__name__
        raise SystemExit(f"error: {message}") from None


def printable(text: str) -> str:
    """``text`` as one line a terminal shows as it is: control characters (newline, tab,
    escape sequences, bidirectional overrides) escaped, as ``\\n``, ``\\x1b``, ``\\u202e``."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def brief(value: object) -> str:
    """``value`` as a refusal shows it, never formatted whole: a collection by its size, a
    string by its first 60 characters."""
    if isinstance(value, dict):
        return f"a mapping of {len(value)} keys"
    if isinstance(value, list | tuple | set):
        return f"a list of {len(value)} items"
    if isinstance(value, str):
        return repr(value[:60]) + ("…" if len(value) > 60 else "")
    if isinstance(value, int | float | bool) or value is None:
        return repr(value)
    return f"a {type(value).__name__}"
