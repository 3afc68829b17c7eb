"""/dj-rankings' responses, handlers and route table."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, TypedDict

import msgspec

from chartgw.api.endpoints import Call, Route, not_found
from chartgw.api.params import Param, accepts, limit_param, search_param
from chartgw.api.responses import HealthHead, SnapshotMeta, health_route, records_array, snapshot_meta
from chartgw.core.countries import COUNTRIES, GLOBAL, country_param
from chartgw.core.text import compact
from chartgw.groups.dj_rankings.records import (
    DAY,
    LIST_CADENCE_SECONDS,
    NAME,
    PAST_POLL_CADENCE_SECONDS,
    Q4_LIST_CADENCE_SECONDS,
    REFRESH_SETTING,
    YEARS_SETTING,
    musicbrainz_user_agent,
)
from chartgw.groups.dj_rankings.storage import Dj, Index, RankingYear, YearList, load_index
from chartgw.store import SnapshotRow, parse_iso
from chartgw.upstreams.djmag import DjRankEntry
from chartgw.upstreams.musicbrainz import ReleaseGroup

# --- responses ------------------------------------------------------------------------------------------


class YearInfo(msgspec.Struct):
    year: int
    count: int
    chart_date: str
    fetched_at: str
    source: str
    path: str
    """This year's list endpoint."""


class YearsResponse(msgspec.Struct):
    count: int
    latest: int | None
    years: list[YearInfo]
    """Newest first."""


class ListResponse(msgspec.Struct):
    year: int
    snapshot: SnapshotMeta
    previous_year: int | None
    """The year before, when held (what `change` is measured against); null otherwise."""
    count: int
    entries: list[DjRankEntry]


class RankResponse(msgspec.Struct):
    year: int
    snapshot: SnapshotMeta
    entry: DjRankEntry
    dj: str
    """The DJ's endpoint."""


class MusicBrainzArtist(msgspec.Struct):
    mbid: str
    name: str
    type: str | None
    country: str | None
    disambiguation: str | None
    match: str
    """How the search matched it: "name" or "alias"."""
    searched_at: str


class Discography(msgspec.Struct):
    status: Literal["complete", "partial", "no-match", "pending", "not-searched"]
    """"complete"; "partial" (more release groups than fetched, the next crawl completes it); "no-match"
    (no MusicBrainz artist of that name); "pending" (matched, releases not fetched yet); "not-searched"."""
    reason: str | None
    """Why there is no match (no-match only)."""
    artist: MusicBrainzArtist | None
    count: int | None
    """All of the artist's release groups per MusicBrainz."""
    fetched_at: str | None
    source: str | None
    release_groups: list[ReleaseGroup]


class DjResponse(msgspec.Struct):
    slug: str
    name: str
    name_from_slug: bool
    country: str | None
    home: str | None
    """"From:" as the DJ's page prints it."""
    genre: str | None
    best_known_for: str | None
    image: str | None
    bio: str | None
    url: str | None
    """The DJ's page on djmag.com the profile was read from."""
    profile_year: int | None
    profile_fetched_at: str | None
    rankings: list[RankingYear]
    """Every held year the DJ is on, newest first."""
    discography: Discography


class SearchHit(msgspec.Struct):
    slug: str
    name: str
    country: str | None
    genre: str | None
    image: str | None
    latest_year: int
    latest_rank: int
    best_year: int
    best_rank: int
    years_on_list: int
    dj: str


class SearchResponse(msgspec.Struct):
    q: str
    count: int
    djs: list[SearchHit]


class ListHealth(msgspec.Struct):
    year: int | None
    fetched_at: str | None
    age_seconds: int | None
    cadence_seconds: int
    stale: bool


class DetailsHealth(msgspec.Struct):
    djs: int
    """DJs of the newest CHARTGW_DJ_RANKINGS_YEARS lists held."""
    pages: int
    pages_fresh: int
    searched: int
    matched: int
    discographies: int
    discographies_fresh: int
    """Complete and at most twice the refresh age old."""
    refresh_days: int


class HealthResponse(HealthHead):
    years: list[int]
    latest_list: ListHealth
    details: DetailsHealth
    musicbrainz_user_agent: str


# --- handlers -------------------------------------------------------------------------------------------


def list_cadence(now: datetime) -> int:
    return Q4_LIST_CADENCE_SECONDS if now.month >= 10 else LIST_CADENCE_SECONDS


def _meta(index: Index, year: int, now: datetime) -> SnapshotMeta:
    latest = next(iter(index.years))
    cadence = list_cadence(now) if year == latest else PAST_POLL_CADENCE_SECONDS
    return snapshot_meta(index.years[year].row, cadence, now)


def _age(row: SnapshotRow | None, now: datetime) -> float | None:
    return (now - parse_iso(row.fetched_at)).total_seconds() if row is not None else None


