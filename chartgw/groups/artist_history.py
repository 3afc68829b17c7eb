"""/artist-history-api: one artist's chart history across every group, from the artist-history index.

The group crawls nothing: its data is the index `chartgw.artist_history` builds from the other groups'
snapshot files (`<data>/artist-history-api.sqlite`, read through the platform's reader of this group's
file, so a committed index batch moves the response cache's version). `chartgw index artist-history-api`
catches the index up and `chartgw enrich artist-history-api lyrics` adds Genius ids (`artist_lyrics`); the
demo seeder runs both over the other groups' demo data (Genius answered by samples).

An artist is identified by `name`, `name_local` and any ids (a union). Names are matched on normalised keys,
widened by the alias links the charts print ("아이유(IU)"), the shipped alias table and names learned from
ids two single-artist entries share. Each key and each id parameter is a *stream*: its rows read newest
first from one key's range of the index, so a page merges the streams' heads and a coverage sums each
stream (from the sums the index keeps, where the dates allow). Array parameters take comma-separated values
(the platform keeps only the last of repeated query parameters). `/artist-history/plot` draws a history page
as SVG.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import sqlite3
from dataclasses import dataclass, field
from datetime import date, datetime
from html import escape
from itertools import pairwise
from pathlib import Path
from typing import Any

import msgspec

from chartgw import artist_history as index
from chartgw.clock import fixed
from chartgw.context import Context
from chartgw.countries import COUNTRIES, GLOBAL, country_code
from chartgw.crawl import Outcome
from chartgw.endpoints import ApiError, Call, Route
from chartgw.group import CommandArg, Group, GroupCommand
from chartgw.groups import artist_lyrics as lyrics
from chartgw.params import InvalidParams, Param, accepts, comma_separated, one_of, search_term
from chartgw.replay import replay_upstreams
from chartgw.responses import HealthHead
from chartgw.samples import genius as genius_samples
from chartgw.store import group_db_path, iso, parse_iso
from chartgw.text import artist_key
from chartgw.upstreams import genius

NAME = index.INDEX_NAME
register_sources = index.register_groups
"""The registry calls `register_sources(GROUPS)` once: the index reads every registered group with an entry mapping."""
STALE_AFTER_SECONDS = 3600
"""A source is stale in /health when a snapshot older than this is still not indexed."""

STRING_ID_PARAMS = ("isrc", "download_store_track_id", "streaming_track_id", "recognition_track_id", "video_id")
INT_LIST_PARAMS = ("analytics_track", "lyrics_song_id")
INT_PARAMS = ("analytics_artist", "lyrics_artist_id")
ID_PARAMS = ("isrc", "download_store_track_id", "streaming_track_id", "analytics_artist", "analytics_track",
             "lyrics_artist_id", "lyrics_song_id", "recognition_track_id", "video_id")
"""The spec's id parameters, in its table's order; each is the index column of the same name."""
MAX_VALUES = 100
"""Values one array parameter may list."""
MAX_KEYS = 200
"""Artist keys one query may widen to through aliases."""


# --- parameters -----------------------------------------------------------------------------------

@accepts(pattern=comma_separated("[A-Za-z0-9_.:-]+", MAX_VALUES))
def _values(raw: str) -> tuple[str, ...]:
    values = tuple(dict.fromkeys(v.strip() for v in raw.split(",") if v.strip()))
    if not values:
        raise ValueError("give at least one value (several are comma-separated)")
    if len(values) > MAX_VALUES:
        raise ValueError(f"at most {MAX_VALUES} comma-separated values")
    return values


@accepts(pattern=comma_separated("[0-9]+", MAX_VALUES))
def _int_values(raw: str) -> tuple[str, ...]:
    values = _values(raw)
    for value in values:
        try:
            int(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an integer; give integers, comma-separated") from None
    return tuple(str(int(v)) for v in values)


@accepts(pattern=lambda: comma_separated(f"(?:{one_of([g.name for g in index.source_groups()])})(?::[a-z0-9/_-]*)?",
                                          MAX_VALUES))
def _sources(raw: str) -> tuple[tuple[str, str | None], ...]:
    known = [g.name for g in index.source_groups()]
    chosen: list[tuple[str, str | None]] = []
    for value in _values(raw):
        group, _, chart = value.partition(":")
        if group not in known:
            raise ValueError(f"unknown source {group!r}; sources: {', '.join(known)} (or 'source:chart')")
        chosen.append((group, chart.strip("/") or None))
    return tuple(chosen)


@accepts(pattern=comma_separated(one_of([GLOBAL, *COUNTRIES]), MAX_VALUES))
def _markets(raw: str) -> tuple[str, ...]:
    return tuple(country_code(v) for v in _values(raw))


IDENTIFYING = ("name", "name_local", *ID_PARAMS)


def _params(paged: bool) -> tuple[Param, ...]:
    params = [
        Param("name", check=search_term, description="Artist name (any script); matched on normalised keys and aliases"),
        Param("name_local", check=search_term, description="Artist name in the local script (e.g. 아이유); a union with name"),
        Param("artist", check=search_term,
              description="Alias of `name` (the published usage example's parameter); both with different values is a 422"),
    ]
    for name in ID_PARAMS:
        if name in INT_PARAMS:
            params.append(Param(name, kind="int", description=f"{name} (integer)"))
        elif name in INT_LIST_PARAMS:
            params.append(Param(name, check=_int_values, description=f"{name}: integers, comma-separated"))
        else:
            params.append(Param(name, check=_values, description=f"{name}: values, comma-separated"))
    params += [
        Param("sources", check=_sources,
              description="Comma-separated source groups, or `group:chart` (a chart or chart prefix: korea-chart:portal-a)"),
        Param("markets", check=_markets, description="Comma-separated markets: ISO 3166-1 alpha-2 codes or 'global'"),
        Param("since", kind="date", description="First chart date, YYYY-MM-DD (inclusive)"),
        Param("until", kind="date", description="Last chart date, YYYY-MM-DD (inclusive)"),
    ]
    if paged:
        params += [
            Param("cursor", description="`next_cursor` of the previous page (opaque; valid for the same query only)"),
            Param("limit", kind="int", default=5000, ge=1, le=50000, description="Rows per page, newest first"),
        ]
    return tuple(params)


def _value_error(name: str, raw: Any, message: str) -> dict[str, Any]:
    return {"type": "value_error", "loc": ["query", name], "msg": f"Value error, {message}", "input": raw,
            "ctx": {"error": {}}}


@dataclass
class Query:
    """A validated artist query."""

    names: dict[str, str]
    """"name" / "name_local" -> the name given."""
    ids: dict[str, tuple[str, ...]]
    sources: tuple[tuple[str, str | None], ...]
    markets: tuple[str, ...]
    since: str | None
    until: str | None
    keys: dict[str, list[str]] = field(default_factory=dict)
    """"name" / "name_local" -> the artist keys it widened to."""

    def fingerprint(self) -> str:
        """What a cursor is bound to: the query without paging."""
        canonical = json.dumps([sorted(self.names.items()), sorted(self.ids.items()), self.sources, self.markets,
                                self.since, self.until], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def read_query(params: dict[str, Any]) -> Query:
    """The query of validated parameters, or a 422 for what only the combination makes wrong."""
    errors = []
    name, artist = params.get("name"), params.get("artist")
    if name is not None and artist is not None and name != artist:
        errors.append(_value_error("artist", artist, "`artist` is an alias of `name`; give one, or the same value"))
    name = name if name is not None else artist
    names = {k: v for k, v in (("name", name), ("name_local", params.get("name_local"))) if v is not None}
    ids: dict[str, tuple[str, ...]] = {}
    for kind in ID_PARAMS:
        value = params.get(kind)
        if value is not None:
            ids[kind] = (str(value),) if kind in INT_PARAMS else value
    if not names and not ids:
        errors.append({"type": "missing", "loc": ["query", "name"],
                       "msg": f"Field required: give at least one of {', '.join(IDENTIFYING)} (or artist)", "input": None})
    since, until = params.get("since"), params.get("until")
    if since is not None and until is not None and since > until:
        errors.append(_value_error("until", until, f"until ({until}) is before since ({since})"))
    if errors:
        raise InvalidParams(errors)
    return Query(names, ids, params.get("sources") or (), params.get("markets") or (), since, until)


# --- queries --------------------------------------------------------------------------------------

def _rebuilding() -> ApiError:
    """An index file of an earlier layout: the next `chartgw index` (or crawl) builds it again."""
    return ApiError(503, "The artist-history index is being rebuilt; try again shortly", {"Retry-After": "60"})


async def _fetch(call: Call, sql: str, args: list[Any]) -> list[Any]:
    try:
        return list(await call.data.reader.fetchall(sql, args))
    except sqlite3.OperationalError as exc:
        if "no such column" not in str(exc):
            raise
        raise _rebuilding() from None


def _marks(values: Any) -> str:
    return ",".join("?" * len(values))


async def widen(call: Call, name: str) -> list[str]:
    """The artist keys `name` stands for: its own, the alias links charts print, the alias table, and the
    names single-artist entries sharing an id with it are printed under (one hop)."""
    keys = index.name_keys(name)
    groups = index.alias_groups()

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
        rows = await _fetch(call, f"SELECT b FROM artist_links WHERE a IN ({_marks(frontier)})", sorted(frontier))
        frontier = {r[0] for r in rows} - keys
        keys |= frontier
    rows = await _fetch(call, "SELECT DISTINCT o.key FROM id_keys k JOIN id_keys o ON o.kind = k.kind AND o.value = k.value"
                              f" WHERE k.key IN ({_marks(keys)})", sorted(keys))
    keys = with_table(keys | {r[0] for r in rows})
    return sorted(keys)[:MAX_KEYS]


async def resolve(call: Call, query: Query) -> Query:
    """The query with the keys its names widen to, read from an index of the current layout."""
    layout = await _fetch(call, "PRAGMA user_version", [])
    if layout and layout[0][0] != index.SCHEMA_VERSION:
        raise _rebuilding()
    query.keys = {param: await widen(call, name) for param, name in query.names.items()}
    return query


Charts = dict[int, tuple[str, str, str]]
"""Chart id -> (source, chart, market): the index's `charts`."""


