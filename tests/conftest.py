"""Shared fixtures: the real PetImages sample, extracted and preprocessed once per session."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import shutil
import signal
import tempfile
import zipfile
from pathlib import Path

import pytest

from components.core.cores import available_cores
from components.core.names import CLASSES
from components.core.shutdown import skip_final_collection
from components.data.arrays import load_split, save_split
from components.downloading.fetch import fetch
from components.preprocessing.build import build_arrays
from components.preprocessing.config import PreprocessConfig
from tests.support import processes

pytest_plugins = ("tests.support.tracking_stack",)  # the real tracking server, for any module
STACK_FIXTURE = "running_server"  # that plugin's fixture that starts a stack

REPO = Path(__file__).resolve().parents[1]
SMALL_SAMPLE_PER_CLASS = 200  # photos of each class in ``small_sample_zip``
SAMPLE_ZIP = REPO / "tests/fixtures/petimages-sample.zip"  # in the repository: nothing beside it
FLOWERS_ZIP = REPO / "tests/fixtures/flowers-small.zip"  # 5 classes, 12 photos each


@pytest.fixture(scope="session")
def sample_zip() -> Path:
    return SAMPLE_ZIP


@pytest.fixture(scope="session")
def small_sample_zip(sample_zip, tmp_path_factory) -> Path:
    """A fifth of the sample, in its layout, with every one of its broken files and
    non-images: for tests that run whole pipelines or searches and judge no accuracy."""
    target = tmp_path_factory.mktemp("sample") / "petimages-small.zip"
    with zipfile.ZipFile(sample_zip) as whole, zipfile.ZipFile(target, "w") as small:
        for entry in whole.infolist():
            stem = Path(entry.filename).stem
            photo = stem.isdigit() and int(stem) < 1000 and stem != "666"  # the rest: quirks
            if not photo or int(stem) < SMALL_SAMPLE_PER_CLASS:
                small.writestr(entry, whole.read(entry))
    return target


@pytest.fixture(scope="session")
def sample_images(sample_zip, tmp_path_factory) -> Path:
    """The sample archive, extracted by the download step."""
    target = tmp_path_factory.mktemp("sample") / "raw"
    fetch(str(sample_zip), target)
    return target


@pytest.fixture(scope="session")
def flowers_arrays(tmp_path_factory) -> Path:
    """TensorFlow's flower photos, five classes of twelve, downloaded and preprocessed to
    RGB 40×40 arrays: a photo set other than PetImages, as a team brings its own."""
    raw = tmp_path_factory.mktemp("flowers") / "raw"
    fetch(str(FLOWERS_ZIP), raw)
    target = raw.parent / "arrays"
    build_arrays(
        PreprocessConfig(input=str(raw), output=str(target), image_size=40, channels=3, workers=2)
    )
    return target


@pytest.fixture(scope="session")
def flowers_photos(flowers_arrays) -> list[Path]:
    """Flower photos of each class as a user has them: the files preprocess kept."""
    return sorted((flowers_arrays.parent / "raw/flower_photos").glob("*/*.jpg"))[::6]


@pytest.fixture(scope="session")
def sample_arrays(sample_images, tmp_path_factory) -> Path:
    """The sample, preprocessed to grey 40×40 arrays (small, so training tests are quick)."""
    target = tmp_path_factory.mktemp("sample") / "arrays"
    build_arrays(
        PreprocessConfig(
            input=str(sample_images), output=str(target), image_size=40, channels=1, workers=2
        )
    )
    return target


def first_of_each_split(source: Path, target: Path, counts: dict[str, int]) -> Path:
    """The first ``counts[split]`` images of each of ``source``'s splits, as arrays in
    ``target`` with their own counts in ``meta.json``."""
    target.mkdir()
    meta = json.loads((source / "meta.json").read_text())
    del meta["photos_sha256"]  # the whole set's: these splits hold fewer photos
    for split, count in counts.items():
        images, labels = load_split(source, split)
        meta["shards"][split] = save_split(target, split, images[:count], labels[:count])
        meta["counts"][split] = {
            name: int((labels[:count] == label).sum()) for label, name in enumerate(CLASSES)
        }
    (target / "meta.json").write_text(json.dumps(meta))
    return target


@pytest.fixture(scope="session")
def small_arrays(sample_arrays, tmp_path_factory) -> Path:
    """400 train images (4 global batches of 100, split evenly over 2 ranks), 100 val."""
    target = tmp_path_factory.mktemp("sample") / "small"
    return first_of_each_split(sample_arrays, target, {"train": 400, "val": 100, "test": 100})


@pytest.fixture(scope="session")
def rgb_arrays(sample_images, tmp_path_factory) -> Path:
    """The sample's photos as RGB 64×64 arrays, 160 train, 40 val and 40 test: for the
    pretrained nets, quick at that size."""
    whole = tmp_path_factory.mktemp("sample") / "rgb-whole"
    build_arrays(
        PreprocessConfig(
            input=str(sample_images), output=str(whole), image_size=64, channels=3, workers=2
        )
    )
    target = tmp_path_factory.mktemp("sample") / "rgb"
    return first_of_each_split(whole, target, {"train": 160, "val": 40, "test": 40})


@pytest.fixture(scope="session")
def empty_mlflow_db(tmp_path_factory) -> Path:
    """An MLflow SQLite database with its schema created, once: creating it takes seconds."""
    from mlflow.tracking import MlflowClient

    folder = tmp_path_factory.mktemp("mlflow-template")
    with contextlib.chdir(folder):  # the Default experiment's artifacts: ./mlruns here
        MlflowClient(f"sqlite:///{folder / 'mlflow.db'}").search_experiments()
    return folder / "mlflow.db"


@pytest.fixture
def mlflow_store(empty_mlflow_db, tmp_path, monkeypatch) -> str:
    """A fresh SQLite MLflow store in a temp dir, as ``MLFLOW_TRACKING_URI``; cwd moves there."""
    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    monkeypatch.chdir(tmp_path)
    return uri


MLFLOW_ENVIRONMENT = ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")


@pytest.fixture(autouse=True)
def tracking_environment_restored():
    """What a step's body run in-process sets for its process and children (the tracking
    URI and its credentials, ``use_tracking_uri``) is put back after each test: no later
    test in the worker talks to a tracking server that has gone."""
    before = {key: os.environ.get(key) for key in MLFLOW_ENVIRONMENT}
    yield
    for key, value in before.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


STACK_GROUP = "tracking-stack"  # the pytest-xdist group of every test that uses a stack


def pytest_itemcollected(item):
    """Under pytest-xdist (``--dist loadgroup``), the group a test runs in: the tests that
    use the tracking stack in one worker, which starts the stack once (about 25
    CPU-seconds), and any other test with its module, whose fixtures are made once."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        item.add_marker(pytest.mark.xdist_group(group_of(item)))


