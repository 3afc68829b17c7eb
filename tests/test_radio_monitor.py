"""The /radio monitor against local stream servers that speak the real protocols: play splitting, repeats
collapsed, ended_at, backoff of a failing station while the others go on, state kept across restarts,
and kill safety of the play store. Plays are dated on a test clock (FIXED_NOW + seconds), never the
wall clock; the servers' title schedules run on a clock the test moves."""

from __future__ import annotations

import asyncio
import math
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from chartgw.demo.samples.radio import Mount, RadioStreamServer, Schedule, free_port
from chartgw.groups.radio.monitor import Monitor, MonitorReport
from chartgw.groups.radio.storage import Watched, commit_batch, open_db, play_writes, select_stations
from chartgw.store import Query
from tests.fixtures import FIXED_NOW
from tests.fixtures import settings as run_settings

pytestmark = pytest.mark.waits


class StepClock:
    """Time the test sets: servers read seconds, the monitor reads FIXED_NOW + those seconds."""

    def __init__(self) -> None:
        self.at = 0.0
        self._lock = threading.Lock()

    def set(self, seconds: float) -> None:
        with self._lock:
            self.at = seconds

    def seconds(self) -> float:
        return self.at

    def now(self) -> datetime:
        return FIXED_NOW + timedelta(seconds=self.at)


SCHEDULE = Schedule(((0, "Daft Punk - One More Time"), (10, "Daft Punk - One More Time"),
                     (20, "Rádio Nova - Your Number One Hit Music Station"), (30, "Advert break"),
                     (40, "Björk – Jóga"), (50, "Just a title with no separator")))
STATION = "Rádio Nova"


def mount(path: str, fault: str | None = None, name: str = STATION) -> Mount:
    return Mount(path=path, name=name, schedule=SCHEDULE, metaint=1000, fault=fault)  # type: ignore[arg-type]  # literal


@pytest.fixture
def clock() -> StepClock:
    return StepClock()


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "radio.sqlite"


@pytest.fixture
def servers(clock: StepClock) -> Iterator[dict[str, RadioStreamServer]]:
    made = {
        "icecast": RadioStreamServer("icecast", [mount("/live.mp3")], clock=clock.seconds, bytes_per_second=0),
        "icy": RadioStreamServer("icy", [mount("/icy.mp3"), mount("/cut.mp3", "close_mid_block"),
                                         mount("/mute.mp3", "no_metadata"), mount("/stall.mp3", "stall")],
                                 clock=clock.seconds, bytes_per_second=0, chunk_size=333),
        "shoutcast1": RadioStreamServer("shoutcast1", [mount("/")], clock=clock.seconds, bytes_per_second=0),
    }
    for server in made.values():
        server.start()
    yield made
    for server in made.values():
        server.stop()


def watched(servers: dict[str, RadioStreamServer]) -> dict[str, Watched]:
    return {
        "icecast": Watched("ice", STATION, servers["icecast"].stream_url("/live.mp3"), "DE"),
        "icy": Watched("icy", STATION, servers["icy"].stream_url("/icy.mp3"), "DE"),
        "shoutcast1": Watched("sc1", STATION, servers["shoutcast1"].stream_url(), "DE"),
        "cut": Watched("cut", STATION, servers["icy"].stream_url("/cut.mp3"), "DE"),
        "mute": Watched("mute", STATION, servers["icy"].stream_url("/mute.mp3"), "DE"),
        "stall": Watched("stall", STATION, servers["icy"].stream_url("/stall.mp3"), "DE"),
        "down": Watched("down", STATION, f"http://127.0.0.1:{free_port()}/live.mp3", "DE"),
    }


def monitor(path: Path, clock: StepClock, stations: list[Watched], **options: object) -> Monitor:
    settings: dict[str, object] = {"poll_seconds": 0.05, "read_timeout": 1.0, "backoff_base": 0.2, "backoff_max": 5.0,
                                   "flush_seconds": 0.05, "heartbeat_seconds": 0.2, "icy_mode": "poll"}
    return Monitor(settings=run_settings(), stations=stations, path=path, clock=clock.now, **{**settings, **options})  # type: ignore[arg-type]  # test options


