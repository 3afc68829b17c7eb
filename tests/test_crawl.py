"""The crawl runner: polite retries, refusing partial or broken charts, FLO's rising charts, the lock and the CLI.

In-process crawls go through httpx.MockTransport; CLI runs use the local replay server. Nothing
leaves 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import httpx
import msgspec
import pytest

from chartgw import upstreams
from chartgw.crawl.runner import KST, CrawlBusy, CrawlTarget, Outcome, RetryPolicy, crawl_lock, run_targets
from chartgw.demo.replay import ReplayKey, ReplayServer, Reply, answer_key, replay_key
from chartgw.demo.samples import sample_rows
from chartgw.demo.samples.korea import all_replies, site_replies
from chartgw.groups.korea_chart import GROUP, RisingEntry, rising_entries, targets
from chartgw.store.records import KoreaEntry
from tests.fixtures import FIXED_NOW, child_env, configure, copy_data
from tests.fixtures import settings as run_settings

REPO_ROOT = Path(__file__).resolve().parents[1]
GROUP_NAME = GROUP.name
MELON_URL = "https://www.melon.com/chart/index.htm"
FLO_ALL_AGE = "portal-d/all_age"
NO_EARLIER = "observation stored; rising not published: no FLO observation from 45 to 75 minutes ago yet"

Step = int | tuple[int, dict[str, str]] | type[httpx.TransportError]


# --- helpers ------------------------------------------------------------------------------------

@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty data folder the in-process crawls write to."""
    configure("CHARTGW_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


@pytest.fixture
def seeded(korea_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the seeded data folder, every chart with a good snapshot."""
    path = copy_data(korea_data, tmp_path / "seeded")
    configure("CHARTGW_DATA_DIR", str(path))
    return path


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every sleep the runner asks for, recorded instead of slept, so backoff is asserted exactly."""
    recorded: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(delay: float, result: Any = None) -> Any:
        recorded.append(delay)
        return await real_sleep(0, result)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    return recorded


def _query(folder: Path, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(folder / f"{GROUP_NAME}.sqlite")
    try:
        return [tuple(r) for r in db.execute(sql, tuple(params)).fetchall()]
    finally:
        db.close()


def _latest(folder: Path, target: str) -> tuple[int, str, list[bytes]]:
    """(id, fetched_at, records) of the target's current snapshot."""
    sid, fetched_at = _query(folder, "SELECT id, fetched_at FROM snapshots WHERE target = ? ORDER BY id DESC LIMIT 1",
                             (target,))[0]
    records = [r for (r,) in _query(folder, "SELECT record FROM entries WHERE snapshot_id = ? ORDER BY position", (sid,))]
    return sid, fetched_at, records


def _last_log(folder: Path) -> tuple[Any, ...]:
    return _query(folder, "SELECT target, started_at, status, http_status, rows, url, error, duration_ms FROM fetch_log"
                          " ORDER BY id DESC LIMIT 1")[0]


def _serving(replies: dict[ReplayKey, Reply]) -> httpx.MockTransport:
    """A MockTransport answering like the replay server: the sample body for a known request, else 404."""

    def handler(request: httpx.Request) -> httpx.Response:
        params = parse_qsl(request.url.query.decode(), keep_blank_values=True)
        reply = replies.get(replay_key(request.method, request.url.path, params), Reply(b"no such page", 404))
        return httpx.Response(reply.status, content=reply.body, headers={"content-type": reply.content_type})

    return httpx.MockTransport(handler)


def _scripted(steps: Sequence[Step], body: bytes) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """Answer the n-th request as steps[n] says (a status, a status with headers, or a transport error), then 200."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        step = steps[len(seen) - 1] if len(seen) <= len(steps) else 200
        if isinstance(step, type):
            raise step("boom", request=request)
        status, headers = step if isinstance(step, tuple) else (step, {})
        if status == 200:
            return httpx.Response(200, content=body, headers={"content-type": "text/html; charset=utf-8"})
        return httpx.Response(status, content=b"<html>try later</html>", headers=headers)

    return httpx.MockTransport(handler), seen


def _crawl(target_list: Sequence[CrawlTarget], transport: httpx.AsyncBaseTransport, now: datetime = FIXED_NOW,
           policy: RetryPolicy | None = None) -> list[Outcome]:
    return asyncio.run(run_targets(GROUP_NAME, target_list, retention=GROUP.retention_days, now=lambda: now,
                                   transport=transport, policy=policy, settings=run_settings()))


def _melon_realtime() -> list[CrawlTarget]:
    return targets({"site": "portal-a", "chart_type": "realtime"}, FIXED_NOW, settings=run_settings())


def _melon_body(variant: int = 1, size: int = 100) -> bytes:
    (reply,) = site_replies("portal-a", "realtime", FIXED_NOW, variant, size=size).values()
    return reply.body


# --- retries ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("steps", "requests"), [
    ([httpx.ConnectError], 2),
    ([httpx.ReadTimeout, 500], 3),
    ([500], 2),
    ([502, 503], 3),
    ([504], 2),
    ([(429, {"Retry-After": "2"})], 2),
])
def test_retryable_failures_then_success_commit(data: Path, waits: list[float], steps: list[Step], requests: int) -> None:
    """Connection errors, 5xx and 429 are retried; the eventual 200 commits and logs one ok row for the run."""
    transport, seen = _scripted(steps, _melon_body())
    (outcome,) = _crawl(_melon_realtime(), transport)
    assert (outcome.target, outcome.status, outcome.rows, outcome.http_status, outcome.error) == (
        "portal-a/realtime", "ok", 100, 200, None)
    assert len(seen) == requests
    assert all(r.url == MELON_URL and r.headers["user-agent"].startswith("Mozilla/5.0") for r in seen)
    assert len(waits) == requests - 1
    assert _query(data, "SELECT target, started_at, status, http_status, rows, url, error FROM fetch_log") == [
        ("portal-a/realtime", "2026-11-20T05:30:00Z", "ok", 200, 100, MELON_URL, None)]
    assert _query(data, "SELECT id, target, row_count, fetched_at FROM snapshots") == [
        (outcome.snapshot_id, "portal-a/realtime", 100, "2026-11-20T05:30:00Z")]


def test_backoff_doubles_with_jitter(data: Path, waits: list[float]) -> None:
    """Without Retry-After the waits are base*2^(n-1) plus up to as much jitter (base 0.01 s in tests)."""
    transport, seen = _scripted([503, 503, 503], _melon_body())
    (outcome,) = _crawl(_melon_realtime(), transport)
    assert (outcome.status, outcome.http_status, len(seen)) == ("failed", 503, 3)
    assert outcome.error == f"{MELON_URL} answered HTTP 503"
    assert len(waits) == 2 and 0.01 <= waits[0] <= 0.02 and 0.02 <= waits[1] <= 0.04, waits


@pytest.mark.parametrize(("retry_after", "expected"), [
    ("2", 2.0),
    (" 7 ", 7.0),
    ("30", 30.0),  # up to RetryPolicy.max_wait_seconds
])
def test_retry_after_seconds_is_honoured(data: Path, waits: list[float], retry_after: str, expected: float) -> None:
    """The upstream's Retry-After decides the wait, up to the 30 s the policy allows."""
    transport, seen = _scripted([(429, {"Retry-After": retry_after})], _melon_body())
    (outcome,) = _crawl(_melon_realtime(), transport)
    assert outcome.status == "ok" and len(seen) == 2
    assert waits == [expected]


def test_retry_after_date_and_garbage(data: Path, waits: list[float]) -> None:
    """An HTTP-date Retry-After counts from now; one that is neither form falls back to the backoff."""
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=20), usegmt=True)
    transport, seen = _scripted([(503, {"Retry-After": when}), (429, {"Retry-After": "soon"})], _melon_body())
    (outcome,) = _crawl(_melon_realtime(), transport)
    assert outcome.status == "ok" and len(seen) == 3
    assert 17.0 <= waits[0] <= 20.0 and 0.02 <= waits[1] <= 0.04, waits


@pytest.mark.parametrize(("retry_after", "policy"), [("120", RetryPolicy.of(run_settings())),
                                                     ("3600", RetryPolicy.of(run_settings(), max_wait_seconds=1.5, delay_seconds=0))])
def test_a_retry_after_past_the_policy_gives_up_and_says_so(data: Path, waits: list[float], retry_after: str,
                                                            policy: RetryPolicy) -> None:
    """Asked to wait longer than the policy allows, the crawl does not ask again early: it fails, saying why."""
    transport, seen = _scripted([(429, {"Retry-After": retry_after})], _melon_body())
    (outcome,) = _crawl(_melon_realtime(), transport, policy=policy)
    assert outcome.status == "failed" and len(seen) == 1 and waits == []
    assert outcome.http_status == 429
    assert outcome.error == f"{MELON_URL}: the upstream asked to wait {retry_after}s (Retry-After); giving up until the next run"


@pytest.mark.parametrize("status", [404, 403, 410])
def test_client_errors_are_not_retried(data: Path, waits: list[float], status: int) -> None:
    """A 4xx other than 429 will not get better by asking again: one request, a failed log row."""
    transport, seen = _scripted([status], _melon_body())
    (outcome,) = _crawl(_melon_realtime(), transport)
    assert len(seen) == 1 and waits == []
    assert (outcome.status, outcome.rows, outcome.snapshot_id, outcome.http_status, outcome.error) == (
        "failed", None, None, status, f"{MELON_URL} answered HTTP {status}")
    assert _last_log(data)[:7] == ("portal-a/realtime", "2026-11-20T05:30:00Z", "failed", status, None, MELON_URL,
                                   f"{MELON_URL} answered HTTP {status}")
    assert _query(data, "SELECT count(*) FROM snapshots") == [(0,)]


def test_connection_errors_exhaust_the_attempts(data: Path, waits: list[float]) -> None:
    """Three connection failures are one failed run, with no HTTP status and the error named."""
    transport, seen = _scripted([httpx.ConnectError] * 3, _melon_body())
    (outcome,) = _crawl(_melon_realtime(), transport)
    assert len(seen) == 3 and len(waits) == 2
    assert (outcome.status, outcome.http_status, outcome.error) == ("failed", None, f"{MELON_URL}: ConnectError: boom")
    assert _last_log(data)[2:7] == ("failed", None, None, MELON_URL, f"{MELON_URL}: ConnectError: boom")


def test_fetch_log_records_the_duration(data: Path) -> None:
    """duration_ms is the run's wall time, slow upstream included."""

    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.2)
        return httpx.Response(200, content=_melon_body(), headers={"content-type": "text/html"})

    (outcome,) = _crawl(_melon_realtime(), httpx.MockTransport(slow))
    log = _last_log(data)
    assert log[:7] == ("portal-a/realtime", "2026-11-20T05:30:00Z", "ok", 200, 100, MELON_URL, None)
    assert 200 <= log[7] == outcome.duration_ms < 60_000  # at least the slow answer; the ceiling only says "a time"


