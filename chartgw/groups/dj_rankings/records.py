"""/dj-rankings: its name, target keys and settings, and the records it stores beside DJ Mag's (a DJ's page,
search and discography metadata, the crawl plan) with their encoders.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from chartgw.core import config
from chartgw.core.settings import Settings
from chartgw.core.text import compact
from chartgw.store import StoredEntry
from chartgw.store.records import stored_entry
from chartgw.store.targets import TargetKey
from chartgw.upstreams import musicbrainz
from chartgw.upstreams.djmag import Change, DjRankEntry
from chartgw.upstreams.musicbrainz import CONTACT_SETTING, ArtistCandidate

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


def contact(settings: Settings) -> str | None:
    """The contact MusicBrainz asks of clients (`CHARTGW_DJ_RANKINGS_CONTACT`), None when not set."""
    return settings.get(CONTACT_SETTING) or None


def musicbrainz_user_agent(settings: Settings) -> str:
    return musicbrainz.user_agent(contact(settings))


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


encode = msgspec.json.Encoder().encode
decode_entry = msgspec.json.Decoder(DjRankEntry).decode
decode_page = msgspec.json.Decoder(DjPage).decode
decode_candidate = msgspec.json.Decoder(ArtistCandidate).decode
decode_plan = msgspec.json.Decoder(PlanItem).decode
decode_search_meta = msgspec.json.Decoder(SearchMeta).decode
decode_discography_meta = msgspec.json.Decoder(DiscographyMeta).decode


def keyable(text: str, fallback: str) -> str:
    """`text` when it has a letter or digit (the store's name keys need one), else `fallback`."""
    return text if compact(text) else fallback


def stored_list_entry(entry: DjRankEntry) -> StoredEntry:
    name = keyable(entry.name, entry.slug)
    return stored_entry(entry, rank=entry.rank, title=name, artists=[name], item_id=entry.slug)
