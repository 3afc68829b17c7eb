"""/recognition: Shazam's charts (Top 200, genre, viral, city Top 50), discovered from its catalogue.

Every day at 06:17 KST the crawl first reads Shazam's chart catalogue and stores it as the
"catalogue" snapshot (one entry per normalised chart path), then fetches the CSV of every chart
the catalogue lists, four at a time with the runner's delay between requests. A chart exists here
only when the catalogue listed it; a failed discovery leaves the previous catalogue in use, and a
failed chart leaves its previous snapshot serving. After each chart's CSV the crawl asks for the
same chart's track JSON, which fills the rows' url, artwork, store link and Shazam track id; the
enrichment is best effort: when it fails the chart is still stored, with those fields null. Chart
responses should be cached by clients for 5 to 30 minutes; they say so with Cache-Control
max-age=600.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, TypedDict

import msgspec

from chartgw.api.catalog import CADENCES, Chart
from chartgw.api.endpoints import Call, Route, not_found
from chartgw.api.group import EntryMapping, Group, Schedule
from chartgw.api.params import InvalidParams, Param, Where, accepts, literal_error, search_param
from chartgw.api.responses import (
    HealthHead,
    SnapshotMeta,
    age_seconds,
    health_route,
    records_array,
    snapshot_meta,
    snapshots_route,
    stored_record,
)
from chartgw.core.countries import code_of_slug
from chartgw.core.settings import Settings
from chartgw.core.text import compact
from chartgw.crawl.runner import KST, CrawlContext, CrawlError, CrawlTarget, Fetched
from chartgw.store import (
    FetchLogRow,
    NewSnapshot,
    SnapshotReader,
    SnapshotRow,
    SnapshotWriter,
    StoredEntry,
    group_db_path,
    read_latest_records,
)
from chartgw.store.records import stored_entry
from chartgw.store.targets import TargetKey
from chartgw.upstreams import UpstreamFormatError, shazam
from chartgw.upstreams.shazam import CHART_KINDS, CatalogueEntry, ChartCsv, RecognitionEntry, TrackList

NAME = "recognition"
CATALOGUE = "catalogue"
TRACK_LISTS = "track-lists"
"""Discovery's second snapshot: where each chart's track JSON is (not served; the crawl reads it)."""
ENRICHMENT = "#tracks"
"""A chart's failed enrichment is logged under its target plus this ("top-200/brazil#tracks")."""
CADENCE_SECONDS = CADENCES["daily"]
MAX_AGE = 600
"""Cache-Control max-age of the data routes: 10 minutes, inside the spec's 5 to 30."""
_SLUG_CHARS = re.compile(r"[a-z0-9-]+")
_decode_catalogue = msgspec.json.Decoder(CatalogueEntry).decode
_decode_track_list = msgspec.json.Decoder(TrackList).decode


# --- crawl ----------------------------------------------------------------------------------------------


def stored(entry: RecognitionEntry) -> StoredEntry:
    return stored_entry(entry, rank=entry.rank, title=entry.title, artists=entry.artists or [entry.artist],
                        item_id=entry.shazam_track_id)


