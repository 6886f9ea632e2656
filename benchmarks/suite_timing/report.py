"""The timed functions' calls, the processes by kind, and when each worker ran its last
test, from the lines ``sitecustomize.py`` and ``suite_timeline.py`` wrote."""

import collections
import json
import sys
from pathlib import Path

from sitecustomize import RECORDS


def main(folder: Path) -> None:
    lines = [json.loads(line) for path in folder.glob("*.jsonl") for line in path.open()]
    calls = collections.defaultdict(list)
    processes = collections.defaultdict(list)
    for line in (line for line in lines if "function" in line):
        calls[line["function"]].append(line["seconds"])
    for line in (line for line in lines if "process" in line):
        command = line["process"]
        kind = command if command.startswith("kfp task") else Path(command).name
        processes["python -c (pytest-xdist's workers)" if kind == "-c" else kind].append(
            line["cpu"]
        )
    print("function: calls, seconds in all, seconds a call (wall)")
    for name, spent in sorted(calls.items(), key=lambda item: -sum(item[1])):
        print(f"  {name:50} {len(spent):4} {sum(spent):8.1f} {sum(spent) / len(spent):6.2f}")
    print("processes: count, CPU seconds")
    for kind, cpu in sorted(processes.items(), key=lambda item: -sum(item[1]))[:15]:
        print(f"  {kind:50} {len(cpu):4} {sum(cpu):8.1f}")
    tests = [line for line in lines if "worker" in line]
    if tests:
        first = min(test["start"] for test in tests)
        for worker in sorted({test["worker"] for test in tests}):
            mine = [test for test in tests if test["worker"] == worker]
            last = max(mine, key=lambda test: test["end"])
            print(f"{worker} ends at {last['end'] - first:.0f} s, last: {last['test']}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else RECORDS))
