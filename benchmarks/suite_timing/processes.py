"""The CPU of every process a command starts, by kind: what the test suite's two cores
are spent on, servers and browsers included, which ``sitecustomize.py`` cannot see.

It reads ``/proc`` every quarter of a second while the command runs and keeps each
process's last CPU reading; a process that lives less than that is missed, and one that
ends loses its last quarter second, so the total is checked against the kernel's own
count of the command's processes (``getrusage``: those it and theirs waited for). Run it
on an idle machine: any process that starts while the command runs is counted as the
command's.

    python benchmarks/suite_timing/processes.py -- python -m pytest -n 3
"""

import argparse
import collections
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

POLL_SECONDS = 0.25
TICKS = os.sysconf("SC_CLK_TCK")
# the first that matches a command line names its kind ({0}: what the group matched)
KINDS = [
    (r"--function_to_execute (\w+)", "kfp.local task {0}"),
    (r"import sys;exec\(eval\(sys\.stdin", "pytest-xdist worker"),
    (r"-m (pipeline \w+)", "python -m {0}"),
    (r"-m (mlflow server|uvicorn)", "tracking server: {0}"),
    (r"multiprocessing\.spawn", "tracking server: a uvicorn worker"),
    (r"-m ([\w.]+)", "python -m {0}"),
    (r"^postgres|/postgres |initdb", "PostgreSQL"),
    (r"\bweed\b", "SeaweedFS (weed)"),
    (r"chromium", "Chromium"),
    (r"^\S*python\S* -c", "python -c (other)"),
]


def kind_of(command: str) -> str:
    """The kind of process a command line is (``KINDS``), else its program's name."""
    for pattern, name in KINDS:
        found = re.search(pattern, command)
        if found:
            return name.format(*found.groups())
    return command.split(" ")[0].rsplit("/", 1)[-1] or "(unnamed)"


def start_tick(stat: str) -> int:
    """When the process of a ``/proc/PID/stat`` line started, in clock ticks since boot."""
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def read_processes(since: int) -> dict[tuple[int, int], tuple[str, float]]:
    """Each process started at tick ``since`` or later: (pid, start tick) -> (command, CPU s)."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
            start = start_tick(stat)
            if start < since:
                continue
            raw = Path(f"/proc/{entry.name}/cmdline").read_bytes()
        except (OSError, ValueError):
            continue  # it ended while read
        command = raw.replace(b"\0", b" ").decode(errors="replace").strip()
        command = command or f"({stat[stat.index('(') + 1 : stat.rindex(')')]})"  # ending
        fields = stat[stat.rindex(")") + 2 :].split()  # utime and stime: fields 14 and 15
        found[(int(entry.name), start)] = (command, (int(fields[11]) + int(fields[12])) / TICKS)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="after --: the command")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    started = time.time()
    seen: dict[tuple[int, int], tuple[str, float]] = {}
    child = subprocess.Popen(command)
    since = start_tick(Path(f"/proc/{child.pid}/stat").read_text())
    while child.poll() is None:
        for process, (line, seconds) in read_processes(since).items():
            ending = line.startswith("(")  # it shows no command line: keep the one it had
            seen[process] = (seen[process][0] if ending and process in seen else line, seconds)
        time.sleep(POLL_SECONDS)
    wall = time.time() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    kernel_count = usage.ru_utime + usage.ru_stime
    cpu: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for line, seconds in seen.values():
        cpu[kind_of(line)] += seconds
        count[kind_of(line)] += 1
    print(f"{' '.join(command)}: exit {child.returncode}, {wall:.0f} s wall")
    print(
        f"CPU seconds: {kernel_count:.0f} by the kernel's count of its processes, "
        f"{sum(cpu.values()):.0f} in the {len(seen)} processes seen"
    )
    print("kind: processes, CPU seconds, share of the kernel's count")
    for kind, seconds in cpu.most_common(30):
        print(f"  {kind:58} {count[kind]:4} {seconds:8.1f} {seconds / kernel_count:6.1%}")
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