def test_an_undecodable_response_is_a_failed_fetch(data: Path) -> None:
    """A body httpx cannot decode is logged as a failed fetch (not retried) and the other targets still commit."""
    flo = _serving(site_replies("portal-d", "all_age", FIXED_NOW))
    seen: list[str] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.host)
        if request.url.host == "www.melon.com":
            return httpx.Response(200, content=b"not gzip at all", headers={"content-encoding": "gzip"})
        return await flo.handle_async_request(request)

    melon, flo_all_age = _crawl(_melon_realtime() + targets({"site": "portal-d", "chart_type": "all_age"}, FIXED_NOW, settings=run_settings()),
                                httpx.MockTransport(handler))
    reason = f"{MELON_URL}: DecodingError: Error -3 while decompressing data: incorrect header check"
    assert (melon.status, melon.http_status, melon.error) == ("failed", None, reason)
    assert (flo_all_age.status, flo_all_age.rows) == ("ok", 100)
    assert seen.count("www.melon.com") == 1
    assert _query(data, "SELECT target, status, http_status, error FROM fetch_log ORDER BY target") == [
        ("portal-a/realtime", "failed", None, reason), (FLO_ALL_AGE, "ok", 200, None)]


# --- the last good snapshot stays ---------------------------------------------------------------

def test_short_page_is_refused_and_the_last_good_snapshot_stays(seeded: Path) -> None:
    """A Melon page with 60 rows is not the chart: nothing is committed and the log says why."""
    before = _latest(seeded, "portal-a/realtime")
    (outcome,) = _crawl(_melon_realtime(), _serving(site_replies("portal-a", "realtime", FIXED_NOW, 1, size=60)))
    reason = "portal-a/realtime: expected 100 rows, upstream gave 60"
    assert (outcome.status, outcome.rows, outcome.snapshot_id, outcome.http_status, outcome.error) == (
        "failed", None, None, 200, reason)
    assert _last_log(seeded)[:7] == ("portal-a/realtime", "2026-11-20T05:30:00Z", "failed", 200, None, MELON_URL, reason)
    assert _latest(seeded, "portal-a/realtime") == before
    assert len(before[2]) == 100


