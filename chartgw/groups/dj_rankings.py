"""/dj-rankings: DJ Mag's yearly Top 100 DJs, each DJ's profile from DJ Mag and discography from MusicBrainz.

What is stored, one snapshot each (the endpoints read an index of them, built once per commit):
- `list/{year}`: a poll year's Top 100 from the list page (JSON-LD item list, else the older markup),
  changes against the year before as the page states them or derived from the year before held;
- `dj/{slug}`: the DJ's own poll page (the newest year the DJ is on): country, genre, image, bio;
- `musicbrainz/{slug}`: the MusicBrainz artist search for the DJ's real name and its verdict;
- `discography/{slug}`: the matched artist's release groups, every browse page of 100;
- `plan`: what a crawl found due (the crawl's discovery pass, read by its targets).

A name rebuilt from a slug ("Dimitri Vegas Mike") never replaces a real one ("Dimitri Vegas & Like
Mike"): the real name from another year's list or the DJ's page is kept. `chartgw crawl dj-rankings
--part list` fetches the latest poll; `chartgw backfill dj-rankings --since YEAR` fills past polls.
`--part details` fetches only what is due: a DJ's page and releases at most once a week, one search
per name, at most one request per second to each upstream (MusicBrainz's terms), and no more requests
per crawl than `CHARTGW_DJ_RANKINGS_REQUESTS_PER_CRAWL` (the rest the next day).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from functools import partial
from typing import Any, Literal

import httpx
import msgspec

from chartgw import config
from chartgw.clock import Clock, fixed, utc_now
from chartgw.context import Context
from chartgw.crawl import CrawlContext, CrawlError, CrawlTarget, Fetched, Outcome, run_targets
from chartgw.endpoints import Call, Route, not_found
from chartgw.group import CommandArg, EntryMapping, Group, GroupCommand, Schedule, crawl_group, group_policy, retention
from chartgw.params import Param, accepts, search_param
from chartgw.records import stored_entry
from chartgw.replay import replay_upstreams
from chartgw.responses import HealthHead, SnapshotMeta, records_array, snapshot_meta
from chartgw.samples import dj_rankings as samples
from chartgw.store import NewSnapshot, SnapshotReader, SnapshotRow, SnapshotWriter, StoredEntry, group_db_path, parse_iso
from chartgw.targets import TargetKey
from chartgw.text import compact
from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, djmag, musicbrainz
from chartgw.upstreams.djmag import Change, DjRankEntry, ParsedList
from chartgw.upstreams.musicbrainz import ArtistCandidate, ReleaseGroup

NAME = "dj-rankings"
TITLE = "DJ rankings (DJ Mag Top 100 DJs)"
DAY = 86400
LIST_CADENCE_SECONDS = 31 * DAY
"""The latest poll's list is crawled monthly (weekly in October-December, when a new poll comes out)."""
Q4_LIST_CADENCE_SECONDS = 7 * DAY
PAST_POLL_CADENCE_SECONDS = 10 * 365 * DAY
"""A past poll never changes: its snapshot is never stale."""
PARTS = ("list", "details")

LIST = TargetKey(("year",), "list")
PAGE = TargetKey(("slug",), "dj")
SEARCH = TargetKey(("slug",), "musicbrainz")
DISCOGRAPHY = TargetKey(("slug",), "discography")
PLAN = "plan"

CONTACT_SETTING = config.Setting(
    "MUSICBRAINZ_CONTACT", "",
    "contact (e-mail or URL) put in the User-Agent sent to MusicBrainz, as its terms ask; empty = the "
    "placeholder contact of chartgw's default User-Agent", config.text)
YEARS_SETTING = config.Setting(
    "DJ_RANKINGS_YEARS", "5",
    "poll years, counted back from the newest held, whose DJs get pages and discographies crawled, 1-30",
    config.bounded_int(1, 30))
REFRESH_SETTING = config.Setting(
    "DJ_RANKINGS_REFRESH_DAYS", "7", "days before a DJ's page and MusicBrainz releases are fetched again, 1-90",
    config.bounded_int(1, 90))
