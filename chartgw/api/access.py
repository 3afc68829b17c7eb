"""Who may call what: the access table, the hashed API-key store and the ASGI middleware.

The table is data: exact public paths (group roots, health, listed schema documents), with
every other path needing an `X-API-Key`, so a route nobody classified is never left open. Keys
are stored as HMAC-SHA256 digests under a server secret; a key is shown once when created. Keyed
requests are rate limited per key.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chartgw.core import config
from chartgw.core.clock import utc_now
from chartgw.core.settings import Settings
from chartgw.store import Query, Table, connect, iso, migrate

KEY_HEADER = b"x-api-key"
KEY_ID_SCOPE = "chartgw.key_id"
"""The ASGI scope entry where the key middleware leaves the caller's key id (for per-key throttles)."""
KEY_TABLES = (
    Table("api_keys", ("id INTEGER PRIMARY KEY", "name TEXT NOT NULL", "key_hash TEXT NOT NULL UNIQUE",
                       "created_at TEXT NOT NULL", "expires_at TEXT", "revoked_at TEXT",
                       "rate_per_minute INTEGER")),  # added after key files existed: migrated in on open
    Table("key_usage", ("key_id INTEGER NOT NULL", "day TEXT NOT NULL", "requests INTEGER NOT NULL",
                        "limited INTEGER NOT NULL"), ("PRIMARY KEY (key_id, day)",), without_rowid=True),
)
_WRITE_LOCK = Query("keys write lock", "BEGIN IMMEDIATE")
"""Taken before a check and the insert it allows, as one (committed when the connection's block ends)."""
_INSERT_KEY = Query("insert key", "INSERT INTO api_keys (name, key_hash, created_at, expires_at, rate_per_minute)"
                                  " VALUES (?, ?, ?, ?, ?)")
_ACTIVE_BY_NAME = Query("active keys by name", "SELECT id, rate_per_minute FROM api_keys WHERE name = ?"
                        " AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?) ORDER BY id")
_ATTACH_KEYS = Query("attach keys", "ATTACH DATABASE ? AS keys")
_NO_KEYS = Query("no key names", "CREATE TEMP TABLE api_keys (id INTEGER PRIMARY KEY, name TEXT)")
_USAGE = Query("key usage", "SELECT u.key_id, coalesce(k.name, 'CHARTGW_API_KEYS'), u.day, u.requests, u.limited"
               " FROM key_usage u LEFT JOIN api_keys k ON k.id = u.key_id WHERE u.day >= ? ORDER BY u.day DESC, u.key_id")
_ADD_USAGE = Query("add key usage", "INSERT INTO key_usage (key_id, day, requests, limited) VALUES (?, ?, ?, ?)"
                   " ON CONFLICT (key_id, day) DO UPDATE SET requests = requests + excluded.requests,"
                   " limited = limited + excluded.limited")
_LIST = Query("list keys", "SELECT id, name, created_at, expires_at, revoked_at, rate_per_minute,"
              " (SELECT max(day) FROM key_usage u WHERE u.key_id = k.id AND u.requests > 0) FROM api_keys k ORDER BY id")
_EXPIRE = Query("expire key", "UPDATE api_keys SET expires_at = ? WHERE id = ? AND (expires_at IS NULL OR expires_at > ?)")
_REVOKE = Query("revoke key", "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")
_KEY_COLUMNS = Query("key columns", "PRAGMA table_info(api_keys)")
_DIGESTS = Query("key digests", "SELECT key_hash, id, expires_at, rate_per_minute FROM api_keys WHERE revoked_at IS NULL")
_DIGESTS_BEFORE_RATES = Query("key digests before rates",
                              "SELECT key_hash, id, expires_at, NULL FROM api_keys WHERE revoked_at IS NULL")