@pytest.mark.parametrize(("site", "chart_type", "body", "reason"), [
    ("portal-a", "realtime", "<html><head><title>멜론 서비스 점검</title></head><body>점검 중입니다</body></html>",
     "melon realtime: page 1 has no chart rows (tr.lst50/tr.lst100); title '멜론 서비스 점검'"),
    ("portal-a", "realtime", "", "melon realtime: page 1 has no chart rows (tr.lst50/tr.lst100); title ''"),
    ("portal-d", "rising", '{"code": "4000001", "message": "서비스 점검"}', "flo: API answered code 4000001: 서비스 점검"),
    ("portal-d", "rising", "{not json", "flo: body is not JSON (Expecting property name enclosed in double quotes: "
                                        "line 1 column 2 (char 1)): '{not json'"),
])
def test_error_page_is_a_failed_fetch_and_the_last_good_snapshot_stays(seeded: Path, site: str, chart_type: str,
                                                                       body: str, reason: str) -> None:
    """An upstream error page or broken payload, even with HTTP 200, changes nothing but the fetch log."""
    current = {t: _latest(seeded, t) for t in (f"{site}/{chart_type}", FLO_ALL_AGE)}
    replies = {key: Reply(body.encode(), 200, reply.content_type)
               for key, reply in site_replies(site, "all_age" if site == "portal-d" else chart_type, FIXED_NOW).items()}
    (outcome,) = _crawl(targets({"site": site, "chart_type": chart_type}, FIXED_NOW, settings=run_settings()), _serving(replies))
    assert (outcome.status, outcome.http_status, outcome.snapshot_id, outcome.error) == ("failed", 200, None, reason)
    assert _last_log(seeded)[2:5] == ("failed", 200, None) and _last_log(seeded)[6] == reason
    assert {t: _latest(seeded, t) for t in current} == current


