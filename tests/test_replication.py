"""Read replicas without Litestream: its configuration from the settings, the node state and lag the health reads,
the server's reader of a file written behind SQLite's back (as Litestream's follow writes it), publishing a
restored file, and what a read-only gateway and CLI refuse. The whole thing with Litestream and nginx is
tests/test_replica.py."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from starlette.testclient import TestClient

from chartgw.api.access import KeyChecker, KeyStore, RateLimiter, keys_db_path
from chartgw.cli import main
from chartgw.core import config
from chartgw.core.config import SettingError
from chartgw.http.app import build_app
from chartgw.replica import state as replication
from chartgw.replica.config import litestream_config
from chartgw.replica.litestream import (
    WAITING_SECONDS,
    Beat,
    Follower,
    Shipping,
    beat,
    heard,
    heartbeat_path,
    log_fields,
    position,
    publish,
    replicated_files,
)
from chartgw.replica.reader import FollowedReader
from chartgw.replica.state import FileState, NodeState, node_status, read_state, write_state
from chartgw.store import Query, SnapshotReader, checkpoint, connect
from tests.fixtures import FIXED_NOW, KEY_HEADERS, TEST_KEY, build_group_db, child_env, copy_data, data_dir, environment
from tests.fixtures import settings as run_settings

NOW = FIXED_NOW.timestamp()


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    with data_dir(tmp_path):
        yield tmp_path


def test_litestream_config_for_s3_names_credentials_but_never_holds_them(folder: Path) -> None:
    with environment({"CHARTGW_REPLICA_URL": "s3://bucket/some/prefix/", "CHARTGW_REPLICA_S3_ENDPOINT": "http://127.0.0.1:9000",
                      "CHARTGW_REPLICA_S3_ACCESS_KEY_ID": "AKIDEXAMPLE", "CHARTGW_REPLICA_S3_SECRET_ACCESS_KEY": "s3cr3t",
                      "CHARTGW_REPLICA_SYNC_SECONDS": "0.5"}):
        text = litestream_config(replicated_files(settings=run_settings()), settings=run_settings())
    assert f'  - path: "{folder.resolve()}/korea-chart.sqlite"' in text
    assert '      path: "some/prefix/korea-chart"' in text and '      path: "some/prefix/keys"' in text
    assert '      bucket: "bucket"' in text and '      endpoint: "http://127.0.0.1:9000"' in text
    assert "      force-path-style: true" in text and "      sync-interval: 500ms" in text
    assert "${CHARTGW_REPLICA_S3_SECRET_ACCESS_KEY}" in text and "s3cr3t" not in text and "AKIDEXAMPLE" not in text
    assert text.count("  - path: ") == len(replicated_files(settings=run_settings())) == 17  # every group file (the index among them), keys,
    assert f'  - path: "{folder.resolve()}/node/heartbeat.sqlite"' in text  # and the writer's heartbeat


def test_litestream_config_for_a_folder(folder: Path) -> None:
    text = litestream_config(replicated_files(settings=run_settings())[:1], run_settings(), "file:///srv/replica")
    assert text.endswith('    replica:\n      type: file\n      path: "/srv/replica/streaming"\n      sync-interval: 500ms\n')


@pytest.mark.parametrize("url", ["s3://", "http://bucket/x", "file://relative/path", "s3://bucket/x?endpoint=y"])
def test_a_replica_url_the_code_cannot_use_fails_naming_the_setting(url: str) -> None:
    with environment({"CHARTGW_REPLICA_URL": url}), pytest.raises(SettingError, match="CHARTGW_REPLICA_URL"):
        run_settings().get(config.REPLICA_URL)


def test_replicate_without_a_replica_url_says_which_setting(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with environment({"CHARTGW_REPLICA_URL": None}):
        assert main(["replicate", "--print-config"], run_settings()) == 2
    assert "CHARTGW_REPLICA_URL" in capsys.readouterr().err


def state(role: str, updated_at: float, **files: FileState) -> NodeState:
    return NodeState(role=role, replica="s3://b/p", updated_at=updated_at, pid=1, files=files)


def test_node_status_is_off_on_a_single_box(folder: Path) -> None:
    status = node_status(FIXED_NOW, run_settings())
    assert (status.status, status.role, status.files) == ("off", "single", [])
    assert not replication.lagging("korea-chart", FIXED_NOW, run_settings())


def test_lag_past_the_setting_is_degraded_and_degrades_that_group_only(folder: Path) -> None:
    write_state(state("reader", NOW, **{
        "korea-chart": FileState(state="following", ok_at=NOW - 45, txid="00000000000000a1", applied_at=NOW - 60),
        "streaming": FileState(state="following", ok_at=NOW - 1)}), run_settings())
    status = node_status(FIXED_NOW, run_settings())
    assert status.status == "degraded" and status.role == "reader"
    lags = {f.file: (f.lag_seconds, f.applied_at) for f in status.files}
    assert lags == {"korea-chart": (45, "2026-11-20T05:29:00Z"), "streaming": (1, None)}
    assert replication.lagging("korea-chart", FIXED_NOW, run_settings()) and not replication.lagging("streaming", FIXED_NOW, run_settings())
    with environment({"CHARTGW_REPLICA_LAG_DEGRADED_SECONDS": "60"}):
        assert node_status(FIXED_NOW, run_settings()).status == "ok"


def test_a_supervisor_that_stopped_writing_its_state_is_down(folder: Path) -> None:
    write_state(state("writer", NOW - 20, streaming=FileState(state="replicating", ok_at=NOW - 20)), run_settings())
    status = node_status(FIXED_NOW, run_settings())
    assert status.status == "degraded"
    assert status.files[0].state == "down (chartgw replicate is not running)" and status.files[0].lag_seconds == 20


def test_the_heartbeat_is_one_row_of_the_writers_clock_and_what_it_ships(folder: Path) -> None:
    assert heard(heartbeat_path(settings=run_settings())) is None
    beat(NOW - 10, ["heartbeat"], settings=run_settings())
    beat(NOW, ["korea-chart", "keys", "heartbeat"], settings=run_settings())
    assert heard(heartbeat_path(settings=run_settings())) == Beat(NOW, frozenset({"korea-chart", "keys", "heartbeat"}))
    beat(NOW, ["korea-chart", "heartbeat"], run_settings(), {"korea-chart": 0x2A})
    assert heard(heartbeat_path(settings=run_settings())) == Beat(NOW, frozenset({"korea-chart", "heartbeat"}), {"korea-chart": 0x2A})
    with sqlite3.connect(heartbeat_path(settings=run_settings())) as db:
        assert db.execute("SELECT count(*) FROM beat").fetchone()[0] == 1
    older = folder / "older.sqlite"  # a writer from before the list: its clock, and no list
    with sqlite3.connect(older) as db:
        db.execute("CREATE TABLE beat (id INTEGER PRIMARY KEY CHECK (id = 1), at REAL NOT NULL)")
        db.execute("INSERT INTO beat VALUES (1, ?)", (NOW,))
    assert heard(older) == Beat(NOW, None)


def test_a_files_position_is_the_newest_transaction_litestream_made_of_it(folder: Path) -> None:
    path = folder / "korea-chart.sqlite"
    assert position(path) is None
    levels = folder / ".korea-chart.sqlite-litestream" / "ltx"
    for level, names in (("0", ["0000000000000029-0000000000000029.ltx", "000000000000002a-000000000000002b.ltx"]),
                         ("1", ["0000000000000001-0000000000000028.ltx"]), ("9", [])):
        (levels / level).mkdir(parents=True)
        for name in names:
            (levels / level / name).write_bytes(b"")
    (levels / "0" / "not-an-ltx.tmp").write_bytes(b"")
    assert position(path) == 0x2B


def test_a_follower_is_stalled_when_it_applies_nothing_while_the_writer_moves_on() -> None:
    unit = Follower("korea-chart")
    unit.state.txid = "0000000000000004"
    assert unit.watch(4, 100.0, 10) is None and unit.watch(None, 200.0, 10) is None  # caught up; no position known
    assert unit.watch(9, 300.0, 10) is None and unit.watch(9, 309.0, 10) is None  # behind, not for 10 s yet
    assert unit.watch(9, 310.0, 10) == ("stalled: applied transaction 0000000000000004 while the writer is at "
                                        "0000000000000009, nothing applied for 10 s: restored afresh")
    unit.stalled, unit.behind_since = 1, None  # one stall in a row: twice as long before the next
    assert unit.watch(9, 400.0, 10) is None and unit.watch(9, 419.0, 10) is None and unit.watch(9, 420.0, 10)
    unit.state.txid = "0000000000000009"  # caught up: the next stall is counted from one again
    assert unit.watch(9, 421.0, 10) is None and unit.stalled == 0 and unit.behind_since is None



def test_the_writers_litestream_has_stopped_when_sqlite_commits_and_it_makes_nothing() -> None:
    ship, wal = Shipping(), (10, b"salt0001")
    assert ship.watch(None, None, 0.0, 10) is None and ship.watch(4, wal, 1.0, 10) is None  # first looks
    assert ship.watch(4, wal, 100.0, 10) is None and ship.behind_since is None  # nothing committed since: current
    assert ship.watch(4, None, 101.0, 10) is None  # a writer holds the lock: nothing told
    assert ship.watch(4, (12, b"salt0001"), 102.0, 10) is None and ship.watch(4, (14, b"salt0001"), 111.0, 10) is None
    assert ship.watch(4, (14, b"salt0001"), 112.0, 10) == (
        "stopped shipping: SQLite committed for 10 s while Litestream made nothing past transaction "
        "0000000000000004; restarted on the file checkpointed")
    assert ship.stalled == 1  # the next stall in a row waits twice as long
    assert ship.watch(4, (14, b"salt0001"), 113.0, 10) is None and ship.watch(4, (14, b"salt0001"), 132.0, 10) is None
    assert ship.watch(4, (14, b"salt0001"), 133.0, 10) is not None and ship.stalled == 2
    assert ship.watch(5, (14, b"salt0001"), 140.0, 10) is None and ship.stalled == 0  # it moved: counted from one again
    assert ship.watch(5, (2, b"salt0002"), 141.0, 10) is None and ship.watch(6, (2, b"salt0002"), 160.0, 10) is None
    assert ship.behind_since is None  # it keeps up (a WAL restarted under a new salt is a commit like any other)
    # Litestream saying what is wrong (an object store it cannot reach) is not silent: no restart would mend it.
    assert all(ship.watch(6, (frame, b"salt0002"), 200.0 + frame, 10, complaining=True) is None for frame in range(50))
    assert ship.watch(6, (60, b"salt0002"), 260.0, 10) is None and ship.watch(6, (61, b"salt0002"), 269.0, 10) is None
    assert ship.watch(6, (62, b"salt0002"), 278.0, 10) is None  # quiet again: counted from the commit after (269)
    assert ship.watch(6, (63, b"salt0002"), 279.0, 10) is not None  # and still nothing shipped
    # Nor before Litestream made anything of the file (it never reached the store).
    fresh = Shipping()
    assert all(fresh.watch(None, (frame, b"salt0003"), float(frame), 10) is None for frame in range(100))


FAKE_LITESTREAM = """\
import sqlite3, sys, time
argv = sys.argv[1:]
name = argv[-1].rsplit("/", 1)[-1].removesuffix(".sqlite")
with open(sys.argv[0] + ".log", "a") as log:
    log.write(name + "\\n")
