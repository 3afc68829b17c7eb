"""/streaming: Spotify's country charts (regional daily and weekly, viral daily), served from snapshots.

With `CHARTGW_SPOTIFY_TOKEN` set, every chart type of every configured country comes from the charts
JSON API (auth/v0). Without it only the public overview can be read, and that holds one chart of
ours: regional-weekly/global, top 50, without streams. A crawl that finds a chart unchanged since
the last snapshot stores nothing new, so a chart date has one snapshot however often it is polled.

`chartgw import streaming FILE.csv` loads the sites' CSV downloads for backfills. "Latest" is the
newest chart date (the store's reading), so an import of an older chart never replaces the current one.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from functools import partial
from pathlib import Path
from typing import Any, TypedDict

import msgspec

from chartgw.api.catalog import Chart, cadence_of, cadences, dated
from chartgw.api.endpoints import ApiError, Call, Route, not_found
from chartgw.api.group import CommandArg, EntryMapping, Group, GroupCommand, Schedule
from chartgw.api.params import LETTER_OR_DIGIT, InvalidParams, Param, accepts, limit_param, search_term
from chartgw.api.responses import (
    HealthHead,
    SnapshotMeta,
    TargetStatus,
    health_route,
    records_array,
    snapshot_meta,
    stored_record,
)
from chartgw.core import config
from chartgw.core.countries import COUNTRIES, GLOBAL, country_code, country_name, country_param
from chartgw.core.settings import Settings
from chartgw.core.text import compact, title_key
from chartgw.crawl.context import Context
from chartgw.crawl.runner import CrawlContext, CrawlTarget, Fetched, Outcome, import_builds
from chartgw.store import NewSnapshot, SnapshotReader, SnapshotRow, StoredEntry, glob_escape
from chartgw.store.records import stored_entry
from chartgw.store.targets import TargetKey
from chartgw.upstreams import spotify
from chartgw.upstreams.spotify import CHART_TYPES, StreamingEntry

NAME = "streaming"
EXPECTED_ROWS = {"regional-daily": 200, "regional-weekly": 200, "viral-daily": 50}
OVERVIEW_ROWS = 50
COUNTRIES_SETTING = config.Setting("STREAMING_COUNTRIES", "global,us,gb,de,jp,br,mx,kr",
                                   "countries /streaming crawls (`global` or ISO alpha-2)", config.countries)
TOKEN_SETTING = config.Setting("SPOTIFY_TOKEN", "", "bearer token of a logged-in charts.spotify.com session; without it "
                               "/streaming reads only the public overview", config.text, secret=True)
OVERVIEW_TARGET = "regional-weekly/global"
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


# --- configuration and targets ------------------------------------------------------------------

TARGET = TargetKey(("chart_type", "country"))
CHARTS = tuple(Chart(chart_type, TARGET, "weekly" if chart_type == "regional-weekly" else "daily",
                     {"chart_type": chart_type}, market="country",
                     latest="/streaming/latest?country={country}&chart_type={chart_type}",
                     by_date="/streaming/chart?country={country}&chart_type={chart_type}&chart_date={date}",
                     history="/streaming/dates?country={country}&chart_type={chart_type}")
               for chart_type in CHART_TYPES)


def split_target(target: str) -> tuple[str, str]:
    parts = TARGET.parse(target) or {"chart_type": "", "country": ""}
    return parts["chart_type"], parts["country"]


def expected_cadences(settings: Settings) -> dict[str, int]:
    """Every chart the group serves, with its cadence: without a token only the overview's one is crawled,
    so the others are "never crawled" and health says `degraded` (and `token_mode: public` says why)."""
    charts = cadences(CHARTS, [TARGET.make(ct, c) for ct in CHART_TYPES for c in settings.get(COUNTRIES_SETTING)])
    return charts if settings.get(TOKEN_SETTING) else {**cadences(CHARTS, [OVERVIEW_TARGET]), **charts}


def stored(entry: StreamingEntry) -> StoredEntry:
    return stored_entry(entry, rank=entry.rank, title=entry.title, artists=entry.artists, item_id=entry.track_id)


def _snapshot(target: str, chart: spotify.SpotifyChart, source: str, ctx: CrawlContext) -> list[NewSnapshot]:
    """The chart as a snapshot, or nothing when the target's newest snapshot holds exactly these rows."""
    entries = [stored(e) for e in chart.entries]
    if ctx.store.latest_records(target) == [e.record for e in entries]:
        return []
    return [NewSnapshot(target=target, chart_date=chart.chart_date, chart_hour=None, fetched_at=ctx.now,
                        source=source, entries=entries)]


