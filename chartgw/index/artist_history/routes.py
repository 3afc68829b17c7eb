"""/artist-history handlers (history pages, coverage, health, the plot) and the route table."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chartgw.api.endpoints import Call, Route
from chartgw.api.group import Group
from chartgw.api.responses import health_route
from chartgw.index import history as index
from chartgw.index.artist_history.plot import SVG, render_plot
from chartgw.index.artist_history.query import IDENTIFYING, NAME, STALE_AFTER_SECONDS, Query, read_query, route_params
from chartgw.index.artist_history.responses import (
    CoverageResponse,
    HistoryResponse,
    IndexHealth,
    SourceCoverage,
    SourceStatus,
    echo_of,
    to_appearances,
)
from chartgw.index.artist_history.storage import (
    ROW_OF_K,
    Stream,
    chart_scope,
    cursor_secret,
    fetch,
    make_cursor,
    marks,
    query_streams,
    read_cursor,
    resolve,
    stream_where,
)
from chartgw.store import parse_iso, read_once, tables

# --- handlers -------------------------------------------------------------------------------------

async def _page(call: Call) -> tuple[Query, list[Any], str | None]:
    """One page of an artist's rows, newest first (what the history and its plot answer), and the cursor
    of the next page: each stream's next `limit + 1` positions from its own index range, merged."""
    query = read_query(call.params)
    secret = await cursor_secret(call)
    after = read_cursor(secret, query, call.params["cursor"]) if call.params.get("cursor") else None
    await resolve(call, query)
    limit = call.params["limit"]
    _, scope = await chart_scope(call, query)
    streams = await query_streams(call, query) if scope != [] else []
    if not streams:
        return query, [], None
    parts: list[str] = []
    args: list[Any] = []
    for stream in streams:
        where, values = stream_where(stream, query, scope)
        if after is not None:
            where += " AND (k.chart_date, k.row_id) < (?, ?)"
            values += list(after)
        parts.append("SELECT * FROM (SELECT k.chart_date AS d, k.row_id AS r, k.chart_id AS c, k.track_id AS t"
                     f" FROM appearance_artists k WHERE {where} ORDER BY k.chart_date DESC, k.row_id DESC LIMIT ?)")
        args += [*values, limit + 1]
    positions = await fetch(call, " UNION ".join(parts) + " ORDER BY d DESC, r DESC LIMIT ?", [*args, limit + 1])
    page = positions[:limit]
    rows = {r[0]: r for r in await fetch(call, index.ROW_SELECT, [json.dumps([[c, d, t] for d, _, c, t in page])])}
    next_cursor = None
    if len(positions) > limit and secret is not None:
        next_cursor = make_cursor(secret, query, page[-1][0], page[-1][1])
    return query, [rows[r] for _, r, _, _ in page if r in rows], next_cursor