def _build_catalogue(fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    """The catalogue as a snapshot (rank = position, title = normalised path, artist = chart kind), and
    beside it the charts' track JSON locations (title = path, artist = list id)."""
    found = fetched[0]
    paths = shazam.parse_locations(found.body)
    entries = [stored_entry(e, rank=i, title=e.path, artists=[e.kind], item_id=e.path)
               for i, e in enumerate(shazam.normalise(paths), start=1)]
    lists = [stored_entry(t, rank=i, title=t.path, artists=[t.list_id], item_id=t.list_id)
             for i, t in enumerate(shazam.track_lists(paths), start=1)]
    before = len(ctx.store.latest_records(CATALOGUE))
    if before and len(entries) < before * (1 - MAX_CATALOGUE_SHRINK):
        raise CrawlError(f"{CATALOGUE}: the upstream lists {len(entries)} charts, {before} before; a drop of more "
                         f"than {MAX_CATALOGUE_SHRINK:.0%} is refused and the last catalogue stays in use")
    day = ctx.now.astimezone(KST).date().isoformat()
    return [NewSnapshot(CATALOGUE, day, None, ctx.now, found.url, entries, raw=found.body, raw_type="application/json"),
            NewSnapshot(TRACK_LISTS, day, None, ctx.now, found.url, lists)]


def _enrich(target: str, chart: ChartCsv, tracks: Fetched, ctx: CrawlContext) -> None:
    """Fill the CSV rows' best-effort fields from the chart's track JSON. A failed fetch, a body that is
    not a tracks JSON or one that names none of the chart's tracks costs only the enrichment: the chart
    is stored with those fields null (a stale chart would be worse than one without links), and the
    fetch log says why under "<target>#tracks"."""
    error = tracks.error
    if error is None:
        try:
            listed = shazam.parse_tracks_json(tracks.body, chart.chart_date)
            if not shazam.enrich(chart.entries, listed):
                error = f"none of its {len(listed)} tracks is one of the chart's {len(chart.entries)} rows"
        except UpstreamFormatError as exc:
            error = str(exc)
    if error is not None:
        ctx.store.log_failure(FetchLogRow(target + ENRICHMENT, ctx.now, 0, "failed", tracks.status or None, None,
                                          tracks.url, f"enrichment failed, chart stored without it: {error}"))


def _build_chart(target: str, fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    """The chart from its CSV (fetched[0]), enriched from its track JSON (fetched[1]) when it has one."""
    found = fetched[0]
    chart = shazam.parse_csv(found.body)
    for tracks in fetched[1:]:
        _enrich(target, chart, tracks, ctx)
    return [NewSnapshot(target, chart.chart_date, None, ctx.now, found.url, [stored(e) for e in chart.entries],
                        raw=found.body, raw_type="text/csv")]


def discovery(settings: Settings) -> list[CrawlTarget]:
    return [CrawlTarget(CATALOGUE, (shazam.locations_request(),), _build_catalogue, None)]


MIN_ROWS = {"top-200": 100, "genre": 20, "viral": 20, "top-50": 20}
"""The fewest rows a chart of each kind must have: real charts can be shorter than their name says (no
exact count is imposed), but a chart cut to a few rows is an upstream gone wrong."""
MAX_CATALOGUE_SHRINK = 0.2
"""A discovered catalogue with more than this share fewer charts than the stored one is refused."""


def chart_target(entry: CatalogueEntry, track_list: TrackList | None = None) -> CrawlTarget:
    """A chart's crawl: its first upstream path's CSV, at least its kind's MIN_ROWS, ranks 1..n; then, best
    effort, its track JSON when discovery found where it is."""
    return CrawlTarget(entry.path, (shazam.csv_request(entry.upstream_paths[0]),),
                       partial(_build_chart, entry.path), None, min_rows=MIN_ROWS[entry.kind],
                       optional=(shazam.tracks_request(track_list),) if track_list else ())


def stored_catalogue(settings: Settings) -> tuple[list[CatalogueEntry], dict[str, TrackList]]:
    """The latest catalogue and its charts' track JSON locations by path."""
    with SnapshotWriter(group_db_path(NAME, settings)) as store:
        lists = (_decode_track_list(record) for record in store.latest_records(TRACK_LISTS))
        return ([_decode_catalogue(record) for record in store.latest_records(CATALOGUE)],
                {t.path: t for t in lists})


def targets(selection: dict[str, str | None], now: datetime, settings: Settings) -> list[CrawlTarget]:
    """One target per chart of the latest stored catalogue (of `chart_kind` when selected)."""
    catalogue, track_lists = stored_catalogue(settings)
    if not catalogue:
        raise CrawlError(f"{NAME}: no chart catalogue stored yet; discovery ({shazam.LOCATIONS_PATH}) has not "
                         "succeeded once")
    kind = selection.get("chart_kind")
    return [chart_target(e, track_lists.get(e.path)) for e in catalogue if kind in (None, e.kind)]


# --- the catalogue as the server reads it ---------------------------------------------------------------


@dataclass(frozen=True)
class Catalogue:
    row: SnapshotRow
    records: list[bytes]
    entries: list[CatalogueEntry]
    by_path: dict[str, CatalogueEntry]


_catalogues: dict[tuple[str, int], Catalogue] = {}


async def load_catalogue(reader: SnapshotReader) -> Catalogue | None:
    """The latest catalogue snapshot, decoded once per snapshot (kept per file and snapshot id)."""
    row = await reader.latest(CATALOGUE)
    if row is None:
        return None
    key = (str(reader.path), row.id)
    cached = _catalogues.get(key)
    if cached is None:
        records = await reader.records(row.id, 1_000_000)
        entries = [_decode_catalogue(r) for r in records]
        cached = Catalogue(row, records, entries, {e.path: e for e in entries})
        if len(_catalogues) > 16:
            _catalogues.clear()
        _catalogues[key] = cached
    return cached


async def catalogue_or_404(reader: SnapshotReader) -> Catalogue:
    catalogue = await load_catalogue(reader)
    if catalogue is None:
        raise not_found("No chart catalogue has been discovered yet")
    return catalogue


_TARGET_FIELDS = {"genre": ("market", "genre"), "top-50": ("market", "city")}
TARGETS: dict[str, TargetKey] = {kind: TargetKey(_TARGET_FIELDS.get(kind, ("market",)), kind) for kind in CHART_KINDS}
"""Each chart kind's target shape: "top-200/brazil", "genre/france/pop", "viral/world", "top-50/australia/sydney"."""
_EXTRA = {"genre": ("genre", "&genre={genre}"), "top-50": ("city", "&city={city}")}
CHARTS = tuple(Chart(kind, TARGETS[kind], "daily", market="market",
                     latest=f"/recognition/{kind}/{{market}}" + (f"/{{{_EXTRA[kind][0]}}}" if kind in _EXTRA else "")
                            + "/latest",
                     history=f"/recognition/snapshots?chart_kind={kind}&market={{market}}" + _EXTRA.get(kind, ("", ""))[1])
               for kind in CHART_KINDS)
"""Every discovered chart, by kind (the catalogue lists which markets, genres and cities there are)."""


def target_parts(target: str) -> tuple[str, str, str | None, str | None]:
    """(chart_kind, market, genre, city) of a chart target."""
    kind = target.partition("/")[0]
    parts = TARGETS[kind].parse(target) or {}
    return kind, parts.get("market", ""), parts.get("genre"), parts.get("city")


def patterns(kind: str | None, market: str | None, genre: str | None = None, city: str | None = None) -> list[str]:
    """GLOB patterns over chart targets, one per chart kind in scope (the catalogue is never included)."""
    given = {"market": market, "genre": genre, "city": city}
    return [TARGETS[k].pattern(**{f: given[f] for f in TARGETS[k].fields}) for k in ((kind,) if kind else CHART_KINDS)]


# --- responses ------------------------------------------------------------------------------------------


class DiscoveryCounts(msgspec.Struct):
    paths: int
    """Chart paths the catalogue listed, before normalisation."""
    targets: int
    """Crawl targets after normalisation (duplicates merged)."""
    top_200: int
    genre: int
    viral: int
    top_50: int


class ChartsResponse(msgspec.Struct):
    snapshot: SnapshotMeta
    """The catalogue snapshot: when discovery last succeeded and where it read from."""
    counts: DiscoveryCounts
    count: int
    charts: list[CatalogueEntry]


class ChartResponse(msgspec.Struct, omit_defaults=True):
    chart: CatalogueEntry
    snapshot: SnapshotMeta
    count: int
    entries: list[RecognitionEntry]
    raw: str | None = None
    """The upstream CSV exactly as received; present only with include_raw=true (null if not kept)."""


class SnapshotItem(msgspec.Struct):
    chart_kind: str
    market: str
    genre: str | None
    city: str | None
    snapshot: SnapshotMeta


class SnapshotsResponse(msgspec.Struct):
    count: int
    snapshots: list[SnapshotItem]


class SearchHit(msgspec.Struct):
    chart_kind: str
    market: str
    genre: str | None
    city: str | None
    chart_date: str
    snapshot_id: int
    entry: RecognitionEntry


class SearchResponse(msgspec.Struct):
    q: str
    count: int
    hits: list[SearchHit]
    """Matches in the latest snapshot of each chart in scope, best rank first."""


class DiscoveryStatus(DiscoveryCounts):
    discovered_at: str | None
    """When the catalogue in use was fetched; null before the first discovery."""
    stale: bool


class Coverage(msgspec.Struct):
    targets: int
    with_snapshot: int
    fresh: int
    """Targets whose latest snapshot is at most twice the daily cadence old."""
    stale: int
    """Targets with no snapshot or an older one."""
    latest_chart_date: str | None


class HealthResponse(HealthHead):
    # "ok" when a catalogue exists and every chart in it is fresh: the charts to expect are the discovered
    # catalogue's, so this group's health reads the catalogue first rather than using `health_route`.
    cadence_seconds: int
    discovery: DiscoveryStatus
    coverage: Coverage


# --- handlers -------------------------------------------------------------------------------------------


def counts(entries: list[CatalogueEntry]) -> DiscoveryCounts:
    kinds = [e.kind for e in entries]
    return DiscoveryCounts(sum(len(e.upstream_paths) for e in entries), len(entries), kinds.count("top-200"),
                           kinds.count("genre"), kinds.count("viral"), kinds.count("top-50"))


async def health(call: Call) -> HealthResponse:
    reader = call.data.reader
    catalogue = await load_catalogue(reader)
    entries = catalogue.entries if catalogue else []
    found = counts(entries)
    discovered_at = catalogue.row.fetched_at if catalogue else None
    stale_discovery = catalogue is None or age_seconds(catalogue.row, call.now) > 2 * CADENCE_SECONDS
    latest = {row.target: row for row in await reader.latest_per_target()}
    rows = [latest[e.path] for e in entries if e.path in latest]
    fresh = sum(age_seconds(row, call.now) <= 2 * CADENCE_SECONDS for row in rows)
    coverage = Coverage(len(entries), len(rows), fresh, len(entries) - fresh,
                        max((row.chart_date for row in rows), default=None))
    status = "ok" if entries and fresh == len(entries) and not stale_discovery else "degraded"
    return HealthResponse(status, NAME, CADENCE_SECONDS,
                          DiscoveryStatus(**msgspec.structs.asdict(found), discovered_at=discovered_at,
                                          stale=stale_discovery), coverage)


async def charts(call: Call) -> ChartsResponse:
    catalogue = await catalogue_or_404(call.data.reader)
    return ChartsResponse(snapshot_meta(catalogue.row, CADENCE_SECONDS, call.now), counts(catalogue.entries),
                          len(catalogue.records), records_array(catalogue.records))


class RawParams(TypedDict):
    limit: int
    include_raw: bool


async def _latest(call: Call[RawParams], path: str) -> ChartResponse:
    reader = call.data.reader
    catalogue = await catalogue_or_404(reader)
    entry = catalogue.by_path.get(path)
    if entry is None:
        raise not_found(f"No such chart was discovered: {path}")
    row = await reader.latest(path)
    if row is None:
        raise not_found(f"Chart {path} was discovered but has no snapshot yet")
    records = await reader.records(row.id, call.params["limit"])
    response = ChartResponse(entry, snapshot_meta(row, CADENCE_SECONDS, call.now), len(records),
                             records_array(records))
    if call.params["include_raw"]:
        raw = await reader.raw(row.id)
        response.raw = raw[1].decode("utf-8", errors="replace") if raw else None
    return response


class Top200Params(TypedDict):
    market: str
    limit: int
    include_raw: bool


async def top_200(call: Call[Top200Params]) -> ChartResponse:
    return await _latest(call, f"top-200/{call.params['market']}")


class GenreChartParams(TypedDict):
    market: str
    genre: str
    limit: int
    include_raw: bool


async def genre_chart(call: Call[GenreChartParams]) -> ChartResponse:
    return await _latest(call, f"genre/{call.params['market']}/{call.params['genre']}")


class ViralParams(TypedDict):
    market: str
    limit: int
    include_raw: bool


async def viral(call: Call[ViralParams]) -> ChartResponse:
    return await _latest(call, f"viral/{call.params['market']}")


class Top50Params(TypedDict):
    market: str
    city: str
    limit: int
    include_raw: bool


async def top_50(call: Call[Top50Params]) -> ChartResponse:
    return await _latest(call, f"top-50/{call.params['market']}/{call.params['city']}")


def _scope(params: Mapping[str, Any]) -> list[str]:
    """The GLOB patterns a /snapshots or /search request covers; genre implies genre charts, city Top 50s."""
    kind, genre, city = params.get("chart_kind"), params.get("genre"), params.get("city")
    errors = []
    if genre is not None and kind not in (None, "genre"):
        errors.append(literal_error(["query", "chart_kind"], kind, ("genre",)))
    if city is not None and kind not in (None, "top-50"):
        errors.append(literal_error(["query", "chart_kind"], kind, ("top-50",)))
    if genre is not None and city is not None:
        errors.append({"type": "value_error", "loc": ["query", "city"],
                       "msg": "Value error, genre and city select different chart kinds; give one", "input": city,
                       "ctx": {"error": {}}})
    if errors:
        raise InvalidParams(errors)
    kind = kind or ("genre" if genre else "top-50" if city else None)
    return patterns(kind, params.get("market"), genre, city)


def _item(row: SnapshotRow, now: datetime) -> SnapshotItem:
    kind, market, genre, city = target_parts(row.target)
    return SnapshotItem(kind, market, genre, city, snapshot_meta(row, CADENCE_SECONDS, now))


async def listed(call: Call) -> list[str]:
    return _scope(call.params)


def listing(call: Call, rows: list[SnapshotRow]) -> SnapshotsResponse:
    return SnapshotsResponse(len(rows), [_item(r, call.now) for r in rows])


class SearchParams(TypedDict):
    q: str
    chart_kind: str | None
    market: str | None
    limit: int


async def search(call: Call[SearchParams]) -> SearchResponse:
    q, limit = call.params["q"], call.params["limit"]
    needle = compact(q)
    found = await call.data.reader.search(needle, _scope(call.params), limit, latest_only=True) if needle else []
    hits = []
    for row, _, record in found:
        kind, market, genre, city = target_parts(row.target)
        hits.append(SearchHit(kind, market, genre, city, row.chart_date, row.id, stored_record(record)))
    return SearchResponse(q, len(hits), hits)


# --- the route table ------------------------------------------------------------------------------------


@accepts(pattern=f"^{_SLUG_CHARS.pattern}$")
def slug_value(value: str) -> str:
    """A path or filter slug: only lowercase letters, digits and "-" (what every normalised path uses)."""
    if not _SLUG_CHARS.fullmatch(value):
        raise ValueError("must be a slug of lowercase letters a-z, digits 0-9 and '-'")
    return value


def discovered(field: str, settings: Settings | None) -> list[str] | None:
    """Every value of `field` (market, genre, city) the stored catalogue holds, for the OpenAPI enums (the
    document is rebuilt when the data changes); None before the first discovery or outside an app."""
    if settings is None:
        return None
    records = read_latest_records(group_db_path(NAME, settings), CATALOGUE)
    if not records:
        return None
    entries = [_decode_catalogue(record) for record in records]
    return sorted({value for e in entries if (value := getattr(e, field))})


def _checked_as(field: str) -> Callable[[str], str]:
    """The slug rule for a catalogue field, declaring the catalogue's values as its enum."""

    @accepts(pattern=f"^{_SLUG_CHARS.pattern}$", enum=partial(discovered, field))
    def check(value: str) -> str:
        return slug_value(value)

    return check


SLUG_CHECKS = {field: _checked_as(field) for field in ("market", "genre", "city")}


def _slug_param(name: str, where: Where, description: str) -> Param:
    return Param(name, where, check=SLUG_CHECKS[name], description=description)


MARKET = _slug_param("market", "path", "Country slug as in /recognition/charts (\"brazil\"), or \"world\"")
LIMIT = Param("limit", kind="int", default=200, ge=1, le=200, description="Rows to return, from rank 1")
INCLUDE_RAW = Param("include_raw", kind="bool", default=False,
                    description="Add `raw`: the upstream CSV this snapshot was parsed from")
CHART_KIND = Param("chart_kind", kind="choice", choices=CHART_KINDS, description="Only charts of this kind")
LIST_LIMIT = Param("limit", kind="int", default=50, ge=1, le=500, description="Items to return")

ROUTES: tuple[Route, ...] = (
    health_route(NAME, None, "Discovery counts and how many discovered charts have a fresh snapshot",
                 health=health, response=HealthResponse, max_age=300),
    Route("/charts", charts, rows="charts", response=ChartsResponse, max_age=MAX_AGE, cache_ttl=60,
          summary="The discovered chart catalogue: Top 200, genre, viral and city Top 50 charts"),
    Route("/top-200/{market}/latest", top_200, (MARKET, LIMIT, INCLUDE_RAW), rows="entries", response=ChartResponse,
          max_age=MAX_AGE, cache_ttl=60, summary="Latest Top 200 of a market"),
    Route("/genre/{market}/{genre}/latest", genre_chart, (
        MARKET, _slug_param("genre", "path", "Genre slug as in /recognition/charts (\"hip-hop-rap\")"),
        LIMIT, INCLUDE_RAW,
    ), rows="entries", response=ChartResponse, max_age=MAX_AGE, cache_ttl=60, summary="Latest genre chart of a market"),
    Route("/viral/{market}/latest", viral, (MARKET, LIMIT, INCLUDE_RAW), rows="entries", response=ChartResponse,
          max_age=MAX_AGE, cache_ttl=60, summary="Latest viral chart of a market"),
    Route("/top-50/{market}/{city}/latest", top_50, (
        MARKET, _slug_param("city", "path", "City slug as in /recognition/charts (\"sao-paulo\")"),
        LIMIT, INCLUDE_RAW,
    ), rows="entries", response=ChartResponse, max_age=MAX_AGE, cache_ttl=60,
        summary="Latest city Top 50; only cities the catalogue lists"),
    snapshots_route(lambda _: CADENCE_SECONDS, "Stored chart snapshots, newest first", select=listed, params=(
        CHART_KIND,
        _slug_param("market", "query", "Only this market"),
        _slug_param("genre", "query", "Only this genre (genre charts)"),
        _slug_param("city", "query", "Only this city (city Top 50s)"),
        LIST_LIMIT,
    ), listing=listing, response=SnapshotsResponse, max_age=MAX_AGE, cache_ttl=60),
    Route("/search", search, (
        search_param(description="Text in an artist or a title"),
        CHART_KIND,
        _slug_param("market", "query", "Only this market"),
        LIST_LIMIT,
    ), errors=(), rows="hits", response=SearchResponse, max_age=MAX_AGE, cache_ttl=60,
        summary="Artist or title search over the latest snapshot of every chart"),
)

def market_code(target: str) -> str:
    """The ISO code (or "global") of the market a chart target names in words ("south-korea", "world")."""
    market = target_parts(target)[1]
    return code_of_slug(market) or market


GROUP = Group(
    name=NAME,
    title="Recognition-app charts",
    description="Shazam's Top 200, genre, viral and city Top 50 charts, served from cached daily snapshots. "
                + " ".join(__doc__.split("\n\n")[1:]).replace("\n", " "),
    routes=ROUTES,
    charts=CHARTS,
    upstreams=(shazam.UPSTREAM,),
    targets=targets,
    crawl_options=(("chart_kind", CHART_KINDS),),
    schedules=(Schedule("17 6 * * *", (), "Asia/Seoul",
                        "Shazam daily at 06:17 KST: the catalogue, then every discovered chart"),),
    discovery=discovery,
    per_upstream=4,
    entries=EntryMapping(market=market_code, ids={"recognition_track_id": "shazam_track_id"},
                         skip_targets=(CATALOGUE, TRACK_LISTS)),
)
