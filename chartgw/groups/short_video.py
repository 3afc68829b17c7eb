"""/short-video: TikTok's popular-track charts by country and interval, read through the Chartmetric API.

A crawl of one chart (`{code2}/{interval}`, e.g. `us/daily`, `global/weekly`):
1. an access token: the one kept from an earlier crawl while it has more than a minute left, else
   `POST /api/token` with `CHARTGW_CHARTMETRIC_REFRESH_TOKEN`. The token and its expiry are kept in
   `<data dir>/short-video.chartmetric-token.json` (mode 0600) for the next crawl;
2. `GET /api/charts/tiktok/tracks` for yesterday's chart (UTC), pages of 100 by `offset` until the chart's
   `obj.length`. A 401 renews the token once and asks the page again;
3. one snapshot per chart, dated by the rows' `added_at`, committed only when every page came and the rows
   number `obj.length`. Any failure leaves the last good snapshot and logs one failed fetch-log row.

This flow (token, then as many pages as the chart has) is each target's own fetch step (`CrawlTarget.fetch`)
through the crawl runner's fetcher: its retries, body cap, same-origin redirects and a pause of about a second
after each request (one request at a time, as Chartmetric's plans allow). The targets of one crawl share one
session, so they exchange the token once. The chart commits through the platform (`run_targets`: checks, fetch
log, run).

The Chartmetric format is known from its documentation and public client code only: no real answer is captured.
"""

from __future__ import annotations

import asyncio
import hashlib
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TypedDict
from urllib.parse import urlencode

import msgspec

from chartgw.api.catalog import Chart, cadence_of, cadences
from chartgw.api.endpoints import Call, Route, not_found
from chartgw.api.group import EntryMapping, Group, Schedule
from chartgw.api.params import Limited, Param, accepts
from chartgw.api.responses import (
    HealthHead,
    SnapshotMeta,
    TargetStatus,
    health_route,
    records_array,
    snapshot_meta,
    snapshots_route,
)
from chartgw.core import config
from chartgw.core.countries import COUNTRIES, GLOBAL, country_param
from chartgw.core.settings import Settings
from chartgw.crawl.runner import RETRY_STATUSES, CrawlContext, CrawlError, CrawlTarget, Fetched, Fetcher, request_url
from chartgw.store import NewSnapshot, Query, SnapshotRow, Storage, StoredEntry, parse_iso
from chartgw.store.records import stored_entry
from chartgw.store.targets import TargetKey
from chartgw.upstreams import chartmetric
from chartgw.upstreams.chartmetric import INTERVALS, PAGE_SIZE, AccessToken, ChartmetricError, ShortVideoEntry

NAME = "short-video"
TOKEN_FILE = f"{NAME}.chartmetric-token.json"
TOKEN_MARGIN = timedelta(seconds=60)
"""A kept access token is used only while it has more than this left."""
MAX_ROWS = 5000
"""A chart claiming more rows than this is a changed format, not a chart to page through."""
POLITE_DELAY_SECONDS = 1.0
"""Pause after each Chartmetric request against the real API (its plans allow about one request a second)."""


def _intervals(value: str) -> tuple[str, ...]:
    chosen = config.comma_list(value.lower())
    unknown = [v for v in chosen if v not in INTERVALS]
    if unknown or not chosen:
        raise ValueError(f"must be a comma-separated list of {', '.join(INTERVALS)}, got {value!r}")
    return chosen


TOKEN_SETTING = config.Setting("CHARTMETRIC_REFRESH_TOKEN", "", "Chartmetric API refresh token (the account's API "
                               "key); without it /short-video crawls nothing and serves what is stored",
                               config.text, secret=True)
COUNTRIES_SETTING = config.Setting("SHORT_VIDEO_COUNTRIES", "global,us,gb,de,fr,jp,kr,br,mx,id",
                                   "TikTok charts /short-video crawls (`global` or ISO alpha-2)", config.countries)
INTERVALS_SETTING = config.Setting("SHORT_VIDEO_INTERVALS", "daily,weekly",
                                   "TikTok chart intervals /short-video crawls (`daily`, `weekly`)", _intervals)

TARGET = TargetKey(("code2", "interval"))
CATALOG = tuple(Chart(f"tracks-{interval}", TARGET, interval, {"interval": interval}, market="code2",
                     latest="/short-video/chart?code2={code2}&interval={interval}",
                     history="/short-video/history?code2={code2}&interval={interval}")
               for interval in ("daily", "weekly"))
