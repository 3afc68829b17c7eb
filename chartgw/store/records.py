"""Public record types shared by several upstreams (the Korean sites' KoreaEntry through `korea_entry`),
and `stored_entry`, which turns any group's record into its store row. A record type only one
upstream makes lives in that upstream's module."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import msgspec

from chartgw.core.text import artist_key, search_key, title_key
from chartgw.store import StoredEntry

__all__ = [
    "PRINTED_FACTS",
    "KoreaEntry",
    "ParsedChart",
    "RankStatus",
    "korea_entry",
    "rank_status",
    "stored_entry",
]

RankStatus = Literal["up", "down", "same", "new"]

PRINTED_FACTS = {"previous_rank": "last_week", "peak_rank": "peak", "periods_on_chart": "weeks_on_chart",
                 "re_entry": "is_reentry"}
"""The chart facts Billboard's and the Official Charts' entries print, by the fields their records keep them in
(`EntryMapping.facts`)."""


class KoreaEntry(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One row of a Korean chart site, in the same shape for all five sites."""

    rank: int
    title: str
    artist: str
    """All artists of the row joined with ", " in the upstream's spelling."""
    artists: list[str]
    album: str | None = None
    image_url: str | None = None
    song_id: str | None = None
    album_id: str | None = None
    artist_ids: list[str] = []
    rank_change: int | None = None
    """Places moved since the upstream's previous chart: positive = up, 0 = same, null = new entry."""
    rank_status: RankStatus = "new"


class ParsedChart(msgspec.Struct, kw_only=True):
    """What a parser read from one upstream chart: its rows and the chart time the page states."""

    entries: list[KoreaEntry]
    chart_date: str | None = None
    """YYYY-MM-DD as printed by the upstream; None when the page does not say (the crawl time is used)."""
    chart_hour: int | None = None
    """0-23 for hourly charts when the page says; None otherwise."""


_encode = msgspec.json.Encoder().encode


def stored_entry(record: msgspec.Struct, *, rank: int, title: str, artists: Iterable[str], item_id: str | None,
                 ) -> StoredEntry:
    """A record as the store keeps it: encoded once, beside its rank, name keys and id.

    The artist key is the first artist's; the search key covers the title and every artist.
    """
    names = [a for a in artists if a]
    return StoredEntry(rank, title_key(title), artist_key(names[0]) if names else "", item_id, _encode(record),
                       search_key(title, names))


def rank_status(change: int | None) -> RankStatus:
    """The status word for a rank change (null change = a new entry)."""
    if change is None:
        return "new"
    if change > 0:
        return "up"
    if change < 0:
        return "down"
    return "same"


def korea_entry(
    *,
    rank: int,
    title: str,
    artists: Iterable[tuple[str | None, str]],
    album: str | None,
    image_url: str | None,
    song_id: str | None,
    album_id: str | None,
    rank_change: int | None,
) -> KoreaEntry:
    """One KoreaEntry from already-validated parts; `artists` are (id, name) pairs in upstream order.

    `artist` is the names joined with ", " and `rank_status` follows `rank_change`. A pair with an
    empty name adds only its id and a pair without an id only its name, so pages that print names
    and ids in separate places keep every one they show. `image_url` is stored as given: callers
    make protocol-relative URLs absolute first.
    """
    pairs = list(artists)
    names = [name for _, name in pairs if name]
    return KoreaEntry(
        rank=rank,
        title=title,
        artist=", ".join(names),
        artists=names,
        album=album,
        image_url=image_url,
        song_id=song_id,
        album_id=album_id,
        artist_ids=[artist_id for artist_id, _ in pairs if artist_id],
        rank_change=rank_change,
        rank_status=rank_status(rank_change),
    )