if name not in {held}:
    print('level=INFO msg="no matching backups found"', flush=True)
    sys.exit(0)
with sqlite3.connect(argv[argv.index("-o") + 1]) as db:
    db.execute("CREATE TABLE beat (id INTEGER PRIMARY KEY, at REAL NOT NULL, shipped TEXT)")
    db.execute("INSERT INTO beat VALUES (1, ?, ?)", (time.time(), ",".join(sorted({held}))))
print('level=INFO msg="entering follow mode" txid=0000000000000001', flush=True)
time.sleep(60)
"""


FOLLOWER = """\
import signal, sys, threading, time
from chartgw.core.settings import Settings
from chartgw.replica.litestream import follow


class Stop(threading.Event):
    def wait(self, timeout=None):  # a sleep: under libfaketime a timed wait on an event lasts the clock's offset
        time.sleep(timeout or 0)
        return self.is_set()


stop = Stop()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
started = time.time()
follow(stop, Settings.from_environment(), lambda: started + 4 * (time.time() - started), sys.argv[1])  # 4 s a second
"""


def test_a_reader_asks_the_replica_only_for_the_files_the_writer_ships(folder: Path) -> None:
    """A file the replica does not hold is asked for again (2, 5, 10 s... later) only while the writer's heartbeat
    does not say what it ships; once it does, only the files it ships, and a file it begins to ship at its next tick.
    The supervisor runs in a process of its own, on a clock four times as fast, forking from its main thread as
    `chartgw follow` does (a fork while another thread is in libfaketime's clock can hang the child). Litestream is
    a script that holds three files and logs each file it is asked for."""
    shipped = {"korea-chart", "keys", "heartbeat"}
    program = folder / "litestream"
    program.write_text(f"#!{sys.executable} -S\n" + FAKE_LITESTREAM.replace("{held}", repr(shipped)))
    program.chmod(0o755)
    log = Path(f"{program}.log")

    def asked() -> list[str]:
        return log.read_text().split() if log.exists() else []

    def ticked() -> float:
        """The supervisor's clock when it last wrote its state."""
        state = read_state(run_settings())
        return state.updated_at if state is not None else float("-inf")

    def ticked_past(at: float) -> None:
        """Wait until the supervisor has written its state at `at` or later (on its clock), and once more."""
        wait_for(lambda: ticked() >= at, "the supervisor's ticks")
        seen = ticked()
        wait_for(lambda: ticked() > seen, "one more tick")

    supervisor = subprocess.Popen([sys.executable, "-c", FOLLOWER, str(program)],
                                  env=child_env(REPLICA_URL=f"file://{folder / 'replica'}"))
    try:
        absent = {f.name for f in replicated_files(settings=run_settings())} - shipped
        wait_for(lambda: (state := read_state(run_settings())) is not None and state.files["heartbeat"].state == "following"
                 and all(state.files[name].state == "waiting" for name in absent), "every file asked for")
        ticked_past(ticked() + 2 * WAITING_SECONDS[0])
        once = asked()  # ... past the time an absent file would be asked for again
        with sqlite3.connect(heartbeat_path(settings=run_settings())) as db:  # the writer's next beat, as the follower applies it
            db.execute("UPDATE beat SET shipped = ?", (",".join(sorted({*shipped, "streaming"})),))
        wait_for(lambda: len(asked()) > len(once), "the newly shipped file asked for")
        ticked_past(ticked() + 2 * WAITING_SECONDS[0])
    finally:
        supervisor.terminate()
        supervisor.wait(15)
    assert sorted(once) == sorted(f.name for f in replicated_files(settings=run_settings()))  # every file asked for once at the start
    assert asked()[len(once):] == ["streaming"]  # the one the writer began to ship, and no other
    assert (folder / "keys.sqlite").stat().st_mode & 0o777 == 0o600  # restored with the umask's 0644: as the writer's
    assert (folder / "node" / "staging").stat().st_mode & 0o777 == 0o700


STALLING_LITESTREAM = """\
import sqlite3, sys, time
argv = sys.argv[1:]
name = argv[-1].rsplit("/", 1)[-1].removesuffix(".sqlite")
with open(sys.argv[0] + ".log", "a") as log:
    log.write(name + "\\n")
with open(sys.argv[0] + ".log") as log:
    asks = log.read().split().count(name)
if name not in ("heartbeat", "korea-chart"):
    print('level=INFO msg="no matching backups found"', flush=True)
    sys.exit(0)
with sqlite3.connect(argv[argv.index("-o") + 1]) as db:
    db.execute("CREATE TABLE beat (id INTEGER PRIMARY KEY, at REAL NOT NULL, shipped TEXT, positions TEXT)")
    db.execute("INSERT INTO beat VALUES (1, ?, 'heartbeat,korea-chart', '{}')", (time.time(),))
if name == "korea-chart" and asks == 1:  # follows, applies one batch, then polls on and applies nothing (issue 1515)
    print('level=INFO msg="entering follow mode" txid=0000000000000003', flush=True)
    print('level=INFO msg="follow: applied updates" from_txid=0000000000000003 to_txid=0000000000000004', flush=True)
elif name == "korea-chart":  # restored afresh, a moment later: the writer's newest
    time.sleep(1)
    print('level=INFO msg="entering follow mode" txid=0000000000000009', flush=True)
else:
    print('level=INFO msg="entering follow mode" txid=0000000000000001', flush=True)
time.sleep(120)
"""


def test_a_follower_that_stops_applying_while_the_writer_moves_on_is_restored_afresh(folder: Path) -> None:
    """Litestream issue 1515: a `restore -f` that polls on and applies nothing, silently. Litestream is a script
    whose first follower of korea-chart applies one batch (to transaction 4) and then nothing; the writer's
    heartbeat first names transaction 4 (caught up: nothing happens), then 9 (the writer moved on): the
    supervisor (in a process of its own, four seconds a second) says "stalled", counts it, and restores the file
    afresh, which then follows at 9, and stays."""
    program = folder / "litestream"
    program.write_text(f"#!{sys.executable} -S\n" + STALLING_LITESTREAM)
    program.chmod(0o755)
    log = Path(f"{program}.log")

    def asked() -> list[str]:
        return [name for name in log.read_text().split() if name == "korea-chart"] if log.exists() else []

    def chart() -> FileState:
        state = read_state(run_settings())
        assert state is not None
        return state.files["korea-chart"]

    def writer_at(txid: int) -> None:
        with sqlite3.connect(heartbeat_path(settings=run_settings())) as db:  # the writer's next beat, as the follower applies it
            db.execute("UPDATE beat SET at = ?, positions = ?", (time.time(), f'{{"korea-chart": "{txid:016x}"}}'))

    def ticks(seconds: float) -> None:
        """Wait until the supervisor's clock has moved `seconds` on."""
        start = read_state(run_settings())
        assert start is not None
        wait_for(lambda: (now := read_state(run_settings())) is not None and now.updated_at >= start.updated_at + seconds,
                 f"{seconds} s of the supervisor's clock")

    stall = 6.0  # the supervisor's seconds: 1.5 s here
    supervisor = subprocess.Popen([sys.executable, "-c", FOLLOWER, str(program)],
                                  env=child_env(REPLICA_URL=f"file://{folder / 'replica'}",
                                                REPLICA_STALL_SECONDS=str(stall)))
    seen: set[str] = set()
    try:
        wait_for(lambda: (state := read_state(run_settings())) is not None and state.files["heartbeat"].state == "following"
                 and state.files["korea-chart"].state == "following"
                 and state.files["korea-chart"].txid == "0000000000000004", "both files followed")
        writer_at(4)
        ticks(1.5 * stall)
        assert asked() == ["korea-chart"] and chart().stalls == 0  # caught up with the writer: left alone
        writer_at(9)

        def restored() -> bool:
            seen.add(chart().state)
            return chart().state == "following" and chart().txid == "0000000000000009"

        wait_for(restored, "the stalled follower restored afresh")
        stalled = chart()
        ticks(1.5 * stall)
    finally:
        supervisor.terminate()
        supervisor.wait(15)
    assert "stalled" in seen  # /replication said so while the fresh copy came
    assert (stalled.stalls, stalled.restarts) == (1, 1)
    assert asked() == ["korea-chart", "korea-chart"]  # once at the start, once after the stall, and no more
    assert chart().stalls == 1


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.05)


