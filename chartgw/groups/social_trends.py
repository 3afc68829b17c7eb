"""/social-trends: X (Twitter) trending topics by location, one snapshot per location and crawl.

Locations are a fixed table of slug -> WOEID (`chartgw.upstreams.x_trends.LOCATIONS`: worldwide, 21 countries,
16 cities); `CHARTGW_SOCIAL_TRENDS_LOCATIONS` chooses the ones the schedule crawls. The trend source is the X API
with a bearer token (`CHARTGW_X_BEARER_TOKEN`; v2 `trends/by/woeid` or v1.1 `trends/place.json`) or, without a
token, the trends24.in page of the location (`CHARTGW_TRENDS_SOURCE`). Rank is the position once promoted
trends are left out; names keep their Unicode; tweet volume is an integer or null.

`POST /refresh` crawls one location in the server process, at most once per location per
`CHARTGW_SOCIAL_TRENDS_REFRESH_INTERVAL_SECONDS` (scheduled crawls do not count); a refresh that arrives while
one of the same location runs waits for it and answers its result.

Trends name no artists, so the group declares no entry mapping for the artist-history index.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Literal, TypedDict

import msgspec

from chartgw.api.catalog import CADENCES, Chart, cadence_of, cadences
from chartgw.api.endpoints import ApiError, Call, GroupData, Route
from chartgw.api.group import Group, Schedule, retention
from chartgw.api.params import InvalidParams, Limited, Param
from chartgw.api.refresh import admit_key
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
from chartgw.core.clock import fixed
from chartgw.core.settings import Settings
from chartgw.core.text import compact, title_key
from chartgw.crawl.runner import CrawlContext, CrawlError, CrawlTarget, Fetched, Outcome, run_targets
from chartgw.store import NewSnapshot, SnapshotRow, StoredEntry, parse_iso
from chartgw.store.targets import TargetKey
from chartgw.upstreams import x_trends
from chartgw.upstreams.x_trends import (
    LOCATIONS,
    LOCATIONS_BY_SLUG,
    LOCATIONS_BY_WOEID,
    Location,
    LocationKind,
    ParsedTrends,
    TrendEntry,
    XApiError,
)

NAME = "social-trends"
CADENCE_SECONDS = CADENCES["half-hourly"]
LOCATIONS_PATH = f"/{NAME}/locations"
NO_ARTIST = "-"
"""The store's artist key of a trend (the store wants one; a trend has no artist)."""
ROBOT_MARKERS = ("just a moment", "attention required", "cf-chl", "captcha", "are you a robot")


TOKEN_SETTING = config.Setting("X_BEARER_TOKEN", "", "app-only bearer token of the X API; without it /social-trends "
                               "reads trends24.in (unless CHARTGW_TRENDS_SOURCE=x-api)", config.text, secret=True)
SOURCE_SETTING = config.Setting("TRENDS_SOURCE", "auto", "where /social-trends reads trends: `x-api`, `trends24`, or "
                                "`auto` (the X API when CHARTGW_X_BEARER_TOKEN is set, else trends24)",
                                config.choice("auto", "x-api", "trends24"))
API_VERSION_SETTING = config.Setting("X_API_VERSION", "2", "X API trends endpoint: `2` (`/2/trends/by/woeid`) or "
                                     "`1.1` (`/1.1/trends/place.json`, with as_of, url and query)",
                                     config.choice("2", "1.1"))
LOCATIONS_SETTING = config.Setting("SOCIAL_TRENDS_LOCATIONS", ",".join(loc.slug for loc in LOCATIONS),
                                   "location slugs the /social-trends schedule crawls (see /social-trends/locations)",
                                   config.subset(tuple(LOCATIONS_BY_SLUG), "location slug", lower=True))
REFRESH_INTERVAL_SETTING = config.Setting("SOCIAL_TRENDS_REFRESH_INTERVAL_SECONDS", "60",
                                          "least seconds between two POST /social-trends/refresh of one location",
                                          config.bounded_int(0, 86400))

TARGET = TargetKey(("location",), prefix="trends")
CHARTS = (Chart("trends", TARGET, "half-hourly", market="location", latest="/social-trends/trends/{location}",
                history="/social-trends/snapshots"),)
"""One trend list per crawled location (a country, a city or worldwide), by its slug."""

Source = Literal["x-api", "trends24"]


