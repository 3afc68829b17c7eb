"""/artist-history's reads of the index: widening names by their aliases, the streams a query reads (one per
key or id), the charts in scope, and the signed cursor that pages them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from chartgw.api.endpoints import ApiError, Call
from chartgw.api.params import InvalidParams
from chartgw.core.text import artist_key
from chartgw.index import history as index
from chartgw.index.artist_history.query import MAX_KEYS, Query, value_error_item
from chartgw.store import Query as StoreQuery

# --- queries --------------------------------------------------------------------------------------

def _rebuilding() -> ApiError:
    """An index file of an earlier layout: the next `chartgw index` (or crawl) builds it again."""
    return ApiError(503, "The artist-history index is being rebuilt; try again shortly", {"Retry-After": "60"})


async def fetch(call: Call, sql: str, args: list[Any]) -> list[Any]:
    """One read of the index. Its statements are composed per request (a stream per artist key, the filters
    asked), so each runs as a query of its own (`StoreQuery`) rather than one declared beforehand."""
    try:
        return list(await call.data.reader.fetchall(StoreQuery("artist-history", sql), args))
    except sqlite3.OperationalError as exc:
        if "no such column" not in str(exc):
            raise
        raise _rebuilding() from None


def marks(values: Any) -> str:
    return ",".join("?" * len(values))


async def widen(call: Call, name: str) -> list[str]:
    """The artist keys `name` stands for: its own, the alias links charts print, the alias table, and the
    names single-artist entries sharing an id with it are printed under (one hop)."""
    keys = index.name_keys(name)
    groups = index.alias_groups(call.settings)

    def with_table(found: set[str]) -> set[str]:
        for group in groups:
            if found & group:
                found = found | group
        return found

    keys = with_table(keys)
    frontier = set(keys)
    for _ in range(3):
        if not frontier or len(keys) >= MAX_KEYS:
            break
        rows = await fetch(call, f"SELECT b FROM artist_links WHERE a IN ({marks(frontier)})", sorted(frontier))
        frontier = {r[0] for r in rows} - keys
        keys |= frontier
    rows = await fetch(call, "SELECT DISTINCT o.key FROM id_keys k JOIN id_keys o ON o.kind = k.kind AND o.value = k.value"
                              f" WHERE k.key IN ({marks(keys)})", sorted(keys))
    keys = with_table(keys | {r[0] for r in rows})
    return sorted(keys)[:MAX_KEYS]


async def resolve(call: Call, query: Query) -> Query:
    """The query with the keys its names widen to, read from an index of the current layout."""
    layout = await fetch(call, "PRAGMA user_version", [])
    if layout and layout[0][0] != index.SCHEMA_VERSION:
        raise _rebuilding()
    query.keys = {param: await widen(call, name) for param, name in query.names.items()}
    return query


Charts = dict[int, tuple[str, str, str]]
"""Chart id -> (source, chart, market): the index's `charts`."""


async def _charts(call: Call) -> Charts:
    return {r[0]: (r[1], r[2], r[3]) for r in await fetch(call, "SELECT id, source, chart, market FROM charts", [])}


def _in_scope(query: Query, source: str, chart: str, market: str) -> bool:
    if query.markets and market not in query.markets:
        return False
    return not query.sources or any(
        source == s and (c is None or chart == c or chart.startswith(c + "/")) for s, c in query.sources)


@dataclass
class Stream:
    """Rows matched by one identifying value, read newest first from one artist key's range of
    `appearance_artists`: every row of the key, or (an id stream) the rows of some tracks there whose
    variant carries the ids asked for."""

    params: list[str]
    """The identifying parameters this stream answers for."""
    key: int
    """The artist key's id (`artists`)."""
    tracks: list[int] = field(default_factory=list)
    variants: list[int] = field(default_factory=list)
    """An id stream's tracks and variants (empty for a name's key)."""


