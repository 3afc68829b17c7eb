"""/identity: a recording's page (ids, artists, every chart appearance), a lookup by any id, a search by title and
artist, an artist's page, and a recording's runs drawn in one SVG. At the gateway's root, keyed, read from the
artist-history index file (`chartgw.index.identity.links` keeps the links there)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from typing import Any, TypedDict, TypeVar

from rapidfuzz import fuzz

from chartgw.api.endpoints import ApiError, Call, Route, not_found
from chartgw.api.params import InvalidParams, Param, limit_param, search_param
from chartgw.core.text import artist_key
from chartgw.index import history as index
from chartgw.index.artist_history.plot import SVG, render_plot
from chartgw.index.artist_history.responses import Appearance, to_appearances
from chartgw.index.credits import credit_keys, name_keys
from chartgw.index.identity.names import parse_title
from chartgw.index.identity.responses import (
    AmbiguousResponse,
    ArtistRef,
    ArtistResponse,
    Candidate,
    IdentityAppearance,
    RecordingRef,
    RecordingResponse,
    SearchResponse,
)
from chartgw.store import Query

__all__ = ["IDENTITY_QUERIES", "ID_PATTERNS", "identity_routes"]

PREFIX = "/identity"
RECORDING_ID = r"^rec_[0-9a-f]{16}$"
ARTIST_ID = r"^art_[0-9a-f]{16}$"
CURSOR = r"^\d{4}-\d{2}-\d{2}\.\d{1,18}$"
ID_PATTERNS: dict[str, str] = {
    "isrc": r"^[A-Za-z]{2}[A-Za-z0-9]{3}\d{7}$",
    "spotify_track": r"^[0-9A-Za-z]{22}$",
    "apple_track": r"^\d{1,15}$",
    "youtube_video": r"^[A-Za-z0-9_-]{11}$",
    "shazam_track": r"^\d{1,15}$",
    "amazon_asin": r"^[A-Z0-9]{10}$",
    "chartmetric_track": r"^\d{1,15}$",
    "genius_song": r"^\d{1,15}$",
    "melon_song": r"^\d{1,15}$",
    "genie_song": r"^\d{1,15}$",
    "bugs_song": r"^\d{1,15}$",
    "flo_song": r"^\d{1,15}$",
    "vibe_song": r"^\d{1,15}$",
    "musicbrainz_recording": r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
}
"""Every id type a lookup takes, with the form a well-formed value has (a malformed one is a 422)."""

_RECORDING = Query("identity_recording", "SELECT number, id, title, artist, ambiguous FROM identity_recordings"
                                         " WHERE id = ? ORDER BY number LIMIT 1")
_RECORDINGS = Query("identity_recordings", "SELECT number, id, title, artist, ambiguous FROM identity_recordings"
                                           " WHERE number IN (SELECT value FROM json_each(?)) ORDER BY number")
_IDS = Query("identity_ids", "SELECT kind, value FROM identity_ids WHERE recording = ? ORDER BY kind, value")
_ARTISTS = Query("identity_artists", "SELECT a.recording, n.artist_id, n.printed FROM identity_recording_artists a"
                                     " JOIN identity_artist_names n ON n.name = a.name"
                                     " WHERE a.recording IN (SELECT value FROM json_each(?)) ORDER BY a.recording, a.name")
_LOOKUP = Query("identity_lookup", "SELECT DISTINCT recording FROM identity_ids WHERE kind = ? AND value = ?"
                                   " ORDER BY recording")
_VARIANTS = Query("identity_variants", "SELECT l.variant_id, v.track_id, v.credits FROM identity_links l"
                                       " JOIN variants v ON v.id = l.variant_id WHERE l.recording = ?")
_ARTIST_KEYS = Query("identity_artist_keys", "SELECT id FROM artists WHERE key IN (SELECT value FROM json_each(?))")


def _appearances(name: str, columns: str) -> Query:
    """A page of a recording's appearances under one artist key, newest first, each position (chart date, row id)
    with `columns` of its row (`a` the appearance, `c` its chart, `v` its variant)."""
    return Query(name, f"SELECT k.chart_date, k.row_id, {columns} FROM appearance_artists k JOIN appearances a"
                       " ON a.chart_id = k.chart_id AND a.chart_date = k.chart_date AND a.track_id = k.track_id"
                       " JOIN charts c ON c.id = a.chart_id JOIN variants v ON v.id = a.variant_id"
                       " WHERE k.artist_id = ?1 AND k.track_id IN (SELECT value FROM json_each(?2))"
                       " AND a.variant_id IN (SELECT value FROM json_each(?3))"
                       " AND (?4 IS NULL OR (k.chart_date, k.row_id) < (?4, ?5))"
                       " ORDER BY k.chart_date DESC, k.row_id DESC LIMIT ?6")


_APPEARANCES = _appearances("identity_appearances", "c.source, c.chart, c.market, a.chart_date, a.rank, v.title, v.artist")
"""What a recording's page shows of each appearance (`IdentityAppearance`'s fields, in order)."""
_PLOTTED = _appearances("identity_plotted", index.ROW_SELECT.partition(" FROM ")[0].removeprefix("SELECT "))
"""A whole history row (`chartgw.index.tables.ROW_SELECT`'s columns, one declaration): what the plot draws."""
_BY_TITLE = Query("identity_by_title", "SELECT number FROM identity_recordings WHERE title_key = ?1"
                                       " OR title_key BETWEEN ?1 AND ?1 || char(1114111) ORDER BY number LIMIT 200")
_NAME = Query("identity_name", "SELECT artist_id FROM identity_artist_names WHERE name = ?")
_NAMES = Query("identity_names", "SELECT name, printed FROM identity_artist_names WHERE artist_id = ? ORDER BY name")
_BY_NAMES = Query("identity_by_names", "SELECT DISTINCT recording FROM identity_recording_artists"
                                       " WHERE name IN (SELECT value FROM json_each(?)) ORDER BY recording LIMIT ?")
_ARTIST_IDS = Query(
    "identity_artist_platform_ids",
    "SELECT DISTINCT v.credits, v.analytics_artist, v.lyrics_artist_id FROM identity_recording_artists a"
    " JOIN identity_links l ON l.recording = a.recording JOIN variants v ON v.id = l.variant_id"
    " WHERE a.name IN (SELECT value FROM json_each(?))"
    " AND (v.analytics_artist IS NOT NULL OR v.lyrics_artist_id IS NOT NULL)")
IDENTITY_QUERIES = (_RECORDING, _RECORDINGS, _IDS, _ARTISTS, _LOOKUP, _VARIANTS, _ARTIST_KEYS, _APPEARANCES, _PLOTTED,
                    _BY_TITLE, _NAME, _NAMES, _BY_NAMES, _ARTIST_IDS)
"""Every statement the routes run (compiled against the index's tables in tests)."""

_SEARCH_MOST = 50
T = TypeVar("T")
_ARTIST_RECORDINGS_MOST = 1000


def _rows(db: sqlite3.Connection, query: Query, args: list[Any]) -> list[Any]:
    """One statement of a page, on the index's reader thread; an index built before identity reads as empty."""
    try:
        return db.execute(query.sql, args).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc) and "no such column" not in str(exc):
            raise
        return []