def source(settings: Settings) -> Source:
    """The trend source of `settings`: the setting, or for `auto` the X API when a token is set."""
    chosen = settings.get(SOURCE_SETTING)
    if chosen == "auto":
        return "x-api" if settings.get(TOKEN_SETTING) else "trends24"
    return "x-api" if chosen == "x-api" else "trends24"


def token(settings: Settings) -> str:
    """The bearer token; a SettingError naming CHARTGW_X_BEARER_TOKEN when the X API is the source and none is set."""
    value: str = settings.get(TOKEN_SETTING)
    if not value:
        raise config.SettingError(f"{TOKEN_SETTING.variable}: not set, and CHARTGW_TRENDS_SOURCE=x-api needs an X API "
                                  "bearer token (or set CHARTGW_TRENDS_SOURCE=trends24)")
    return value




# --- crawl --------------------------------------------------------------------------------------


class SnapshotInfo(msgspec.Struct, kw_only=True):
    """What a trends snapshot keeps beside its entries (the snapshot's `meta`)."""

    source: str
    """The format read: "x-api-v2", "x-api-v1.1" or "trends24"."""
    as_of: str | None
    created_at: str | None


def stored(entry: TrendEntry) -> StoredEntry:
    key = title_key(entry.name) or compact(entry.name) or entry.name.casefold()
    return StoredEntry(entry.rank, key, NO_ARTIST, None, msgspec.json.encode(entry), f"{key}|")


