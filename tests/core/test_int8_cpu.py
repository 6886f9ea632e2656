"""Which CPUs multiply int8 exactly, read from the kernel's CPU description as Linux
writes it on x86 (``flags``) and on Arm (``Features``)."""

from __future__ import annotations

import pytest

from components.core.int8_cpu import cpu_flags, multiplies_int8_exactly

X86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu avx2 {extra}\n\nprocessor\t: 1\n"
ARM = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd {extra} crc32\n"


@pytest.mark.parametrize(
    ("text", "exact"),
    [
        (X86.format(extra="avx512f avx512_vnni avx512_bf16"), True),  # Zen 4/5, Cascade Lake on
        (X86.format(extra="avx_vnni"), True),  # Alder Lake: VNNI without AVX-512
        (X86.format(extra="amx_tile amx_int8"), True),
        (X86.format(extra="avx512f avx512bw"), False),  # Skylake-SP: saturating pairs only
        (ARM.format(extra="asimddp"), True),
        (ARM.format(extra="asimdhp"), False),
        ("", False),
    ],
)
def test_int8_dot_products_are_told_by_the_cpus_flags(tmp_path, text, exact):
    info = tmp_path / "cpuinfo"
    info.write_text(text)
    assert multiplies_int8_exactly(info) is exact


def test_a_kernel_that_says_nothing_leaves_the_float32_graph(tmp_path):
    assert cpu_flags(tmp_path / "absent") == set()
    assert not multiplies_int8_exactly(tmp_path / "absent")
