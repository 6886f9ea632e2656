"""Credentials in URIs: kept out of everything the project prints or stores.

``http://USER:PASSWORD@host`` works where a URI is used; wherever one is shown (a log
line, an error, a summary, a record on disk) it reads ``http://***@host``, and its query
and fragment read ``?***`` and ``#***``: what is decided from the URI's parts, not from
key names (``?%70assword=``, ``?jwt=`` and ``#password=`` are secrets as much as
``?password=``). None of the three is ever written into what a cluster stores (a run's
parameters, an Experiment, a service).
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit, urlunsplit

# as urllib reads an authority: it ends at the first / ? or #, its user info at the last @
USERINFO = re.compile(r"(?<=://)[^/?#\s]*@")
# a URI with an authority, as far as a text shows it: up to a space or a quote
URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]*")
QUERY, FRAGMENT = re.compile(r"\?[^#]*"), re.compile(r"#.*")
# outside such a URI, a query parameter that carries a secret: ?password=, &access_token=
SECRET_QUERY = re.compile(
    r"(?i)([?&;][\w.-]*(?:pass|pwd|token|secret|key|auth|sig|credential)[\w.-]*=)[^&#;\s]*"
)


def redact(text: str) -> str:
    """``text`` with the user and password, the query and the fragment of every URI in it,
    and every other query value that carries a secret, replaced by ``***``."""
    return SECRET_QUERY.sub(r"\1***", URI.sub(_redact_uri, text))


def _redact_uri(match: re.Match[str]) -> str:
    bare = USERINFO.sub("***@", match.group(0))
    return FRAGMENT.sub("#***", QUERY.sub("?***", bare, count=1), count=1)


def holds_credentials(uri: str) -> bool:
    """Whether ``uri`` carries a user and password, a query or a fragment: any of them may
    hold a secret, whatever its keys are called."""
    return redact(uri) != uri or "?" in uri or "#" in uri


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