BUDGET_SETTING = config.Setting(
    "DJ_RANKINGS_REQUESTS_PER_CRAWL", "40",
    "most requests one details crawl plans per upstream (DJ Mag, MusicBrainz); what is left is due the next day, 1-1000",
    config.bounded_int(1, 1000))
MAX_BACKFILL_YEARS = 30


def contact() -> str | None:
    return config.get(CONTACT_SETTING) or None


def kept_years() -> int:
    return config.get(YEARS_SETTING)


def refresh_days() -> int:
    return config.get(REFRESH_SETTING)


def musicbrainz_user_agent() -> str:
    return musicbrainz.user_agent(contact())


# --- stored records -------------------------------------------------------------------------------------


class DjPage(msgspec.Struct, kw_only=True, omit_defaults=False):
    """What the DJ's own poll page says (stored as `dj/{slug}`), with the name to show kept real."""

    slug: str
    name: str
    name_from_slug: bool
    year: int | None
    rank: int | None
    change: Change
    home: str | None
    country: str | None
    genre: str | None
    best_known_for: str | None
    image: str | None
    bio: str | None
    url: str | None


class SearchMeta(msgspec.Struct, kw_only=True):
    query: str
    reason: str
    total: int


class DiscographyMeta(msgspec.Struct, kw_only=True):
    mbid: str
    artist: str
    count: int
    """`release-group-count`: all of the artist's release groups."""
    complete: bool
    """False when the count grew past the pages planned: the next crawl fetches every page again."""


class PlanItem(msgspec.Struct, kw_only=True):
    kind: Literal["page", "search", "discography"]
    slug: str
    name: str
    name_from_slug: bool = False
    entry: DjRankEntry | None = None
    """The list entry whose page to fetch (page items)."""
    mbid: str | None = None
    offsets: list[int] = []


_encode = msgspec.json.Encoder().encode
_decode_entry = msgspec.json.Decoder(DjRankEntry).decode
_decode_page = msgspec.json.Decoder(DjPage).decode
_decode_candidate = msgspec.json.Decoder(ArtistCandidate).decode
_decode_plan = msgspec.json.Decoder(PlanItem).decode
_decode_search_meta = msgspec.json.Decoder(SearchMeta).decode
_decode_discography_meta = msgspec.json.Decoder(DiscographyMeta).decode


def _keyable(text: str, fallback: str) -> str:
    """`text` when it has a letter or digit (the store's name keys need one), else `fallback`."""
    return text if compact(text) else fallback


def stored_list_entry(entry: DjRankEntry) -> StoredEntry:
    name = _keyable(entry.name, entry.slug)
    return stored_entry(entry, rank=entry.rank, title=name, artists=[name], item_id=entry.slug)


# --- reading what earlier crawls stored (crawl side) -----------------------------------------------------


@dataclass(frozen=True)
class Stored:
    fetched_at: datetime
    records: list[bytes]
    meta: bytes | None


def _stored(store: SnapshotWriter, pattern: str, records: bool = True) -> dict[str, Stored]:
    """The newest snapshot of every target matching GLOB `pattern` (by fetch), with its meta and (unless
    `records` is false) its records."""
    rows = store.db.execute(
        "SELECT s.target, s.id, s.fetched_at, s.meta FROM snapshots s JOIN (SELECT target, max(id) AS id FROM snapshots"
        " WHERE target GLOB ? GROUP BY target) newest ON newest.id = s.id", (pattern,)).fetchall()
    return {target: Stored(parse_iso(fetched_at), store.records(snapshot_id) if records else [], meta)
            for target, snapshot_id, fetched_at, meta in rows}


def _stored_lists(store: SnapshotWriter) -> dict[int, list[DjRankEntry]]:
    """Every held poll year's latest list, newest year first."""
    found = {}
    for target, snap in _stored(store, LIST.pattern()).items():
        parts = LIST.parse(target)
        if parts and parts["year"].isdigit():
            found[int(parts["year"])] = [_decode_entry(r) for r in snap.records]
    return dict(sorted(found.items(), reverse=True))


def _slug_of(target: str, key: TargetKey) -> str:
    parts = key.parse(target)
    return parts["slug"] if parts else ""


