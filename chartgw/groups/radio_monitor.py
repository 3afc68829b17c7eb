"""The /radio monitor: what each watched station plays, observed from the station's own announcements.

One long-running asyncio process (`chartgw monitor radio`) with one task per watched station. Each
task finds the cheapest way the stream's server tells its title (Icecast status-json.xsl, SHOUTcast
v2 stats/currentsong, SHOUTcast v1 7.html, else the in-stream ICY metadata; `nowplaying.probe`),
then polls that way every `CHARTGW_RADIO_POLL_SECONDS` (ICY: connect, read up to the first metadata
block, hang up; or, with `CHARTGW_RADIO_ICY_MODE=stream`, stay connected and read every block while
discarding the audio). A change of the announced title is a play; repeats are one play; the play
before gets its `ended_at` when the next begins.

A station that fails (unreachable, HTTP error, stalled, no metadata, off air) is retried with
exponential backoff (`CHARTGW_RADIO_BACKOFF_MAX_SECONDS` at most); its state (failures, reason,
next attempt) is saved, so a restarted monitor keeps backing off. Every error is caught inside the
station's own task: one bad station never stops the others.

Storage: the group's SQLite file. Plays and station states are written by one writer task in small
batches, each one `BEGIN IMMEDIATE ... COMMIT` with `synchronous=FULL` in WAL mode (the habits of
`chartgw.store`): a killed monitor loses at most the batch not yet committed (under a second of
changes; the play in progress), never a half-written one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import sqlite3
import sys
import time
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import msgspec

from chartgw import config
from chartgw.clock import Clock, utc_now
from chartgw.groups import radio_store as rs
from chartgw.records import stored_entry
from chartgw.store import (
    FetchLogRow,
    NewSnapshot,
    Query,
    SnapshotWriter,
    StoredEntry,
    connect,
    group_db_path,
    iso,
    migrate,
    parse_iso,
    transaction,
)
from chartgw.text import compact, split_artists
from chartgw.upstreams.nowplaying import (
    Method,
    NowPlaying,
    NowPlayingError,
    classify_stream_title,
    icy_titles,
    methods_for,
    probe,
    read_now_playing,
    server_kind,
)

NAME = "radio"

# --- settings (the group's; `chartgw.groups.radio` lists them) ----------------------------------------

COUNTRIES_SETTING = config.Setting("RADIO_COUNTRIES", "us,gb,de,fr,kr,jp",
                                   "countries whose stations the directory crawl lists (ISO alpha-2)", config.storefronts)
TAGS_SETTING = config.Setting("RADIO_TAGS", "top 40,charts",
                              "directory tags whose stations are listed too (comma-separated, exact tags)",
                              config.comma_list)
DIRECTORY_LIMIT_SETTING = config.Setting("RADIO_DIRECTORY_LIMIT", "100",
                                         "stations asked of the directory per country and per tag, most clicked first",
                                         config.bounded_int(1, 10_000))
MONITOR_LIMIT_SETTING = config.Setting("RADIO_MONITOR_LIMIT", "50",
                                       "stations the monitor watches: the most clicked of each country in turn",
                                       config.bounded_int(1, 2000))
SILENCE_SETTING = config.Setting("RADIO_SILENCE_SECONDS", "300",
                                 "a play whose station has not been heard for this long is not current",
                                 config.seconds)
POLL_SETTING = config.Setting("RADIO_POLL_SECONDS", "20", "pause between two now-playing readings of a station",
                              config.seconds)
ICY_MODE_SETTING = config.Setting("RADIO_ICY_MODE", "poll",
                                  "ICY-only stations: poll (read to the first metadata block and hang up) or stream "
                                  "(stay connected, exact change times, costs the stream's bandwidth)",
                                  config.choice("poll", "stream"))
BACKOFF_MAX_SETTING = config.Setting("RADIO_BACKOFF_MAX_SECONDS", "900", "longest wait before retrying a failing station",
                                     config.seconds)
READ_TIMEOUT_SETTING = config.Setting("RADIO_READ_TIMEOUT_SECONDS", "15",
                                      "how long one reading may take (connect, status page, first ICY block)",
                                      config.seconds)
SETTINGS = (COUNTRIES_SETTING, TAGS_SETTING, DIRECTORY_LIMIT_SETTING, MONITOR_LIMIT_SETTING, SILENCE_SETTING,
            POLL_SETTING, ICY_MODE_SETTING, BACKOFF_MAX_SETTING, READ_TIMEOUT_SETTING)

# --- the store -----------------------------------------------------------------------------------------

Write = tuple[Query, tuple[Any, ...]]
"""One statement of a batch (a declared query of `chartgw.groups.radio_store` and its arguments)."""
BATCH_STATEMENTS = 200
"""At most this many statements per transaction: small batches, short write locks."""


def open_db(path: Path | None = None, busy_timeout_ms: int = 30_000) -> sqlite3.Connection:
    """The group file with the monitor's tables, opened by the store as a writer (usable from the writer thread)."""
    db = connect(path or group_db_path(NAME), timeout=busy_timeout_ms / 1000, check_same_thread=False)
    migrate(db, rs.TABLES)
    return db