async def _read(call: Call, work: Callable[[sqlite3.Connection], T]) -> T | None:
    """All of a page's reads, and the answer made of them, in one run on the index's reader thread (None while there
    is no index file): one hop off the event loop a page, where each statement read apart cost three (a lookup's nine
    statements: 27 hops, most of its 6.4 ms p50 at 10M rows on a loaded box while its SQL took 0.6 ms)."""
    return await call.data.reader.read(work)


def _artists(db: sqlite3.Connection, numbers: list[int]) -> dict[int, list[ArtistRef]]:
    """Each recording's artists (every artist its rows are indexed under), one per artist id (the first name
    printed)."""
    found: dict[int, dict[str, str]] = {}
    for number, artist_id, printed in _rows(db, _ARTISTS, [json.dumps(numbers)]):
        found.setdefault(number, {}).setdefault(artist_id, printed)
    return {n: [ArtistRef(a, name) for a, name in by_id.items()] for n, by_id in found.items()}


class Paged(TypedDict):
    """What a recording's page reads (a helper's view of a route with these two)."""

    limit: int
    cursor: str | None


class RecordingParams(Paged):
    recording_id: str


class SearchParams(TypedDict):
    title: str | None
    artist: str | None


class ArtistParams(TypedDict):
    artist_id: str
    limit: int


