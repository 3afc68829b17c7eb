"""The crawl runner every group uses: fetch politely, parse, check, commit, log.

A target names its upstream requests and a `build` function that turns the responses into
snapshots. The runner owns everything else: httpx with timeouts and a deadline, retries with
backoff and jitter for connection errors, 5xx and 429 (honouring Retry-After), a concurrency limit
per upstream, the sanity checks, the one-transaction commit and a fetch-log row per attempt.
A target that fails changes nothing but the fetch log; the last good snapshot keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import ssl
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import msgspec

from chartgw.core import config
from chartgw.core import progress as steps
from chartgw.core.clock import Clock, utc_now
from chartgw.core.locks import file_lock
from chartgw.core.settings import Settings
from chartgw.store import FetchLogRow, NewSnapshot, SnapshotWriter, Table, group_db_path
from chartgw.upstreams import ORIGINS, UpstreamFormatError, UpstreamRequest, body_limit, origin

__all__ = [
    "EXIT_BUSY",
    "KST",
    "CrawlBusy",
    "CrawlContext",
    "CrawlError",
    "CrawlTarget",
    "Fetched",
    "Fetcher",
    "Outcome",
    "PartialCrawl",
    "RetryPolicy",
    "commit_built",
    "crawl_lock",
    "import_builds",
    "record_run",
    "request_url",
    "run_targets",
    "snapshot_target",
    "tls",
]


@functools.cache
def tls() -> ssl.SSLContext:
    """The process's one verifying TLS context (certifi's roots, as httpx builds it), for every HTTP client it
    makes: loading the roots costs about 20 ms of CPU a client, and a demo or test run makes hundreds."""
    return httpx.create_ssl_context()

KST = timezone(timedelta(hours=9), "KST")
USER_AGENT = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
              "Chrome/131.0.0.0 Safari/537.36")
T = TypeVar("T")
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
EXIT_BUSY = 75


class CrawlError(Exception):
    """A crawl attempt failed; the message is what the fetch log and the CLI say."""

    def __init__(self, message: str, http_status: int | None = None) -> None:
        super().__init__(message)
        self.http_status = http_status


class PartialCrawl(Exception):
    """A build that has some snapshots worth keeping but could not do all it is for.

    The runner commits `snapshots` and logs the target as failed with the message.
    """

    def __init__(self, snapshots: list[NewSnapshot], message: str) -> None:
        super().__init__(message)
        self.snapshots = snapshots


class CrawlBusy(Exception):
    """Another crawl of the same group holds the lock."""


@dataclass(frozen=True)
class Fetched:
    url: str
    status: int
    body: bytes
    content_type: str
    error: str | None = None
    """Why a best-effort request (`CrawlTarget.optional`) failed; its body is then empty and its status the
    HTTP status (0 without an answer). Always None for a required request: its failure fails the target."""


@dataclass
class CrawlContext:
    """What a target's `build` may use: the crawl's clock and the store (for earlier snapshots)."""

    now: datetime
    store: SnapshotWriter


def snapshot_target(key: str) -> str:
    """The snapshot target a crawl key writes: "chart@2026-11-13" (a dated backfill) writes "chart"."""
    return key.partition("@")[0]


@dataclass(frozen=True)
class CrawlTarget:
    key: str
    """Names the crawl in outcomes and the fetch log; its snapshot target is `snapshot_target(key)`."""
    requests: tuple[UpstreamRequest, ...]
    build: Callable[[list[Fetched], CrawlContext], list[NewSnapshot]]
    expected_rows: int | None = None
    """Rows the primary snapshot (target == key) must have; None = any number."""
    refusal: Callable[[int, bytes], str | None] | None = None
    """Reads an answer that is not a 200 (a robot check sent as 503, a "sorry" page): the reason to log,
    or None for an ordinary error. A refusal is never retried: asking again is what gets a client banned."""
    min_rows: int | None = None
    """Rows the primary snapshot must at least have where its exact length is not known: a chart cut short
    is an upstream gone wrong, never a chart."""
    names: tuple[str, ...] = ("title", "artist")
    """The names every entry must have: an artist chart has no title, a trend list no artist."""
    optional: tuple[UpstreamRequest, ...] = ()
    """Best-effort requests, fetched after `requests` once those succeeded: `build` gets them after the
    required ones, in order, a failed one as a Fetched with `error` set, so enrichment that fails never
    costs the chart."""
    fetch: Callable[[Fetcher, CrawlContext], Awaitable[list[Fetched]]] | None = None
    """Fetches what `build` gets itself, through the runner's fetcher, instead of `requests` (an upstream with
    several servers tried in turn: `Fetcher.fetch_any`); it may read the store (a stored server list)."""


@dataclass(frozen=True)
class Outcome:
    target: str
    status: str
    rows: int | None = None
    snapshot_id: int | None = None
    http_status: int | None = None
    duration_ms: int = 0
    error: str | None = None


@dataclass
class RetryPolicy:
    attempts: int = 3
    backoff_seconds: float = field(kw_only=True)
    max_wait_seconds: float = 30.0
    target_deadline_seconds: float = 90.0
    per_upstream: int = 2
    delay_seconds: float = field(kw_only=True)
    jitter: float = 0.0
    """Each pause is `delay_seconds` times 1 to 1 + jitter, so a crawl has no fixed rhythm."""

    @classmethod
    def of(cls, settings: Settings, **changes: Any) -> RetryPolicy:
        """The platform's policy under `settings` (CHARTGW_RETRY_BACKOFF_SECONDS, CHARTGW_CRAWL_DELAY_SECONDS),
        with `changes`."""
        values: dict[str, Any] = {"backoff_seconds": settings.get(config.RETRY_BACKOFF_SECONDS),
                                  "delay_seconds": settings.get(config.CRAWL_DELAY_SECONDS), **changes}
        return cls(**values)


def request_url(req: UpstreamRequest, settings: Settings) -> str:
    """Where the request goes: the configured origin (a mirror or replay server) and the real path."""
    return origin(req.upstream, settings) + req.path


def public_url(url: str, upstream: str) -> str:
    """`url` as clients are shown it (snapshot source, fetch log): under the upstream's real public origin,
    so a configured mirror, replay server or credential in `CHARTGW_UPSTREAM_<NAME>` never shows."""
    parts = urlsplit(url)
    return ORIGINS[upstream] + parts.path + (f"?{parts.query}" if parts.query else "")


def check_snapshot(snapshot: NewSnapshot, expected_rows: int | None, min_rows: int | None = None,
                   names: tuple[str, ...] = ("title", "artist")) -> None:
    """Refuse a snapshot that is not a whole chart: wrong or short row count, gaps in ranks, empty names."""
    rows = len(snapshot.entries)
    if expected_rows is not None and rows != expected_rows:
        raise CrawlError(f"{snapshot.target}: expected {expected_rows} rows, upstream gave {rows}")
    if min_rows is not None and rows < min_rows:
        raise CrawlError(f"{snapshot.target}: expected at least {min_rows} rows, upstream gave {rows}")
    ranks = [e.rank for e in snapshot.entries]
    if ranks != list(range(1, rows + 1)):
        raise CrawlError(f"{snapshot.target}: ranks are not contiguous from 1")
    keys = {"title": lambda e: e.title_key, "artist": lambda e: e.artist_key}
    for name in names:
        if any(not keys[name](e) for e in snapshot.entries):
            raise CrawlError(f"{snapshot.target}: an entry has no {name}")


class Fetcher:
    """Fetches politely: a bounded number of requests in flight per upstream, a pause after each, retries
    with backoff for connection errors, 5xx and 429, redirects followed within the same origin only, and
    bodies capped per upstream. The deadline of a request starts when it leaves the queue, not before."""

    MAX_REDIRECTS = 5

    def __init__(self, client: httpx.AsyncClient, policy: RetryPolicy, settings: Settings) -> None:
        self.client = client
        self.policy = policy
        self.settings = settings
        """Where each upstream's requests go (its CHARTGW_UPSTREAM_<NAME> origin)."""
        self._limits: dict[str, asyncio.Semaphore] = {}

    async def fetch(self, req: UpstreamRequest, refusal: Callable[[int, bytes], str | None] | None = None,
                    at: str | None = None) -> Fetched:
        """`req`'s answer (a 200), from the upstream's configured origin or, given `at`, from that origin (one
        of the upstream's servers, shown as it is)."""
        limit = self._limits.setdefault(req.upstream, asyncio.Semaphore(self.policy.per_upstream))
        shown_as = _shown_as(req.upstream, at)
        async with limit:
            try:
                async with asyncio.timeout(self.policy.target_deadline_seconds):
                    url, status, body, content_type = await self._with_retries(req, refusal, at, shown_as)
            except TimeoutError:
                raise CrawlError(f"{shown_as(_url(req, at, self.settings))}: no answer within "
                                 f"{self.policy.target_deadline_seconds:.0f}s") from None
            if self.policy.delay_seconds:
                await asyncio.sleep(self.policy.delay_seconds * (1 + random.uniform(0, self.policy.jitter)))
        shown = shown_as(url)
        if status != 200:
            raise CrawlError(f"{shown} answered HTTP {status}", status)
        return Fetched(shown, status, body, content_type)

    async def fetch_any(self, req: UpstreamRequest, origins: Sequence[str], accept: Callable[[bytes], T],
                        refusal: Callable[[int, bytes], str | None] | None = None) -> tuple[str, Fetched, T]:
        """`req` sent to each of `origins` (an upstream's servers) in turn until one answers 200 with a body
        `accept` takes: (that origin, its answer, what `accept` made of it). Each try is a `fetch` (retries,
        body cap, politeness); a failed one (no answer, another status, a body `accept` refuses with
        UpstreamFormatError: a server out of sync) moves on to the next origin. When every one failed, the
        CrawlError says why each did."""
        failures: list[str] = []
        for at in origins:
            try:
                fetched = await self.fetch(req, refusal, at)
                return at, fetched, accept(fetched.body)
            except CrawlError as exc:
                failures.append(str(exc))
            except UpstreamFormatError as exc:
                failures.append(f"{at}: {exc}")
        raise CrawlError(f"{req.upstream}: every server failed: " + "; ".join(failures or ["no servers"]))

    async def _with_retries(self, req: UpstreamRequest, refusal: Callable[[int, bytes], str | None] | None,
                            at: str | None, shown_as: Callable[[str], str]) -> tuple[str, int, bytes, str]:
        headers = {"User-Agent": USER_AGENT, **dict(req.headers)}
        url = _url(req, at, self.settings)
        shown = shown_as(url)
        for attempt in range(1, self.policy.attempts + 1):
            try:
                final, status, body, content_type, retry_after = await self._send(req, url, headers, shown_as)
            except httpx.TransportError as exc:
                if attempt == self.policy.attempts:
                    raise CrawlError(f"{shown}: {type(exc).__name__}: {exc or 'connection failed'}") from exc
                await asyncio.sleep(self._backoff(attempt, None, shown))
                continue
            except httpx.HTTPError as exc:  # an undecodable body: retrying will not help
                raise CrawlError(f"{shown}: {type(exc).__name__}: {exc}") from exc
            if status != 200 and refusal is not None:
                reason = refusal(status, body)
                if reason:
                    raise CrawlError(f"{shown}: {reason} (HTTP {status}; not retried)", status)
            if status not in RETRY_STATUSES or attempt == self.policy.attempts:
                return final, status, body, content_type
            await asyncio.sleep(self._backoff(attempt, retry_after, shown))
        raise AssertionError("unreachable")

    async def _send(self, req: UpstreamRequest, url: str, headers: dict[str, str], shown_as: Callable[[str], str],
                    ) -> tuple[str, int, bytes, str, str | None]:
        """One request with its same-origin redirects; the body read up to the upstream's cap."""
        request = self.client.build_request(req.method, url, params=list(req.params) or None, headers=headers,
                                            data=dict(req.form) if req.form is not None else None, content=req.body)
        for _ in range(self.MAX_REDIRECTS + 1):
            response = await self.client.send(request, stream=True)
            try:
                if response.is_redirect and "location" in response.headers:
                    target = response.url.join(response.headers["location"])
                    if (target.scheme, target.netloc) != (request.url.scheme, request.url.netloc):
                        raise CrawlError(f"{shown_as(str(request.url))}: redirected to another "
                                         f"host ({target.host}); not followed", response.status_code)
                    request = self.client.build_request("GET", target, headers=headers)
                    continue
                body = await _read_capped(response, body_limit(req.upstream), shown_as(str(request.url)))
                return (str(request.url), response.status_code, body, response.headers.get("content-type", ""),
                        response.headers.get("retry-after"))
            finally:
                await response.aclose()
        raise CrawlError(f"{shown_as(url)}: more than {self.MAX_REDIRECTS} redirects")

    def _backoff(self, attempt: int, retry_after: str | None, shown: str) -> float:
        if retry_after:
            wait = _retry_after_seconds(retry_after)
            if wait is not None:
                if wait > self.policy.max_wait_seconds:
                    raise CrawlError(f"{shown}: the upstream asked to wait {wait:.0f}s (Retry-After); giving up "
                                     "until the next run", 429)
                return wait
        base = self.policy.backoff_seconds * 2 ** (attempt - 1)
        return float(min(base + random.uniform(0, base), self.policy.max_wait_seconds))


