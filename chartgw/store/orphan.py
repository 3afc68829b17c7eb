"""A commit a killed writer left unpublished in a WAL, published before the next writer can write over it.

SQLite commits a WAL transaction by appending its frames (the last marked as the commit), syncing them
(synchronous=FULL), and only then publishing the WAL's new end in the WAL index (the -shm file). A writer killed in
between leaves an *orphan*: a whole, checksummed transaction that the index does not count. Had every connection
died with it, the next one to open the file would rebuild the index from the WAL and keep the orphan, as SQLite
does after any crash. But Litestream keeps a connection open on every replicated file, so the index survives, and
the next writer writes over the orphan's frames, while Litestream, which reads the WAL file and not the index, may
already have shipped the orphan to the readers: they then hold pages the writer never had, and answer "database
disk image is malformed" until a snapshot replaces them (docs/replication.md, "An orphaned commit").

`publish_orphan` runs before a process's first writer connection to a file (`chartgw.store.connect`). When the WAL
holds, past the index's end and under its salt, frames whose checksums continue the index's chain up to a commit
frame (what SQLite's own recovery would count), it marks the index for rebuilding while it holds SQLite's WAL write
lock; the next connection rebuilds it from the WAL, and the orphan becomes the commit it nearly was, on the writer as
on the replicas.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import threading
from pathlib import Path

__all__ = ["orphaned_frames", "publish_orphan"]

WAL_HEADER = struct.Struct(">8I")
"""A WAL file's header: magic, format, page size, checkpoint sequence, salt (2), checksum (2); big-endian."""
FRAME_HEADER = struct.Struct(">6I")
"""A WAL frame's header: page number, database size after a commit (0 in other frames), salt (2), checksum (2)."""
INDEX_HEADER = struct.Struct("=3I2BH6I")
"""The WAL index's header (native byte order; two copies at 0 and 48): version, unused, change counter, initialised,
big-endian checksums, page size, last frame, database size, last frame's checksum (2), salt (2, as in the WAL)."""
INDEX_COPY = 48
INITIALISED = 12
"""The offset of a copy's `isInit` byte: 0 makes every connection rebuild the index (under the write lock)."""
WRITE_LOCK_BYTE = 120
"""SQLite's WAL write lock: a POSIX lock on this byte of the -shm file, held while a transaction writes and
publishes (released by the kernel when its process dies)."""
WAL_MAGIC = (0x377F0682, 0x377F0683)

_checked: set[Path] = set()
_kept: dict[Path, int] = {}
_lock = threading.Lock()


