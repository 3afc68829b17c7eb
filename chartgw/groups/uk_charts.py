"""/uk-charts: the Official Charts Company's weekly UK charts (officialcharts.com), every week kept forever.

One snapshot target per chart key (`singles`, `albums`, `dance-singles`, ...; `CHARTGW_UK_CHARTS`), one snapshot per
chart week, dated by the week's first day as the page prints it (a UK chart week runs Friday to Thursday). A page
is always stored under the week it says it is, never the week that was asked for: the site answers a week it does
not have with another one. A crawl that finds a week already held with the same rows stores nothing new; a
corrected week is stored again and the newest copy serves.

`chartgw crawl uk-charts [--chart KEY]` fetches the latest week of every configured chart (or one); a current page
shorter than the chart's size fails and the last good snapshot keeps serving. `chartgw backfill uk-charts --chart
singles --since 1952-11-14` walks back week by week from the latest published week, skipping weeks already held, one
request at a time with a pause (`CHARTGW_UK_CHARTS_BACKFILL_DELAY_SECONDS`, default 3 s), and stops at the first
week of the site's archive, on a refusal or after three failures in a row. Run it again to resume: every fetched
week is committed on its own. Each backfill is recorded as a run of kind "backfill".

Entries keep the rank as printed (the 1952 chart has tied ranks); the store's rank column is the row's position.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import unicodedata
from collections.abc import Callable, Iterable
from datetime import date, datetime, timedelta
from functools import partial
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import msgspec

from chartgw import config
from chartgw.clock import Clock, fixed, utc_now
from chartgw.context import Context
from chartgw.crawl import (
    CrawlContext,
    CrawlError,
    CrawlTarget,
    Fetched,
    Fetcher,
    Outcome,
    RetryPolicy,
    commit_built,
    public_url,
    record_run,
    request_url,
)
from chartgw.endpoints import Call, Route, not_found
from chartgw.group import CommandArg, EntryMapping, Group, GroupCommand, Schedule, crawl_group, retention
from chartgw.params import Param, search_term
from chartgw.records import stored_entry
from chartgw.replay import replay_upstreams
from chartgw.responses import (
    HealthHead,
    SnapshotMeta,
    TargetStatus,
    health_route,
    records_array,
    snapshot_meta,
    stored_record,
)
from chartgw.samples import officialcharts as samples
from chartgw.store import FetchLogRow, NewSnapshot, SnapshotReader, SnapshotRow, SnapshotWriter, StoredEntry, group_db_path
from chartgw.targets import TargetKey
from chartgw.text import compact
from chartgw.upstreams import UpstreamFormatError, officialcharts
from chartgw.upstreams.officialcharts import (
    CHARTS,
    CHARTS_BY_KEY,
    DEFAULT_KEYS,
    FIRST_CHART_WEEK,
    UkChartEntry,
    UkChartWeek,
    week_start_for,
)

NAME = "uk-charts"
WEEK_SECONDS = 7 * 86400
LONDON = ZoneInfo("Europe/London")
RELEASE_HOUR = 18
"""The Official Chart is announced on Fridays at 17:45 UK time; from 18:00 the new week counts as published."""
DEMO_WEEKS = 6
MAX_FAILURES_IN_A_ROW = 3
ONE_WEEK = timedelta(days=7)

DEFAULT_CHARTS: tuple[str, ...] = tuple(key for key in DEFAULT_KEYS if key != "singles-top-40")
"""Every chart of the site's menu but the Singles Top 40 (the first 40 rows of `singles`)."""


CHARTS_SETTING = config.Setting("UK_CHARTS", ",".join(DEFAULT_CHARTS),
                                "chart keys /uk-charts crawls and serves (comma-separated; see /uk-charts/charts)",
                                config.subset(DEFAULT_KEYS, "chart key", lower=True))
BACKFILL_DELAY_SETTING = config.Setting("UK_CHARTS_BACKFILL_DELAY_SECONDS", "3",
                                        "pause after each page a /uk-charts backfill fetches (politeness; 0 under "
                                        "replay)", config.seconds)

TARGET = TargetKey(("chart_key",))