async def history(call: Call) -> HistoryResponse:
    query, page, next_cursor = await _page(call)
    rows = await asyncio.to_thread(to_appearances, page)
    return HistoryResponse(echo_of(query), len(page), call.params["limit"], next_cursor, rows)


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
    charts, scope = await chart_scope(call, query)
    tallies: dict[str, _Tally] = {}
    done: list[Stream] = []
    summed = await fetch(call, "SELECT 1 FROM meta WHERE name = 'artist_tracks' AND value = 'ok'", [])
    for stream in await query_streams(call, query) if scope != [] else []:
        if summed and not done and not stream.variants:
            groups = await _summed(call, stream, query, scope)
        else:
            where, args = stream_where(stream, query, scope)
            repeats, repeat_args = _repeats(done)
            groups = await fetch(call, f"SELECT k.chart_id, k.track_id, {repeats}, min(k.chart_date), max(k.chart_date),"
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
    return CoverageResponse(echo_of(query), sum(s.matched for s in out), sum(s.rows for s in out), out)


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
    runs = await fetch(call, sql, args)
    inside = [r for r in runs if since <= r[3] and r[4] <= until]
    cut = [[r[0], r[1]] for r in runs if r[3] < since <= r[4] or r[3] <= until < r[4]]
    if not cut:
        return inside
    where, args = stream_where(stream, query, scope)
    return inside + await fetch(
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
        tests.append(f"EXISTS (SELECT 1 FROM appearance_artists e WHERE e.artist_id IN ({marks(keys)})"
                     " AND e.chart_date = k.chart_date AND e.row_id = k.row_id)")
        args += keys
    if variants:
        tests.append(f"(SELECT variant_id FROM appearances a WHERE {ROW_OF_K}) IN ({marks(variants)})")
        args += variants
    return f"sum(NOT ({' OR '.join(tests)}))", args


async def _indexed(call: Call) -> dict[str, int]:
    """Rows per source."""
    return {r[0]: int(r[1]) for r in await fetch(call, "SELECT source, rows FROM sources", [])}


def _source_states(folder: Path, marks: dict[str, int]) -> dict[str, tuple[int | None, int | None, str | None]]:
    """Per source: (newest snapshot id, snapshots after its mark, fetched_at of the oldest of them) of its file.
    Synchronous, a connection per file: run in a worker thread, never on the event loop."""
    states: dict[str, tuple[int | None, int | None, str | None]] = {}
    for name, last in marks.items():
        try:
            rows = read_once(folder / f"{name}.sqlite", tables.PENDING_AFTER, (last,), timeout=5.0)
        except sqlite3.Error:
            rows = None
        states[name] = rows[0] if rows else (None, None, None)
    return states


async def health(call: Call) -> IndexHealth:
    rows = await fetch(call, "SELECT source, last_snapshot_id, indexed_at FROM sources", [])
    indexed = {r[0]: (int(r[1]), r[2]) for r in rows}
    counts = await _indexed(call)
    statuses = []
    groups = index.source_groups()
    states = await asyncio.to_thread(_source_states, call.data.reader.path.parent,
                                     {g.name: indexed.get(g.name, (0, None))[0] for g in groups})
    for group in groups:
        last, indexed_at = indexed.get(group.name, (None, None))
        newest, pending, oldest = states[group.name]
        lag = int((call.now - parse_iso(oldest)).total_seconds()) if oldest else (0 if newest is not None else None)
        stale = bool(lag and lag > STALE_AFTER_SECONDS)
        statuses.append(SourceStatus(group.name, last, newest, indexed_at, pending, lag, counts.get(group.name, 0),
                                     _carried(group), stale))
    status = "ok" if statuses and not any(s.stale for s in statuses) and indexed else "degraded"
    return IndexHealth(status, NAME, sum(counts.values()), statuses)


def _plot_title(query: Query) -> str:
    named = " / ".join(dict.fromkeys(query.names.values()))
    ids = ", ".join(f"{k}={','.join(v)}" for k, v in query.ids.items())
    return "Chart history: " + " + ".join(t for t in (named, ids) if t)


async def plot(call: Call) -> str:
    """`/artist-history/plot`: the rows of the same /artist-history page, drawn."""
    query, page, next_cursor = await _page(call)
    # Drawing thousands of rows takes tens of milliseconds: not on the event loop.
    return await asyncio.to_thread(lambda: render_plot(_plot_title(query), to_appearances(page),
                                                       more=next_cursor is not None))


# --- the route table ------------------------------------------------------------------------------

ROUTES: tuple[Route, ...] = (
    health_route(NAME, None, "The supported sources (groups with an entry mapping), each with its last indexed snapshot and lag",
                 health=health, response=IndexHealth),
    Route("/artist-history", history, route_params(True), rows="rows", response=HistoryResponse, errors=(422,),
          summary="An artist's chart appearances across every source, newest first, paged by an opaque cursor"),
    Route("/artist-history/plot", plot, route_params(True), errors=(422,), media_type=SVG,
          summary="The rows of the same /artist-history page as an SVG: chart date across, rank down (1 on top), "
                  "one line per track, chart and market"),
    Route("/artist-history/coverage", coverage, route_params(False), rows="sources", response=CoverageResponse, errors=(422,),
          summary="Per source: matched rows, tracks, charts, dates, markets, best rank, what matched; or why nothing did"),
)
