"""Whether this CPU multiplies int8 exactly: the dot-product instructions ONNX Runtime's
int8 kernels use where they exist (x86 VNNI, Arm's dot product).

Without them, x86 CPUs multiply uint8 activations by int8 weights in pairs summed into
16 bits (``vpmaddubsw``), which saturates for 8-bit weights: the int8 graph's answers
there can differ from those it was judged by, so the default runtime scores the float32
graph on such a CPU.
"""

from __future__ import annotations

from pathlib import Path

CPU_INFO = Path("/proc/cpuinfo")
# AVX512-VNNI, AVX-VNNI, AMX's int8 tiles; Arm's SDOT/UDOT
EXACT_INT8_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8", "asimddp"})


def cpu_flags(cpu_info: Path = CPU_INFO) -> set[str]:
    """The first CPU's feature flags (x86 ``flags``, Arm ``Features``); none where the
    kernel does not say (another OS)."""
    try:
        lines = cpu_info.read_text(errors="replace").splitlines()
    except OSError:
        return set()
    for line in lines:
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def multiplies_int8_exactly(cpu_info: Path = CPU_INFO) -> bool:
    """Whether this CPU has an int8 dot-product instruction (``EXACT_INT8_FLAGS``)."""
    return bool(cpu_flags(cpu_info) & EXACT_INT8_FLAGS)
