"""/artist-history response shapes."""

from __future__ import annotations

from typing import Any

import msgspec

from chartgw.api.responses import HealthHead
from chartgw.index.artist_history.query import Query

# --- responses ------------------------------------------------------------------------------------

class Appearance(msgspec.Struct):
    """One chart appearance; a sub-daily chart's is the track's day on that chart."""

    source: str
    chart: str
    market: str
    chart_date: str
    rank: int
    """The best rank of the day on a sub-daily chart."""
    title: str | None
    artist: str
    """As the chart shows it."""
    artists: list[str]
    """Every credited artist (featured, `&`, `x`, `with` splits)."""
    hours_on_chart: int | None
    """Hours the track was on a sub-daily (hourly, realtime) chart that day; null for other charts."""
    isrc: str | None
    download_store_track_id: str | None
    streaming_track_id: str | None
    analytics_artist: str | None
    analytics_track: str | None
    lyrics_artist_id: str | None
    lyrics_song_id: str | None
    recognition_track_id: str | None
    video_id: str | None
    asin: str | None


class QueryEcho(msgspec.Struct):
    names: dict[str, str]
    keys: dict[str, list[str]]
    """The normalised artist keys each name was widened to (aliases included)."""
    ids: dict[str, list[str]]
    sources: list[str]
    markets: list[str]
    since: str | None
    until: str | None


class HistoryResponse(msgspec.Struct):
    query: QueryEcho
    count: int
    limit: int
    next_cursor: str | None
    """Null on the last page."""
    rows: list[Appearance]


class SourceCoverage(msgspec.Struct):
    source: str
    matched: bool
    rows: int
    tracks: int
    charts: int
    first_date: str | None
    last_date: str | None
    markets: list[str]
    best_rank: int | None
    matched_by: list[str]
    """The identifying parameters that matched rows here."""
    ids_carried: list[str]
    """The id kinds this source's entries carry."""
    reason: str | None
    """Why nothing matched (null when something did)."""


class CoverageResponse(msgspec.Struct):
    query: QueryEcho
    matched_sources: int
    rows: int
    sources: list[SourceCoverage]


class SourceStatus(msgspec.Struct):
    source: str
    last_indexed_snapshot_id: int | None
    latest_snapshot_id: int | None
    indexed_at: str | None
    lag_snapshots: int | None
    """Snapshots committed by the source and not yet indexed; null when the source has no file."""
    lag_seconds: int | None
    """Age of the oldest snapshot not yet indexed (0 when caught up)."""
    rows: int
    ids_carried: list[str]
    stale: bool


class IndexHealth(HealthHead):
    rows: int
    sources: list[SourceStatus]

    def reasons(self) -> list[str]:
        """What only the index can tell the front page (`chartgw.http.reasons`): that nothing is indexed yet."""
        if any(s.indexed_at for s in self.sources):
            return []
        return ["nothing indexed yet (`chartgw index artist-history-api` builds it; each crawl adds to it)"]


def echo_of(query: Query) -> QueryEcho:
    return QueryEcho(query.names, query.keys, {k: list(v) for k, v in query.ids.items()},
                     [s if c is None else f"{s}:{c}" for s, c in query.sources], list(query.markets), query.since,
                     query.until)


_decode_credits = msgspec.json.Decoder().decode


def to_appearance(row: Any) -> Appearance:
    (_, source, chart, market, chart_date, rank, title, artist, credits, hours, *ids) = row
    return Appearance(source, chart, market, chart_date, rank, title, artist, _decode_credits(credits), hours, *ids)


def to_appearances(page: list[Any]) -> list[Appearance]:
    """The rows of a page (up to thousands: its handlers make them in a worker thread, not on the event loop)."""
    return [to_appearance(r) for r in page]
