"""Run a command and measure it: wall seconds, peak memory, its JSON output."""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_BASELINE = REPO.parent / "shared/bench/seed_reference.py"


@dataclass
class Measured:
    wall_seconds: float
    peak_rss_mb: float  # the largest single process of the command's tree
    stdout: str

    def last_json(self) -> dict:
        """The last line of stdout that is a JSON object (the scripts print one)."""
        for line in reversed(self.stdout.strip().splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        raise ValueError(f"no JSON line in the output: {self.stdout[-500:]}")


def measure(command: list[str], cwd: Path = REPO) -> Measured:
    """Run ``command`` in a fresh child, so that its peak RSS is its own."""
    wrapper = (
        "import json, resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, text=True)\n"
        "wall = time.perf_counter() - t\n"
        "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
        "sys.stdout.write(done.stdout)\n"
        "print(json.dumps({'__measure__': [wall, rss, done.returncode]}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *command],
        cwd=cwd,
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    body, _, tail = done.stdout.rstrip().rpartition("\n")
    wall, rss, code = json.loads(tail)["__measure__"]
    if code:
        raise RuntimeError(f"{' '.join(command)} exited {code}")
    return Measured(wall, rss, body)


def machine() -> str:
    cores = len(os.sched_getaffinity(0))
    memory = resource.getpagesize() * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu_model()}, {cores} cores, {memory:.0f} GiB, Python {platform.python_version()}"


def cpu_model() -> str:
    """The CPU's model name and the vector and matrix extensions the speed depends on."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    pairs = (line.split(":", 1) for line in info.splitlines()[:40] if ":" in line)
    fields = {key.strip(): value.strip() for key, value in pairs}
    name = " ".join(fields.get("model name", platform.machine()).split())
    flags = set(fields.get("flags", "").split())
    wanted = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16", "amx_tile")
    return f"{name} ({', '.join(f for f in wanted if f in flags) or 'no AVX2'})"


def base_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--baseline",
        type=Path,
        default=DEFAULT_BASELINE,
        help="the tutorial script, run as it is (default: %(default)s)",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=REPO / "runs/bench",
        help="scratch space (default: %(default)s)",
    )
    return parser


def report(stage: str, rows: list[dict], ratios: dict[str, float]) -> None:
    """Print a table and one JSON line with everything."""
    print(f"\n{stage} on {machine()}")
    keys = list(dict.fromkeys(k for row in rows for k in row))
    print(" | ".join(keys))
    for row in rows:
        print(" | ".join(_cell(row.get(k)) for k in keys))
    for name, value in ratios.items():
        print(f"{name}: {value:.2f}x")
    print(json.dumps({"stage": stage, "machine": machine(), "rows": rows, "ratios": ratios}))


def _cell(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