"""TikTok's popular tracks per country (or global), daily and weekly; only the latest is served by date."""


def refresh_token(settings: Settings) -> str:
    """The refresh token; a SettingError naming the variable when none is set."""
    value: str = settings.get(TOKEN_SETTING)
    if not value:
        raise config.SettingError(f"{TOKEN_SETTING.variable}: not set; /short-video needs a Chartmetric API refresh "
                                  "token to crawl (stored charts are still served)")
    return value


def configured_charts(settings: Settings) -> list[tuple[str, str]]:
    return [(code2, interval) for code2 in settings.get(COUNTRIES_SETTING) for interval in settings.get(INTERVALS_SETTING)]


# --- the Chartmetric session ------------------------------------------------------------------


class KeptToken(msgspec.Struct):
    token: str
    expires_at: str | None
    refresh_hash: str
    """sha256 of the refresh token it was exchanged for: a changed setting never reuses it."""


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def refusal(status: int, body: bytes) -> str | None:
    """Chartmetric's own words for an answer not worth asking again (a 401 renews the token instead, `page`);
    None for a 429 or 5xx, which the fetcher asks again."""
    if status in RETRY_STATUSES:
        return None
    error = chartmetric.answer_error(body, status)
    return str(error) if error is not None else f"HTTP {status}"


class ChartmetricSession:
    """The access token of one crawl, shared by its targets: the kept one first, a new one when it has expired
    or a page is refused as unauthorized. One exchange at a time, so targets crawled together renew it once.
    Every request goes through the crawl's fetcher (retries, body cap, politeness, same-origin redirects)."""

    def __init__(self, refresh: str, now: datetime, path: Path) -> None:
        self.refresh = refresh
        self.now = now
        self.path = path
        """Where the access token is kept between crawls (`TOKEN_FILE` in the data folder)."""
        self._token: str | None = None
        self._lock = asyncio.Lock()

    async def access_token(self, fetcher: Fetcher) -> str:
        async with self._lock:
            if self._token is None:
                kept = self._kept()
                self._token = kept.token if kept is not None else await self._exchange(fetcher)
            return self._token

    async def renew(self, fetcher: Fetcher, refused: str) -> None:
        """A new token in place of `refused`, unless another target has renewed it meanwhile."""
        async with self._lock:
            if self._token == refused:
                self._token = await self._exchange(fetcher)

    def _kept(self) -> KeptToken | None:
        path = self.path
        try:
            kept = msgspec.json.decode(path.read_bytes(), type=KeptToken)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None
        if kept.refresh_hash != _hash(self.refresh):
            return None
        if kept.expires_at is None or parse_iso(kept.expires_at) - TOKEN_MARGIN <= self.now:
            return None
        return kept

    async def _exchange(self, fetcher: Fetcher) -> str:
        """A new access token for the refresh token, kept for later crawls."""
        try:
            fetched = await fetcher.fetch(chartmetric.token_request(self.refresh), refusal)
            token: AccessToken = chartmetric.parse_token(fetched.body, self.now)
        except (CrawlError, ChartmetricError) as exc:
            status = exc.http_status if isinstance(exc, CrawlError) else 200
            if status is None:  # no answer at all: not a refusal
                raise
            raise CrawlError(f"chartmetric token exchange refused ({exc}); check {TOKEN_SETTING.variable}",
                             status) from None
        # Without a stated lifetime the token is used for this crawl only.
        kept = KeptToken(token.token, token.expires_at, _hash(self.refresh))
        path = self.path
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_bytes(msgspec.json.encode(kept))
        temporary.chmod(0o600)
        temporary.replace(path)
        return token.token

    async def page(self, fetcher: Fetcher, date: str, interval: str, code2: str | None, offset: int,
                   ) -> tuple[Fetched, chartmetric.TracksPage]:
        """One chart page, as fetched and as read; an unauthorized answer (a 401 or 403, or an auth error object)
        renews the token once and asks again."""
        renewed = False
        while True:
            token = await self.access_token(fetcher)
            try:
                fetched = await fetcher.fetch(
                    chartmetric.tracks_request(token, date, interval, code2, PAGE_SIZE, offset), refusal)
                return fetched, chartmetric.parse_tracks(fetched.body)
            except CrawlError as exc:  # refused or failed: a 401 or 403 is worth one new token
                if renewed or exc.http_status not in (401, 403):
                    raise
            except ChartmetricError as exc:  # a 200 carrying an error object
                if renewed or not exc.unauthorized:
                    raise CrawlError(f"{fetched.url} offset {offset}: {exc}", fetched.status) from None
            renewed = True
            await self.renew(fetcher, token)


