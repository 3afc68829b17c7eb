"""The change feed over HTTP: every group's `/diff` between two snapshots of a chart (the platform gives it to
every group, like `/fetch-logs`), `GET /changes`, every change record of every group file in commit order,
paged by a cursor and long-polled, and `GET /changes/stream`, the same as Server-Sent Events. The change records
themselves are written by the store (chartgw.store.diff).

One `ChangeHub` per server process reads the group files for the feed. While anyone waits or streams it reads each
file's `PRAGMA data_version` every `CHANGES_POLL_SECONDS` (a cheap read, never a busy loop); when a file has new
change records it reads them once, wakes the long polls (which read their page again) and pushes them to every
stream's bounded buffer (a stream that lets its buffer fill is dropped; it resumes by its Last-Event-ID).

The cursor is opaque to clients: it carries, per group file, the id of the last change record read. Ids in a file
only rise (AUTOINCREMENT) and commits to one file are serialised, so "after that id" misses nothing and repeats
nothing, across restarts too.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import heapq
import re
import sqlite3
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict
from urllib.parse import urlencode

import anyio
import msgspec
from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.sse import SendTimeoutError
from starlette.types import Receive, Scope, Send

from chartgw.api.access import KEY_ID_SCOPE, KeyLoad
from chartgw.api.endpoints import ApiError, Call, GroupData, Route, Streaming, not_found
from chartgw.api.params import InvalidParams, Param, accepts, comma_separated, one_of
from chartgw.core import config
from chartgw.core.settings import Settings
from chartgw.store import ChangeRow, SnapshotReader, SnapshotRow
from chartgw.store import diff as changes

__all__ = ["DIFF_ROUTE", "Change", "ChangeHub", "ChangeStream", "ChangesResponse", "DiffResponse", "Page",
           "Subscriber", "changes_routes", "decode_cursor", "encode_cursor"]


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


DiffParams = TypedDict("DiffParams", {"target": str, "from": int | None, "to": int | None})  # "from": a keyword


async def diff(call: Call[DiffParams]) -> DiffResponse:
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
), rows="entries", response=DiffResponse,
   summary="What changed between two snapshots of one chart: every entry in, out and moved")


# --- GET /changes ----------------------------------------------------------------------------------

CURSOR_PREFIX = "c1."
_GROUP = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
MAX_TARGETS = 100


def encode_cursor(positions: Mapping[str, int]) -> str:
    """The cursor of `positions` (group -> last change id read)."""
    text = ",".join(f"{group}:{n}" for group, n in sorted(positions.items()) if n > 0)
    return CURSOR_PREFIX + base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@accepts(pattern=r"^(now|c1\.[A-Za-z0-9_-]*)$")
def decode_cursor(value: str) -> dict[str, int] | Literal["now"]:
    """The positions a cursor carries; "now" for the current end of every file."""
    if value == "now":
        return "now"
    wrong = ValueError("not a cursor this server gave (a `next` of GET /changes, an event id of its stream, or now)")
    if not value.startswith(CURSOR_PREFIX):
        raise wrong
    raw = value[len(CURSOR_PREFIX):]
    try:
        text = base64.b64decode(raw + "=" * (-len(raw) % 4), altchars=b"-_", validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise wrong from None
    positions = {}
    for item in filter(None, text.split(",")):
        group, _, n = item.partition(":")
        if not _GROUP.fullmatch(group) or not n.isdigit() or len(n) > 18:
            raise wrong
        positions[group] = int(n)
    return positions


class Change(msgspec.Struct):
    """One committed snapshot of one group, summarised against the previous snapshot of its chart."""

    group: str
    id: int
    """The change's id in its group's file (rising, never reused)."""
    target: str
    chart_date: str
    chart_hour: int | None
    snapshot_id: int
    previous_snapshot_id: int | None
    """The snapshot of the same target before it by chart time; null for the target's first."""
    committed_at: str
    summary: changes.ChangeSummary
    diff: str
    """The group's /diff between the two snapshots (relative URL)."""


def change_of(group: str, row: ChangeRow) -> Change:
    query = {"target": row.target, **({"from": row.previous_snapshot_id} if row.previous_snapshot_id else {}),
             "to": row.snapshot_id}
    summary: Any = msgspec.Raw(row.summary)  # encoded at commit, served as stored
    return Change(group, row.id, row.target, row.chart_date, row.chart_hour, row.snapshot_id, row.previous_snapshot_id,
                  row.committed_at, summary, f"/{group}/diff?{urlencode(query)}")