def configured_charts() -> tuple[str, ...]:
    """`CHARTGW_UK_CHARTS`, in the order given (a bad key raises SettingError: a 503 / a crawl exit 1)."""
    return config.get(CHARTS_SETTING)


def latest_published_week(moment: datetime) -> date:
    """The Friday starting the newest chart week published at `moment`: this Friday's week from 18:00 UK time on
    Friday, else the week before."""
    local = moment.astimezone(LONDON)
    day = local.date()
    if local.weekday() == officialcharts.FRIDAY and local.hour < RELEASE_HOUR:
        day -= timedelta(days=1)
    return week_start_for(day)


_SPLIT_WORDS = (" FEATURING ", " FEAT. ", " FEAT ", " FT. ", " FT ", " & ", " X ", " VS. ", " VS ", " WITH ")


def credited_artists(credit: str) -> list[str]:
    """The artists of one credit as the site prints it: "A FT B", "A & B", "A X B", "A/B/C" are two or three;
    "AC/DC" stays one (a "/" splits only when every part has at least three letters or digits)."""
    parts = [credit]
    for word in _SPLIT_WORDS:
        parts = [piece for part in parts for piece in _split_word(part, word)]
    names: list[str] = []
    for part in parts:
        pieces = [piece.strip() for piece in part.split("/")]
        names += pieces if len(pieces) > 1 and all(len(compact(p)) >= 3 for p in pieces) else [part.strip()]
    return [name for name in names if name] or [credit]


def _split_word(text: str, word: str) -> list[str]:
    upper = text.upper()
    pieces, start = [], 0
    while (found := upper.find(word, start)) != -1:
        pieces.append(text[start:found])
        start = found + len(word)
    pieces.append(text[start:])
    return pieces


# --- stored weeks ---------------------------------------------------------------------------------

class WeekMeta(msgspec.Struct, kw_only=True):
    """What a snapshot keeps about its page beside the rows (the snapshot's `meta`)."""

    week_start: str
    week_end: str
    title: str | None
    layout: str
    site_previous_week_start: str | None
    """The week the page's own "previous" arrow points at (null at the first week of the site's archive)."""
    site_next_week_start: str | None
    requested_week: str | None
    """The Friday asked for (backfills); null for the latest-week page."""


_encode_meta = msgspec.json.Encoder().encode
_decode_meta = msgspec.json.Decoder(WeekMeta).decode


def week_end_of(chart_date: str, meta: bytes | None) -> str:
    """The last day of a stored week: as its page printed it, else the start plus six days."""
    if meta:
        try:
            return _decode_meta(meta).week_end
        except msgspec.DecodeError:
            pass
    return (date.fromisoformat(chart_date) + timedelta(days=6)).isoformat()


def keyable(name: str) -> str:
    """`name` as its keys are made: itself, or for a name of symbols only (Ed Sheeran's album "=", the band "!!!")
    the symbols' Unicode names ("EQUALS SIGN"), so the row has title and artist keys and stays searchable."""
    if compact(name):
        return name
    return " ".join(unicodedata.name(ch, "") for ch in name if not ch.isspace()).strip() or name


def stored(entry: UkChartEntry, position: int) -> StoredEntry:
    """The store row: its rank column is the row's position (printed ranks tie on old charts: 7, 7, 8); the record
    keeps the printed rank."""
    return stored_entry(entry, rank=position, title=keyable(entry.title),
                        artists=[keyable(name) for name in credited_artists(entry.artist)], item_id=None)


def _held_week(store: SnapshotWriter, key: str, week_start: str) -> int | None:
    row = store.db.execute("SELECT max(id) FROM snapshots WHERE target = ? AND chart_date = ?",
                           (key, week_start)).fetchone()
    return int(row[0]) if row and row[0] is not None else None