# --- FLO rising ---------------------------------------------------------------------------------

def _flo(moment: datetime, variant: int) -> httpx.MockTransport:
    return _serving(site_replies("portal-d", "all_age", moment, variant))


def _observe(moment: datetime, variant: int) -> None:
    (outcome,) = _crawl(targets({"site": "portal-d", "chart_type": "all_age"}, FIXED_NOW, settings=run_settings()), _flo(moment, variant), now=moment)
    assert outcome.status == "ok", outcome


def _entries(folder: Path, snapshot_id: int, kind: type[KoreaEntry] = KoreaEntry) -> list[Any]:
    decode: Callable[[bytes], Any] = msgspec.json.Decoder(kind).decode
    return [decode(r) for (r,) in _query(folder, "SELECT record FROM entries WHERE snapshot_id = ? ORDER BY position",
                                        (snapshot_id,))]


def _song(rank: int, name: str, song_id: str | None) -> KoreaEntry:
    return KoreaEntry(rank=rank, title=f"{name} song", artist=f"{name} artist", artists=[f"{name} artist"],
                      song_id=song_id)


def test_rising_entries_by_hand() -> None:
    """Gains since the earlier chart, new songs counted from just below its last rank (5 + 1 = 6)."""
    earlier = [_song(1, "A", "a"), _song(2, "B", "b"), _song(3, "C", "c"), _song(4, "D", "d"), _song(5, "H", None)]
    later = [_song(1, "E", "e"), _song(2, "C", "c"), _song(3, "H", None), _song(4, "A", "a"), _song(5, "F", "f"),
             _song(6, "D", "d"), _song(7, "B", "b"), _song(8, "G", "g")]
    rising = rising_entries(earlier, later)
    assert [(r.rank, r.title, r.gain, r.chart_rank, r.previous_chart_rank, r.rank_change, r.rank_status)
            for r in rising] == [
        (1, "E song", 5, 1, None, None, "new"),  # new at 1: 6 - 1
        (2, "H song", 2, 3, 5, 2, "up"),  # matched by title and artist (no song id): 5 - 3
        (3, "C song", 1, 2, 3, 1, "up"),  # ties on gain go by chart rank: C (2) before F (5)
        (4, "F song", 1, 5, None, None, "new"),  # new at 5: 6 - 5
    ]  # A, B, D lost places; D and G gained nothing (6 - 6 = 0, 6 - 8 < 0)
    assert rising_entries([], later) == []