def _url(req: UpstreamRequest, at: str | None, settings: Settings) -> str:
    return (at + req.path) if at is not None else request_url(req, settings)


def _shown_as(upstream: str, at: str | None) -> Callable[[str], str]:
    """How a URL of a request is shown: under the upstream's public origin, or as it is when the request went to
    one of the upstream's servers by name (`Fetcher.fetch(at=...)`)."""
    return (lambda url: url) if at is not None else (lambda url: public_url(url, upstream))


async def _read_capped(response: httpx.Response, limit: int, shown: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise CrawlError(f"{shown}: the body is larger than {limit} bytes; not read further")
        chunks.append(chunk)
    return b"".join(chunks)


def _retry_after_seconds(value: str) -> float | None:
    if value.strip().isdigit():
        return float(value.strip())
    try:
        return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


async def run_targets(
    group: str,
    targets: Sequence[CrawlTarget],
    *,
    retention: dict[str, float] | None = None,
    now: Clock = utc_now,
    transport: httpx.AsyncBaseTransport | None = None,
    policy: RetryPolicy | None = None,
    progress: Callable[[Outcome], Any] | None = None,
    run_kind: str = "crawl",
    run_options: dict[str, Any] | None = None,
    tables: Sequence[Table] = (),
    settings: Settings,
) -> list[Outcome]:
    """Crawl every target (concurrently, bounded per upstream), commit each good one on its own, and
    record the run (its kind, options and outcomes) for the endpoints that list pulls and backfills.
    `tables` are the group's own (`Group.storage`), migrated when its file is opened."""
    policy = policy or RetryPolicy.of(settings)
    timeout = httpx.Timeout(20.0, connect=5.0)
    outcomes: list[Outcome] = []
    started = now()
    steps.expect(len(targets), "targets")
    async with httpx.AsyncClient(timeout=timeout, transport=transport, follow_redirects=False, verify=tls()) as client:
        fetcher = Fetcher(client, policy, settings)
        with SnapshotWriter(group_db_path(group, settings), retention=retention or {}, now=now, tables=tuple(tables)) as store:

            async def one(target: CrawlTarget) -> None:
                outcome = await _run_one(target, fetcher, store, now(), policy)
                outcomes.append(outcome)
                steps.advance(failed=outcome.status != "ok")
                if progress is not None:
                    progress(outcome)

            await asyncio.gather(*(one(t) for t in targets))
            order = {t.key: i for i, t in enumerate(targets)}
            outcomes.sort(key=lambda o: order[o.target])
            if outcomes:
                record_run(store, run_kind, started, now(), outcomes, run_options or {})
    return outcomes


class RunDetail(msgspec.Struct):
    options: dict[str, Any]
    outcomes: list[dict[str, Any]]


def record_run(store: SnapshotWriter, kind: str, started: datetime, finished: datetime, outcomes: Sequence[Outcome],
               options: dict[str, Any]) -> int:
    finished = max(started, finished)
    detail = msgspec.json.encode(RunDetail(options, [o.__dict__ for o in outcomes]))
    return store.record_run(kind, started, finished, len(outcomes), sum(o.status == "ok" for o in outcomes), detail)


async def _run_one(target: CrawlTarget, fetcher: Fetcher, store: SnapshotWriter, started: datetime,
                   policy: RetryPolicy) -> Outcome:
    clock = time.monotonic()
    first = target.requests[0] if target.requests else None
    url = public_url(request_url(first, fetcher.settings), first.upstream) if first else None
    http_status: int | None = None
    try:
        if target.fetch is not None:
            fetched = await target.fetch(fetcher, CrawlContext(now=started, store=store))
            url = url or (fetched[0].url if fetched else None)
        else:
            fetched = [await fetcher.fetch(req, target.refusal) for req in target.requests]
        http_status = fetched[-1].status if fetched else None
        fetched += [await _best_effort(fetcher, req, target.refusal) for req in target.optional]
        return commit_built(store, target.key, lambda ctx: target.build(fetched, ctx), started, clock,
                            target.expected_rows, url, http_status, target.min_rows, target.names)
    except (CrawlError, UpstreamFormatError, TimeoutError) as exc:
        if isinstance(exc, CrawlError) and exc.http_status is not None:
            http_status = exc.http_status
        message = str(exc) or f"no answer within {policy.target_deadline_seconds:.0f}s"
        duration = int((time.monotonic() - clock) * 1000)
        store.log_failure(FetchLogRow(target.key, started, duration, "failed", http_status, None, url, message))
        return Outcome(target.key, "failed", None, None, http_status, duration, message)


async def _best_effort(fetcher: Fetcher, req: UpstreamRequest, refusal: Callable[[int, bytes], str | None] | None,
                       ) -> Fetched:
    """A best-effort request: what went wrong is handed to `build` (`Fetched.error`) instead of raised."""
    try:
        return await fetcher.fetch(req, refusal)
    except CrawlError as exc:
        return Fetched(public_url(request_url(req, fetcher.settings), req.upstream), exc.http_status or 0, b"", "", str(exc))


def commit_built(store: SnapshotWriter, key: str, build: Callable[[CrawlContext], list[NewSnapshot]],
                 started: datetime, clock: float, expected_rows: int | None, url: str | None,
                 http_status: int | None, min_rows: int | None = None,
                 names: tuple[str, ...] = ("title", "artist")) -> Outcome:
    """Build a target's snapshots, check them and commit them with their fetch-log row.

    Raises what the build or the checks raise (CrawlError, UpstreamFormatError); the caller logs it.
    """
    partial: PartialCrawl | None = None
    try:
        snapshots = build(CrawlContext(now=started, store=store))
    except PartialCrawl as exc:
        partial, snapshots = exc, exc.snapshots
    primary_target = snapshot_target(key)
    for snap in snapshots:
        primary_here = snap.target == primary_target
        check_snapshot(snap, expected_rows if primary_here else None, min_rows if primary_here else None, names)
    primary = next((s for s in snapshots if s.target == primary_target), None)
    rows = len(primary.entries) if primary else None
    duration = int((time.monotonic() - clock) * 1000)
    status, error = ("ok", None) if partial is None else ("failed", str(partial))
    ids = store.commit(snapshots, FetchLogRow(key, started, duration, status, http_status, rows, url, error))
    snapshot_id = ids[snapshots.index(primary)] if primary else None
    return Outcome(key, status, rows, snapshot_id, http_status, duration, error)


def import_builds(group: str, builds: Sequence[tuple[str, Callable[[CrawlContext], list[NewSnapshot]]]],
                  source: str, *, retention: dict[str, float] | None = None, now: Clock = utc_now,
                  expected_rows: int | None = None, options: dict[str, Any] | None = None,
                  settings: Settings) -> list[Outcome]:
    """Commit snapshots built from local input (a backfill file) exactly as a crawl commits fetched
    ones: the same checks, one transaction each, a fetch-log row each, and one recorded run."""
    started = now()
    outcomes = []
    steps.expect(len(builds), "targets")
    with SnapshotWriter(group_db_path(group, settings), retention=retention or {}, now=now) as store:
        for key, build in builds:
            clock = time.monotonic()
            try:
                outcomes.append(commit_built(store, key, build, started, clock, expected_rows, source, None))
            except (CrawlError, UpstreamFormatError) as exc:
                duration = int((time.monotonic() - clock) * 1000)
                store.log_failure(FetchLogRow(key, started, duration, "failed", None, None, source, str(exc)))
                outcomes.append(Outcome(key, "failed", None, None, None, duration, str(exc)))
            steps.advance(failed=outcomes[-1].status != "ok")
        if outcomes:
            record_run(store, "import", started, now(), outcomes, {"source": source, **(options or {})})
    return outcomes


@contextlib.contextmanager
def crawl_lock(group: str, settings: Settings, wait_seconds: float = 0.0) -> Iterator[None]:
    """One crawl per group at a time, across processes (cron, refresh endpoint, a person)."""
    with file_lock(settings.get(config.DATA_DIR) / f"{group}.crawl.lock", wait_seconds) as held:
        if not held:
            raise CrawlBusy(f"another crawl of {group} is running")
        yield
