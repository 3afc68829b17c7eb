"""Webhooks: the endpoints a key's holder registers (`POST /hooks`, `GET /hooks`, `DELETE /hooks/{id}`), the
attempts made to each (`GET /hooks/{id}/deliveries`), and the store the web server and the delivery worker share.

`<data dir>/hooks.sqlite` holds the hooks (each with its secret, shown once when it is made), the worker's place
in every group's change feed, one delivery per hook and change (its payload and Standard Webhooks message id
fixed when it is queued) and one row per attempt. The worker (`chartgw deliver`, chartgw.deliver) queues and
sends; the web server never waits on a partner's endpoint.

Where a hook may point is guarded twice: its URL when it is registered (https, or http to a host
CHARTGW_HOOKS_HTTP_HOSTS names; no credentials; no private, loopback or link-local address literal), and every
address its host resolves to when a delivery is sent (chartgw.deliver), unless CHARTGW_HOOKS_PRIVATE_ADDRESSES
allows them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import secrets
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec

from chartgw import config
from chartgw.endpoints import ApiError, Call, Route, not_found
from chartgw.params import InvalidParams, Param
from chartgw.store import group_db_path, iso

__all__ = ["DISABLE_AFTER", "GIVE_UP_AFTER", "HOOKS_SCHEMA", "Hook", "HookStore", "UnsafeURL", "check_address",
           "check_url", "hooks_db_path", "hooks_routes", "retry_delay"]

HOOKS_SCHEMA = """
CREATE TABLE IF NOT EXISTS hooks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key_id INTEGER NOT NULL,
    url TEXT NOT NULL,
    groups TEXT NOT NULL,
    targets TEXT NOT NULL,
    secret TEXT NOT NULL,
    start BLOB NOT NULL,
    created_at TEXT NOT NULL,
    failing_since TEXT,
    disabled_at TEXT,
    disabled_reason TEXT
);
CREATE TABLE IF NOT EXISTS feed_positions (
    grp TEXT PRIMARY KEY,
    last_id INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deliveries (
    id INTEGER PRIMARY KEY,
    hook_id INTEGER NOT NULL REFERENCES hooks (id) ON DELETE CASCADE,
    msg_id TEXT NOT NULL UNIQUE,
    grp TEXT NOT NULL,
    change_id INTEGER NOT NULL,
    payload BLOB NOT NULL,
    created_at TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at TEXT,
    finished_at TEXT
);
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (state, next_at);
CREATE INDEX IF NOT EXISTS deliveries_by_hook ON deliveries (hook_id, state);
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY,
    delivery_id INTEGER NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    hook_id INTEGER NOT NULL,
    attempted_at TEXT NOT NULL,
    duration_ms INTEGER NOT NULL,
    status INTEGER,
    error TEXT
);
CREATE INDEX IF NOT EXISTS attempts_by_hook ON attempts (hook_id, id);
CREATE INDEX IF NOT EXISTS attempts_by_delivery ON attempts (delivery_id);
"""

GIVE_UP_AFTER = timedelta(hours=24)
"""A delivery is retried, with exponential backoff, for this long after it was queued."""
DISABLE_AFTER = timedelta(days=3)
"""A hook whose every attempt has failed for this long is disabled (and says so)."""
FIRST_RETRY_SECONDS = 5.0
LONGEST_RETRY_SECONDS = 2 * 3600.0
KEEP_FINISHED = timedelta(days=7)
"""Finished deliveries and their attempts are kept this long (GET /hooks/{id}/deliveries)."""
MAX_URL = 2048


def hooks_db_path() -> Path:
    return config.data_dir() / "hooks.sqlite"


def retry_delay(attempts: int) -> timedelta:
    """The wait after the `attempts`-th failed attempt: 5 s, doubling, at most 2 h."""
    return timedelta(seconds=min(FIRST_RETRY_SECONDS * 2 ** (attempts - 1), LONGEST_RETRY_SECONDS))


# --- where a hook may point -----------------------------------------------------------------------------

class UnsafeURL(ValueError):
    """A webhook URL or address the guard refuses; the message says why."""


def _private_allowed() -> bool:
    return config.get(config.HOOKS_PRIVATE_ADDRESSES) == "allow"


def check_address(address: str) -> None:
    """Refuse an IP address that is not globally routable (private, loopback, link-local, multicast, reserved,
    the unspecified address), unless CHARTGW_HOOKS_PRIVATE_ADDRESSES allows them."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if not ip.is_global and not _private_allowed():
        raise UnsafeURL(f"{address} is not a public address (CHARTGW_HOOKS_PRIVATE_ADDRESSES=allow permits it)")


def check_url(url: str) -> str:
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
    if parts.scheme == "http" and host not in {h.lower() for h in config.get(config.HOOKS_HTTP_HOSTS)}:
        raise UnsafeURL("https only (plain http only to a host CHARTGW_HOOKS_HTTP_HOSTS names)")
    if parts.username is not None or parts.password is not None or parts.fragment:
        raise UnsafeURL("no credentials or fragment in the URL")
    if port == 0:
        raise UnsafeURL("not port 0")
    try:
        check_address(host.strip("[]"))
    except ValueError as exc:
        if isinstance(exc, UnsafeURL):
            raise
        # A name: resolved (and each address checked) when a delivery is sent; local names are refused now.
        if (host == "localhost" or host.endswith((".localhost", ".local", ".internal"))) and not _private_allowed():
            raise UnsafeURL(f"{host} is a local name (CHARTGW_HOOKS_PRIVATE_ADDRESSES=allow permits it)") from None
    return url


# --- the store ------------------------------------------------------------------------------------------

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

    COLUMNS = "id, key_id, url, groups, targets, created_at, failing_since, disabled_at, disabled_reason"

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