async def _charts(call: Call) -> Charts:
    return {r[0]: (r[1], r[2], r[3]) for r in await _fetch(call, "SELECT id, source, chart, market FROM charts", [])}


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


async def _streams(call: Call, query: Query) -> list[Stream]:
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
                      for variant, track, credits in await _fetch(
                          call, f"SELECT id, track_id, credits FROM variants WHERE {kind} IN ({_marks(values)})",
                          list(values))]
    wanted = sorted(set(by_key) | {key for *_, key in found_ids})
    ids = {key: artist for artist, key in await _fetch(
        call, f"SELECT id, key FROM artists WHERE key IN ({_marks(wanted)})", wanted)} if wanted else {}
    streams = [Stream(by_key[k], ids[k]) for k in sorted(by_key, key=lambda k: (k not in first, k)) if k in ids]
    by_id: dict[tuple[str, int], Stream] = {}
    for kind, variant, track, key in found_ids:
        if key in ids:
            stream = by_id.setdefault((kind, ids[key]), Stream([kind], ids[key]))
            stream.tracks.append(track)
            stream.variants.append(variant)
    return streams + list(by_id.values())


_ROW_OF_K = "a.chart_id = k.chart_id AND a.chart_date = k.chart_date AND a.track_id = k.track_id"
"""The appearance a key row `k` stands for (its primary key)."""


