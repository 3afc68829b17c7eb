"""/dj-rankings crawls: the yearly lists, the plan of what is due (discovery), then DJ pages, MusicBrainz
searches and discographies, each read against what earlier crawls stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import partial

import msgspec

from chartgw.core import config
from chartgw.core.settings import Settings
from chartgw.crawl.runner import CrawlContext, CrawlError, CrawlTarget, Fetched
from chartgw.groups.dj_rankings.records import (
    BUDGET_SETTING,
    DISCOGRAPHY,
    LIST,
    NAME,
    PAGE,
    PLAN,
    REFRESH_SETTING,
    SEARCH,
    YEARS_SETTING,
    DiscographyMeta,
    DjPage,
    PlanItem,
    SearchMeta,
    contact,
    decode_candidate,
    decode_discography_meta,
    decode_entry,
    decode_page,
    decode_plan,
    decode_search_meta,
    encode,
    keyable,
    stored_list_entry,
)
from chartgw.groups.dj_rankings.storage import NEWEST_FETCHES
from chartgw.store import NewSnapshot, SnapshotWriter, StoredEntry, group_db_path, parse_iso
from chartgw.store.records import stored_entry
from chartgw.store.targets import TargetKey
from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, djmag, musicbrainz
from chartgw.upstreams.djmag import DjRankEntry
from chartgw.upstreams.musicbrainz import ReleaseGroup

# --- reading what earlier crawls stored (crawl side) -----------------------------------------------------


@dataclass(frozen=True)
class Stored:
    fetched_at: datetime
    records: list[bytes]
    meta: bytes | None


def _stored(store: SnapshotWriter, pattern: str, records: bool = True) -> dict[str, Stored]:
    """The newest snapshot of every target matching GLOB `pattern` (by fetch), with its meta and (unless
    `records` is false) its records."""
    return {target: Stored(parse_iso(fetched_at), store.records(snapshot_id) if records else [], meta)
            for target, snapshot_id, fetched_at, meta in store.rows(NEWEST_FETCHES, (pattern,))}


def _stored_lists(store: SnapshotWriter) -> dict[int, list[DjRankEntry]]:
    """Every held poll year's latest list, newest year first."""
    found = {}
    for target, snap in _stored(store, LIST.pattern()).items():
        parts = LIST.parse(target)
        if parts and parts["year"].isdigit():
            found[int(parts["year"])] = [decode_entry(r) for r in snap.records]
    return dict(sorted(found.items(), reverse=True))


def _slug_of(target: str, key: TargetKey) -> str:
    parts = key.parse(target)
    return parts["slug"] if parts else ""


def _real_names(store: SnapshotWriter, lists: dict[int, list[DjRankEntry]]) -> dict[str, str]:
    """Real (not slug-made) names by slug: the DJs' pages first, then the newest list that prints one."""
    names: dict[str, str] = {}
    for snap in _stored(store, PAGE.pattern()).values():
        page = decode_page(snap.records[0]) if snap.records else None
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


def request_budget(settings: Settings) -> int | None:
    """Requests per upstream one crawl may plan (`CHARTGW_DJ_RANKINGS_REQUESTS_PER_CRAWL`): at one a second
    a daily details pass stays about a minute long and the weekly refresh spreads over the week. None when
    nothing is paced (replay servers set the platform delay to 0): the demo and tests fetch all that is due."""
    if not settings.get(config.CRAWL_DELAY_SECONDS):
        return None
    budget: int = settings.get(BUDGET_SETTING)
    return budget


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