def _page(db: sqlite3.Connection, number: int, limit: int, after: str | None, query: Query = _APPEARANCES,
          ) -> tuple[list[Any], str | None]:
    """One page of a recording's appearances, newest first, through the artist index's key ranges: `query`'s
    columns of each row."""
    variants = _rows(db, _VARIANTS, [number])
    if not variants:
        return [], None
    keys = sorted({k for _, _, credits in variants for k in index.credit_keys(credits)[:1]})
    artist_ids = [r[0] for r in _rows(db, _ARTIST_KEYS, [json.dumps(keys)])]
    tracks = sorted({t for _, t, _ in variants})
    date, row = after.split(".") if after else (None, None)
    # One artist at a time: with one artist id the key's order is the page's, so a page reads its rows and
    # stops (a list of ids made SQLite sort every row of the artist: 97 ms for the heaviest recording at 1M rows).
    # Each position is read with its row (chart, variant) in the same pass of the key's range: a second pass over
    # the page's rows by their keys cost as much again (500 rows: 2.4 ms beside the range's 1.3 ms at 2M rows).
    found: dict[tuple[str, int], Any] = {}
    for artist_id in artist_ids:
        for position in _rows(db, query, [artist_id, json.dumps(tracks),
                                                 json.dumps(sorted(v for v, _, _ in variants)), date,
                                                 int(row) if row else None, limit + 1]):
            found.setdefault((position[0], position[1]), position)
    positions = [found[k] for k in sorted(found, reverse=True)[:limit + 1]]
    page = positions[:limit]
    next_cursor = f"{page[-1][0]}.{page[-1][1]}" if len(positions) > limit else None
    return [position[2:] for position in page], next_cursor


def _recording_body(db: sqlite3.Connection, row: tuple[Any, ...], limit: int, after: str | None) -> RecordingResponse:
    number, rec_id, title, _, ambiguous = row
    ids: dict[str, list[str]] = {}
    for kind, value in _rows(db, _IDS, [number]):
        ids.setdefault(kind, []).append(value)
    page, next_cursor = _page(db, number, limit, after)
    appearances = [IdentityAppearance(*r) for r in page]
    artists = _artists(db, [number]).get(number, [])
    return RecordingResponse(rec_id, title, artists, ids, bool(ambiguous), len(appearances), limit, next_cursor,
                             appearances)


def _recording(db: sqlite3.Connection, recording_id: str, limit: int, after: str | None) -> RecordingResponse | None:
    found = _rows(db, _RECORDING, [recording_id])
    return _recording_body(db, tuple(found[0]), limit, after) if found else None


async def recording(call: Call[RecordingParams]) -> RecordingResponse:
    recording_id, limit, after = call.params["recording_id"], call.params["limit"], call.params.get("cursor")
    found = await _read(call, lambda db: _recording(db, recording_id, limit, after))
    if found is None:
        raise not_found(f"No recording {recording_id}")
    return found


def _plotted(db: sqlite3.Connection, recording_id: str, limit: int, after: str | None,
             ) -> tuple[tuple[Any, ...], list[Appearance], str | None] | None:
    found = _rows(db, _RECORDING, [recording_id])
    if not found:
        return None
    page, next_cursor = _page(db, found[0][0], limit, after, _PLOTTED)
    return tuple(found[0]), to_appearances(page), next_cursor


