"""A bound on the files a block writes, held by the kernel as the bytes arrive: what a
download from an artifact store that lists a smaller size than it serves (or none) cannot
get past."""

from __future__ import annotations

import contextlib
import errno
import resource
from collections.abc import Iterator
from pathlib import Path


class FileTooLargeError(ValueError):
    """A file grew past the bound while it was written."""


@contextlib.contextmanager
def files_written_at_most(most_bytes: int, what: str, into: Path) -> Iterator[None]:
    """No file this process writes in the block grows past ``most_bytes``: the kernel
    refuses the write (``RLIMIT_FSIZE``; Python ignores ``SIGXFSZ``, so the write fails
    with ``EFBIG``). The bound holds for every thread while the block runs.

    Raises:
        FileTooLargeError: a write past the bound, or an error in the block once a file
            under ``into`` (where the block writes) reached it (a library's threads may
            report ``EFBIG`` in words of their own), naming ``what`` was written.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    bound = most_bytes if hard == resource.RLIM_INFINITY else min(most_bytes, hard)
    resource.setrlimit(resource.RLIMIT_FSIZE, (bound, hard))
    try:
        yield
    except Exception as err:
        if _too_large(err) or _reached(into, most_bytes):
            raise FileTooLargeError(
                f"expected {what} of at most {most_bytes} bytes, found more as they arrived; "
                "stopped there"
            ) from None
        raise
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def _too_large(err: BaseException) -> bool:
    """Whether ``err`` is, or wraps (as MLflow's parallel downloads do), ``EFBIG``."""
    chain: BaseException | None = err
    for _ in range(10):  # a chain of causes, never a cycle
        if chain is None:
            return False
        if isinstance(chain, OSError) and chain.errno == errno.EFBIG:
            return True
        if "File too large" in str(chain):
            return True
        chain = chain.__cause__ or chain.__context__
    return False


def _reached(folder: Path, most_bytes: int) -> bool:
    """Whether a file under ``folder`` (links not followed) holds ``most_bytes`` or more."""
    files = (path for path in Path(folder).rglob("*") if not path.is_symlink())
    return any(path.is_file() and path.stat().st_size >= most_bytes for path in files)
