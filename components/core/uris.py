"""Credentials in URIs: kept out of everything the project prints or stores.

``http://USER:PASSWORD@host`` works where a URI is used; wherever one is shown (a log
line, an error, a summary, a record on disk) it reads ``http://***@host``, and a secret
in its query (``?password=…``, ``&token=…``) reads ``?password=***``. Neither is ever
written into what a cluster stores (a run's parameters, an Experiment, a service).
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit, urlunsplit

# as urllib reads an authority: it ends at the first / ? or #, its user info at the last @
USERINFO = re.compile(r"(?<=://)[^/?#\s]*@")
# a query parameter that carries a secret: ?password=, &access_token=, &X-Amz-Signature=
SECRET_QUERY = re.compile(
    r"(?i)([?&;][\w.-]*(?:pass|pwd|token|secret|key|auth|sig|credential)[\w.-]*=)[^&#;\s]*"
)


def redact(text: str) -> str:
    """``text`` with the user and password of every URI in it, and every query value that
    carries a secret, replaced by ``***``."""
    return SECRET_QUERY.sub(r"\1***", USERINFO.sub("***@", text))


def holds_credentials(uri: str) -> bool:
    """Whether ``uri`` carries a user and password, or a secret in its query."""
    return redact(uri) != uri


def is_http_url(uri: str) -> bool:
    """An http(s) URL with a host, and no user, whitespace or control character."""
    try:
        parts = urlsplit(uri)
    except ValueError:  # an unclosed [IPv6] host, say
        return False
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and "@" not in parts.netloc
        and uri.isprintable()
        and not any(c.isspace() for c in uri)
    )


def split_credentials(uri: str) -> tuple[str, str | None, str | None]:
    """``uri`` without its user and password, and the two (None where it has none)."""
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri, None, None
    bare = urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    return bare, unquote(parts.username or ""), unquote(parts.password or "")