class ChangesResponse(msgspec.Struct):
    count: int
    changes: list[Change]
    """In commit order across groups (committed_at, then group, then id)."""
    next: str
    """The cursor to ask with next (`since`): after every change here, and past the records the filters skipped."""
    more: bool
    """More changes are waiting past this page: ask again at once."""


@dataclass(frozen=True)
class Page:
    changes: list[tuple[str, ChangeRow]]
    positions: dict[str, int]
    """Where the next page starts, per group."""
    more: bool
    ended: frozenset[str] = frozenset()
    """The groups read to the newest change their files had: nothing of them waits past the page."""


STREAM_BUFFER = 256
"""Changes a stream may have pending; one more and it is dropped (its client resumes by Last-Event-ID)."""
SEND_TIMEOUT_SECONDS = 30.0
"""A stream whose client takes longer than this to take one event (or heartbeat) is closed."""
CATCH_UP = 4
"""Changes read per page while a stream catches up from its cursor: the next page is read once this one is sent, so
a stream whose client does not read holds this many summaries (a few KB each) and what the socket takes."""


class Subscriber:
    """One stream's pending changes, pushed by the hub as they are read: at most STREAM_BUFFER, then `dropped`."""

    def __init__(self, groups: Sequence[str], targets: Sequence[str]) -> None:
        self.groups = frozenset(groups)
        self.targets = frozenset(targets)
        self.pending: deque[tuple[str, ChangeRow]] = deque()
        self.ready = asyncio.Event()
        self.dropped = False
        self.on_drop: Callable[[], object] = lambda: None
        """Called once when the subscriber is dropped (its stream ends the response)."""

    def offer(self, group: str, row: ChangeRow) -> None:
        if self.dropped or group not in self.groups or (self.targets and row.target not in self.targets):
            return
        if len(self.pending) >= STREAM_BUFFER:
            self.dropped = True
            self.pending.clear()
            self.on_drop()
        else:
            self.pending.append((group, row))
        self.ready.set()


