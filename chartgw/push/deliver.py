"""The webhook worker (`chartgw deliver`): queues a delivery for every new change record and every hook that wants
it, and sends each one signed per Standard Webhooks, retrying with backoff; never part of the web server.

At least once: a delivery is queued (its message id and payload fixed) in the same hooks.sqlite transaction that
moves the worker's place in the group's feed, and marked delivered only after the endpoint answered 2xx. A worker
killed at any moment loses nothing: on restart it sends what is still pending again, under the same
`webhook-id`, so a receiver that already had it can tell.

Every attempt is logged. A failed one is retried after 5 s, doubling up to 2 h, for 24 h after the delivery was
queued; the hook's other waiting deliveries wait as long (a down endpoint is not hammered). A hook whose attempts
have all failed for 3 days is disabled, with the reason. Each send goes to an address its host resolved to and
that passed the guard (chartgw.push.hooks.check_address), pinned for the request (TLS still checks the host's name), so
a name that resolves elsewhere by the time of the request cannot reach a private address; no redirect is followed.
Of an answer only the status and at most REPLY_BYTES are read.

A hook delivers while its key is in force (chartgw.api.access.KeyRoster, read every round): a revoked or expired key's
hooks are disabled, saying why, and sent nothing more. The sends are shared among keys (PER_KEY of CONCURRENCY at
most, the keys taking turns), so one partner's endpoints that never answer cannot hold another partner's deliveries.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import msgspec
from standardwebhooks import Webhook

from chartgw.api.access import ENV_KEY_ID, KeyRoster, env_key_id, keys_db_path
from chartgw.core import config
from chartgw.core.clock import Clock, utc_now
from chartgw.core.locks import file_lock
from chartgw.core.settings import Settings
from chartgw.crawl.runner import tls
from chartgw.push.changes import change_of
from chartgw.push.hooks import (
    KEEP_FINISHED,
    Hook,
    HookStore,
    QueueRound,
    UnsafeURL,
    check_address,
    check_url,
    hooks_db_path,
    newest_change_ids,
)
from chartgw.store import ChangeRow, connect, group_db_path, iso
from chartgw.store import tables as t

__all__ = ["Deliverer", "Due", "deliver_lock", "payload_of"]

USER_AGENT = "chartgw-webhooks/1"
BATCH = 1000
"""Change records read per group and queueing."""
PER_HOOK = 50
"""Due deliveries a hook is sent one after another in one go."""
CONCURRENCY = 32
"""Hooks sent to at once, in all."""
PER_KEY = 4
"""Hooks of one key sent to at once: a key whose receivers hang holds at most these, never another key's share."""
REPLY_BYTES = 4096
"""What is read of a receiver's answer at most (its status is what counts): a huge or endless body costs nothing."""


def payload_of(group: str, row: ChangeRow) -> bytes:
    """A webhook body: the change as GET /changes gives it, under a type and timestamp (Standard Webhooks)."""
    change = change_of(group, row)
    return msgspec.json.encode({"type": "chart.changed", "timestamp": change.committed_at, "data": change})


@dataclass(frozen=True)
class Due:
    """A pending delivery whose time has come, with where it goes."""

    id: int
    hook_id: int
    msg_id: str
    payload: bytes
    attempts: int
    created_at: str
    url: str
    secret: str
    key_id: int