async def plot(call: Call[RecordingParams]) -> str:
    recording_id, limit, after = call.params["recording_id"], call.params["limit"], call.params.get("cursor")
    found = await _read(call, lambda db: _plotted(db, recording_id, limit, after))
    if found is None:
        raise not_found(f"No recording {recording_id}")
    (_, rec_id, title, artist, _), rows, next_cursor = found
    return await asyncio.to_thread(render_plot, f"{title} by {artist} ({rec_id})", rows, more=next_cursor is not None)


def _candidates(db: sqlite3.Connection, numbers: list[int], score: dict[int, float]) -> list[Candidate]:
    rows = _rows(db, _RECORDINGS, [json.dumps(numbers)])
    artists = _artists(db, numbers)
    found = [Candidate(rec_id, title, artists.get(number, []), round(score.get(number, 1.0), 3))
             for number, rec_id, title, _, _ in rows]
    return sorted(found, key=lambda c: -c.confidence)


def _looked_up(db: sqlite3.Connection, kind: str, value: str, limit: int, after: str | None,
               ) -> RecordingResponse | list[Candidate] | None:
    """The recording an id names, the candidates when several, None when none."""
    numbers = [r[0] for r in _rows(db, _LOOKUP, [kind, value])]
    if not numbers:
        return None
    if len(numbers) > 1:
        return _candidates(db, numbers, {})
    rows = _rows(db, _RECORDINGS, [json.dumps(numbers)])
    return _recording_body(db, tuple(rows[0]), limit, after)


async def lookup(call: Call) -> RecordingResponse:
    """Reads its id by the names in ID_PATTERNS (one parameter per id type), so its parameters stay a Mapping."""
    given = [(kind, call.params[kind]) for kind in ID_PATTERNS if call.params.get(kind) is not None]
    if len(given) != 1:
        raise InvalidParams([{"type": "value_error", "loc": ["query"], "msg": "Value error, give exactly one id:"
                              f" one of {', '.join(ID_PATTERNS)}", "input": dict(given), "ctx": {"error": {}}}])
    kind, value = given[0]
    value = value.upper() if kind in ("isrc", "amazon_asin") else value
    limit, after = call.params["limit"], call.params.get("cursor")
    found = await _read(call, lambda db: _looked_up(db, kind, value, limit, after))
    if found is None:
        raise not_found(f"No recording has {kind} {value}")
    if isinstance(found, list):
        body = AmbiguousResponse(f"{kind} {value} is printed on {len(found)} recordings: kept apart, never merged",
                                 found)
        raise ApiError(409, body.detail, extra={"candidates": body.candidates})
    return found


def _searched(db: sqlite3.Connection, title: str | None, artist: str | None) -> list[Candidate]:
    numbers: list[int] = []
    names: list[str] = []
    if artist is not None:
        keys = name_keys(artist) | {artist_key(artist)}
        ids = {r[0] for key in sorted(keys) for r in _rows(db, _NAME, [key])}
        names = sorted({n for a in sorted(ids) for n, _ in _rows(db, _NAMES, [a])})
        numbers = [r[0] for r in _rows(db, _BY_NAMES, [json.dumps(names), _ARTIST_RECORDINGS_MOST])]
    if title is not None and artist is None:
        numbers = [r[0] for r in _rows(db, _BY_TITLE, [parse_title(title).name])]
    rows = _rows(db, _RECORDINGS, [json.dumps(numbers)])
    score: dict[int, float] = {}
    for number, _, shown, _, _ in rows:
        score[number] = fuzz.ratio(parse_title(title).name, parse_title(shown).name) / 100 if title is not None else 1.0
    best = sorted((n for n in score if score[n] >= 0.6), key=lambda n: (-score[n], n))[:_SEARCH_MOST]
    return _candidates(db, best, score)


