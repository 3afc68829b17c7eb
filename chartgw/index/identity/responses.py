"""What the /identity routes answer (msgspec types: the bodies and the OpenAPI document's schemas)."""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["AmbiguousResponse", "ArtistRef", "ArtistResponse", "Candidate", "EntryIdentity", "IdentityAppearance",
           "Match", "RecordingRef", "RecordingResponse", "SearchResponse"]

Match = Literal["isrc", "platform_id", "exact", "high", "low", "none"]


class EntryIdentity(msgspec.Struct):
    """What `include=identity` adds to a chart entry."""

    recording_id: str | None
    """Null when the entry is not indexed yet (the index run after a crawl links it)."""
    artist_ids: list[str]
    match: Match
    """The tier that linked the entry's row form to its recording; `none` when it is a recording of its own."""


class ArtistRef(msgspec.Struct):
    id: str
    name: str
    """As a chart printed it."""


class IdentityAppearance(msgspec.Struct):
    """One chart appearance of a recording (a sub-daily chart's is its day on that chart)."""

    group: str
    chart: str
    market: str
    chart_date: str
    rank: int
    title: str | None
    """As the chart shows it."""
    artist: str
    """As the chart shows it."""


class RecordingResponse(msgspec.Struct):
    id: str
    title: str
    """As first printed."""
    artists: list[ArtistRef]
    ids: dict[str, list[str]]
    """Id type (`isrc`, `spotify_track`, `apple_track`, `shazam_track`, `youtube_video`, `amazon_asin`,
    `chartmetric_track`, `genius_song`) -> every value seen."""
    ambiguous: bool
    """An ISRC of this recording is printed on another one, or it carries two ISRCs: kept apart, never merged."""
    count: int
    limit: int
    next_cursor: str | None
    appearances: list[IdentityAppearance]
    """Newest first."""


class Candidate(msgspec.Struct):
    recording_id: str
    title: str
    artists: list[ArtistRef]
    confidence: float
    """0-1: how alike the title (and the artist, when asked) are."""


class AmbiguousResponse(msgspec.Struct):
    """409: an id that names several recordings."""

    detail: str
    candidates: list[Candidate]


class SearchResponse(msgspec.Struct):
    title: str | None
    artist: str | None
    count: int
    candidates: list[Candidate]
    """Best first."""


class RecordingRef(msgspec.Struct):
    id: str
    title: str
    artist: str
    """As first printed."""


class ArtistResponse(msgspec.Struct):
    id: str
    names: list[str]
    """Every name the artist is printed under, in every script seen."""
    ids: dict[str, list[str]]
    """Id type (`chartmetric_artist`, `genius_artist`) -> every value seen on a row crediting this artist alone."""
    count: int
    recordings: list[RecordingRef]