def plan_items(store: SnapshotWriter, now: datetime, settings: Settings) -> list[PlanItem]:
    """What is due now for the DJs of the newest `CHARTGW_DJ_RANKINGS_YEARS` lists held (newest list and
    best rank first): a page never fetched or older than the refresh age; a MusicBrainz search once the
    DJ's real name is known (again when the name changes, or after the refresh age when nothing matched);
    the matched artist's release groups when never fetched, incomplete or older than the refresh age."""
    refresh = timedelta(days=settings.get(REFRESH_SETTING))
    lists = dict(list(_stored_lists(store).items())[:settings.get(YEARS_SETTING)])
    pages = {_slug_of(t, PAGE): s for t, s in _stored(store, PAGE.pattern()).items()}
    searches = {_slug_of(t, SEARCH): s for t, s in _stored(store, SEARCH.pattern()).items()}
    discographies = {_slug_of(t, DISCOGRAPHY): s for t, s in _stored(store, DISCOGRAPHY.pattern(), False).items()}
    djs: dict[str, DjRankEntry] = {}
    for entries in lists.values():
        for entry in entries:
            djs.setdefault(entry.slug, entry)
    budget = _Budget({djmag.UPSTREAM: request_budget(settings), musicbrainz.UPSTREAM: request_budget(settings)})
    items: list[PlanItem] = []
    for slug, entry in djs.items():
        page = pages.get(slug)
        shown = decode_page(page.records[0]) if page and page.records else None
        name, from_slug = djmag.keep_real_name(entry.name, entry.name_from_slug, shown.name if shown else None,
                                               shown.name_from_slug if shown else False)
        name = name or entry.name
        if (page is None or now - page.fetched_at >= refresh) and budget.take(djmag.UPSTREAM, 1):
            items.append(PlanItem(kind="page", slug=slug, name=name, name_from_slug=from_slug, entry=entry))
        if from_slug:
            continue  # search by the real name only: wait for the DJ's page
        search = searches.get(slug)
        meta = decode_search_meta(search.meta) if search and search.meta else None
        matched = decode_candidate(search.records[0]) if search and search.records else None
        if search is None or meta is None or meta.query != name or (matched is None and now - search.fetched_at >= refresh):
            if budget.take(musicbrainz.UPSTREAM, 1):
                items.append(PlanItem(kind="search", slug=slug, name=name))
            continue
        if matched is None:
            continue
        held = discographies.get(slug)
        held_meta = decode_discography_meta(held.meta) if held and held.meta else None
        same = held_meta is not None and held_meta.mbid == matched.mbid
        if held is None or not same or not held_meta or not held_meta.complete or now - held.fetched_at >= refresh:
            count = held_meta.count if same and held_meta else 0
            offsets = list(range(0, max(count, 1), musicbrainz.PAGE_SIZE))
            if budget.take(musicbrainz.UPSTREAM, len(offsets)):
                items.append(PlanItem(kind="discography", slug=slug, name=name, mbid=matched.mbid, offsets=offsets))
    return items


def _build_plan(settings: Settings, fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
    items = plan_items(ctx.store, ctx.now, settings)
    entries = [StoredEntry(i, f"{item.kind}/{item.slug}", item.kind, item.slug, encode(item))
               for i, item in enumerate(items, start=1)]
    return [NewSnapshot(PLAN, ctx.now.date().isoformat(), None, ctx.now, "plan: what is due", entries)]


def discovery(settings: Settings) -> list[CrawlTarget]:
    """The plan: no request, only the store read at the crawl's clock (so "due" means due at that time)."""
    return [CrawlTarget(PLAN, (), partial(_build_plan, settings), None)]


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
    shown = keyable(page.name, item.slug)
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
        shown = keyable(match.artist.name, match.artist.mbid)
        entries.append(stored_entry(match.artist, rank=1, title=shown, artists=[shown], item_id=match.artist.mbid))
    meta = encode(SearchMeta(query=item.name, reason=match.reason, total=match.total))
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
    artist = keyable(item.name, item.slug)
    entries = [stored_entry(g, rank=i, title=keyable(g.title, g.id), artists=[artist], item_id=g.id)
               for i, g in enumerate(groups, start=1)]
    meta = encode(DiscographyMeta(mbid=item.mbid, artist=item.name, count=count, complete=len(groups) >= count))
    return [NewSnapshot(DISCOGRAPHY.make(item.slug), ctx.now.date().isoformat(), None, ctx.now, fetched[0].url,
                        entries, meta=meta)]


def item_target(item: PlanItem, settings: Settings) -> CrawlTarget:
    if item.kind == "page":
        assert item.entry is not None
        return CrawlTarget(PAGE.make(item.slug), (djmag.dj_request_for(item.entry),), partial(_build_page, item), 1,
                           refusal=djmag.refusal)
    if item.kind == "search":
        return CrawlTarget(SEARCH.make(item.slug), (musicbrainz.artist_search_request(item.name, contact(settings)),),
                           partial(_build_search, item), None)
    assert item.mbid is not None
    requests: tuple[UpstreamRequest, ...] = tuple(
        musicbrainz.release_groups_request(item.mbid, offset, contact(settings)) for offset in item.offsets)
    return CrawlTarget(DISCOGRAPHY.make(item.slug), requests, partial(_build_discography, item), None)


def stored_plan(settings: Settings) -> list[PlanItem]:
    with SnapshotWriter(group_db_path(NAME, settings)) as store:
        return [decode_plan(record) for record in store.latest_records(PLAN)]


def targets(selection: dict[str, str | None], now: datetime, settings: Settings) -> list[CrawlTarget]:
    """`list`: the latest poll; `details`: the plan the discovery pass just stored; neither: both."""
    part = selection.get("part")
    chosen = [list_target()] if part in (None, "list") else []
    if part in (None, "details"):
        chosen += [item_target(item, settings) for item in stored_plan(settings)]
    return chosen