async def query_streams(call: Call, query: Query) -> list[Stream]:
    """One stream per artist key (the keys of a name asked for first, so a later alias's rows are the ones
    checked for repeats), then one per id parameter and artist key its variants are indexed under."""
    by_key: dict[str, list[str]] = {}
    first = {artist_key(n) for n in query.names.values()}
    for param, keys in query.keys.items():
        for key in keys:
            by_key.setdefault(key, []).append(param)
    found_ids: list[tuple[str, int, int, str]] = []
    for kind, values in query.ids.items():
        found_ids += [(kind, variant, track, index.credit_keys(credits)[0])  # every row of a variant is under it
                      for variant, track, credits in await fetch(
                          call, f"SELECT id, track_id, credits FROM variants WHERE {kind} IN ({marks(values)})",
                          list(values))]
    wanted = sorted(set(by_key) | {key for *_, key in found_ids})
    ids = {key: artist for artist, key in await fetch(
        call, f"SELECT id, key FROM artists WHERE key IN ({marks(wanted)})", wanted)} if wanted else {}
    streams = [Stream(by_key[k], ids[k]) for k in sorted(by_key, key=lambda k: (k not in first, k)) if k in ids]
    by_id: dict[tuple[str, int], Stream] = {}
    for kind, variant, track, key in found_ids:
        if key in ids:
            stream = by_id.setdefault((kind, ids[key]), Stream([kind], ids[key]))
            stream.tracks.append(track)
            stream.variants.append(variant)
    return streams + list(by_id.values())


ROW_OF_K = "a.chart_id = k.chart_id AND a.chart_date = k.chart_date AND a.track_id = k.track_id"
"""The appearance a key row `k` stands for (its primary key)."""


def stream_where(stream: Stream, query: Query, scope: list[int] | None) -> tuple[str, list[Any]]:
    """The stream's condition on `k` (its key's range), with the dates and charts asked."""
    parts: list[str] = ["k.artist_id = ?"]
    args: list[Any] = [stream.key]
    if stream.variants:
        tracks = sorted(set(stream.tracks))
        parts += [f"k.track_id IN ({marks(tracks)})",
                  f"(SELECT variant_id FROM appearances a WHERE {ROW_OF_K}) IN ({marks(stream.variants)})"]
        args += [*tracks, *stream.variants]
    if query.since:
        parts.append("k.chart_date >= ?")
        args.append(query.since)
    if query.until:
        parts.append("k.chart_date <= ?")
        args.append(query.until)
    if scope is not None:
        parts.append("k.chart_id IN (SELECT value FROM json_each(?))")
        args.append(json.dumps(scope))
    return " AND ".join(parts), args


async def chart_scope(call: Call, query: Query) -> tuple[Charts, list[int] | None]:
    """The index's charts, and the ids of those `sources` and `markets` leave in (None: every chart)."""
    charts = await _charts(call)
    if not query.sources and not query.markets:
        return charts, None
    return charts, sorted(i for i, c in charts.items() if _in_scope(query, *c))


# --- cursor ---------------------------------------------------------------------------------------

async def cursor_secret(call: Call) -> bytes | None:
    rows = await fetch(call, "SELECT value FROM meta WHERE name = 'cursor_secret'", [])
    return str(rows[0][0]).encode() if rows else None


def _sign(secret: bytes, body: str) -> str:
    return hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()[:24]


def make_cursor(secret: bytes, query: Query, chart_date: str, row_id: int) -> str:
    body = f"{chart_date}|{row_id}|{query.fingerprint()}"
    return base64.urlsafe_b64encode(f"{body}|{_sign(secret, body)}".encode()).decode().rstrip("=")


def read_cursor(secret: bytes | None, query: Query, raw: str) -> tuple[str, int]:
    """(chart date, row id) after which the page starts; a 422 for a malformed, altered or foreign cursor."""
    try:
        text = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode()
        chart_date, row_id, fingerprint, signature = text.split("|")
        position = (chart_date, int(row_id))
    except ValueError:
        message = "malformed cursor; pass `next_cursor` of the previous page as given"
        raise InvalidParams([value_error_item("cursor", raw, message)]) from None
    body = f"{chart_date}|{row_id}|{fingerprint}"
    if secret is None or not hmac.compare_digest(signature, _sign(secret, body)):
        raise InvalidParams([value_error_item("cursor", raw, "the cursor was altered or comes from an earlier index")])
    if fingerprint != query.fingerprint():
        raise InvalidParams([value_error_item("cursor", raw,
                                              "the cursor belongs to another query; page with the same parameters")])
    return position
