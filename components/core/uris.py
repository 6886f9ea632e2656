"""Credentials in URIs: kept out of everything the project prints or stores.

``http://USER:PASSWORD@host`` works where a URI is used; wherever one is shown (a log
line, an error, a summary, a record on disk) it reads ``http://***@host``, and its path
parameters, query and fragment read ``;***``, ``?***`` and ``#***``: what is decided from
the URI's parts, not from key names (``?%70assword=``, ``?jwt=``, ``;jwt=`` and
``#password=`` are secrets as much as ``?password=``), whatever characters they hold (RFC
3986 allows ``'`` in user info: a URI runs to white space). A reference without a scheme,
as a library shows a request (``url: /api?jwt=S``), loses the same parts. None of them is
ever written into what a cluster stores (a run's parameters, an Experiment, a service).
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

# a URI with an authority, as far as a text shows it: up to white space. Its user info
# runs to the last @ before its path, across a ? or a # (urllib would read "PW" of
# "http://alice:PW#x@host" as a port, and a text would show it whole); and across white
# space where what comes before it is no host:port ("alice:PW x@host"), so that a
# password holding a space or a tab is hidden whole too. Its authority then ends at the
# first / ? # or white space
URI = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)"
    r"(?:(?P<userinfo>[^/\s]*)@|(?P<spaced>[^/\s:@]*:(?![0-9]*(?:[/?#;,.)'\"\]>\s]|$))[^/\n]*)@)?"
    r"(?P<authority>[^/?#\s@]*)(?P<rest>\S*)"
)
# a reference without a scheme, as a library's message shows a request: /api;p?q#f
REFERENCE = re.compile(r"(?<!\S)/[^\s?#;]*[?#;]\S+")
PARAMS = re.compile(r";[^/?#]*")  # a path segment's parameters: /api;jwt=S/health
# outside such a URI, a query parameter that carries a secret: ?password=, &access_token=
SECRET_QUERY = re.compile(
    r"(?i)([?&;][\w.-]*(?:pass|pwd|token|secret|key|auth|sig|credential)[\w.-]*=)[^&#;\s]*"
)


def redact(text: str) -> str:
    """``text`` with the user and password, the path parameters, the query and the
    fragment of every URI in it (and of every reference without a scheme), and every other
    query value that carries a secret, replaced by ``***``."""
    text = URI.sub(_redact_uri, text)
    return SECRET_QUERY.sub(r"\1***", REFERENCE.sub(lambda m: _redact_path(m.group(0)), text))


def _redact_uri(match: re.Match[str]) -> str:
    scheme, authority, rest = match.group("scheme", "authority", "rest")
    if _userinfo(match) is not None:
        authority = "***@" + authority
    return scheme + authority + _redact_path(rest)


def _userinfo(match: re.Match[str]) -> str | None:
    """A matched URI's user and password, if it has them."""
    return match["userinfo"] if match["userinfo"] is not None else match["spaced"]


def _redact_path(path: str) -> str:
    """``path`` (what follows an authority) with its parameters, query and fragment hidden."""
    path, hash_sign, _ = path.partition("#")
    path, question_mark, _ = path.partition("?")
    hidden = PARAMS.sub(";***", path)
    if question_mark:
        hidden += "?***"
    if hash_sign:
        hidden += "#***"
    return hidden


def holds_credentials(uri: str) -> bool:
    """Whether ``uri`` carries a user and password, path parameters, a query or a
    fragment: any of them may hold a secret, whatever its keys are called."""
    return redact(uri) != uri or any(mark in uri for mark in "?#;")


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
    """``uri`` without its user and password, and the two (None where it has none): the
    user info ``redact`` hides, a password holding a space or a ``#`` included."""
    match = URI.fullmatch(uri)
    userinfo = None if match is None else _userinfo(match)
    if match is None or userinfo is None:
        return uri, None, None
    user, _, password = userinfo.partition(":")
    return match["scheme"] + match["authority"] + match["rest"], unquote(user), unquote(password)