def _build(key: str, requested: date | None, seen: list[UkChartWeek] | None, fetched: list[Fetched],
           ctx: CrawlContext) -> list[NewSnapshot]:
    """The page as one snapshot of `key` dated by the week the page prints; nothing when that week is held with the
    same rows. The latest-week page must have the chart's full size; `seen` gets the parsed page (backfills)."""
    answer = fetched[0]
    chart = officialcharts.parse(key, answer.body)
    if seen is not None:
        seen.append(chart)
    if requested is None:
        officialcharts.require_size(chart, key)
    entries = [stored(entry, position) for position, entry in enumerate(chart.entries, start=1)]
    held = _held_week(ctx.store, key, chart.week_start)
    if held is not None and ctx.store.records(held) == [e.record for e in entries]:
        return []
    source = answer.url
    if requested is not None and requested.isoformat() != chart.week_start:
        source += f" (asked for the week of {requested.isoformat()}; the page is the week of {chart.week_start})"
    meta = WeekMeta(week_start=chart.week_start, week_end=chart.week_end, title=chart.title, layout=chart.layout,
                    site_previous_week_start=chart.previous_week_start, site_next_week_start=chart.next_week_start,
                    requested_week=requested.isoformat() if requested else None)
    return [NewSnapshot(target=TARGET.make(key), chart_date=chart.week_start, chart_hour=None, fetched_at=ctx.now,
                        source=source, entries=entries, raw=answer.body if requested is None else None,
                        raw_type="text/html", meta=_encode_meta(meta))]


def _target(key: str) -> CrawlTarget:
    return CrawlTarget(TARGET.make(key), tuple(officialcharts.requests_for(key)), partial(_build, key, None, None),
                       refusal=officialcharts.refusal)


def targets(selection: dict[str, str | None], now: datetime) -> list[CrawlTarget]:
    """The latest week of every configured chart, or of the one chart asked for (`--chart`, any known key)."""
    chart = selection.get("chart")
    return [_target(key) for key in ((chart,) if chart else configured_charts())]


# --- backfill -------------------------------------------------------------------------------------

def _held_days(store: SnapshotWriter, key: str) -> set[date]:
    """Every day covered by a held week of `key`."""
    days: set[date] = set()
    for chart_date, meta in store.db.execute("SELECT DISTINCT chart_date, meta FROM snapshots WHERE target = ?", (key,)):
        start, end = date.fromisoformat(chart_date), date.fromisoformat(week_end_of(chart_date, meta))
        days.update(start + timedelta(days=n) for n in range((end - start).days + 1))
    return days


async def _fetch_week(fetcher: Fetcher, store: SnapshotWriter, key: str, week: date, started: datetime,
                      seen: list[UkChartWeek]) -> Outcome:
    """One backfilled week: fetched, parsed, checked and committed as a crawl commits it (crawl key `key@week`)."""
    (request,) = officialcharts.requests_for(key, week)
    crawl_key, clock = f"{TARGET.make(key)}@{week.isoformat()}", time.monotonic()
    url = public_url(request_url(request), request.upstream)
    http_status: int | None = None
    try:
        answer = await fetcher.fetch(request, officialcharts.refusal)
        http_status = answer.status
        return commit_built(store, crawl_key, lambda ctx: _build(key, week, seen, [answer], ctx), started, clock, None,
                            url, http_status)
    except (CrawlError, UpstreamFormatError, TimeoutError) as exc:
        if isinstance(exc, CrawlError) and exc.http_status is not None:
            http_status = exc.http_status
        message = str(exc) or f"no answer within {fetcher.policy.target_deadline_seconds:.0f}s"
        duration = int((time.monotonic() - clock) * 1000)
        store.log_failure(FetchLogRow(crawl_key, started, duration, "failed", http_status, None, url, message))
        return Outcome(crawl_key, "failed", None, None, http_status, duration, message)


Progress = Callable[[date, Outcome | None, int, int], Any]
"""Called after each week: (week, its outcome or None when held, weeks fetched so far, weeks skipped so far)."""