def test_litestream_log_lines() -> None:
    line = ('time=2026-11-25T13:25:04.154Z level=INFO msg="follow: applied updates" replica=file '
            'from_txid=0000000000000002 to_txid=0000000000000003')
    assert log_fields(line)["msg"] == "follow: applied updates" and log_fields(line)["to_txid"] == "0000000000000003"
    assert log_fields('level=ERROR msg="follow: error" err="dial tcp: \\"x\\" refused"')["err"] == 'dial tcp: "x" refused'
    assert log_fields("Error: cannot open store: s3: boom") == {"level": "ERROR", "msg": "cannot open store: s3: boom"}


def test_a_writers_checkpoint_waits_no_longer_than_asked_for_a_reader_that_stays(folder: Path) -> None:
    """Litestream holds a read transaction on every file it ships for as long as it runs: a TRUNCATE checkpoint
    waits its whole `wait_ms` for it. The writer's default is no wait (it was 200 ms; connect.checkpoint says why it
    is safe): it folds back what it can at once; with no reader left it truncates."""
    path = folder / "x.sqlite"
    db = connect(path)
    db.execute("CREATE TABLE t (v)")
    reader = connect(path, readonly=True)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchone()  # a read transaction, held (as Litestream holds one)
    ran: list[str] = []
    db.set_trace_callback(ran.append)
    answers = []
    for value in range(25):
        db.execute("INSERT INTO t VALUES (?)", (value,))
        answers.append(checkpoint(db))
    db.set_trace_callback(None)
    # Each checkpoint ran under a busy timeout of 0 (the old 200 ms wait cost 5 s here) and was kept from finishing.
    pragmas = [statement for statement in ran if statement.startswith("PRAGMA")]
    assert pragmas == ["PRAGMA busy_timeout", "PRAGMA busy_timeout=0", "PRAGMA wal_checkpoint(TRUNCATE)",
                       "PRAGMA busy_timeout=30000"] * 25
    assert all(busy == 1 for busy, _, _ in answers)
    assert db.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000  # the writer's own timeout back in force
    assert Path(f"{path}-wal").stat().st_size > 0
    reader.execute("COMMIT")
    checkpoint(db)
    assert Path(f"{path}-wal").stat().st_size == 0  # nobody in the way: truncated
    reader.close()
    db.close()