def _build(where: Location, kind: x_trends.Source, fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    body = fetched[0].body
    parsed: ParsedTrends = x_trends.parse(kind, body, where.trends24_path)
    if parsed.woeid is not None and parsed.woeid != where.woeid:
        raise CrawlError(f"{TARGET.make(where.slug)}: asked for WOEID {where.woeid}, the X API answered {parsed.woeid}")
    moment = parse_iso(parsed.as_of) if parsed.as_of else ctx.now
    if moment > ctx.now + timedelta(minutes=5):
        moment = ctx.now  # a clock ahead of ours never makes a snapshot look newer than it is
    info = SnapshotInfo(source=parsed.source, as_of=parsed.as_of, created_at=parsed.created_at)
    return [NewSnapshot(target=TARGET.make(where.slug), chart_date=moment.date().isoformat(), chart_hour=moment.hour,
                        fetched_at=ctx.now, source=fetched[0].url, entries=[stored(e) for e in parsed.entries],
                        raw=body, raw_type=fetched[0].content_type or "application/octet-stream",
                        meta=msgspec.json.encode(info))]


def x_api_refusal(status: int, body: bytes) -> str | None:
    """An X API answer that asking again will not mend: a rejected token, a rate limit, an unknown WOEID."""
    if status >= 500:
        return None
    try:
        x_trends.parse_v1(body)
    except XApiError as exc:
        return {"rate_limit": "rate limit exceeded", "unauthorized": "the bearer token was refused",
                "not_found": "X knows no such location"}.get(exc.kind, "error") + f": {exc}"
    except ValueError:
        pass
    return {401: "the bearer token was refused", 403: "the bearer token was refused",
            429: "rate limit exceeded"}.get(status)


def trends24_refusal(status: int, body: bytes) -> str | None:
    text = body[:4000].decode("utf-8", "replace").lower()
    if any(marker in text for marker in ROBOT_MARKERS):
        return "robot check instead of the trends page"
    return "rate limited" if status == 429 else None


def location_target(where: Location, settings: Settings) -> CrawlTarget:
    """The crawl of one location from the source of `settings` (SettingError when the X API has no token)."""
    if source(settings) == "x-api":
        secret = token(settings)
        kind: x_trends.Source
        if settings.get(API_VERSION_SETTING) == "1.1":
            request, kind = x_trends.v1_request(where.woeid, secret), "x-api-v1.1"
        else:
            request, kind = x_trends.v2_request(where.woeid, secret), "x-api-v2"
        return CrawlTarget(TARGET.make(where.slug), (request,), partial(_build, where, kind), None, x_api_refusal)
    return CrawlTarget(TARGET.make(where.slug), (x_trends.trends24_request(where),),
                       partial(_build, where, "trends24"), None, trends24_refusal)


def targets(selection: dict[str, str | None], now: datetime, settings: Settings) -> list[CrawlTarget]:
    slug = selection.get("location")
    slugs = (slug,) if slug else settings.get(LOCATIONS_SETTING)
    return [location_target(LOCATIONS_BY_SLUG[s], settings) for s in slugs]


# --- responses ----------------------------------------------------------------------------------


class LocationInfo(msgspec.Struct):
    slug: str
    name: str
    woeid: int
    kind: LocationKind
    country: str | None
    """ISO 3166-1 alpha-2 (upper case) of the country or the city's country; null for worldwide."""
    crawled: bool
    """True when the schedule crawls it (CHARTGW_SOCIAL_TRENDS_LOCATIONS); any location can be refreshed."""
    fetched_at: str | None
    """When its latest snapshot was taken; null before the first."""


class LocationsResponse(msgspec.Struct):
    source: str
    """The trend source in force: "x-api" or "trends24"."""
    cadence_seconds: int
    count: int
    locations: list[LocationInfo]


class TrendsResponse(msgspec.Struct):
    location: LocationInfo
    source: str
    """The format the snapshot was read from: "x-api-v2", "x-api-v1.1" or "trends24"."""
    as_of: str | None
    """When the upstream took the list (v1.1 `as_of`, the trends24 hour); null for v2, which does not say."""
    snapshot: SnapshotMeta
    count: int
    entries: list[TrendEntry]


class LocationStatus(msgspec.Struct):
    slug: str
    woeid: int
    snapshot_id: int | None
    fetched_at: str | None
    age_seconds: int | None
    stale: bool


class HealthResponse(HealthHead):
    source: str
    token_configured: bool
    cadence_seconds: int
    locations: list[LocationStatus]
    """Every crawled location with its latest snapshot's time; stale past twice the cadence."""


class RefreshResponse(msgspec.Struct):
    location: LocationInfo
    source: str
    as_of: str | None
    joined: bool
    """True when this request found a refresh of the location running and answered its result."""
    snapshot: SnapshotMeta
    count: int


def _info(where: Location, row: SnapshotRow | None, configured: Sequence[str]) -> LocationInfo:
    return LocationInfo(where.slug, where.name, where.woeid, where.kind, where.country, where.slug in configured,
                        row.fetched_at if row else None)


def _meta(row: SnapshotRow) -> SnapshotInfo:
    if row.meta:
        return msgspec.json.decode(row.meta, type=SnapshotInfo)
    return SnapshotInfo(source="unknown", as_of=None, created_at=None)


def unknown_location(what: str) -> ApiError:
    return ApiError(404, f"Unknown location {what}; the locations are listed at {LOCATIONS_PATH}")


async def locations(call: Call) -> LocationsResponse:
    latest = {row.target: row for row in await call.data.reader.latest_per_target(TARGET.pattern())}
    configured = call.settings.get(LOCATIONS_SETTING)
    items = [_info(where, latest.get(TARGET.make(where.slug)), configured) for where in LOCATIONS]
    return LocationsResponse(source(call.settings), CADENCE_SECONDS, len(items), items)


async def _trends(call: Call[Limited], where: Location) -> TrendsResponse:
    row = await call.data.reader.latest(TARGET.make(where.slug))
    if row is None:
        hint = ("" if where.slug in call.settings.get(LOCATIONS_SETTING)
                else " (it is not among CHARTGW_SOCIAL_TRENDS_LOCATIONS; POST /refresh fetches it)")
        raise ApiError(404, f"No trends of {where.slug} stored yet{hint}; see {LOCATIONS_PATH}")
    records = await call.data.reader.records(row.id, call.params["limit"])
    info = _meta(row)
    return TrendsResponse(_info(where, row, call.settings.get(LOCATIONS_SETTING)), info.source, info.as_of,
                          snapshot_meta(row, CADENCE_SECONDS, call.now), len(records), records_array(records))


class TrendsBySlugParams(TypedDict):
    location_slug: str
    limit: int


async def trends_by_slug(call: Call[TrendsBySlugParams]) -> TrendsResponse:
    slug = call.params["location_slug"]
    where = LOCATIONS_BY_SLUG.get(slug.lower())
    if where is None:
        raise unknown_location(f"slug {slug!r}")
    return await _trends(call, where)


class TrendsByWoeidParams(TypedDict):
    woeid: int
    limit: int


async def trends_by_woeid(call: Call[TrendsByWoeidParams]) -> TrendsResponse:
    woeid = call.params["woeid"]
    where = LOCATIONS_BY_WOEID.get(woeid)
    if where is None:
        raise unknown_location(f"WOEID {woeid}")
    return await _trends(call, where)


def expected_cadences(settings: Settings) -> dict[str, int]:
    return cadences(CHARTS, [TARGET.make(slug) for slug in settings.get(LOCATIONS_SETTING)])


async def describe_health(call: Call, status: str, statuses: list[TargetStatus]) -> HealthResponse:
    items = []
    for s in statuses:
        where = LOCATIONS_BY_SLUG[(TARGET.parse(s.target) or {})["location"]]
        items.append(LocationStatus(where.slug, where.woeid, s.snapshot_id, s.fetched_at, s.age_seconds, s.stale))
    return HealthResponse(status, NAME, source(call.settings), bool(call.settings.get(TOKEN_SETTING)), CADENCE_SECONDS,
                          items)


# --- refresh ------------------------------------------------------------------------------------


class RefreshBody(msgspec.Struct):
    """Give exactly one: `location`, a slug from /social-trends/locations, or `woeid`, a Yahoo WOEID."""

    location: str | None = None
    woeid: int | None = None


def _body_error(kind: str, loc: list[str | int], msg: str, value: Any, ctx: dict[str, Any] | None = None) -> InvalidParams:
    item: dict[str, Any] = {"type": kind, "loc": loc, "msg": msg, "input": value}
    if ctx is not None:
        item["ctx"] = ctx
    return InvalidParams([item])


def parse_refresh_body(body: bytes) -> Location:
    """The location a refresh body names: `{"location": slug}` or `{"woeid": n}`. A malformed body is a 422 in
    FastAPI's shape (as a pydantic body model would answer); an unknown location a 404 naming /locations."""
    if not body.strip():
        raise _body_error("missing", ["body"], "Field required", None)
    try:
        doc = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise _body_error("json_invalid", ["body", 0], "JSON decode error", {}, {"error": str(exc)}) from None
    if not isinstance(doc, dict):
        raise _body_error("model_attributes_type", ["body"],
                          "Input should be a valid dictionary or object to extract fields from", doc)
    slug, raw_woeid = doc.get("location"), doc.get("woeid")
    errors = []
    if slug is not None and not isinstance(slug, str):
        errors.append({"type": "string_type", "loc": ["body", "location"], "msg": "Input should be a valid string",
                       "input": slug})
    woeid: int | None = None
    if isinstance(raw_woeid, str) and raw_woeid.strip().isdigit():
        woeid = int(raw_woeid.strip())
    elif isinstance(raw_woeid, float) and raw_woeid.is_integer():
        woeid = int(raw_woeid)
    elif isinstance(raw_woeid, int) and not isinstance(raw_woeid, bool):
        woeid = raw_woeid
    elif raw_woeid is not None:
        errors.append({"type": "int_type", "loc": ["body", "woeid"], "msg": "Input should be a valid integer",
                       "input": raw_woeid})
    if errors:
        raise InvalidParams(errors)
    if (slug is None) == (woeid is None):
        raise _body_error("value_error", ["body"], 'Value error, give exactly one of "location" (a slug) or "woeid"',
                          doc, {"error": {}})
    if slug is not None:
        where = LOCATIONS_BY_SLUG.get(slug.lower())
        if where is None:
            raise unknown_location(f"slug {slug!r}")
        return where
    assert woeid is not None
    found = LOCATIONS_BY_WOEID.get(woeid)
    if found is None:
        raise unknown_location(f"WOEID {woeid}")
    return found


_running: weakref.WeakKeyDictionary[GroupData, dict[str, asyncio.Task[Outcome]]] = weakref.WeakKeyDictionary()
"""The refresh in flight per location, per app (its group data: two apps in one process crawl into their own files,
so one's refresh is never another's); a second request joins it."""


async def _last_refresh(call: Call, slug: str) -> datetime | None:
    """When the latest refresh of `slug` started (recorded runs of kind "refresh"; scheduled crawls are "crawl")."""
    for run in await call.data.reader.runs("refresh", 500):
        options = msgspec.json.decode(run.detail).get("options", {})
        if options.get("location") == slug:
            return parse_iso(run.started_at)
    return None


async def _crawl_one(where: Location, target: CrawlTarget, now: datetime, settings: Settings) -> Outcome:
    outcomes = await run_targets(NAME, [target], retention=retention(GROUP, settings), now=fixed(now),
                                 run_kind="refresh", run_options={"location": where.slug}, settings=settings)
    return outcomes[0]


def _forget(running: dict[str, asyncio.Task[Outcome]], slug: str, task: asyncio.Task[Outcome]) -> None:
    if running.get(slug) is task:
        del running[slug]


async def refresh(call: Call) -> RefreshResponse:
    where = parse_refresh_body(call.body)
    running = _running.setdefault(call.data, {})
    task = running.get(where.slug)
    joined = task is not None and not task.done()
    if not joined:
        interval = call.settings.get(REFRESH_INTERVAL_SETTING)
        target = location_target(where, call.settings)  # a SettingError (503 naming the setting) before anything else
        last = await _last_refresh(call, where.slug)
        if last is not None and (waited := (call.now - last).total_seconds()) < interval:
            wait = max(1, int(interval - waited + 0.999))
            raise ApiError(429, f"{where.slug} was refreshed {int(waited)} s ago; one refresh per location every "
                                f"{interval} s (try again in {wait} s)", {"Retry-After": str(wait)})
        task = running.get(where.slug)
        joined = task is not None and not task.done()
        if not joined:
            admit_key(call)  # only a refresh that starts a crawl counts against the key's budget
            task = asyncio.ensure_future(_crawl_one(where, target, call.now, call.settings))
            running[where.slug] = task
            task.add_done_callback(partial(_forget, running, where.slug))
    assert task is not None
    outcome = await asyncio.shield(task)
    call.data.expire()
    if outcome.status != "ok" or outcome.snapshot_id is None:
        raise ApiError(502, f"The trend source failed for {where.slug}: {outcome.error}; the last good snapshot is "
                            "still served")
    rows = await call.data.reader.snapshots_with_ids([outcome.snapshot_id])
    row = rows[0]
    info = _meta(row)
    return RefreshResponse(_info(where, row, call.settings.get(LOCATIONS_SETTING)), info.source, info.as_of, joined,
                           snapshot_meta(row, CADENCE_SECONDS, call.now), row.row_count)


# --- the route table ----------------------------------------------------------------------------

LIMIT = Param("limit", kind="int", default=50, ge=1, le=100, description="Trends to return, from rank 1")

ROUTES: tuple[Route, ...] = (
    health_route(NAME, expected_cadences, "The trend source and every crawled location's latest snapshot time",
                 describe=describe_health, response=HealthResponse, pattern=TARGET.pattern()),
    Route("/locations", locations, errors=(), rows="locations", response=LocationsResponse,
          summary="Supported locations: slug, name, WOEID, kind, whether crawled, latest snapshot time"),
    Route("/trends/{location_slug}", trends_by_slug, (
        Param("location_slug", "path", description="Location slug (see /social-trends/locations)"),
        LIMIT,
    ), rows="entries", response=TrendsResponse, summary="Latest cached trends of a location by slug"),
    Route("/trends/by-woeid/{woeid}", trends_by_woeid, (
        Param("woeid", "path", kind="int", description="Yahoo WOEID of the location (1 = worldwide)"),
        LIMIT,
    ), rows="entries", response=TrendsResponse, summary="Latest cached trends of a location by WOEID"),
    Route("/refresh", refresh, method="POST", cache_ttl=0, errors=(404, 422, 429, 502, 503), response=RefreshResponse,
          body=RefreshBody,
          summary='Crawl one location now; JSON body {"location": slug} or {"woeid": n}; once per location a minute'),
    snapshots_route(lambda target: cadence_of(CHARTS, target), "Stored trend snapshots of every location, newest first"),
)


GROUP = Group(
    name=NAME,
    title="Social trends (X trending topics by location)",
    description="Trending topics of X (Twitter) by location slug or WOEID, from the X API with a bearer token or, "
                "without one, the trends24.in pages; crawled every 30 minutes and on demand (POST /refresh). "
                "Rank is the position without promoted trends; tweet volume is an integer or null.",
    routes=ROUTES,
    charts=CHARTS,
    upstreams=(x_trends.X_API, x_trends.TRENDS24),
    targets=targets,
    crawl_options=(("location", tuple(LOCATIONS_BY_SLUG)),),
    # X recomputes trends every few minutes and trends24 keeps hourly lists; every 30 minutes is fresh enough for
    # clients and stays far inside the X API's 75 trends requests per 15 minutes with the whole table.
    schedules=(Schedule("7,37 * * * *", (), "UTC", "X trends of every crawled location, every 30 minutes"),),
    retention_days={"trends/": 30.0},
    settings=(TOKEN_SETTING, SOURCE_SETTING, API_VERSION_SETTING, LOCATIONS_SETTING, REFRESH_INTERVAL_SETTING),
    # Trends are topics and hashtags, not songs: no artist, no title, no id the artist-history index could join.
    entries=None,
)