def rows(path: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute(sql, params).fetchall()


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def run_stepping(mon: Monitor, clock: StepClock, steps: list[float]) -> None:
    """Run `mon`; at each step move the servers' clock and wait until the station's state saw that title."""

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(mon.run(stop))
        for step in steps:
            clock.set(step)
            seen = mon.report.readings
            deadline = time.monotonic() + 10
            while mon.report.readings < seen + 2:  # a reading begun before the step may still be under way
                await asyncio.sleep(0.02)
                assert time.monotonic() < deadline, f"never heard at {step}"
        await asyncio.sleep(0.15)
        stop.set()
        await task

    asyncio.run(main())


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


EXPECTED = [
    ("Daft Punk - One More Time", "track", "Daft Punk", "One More Time"),
    ("Rádio Nova - Your Number One Hit Music Station", "ident", None, None),
    ("Advert break", "ad", None, None),
    ("Björk – Jóga", "track", "Björk", "Jóga"),
    ("Just a title with no separator", "raw", None, None),
]


@pytest.mark.parametrize("kind", ["icecast", "icy", "shoutcast1"])
def test_plays_split_repeats_collapse_and_end(kind: str, servers: dict[str, RadioStreamServer], clock: StepClock,
                                              path: Path) -> None:
    station = watched(servers)[kind]
    run_stepping(monitor(path, clock, [station]), clock, [0, 5, 10, 15, 20, 30, 40, 50])
    plays = rows(path, "SELECT stream_title, kind, artist, title, started_at, ended_at, method FROM plays ORDER BY id")
    assert [p[:4] for p in plays] == EXPECTED
    assert [p[4] for p in plays] == [_iso(FIXED_NOW + timedelta(seconds=s)) for s in (0, 20, 30, 40, 50)]
    assert [p[5] for p in plays] == [_iso(FIXED_NOW + timedelta(seconds=s)) for s in (20, 30, 40, 50)] + [None]
    assert {p[6] for p in plays} == {kind}
    state = rows(path, "SELECT status, method, last_title, failures, monitored FROM station_state")
    assert state == [("ok", kind, "Just a title with no separator", 0, 1)]
    run = rows(path, "SELECT stations, plays, stopped_at FROM monitor_runs")
    assert run == [(1, 5, run[0][2])] and run[0][2] is not None


def test_icy_stream_mode_reads_every_block(servers: dict[str, RadioStreamServer], clock: StepClock, path: Path) -> None:
    station = watched(servers)["icy"]
    mon = monitor(path, clock, [station], icy_mode="stream")
    mon_run = Monitor.run

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(mon_run(mon, stop))
        for step in (0, 20, 40):
            clock.set(step)
            for _ in range(200):
                await asyncio.sleep(0.05)
                if path.exists() and len(rows(path, "SELECT id FROM plays")) == [0, 20, 40].index(step) + 1:
                    break
        stop.set()
        await task

    asyncio.run(main())
    titles = [r[0] for r in rows(path, "SELECT stream_title FROM plays ORDER BY id")]
    assert titles == ["Daft Punk - One More Time", "Rádio Nova - Your Number One Hit Music Station", "Björk – Jóga"]


def test_failing_stations_back_off_while_the_others_go_on(servers: dict[str, RadioStreamServer], clock: StepClock,
                                                         path: Path) -> None:
    """Run until every bad station has failed twice (not for a fixed time: a loaded machine reads less in a
    second), then bound the attempts by the time taken: backoff doubling from 0.3 s allows about log2(T / 0.3)
    attempts in T seconds, where one per poll (0.05 s) would be T / 0.05. Load only makes fewer."""
    stations = watched(servers)
    mon = monitor(path, clock, list(stations.values()), read_timeout=0.5, backoff_base=0.3)
    clock.set(40)
    bad = ("down", "cut", "mute")

    def settled() -> bool:
        states = {r[0]: r[1:] for r in rows(path, "SELECT station_id, status, failures FROM station_state")}
        played = {r[0] for r in rows(path, "SELECT station_id FROM plays")}
        return (all(states.get(s, ("", 0))[1] >= 2 for s in bad) and states.get("stall", ("", 0))[1] >= 1
                and played >= {"ice", "icy", "sc1"})

    async def until_settled() -> tuple[MonitorReport, float]:
        stop = asyncio.Event()
        began = time.monotonic()
        task = asyncio.create_task(mon.run(stop))
        while not (path.exists() and await asyncio.to_thread(settled)):
            assert time.monotonic() - began < 120 and not task.done(), "the stations did not settle"
            await asyncio.sleep(0.05)
        took = time.monotonic() - began
        stop.set()
        return await task, took

    report, took = asyncio.run(until_settled())
    states = {r[0]: r[1:] for r in rows(path, "SELECT station_id, status, error_reason, failures, next_attempt_at,"
                                              " last_error FROM station_state")}
    for good in ("ice", "icy", "sc1"):
        assert states[good][:3] == ("ok", None, 0)
    assert states["down"][:2] == ("backoff", "unreachable")
    assert states["cut"][:2] == ("backoff", "closed-mid-block")
    assert states["mute"][:2] == ("backoff", "no-metadata")
    assert states["stall"][1] in ("stalled", "no-title")
    most = 2 + math.log2(1 + took / 0.3)  # the first attempt, then one per doubling backoff that fits, and one spare
    for station in bad:
        assert 2 <= states[station][2] <= most, (station, states[station], took)
        assert states[station][3] is not None and states[station][4]
    playing = {r[0] for r in rows(path, "SELECT station_id FROM plays")}
    assert playing == {"ice", "icy", "sc1"}
    assert report.errors.keys() >= {"unreachable", "closed-mid-block", "no-metadata"}


def test_state_survives_a_restart(servers: dict[str, RadioStreamServer], clock: StepClock, path: Path) -> None:
    stations = watched(servers)
    clock.set(0)
    asyncio.run(monitor(path, clock, [stations["icecast"], stations["down"]]).run(run_for=1.0))
    failures = rows(path, "SELECT failures FROM station_state WHERE station_id = 'down'")[0][0]
    assert isinstance(failures, int) and failures >= 1
    # Restarted at the same title: the play goes on (no new row); the failing station keeps its count.
    clock.set(5)
    restarted = monitor(path, clock, [stations["icecast"], stations["down"]], backoff_base=10.0)
    asyncio.run(restarted.run(run_for=0.6))
    assert rows(path, "SELECT count(*), max(ended_at) FROM plays") == [(1, None)]
    after = rows(path, "SELECT failures, method FROM station_state WHERE station_id IN ('down', 'ice') ORDER BY station_id")
    assert after[0][0] >= failures and after[1][1] == "icecast"
    # A station no longer watched is marked so, and its play is closed at its last reading.
    clock.set(20)
    asyncio.run(monitor(path, clock, [stations["down"]]).run(run_for=0.3))
    state = rows(path, "SELECT monitored, status FROM station_state WHERE station_id = 'ice'")
    assert state == [(0, "unwatched")]


def test_select_stations_takes_each_country_in_turn(path: Path) -> None:
    db = open_db(path)
    now = "2026-11-20T00:00:00Z"
    for i, (cc, clicks) in enumerate([("US", 900), ("US", 800), ("US", 700), ("DE", 50), ("DE", 40), ("KR", 5)]):
        db.execute("INSERT INTO stations VALUES (?, ?, ?, ?, 0, ?, '', '', '', x'7b7d', ?, ?, ?, NULL)",
                   (f"s{i}", f"S{i}", cc, clicks, f"http://127.0.0.1/{i}", 0 if i == 1 else 1, now, now))
    chosen = [w.station_id for w in select_stations(db, 4, ("us", "de", "kr"))]
    assert chosen == ["s0", "s3", "s5", "s2"]  # s1 is inactive
    db.close()


KILL_WRITER = """
import sys, itertools
from datetime import datetime, timedelta, UTC
from pathlib import Path
from chartgw.groups.radio.storage import open_db, commit_batch, play_writes, state_write
db = open_db(Path(sys.argv[1]))
start = datetime(2026, 11, 20, tzinfo=UTC)
for batch in itertools.count():
    writes = []
    for station in range(5):
        at = start + timedelta(seconds=batch)
        writes += play_writes(f"s{station}", at, at, f"batch {batch}", "raw", None, None, "icy")
        writes.append(state_write(f"s{station}", last_title=f"batch {batch}", updated_at=at.isoformat()))
    commit_batch(db, writes)
    if batch == 3:
        print("ready", flush=True)
"""


def test_a_killed_writer_leaves_whole_batches(path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", KILL_WRITER, str(path)], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[1])
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        batches = db.execute("SELECT stream_title, count(*), count(DISTINCT station_id) FROM plays GROUP BY stream_title"
                             ).fetchall()
        assert len(batches) > 3 and all(count == 5 and stations == 5 for _, count, stations in batches)
        last = max(int(title.split()[1]) for title, _, _ in batches)
        assert {int(title.split()[1]) for title, _, _ in batches} == set(range(last + 1))
        open_plays = db.execute("SELECT station_id, count(*) FROM plays WHERE ended_at IS NULL GROUP BY station_id"
                                ).fetchall()
        assert sorted(open_plays) == [(f"s{i}", 1) for i in range(5)]
        states = db.execute("SELECT DISTINCT last_title FROM station_state").fetchall()
        assert states == [(f"batch {last}",)]


def test_batches_are_all_or_nothing(path: Path) -> None:
    db = open_db(path)
    good = play_writes("a", FIXED_NOW, FIXED_NOW, "A - B", "track", "A", "B", "icy")
    with pytest.raises(sqlite3.OperationalError):
        commit_batch(db, [*good, (Query("bad", "INSERT INTO no_such_table VALUES (1)"), ())])
    assert db.execute("SELECT count(*) FROM plays").fetchone()[0] == 0
    commit_batch(db, good)
    assert db.execute("SELECT count(*) FROM plays").fetchone()[0] == 1
    db.close()
