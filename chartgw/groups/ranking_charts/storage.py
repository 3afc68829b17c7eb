"""/ranking-charts' own query (everything else it reads is the store's): its search, in its own order."""

from __future__ import annotations

from chartgw.store import Query, Storage

SEARCH = Query("search", "SELECT s.target, s.chart_date, e.rank, e.record FROM entries e JOIN snapshots s"
                         " ON s.id = e.snapshot_id WHERE s.id IN (SELECT max(id) FROM snapshots WHERE target GLOB ?1"
                         " GROUP BY target, chart_date) AND e.search_key LIKE ?2 ESCAPE '\\'"
                         " ORDER BY s.chart_date DESC, e.rank, s.target LIMIT ?3")
"""Entries containing a needle (`like_pattern`) in the week held of every chart date of the charts matching a GLOB:
newest week first, then best rank."""
STORAGE = Storage(queries=(SEARCH,))
