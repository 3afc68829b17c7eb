"""/uk-charts' storage: its own queries over the stored weeks (the store answers the rest: coverage,
neighbouring weeks, a week's snapshot), and the checks of a chart key against what is held."""

from __future__ import annotations

from chartgw.api.endpoints import Call, not_found
from chartgw.groups.uk_charts.charts import CHARTS_SETTING, TARGET
from chartgw.store import S_ROW, Query, SnapshotReader, SnapshotRow, Storage
from chartgw.upstreams.officialcharts import CHARTS_BY_KEY

# --- queries ----------------------------------------------------------------------------------------

WEEKS = Query("weeks", "SELECT DISTINCT chart_date, meta FROM snapshots WHERE target = ?")
"""Every week held of a chart: its start and its meta (which holds its end)."""
SEARCH = Query("search", f"SELECT {S_ROW}, e.record FROM entries e JOIN snapshots s ON s.id = e.snapshot_id"
                         " WHERE s.target GLOB ?1 AND e.search_key LIKE ?2 ESCAPE '\\' AND s.id = (SELECT max(x.id)"
                         " FROM snapshots x WHERE x.target = s.target AND x.chart_date = s.chart_date)"
                         " ORDER BY s.chart_date DESC, s.target, e.position LIMIT ?3")
"""Entries containing a needle (`like_pattern`) in the week held of every week of the charts matching a GLOB: newest
week first, then by chart and position."""
STORAGE = Storage(queries=(WEEKS, SEARCH))

# --- reads ----------------------------------------------------------------------------------------


async def latest_rows(reader: SnapshotReader) -> dict[str, SnapshotRow]:
    """The newest week of every target."""
    return {row.target: row for row in await reader.latest_per_target()}


async def checked_chart_key(call: Call, key: str | None) -> str | None:
    """`key` when it is a configured chart or one with stored weeks; a 404 naming /uk-charts/charts otherwise."""
    if key is None or key in call.settings.get(CHARTS_SETTING):
        return key
    if key not in CHARTS_BY_KEY:
        raise not_found(f"Unknown chart key {key!r}; the chart keys are listed at /uk-charts/charts")
    if await call.data.reader.latest(TARGET.make(key)) is None:
        raise not_found(f"Chart {key!r} is not configured (CHARTGW_UK_CHARTS) and has no stored weeks; "
                        "see /uk-charts/charts")
    return key
