"""An orphaned commit (a writer killed after writing its commit frame, before publishing it in the WAL index) is
published by the next writer's connection instead of written over (chartgw.store.orphan).

The orphan is made as a killed writer leaves it, by real processes: a keeper holds a connection (as Litestream does,
so the index survives), a writer commits and then puts the index's header back as it was before its commit and dies
without closing. The checks run in a child process too: `publish_orphan` must run before a process's first
connection to the file, and this process would otherwise have opened some."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MAKE = """
import os, sqlite3, sys
path = sys.argv[1]
db = sqlite3.connect(path, isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, body TEXT)")
db.execute("INSERT INTO rows (body) VALUES ('published')")
with open(path + "-shm", "rb") as shm:
    before = shm.read(96)
db.execute("INSERT INTO rows (body) VALUES (?)", ("orphan " * 2000,))  # a transaction of several pages
with open(path + "-shm", "r+b") as shm:
    shm.write(before)  # the index as it was: the commit's frames are in the WAL, unpublished
os._exit(0)  # killed: nothing closed, nothing checkpointed
"""

KEEP = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("SELECT count(*) FROM rows").fetchone()  # the WAL index opened, and kept while the process lives
print("ready", flush=True)
sys.stdin.read()
"""

CHECK = """
import sqlite3, sys
from pathlib import Path
from chartgw.store.connect import connect
from chartgw.store.orphan import publish_orphan
path = Path(sys.argv[1])
if sys.argv[2] == "publish":
    frames = publish_orphan(path)
    db = connect(path)  # a writer's connection: the one that rebuilds the index
else:
    frames, db = 0, sqlite3.connect(path.absolute().as_uri() + "?mode=ro", uri=True)
print(frames, db.execute("SELECT count(*) FROM rows").fetchone()[0], db.execute("PRAGMA integrity_check").fetchone()[0])
"""


def run(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def keeper(tmp_path: Path) -> Iterator[Path]:
    """A database with a process keeping a connection to it (as Litestream keeps one on every replicated file)."""
    path = tmp_path / "chart.sqlite"
    run("import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute('PRAGMA journal_mode=WAL');"
        " db.execute('CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT)')", str(path))
    proc = subprocess.Popen([sys.executable, "-c", KEEP, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    try:
        yield path
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)


def test_the_next_writer_publishes_an_orphaned_commit(keeper: Path) -> None:
    run(MAKE, str(keeper))
    # Without publishing, the next writer does not see the orphan (and would write over its frames).
    assert run(CHECK, str(keeper), "read").split()[1] == "1"
    frames, rows, integrity = run(CHECK, str(keeper), "publish").split()
    assert int(frames) > 1 and rows == "2" and integrity == "ok"


def test_a_wal_without_an_orphan_is_left_alone(keeper: Path) -> None:
    run("import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute(\"INSERT INTO rows VALUES (1, 'x')\");"
        " db.commit()", str(keeper))
    shm = keeper.with_name(keeper.name + "-shm").read_bytes()[:96]
    assert run(CHECK, str(keeper), "publish").split() == ["0", "1", "ok"]
    assert keeper.with_name(keeper.name + "-shm").read_bytes()[:96] == shm


def test_a_torn_transaction_is_not_published(keeper: Path) -> None:
    """Frames past the index without a whole commit frame (killed while writing them) are what SQLite drops too."""
    run(MAKE, str(keeper))
    wal = keeper.with_name(keeper.name + "-wal")
    with open(wal, "r+b") as file:
        file.truncate(wal.stat().st_size - 100)  # the commit frame cut short
    assert run(CHECK, str(keeper), "publish").split() == ["0", "1", "ok"]


def test_a_writer_at_work_is_not_taken_for_an_orphan(keeper: Path) -> None:
    """Frames past the index while another process holds the write lock are its transaction in progress."""
    run(MAKE, str(keeper))
    hold = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sqlite3, sys
        db = sqlite3.connect(sys.argv[1], isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        print("holding", flush=True)
        sys.stdin.read()
        """), str(keeper)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert hold.stdout is not None and hold.stdout.readline().strip() == "holding"
        assert run("import sys; from pathlib import Path; from chartgw.store.orphan import publish_orphan;"
                   " print(publish_orphan(Path(sys.argv[1])))", str(keeper)) == "0"
    finally:
        assert hold.stdin is not None
        hold.stdin.close()
        hold.wait(10)


def test_the_replication_watch_publishes_an_orphan_at_once(keeper: Path) -> None:
    """`chartgw replicate`'s watch, finding Litestream ahead of the index, publishes the orphan itself: a reader sees
    it without any writer having come."""
    run(MAKE, str(keeper))
    assert run("import sys; from pathlib import Path; from chartgw.store.connect import publish_now;"
               " print(publish_now(Path(sys.argv[1])), publish_now(Path(sys.argv[1])))", str(keeper)) == "True False"
    assert run(CHECK, str(keeper), "read").split()[1:] == ["2", "ok"]
