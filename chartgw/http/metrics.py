"""Prometheus metrics (prometheus-client): what the server answered, and what the stores hold.

Requests are counted as they are answered, by the app and by the server's fast lane alike
(`RequestMetrics.observe`, called through `chartgw.http.observe.Observer`) into plain dicts that prometheus-client
reads at scrape time: the fast lane answers in a few microseconds, and a metric object's locks and calls cost a
fifth of that. Labels are bounded: a route is its template (`/korea-chart/{site}/charts/{chart_type}`), never the
raw path, and statuses are the gateway's own.

What the stores hold (crawl attempts, snapshot ages, radio monitor states) is read at scrape time by
`StoreCollector`, in the scraping thread (`/metrics` renders off the event loop; the own-port listener is a
thread of its own), at most once per `STORE_SECONDS` however often scrapes come.

With `chartgw serve --workers N` (N > 1) each worker counts into prometheus-client's multiprocess files instead
(`WorkerRequestMetrics`; `PROMETHEUS_MULTIPROC_DIR`, which `chartgw serve` makes), and any worker's scrape adds
them all up.
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
import threading
import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
    values,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from chartgw.core.clock import Clock, utc_now
from chartgw.core.settings import Settings, exported
from chartgw.groups.radio import storage as radio_storage
from chartgw.replica.state import node_status
from chartgw.store import connect, group_db_path, parse_iso
from chartgw.store import tables as store_tables

__all__ = ["METRICS_PATH", "MetricsEndpoint", "ReplicationCollector", "RequestMetrics", "StoreCollector",
           "WorkerRequestMetrics", "multiprocess", "request_metrics", "scrape_registry", "worker_files"]

METRICS_PATH = "/metrics"
DURATION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0)
"""Seconds: the fast lane answers in tens of microseconds, a cached app answer in about a tenth of a
millisecond, a cold build in milliseconds to seconds."""
BUCKET_BOUNDS = (*(repr(bound) for bound in DURATION_BUCKETS), "+Inf")
"""The `le` labels, as prometheus-client writes them for these bounds."""
REQUEST_LABELS = ("group", "route", "status", "answered_by", "cache")
DURATION_LABELS = ("group", "route", "answered_by")
REQUESTS_HELP = ("Answers, by group, route template, status, what answered (the fast lane or the app) and the response "
                 "cache's part (hit, miss, or none for uncached routes and refusals)")
DURATION_HELP = "Time from the request's head to the answer's last byte handed to the server"
STORE_SECONDS = 10.0
"""How long one read of the stores answers scrapes: a scrape storm costs SQLite one read per this many seconds."""
RADIO = "radio"


def multiprocess() -> bool:
    """Whether this process counts into prometheus-client's multiprocess files (`chartgw serve --workers N`), as
    prometheus-client decided when it was imported (from PROMETHEUS_MULTIPROC_DIR)."""
    return values.ValueClass is not values.MutexValue


class RequestMetrics:
    """`chartgw_requests_total` and `chartgw_request_duration_seconds`, counted in plain dicts and read by
    prometheus-client at scrape time (`collect`): an answer costs two dict lookups, a bisect and three integer
    adds, with no lock (answers are counted on the event loop's thread; a scrape copies what it reads)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._counts: dict[tuple[str, str, int, str, str], int] = {}
        self._durations: dict[tuple[str, str, str], list[float]] = {}
        """(group, route, answered_by) -> a count per bucket (not cumulative; +Inf last), then the sum of seconds."""
        registry.register(self)

    def observe(self, group: str, route: str, status: int, answered_by: str, cache: str, seconds: float) -> None:
        key = (group, route, status, answered_by, cache)
        counts = self._counts
        counts[key] = counts.get(key, 0) + 1
        series = self._durations.get((group, route, answered_by))
        if series is None:
            series = self._durations[(group, route, answered_by)] = [0.0] * (len(DURATION_BUCKETS) + 2)
        series[bisect_left(DURATION_BUCKETS, seconds)] += 1
        series[-1] += seconds

    def describe(self) -> Iterable[Metric]:
        return self._families()

    def collect(self) -> Iterable[Metric]:
        requests, duration = self._families()
        for (group, route, status, answered_by, cache), count in self._counts.copy().items():
            requests.add_metric([group, route, str(status), answered_by, cache], count)
        for (group, route, answered_by), series in self._durations.copy().items():
            counts, total = series[:-1], series[-1]  # a copy: the loop's thread may count meanwhile
            buckets = [(bound, float(sum(counts[:i + 1]))) for i, bound in enumerate(BUCKET_BOUNDS)]
            duration.add_metric([group, route, answered_by], buckets, total)
        return requests, duration

    @staticmethod
    def _families() -> tuple[CounterMetricFamily, HistogramMetricFamily]:
        return (CounterMetricFamily("chartgw_requests", REQUESTS_HELP, labels=REQUEST_LABELS),
                HistogramMetricFamily("chartgw_request_duration_seconds", DURATION_HELP, labels=DURATION_LABELS))


class WorkerRequestMetrics:
    """The same metrics with several server workers (`chartgw serve --workers N`): each answer counts into
    prometheus-client's multiprocess files, which any worker's scrape adds up (`scrape_registry`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        # No `_created` series beside each counter: half the series, nothing lost. (Unannotated in prometheus-client.)
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.requests = Counter("chartgw_requests_total", REQUESTS_HELP, REQUEST_LABELS, registry=registry)
        self.duration = Histogram("chartgw_request_duration_seconds", DURATION_HELP, DURATION_LABELS,
                                  buckets=DURATION_BUCKETS, registry=registry)
        self._series: dict[tuple[str, str, int, str, str], tuple[Any, Any]] = {}

    def observe(self, group: str, route: str, status: int, answered_by: str, cache: str, seconds: float) -> None:
        key = (group, route, status, answered_by, cache)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = (self.requests.labels(group, route, str(status), answered_by, cache),
                                          self.duration.labels(group, route, answered_by))
        series[0].inc()
        series[1].observe(seconds)


def request_metrics(registry: CollectorRegistry) -> RequestMetrics | WorkerRequestMetrics:
    """The request metrics of this process: in memory, or in the multiprocess files with several workers."""
    return WorkerRequestMetrics(registry) if multiprocess() else RequestMetrics(registry)


class StoreCollector:
    """Crawl attempts, snapshot ages and radio monitor states, read from the groups' files at scrape time.

    Attempts are counted from each file's `fetch_log` (append-only) incrementally: each read counts only the
    rows past the last one seen. Ages are worked out at each scrape from the fetch times read, by `clock`.
    """

    def __init__(self, groups: Sequence[str], settings: Settings, clock: Clock = utc_now,
                 store_seconds: float = STORE_SECONDS) -> None:
        self.paths = {group: group_db_path(group, settings) for group in groups}  # the app's data folder
        self.clock = clock
        self.store_seconds = store_seconds
        self._lock = threading.Lock()
        self._read_at = float("-inf")
        self._seen: dict[str, int] = {}  # group -> the last fetch_log id counted
        self._attempts: dict[tuple[str, str, str], int] = {}  # (group, target, outcome) -> attempts
        self._fetched: dict[tuple[str, str], float] = {}  # (group, target) -> newest snapshot's fetch, epoch seconds
        self._stations: dict[str, int] = {}  # radio monitor state -> monitored stations
        self._heartbeat: float | None = None

    def describe(self) -> Iterable[Metric]:
        """The families, without reading the stores (prometheus-client asks this when the collector registers)."""
        return self._families()

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            if time.monotonic() - self._read_at >= self.store_seconds:
                self._read()
                self._read_at = time.monotonic()
            families = attempts, ages, stations, heartbeat = self._families()
            now = self.clock().timestamp()
            for (group, target, outcome), count in sorted(self._attempts.items()):
                attempts.add_metric([group, target, outcome], count)
            for (group, target), fetched in sorted(self._fetched.items()):
                ages.add_metric([group, target], max(now - fetched, 0.0))
            for state, count in sorted(self._stations.items()):
                stations.add_metric([state], count)
            if self._heartbeat is not None:
                heartbeat.add_metric([], max(now - self._heartbeat, 0.0))
        return families

    @staticmethod
    def _families() -> tuple[CounterMetricFamily, GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        return (
            CounterMetricFamily("chartgw_crawl_attempts", "Crawl attempts recorded in the group's fetch log, by "
                                "target and outcome (ok: a snapshot committed; failed: nothing changed)",
                                labels=("group", "target", "outcome")),
            GaugeMetricFamily("chartgw_snapshot_age_seconds", "Seconds since the newest snapshot of each target was "
                              "fetched", labels=("group", "target")),
            GaugeMetricFamily("chartgw_radio_monitor_stations", "Stations the radio monitor watches, by state (ok: "
                              "heard; backoff: failing, retried later; starting: not heard yet)", labels=("state",)),
            GaugeMetricFamily("chartgw_radio_monitor_heartbeat_age_seconds", "Seconds since the running radio "
                              "monitor's last heartbeat (absent when none runs)"),
        )

    def _read(self) -> None:
        for group, path in self.paths.items():
            if not path.exists():
                continue
            try:
                with contextlib.closing(connect(path, readonly=True, timeout=1)) as db:
                    self._read_group(group, db)
            except sqlite3.Error:
                continue  # a file being replaced or locked past the timeout: the last read stands

    def _read_group(self, group: str, db: sqlite3.Connection) -> None:
        tables = {row[0] for row in db.execute(store_tables.TABLE_NAMES.sql)}
        if "fetch_log" in tables:
            self._count_attempts(group, db)
        if "snapshots" in tables:
            for target, fetched in db.execute(store_tables.NEWEST_FETCH_PER_TARGET.sql):
                self._fetched[(group, target)] = parse_iso(fetched).timestamp()
        if group == RADIO and "station_state" in tables:  # chartgw.groups.radio.storage keeps each station's state
            self._stations = {str(state): int(count) for state, count in db.execute(radio_storage.MONITORED_BY_STATE.sql)}
            running = db.execute(radio_storage.RUNNING_MONITOR.sql).fetchone() if "monitor_runs" in tables else None
            self._heartbeat = parse_iso(running[0]).timestamp() if running else None

    def _count_attempts(self, group: str, db: sqlite3.Connection) -> None:
        last = db.execute(store_tables.LAST_FETCH_LOG_ID.sql).fetchone()[0] or 0
        seen = self._seen.get(group, 0)
        if last < seen:  # the file was replaced: count it again from the start
            seen = 0
            self._attempts = {k: v for k, v in self._attempts.items() if k[0] != group}
        for target, outcome, count in db.execute(store_tables.FETCH_OUTCOMES_BETWEEN.sql, (seen, last)):
            key = (group, target, outcome)
            self._attempts[key] = self._attempts.get(key, 0) + count
        self._seen[group] = last


class ReplicationCollector:
    """Each replicated file's state on this node, as `/replication` says it (the supervisor's state file, read at
    scrape time): its lag, its follower's restarts and stalls, and its state. Nothing on a node that does not
    replicate."""

    STATES = ("replicating", "starting", "waiting", "restoring", "following", "stalled", "down")

    def __init__(self, settings: Settings, clock: Clock = utc_now) -> None:
        self.settings = settings
        """The app's (a scrape on the own-port listener runs in its thread, outside any request)."""
        self.clock = clock

    def describe(self) -> Iterable[Metric]:
        return self._families()

    def collect(self) -> Iterable[Metric]:
        families = lag, restarts, stalls, states = self._families()
        status = node_status(self.clock(), self.settings)
        for file in status.files:
            if file.lag_seconds is not None:
                lag.add_metric([file.file], file.lag_seconds)
            restarts.add_metric([file.file], file.restarts)
            stalls.add_metric([file.file], file.stalls)
            current = file.state if file.state in self.STATES else "down"  # "down (chartgw follow is not running)"
            for state in self.STATES:
                states.add_metric([file.file, state], 1.0 if state == current else 0.0)
        return families

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, CounterMetricFamily, CounterMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily("chartgw_replication_lag_seconds", "Seconds since this node last knew the replicated "
                              "file current with the writer (absent before it ever was)", labels=("file",)),
            CounterMetricFamily("chartgw_replication_restarts", "Restarts of the file's Litestream process by its "
                                "supervisor (deaths and stalls) since the supervisor started", labels=("file",)),
            CounterMetricFamily("chartgw_replication_stalls", "Reader: times the file's follower stopped applying "
                                "while the writer moved on, and was restored afresh", labels=("file",)),
            GaugeMetricFamily("chartgw_replication_state", "1 for the file's state on this node (stalled: being "
                              "restored afresh after a stall), 0 for the others", labels=("file", "state")),
        )