# --- a file written behind SQLite's back ------------------------------------------------------------------


def followed(path: Path) -> bytes:
    """A key file as `chartgw follow` leaves it on a reader (rollback-journal mode, no WAL), and its bytes."""
    gc.collect()  # the KeyStore's connections gone
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA journal_mode=DELETE")
    return path.read_bytes()


def _db(path: Path, value: str, rows: int = 400) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=DELETE")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    db.executemany("INSERT INTO t (v) VALUES (?)", [(f"{value}-{i}-" + "x" * 100,) for i in range(rows)])
    db.close()


def _apply_behind_sqlite(served: Path, new: Path) -> int:
    """Copy every page but page 1 that differs in `new` into `served` in place, as Litestream's follow writes a
    transaction that did not touch page 1: the change counter stays, SQLite's own change detection sees nothing."""
    size = 4096
    old_bytes, new_bytes = served.read_bytes(), new.read_bytes()
    assert len(old_bytes) == len(new_bytes)
    changed = 0
    fd = os.open(served, os.O_RDWR)
    try:
        for offset in range(size, len(new_bytes), size):
            if old_bytes[offset:offset + size] != new_bytes[offset:offset + size]:
                os.pwrite(fd, new_bytes[offset:offset + size], offset)
                changed += 1
    finally:
        os.close(fd)
    return changed


