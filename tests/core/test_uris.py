"""Credentials in URIs: split off where a URI is used, replaced by *** wherever one is shown."""

from __future__ import annotations

import pytest

from components.core.uris import holds_credentials, redact, split_credentials


def test_every_uri_in_a_text_loses_its_user_and_password():
    text = "from http://me:p%40ss@host:5000/api and s3://KEY:SECRET@bucket/x, not a@b.c"
    assert redact(text) == "from http://***@host:5000/api and s3://***@bucket/x, not a@b.c"


def test_a_uri_splits_into_the_bare_uri_and_its_credentials():
    assert split_credentials("http://me:p%40ss@host:5000/api") == (
        "http://host:5000/api",
        "me",
        "p@ss",
    )
    assert split_credentials("https://host/x") == ("https://host/x", None, None)
    assert split_credentials("sqlite:///runs/mlflow.db") == ("sqlite:///runs/mlflow.db", None, None)


def test_a_password_with_an_unencoded_at_is_redacted_whole_as_urllib_reads_it():
    uri = "http://bob:p@ss@word@mlflow:5000/path?q=a@b"
    assert redact(f"tracking at {uri}.") == "tracking at http://***@mlflow:5000/path?***"
    assert split_credentials(uri) == ("http://mlflow:5000/path?q=a@b", "bob", "p@ss@word")


def test_an_http_url_has_a_host_and_nothing_a_header_or_a_pod_could_not_take():
    from components.core.uris import is_http_url

    assert is_http_url("http://mlflow.mlflow.svc.cluster.local:5000")
    assert is_http_url("https://kubeflow.example.com/pipeline")
    for bad in (
        "mlflow:5000",
        "sqlite:///x.db",
        "http://",
        "http://a b",
        "http://a\nX: 1",
        "http://bob:pw@host",
        "http://[::1",
    ):
        assert not is_http_url(bad), bad


def test_a_query_or_a_fragment_is_redacted_and_counts_as_credentials_whatever_its_keys():
    """Decided from the URI's parts: a rule matching key names always misses one."""
    from components.core.uris import holds_credentials

    for uri, shown in [
        ("http://mlflow:5000/?password=s3cret&x=1&access_token=t0k", "http://mlflow:5000/?***"),
        ("http://mlflow:5000/?%70assword=S", "http://mlflow:5000/?***"),
        ("http://mlflow:5000/#password=S", "http://mlflow:5000/#***"),
        ("http://mlflow:5000/api?jwt=S#frag", "http://mlflow:5000/api?***#***"),
    ]:
        assert redact(f"at {uri} now") == f"at {shown} now"
        assert holds_credentials(uri), uri
    assert holds_credentials("http://u:p@mlflow") and holds_credentials("http://mlflow/?")
    assert not holds_credentials("http://mlflow:5000/api")
    assert redact("did it work? yes #1") == "did it work? yes #1"  # no URI, nothing hidden


def test_a_password_holding_a_quote_or_angle_brackets_is_redacted_whole():
    """RFC 3986 allows ' unencoded in user info: a URI runs to white space, not to a quote."""
    from components.core.uris import holds_credentials

    for password in ("PW'x", 'PW"x', "PW<x", "PW>x"):
        uri = f"http://alice:{password}@mlflow:5000"
        assert redact(f"tracking_uri={uri}") == "tracking_uri=http://***@mlflow:5000"
        assert redact(f"found {uri}/api?q=1 there") == "found http://***@mlflow:5000/api?*** there"
        assert holds_credentials(uri), uri


def test_path_parameters_are_redacted_and_count_as_credentials():
    from components.core.uris import holds_credentials

    assert redact("at http://mlflow:5000/;jwt=S/api now") == "at http://mlflow:5000/;***/api now"
    assert holds_credentials("http://mlflow:5000/;jwt=S")


def test_a_request_shown_without_its_scheme_loses_its_parameters_query_and_fragment():
    """As urllib3 shows a request that failed: ``url: /?jwt=S/health``."""
    assert redact("with url: /?jwt=S/health (Caused by") == "with url: /?*** (Caused by"
    assert redact("url: /;jwt=S/health") == "url: /;***/health"
    assert redact("url: /api/2.0/runs#t=S") == "url: /api/2.0/runs#***"
    assert redact("found /data/raw; expected a file") == "found /data/raw; expected a file"


@pytest.mark.parametrize("password", ["PW x", "PW\tx", "PW#x", "PW?x", "PW#x y"])
def test_a_password_holding_white_space_a_hash_or_a_question_mark_is_hidden_whole(password):
    uri = f"http://alice:{password}@mlflow.example:5000/api"
    shown = redact(f"refused: tracking_uri={uri} holds a password")
    assert shown == "refused: tracking_uri=http://***@mlflow.example:5000/api holds a password"
    assert holds_credentials(uri)


@pytest.mark.parametrize(
    "text",
    [
        "see http://mlflow.example/api then mail bob@example.com; http://h:80 is up",
        "no model 'x' at http://127.0.0.1:5000; it holds: dogs-vs-cats (@candidate → 1)",
        "at http://mlflow:5000, then alice@example.com",
    ],
)
def test_text_after_a_uri_keeps_its_own_words_and_addresses(text):
    assert redact(text) == text


@pytest.mark.parametrize("password", ["PW x", "PW#x", "PW?x", "p%40ss"])
def test_such_a_password_is_split_off_before_the_uri_goes_anywhere(password):
    uri = f"http://alice:{password}@mlflow.example:5000/api?x=1"
    bare, user, secret = split_credentials(uri)
    assert bare == "http://mlflow.example:5000/api?x=1" and user == "alice"
    assert secret == password.replace("%40", "@")
