"""Kubernetes resource quantities: checked against the forms KFP's compiler and Kubernetes
accept, read as Kubernetes reads them (its suffixes, decimal and binary), doubled for
limits, written back. Plain Python: a step that places a pod loads no Kubernetes client
(tests/cluster/test_quantities.py holds it to the client's own parser)."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

# the forms KFP's compiler accepts (kfp.dsl.PipelineTask.set_cpu_limit, set_memory_limit)
KFP_CPU = re.compile(r"([0-9]*[.])?[0-9]+m?")
KFP_MEMORY = re.compile(r"[0-9]+(E|Ei|P|Pi|T|Ti|G|Gi|M|Mi|K|Ki)?")
MOST_MILLICORES = 10**9  # a million cores: beyond any node
MOST_BYTES = 2**63 - 1  # Kubernetes reads a memory quantity into an int64 of bytes
BINARY_SUFFIXES = ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki")  # largest first
# what each suffix multiplies by, as Kubernetes' resource.Quantity reads it
FACTORS = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    **{suffix: Decimal(1000) ** power for power, suffix in enumerate("KMGTPE", 1)},
    **{f"{suffix}i": Decimal(1024) ** power for power, suffix in enumerate("KMGTPE", 1)},
}
QUANTITY = re.compile(r"([0-9]*\.?[0-9]+)(m|[KMGTPE]i?)?")


def millicores(cpu: str) -> int:
    """A CPU quantity ("3", "1.5", "500m") in thousandths of a core.

    Raises:
        ValueError: ``cpu`` is not a CPU quantity KFP and Kubernetes take, or is not
            above 0 and at most a million cores.
    """
    if not KFP_CPU.fullmatch(cpu):
        raise ValueError(f"expected a CPU quantity such as 3, 1.5 or 500m, found {cpu!r}")
    thousandths = _parsed(cpu) * 1000
    if thousandths != thousandths.to_integral_value():
        raise ValueError(f"expected a CPU quantity in whole millicores, found {cpu!r}")
    if not 1 <= thousandths <= MOST_MILLICORES:
        raise ValueError(
            f"expected a CPU request above 0 and at most a million cores, found {cpu!r}"
        )
    return int(thousandths)


def memory_bytes(memory: str, what: str = "memory") -> int:
    """A memory quantity ("12Gi", "512M", "1073741824") in bytes; ``what`` names it in errors.

    Raises:
        ValueError: ``memory`` is not a memory quantity KFP and Kubernetes take.
    """
    if not KFP_MEMORY.fullmatch(memory):
        raise ValueError(
            f"expected the {what} as a quantity such as 12Gi or 512Mi (a whole number, then "
            f"one of E, P, T, G, M, K, with or without i), found {memory!r}"
        )
    number = _parsed(memory)
    if number > MOST_BYTES:
        raise ValueError(f"expected the {what} as a quantity of at most 8Ei, found {memory!r}")
    return int(number)


def twice_cpu(cpu: str) -> str:
    """A CPU limit of twice ``cpu``: "6" for "3", "3000m" for "1.5", "1" for "500m"."""
    doubled = 2 * millicores(cpu)
    return str(doubled // 1000) if doubled % 1000 == 0 else f"{doubled}m"


def twice_memory(memory: str) -> str:
    """A memory limit of twice ``memory``: "1Gi" for "512Mi", "8Gi" for "4Gi"."""
    return format_bytes(2 * memory_bytes(memory))


def format_bytes(count: int) -> str:
    """``count`` bytes as a quantity in the largest binary unit that holds it whole."""
    for power, suffix in zip(range(60, 0, -10), BINARY_SUFFIXES, strict=True):
        if count % 2**power == 0:
            return f"{count >> power}{suffix}"
    return str(count)


def _parsed(quantity: str) -> Decimal:
    """``quantity`` (already of KFP's forms) as a number of cores or bytes."""
    match = QUANTITY.fullmatch(quantity)
    if match is None:
        raise ValueError(f"expected a Kubernetes quantity, found {quantity!r}")
    number, suffix = match.groups()
    try:
        return Decimal(number) * FACTORS[suffix or ""]
    except InvalidOperation:
        raise ValueError(f"expected a Kubernetes quantity, found {quantity!r}") from None
