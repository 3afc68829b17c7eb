"""Webhooks: the endpoints a key's holder registers (`POST /hooks`, `GET /hooks`, `DELETE /hooks/{id}`), the
attempts made to each (`GET /hooks/{id}/deliveries`), and the store the web server and the delivery worker share.

`<data dir>/hooks.sqlite` holds the hooks (each with its secret, shown once when it is made), the worker's place
in every group's change feed, one delivery per hook and change (its payload and Standard Webhooks message id
fixed when it is queued) and one row per attempt. The worker (`chartgw deliver`, chartgw.push.deliver) queues and
sends; the web server never waits on a partner's endpoint.

Where a hook may point is guarded twice: its URL when it is registered (https, or http to a host
CHARTGW_HOOKS_HTTP_HOSTS names; no credentials; no address literal that `address_refusal` refuses), and every
address its host resolves to when a delivery is sent (chartgw.push.deliver), unless CHARTGW_HOOKS_PRIVATE_ADDRESSES
allows them.

Hooks belong to a key id (chartgw.api.access: the key store's, or a CHARTGW_API_KEYS key's own); a key has at most
CHARTGW_HOOKS_PER_KEY, counted in the transaction that adds one.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import secrets
import socket
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import urlsplit

import msgspec

from chartgw.api.endpoints import ApiError, Call, Route, not_found
from chartgw.api.params import InvalidParams, Param
from chartgw.core import config
from chartgw.core.settings import Settings
from chartgw.store import Index, Query, Table, connect, iso, migrate, parse_iso, read_once, transaction
from chartgw.store import tables as t

__all__ = ["DISABLE_AFTER", "GIVE_UP_AFTER", "HOOK_QUERIES", "HOOK_TABLES", "Hook", "HookStore", "QueueRound", "TooManyHooks",
           "UnsafeURL", "address_refusal", "check_address", "check_url", "hooks_db_path", "hooks_routes", "retry_delay"]

HOOKS = Table("hooks", (
    "id INTEGER PRIMARY KEY AUTOINCREMENT",
    "key_id INTEGER NOT NULL",
    "url TEXT NOT NULL",
    "groups TEXT NOT NULL",
    "targets TEXT NOT NULL",
    "secret TEXT NOT NULL",
    "start BLOB NOT NULL",
    "created_at TEXT NOT NULL",
    "failing_since TEXT",
    "disabled_at TEXT",
    "disabled_reason TEXT",
))
"""Registered webhooks; `start` is each group file's newest change id when the hook was made (JSON)."""
FEED_POSITIONS = Table("feed_positions", ("grp TEXT NOT NULL", "last_id INTEGER NOT NULL"),
                       constraints=("PRIMARY KEY (grp)",), without_rowid=True)
"""The worker's place in each group's change feed."""
DELIVERIES = Table("deliveries", (
    "id INTEGER PRIMARY KEY",
    "hook_id INTEGER NOT NULL REFERENCES hooks (id) ON DELETE CASCADE",
    "msg_id TEXT NOT NULL UNIQUE",
    "grp TEXT NOT NULL",
    "change_id INTEGER NOT NULL",
    "payload BLOB NOT NULL",
    "created_at TEXT NOT NULL",
    "state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed'))",
    "attempts INTEGER NOT NULL DEFAULT 0",
    "next_at TEXT",
    "finished_at TEXT",
), indexes=(Index("deliveries_due", "state, next_at"), Index("deliveries_by_hook", "hook_id, state")))
ATTEMPTS = Table("attempts", (
    "id INTEGER PRIMARY KEY",
    "delivery_id INTEGER NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE",
    "hook_id INTEGER NOT NULL",
    "attempted_at TEXT NOT NULL",
    "duration_ms INTEGER NOT NULL",
    "status INTEGER",
    "error TEXT",
), indexes=(Index("attempts_by_hook", "hook_id, id"), Index("attempts_by_delivery", "delivery_id")))
HOOK_TABLES = (HOOKS, FEED_POSITIONS, DELIVERIES, ATTEMPTS)
"""What hooks.sqlite holds."""