def chart_date_asked(now: datetime) -> str:
    """The chart a crawl asks for: yesterday's (UTC); Chartmetric publishes a day's TikTok chart the next day."""
    return (now - timedelta(days=1)).date().isoformat()


async def fetch_pages(session: ChartmetricSession, code2: str, interval: str, fetcher: Fetcher, ctx: CrawlContext,
                      ) -> list[Fetched]:
    """Every page of one chart (the one `chart_date_asked`): by `offset` until `obj.length`; without a length,
    until a short page."""
    date = chart_date_asked(ctx.now)
    upstream_code = None if code2 == GLOBAL else code2
    first, read = await session.page(fetcher, date, interval, upstream_code, 0)
    pages = [first]
    if read.length is not None:
        if read.length > MAX_ROWS:
            raise CrawlError(f"{TARGET.make(code2, interval)}: obj.length {read.length} is past {MAX_ROWS}; "
                             "format changed?")
        for offset in chartmetric.page_offsets(read.length)[1:]:
            pages.append((await session.page(fetcher, date, interval, upstream_code, offset))[0])
    else:
        while len(read.entries) == PAGE_SIZE and len(pages) * PAGE_SIZE < MAX_ROWS:
            fetched, read = await session.page(fetcher, date, interval, upstream_code, len(pages) * PAGE_SIZE)
            pages.append(fetched)
    return pages


def read_chart(code2: str, interval: str, pages: list[Fetched]) -> tuple[str | None, list[ShortVideoEntry]]:
    """The chart of its pages: (chart date the rows state, entries), refused unless the pages are of one chart
    date and number `obj.length` rows."""
    read = [chartmetric.parse_tracks(p.body) for p in pages]
    length = read[0].length
    dates = {p.chart_date for p in read if p.chart_date is not None}
    if len(dates) > 1:
        raise CrawlError(f"{TARGET.make(code2, interval)}: pages of several chart dates {sorted(dates)}")
    entries = [e for p in read for e in p.entries]
    if length is not None and len(entries) != length:
        raise CrawlError(f"{TARGET.make(code2, interval)}: obj.length says {length} rows, the pages gave {len(entries)}")
    return (dates.pop() if dates else None), entries


def stored(entry: ShortVideoEntry) -> StoredEntry:
    return stored_entry(entry, rank=entry.rank, title=entry.name, artists=entry.artists or ["unknown artist"],
                        item_id=entry.track_id)