"""A key file of the layout before per-key rates, read by a server that cannot migrate it (a read-only reader)."""
_IN_FORCE = Query("keys not revoked", "SELECT id, expires_at FROM api_keys WHERE revoked_at IS NULL")
KEY_QUERIES = tuple(value for value in list(globals().values()) if isinstance(value, Query))
"""Every statement run on the key file and the usage file (compiled against KEY_TABLES in tests)."""
ENV_KEY_ID = 0
"""The one id every key of CHARTGW_API_KEYS shared before each had its own (`env_key_id`): hooks registered then
still carry it (`chartgw deliver` gives them to the only env key when there is one)."""
ENV_KEY_ID_SALT = b"chartgw: the id of a CHARTGW_API_KEYS key"
ENV_KEY_ID_ROUNDS = 100_000


@functools.lru_cache(maxsize=256)
def env_key_id(key: str) -> int:
    """The stable id of a key given in CHARTGW_API_KEYS: negative (the key store's are positive), derived from the
    key alone so the server, its replicas and `chartgw deliver` agree without sharing anything but the setting.
    Slow on purpose (PBKDF2, about 0.1 s, once per key and process): the id is logged, and a weak key must not be
    cheap to confirm from it."""
    digest = hashlib.pbkdf2_hmac("sha256", key.strip().encode("utf-8"), ENV_KEY_ID_SALT, ENV_KEY_ID_ROUNDS)
    return -(int.from_bytes(digest[:6], "big") + 1)


def env_key_ids(keys: Iterable[str]) -> dict[str, int]:
    """Each key of CHARTGW_API_KEYS with its id."""
    return {key: env_key_id(key) for key in keys}



def keys_db_path(settings: Settings) -> Path:
    """The key store's file under `settings` (CHARTGW_DATA_DIR)."""
    return settings.get(config.DATA_DIR) / "keys.sqlite"


def hash_key(key: str) -> str:
    """The legacy digest (bare SHA-256) of keys created before keys were keyed to a server secret."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


SECRET_FILE = "server-secret"
HMAC_PREFIX = "hmac-sha256:"


def server_secret(folder: Path) -> bytes:
    """The secret keys are digested under (made once, readable by the owner only, beside keys.sqlite): a
    stolen key file alone gives no way to test guesses of keys."""
    path = folder / SECRET_FILE
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(32))
    return path.read_bytes()


def secure_key_files(path: Path) -> None:
    """Makes the key file `path`, its -wal and -shm files and the server secret beside it readable and writable
    by their owner only, whatever mode they had (a copied or restored file keeps its old one). Every key
    command does this before it opens the file, and `chartgw serve` before it starts."""
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"),
                 path.with_name(SECRET_FILE)):
        with contextlib.suppress(FileNotFoundError):
            if file.stat().st_mode & 0o777 != 0o600:
                file.chmod(0o600)


def keyed_digest(key: str, secret: bytes) -> str:
    return HMAC_PREFIX + hmac.new(secret, key.encode("utf-8"), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class KeyInfo:
    id: int
    name: str
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    rate_per_minute: int | None = None
    """None = the server's default rate, 0 = unlimited."""
    last_used: str | None = None
    """The last UTC day the key made a request (counted about once a minute by each server)."""

    def state(self, now: str) -> str:
        if self.revoked_at:
            return "revoked"
        if self.expires_at and self.expires_at <= now:
            return "expired"
        return "active"


class NameTaken(ValueError):
    """`keys create` of a name an active key holds."""

    def __init__(self, name: str, ids: tuple[int, ...]) -> None:
        super().__init__(f"a key named {name!r} is active (id {', '.join(map(str, ids))}): rotate it "
                         f"(chartgw keys rotate {name}) or revoke it first")
        self.ids = ids


