"""Large answers handed to granian as files, so a client that does not read holds a buffer, not the answer.

granian's RSGI `response_bytes` and a stream's `send_bytes` copy what they are given into a channel with no bound
(its `RSGIHTTPStreamTransport` holds an unbounded sender: an awaited `send_bytes` returns at once), so 300
connections that never read a 4 MB answer held 720-770 MB on an idle box whatever the slicing. `response_file`
is the one way in whose reading follows the socket: granian opens the file and reads it 128 KB at a time as the
client takes it. So a body past `JOIN_MAX` that carries an ETag (every cached body: the ETag is a digest of its
bytes) is written once to a file named for its ETag and encoding in a private folder, and answered from there;
the page cache holds it once for every connection.

Files are kept while they are among the `max_files` most recently answered and within `max_bytes` together, and
one is removed only when it has not been answered for `GRACE_SECONDS` (granian opens the file just after the
handler returns, so a file is never removed under an answer about to open it). The folder goes with the worker
(`close`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

__all__ = ["Spill"]

PREFIX = "chartgw-answers-"
"""A worker's folder is PREFIX + its pid + a random part, in the temporary folder: a worker that died without
`close` (killed) leaves one, which the next worker to start removes."""
GRACE_SECONDS = 60.0
"""How long a file stays after its last answer, whatever the cap: an answer handed to granian opens it within this."""


class Spill:
    """Files of the large bodies answered lately, by ETag and content coding."""

    def __init__(self, folder: Path | None = None, max_files: int = 64, max_bytes: int = 256 * 1024 * 1024,
                 clock: Callable[[], float] = time.monotonic, parent: Path | None = None) -> None:
        if folder is None:  # a new folder of this worker's in `parent` (the temporary folder)
            parent = parent if parent is not None else Path(tempfile.gettempdir())
            _remove_orphans(parent)
            folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=parent))
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.max_files = max_files
        self.max_bytes = max_bytes
        self.clock = clock
        self.size = 0
        self._files: OrderedDict[str, tuple[str, int, float]] = OrderedDict()  # name -> path, size, last used
        self._writing: dict[str, asyncio.Future[str]] = {}

    async def path(self, etag: str, coding: str | None, body: bytes) -> str:
        """The path of a file holding `body`, the body of ETag `etag` in `coding` (written now, off the event loop,
        unless it is already). Raises OSError when it cannot be written."""
        name = etag.encode().hex() + ("" if coding is None else "." + coding.encode().hex())  # safe for any ETag
        known = self._files.get(name)
        if known is not None:
            self._files[name] = (known[0], known[1], self.clock())
            self._files.move_to_end(name)
            return known[0]
        pending = self._writing.get(name)
        if pending is not None:
            return await asyncio.shield(pending)
        pending = self._writing[name] = asyncio.ensure_future(asyncio.to_thread(_write, str(self.folder / name), body))
        try:
            path = await asyncio.shield(pending)
        finally:
            self._writing.pop(name, None)
        self._files[name] = (path, len(body), self.clock())
        self.size += len(body)
        self._evict()
        return path

    def _evict(self) -> None:
        now = self.clock()
        while len(self._files) > self.max_files or self.size > self.max_bytes:
            name, (path, size, used) = next(iter(self._files.items()))
            if now - used < GRACE_SECONDS:
                return  # the oldest was answered lately: the caps wait for it
            del self._files[name]
            self.size -= size
            _remove(path)

    def __len__(self) -> int:
        return len(self._files)

    def close(self) -> None:
        self._files.clear()
        shutil.rmtree(self.folder, ignore_errors=True)


def _write(path: str, body: bytes) -> str:
    """`body` in a file at `path`, whole before it gets its name (a reader never sees part of it)."""
    partial = path + ".part"
    with open(partial, "wb") as file:
        file.write(body)
    os.replace(partial, path)
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _remove_orphans(parent: Path) -> None:
    """The folders of workers no longer running (killed before `close`)."""
    for folder in parent.glob(PREFIX + "*"):
        pid = folder.name.removeprefix(PREFIX).partition("-")[0]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
