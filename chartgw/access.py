"""Who may call what: the access table, the hashed API-key store and the ASGI middleware.

The table is data: exact public paths (group roots, health, listed schema documents), with
every other path needing an `X-API-Key`, so a route nobody classified is never left open. Keys
are stored as SHA-256 digests only; a key is shown once when created.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

from chartgw import config
from chartgw.store import iso

KEY_HEADER = b"x-api-key"
KEYS_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    key_hash TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    expires_at TEXT,
    revoked_at TEXT
);
"""


def keys_db_path() -> Path:
    return config.data_dir() / "keys.sqlite"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class KeyInfo:
    id: int
    name: str
    created_at: str
    expires_at: str | None
    revoked_at: str | None

    def state(self, now: str) -> str:
        if self.revoked_at:
            return "revoked"
        if self.expires_at and self.expires_at <= now:
            return "expired"
        return "active"


class KeyStore:
    """Key management for the CLI: create, list, revoke. Each call is its own short transaction."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or keys_db_path()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            self.path.touch(mode=0o600)  # created readable by the owner only, before any key is written
        db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(KEYS_SCHEMA)
        for companion in (self.path.with_name(self.path.name + "-wal"), self.path.with_name(self.path.name + "-shm")):
            if companion.exists():
                companion.chmod(0o600)
        return db

    def create(self, name: str, expires_at: datetime | None = None) -> tuple[int, str]:
        """A new key and its id; the plain key exists only in this return value."""
        key = "cgw_" + secrets.token_urlsafe(32)
        with self._connect() as db:
            cur = db.execute(
                "INSERT INTO api_keys (name, key_hash, created_at, expires_at) VALUES (?, ?, ?, ?)",
                (name, hash_key(key), iso(datetime.now(UTC)), iso(expires_at) if expires_at else None),
            )
            return int(cur.lastrowid or 0), key

    def list(self) -> list[KeyInfo]:
        with self._connect() as db:
            return [KeyInfo(*row) for row in db.execute(
                "SELECT id, name, created_at, expires_at, revoked_at FROM api_keys ORDER BY id")]

    def revoke(self, key_id: int) -> bool:
        with self._connect() as db:
            cur = db.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (iso(datetime.now(UTC)), key_id))
            return cur.rowcount > 0


class KeyChecker:
    """The server's view of the keys: digests in memory, reloaded when the key file changes.

    Revocation takes effect within `recheck_seconds` without a restart. A key that matched is
    remembered until the key file changes, so the hot path is one dict lookup; unknown keys are
    hashed and compared every time (they are never remembered, so they cannot fill memory).
    """

    def __init__(self, path: Path | None = None, plain_keys: Iterable[str] = (), recheck_seconds: float = 1.0) -> None:
        self.path = path or keys_db_path()
        self.env_digests = {hash_key(k) for k in plain_keys}
        self.recheck_seconds = recheck_seconds
        self._digests: dict[str, str | None] = {}  # digest -> expires_at
        self._verified: dict[str, str | None] = {}  # presented key -> expires_at, for keys that matched
        self._checked = 0.0
        self._stamp: tuple[tuple[int, int], ...] | None = None

    def _reload_if_changed(self) -> None:
        now = time.monotonic()
        if now - self._checked < self.recheck_seconds:
            return
        self._checked = now
        stamp = tuple(_file_stamp(Path(str(self.path) + suffix)) for suffix in ("", "-wal"))
        if stamp == self._stamp:
            return
        self._stamp = stamp
        self._verified = {}
        if not self.path.exists():
            self._digests = {}
            return
        db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=5)
        try:
            rows = db.execute("SELECT key_hash, expires_at FROM api_keys WHERE revoked_at IS NULL").fetchall()
        except sqlite3.OperationalError:
            rows = []
        finally:
            db.close()
        self._digests = dict(rows)

    def check(self, key: str) -> bool:
        self._reload_if_changed()
        if key not in self._verified and not self._verify(key):
            return False
        expires_at = self._verified[key]
        return expires_at is None or expires_at > iso(datetime.now(UTC))

    def _verify(self, key: str) -> bool:
        """Whether the key is known; a known key's expiry is remembered until the key file changes."""
        digest = hash_key(key)
        if any(hmac.compare_digest(digest, d) for d in self.env_digests):
            expires_at = None
        else:
            stored = next((d for d in self._digests if hmac.compare_digest(digest, d)), None)
            if stored is None:
                return False
            expires_at = self._digests[stored]
        if len(self._verified) >= 10_000:
            self._verified.clear()
        self._verified[key] = expires_at
        return True


def _file_stamp(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except FileNotFoundError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


class AccessTable:
    """Exact public paths; everything else needs a key (default deny)."""

    def __init__(self, public_paths: Iterable[str]) -> None:
        self.public_paths = frozenset(public_paths)

    def is_public(self, path: str) -> bool:
        return path in self.public_paths


class ApiKeyMiddleware:
    """Plain ASGI: answers 401 with a JSON body before the request reaches a route."""

    def __init__(self, app: ASGIApp, table: AccessTable, checker: KeyChecker) -> None:
        self.app = app
        self.table = table
        self.checker = checker

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.table.is_public(scope["path"]):
            await self.app(scope, receive, send)
            return
        key = next((v for k, v in scope["headers"] if k == KEY_HEADER), None)
        if key is None:
            await _unauthorized(send, "Missing API key: send it in the X-API-Key header")
        elif not self.checker.check(key.decode("latin-1")):
            await _unauthorized(send, "Invalid, revoked or expired API key")
        else:
            await self.app(scope, receive, send)


async def _unauthorized(send: Send, detail: str) -> None:
    body = b'{"detail":"' + detail.encode() + b'"}'
    await send({
        "type": "http.response.start",
        "status": 401,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b'ApiKey header="X-API-Key"'),
            (b"cache-control", b"no-store"),
        ],
    })
    await send({"type": "http.response.body", "body": body})