def test_rising_without_an_observation_an_hour_back_keeps_the_observation_and_logs_failure(data: Path) -> None:
    """Observations 80 and 40 minutes back are outside 45-75: the new one is stored, rising is not published."""
    now = FIXED_NOW
    _observe(now - timedelta(minutes=80), 0)
    _observe(now - timedelta(minutes=40), 1)
    (outcome,) = _crawl(targets({"site": "portal-d", "chart_type": "rising"}, FIXED_NOW, settings=run_settings()), _flo(now, 2), now=now)
    assert (outcome.target, outcome.status, outcome.rows, outcome.snapshot_id, outcome.http_status, outcome.error) == (
        "portal-d/rising", "failed", None, None, 200, NO_EARLIER)
    assert _query(data, "SELECT target, fetched_at, row_count FROM snapshots ORDER BY id") == [
        (FLO_ALL_AGE, "2026-11-20T04:10:00Z", 100), (FLO_ALL_AGE, "2026-11-20T04:50:00Z", 100),
        (FLO_ALL_AGE, "2026-11-20T05:30:00Z", 100)]
    assert _last_log(data)[:7] == ("portal-d/rising", "2026-11-20T05:30:00Z", "failed", 200, None,
                                   "https://www.music-flo.com/api/display/v1/browser/chart/1/track/list", NO_EARLIER)


def test_rising_uses_the_observation_nearest_an_hour_back(data: Path) -> None:
    """Of observations 74, 61 and 46 minutes back, the 61-minute one is the base; gains are all positive."""
    now = FIXED_NOW
    for minutes, variant in ((74, 0), (61, 1), (46, 2)):
        _observe(now - timedelta(minutes=minutes), variant)
    (outcome,) = _crawl(targets({"site": "portal-d", "chart_type": "rising"}, FIXED_NOW, settings=run_settings()), _flo(now, 3), now=now)
    assert outcome.status == "ok" and outcome.error is None
    snaps = _query(data, "SELECT id, target, chart_date, chart_hour, fetched_at, source, row_count FROM snapshots"
                         " WHERE id > 3 ORDER BY id")
    assert [s[:5] for s in snaps] == [(4, FLO_ALL_AGE, "2026-11-20", 14, "2026-11-20T05:30:00Z"),
                                      (5, "portal-d/rising", "2026-11-20", 14, "2026-11-20T05:30:00Z")]
    assert snaps[1][5] == ("derived from portal-d/all_age observations at 2026-11-20T04:29:00Z and "
                           "2026-11-20T05:30:00Z")
    assert (outcome.snapshot_id, outcome.rows) == (5, snaps[1][6])

    rising: list[RisingEntry] = _entries(data, 5, RisingEntry)
    assert rising == rising_entries(_entries(data, 2), _entries(data, 4))  # 61 minutes back (variant 1) vs now
    gains = [r.gain for r in rising]
    assert all(g > 0 for g in gains) and gains == sorted(gains, reverse=True)
    assert [r.rank for r in rising] == list(range(1, len(rising) + 1))
    for r in rising:  # new songs count from 101, below the earlier chart's last rank (100)
        assert r.gain == (r.previous_chart_rank or 101) - r.chart_rank
    # The new songs are exactly the sample chart's songs that were not on the chart 61 minutes back.
    before = {row.song.title for row in sample_rows("flo", FLO_ALL_AGE, 1)}
    entered = {row.song.title for row in sample_rows("flo", FLO_ALL_AGE, 3)} - before
    assert entered and {r.title for r in rising if r.previous_chart_rank is None} == entered
    assert _last_log(data)[:5] == ("portal-d/rising", "2026-11-20T05:30:00Z", "ok", 200, len(rising))


