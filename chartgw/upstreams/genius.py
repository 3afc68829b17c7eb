"""Genius API (api.genius.com), JSON: song search, for the artist-history index's lyrics ids.

Confidence: one captured body (../shared/upstream/genius/genius-api-search-response-2019.json, the first
4 of 10 hits of a 2019 search, hand-transcribed from a client's mock; see NOTES-global.md section 11) and
the public API documentation:
- `GET /search?q=TEXT` with `Authorization: Bearer TOKEN` answers `{"meta": {"status": 200}, "response":
  {"hits": [{"index": "song", "type": "song", "highlights": [], "result": {"id", "title",
  "title_with_featured", "full_title", "url", "primary_artist": {"id", "name", ...}, ...}}]}}`;
- a failure answers a non-200 status with `{"meta": {"status", "message"}}` (401 for a bad token) or, for
  some errors, `{"error", "error_description"}`.
The API returns no lyrics text; the index keeps only the song and artist ids (the spec's `lyrics_song_id`
and `lyrics_artist_id`).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import NamedTuple

from chartgw.core.text import artist_aliases, title_key
from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, declare_upstream
from chartgw.upstreams.json_api import integer, load_json, obj, opt_text, text

UPSTREAM = declare_upstream("GENIUS", "https://api.genius.com", max_body_bytes=4 * 1024 * 1024)
USER_AGENT = "chartgw/0.1 (music chart gateway; artist-history lyrics ids)"

_VERSION = re.compile(r"remix|mix|live|version|ver\b|edit|acoustic|inst|karaoke|remaster|sped|slowed|demo|cover",
                      re.IGNORECASE)


class SongHit(NamedTuple):
    """One song of a search's hits."""

    song_id: int
    title: str
    artist_id: int
    """The song's primary artist."""
    artist_name: str


def search_request(title: str, artist: str, token: str) -> UpstreamRequest:
    """`GET /search?q=TITLE ARTIST`: Genius's own ranking of songs for the title and primary artist."""
    query = " ".join(f"{title} {artist}".split())
    if not query:
        raise ValueError("genius: empty search")
    return UpstreamRequest(upstream=UPSTREAM, path="/search", params=(("q", query),),
                           headers=(("Authorization", f"Bearer {token}"), ("Accept", "application/json"),
                                    ("User-Agent", USER_AGENT)))


def parse_search(body: bytes) -> list[SongHit]:
    """The song hits of a search answer, in Genius's order; hits of other kinds (an artist, an album) are
    skipped, a song hit without its ids is a format error."""
    doc = obj(load_json(body, "genius search"), "genius search")
    if "response" not in doc:
        meta = obj(doc.get("meta") or {}, "genius search.meta")
        message = opt_text(meta.get("message")) or opt_text(doc.get("error_description")) or opt_text(doc.get("error"))
        raise UpstreamFormatError(f"genius search: no `response` ({message or f'keys {sorted(doc)[:8]}'})")
    hits = obj(doc["response"], "genius search.response").get("hits")
    if not isinstance(hits, list):
        raise UpstreamFormatError("genius search: `response.hits` is not a list")
    songs: list[SongHit] = []
    for i, item in enumerate(hits):
        hit = obj(item, f"genius search.hits[{i}]")
        if hit.get("type", "song") != "song" or hit.get("index", "song") != "song":
            continue
        where = f"genius search.hits[{i}].result"
        result = obj(hit.get("result"), where)
        artist = obj(result.get("primary_artist"), f"{where}.primary_artist")
        songs.append(SongHit(integer(result.get("id"), f"{where}.id"), text(result.get("title"), f"{where}.title"),
                             integer(artist.get("id"), f"{where}.primary_artist.id"),
                             text(artist.get("name"), f"{where}.primary_artist.name")))
    return songs


def title_keys(title: str) -> set[str]:
    """Keys a title agrees on: its normalised form (featured credits dropped) and, for a title printed in two
    scripts ("밤양갱 (Bam Yang Gang)"), the part outside and the part inside the brackets, unless the
    bracket names a version ("(Remix)", "(Live)", "(Sped Up)"), which is another recording."""
    keys = {title_key(title)}
    if not _VERSION.search(title):
        keys |= artist_aliases(title)
    return keys - {""}


def titles_agree(ours: str, theirs: str) -> bool:
    """Equal once normalised, or one is the other printed in one script only ("밤양갱" = "밤양갱 (Bam Yang Gang)")."""
    a, b = title_key(ours), title_key(theirs)
    return bool(a) and (a == b or a in title_keys(theirs) or b in title_keys(ours))


def pick(hits: list[SongHit], title: str, artist_keys: Collection[str]) -> SongHit | None:
    """The first hit whose normalised title and primary artist agree with the track's (None: no match).
    `artist_keys` are the track's primary artist's keys (aliases included); the hit's primary artist
    agrees when one of its keys ("IU (아이유)": iu, 아이유) is among them."""
    keys = set(artist_keys)
    return next((hit for hit in hits if titles_agree(title, hit.title) and artist_aliases(hit.artist_name) & keys), None)
