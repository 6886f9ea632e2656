"""Kubernetes quantities: Kubernetes' own parser, KFP's forms, limits of twice a request."""

from __future__ import annotations

import pytest

from components.cluster.quantities import format_bytes, memory_bytes, millicores, twice_memory


@pytest.mark.parametrize(
    ("request_", "limit"),
    [("512Mi", "1Gi"), ("4Gi", "8Gi"), ("1Gi", "2Gi"), ("512M", "1000000Ki"), ("3", "6")],
)
def test_a_memory_limit_is_twice_its_request_in_the_largest_whole_unit(request_, limit):
    assert twice_memory(request_) == limit
    assert memory_bytes(limit) == 2 * memory_bytes(request_)


def test_bytes_are_written_in_binary_units_only_when_whole():
    assert [format_bytes(n) for n in (2**30, 3 * 2**20, 1000, 2**63)] == [
        "1Gi",
        "3Mi",
        "1000",
        "8Ei",
    ]


@pytest.mark.parametrize(
    ("cpu", "expected"), [("3", 3000), ("1.5", 1500), ("500m", 500), ("0.25", 250)]
)
def test_cpu_quantities_in_millicores(cpu, expected):
    assert millicores(cpu) == expected


@pytest.mark.parametrize(
    ("memory", "message"),
    [
        ("99999999999999999999E", "at most 8Ei"),
        ("-1Gi", "quantity such as 12Gi"),
        ("1.5Gi", "quantity such as 12Gi"),  # Kubernetes takes it, KFP's compiler does not
        ("12GB", "quantity such as 12Gi"),
        ("", "quantity such as 12Gi"),
    ],
)
def test_memory_kubernetes_or_kfp_would_refuse_is_refused(memory, message):
    with pytest.raises(ValueError, match=message):
        memory_bytes(memory)


@pytest.mark.parametrize("cpu", ["1", "0.5", "500m", "1.5", ".5", "3", "250m"])
@pytest.mark.parametrize("memory", ["12Gi", "512Mi", "1G", "1073741824", "7Ei", "7E", "1Ki"])
def test_a_quantity_reads_as_the_kubernetes_clients_own_parser_reads_it(cpu, memory):
    from kubernetes.utils import parse_quantity

    from components.cluster.quantities import memory_bytes, millicores

    assert millicores(cpu) == parse_quantity(cpu) * 1000
    assert memory_bytes(memory) == parse_quantity(memory)