def _build(code2: str, interval: str, settings: Settings, fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    date = chart_date_asked(ctx.now)
    upstream_code = None if code2 == GLOBAL else code2
    first = chartmetric.tracks_request("-", date, interval, upstream_code, PAGE_SIZE, 0)
    url = f"{request_url(first, settings)}?{urlencode(first.params)}"
    stated, entries = read_chart(code2, interval, fetched)
    if stated is not None and stated > date:
        raise CrawlError(f"{TARGET.make(code2, interval)}: asked for {date}, rows are of {stated}")
    raw = msgspec.json.encode({"date": date, "interval": interval, "code2": code2, "rows": entries})
    return [NewSnapshot(target=TARGET.make(code2, interval), chart_date=stated or date, chart_hour=None,
                        fetched_at=ctx.now, source=url, entries=[stored(e) for e in entries], raw=raw,
                        raw_type="application/json")]


def targets(selection: dict[str, str | None], now: datetime, settings: Settings) -> list[CrawlTarget]:
    # no token: the crawl stops here with one line naming it
    session = ChartmetricSession(refresh_token(settings), now, settings.get(config.DATA_DIR) / TOKEN_FILE)
    code2, interval = selection.get("code2"), selection.get("interval")
    # A chart named on the command line is crawled even when the settings do not list it.
    codes = (code2,) if code2 else settings.get(COUNTRIES_SETTING)
    chosen = (interval,) if interval else settings.get(INTERVALS_SETTING)
    return [CrawlTarget(TARGET.make(c, i), (), partial(_build, c, i, settings), None, fetch=partial(fetch_pages, session, c, i))
            for c in codes for i in chosen]


# --- responses ----------------------------------------------------------------------------------


class ChartCoverage(msgspec.Struct):
    code2: str
    interval: str
    crawled: bool
    """In the configured countries x intervals (CHARTGW_SHORT_VIDEO_COUNTRIES, _INTERVALS)."""
    snapshot_id: int | None
    chart_date: str | None
    fetched_at: str | None
    row_count: int | None
    age_seconds: int | None
    stale: bool


class HealthResponse(HealthHead):
    token_configured: bool
    detail: str
    coverage: list[ChartCoverage]
    """Every configured chart, then any other chart that has stored snapshots."""


class ChartResponse(msgspec.Struct):
    code2: str
    interval: str
    snapshot: SnapshotMeta
    total: int
    """Rows of the whole chart."""
    offset: int
    count: int
    entries: list[ShortVideoEntry]


class TrackInfo(msgspec.Struct):
    name: str
    artist: str
    isrc: str | None
    track_id: str | None
    sound_id: str | None


class Appearance(msgspec.Struct):
    chart_date: str
    snapshot_id: int
    fetched_at: str
    rank: int
    previous_rank: int | None
    posts: int | None
    views: int | None


class TrackHistoryResponse(msgspec.Struct):
    code2: str
    interval: str
    track_id: str | None
    sound_id: str | None
    track: TrackInfo | None
    """The track as its newest appearance names it; null when it was on none of the stored charts."""
    count: int
    appearances: list[Appearance]
    """Every stored chart (one per chart date) the track was on, newest first."""


class Mover(msgspec.Struct):
    rank: int | None
    """The rank on this chart; null for a track that left."""
    previous_rank: int | None
    """The rank on the chart before; null for a new entry."""
    name: str
    artist: str
    track_id: str | None
    sound_id: str | None


class Movement(msgspec.Struct):
    chart_date: str
    snapshot_id: int
    row_count: int
    previous_chart_date: str | None
    """The chart compared against; null for the oldest stored chart (no entries in or out)."""
    entered: list[Mover]
    left: list[Mover]


class MovementResponse(msgspec.Struct):
    code2: str
    interval: str
    count: int
    charts: list[Movement]
    """Newest first: each stored chart (one per chart date) against the one before it."""


# --- handlers -----------------------------------------------------------------------------------


def _cadence(target: str) -> int:
    return cadence_of(CATALOG, target)


async def describe_health(call: Call, status: str, statuses: list[TargetStatus]) -> HealthResponse:
    latest = {row.target: row for row in await call.data.reader.latest_per_target()}
    configured = {TARGET.make(c, i) for c, i in configured_charts(call.settings)}
    coverage = []
    by_target = {s.target: s for s in statuses}
    for target in [*by_target, *sorted(set(latest) - set(by_target))]:
        parts = TARGET.parse(target)
        if parts is None:
            continue
        row = latest.get(target)
        s = by_target.get(target)
        age = int((call.now - parse_iso(row.fetched_at)).total_seconds()) if row else None
        stale = s.stale if s is not None else True
        coverage.append(ChartCoverage(parts["code2"], parts["interval"], target in configured, row.id if row else None,
                                      row.chart_date if row else None, row.fetched_at if row else None,
                                      row.row_count if row else None, age, stale))
    has_token = bool(call.settings.get(TOKEN_SETTING))
    if has_token:
        detail = "crawling the configured TikTok charts through Chartmetric"
    else:
        detail = f"{TOKEN_SETTING.variable} is not set: nothing is crawled; stored charts are still served"
        status = "degraded"
    return HealthResponse(status, NAME, has_token, detail, coverage)


async def _latest(call: Call, code2: str, interval: str) -> SnapshotRow:
    row = await call.data.reader.latest(TARGET.make(code2, interval))
    if row is None:
        crawled = ", ".join(call.settings.get(COUNTRIES_SETTING))
        raise not_found(f"No {interval} TikTok chart of {code2} stored yet; crawled countries: {crawled} "
                        f"(see /{NAME}/health)")
    return row


class ChartParams(TypedDict):
    code2: str
    interval: str
    limit: int
    offset: int


async def chart(call: Call[ChartParams]) -> ChartResponse:
    code2, interval = call.params["code2"], call.params["interval"]
    row = await _latest(call, code2, interval)
    offset, limit = call.params["offset"], call.params["limit"]
    records = await call.data.reader.records(row.id, limit, offset)
    return ChartResponse(code2, interval, snapshot_meta(row, _cadence(row.target), call.now), row.row_count, offset,
                         len(records), records_array(records))


_CHART_SNAPSHOTS = "SELECT max(id) FROM snapshots WHERE target = ?1 GROUP BY chart_date"
"""The newest snapshot of each chart date of one target."""
APPEARANCES = Query("appearances", "SELECT s.chart_date, s.id, s.fetched_at, e.record FROM entries e JOIN snapshots s"
                                   f" ON s.id = e.snapshot_id WHERE s.id IN ({_CHART_SNAPSHOTS})"
                                   " AND (?2 IS NULL OR e.item_id = ?2) AND (?3 IS NULL OR instr(e.record, ?3) > 0)"
                                   " ORDER BY s.chart_date DESC, e.position")
"""The entries of a track id and/or naming a sound id (as a JSON string) in each chart date's snapshot, newest first."""
CHARTS = Query("charts", f"SELECT id, chart_date, row_count FROM snapshots WHERE id IN ({_CHART_SNAPSHOTS})"
                         " ORDER BY chart_date DESC LIMIT ?2")
"""Each chart date's snapshot of one target, newest first."""


class HistoryParams(TypedDict):
    code2: str
    interval: str
    limit: int
    track_id: str | None
    sound_id: str | None


async def history(call: Call[HistoryParams]) -> TrackHistoryResponse | MovementResponse:
    code2, interval = call.params["code2"], call.params["interval"]
    track_id, sound_id = call.params["track_id"], call.params["sound_id"]
    await _latest(call, code2, interval)
    target = TARGET.make(code2, interval)
    if track_id is None and sound_id is None:
        return await _movement(call, code2, interval, target)
    reader = call.data.reader
    rows = await reader.fetchall(APPEARANCES, (target, track_id, f'"{sound_id}"' if sound_id is not None else None))
    appearances: list[Appearance] = []
    track: TrackInfo | None = None
    seen: set[int] = set()
    for chart_date, snapshot_id, fetched_at, record in rows:
        entry = msgspec.json.decode(record, type=ShortVideoEntry)
        if sound_id is not None and sound_id not in entry.sound_ids and sound_id != entry.sound_id:
            continue
        if snapshot_id in seen:
            continue
        seen.add(snapshot_id)
        if track is None:
            track = TrackInfo(entry.name, entry.artist, entry.isrc, entry.track_id, entry.sound_id)
        appearances.append(Appearance(chart_date, snapshot_id, fetched_at, entry.rank, entry.previous_rank,
                                      entry.posts, entry.views))
        if len(appearances) == call.params["limit"]:
            break
    return TrackHistoryResponse(code2, interval, track_id, sound_id, track, len(appearances), appearances)


def _identity(entry: ShortVideoEntry) -> str:
    if entry.track_id:
        return f"cm:{entry.track_id}"
    if entry.isrc:
        return f"isrc:{entry.isrc}"
    if entry.sound_id:
        return f"sound:{entry.sound_id}"
    return f"name:{entry.name.casefold()}|{entry.artist.casefold()}"


def _mover(entry: ShortVideoEntry, rank: int | None, previous: int | None) -> Mover:
    return Mover(rank, previous, entry.name, entry.artist, entry.track_id, entry.sound_id)


async def _movement(call: Call[Limited], code2: str, interval: str, target: str) -> MovementResponse:
    reader = call.data.reader
    limit = call.params["limit"]
    snapshot_rows = await reader.fetchall(CHARTS, (target, limit + 1))

    async def entries_of(snapshot_id: int) -> dict[str, ShortVideoEntry]:
        records = await reader.records(snapshot_id, MAX_ROWS)
        decoded = (msgspec.json.decode(r, type=ShortVideoEntry) for r in records)
        return {_identity(e): e for e in decoded}

    charts: list[Movement] = []
    loaded = [await entries_of(row[0]) for row in snapshot_rows]
    for index, (snapshot_id, chart_date, row_count) in enumerate(snapshot_rows[:limit]):
        current = loaded[index]
        older = loaded[index + 1] if index + 1 < len(snapshot_rows) else None
        if older is None:
            charts.append(Movement(chart_date, snapshot_id, row_count, None, [], []))
            continue
        entered = [_mover(e, e.rank, None) for key, e in current.items() if key not in older]
        left = [_mover(e, None, e.rank) for key, e in older.items() if key not in current]
        charts.append(Movement(chart_date, snapshot_id, row_count, snapshot_rows[index + 1][1],
                               sorted(entered, key=lambda m: m.rank or 0), sorted(left, key=lambda m: m.previous_rank or 0)))
    return MovementResponse(code2, interval, len(charts), charts)


# --- the route table ----------------------------------------------------------------------------

CODE2 = Param("code2", default=GLOBAL, check=country_param,
              description="ISO 3166-1 alpha-2 country code, or `global` for the worldwide chart")
INTERVAL = Param("interval", kind="choice", choices=INTERVALS, default="daily", description="Chart interval")


@accepts(pattern="^[0-9]{1,30}$")
def _digits(value: str) -> str:
    if not value.isdigit() or len(value) > 30:
        raise ValueError("must be a numeric id")
    return value


ROUTES: tuple[Route, ...] = (
    health_route(NAME, lambda settings: cadences(CATALOG, [TARGET.make(c, i) for c, i in configured_charts(settings)]),
                 "Latest snapshot coverage by country and interval, and whether a Chartmetric token is configured",
                 describe=describe_health, response=HealthResponse),
    Route("/chart", chart, (
        CODE2, INTERVAL,
        Param("limit", kind="int", default=100, ge=1, le=500, description="Rows to return"),
        Param("offset", kind="int", default=0, ge=0, le=MAX_ROWS, description="Rows to skip, from rank 1"),
    ), rows="entries", response=ChartResponse, summary="Popular TikTok tracks of a country (latest stored chart), paged"),
    Route("/history", history, (
        CODE2, INTERVAL,
        Param("limit", kind="int", default=30, ge=1, le=400, description="Charts (chart dates) to return, newest first"),
        Param("track_id", check=_digits, description="Chartmetric track id (`track_id` of an entry, `cm_track` upstream)"),
        Param("sound_id", check=_digits, description="TikTok sound id (`sound_id` or one of `sound_ids` of an entry)"),
    ), rows=("appearances", "charts"), response=(TrackHistoryResponse, MovementResponse),
        summary="A track's ranks and posts on every stored chart, or without a filter the chart's entries in and out"),
    snapshots_route(_cadence, "Stored chart snapshots of every country and interval, newest first"),
)


GROUP = Group(
    name=NAME,
    title="Short video (TikTok charts through Chartmetric)",
    description="TikTok's popular-track charts by country (or global) and interval (daily, weekly), read through the "
                "Chartmetric API with a refresh token, paged to the chart's full length and served from snapshots, "
                "with each track's chart history and the chart's entries in and out. The Chartmetric format is known "
                "from its documentation and public client code only.",
    routes=ROUTES,
    charts=CATALOG,
    upstreams=(chartmetric.UPSTREAM,),
    targets=targets,
    crawl_options=(("code2", (GLOBAL, *COUNTRIES)), ("interval", INTERVALS)),
    # Chartmetric publishes a day's TikTok chart the next day: the daily charts at 14:20 UTC (yesterday's),
    # the weekly charts on Fridays at 14:40 UTC (the week up to Thursday).
    schedules=(
        Schedule("20 14 * * *", ("--interval", "daily"), "UTC", "TikTok daily charts (yesterday's) via Chartmetric"),
        Schedule("40 14 * * 5", ("--interval", "weekly"), "UTC", "TikTok weekly charts via Chartmetric, Fridays"),
    ),
    retention_days={},
    per_upstream=1,
    delay_seconds=lambda settings: POLITE_DELAY_SECONDS,
    settings=(TOKEN_SETTING, COUNTRIES_SETTING, INTERVALS_SETTING),
    entries=EntryMapping(market="target:0", artist=("artist",), artists="artists", title=("name",),
                         ids={"isrc": "isrc", "analytics_track": "track_id"}),
    storage=Storage(queries=(APPEARANCES, CHARTS)),
)

assert {chart.cadence for chart in CATALOG} == set(INTERVALS)