def commit_batch(db: sqlite3.Connection, writes: Sequence[Write]) -> None:
    """`writes` in transactions of at most BATCH_STATEMENTS statements each: all of one or none."""
    for start in range(0, len(writes), BATCH_STATEMENTS):
        with transaction(db):
            for query, params in writes[start:start + BATCH_STATEMENTS]:
                db.execute(query.sql, params)


def play_writes(station_id: str, at: datetime, ended_at: datetime, stream_title: str, kind: str,
                artist: str | None, title: str | None, method: str) -> list[Write]:
    """A play begins: the station's open play ends at `ended_at`, the new one is inserted."""
    return [
        (rs.END_PLAY, (iso(ended_at), station_id)),
        (rs.INSERT_PLAY, (station_id, iso(at), stream_title, kind, artist, title, compact(artist or ""),
                          compact(title or ""), method)),
    ]


def state_write(station_id: str, **values: Any) -> Write:
    """Upsert of the named state columns of one station (others keep their value, or their default on insert)."""
    unknown = set(values) - set(rs.STATE_COLUMNS)
    assert not unknown, unknown
    return (rs.UPSERT_STATE, (station_id, json.dumps(values)))


# --- what to watch -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Watched:
    station_id: str
    name: str
    stream_url: str
    countrycode: str | None = None


def select_stations(db: sqlite3.Connection, limit: int, countries: tuple[str, ...] = (),
                    tags: tuple[str, ...] = ()) -> list[Watched]:
    """Active, non-HLS stations, the most clicked of each country in turn (then of each tag list),
    until `limit`: every configured country gets its top stations watched, not just the biggest one."""
    buckets: list[list[Watched]] = []
    for cc in countries:
        buckets.append([Watched(*row) for row in db.execute(rs.WATCHABLE.sql, (cc.upper(), limit))])
    for tag in tags:
        buckets.append([Watched(*row) for row in db.execute(rs.WATCHABLE_LISTED.sql, (tag_target(tag), limit))])
    if not buckets:
        buckets.append([Watched(*row) for row in db.execute(rs.WATCHABLE.sql, (None, limit))])
    chosen: dict[str, Watched] = {}
    depth = 0
    while len(chosen) < limit and any(depth < len(b) for b in buckets):
        for bucket in buckets:
            if depth < len(bucket) and len(chosen) < limit:
                chosen.setdefault(bucket[depth].station_id, bucket[depth])
        depth += 1
    return list(chosen.values())


def tag_target(tag: str) -> str:
    """The snapshot target of a tag list: "directory-tag/top 40" ("/" and "@" in a tag become "-")."""
    return "directory-tag/" + tag.strip().lower().replace("/", "-").replace("@", "-")


