"""/video: YouTube Music charts (charts.youtube.com), normalised, per country, with shorts backfills.

The crawl posts the charts web app's `browse` request once per catalogue chart and keeps every
payload as it came (`/video/pull.json`). The catalogue (`CATALOGUE`, read by the crawl and by
`/video/charts`): top songs, top videos and top artists weekly for every configured country,
trending daily for every configured country but global, shorts weekly and daily for global only.
`chartgw backfill video --weeks N` fills the past N weeks of the global weekly shorts chart and
records the run (`/video/shorts/backfills`). A chart's date is the end date of its period.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import date, datetime
from functools import partial
from typing import Any, Literal, TypedDict

import httpx
import msgspec

from chartgw.api.catalog import Chart as CatalogChart
from chartgw.api.catalog import cadence_of, dated
from chartgw.api.endpoints import Call, Route, not_found
from chartgw.api.group import CommandArg, EntryMapping, Group, GroupCommand, Schedule, retention
from chartgw.api.params import InvalidParams, Limited, Param
from chartgw.api.responses import (
    BUNDLE_LIMIT,
    PULL_JSON_ROUTE,
    BundledChart,
    RunInfo,
    SnapshotMeta,
    chart_bundle,
    health_route,
    latest_pull_route,
    records_array,
    run_info,
    snapshot_meta,
    snapshots_route,
)
from chartgw.core import config
from chartgw.core.clock import Clock, utc_now
from chartgw.core.countries import COUNTRIES, GLOBAL, country_name, country_param
from chartgw.core.settings import Settings
from chartgw.crawl.context import Context
from chartgw.crawl.runner import CrawlContext, CrawlError, CrawlTarget, Fetched, Outcome, RetryPolicy, run_targets
from chartgw.store import NewSnapshot, StoredEntry, glob_escape
from chartgw.store.records import stored_entry
from chartgw.store.targets import TargetKey
from chartgw.upstreams import UpstreamFormatError, youtube
from chartgw.upstreams.youtube import (
    CHART_TYPES,
    PERIODS,
    ArtistEntry,
    VideoChartEntry,
    VideoEntry,
    past_week_ends,
)

NAME = "video"
COUNTRIES_SETTING = config.Setting("VIDEO_COUNTRIES", "global,us,kr,jp,br,in,gb", "countries /video crawls",
                                   config.countries)
SHORTS_WEEKLY = "shorts/weekly/global"
MAX_BACKFILL_WEEKS = 104

Scope = Literal["countries", "countries-but-global", "global"]
CATALOGUE: tuple[tuple[str, str, Scope], ...] = (
    ("top-songs", "weekly", "countries"),
    ("top-videos", "weekly", "countries"),
    ("top-artists", "weekly", "countries"),
    ("trending", "daily", "countries-but-global"),
    ("shorts", "weekly", "global"),
    ("shorts", "daily", "global"),
)
"""The crawled charts: (chart_type, period, which countries). `catalogue()` expands it."""
EXPECTED_ROWS = {"top-songs": 100, "top-videos": 100, "top-artists": 100}
"""Rows a whole chart has (top songs: 100 in the real CSV export); trending and shorts: not known."""


TARGET = TargetKey(("chart_type", "period", "country"))
CHARTS = tuple(CatalogChart(f"{chart_type}-{period}", TARGET, period, {"chart_type": chart_type, "period": period},
                            market="country", latest="/video/{country}/latest",
                            by_date=("/video/shorts/global/{period}/{date}" if chart_type == "shorts"
                                     else "/video/charts/{chart_type}/{period}/{country}/{date}"),
                            history="/video/snapshots")
               for chart_type, period, _ in CATALOGUE)
"""Every chart of the catalogue, by chart type and period (its latest is in the country's bundle)."""


@dataclass(frozen=True)
class Chart:
    chart_type: str
    period: str
    country: str

    @property
    def target(self) -> str:
        return TARGET.make(self.chart_type, self.period, self.country)

    @property
    def cadence_seconds(self) -> int:
        return cadence_of(CHARTS, self.target)

    @property
    def upstream_type(self) -> str:
        return youtube.CHART_KINDS[self.chart_type].upstream_type

    @property
    def expected_rows(self) -> int | None:
        return EXPECTED_ROWS.get(self.chart_type)


def catalogue(settings: Settings) -> list[Chart]:
    """The crawled charts of the configured countries (`CHARTGW_VIDEO_COUNTRIES`, "global" included by default)."""
    codes = settings.get(COUNTRIES_SETTING)
    charts = []
    for chart_type, period, scope in CATALOGUE:
        where = (GLOBAL,) if scope == "global" else tuple(c for c in codes if scope == "countries" or c != GLOBAL)
        charts += [Chart(chart_type, period, code) for code in where]
    return charts


def chart_of_target(target: str) -> Chart | None:
    """The chart a snapshot target names ("top-songs/weekly/us"), or None for any other string."""
    parts = TARGET.parse(target)
    if parts is None or parts["chart_type"] not in CHART_TYPES or parts["period"] not in PERIODS:
        return None
    return Chart(**parts)


def chart_cadence(target: str) -> int:
    return cadence_of(CHARTS, target)



# --- crawl --------------------------------------------------------------------------------------

def stored(entry: youtube.Entry) -> StoredEntry:
    title, artists, item_id = youtube.entry_names(entry)
    return stored_entry(entry, rank=entry.rank, title=title, artists=artists, item_id=item_id)


def _build(chart: Chart, requested: str | None, fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    """One snapshot of `chart` dated by the payload's end date, with the payload kept as raw."""
    answer = fetched[0]
    parsed = youtube.parse(chart.chart_type, chart.period, answer.body)
    if requested is not None and parsed.end_date is not None and parsed.end_date != requested:
        raise CrawlError(f"{chart.target}: asked for the chart ending {requested}, upstream sent {parsed.end_date}")
    chart_date = parsed.chart_date(requested)
    if chart_date is None:
        raise UpstreamFormatError(f"youtube {chart.chart_type}: the payload states no end date")
    query = youtube.browse_query(chart.chart_type, chart.period, chart.country, requested)
    return [NewSnapshot(target=chart.target, chart_date=chart_date, chart_hour=None, fetched_at=ctx.now,
                        source=f"POST {answer.url} query={query}", entries=[stored(e) for e in parsed.entries],
                        raw=answer.body, raw_type="application/json")]


def _target(chart: Chart) -> CrawlTarget:
    request = youtube.browse_request(chart.chart_type, chart.period, chart.country)
    return CrawlTarget(chart.target, (request,), partial(_build, chart, None), chart.expected_rows)


def targets(selection: dict[str, str | None], now: datetime, settings: Settings) -> list[CrawlTarget]:
    chart_type, period, country = (selection.get(k) for k in ("chart_type", "period", "country"))
    chosen = [c for c in catalogue(settings) if chart_type in (None, c.chart_type) and period in (None, c.period)
              and country in (None, c.country)]
    if not chosen:
        wanted = "/".join(v or "*" for v in (chart_type, period, country))
        raise InvalidParams([{"type": "value_error", "loc": ["query", "chart_type"],
                              "msg": f"Value error, no catalogue chart matches {wanted}", "input": wanted,
                              "ctx": {"error": {}}}])
    return [_target(c) for c in chosen]


def backfill_targets(weeks: int, today: date) -> list[CrawlTarget]:
    """One target per past week of the global weekly shorts chart; each writes `shorts/weekly/global`."""
    chart = Chart("shorts", "weekly", GLOBAL)
    return [CrawlTarget(f"{chart.target}@{end}", (youtube.browse_request("shorts", "weekly", GLOBAL, end),),
                        partial(_build, chart, end), chart.expected_rows)
            for end in past_week_ends(today, weeks)]


async def backfill(weeks: int, period: str = "weekly", *, settings: Settings, now: Clock = utc_now,
                   transport: httpx.AsyncBaseTransport | None = None) -> list[Outcome]:
    """Fetch the past `weeks` weeks of the shorts chart as one recorded run of kind "backfill"; a week
    that fails is recorded failed and the others still commit."""
    if not 1 <= weeks <= MAX_BACKFILL_WEEKS:
        raise ValueError(f"weeks must be 1 to {MAX_BACKFILL_WEEKS}, got {weeks}")
    if period != "weekly":
        raise ValueError(f"only the weekly shorts chart has past weeks to fill, not {period!r}")
    chosen = backfill_targets(weeks, now().date())
    options = {"chart": SHORTS_WEEKLY, "weeks": weeks, "period": period,
               "end_dates": [t.key.partition("@")[2] for t in chosen]}
    return await run_targets(NAME, chosen, retention=retention(GROUP, settings), now=now, transport=transport,
                             policy=RetryPolicy.of(settings, per_upstream=PER_UPSTREAM), run_kind="backfill",
                             run_options=options, settings=settings)


def _backfill_command(ctx: Context, values: dict[str, Any]) -> list[Outcome]:
    return asyncio.run(backfill(values["weeks"], values["period"], settings=ctx.settings, now=ctx.clock,
                                transport=ctx.transport))


# --- reads --------------------------------------------------------------------------------------

# --- responses ----------------------------------------------------------------------------------

class CountryChart(msgspec.Struct):
    chart_type: str
    period: str
    target: str
    in_catalogue: bool
    latest_date: str | None
    snapshot_id: int | None


class CountryInfo(msgspec.Struct):
    code: str
    name: str
    configured: bool
    """True when the country is in CHARTGW_VIDEO_COUNTRIES (crawled); false for data kept from before."""
    charts: list[CountryChart]


class CountriesResponse(msgspec.Struct):
    count: int
    countries: list[CountryInfo]


class CountryLatestResponse(msgspec.Struct):
    country: str
    name: str
    count: int
    charts: list[BundledChart]


class CatalogueChart(msgspec.Struct):
    chart_type: str
    period: str
    country: str
    target: str
    upstream_chart_type: str
    cadence_seconds: int
    latest_date: str | None
    dates: int
    """How many chart dates are stored (pulls and backfills)."""


class ChartsResponse(msgspec.Struct):
    count: int
    charts: list[CatalogueChart]


class ChartHead(msgspec.Struct):
    """What every dated chart response says before its entries."""

    chart_type: str
    period: str
    country: str
    upstream_chart_type: str
    snapshot: SnapshotMeta
    count: int


class SongChartResponse(ChartHead):
    """top-songs and shorts."""

    entries: list[VideoChartEntry]


class VideoChartResponse(ChartHead):
    """top-videos and trending."""

    entries: list[VideoEntry]


class ArtistChartResponse(ChartHead):
    """top-artists."""

    entries: list[ArtistEntry]


ChartResponse = SongChartResponse | VideoChartResponse | ArtistChartResponse
RESPONSE_OF_KIND: dict[str, type[SongChartResponse] | type[VideoChartResponse] | type[ArtistChartResponse]] = {
    "tracks": SongChartResponse, "videos": VideoChartResponse, "artists": ArtistChartResponse}


class BackfillsResponse(msgspec.Struct):
    count: int
    runs: list[RunInfo]


# --- handlers -----------------------------------------------------------------------------------

async def countries_list(call: Call) -> CountriesResponse:
    configured = call.settings.get(COUNTRIES_SETTING)
    listed = {c.target: c for c in catalogue(call.settings)}
    newest = {row.target: row for row in await call.data.reader.latest_per_target()}
    charts_by_country: dict[str, list[Chart]] = {}
    for chart in [*listed.values(), *(c for t in newest if t not in listed and (c := chart_of_target(t)))]:
        charts_by_country.setdefault(chart.country, []).append(chart)
    order = [*configured, *sorted(c for c in charts_by_country if c not in configured)]
    infos = []
    for code in order:
        charts = []
        for chart in charts_by_country.get(code, []):
            row = newest.get(chart.target)
            charts.append(CountryChart(chart.chart_type, chart.period, chart.target, chart.target in listed,
                                       row.chart_date if row else None, row.id if row else None))
        infos.append(CountryInfo(code, country_name(code), code in configured, charts))
    return CountriesResponse(len(infos), infos)


class CountryLatestParams(TypedDict):
    country: str
    limit: int


async def country_latest(call: Call[CountryLatestParams]) -> CountryLatestResponse:
    code = call.params["country"]
    reader = call.data.reader
    rows = await reader.latest_per_target(f"*/*/{glob_escape(code)}")
    if not rows:
        why = "yet" if code in call.settings.get(COUNTRIES_SETTING) else f"({code} is not in CHARTGW_VIDEO_COUNTRIES)"
        raise not_found(f"No video chart of {country_name(code)} {why}")
    charts = await chart_bundle(reader, rows, call.params["limit"], chart_cadence, call.now)
    return CountryLatestResponse(code, country_name(code), len(charts), charts)


async def charts_catalogue(call: Call) -> ChartsResponse:
    reader = call.data.reader
    listed = []
    for chart in catalogue(call.settings):
        dates = await reader.dates(chart.target)
        listed.append(CatalogueChart(chart.chart_type, chart.period, chart.country, chart.target, chart.upstream_type,
                                     chart.cadence_seconds, dates[0] if dates else None, len(dates)))
    return ChartsResponse(len(listed), listed)


async def _dated_chart(call: Call[Limited], chart: Chart, chart_date: str) -> ChartResponse:
    reader = call.data.reader
    row = await reader.snapshot_on(chart.target, chart_date)
    if row is None:
        if chart not in catalogue(call.settings) and not await reader.dates(chart.target):
            raise not_found(f"{chart.target} is not in the catalogue (see /video/charts)")
        raise not_found(f"No snapshot of {chart.target} for {chart_date} (see /video/charts for its dates)")
    records = await reader.records(row.id, call.params["limit"])
    kind = RESPONSE_OF_KIND[youtube.CHART_KINDS[chart.chart_type].kind]
    return kind(chart.chart_type, chart.period, chart.country, chart.upstream_type,
                snapshot_meta(row, chart.cadence_seconds, call.now), len(records), records_array(records))


class DatedChartParams(TypedDict):
    chart_type: str
    period: str
    country: str
    date: str
    limit: int


async def dated_chart(call: Call[DatedChartParams]) -> ChartResponse:
    p = call.params
    return await _dated_chart(call, Chart(p["chart_type"], p["period"], p["country"]), p["date"])


class ShortsChartParams(TypedDict):
    period: str
    date: str
    limit: int


async def shorts_chart(call: Call[ShortsChartParams]) -> ChartResponse:
    return await _dated_chart(call, Chart("shorts", call.params["period"], GLOBAL), call.params["date"])


class BackfillsParams(TypedDict):
    limit: int


async def backfills(call: Call[BackfillsParams]) -> BackfillsResponse:
    runs = await call.data.reader.runs("backfill", call.params["limit"])
    return BackfillsResponse(len(runs), [run_info(r) for r in runs])


async def latest_backfill(call: Call) -> RunInfo:
    runs = await call.data.reader.runs("backfill", 1)
    if not runs:
        raise not_found("No shorts backfill has run yet")
    return run_info(runs[0])


# --- the route table ----------------------------------------------------------------------------

CHART_LIMIT = Param("limit", kind="int", default=100, ge=1, le=100, description="Rows to return, from rank 1")
PERIOD = Param("period", "path", kind="choice", choices=PERIODS, description="Chart period")
DATE = Param("date", "path", kind="date", description="The chart's end date (YYYY-MM-DD); weekly charts end on Thursday")
COUNTRY = Param("country", "path", check=country_param, description='ISO 3166 alpha-2 code or "global"')
CHART_RESPONSES = (SongChartResponse, VideoChartResponse, ArtistChartResponse)

ROUTES: tuple[Route, ...] = (
    health_route(NAME, lambda settings: {c.target: c.cadence_seconds for c in catalogue(settings)},
                 "Every catalogue chart's latest snapshot, with age and a stale flag"),
    snapshots_route(chart_cadence, "Stored snapshots of every chart, newest first"),
    latest_pull_route(None, chart_cadence, "The latest pull: its run and every chart's newest snapshot "
                                        "(100 rows each unless limit says fewer)"),
    PULL_JSON_ROUTE,
    Route("/countries", countries_list, errors=(), rows="countries", response=CountriesResponse,
          summary="Configured countries and countries with data, with their charts and latest dates"),
    Route("/charts", charts_catalogue, errors=(), rows="charts", response=ChartsResponse,
          summary="The catalogue of normalised charts with their upstream chart type, latest date and date count"),
    dated(NAME, Route("/charts/{chart_type}/{period}/{country}/{date}", dated_chart, (
        Param("chart_type", "path", kind="choice", choices=CHART_TYPES, description="Normalised chart type"),
        PERIOD, COUNTRY, DATE, CHART_LIMIT,
    ), rows="entries", response=CHART_RESPONSES, summary="One chart of one end date"), "date"),
    Route("/shorts/backfills", backfills, (
        Param("limit", kind="int", default=20, ge=1, le=200, description="Runs to return, newest first"),
    ), errors=(), rows="runs", response=BackfillsResponse, summary="Recorded shorts backfill runs with every week's outcome"),
    Route("/shorts/backfills/latest", latest_backfill, response=RunInfo, summary="The newest shorts backfill run"),
    dated(NAME, Route("/shorts/global/{period}/{date}", shorts_chart, (PERIOD, DATE, CHART_LIMIT),
                      rows="entries", response=SongChartResponse, summary="The global shorts chart of one end date"),
          "date"),
    Route("/{country}/latest", country_latest, (COUNTRY, BUNDLE_LIMIT), rows="charts", response=CountryLatestResponse,
          summary="Every chart of one country, newest snapshot each (100 rows each unless limit says fewer)"),
)

PER_UPSTREAM = 2


GROUP = Group(
    name=NAME,
    title="YouTube Music charts",
    description="YouTube Music charts (charts.youtube.com) normalised into top-songs, top-videos, top-artists, "
                "trending and shorts, per country, served from cached snapshots with the raw upstream payloads. "
                + " ".join(__doc__.split("\n\n")[1:]).replace("\n", " "),
    routes=ROUTES,
    charts=CHARTS,
    upstreams=(youtube.UPSTREAM,),
    targets=targets,
    crawl_options=(("chart_type", CHART_TYPES), ("period", PERIODS), ("country", (GLOBAL, *sorted(COUNTRIES)))),
    schedules=(Schedule("40 3 * * *", (), "UTC", "every catalogue chart daily (weekly charts change once a week)"),),
    per_upstream=PER_UPSTREAM,
    commands=(GroupCommand("backfill", "fill past weeks of the global weekly shorts chart", (
        CommandArg("weeks", f"how many past weeks, 1 to {MAX_BACKFILL_WEEKS}", type=int, default=8),
        CommandArg("period", "chart period", choices=("weekly",), default="weekly"),
    ), _backfill_command),),
    settings=(COUNTRIES_SETTING,),
    entries=EntryMapping(market="target:2", artist=("artist", "name"), ids={"video_id": "video_id"}),
)
