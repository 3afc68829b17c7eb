"""One exclusive lock per file across processes (flock): one crawl per group, one webhook worker per data folder,
one export writer per group folder. The lock goes with the process, however it ends."""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["file_lock"]

POLL_SECONDS = 0.2
"""How often a waiting process tries the lock again."""


@contextlib.contextmanager
def file_lock(path: Path, wait_seconds: float | None = 0.0) -> Iterator[bool]:
    """Hold an exclusive lock on `path` (created, with its folder) for the block: yields True once held, or False
    when another process still holds it after `wait_seconds` (None: wait as long as that takes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        if wait_seconds is None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + wait_seconds
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        yield False
                        return
                    time.sleep(POLL_SECONDS)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