def _where(stream: Stream, query: Query, scope: list[int] | None) -> tuple[str, list[Any]]:
    """The stream's condition on `k` (its key's range), with the dates and charts asked."""
    parts: list[str] = ["k.artist_id = ?"]
    args: list[Any] = [stream.key]
    if stream.variants:
        tracks = sorted(set(stream.tracks))
        parts += [f"k.track_id IN ({_marks(tracks)})",
                  f"(SELECT variant_id FROM appearances a WHERE {_ROW_OF_K}) IN ({_marks(stream.variants)})"]
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


async def _scope(call: Call, query: Query) -> tuple[Charts, list[int] | None]:
    """The index's charts, and the ids of those `sources` and `markets` leave in (None: every chart)."""
    charts = await _charts(call)
    if not query.sources and not query.markets:
        return charts, None
    return charts, sorted(i for i, c in charts.items() if _in_scope(query, *c))


# --- cursor ---------------------------------------------------------------------------------------

async def _secret(call: Call) -> bytes | None:
    rows = await _fetch(call, "SELECT value FROM meta WHERE name = 'cursor_secret'", [])
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
        raise InvalidParams([_value_error("cursor", raw, message)]) from None
    body = f"{chart_date}|{row_id}|{fingerprint}"
    if secret is None or not hmac.compare_digest(signature, _sign(secret, body)):
        raise InvalidParams([_value_error("cursor", raw, "the cursor was altered or comes from an earlier index")])
    if fingerprint != query.fingerprint():
        raise InvalidParams([_value_error("cursor", raw, "the cursor belongs to another query; page with the same parameters")])
    return position


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