async def health(call: Call) -> HealthResponse:
    index = await load_index(call.data.reader)
    now = call.now
    cadence = list_cadence(now)
    latest = next(iter(index.years.values()), None)
    age = _age(latest.row if latest else None, now)
    list_stale = age is None or age > 2 * cadence
    kept = {e.slug for y in list(index.years.values())[:call.settings.get(YEARS_SETTING)] for e in y.entries}
    refresh = call.settings.get(REFRESH_SETTING) * DAY
    djs = [index.djs[slug] for slug in kept]
    fresh = [d for d in djs if (a := _age(d.page_row, now)) is not None and a <= 2 * refresh]
    searched = [d for d in djs if d.search is not None]
    matched = [d for d in searched if d.artist is not None]
    with_discography = [d for d in matched if d.discography is not None]
    fresh_discography = [d for d in with_discography if d.discography and d.discography.complete
                         and (a := _age(d.discography_row, now)) is not None and a <= 2 * refresh]
    ok = (not list_stale and len(fresh) == len(djs) and len(searched) == len(djs)
          and len(fresh_discography) == len(matched))
    return HealthResponse(
        "ok" if ok else "degraded", NAME, list(index.years),
        ListHealth(latest.year if latest else None, latest.row.fetched_at if latest else None,
                   int(age) if age is not None else None, cadence, list_stale),
        DetailsHealth(len(djs), sum(d.page is not None for d in djs), len(fresh), len(searched), len(matched),
                      len(with_discography), len(fresh_discography), call.settings.get(REFRESH_SETTING)),
        musicbrainz_user_agent(call.settings))


async def years_list(call: Call) -> YearsResponse:
    index = await load_index(call.data.reader)
    infos = [YearInfo(y.year, len(y.entries), y.row.chart_date, y.row.fetched_at, y.row.source, f"/{NAME}/{y.year}")
             for y in index.years.values()]
    return YearsResponse(len(infos), infos[0].year if infos else None, infos)


def _year_or_404(index: Index, year: int) -> YearList:
    found = index.years.get(year)
    if found is None:
        held = ", ".join(str(y) for y in index.years) or "none yet"
        raise not_found(f"No Top 100 of {year} is held (held: {held}); see /{NAME}/years")
    return found


_CODE_OF_NAME = {name: code for code, name in COUNTRIES.items()}
"""Entries name their DJ's country by its name in `COUNTRIES` (`djmag.country_of`); the filter takes its code."""


class ListParams(TypedDict):
    country: str | None
    genre: str | None
    limit: int


def _list_response(call: Call[ListParams], index: Index, year: int) -> ListResponse:
    """A held year's list, narrowed to the `country` and `genre` asked (ranks stay the poll's), then `limit`ed."""
    entries = _year_or_404(index, year).entries
    country, genre = call.params["country"], call.params["genre"]
    if country is not None and country != GLOBAL:
        entries = [e for e in entries if e.country is not None and _CODE_OF_NAME.get(e.country) == country]
    if genre is not None:
        needle = compact(genre)
        entries = [e for e in entries if e.genre is not None and needle in compact(e.genre)]
    entries = entries[:call.params["limit"]]
    return ListResponse(year, _meta(index, year, call.now), year - 1 if year - 1 in index.years else None, len(entries),
                        entries)


class YearListParams(TypedDict):
    year: int
    limit: int
    country: str | None
    genre: str | None


async def year_list(call: Call[YearListParams]) -> ListResponse:
    return _list_response(call, await load_index(call.data.reader), call.params["year"])


class LatestListParams(TypedDict):
    limit: int
    country: str | None
    genre: str | None


async def latest_list(call: Call[LatestListParams]) -> ListResponse:
    index = await load_index(call.data.reader)
    if not index.years:
        raise not_found(f"No Top 100 is held yet; see /{NAME}/health")
    return _list_response(call, index, next(iter(index.years)))


class YearRankParams(TypedDict):
    year: int
    rank: int


async def year_rank(call: Call[YearRankParams]) -> RankResponse:
    index = await load_index(call.data.reader)
    year, rank = call.params["year"], call.params["rank"]
    found = _year_or_404(index, year)
    if rank > len(found.entries):
        raise not_found(f"The {year} list held has {len(found.entries)} DJs; no rank {rank} (see /{NAME}/{year})")
    entry = found.entries[rank - 1]
    return RankResponse(year, _meta(index, year, call.now), entry, f"/{NAME}/djs/{entry.slug}")


def _discography_status(dj: Dj) -> Discography:
    artist = None
    if dj.artist is not None and dj.search_row is not None and dj.search is not None:
        a = dj.artist
        artist = MusicBrainzArtist(a.mbid, a.name, a.type, a.country, a.disambiguation, dj.search.reason,
                                   dj.search_row.fetched_at)
    if dj.search is None:
        return Discography("not-searched", None, None, None, None, None, [])
    if dj.artist is None:
        return Discography("no-match", dj.search.reason, None, None, None, None, [])
    meta, row = dj.discography, dj.discography_row
    if meta is None or row is None or meta.mbid != dj.artist.mbid:
        return Discography("pending", None, artist, None, None, None, [])
    return Discography("complete" if meta.complete else "partial", None, artist, meta.count, row.fetched_at, row.source,
                       [])


