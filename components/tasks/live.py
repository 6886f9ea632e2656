"""A short live account of a kfp.local run: one line as each task starts and ends, and
one as each epoch of a training task ends.

kfp.local prints every task's full input, output and log; all of it goes to a log file,
and the screen gets the task lines, their times, each epoch's losses and validation
accuracy as it ends and, for a failed task, its error.
"""

from __future__ import annotations

import io
import json
import re
import time
from typing import TextIO

ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
TASK_STARTED = re.compile(r"Executing task '(?P<task>[^']+)'")
TASK_ENDED = re.compile(r"Task '(?P<task>[^']+)' finished with status (?P<status>\w+)")
TASK_CACHED = re.compile(r"Task (?P<task>\S+) cache hit")
ERROR_LINE = re.compile(r"^(\w+\.)*\w*(Error|Exception|Exit)\b(: .*)?$")
# the train step's log line at each epoch's end (components.training.loop), in the step's
# own format or kfp.local's executor's
EPOCH_ENDED = re.compile(r"(?:loop|INFO\]): epoch (?P<epoch>\d+/\d+) (?P<metrics>train_loss .*)$")
SHOWN_METRICS = ("train_loss", "val_loss", "val_accuracy")  # an epoch's line on the screen
COMBINATION_PREFIX = "sweep combination: "  # a sweep task's first line: what it varies


def announce_combination(combination: str) -> None:
    """Print the line that names a sweep task's combination in the live account."""
    if combination:
        print(COMBINATION_PREFIX + combination, flush=True)


def _epoch_summary(line: re.Match[str]) -> str:
    """``3/10: train_loss 0.61, val_loss 0.58, val_accuracy 0.7`` from an epoch's log line."""
    metrics = dict(pair.split(" ", 1) for pair in line["metrics"].split(", ") if " " in pair)
    shown = ", ".join(f"{name} {metrics[name]}" for name in SHOWN_METRICS if name in metrics)
    return f"{line['epoch']}: {shown}"


def _varied(task_lines: list[str]) -> str:
    """`` (lr=0.003 model=bn_cnn)`` from a sweep task's announcement, else ``""``."""
    for line in task_lines:
        if line.startswith(COMBINATION_PREFIX):
            varied = json.loads(line.removeprefix(COMBINATION_PREFIX))
            return " (" + " ".join(f"{k}={v}" for k, v in varied.items()) + ")"
    return ""


class LiveView(io.TextIOBase):
    """A text stream for kfp.local's output: all of it to ``log``, a summary to ``screen``.

    Args:
        log: the full log.
        screen: where the short account goes (the terminal).
        verbose: copy everything to ``screen`` too.
    """

    def __init__(self, log: TextIO, screen: TextIO, verbose: bool = False):
        self.log, self.screen, self.verbose = log, screen, verbose
        self.failure: str | None = None  # "task: error line" of the first failed task
        self._partial = ""
        self._started: dict[str, float] = {}
        self._running = ""  # the task started last
        self._task_lines: list[str] = []

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.log.write(text)
        if self.verbose:
            self.screen.write(text)
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            self._read(ANSI_COLOUR.sub("", line).strip())
        return len(text)

    def flush(self) -> None:
        self.log.flush()
        self.screen.flush()

    def _read(self, line: str) -> None:
        if started := TASK_STARTED.search(line):
            self._running = started["task"]  # kfp.local runs one task at a time
            self._started[started["task"]] = time.monotonic()
            self._task_lines = []
            self._say(f"{started['task']:<16} started")
        elif ended := TASK_ENDED.search(line):
            task, status = ended["task"], ended["status"].lower()
            seconds = time.monotonic() - self._started.get(task, time.monotonic())
            self._say(f"{task:<16} {status} in {seconds:.1f} s{_varied(self._task_lines)}")
            if status != "success" and self.failure is None:
                self.failure = f"{task}: {self._error_line()}"
        elif cached := TASK_CACHED.search(line):
            self._say(f"{cached['task']:<16} reused from kfp.local's cache")
        elif line:
            self._task_lines.append(line)
            if ended_epoch := EPOCH_ENDED.search(line):
                self._say(f"{self._running:<16} epoch {_epoch_summary(ended_epoch)}")

    def _error_line(self) -> str:
        """The failed task's last exception line, else its last line."""
        errors = [line for line in self._task_lines if ERROR_LINE.match(line)]
        return (errors or self._task_lines or ["(no output)"])[-1]

    def _say(self, line: str) -> None:
        if not self.verbose:
            self.screen.write(f"  {line}\n")
            self.screen.flush()