def _open_descriptors(path: Path) -> int:
    """Descriptors of this process open on `path` (or its -wal, -shm)."""
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            found += os.readlink(f"/proc/self/fd/{fd}").startswith(str(path))
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="counts descriptors in /proc (Linux only)")
def test_a_burst_of_reads_opens_one_connection_also_after_a_reopen(folder: Path) -> None:
    """Issue 28: 200 requests at once on a cold server opened a connection (and an aiosqlite thread, never closed)
    each. The first read opens it under a lock; a replica's reopen too; close() closes the retired one."""
    served = folder / "korea-chart.sqlite"
    _db(served, "old", rows=3)
    query = Query("rows", "SELECT count(*) FROM t")

    async def scenario() -> None:
        for reader in (SnapshotReader(served), FollowedReader(served, "korea-chart", run_settings())):
            threads = threading.active_count()
            assert all(rows == [(3,)] for rows in await asyncio.gather(*(reader.fetchall(query) for _ in range(50))))
            one = _open_descriptors(served)
            assert 1 <= one <= 3 and threading.active_count() == threads + 1, (one, threading.active_count())
            if isinstance(reader, FollowedReader):
                await reader.reopen()
                await asyncio.gather(*(reader.fetchall(query) for _ in range(50)))
                assert _open_descriptors(served) <= 2 * one  # the new one, and the old kept a moment for reads on it
                assert threading.active_count() == threads + 2
            await reader.close()
            assert _open_descriptors(served) == 0
            deadline = time.monotonic() + 10
            while threading.active_count() > threads:  # each connection's thread ends once it has closed
                assert time.monotonic() < deadline, "a reader thread outlives close(): it would keep a server alive"
                await asyncio.sleep(0.01)

    asyncio.run(scenario())


