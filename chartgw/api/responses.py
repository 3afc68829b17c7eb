"""Response pieces every group shares: snapshot metadata, entry arrays assembled from stored bytes,
the latest-snapshot lookup, snapshot listings, recorded runs, raw payloads and the fetch-log route."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, cast

import msgspec

from chartgw.api.endpoints import Call, Route, not_found, params_type
from chartgw.api.params import Param, check_params_type, limit_param
from chartgw.core.settings import Settings
from chartgw.replica.state import lagging
from chartgw.store import RunRow, SnapshotReader, SnapshotRow, parse_iso

__all__ = [
    "BUNDLE_LIMIT",
    "BUNDLE_ROWS",
    "FETCH_LOGS_ROUTE",
    "PULL_JSON_ROUTE",
    "SNAPSHOTS_LIMIT",
    "BundledChart",
    "Describe",
    "FetchLogResponse",
    "Health",
    "HealthHead",
    "HealthResponse",
    "RunInfo",
    "SnapshotMeta",
    "SnapshotsFilter",
    "SnapshotsListing",
    "SnapshotsResponse",
    "TargetStatus",
    "age_seconds",
    "chart_bundle",
    "health_route",
    "health_status",
    "latest_or_404",
    "latest_pull_route",
    "records_array",
    "run_info",
    "snapshot_meta",
    "snapshots_route",
    "stored_record",
    "target_statuses",
]

BUNDLE_ROWS = 100
"""Entries per chart in a bundle of several charts (/latest, a country's charts), unless `limit` says fewer."""
BUNDLE_LIMIT = limit_param("Entries of each chart to return, from rank 1", BUNDLE_ROWS, BUNDLE_ROWS)
"""The `limit` of a bundle: a client that needs the top of every chart need not take 100 rows of each."""


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


def snapshot_meta(row: SnapshotRow, cadence_seconds: int, now: datetime) -> SnapshotMeta:
    return SnapshotMeta(
        id=row.id, target=row.target, chart_date=row.chart_date, chart_hour=row.chart_hour,
        fetched_at=row.fetched_at, source=row.source, row_count=row.row_count, cadence_seconds=cadence_seconds,
        stale=age_seconds(row, now) > 2 * cadence_seconds,
    )


def age_seconds(row: SnapshotRow, now: datetime) -> int:
    return int((now - parse_iso(row.fetched_at)).total_seconds())


def records_array(records: list[bytes]) -> list[Any]:
    """A JSON array of already-encoded entry records, spliced without decoding them.

    Typed as the list the response field declares (`entries: list[SomeEntry]`, which is what the OpenAPI
    document shows), while the value is the stored bytes: msgspec writes a `Raw` as it is.
    """
    return cast(list[Any], msgspec.Raw(b"[" + b",".join(records) + b"]"))


def stored_record(record: bytes) -> Any:
    """One stored entry record spliced into a response field typed as its entry type (see `records_array`)."""
    return msgspec.Raw(record)


async def latest_or_404(reader: SnapshotReader, target: str, what: str) -> SnapshotRow:
    """The newest snapshot of `target`, or a 404 saying there is none of `what` yet."""
    row = await reader.latest(target)
    if row is None:
        raise not_found(f"No snapshot of {what} yet")
    return row


class RunInfo(msgspec.Struct):
    """One recorded run: a scheduled pull, a backfill or an import, with every target's outcome."""

    id: int
    kind: str
    started_at: str
    finished_at: str
    targets: int
    ok: int
    detail: Any
    """`options` the run was started with and `outcomes`, one per target (status, rows, snapshot_id, error)."""


def run_info(row: RunRow) -> RunInfo:
    return RunInfo(row.id, row.kind, row.started_at, row.finished_at, row.targets, row.ok, msgspec.Raw(row.detail))


def raw_json(raw: tuple[str, bytes] | None) -> msgspec.Raw | None:
    """A kept upstream payload spliced into a response as JSON; None when none was kept or it is not JSON."""
    if raw is None:
        return None
    _, body = raw
    try:
        msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    return msgspec.Raw(body)


class FetchLogEntry(msgspec.Struct):
    """One crawl attempt of one target."""

    id: int
    target: str
    started_at: str
    duration_ms: int
    status: str
    """"ok" or "failed"; a failed attempt changed no snapshot."""
    http_status: int | None
    rows: int | None
    url: str | None
    error: str | None


class FetchLogResponse(msgspec.Struct):
    count: int
    entries: list[FetchLogEntry]


async def fetch_logs(call: Call) -> FetchLogResponse:
    rows = await call.data.reader.fetch_log(call.params["status"], call.params["limit"])
    return FetchLogResponse(len(rows), [FetchLogEntry(*row) for row in rows])


FETCH_LOGS_ROUTE = Route("/fetch-logs", fetch_logs, (
    Param("status", kind="choice", choices=("ok", "failed"), description="Only attempts with this outcome"),
    Param("limit", kind="int", default=100, ge=1, le=1000, description="Attempts to return, newest first"),
), errors=(), rows="entries", response=FetchLogResponse, cache_ttl=5,
   summary="Crawl attempts, newest first, with HTTP status, rows and error")


class TargetStatus(msgspec.Struct):
    """How current one crawl target is."""

    target: str
    snapshot_id: int | None
    chart_date: str | None
    chart_hour: int | None
    fetched_at: str | None
    age_seconds: int | None
    stale: bool
    """True when there is no snapshot or it is older than twice the target's cadence."""
    state: str = "fresh"
    """"fresh", "stale" (older than twice its cadence) or "never crawled" (no snapshot yet)."""
    last_failure: str | None = None
    """The newest failed attempt since the snapshot served ("<started_at>: <reason>"); null when none."""


async def target_statuses(reader: SnapshotReader, cadences: dict[str, int], now: datetime,
                          pattern: str | None = None) -> list[TargetStatus]:
    """The status of every expected target (`cadences`: target -> seconds), in the order given."""
    latest = {row.target: row for row in await reader.latest_per_target(pattern)}
    failures = await reader.latest_failures()
    statuses = []
    for target, cadence in cadences.items():
        row = latest.get(target)
        failed = failures.get(target)
        failure = f"{failed[0]}: {failed[1]}" if failed and (row is None or failed[0] >= row.fetched_at) else None
        if row is None:
            statuses.append(TargetStatus(target, None, None, None, None, None, True, "never crawled", failure))
        else:
            age = age_seconds(row, now)
            stale = age > 2 * cadence
            statuses.append(TargetStatus(target, row.id, row.chart_date, row.chart_hour, row.fetched_at, age,
                                         stale, "stale" if stale else "fresh", failure))
    return statuses


class HealthHead(msgspec.Struct):
    """What every group's /health says first; each group's response extends it with what it has more to say."""

    status: str
    """"ok" when every expected target has a snapshot within twice its cadence, else "degraded"."""
    service: str


class HealthResponse(HealthHead):
    targets: list[TargetStatus]


def health_status(statuses: Sequence[TargetStatus]) -> str:
    return "ok" if statuses and not any(s.stale for s in statuses) else "degraded"


Describe = Callable[[Call, str, list[TargetStatus]], Awaitable[HealthHead]]
"""Builds a group's own health response from the shared status and the target statuses."""
Health = Callable[[Call], Awaitable[HealthHead]]
"""A group's whole health answer, for a group whose health is not its targets' freshness (a discovered catalogue,
a monitor's heartbeat, an index's lag behind its sources)."""


def health_route(service: str, cadences: Callable[[Settings], dict[str, int]] | None, summary: str, *,
                 describe: Describe | None = None, response: type[HealthHead] = HealthResponse,
                 pattern: str | None = None, max_age: int = 0, health: Health | None = None) -> Route:
    """`/health` (public): every expected target (`cadences()`: target -> seconds) with its latest snapshot's
    age and a stale flag, and "ok" only when none is stale or missing (`cadences` reads the app's settings: the
    targets a group crawls are configured). `describe` extends the answer; `health` (with `cadences` None) replaces
    it for a group whose health is its own. Either way an "ok" turns "degraded" while this node's copy of the group's
    file lags the writer's (/replication)."""
    assert (cadences is None) != (health is None), f"{service}: /health from cadences or its own health, not both"

    async def freshness(call: Call) -> HealthHead:
        assert cadences is not None
        statuses = await target_statuses(call.data.reader, cadences(call.settings), call.now, pattern)
        status = health_status(statuses)
        if describe is None:
            return HealthResponse(status, service, statuses)
        return await describe(call, _replicated(call, status), statuses)

    answer = health or freshness

    async def health_of(call: Call) -> HealthHead:
        head = await answer(call)
        status = _replicated(call, head.status)
        return head if status == head.status else msgspec.structs.replace(head, status=status)

    return Route("/health", health_of, public=True, cache_ttl=5, max_age=max_age, errors=(), response=response,
                 summary=summary)


def _replicated(call: Call, status: str) -> str:
    """`status`, or "degraded" when this node's copy lags the writer's (/replication)."""
    return "degraded" if status == "ok" and lagging(call.data.group, call.now, call.settings) else status


class BundledChart(msgspec.Struct):
    """One chart of a bundle: its snapshot metadata and its entries (the group's entry records)."""

    target: str
    snapshot: SnapshotMeta
    count: int
    entries: list[dict[str, Any]]
    """The group's entry records (objects; their fields are the group's entry type's)."""


async def chart_bundle(reader: SnapshotReader, rows: list[SnapshotRow], limit: int,
                       cadence_of: Callable[[str], int], now: datetime) -> list[BundledChart]:
    """Each snapshot's first `limit` entries, as stored; `cadence_of(target)` gives its staleness."""
    bundle = []
    for row in rows:
        records = await reader.records(row.id, limit)
        bundle.append(BundledChart(row.target, snapshot_meta(row, cadence_of(row.target), now), len(records),
                                   records_array(records)))
    return bundle


class SnapshotsResponse(msgspec.Struct):
    count: int
    snapshots: list[SnapshotMeta]


SNAPSHOTS_LIMIT = Param("limit", kind="int", default=50, ge=1, le=500, description="Snapshots to return, newest first")

SnapshotsFilter = Callable[[Call[Any]], Awaitable[str | Sequence[str] | None]]
"""The GLOB pattern (or patterns) of the targets a `/snapshots` request lists, from its parameters; None for every
target. It raises the request's 404 or 422 for a filter naming nothing the group has."""
SnapshotsListing = Callable[[Call[Any], list[SnapshotRow]], Any]
"""A group's own listing of the rows found (its response type), when it says more than `SnapshotsResponse`."""


def snapshots_route(cadence_of: Callable[[str], int], summary: str, *, path: str = "/snapshots",
                    select: SnapshotsFilter | None = None, params: tuple[Param, ...] = (SNAPSHOTS_LIMIT,),
                    listing: SnapshotsListing | None = None, response: Any = SnapshotsResponse,
                    errors: tuple[int, ...] = (), max_age: int = 0, cache_ttl: float = 30.0) -> Route:
    """`/snapshots?limit=`: the snapshots of every target, or of those `select` picks, newest fetch first. `params`
    declares `limit` and what `select` reads; several patterns are merged, newest first, up to `limit`."""
    assert any(p.name == "limit" for p in params), f"{path}: a snapshot listing takes `limit`"
    for reads in (select, listing):
        declared = params_type(reads) if reads is not None else None
        if declared is not None:  # what they read is declared
            check_params_type(declared, params, path, exact=False)

    async def snapshots(call: Call) -> Any:
        limit = call.params["limit"]
        patterns = await select(call) if select is not None else None
        if patterns is None or isinstance(patterns, str):
            rows = await call.data.reader.snapshots(patterns, limit)
        else:
            rows = [row for pattern in patterns for row in await call.data.reader.snapshots(pattern, limit)]
            rows = sorted(rows, key=lambda r: r.id, reverse=True)[:limit]
        if listing is not None:
            return listing(call, rows)
        return SnapshotsResponse(len(rows), [snapshot_meta(row, cadence_of(row.target), call.now) for row in rows])

    return Route(path, snapshots, params, errors=errors, rows="snapshots", response=response, summary=summary,
                 max_age=max_age, cache_ttl=cache_ttl)


class LatestPullResponse(msgspec.Struct):
    run: RunInfo | None
    """The latest recorded pull (scheduled crawl run); null when the data came otherwise (backfills)."""
    count: int
    charts: list[BundledChart]
    """Every chart's latest snapshot (newest chart date), its first `limit` entries (100 by default)."""


def latest_pull_route(targets: Callable[[Settings], Sequence[str]] | None, cadence_of: Callable[[str], int],
                      summary: str) -> Route:
    """`/latest`: the latest pull's run and every chart's latest snapshot (only those of `targets(settings)`, in
    its order, when given; else all, by target)."""

    async def latest(call: Call) -> LatestPullResponse:
        reader = call.data.reader
        rows = await reader.latest_per_target()
        if targets is not None:
            by_target = {row.target: row for row in rows}
            rows = [by_target[target] for target in targets(call.settings) if target in by_target]
        if not rows:
            raise not_found("No pull has been stored yet")
        runs = await reader.runs("crawl", 1)
        charts = await chart_bundle(reader, rows, call.params["limit"], cadence_of, call.now)
        return LatestPullResponse(run_info(runs[0]) if runs else None, len(charts), charts)

    return Route("/latest", latest, (BUNDLE_LIMIT,), rows="charts", response=LatestPullResponse, summary=summary)


class RawPayload(msgspec.Struct):
    """An upstream payload exactly as the crawl received it (JSON), with where it came from."""

    target: str
    snapshot_id: int
    fetched_at: str
    source: str
    payload: Any


class PullResponse(msgspec.Struct):
    run: RunInfo | None
    """The latest recorded pull (scheduled crawl run), null before the first."""
    count: int
    payloads: list[RawPayload]


class _PulledSnapshots(msgspec.Struct):
    outcomes: list[dict[str, Any]]


async def pull_json(call: Call) -> PullResponse:
    """The raw upstream payloads the latest pull (recorded crawl run) committed, exactly as received."""
    reader = call.data.reader
    runs = await reader.runs("crawl", 1)
    if runs:
        outcomes = msgspec.json.decode(runs[0].detail, type=_PulledSnapshots).outcomes
        rows = await reader.snapshots_with_ids(o["snapshot_id"] for o in outcomes if o.get("snapshot_id") is not None)
    else:
        rows = await reader.latest_per_target()
    kept = [(row, await reader.raw(row.id)) for row in sorted(rows, key=lambda r: r.target)]
    checked = await asyncio.to_thread(lambda: [raw_json(raw) for _, raw in kept])  # megabytes of JSON: off the loop
    payloads = [RawPayload(row.target, row.id, row.fetched_at, row.source, payload)
                for (row, _), payload in zip(kept, checked, strict=True) if payload is not None]
    if not payloads:
        raise not_found("No pull has been stored yet")
    return PullResponse(run_info(runs[0]) if runs else None, len(payloads), payloads)


PULL_JSON_ROUTE = Route("/pull.json", pull_json, rows="payloads", response=PullResponse,
                        summary="The raw upstream payloads of the latest pull, exactly as received")