def _echo(query: Query) -> QueryEcho:
    return QueryEcho(query.names, query.keys, {k: list(v) for k, v in query.ids.items()},
                     [s if c is None else f"{s}:{c}" for s, c in query.sources], list(query.markets), query.since,
                     query.until)


def _appearance(row: Any) -> Appearance:
    (_, source, chart, market, chart_date, rank, title, artist, credits, hours, *ids) = row
    return Appearance(source, chart, market, chart_date, rank, title, artist, json.loads(credits), hours, *ids)


# --- handlers -------------------------------------------------------------------------------------

async def _page(call: Call) -> tuple[Query, list[Any], str | None]:
    """One page of an artist's rows, newest first (what the history and its plot answer), and the cursor
    of the next page: each stream's next `limit + 1` positions from its own index range, merged."""
    query = read_query(call.params)
    secret = await _secret(call)
    after = read_cursor(secret, query, call.params["cursor"]) if call.params.get("cursor") else None
    await resolve(call, query)
    limit = call.params["limit"]
    _, scope = await _scope(call, query)
    streams = await _streams(call, query) if scope != [] else []
    if not streams:
        return query, [], None
    parts: list[str] = []
    args: list[Any] = []
    for stream in streams:
        where, values = _where(stream, query, scope)
        if after is not None:
            where += " AND (k.chart_date, k.row_id) < (?, ?)"
            values += list(after)
        parts.append("SELECT * FROM (SELECT k.chart_date AS d, k.row_id AS r, k.chart_id AS c, k.track_id AS t"
                     f" FROM appearance_artists k WHERE {where} ORDER BY k.chart_date DESC, k.row_id DESC LIMIT ?)")
        args += [*values, limit + 1]
    positions = await _fetch(call, " UNION ".join(parts) + " ORDER BY d DESC, r DESC LIMIT ?", [*args, limit + 1])
    page = positions[:limit]
    rows = {r[0]: r for r in await _fetch(call, index.ROW_SELECT, [json.dumps([[c, d, t] for d, _, c, t in page])])}
    next_cursor = None
    if len(positions) > limit and secret is not None:
        next_cursor = make_cursor(secret, query, page[-1][0], page[-1][1])
    return query, [rows[r] for _, r, _, _ in page if r in rows], next_cursor


async def history(call: Call) -> HistoryResponse:
    query, page, next_cursor = await _page(call)
    return HistoryResponse(_echo(query), len(page), call.params["limit"], next_cursor, [_appearance(r) for r in page])


def _carried(group: Group) -> list[str]:
    mapping = group.entries
    return sorted(mapping.ids) if mapping is not None else []


@dataclass
class _Tally:
    """What coverage counts for one source."""

    rows: int = 0
    tracks: set[int] = field(default_factory=set)
    charts: set[str] = field(default_factory=set)
    markets: set[str] = field(default_factory=set)
    first: str | None = None
    last: str | None = None
    best: int | None = None
    params: dict[str, None] = field(default_factory=dict)


async def coverage(call: Call) -> CoverageResponse:
    """Per stream, its rows grouped by chart and track from its own index range (a row a former stream
    already counted is counted once); summed per source."""
    query = await resolve(call, read_query(call.params))
    charts, scope = await _scope(call, query)
    tallies: dict[str, _Tally] = {}
    done: list[Stream] = []
    summed = await _fetch(call, "SELECT 1 FROM meta WHERE name = 'artist_tracks' AND value = 'ok'", [])
    for stream in await _streams(call, query) if scope != [] else []:
        if summed and not done and not stream.variants:
            groups = await _summed(call, stream, query, scope)
        else:
            where, args = _where(stream, query, scope)
            repeats, repeat_args = _repeats(done)
            groups = await _fetch(call, f"SELECT k.chart_id, k.track_id, {repeats}, min(k.chart_date), max(k.chart_date),"
                                        f" min(k.rank) FROM appearance_artists k WHERE {where}"
                                        " GROUP BY k.chart_id, k.track_id", [*repeat_args, *args])
        for chart_id, track, new, first, last, best in groups:
            source, chart, market = charts[chart_id]
            tally = tallies.setdefault(source, _Tally())
            tally.rows += new
            tally.tracks.add(track)
            tally.charts.add(chart)
            tally.markets.add(market)
            tally.first = first if tally.first is None else min(tally.first, first)
            tally.last = last if tally.last is None else max(tally.last, last)
            tally.best = best if tally.best is None else min(tally.best, best)
            tally.params.update(dict.fromkeys(stream.params))
        done.append(stream)
    counts = await _indexed(call)
    requested = {s for s, _ in query.sources}
    order = {p: n for n, p in enumerate(IDENTIFYING)}
    out: list[SourceCoverage] = []
    for group in index.registered_groups():
        carried = _carried(group)
        found = tallies.get(group.name)
        if found is not None:
            out.append(SourceCoverage(group.name, True, found.rows, len(found.tracks), len(found.charts), found.first,
                                      found.last, sorted(found.markets), found.best,
                                      sorted(found.params, key=lambda p: order.get(p, 99)), carried, None))
            continue
        if group.entries is None:
            reason = "not configured: this group has no chart entries to index"
        elif requested and group.name not in requested:
            reason = "not requested: left out by `sources`"
        elif not counts.get(group.name):
            reason = "no data: nothing indexed from this source yet"
        elif not query.names and not set(query.ids) & set(carried):
            reason = (f"no ids of the kinds given: this source carries {', '.join(carried)}" if carried
                      else "no ids of the kinds given: this source carries no ids (ask by name)")
        else:
            reason = "no match: no appearance of this artist here" + (
                " within the dates and markets asked" if query.since or query.until or query.markets else "")
        out.append(SourceCoverage(group.name, False, 0, 0, 0, None, None, [], None, [], carried, reason))
    return CoverageResponse(_echo(query), sum(s.matched for s in out), sum(s.rows for s in out), out)