async def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (an address literal is its own)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class Deliverer:
    """Queues and sends webhook deliveries for `groups`' change feeds. `step` does one round (queue what is new, start
    sending what is due); `settle` waits for the sends started; `run` steps every CHARTGW_CHANGES_POLL_SECONDS."""

    def __init__(self, groups: Sequence[str], store: HookStore | None = None, clock: Clock = utc_now,
                 transport: httpx.AsyncBaseTransport | None = None, concurrency: int = CONCURRENCY,
                 log: Callable[[str], object] = lambda line: None, keys: KeyRoster | None = None,
                 per_key: int = PER_KEY, env_keys: Sequence[str] | None = None, *, settings: Settings) -> None:
        self.settings = settings
        """The worker's settings (the command's): the URL guard, timeouts, polling, the data folder."""
        self.groups = list(groups)
        self.store = store or HookStore(hooks_db_path(self.settings))
        self.clock = clock
        self.transport = transport
        self.concurrency = concurrency
        self.per_key = per_key
        self.log = log
        plain: tuple[str, ...] = self.settings.get(config.API_KEYS) if env_keys is None else tuple(env_keys)  # the server's
        self.keys = keys or KeyRoster(keys_db_path(self.settings), plain, clock)
        """Which keys are in force: a hook of any other key is disabled, and nothing more is sent to it."""
        self._in_force: frozenset[int] = frozenset()
        self._heir = env_key_id(plain[0]) if len(plain) == 1 else None
        """The one key of CHARTGW_API_KEYS, when there is exactly one: hooks registered when every such key shared the
        id ENV_KEY_ID are its own."""
        self._busy: dict[int, int] = {}  # hook id -> its key id, while it is being sent to
        self._turn = 0  # which key is offered a slot first, moved on each round
        self._tasks: set[asyncio.Task[None]] = set()
        self._files: dict[str, sqlite3.Connection] = {}
        self._pruned = datetime.min.replace(tzinfo=clock().tzinfo)
        self._client: httpx.AsyncClient | None = None

    async def __aenter__(self) -> Deliverer:
        timeout = self.settings.get(config.HOOKS_TIMEOUT_SECONDS)
        self._client = httpx.AsyncClient(transport=self.transport, follow_redirects=False, trust_env=False,
                                         timeout=httpx.Timeout(timeout), headers={"user-agent": USER_AGENT},
                                         verify=tls())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.settle()
        if self._client is not None:
            await self._client.aclose()
        for db in self._files.values():
            db.close()
        self._files.clear()

    # --- keys -------------------------------------------------------------------------------------------

    def _retire(self, round_: QueueRound, hooks: list[tuple[Hook, dict[str, int]]], now: str,
                ) -> list[tuple[Hook, dict[str, int]]]:
        """The hooks whose key is in force; each other one is disabled, saying why (its key was revoked or expired)."""
        if self._heir is not None:  # once: the shared id's hooks to the only env key
            round_.move_hooks(ENV_KEY_ID, self._heir)
            hooks = [(replace(hook, key_id=self._heir) if hook.key_id == ENV_KEY_ID else hook, start)
                     for hook, start in hooks]
            self._heir = None
        if any(hook.key_id not in self._in_force for hook, _ in hooks):
            # Read again inside this transaction before disabling anything: `keys rotate` commits the new key and then
            # moves the hooks to it, so a hook seen here with a key the roster read before missed is the new key's.
            self._in_force = self.keys.in_force(fresh=True)
        kept = []
        for hook, start in hooks:
            if hook.key_id in self._in_force:
                kept.append((hook, start))
            else:
                round_.disable(hook.id, now, f"its key ({hook.key_id}) was revoked or has expired, or "
                                             "is not a key of this worker's CHARTGW_API_KEYS")
                self.log(f"{now} hook {hook.id}: disabled, its key {hook.key_id} is not in force")
        return kept

    # --- queueing ---------------------------------------------------------------------------------------

    def _feed(self, group: str) -> sqlite3.Connection | None:
        db = self._files.get(group)
        if db is None:
            path = group_db_path(group, self.settings)
            if not path.exists():
                return None
            db = self._files[group] = connect(path, readonly=True, timeout=5)
        return db

    def _new_changes(self, group: str, after: int) -> list[ChangeRow]:
        db = self._feed(group)
        if db is None:
            return []
        try:
            rows = db.execute(t.CHANGES_AFTER.sql, (after, None, BATCH)).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise
        return [ChangeRow(*row[1:]) for row in rows if row[1] is not None]

    def queue(self) -> int:
        """Queue one delivery per new change and active hook that wants it, and move the feed positions past those
        changes, in one transaction. Returns how many were queued."""
        now = iso(self.clock())
        queued = 0
        self._in_force = self.keys.in_force()
        with self.store.queueing() as round_:
            positions = round_.positions()
            hooks = self._retire(round_, round_.active_hooks(), now)
            for group in self.groups:
                if group not in positions:  # the first queueing: from the oldest hook's start, or the current end
                    starts = [start.get(group, 0) for _, start in hooks]
                    positions[group] = min(starts) if starts else newest_change_ids([group], self.store.path.parent)[group]
                rows = self._new_changes(group, positions[group])
                for row in rows:
                    payload: bytes | None = None
                    for hook, start in hooks:
                        if row.id <= start.get(group, 0) or not hook.wants(group, row.target):
                            continue
                        payload = payload or payload_of(group, row)
                        queued += round_.queue(hook.id, f"msg_{hook.id}_{group}_{row.id}", group, row.id, payload, now)
                if rows:
                    positions[group] = rows[-1].id
            round_.set_positions(positions)
        return queued

    # --- sending ----------------------------------------------------------------------------------------

    def due(self) -> dict[int, list[Due]]:
        """Pending deliveries whose time has come, of active hooks, by hook (oldest first)."""
        rows = self.store.due(iso(self.clock()), PER_HOOK)
        by_hook: dict[int, list[Due]] = {}
        for row in rows:
            by_hook.setdefault(row[1], []).append(Due(*row))
        return by_hook

    async def step(self) -> None:
        """Queue what is new; start sending what is due to each hook not already being sent to, sharing the sends
        among keys: at most `per_key` hooks of one key at once, and the keys take turns at the free slots."""
        self.queue()
        self._prune()
        by_key: dict[int, list[tuple[int, list[Due]]]] = {}
        for hook_id, deliveries in self.due().items():
            if hook_id not in self._busy and deliveries[0].key_id in self._in_force:
                by_key.setdefault(deliveries[0].key_id, []).append((hook_id, deliveries))
        keys = sorted(by_key)
        if keys:
            self._turn = (self._turn + 1) % len(keys)
            keys = keys[self._turn:] + keys[:self._turn]
        sending = Counter(self._busy.values())
        while keys and len(self._busy) < self.concurrency:
            for key_id in list(keys):
                waiting = by_key[key_id]
                if not waiting or sending[key_id] >= self.per_key or len(self._busy) >= self.concurrency:
                    keys.remove(key_id)
                    continue
                hook_id, deliveries = waiting.pop(0)
                sending[key_id] += 1
                self._busy[hook_id] = key_id
                task = asyncio.create_task(self._drain(hook_id, deliveries))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def settle(self) -> None:
        """Until every send started has been recorded."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def run(self, stop: asyncio.Event | None = None) -> None:
        stop = stop or asyncio.Event()
        async with self:
            while not stop.is_set():
                try:
                    await self.step()
                except sqlite3.Error as exc:  # a busy or damaged file this round: said, and tried again next round
                    self.log(f"{iso(self.clock())} queueing failed: {exc}")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.settings.get(config.CHANGES_POLL_SECONDS))

    async def _drain(self, hook_id: int, deliveries: list[Due]) -> None:
        """Send a hook's due deliveries in order; after a failure the rest wait for the hook's next try."""
        try:
            for delivery in deliveries:
                if delivery.key_id not in self._in_force:  # revoked or expired meanwhile: not one more send
                    break
                if not await self._attempt(delivery):
                    break
        except sqlite3.Error as exc:  # the attempt went unrecorded: the delivery stays pending and is sent again
            self.log(f"{iso(self.clock())} hook {hook_id}: recording an attempt failed: {exc}")
        finally:
            self._busy.pop(hook_id, None)

    async def _attempt(self, delivery: Due) -> bool:
        attempted = self.clock()
        started = time.monotonic()
        status, error = await self.send(delivery, attempted)
        duration = int((time.monotonic() - started) * 1000)
        self._record(delivery, attempted, duration, status, error)
        self.log(f"{iso(attempted)} hook {delivery.hook_id} {delivery.msg_id}: "
                 + (f"delivered (HTTP {status}, {duration} ms)" if error is None else f"failed: {error}"))
        return error is None

    async def send(self, delivery: Due, at: datetime) -> tuple[int | None, str | None]:
        """POST one delivery, signed as of `at`: (HTTP status or None, why it failed or None)."""
        assert self._client is not None, "a Deliverer sends inside `async with`"
        timeout = self.settings.get(config.HOOKS_TIMEOUT_SECONDS)
        try:
            check_url(delivery.url, self.settings)  # the rules in force now (the operator may have tightened them)
            url, host_header, extensions = await pinned(delivery.url, self.settings)
        except (UnsafeURL, OSError) as exc:
            return None, f"refused: {exc}" if isinstance(exc, UnsafeURL) else f"cannot resolve the host: {exc}"
        body = delivery.payload.decode()
        headers = {"content-type": "application/json", "host": host_header, "webhook-id": delivery.msg_id,
                   "webhook-timestamp": str(int(at.timestamp())),
                   "webhook-signature": Webhook(delivery.secret).sign(delivery.msg_id, at, body)}
        try:
            async with asyncio.timeout(timeout), self._client.stream(
                    "POST", url, content=delivery.payload, headers=headers, extensions=extensions) as response:
                read = 0
                async for chunk in response.aiter_raw():  # a few KB at most; the rest is never read
                    read += len(chunk)
                    if read >= REPLY_BYTES:
                        break
        except (TimeoutError, httpx.TimeoutException):
            return None, f"no answer within {timeout} s"
        except httpx.HTTPError as exc:
            return None, f"{type(exc).__name__}: {exc or 'connection failed'}"
        if 200 <= response.status_code < 300:
            return response.status_code, None
        if response.is_redirect:
            return response.status_code, f"HTTP {response.status_code}: redirects are not followed"
        return response.status_code, f"HTTP {response.status_code}"

    def _record(self, delivery: Due, at: datetime, duration: int, status: int | None, error: str | None) -> None:
        """The attempt's row, and what follows from it for the delivery and its hook, in one transaction."""
        self.store.record_attempt(delivery.id, delivery.hook_id, delivery.attempts, delivery.created_at, at, duration,
                                  status, error)

    def _prune(self) -> None:
        """About hourly: drop deliveries finished more than KEEP_FINISHED ago (their attempts go with them)."""
        now = self.clock()
        if now - self._pruned < timedelta(hours=1):
            return
        self._pruned = now
        self.store.prune_finished(iso(now - KEEP_FINISHED))