def test_rising_hourly_compares_the_previous_full_kst_hour(data: Path) -> None:
    """At 14:30 KST: the first observation from 12:55 on against the last one before 14:00."""
    utc = lambda h, m, s=0: datetime(2026, 11, 20, h, m, s, tzinfo=UTC)
    # 12:50, 12:56, 13:20, 13:59:30 and 14:05 KST.
    for moment, variant in ((utc(3, 50), 0), (utc(3, 56), 1), (utc(4, 20), 2), (utc(4, 59, 30), 3), (utc(5, 5), 4)):
        _observe(moment, variant)
    assert FIXED_NOW.astimezone(KST).strftime("%H:%M") == "14:30"
    (outcome,) = _crawl(targets({"site": "portal-d", "chart_type": "rising_hourly"}, FIXED_NOW, settings=run_settings()), _flo(FIXED_NOW, 0))
    assert (outcome.status, outcome.http_status, outcome.error) == ("ok", None, None)
    sid, target, chart_date, chart_hour, fetched_at, source = _query(
        data, "SELECT id, target, chart_date, chart_hour, fetched_at, source FROM snapshots ORDER BY id DESC LIMIT 1")[0]
    assert (sid, target, chart_date, chart_hour, fetched_at) == (6, "portal-d/rising_hourly", "2026-11-20", 13,
                                                                 "2026-11-20T05:30:00Z")
    assert source == "derived from portal-d/all_age observations at 2026-11-20T03:56:00Z and 2026-11-20T04:59:30Z"
    assert _entries(data, 6, RisingEntry) == rising_entries(_entries(data, 2), _entries(data, 4))
    assert _last_log(data)[:7] == ("portal-d/rising_hourly", "2026-11-20T05:30:00Z", "ok", None, outcome.rows, None,
                                   None)


def test_rising_hourly_needs_45_minutes_of_the_hour(data: Path) -> None:
    """13:20 and 13:59:30 KST span 39.5 minutes: nothing is published and the log says so."""
    for moment, variant in ((datetime(2026, 11, 20, 4, 20, tzinfo=UTC), 0),
                            (datetime(2026, 11, 20, 4, 59, 30, tzinfo=UTC), 1)):
        _observe(moment, variant)
    (outcome,) = _crawl(targets({"site": "portal-d", "chart_type": "rising_hourly"}, FIXED_NOW, settings=run_settings()), _flo(FIXED_NOW, 0))
    reason = "rising_hourly not published: FLO observations of 2026-11-20 13:00 KST do not span 45 minutes"
    assert (outcome.status, outcome.error) == ("failed", reason)
    assert _query(data, "SELECT count(*) FROM snapshots WHERE target = 'portal-d/rising_hourly'") == [(0,)]
    assert _last_log(data)[:7] == ("portal-d/rising_hourly", "2026-11-20T05:30:00Z", "failed", None, None, None, reason)


# --- the lock -----------------------------------------------------------------------------------

def test_crawl_lock_refuses_a_second_crawl_of_the_same_group(data: Path) -> None:
    """One crawl per group: a second one is CrawlBusy at once, or gets in when waiting for the first to end."""
    with crawl_lock(GROUP_NAME, settings=run_settings()):
        with pytest.raises(CrawlBusy, match=f"^another crawl of {GROUP_NAME} is running$"), crawl_lock(GROUP_NAME, settings=run_settings()):
            pass
        with crawl_lock("another-group", settings=run_settings()):
            pass
    holding = threading.Event()

    def hold() -> None:
        with crawl_lock(GROUP_NAME, settings=run_settings()):
            holding.set()
            time.sleep(0.5)

    thread = threading.Thread(target=hold)
    thread.start()
    holding.wait(5)
    started = time.monotonic()
    with crawl_lock(GROUP_NAME, wait_seconds=10, settings=run_settings()):
        assert time.monotonic() - started >= 0.2
    thread.join()


def _cli(folder: Path, *args: str, **upstreams: str) -> subprocess.CompletedProcess[str]:
    env = dict(child_env(DATA_DIR=str(folder), CRAWL_DELAY_SECONDS="0", RETRY_BACKOFF_SECONDS="0.01"),
               PYTHONPATH=str(REPO_ROOT))
    env.update({f"CHARTGW_UPSTREAM_{name}": origin for name, origin in upstreams.items()})
    return subprocess.run([sys.executable, "-m", "chartgw", "crawl", GROUP_NAME, *args], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)


def test_cli_exits_75_while_another_crawl_holds_the_lock(data: Path) -> None:
    """cron and the refresh endpoint tell "busy" from "failed" by exit status 75."""
    with crawl_lock(GROUP_NAME, settings=run_settings()):
        done = _cli(data, "--site", "portal-a", "--json", MELON="http://127.0.0.1:9")
    assert (done.returncode, done.stdout, done.stderr) == (75, "", f"chartgw crawl: another crawl of {GROUP_NAME} is running\n")
    assert not (data / f"{GROUP_NAME}.sqlite").exists()


