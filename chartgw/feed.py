"""The change feed over HTTP: every group's `/diff` between two snapshots of a chart (the platform gives it to
every group, like `/fetch-logs`). The change records themselves are written by the store (chartgw.changes)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from chartgw import changes
from chartgw.endpoints import Call, Route, not_found
from chartgw.params import Param
from chartgw.store import SnapshotReader, SnapshotRow

__all__ = ["DIFF_ROUTE", "DiffResponse"]


class DiffSnapshot(msgspec.Struct):
    """One side of a diff."""

    id: int
    chart_date: str
    chart_hour: int | None
    fetched_at: str
    source: str
    row_count: int


class DiffEntry(msgspec.Struct):
    """One entry of either snapshot."""

    status: Literal["new", "up", "down", "same", "out"]
    """In `to` only, higher in `to`, lower, at the same rank, or in `from` only."""
    rank: int | None
    """In `to`; null for an entry that went out."""
    previous_rank: int | None
    """In `from`; null for a new entry."""
    change: int | None
    """Places climbed from `from` to `to` (negative: fallen); null unless the entry is in both."""
    entry: dict[str, Any]
    """The entry's record as the charts serve it (from `to`; from `from` for an entry that went out)."""


class DiffCounts(msgspec.Struct):
    new: int
    up: int
    down: int
    same: int
    out: int


class DiffResponse(msgspec.Struct):
    """The whole difference between two snapshots of one target."""

    target: str
    from_: DiffSnapshot | None = msgspec.field(name="from")
    """Null when `to` is the target's first snapshot (every entry is then new)."""
    to: DiffSnapshot
    counts: DiffCounts
    count: int
    entries: list[DiffEntry]
    """Every entry of `to` in chart order, then those of `from` that went out, in their old order."""


def _side(row: SnapshotRow) -> DiffSnapshot:
    return DiffSnapshot(row.id, row.chart_date, row.chart_hour, row.fetched_at, row.source, row.row_count)


def _entry(line: changes.Line) -> DiffEntry:
    status: Any = line.status
    record: Any = msgspec.Raw(line.record)  # spliced as stored, typed as the object it is
    return DiffEntry(status, line.rank, line.previous_rank, line.change, record)


async def _snapshot_of(reader: SnapshotReader, snapshot_id: int, target: str) -> SnapshotRow:
    found = await reader.snapshots_with_ids([snapshot_id])
    if not found or found[0].target != target:
        raise not_found(f"No snapshot {snapshot_id} of {target} (it may have been pruned)")
    return found[0]


async def diff(call: Call) -> DiffResponse:
    reader, target = call.data.reader, call.params["target"]
    if call.params["to"] is None:
        to = await reader.latest(target)
        if to is None:
            raise not_found(f"No snapshot of {target}")
    else:
        to = await _snapshot_of(reader, call.params["to"], target)
    old = (await reader.previous_snapshot(to) if call.params["from"] is None
           else await _snapshot_of(reader, call.params["from"], target))
    lines = changes.diff(await reader.entry_rows(old.id) if old else [], await reader.entry_rows(to.id))
    counts = {status: 0 for status in changes.STATUSES}
    for line in lines:
        counts[line.status] += 1
    entries = [_entry(line) for line in lines]
    return DiffResponse(target, _side(old) if old else None, _side(to), DiffCounts(**counts), len(entries), entries)


DIFF_ROUTE = Route("/diff", diff, (
    Param("target", required=True, min_length=1, description="The chart (a snapshot target, as in /snapshots)"),
    Param("from", kind="int", ge=1, description="The older snapshot's id; default: the snapshot before `to`"),
    Param("to", kind="int", ge=1, description="The newer snapshot's id; default: the target's latest"),
), response=DiffResponse, summary="What changed between two snapshots of one chart: every entry in, out and moved")
