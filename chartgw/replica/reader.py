"""The server's reader of a file `chartgw follow` keeps current.

How a reader sees a followed file. `litestream restore -f` writes each new transaction's pages straight into the
database file under SQLite's own EXCLUSIVE lock, rewrites the header to the rollback journal (DELETE) mode and
changes the file change counter when the transaction touched page 1. Two things follow, both found by
experiment on Litestream 0.5.17 and handled here and in chartgw.replica.litestream:
- a file just restored still says WAL in its header; a server opening it then reads through a WAL index nobody
  updates and never sees a change. `chartgw follow` restores into `<data>/node/staging/`, switches the header to
  rollback mode (under the same lock) and only then renames the file into place;
- a transaction that does not touch page 1 (an UPDATE within existing pages, a fetch-log row that fits a leaf)
  leaves the change counter alone, so a connection's page cache keeps the old pages and `PRAGMA data_version`
  does not move. `FollowedReader` reads through a memory map instead (`PRAGMA mmap_size`: pages come from the
  file itself, under the shared lock, up to SQLite's 2 GB mmap limit), and moves its version when Litestream's
  `-txid` file (written after every applied batch) or the file's inode (a fresh restore renamed over it) changes.
"""


from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from chartgw.core.settings import Settings
from chartgw.replica.state import sidecar
from chartgw.store import Query, SnapshotReader

__all__ = ["MMAP_BYTES", "FollowedReader"]

log = logging.getLogger("chartgw.replica.reader")

R = TypeVar("R")

MMAP_BYTES = 2147418112
"""SQLite's default SQLITE_MAX_MMAP_SIZE (0x7fff0000): larger files are read through the page cache past it."""


class FollowedReader(SnapshotReader):
    """A `SnapshotReader` of a file `chartgw follow` keeps current: reads through a memory map, and a version that
    moves with Litestream's `-txid` file and the file's inode as well as with `PRAGMA data_version` (see the
    module's docstring for why each is needed). A file renamed over the open one is reopened; the old connection
    is closed a little later, once reads already running on it are done."""

    CLOSE_AFTER_SECONDS = 5.0
    mmap_bytes = MMAP_BYTES
    MALFORMED_RETRIES = 6
    MALFORMED_WAIT_SECONDS = 0.5
    """A read that finds the file malformed is tried again on a fresh connection this many times, this far apart,
    before it fails (docs/replication.md, "An orphaned commit": a transaction Litestream shipped that the writer
    lost leaves the replica inconsistent until the writer's next commit of those pages, usually within a second)."""

    def __init__(self, path: Path, name: str, settings: Settings, stat: Callable[[Path], os.stat_result] = os.stat,
                 ) -> None:
        super().__init__(path)
        self.sidecar = sidecar(name, settings)
        self._stat = stat
        self._inode: int | None = None
        self._seen: tuple[Any, ...] | None = None
        self._version = 0
        self._retired: set[aiosqlite.Connection] = set()
        """Connections replaced by `reopen`, closed a little later."""

    async def _open(self) -> aiosqlite.Connection:
        inode = self._identity(self.path)  # before opening: a file renamed over it meanwhile is seen as new
        db = await super()._open()
        self._inode = inode
        return db

    def _identity(self, path: Path) -> int | None:
        try:
            return self._stat(path).st_ino
        except FileNotFoundError:
            return None

    def _sidecar_stamp(self) -> tuple[int, int]:
        try:
            st = self._stat(self.sidecar)
        except FileNotFoundError:
            return (0, 0)
        return (st.st_ino, st.st_mtime_ns)

    async def reopen(self) -> None:
        """The next read opens the file anew (one connection, under the base class's lock); the old connection is
        closed after CLOSE_AFTER_SECONDS, or by `close` if the server stops first (its thread would keep the
        process from exiting)."""
        old, self._db = self._db, None
        if old is not None:
            self._retired.add(old)
            asyncio.get_running_loop().call_later(self.CLOSE_AFTER_SECONDS,
                                                  lambda: asyncio.ensure_future(self._retire(old)))

    async def _retire(self, old: aiosqlite.Connection) -> None:
        if old in self._retired:
            self._retired.discard(old)
            await old.close()

    async def close(self) -> None:
        for old in list(self._retired):
            await self._retire(old)
        await super().close()

    async def fetchall(self, query: Query, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        values = tuple(params)
        return await self._retried(lambda: super(FollowedReader, self).fetchall(query, values))

    async def read(self, work: Callable[[sqlite3.Connection], R]) -> R | None:
        return await self._retried(lambda: super(FollowedReader, self).read(work))

    async def _retried(self, attempt: Callable[[], Awaitable[R]]) -> R:
        """`attempt` again on a fresh connection while it finds the file malformed (MALFORMED_RETRIES)."""
        for _ in range(self.MALFORMED_RETRIES - 1):
            try:
                return await attempt()
            except sqlite3.DatabaseError as exc:
                if "malformed" not in str(exc):
                    raise
                log.warning("%s: %s; read again on a fresh connection", self.path.name, exc)
            await self.reopen()  # a fresh connection keeps no page of the malformed state
            await asyncio.sleep(self.MALFORMED_WAIT_SECONDS)
        return await attempt()  # the last try: a file still malformed fails

    async def data_version(self) -> int | None:
        inode = self._identity(self.path)
        if self._db is not None and inode != self._inode:
            await self.reopen()
        version = await super().data_version()
        if version is None:
            return None
        seen = (self._inode, version, self._sidecar_stamp())
        if seen != self._seen:
            self._seen = seen
            self._version += 1
        return self._version