async def backfill(chart: str, since: date = FIRST_CHART_WEEK, until: date | None = None, *, now: Clock = utc_now,
                   transport: httpx.AsyncBaseTransport | None = None, progress: Progress | None = None) -> list[Outcome]:
    """Walk chart `chart` back from the week of `until` (at most and by default the latest published week) to the week of
    `since`, fetching every week not held, one page at a time with the backfill delay, as one recorded run.

    Stops early at the first week of the site's archive (the page has no "previous" week), when the site answers
    a later week than asked (nothing older exists), on a refusal, or after three failures in a row. An
    interrupted backfill keeps every week it committed and still records its run; run it again to resume.
    """
    officialcharts.check_key(chart)
    since = max(since, FIRST_CHART_WEEK)
    published = latest_published_week(now())
    newest = min(week_start_for(until), published) if until else published  # no future weeks
    oldest = week_start_for(since)
    if oldest > newest:
        raise ValueError(f"--since {since.isoformat()} is after the newest week to fill ({newest.isoformat()})")
    delay = config.get(BACKFILL_DELAY_SETTING) if config.get(config.CRAWL_DELAY_SECONDS) else 0.0
    policy = RetryPolicy(per_upstream=1, delay_seconds=delay, jitter=0.2)
    outcomes: list[Outcome] = []
    options: dict[str, Any] = {"chart": chart, "since": oldest.isoformat(), "until": newest.isoformat(),
                               "delay_seconds": delay}
    started = now()
    skipped = 0
    # Redirects are the Fetcher's to follow (same origin only), as in every crawl.
    async with httpx.AsyncClient(timeout=httpx.Timeout(20.0, connect=5.0), transport=transport,
                                 follow_redirects=False) as client:
        fetcher = Fetcher(client, policy)
        with SnapshotWriter(group_db_path(NAME), retention=retention(GROUP), now=now) as store:
            held = _held_days(store, chart)
            stopped: str | None = None
            try:
                week, failures = newest, 0
                while week >= oldest:
                    if week in held:
                        skipped += 1
                        if progress is not None:
                            progress(week, None, len(outcomes), skipped)
                        week -= ONE_WEEK
                        continue
                    seen: list[UkChartWeek] = []
                    outcome = await _fetch_week(fetcher, store, chart, week, now(), seen)
                    outcomes.append(outcome)
                    if progress is not None:
                        progress(week, outcome, len(outcomes), skipped)
                    stopped, failures = _stop_reason(week, outcome, seen, failures)
                    if stopped:
                        break
                    if seen:
                        page = seen[0]
                        start, end = date.fromisoformat(page.week_start), date.fromisoformat(page.week_end)
                        held.update(start + timedelta(days=n) for n in range((end - start).days + 1))
                    week -= ONE_WEEK
            finally:
                options.update(fetched=len(outcomes), skipped_held=skipped, stopped=stopped)
                record_run(store, "backfill", started, now(), outcomes, options)
    return outcomes


def _stop_reason(week: date, outcome: Outcome, seen: list[UkChartWeek], failures: int) -> tuple[str | None, int]:
    """(why the walk stops here or None, failures in a row so far)."""
    if outcome.status != "ok":
        failures += 1
        if "not retried" in (outcome.error or ""):
            return f"refused at the week of {week.isoformat()}", failures
        if failures >= MAX_FAILURES_IN_A_ROW:
            return f"{failures} failures in a row (last at the week of {week.isoformat()})", failures
        return None, failures
    if seen:
        page = seen[0]
        if page.week_start > week.isoformat():
            return (f"asked for the week of {week.isoformat()}, the site answered the later week of {page.week_start}: "
                    "the archive has nothing older"), 0
        if page.previous_week_start is None:
            return f"the week of {page.week_start} is the first of the site's archive", 0
    return None, 0


