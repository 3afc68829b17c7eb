"""Whether the last transaction Litestream shipped of a file is still in the file's WAL: the writer's check for an
orphaned commit (docs/replication.md, "An orphaned commit").

SQLite commits a WAL transaction by writing its frames, the last one marked as the commit, then (synchronous=FULL)
syncing the WAL, and only then publishing the new end of the WAL in its index (the -shm file). A writer killed in
between leaves a whole, checksummed transaction in the WAL file that SQLite never committed: the next writer writes
over it, under the same salt. Litestream reads the WAL file, not the index, so it may already have shipped that
transaction; Litestream 0.5.17 then finds the frames it shipped rewritten and stops shipping the file, silently
(its snapshot takes the pages past its position from the WAL and the rest from the database file, which lacks the
ones still in the WAL: "read database page N: EOF"; or it matches the rewritten frame and reads on from the middle
of a transaction, finding no commit).

`Watch.orphaned` compares the transaction files (LTX) Litestream made of a file with the WAL and its index: the
newest must not end past the frames SQLite published while no writer is at work, and the frame that ended each
must still be the commit frame first seen there (same salt, database size and checksum); and the pages of each
transaction file made of the WAL's current salt, when first seen, must be the pages the WAL holds in the frames it
was made of: the next writer may have overwritten the orphan with a commit of the same shape before the first look
(a crawler restarted within half a second), which leaves nothing else to tell it by. It never reads the database.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import lz4.block

from chartgw.store.orphan import FRAME_HEADER as WAL_FRAME_HEADER
from chartgw.store.orphan import WAL_HEADER, WRITE_LOCK_BYTE

__all__ = ["Shipped", "Watch", "last_shipped", "ltx_pages", "published"]

WAL_HEADER_SIZE = WAL_HEADER.size
FRAME_HEADER_SIZE = WAL_FRAME_HEADER.size
LTX_HEADER = struct.Struct(">4sIIIQQqQqqII")
"""An LTX file's header as far as needed: magic, flags, page size, commit (database size in pages), min and max
transaction ids, timestamp, pre-apply checksum, WAL offset, WAL size, WAL salts (superfly/ltx's Header)."""
FRAME_HEADER = struct.Struct(">II8s8s")
"""A WAL frame's header: page number, database size after a commit (0 in other frames), salts, checksum."""


@dataclass(frozen=True)
class Shipped:
    """Where Litestream's newest transaction file of a database says it read the WAL."""

    txid: int
    commit: int
    wal_end: int
    """The offset just past the last frame it read (0: it read none, as a first snapshot of an empty WAL)."""
    salt: bytes


def last_shipped(path: Path) -> Shipped | None:
    """The newest level-0 transaction file Litestream made of the database at `path` (its local copy, under
    `.<name>-litestream/ltx/0/`); None before it made one."""
    folder = path.parent / f".{path.name}-litestream" / "ltx" / "0"
    newest: tuple[int, str] | None = None
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            with contextlib.suppress(ValueError):
                txid = int(entry.name.removesuffix(".ltx").rpartition("-")[2], 16)
                if entry.name.endswith(".ltx") and (newest is None or txid > newest[0]):
                    newest = (txid, entry.path)
    if newest is None:
        return None
    try:
        with open(newest[1], "rb") as file:
            head = file.read(LTX_HEADER.size)
    except OSError:  # compacted away meanwhile: the next look finds the newer one
        return None
    if len(head) < LTX_HEADER.size or head[:4] != b"LTX1":
        return None
    _, _, _, commit, _, txid, _, _, offset, size, salt1, salt2 = LTX_HEADER.unpack(head)
    return Shipped(txid, commit, offset + size if size else 0, struct.pack(">II", salt1, salt2))


PAGE_HEADER = struct.Struct(">IH")
"""An LTX page frame's header: page number (0 ends the pages) and flags; then the size of the LZ4 block that
follows (4 bytes) and the block."""


def ltx_pages(path: Path) -> tuple[int, int, bytes, dict[int, bytes]] | None:
    """A level-0 transaction file's WAL range (offset, end), WAL salt and pages (none for a snapshot, not made of
    the WAL); None when it cannot be read whole (gone, cut short, another format)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    if len(data) < 100 or data[:4] != b"LTX1":
        return None
    _, _, page_size, _, _, _, _, _, offset, size, salt1, salt2 = LTX_HEADER.unpack(data[:LTX_HEADER.size])
    if not size:
        return offset, offset, struct.pack(">II", salt1, salt2), {}
    pages: dict[int, bytes] = {}
    at = 100
    try:
        while True:
            pgno, _ = PAGE_HEADER.unpack_from(data, at)
            if not pgno:
                break
            length = struct.unpack_from(">I", data, at + PAGE_HEADER.size)[0]
            at += PAGE_HEADER.size + 4
            page = lz4.block.decompress(data[at:at + length], uncompressed_size=page_size)
            if len(page) != page_size:
                return None
            pages[pgno] = page
            at += length
    except (struct.error, ValueError, lz4.block.LZ4BlockError):
        return None
    return offset, offset + size, struct.pack(">II", salt1, salt2), pages


def _same_pages(wal: BinaryIO, frame_size: int, made: tuple[int, int, bytes, dict[int, bytes]]) -> bool:
    """Whether the WAL's frames in a transaction file's range hold the pages the file holds (the last frame of each
    page in the range, as the file keeps the last version)."""
    offset, end, salt, pages = made
    frames: dict[int, bytes] = {}
    wal.seek(offset)
    while wal.tell() < end:
        frame = wal.read(frame_size)
        if len(frame) < frame_size or frame[8:16] != salt:
            return True  # truncated or restarted since: Litestream sees that itself
        frames[struct.unpack(">I", frame[:4])[0]] = frame[FRAME_HEADER_SIZE:]
    return all(frames.get(pgno, page) == page for pgno, page in pages.items())


FLOCK = struct.Struct("hhqqi4x")
"""Linux's `struct flock` (type, whence, start, length, pid), for F_GETLK."""
REMEMBERED = 64
"""Shipped commit frames remembered per file (the newest ones of the WAL's current salt)."""


def published(path: Path) -> tuple[int, bytes] | None:
    """The WAL index's last published frame and salt for `path` (its -shm file's header, both copies equal), or None
    when it cannot tell (no index, a header being rewritten, or a writer holding the write lock: a commit that may be
    publishing now)."""
    try:
        fd = os.open(path.with_name(path.name + "-shm"), os.O_RDONLY)
    except OSError:
        return None
    try:
        query = FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, WRITE_LOCK_BYTE, 1, 0)
        if FLOCK.unpack(fcntl.fcntl(fd, fcntl.F_GETLK, query))[0] != fcntl.F_UNLCK:
            return None
        header = os.pread(fd, 96, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(header) < 96 or header[:48] != header[48:96]:
        return None
    return struct.unpack("=I", header[16:20])[0], header[32:40]


@dataclass
class Watch:
    """The commit frames Litestream shipped of each file, as first seen, so that one rewritten in place by another
    commit of the same shape (the same pages, the same database size: two crawls of one chart) is still told apart,
    by its checksum, after Litestream has shipped more."""

    seen: dict[Path, tuple[bytes, dict[int, tuple[int, bytes]]]] = field(default_factory=dict)
    """Per file: the WAL's salt, and for the transactions shipped under it, transaction id -> (its WAL end, its
    commit frame's checksum). A WAL restarted (another salt) forgets them: its frames are new ones."""
    matched: dict[Path, tuple[bytes, set[str]]] = field(default_factory=dict)
    """Per file: the WAL's salt, and the names of its level-0 transaction files found to hold the WAL's pages."""

    def orphaned(self, path: Path) -> bool:
        """Whether a transaction Litestream shipped of `path` is not a commit of its WAL: the newest one ends past
        what SQLite published with no writer at work (its writer died in its commit), or one of those shipped since
        the WAL last restarted now ends on another frame. False whenever it cannot tell (no transaction file, no WAL,
        a WAL restarted or truncated since: Litestream sees those itself)."""
        shipped = last_shipped(path)
        if shipped is None or not shipped.wal_end:
            return False
        try:
            with open(path.with_name(path.name + "-wal"), "rb") as wal:
                header = wal.read(WAL_HEADER_SIZE)
                if len(header) < WAL_HEADER_SIZE or header[16:24] != shipped.salt:
                    return False
                frame_size = FRAME_HEADER_SIZE + struct.unpack(">I", header[8:12])[0]
                if (shipped.wal_end - WAL_HEADER_SIZE) % frame_size:
                    return False
                salt, known = self.seen.get(path, (b"", {}))
                if salt != shipped.salt:
                    known = {}
                    self.seen[path] = (shipped.salt, known)
                known.setdefault(shipped.txid, (shipped.wal_end, b""))
                for txid, (end, checksum) in sorted(known.items()):
                    wal.seek(end - frame_size)
                    frame = wal.read(FRAME_HEADER.size)
                    if len(frame) < FRAME_HEADER.size:
                        return False  # truncated since
                    _, commit, salt, now = FRAME_HEADER.unpack(frame)
                    if salt != shipped.salt or not commit or (checksum and now != checksum):
                        return True
                    if txid == shipped.txid and commit != shipped.commit:
                        return True
                    known[txid] = (end, now)
                for txid in sorted(known)[:-REMEMBERED]:
                    del known[txid]
                if not self._pages_match(path, wal, frame_size, shipped.salt):
                    return True
        except OSError:
            return False
        index = published(path)
        return index is not None and index[1] == shipped.salt and \
            index[0] < (shipped.wal_end - WAL_HEADER_SIZE) // frame_size

    def _pages_match(self, path: Path, wal: BinaryIO, frame_size: int, salt: bytes) -> bool:
        """Whether every level-0 transaction file of `path` made of the WAL's current salt, not matched before, holds
        the pages of the frames it was made of (each file is read once, when it first matches)."""
        folder = path.parent / f".{path.name}-litestream" / "ltx" / "0"
        try:
            names = {entry.name for entry in os.scandir(folder) if entry.name.endswith(".ltx")}
        except OSError:
            return True
        seen, done = self.matched.get(path, (b"", set()))
        if seen != salt:
            done = set()
        done &= names
        self.matched[path] = (salt, done)
        for name in sorted(names - done):
            made = ltx_pages(folder / name)
            if made is None:
                continue  # read again at the next look
            if made[2] == salt and not _same_pages(wal, frame_size, made):
                return False
            done.add(name)
        return True