def _real_names(store: SnapshotWriter, lists: dict[int, list[DjRankEntry]]) -> dict[str, str]:
    """Real (not slug-made) names by slug: the DJs' pages first, then the newest list that prints one."""
    names: dict[str, str] = {}
    for snap in _stored(store, PAGE.pattern()).values():
        page = _decode_page(snap.records[0]) if snap.records else None
        if page is not None and not page.name_from_slug:
            names[page.slug] = page.name
    for entries in lists.values():
        for entry in entries:
            if not entry.name_from_slug:
                names.setdefault(entry.slug, entry.name)
    return names


# --- crawl: lists ----------------------------------------------------------------------------------------


def _chart_date(year: int, now: datetime) -> str:
    """The crawl's day for the current poll; 31 December for a past one."""
    return min(now.date(), date(year, 12, 31)).isoformat()


def _build_list(asked: int | None, fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    """A poll year's list: complete (100 DJs) or refused; slug-made names replaced by the real names already
    known. Changes are stored as the page states them (null on JSON-LD pages): the endpoints complete them
    from the DJ's page of that year, else derive them from the year before held."""
    found = fetched[0]
    parsed = djmag.parse_list(found.body, asked)
    if not parsed.complete:
        raise CrawlError(f"list/{parsed.year}: expected {djmag.LIST_SIZE} DJs, the page lists {len(parsed.entries)}")
    known = _real_names(ctx.store, _stored_lists(ctx.store))
    entries = []
    for entry in parsed.entries:
        name, from_slug = djmag.keep_real_name(entry.name, entry.name_from_slug, known.get(entry.slug), False)
        entries.append(msgspec.structs.replace(entry, name=name or entry.name, name_from_slug=from_slug))
    return [NewSnapshot(LIST.make(str(parsed.year)), _chart_date(parsed.year, ctx.now), None, ctx.now, found.url,
                        [stored_list_entry(e) for e in entries], raw=found.body, raw_type="text/html")]


def list_target(year: int | None = None) -> CrawlTarget:
    """The latest poll (key `list`, writing `list/{the year the page states}`) or one year's (`list/{year}`)."""
    if year is None:
        return CrawlTarget("list", (djmag.list_request(),), partial(_build_list, None), refusal=djmag.refusal)
    return CrawlTarget(LIST.make(str(year)), (djmag.list_request(year),), partial(_build_list, year), djmag.LIST_SIZE,
                       refusal=djmag.refusal)


# --- crawl: the plan (discovery) -------------------------------------------------------------------------


def request_budget() -> int | None:
    """Requests per upstream one crawl may plan (`CHARTGW_DJ_RANKINGS_REQUESTS_PER_CRAWL`): at one a second
    a daily details pass stays about a minute long and the weekly refresh spreads over the week. None when
    nothing is paced (replay servers set the platform delay to 0): the demo and tests fetch all that is due."""
    if not config.get(config.CRAWL_DELAY_SECONDS):
        return None
    return config.get(BUDGET_SETTING)


@dataclass
class _Budget:
    left: dict[str, int | None]

    def take(self, upstream: str, requests: int) -> bool:
        left = self.left[upstream]
        if left is None:
            return True
        if left < requests:
            return False
        self.left[upstream] = left - requests
        return True


def plan_items(store: SnapshotWriter, now: datetime) -> list[PlanItem]:
    """What is due now for the DJs of the newest `CHARTGW_DJ_RANKINGS_YEARS` lists held (newest list and
    best rank first): a page never fetched or older than the refresh age; a MusicBrainz search once the
    DJ's real name is known (again when the name changes, or after the refresh age when nothing matched);
    the matched artist's release groups when never fetched, incomplete or older than the refresh age."""
    refresh = timedelta(days=refresh_days())
    lists = dict(list(_stored_lists(store).items())[:kept_years()])
    pages = {_slug_of(t, PAGE): s for t, s in _stored(store, PAGE.pattern()).items()}
    searches = {_slug_of(t, SEARCH): s for t, s in _stored(store, SEARCH.pattern()).items()}
    discographies = {_slug_of(t, DISCOGRAPHY): s for t, s in _stored(store, DISCOGRAPHY.pattern(), False).items()}
    djs: dict[str, DjRankEntry] = {}
    for entries in lists.values():
        for entry in entries:
            djs.setdefault(entry.slug, entry)
    budget = _Budget({djmag.UPSTREAM: request_budget(), musicbrainz.UPSTREAM: request_budget()})
    items: list[PlanItem] = []
    for slug, entry in djs.items():
        page = pages.get(slug)
        shown = _decode_page(page.records[0]) if page and page.records else None
        name, from_slug = djmag.keep_real_name(entry.name, entry.name_from_slug, shown.name if shown else None,
                                               shown.name_from_slug if shown else False)
        name = name or entry.name
        if (page is None or now - page.fetched_at >= refresh) and budget.take(djmag.UPSTREAM, 1):
            items.append(PlanItem(kind="page", slug=slug, name=name, name_from_slug=from_slug, entry=entry))
        if from_slug:
            continue  # search by the real name only: wait for the DJ's page
        search = searches.get(slug)
        meta = _decode_search_meta(search.meta) if search and search.meta else None
        matched = _decode_candidate(search.records[0]) if search and search.records else None
        if search is None or meta is None or meta.query != name or (matched is None and now - search.fetched_at >= refresh):
            if budget.take(musicbrainz.UPSTREAM, 1):
                items.append(PlanItem(kind="search", slug=slug, name=name))
            continue
        if matched is None:
            continue
        held = discographies.get(slug)
        held_meta = _decode_discography_meta(held.meta) if held and held.meta else None
        same = held_meta is not None and held_meta.mbid == matched.mbid
        if held is None or not same or not held_meta or not held_meta.complete or now - held.fetched_at >= refresh:
            count = held_meta.count if same and held_meta else 0
            offsets = list(range(0, max(count, 1), musicbrainz.PAGE_SIZE))
            if budget.take(musicbrainz.UPSTREAM, len(offsets)):
                items.append(PlanItem(kind="discography", slug=slug, name=name, mbid=matched.mbid, offsets=offsets))
    return items


def _build_plan(fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    items = plan_items(ctx.store, ctx.now)
    entries = [StoredEntry(i, f"{item.kind}/{item.slug}", item.kind, item.slug, _encode(item))
               for i, item in enumerate(items, start=1)]
    return [NewSnapshot(PLAN, ctx.now.date().isoformat(), None, ctx.now, "plan: what is due", entries)]


def discovery() -> list[CrawlTarget]:
    """The plan: no request, only the store read at the crawl's clock (so "due" means due at that time)."""
    return [CrawlTarget(PLAN, (), _build_plan, None)]


# --- crawl: pages, searches, discographies ---------------------------------------------------------------


def _build_page(item: PlanItem, fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    """The DJ's page as `dj/{slug}`: refused when it describes another DJ (its own URL names another slug);
    the name known from the lists stays unless it was only rebuilt from the slug."""
    assert item.entry is not None
    found = fetched[0]
    profile = djmag.parse_dj_page(found.body)
    try:
        djmag.merge_profile(item.entry, profile)
    except ValueError as exc:
        raise CrawlError(str(exc)) from None
    name, from_slug = djmag.keep_real_name(item.name, item.name_from_slug, profile.name, False)
    year = profile.year if profile.year is not None else _url_year(item.entry.url)
    page = DjPage(slug=item.slug, name=name or item.name, name_from_slug=from_slug, year=year, rank=profile.rank,
                  change=profile.change, home=profile.home, country=profile.country, genre=profile.genre,
                  best_known_for=profile.best_known_for, image=profile.image, bio=profile.bio,
                  url=profile.url or item.entry.url)
    shown = _keyable(page.name, item.slug)
    entry = stored_entry(page, rank=1, title=shown, artists=[shown], item_id=item.slug)
    return [NewSnapshot(PAGE.make(item.slug), ctx.now.date().isoformat(), None, ctx.now, found.url, [entry],
                        raw=found.body, raw_type="text/html")]


def _url_year(url: str) -> int | None:
    parts = url.rstrip("/").split("/")
    years = [int(p) for p in parts if p.isdigit() and len(p) == 4]
    return years[0] if years else None


def _build_search(item: PlanItem, fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    """The search's verdict as `musicbrainz/{slug}`: the matched artist (none: an explicit no-match) and,
    in the snapshot's meta, the name asked and why."""
    found = fetched[0]
    match = musicbrainz.parse_artist_search(found.body, item.name)
    entries = []
    if match.artist is not None:
        shown = _keyable(match.artist.name, match.artist.mbid)
        entries.append(stored_entry(match.artist, rank=1, title=shown, artists=[shown], item_id=match.artist.mbid))
    meta = _encode(SearchMeta(query=item.name, reason=match.reason, total=match.total))
    return [NewSnapshot(SEARCH.make(item.slug), ctx.now.date().isoformat(), None, ctx.now, found.url, entries,
                        raw=found.body, raw_type="application/json", meta=meta)]


def _build_discography(item: PlanItem, fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    """Every planned browse page, one count: a count that changes between pages is a CrawlError; a count
    past the pages planned is stored as incomplete (the next crawl asks for every page)."""
    assert item.mbid is not None
    pages = [musicbrainz.parse_release_groups(f.body) for f in fetched]
    if len({p.count for p in pages}) != 1:
        raise CrawlError(f"discography/{item.slug}: the release-group count changed between pages")
    for page, offset in zip(pages, item.offsets, strict=True):
        if page.offset != offset:
            raise UpstreamFormatError(f"musicbrainz release groups: asked for offset {offset}, got {page.offset}")
    groups: list[ReleaseGroup] = []
    seen: set[str] = set()
    for page in pages:
        for group in page.release_groups:
            if group.id not in seen:
                seen.add(group.id)
                groups.append(group)
    count = pages[0].count
    artist = _keyable(item.name, item.slug)
    entries = [stored_entry(g, rank=i, title=_keyable(g.title, g.id), artists=[artist], item_id=g.id)
               for i, g in enumerate(groups, start=1)]
    meta = _encode(DiscographyMeta(mbid=item.mbid, artist=item.name, count=count, complete=len(groups) >= count))
    return [NewSnapshot(DISCOGRAPHY.make(item.slug), ctx.now.date().isoformat(), None, ctx.now, fetched[0].url,
                        entries, meta=meta)]


def item_target(item: PlanItem) -> CrawlTarget:
    if item.kind == "page":
        assert item.entry is not None
        return CrawlTarget(PAGE.make(item.slug), (djmag.dj_request_for(item.entry),), partial(_build_page, item), 1,
                           refusal=djmag.refusal)
    if item.kind == "search":
        return CrawlTarget(SEARCH.make(item.slug), (musicbrainz.artist_search_request(item.name, contact()),),
                           partial(_build_search, item), None)
    assert item.mbid is not None
    requests: tuple[UpstreamRequest, ...] = tuple(
        musicbrainz.release_groups_request(item.mbid, offset, contact()) for offset in item.offsets)
    return CrawlTarget(DISCOGRAPHY.make(item.slug), requests, partial(_build_discography, item), None)


def stored_plan() -> list[PlanItem]:
    with SnapshotWriter(group_db_path(NAME)) as store:
        return [_decode_plan(record) for record in store.latest_records(PLAN)]


def targets(selection: dict[str, str | None], now: datetime) -> list[CrawlTarget]:
    """`list`: the latest poll; `details`: the plan the discovery pass just stored; neither: both."""
    part = selection.get("part")
    chosen = [list_target()] if part in (None, "list") else []
    if part in (None, "details"):
        chosen += [item_target(item) for item in stored_plan()]
    return chosen


def _backfill_years(since: int, until: int | None, now: datetime) -> list[int]:
    last = until if until is not None else now.year - 1
    if last < since:
        raise ValueError(f"--until {last} is before --since {since}")
    if since < djmag.FIRST_YEAR:
        raise ValueError(f"--since must be {djmag.FIRST_YEAR} (the first poll) or later, got {since}")
    if last > now.year:
        raise ValueError(f"--until {last} is after this year")
    if last - since + 1 > MAX_BACKFILL_YEARS:
        raise ValueError(f"at most {MAX_BACKFILL_YEARS} years at once, asked {last - since + 1}")
    return list(range(since, last + 1))


async def backfill(since: int, until: int | None = None, *, now: Clock = utc_now,
                   transport: httpx.AsyncBaseTransport | None = None) -> list[Outcome]:
    """Past polls' lists (`/top100djs/{year}`, 100 DJs each), one target per year, recorded as a run of
    kind "backfill"; their DJs' details follow in the next `--part details` crawls."""
    years = _backfill_years(since, until, now())
    chosen = [list_target(year) for year in years]
    return await run_targets(NAME, chosen, retention=retention(GROUP), now=now, transport=transport,
                             policy=group_policy(GROUP), run_kind="backfill", run_options={"years": years})


def _backfill_command(ctx: Context, values: dict[str, Any]) -> list[Outcome]:
    return asyncio.run(backfill(values["since"], values["until"], now=ctx.clock, transport=ctx.transport))


# --- the index the endpoints read ------------------------------------------------------------------------


class RankingYear(msgspec.Struct):
    year: int
    rank: int
    change: Change
    url: str


@dataclass
class YearList:
    year: int
    row: SnapshotRow
    entries: list[DjRankEntry]


@dataclass
class Dj:
    slug: str
    name: str
    name_from_slug: bool
    page: DjPage | None = None
    page_row: SnapshotRow | None = None
    rankings: list[RankingYear] = field(default_factory=list)
    """Newest year first."""
    search_row: SnapshotRow | None = None
    search: SearchMeta | None = None
    artist: ArtistCandidate | None = None
    discography_row: SnapshotRow | None = None
    discography: DiscographyMeta | None = None
    keys: tuple[str, ...] = ()


@dataclass
class Index:
    years: dict[int, YearList]
    """Newest year first."""
    djs: dict[str, Dj]


_indexes: dict[tuple[str, int | None, int], Index] = {}


async def _records_of(reader: SnapshotReader, ids: Sequence[int]) -> dict[int, list[bytes]]:
    found: dict[int, list[bytes]] = {i: [] for i in ids}
    for start in range(0, len(ids), 500):
        chunk = list(ids[start:start + 500])
        rows = await reader.fetchall(
            f"SELECT snapshot_id, record FROM entries WHERE snapshot_id IN ({','.join('?' * len(chunk))})"
            " ORDER BY snapshot_id, position", chunk)
        for snapshot_id, record in rows:
            found[snapshot_id].append(record)
    return found


async def _metas_of(reader: SnapshotReader, ids: Sequence[int]) -> dict[int, bytes | None]:
    found: dict[int, bytes | None] = {}
    for start in range(0, len(ids), 500):
        chunk = list(ids[start:start + 500])
        rows = await reader.fetchall(f"SELECT id, meta FROM snapshots WHERE id IN ({','.join('?' * len(chunk))})", chunk)
        found.update({row[0]: row[1] for row in rows})
    return found


async def load_index(reader: SnapshotReader) -> Index:
    """Every held list (merged with the DJs' pages, changes derived), every DJ's page, search and
    discography metadata: read once per commit (keyed on the file and its newest snapshot id)."""
    head = await reader.fetchall("SELECT max(id), count(*) FROM snapshots")
    key = (str(reader.path), head[0][0] if head else None, head[0][1] if head else 0)
    cached = _indexes.get(key)
    if cached is not None:
        return cached
    rows = await reader.latest_per_target()
    lists = {int(p["year"]): row for row in rows if (p := LIST.parse(row.target)) and p["year"].isdigit()}
    pages = {p["slug"]: row for row in rows if (p := PAGE.parse(row.target))}
    searches = {p["slug"]: row for row in rows if (p := SEARCH.parse(row.target))}
    discographies = {p["slug"]: row for row in rows if (p := DISCOGRAPHY.parse(row.target))}
    records = await _records_of(reader, [r.id for r in [*lists.values(), *pages.values(), *searches.values()]])
    metas = await _metas_of(reader, [r.id for r in [*searches.values(), *discographies.values()]])
    page_of = {slug: _decode_page(records[row.id][0]) for slug, row in pages.items() if records[row.id]}

    raw_lists = {year: [_decode_entry(r) for r in records[row.id]] for year, row in sorted(lists.items())}
    merged: dict[int, list[DjRankEntry]] = {}
    for year, entries in raw_lists.items():
        with_pages = [_with_page(entry, page_of.get(entry.slug), year) for entry in entries]
        earlier = [ParsedList(year=y, source="stored", complete=True, entries=e) for y, e in merged.items()]
        merged[year] = djmag.derive_changes(ParsedList(year=year, source="stored", complete=True, entries=with_pages),
                                            earlier).entries
    years = {year: YearList(year, lists[year], merged[year]) for year in sorted(merged, reverse=True)}

    djs: dict[str, Dj] = {}
    for year_list in years.values():
        for entry in year_list.entries:
            dj = djs.get(entry.slug)
            if dj is None:
                dj = djs[entry.slug] = Dj(entry.slug, entry.name, entry.name_from_slug)
            name, dj.name_from_slug = djmag.keep_real_name(dj.name, dj.name_from_slug, entry.name, entry.name_from_slug)
            dj.name = name or dj.name
            dj.rankings.append(RankingYear(year_list.year, entry.rank, entry.change, entry.url))
    for slug, dj in djs.items():
        dj.page, dj.page_row = page_of.get(slug), pages.get(slug)
        if (row := searches.get(slug)) is not None:
            dj.search_row = row
            meta = metas.get(row.id)
            dj.search = _decode_search_meta(meta) if meta else None
            dj.artist = _decode_candidate(records[row.id][0]) if records[row.id] else None
        if (row := discographies.get(slug)) is not None and (meta := metas.get(row.id)):
            dj.discography_row, dj.discography = row, _decode_discography_meta(meta)
        dj.keys = (compact(dj.name), compact(slug), *((compact(dj.page.name),) if dj.page else ()))
    index = Index(years, djs)
    if len(_indexes) > 8:
        _indexes.clear()
    _indexes[key] = index
    return index


def _with_page(entry: DjRankEntry, page: DjPage | None, year: int) -> DjRankEntry:
    """A list entry completed from the DJ's page: its real name (never a slug-made one over a real one),
    country, genre and image where the list has none, and the change the page states for that year."""
    if page is None:
        return entry
    name, from_slug = djmag.keep_real_name(entry.name, entry.name_from_slug, page.name, page.name_from_slug)
    change = entry.change if entry.change is not None or page.year != year else page.change
    return msgspec.structs.replace(entry, name=name or entry.name, name_from_slug=from_slug,
                                   country=entry.country or page.country, genre=entry.genre or page.genre,
                                   image=entry.image or page.image, change=change)


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
    kept = {e.slug for y in list(index.years.values())[:kept_years()] for e in y.entries}
    refresh = refresh_days() * DAY
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
                      len(with_discography), len(fresh_discography), refresh_days()),
        musicbrainz_user_agent())


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


async def year_list(call: Call) -> ListResponse:
    index = await load_index(call.data.reader)
    year = call.params["year"]
    found = _year_or_404(index, year)
    entries = found.entries[:call.params["limit"]]
    return ListResponse(year, _meta(index, year, call.now), year - 1 if year - 1 in index.years else None, len(entries),
                        entries)


async def year_rank(call: Call) -> RankResponse:
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


async def dj_details(call: Call) -> DjResponse:
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


async def search(call: Call) -> SearchResponse:
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


ROUTES: tuple[Route, ...] = (
    Route("/health", health, public=True, cache_ttl=5, errors=(), response=HealthResponse,
          summary="The latest list's age and how many DJs have a fresh page and discography"),
    Route("/years", years_list, errors=(), response=YearsResponse, summary="The poll years held, newest first"),
    Route("/search", search, (
        search_param(description="Text in a DJ's name"),
        Param("limit", kind="int", default=20, ge=1, le=100, description="DJs to return"),
    ), errors=(), response=SearchResponse, summary="DJs of every held year by name, exact and prefix matches first"),
    Route("/djs/{slug}", dj_details, (
        Param("slug", "path", check=slug_value, description="DJ Mag's slug of the DJ, as in the lists' `slug`"),
    ), response=DjResponse, summary="One DJ: profile, every held year's rank and the MusicBrainz discography"),
    Route("/{year}", year_list, (
        YEAR, Param("limit", kind="int", default=100, ge=1, le=100, description="DJs to return, from rank 1"),
    ), response=ListResponse, summary="One poll year's Top 100 with country, genre, image and change"),
    Route("/{year}/{rank}", year_rank, (
        YEAR, Param("rank", "path", kind="int", ge=1, le=100, description="Rank, 1-100"),
    ), response=RankResponse, summary="One rank of one poll year"),
)

RETENTION_DAYS = {PLAN: 14.0, "dj/": 90.0, "discography/": 90.0, "musicbrainz/": 400.0, "list/": 400.0}
"""Older snapshots pruned (never a target's newest): a year's list keeps a year of re-crawls."""


# --- demo -------------------------------------------------------------------------------------------------


async def seed(now: datetime) -> list[Outcome]:
    """Five poll years through the real crawler on replay servers: past polls backfilled and the latest
    crawled two days ago, then the details passes (pages and searches, then first release pages), then a
    whole crawl now that completes the discographies longer than one page."""
    years = samples.sample_years()
    start = now - timedelta(days=2)
    with replay_upstreams(samples.all_replies(now)):
        outcomes = await backfill(years[0], years[-2], now=fixed(start))
        outcomes += await crawl_group(GROUP, {"part": "list"}, now=fixed(start))
        outcomes += await crawl_group(GROUP, {"part": "details"}, now=fixed(start + timedelta(hours=1)))
        outcomes += await crawl_group(GROUP, {"part": "details"}, now=fixed(now - timedelta(days=1)))
        outcomes += await crawl_group(GROUP, {}, now=fixed(now))
    return outcomes


def _market(target: str, record: dict[str, Any]) -> str:
    return "global"


GROUP = Group(
    name=NAME,
    title=TITLE,
    description="DJ Mag's yearly Top 100 DJs poll: each year's list (rank, name, country, genre, image, change "
                "against the year before), each DJ's profile from DJ Mag and discography from MusicBrainz. "
                + " ".join(__doc__.split("\n\n")[2:]).replace("\n", " "),
    routes=ROUTES,
    upstreams=(djmag.UPSTREAM, musicbrainz.UPSTREAM),
    targets=targets,
    crawl_options=(("part", PARTS),),
    schedules=(
        Schedule("20 4 * 10-12 1", ("--part", "list"), "UTC",
                 "DJ Mag Top 100: weekly (Mondays) in October-December, when the yearly poll is published"),
        Schedule("20 4 1 1-9 *", ("--part", "list"), "UTC",
                 "DJ Mag Top 100: monthly otherwise (a published poll does not change)"),
        Schedule("50 4 * * *", ("--part", "details"), "UTC",
                 "DJ pages and MusicBrainz discographies: only what is due (each DJ weekly), one request a second"),
    ),
    retention_days=RETENTION_DAYS,
    discovery=discovery,
    per_upstream=1,
    delay_seconds=lambda: musicbrainz.MIN_INTERVAL_SECONDS,
    commands=(GroupCommand("backfill", "fill past DJ Mag Top 100 polls (one list page per year)", (
        CommandArg("since", f"first poll year, from {djmag.FIRST_YEAR}", type=int, required=True),
        CommandArg("until", "last poll year (default: last year)", type=int),
    ), _backfill_command),),
    settings=(CONTACT_SETTING, YEARS_SETTING, REFRESH_SETTING, BUDGET_SETTING),
    seeder=seed,
    # A DJ ranking is an artist chart: the DJ is the artist, there is no title. Only the lists are chart entries.
    entries=EntryMapping(market="=global", artist=("name",), artists=None, title=(),
                         skip_targets=(PLAN, "dj/*", "musicbrainz/*", "discography/*")),
)