def _build_chart(chart_type: str, country: str, fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    chart = spotify.parse_chart(fetched[0].body, f"spotify {spotify.alias(chart_type, country)}")
    return _snapshot(TARGET.make(chart_type, country), chart, fetched[0].url, ctx)


def _build_overview(fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    chart = spotify.parse_overview(fetched[0].body)
    source = f"{fetched[0].url} (public overview, no CHARTGW_SPOTIFY_TOKEN: top 50, no streams)"
    return _snapshot(OVERVIEW_TARGET, chart, source, ctx)


def _public_only(name: str) -> dict[str, Any]:
    return {"type": "value_error", "loc": ["query", name], "input": None, "ctx": {"error": {}},
            "msg": "Value error, without CHARTGW_SPOTIFY_TOKEN only regional-weekly/global (the public overview) "
                   "can be crawled"}


def targets(selection: dict[str, str | None], now: datetime, settings: Settings) -> list[CrawlTarget]:
    """Every chart type x configured country with a token; only the public overview's chart without one."""
    chart_type, country = selection.get("chart_type"), selection.get("country")
    country = country_code(country) if country else None
    if not settings.get(TOKEN_SETTING):
        asked = (("chart_type", chart_type, "regional-weekly"), ("country", country, GLOBAL))
        errors = [_public_only(name) for name, value, allowed in asked if value not in (None, allowed)]
        if errors:
            raise InvalidParams(errors)
        return [CrawlTarget(OVERVIEW_TARGET, (spotify.overview_request(),), _build_overview, OVERVIEW_ROWS)]
    secret = settings.get(TOKEN_SETTING)
    return [CrawlTarget(TARGET.make(ct, c), (spotify.chart_request(ct, c, secret),), partial(_build_chart, ct, c),
                        EXPECTED_ROWS[ct])
            for ct in CHART_TYPES if chart_type in (None, ct)
            for c in ([country] if country else settings.get(COUNTRIES_SETTING))]


# --- CSV import ---------------------------------------------------------------------------------

def _pick(option: str, given: str | None, from_name: str | None, file_name: str) -> str:
    """The option's value, else what the file name says; a contradiction or neither is a ValueError."""
    if given and from_name and given != from_name:
        raise ValueError(f"--{option} {given} contradicts the file name {file_name!r}, which says {from_name}")
    value = given or from_name
    if not value:
        raise ValueError(f"the file name {file_name!r} does not say the {option.replace('-', ' ')}; pass --{option}")
    return value


def _chart_date(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        if not _ISO_DATE.fullmatch(value):
            raise ValueError
        return date.fromisoformat(value).isoformat()
    except ValueError:
        raise ValueError(f"--date must be YYYY-MM-DD, got {value!r}") from None


def _check_layout(parsed: spotify.CsvChart, chart_type: str, file_name: str) -> None:
    """A file whose columns say another kind of chart (streams on a viral chart, days on a weekly one) is refused."""
    kind, _, recurrence = chart_type.partition("-")
    if parsed.kind != kind:
        has = "has a" if parsed.kind == "regional" else "has no"
        raise ValueError(f"{file_name} {has} streams column, so it is not a {chart_type} chart")
    if parsed.recurrence not in (None, recurrence):
        raise ValueError(f"{file_name} counts {parsed.recurrence} periods on chart, so it is not a {chart_type} chart")


def import_csv(ctx: Context, values: dict[str, Any]) -> list[Outcome]:
    """`chartgw import streaming FILE.csv [--country] [--chart-type] [--date]`: one dated snapshot from a
    charts.spotify.com or spotifycharts.com download, committed as a crawl commits (checks, fetch log, run).

    Chart type, country and date come from the options or the file's name; the file is parsed before
    anything is written, so a file that is not a chart CSV changes nothing (ValueError: CLI exit 2).
    """
    path = Path(values["file"])
    named = spotify.csv_name_info(path.name)
    chart_type = _pick("chart-type", values.get("chart_type"), named.chart_type, path.name)
    if chart_type not in CHART_TYPES:
        raise ValueError(f"{chart_type} charts are not served here (chart types: {', '.join(CHART_TYPES)})")
    given_country = country_code(values["country"]) if values.get("country") else None
    country = _pick("country", given_country, named.country, path.name)
    chart_date = _pick("date", _chart_date(values.get("date")), named.chart_date, path.name)
    parsed = spotify.parse_csv(path.read_bytes(), path.name)
    _check_layout(parsed, chart_type, path.name)
    target = TARGET.make(chart_type, country)
    source = f"csv import of {path.name} ({parsed.layout} layout)"

    def build(ctx: CrawlContext) -> list[NewSnapshot]:
        return [NewSnapshot(target=target, chart_date=chart_date, chart_hour=None, fetched_at=ctx.now, source=source,
                            entries=[stored(e) for e in parsed.entries])]

    options = {"file": path.name, "chart_type": chart_type, "country": country, "date": chart_date,
               "layout": parsed.layout}
    return import_builds(NAME, [(f"{target}@{chart_date}", build)], source, now=ctx.clock, options=options,
                         settings=ctx.settings)


# --- responses ----------------------------------------------------------------------------------

class ChartTypeInfo(msgspec.Struct):
    chart_type: str
    latest_chart_date: str
    cadence_seconds: int


class CountryInfo(msgspec.Struct):
    code: str
    """"global" or an ISO 3166-1 alpha-2 code, lowercase."""
    name: str
    crawled: bool
    """True when the scheduled crawl covers this country; imported-only countries are false."""
    chart_types: list[ChartTypeInfo]


class CountriesResponse(msgspec.Struct):
    count: int
    countries: list[CountryInfo]


class ChartResponse(msgspec.Struct):
    country: str
    chart_type: str
    chart_date: str
    snapshot: SnapshotMeta
    count: int
    entries: list[StreamingEntry]


class DatesResponse(msgspec.Struct):
    country: str
    chart_type: str
    count: int
    dates: list[str]
    """Chart dates with a snapshot, newest first."""


class SearchHit(msgspec.Struct):
    country: str
    chart_type: str
    chart_date: str
    entry: StreamingEntry


class SearchResponse(msgspec.Struct):
    q: str
    country: str | None
    chart_type: str | None
    count: int
    hits: list[SearchHit]
    """Newest chart first, then by rank."""


class Appearance(msgspec.Struct):
    country: str
    chart_type: str
    chart_date: str
    rank: int
    streams: int | None
    """Null on viral charts, the public overview and legacy viral imports."""
    title: str
    """The title as that chart printed it ("Seven (feat. Latto) (Explicit Ver.)"): versions of the song are one
    history."""


class HistoryResponse(msgspec.Struct):
    title: str
    artist: str
    country: str | None
    chart_type: str | None
    count: int
    appearances: list[Appearance]
    """Oldest chart date first; one per chart (country, chart type, date): the best ranked version that day."""


class HealthResponse(HealthHead):
    token_mode: str
    """"token" (auth/v0, every chart) or "public" (no CHARTGW_SPOTIFY_TOKEN: regional-weekly/global top 50 only)."""
    countries: list[str]
    """The countries the crawl covers in this mode."""
    targets: list[TargetStatus]


class _TitleStreams(msgspec.Struct):
    title: str
    streams: int | None = None


_decode_title_streams = msgspec.json.Decoder(_TitleStreams).decode


# --- handlers -----------------------------------------------------------------------------------

def _crawled(settings: Settings) -> tuple[str, ...]:
    """The countries the crawl covers in the present mode (a bad setting raises SettingError: a 503)."""
    return settings.get(COUNTRIES_SETTING) if settings.get(TOKEN_SETTING) else (GLOBAL,)


async def _no_chart(reader: SnapshotReader, country: str, chart_type: str, settings: Settings) -> ApiError:
    crawled = _crawled(settings)
    if country not in crawled and not await reader.latest_per_target(f"*/{glob_escape(country)}"):
        return not_found(f"No data for country '{country}': it is not crawled (countries: {', '.join(crawled)})")
    hint = "" if settings.get(TOKEN_SETTING) else " (without CHARTGW_SPOTIFY_TOKEN only regional-weekly/global is crawled)"
    return not_found(f"No {chart_type} chart of '{country}' yet{hint}")


class ChartOfParams(TypedDict):
    country: str
    chart_type: str
    limit: int


async def _chart_response(call: Call[ChartOfParams], chart_date: str | None) -> ChartResponse:
    country, chart_type, limit = call.params["country"], call.params["chart_type"], call.params["limit"]
    reader = call.data.reader
    target = TARGET.make(chart_type, country)
    row = await (reader.latest(target) if chart_date is None else reader.snapshot_on(target, chart_date))
    if row is None:
        if chart_date is not None and await reader.dates(target):
            raise not_found(f"No {chart_type} chart of '{country}' for {chart_date}; see /streaming/dates "
                            "for the dates there are")
        raise await _no_chart(reader, country, chart_type, call.settings)
    records = await reader.records(row.id, limit)
    return ChartResponse(country, chart_type, row.chart_date, snapshot_meta(row, cadence_of(CHARTS, target), call.now),
                         len(records), records_array(records))


class LatestParams(TypedDict):
    country: str
    chart_type: str
    limit: int


async def latest(call: Call[LatestParams]) -> ChartResponse:
    return await _chart_response(call, None)


class ChartParams(TypedDict):
    country: str
    chart_type: str
    chart_date: str
    limit: int


async def chart(call: Call[ChartParams]) -> ChartResponse:
    return await _chart_response(call, call.params["chart_date"])


class DatesParams(TypedDict):
    country: str
    chart_type: str
    limit: int | None


async def dates(call: Call[DatesParams]) -> DatesResponse:
    country, chart_type = call.params["country"], call.params["chart_type"]
    found = await call.data.reader.dates(TARGET.make(chart_type, country))
    if not found:
        raise await _no_chart(call.data.reader, country, chart_type, call.settings)
    shown = found[:call.params["limit"]] if call.params["limit"] is not None else found
    return DatesResponse(country, chart_type, len(shown), shown)


async def countries(call: Call) -> CountriesResponse:
    reader = call.data.reader
    crawled = _crawled(call.settings)
    charts: dict[str, list[ChartTypeInfo]] = {}
    for row in await reader.latest_per_target("*/*"):
        chart_type, country = split_target(row.target)
        if chart_type not in CHART_TYPES or (country != GLOBAL and country not in COUNTRIES):
            continue
        charts.setdefault(country, []).append(ChartTypeInfo(chart_type, row.chart_date, cadence_of(CHARTS, row.target)))
    infos = [CountryInfo(code, country_name(code), code in crawled,
                         sorted(charts[code], key=lambda c: CHART_TYPES.index(c.chart_type)))
             for code in sorted(charts, key=lambda c: (c != GLOBAL, c))]
    return CountriesResponse(len(infos), infos)


def _pattern(chart_type: str | None, country: str | None) -> str:
    return TARGET.pattern(chart_type=chart_type, country=country)


def _one_snapshot_per_chart(rows: list[tuple[SnapshotRow, int, bytes]]) -> list[tuple[SnapshotRow, int, bytes]]:
    """Rows of the newest snapshot of each (target, chart date): a re-imported or revised chart counts once."""
    newest: dict[tuple[str, str], int] = {}
    for row, _, _ in rows:
        key = (row.target, row.chart_date)
        newest[key] = max(newest.get(key, 0), row.id)
    return [r for r in rows if r[0].id == newest[(r[0].target, r[0].chart_date)]]


class SearchParams(TypedDict):
    q: str
    country: str | None
    chart_type: str | None
    limit: int


async def search(call: Call[SearchParams]) -> SearchResponse:
    p = call.params
    q, country, chart_type, limit = p["q"], p["country"], p["chart_type"], p["limit"]
    reader, needle, pattern = call.data.reader, compact(q), _pattern(chart_type, country)
    fetch = limit
    while True:
        rows = await reader.search(needle, pattern, fetch)
        unique = _one_snapshot_per_chart(rows)
        if len(unique) >= limit or len(rows) < fetch:
            break
        fetch *= 4
    unique = unique[:limit]
    unique.sort(key=lambda r: (r[0].chart_date, r[0].id, -r[1]), reverse=True)
    hits = []
    for row, _, record in unique:
        hit_type, hit_country = split_target(row.target)
        hits.append(SearchHit(hit_country, hit_type, row.chart_date, stored_record(record)))
    return SearchResponse(q, country, chart_type, len(hits), hits)


class HistoryParams(TypedDict):
    artist: str
    title: str
    country: str | None
    chart_type: str | None


async def history(call: Call[HistoryParams]) -> HistoryResponse:
    """Every chart appearance of the song `title` names (`title_key`: featuring credits and version marks folded),
    the best ranked of its versions per chart. Entries are found by key prefix, so a key stored before version
    marks were folded ("sevenexplicitver") is found too, then kept only when its title names the song now."""
    p = call.params
    artist, title, country, chart_type = p["artist"], p["title"], p["country"], p["chart_type"]
    song = title_key(title)
    rows = await call.data.reader.history(glob_escape(song) + "*", compact(artist), _pattern(chart_type, country))
    best: dict[tuple[str, str], Appearance] = {}
    for row, rank, record in _one_snapshot_per_chart(rows):
        entry = _decode_title_streams(record)
        if title_key(entry.title) != song:
            continue
        seen_type, seen_country = split_target(row.target)
        seen = best.get((row.target, row.chart_date))
        if seen is None or rank < seen.rank:
            best[(row.target, row.chart_date)] = Appearance(seen_country, seen_type, row.chart_date, rank, entry.streams,
                                                            entry.title)
    appearances = list(best.values())  # rows come oldest chart date first, then by target
    if not appearances:
        raise not_found(f"'{title}' by '{artist}' is on no stored chart"
                        + (f" of {_pattern(chart_type, country).replace('*', 'any')}" if country or chart_type else ""))
    return HistoryResponse(title, artist, country, chart_type, len(appearances), appearances)


async def describe_health(call: Call, status: str, statuses: list[TargetStatus]) -> HealthResponse:
    return HealthResponse(status, NAME, "token" if call.settings.get(TOKEN_SETTING) else "public",
                          list(_crawled(call.settings)), statuses)


# --- the route table ----------------------------------------------------------------------------

@accepts(pattern=LETTER_OR_DIGIT)
def _title(value: str) -> str:
    if not title_key(value):
        raise ValueError("must contain at least one letter or digit")
    return value


# "(any case)" is wrong since codes are lower case (chartgw.core.countries.country_param), but this text is in the
# recorded /streaming/openapi.json (tests/golden), which stays byte for byte; the enum it refers to is right.
COUNTRY_HELP = "'global' or an ISO 3166-1 alpha-2 code (any case)"
COUNTRY = Param("country", default=GLOBAL, check=country_param, description=COUNTRY_HELP)
CHART_TYPE = Param("chart_type", kind="choice", choices=CHART_TYPES, default="regional-daily",
                   description="regional-daily, regional-weekly (dated the Thursday ending the week) or viral-daily")
LIMIT = Param("limit", kind="int", default=200, ge=1, le=200, description="Rows to return, from rank 1")
ANY_COUNTRY = Param("country", check=country_param, description=COUNTRY_HELP + "; all countries when absent")
ANY_CHART_TYPE = Param("chart_type", kind="choice", choices=CHART_TYPES, description="All chart types when absent")

ROUTES: tuple[Route, ...] = (
    health_route(NAME, expected_cadences,
                 "Freshness of every crawled chart, ok or degraded, and whether a token is configured",
                 describe=describe_health, response=HealthResponse, pattern=TARGET.pattern()),
    Route("/countries", countries, errors=(), rows="countries", response=CountriesResponse,
          summary="Countries with data, their chart types and each one's latest chart date"),
    Route("/latest", latest, (COUNTRY, CHART_TYPE, LIMIT), rows="entries", response=ChartResponse,
          summary="The newest chart of a country and chart type"),
    dated(NAME, Route("/chart", chart, (COUNTRY, CHART_TYPE, Param("chart_date", kind="date", required=True,
                                                                   description="Chart date, YYYY-MM-DD"), LIMIT),
                      rows="entries", response=ChartResponse, summary="The chart of a country and chart type on a date"),
          "chart_date"),
    Route("/dates", dates, (COUNTRY, CHART_TYPE, limit_param("Dates to return, newest first", 5000, None)),
          rows="dates", response=DatesResponse,
          summary="Chart dates stored for a country and chart type, newest first"),
    Route("/search", search, (
        Param("q", required=True, min_length=1, check=search_term,
              description="Words of a title or artist; case, accents and punctuation are ignored, any script"),
        ANY_COUNTRY, ANY_CHART_TYPE,
        Param("limit", kind="int", default=50, ge=1, le=500, description="Hits to return"),
    ), errors=(), rows="hits", response=SearchResponse, summary="Tracks whose title or artist contains q, in every stored chart"),
    Route("/history", history, (
        Param("artist", required=True, min_length=1, check=search_term,
              description="An artist credited on the track (contained, normalised)"),
        Param("title", required=True, min_length=1, check=_title,
              description="The track title, normalised: featuring credits and version marks ignored (\"Seven\" finds "
                          "\"Seven (feat. Latto) (Explicit Ver.)\"; see chartgw.text.title_key)"),
        ANY_COUNTRY, ANY_CHART_TYPE,
    ), rows="appearances", response=HistoryResponse,
       summary="Every chart appearance of a track: date, rank and streams, oldest first"),
)


GROUP = Group(
    name=NAME,
    title="Spotify country charts",
    description="Spotify Charts by country (global or ISO 3166-1 alpha-2): regional daily and weekly top 200 with "
                "streams, viral daily top 50, served from cached snapshots. " + " ".join(__doc__.split("\n\n")[1:])
                .replace("\n", " "),
    routes=ROUTES,
    charts=CHARTS,
    upstreams=(spotify.UPSTREAM,),
    targets=targets,
    crawl_options=(("chart_type", CHART_TYPES), ("country", (GLOBAL, *COUNTRIES))),
    schedules=(Schedule("20 */6 * * *", (), "UTC", "Spotify charts every 6 hours (daily charts appear once a day, "
                                                   "weekly ones on Fridays)"),),
    per_upstream=1,
    commands=(GroupCommand("import", "load a Spotify Charts CSV download (backfill)", args=(
        CommandArg("file", "the CSV file (charts.spotify.com or legacy spotifycharts.com layout)", positional=True),
        CommandArg("country", "'global' or an ISO alpha-2 code; default: from the file name"),
        CommandArg("chart_type", "chart type; default: from the file name", choices=CHART_TYPES),
        CommandArg("date", "chart date YYYY-MM-DD; default: from the file name"),
    ), run=import_csv),),
    settings=(COUNTRIES_SETTING, TOKEN_SETTING),
    entries=EntryMapping(market="target:1", ids={"streaming_track_id": "track_id"},
                         facts={"previous_rank": "previous_rank", "peak_rank": "peak_rank",
                                "periods_on_chart": "periods_on_chart"}),
)