class KeyStore:
    """Key management for the CLI: create, list, revoke. Each call is its own short transaction.

    With `usage_path` (a read replica's node-local file), request counts are kept there and the key file is only
    read: a replica never writes a replicated file."""

    def __init__(self, path: Path, usage_path: Path | None = None) -> None:
        self.path = path
        self.usage_path = usage_path

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            self.path.touch(mode=0o600)  # created readable by the owner only, before any key is written
        secure_key_files(self.path)  # and kept so, whatever mode a copied or restored file came with
        db = connect(self.path)
        migrate(db, KEY_TABLES)
        secure_key_files(self.path)  # the -wal and -shm files SQLite has just made with the umask's mode
        return db

    def create(self, name: str, expires_at: datetime | None = None, rate_per_minute: int | None = None,
               ) -> tuple[int, str]:
        """A new key and its id; the plain key exists only in this return value. `rate_per_minute` None =
        the server's default (CHARTGW_RATE_LIMIT_PER_MINUTE), 0 = no limit. A name names one holder: while a
        key of that name is active, `NameTaken` (rotate that key instead)."""
        with self._connect() as db:
            db.execute(_WRITE_LOCK.sql)  # the check and the insert as one: two creates cannot both pass
            taken = self._active(db, name)
            if taken:
                raise NameTaken(name, tuple(row[0] for row in taken))
            return self._insert(db, name, expires_at, rate_per_minute)

    def _insert(self, db: sqlite3.Connection, name: str, expires_at: datetime | None, rate_per_minute: int | None,
                ) -> tuple[int, str]:
        key = "cgw_" + secrets.token_urlsafe(32)
        cur = db.execute(
            _INSERT_KEY.sql,
            (name, keyed_digest(key, server_secret(self.path.parent)), iso(datetime.now(UTC)),
             iso(expires_at) if expires_at else None, rate_per_minute),
        )
        return int(cur.lastrowid or 0), key

    @staticmethod
    def _active(db: sqlite3.Connection, name: str) -> list[tuple[int, int | None]]:
        """(id, rate) of the keys named `name` that are neither revoked nor expired, oldest first."""
        return db.execute(_ACTIVE_BY_NAME.sql, (name, iso(datetime.now(UTC)))).fetchall()

    def _usage_db(self) -> sqlite3.Connection:
        """Where request counts are kept: the key file, or the node-local usage file beside the key file attached
        read-only (for the key names)."""
        if self.usage_path is None:
            return self._connect()
        db = connect(self.usage_path)
        migrate(db, [table for table in KEY_TABLES if table.name == "key_usage"])
        if self.path.exists():
            db.execute(_ATTACH_KEYS.sql, (f"file:{self.path}?mode=ro",))
        else:
            db.execute(_NO_KEYS.sql)
        return db

    def usage(self, since_day: str) -> list[tuple[int, str, str, int, int]]:
        """(key id, key name, day, requests, refused with 429) per key and day from `since_day`, newest first."""
        with contextlib.closing(self._usage_db()) as db, db:
            return [tuple(row) for row in db.execute(_USAGE.sql, (since_day,))]

    def add_usage(self, counts: dict[tuple[int, str], list[int]]) -> None:
        """Add request counts (key id, day) -> [requests, limited] to the stored ones, in one transaction."""
        with contextlib.closing(self._usage_db()) as db, db:
            db.executemany(
                _ADD_USAGE.sql,
                [(key_id, day, n, limited) for (key_id, day), (n, limited) in counts.items()])

    def list(self) -> list[KeyInfo]:
        replica = self.usage_path is not None and self.path.exists()
        db = connect(self.path, readonly=True) if replica else self._connect()
        with contextlib.closing(db):
            return [KeyInfo(*row) for row in db.execute(_LIST.sql)]

    def rotate(self, name: str, grace: timedelta) -> tuple[int, str, int]:
        """A successor (same name and rate) of the newest active key named `name`, which expires after `grace`
        (or sooner, if it already does); a predecessor still in its own grace is left as it is. Returns the new
        id and key, and the id of the key now expiring."""
        with self._connect() as db:
            db.execute(_WRITE_LOCK.sql)
            active = self._active(db, name)
            if not active:
                raise KeyError(name)
            old_id, rate = active[-1]
            key_id, key = self._insert(db, name, None, rate)
            until = iso(datetime.now(UTC) + grace)
            db.execute(_EXPIRE.sql, (until, old_id, until))
        return key_id, key, old_id

    def revoke(self, key_id: int) -> bool:
        with self._connect() as db:
            cur = db.execute(_REVOKE.sql, (iso(datetime.now(UTC)), key_id))
            return cur.rowcount > 0


