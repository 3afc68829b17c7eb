"""chartgw.replica.walcheck on real SQLite files: a transaction Litestream shipped (its transaction file written here as
Litestream writes it) stays matched while the WAL goes on; an orphaned commit rewritten by the next writer is found,
whether the new frame there has another shape or the same one. The crash is made as kill -9 leaves it: the commit's
frames in the WAL, the WAL index (-shm) as it was before them. The same with Litestream and a real kill:
tests/test_replica.py::test_a_commit_orphaned_by_a_killed_crawler_does_not_stop_replication."""

from __future__ import annotations

import contextlib
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from chartgw.replica.walcheck import LTX_HEADER, Watch, last_shipped, ltx_pages
from chartgw.store.connect import connect


def ship(path: Path, txid: int) -> None:
    """A level-0 transaction file as Litestream makes one after reading the whole WAL: its header says where, its
    pages are the last frame of each page in it (each an LZ4 block of literals only)."""
    wal = path.with_name(path.name + "-wal").read_bytes()
    salt1, salt2 = struct.unpack(">II", wal[16:24])
    page_size = struct.unpack(">I", wal[8:12])[0]
    frame, end, commit = 24 + page_size, 32, 0
    for offset in range(32, len(wal) - frame + 1, frame):
        size = struct.unpack(">I", wal[offset + 4:offset + 8])[0]
        if wal[offset + 8:offset + 16] != wal[16:24]:
            break
        if size:
            end, commit = offset + frame, size
    folder = path.parent / f".{path.name}-litestream" / "ltx" / "0"
    folder.mkdir(parents=True, exist_ok=True)
    header = LTX_HEADER.pack(b"LTX1", 0, page_size, commit, txid, txid, 0, 0, 32, end - 32, salt1, salt2)
    pages = {struct.unpack(">I", wal[at:at + 4])[0]: wal[at + 24:at + frame] for at in range(32, end, frame)}
    literals = b"\xf0" + b"\xff" * ((page_size - 15) // 255) + bytes([(page_size - 15) % 255])
    body = b"".join(struct.pack(">IHI", pgno, 1, len(literals) + page_size) + literals + page
                    for pgno, page in sorted(pages.items()))
    (folder / f"{txid:016x}-{txid:016x}.ltx").write_bytes(header + bytes(100 - len(header)) + body + bytes(6))


def orphan(path: Path, rows: int) -> None:
    """A commit of `rows` rows whose writer 'died' before publishing it: its frames stay in the WAL, the index is put
    back as it was."""
    shm = path.with_name(path.name + "-shm")
    before = shm.read_bytes()
    with contextlib.closing(connect(path)) as db:
        db.executemany("INSERT INTO t VALUES (?)", [(f"orphan {i}",) for i in range(rows)])
    shm.write_bytes(before)


def test_an_orphaned_commit_rewritten_by_the_next_writer_is_found(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite"
    held = connect(path)  # as Litestream holds the file open: the WAL and its index stay
    held.execute("CREATE TABLE t (v TEXT)")
    held.execute("INSERT INTO t VALUES ('a')")
    watch = Watch()
    assert not watch.orphaned(path)  # nothing shipped yet
    ship(path, 1)
    assert last_shipped(path) is not None and not watch.orphaned(path) and not watch.orphaned(path)
    held.execute("INSERT INTO t VALUES ('b')")  # the WAL goes on past what was shipped: still matched
    assert not watch.orphaned(path)

    orphan(path, 1)
    ship(path, 2)  # Litestream read the orphan's commit frame
    assert watch.orphaned(path)  # past what SQLite published, and no writer at work: its writer died in the commit
    with contextlib.closing(connect(path)) as db:
        assert db.execute("SELECT count(*) FROM t WHERE v LIKE 'orphan%'").fetchone()[0] == 0  # SQLite forgot it
        db.executemany("INSERT INTO t VALUES (?)", [(f"next {i}" * 300,) for i in range(20)])  # another shape
    assert watch.orphaned(path)  # published past it now, but its last frame is no commit of that size


@contextlib.contextmanager
def writer_at_work(path: Path) -> Iterator[None]:
    """Another process holding SQLite's WAL write lock on `path` (a byte of its -shm), as a writer does while its
    commit syncs."""
    code = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); fcntl.lockf(fd, fcntl.LOCK_EX, 1, 120);"
            " print('in', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code, f"{path}-shm"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"in\n"
        yield
    finally:
        proc.kill()
        proc.wait()


def test_an_orphan_rewritten_by_a_commit_of_the_same_shape_is_told_by_its_checksum(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite"
    held = connect(path)
    held.execute("CREATE TABLE t (v TEXT)")
    orphan(path, 1)
    ship(path, 1)
    watch = Watch()
    with writer_at_work(path):
        assert not watch.orphaned(path)  # unpublished while a writer is at work: maybe a commit syncing; checksum kept
    with contextlib.closing(connect(path)) as db:
        db.execute("INSERT INTO t VALUES ('other')")  # the same pages, the same size: only the checksum differs
    ship(path, 2)  # and Litestream shipped more since
    assert watch.orphaned(path)


def test_an_orphan_rewritten_by_a_commit_of_the_same_shape_before_the_first_look_is_told_by_its_pages(
        tmp_path: Path) -> None:
    """The next writer committed before the watch first looked (a crawler restarted within half a second): the frame
    that ends the orphan is a commit of its size again and SQLite published past it, but the pages Litestream shipped
    are not the WAL's."""
    path = tmp_path / "x.sqlite"
    held = connect(path)
    held.execute("CREATE TABLE t (v TEXT)")
    orphan(path, 1)
    ship(path, 1)
    shipped = ltx_pages(next((path.parent / f".{path.name}-litestream" / "ltx" / "0").iterdir()))
    assert shipped is not None and shipped[3]  # the helper's file reads back whole
    with contextlib.closing(connect(path)) as db:
        db.execute("INSERT INTO t VALUES ('other')")  # the same pages, the same size
        db.execute("INSERT INTO t VALUES ('more')")  # and on: published past the orphan
    watch = Watch()
    assert watch.orphaned(path) and watch.orphaned(path)
    ship(path, 2)  # Litestream shipped on from the middle of the WAL: the orphan's file is still found
    assert watch.orphaned(path)


def test_a_restarted_or_missing_wal_is_left_to_litestream(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite"
    held = connect(path)
    held.execute("CREATE TABLE t (v TEXT)")
    held.execute("INSERT INTO t VALUES ('a')")
    ship(path, 1)
    watch = Watch()
    assert not watch.orphaned(path)
    held.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert not watch.orphaned(path)  # truncated
    held.execute("INSERT INTO t VALUES ('b')")
    assert not watch.orphaned(path)  # restarted: another salt
    held.close()  # the last connection: the WAL folded back and removed
    assert not path.with_name("x.sqlite-wal").exists() and not watch.orphaned(path)
    assert not Watch().orphaned(tmp_path / "none.sqlite")