class DjDetailsParams(TypedDict):
    slug: str


async def dj_details(call: Call[DjDetailsParams]) -> DjResponse:
    reader = call.data.reader
    index = await load_index(reader)
    slug = call.params["slug"]
    dj = index.djs.get(slug)
    if dj is None:
        raise not_found(f"No DJ {slug!r} is on any list held; find one with /{NAME}/search?q=")
    discography = _discography_status(dj)
    if discography.status in ("complete", "partial") and dj.discography_row is not None:
        records = await reader.records(dj.discography_row.id, 100_000)
        discography.release_groups = records_array(records)
    page = dj.page
    latest = dj.rankings[0] if dj.rankings else None
    return DjResponse(
        dj.slug, dj.name, dj.name_from_slug, page.country if page else None, page.home if page else None,
        page.genre if page else None, page.best_known_for if page else None, page.image if page else None,
        page.bio if page else None, page.url if page else (latest.url if latest else None),
        page.year if page else None, dj.page_row.fetched_at if dj.page_row else None, dj.rankings, discography)


class SearchParams(TypedDict):
    q: str
    limit: int


async def search(call: Call[SearchParams]) -> SearchResponse:
    index = await load_index(call.data.reader)
    q = call.params["q"]
    needle = compact(q)
    found = [dj for dj in index.djs.values() if any(needle in key for key in dj.keys)]

    def order(dj: Dj) -> tuple[bool, bool, int, int]:
        name = compact(dj.name)
        return name != needle, not name.startswith(needle), -dj.rankings[0].year, dj.rankings[0].rank

    hits = []
    for dj in sorted(found, key=order)[:call.params["limit"]]:
        best = min(dj.rankings, key=lambda r: (r.rank, -r.year))
        page = dj.page
        hits.append(SearchHit(dj.slug, dj.name, page.country if page else None, page.genre if page else None,
                              page.image if page else None, dj.rankings[0].year, dj.rankings[0].rank, best.year,
                              best.rank, len(dj.rankings), f"/{NAME}/djs/{dj.slug}"))
    return SearchResponse(q, len(hits), hits)


@accepts(pattern="^[A-Za-z0-9-]+$")
def slug_value(value: str) -> str:
    """A DJ Mag slug: lowercase letters, digits and "-" (any case accepted)."""
    slug = value.lower()
    if not slug or not all(ch.isascii() and (ch.isalnum() or ch == "-") for ch in slug):
        raise ValueError("must be a DJ slug of letters a-z, digits 0-9 and '-', as in /dj-rankings/{year}")
    return slug


# --- the route table ------------------------------------------------------------------------------------

YEAR = Param("year", "path", kind="int", description="Poll year, as listed by /dj-rankings/years")
LIST_FILTERS = (
    limit_param("DJs to return, from rank 1", 100, 100),
    Param("country", check=country_param,
          description="Only DJs from this country: an ISO 3166-1 alpha-2 code in lower case (`nl` for the entries' "
                      "\"Netherlands\"); 'global' or absent: every country"),
    search_param("genre", required=False,
                 description="Only DJs whose style contains this (\"techno\" finds Techno, Melodic techno, Hard techno)"),
)


ROUTES: tuple[Route, ...] = (
    health_route(NAME, None, "The latest list's age and how many DJs have a fresh page and discography",
                 health=health, response=HealthResponse),
    Route("/years", years_list, errors=(), rows="years", response=YearsResponse, summary="The poll years held, newest first"),
    Route("/search", search, (
        search_param(description="Text in a DJ's name"),
        Param("limit", kind="int", default=20, ge=1, le=100, description="DJs to return"),
    ), errors=(), rows="djs", response=SearchResponse, summary="DJs of every held year by name, exact and prefix matches first"),
    Route("/djs/{slug}", dj_details, (
        Param("slug", "path", check=slug_value, description="DJ Mag's slug of the DJ, as in the lists' `slug`"),
    ), response=DjResponse, summary="One DJ: profile, every held year's rank and the MusicBrainz discography"),
    Route("/latest", latest_list, LIST_FILTERS, rows="entries", response=ListResponse,
          summary="The newest poll year's Top 100, as /{year} gives it"),
    Route("/{year}", year_list, (YEAR, *LIST_FILTERS), rows="entries", response=ListResponse,
          summary="One poll year's Top 100 with country, genre, image and change, optionally by country and genre"),
    Route("/{year}/{rank}", year_rank, (
        YEAR, Param("rank", "path", kind="int", ge=1, le=100, description="Rank, 1-100"),
    ), response=RankResponse, summary="One rank of one poll year"),
)