def test_the_followed_reader_sees_pages_written_behind_sqlite_and_moves_its_version(folder: Path) -> None:
    served, newer = folder / "korea-chart.sqlite", folder / "newer.sqlite"
    _db(served, "old")
    shutil.copy(served, newer)
    with sqlite3.connect(newer) as db:
        db.execute("UPDATE t SET v = replace(v, 'old', 'new') WHERE id = 300")  # one leaf page, not page 1
    # Keep page 1 byte for byte (a change counter bump would hide the problem this reader solves).
    fd = os.open(newer, os.O_RDWR)
    os.pwrite(fd, served.read_bytes()[:4096], 0)
    os.close(fd)
    sidecar = replication.sidecar("korea-chart", run_settings())
    sidecar.parent.mkdir(parents=True)
    sidecar.write_text("0000000000000001\n")

    async def scenario() -> None:
        plain, followed = SnapshotReader(served), FollowedReader(served, "korea-chart", run_settings())
        query = Query("row 300", "SELECT v FROM t WHERE id = 300")
        for reader in (plain, followed):
            assert (await reader.fetchall(query))[0][0].startswith("old-")
        version = await followed.data_version()
        assert version is not None
        assert _apply_behind_sqlite(served, newer) >= 1
        assert (await plain.fetchall(query))[0][0].startswith("old-")  # a page cache: the old row, silently
        assert (await followed.fetchall(query))[0][0].startswith("new-")  # a memory map: the file as it is
        assert await followed.data_version() == version  # nothing told it yet...
        sidecar.write_text("0000000000000002\n")  # ...until Litestream rewrites its -txid file
        assert await followed.data_version() == version + 1
        # A fresh restore renamed over the file: reopened, its rows read, the version moves.
        replaced = folder / "replaced.sqlite"
        _db(replaced, "fresh", rows=3)
        os.replace(replaced, served)
        assert await followed.data_version() == version + 2
        assert (await followed.fetchall(Query("rows", "SELECT count(*) FROM t")))[0][0] == 3
        await plain.close()
        await followed.close()

    anyio.run(scenario)


def test_publish_switches_a_restored_file_to_rollback_mode_and_renames_it(folder: Path) -> None:
    staging, path = folder / "node" / "staging" / "x.sqlite", folder / "x.sqlite"
    staging.parent.mkdir(parents=True)
    db = sqlite3.connect(staging)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (v)")
    db.execute("INSERT INTO t VALUES (1)")
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    for companion in ("-wal", "-shm"):
        Path(f"{staging}{companion}").unlink(missing_ok=True)
    assert staging.read_bytes()[18:20] == b"\x02\x02"
    staging.chmod(0o644)
    publish(staging, path, 0o600)
    assert not staging.exists() and path.read_bytes()[18:20] == b"\x01\x01"
    assert path.stat().st_mode & 0o777 == 0o600
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as ro:
        assert ro.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert ro.execute("SELECT v FROM t").fetchone()[0] == 1
    assert not Path(f"{path}-wal").exists()


# --- a read-only gateway --------------------------------------------------------------------------------------


def test_a_read_only_gateway_serves_refuses_refreshes_and_counts_usage_in_a_node_file(
        korea_data: Path, tmp_path: Path) -> None:
    data = copy_data(korea_data, tmp_path / "reader")
    KeyStore(data / "keys.sqlite").create("someone")
    keys_before = followed(data / "keys.sqlite")
    settings = {"CHARTGW_READ_ONLY": "1", "CHARTGW_WRITER_URL": "https://writer.example:8000"}
    with environment(settings), data_dir(data):
        limiter = RateLimiter(100, KeyStore(keys_db_path(run_settings()), usage_path=replication.usage_path(run_settings())))
        app = build_app(checker=KeyChecker(data / "keys.sqlite", [TEST_KEY]), clock=lambda: FIXED_NOW, limiter=limiter, settings=run_settings())
        with TestClient(app) as api:
            assert api.get("/korea-chart/portal-a/charts/realtime", headers=KEY_HEADERS).status_code == 200
            refused = api.post("/korea-chart/refresh?site=portal-a&chart_type=realtime", headers=KEY_HEADERS)
            assert refused.status_code == 503
            assert refused.json() == {"detail": "This gateway is a read-only replica: refreshes run on the writer "
                                                "(https://writer.example:8000)"}
            assert api.post("/korea-chart/refresh?site=nowhere", headers=KEY_HEADERS).status_code == 422
            status = api.get("/replication")
            assert status.json()["role"] == "single" and status.headers["cache-control"] == "no-store"
            limiter.flush()
    assert (data / "keys.sqlite").read_bytes() == keys_before  # no replicated file written
    assert sorted(p.name for p in data.iterdir() if "keys" in p.name) == ["keys.sqlite"]
    with sqlite3.connect(data / "node" / "usage.sqlite") as db:
        assert db.execute("SELECT sum(requests) FROM key_usage").fetchone()[0] == 3  # every keyed request above


