"""/radio demo data and the live demo: local sample Icecast / SHOUTcast / ICY stream servers, the directory
crawled from replayed radio-browser answers listing them, and the real monitor recording their plays."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from chartgw.api.group import crawl_group, retention
from chartgw.core.clock import fixed
from chartgw.core.settings import Settings
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import Reply, replay_upstreams, request_key
from chartgw.demo.samples import radio as samples
from chartgw.groups.radio import GROUP, storage
from chartgw.groups.radio.directory import tags
from chartgw.groups.radio.monitor import Monitor, MonitorReport, run_until_signalled
from chartgw.groups.radio.rollup import rollup
from chartgw.groups.radio.routes import HEARTBEAT_GRACE
from chartgw.groups.radio.settings import COUNTRIES_SETTING, DIRECTORY_LIMIT_SETTING, NAME
from chartgw.store import group_db_path, iso, read_once
from chartgw.upstreams import radio_browser as rb

SEED_STEP = timedelta(seconds=60)
"""The seeder's clock moves in steps of a minute, each step once every station has been read at it."""
SESSION = timedelta(minutes=20)
SONG_SECONDS = 120.0


class SteppedClock:
    """Time the seeder moves: the sample servers' schedules and the monitor's dates both read it, so the
    demo's plays are the same on a fast or a loaded machine."""

    def __init__(self, start: datetime) -> None:
        self.at = start

    def __call__(self) -> datetime:
        return self.at

    def seconds(self) -> float:
        return self.at.timestamp()


def sample_pool(settings: Settings) -> list[samples.SampleStation]:
    return samples.station_pool([cc.upper() for cc in settings.get(COUNTRIES_SETTING)], per_country=5,
                                song_seconds=SONG_SECONDS)


def demo_replies(pool: Sequence[samples.SampleStation], urls: dict[str, str], variant: int, settings: Settings,
                 ) -> dict[Any, Reply]:
    """The directory's answers for the pool, plus a list for every configured tag the pool lacks."""
    limit = settings.get(DIRECTORY_LIMIT_SETTING)
    replies = samples.directory_replies(pool, urls, limit=limit, variant=variant)
    listed = samples.listed(pool, variant)
    for tag in tags(settings):
        key = request_key(rb.stations_by_tag_request(tag, limit))
        if key not in replies:
            top = sorted(listed, key=lambda s: -s.clickcount)[:min(limit, 8)]
            replies[key] = Reply(samples.render_stations(top, urls, variant), content_type=samples.JSON_TYPE)
    return replies


def unreachable(pool: Sequence[samples.SampleStation]) -> samples.SampleStation:
    """The demo's broken station (its stream URL points where nothing listens): the last of the pool."""
    return pool[-1]