async def _summed(call: Call, stream: Stream, query: Query, scope: list[int] | None) -> list[Any]:
    """The first stream's rows by chart and track (it counts no repeats), from the sums the index keeps: a
    chart run wholly within the dates asked is taken as summed, one wholly outside is left out, and only the
    runs the dates cut are counted from their rows (in the dates' part of the key's range)."""
    sql = "SELECT chart_id, track_id, rows, first_date, last_date, best_rank FROM artist_tracks WHERE artist_id = ?"
    args: list[Any] = [stream.key]
    if scope is not None:
        sql += " AND chart_id IN (SELECT value FROM json_each(?))"
        args.append(json.dumps(scope))
    since, until = query.since or "0000-00-00", query.until or "9999-99-99"
    runs = await _fetch(call, sql, args)
    inside = [r for r in runs if since <= r[3] and r[4] <= until]
    cut = [[r[0], r[1]] for r in runs if r[3] < since <= r[4] or r[3] <= until < r[4]]
    if not cut:
        return inside
    where, args = _where(stream, query, scope)
    return inside + await _fetch(
        call, "SELECT k.chart_id, k.track_id, count(*), min(k.chart_date), max(k.chart_date), min(k.rank)"
              f" FROM appearance_artists k WHERE {where} AND (k.chart_id, k.track_id) IN"
              " (SELECT value ->> 0, value ->> 1 FROM json_each(?)) GROUP BY k.chart_id, k.track_id",
        [*args, json.dumps(cut)])


def _repeats(done: list[Stream]) -> tuple[str, list[Any]]:
    """The SQL counting a stream's rows (`k`) that no former stream had (all of them for the first)."""
    if not done:
        return "count(*)", []
    keys = [s.key for s in done if not s.variants]
    variants = [v for s in done for v in s.variants]
    tests: list[str] = []
    args: list[Any] = []
    if keys:
        tests.append(f"EXISTS (SELECT 1 FROM appearance_artists e WHERE e.artist_id IN ({_marks(keys)})"
                     " AND e.chart_date = k.chart_date AND e.row_id = k.row_id)")
        args += keys
    if variants:
        tests.append(f"(SELECT variant_id FROM appearances a WHERE {_ROW_OF_K}) IN ({_marks(variants)})")
        args += variants
    return f"sum(NOT ({' OR '.join(tests)}))", args


async def _indexed(call: Call) -> dict[str, int]:
    """Rows per source."""
    return {r[0]: int(r[1]) for r in await _fetch(call, "SELECT source, rows FROM sources", [])}


def _source_state(folder: Path, name: str, last: int) -> tuple[int | None, int | None, str | None]:
    """(newest snapshot id, snapshots after `last`, fetched_at of the oldest of them) of a source's file."""
    path = folder / group_db_path(name).name
    if not path.exists():
        return None, None, None
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
        try:
            newest, pending, oldest = db.execute(
                "SELECT (SELECT max(id) FROM snapshots), count(*), min(fetched_at) FROM snapshots WHERE id > ?",
                (last,)).fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None, None, None
    return newest, pending, oldest


