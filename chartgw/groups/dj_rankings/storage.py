"""/dj-rankings' storage: its queries, and the reading side: the index the endpoints answer from, built from
every held list, DJ page, search and discography snapshot.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from chartgw.core.text import compact
from chartgw.groups.dj_rankings.records import (
    DISCOGRAPHY,
    LIST,
    PAGE,
    SEARCH,
    DiscographyMeta,
    DjPage,
    SearchMeta,
    decode_candidate,
    decode_discography_meta,
    decode_entry,
    decode_page,
    decode_search_meta,
)
from chartgw.store import Query, SnapshotReader, SnapshotRow, Storage
from chartgw.upstreams import djmag
from chartgw.upstreams.djmag import Change, DjRankEntry, ParsedList
from chartgw.upstreams.musicbrainz import ArtistCandidate

# --- queries -----------------------------------------------------------------------------------------------

NEWEST_FETCHES = Query("newest_fetches", "SELECT s.target, s.id, s.fetched_at, s.meta FROM snapshots s JOIN"
                                         " (SELECT target, max(id) AS id FROM snapshots WHERE target GLOB ? GROUP BY"
                                         " target) newest ON newest.id = s.id")
"""The newest fetch of every target matching a GLOB (what a crawl plans from: its last look at each page)."""
RECORDS_OF = Query("records_of", "SELECT snapshot_id, record FROM entries WHERE snapshot_id IN"
                                 " (SELECT value FROM json_each(?)) ORDER BY snapshot_id, position")
"""The records of a JSON list of snapshot ids."""
STORAGE = Storage(queries=(NEWEST_FETCHES, RECORDS_OF))

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
    for snapshot_id, record in await reader.fetchall(RECORDS_OF, (json.dumps(list(ids)),)):
        found[snapshot_id].append(record)
    return found


async def load_index(reader: SnapshotReader) -> Index:
    """Every held list (merged with the DJs' pages, changes derived), every DJ's page, search and
    discography metadata: read once per commit (keyed on the file and its newest snapshot id)."""
    newest, count, _ = await reader.after(0)
    key = (str(reader.path), newest, count)
    cached = _indexes.get(key)
    if cached is not None:
        return cached
    rows = await reader.latest_per_target()
    lists = {int(p["year"]): row for row in rows if (p := LIST.parse(row.target)) and p["year"].isdigit()}
    pages = {p["slug"]: row for row in rows if (p := PAGE.parse(row.target))}
    searches = {p["slug"]: row for row in rows if (p := SEARCH.parse(row.target))}
    discographies = {p["slug"]: row for row in rows if (p := DISCOGRAPHY.parse(row.target))}
    records = await _records_of(reader, [r.id for r in [*lists.values(), *pages.values(), *searches.values()]])
    # Decoding every list and page and deriving the changes takes tens of milliseconds: not on the event loop.
    index = await asyncio.to_thread(_assemble, lists, pages, searches, discographies, records)
    if len(_indexes) > 8:
        _indexes.clear()
    _indexes[key] = index
    return index


def _assemble(lists: dict[int, SnapshotRow], pages: dict[str, SnapshotRow], searches: dict[str, SnapshotRow],
              discographies: dict[str, SnapshotRow], records: dict[int, list[bytes]]) -> Index:
    """The index of what `load_index` read."""
    metas = {r.id: r.meta for r in [*searches.values(), *discographies.values()]}
    page_of = {slug: decode_page(records[row.id][0]) for slug, row in pages.items() if records[row.id]}

    raw_lists = {year: [decode_entry(r) for r in records[row.id]] for year, row in sorted(lists.items())}
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
            dj.search = decode_search_meta(meta) if meta else None
            dj.artist = decode_candidate(records[row.id][0]) if records[row.id] else None
        if (row := discographies.get(slug)) is not None and (meta := metas.get(row.id)):
            dj.discography_row, dj.discography = row, decode_discography_meta(meta)
        dj.keys = (compact(dj.name), compact(slug), *((compact(dj.page.name),) if dj.page else ()))
    return Index(years, djs)


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