def seed_times(now: datetime, pool: Sequence[samples.SampleStation]) -> tuple[datetime, datetime]:
    """When the seeder's two monitor sessions begin. The first (with the first directory crawl) about 3 days
    back, where the sample schedules start; the second `SESSION` before `now`, placed 200 s into the
    schedules, so that both hold tracks, the station ident (at 480 s) and the ad break (at 1080 s)."""
    period = timedelta(seconds=pool[0].schedule.period or 1.0)
    second = now - SESSION
    return second - timedelta(seconds=200) - period * ((timedelta(days=3) - timedelta(seconds=200)) // period), second


async def seed(now: datetime, settings: Settings) -> list[Outcome]:
    """The directory crawled twice (about 3 days ago, an hour ago: the second lacks one station, now
    inactive) from local sample stream servers, and two 20-minute monitor sessions (then, and up to `now`)
    recording real plays from those servers, read a minute apart on a stepped clock. One station's
    stream is unreachable: it backs off."""
    played, live = _recorded(now, settings)
    if live:
        return []  # the live demo (`chartgw demo --radio-monitor`) keeps the file current itself
    pool = sample_pool(settings)
    origin, second = seed_times(now, pool)
    clock = SteppedClock(origin)
    outcomes: list[Outcome] = []
    with samples.serving_radio(pool, clock=clock.seconds, bytes_per_second=0) as radio:
        urls = radio.stream_urls()
        broken = unreachable(pool)
        urls[broken.station_id] = f"http://127.0.0.1:{samples.free_port()}{broken.mount}"
        if played:  # seeded before (`chartgw demo --keep-fresh`): the directory again, no second set of plays
            with replay_upstreams({rb.UPSTREAM: demo_replies(pool, urls, 1, settings)}) as servers:
                return await crawl_group(GROUP, {}, settings=servers.over(settings), now=fixed(now))
        with replay_upstreams({rb.UPSTREAM: demo_replies(pool, urls, 0, settings)}) as servers:
            served = servers.over(settings)
            outcomes += await crawl_group(GROUP, {}, settings=served, now=fixed(origin))
            await _session(clock, origin, origin + SESSION, settings)
            servers[rb.UPSTREAM].replies.update(demo_replies(pool, urls, 1, settings))
            outcomes += await crawl_group(GROUP, {}, settings=served, now=fixed(now - timedelta(hours=1)))
            await _session(clock, second, now, settings)
    rollup(now, group_db_path(NAME, settings), retention=retention(GROUP, settings))
    return outcomes


def _recorded(now: datetime, settings: Settings) -> tuple[bool, bool]:
    """Whether the group file holds plays already, and whether a monitor is running on it (a heartbeat
    within HEARTBEAT_GRACE of `now`, not stopped)."""
    path = group_db_path(NAME, settings)
    played, runs = read_once(path, storage.ANY_PLAY), read_once(path, storage.LAST_RUN)
    if not played or runs is None:  # no file or no monitor tables yet
        return False, False
    run = runs[0] if runs else None
    return bool(played[0][0]), bool(run and run[2] is None and run[1] >= iso(now - HEARTBEAT_GRACE))


async def _session(clock: SteppedClock, start: datetime, end: datetime, settings: Settings) -> None:
    """The monitor from `start` to `end`, the clock moved a step once every reachable station was read."""
    monitor = Monitor(settings=settings, clock=clock, poll_seconds=30.0, read_timeout=5.0, backoff_base=0.05, backoff_max=0.2,
                      icy_mode="poll", flush_seconds=0.05, heartbeat_seconds=0.2)
    stop = asyncio.Event()
    clock.at = start
    task = asyncio.create_task(monitor.run(stop))
    while not monitor.runs:
        await asyncio.sleep(0.005)
    while clock.at <= end:
        # A reading begun at this time for every station that answers (one begun before the step may
        # have read the title of the step before).
        monitor.wake()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(run.heard_from != clock.at and (run.failures == 0 or run.ok)
                                                  for run in monitor.runs.values()):
            await asyncio.sleep(0.005)
        clock.at = min(clock.at + SEED_STEP, end) if clock.at < end else end + SEED_STEP
    clock.at = end
    stop.set()
    await task


async def run_live_demo(settings: Settings, run_for: float | None = None) -> MonitorReport:
    """What `scripts/serve` runs beside the server (`chartgw demo --radio-monitor`): the sample stream servers on
    the wall clock (titles change every 30 s), the directory crawled from them now, and the monitor on them until
    SIGINT/SIGTERM."""
    pool = samples.station_pool([cc.upper() for cc in settings.get(COUNTRIES_SETTING)], per_country=5, song_seconds=30.0)
    with samples.serving_radio(pool) as radio:
        urls = radio.stream_urls()
        with replay_upstreams({rb.UPSTREAM: demo_replies(pool, urls, 0, settings)}) as servers:
            await crawl_group(GROUP, {}, settings=servers.over(settings))
        monitor = Monitor(settings=settings, poll_seconds=5.0, backoff_base=5.0, backoff_max=60.0, heartbeat_seconds=10.0,
                          retention=retention(GROUP, settings))
        return await run_until_signalled(monitor, run_for)
