"""/artist-history-api: one artist's chart history across every group, from the artist-history index.

The group crawls nothing: its data is the index `chartgw.artist_history` builds from the other groups'
snapshot files (`<data>/artist-history-api.sqlite`, read through the platform's reader of this group's
file, so a committed index batch moves the response cache's version). `chartgw index artist-history-api`
catches the index up; the demo seeder runs it over the other groups' demo data.

An artist is identified by `name`, `name_local` and any ids (a union). Names are matched on normalised keys,
widened by the alias links the charts print ("아이유(IU)"), the shipped alias table and names learned from
ids two single-artist entries share. Array parameters take comma-separated values (the platform keeps only
the last of repeated query parameters).
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
from pathlib import Path
from typing import Any

import msgspec

from chartgw import artist_history as index
from chartgw.clock import fixed
from chartgw.countries import country_code
from chartgw.crawl import Outcome
from chartgw.endpoints import Call, Route
from chartgw.group import CommandArg, Group, GroupCommand
from chartgw.params import InvalidParams, Param, search_term
from chartgw.responses import HealthHead
from chartgw.store import group_db_path, parse_iso

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

def _values(raw: str) -> tuple[str, ...]:
    values = tuple(dict.fromkeys(v.strip() for v in raw.split(",") if v.strip()))
    if not values:
        raise ValueError("give at least one value (several are comma-separated)")
    if len(values) > MAX_VALUES:
        raise ValueError(f"at most {MAX_VALUES} comma-separated values")
    return values


def _int_values(raw: str) -> tuple[str, ...]:
    values = _values(raw)
    for value in values:
        try:
            int(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an integer; give integers, comma-separated") from None
    return tuple(str(int(v)) for v in values)


def _sources(raw: str) -> tuple[tuple[str, str | None], ...]:
    known = [g.name for g in index.source_groups()]
    chosen: list[tuple[str, str | None]] = []
    for value in _values(raw):
        group, _, chart = value.partition(":")
        if group not in known:
            raise ValueError(f"unknown source {group!r}; sources: {', '.join(known)} (or 'source:chart')")
        chosen.append((group, chart.strip("/") or None))
    return tuple(chosen)


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

async def _fetch(call: Call, sql: str, args: list[Any]) -> list[Any]:
    return list(await call.data.reader.fetchall(sql, args))


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
    query.keys = {param: await widen(call, name) for param, name in query.names.items()}
    return query


def _conditions(query: Query) -> list[tuple[str, str, list[Any]]]:
    """(parameter, SQL condition on `a`, arguments) for each identifying parameter given."""
    conditions = []
    for param, keys in query.keys.items():
        conditions.append((param, f"a.id IN (SELECT row_id FROM appearance_artists WHERE key IN ({_marks(keys)}))", keys))
    for kind, values in query.ids.items():
        conditions.append((kind, f"a.{kind} IN ({_marks(values)})", list(values)))
    return conditions


def _filters(query: Query) -> tuple[str, list[Any]]:
    parts: list[str] = []
    args: list[Any] = []
    if query.sources:
        scope = []
        for source, chart in query.sources:
            if chart is None:
                scope.append("a.source = ?")
                args.append(source)
            else:
                scope.append("(a.source = ? AND (a.chart = ? OR substr(a.chart, 1, length(?) + 1) = ? || '/'))")
                args += [source, chart, chart, chart]
        parts.append("(" + " OR ".join(scope) + ")")
    if query.markets:
        parts.append(f"a.market IN ({_marks(query.markets)})")
        args += list(query.markets)
    if query.since:
        parts.append("a.chart_date >= ?")
        args.append(query.since)
    if query.until:
        parts.append("a.chart_date <= ?")
        args.append(query.until)
    return " AND ".join(parts) or "1", args


def _matching(query: Query) -> tuple[str, list[Any]]:
    conditions = _conditions(query)
    where, args = _filters(query)
    return "(" + " OR ".join(c for _, c, _ in conditions) + f") AND {where}", [a for _, _, x in conditions for a in x] + args


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

async def history(call: Call) -> HistoryResponse:
    query = read_query(call.params)
    secret = await _secret(call)
    after = read_cursor(secret, query, call.params["cursor"]) if call.params.get("cursor") else None
    await resolve(call, query)
    limit = call.params["limit"]
    where, args = _matching(query)
    if after is not None:
        where += " AND (a.chart_date, a.id) < (?, ?)"
        args += list(after)
    rows = await _fetch(call, f"SELECT {', '.join(f'a.{c.strip()}' for c in index.ROW_COLUMNS.split(','))}"
                              f" FROM appearances a WHERE {where} ORDER BY a.chart_date DESC, a.id DESC LIMIT ?",
                        [*args, limit + 1])
    page = rows[:limit]
    next_cursor = None
    if len(rows) > limit and secret is not None:
        next_cursor = make_cursor(secret, query, page[-1][4], page[-1][0])
    return HistoryResponse(_echo(query), len(page), limit, next_cursor, [_appearance(r) for r in page])


def _carried(group: Group) -> list[str]:
    mapping = group.entries
    return sorted(mapping.ids) if mapping is not None else []


async def coverage(call: Call) -> CoverageResponse:
    query = await resolve(call, read_query(call.params))
    where, args = _matching(query)
    summary = {r[0]: r for r in await _fetch(call,
        "SELECT a.source, count(*), count(DISTINCT a.track_key), count(DISTINCT a.chart), min(a.chart_date),"
        f" max(a.chart_date), min(a.rank), group_concat(DISTINCT a.market) FROM appearances a WHERE {where}"
        " GROUP BY a.source", args)}
    matched_by: dict[str, list[str]] = {}
    filters, filter_args = _filters(query)
    for param, condition, values in _conditions(query):
        for row in await _fetch(call, f"SELECT DISTINCT a.source FROM appearances a WHERE {condition} AND {filters}",
                                [*values, *filter_args]):
            matched_by.setdefault(row[0], []).append(param)
    indexed = {r[0]: int(r[1]) for r in await _fetch(call, "SELECT source, count(*) FROM appearances GROUP BY source", [])}
    requested = {s for s, _ in query.sources}
    out: list[SourceCoverage] = []
    for group in index.registered_groups():
        carried = _carried(group)
        row = summary.get(group.name)
        if row is not None:
            out.append(SourceCoverage(group.name, True, row[1], row[2], row[3], row[4], row[5],
                                      sorted(str(row[7]).split(",")), row[6], matched_by.get(group.name, []), carried, None))
            continue
        if group.entries is None:
            reason = "not configured: this group has no chart entries to index"
        elif requested and group.name not in requested:
            reason = "not requested: left out by `sources`"
        elif not indexed.get(group.name):
            reason = "no data: nothing indexed from this source yet"
        elif not query.names and not set(query.ids) & set(carried):
            reason = (f"no ids of the kinds given: this source carries {', '.join(carried)}" if carried
                      else "no ids of the kinds given: this source carries no ids (ask by name)")
        else:
            reason = "no match: no appearance of this artist here" + (
                " within the dates and markets asked" if query.since or query.until or query.markets else "")
        out.append(SourceCoverage(group.name, False, 0, 0, 0, None, None, [], None, [], carried, reason))
    return CoverageResponse(_echo(query), sum(s.matched for s in out), sum(s.rows for s in out), out)


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
    counts = {r[0]: int(r[1]) for r in await _fetch(call, "SELECT source, count(*) FROM appearances GROUP BY source", [])}
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

PLOT_MAX_ROWS = 20000
PLOT_MAX_LINES = 24
"""Runs drawn (the longest); the rest are counted in the caption."""
_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
            "#7f7f7f", "#393b79", "#637939")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def render_plot(title: str, rows: list[Appearance], width: int = 960, height: int = 540) -> str:
    """An SVG of chart runs: chart date across, rank down (rank 1 on top, log scale), one line per track,
    chart and market, the longest runs first with a legend."""
    runs: dict[tuple[str, str, str, str], list[Appearance]] = {}
    for row in rows:
        runs.setdefault((row.source, row.chart, row.market, row.title or row.artist), []).append(row)
    ordered = sorted(runs.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    shown, hidden = ordered[:PLOT_MAX_LINES], len(ordered) - PLOT_MAX_LINES
    left, right, top, bottom = 48, 300, 36, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}"'
             ' font-family="sans-serif" font-size="11">',
             f'<rect width="{width}" height="{height}" fill="#fff"/>',
             f'<text x="{left}" y="20" font-size="14" font-weight="bold">{_escape(title)}</text>']
    if not rows:
        parts.append(f'<text x="{left}" y="{top + 20}">No chart appearances matched.</text></svg>')
        return "".join(parts)
    days = [date.fromisoformat(r.chart_date).toordinal() for r in rows]
    first, last = min(days), max(days)
    worst = max(r.rank for r in rows)
    def x(chart_date: str) -> float:
        span = max(last - first, 1)
        return left + (date.fromisoformat(chart_date).toordinal() - first) / span * plot_w if last > first else left + plot_w / 2

    def y(rank: int) -> float:
        return top + math.log(rank) / max(math.log(max(worst, 2)), 1e-9) * plot_h

    parts.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#ccc"/>')
    for tick in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000):
        if tick <= worst:
            parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#eee"/>'
                         f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick}</text>')
    parts.append(f'<text x="{left}" y="{height - 14}">{date.fromordinal(first).isoformat()}</text>'
                 f'<text x="{left + plot_w}" y="{height - 14}" text-anchor="end">{date.fromordinal(last).isoformat()}</text>')
    for n, ((source, chart, market, track), points) in enumerate(shown):
        color = _PALETTE[n % len(_PALETTE)]
        coords = sorted((x(p.chart_date), y(p.rank)) for p in points)
        if len(coords) > 1:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py in coords)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.5"/>')
        parts += [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2.5" fill="{color}"/>' for px, py in coords]
        label = _escape(f"{track} - {source}:{chart} ({market})")
        parts.append(f'<rect x="{left + plot_w + 12}" y="{top + n * 16}" width="10" height="10" fill="{color}"/>'
                     f'<text x="{left + plot_w + 26}" y="{top + n * 16 + 9}">{label[:60]}</text>')
    if hidden > 0:
        parts.append(f'<text x="{left + plot_w + 12}" y="{top + len(shown) * 16 + 12}">and {hidden} more runs</text>')
    parts.append("</svg>")
    return "".join(parts)


async def plot(call: Call) -> bytes:
    """The SVG of `/artist-history/plot` (same parameters as the history; its newest PLOT_MAX_ROWS rows).
    NOTE: not routed yet: the platform encodes every handler result as JSON (see the report)."""
    query = await resolve(call, read_query(call.params))
    where, args = _matching(query)
    rows = await _fetch(call, f"SELECT {', '.join(f'a.{c.strip()}' for c in index.ROW_COLUMNS.split(','))}"
                              f" FROM appearances a WHERE {where} ORDER BY a.chart_date DESC, a.id DESC LIMIT ?",
                        [*args, PLOT_MAX_ROWS])
    title = " / ".join(query.names.values()) or ", ".join(f"{k}={','.join(v)}" for k, v in query.ids.items())
    return render_plot(f"Chart history: {title}", [_appearance(r) for r in rows]).encode()


# --- the route table ------------------------------------------------------------------------------

ROUTES: tuple[Route, ...] = (
    Route("/health", health, public=True, cache_ttl=5, errors=(), response=IndexHealth,
          summary="The supported sources (groups with an entry mapping), each with its last indexed snapshot and lag"),
    Route("/artist-history", history, _params(True), response=HistoryResponse, errors=(422,),
          summary="An artist's chart appearances across every source, newest first, paged by an opaque cursor"),
    Route("/artist-history/coverage", coverage, _params(False), response=CoverageResponse, errors=(422,),
          summary="Per source: matched rows, tracks, charts, dates, markets, best rank, what matched; or why nothing did"),
)


# --- CLI and demo ---------------------------------------------------------------------------------

def _outcomes(results: list[index.IndexResult]) -> list[Outcome]:
    return [Outcome(r.source, "ok" if r.error is None else "failed", r.rows, r.last_snapshot_id, error=r.error)
            for r in results]


def run_index(values: dict[str, Any]) -> list[Outcome]:
    """`chartgw index artist-history-api [--rebuild yes]`."""
    results = index.rebuild() if values.get("rebuild") == "yes" else index.index_all()
    return _outcomes(results)


async def seed(now: datetime) -> list[Outcome]:
    """Index the other groups' demo data (seeded before this group: it is registered last)."""
    return _outcomes(index.index_all(now=fixed(now)))


GROUP = Group(
    name=NAME,
    title="Artist history (every chart, every source)",
    description="One artist's chart history across every group, joined by names in every script and by ids: "
                "one row per appearance (source, chart, market, date, rank, title, credited artists, ids), sub-daily "
                "charts folded to a day, paged by a stable cursor; /artist-history/coverage says what each source had.",
    routes=ROUTES,
    commands=(GroupCommand("index", "catch the artist-history index up with every group's snapshots", args=(
        CommandArg("rebuild", "'yes' drops the index and builds it again from the groups' files",
                   choices=("yes", "no"), default="no"),
    ), run=run_index),),
    settings=(index.ALIASES_FILE_SETTING,),
    seeder=seed,
    entries=None,
)