async def health(call: Call) -> IndexHealth:
    rows = await _fetch(call, "SELECT source, last_snapshot_id, indexed_at FROM sources", [])
    indexed = {r[0]: (int(r[1]), r[2]) for r in rows}
    counts = await _indexed(call)
    statuses = []
    for group in index.source_groups():
        last, indexed_at = indexed.get(group.name, (None, None))
        newest, pending, oldest = _source_state(call.data.reader.path.parent, group.name, last or 0)
        lag = int((call.now - parse_iso(oldest)).total_seconds()) if oldest else (0 if newest is not None else None)
        stale = bool(lag and lag > STALE_AFTER_SECONDS)
        statuses.append(SourceStatus(group.name, last, newest, indexed_at, pending, lag, counts.get(group.name, 0),
                                     _carried(group), stale))
    status = "ok" if statuses and not any(s.stale for s in statuses) and indexed else "degraded"
    return IndexHealth(status, NAME, sum(counts.values()), statuses)


# --- the plot -----------------------------------------------------------------------------------

SVG = b"image/svg+xml"
PLOT_MAX_LINES = 24
"""Runs drawn (the longest); the rest are counted in the caption."""
PLOT_MAX_DOTS = 1500
"""Points marked with a dot while the drawn runs have no more than this many (beyond, lines only)."""
_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
            "#7f7f7f", "#393b79", "#637939")
_FONTS = "system-ui, 'Noto Sans', 'Noto Sans CJK KR', 'Apple SD Gothic Neo', 'Malgun Gothic', sans-serif"
"""Fonts with Hangul and kana first: titles and names are shown in their own scripts."""
_RANK_TICKS = (1, 2, 3, 5, 10, 20, 30, 50, 100, 200, 300, 500, 1000, 2000, 5000, 10000)

RunKey = tuple[str, str, str, str]
"""(source, chart, market, track): one line of the plot."""


def _runs(rows: list[Appearance]) -> list[tuple[RunKey, list[Appearance]]]:
    """The rows by track, chart and market: the longest runs first, then the highest charting."""
    runs: dict[RunKey, list[Appearance]] = {}
    for row in rows:
        runs.setdefault((row.source, row.chart, row.market, row.title or row.artist), []).append(row)
    return sorted(runs.items(), key=lambda kv: (-len(kv[1]), min(r.rank for r in kv[1]), kv[0]))


def _segments(days: list[int]) -> list[list[int]]:
    """Indexes of a run's points (sorted by day) split where the track was off the chart: a gap longer than
    twice the run's own step (a daily chart's missing days, a weekly chart's missing weeks)."""
    step = min((b - a for a, b in pairwise(days) if b > a), default=1)
    segments: list[list[int]] = [[0]]
    for i in range(1, len(days)):
        if days[i] - days[i - 1] > 2 * step:
            segments.append([])
        segments[-1].append(i)
    return segments


def _date_ticks(first: int, last: int) -> list[tuple[int, str]]:
    """(ordinal, label) of date ticks: days, weeks, months or years, whichever gives 2 to 8 of them."""
    span = last - first
    start, end = date.fromordinal(first), date.fromordinal(last)
    if span <= 14:
        ticks = [(d, date.fromordinal(d).isoformat()) for d in range(first, last + 1)]
    elif span <= 120:
        ticks = [(d, date.fromordinal(d).isoformat()) for d in range(first, last + 1) if date.fromordinal(d).weekday() == 0]
    elif span <= 1100:
        months = [date(y, m, 1) for y in range(start.year, end.year + 1) for m in range(1, 13)]
        ticks = [(m.toordinal(), m.strftime("%Y-%m")) for m in months if first <= m.toordinal() <= last]
    else:
        ticks = [(date(y, 1, 1).toordinal(), str(y)) for y in range(start.year, end.year + 1)
                 if first <= date(y, 1, 1).toordinal() <= last]
    every = max(1, math.ceil(len(ticks) / 8))
    return ticks[::every] or [(first, start.isoformat())]


