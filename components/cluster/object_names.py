"""The names Kubernetes gives its objects, as its API validation reads them."""

from __future__ import annotations

import re

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # RFC 1123 label: namespaces
_LABEL_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")  # RFC 1035 label: Services
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")  # most other objects


def is_dns_label(name: str, longest: int = 63) -> bool:
    """A namespace's name: lowercase letters, digits and -, at most ``longest``."""
    return bool(_LABEL.fullmatch(name)) and len(name) <= longest


def is_service_name(name: str, longest: int = 63) -> bool:
    """A Service's name (an InferenceService's too): a DNS label that starts with a letter."""
    return bool(_LABEL_1035.fullmatch(name)) and len(name) <= longest


def is_dns_subdomain(name: str) -> bool:
    """A secret's, service account's or runtime's name: lowercase letters, digits, - and .,
    at most 253."""
    return bool(_SUBDOMAIN.fullmatch(name)) and len(name) <= 253


_QUALIFIED_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")  # at most 63


def is_extended_resource_name(name: str) -> bool:
    """A container resource beyond cpu and memory (``nvidia.com/gpu``), as Kubernetes'
    ``IsExtendedResourceName`` reads it: a ``domain/name`` outside ``kubernetes.io/``, not
    starting ``requests.``, and a qualified name with ``requests.`` before it (the name
    its ResourceQuota counts it under)."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, short = f"requests.{name}".partition("/")
    return is_dns_subdomain(prefix) and bool(_QUALIFIED_NAME.fullmatch(short)) and len(short) <= 63