async def search(call: Call[SearchParams]) -> SearchResponse:
    title, artist = call.params.get("title"), call.params.get("artist")
    if title is None and artist is None:
        raise InvalidParams([{"type": "missing", "loc": ["query", "title"], "msg": "Field required: give a title, an"
                              " artist or both", "input": None}])
    candidates = await _read(call, lambda db: _searched(db, title, artist)) or []
    return SearchResponse(title, artist, len(candidates), candidates)


def _artist(db: sqlite3.Connection, artist_id: str, limit: int) -> ArtistResponse | None:
    names = _rows(db, _NAMES, [artist_id])
    if not names:
        return None
    keys = [n for n, _ in names]
    ids: dict[str, set[str]] = {}
    for credits, chartmetric, genius in _rows(db, _ARTIST_IDS, [json.dumps(keys)]):
        credited = credit_keys(credits)
        if len(credited) == 1 and credited[0] in keys:  # a row crediting this artist alone
            for kind, value in (("chartmetric_artist", chartmetric), ("genius_artist", genius)):
                if value:
                    ids.setdefault(kind, set()).add(value)
    numbers = [r[0] for r in _rows(db, _BY_NAMES, [json.dumps(keys), limit])]
    recordings = [RecordingRef(rec_id, title, shown) for _, rec_id, title, shown, _ in
                  _rows(db, _RECORDINGS, [json.dumps(numbers)])]
    printed = sorted({p for _, p in names} | set(keys))
    return ArtistResponse(artist_id, printed, {k: sorted(v) for k, v in sorted(ids.items())}, len(recordings),
                          recordings)


async def artist_page(call: Call[ArtistParams]) -> ArtistResponse:
    artist_id, limit = call.params["artist_id"], call.params["limit"]
    found = await _read(call, lambda db: _artist(db, artist_id, limit))
    if found is None:
        raise not_found(f"No artist {artist_id}")
    return found


_LIMIT = limit_param("Appearances per page (newest first)", 500, 100)
_CURSOR = Param("cursor", pattern=CURSOR, description="The `next_cursor` of the page before")
_RECORDING_PARAM = Param("recording_id", where="path", required=True, pattern=RECORDING_ID,
                         description="A recording's id (`rec_` and 16 hex digits)")


def identity_routes() -> list[Route]:
    """The /identity routes, at the gateway's root."""
    return [
        Route(f"{PREFIX}/recordings/{{recording_id}}", recording, (_RECORDING_PARAM, _LIMIT, _CURSOR),
              summary="A recording: its title, artists, ids on every platform, and its chart appearances (paged)",
              response=RecordingResponse, errors=(404, 422), rows="appearances"),
        Route(f"{PREFIX}/recordings/{{recording_id}}/plot", plot, (_RECORDING_PARAM, _LIMIT, _CURSOR),
              summary="A recording's runs on every chart, drawn in one SVG", media_type=SVG, errors=(404, 422)),
        Route(f"{PREFIX}/lookup", lookup,
              (*(Param(kind, pattern=pattern, description=f"A {kind} (give exactly one id)")
                 for kind, pattern in ID_PATTERNS.items()), _LIMIT, _CURSOR),
              summary="The recording an id names: 404 for one nobody has printed, 409 with candidates when several",
              response=RecordingResponse, errors=(404, 409, 422), rows="appearances"),
        Route(f"{PREFIX}/search", search,
              (search_param("title", required=False, description="A title"),
               search_param("artist", required=False, description="An artist as any chart prints them")),
              summary="Recordings whose title and artist are like these, best first",
              response=SearchResponse, errors=(422,), rows="candidates"),
        Route(f"{PREFIX}/artists/{{artist_id}}", artist_page,
              (Param("artist_id", where="path", required=True, pattern=ARTIST_ID,
                     description="An artist's id (`art_` and 16 hex digits)"),
               limit_param("Recordings listed", _ARTIST_RECORDINGS_MOST, 200)),
              summary="An artist: every name it is printed under, its ids, its recordings",
              response=ArtistResponse, errors=(404, 422), rows="recordings"),
    ]