def newest_change_ids(groups: Sequence[str]) -> dict[str, int]:
    """Each group file's newest change id now (0 without a file or a change), read-only."""
    newest = {}
    for group in groups:
        path = group_db_path(group)
        found = 0
        if path.exists():
            with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(path, timeout=5)) as db:
                db.execute("PRAGMA query_only=1")
                found = int(db.execute("SELECT coalesce(max(id), 0) FROM changes").fetchone()[0])
        newest[group] = found
    return newest


class HookStore:
    """hooks.sqlite: each call a short transaction of its own (the web server's calls run off its event loop)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or hooks_db_path()

    @contextlib.contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            self.path.touch(mode=0o600)  # it holds the hooks' secrets: readable by the owner only
        db = sqlite3.connect(self.path, isolation_level=None, timeout=10)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA foreign_keys=ON")
            db.executescript(HOOKS_SCHEMA)
            yield db
        finally:
            db.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE): hook creation and the worker's queueing exclude each other, so
        a hook made meanwhile either is seen by a queueing or starts after every change it queued."""
        with self.connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def create(self, key_id: int, url: str, groups: Sequence[str], targets: Sequence[str], all_groups: Sequence[str],
               now: datetime) -> tuple[Hook, str]:
        """A new hook and its secret (only here); it gets the changes committed after this moment."""
        secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
        with self.transaction() as db:
            start = msgspec.json.encode(newest_change_ids(all_groups))
            cur = db.execute(
                "INSERT INTO hooks (key_id, url, groups, targets, secret, start, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key_id, url, ",".join(groups), ",".join(targets), secret, start, iso(now)))
            hook_id = int(cur.lastrowid or 0)
            row = db.execute(f"SELECT {Hook.COLUMNS} FROM hooks WHERE id = ?", (hook_id,)).fetchone()
        return Hook.of(row), secret

    def hooks(self, key_id: int | None = None) -> list[Hook]:
        """Every hook (of `key_id` only, when given), oldest first."""
        where, params = ("WHERE key_id = ?", (key_id,)) if key_id is not None else ("", ())
        with self.connect() as db:
            return [Hook.of(row) for row in db.execute(f"SELECT {Hook.COLUMNS} FROM hooks {where} ORDER BY id", params)]

    def hook(self, hook_id: int, key_id: int | None = None) -> Hook | None:
        return next((h for h in self.hooks(key_id) if h.id == hook_id), None)

    def count(self, key_id: int) -> int:
        with self.connect() as db:
            return int(db.execute("SELECT count(*) FROM hooks WHERE key_id = ?", (key_id,)).fetchone()[0])

    def delete(self, hook_id: int, key_id: int | None = None) -> bool:
        """Remove a hook (of `key_id` only, when given) with its deliveries and their attempts."""
        where, params = ("AND key_id = ?", (key_id,)) if key_id is not None else ("", ())
        with self.transaction() as db:
            return db.execute(f"DELETE FROM hooks WHERE id = ? {where}", (hook_id, *params)).rowcount > 0

    def enable(self, hook_id: int) -> bool:
        """Enable a disabled hook again (its failure streak starts anew); it gets the changes queued from now."""
        with self.transaction() as db:
            return db.execute("UPDATE hooks SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL"
                              " WHERE id = ?", (hook_id,)).rowcount > 0

    def attempts(self, hook_id: int, limit: int) -> list[AttemptInfo]:
        """The hook's delivery attempts, newest first."""
        with self.connect() as db:
            return [AttemptInfo(*row) for row in db.execute(
                "SELECT d.msg_id, d.grp, d.change_id, a.attempted_at, a.duration_ms, a.status, a.error, d.state"
                " FROM attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE a.hook_id = ?"
                " ORDER BY a.id DESC LIMIT ?", (hook_id, limit))]


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


def read_request(body: bytes, groups: Sequence[str]) -> HookRequest:
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
        check_url(request.url)
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


def hooks_routes(groups: Sequence[str], store_of: Callable[[], HookStore] = HookStore) -> list[Route]:
    """`POST /hooks`, `GET /hooks`, `DELETE /hooks/{id}`, `GET /hooks/{id}/deliveries` (at the gateway's root,
    keyed: each key sees its own hooks). `store_of()` opens the store (the data folder in force)."""

    def key_of(call: Call) -> int:
        if call.key_id is None:  # a keyed route: the middleware always sets it
            raise ApiError(401, "Missing API key: send it in the X-API-Key header")
        return call.key_id

    async def create(call: Call) -> NewHook:
        key_id = key_of(call)
        request = read_request(call.body, groups)
        store = store_of()
        limit = config.get(config.HOOKS_PER_KEY)
        if await asyncio.to_thread(store.count, key_id) >= limit:
            raise ApiError(403, f"This key has {limit} webhooks already (CHARTGW_HOOKS_PER_KEY); delete one first")
        hook, secret = await asyncio.to_thread(store.create, key_id, request.url, list(dict.fromkeys(request.groups)),
                                               list(dict.fromkeys(t.strip() for t in request.targets)), groups, call.now)
        info = hook_info(hook)
        return NewHook(**{f: getattr(info, f) for f in info.__struct_fields__}, secret=secret)

    async def listing(call: Call) -> HooksResponse:
        hooks = await asyncio.to_thread(store_of().hooks, key_of(call))
        return HooksResponse(len(hooks), [hook_info(h) for h in hooks])

    async def remove(call: Call) -> DeletedHook:
        if not await asyncio.to_thread(store_of().delete, call.params["id"], key_of(call)):
            raise not_found(f"No webhook {call.params['id']} of this key")
        return DeletedHook(call.params["id"], True)

    async def deliveries(call: Call) -> DeliveriesResponse:
        store = store_of()
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
