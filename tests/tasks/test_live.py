"""The local run's screen: a line per task start and end and per epoch, the full log elsewhere."""

from __future__ import annotations

import io

from components.tasks.live import LiveView

RUN = [
    "\x1b[96mExecuting task 'download-op'\x1b[0m\n",
    "a long line of inputs\n",
    "Task 'download-op' finished with status \x1b[92mSUCCESS\x1b[0m\n",
    "Task preprocess-op cache hit\n",
    "Executing task 'train-op'\n",
    'sweep combination: {"lr": 0.003, "model": "bn_cnn"}\n',
    "[KFP Executor 2026-11-26 22:12:02,802 INFO]: epoch 1/2 train_loss 0.6931, "
    "train_accuracy 0.5, val_loss 0.6802, val_accuracy 0.5625, epoch_seconds 3.2\n",
    "2026-11-26 21:00:01,000 INFO components.training.loop: epoch 2/2 train_loss 0.6, "
    "train_accuracy 0.6, val_loss 0.65, val_accuracy 0.625, epoch_seconds 3.1\n",
    "Traceback (most recent call last):\n",
    '  File "x.py", line 1\n',
    "ValueError: cannot resume: the checkpoint has lr=0.001\n",
    "some teardown line\n",
    "Task 'train-op' finished with status FAILURE\n",
]


def play(verbose: bool) -> tuple[LiveView, str, str]:
    log, screen = io.StringIO(), io.StringIO()
    view = LiveView(log, screen, verbose)
    for line in RUN:  # written in pieces, as a stream is
        view.write(line[:7])
        view.write(line[7:])
    return view, log.getvalue(), screen.getvalue()


def test_the_screen_gets_a_line_per_task_and_the_failure_its_error():
    view, log, screen = play(verbose=False)
    assert log == "".join(RUN)
    lines = screen.splitlines()
    assert lines[0] == "  download-op      started"
    assert lines[1].startswith("  download-op      success in ") and lines[1].endswith(" s")
    assert lines[2] == "  preprocess-op    reused from kfp.local's cache"
    assert lines[3] == "  train-op         started"
    # each epoch as it ends: its losses and validation accuracy
    assert (
        lines[4]
        == "  train-op         epoch 1/2: train_loss 0.6931, val_loss 0.6802, val_accuracy 0.5625"
    )
    # in kfp.local's executor's format or the step's own
    assert (
        lines[5]
        == "  train-op         epoch 2/2: train_loss 0.6, val_loss 0.65, val_accuracy 0.625"
    )
    assert "failure in" in lines[6]
    assert lines[6].endswith(" s (lr=0.003 model=bn_cnn)")  # a sweep's task names its recipe
    assert len(lines) == 7
    assert view.failure == "train-op: ValueError: cannot resume: the checkpoint has lr=0.001"


def test_verbose_copies_everything_to_the_screen():
    view, log, screen = play(verbose=True)
    assert screen == log and view.failure.startswith("train-op: ValueError")


def test_a_sweeps_epochs_are_its_train_tasks_whatever_ran_before():
    """A sweep runs train and evaluate once per combination: each epoch line names the
    task running it, not the one first started under that name."""
    log, screen = io.StringIO(), io.StringIO()
    view = LiveView(log, screen)
    epoch = "[KFP Executor 2026 INFO]: epoch 1/1 train_loss 0.7, val_loss 0.6, val_accuracy 0.5\n"
    for task in ("train-op", "evaluate-op", "train-op"):
        view.write(f"Executing task '{task}'\n")
        view.write(epoch if task == "train-op" else "")
        view.write(f"Task '{task}' finished with status SUCCESS\n")
    epochs = [line for line in screen.getvalue().splitlines() if "epoch" in line]
    assert [line.split()[0] for line in epochs] == ["train-op", "train-op"]