async def pinned(url: str, settings: Settings) -> tuple[str, str, dict[str, Any]]:
    """`url` with its host replaced by an address it resolves to that the guard allows (every address must pass),
    the Host header to send, and the TLS server name to check (https)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    addresses = await resolve(host, port)
    if not addresses:
        raise OSError(f"{host} has no address")
    for address in addresses:
        check_address(address, settings)
    address = addresses[0]
    netloc = (f"[{address}]" if ":" in address else address) + (f":{parts.port}" if parts.port else "")
    host_header = parts.netloc.rpartition("@")[2]
    extensions: dict[str, Any] = {"sni_hostname": host} if parts.scheme == "https" else {}
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, "")), host_header, extensions


@contextlib.contextmanager
def deliver_lock(settings: Settings) -> Iterator[bool]:
    """One worker per data folder: yields False when another holds it."""
    with file_lock(hooks_db_path(settings).with_name("hooks.deliver.lock")) as held:
        yield held


def main(groups: Sequence[str], once: bool, settings: Settings, clock: Clock = utc_now) -> int:
    """`chartgw deliver` under `settings`: 0 when stopped (or after one round with `once`), 75 when another worker
    runs."""
    with deliver_lock(settings) as mine:
        if not mine:
            print("chartgw deliver: another worker is running for this data folder", file=sys.stderr)
            return 75

        async def go() -> None:
            deliverer = Deliverer(groups, clock=clock, log=lambda line: print(line, flush=True), settings=settings)
            if once:
                async with deliverer:  # leaving waits for the sends started
                    await deliverer.step()
            else:
                await deliverer.run()

        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(go())
    return 0
