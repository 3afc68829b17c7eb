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

Storage: the group's SQLite file (`storage`). Plays and station states are written by one writer task in small
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
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from chartgw.core import config
from chartgw.core.clock import Clock, utc_now
from chartgw.core.settings import Settings
from chartgw.crawl.runner import tls
from chartgw.groups.radio import storage
from chartgw.groups.radio.rollup import rollup
from chartgw.groups.radio.settings import (
    BACKOFF_MAX_SETTING,
    COUNTRIES_SETTING,
    ICY_MODE_SETTING,
    MONITOR_LIMIT_SETTING,
    NAME,
    POLL_SETTING,
    READ_TIMEOUT_SETTING,
    SILENCE_SETTING,
    TAGS_SETTING,
)
from chartgw.groups.radio.storage import Watched, Write, commit_batch, open_db, play_writes, select_stations, state_write
from chartgw.store import group_db_path, iso, parse_iso
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

    def __init__(self, *, settings: Settings, stations: Sequence[Watched] | None = None, path: Path | None = None,
                 clock: Clock = utc_now,
                 poll_seconds: float | None = None, read_timeout: float | None = None,
                 backoff_base: float | None = None, backoff_max: float | None = None, icy_mode: str | None = None,
                 silence_seconds: float | None = None, limit: int | None = None, flush_seconds: float = 0.5,
                 heartbeat_seconds: float = 30.0, rescan_seconds: float = 600.0,
                 transport: httpx.AsyncBaseTransport | None = None, retention: dict[str, float] | None = None) -> None:
        self.settings = settings
        """Where the group file is and, for what is not given, the monitor's settings."""
        self.path = path or group_db_path(NAME, settings)
        self.retention = retention
        self.clock = clock
        self.fixed_stations = list(stations) if stations is not None else None
        self.poll = poll_seconds if poll_seconds is not None else settings.get(POLL_SETTING)
        self.read_timeout = read_timeout if read_timeout is not None else settings.get(READ_TIMEOUT_SETTING)
        self.backoff_base = backoff_base if backoff_base is not None else max(self.poll, 5.0)
        self.backoff_max = backoff_max if backoff_max is not None else settings.get(BACKOFF_MAX_SETTING)
        self.icy_mode = icy_mode or settings.get(ICY_MODE_SETTING)
        self.silence = silence_seconds if silence_seconds is not None else settings.get(SILENCE_SETTING)
        self.limit = limit if limit is not None else settings.get(MONITOR_LIMIT_SETTING)
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
                                         timeout=httpx.Timeout(self.read_timeout), verify=tls())
        try:
            now = self.clock()
            cur = self.db.execute(storage.START_RUN.sql, (os.getpid(), iso(now), iso(now)))
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
                self.pending.append((storage.STOP_RUN, (iso(self.clock()), iso(self.clock()), self.report.plays,
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
            chosen = select_stations(self.db, self.limit, self.settings.get(COUNTRIES_SETTING),
                                     self.settings.get(TAGS_SETTING))
        now = iso(self.clock())
        wanted = {w.station_id: w for w in chosen}
        for station_id in list(self.tasks):
            if station_id not in wanted:
                self.tasks.pop(station_id).cancel()
                run = self.runs.pop(station_id)
                if run.last_heard is not None:
                    self.pending.append((storage.END_PLAY, (iso(run.last_heard), station_id)))
        self.pending.append((storage.UNWATCH, (now, json.dumps(list(wanted)))))
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
        row = self.db.execute(storage.SAVED_STATE.sql, (watched.station_id,)).fetchone()
        if row:
            method, failures, next_attempt, last_heard = row
            run.method = method if method in ("icecast", "shoutcast1", "shoutcast2", "icy") else None
            run.failures = int(failures or 0)
            run.next_attempt = parse_iso(next_attempt) if next_attempt else None
            run.last_heard = parse_iso(last_heard) if last_heard else None
        open_play = self.db.execute(storage.OPEN_TITLE.sql, (watched.station_id,)).fetchone()
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
            self.pending.append((storage.HEARTBEAT, (iso(self.clock()), len(self.tasks), self.report.plays, self._run_id)))
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


def main(argv: list[str] | None = None) -> int:
    """`python -m chartgw.groups.radio.monitor [--run-for S]`: the monitor on its own (`chartgw monitor radio` is the
    usual way to run it; its cost per stream is measured by `python -m chartgw.demo.radio_bench`)."""
    parser = argparse.ArgumentParser(prog="chartgw monitor radio")
    parser.add_argument("--run-for", type=float, default=None, help="stop after this many seconds (default: never)")
    args = parser.parse_args(argv)
    try:
        report = asyncio.run(run_until_signalled(Monitor(settings=Settings.from_environment()), args.run_for))
    except config.SettingError as exc:
        print(f"chartgw monitor: {exc}", file=sys.stderr)
        return 1
    print(f"radio monitor stopped: {report.stations} stations, {report.plays} plays, {report.readings} readings, "
          f"{report.failures} failures {report.errors or ''}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    from chartgw.groups.radio.monitor import main as module_main  # one copy of the module, not __main__ and it

    sys.exit(module_main())