class Grant(NamedTuple):
    key_id: int
    expires_at: str | None
    rate_per_minute: int | None
    """None = the server's default rate."""


class RateLimiter:
    """Requests per key and minute (a fixed window per key, in this server process), and request counts per
    key and day, added to the key store about once a minute (`chartgw keys usage` reads them).

    The minute's counts are written by the limiter's one writer thread, never by `take` itself: `take` runs on
    the event loop, and a write to the key file waits for its lock (`chartgw keys create` holding it) and for
    the disk. `flush` writes what is left and waits for that thread."""

    FLUSH_SECONDS = 60.0

    def __init__(self, default_per_minute: int, store: KeyStore | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.default = default_per_minute
        self.store = store
        self.clock = clock
        self._windows: dict[int, list[int]] = {}  # key id -> [window start minute, requests in it]
        self._counts: dict[tuple[int, str], list[int]] = {}  # (key id, day) -> [requests, limited]
        self._flushed = clock()
        self._day_minute = -1
        self._day = ""
        self._writer: ThreadPoolExecutor | None = None

    def take(self, grant: Grant) -> tuple[bool, int, int, int]:
        """(allowed, limit, remaining, seconds until the window resets) for one request of `grant`'s key."""
        now = self.clock()
        limit = self.default if grant.rate_per_minute is None else grant.rate_per_minute
        minute = int(now // 60)
        window = self._windows.get(grant.key_id)
        if window is None or window[0] != minute:
            window = self._windows[grant.key_id] = [minute, 0]
        allowed = not limit or window[1] < limit
        if allowed:
            window[1] += 1
        if minute != self._day_minute:  # the day's name is worked out once a minute, not per request
            self._day_minute, self._day = minute, datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")
        counts = self._counts.get((grant.key_id, self._day))
        if counts is None:
            counts = self._counts[(grant.key_id, self._day)] = [0, 0]
        counts[0 if allowed else 1] += 1
        if now - self._flushed >= self.FLUSH_SECONDS:
            self._hand_over()
        return allowed, limit, max(limit - window[1], 0), 60 - int(now % 60)

    def _hand_over(self) -> Future[None] | None:
        """The counts so far, queued for the writer thread; its future (None when there is nothing to write)."""
        counts, self._counts = self._counts, {}
        self._flushed = self.clock()
        if self.store is None or not counts:
            return None
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chartgw-usage")
        return self._writer.submit(self._write, self.store, counts)

    @staticmethod
    def _write(store: KeyStore, counts: dict[tuple[int, str], list[int]]) -> None:
        with contextlib.suppress(sqlite3.Error):  # statistics: a busy key file must not stop the next minute's
            store.add_usage(counts)

    def flush(self) -> None:
        """Write the counts not written yet, and wait until every earlier minute's are (one thread, in order)."""
        written = self._hand_over()
        if written is None and self._writer is not None:
            written = self._writer.submit(lambda: None)  # behind the writes already queued
        if written is not None:
            written.result()


class KeyChecker:
    """The server's view of the keys: digests in memory, reloaded when the key file changes.

    Revocation takes effect within `recheck_seconds` without a restart. A key that matched is
    remembered until the key file changes, so the hot path is one dict lookup; unknown keys are
    hashed and compared every time (they are never remembered, so they cannot fill memory).
    """

    def __init__(self, path: Path, plain_keys: Iterable[str] = (), recheck_seconds: float = 1.0,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self.path = path
        self.env_keys = frozenset(plain_keys)
        env_key_ids(self.env_keys)  # each key's id worked out now, not on a request's time
        self.recheck_seconds = recheck_seconds
        self.clock = clock
        """What expiry is compared with (the app's clock)."""
        self._digests: dict[str, Grant] = {}  # digest -> the key's grant
        self._verified: dict[str, Grant] = {}  # presented key -> its grant, for keys that matched
        self._checked = 0.0
        self._stamp: tuple[tuple[int, int], ...] | None = None
        self._secret: bytes | None = None

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
        secret = self.path.parent / SECRET_FILE
        self._secret = secret.read_bytes() if secret.exists() else None
        db = connect(self.path, readonly=True, timeout=5)
        try:
            columns = {row[1] for row in db.execute(_KEY_COLUMNS.sql)}
            rows = db.execute((_DIGESTS if "rate_per_minute" in columns else _DIGESTS_BEFORE_RATES).sql).fetchall()
        except sqlite3.OperationalError:
            rows = []
        finally:
            db.close()
        self._digests = {digest: Grant(key_id, expires_at, rate) for digest, key_id, expires_at, rate in rows}

    def grant(self, key: str) -> Grant | None:
        """The grant of a known, unexpired key; None for any other."""
        self._reload_if_changed()
        if key not in self._verified and not self._verify(key):
            return None
        grant = self._verified[key]
        return grant if grant.expires_at is None or grant.expires_at > iso(self.clock()) else None

    def check(self, key: str) -> bool:
        return self.grant(key) is not None

    def _verify(self, key: str) -> bool:
        """Whether the key is known; a known key's grant is remembered until the key file changes."""
        env = next((known for known in self.env_keys if hmac.compare_digest(key.encode(), known.encode())), None)
        if env is not None:
            grant = Grant(env_key_id(env), None, None)
        else:
            candidates = [hash_key(key)]
            if self._secret is not None:
                candidates.append(keyed_digest(key, self._secret))
            found = next((self._digests[d] for d in candidates if d in self._digests), None)
            if found is None:
                return False
            grant = found
        if len(self._verified) >= 10_000:
            self._verified.clear()
        self._verified[key] = grant
        return True


class KeyRoster:
    """Which key ids are in force now (neither revoked nor expired), for `chartgw deliver`: a hook delivers only
    while its key does. The key file is read again when it changes (checked on each call, a stat), at least every
    REREAD_SECONDS (a file's time moves in clock ticks: two writes in one tick can leave the same stamp), and when
    asked `fresh`; expiry is compared with `clock` on every call. Keys of CHARTGW_API_KEYS are in force while the
    setting names them, and the shared id they all had before (ENV_KEY_ID) while it names any."""

    REREAD_SECONDS = 5.0

    def __init__(self, path: Path, plain_keys: Iterable[str] = (),
                 clock: Callable[[], datetime] = utc_now) -> None:
        self.path = path
        self.env_ids = frozenset(env_key_ids(plain_keys).values()) | ({ENV_KEY_ID} if plain_keys else set())
        self.clock = clock
        self._stamp: tuple[tuple[int, int], ...] | None = None
        self._keys: list[tuple[int, str | None]] = []  # (id, expires_at) of every key not revoked
        self._read_at = 0.0

    def in_force(self, fresh: bool = False) -> frozenset[int]:
        stamp = tuple(_file_stamp(Path(str(self.path) + suffix)) for suffix in ("", "-wal"))
        if fresh or stamp != self._stamp or time.monotonic() - self._read_at >= self.REREAD_SECONDS:
            self._read_at = time.monotonic()
            self._keys = self._read()
            self._stamp = stamp
        now = iso(self.clock())
        return self.env_ids | {key_id for key_id, expires_at in self._keys if expires_at is None or expires_at > now}

    def _read(self) -> list[tuple[int, str | None]]:
        if not self.path.exists():
            return []
        db = connect(self.path, readonly=True, timeout=5)
        try:
            return [(int(key_id), expires_at) for key_id, expires_at in
                    db.execute(_IN_FORCE.sql)]
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise
        finally:
            db.close()


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


Reply = tuple[int, list[tuple[bytes, bytes]], bytes]
"""An answer as the server writes it: status, headers (lowercase names), body."""
OWS = b" \t"
"""HTTP's optional whitespace around a field value (RFC 9110, 5.5): a key is the value without it."""


Admission = tuple[Reply | None, int | None, Sequence[tuple[bytes, bytes]]]
"""What the gate decided for one request: a refusal to send as it is, or the caller's key id (None on a public
path) and the rate headers its answer carries. (A plain tuple: the fast lane asks for one per request.)"""
PUBLIC: Admission = (None, None, ())


class KeyLoad:
    """What each key holds of one server process at once, by kind: requests the app works on (`REQUESTS`), long polls
    waiting (`WAITERS`) and change streams open (`STREAMS`), each capped per key (0: no cap), so that one key's
    thousand slow bodies, long polls or streams cannot take every other key's service. The key middleware holds a
    request for each keyed request it lets into the app; the change feed moves a long poll or a stream from that
    count to its own kind while it is parked (`park`), as the server leaves parked requests out of
    `--limit-concurrency`. A count is a dict entry while it is above zero: an idle key costs nothing."""

    REQUESTS, WAITERS, STREAMS = "requests", "waiters", "streams"

    def __init__(self, caps: Mapping[str, int]) -> None:
        self.caps = dict(caps)
        self._held: dict[tuple[int, str], int] = {}

    @classmethod
    def of(cls, settings: Settings) -> KeyLoad:
        return cls({cls.REQUESTS: settings.get(config.REQUESTS_IN_PROGRESS_PER_KEY),
                    cls.WAITERS: settings.get(config.CHANGES_WAITERS_PER_KEY),
                    cls.STREAMS: settings.get(config.CHANGES_STREAMS_PER_KEY)})

    def held(self, key_id: int, kind: str) -> int:
        return self._held.get((key_id, kind), 0)

    def take(self, key_id: int, kind: str, capped: bool = True) -> bool:
        """One more of `kind` for the key, unless it holds its cap already (then False)."""
        n, cap = self._held.get((key_id, kind), 0), self.caps.get(kind, 0)
        if capped and cap and n >= cap:
            return False
        self._held[(key_id, kind)] = n + 1
        return True

    def give(self, key_id: int, kind: str) -> None:
        n = self._held.get((key_id, kind), 0) - 1
        if n > 0:
            self._held[(key_id, kind)] = n
        else:
            self._held.pop((key_id, kind), None)

    def park(self, key_id: int, kind: str) -> bool:
        """A request of the key becomes a long poll or stream (`kind`): counted there, no longer among its requests
        in progress; False (nothing changed) when the key holds its cap of `kind`."""
        if not self.take(key_id, kind):
            return False
        self.give(key_id, self.REQUESTS)
        return True

    def unpark(self, key_id: int, kind: str) -> None:
        """The parked request is a request in progress again (until the middleware lets it go)."""
        self.give(key_id, kind)
        self.take(key_id, self.REQUESTS, capped=False)


class Gate:
    """The one way in: the access table, the key check and the rate limit, asked in that order by the key
    middleware (every request the app answers) and by the server's fast lane (the repeats it answers), so
    both refuse alike, byte for byte, and count against the same rate. `load` caps what each key holds at once
    (the middleware's requests in progress; the lane answers at once and holds nothing)."""

    def __init__(self, table: AccessTable, checker: KeyChecker, limiter: RateLimiter | None = None,
                 load: KeyLoad | None = None) -> None:
        self.table = table
        self.checker = checker
        self.limiter = limiter
        self.load = load

    def admit(self, path: str, key: bytes | None) -> Admission:
        """The decision for a request of `path` (after any legacy prefix is rewritten) that sent `key` in its
        X-API-Key header (`api_key` finds it), if any."""
        if key is TWO_KEYS:
            return two_keys(), None, ()
        if self.table.is_public(path):
            return PUBLIC
        if key is None:
            return unauthorized("Missing API key: send it in the X-API-Key header"), None, ()
        grant = self.checker.grant(key.strip(OWS).decode("latin-1"))
        if grant is None:
            return unauthorized("Invalid, revoked or expired API key"), None, ()
        if self.limiter is None:
            return None, grant.key_id, ()
        allowed, limit, remaining, reset = self.limiter.take(grant)
        if not limit:
            return None, grant.key_id, ()
        rate = rate_headers(limit, remaining, reset)
        return None if allowed else too_many(limit, reset, rate), grant.key_id, rate


class _TwoKeys(bytes):
    """The type of TWO_KEYS alone (told apart by identity, whatever a header may hold)."""


TWO_KEYS: bytes = _TwoKeys(b"")
"""What `api_key` (and the fast lane's `request_fields`) give for a request with more than one X-API-Key header:
the gate refuses it with a 400 rather than choose one (the app once took the first, the lane the last)."""


def api_key(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The X-API-Key header's value among `headers` (lowercase names), as sent; TWO_KEYS when there are several."""
    key = None
    for name, value in headers:
        if name == KEY_HEADER:
            key = value if key is None else TWO_KEYS
    return key


class ApiKeyMiddleware:
    """Plain ASGI: answers 401 with a JSON body before the request reaches a route, and 429 past the key's
    rate; keyed responses carry X-RateLimit-Limit, -Remaining and -Reset. The decision is the gate's."""

    def __init__(self, app: ASGIApp, gate: Gate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal, key_id, rate = self.gate.admit(scope["path"], api_key(scope["headers"]))
        if refusal is not None:
            status, headers, body = refusal
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        if key_id is None:
            await self.app(scope, receive, with_headers(send, rate) if rate else send)
            return
        scope[KEY_ID_SCOPE] = key_id
        load = self.gate.load
        if load is None:
            await self.app(scope, receive, with_headers(send, rate) if rate else send)
            return
        if not load.take(key_id, load.REQUESTS):
            status, headers, body = busy(f"This key has {load.caps[load.REQUESTS]} requests in progress already; "
                                         "retry shortly", rate)
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        try:
            await self.app(scope, receive, with_headers(send, rate) if rate else send)
        finally:
            load.give(key_id, load.REQUESTS)


def with_headers(send: Send, extra: Sequence[tuple[bytes, bytes]]) -> Send:
    """`send`, adding `extra` to the headers of the answer it starts (the rate headers, CORS's)."""

    async def send_with(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = message.get("headers")
            if type(headers) is list:  # the responses here build a fresh list per response: extend it
                headers.extend(extra)
            else:
                message = {**message, "headers": [*(headers or ()), *extra]}
        await send(message)

    return send_with


def rate_headers(limit: int, remaining: int, reset: int) -> list[tuple[bytes, bytes]]:
    return [(b"x-ratelimit-limit", b"%d" % limit), (b"x-ratelimit-remaining", b"%d" % remaining),
            (b"x-ratelimit-reset", b"%d" % reset)]


def too_many(limit: int, reset: int, rate: list[tuple[bytes, bytes]]) -> Reply:
    """The 429 past a key's rate."""
    body = b'{"detail":"Rate limit of %d requests per minute reached; retry in %d s"}' % (limit, reset)
    return 429, [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)),
                 (b"retry-after", b"%d" % reset), (b"cache-control", b"no-store"), *rate], body


def two_keys() -> Reply:
    """The 400 of a request with more than one X-API-Key header (a fresh header list: the lane adds to it)."""
    body = b'{"detail":"More than one X-API-Key header: send exactly one"}'
    return 400, [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)),
                 (b"cache-control", b"no-store")], body


def busy(detail: str, rate: Sequence[tuple[bytes, bytes]] = ()) -> Reply:
    """The 429 of a key that holds its cap of requests in progress, long polls or streams (`KeyLoad`)."""
    body = b'{"detail":"' + detail.encode() + b'"}'
    return 429, [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)),
                 (b"retry-after", b"1"), (b"cache-control", b"no-store"), *rate], body


def unauthorized(detail: str) -> Reply:
    """The 401 of a missing or unknown key."""
    body = b'{"detail":"' + detail.encode() + b'"}'
    return 401, [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)),
                 (b"www-authenticate", b'ApiKey header="X-API-Key"'), (b"cache-control", b"no-store")], body
