"""/uk-charts reads of the stored weeks: which weeks each chart holds, and one week's snapshot."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from chartgw.endpoints import Call, not_found
from chartgw.groups.uk_charts.charts import TARGET, configured_charts
from chartgw.store import SnapshotReader, SnapshotRow
from chartgw.upstreams.officialcharts import (
    CHARTS_BY_KEY,
)

# --- reads ----------------------------------------------------------------------------------------

ROW_COLUMNS = ", ".join(f"s.{c.strip()}" for c in SnapshotRow.COLUMNS.split(","))


def row_with_meta(values: Iterable[Any]) -> tuple[SnapshotRow, bytes | None]:
    items = tuple(values)
    return SnapshotRow(*items[:7]), items[7]


async def latest_rows(reader: SnapshotReader) -> dict[str, tuple[SnapshotRow, bytes | None]]:
    """The newest week of every target, with its meta."""
    rows = await reader.fetchall(
        f"SELECT {SnapshotRow.COLUMNS}, meta FROM (SELECT *, row_number() OVER (PARTITION BY target ORDER BY"
        " chart_date DESC, id DESC) AS newest FROM snapshots) WHERE newest = 1")
    return {row[1]: row_with_meta(row) for row in rows}


async def coverage_by_target(reader: SnapshotReader) -> dict[str, tuple[str, str, int]]:
    """Per target: (first week start, last week start, weeks held)."""
    rows = await reader.fetchall(
        "SELECT target, min(chart_date), max(chart_date), count(DISTINCT chart_date) FROM snapshots GROUP BY target")
    return {row[0]: (row[1], row[2], row[3]) for row in rows}


async def checked_chart_key(call: Call, key: str | None) -> str | None:
    """`key` when it is a configured chart or one with stored weeks; a 404 naming /uk-charts/charts otherwise."""
    if key is None or key in configured_charts():
        return key
    if key not in CHARTS_BY_KEY:
        raise not_found(f"Unknown chart key {key!r}; the chart keys are listed at /uk-charts/charts")
    if not await call.data.reader.fetchall("SELECT 1 FROM snapshots WHERE target = ? LIMIT 1", (TARGET.make(key),)):
        raise not_found(f"Chart {key!r} is not configured (CHARTGW_UK_CHARTS) and has no stored weeks; "
                        "see /uk-charts/charts")
    return key