def test_cli_waits_for_the_lock_with_wait(seeded: Path) -> None:
    """--wait lets a cron crawl start once the running one ends."""
    holding = threading.Event()

    def hold() -> None:
        with crawl_lock(GROUP_NAME, settings=run_settings()):
            holding.set()
            time.sleep(0.6)

    thread = threading.Thread(target=hold)
    thread.start()
    holding.wait(5)
    server = ReplayServer(all_replies(FIXED_NOW, 2)["MELON"]).start()
    try:
        done = _cli(seeded, "--site", "portal-a", "--chart-type", "realtime", "--wait", "20", MELON=server.origin)
    finally:
        server.stop()
        thread.join()
    assert (done.returncode, done.stderr) == (0, "")


def test_cli_crawl_against_replay_servers(seeded: Path) -> None:
    """`chartgw crawl korea-chart --site portal-a` commits all five Melon charts and reports them as JSON."""
    before = {ct: _latest(seeded, f"portal-a/{ct}")[0] for ct in ("realtime", "hot100_d100", "hot100_d30", "daily", "weekly")}
    server = ReplayServer(all_replies(FIXED_NOW, 2)["MELON"]).start()
    try:
        done = _cli(seeded, "--site", "portal-a", "--json", MELON=server.origin)
    finally:
        server.stop()
    assert (done.returncode, done.stderr) == (0, "")
    outcomes = json.loads(done.stdout)
    assert [(o["target"], o["status"], o["rows"], o["http_status"], o["error"]) for o in outcomes] == [
        (f"portal-a/{ct}", "ok", 100, 200, None) for ct in before]
    for o in outcomes:
        assert o["snapshot_id"] > max(before.values())
        assert _latest(seeded, o["target"])[0] == o["snapshot_id"]
    assert len(server.seen) == 5
    assert {path for (_, path, _), _ in server.seen} == {"/chart/index.htm", "/chart/hot100/index.htm",
                                                         "/chart/day/index.htm", "/chart/week/index.htm"}


def test_cli_exits_non_zero_with_one_line_when_the_upstream_answers_500(seeded: Path) -> None:
    """After three 500s the crawl fails, says why in one stderr line, and the last good snapshot stays."""
    before = _latest(seeded, "portal-a/realtime")
    replies = {key: Reply(b"<html>Internal Server Error</html>", 500) for key in all_replies(FIXED_NOW)["MELON"]}
    server = ReplayServer(replies).start()
    try:
        done = _cli(seeded, "--site", "portal-a", "--chart-type", "realtime", MELON=server.origin)
    finally:
        server.stop()
    url = "https://www.melon.com/chart/index.htm"  # shown under the real origin, never the replay server's
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"chartgw crawl: 1 of 1 targets failed; first: portal-a/realtime: {url} answered HTTP 500"]
    assert len(server.seen) == 3
    assert _last_log(seeded)[2:7] == ("failed", 500, None, url, f"{url} answered HTTP 500")
    assert _latest(seeded, "portal-a/realtime") == before


def test_cli_refuses_a_chart_type_the_site_does_not_have(data: Path) -> None:
    """portal-d has no realtime chart: usage error 2, one line, nothing crawled."""
    done = _cli(data, "--site", "portal-d", "--chart-type", "realtime")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == ["chartgw crawl: chart_type: Input should be 'all_age', 'rising' or 'rising_hourly'"]
    assert not (data / f"{GROUP_NAME}.sqlite").exists()




# --- redirects, body size, the deadline -----------------------------------------------------------------------

def _redirecting(location: str, body: bytes) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            return httpx.Response(302, headers={"location": location})
        return httpx.Response(200, content=body, headers={"content-type": "text/html; charset=utf-8"})

    return httpx.MockTransport(handler), seen


def test_a_redirect_within_the_origin_is_followed_and_the_final_url_logged(data: Path) -> None:
    transport, seen = _redirecting("/chart/index.htm?moved=1", _melon_body())
    (outcome,) = _crawl(_melon_realtime(), transport)
    assert outcome.status == "ok" and len(seen) == 2
    assert _query(data, "SELECT source FROM snapshots WHERE target = 'portal-a/realtime'") == [
        (f"{MELON_URL}?moved=1",)]