class ChangeHub:
    """The feed of one server process over `datas` (the groups' files, read through their readers)."""

    def __init__(self, datas: Mapping[str, GroupData], load: KeyLoad | None = None, *, settings: Settings) -> None:
        self.readers: dict[str, SnapshotReader] = {name: data.reader for name, data in datas.items()}
        self.settings = settings
        """The app's: its caps, polling interval and heartbeat (CHARTGW_CHANGES_*)."""
        self.load = load
        """Caps each key's long polls and streams (CHARTGW_CHANGES_WAITERS_PER_KEY, _STREAMS_PER_KEY); None: none."""
        self.stopping = False
        """The server is shutting down: long polls answer at once, streams end (`stop`)."""
        self.order = {name: i for i, name in enumerate(self.readers)}
        self.generation = 0
        """Rises each time a poll finds new change records."""
        self.waiters = 0
        self.subscribers: set[Subscriber] = set()
        self._users = 0
        self._versions: dict[str, int | None] = {}
        self._newest: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed = asyncio.Event()
        self._starting = asyncio.Lock()

    async def newest(self, groups: Sequence[str]) -> dict[str, int]:
        """Each group's newest change id (0 without any)."""
        return {group: (await self.readers[group].changes_after(0, (), 0))[1] for group in groups}

    async def page(self, positions: Mapping[str, int], groups: Sequence[str], targets: Sequence[str], limit: int,
                   known: Mapping[str, int] | None = None) -> Page:
        """Up to `limit` changes after `positions` of `groups` (of `targets` only, when any), merged in commit order.

        Each group's rows are taken in id order, so what a page includes of a group is always a prefix of what
        is waiting there: the next page starts after it, without a gap. A group whose waiting rows all fit moves
        on to the newest id its file had, past records the filters skipped. The groups are merged by their ids and
        commit times alone; only the changes taken are read whole, so a page holds `limit` summaries at most, not
        `limit` of every group. With `known` (`known()`, inside `waiting`), a group read up to the newest change the
        hub has read is not read again: a long poll of nothing new costs no query."""
        heads = {group: await self.readers[group].change_heads(positions.get(group, 0), targets, limit)
                 for group in groups if known is None or positions.get(group, 0) < known.get(group, 0)}
        queue = [(rows[0][1], self.order[group], 0, group) for group, (rows, _) in heads.items() if rows]
        heapq.heapify(queue)
        order: list[tuple[str, int]] = []
        used = dict.fromkeys(heads, 0)
        while queue and len(order) < limit:
            _, rank, i, group = heapq.heappop(queue)
            rows = heads[group][0]
            order.append((group, rows[i][0]))
            used[group] = i + 1
            if i + 1 < len(rows):
                heapq.heappush(queue, (rows[i + 1][1], rank, i + 1, group))
        read: dict[tuple[str, int], ChangeRow] = {}
        for group, n in used.items():
            if n:
                last = heads[group][0][n - 1][0]
                found, _ = await self.readers[group].changes_after(positions.get(group, 0), targets, n)
                read.update(((group, row.id), row) for row in found if row.id <= last)
        taken = [(group, read[group, id_]) for group, id_ in order if (group, id_) in read]  # not pruned meanwhile
        following = dict(positions)
        more = False
        ended = set()
        for group, (rows, newest) in heads.items():
            if used[group]:
                following[group] = rows[used[group] - 1][0]
            if used[group] == len(rows) and len(rows) < limit:
                following[group] = max(newest, following.get(group, 0))
                ended.add(group)
            else:
                more = True
        return Page(taken, following, more, frozenset(ended))

    def known(self, groups: Sequence[str]) -> dict[str, int]:
        """Each group's newest change id as the hub's polling has read it: current for a caller inside `waiting` or
        `subscribed` (a change past it moves `generation` once the polling reads it)."""
        return {group: self._newest.get(group, 0) for group in groups}

    @property
    def parked(self) -> int:
        """Requests held open on the hub: long polls waiting and streams open. Each kind has its own cap
        (CHANGES_MAX_WAITERS, CHANGES_MAX_STREAMS), so the server leaves them out of `--limit-concurrency`'s count
        of requests in progress: a thousand idle streams do not make every other request a 503."""
        return self.waiters + len(self.subscribers)

    @contextlib.asynccontextmanager
    async def waiting(self, key_id: int | None = None) -> AsyncIterator[None]:
        """A long poll's hold on the hub: counted against CHANGES_MAX_WAITERS (a 503 past it) and its key's
        CHANGES_WAITERS_PER_KEY (a 429), with the polling running (and its baseline read) before the caller reads
        its first page. It waits on the hub's asyncio event: a coroutine of a few KB, no thread."""
        if self.waiters >= self.settings.get(config.CHANGES_MAX_WAITERS):
            raise ApiError(503, "Too many long polls waiting; retry shortly", {"Retry-After": "1"})
        with self._parked(key_id, KeyLoad.WAITERS, "long polls waiting"):
            self.waiters += 1
            try:
                async with self.polling():
                    yield
            finally:
                self.waiters -= 1

    @contextlib.asynccontextmanager
    async def subscribed(self, groups: Sequence[str], targets: Sequence[str], key_id: int | None = None,
                         ) -> AsyncIterator[Subscriber]:
        """A stream's subscription: counted against CHANGES_MAX_STREAMS (a 503 past it) and its key's
        CHANGES_STREAMS_PER_KEY (a 429); every change read after this is entered is offered to it."""
        if len(self.subscribers) >= self.settings.get(config.CHANGES_MAX_STREAMS):
            raise ApiError(503, "Too many change streams open; retry shortly", {"Retry-After": "1"})
        with self._parked(key_id, KeyLoad.STREAMS, "change streams open"):
            subscriber = Subscriber(groups, targets)
            self.subscribers.add(subscriber)
            try:
                async with self.polling():
                    yield subscriber
            finally:
                self.subscribers.discard(subscriber)

    @contextlib.contextmanager
    def _parked(self, key_id: int | None, kind: str, what: str) -> Iterator[None]:
        """The request counted as its key's `kind` (not among its requests in progress) while inside."""
        load = self.load
        if load is None or key_id is None:
            yield
            return
        if not load.park(key_id, kind):
            raise ApiError(429, f"This key has {load.caps[kind]} {what} already; retry shortly", {"Retry-After": "1"})
        try:
            yield
        finally:
            load.unpark(key_id, kind)

    def stop(self) -> None:
        """The server is shutting down (it calls this when SIGTERM arrives): every long poll answers now with what
        it has, and every stream ends, so that the server's graceful shutdown is not held by them."""
        self.stopping = True
        self.generation += 1
        self._changed.set()
        for subscriber in list(self.subscribers):
            subscriber.ready.set()

    @contextlib.asynccontextmanager
    async def polling(self) -> AsyncIterator[None]:
        """The data_version polling runs while anyone is inside this."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (an app served again, in tests): nothing of the old one holds
            self._loop, self._task, self._changed, self._starting = loop, None, asyncio.Event(), asyncio.Lock()
            self.stopping = False
        self._users += 1
        try:
            async with self._starting:
                if self._task is None or self._task.done():
                    await self._baseline()
                    self._task = asyncio.create_task(self._poll())
            yield
        finally:
            self._users -= 1

    async def wait(self, generation: int, timeout: float) -> bool:
        """Until the generation passes `generation` (True) or `timeout` seconds pass, or the server stops (False)."""
        deadline = time.monotonic() + timeout
        while self.generation == generation or self.stopping:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.stopping:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return True

    async def close(self) -> None:
        """Stop polling (the app's shutdown)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._task = None

    async def _baseline(self) -> None:
        for name, reader in self.readers.items():
            self._versions[name] = await reader.data_version()
            self._newest[name] = (await reader.changes_after(0, (), 0))[1]

    async def _poll(self) -> None:
        while self._users:
            await asyncio.sleep(self.settings.get(config.CHANGES_POLL_SECONDS))
            landed: list[tuple[str, ChangeRow]] = []
            for name, reader in self.readers.items():
                try:
                    version = await reader.data_version()
                    if version == self._versions.get(name):
                        continue
                    rows, _ = await reader.changes_after(self._newest.get(name, 0), (), 1000)
                except sqlite3.Error:
                    continue  # a busy or half-made file: the next round reads it again
                self._versions[name] = version
                if rows:
                    self._newest[name] = rows[-1].id
                    self._versions[name] = None if len(rows) == 1000 else version  # read on next round
                    landed.extend((name, row) for row in rows)
            if landed:
                self._landed(landed)

    def _landed(self, landed: list[tuple[str, ChangeRow]]) -> None:
        """New change records were read: wake every long poll, offer them to every stream."""
        self.generation += 1
        self._changed.set()
        self._changed = asyncio.Event()
        for subscriber in list(self.subscribers):
            for group, row in landed:
                subscriber.offer(group, row)


def _groups_param(names: Sequence[str]) -> Param:
    check = accepts(pattern=comma_separated(one_of(names), len(names)))(config.subset(names, "group"))
    return Param("groups", check=check, description="Only these groups, comma-separated (default: every group)")


@accepts(pattern=comma_separated(r"[^,]*[^,\s][^,]*", MAX_TARGETS))  # each with more than blanks
def _targets(value: str) -> tuple[str, ...]:
    chosen = config.comma_list(value)
    if not chosen or len(chosen) > MAX_TARGETS:
        raise ValueError(f"name 1 to {MAX_TARGETS} targets, comma-separated")
    return chosen


TARGETS = Param("targets", check=_targets, description="Only these charts (snapshot targets, as the groups' "
                "/snapshots list them), comma-separated; in whichever of the groups has them")
SINCE = Param("since", check=decode_cursor, description="Where to start: a cursor this feed gave (`next`, or a stream's "
              "event id), or `now` for only what comes next; default: the first change kept")


def scope(hub: ChangeHub, params: Mapping[str, Any]) -> tuple[list[str], tuple[str, ...]]:
    """The groups (in the hub's order) and targets a request asks for."""
    groups = params["groups"] or tuple(hub.readers)
    return [name for name in hub.readers if name in groups], params["targets"] or ()


def response(page: Page) -> ChangesResponse:
    found = [change_of(group, row) for group, row in page.changes]
    return ChangesResponse(len(found), found, encode_cursor(page.positions), page.more)


class ChangeStream(Streaming):
    """One `GET /changes/stream`: the changes after its cursor (its Last-Event-ID, else `since`) as Server-Sent
    Events, then each new one as the hub reads it. Every event's id is the cursor after it."""

    LAST_EVENT_ID = b"last-event-id"

    def __init__(self, hub: ChangeHub, groups: list[str], targets: tuple[str, ...],
                 since: dict[str, int] | Literal["now"] | None) -> None:
        self.hub, self.groups, self.targets, self.since = hub, groups, targets, since

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        since = self.since
        resumed = next((v for k, v in scope["headers"] if k == self.LAST_EVENT_ID), None)
        if resumed is not None:
            since = self._resumed(resumed.decode("latin-1"))
        positions = await self.hub.newest(self.groups) if since == "now" else dict(since or {})
        async with self.hub.subscribed(self.groups, self.targets, scope.get(KEY_ID_SCOPE)) as subscriber:
            heartbeat = self.hub.settings.get(config.CHANGES_HEARTBEAT_SECONDS)
            response = EventSourceResponse(self._events(subscriber, positions), ping=heartbeat, sep="\n",
                                           send_timeout=SEND_TIMEOUT_SECONDS,
                                           ping_message_factory=lambda: ServerSentEvent(comment="ping"))
            # A client too slow to take its events is cut off: at once when its buffer overflows (the stream is
            # then stuck sending to it), or when one send outlasts SEND_TIMEOUT_SECONDS. The server closes the
            # connection; the client resumes by its Last-Event-ID.
            with anyio.CancelScope() as dropping, contextlib.suppress(SendTimeoutError):
                subscriber.on_drop = dropping.cancel
                await response(scope, receive, send)

    @staticmethod
    def _resumed(value: str) -> dict[str, int] | Literal["now"]:
        try:
            return decode_cursor(value)
        except ValueError as exc:
            raise InvalidParams([{"type": "value_error", "loc": ["header", "last-event-id"],
                                  "msg": f"Value error, {exc}", "input": value, "ctx": {"error": {}}}]) from None

    def _event(self, group: str, row: ChangeRow, positions: dict[str, int]) -> ServerSentEvent:
        positions[group] = row.id
        return ServerSentEvent(msgspec.json.encode(change_of(group, row)).decode(), event="change",
                               id=encode_cursor(positions))

    async def _events(self, subscriber: Subscriber, positions: dict[str, int]) -> AsyncIterator[ServerSentEvent]:
        yield ServerSentEvent(comment="chartgw changes", retry=3000)
        # A group read to its end is not read again: what is committed after that read is past what the polling
        # had read when this stream subscribed, so it reaches the stream through the subscriber.
        ended = dict.fromkeys(self.groups, sys.maxsize)
        while not self.hub.stopping:  # what is waiting past the cursor; changes read meanwhile wait in the subscriber
            # A page at a time, the next read only once this one is sent (the generator runs as sse-starlette's
            # sends return, and a send waits while the connection's buffer is full): a client that does not read
            # holds one small page here, not the history.
            page = await self.hub.page(positions, self.groups, self.targets, CATCH_UP, ended)
            ended.update((group, page.positions[group]) for group in page.ended)
            for group, row in page.changes:
                yield self._event(group, row, positions)
            positions = page.positions
            if not page.more:
                break
        while not self.hub.stopping:
            await subscriber.ready.wait()
            subscriber.ready.clear()
            if subscriber.dropped or self.hub.stopping:
                return  # it fell STREAM_BUFFER behind (the client resumes from its last event id), or the server stops
            while subscriber.pending:
                group, row = subscriber.pending.popleft()
                if row.id > positions.get(group, 0):  # not already sent while catching up
                    yield self._event(group, row, positions)


def changes_routes(hub: ChangeHub) -> list[Route]:
    """`GET /changes` and `GET /changes/stream` over the hub's groups (served at the gateway's root)."""

    async def feed(call: Call) -> ChangesResponse:
        groups, targets = scope(hub, call.params)
        since, limit, wait = call.params["since"], call.params["limit"], call.params["wait"]
        if not wait:
            positions = await hub.newest(groups) if since == "now" else dict(since or {})
            return response(await hub.page(positions, groups, targets, limit))
        async with hub.waiting(call.key_id):  # the polling runs: what the hub has read is current
            positions = hub.known(groups) if since == "now" else dict(since or {})
            deadline = time.monotonic() + wait
            while True:
                generation = hub.generation  # before what it knows: a change read after moves it
                page = await hub.page(positions, groups, targets, limit, hub.known(groups))
                if page.changes or not await hub.wait(generation, deadline - time.monotonic()):
                    return response(page)
                positions = page.positions

    async def stream(call: Call) -> ChangeStream:
        groups, targets = scope(hub, call.params)
        return ChangeStream(hub, groups, targets, call.params["since"])

    groups = _groups_param(list(hub.readers))
    return [
        Route("/changes", feed, (
            groups, TARGETS, SINCE,
            Param("limit", kind="int", default=100, ge=1, le=1000, description="Changes to return at most"),
            Param("wait", kind="int", default=0, ge=0, le=60, description="Seconds to wait for a change when none is "
                  "waiting (a long poll): answered the moment one is committed, or empty when the time is up"),
        ), cache_ttl=0, errors=(), response=ChangesResponse,
            summary="Every change record of every group in commit order, paged by a cursor, long-polled with wait"),
        Route("/changes/stream", stream, (groups, TARGETS, SINCE), cache_ttl=0, errors=(),
              media_type=b"text/event-stream",
              summary="The same changes as Server-Sent Events (event `change`, data a change as JSON, id the cursor "
                      "after it), resumed by Last-Event-ID, with a comment line as heartbeat"),
    ]