def _checksum(data: bytes, big_endian: bool, s1: int, s2: int) -> tuple[int, int]:
    """SQLite's WAL checksum of `data` (a multiple of 8 bytes) continuing (s1, s2)."""
    words = struct.unpack(f"{'>' if big_endian else '<'}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s1 = (s1 + words[i] + s2) & 0xFFFFFFFF
        s2 = (s2 + words[i + 1] + s1) & 0xFFFFFFFF
    return s1, s2


def orphaned_frames(wal: Path, index: bytes) -> int:
    """How many frames past the index's end SQLite's recovery would publish: the frames of the index's salt whose
    checksums continue its chain, up to the last commit frame among them; 0 when there are none (or the WAL is
    not one the index describes)."""
    if len(index) < 2 * INDEX_COPY or index[:INDEX_COPY] != index[INDEX_COPY:2 * INDEX_COPY]:
        return 0
    _, _, _, initialised, _, _, last, _, check1, check2, _, _ = INDEX_HEADER.unpack_from(index)
    salt = index[32:40]
    try:
        with open(wal, "rb") as file:
            head = file.read(WAL_HEADER.size)
            if len(head) < WAL_HEADER.size or not initialised:
                return 0
            magic, _, page_size, _, _, _, head1, head2 = WAL_HEADER.unpack(head)
            big_endian = magic == WAL_MAGIC[1]
            if magic not in WAL_MAGIC or head[16:24] != salt or \
                    _checksum(head[:24], big_endian, 0, 0) != (head1, head2):
                return 0
            sums = (head1, head2) if last == 0 else (check1, check2)
            frame_size = FRAME_HEADER.size + page_size
            file.seek(WAL_HEADER.size + last * frame_size)
            frames = published = 0
            while True:
                frame = file.read(frame_size)
                if len(frame) < frame_size:
                    return published
                page, commit, _, _, sum1, sum2 = FRAME_HEADER.unpack_from(frame)
                if not page or frame[8:16] != salt:
                    return published
                sums = _checksum(frame[:8], big_endian, *sums)
                sums = _checksum(frame[FRAME_HEADER.size:], big_endian, *sums)
                if sums != (sum1, sum2):
                    return published
                frames += 1
                if commit:
                    published = frames
    except OSError:
        return 0


def _open_here(shm: Path, mine: int | None) -> bool:
    """Whether this process has `shm` open other than through `mine` (a SQLite connection to its database): its
    locks are then in play."""
    target = str(shm.absolute())
    try:
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                if int(fd) != mine and os.readlink(f"/proc/self/fd/{fd}") == target:
                    return True
    except OSError:
        return True  # cannot tell: leave the file alone
    return False


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _frames_past(index: bytes, wal: Path) -> bool:
    """Whether the WAL file reaches past the frames the index counts (read without a lock: a first, cheap look)."""
    if len(index) < INDEX_HEADER.size:
        return False
    fields = INDEX_HEADER.unpack_from(index)
    page_size, last = (65536 if fields[5] == 1 else int(fields[5])), int(fields[6])
    try:
        return os.stat(wal).st_size >= WAL_HEADER.size + (last + 1) * (FRAME_HEADER.size + page_size)
    except OSError:
        return False


def publish_orphan(path: Path, *, once: bool = True, alone: bool = False) -> int:
    """Have SQLite publish an orphaned commit the WAL of `path` holds (see the module's docstring), when this process
    has no connection to the file: before its first writer connection (`once`: a check per file and process), or
    from `chartgw replicate`'s watch (`alone`: its loop opens no connection while it looks, so the -shm descriptor
    is kept and the check for one skipped). Returns the frames the next connection will publish (0: none, or not
    this process's to judge: a connection of its own open, a writer at work).

    The -shm file is read through a descriptor of its own, closed again unless an orphan was found or `alone`:
    closing a descriptor drops every POSIX lock the process holds on the file, so this runs only while the process
    has no connection to it (another thread opening one in the instant it takes is the one case it does not cover);
    after an orphan, the connection that rebuilds the index holds locks, so the descriptor is kept for the
    process's life (one per file, used again)."""
    path = path.absolute()
    shm = path.with_name(path.name + "-shm")
    wal = path.with_name(path.name + "-wal")
    with _lock:
        if once:
            if path in _checked:
                return 0
            _checked.add(path)
        kept = _kept.get(path)
        if kept is not None and _inode(shm) != os.fstat(kept).st_ino:
            del _kept[path]  # the file was replaced (a restore, a rebuild): the kept descriptor holds the old one
            kept = None  # still open, never closed: see above
        if kept is None and (not shm.exists() or (not alone and _open_here(shm, None))):
            return 0
        fd = kept
        if fd is None:
            try:
                fd = os.open(shm, os.O_RDWR)
            except OSError:
                return 0
        keep = alone or kept is not None
        frames = 0
        try:
            if not _frames_past(os.pread(fd, INDEX_HEADER.size, 0), wal):
                return 0
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, WRITE_LOCK_BYTE)
            except OSError:
                return 0  # a writer at work: frames past the index are its transaction, not an orphan
            try:
                frames = orphaned_frames(wal, os.pread(fd, 2 * INDEX_COPY, 0))
                if frames:
                    os.pwrite(fd, b"\0", INITIALISED)
                    os.pwrite(fd, b"\0", INDEX_COPY + INITIALISED)
            finally:
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, WRITE_LOCK_BYTE)
        finally:
            if frames or keep:
                _kept[path] = fd  # a connection about to open will hold locks on the file: never closed
            else:
                os.close(fd)
        return frames