def test_a_redirect_to_another_host_is_not_followed(data: Path) -> None:
    transport, seen = _redirecting("https://login.example.net/captcha", _melon_body())
    (outcome,) = _crawl(_melon_realtime(), transport)
    assert len(seen) == 1 and outcome.status == "failed" and outcome.http_status == 302
    assert outcome.error == f"{MELON_URL}: redirected to another host (login.example.net); not followed"
    assert _query(data, "SELECT count(*) FROM snapshots") == [(0,)]


def test_a_body_past_the_upstreams_cap_is_not_read(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(upstreams.BODY_LIMITS, "MELON", 64 * 1024)
    transport, _ = _scripted([], _melon_body() + b" " * (2 * 1024 * 1024))
    (outcome,) = _crawl(_melon_realtime(), transport)
    assert outcome.status == "failed"
    assert outcome.error == f"{MELON_URL}: the body is larger than 65536 bytes; not read further"


def test_fetch_any_retries_a_server_before_the_next_and_logs_the_one_that_answered(
        data: Path, waits: list[float], monkeypatch: pytest.MonkeyPatch) -> None:
    """A target fetching from an upstream's servers in turn (the radio directory's way): each server is a Fetcher
    fetch (a 503 retried on the same server, a body past the cap refused), a server out of sync (404, a body the
    parser refuses) moves on, and the fetch log names the server that answered."""
    monkeypatch.setitem(upstreams.BODY_LIMITS, "MELON", 1024 * 1024)
    body = _melon_body()
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        host = request.url.host
        seen.append(host)
        if host == "big.test":
            return httpx.Response(200, content=b" " * (2 * 1024 * 1024))
        if host == "stale.test":
            return httpx.Response(404, content=b"no such page")
        if host == "flaky.test" and seen.count(host) == 1:
            return httpx.Response(503, content=b"busy")
        return httpx.Response(200, content=body, headers={"content-type": "text/html; charset=utf-8"})

    plain = _melon_realtime()[0]
    (request,) = plain.requests

    async def fetch(fetcher: Any, ctx: Any) -> list[Any]:
        origins = ["http://big.test", "http://stale.test", "http://flaky.test", "http://late.test"]
        at, fetched, _ = await fetcher.fetch_any(request, origins, lambda b: b if b.startswith(b"<") else None)
        assert at == "http://flaky.test"
        return [fetched]

    target = CrawlTarget(plain.key, (), plain.build, plain.expected_rows, fetch=fetch)
    (outcome,) = _crawl([target], httpx.MockTransport(handler))
    assert outcome.status == "ok", outcome.error
    assert seen == ["big.test", "stale.test", "flaky.test", "flaky.test"]  # the 503 retried there, late.test never asked
    assert _last_log(data)[5] == "http://flaky.test" + request.path
    assert len(waits) == 1  # the backoff before the retry (no pause between requests in tests)

    def failing(request_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"{}")  # a body the parser refuses, from every server

    async def parsed(fetcher: Any, ctx: Any) -> list[Any]:
        def refuse(b: bytes) -> bytes:
            raise upstreams.UpstreamFormatError("not the chart's markup")
        await fetcher.fetch_any(request, ["http://a.test", "http://b.test"], refuse)
        return []

    (outcome,) = _crawl([CrawlTarget(plain.key, (), plain.build, fetch=parsed)], httpx.MockTransport(failing))
    assert outcome.status == "failed"
    assert outcome.error == ("MELON: every server failed: http://a.test: not the chart's markup; "
                             "http://b.test: not the chart's markup")


def test_the_deadline_counts_from_the_request_not_the_queue(data: Path) -> None:
    """Four charts through one connection slot, each answered in 0.3 s, with a 0.5 s deadline: all commit,
    though the last waited 0.9 s for its turn."""
    table = all_replies(FIXED_NOW, 1)["MELON"]

    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.3)
        reply = table[answer_key(request.method, str(request.url.raw_path, "ascii"), "", b"")]
        return httpx.Response(200, content=reply.body, headers={"content-type": reply.content_type})

    chosen = [t for t in targets({"site": "portal-a"}, FIXED_NOW, settings=run_settings()) if t.key != "portal-a/hot100_d30"]  # four charts
    policy = RetryPolicy.of(run_settings(), per_upstream=1, delay_seconds=0, target_deadline_seconds=0.5)
    outcomes = _crawl(chosen, httpx.MockTransport(slow), policy=policy)
    assert [o.status for o in outcomes] == ["ok"] * 4, [o.error for o in outcomes]