def _date_arg(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date: {value!r} (use YYYY-MM-DD)") from None


def _terminal_progress(chart: str) -> Progress:
    def show(week: date, outcome: Outcome | None, fetched: int, skipped: int) -> None:
        state = "held" if outcome is None else outcome.status
        print(f"\rbackfill {chart} {week.isoformat()} {state:6} fetched {fetched}, already held {skipped}   ",
              end="", file=sys.stderr, flush=True)
    return show


def _backfill_command(ctx: Context, values: dict[str, Any]) -> list[Outcome]:
    """`chartgw backfill uk-charts --chart KEY [--since D] [--until D]`: a progress line on a terminal, silent under cron."""
    chart = values["chart"]
    progress = _terminal_progress(chart) if ctx.interactive else None
    try:
        return asyncio.run(backfill(chart, values["since"] or FIRST_CHART_WEEK, values.get("until"), now=ctx.clock,
                                    transport=ctx.transport, progress=progress))
    finally:
        if progress is not None:
            print(file=sys.stderr)


# --- reads ----------------------------------------------------------------------------------------

_ROW_COLUMNS = ", ".join(f"s.{c.strip()}" for c in SnapshotRow.COLUMNS.split(","))


def _row(values: Iterable[Any]) -> tuple[SnapshotRow, bytes | None]:
    items = tuple(values)
    return SnapshotRow(*items[:7]), items[7]


async def _latest_rows(reader: SnapshotReader) -> dict[str, tuple[SnapshotRow, bytes | None]]:
    """The newest week of every target, with its meta."""
    rows = await reader.fetchall(
        f"SELECT {SnapshotRow.COLUMNS}, meta FROM (SELECT *, row_number() OVER (PARTITION BY target ORDER BY"
        " chart_date DESC, id DESC) AS newest FROM snapshots) WHERE newest = 1")
    return {row[1]: _row(row) for row in rows}


async def _coverage(reader: SnapshotReader) -> dict[str, tuple[str, str, int]]:
    """Per target: (first week start, last week start, weeks held)."""
    rows = await reader.fetchall(
        "SELECT target, min(chart_date), max(chart_date), count(DISTINCT chart_date) FROM snapshots GROUP BY target")
    return {row[0]: (row[1], row[2], row[3]) for row in rows}


async def _chart_key(call: Call, key: str | None) -> str | None:
    """`key` when it is a configured chart or one with stored weeks; a 404 naming /uk-charts/charts otherwise."""
    if key is None or key in configured_charts():
        return key
    if key not in CHARTS_BY_KEY:
        raise not_found(f"Unknown chart key {key!r}; the chart keys are listed at /uk-charts/charts")
    if not await call.data.reader.fetchall("SELECT 1 FROM snapshots WHERE target = ? LIMIT 1", (TARGET.make(key),)):
        raise not_found(f"Chart {key!r} is not configured (CHARTGW_UK_CHARTS) and has no stored weeks; "
                        "see /uk-charts/charts")
    return key


# --- responses ------------------------------------------------------------------------------------

class ChartCoverage(msgspec.Struct):
    chart_key: str
    title: str
    kind: str
    """"singles" (songs) or "albums"."""
    size: int
    """Rows of a complete current page (a latest-week page with fewer fails the crawl)."""
    configured: bool
    """True when the chart is in CHARTGW_UK_CHARTS (crawled every week)."""
    url: str
    """The chart's page on officialcharts.com."""
    first_week_start: str | None
    last_week_start: str | None
    last_week_end: str | None
    weeks_held: int


class ChartsResponse(msgspec.Struct):
    count: int
    charts: list[ChartCoverage]
    """Every chart the gateway knows: the configured ones first, in CHARTGW_UK_CHARTS order."""


class WeekSnapshot(SnapshotMeta, kw_only=True):
    """A stored week: the snapshot metadata (chart_date = week start) with its chart key and week."""

    chart_key: str
    week_start: str
    week_end: str


class SnapshotsResponse(msgspec.Struct):
    chart_key: str | None
    count: int
    snapshots: list[WeekSnapshot]
    """Newest fetch first."""


class WeekChartResponse(msgspec.Struct):
    chart_key: str
    title: str
    kind: str
    week_start: str
    """The Friday that starts the chart week, as the page printed it."""
    week_end: str
    """The Thursday that ends it."""
    requested_date: str | None
    """The day asked for (any day of the week finds it); null for /latest."""
    previous_week_start: str | None
    """The nearest older week held (null at the oldest held week)."""
    next_week_start: str | None
    """The nearest newer week held (null at the newest)."""
    snapshot: SnapshotMeta
    count: int
    entries: list[UkChartEntry]


class SearchHit(msgspec.Struct):
    chart_key: str
    chart_date: str
    """The chart week's start (the same as week_start)."""
    week_start: str
    week_end: str
    rank: int
    """The position printed that week (ties repeat)."""
    entry: UkChartEntry


class SearchResponse(msgspec.Struct):
    q: str
    chart_key: str | None
    count: int
    hits: list[SearchHit]
    """Newest chart week first, then by chart key and rank; each week of a chart once."""


class ChartHealth(msgspec.Struct):
    chart_key: str
    latest_week_start: str | None
    latest_week_end: str | None


class HealthResponse(HealthHead):
    chart_count: int
    """How many charts CHARTGW_UK_CHARTS configures."""
    charts: list[ChartHealth]
    targets: list[TargetStatus]
    """Stale when the latest week was fetched more than two weeks ago."""


class _Rank(msgspec.Struct):
    rank: int


_decode_rank = msgspec.json.Decoder(_Rank).decode


# --- handlers -------------------------------------------------------------------------------------

def _cadences() -> dict[str, int]:
    return {TARGET.make(key): WEEK_SECONDS for key in configured_charts()}


async def describe_health(call: Call, status: str, statuses: list[TargetStatus]) -> HealthResponse:
    latest = await _latest_rows(call.data.reader)
    charts = []
    for key in configured_charts():
        found = latest.get(TARGET.make(key))
        charts.append(ChartHealth(key, found[0].chart_date if found else None,
                                  week_end_of(found[0].chart_date, found[1]) if found else None))
    return HealthResponse(status, NAME, len(charts), charts, statuses)


async def charts(call: Call) -> ChartsResponse:
    configured = configured_charts()
    coverage = await _coverage(call.data.reader)
    latest = await _latest_rows(call.data.reader)
    order = [*configured, *(chart.key for chart in CHARTS if chart.key not in configured)]
    listed = []
    for key in order:
        info = CHARTS_BY_KEY[key]
        first, last, weeks = coverage.get(TARGET.make(key), (None, None, 0))
        newest = latest.get(TARGET.make(key))
        listed.append(ChartCoverage(key, info.title, info.kind, info.size, key in configured,
                                    officialcharts.SITE + officialcharts.chart_path(key), first, last,
                                    week_end_of(newest[0].chart_date, newest[1]) if newest else None, weeks))
    return ChartsResponse(len(listed), listed)


async def snapshots(call: Call) -> SnapshotsResponse:
    key = await _chart_key(call, call.params["chart_key"])
    rows = await call.data.reader.fetchall(
        f"SELECT {SnapshotRow.COLUMNS}, meta FROM snapshots WHERE target GLOB ? ORDER BY id DESC LIMIT ?",
        (TARGET.pattern(chart_key=key), call.params["limit"]))
    listed = []
    for values in rows:
        row, meta = _row(values)
        head = msgspec.structs.asdict(snapshot_meta(row, WEEK_SECONDS, call.now))
        listed.append(WeekSnapshot(**head, chart_key=row.target, week_start=row.chart_date,
                                   week_end=week_end_of(row.chart_date, meta)))
    return SnapshotsResponse(key, len(listed), listed)


async def _neighbours(reader: SnapshotReader, target: str, week_start: str) -> tuple[str | None, str | None]:
    rows = await reader.fetchall(
        "SELECT (SELECT max(chart_date) FROM snapshots WHERE target = ?1 AND chart_date < ?2),"
        " (SELECT min(chart_date) FROM snapshots WHERE target = ?1 AND chart_date > ?2)", (target, week_start))
    return (rows[0][0], rows[0][1]) if rows else (None, None)


async def _chart_response(call: Call, key: str, row: SnapshotRow, meta: bytes | None,
                          requested: str | None) -> WeekChartResponse:
    reader = call.data.reader
    records = await reader.records(row.id, call.params["limit"])
    previous, following = await _neighbours(reader, row.target, row.chart_date)
    info = CHARTS_BY_KEY[key]
    return WeekChartResponse(key, info.title, info.kind, row.chart_date, week_end_of(row.chart_date, meta), requested,
                             previous, following, snapshot_meta(row, WEEK_SECONDS, call.now), len(records),
                             records_array(records))


async def chart_latest(call: Call) -> WeekChartResponse:
    key = await _chart_key(call, call.params["chart_key"])
    assert key is not None
    rows = await call.data.reader.fetchall(
        f"SELECT {SnapshotRow.COLUMNS}, meta FROM snapshots WHERE target = ? ORDER BY chart_date DESC, id DESC LIMIT 1",
        (TARGET.make(key),))
    if not rows:
        raise not_found(f"No week of {key} is held yet; see /uk-charts/charts")
    row, meta = _row(rows[0])
    return await _chart_response(call, key, row, meta, None)


async def chart_week(call: Call) -> WeekChartResponse:
    key = await _chart_key(call, call.params["chart_key"])
    assert key is not None
    day: str = call.params["week_start"]
    target = TARGET.make(key)
    reader = call.data.reader
    rows = await reader.fetchall(
        f"SELECT {SnapshotRow.COLUMNS}, meta FROM snapshots WHERE target = ? AND chart_date <= ?"
        " ORDER BY chart_date DESC, id DESC LIMIT 1", (target, day))
    if rows:
        row, meta = _row(rows[0])
        if day <= week_end_of(row.chart_date, meta):
            return await _chart_response(call, key, row, meta, day)
    try:
        start, end = officialcharts.chart_week(date.fromisoformat(day))
        week = f"the week {start.isoformat()} to {end.isoformat()}"
    except OverflowError:  # the week of 0001-01-01 or 9999-12-31 runs past the calendar
        week = f"the week of {day}"
    coverage = await _coverage_of(reader, target)
    if coverage is None:
        raise not_found(f"No week of {key} is held yet; see /uk-charts/charts")
    first, last, weeks = coverage
    before, after = await _neighbours(reader, target, day)
    raise not_found(f"No {key} chart is held for {week}; the weeks held "
                    f"run from {first} to {last} ({weeks} weeks; nearest: {before or 'none'} before, "
                    f"{after or 'none'} after); see /uk-charts/charts")


async def _coverage_of(reader: SnapshotReader, target: str) -> tuple[str, str, int] | None:
    rows = await reader.fetchall(
        "SELECT min(chart_date), max(chart_date), count(DISTINCT chart_date) FROM snapshots WHERE target = ?",
        (target,))
    return (rows[0][0], rows[0][1], rows[0][2]) if rows and rows[0][0] is not None else None


async def search(call: Call) -> SearchResponse:
    q, limit = call.params["q"], call.params["limit"]
    key = await _chart_key(call, call.params["chart_key"])
    needle = compact(q)
    like = "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = await call.data.reader.fetchall(
        f"SELECT {_ROW_COLUMNS}, s.meta, e.record FROM entries e JOIN snapshots s ON s.id = e.snapshot_id"
        " WHERE s.target GLOB ? AND e.search_key LIKE ? ESCAPE '\\'"
        " AND s.id = (SELECT max(x.id) FROM snapshots x WHERE x.target = s.target AND x.chart_date = s.chart_date)"
        " ORDER BY s.chart_date DESC, s.target, e.position LIMIT ?", (TARGET.pattern(chart_key=key), like, limit))
    hits = []
    for values in rows:
        row, meta = _row(values[:8])
        record: bytes = values[8]
        hits.append(SearchHit(row.target, row.chart_date, row.chart_date, week_end_of(row.chart_date, meta),
                              _decode_rank(record).rank, stored_record(record)))
    return SearchResponse(q, key, len(hits), hits)


