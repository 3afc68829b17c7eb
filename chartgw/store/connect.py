"""The one way chartgw opens SQLite: every connection, synchronous or async, writer or reader, with its pragmas.

A writer (a crawl, the radio monitor, the key store, the artist-history index) works in WAL mode with a busy
timeout and `synchronous=FULL`, in autocommit mode so that each transaction is an explicit `BEGIN IMMEDIATE ...
COMMIT` (`transaction`). A reader opens the file read-only by URI: it can never write, never creates a missing
file, and a WAL file the writer has not made yet is created beside it, not refused. The server reads through
`connect_async` (aiosqlite: the statements run on the connection's own thread, off the event loop).

No other module calls `sqlite3.connect` or `aiosqlite.connect` (tests/test_store_schema.py greps for it).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiosqlite

from chartgw.store.orphan import publish_orphan

__all__ = ["BUSY_TIMEOUT_SECONDS", "Checkpointer", "checkpoint", "connect", "connect_async", "connect_memory",
           "publish_now", "readonly_uri", "transaction"]

BUSY_TIMEOUT_SECONDS = 30.0
"""How long a writer waits for another writer's lock (crawls are short; the monitor writes small batches)."""


def readonly_uri(path: Path) -> str:
    """`path` as a read-only SQLite URI (characters such as `?` and `#` in the path escaped)."""
    return path.absolute().as_uri() + "?mode=ro"


def connect(path: Path, *, readonly: bool = False, timeout: float = BUSY_TIMEOUT_SECONDS,
            synchronous: str = "FULL", foreign_keys: bool = False, check_same_thread: bool = True, wal: bool = True,
            ) -> sqlite3.Connection:
    """A connection to the SQLite file at `path`.

    A writer (the default) creates the file and its folder, works in WAL mode, autocommit (its transactions
    are `transaction`'s), with `synchronous` (FULL: a commit survives a power cut) and, when asked, foreign
    keys enforced. A reader (`readonly`) fails with `sqlite3.OperationalError` when the file does not exist.
    `wal=False` leaves a new file in rollback-journal mode: one written whole once and then only read (an export,
    `chartgw.http.exports`, whose page size the backup API sets, which it cannot do to a file in WAL mode).
    """
    if readonly:
        return sqlite3.connect(readonly_uri(path), uri=True, timeout=timeout, check_same_thread=check_same_thread)
    path.parent.mkdir(parents=True, exist_ok=True)
    if wal:
        publish_orphan(path)  # a commit a killed writer left unpublished: kept, not written over
    db = sqlite3.connect(path, isolation_level=None, timeout=timeout, check_same_thread=check_same_thread)
    if wal:
        db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous}")
    if foreign_keys:
        db.execute("PRAGMA foreign_keys=ON")
    return db


def connect_memory() -> sqlite3.Connection:
    """An empty database in memory (declarations checked without a file)."""
    return sqlite3.connect(":memory:")


async def connect_async(path: Path, *, timeout: float = 5.0, mmap_bytes: int = 0) -> aiosqlite.Connection:
    """A read-only connection for the server: each statement runs on the connection's thread, never on the
    event loop. Fails with `sqlite3.OperationalError` when the file does not exist. With `mmap_bytes`, pages are
    read through a memory map of that size (a file written behind SQLite's back: `chartgw.replica.reader`)."""
    db = await aiosqlite.connect(readonly_uri(path), uri=True, timeout=timeout)
    if mmap_bytes:
        await db.execute(f"PRAGMA mmap_size={int(mmap_bytes)}")
    return db


def checkpoint(db: sqlite3.Connection, wait_ms: int = 0) -> tuple[int, int, int]:
    """Fold the WAL back into the file and truncate it, waiting at most `wait_ms` for readers (by default not at all).

    A TRUNCATE checkpoint waits (the busy timeout) for every reader to leave the WAL's old frames; Litestream
    (`chartgw replicate`) holds a read transaction on each file it ships, so on a replicated writer any wait runs out
    and the checkpoint is a PASSIVE one (copying nothing past Litestream's read mark): waiting 200 ms there cost every
    commit 200 ms. Not waiting is safe with Litestream: the WAL is only reset once every frame is copied back and no
    reader is in it, which Litestream's read transaction prevents except inside its own checkpoint, when it holds the
    write lock (docs/replication.md, "What replication costs the writer's crawls"). Returns SQLite's answer: whether
    it was kept from finishing (1: busy), the WAL's frames, and those folded back (0, 0, 0: truncated)."""
    (timeout,) = db.execute("PRAGMA busy_timeout").fetchone()
    db.execute(f"PRAGMA busy_timeout={wait_ms}")
    try:
        busy, frames, folded = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return int(busy), int(frames), int(folded)
    finally:
        db.execute(f"PRAGMA busy_timeout={int(timeout)}")


class Checkpointer:
    """PASSIVE checkpoints of a file every `every` seconds, on a connection and a thread of their own, while this
    process's writer writes it: SQLite copies the WAL back without the GIL, so the copying is no longer done inside
    the writer's commits (a bulk build of the artist-history index, `chartgw.index.history`). A checkpoint that
    fails (a busy file) is tried again at the next tick. `close` stops the thread."""

    def __init__(self, path: Path, *, every: float = 1.0, synchronous: str = "OFF") -> None:
        self.stopping = threading.Event()
        self.db = connect(path, synchronous=synchronous, check_same_thread=False)
        self.thread = threading.Thread(target=self._run, args=(every,), name="checkpoints", daemon=True)
        self.thread.start()

    def _run(self, every: float) -> None:
        while not self.stopping.wait(every):
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def close(self) -> None:
        self.stopping.set()
        self.thread.join()
        self.db.close()


@contextmanager
def transaction(db: sqlite3.Connection, *, immediate: bool = True) -> Iterator[sqlite3.Connection]:
    """`BEGIN IMMEDIATE ... COMMIT` around the block (the write lock taken at once, so a busy file waits at
    the start, not halfway); ROLLBACK when the block raises anything, even a KeyboardInterrupt. Not `immediate`:
    each file's lock is taken as the block first reads or writes it (IMMEDIATE would take every attached file's
    write lock, and wait for their writers)."""
    db.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def publish_now(path: Path) -> bool:
    """`publish_orphan` for `chartgw replicate`'s watch (which opens no other connection to `path` meanwhile):
    whether an orphan was there, whole, and its index is now rebuilt to count it (the writer, Litestream and the
    readers then keep one history; False: nothing to publish)."""
    if not publish_orphan(path, once=False, alone=True):
        return False
    try:
        with contextlib.closing(connect(path, timeout=5)) as db:
            db.execute("PRAGMA schema_version").fetchone()  # the first read rebuilds the index
    except sqlite3.Error:
        return False
    return True
