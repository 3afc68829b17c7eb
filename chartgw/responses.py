"""Response pieces every group shares: snapshot metadata and entry arrays assembled from stored bytes."""

from __future__ import annotations

from datetime import datetime, timezone

import msgspec

from chartgw.store import SnapshotRow, parse_iso


class SnapshotMeta(msgspec.Struct, kw_only=True):
    """Where a served chart came from and whether it is older than its cadence allows."""

    id: int
    target: str
    chart_date: str
    chart_hour: int | None
    fetched_at: str
    source: str
    row_count: int
    cadence_seconds: int
    stale: bool
    """True when fetched_at is older than twice the target's cadence."""


def snapshot_meta(row: SnapshotRow, cadence_seconds: int, now: datetime | None = None) -> SnapshotMeta:
    now = now or datetime.now(timezone.utc)
    return SnapshotMeta(
        id=row.id, target=row.target, chart_date=row.chart_date, chart_hour=row.chart_hour,
        fetched_at=row.fetched_at, source=row.source, row_count=row.row_count, cadence_seconds=cadence_seconds,
        stale=age_seconds(row, now) > 2 * cadence_seconds,
    )


def age_seconds(row: SnapshotRow, now: datetime | None = None) -> int:
    now = now or datetime.now(timezone.utc)
    return int((now - parse_iso(row.fetched_at)).total_seconds())


def records_array(records: list[bytes]) -> msgspec.Raw:
    """A JSON array of already-encoded records, spliced without decoding them."""
    return msgspec.Raw(b"[" + b",".join(records) + b"]")