def group_of(item: pytest.Item) -> str:
    if uses_stack(item):
        return STACK_GROUP
    return item.nodeid.split("::")[0]  # its module's path


def uses_stack(item: pytest.Item) -> bool:
    return STACK_FIXTURE in getattr(item, "fixturenames", ())


@pytest.hookimpl(trylast=True)  # after ``-m`` has deselected
def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` skip, with the reason, where CUDA is not available; under
    pytest-xdist, the groups handed out in ``ordered_for_workers``'s order."""
    import torch

    if os.environ.get("PYTEST_XDIST_WORKER"):
        items[:] = ordered_for_workers(items)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CUDA; none is available here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def ordered_for_workers(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` in the order pytest-xdist hands their groups out (``--dist loadgroup
    --no-loadscope-reorder``, a group to each worker that is almost out of work): the
    tracking stack's tests first, then the modules holding a test marked ``slow``, then the
    rest, each module's tests together and in order.

    The longest groups go first, so that they overlap and the quick modules fill in
    behind them: a whole pipeline at the end of the queue would leave the other workers
    idle while it runs.
    """
    stack = [item for item in items if uses_stack(item)]
    rest = [item for item in items if not uses_stack(item)]
    slow = {item.path for item in rest if item.get_closest_marker("slow")}
    return stack + sorted(rest, key=lambda item: item.path not in slow)  # stable


def pytest_configure(config):
    """Under pytest-xdist with a worker per core or more, each worker and the steps it
    starts run their math on one thread: the workers' thread pools on as many cores or
    fewer would only contend (a thread count set by the user wins). The session's
    process leaves its heap to the OS at exit, as a step's does. The project's cache
    (downloads, exported graphs) is one of the session's own, shared by its workers and
    the steps they start, and removed after. ``torch.compile`` compiles in the test's own
    process, not in a pool of workers that would outlive the tests."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers and workers >= available_cores():
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    if not hasattr(config, "workerinput"):  # the session's process: its workers inherit it
        cache = tempfile.mkdtemp(prefix="dogs-vs-cats-test-cache-")
        os.environ["XDG_CACHE_HOME"] = cache
        config.add_cleanup(lambda: shutil.rmtree(cache, ignore_errors=True))
    skip_final_collection()
    record_frames_of_no_module()


def record_frames_of_no_module() -> None:
    """Record, in ``inspect``'s cache, the files of the frames below the tests that belong
    to no module (a pytest-xdist worker's exec'd "<string>" code and its loop, ``python
    -m``'s "<frozen runpy>"), as no module's.

    KFP's PipelineTask setters (CPU, memory, image, accelerator) call ``inspect.stack()``
    to name themselves in an error message. For a frame of no module, ``inspect.getmodule``
    scans the whole of ``sys.modules``, three times a frame: in a worker holding torch and
    MLflow, about 80 ms a setter call and seconds a pipeline build. Recorded, the same
    frames give the same answer (no module) at once.
    """
    frame = inspect.currentframe()
    while frame is not None:
        if inspect.getmodule(frame) is None:
            inspect.modulesbyfile.setdefault(frame.f_code.co_filename, "")  # no module is ""
        frame = frame.f_back


def pytest_sessionstart(session):
    """Adopt orphans, and let SIGTERM tear the session down like Ctrl-C does."""
    processes.become_subreaper()
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    """After every fixture is torn down: no process the tests started may still run."""
    left = processes.leftovers(os.getpid())
    if not left:
        return
    processes.stop_all(list(left))
    lines = "\n".join(f"  {pid}: {command[:200]}" for pid, command in left.items())
    session.config.get_terminal_writer().line(
        f"\nERROR: {len(left)} process(es) were still running after the tests "
        f"(now killed):\n{lines}",
        red=True,
    )
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def built_pipeline():
    """The pipeline function, built once (KFP traces the wiring when it is built)."""
    from pipeline.pipeline import build_pipeline

    return build_pipeline()


@pytest.fixture(scope="session")
def built_sweep():
    """The sweep pipeline function, built once."""
    from pipeline.pipeline import build_pipeline

    return build_pipeline(sweep=True)