def scrape_registry(requests: CollectorRegistry, stores: StoreCollector, settings: Settings) -> CollectorRegistry:
    """What a scrape renders: this process's request metrics (or, with several workers, every worker's from the
    multiprocess files), its process figures, and the stores."""
    if multiprocess():
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # unannotated in prometheus-client
    else:
        registry = requests
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
    registry.register(stores)
    registry.register(ReplicationCollector(settings, stores.clock))
    return registry


class MetricsEndpoint:
    """`GET /metrics` on the API's port, and the own-port listener (a thread) when the setting asks for one."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._listener: Any = None
        self.address: tuple[str, int] | None = None
        """Where the own-port listener listens, once started (the port when 0 was asked)."""

    async def page(self, request: Request) -> Response:
        body = await run_in_threadpool(generate_latest, self.registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST, headers={"Cache-Control": "no-store"})

    def listen(self, host: str, port: int) -> None:
        """Serve the metrics on `host:port` from a thread. With several workers the first to bind serves every
        worker's metrics (the multiprocess files), and the others leave it be."""
        from prometheus_client import start_http_server

        try:
            server, _ = start_http_server(port, host, registry=self.registry)
        except OSError:
            if multiprocess():
                return
            raise
        self._listener = server
        self.address = (str(server.server_address[0]), int(server.server_address[1]))

    def close(self) -> None:
        if self._listener is not None:
            self._listener.shutdown()
            self._listener.server_close()
            self._listener = None



@contextlib.contextmanager
def worker_files(workers: int) -> Iterator[None]:
    """With several server workers, a fresh folder for their multiprocess metric files (PROMETHEUS_MULTIPROC_DIR,
    set before the workers start), removed afterwards; one worker counts in memory."""
    if workers <= 1 or multiprocess():  # one worker; or the operator's own folder
        yield
        return
    with tempfile.TemporaryDirectory(prefix="chartgw-metrics-") as folder, exported({"PROMETHEUS_MULTIPROC_DIR": folder}):
        yield