def test_a_read_only_gateway_sends_webhooks_and_exports_to_the_writer(korea_data: Path, tmp_path: Path) -> None:
    """hooks.sqlite and the exports are the writer's: a reader writes neither, and answers 503 naming the writer."""
    data = copy_data(korea_data, tmp_path / "reader")
    settings = {"CHARTGW_READ_ONLY": "1", "CHARTGW_WRITER_URL": "https://writer.example:8000",
                "CHARTGW_EXPORTS_INTERVAL_SECONDS": "0"}
    with environment(settings), data_dir(data):
        app = build_app(checker=KeyChecker(data / "keys.sqlite", [TEST_KEY]), clock=lambda: FIXED_NOW,
                        limiter=RateLimiter(0), settings=run_settings())
        with TestClient(app) as api:
            for method, path, what in (
                    ("POST", "/hooks", "webhooks"), ("GET", "/hooks", "webhooks"), ("DELETE", "/hooks/1", "webhooks"),
                    ("GET", "/hooks/1/deliveries", "webhooks"), ("GET", "/exports", "exports"),
                    ("GET", "/korea-chart/exports", "exports"), ("GET", f"/korea-chart/exports/{'a' * 64}.sqlite", "exports")):
                body = {"url": "https://partner.example/hook"} if method == "POST" else None
                answer = api.request(method, path, headers=KEY_HEADERS, json=body)
                assert answer.status_code == 503, (method, path, answer.text)
                assert answer.json() == {"detail": f"This gateway is a read-only replica: {what} run on the writer "
                                                   "(https://writer.example:8000)"}
            assert api.get("/changes", headers=KEY_HEADERS).status_code == 200  # the feed reads the followed files
    assert not (data / "hooks.sqlite").exists() and not (data / "exports").exists()