# --- the route table ------------------------------------------------------------------------------

CHART_KEY_HELP = "A chart key (singles, albums, dance-singles, ...; listed at /uk-charts/charts)"
CHART_KEY = Param("chart_key", "path", description=CHART_KEY_HELP)
ANY_CHART = Param("chart_key", description=CHART_KEY_HELP + "; every chart when absent")
ROWS = Param("limit", kind="int", default=200, ge=1, le=200, description="Rows to return, from the top (default: all)")

ROUTES: tuple[Route, ...] = (
    health_route(NAME, _cadences, "Configured chart count, the latest week held per chart, and each chart's freshness",
                 describe=describe_health, response=HealthResponse, pattern=TARGET.pattern()),
    Route("/charts", charts, errors=(), response=ChartsResponse,
          summary="Every chart key with its title, kind, size, whether it is configured, and the weeks held"),
    Route("/snapshots", snapshots, (
        ANY_CHART,
        Param("limit", kind="int", default=50, ge=1, le=500, description="Snapshots to return, newest fetch first"),
    ), response=SnapshotsResponse, summary="Stored chart weeks, newest fetch first, optionally of one chart"),
    Route("/search", search, (
        Param("q", required=True, min_length=1, check=search_term,
              description="Words of a title or artist; case, accents and punctuation are ignored"),
        ANY_CHART,
        Param("limit", kind="int", default=50, ge=1, le=500, description="Hits to return"),
    ), response=SearchResponse,
          summary="Entries whose title or artist contains q in every stored week, newest week first, with rank"),
    Route("/{chart_key}/latest", chart_latest, (CHART_KEY, ROWS), response=WeekChartResponse,
          summary="The newest week held of one chart, with its week and the previous week held"),
    Route("/{chart_key}/{week_start}", chart_week, (
        CHART_KEY,
        Param("week_start", "path", kind="date",
              description="YYYY-MM-DD: any day of the chart week (weeks run Friday to Thursday)"),
        ROWS,
    ), response=WeekChartResponse, summary="The chart of the week containing a day, with the previous and next weeks held"),
)

