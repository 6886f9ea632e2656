"""Kubernetes object names, as the API server's validation reads them."""

from __future__ import annotations

import pytest

from components.cluster.object_names import is_dns_label, is_dns_subdomain, is_service_name


@pytest.mark.parametrize("name", ["team-a", "a", "0ab", "a" * 63])
def test_namespaces_kubernetes_takes(name):
    assert is_dns_label(name)


@pytest.mark.parametrize("name", ["", "Team", "-a", "a-", "a.b", "a/..", "a" * 64, "a\nb"])
def test_namespaces_kubernetes_refuses(name):
    assert not is_dns_label(name)


def test_a_services_name_starts_with_a_letter_and_may_be_held_shorter():
    assert is_service_name("dogs-vs-cats") and not is_service_name("0dogs")
    assert not is_service_name("d" * 54, longest=53)


@pytest.mark.parametrize(
    ("name", "taken"),
    [
        ("team-a.s3", True),
        ("a" * 253, True),
        ("a" * 254, False),
        ("../x\ny", False),
        ("Team Secret", False),
        ("", False),
    ],
)
def test_object_names(name, taken):
    assert is_dns_subdomain(name) is taken
