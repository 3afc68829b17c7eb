"""The snapshot store: atomic commits, newest-wins reads, retention, and surviving a killed crawler.

The kill tests run real child processes (the real `chartgw crawl` CLI against replay servers, and a
writer committing very large snapshots in a loop), SIGKILL them at varied moments, and check after
every kill that the file passes `PRAGMA integrity_check` and each target serves either exactly its
previous snapshot or exactly a complete new one.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from chartgw.demo.replay import ReplayServer
from chartgw.demo.samples.korea import all_replies
from chartgw.store import FetchLogRow, NewSnapshot, SnapshotReader, SnapshotRow, SnapshotWriter, StoredEntry
from tests.fixtures import UNDER_FAKETIME, build_group_db, child_env, copy_data

REPO_ROOT = Path(__file__).resolve().parents[1]
GROUP_FILE = "korea-chart.sqlite"
NOW = datetime(2026, 11, 20, 5, 30, 0, tzinfo=UTC)
CRAWL_AT = ("--at", (NOW + timedelta(minutes=5)).isoformat())
"""The child crawls run 5 minutes after the seed (FLO rising finds the seed's observation an hour back)."""


# --- helpers ------------------------------------------------------------------------------------

def _entry(rank: int, tag: str = "a") -> StoredEntry:
    return StoredEntry(rank, f"title {tag} {rank}", f"artist {rank}", f"{tag}{rank}", f'{{"tag":"{tag}","rank":{rank}}}'.encode())


def _snap(target: str, rows: int, fetched_at: datetime = NOW, tag: str = "a", raw: bytes | None = None,
          meta: bytes | None = None) -> NewSnapshot:
    return NewSnapshot(target=target, chart_date=fetched_at.date().isoformat(), chart_hour=fetched_at.hour,
                       fetched_at=fetched_at, source=f"test {tag}", entries=[_entry(r, tag) for r in range(1, rows + 1)],
                       raw=raw, raw_type="text/html", meta=meta)


def _log(target: str, status: str = "ok", rows: int | None = None, error: str | None = None,
         started_at: datetime = NOW) -> FetchLogRow:
    return FetchLogRow(target, started_at, 42, status, 200, rows, "http://upstream.test/chart", error)


def _query(path: Path, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Read through a fresh connection, as another process would see the file."""
    db = sqlite3.connect(path)
    try:
        return [tuple(r) for r in db.execute(sql, tuple(params)).fetchall()]
    finally:
        db.close()


def _counts(path: Path) -> dict[str, int]:
    return {table: _query(path, f"SELECT count(*) FROM {table}")[0][0]
            for table in ("snapshots", "entries", "raw_payloads", "fetch_log", "changes")}


# --- commit -------------------------------------------------------------------------------------

def test_commit_writes_snapshots_entries_raw_and_log_in_one_go(tmp_path: Path) -> None:
    """Everything a crawl result consists of is written by the one commit, exactly as given."""
    path = tmp_path / "g.sqlite"
    with SnapshotWriter(path) as writer:
        ids = writer.commit([_snap("portal-d/all_age", 3, raw=b"<html>", meta=b"m"), _snap("portal-d/rising", 2, tag="r")],
                            _log("portal-d/rising", rows=2))
    assert ids == [1, 2]
    assert _query(path, "SELECT id, target, chart_date, chart_hour, fetched_at, source, row_count, meta FROM snapshots") == [
        (1, "portal-d/all_age", "2026-11-20", 5, "2026-11-20T05:30:00Z", "test a", 3, b"m"),
        (2, "portal-d/rising", "2026-11-20", 5, "2026-11-20T05:30:00Z", "test r", 2, None),
    ]
    assert _query(path, "SELECT snapshot_id, position, rank, title_key, item_id, record FROM entries ORDER BY 1, 2") == [
        (1, 1, 1, "title a 1", "a1", b'{"tag":"a","rank":1}'),
        (1, 2, 2, "title a 2", "a2", b'{"tag":"a","rank":2}'),
        (1, 3, 3, "title a 3", "a3", b'{"tag":"a","rank":3}'),
        (2, 1, 1, "title r 1", "r1", b'{"tag":"r","rank":1}'),
        (2, 2, 2, "title r 2", "r2", b'{"tag":"r","rank":2}'),
    ]
    assert _query(path, "SELECT * FROM raw_payloads") == [(1, "text/html", b"<html>")]
    assert _query(path, "SELECT target, started_at, duration_ms, status, http_status, rows, url, error FROM fetch_log") == [
        ("portal-d/rising", "2026-11-20T05:30:00Z", 42, "ok", 200, 2, "http://upstream.test/chart", None)]
    assert _query(path, "PRAGMA journal_mode") == [("wal",)]


def test_constraint_violation_in_a_commit_leaves_nothing(tmp_path: Path) -> None:
    """The fetch-log row is the last insert; when it violates a constraint the snapshots inserted before it go too."""
    path = tmp_path / "g.sqlite"
    with SnapshotWriter(path) as writer:
        writer.commit([_snap("portal-a/realtime", 3, raw=b"x")], _log("portal-a/realtime", rows=3))
        before = _counts(path)
        with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint failed"):
            writer.commit([_snap("portal-a/realtime", 5, tag="b", raw=b"y"), _snap("portal-a/daily", 4)],
                          _log("portal-a/realtime", status="half-done"))
        assert _counts(path) == before == {"snapshots": 1, "entries": 3, "raw_payloads": 1, "fetch_log": 1, "changes": 1}
        bad_entry = StoredEntry(1, "t", "a", None, None)  # type: ignore[arg-type]  # record is NOT NULL
        with pytest.raises(sqlite3.IntegrityError, match="NOT NULL"):
            writer.commit([_snap("portal-a/daily", 2), NewSnapshot("portal-a/weekly", "2026-11-20", None, NOW, "s",
                                                                    [bad_entry])], _log("portal-a/daily"))
        assert _counts(path) == before
        # The writer is still usable and the rolled-back ids were never handed out.
        assert writer.commit([_snap("portal-a/realtime", 2, tag="c")], _log("portal-a/realtime", rows=2)) == [2]
    assert _query(path, "SELECT id, target, row_count FROM snapshots") == [(1, "portal-a/realtime", 3),
                                                                          (2, "portal-a/realtime", 2)]


class _Exploding(list[StoredEntry]):
    """Entries that stop arriving halfway, as when a crawler is interrupted while building the rows."""

    def __iter__(self) -> Iterator[StoredEntry]:
        yield self[0]
        yield self[1]
        raise KeyboardInterrupt


def test_exception_inside_a_commit_leaves_nothing(tmp_path: Path) -> None:
    """Even a BaseException half-way through the second snapshot rolls back the first one."""
    path = tmp_path / "g.sqlite"
    with SnapshotWriter(path) as writer:
        broken = _snap("portal-d/rising", 0)
        broken.entries = _Exploding([_entry(1), _entry(2), _entry(3)])
        with pytest.raises(KeyboardInterrupt):
            writer.commit([_snap("portal-d/all_age", 100, raw=b"raw"), broken], _log("portal-d/rising"))
        assert _counts(path) == {"snapshots": 0, "entries": 0, "raw_payloads": 0, "fetch_log": 0, "changes": 0}
        assert writer.commit([_snap("portal-d/all_age", 1)], _log("portal-d/rising", rows=1)) == [1]
    assert _query(path, "PRAGMA integrity_check") == [("ok",)]


def test_log_failure_writes_the_log_row_only(tmp_path: Path) -> None:
    """A failed attempt is recorded without touching the snapshots."""
    path = tmp_path / "g.sqlite"
    with SnapshotWriter(path) as writer:
        writer.commit([_snap("portal-a/realtime", 2)], _log("portal-a/realtime", rows=2))
        writer.log_failure(_log("portal-a/realtime", status="failed", error="HTTP 503"))
    assert _counts(path) == {"snapshots": 1, "entries": 2, "raw_payloads": 0, "fetch_log": 2, "changes": 1}
    assert _query(path, "SELECT status, rows, error FROM fetch_log ORDER BY id") == [("ok", 2, None),
                                                                                  ("failed", None, "HTTP 503")]


def test_writer_outside_its_with_block_refuses() -> None:
    """Using a writer that is not open is a programming error, reported as such."""
    with pytest.raises(RuntimeError, match="outside its `with` block"):
        SnapshotWriter(Path("/nonexistent/never.sqlite")).commit([], _log("x"))


def test_snapshots_between_and_records_on_the_writer(tmp_path: Path) -> None:
    """The crawl-side reads (earlier observations) select by fetched_at inclusively and keep row order."""
    with SnapshotWriter(tmp_path / "g.sqlite") as writer:
        for minutes in (80, 60, 45, 30):
            writer.commit([_snap("portal-d/all_age", 2, NOW - timedelta(minutes=minutes), tag=str(minutes))],
                          _log("portal-d/all_age"))
        rows = writer.snapshots_between("portal-d/all_age", NOW - timedelta(minutes=75), NOW - timedelta(minutes=45))
        assert [(r.id, r.fetched_at) for r in rows] == [(2, "2026-11-20T04:30:00Z"), (3, "2026-11-20T04:45:00Z")]
        assert writer.records(3) == [b'{"tag":"45","rank":1}', b'{"tag":"45","rank":2}']
        assert writer.snapshots_between("portal-d/rising", NOW - timedelta(days=1), NOW) == []


# --- reading ------------------------------------------------------------------------------------

def test_reader_latest_is_the_newest_and_sees_new_commits(tmp_path: Path) -> None:
    """The server's long-lived connection always answers from the newest committed snapshot."""
    path = tmp_path / "g.sqlite"

    async def scenario() -> None:
        reader = SnapshotReader(path)
        assert await reader.latest("portal-a/realtime") is None  # no file yet
        assert await reader.data_version() is None
        assert not path.exists()
        with SnapshotWriter(path) as writer:
            writer.commit([_snap("portal-a/realtime", 3, NOW - timedelta(hours=1), tag="old")], _log("portal-a/realtime"))
            writer.commit([_snap("portal-b/realtime", 2)], _log("portal-b/realtime"))
            version = await reader.data_version()
            assert await reader.latest("portal-a/realtime") == SnapshotRow(
                1, "portal-a/realtime", "2026-11-20", 4, "2026-11-20T04:30:00Z", "test old", 3)
            writer.commit([_snap("portal-a/realtime", 4, tag="new")], _log("portal-a/realtime"))
            assert await reader.data_version() != version
            latest = await reader.latest("portal-a/realtime")
            assert latest == SnapshotRow(3, "portal-a/realtime", "2026-11-20", 5, "2026-11-20T05:30:00Z", "test new", 4)
            assert await reader.records(3, 2) == [b'{"tag":"new","rank":1}', b'{"tag":"new","rank":2}']
            assert [(r.id, r.target) for r in await reader.latest_per_target()] == [(3, "portal-a/realtime"),
                                                                                   (2, "portal-b/realtime")]
            assert await reader.latest("portal-c/realtime") is None
            assert [row[1:7] for row in await reader.fetch_log(None, 1)] == [
                ("portal-a/realtime", "2026-11-20T05:30:00Z", 42, "ok", 200, None)]
        await reader.close()

    asyncio.run(scenario())


# --- retention ----------------------------------------------------------------------------------

def test_retention_prunes_old_snapshots_of_matching_targets_but_never_a_newest(tmp_path: Path) -> None:
    """Old FLO observations go (with their entries); other prefixes and each target's newest stay."""
    path = tmp_path / "g.sqlite"
    now = NOW
    days = lambda n: now - timedelta(days=n)
    with SnapshotWriter(path, now=lambda: now) as writer:
        for target, when in (("portal-d/all_age", days(10)), ("portal-d/all_age", days(5)), ("portal-d/all_age", days(1)),
                             ("portal-d/rising", days(10)), ("portal-a/realtime", days(10)),
                             ("portal-a/realtime", days(9))):
            writer.commit([_snap(target, 2, when, raw=b"raw")], _log(target))
    assert _counts(path)["snapshots"] == 6
    with SnapshotWriter(path, retention={"portal-d/": 3.0}, now=lambda: now) as writer:
        assert writer.commit([_snap("portal-d/all_age", 2, now, raw=b"raw")], _log("portal-d/all_age")) == [7]
    assert _query(path, "SELECT id, target FROM snapshots ORDER BY id") == [
        (3, "portal-d/all_age"), (4, "portal-d/rising"), (5, "portal-a/realtime"), (6, "portal-a/realtime"),
        (7, "portal-d/all_age")]
    assert _query(path, "SELECT DISTINCT snapshot_id FROM entries ORDER BY 1") == [(3,), (4,), (5,), (6,), (7,)]
    # Raw payloads older than 7 days go for every target, except each target's newest snapshot's.
    assert _query(path, "SELECT snapshot_id FROM raw_payloads ORDER BY 1") == [(3,), (4,), (6,), (7,)]
    assert _query(path, "PRAGMA foreign_key_check") == []


# --- change records -----------------------------------------------------------------------------

def _titled(target: str, titles: str, fetched_at: datetime = NOW, chart_date: str | None = None) -> NewSnapshot:
    """A chart of one-letter titles, ranked in the order given (no item ids: matched by title and artist)."""
    entries = [StoredEntry(rank, t.lower(), "artist", None, f'{{"title":"{t}"}}'.encode())
               for rank, t in enumerate(titles, start=1)]
    return NewSnapshot(target, chart_date or fetched_at.date().isoformat(), None, fetched_at, "test", entries)


def _changes(path: Path) -> list[tuple[Any, ...]]:
    return [(*row[:-1], json.loads(row[-1])) for row in _query(
        path, "SELECT id, snapshot_id, previous_snapshot_id, target, chart_date, chart_hour, committed_at, summary"
              " FROM changes ORDER BY id")]


def test_every_committed_snapshot_gets_a_change_record_against_the_previous_of_its_target(tmp_path: Path) -> None:
    """One change row per snapshot, in its commit, naming the previous snapshot of the same target, stamped with the
    writer's clock; a title that left and came back is a re-entry."""
    path = tmp_path / "g.sqlite"
    clock = [NOW + timedelta(minutes=1)]
    with SnapshotWriter(path, now=lambda: clock[0]) as writer:
        writer.commit([_titled("a/daily", "ABC"), _titled("b/daily", "XY")], _log("a/daily"))
        clock[0] += timedelta(minutes=5)
        writer.commit([_titled("a/daily", "BAD", NOW + timedelta(days=1))], _log("a/daily"))
        writer.commit([_titled("a/daily", "CBA", NOW + timedelta(days=2))], _log("a/daily"))
    rows = _changes(path)
    assert [row[:7] for row in rows] == [
        (1, 1, None, "a/daily", "2026-11-20", None, "2026-11-20T05:31:00Z"),
        (2, 2, None, "b/daily", "2026-11-20", None, "2026-11-20T05:31:00Z"),
        (3, 3, 1, "a/daily", "2026-11-21", None, "2026-11-20T05:36:00Z"),
        (4, 4, 3, "a/daily", "2026-11-22", None, "2026-11-20T05:36:00Z")]
    first, _, second, third = (row[7] for row in rows)
    assert (first["entries_in"], first["changed"], first["number_one"]["entry"]) == (3, True, {"title": "A"})
    assert {k: second[k] for k in ("entries_in", "entries_out", "moved", "reentries", "new_number_one")} == {
        "entries_in": 1, "entries_out": 1, "moved": 2, "reentries": 0, "new_number_one": True}
    assert [(e["entry"]["title"], e["previous_rank"]) for e in second["exited"]] == [("C", 3)]
    # C was in the first chart, out of the second, back in the third.
    assert (third["reentries"], [e["entry"]["title"] for e in third["reentered"]]) == (1, ["C"])
    assert third["climbers"] == [] and third["new_number_one"] is True
    assert [(e["entry"]["title"], e["rank"], e["previous_rank"]) for e in third["fallers"]] == [("B", 2, 1), ("A", 3, 2)]


def test_a_backfilled_older_chart_is_compared_with_the_chart_before_it(tmp_path: Path) -> None:
    """The previous snapshot is the one before by chart time, not the last committed: a backfill of an older week
    compares with the week before it, and a re-crawl of the same chart with that chart."""
    path = tmp_path / "g.sqlite"
    with SnapshotWriter(path) as writer:
        writer.commit([_titled("w", "AB", chart_date="2026-11-13")], _log("w"))  # 1
        writer.commit([_titled("w", "BA", chart_date="2026-11-20")], _log("w"))  # 2
        writer.commit([_titled("w", "AC", chart_date="2026-11-06")], _log("w"))  # 3: a backfill, older than both
        writer.commit([_titled("w", "BA", chart_date="2026-11-20")], _log("w"))  # 4: the same week again
    assert [(row[1], row[2]) for row in _changes(path)] == [(1, None), (2, 1), (3, None), (4, 2)]
    assert _changes(path)[3][7]["changed"] is False


def test_pruning_keeps_change_records_and_their_ids_never_repeat(tmp_path: Path) -> None:
    """Retention drops snapshots, never change rows; a summary still names the entries it compared. Change ids keep
    rising even when the newest rows are gone (AUTOINCREMENT)."""
    path = tmp_path / "g.sqlite"
    now = NOW
    with SnapshotWriter(path, now=lambda: now) as writer:
        writer.commit([_titled("p/x", "AB", now - timedelta(days=10))], _log("p/x"))
        writer.commit([_titled("p/x", "BC", now - timedelta(days=9))], _log("p/x"))
    with SnapshotWriter(path, retention={"p/": 3.0}, now=lambda: now) as writer:
        writer.commit([_titled("p/x", "CD", now)], _log("p/x"))
        assert _query(path, "SELECT id FROM snapshots") == [(3,)]
        rows = _changes(path)
        assert [(row[0], row[1], row[2]) for row in rows] == [(1, 1, None), (2, 2, 1), (3, 3, 2)]
        assert [e["entry"]["title"] for e in rows[1][7]["exited"]] == ["A"]  # snapshot 1 is gone; the summary stands
        writer.db.execute("DELETE FROM changes WHERE id = 3")
        writer.commit([_titled("p/x", "DE", now)], _log("p/x"))
    assert [row[0] for row in _changes(path)] == [1, 2, 4]


# --- the kill tests -----------------------------------------------------------------------------

def _child_env(data: Path, **upstreams: str) -> dict[str, str]:
    env = dict(child_env(DATA_DIR=str(data), CRAWL_DELAY_SECONDS="0", RETRY_BACKOFF_SECONDS="0.01"),
               PYTHONPATH=str(REPO_ROOT))
    env.update({f"CHARTGW_UPSTREAM_{name}": origin for name, origin in upstreams.items()})
    return env


def _check_file(path: Path) -> None:
    """What must hold after any kill: a sound file with every entry belonging to a snapshot, and every snapshot
    with exactly one change record (they commit together)."""
    assert _query(path, "PRAGMA integrity_check") == [("ok",)]
    assert _query(path, "PRAGMA foreign_key_check") == []
    assert _query(path, "SELECT s.id, count(c.id) FROM snapshots s LEFT JOIN changes c ON c.snapshot_id = s.id"
                        " GROUP BY s.id HAVING count(c.id) != 1") == []


def _latest(path: Path, target: str) -> tuple[int, int, str]:
    return _query(path, "SELECT id, row_count, fetched_at FROM snapshots WHERE target = ? ORDER BY id DESC LIMIT 1",
                  (target,))[0]


def _whole_records(path: Path, snapshot_id: int, row_count: int) -> list[bytes]:
    """The snapshot's records, after checking its entries are exactly positions and ranks 1..row_count."""
    rows = _query(path, "SELECT position, rank, record FROM entries WHERE snapshot_id = ? ORDER BY position",
                  (snapshot_id,))
    assert [(p, r) for p, r, _ in rows] == [(i, i) for i in range(1, row_count + 1)], f"snapshot {snapshot_id} partial"
    return [rec for _, _, rec in rows]


@dataclass
class _CrawlCase:
    args: tuple[str, ...]
    targets: tuple[str, ...]
    old: dict[str, tuple[int, list[bytes]]]
    """Each target's seeded snapshot: id and records."""
    new: dict[str, list[bytes]]
    """The records an uninterrupted crawl commits (from a reference run on a copy)."""
    seconds: float
    """How long the uninterrupted crawl process took."""


def _run_crawl(data: Path, args: Sequence[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chartgw", "crawl", "korea-chart", "--json", *CRAWL_AT, *args], env=env,
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_killed_crawl_processes_leave_the_previous_snapshot_serving(tmp_path: Path) -> None:
    """SIGKILL the real `chartgw crawl` many times, before and while it fetches and commits.

    Every kill must leave a file passing integrity_check, and per target either the old snapshot
    (same id, same rows) or exactly the new chart a completed crawl commits. FLO's observation and
    its rising chart share one transaction, so they are both old or both new. The folder is seeded
    here, not copied from the session's `korea_data`, which other tests read.
    """
    data = build_group_db(tmp_path / "kill", "korea-chart")
    ref = copy_data(data, tmp_path / "ref")
    db, ref_db = data / GROUP_FILE, ref / GROUP_FILE
    replies = all_replies(NOW, variant=7)  # a different sample chart than the seeded one
    servers = {name: ReplayServer(replies[name]).start() for name in ("MELON", "FLO")}
    try:
        env = _child_env(data, **{n: s.origin for n, s in servers.items()})
        ref_env = _child_env(ref, **{n: s.origin for n, s in servers.items()})
        cases: list[_CrawlCase] = []
        for args, names in ((("--site", "portal-a"), ("realtime", "hot100_d100", "hot100_d30", "daily", "weekly")),
                            (("--site", "portal-d", "--chart-type", "rising"), ("all_age", "rising"))):
            keys = tuple(f"{args[1]}/{n}" for n in names)
            old = {t: (_latest(db, t)[0], _whole_records(db, *_latest(db, t)[:2])) for t in keys}
            started = time.monotonic()
            done = _run_crawl(ref, args, ref_env)
            duration = time.monotonic() - started
            assert done.returncode == 0, done.stderr
            expected = [f"{args[1]}/{args[3]}"] if len(args) > 2 else list(keys)
            assert [(o["target"], o["status"]) for o in json.loads(done.stdout)] == [(t, "ok") for t in expected]
            new = {t: _whole_records(ref_db, *_latest(ref_db, t)[:2]) for t in keys}
            for t in keys:
                assert new[t] != old[t][1], f"{t}: the new sample must differ from the seeded one"
            cases.append(_CrawlCase(args, keys, old, new, duration))
        others = {t: _latest(db, t)[0] for (t,) in _query(db, "SELECT DISTINCT target FROM snapshots")
                  if not any(t in c.targets for c in cases)}
        base_log = {t: _query(db, "SELECT count(*) FROM fetch_log WHERE target = ? AND status = 'ok'", (t,))[0][0]
                    for c in cases for t in c.targets}

        loop = asyncio.new_event_loop()
        reader = SnapshotReader(db)
        assert loop.run_until_complete(reader.latest("portal-a/realtime")) is not None  # opened before any kill
        held = sqlite3.connect(db, isolation_level=None)
        rng = random.Random(20261120)
        kinds: dict[str, int] = {"killed before fetching": 0, "killed while fetching/committing": 0,
                                 "completed before the kill": 0}
        states: set[str] = set()
        try:
            for i in range(24):
                case = cases[i % 2]
                for server in servers.values():
                    server.seen = []
                hold = i % 4 == 3  # a reader inside a read transaction across the kill
                if hold:
                    held.execute("BEGIN")
                    before = {t: _read_in(held, t) for t in case.targets}
                proc = subprocess.Popen([sys.executable, "-m", "chartgw", "crawl", "korea-chart", "--json", *CRAWL_AT,
                                         *case.args],
                                        env=env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                if i % 3 == 0:
                    time.sleep(rng.uniform(0.05, case.seconds * 0.8))  # anywhere from start-up on
                else:
                    deadline = time.monotonic() + 20
                    while not any(s.seen for s in servers.values()) and proc.poll() is None:
                        assert time.monotonic() < deadline, "the crawl never reached the upstream"
                        time.sleep(0.001)
                    time.sleep(rng.uniform(0.0, 0.12))  # in the fetch / parse / commit phase
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=10)
                stderr = proc.stderr.read().decode() if proc.stderr else ""
                if proc.returncode == -signal.SIGKILL:
                    kinds["killed while fetching/committing" if any(s.seen for s in servers.values())
                          else "killed before fetching"] += 1
                else:
                    assert proc.returncode == 0, stderr
                    kinds["completed before the kill"] += 1
                if hold:
                    assert {t: _read_in(held, t) for t in case.targets} == before, "a read transaction changed"
                    held.execute("COMMIT")

                _check_file(db)
                for c in cases:
                    for t in c.targets:
                        sid, rows, _ = _latest(db, t)
                        records = _whole_records(db, sid, rows)
                        if sid == c.old[t][0]:
                            assert records == c.old[t][1], f"{t}: the old snapshot changed"
                            states.add("old")
                        else:
                            assert sid > c.old[t][0] and records == c.new[t], f"{t}: snapshot {sid} is not the new chart"
                            states.add("new")
                        row = loop.run_until_complete(reader.latest(t))
                        assert row is not None and row.id == sid and row.row_count == rows
                        assert loop.run_until_complete(reader.records(sid, 5)) == records[:5]
                    _check_counts(db, c, base_log)
                assert {t: _latest(db, t)[0] for t in others} == others
        finally:
            held.close()
            loop.run_until_complete(reader.close())
            loop.close()
        assert kinds["killed while fetching/committing"] >= 6, (kinds, states)
        assert kinds["killed before fetching"] >= 3, (kinds, states)

        # The file is not wedged: an undisturbed crawl still commits the new charts.
        for c in cases:
            assert _run_crawl(data, c.args, env).returncode == 0
            for t in c.targets:
                assert _whole_records(db, *_latest(db, t)[:2]) == c.new[t]
        _check_file(db)
    finally:
        for server in servers.values():
            server.stop()


def _read_in(db: sqlite3.Connection, target: str) -> tuple[int, int, int]:
    sid, rows = db.execute("SELECT id, row_count FROM snapshots WHERE target = ? ORDER BY id DESC LIMIT 1",
                           (target,)).fetchone()
    return sid, rows, db.execute("SELECT count(*) FROM entries WHERE snapshot_id = ?", (sid,)).fetchone()[0]


def _check_counts(db: Path, case: _CrawlCase, base_log: dict[str, int]) -> None:
    """Snapshots and fetch-log rows arrive together: one of each per committed crawl result."""
    logged = {t: _query(db, "SELECT count(*) FROM fetch_log WHERE target = ? AND status = 'ok'", (t,))[0][0]
              - base_log[t] for t in case.targets}
    added = {t: _query(db, "SELECT count(*) FROM snapshots WHERE target = ? AND id > ?", (t, case.old[t][0]))[0][0]
             for t in case.targets}
    changed = {t: _query(db, "SELECT count(*) FROM changes WHERE target = ? AND snapshot_id > ?", (t, case.old[t][0]))[0][0]
               for t in case.targets}
    assert changed == added, (changed, added)  # no change record without its snapshot, nor a snapshot without one
    if case.targets[-1] == "portal-d/rising":
        # One transaction per FLO observation: all_age + rising + the rising target's log row.
        assert added["portal-d/all_age"] == added["portal-d/rising"] == logged["portal-d/rising"], (added, logged)
        since = max(sid for sid, _ in case.old.values())
        ids = {t: [sid for (sid,) in _query(db, "SELECT id FROM snapshots WHERE target = ? AND id > ? ORDER BY id",
                                            (t, since))] for t in case.targets}
        assert ids["portal-d/rising"] == [sid + 1 for sid in ids["portal-d/all_age"]], ids
    else:
        assert added == logged, (added, logged)


BIG_WRITER = r'''
"""Commit a very large snapshot over and over, saying where it is, until killed."""
import sys
from datetime import datetime, timezone
from pathlib import Path

from chartgw.store import FetchLogRow, NewSnapshot, SnapshotWriter, StoredEntry

path, gen, size = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
PAD = b"x" * 120


def say(word, n):
    sys.stdout.write(f"{word} {n}\n")
    sys.stdout.flush()


class Traced(SnapshotWriter):
    gen = 0

    def _insert_log(self, log):  # inside the transaction, after every entry row
        say("logged", self.gen)
        super()._insert_log(log)

    def _prune(self):  # just after COMMIT returned
        say("committed", self.gen)
        super()._prune()


with Traced(path, retention={"kill-test/": 0.0}) as writer:
    say("ready", gen)
    while True:
        writer.gen = gen
        now = datetime.now(timezone.utc)
        entries = [StoredEntry(i, f"t{gen}-{i}", f"a{i}", str(i), b'{"gen":%d,"rank":%d,"pad":"%s"}' % (gen, i, PAD))
                   for i in range(1, size + 1)]
        # The chart date is the generation, zero-padded so that the newest chart (text order) is the newest generation.
        snap = NewSnapshot("kill-test/big", f"{gen:06d}", None, now, "kill test", entries, raw=PAD * 1000)
        say("begin", gen)
        writer.commit([snap], FetchLogRow("kill-test/big", now, 0, "ok", 200, size, None, f"gen {gen}"))
        say("done", gen)
        gen += 1
'''
BIG_TARGET = "kill-test/big"
BIG_SIZE = 20_000


def _big_state(db: Path) -> tuple[int, int]:
    """(generation, snapshot id) of the big target's latest snapshot, after checking it is whole."""
    sid, rows, _ = _latest(db, BIG_TARGET)
    gen = int(_query(db, "SELECT chart_date FROM snapshots WHERE id = ?", (sid,))[0][0])
    assert rows == BIG_SIZE
    count, low, high, ranked, own = _query(
        db, "SELECT count(*), min(position), max(position), sum(rank = position),"
            " sum(title_key = 't' || ? || '-' || position) FROM entries WHERE snapshot_id = ?", (gen, sid))[0]
    assert (count, low, high, ranked, own) == (BIG_SIZE, 1, BIG_SIZE, BIG_SIZE, BIG_SIZE), f"snapshot {sid} partial"
    return gen, sid


def _drop_older(db: Path, keep: int) -> None:
    """Drop the big target's older snapshots between kills, so integrity_check stays quick."""
    with SnapshotWriter(db) as writer:
        writer.db.execute("DELETE FROM snapshots WHERE target = ? AND id < ?", (BIG_TARGET, keep))
        writer.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def test_killed_mid_commit_of_a_huge_snapshot_leaves_old_or_whole_new(korea_data: Path, tmp_path: Path) -> None:
    """SIGKILL a writer committing 20,000-row snapshots in a loop at random moments, many times.

    The child reports where it is (inserting rows, about to COMMIT, committed, pruning/checkpointing),
    so each kill's expected outcome is exact: killed while inserting means the previous generation
    serves; killed after COMMIT returned means the new one does. Never a partial one.
    """
    data = copy_data(korea_data, tmp_path / "kill")
    db = data / GROUP_FILE
    seeded = {t: i for t, i in _query(db, "SELECT target, max(id) FROM snapshots GROUP BY target")}
    with SnapshotWriter(db) as writer:
        entries = [StoredEntry(i, f"t0-{i}", f"a{i}", str(i), b"{}") for i in range(1, BIG_SIZE + 1)]
        writer.commit([NewSnapshot(BIG_TARGET, "000000", None, datetime.now(UTC), "kill test", entries)],
                      FetchLogRow(BIG_TARGET, datetime.now(UTC), 0, "ok", 200, BIG_SIZE, None, "gen 0"))
    generation, _ = _big_state(db)
    committed = {0}
    loop = asyncio.new_event_loop()
    reader = SnapshotReader(db)
    held = sqlite3.connect(db, isolation_level=None)
    rng = random.Random(75)
    phases: dict[str, int] = {"inserting rows": 0, "committing": 0, "pruning/checkpointing": 0, "between commits": 0}
    try:
        assert loop.run_until_complete(reader.latest(BIG_TARGET)) is not None  # opened before any kill
        for i in range(90):  # 30 kills; more (with later kills) while a slow, loaded box has committed too few
            if i >= 30 and phases["inserting rows"] >= 5 and len(committed) >= 5:
                break
            hold = i % 5 == 4
            if hold:
                held.execute("BEGIN")
                before = _read_in(held, BIG_TARGET)
            proc = subprocess.Popen([sys.executable, "-c", BIG_WRITER, str(db), str(generation + 1), str(BIG_SIZE)],
                                    env=_child_env(data), cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            assert proc.stdout is not None and proc.stderr is not None
            first = proc.stdout.readline()
            assert first == f"ready {generation + 1}\n", proc.stderr.read()
            early: list[str] = []
            if i >= 30 and len(committed) < 5:  # a loaded box commits little in 2 s: let this writer commit once first
                while line := proc.stdout.readline():
                    early.append(line)
                    if line.startswith("committed"):
                        break
            time.sleep(rng.uniform(0.0, 0.4 if i < 30 else 2.0))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
            marks = [(word, int(n)) for word, n in (line.split() for line in [*early, *proc.stdout.read().splitlines()])]
            proc.stdout.close()
            proc.stderr.close()
            if hold:
                assert _read_in(held, BIG_TARGET) == before, "a read transaction changed under a kill"
                held.execute("COMMIT")

            _check_file(db)
            latest_gen, sid = _big_state(db)
            done = {n for word, n in marks if word == "committed"}
            last_word, last_gen = marks[-1] if marks else ("ready", generation + 1)
            phase = {"begin": "inserting rows", "logged": "committing", "committed": "pruning/checkpointing"}.get(
                last_word, "between commits")
            phases[phase] += 1
            if last_word == "begin":
                assert latest_gen == last_gen - 1, (marks, latest_gen)  # the interrupted one left nothing
            elif last_word == "logged":
                assert latest_gen in (last_gen - 1, last_gen), (marks, latest_gen)  # COMMIT may have finished
            else:
                assert latest_gen == max(done | {generation}), (marks, latest_gen)
            committed |= done | {latest_gen}
            generation = latest_gen
            # The fetch-log row and the change record exist exactly for the committed generations (the change rows
            # outlive the older generations' snapshots dropped between kills).
            assert {int(e.split()[1]) for (e,) in _query(db, "SELECT error FROM fetch_log WHERE target = ?",
                                                         (BIG_TARGET,))} == committed
            assert {int(d) for (d,) in _query(db, "SELECT chart_date FROM changes WHERE target = ?", (BIG_TARGET,))
                    } == committed
            assert _query(db, "SELECT count(*), count(DISTINCT chart_date) FROM changes WHERE target = ?",
                          (BIG_TARGET,)) == [(len(committed), len(committed))]
            row = loop.run_until_complete(reader.latest(BIG_TARGET))
            assert row is not None and (row.id, row.row_count, row.chart_date) == (sid, BIG_SIZE, f"{latest_gen:06d}")
            tail = loop.run_until_complete(reader.records(sid, BIG_SIZE))
            assert len(tail) == BIG_SIZE and (latest_gen == 0 or tail[-1].startswith(b'{"gen":%d,"rank":%d,' %
                                                                                       (latest_gen, BIG_SIZE)))
            assert {t: i for t, i in _query(db, "SELECT target, max(id) FROM snapshots WHERE target != ? GROUP BY target",
                                            (BIG_TARGET,))} == seeded
            _drop_older(db, sid)
    finally:
        held.close()
        loop.run_until_complete(reader.close())
        loop.close()
    assert phases["inserting rows"] >= 5, phases
    assert len(committed) >= 5, (committed, phases)


def test_a_reader_holding_a_transaction_does_not_stall_a_commit(tmp_path: Path) -> None:
    """The post-commit checkpoint waits only briefly for readers; the commit itself is never held up."""
    db = tmp_path / "g.sqlite"
    now = NOW

    def snapshot(title: str) -> NewSnapshot:
        return NewSnapshot("t/x", "2026-11-20", None, now, "test", [StoredEntry(1, title, "a", None, b"{}")])

    with SnapshotWriter(db, now=lambda: now) as writer:
        writer.commit([snapshot("first")], FetchLogRow("t/x", now, 0, "ok"))
        reader = sqlite3.connect(db, isolation_level=None)
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM snapshots").fetchone() == (1,)
        started = time.monotonic()
        writer.commit([snapshot("second")], FetchLogRow("t/x", now, 0, "ok"))
        assert time.monotonic() - started < 10.0  # not blocked by the reader (its busy timeout is 30 s)
        assert reader.execute("SELECT count(*) FROM snapshots").fetchone() == (1,)  # its snapshot of the data
        reader.execute("COMMIT")
        assert reader.execute("SELECT count(*) FROM snapshots").fetchone() == (2,)
        reader.close()


@pytest.mark.skipif(UNDER_FAKETIME, reason="the checkpointer's timed wait between checkpoints never ends under "
                    "libfaketime (a deadline on a faked clock); a bulk build then falls back on its autocheckpoint")
def test_a_checkpointer_copies_the_wal_back_while_its_writer_writes(tmp_path: Path) -> None:
    """`Checkpointer` (a bulk index build's): the WAL's pages reach the file with no checkpoint by the writer, which
    goes on writing; `close` stops the thread."""
    from chartgw.store.connect import Checkpointer, connect, transaction

    path = tmp_path / "file.sqlite"
    db = connect(path, synchronous="OFF")
    try:
        db.execute("PRAGMA wal_autocheckpoint=0")  # the writer itself never checkpoints
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
        for _ in range(5):
            with transaction(db):
                db.executemany("INSERT INTO t (body) VALUES (?)", [("x" * 200,)] * 2000)
        assert path.stat().st_size < 100_000  # all of it still in the WAL
        checkpoints = Checkpointer(path, every=0.01)
        try:
            deadline = time.monotonic() + 60
            while path.stat().st_size < 2_000_000:
                assert time.monotonic() < deadline, "the WAL was not copied back"
                time.sleep(0.01)
            with transaction(db):  # the writer goes on meanwhile
                db.executemany("INSERT INTO t (body) VALUES (?)", [("y" * 200,)] * 100)
        finally:
            checkpoints.close()
        assert not checkpoints.thread.is_alive()
        assert db.execute("SELECT count(*) FROM t").fetchone() == (10_100,)
    finally:
        db.close()