HOOK = "id, key_id, url, groups, targets, created_at, failing_since, disabled_at, disabled_reason"
HOOK_ROWS = Query("hook_rows", f"SELECT {HOOK} FROM hooks WHERE (?1 IS NULL OR key_id = ?1) ORDER BY id")
HOOK_BY_ID = Query("hook_by_id", f"SELECT {HOOK} FROM hooks WHERE id = ?1")
HOOK_COUNT = Query("hook_count", "SELECT count(*) FROM hooks WHERE key_id = ?1")
HOOK_INSERT = Query("hook_insert", "INSERT INTO hooks (key_id, url, groups, targets, secret, start, created_at)"
                                   " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
HOOK_MOVE = Query("hook_move", "UPDATE hooks SET key_id = ?2 WHERE key_id = ?1")
"""A key's hooks handed to another key (its successor, `chartgw keys rotate`)."""
HOOK_DELETE = Query("hook_delete", "DELETE FROM hooks WHERE id = ?1 AND (?2 IS NULL OR key_id = ?2)")
HOOK_ENABLE = Query("hook_enable", "UPDATE hooks SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL"
                                   " WHERE id = ?1")
HOOK_ATTEMPTS = Query("hook_attempts", "SELECT d.msg_id, d.grp, d.change_id, a.attempted_at, a.duration_ms, a.status,"
                                       " a.error, d.state FROM attempts a JOIN deliveries d ON d.id = a.delivery_id"
                                       " WHERE a.hook_id = ?1 ORDER BY a.id DESC LIMIT ?2")
# The worker's (chartgw.push.deliver).
POSITIONS = Query("feed_positions", "SELECT grp, last_id FROM feed_positions")
POSITION_SET = Query("feed_position_set", "INSERT INTO feed_positions (grp, last_id) VALUES (?1, ?2)"
                                          " ON CONFLICT (grp) DO UPDATE SET last_id = excluded.last_id")
ACTIVE_HOOKS = Query("active_hooks", f"SELECT {HOOK}, start FROM hooks WHERE disabled_at IS NULL ORDER BY id")
QUEUE = Query("queue_delivery", "INSERT OR IGNORE INTO deliveries (hook_id, msg_id, grp, change_id, payload, created_at,"
                                " state, next_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', max(?6, coalesce((SELECT"
                                " max(next_at) FROM deliveries WHERE hook_id = ?1 AND state = 'pending'), ?6)))")
"""A new delivery is due now, or when its hook's waiting deliveries are (a failing hook's next try: no sooner)."""
DUE = Query("due_deliveries",
            "SELECT d.id, d.hook_id, d.msg_id, d.payload, d.attempts, d.created_at, h.url, h.secret, h.key_id FROM"
            " (SELECT *, row_number() OVER (PARTITION BY hook_id ORDER BY next_at, id) AS n FROM deliveries"
            "  WHERE state = 'pending' AND next_at <= ?1) d"
            " JOIN hooks h ON h.id = d.hook_id WHERE d.n <= ?2 AND h.disabled_at IS NULL ORDER BY d.hook_id, d.n")
"""Pending deliveries due by a time, at most ?2 per hook, of active hooks, each hook's oldest first."""
DELIVERY_EXISTS = Query("delivery_exists", "SELECT 1 FROM deliveries WHERE id = ?1")
ATTEMPT_INSERT = Query("attempt_insert", "INSERT INTO attempts (delivery_id, hook_id, attempted_at, duration_ms, status,"
                                         " error) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
DELIVERED = Query("delivered", "UPDATE deliveries SET state = 'delivered', attempts = attempts + 1, next_at = NULL,"
                               " finished_at = ?2 WHERE id = ?1")
GIVEN_UP = Query("given_up", "UPDATE deliveries SET state = 'failed', attempts = ?2, next_at = NULL, finished_at = ?3"
                             " WHERE id = ?1")
RETRY_AT = Query("retry_at", "UPDATE deliveries SET attempts = ?2, next_at = ?3 WHERE id = ?1")
HOOK_WAITS = Query("hook_waits", "UPDATE deliveries SET next_at = ?2 WHERE hook_id = ?1 AND state = 'pending'"
                                 " AND next_at < ?2")
"""A hook's other waiting deliveries wait until its next try."""
HOOK_ANSWERS = Query("hook_answers", "UPDATE hooks SET failing_since = NULL WHERE id = ?1")
HOOK_FAILS = Query("hook_fails", "UPDATE hooks SET failing_since = coalesce(failing_since, ?2) WHERE id = ?1"
                                 " RETURNING failing_since")
HOOK_DISABLE = Query("hook_disable", "UPDATE hooks SET disabled_at = ?2, disabled_reason = ?3 WHERE id = ?1"
                                     " AND disabled_at IS NULL")
PRUNE_FINISHED = Query("prune_finished", "DELETE FROM deliveries WHERE state != 'pending' AND finished_at < ?1")
HOOK_QUERIES = tuple(value for value in list(globals().values()) if isinstance(value, Query))
"""Every query of hooks.sqlite (tests/test_hooks.py compiles them against HOOK_TABLES)."""

GIVE_UP_AFTER = timedelta(hours=24)
"""A delivery is retried, with exponential backoff, for this long after it was queued."""
DISABLE_AFTER = timedelta(days=3)
"""A hook whose every attempt has failed for this long is disabled (and says so)."""
FIRST_RETRY_SECONDS = 5.0
LONGEST_RETRY_SECONDS = 2 * 3600.0
KEEP_FINISHED = timedelta(days=7)
"""Finished deliveries and their attempts are kept this long (GET /hooks/{id}/deliveries)."""
MAX_URL = 2048


def hooks_db_path(settings: Settings) -> Path:
    return settings.get(config.DATA_DIR) / "hooks.sqlite"


def retry_delay(attempts: int) -> timedelta:
    """The wait after the `attempts`-th failed attempt: 5 s, doubling, at most 2 h."""
    return timedelta(seconds=min(FIRST_RETRY_SECONDS * 2 ** (attempts - 1), LONGEST_RETRY_SECONDS))


# --- where a hook may point -----------------------------------------------------------------------------

class UnsafeURL(ValueError):
    """A webhook URL or address the guard refuses; the message says why."""


def _private_allowed(settings: Settings) -> bool:
    return settings.get(config.HOOKS_PRIVATE_ADDRESSES) == "allow"


V4 = ipaddress.IPv4Network
V6 = ipaddress.IPv6Network
REFUSED_V4 = tuple(V4(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
    "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
    "224.0.0.0/4", "240.0.0.0/4"))
"""IPv4 a hook may not reach: this network, private, shared (CGNAT), loopback, link-local, IETF protocol assignments,
documentation, the old 6to4 relays, benchmarking, multicast, reserved and broadcast (RFC 6890 and its registry)."""
GLOBAL_UNICAST = V6("2000::/3")
"""The only IPv6 space a hook may reach (less REFUSED_V6); everything outside it is multicast, link- or site-local,
unique-local, loopback, unspecified or reserved."""
REFUSED_V6 = tuple(V6(n) for n in ("2001::/23", "2001:db8::/32", "3fff::/20", "3ffe::/16"))
"""Within 2000::/3: IETF protocol assignments (Teredo's 2001::/32 is judged by the addresses it embeds),
documentation, and the returned 6bone."""
NAT64 = V6("64:ff9b::/96")
NAT64_LOCAL = V6("64:ff9b:1::/48")
SIX_TO_FOUR = V6("2002::/16")
TEREDO = V6("2001::/32")


def address_refusal(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why a hook may not reach `ip` (None when it may): only globally routable unicast, and an IPv6 address that
    carries an IPv4 one (mapped, compatible, NAT64, 6to4, Teredo) only when each IPv4 address it carries may be
    reached, since that is where its packets end up."""
    if isinstance(ip, ipaddress.IPv4Address):
        if any(ip in net for net in REFUSED_V4) or not ip.is_global:
            return "is not a public address"
        return None
    embedded: tuple[ipaddress.IPv4Address, ...] = ()
    if int(ip) <= 1:
        return "is not a public address"  # the unspecified address and loopback
    if ip in NAT64_LOCAL:
        return "is a local-use NAT64 address (RFC 8215)"
    if ip.ipv4_mapped is not None:
        embedded = (ip.ipv4_mapped,)
    elif ip in NAT64 or int(ip) >> 32 == 0:  # NAT64's well-known prefix, or IPv4-compatible (::a.b.c.d, :: and ::1)
        embedded = (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF),)
    elif ip.sixtofour is not None:
        embedded = (ip.sixtofour,)
    elif ip.teredo is not None:
        embedded = ip.teredo  # the Teredo server and the client behind it
    if embedded:
        refused = next((str(v4) for v4 in embedded if address_refusal(v4) is not None), None)
        return None if refused is None else f"carries {refused}, which is not a public address"
    if ip not in GLOBAL_UNICAST or any(ip in net for net in REFUSED_V6) or not ip.is_global:
        return "is not a public address"
    return None


def check_address(address: str, settings: Settings) -> None:
    """Refuse an IP address a hook may not reach (`address_refusal`), unless CHARTGW_HOOKS_PRIVATE_ADDRESSES allows
    every address."""
    why = address_refusal(ipaddress.ip_address(address.split("%", 1)[0]))
    if why is not None and not _private_allowed(settings):
        raise UnsafeURL(f"{address} {why} (CHARTGW_HOOKS_PRIVATE_ADDRESSES=allow permits it)")


def _legacy_ipv4(host: str) -> str | None:
    """The IPv4 address a host written in inet_aton's forms (`0x7f.1`, `2130706433`, `017700000001`) stands for, as
    the resolver reads it; None for any other host."""
    if not host or any(c not in "0123456789abcdefx." for c in host):
        return None
    try:
        return socket.inet_ntoa(socket.inet_aton(host))
    except OSError:
        return None


def check_url(url: str, settings: Settings) -> str:
    """`url` when a hook may be registered with it: https (or http to a host CHARTGW_HOOKS_HTTP_HOSTS names), a
    host, no credentials, no fragment, and no private address literal or local name (unless allowed)."""
    if len(url) > MAX_URL:
        raise UnsafeURL(f"a URL of at most {MAX_URL} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeURL(f"not a URL: {exc}") from None
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("https", "http") or not host:
        raise UnsafeURL("an absolute https URL")
    if parts.scheme == "http" and host not in {h.lower() for h in settings.get(config.HOOKS_HTTP_HOSTS)}:
        raise UnsafeURL("https only (plain http only to a host CHARTGW_HOOKS_HTTP_HOSTS names)")
    if parts.username is not None or parts.password is not None or parts.fragment:
        raise UnsafeURL("no credentials or fragment in the URL")
    if port == 0:
        raise UnsafeURL("not port 0")
    try:
        check_address(_legacy_ipv4(host) or host.strip("[]"), settings)
    except ValueError as exc:
        if isinstance(exc, UnsafeURL):
            raise
        # A name: resolved (and each address checked) when a delivery is sent; local names are refused now.
        if (host == "localhost" or host.endswith((".localhost", ".local", ".internal"))) and not _private_allowed(settings):
            raise UnsafeURL(f"{host} is a local name (CHARTGW_HOOKS_PRIVATE_ADDRESSES=allow permits it)") from None
    return url


# --- the store ------------------------------------------------------------------------------------------

class TooManyHooks(Exception):
    """A key at its limit of hooks (CHARTGW_HOOKS_PER_KEY)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"This key has {limit} webhooks already (CHARTGW_HOOKS_PER_KEY); delete one first")


@dataclass(frozen=True)
class Hook:
    id: int
    key_id: int
    url: str
    groups: tuple[str, ...]
    """Empty: every group."""
    targets: tuple[str, ...]
    """Empty: every target."""
    created_at: str
    failing_since: str | None
    disabled_at: str | None
    disabled_reason: str | None

    @classmethod
    def of(cls, row: Sequence[Any]) -> Hook:
        def split(text: str) -> tuple[str, ...]:
            return tuple(v for v in text.split(",") if v)

        return cls(row[0], row[1], row[2], split(row[3]), split(row[4]), *row[5:])

    def wants(self, group: str, target: str) -> bool:
        return (not self.groups or group in self.groups) and (not self.targets or target in self.targets)


class AttemptInfo(msgspec.Struct):
    """One attempt to deliver one change."""

    msg_id: str
    """The delivery's webhook-id (the same on every attempt)."""
    group: str
    change_id: int
    attempted_at: str
    duration_ms: int
    status: int | None
    """The endpoint's HTTP status; null without an answer."""
    error: str | None
    """Why the attempt failed; null when it succeeded (a 2xx)."""
    delivery_state: str
    """"pending" (retried with backoff), "delivered" or "failed" (given up after 24 h)."""


def newest_change_ids(groups: Sequence[str], folder: Path) -> dict[str, int]:
    """Each group file's newest change id now in data folder `folder` (0 without a file or a change), read-only."""
    found = {group: read_once(folder / f"{group}.sqlite", t.CHANGES_AFTER, (0, None, 0), timeout=5) for group in groups}
    return {group: int(rows[0][0]) if rows else 0 for group, rows in found.items()}


_OPENING = threading.Lock()


class HookStore:
    """hooks.sqlite: each call a short transaction of its own (the web server's calls run off its event loop)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextlib.contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            self.path.touch(mode=0o600)  # it holds the hooks' secrets: readable by the owner only
        with _OPENING:  # two first requests at once (POST /hooks twice on a new gateway) raced to migrate: a 503
            db = connect(self.path, foreign_keys=True, timeout=10)
            try:
                with transaction(db):  # one write lock, waited for, across processes too (the deliver worker)
                    migrate(db, HOOK_TABLES)
            except BaseException:
                db.close()
                raise
        try:
            yield db
        finally:
            db.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE): hook creation and the worker's queueing exclude each other, so
        a hook made meanwhile either is seen by a queueing or starts after every change it queued."""
        with self.connect() as db, transaction(db):
            yield db

    def create(self, key_id: int, url: str, groups: Sequence[str], targets: Sequence[str], all_groups: Sequence[str],
               now: datetime, limit: int | None = None) -> tuple[Hook, str]:
        """A new hook and its secret (only here); it gets the changes committed after this moment. With `limit`,
        `TooManyHooks` when the key has that many already (counted in the same write transaction as the insert, so
        parallel creations cannot pass it together)."""
        secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
        with self.transaction() as db:
            if limit is not None and int(db.execute(HOOK_COUNT.sql, (key_id,)).fetchone()[0]) >= limit:
                raise TooManyHooks(limit)
            start = msgspec.json.encode(newest_change_ids(all_groups, self.path.parent))
            cur = db.execute(HOOK_INSERT.sql, (key_id, url, ",".join(groups), ",".join(targets), secret, start, iso(now)))
            row = db.execute(HOOK_BY_ID.sql, (int(cur.lastrowid or 0),)).fetchone()
        return Hook.of(row), secret

    def hooks(self, key_id: int | None = None) -> list[Hook]:
        """Every hook (of `key_id` only, when given), oldest first."""
        with self.connect() as db:
            return [Hook.of(row) for row in db.execute(HOOK_ROWS.sql, (key_id,))]

    def hook(self, hook_id: int, key_id: int | None = None) -> Hook | None:
        return next((h for h in self.hooks(key_id) if h.id == hook_id), None)

    def count(self, key_id: int) -> int:
        with self.connect() as db:
            return int(db.execute(HOOK_COUNT.sql, (key_id,)).fetchone()[0])

    def move(self, from_key: int, to_key: int) -> int:
        """Hand every hook of key `from_key` to key `to_key` (its successor); how many moved."""
        with self.transaction() as db:
            return db.execute(HOOK_MOVE.sql, (from_key, to_key)).rowcount

    def delete(self, hook_id: int, key_id: int | None = None) -> bool:
        """Remove a hook (of `key_id` only, when given) with its deliveries and their attempts."""
        with self.transaction() as db:
            return db.execute(HOOK_DELETE.sql, (hook_id, key_id)).rowcount > 0

    def enable(self, hook_id: int) -> bool:
        """Enable a disabled hook again (its failure streak starts anew); it gets the changes queued from now."""
        with self.transaction() as db:
            return db.execute(HOOK_ENABLE.sql, (hook_id,)).rowcount > 0

    def attempts(self, hook_id: int, limit: int) -> list[AttemptInfo]:
        """The hook's delivery attempts, newest first."""
        with self.connect() as db:
            return [AttemptInfo(*row) for row in db.execute(HOOK_ATTEMPTS.sql, (hook_id, limit))]

    # The worker's (chartgw.push.deliver): it reads the groups' feeds and sends; this store keeps what it did.

    @contextlib.contextmanager
    def queueing(self) -> Iterator[QueueRound]:
        """One queueing round of the worker, in one write transaction (see `transaction`)."""
        with self.transaction() as db:
            yield QueueRound(db)

    def due(self, now: str, per_hook: int) -> list[tuple[Any, ...]]:
        """Pending deliveries due by `now`, at most `per_hook` per hook, of active hooks, each hook's oldest first:
        (id, hook id, message id, payload, attempts, created at, url, secret, key id)."""
        with self.connect() as db:
            return db.execute(DUE.sql, (now, per_hook)).fetchall()

    def record_attempt(self, delivery_id: int, hook_id: int, attempts: int, created_at: str, at: datetime,
                       duration_ms: int, status: int | None, error: str | None) -> None:
        """An attempt's row, and what follows from it for the delivery (delivered, retried later with backoff, or
        given up after GIVE_UP_AFTER) and its hook (failing since, disabled after DISABLE_AFTER), in one transaction.
        `attempts` is the delivery's count before this one."""
        when = iso(at)
        with self.transaction() as db:
            if not db.execute(DELIVERY_EXISTS.sql, (delivery_id,)).fetchone():
                return  # its hook was removed meanwhile
            db.execute(ATTEMPT_INSERT.sql, (delivery_id, hook_id, when, duration_ms, status, error))
            if error is None:
                db.execute(DELIVERED.sql, (delivery_id, when))
                db.execute(HOOK_ANSWERS.sql, (hook_id,))
                return
            attempts += 1
            retry = at + retry_delay(attempts)
            if retry > parse_iso(created_at) + GIVE_UP_AFTER:
                db.execute(GIVEN_UP.sql, (delivery_id, attempts, when))
            else:
                db.execute(RETRY_AT.sql, (delivery_id, attempts, iso(retry)))
                db.execute(HOOK_WAITS.sql, (hook_id, iso(retry)))
            since = db.execute(HOOK_FAILS.sql, (hook_id, when)).fetchone()[0]
            if at - parse_iso(since) >= DISABLE_AFTER:
                db.execute(HOOK_DISABLE.sql, (hook_id, when, f"every delivery attempt failed since {since}"
                                              f" (the last: {error}); re-enable it with chartgw hooks enable"))

    def prune_finished(self, before: str) -> None:
        """Drop deliveries finished before `before` (their attempts go with them)."""
        with self.transaction() as db:
            db.execute(PRUNE_FINISHED.sql, (before,))


class QueueRound:
    """The worker's queueing round inside `HookStore.queueing`'s transaction: the feed positions, the active hooks,
    what it disables or hands to another key, and the deliveries it queues."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def positions(self) -> dict[str, int]:
        return dict(self._db.execute(POSITIONS.sql).fetchall())

    def active_hooks(self) -> list[tuple[Hook, dict[str, int]]]:
        """Every hook not disabled, with its start (each group's change id it was made after)."""
        return [(Hook.of(row[:-1]), msgspec.json.decode(row[-1], type=dict[str, int]))
                for row in self._db.execute(ACTIVE_HOOKS.sql)]

    def move_hooks(self, from_key: int, to_key: int) -> None:
        self._db.execute(HOOK_MOVE.sql, (from_key, to_key))

    def disable(self, hook_id: int, now: str, reason: str) -> None:
        self._db.execute(HOOK_DISABLE.sql, (hook_id, now, reason))

    def queue(self, hook_id: int, msg_id: str, group: str, change_id: int, payload: bytes, now: str) -> int:
        """Queue one delivery (none when its message id is queued already); the number queued."""
        return int(self._db.execute(QUEUE.sql, (hook_id, msg_id, group, change_id, payload, now)).rowcount)

    def set_positions(self, positions: dict[str, int]) -> None:
        self._db.executemany(POSITION_SET.sql, list(positions.items()))


# --- the routes ---------------------------------------------------------------------------------------------

class HookRequest(msgspec.Struct, forbid_unknown_fields=True):
    """What POST /hooks takes (a JSON object)."""

    url: str
    """Where to POST each change: https (plain http only to hosts the operator allows); no redirect is followed."""
    groups: list[str] = []
    """Only changes of these groups (default: every group)."""
    targets: list[str] = []
    """Only changes of these charts (snapshot targets; default: every chart)."""


class HookInfo(msgspec.Struct):
    id: int
    url: str
    groups: list[str]
    targets: list[str]
    created_at: str
    state: str
    """"active", or "disabled" once every attempt failed for 3 days (`disabled_reason` says so)."""
    failing_since: str | None
    """The first failed attempt since the last success; null while the endpoint answers."""
    disabled_reason: str | None


class NewHook(HookInfo):
    secret: str
    """The Standard Webhooks signing secret (whsec_...): shown only in this answer."""


class HooksResponse(msgspec.Struct):
    count: int
    hooks: list[HookInfo]


class DeletedHook(msgspec.Struct):
    id: int
    deleted: bool


class DeliveriesResponse(msgspec.Struct):
    hook: HookInfo
    count: int
    attempts: list[AttemptInfo]


def hook_info(hook: Hook) -> HookInfo:
    return HookInfo(hook.id, hook.url, list(hook.groups), list(hook.targets), hook.created_at,
                    "disabled" if hook.disabled_at else "active", hook.failing_since, hook.disabled_reason)


def _invalid(loc: list[str | int], kind: str, msg: str, value: Any) -> InvalidParams:
    return InvalidParams([{"type": kind, "loc": loc, "msg": msg, "input": value}])


def read_request(body: bytes, groups: Sequence[str], settings: Settings) -> HookRequest:
    """The request body, checked as FastAPI would answer it (422 items located in the body)."""
    if not body.strip():
        raise _invalid(["body"], "missing", "Field required", None)
    try:
        request = msgspec.json.decode(body, type=HookRequest)
    except msgspec.ValidationError as exc:
        raise _invalid(["body"], "model_attributes_type", f"Input should be a valid object: {exc}", None) from None
    except msgspec.DecodeError as exc:
        raise _invalid(["body"], "json_invalid", f"JSON decode error: {exc}", None) from None
    try:
        check_url(request.url, settings)
    except UnsafeURL as exc:
        raise InvalidParams([{"type": "value_error", "loc": ["body", "url"], "msg": f"Value error, {exc}",
                              "input": request.url, "ctx": {"error": {}}}]) from None
    unknown = [g for g in request.groups if g not in groups]
    if unknown:
        raise _invalid(["body", "groups"], "value_error", f"Value error, no group named {', '.join(unknown)}",
                       request.groups)
    if len(request.targets) > 100 or any(not t.strip() for t in request.targets):
        raise _invalid(["body", "targets"], "value_error", "Value error, 0 to 100 targets, none blank", request.targets)
    return request


class HookParams(TypedDict):
    id: int


class DeliveriesParams(HookParams):
    limit: int


def hooks_routes(groups: Sequence[str], store_of: Callable[[Settings], HookStore] | None = None) -> list[Route]:
    """`POST /hooks`, `GET /hooks`, `DELETE /hooks/{id}`, `GET /hooks/{id}/deliveries` (at the gateway's root,
    keyed: each key sees its own hooks). `store_of(settings)` opens the store (by default the one in the data
    folder of the app's settings)."""
    opened = store_of or (lambda settings: HookStore(hooks_db_path(settings)))

    def key_of(call: Call) -> int:
        if call.key_id is None:  # a keyed route: the middleware always sets it
            raise ApiError(401, "Missing API key: send it in the X-API-Key header")
        return call.key_id

    async def create(call: Call) -> NewHook:
        key_id = key_of(call)
        request = read_request(call.body, groups, call.settings)
        store = opened(call.settings)
        try:
            hook, secret = await asyncio.to_thread(
                store.create, key_id, request.url, list(dict.fromkeys(request.groups)),
                list(dict.fromkeys(t.strip() for t in request.targets)), groups, call.now,
                call.settings.get(config.HOOKS_PER_KEY))
        except TooManyHooks as exc:
            raise ApiError(403, str(exc)) from None
        info = hook_info(hook)
        return NewHook(**{f: getattr(info, f) for f in info.__struct_fields__}, secret=secret)

    async def listing(call: Call) -> HooksResponse:
        hooks = await asyncio.to_thread(opened(call.settings).hooks, key_of(call))
        return HooksResponse(len(hooks), [hook_info(h) for h in hooks])

    async def remove(call: Call[HookParams]) -> DeletedHook:
        if not await asyncio.to_thread(opened(call.settings).delete, call.params["id"], key_of(call)):
            raise not_found(f"No webhook {call.params['id']} of this key")
        return DeletedHook(call.params["id"], True)

    async def deliveries(call: Call[DeliveriesParams]) -> DeliveriesResponse:
        store = opened(call.settings)
        hook = await asyncio.to_thread(store.hook, call.params["id"], key_of(call))
        if hook is None:
            raise not_found(f"No webhook {call.params['id']} of this key")
        found = await asyncio.to_thread(store.attempts, hook.id, call.params["limit"])
        return DeliveriesResponse(hook_info(hook), len(found), found)

    hook_id = Param("id", where="path", kind="int", ge=1, description="The webhook's id")
    return [
        Route("/hooks", create, method="POST", cache_ttl=0, errors=(403,), response=NewHook, body=HookRequest,
              summary="Register a webhook: each change (as GET /changes gives it) POSTed to the URL, signed per "
                      "Standard Webhooks; the secret is shown once"),
        Route("/hooks", listing, cache_ttl=0, errors=(), response=HooksResponse,
              summary="This key's webhooks, with their state"),
        Route("/hooks/{id}", remove, (hook_id,), method="DELETE", cache_ttl=0, response=DeletedHook,
              summary="Remove one of this key's webhooks (its deliveries go with it)"),
        Route("/hooks/{id}/deliveries", deliveries, (
            hook_id, Param("limit", kind="int", default=100, ge=1, le=1000, description="Attempts, newest first"),
        ), cache_ttl=0, response=DeliveriesResponse, summary="Every attempt to deliver to one of this key's webhooks"),
    ]