def test_a_reader_lists_keys_and_its_usage_and_refuses_to_write(korea_data: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    data = copy_data(korea_data, tmp_path / "reader")
    key_id, _ = KeyStore(data / "keys.sqlite").create("partner-a")
    keys_before = followed(data / "keys.sqlite")
    with data_dir(data), environment({"CHARTGW_READ_ONLY": "1"}):
        day = FIXED_NOW.strftime("%Y-%m-%d")
        KeyStore(keys_db_path(run_settings()), usage_path=replication.usage_path(run_settings())).add_usage({(key_id, day): [7, 2]})
        assert main(["keys", "list"], run_settings()) == 0 and "partner-a" in capsys.readouterr().out
        assert main(["keys", "usage", "--days", "4000"], run_settings()) == 0
        assert f"{key_id:>4}  {day} {7:>9} {2:>7}  partner-a" in capsys.readouterr().out
        for argv in (["keys", "create", "--name", "x"], ["keys", "revoke", "1"], ["crawl", "korea-chart"],
                     ["demo", "--if-empty"], ["backfill", "video"], ["replicate"], ["hooks", "list"], ["deliver"],
                     ["export", "--all"]):
            assert main(argv, run_settings()) == 2, argv
            assert "read replica (CHARTGW_READ_ONLY=1)" in capsys.readouterr().err
    assert (data / "keys.sqlite").read_bytes() == keys_before


@pytest.mark.parametrize("group", ["recognition", "dj-rankings"])
def test_a_group_with_its_own_health_says_degraded_when_its_file_lags(group: str, tmp_path: Path) -> None:
    """A group whose /health is its own computation (a catalogue, a list's age) gets the replica's lag check too:
    every /health comes from one builder (`health_route`)."""
    data = build_group_db(tmp_path / "reader", group)

    def status() -> object:
        app = build_app(checker=KeyChecker(data / "keys.sqlite", [TEST_KEY]), clock=lambda: FIXED_NOW,
                        limiter=RateLimiter(0), settings=run_settings())
        with TestClient(app) as api:
            return api.get(f"/{group}/health").json()["status"]

    with data_dir(data):
        assert status() == "ok"
        write_state(state("reader", NOW, **{group: FileState(state="following", ok_at=NOW - 600)}), run_settings())
        assert status() == "degraded"


def test_every_group_health_comes_from_the_shared_builder() -> None:
    from chartgw.groups import GROUPS

    for group in GROUPS:
        health = [route for route in group.routes if route.path == "/health"]
        assert len(health) == 1 and health[0].handler.__qualname__ == "health_route.<locals>.health_of", group.name


def test_a_group_health_says_degraded_when_its_file_lags(korea_data: Path, tmp_path: Path) -> None:
    data = copy_data(korea_data, tmp_path / "reader")

    def ask(path: str) -> dict[str, object]:
        app = build_app(checker=KeyChecker(data / "keys.sqlite", [TEST_KEY]), clock=lambda: FIXED_NOW,
                        limiter=RateLimiter(0), settings=run_settings())
        with TestClient(app) as api:
            return dict(api.get(path).json())

    with data_dir(data):
        assert ask("/korea-chart/health")["status"] == "ok"
        write_state(state("reader", NOW, **{"korea-chart": FileState(state="following", ok_at=NOW - 600)}), run_settings())
        assert ask("/korea-chart/health")["status"] == "degraded"
        body = ask("/replication")
    assert body["status"] == "degraded" and body["role"] == "reader"
    assert body["files"] == [{"file": "korea-chart", "state": "following", "lag_seconds": 600, "txid": None,
                              "applied_at": None, "restarts": 0, "error": None, "stalls": 0}]


def test_metrics_say_each_files_lag_restarts_stalls_and_state(korea_data: Path, tmp_path: Path) -> None:
    data = copy_data(korea_data, tmp_path / "reader")
    with data_dir(data):
        app = build_app(checker=KeyChecker(data / "keys.sqlite", [TEST_KEY]), clock=lambda: FIXED_NOW,
                        limiter=RateLimiter(0), settings=run_settings())
        with TestClient(app) as api:
            assert not [line for line in api.get("/metrics").text.splitlines()  # a single box: nothing to say
                        if line.startswith("chartgw_replication_")]
            write_state(state("reader", NOW, **{
                "korea-chart": FileState(state="stalled", ok_at=NOW - 40, restarts=3, stalls=2,
                                         error="stalled: applied transaction ..."),
                "keys": FileState(state="following", ok_at=NOW)}), run_settings())
            text = api.get("/metrics").text
            assert api.get("/replication").json()["files"][0]["stalls"] == 2
    for line in ('chartgw_replication_lag_seconds{file="korea-chart"} 40.0',
                 'chartgw_replication_lag_seconds{file="keys"} 0.0',
                 'chartgw_replication_restarts_total{file="korea-chart"} 3.0',
                 'chartgw_replication_stalls_total{file="korea-chart"} 2.0',
                 'chartgw_replication_stalls_total{file="keys"} 0.0',
                 'chartgw_replication_state{file="korea-chart",state="stalled"} 1.0',
                 'chartgw_replication_state{file="korea-chart",state="following"} 0.0',
                 'chartgw_replication_state{file="keys",state="following"} 1.0'):
        assert line in text.splitlines(), line


def test_the_followed_reader_reads_a_malformed_file_again_until_it_heals(folder: Path) -> None:
    """A transaction Litestream shipped that the writer lost (an orphaned commit it overwrote before it was published,
    docs/replication.md) leaves a replica malformed until the writer's next commit of those pages: the followed reader
    reads again on a fresh connection instead of failing; the server's plain reader fails as before."""
    served = folder / "korea-chart.sqlite"
    _db(served, "old")
    size = served.stat().st_size
    last = served.read_bytes()[size - 4096:]
    query = Query("rows", "SELECT count(*) FROM t")

    def damage(page: bytes) -> None:
        fd = os.open(served, os.O_RDWR)
        os.pwrite(fd, page, size - 4096)  # the last leaf of t, behind SQLite's back
        os.close(fd)

    async def scenario() -> None:
        plain, followed = SnapshotReader(served), FollowedReader(served, "korea-chart", run_settings())
        followed.MALFORMED_WAIT_SECONDS = 0.05
        expected = await followed.fetchall(query)
        damage(b"\xff" * 4096)
        with pytest.raises(sqlite3.DatabaseError, match="malformed"):
            await plain.fetchall(query)
        healing = asyncio.get_running_loop().call_later(0.12, damage, last)
        assert await followed.fetchall(query) == expected
        healing.cancel()
        damage(b"\xff" * 4096)  # a page's statements run in one go (`read`) are read again alike
        healing = asyncio.get_running_loop().call_later(0.12, damage, last)
        assert await followed.read(lambda db: db.execute(query.sql).fetchall()) == expected
        healing.cancel()
        damage(b"\xff" * 4096)
        with pytest.raises(sqlite3.DatabaseError, match="malformed"):  # one that does not heal fails in the end
            await followed.fetchall(query)
        await plain.close()
        await followed.close()

    asyncio.run(scenario())