def country_target(cc: str) -> str:
    return f"directory/{cc.lower()}"


# --- the monitor ---------------------------------------------------------------------------------------


@dataclass
class StationRun:
    """One watched station's live state (the task's own; written out as `station_state`)."""

    watched: Watched
    method: Method | None = None
    kind_hint: Method | None = None
    title: str | None = None
    """The announced text of the play in progress (collapses repeats, across restarts too)."""
    last_heard: datetime | None = None
    failures: int = 0
    next_attempt: datetime | None = None
    readings: int = 0
    begun: datetime | None = None
    """When the reading under way began (on the monitor's clock)."""
    heard_from: datetime | None = None
    """When the last successful reading began: what the title it read can be dated from at the earliest."""
    state_written: datetime | None = None
    """When (on the monitor's clock) "still heard" was last saved: at most every min(60 s, silence / 4)."""
    ok: bool = False


@dataclass
class MonitorReport:
    stations: int
    plays: int
    readings: int
    failures: int
    errors: dict[str, int] = field(default_factory=dict)


class Monitor:
    """Watches `stations` (default: chosen from the directory with the settings) until `stop` is set or
    `run_for` seconds have passed. `clock` dates plays and states (a test or the demo can run it on a
    shifted or sped-up clock); waits are real seconds."""

    def __init__(self, *, stations: Sequence[Watched] | None = None, path: Path | None = None, clock: Clock = utc_now,
                 poll_seconds: float | None = None, read_timeout: float | None = None,
                 backoff_base: float | None = None, backoff_max: float | None = None, icy_mode: str | None = None,
                 silence_seconds: float | None = None, limit: int | None = None, flush_seconds: float = 0.5,
                 heartbeat_seconds: float = 30.0, rescan_seconds: float = 600.0,
                 transport: httpx.AsyncBaseTransport | None = None, retention: dict[str, float] | None = None) -> None:
        self.path = path or group_db_path(NAME)
        self.retention = retention
        self.clock = clock
        self.fixed_stations = list(stations) if stations is not None else None
        self.poll = poll_seconds if poll_seconds is not None else config.get(POLL_SETTING)
        self.read_timeout = read_timeout if read_timeout is not None else config.get(READ_TIMEOUT_SETTING)
        self.backoff_base = backoff_base if backoff_base is not None else max(self.poll, 5.0)
        self.backoff_max = backoff_max if backoff_max is not None else config.get(BACKOFF_MAX_SETTING)
        self.icy_mode = icy_mode or config.get(ICY_MODE_SETTING)
        self.silence = silence_seconds if silence_seconds is not None else config.get(SILENCE_SETTING)
        self.limit = limit if limit is not None else config.get(MONITOR_LIMIT_SETTING)
        self.flush_seconds = flush_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.rescan_seconds = rescan_seconds
        self.transport = transport
        self.runs: dict[str, StationRun] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.pending: list[Write] = []
        self.report = MonitorReport(0, 0, 0, 0)
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._run_id = 0
        self._db: sqlite3.Connection | None = None
        self._client: httpx.AsyncClient | None = None

    @property
    def db(self) -> sqlite3.Connection:
        assert self._db is not None, "the monitor is not running"
        return self._db

    # -- running --

    async def run(self, stop: asyncio.Event | None = None, run_for: float | None = None) -> MonitorReport:
        self._stop = stop or asyncio.Event()
        self._db = open_db(self.path)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
        self._client = httpx.AsyncClient(transport=self.transport, limits=limits, follow_redirects=True,
                                         timeout=httpx.Timeout(self.read_timeout))
        try:
            now = self.clock()
            cur = self.db.execute(rs.START_RUN.sql, (os.getpid(), iso(now), iso(now)))
            self._run_id = int(cur.lastrowid or 0)
            self._rescan()
            writer = asyncio.create_task(self._writer())
            beat = asyncio.create_task(self._heartbeat())
            try:
                if run_for is None:
                    await self._stop.wait()
                else:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), run_for)
            finally:
                self._stop.set()
                for task in [*self.tasks.values(), beat]:
                    task.cancel()
                await asyncio.gather(*self.tasks.values(), beat, return_exceptions=True)
                await writer
                self.pending.append((rs.STOP_RUN, (iso(self.clock()), iso(self.clock()), self.report.plays,
                                                   self._run_id)))
                self._flush()
        finally:
            await self._client.aclose()
            self.db.close()
            self._db = None
        return self.report

    def stop(self) -> None:
        self._stop.set()

    def wake(self) -> None:
        """Read every station now instead of at the end of its poll pause (a stepped demo clock)."""
        self._wake.set()
        self._wake = asyncio.Event()

    async def _poll_wait(self) -> None:
        """The pause between two readings: ends early when the monitor stops or is woken."""
        waits = [asyncio.ensure_future(self._stop.wait()), asyncio.ensure_future(self._wake.wait())]
        try:
            await asyncio.wait(waits, timeout=self.poll, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    def _rescan(self) -> None:
        """(Re)read the watch list: start tasks for new stations, stop those no longer chosen."""
        if self.fixed_stations is not None:
            chosen = self.fixed_stations
        else:
            chosen = select_stations(self.db, self.limit, config.get(COUNTRIES_SETTING), config.get(TAGS_SETTING))
        now = iso(self.clock())
        wanted = {w.station_id: w for w in chosen}
        for station_id in list(self.tasks):
            if station_id not in wanted:
                self.tasks.pop(station_id).cancel()
                run = self.runs.pop(station_id)
                if run.last_heard is not None:
                    self.pending.append((rs.END_PLAY, (iso(run.last_heard), station_id)))
        self.pending.append((rs.UNWATCH, (now, json.dumps(list(wanted)))))
        for station_id, watched in wanted.items():
            if station_id in self.tasks:
                self.runs[station_id].watched = watched
                continue
            run = self._restore(watched)
            self.runs[station_id] = run
            self.pending.append(state_write(station_id, monitored=1, status="starting" if run.failures == 0 else "backoff",
                                            updated_at=now))
            self.tasks[station_id] = asyncio.create_task(self._watch(run), name=f"radio:{station_id}")
        self.report.stations = len(self.tasks)

    def _restore(self, watched: Watched) -> StationRun:
        """The saved state of a station: its method, backoff and the play in progress."""
        run = StationRun(watched)
        row = self.db.execute(rs.SAVED_STATE.sql, (watched.station_id,)).fetchone()
        if row:
            method, failures, next_attempt, last_heard = row
            run.method = method if method in ("icecast", "shoutcast1", "shoutcast2", "icy") else None
            run.failures = int(failures or 0)
            run.next_attempt = parse_iso(next_attempt) if next_attempt else None
            run.last_heard = parse_iso(last_heard) if last_heard else None
        open_play = self.db.execute(rs.OPEN_TITLE.sql, (watched.station_id,)).fetchone()
        run.title = open_play[0] if open_play else None
        return run

    async def _sleep(self, seconds: float) -> None:
        """A wait that ends early when the monitor stops."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), max(0.0, seconds))

    async def _writer(self) -> None:
        while not self._stop.is_set():
            await self._sleep(self.flush_seconds)
            if self.pending:
                batch, self.pending = self.pending, []
                try:
                    await asyncio.to_thread(commit_batch, self.db, batch)
                except sqlite3.OperationalError as exc:  # locked past the busy timeout: keep and retry
                    print(f"radio monitor: write deferred: {exc}", file=sys.stderr)
                    self.pending = batch + self.pending

    def _flush(self) -> None:
        batch, self.pending = self.pending, []
        if batch:
            commit_batch(self.db, batch)

    async def _heartbeat(self) -> None:
        last_scan = time.monotonic()
        rolled: datetime | None = None
        while not self._stop.is_set():
            await self._sleep(self.heartbeat_seconds)
            hour = self.clock().replace(minute=0, second=0, microsecond=0)
            if hour != rolled:
                rolled = hour
                try:
                    await asyncio.to_thread(rollup, self.clock(), self.path, self.retention)
                except (sqlite3.Error, ValueError) as exc:  # retried next hour; plays are safe in their table
                    print(f"radio monitor: roll-up failed: {exc}", file=sys.stderr)
            self.pending.append((rs.HEARTBEAT, (iso(self.clock()), len(self.tasks), self.report.plays, self._run_id)))
            if self.fixed_stations is None and time.monotonic() - last_scan >= self.rescan_seconds:
                last_scan = time.monotonic()
                self._rescan()

    # -- one station --

    async def _watch(self, run: StationRun) -> None:
        if run.next_attempt is not None:
            wait = (run.next_attempt - self.clock()).total_seconds()
            if wait > 0:
                await self._sleep(min(wait, self.backoff_max))
        while not self._stop.is_set():
            run.begun = self.clock()
            try:
                if run.method is None:
                    reading = await probe(self._http(), run.watched.stream_url, methods_for(run.kind_hint),
                                          timeout=self.read_timeout)
                    run.method = reading.method
                    self._heard(run, reading.stream_title, reading)
                elif run.method == "icy" and self.icy_mode == "stream":
                    await self._stream_icy(run)
                else:
                    reading = await read_now_playing(self._http(), run.watched.stream_url, run.method,
                                                     timeout=self.read_timeout)
                    self._heard(run, reading.stream_title, reading)
                await self._poll_wait()
            except asyncio.CancelledError:
                raise
            except NowPlayingError as exc:
                await self._failed(run, exc.reason, exc.detail)
            except Exception as exc:  # a bug or an odd answer: this station backs off, the others go on
                await self._failed(run, "error", f"{type(exc).__name__}: {exc}")

    def _http(self) -> httpx.AsyncClient:
        assert self._client is not None
        return self._client

    async def _stream_icy(self, run: StationRun) -> None:
        def headers(seen: Any) -> None:
            run.kind_hint = server_kind(seen)

        async with aclosing(icy_titles(self._http(), run.watched.stream_url, read_timeout=self.read_timeout,
                                       on_headers=headers)) as titles:
            async for title in titles:
                self._heard(run, title, None)

    def _heard(self, run: StationRun, stream_title: str | None, reading: NowPlaying | None) -> None:
        """A reading: a new play when the announced text changed, else just "still heard"."""
        now = self.clock()
        self.report.readings += 1
        run.readings += 1
        run.heard_from = run.begun
        judged = classify_stream_title(stream_title, run.watched.name)
        if reading is not None and reading.artist and reading.title and judged.kind == "track":
            judged.artist, judged.title = reading.artist, reading.title  # Icecast sends them apart (Ogg)
        method = reading.method if reading is not None else (run.method or "icy")
        previous = run.last_heard
        run.last_heard = now
        recovered = not run.ok or run.failures
        run.failures, run.ok, run.next_attempt = 0, True, None
        sid = run.watched.station_id
        if judged.stream_title != run.title:
            gap = (now - previous).total_seconds() if previous else None
            ended = now if gap is None or gap <= self.silence else previous
            assert ended is not None
            self.pending += play_writes(sid, now, ended, judged.stream_title, judged.kind, judged.artist, judged.title,
                                        method)
            run.title = judged.stream_title
            self.report.plays += 1
            self.pending.append(state_write(sid, monitored=1, method=method, status="ok", last_title=judged.stream_title,
                                            last_title_at=iso(now), last_heard_at=iso(now), failures=0,
                                            next_attempt_at=None, updated_at=iso(now)))
            run.state_written = now
        elif recovered or run.state_written is None or \
                (now - run.state_written).total_seconds() >= min(60.0, self.silence / 4):
            self.pending.append(state_write(sid, monitored=1, method=method, status="ok", last_heard_at=iso(now),
                                            failures=0, next_attempt_at=None, updated_at=iso(now)))
            run.state_written = now

    async def _failed(self, run: StationRun, reason: str, detail: str) -> None:
        run.failures += 1
        run.ok = False
        self.report.failures += 1
        self.report.errors[reason] = self.report.errors.get(reason, 0) + 1
        delay = min(self.backoff_max, self.backoff_base * 2 ** min(run.failures - 1, 16))
        delay *= 1 + random.uniform(0, 0.25)
        if run.method not in (None, "icy") and reason != "no-source" and run.failures >= 3:
            run.method = None  # the status page keeps failing: look again for a way that works
        now = self.clock()
        run.next_attempt = now + timedelta(seconds=delay)
        self.pending.append(state_write(run.watched.station_id, monitored=1, status="backoff", last_error=detail[:500],
                                        error_reason=reason, error_at=iso(now), failures=run.failures,
                                        next_attempt_at=iso(run.next_attempt), method=run.method, updated_at=iso(now)))
        await self._sleep(delay)


# --- hourly roll-up: plays as chart entries ------------------------------------------------------------


class PlayedTrack(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One track of a country's radio hour (snapshot `plays/{cc}`): what the artist-history index reads."""

    rank: int
    artist: str
    artists: list[str]
    title: str
    plays: int
    stations: int
    first_played_at: str
    last_played_at: str


ROLLUP_LOOKBACK = timedelta(days=7)


def _hour_label(hour: datetime) -> str:
    return hour.strftime("%Y-%m-%dT%H")


PLAYS_RETENTION = {"plays/": 400.0}
"""The radio group's own retention of hourly plays snapshots (the group passes the operator's, `retention`)."""


def rollup(now: datetime, path: Path | None = None, retention: dict[str, float] | None = None) -> int:
    """Commit a snapshot `plays/{cc}` (chart date and hour) per country for every completed hour since the
    last one rolled up (7 days at most): the hour's tracks, most played first. Returns snapshots committed."""
    end = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    committed = 0
    with SnapshotWriter(path or group_db_path(NAME), retention=PLAYS_RETENTION if retention is None else retention,
                         now=lambda: now, tables=rs.TABLES) as store:
        ((last,),) = store.rows(rs.LAST_ROLLED_HOUR)
        if last:
            start = datetime.strptime(last, "%Y-%m-%dT%H").replace(tzinfo=UTC) + timedelta(hours=1)
        else:
            ((first,),) = store.rows(rs.FIRST_PLAY)
            if first is None:
                return 0
            start = parse_iso(first).replace(minute=0, second=0)
        hour = max(start, end - ROLLUP_LOOKBACK)
        while hour < end:
            rows = store.rows(rs.HOUR_TRACKS, (iso(hour), iso(hour + timedelta(hours=1))))
            by_country: dict[str, list[StoredEntry]] = {}
            for cc, artist, title, plays, stations, first_at, last_at in rows:
                entries = by_country.setdefault(cc, [])
                names = split_artists(artist) or [artist]
                record = PlayedTrack(rank=len(entries) + 1, artist=artist, artists=names, title=title, plays=plays,
                                     stations=stations, first_played_at=first_at, last_played_at=last_at)
                entries.append(stored_entry(record, rank=record.rank, title=title, artists=names, item_id=None))
            for cc, entries in by_country.items():
                target = f"plays/{cc}"
                store.commit([NewSnapshot(target, hour.date().isoformat(), hour.hour, now, "radio monitor", entries)],
                             FetchLogRow(target, now, 0, "ok", None, len(entries), "radio monitor", None))
                committed += 1
            hour += timedelta(hours=1)
    return committed


# --- the command ---------------------------------------------------------------------------------------


async def run_until_signalled(monitor: Monitor, run_for: float | None = None) -> MonitorReport:
    """Run `monitor` until SIGINT or SIGTERM (a clean stop: pending plays committed) or `run_for` seconds."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        return await monitor.run(stop, run_for)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


BENCH_SERVER = """
import json, sys
from chartgw.samples.radio import Mount, RadioStreamServer, station_schedule
n = int(sys.argv[1])
mounts = [Mount(f"/s{i}.mp3", f"Bench {i}", station_schedule(f"Bench {i}", str(i), 30.0)) for i in range(n)]
server = RadioStreamServer("icy", mounts).start()
print(json.dumps([server.stream_url(m.path) for m in mounts]), flush=True)
sys.stdin.read()
server.stop()
"""


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


async def bench(streams: int, seconds: float, icy_mode: str, poll_seconds: float) -> dict[str, float]:
    """The monitor's own cost watching `streams` ICY streams served (paced at 128 kbit/s) by another process:
    CPU seconds per second of this process (1.0 = one core), resident memory and its growth per stream."""
    import resource
    import subprocess
    import tempfile

    server = subprocess.Popen([sys.executable, "-c", BENCH_SERVER, str(streams)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        urls = json.loads(server.stdout.readline())
        with tempfile.TemporaryDirectory() as folder:
            stations = [Watched(f"b{i}", f"Bench {i}", url, "US") for i, url in enumerate(urls)]
            monitor = Monitor(stations=stations, path=Path(folder) / "radio.sqlite", poll_seconds=poll_seconds,
                              read_timeout=15.0, icy_mode=icy_mode, heartbeat_seconds=30.0)
            base_rss = _rss_kb()
            task = asyncio.create_task(monitor.run())
            await asyncio.sleep(min(10.0, seconds / 3))  # connected and past the first readings
            cpu0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
            await asyncio.sleep(seconds)
            cpu1, wall1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
            rss = _rss_kb()
            monitor.stop()
            await task
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=30)
    used = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    return {"streams": streams, "core_share": used / (wall1 - wall0), "cpu_ms_per_stream_second": 1000 * used /
            (wall1 - wall0) / streams, "rss_mb": rss / 1024, "rss_kb_per_stream": (rss - base_rss) / streams,
            "readings": monitor.report.readings, "plays": monitor.report.plays, "failures": monitor.report.failures}


def main(argv: list[str] | None = None) -> int:
    """`python -m chartgw.groups.radio_monitor [--run-for S] [--bench STREAMS]`: the monitor on its own, or
    the measurement of its cost per stream (`chartgw monitor radio` is the usual way to run it)."""
    parser = argparse.ArgumentParser(prog="chartgw monitor radio")
    parser.add_argument("--run-for", type=float, default=None, help="stop after this many seconds (default: never)")
    parser.add_argument("--bench", type=int, metavar="STREAMS", help="measure the cost of watching STREAMS local ICY "
                        "streams (served by a child process) for --run-for seconds, then print it as JSON")
    parser.add_argument("--icy-mode", choices=("poll", "stream"), default="poll", help="with --bench")
    parser.add_argument("--poll-seconds", type=float, default=20.0, help="with --bench")
    args = parser.parse_args(argv)
    if args.bench:
        print(json.dumps(asyncio.run(bench(args.bench, args.run_for or 60.0, args.icy_mode, args.poll_seconds))))
        return 0
    try:
        report = asyncio.run(run_until_signalled(Monitor(), args.run_for))
    except config.SettingError as exc:
        print(f"chartgw monitor: {exc}", file=sys.stderr)
        return 1
    print(f"radio monitor stopped: {report.stations} stations, {report.plays} plays, {report.readings} readings, "
          f"{report.failures} failures {report.errors or ''}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    from chartgw.groups.radio_monitor import main as module_main  # one copy of the module, not __main__ and it

    sys.exit(module_main())