def render_plot(title: str, rows: list[Appearance], *, more: bool = False, width: int = 1000, height: int = 560) -> str:
    """An SVG of chart runs, readable at a glance: chart date across, rank down (rank 1 on top, a log
    scale so the top of a 200-row chart is not squeezed), one line per track, chart and market (broken
    where the track left the chart), the longest runs first with a legend; each line's `<title>` names it."""
    runs = _runs(rows)
    shown, hidden = runs[:PLOT_MAX_LINES], max(0, len(runs) - PLOT_MAX_LINES)
    left, right, top, bottom = 64, 340, 52, 52
    plot_w, plot_h = width - left - right, height - top - bottom
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}"'
             f' font-family="{_FONTS}" font-size="11">',
             f'<title>{escape(title)}</title>',
             f'<rect width="{width}" height="{height}" fill="#fff"/>',
             f'<text x="{left}" y="22" font-size="15" font-weight="bold">{escape(title)}</text>']
    if not rows:
        parts.append(f'<text x="{left}" y="{top + 20}">No chart appearances matched.</text></svg>')
        return "".join(parts)
    charts = len({(r.source, r.chart) for r in rows})
    caption = (f"{len(rows)} appearances, {len(runs)} runs on {charts} charts in {len({r.source for r in rows})} sources"
               + (f"; the {PLOT_MAX_LINES} longest runs drawn" if hidden else "")
               + ("; older rows on the next page (cursor)" if more else ""))
    parts.append(f'<text x="{left}" y="38" fill="#555">{escape(caption)}</text>')
    ordinals = [date.fromisoformat(r.chart_date).toordinal() for r in rows]
    first, last = min(ordinals), max(ordinals)
    worst = max(10, max(r.rank for r in rows))

    def x(day: int) -> float:
        return left + (day - first) / (last - first) * plot_w if last > first else left + plot_w / 2

    def y(rank: int) -> float:
        return top + math.log(max(rank, 1)) / math.log(worst) * plot_h

    parts.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#bbb"/>')
    for tick in (t for t in _RANK_TICKS if t <= worst):
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#eee"/>'
                     f'<text class="rank-tick" x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick}</text>')
    for day, label in _date_ticks(first, last):
        parts.append(f'<line x1="{x(day):.1f}" x2="{x(day):.1f}" y1="{top}" y2="{top + plot_h}" stroke="#f2f2f2"/>'
                     f'<text class="date-tick" x="{x(day):.1f}" y="{top + plot_h + 16}" text-anchor="middle">{label}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 10}" text-anchor="middle" fill="#555">chart date</text>'
                 f'<text x="16" y="{top + plot_h / 2:.1f}" text-anchor="middle" fill="#555"'
                 f' transform="rotate(-90 16 {top + plot_h / 2:.1f})">rank (1 at the top)</text>')
    dots = sum(len(points) for _, points in shown) <= PLOT_MAX_DOTS
    for n, ((source, chart, market, track), points) in enumerate(shown):
        color = _PALETTE[n % len(_PALETTE)]
        dash = '' if n < len(_PALETTE) else ' stroke-dasharray="5 3"'
        ordered = sorted(points, key=lambda p: (p.chart_date, p.rank))
        coords = [(x(date.fromisoformat(p.chart_date).toordinal()), y(p.rank)) for p in ordered]
        days = [date.fromisoformat(p.chart_date).toordinal() for p in ordered]
        path = " ".join("M" + " L".join(f"{coords[i][0]:.1f} {coords[i][1]:.1f}" for i in segment)
                        + (" l0 0" if len(segment) == 1 else "") for segment in _segments(days))
        label = f"{track} - {source}:{chart} ({market})"
        best = min(p.rank for p in points)
        parts.append(f'<path class="run" d="{path}" fill="none" stroke="{color}" stroke-width="1.8"'
                     f' stroke-linejoin="round" stroke-linecap="round"{dash}>'
                     f'<title>{escape(label)}: {len(points)} days, best rank {best}</title></path>')
        if dots:
            parts += [f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="2.2" fill="{color}"/>' for cx, cy in coords]
        ly = top + n * 17
        short = f"{_clip(track, 18)} - {_clip(f'{source}:{chart} ({market})', 27)}"  # the chart stays readable
        parts.append(f'<line x1="{left + plot_w + 12}" x2="{left + plot_w + 30}" y1="{ly + 5}" y2="{ly + 5}" stroke="{color}"'
                     f' stroke-width="3"{dash}/><text x="{left + plot_w + 36}" y="{ly + 9}" font-size="10">'
                     f'{escape(short)}</text>')
    if hidden:
        parts.append(f'<text x="{left + plot_w + 12}" y="{top + len(shown) * 17 + 12}" fill="#555">'
                     f'and {hidden} shorter runs</text>')
    parts.append("</svg>")
    return "".join(parts)


def _clip(text: str, most: int) -> str:
    return text if len(text) <= most else text[:most - 1] + "…"


def _plot_title(query: Query) -> str:
    named = " / ".join(dict.fromkeys(query.names.values()))
    ids = ", ".join(f"{k}={','.join(v)}" for k, v in query.ids.items())
    return "Chart history: " + " + ".join(t for t in (named, ids) if t)


async def plot(call: Call) -> str:
    """`/artist-history/plot`: the rows of the same /artist-history page, drawn."""
    query, page, next_cursor = await _page(call)
    return render_plot(_plot_title(query), [_appearance(r) for r in page], more=next_cursor is not None)


# --- the route table ------------------------------------------------------------------------------

ROUTES: tuple[Route, ...] = (
    Route("/health", health, public=True, cache_ttl=5, errors=(), response=IndexHealth,
          summary="The supported sources (groups with an entry mapping), each with its last indexed snapshot and lag"),
    Route("/artist-history", history, _params(True), response=HistoryResponse, errors=(422,),
          summary="An artist's chart appearances across every source, newest first, paged by an opaque cursor"),
    Route("/artist-history/plot", plot, _params(True), errors=(422,), media_type=SVG,
          summary="The rows of the same /artist-history page as an SVG: chart date across, rank down (1 on top), "
                  "one line per track, chart and market"),
    Route("/artist-history/coverage", coverage, _params(False), response=CoverageResponse, errors=(422,),
          summary="Per source: matched rows, tracks, charts, dates, markets, best rank, what matched; or why nothing did"),
)


# --- CLI and demo ---------------------------------------------------------------------------------

def _outcomes(results: list[index.IndexResult]) -> list[Outcome]:
    return [Outcome(r.source, "ok" if r.error is None else "failed", r.rows, r.last_snapshot_id, error=r.error)
            for r in results]


def run_index(ctx: Context, values: dict[str, Any]) -> list[Outcome]:
    """`chartgw index artist-history-api [--rebuild yes]`."""
    results = index.rebuild(now=ctx.clock) if values.get("rebuild") == "yes" else index.index_all(now=ctx.clock)
    return _outcomes(results)


DEMO_LYRICS_TRACKS = 200
"""Tracks the demo asks the sample Genius answers for (the most charted)."""


async def seed(now: datetime) -> list[Outcome]:
    """Index the other groups' demo data (seeded before this group: it is registered last), then resolve the
    lyrics ids of the most charted tracks with `chartgw enrich`'s code against sample Genius answers."""
    outcomes = _outcomes(index.index_all(now=fixed(now)))
    db = index.open_index()
    try:
        tracks = index.lyrics_candidates(db, iso(now), DEMO_LYRICS_TRACKS)
        with replay_upstreams({genius.UPSTREAM: genius_samples.search_replies([(t.title, t.artist) for t in tracks],
                                                                              "demo")}):
            matched, missed, stopped = lyrics.enrich(db, "demo", limit=DEMO_LYRICS_TRACKS, delay=0, now=fixed(now))
    finally:
        db.close()
    return [*outcomes, Outcome(f"lyrics: {matched} matched, {missed} missed", "failed" if stopped else "ok",
                               matched + missed, error=stopped)]


GROUP = Group(
    name=NAME,
    title="Artist history (every chart, every source)",
    description="One artist's chart history across every group, joined by names in every script and by ids: "
                "one row per appearance (source, chart, market, date, rank, title, credited artists, ids), sub-daily "
                "charts folded to a day, paged by a stable cursor; /artist-history/coverage says what each source had.",
    routes=ROUTES,
    upstreams=(genius.UPSTREAM,),
    commands=(
        GroupCommand("index", "catch the artist-history index up with every group's snapshots", args=(
            CommandArg("rebuild", "'yes' drops the index and builds it again from the groups' files",
                       choices=("yes", "no"), default="no"),
        ), run=run_index),
        GroupCommand("enrich", "resolve Genius song and artist ids for indexed tracks without them", args=(
            CommandArg("what", "what to resolve: lyrics (Genius song and artist ids)", positional=True,
                       type=lyrics.lyrics_only),
            CommandArg("limit", f"tracks to ask for, the most charted first (default {lyrics.DEFAULT_LIMIT})", type=int,
                       default=lyrics.DEFAULT_LIMIT),
        ), run=lyrics.run_enrich, lock=False),
    ),
    settings=(index.ALIASES_FILE_SETTING, *lyrics.SETTINGS),
    seeder=seed,
    entries=None,
)