# --- demo -----------------------------------------------------------------------------------------

async def seed(now: datetime) -> list[Outcome]:
    """Six consecutive weeks of every configured chart: a crawl of the latest published week at `now`, then a
    backfill of each chart's five weeks before it, all from rendered pages on a replay server."""
    keys = configured_charts()
    latest = latest_published_week(now)
    since = latest - ONE_WEEK * (DEMO_WEEKS - 1)
    outcomes: list[Outcome] = []
    with replay_upstreams({officialcharts.UPSTREAM: samples.all_replies(latest, DEMO_WEEKS, keys)}):
        outcomes += await crawl_group(GROUP, {}, now=fixed(now))
        for key in keys:
            outcomes += await backfill(key, since, latest, now=fixed(now))
    return outcomes


GROUP = Group(
    name=NAME,
    title="Official Charts Company (UK charts)",
    description="The UK's official weekly charts from officialcharts.com: singles, albums and the genre and format "
                "charts (dance, independent, hip hop and R&B, rock and metal, compilations, vinyl, downloads, sales, "
                "streaming, physical, Scottish, soundtracks, record store), every chart week kept, found by any day "
                "of the week (Friday to Thursday). " + " ".join(__doc__.split("\n\n")[1:3]).replace("\n", " "),
    routes=ROUTES,
    upstreams=(officialcharts.UPSTREAM,),
    targets=targets,
    crawl_options=(("chart", DEFAULT_KEYS),),
    schedules=(
        # The Official Chart is announced on Fridays at 17:45 UK time and the site shows the new week soon after;
        # the genre and format charts follow the same evening. Crawled in London time, so BST/GMT need no care.
        Schedule("45 19 * * 5", (), "Europe/London",
                 "UK charts: every configured chart's new week, Fridays 19:45 UK time (announced at 17:45)"),
        # A later retry for charts the site published late; a week already held with the same rows stores nothing.
        Schedule("30 9 * * 6", (), "Europe/London", "UK charts: retry Saturdays 09:30 UK time for late charts"),
    ),
    per_upstream=2,
    commands=(GroupCommand("backfill", "walk one chart back week by week, filling the weeks not held", (
        CommandArg("chart", "chart key", choices=DEFAULT_KEYS, default="singles"),
        CommandArg("since", "oldest week to fill, YYYY-MM-DD, any day of it (default 1952-11-14, the first chart)",
                   type=_date_arg, default=FIRST_CHART_WEEK),
        CommandArg("until", "newest week to fill, YYYY-MM-DD (default: the latest published week)", type=_date_arg),
    ), _backfill_command),),
    settings=(CHARTS_SETTING, BACKFILL_DELAY_SETTING),
    seeder=seed,
    entries=EntryMapping(market="=gb", artist=("artist",), artists=None, title=("title",)),
)
