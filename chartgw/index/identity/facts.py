"""Chart facts (`include=facts`): each entry's previous rank, debut, peak, periods on chart and re-entry, computed
from the stored history of its chart in its group's own file.

A chart is a snapshot target without its `@date` suffix; its editions are its chart dates (the newest snapshot of
each). An entry is followed by the name keys its row was stored under (`entries.title_key`, `artist_key`), so a
track is the same track on every edition of one chart. Periods are editions: weeks on a weekly chart, days on a
daily one. Where the source prints its own figure (`EntryMapping.facts`: Billboard, the UK chart, Spotify), the
entry carries the source's value, and the response's `facts_disagreements` lists where the stored history says
otherwise (a history the gateway began after the chart did is the usual reason).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chartgw.store import Query, SnapshotReader

__all__ = ["FACTS_QUERIES", "FACT_NAMES", "ChartFacts", "chart_facts", "source_facts"]

FACT_NAMES = ("previous_rank", "debut_date", "peak_rank", "peak_date", "periods_on_chart", "re_entry")

_EDITIONS = ("SELECT max(id) AS id, chart_date FROM snapshots WHERE (target = ?2 OR substr(target, 1, length(?2) + 1)"
             " = ?2 || '@') AND chart_date <= ?3 GROUP BY chart_date")
_CURRENT = Query("facts_current", "SELECT rank, title_key, artist_key FROM entries WHERE snapshot_id = ? ORDER BY position")
_HISTORY = Query(
    "facts_history",
    f"WITH cur AS (SELECT DISTINCT title_key, artist_key FROM entries WHERE snapshot_id = ?1),"
    f" editions AS ({_EDITIONS})"
    " SELECT e.title_key, e.artist_key, ed.chart_date, min(e.rank) FROM editions ed"
    " JOIN entries e ON e.snapshot_id = ed.id JOIN cur ON cur.title_key = e.title_key AND cur.artist_key = e.artist_key"
    " GROUP BY e.title_key, e.artist_key, ed.chart_date ORDER BY ed.chart_date")
_PREVIOUS = Query("facts_previous_edition",
                  f"WITH editions AS ({_EDITIONS}) SELECT max(chart_date) FROM editions WHERE chart_date < ?3")
FACTS_QUERIES = (_CURRENT, _HISTORY, _PREVIOUS)


@dataclass(frozen=True, slots=True)
class ChartFacts:
    """The facts of one chart edition, by rank: what each entry of it gets."""

    by_rank: dict[int, dict[str, Any]]


async def chart_facts(reader: SnapshotReader, snapshot_id: int, target: str, chart_date: str) -> ChartFacts:
    """The facts of every entry of one stored snapshot (the edition `chart_date` of the chart `target`)."""
    chart = target.partition("@")[0]
    args = [snapshot_id, chart, chart_date]
    current = await reader.fetchall(_CURRENT, [snapshot_id])
    history: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for title_key, artist_key, day, rank in await reader.fetchall(_HISTORY, args):
        history.setdefault((title_key, artist_key), []).append((day, rank))
    previous_edition = (await reader.fetchall(_PREVIOUS, args) or [(None,)])[0][0]
    by_rank: dict[int, dict[str, Any]] = {}
    for rank, title_key, artist_key in current:
        if rank in by_rank:
            continue
        runs = history.get((title_key, artist_key)) or [(chart_date, rank)]
        ranks = dict(runs)
        previous = ranks.get(previous_edition) if previous_edition is not None else None
        peak = min(r for _, r in runs)
        by_rank[rank] = {
            "previous_rank": previous,
            "debut_date": runs[0][0],
            "peak_rank": peak,
            "peak_date": next(day for day, r in runs if r == peak),
            "periods_on_chart": len(runs),
            "re_entry": previous is None and len(runs) > 1,
        }
    return ChartFacts(by_rank)


def source_facts(record: dict[str, Any], fields: dict[str, str]) -> dict[str, Any]:
    """The facts the source printed on an entry (`EntryMapping.facts`: fact -> the record's field), where it did."""
    return {fact: record[field] for fact, field in fields.items() if record.get(field) is not None}
