"""Read replicas: which files are replicated, Litestream's configuration for them, each node's replication state
(what /replication and the groups' /health read), and the server's reader of a followed file.

One writer (crawls, refreshes, key management) runs `chartgw replicate`: Litestream ships every group file (the
artist-history index is the artist-history-api group's file) and the key store to `CHARTGW_REPLICA_URL`. Each
reader runs `chartgw follow` (`litestream restore -f` of every file) beside `chartgw serve --read-only`. Both
supervisors (chartgw.litestream) write their state to a node-local JSON file under `<data>/node/`, never into a
replicated file.

How a reader sees a followed file. `litestream restore -f` writes each new transaction's pages straight into the
database file under SQLite's own EXCLUSIVE lock, rewrites the header to the rollback journal (DELETE) mode and
changes the file change counter when the transaction touched page 1. Two things follow, both found by
experiment on Litestream 0.5.17 and handled here and in chartgw.litestream:
- a file just restored still says WAL in its header; a server opening it then reads through a WAL index nobody
  updates and never sees a change. `chartgw follow` restores into `<data>/node/staging/`, switches the header to
  rollback mode (under the same lock) and only then renames the file into place;
- a transaction that does not touch page 1 (an UPDATE within existing pages, a fetch-log row that fits a leaf)
  leaves the change counter alone, so a connection's page cache keeps the old pages and `PRAGMA data_version`
  does not move. `FollowedReader` reads through a memory map instead (`PRAGMA mmap_size`: pages come from the
  file itself, under the shared lock, up to SQLite's 2 GB mmap limit), and moves its version when Litestream's
  `-txid` file (written after every applied batch) or the file's inode (a fresh restore renamed over it) changes.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiosqlite
import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route as StarletteRoute

from chartgw import config
from chartgw.clock import Clock
from chartgw.store import SnapshotReader, iso

__all__ = [
    "STATUS_FILES",
    "FileLag",
    "FileState",
    "FollowedReader",
    "NodeState",
    "Replicated",
    "ReplicationStatus",
    "lagging",
    "litestream_config",
    "node_dir",
    "node_status",
    "read_state",
    "replication_route",
    "sidecar",
    "staging_path",
    "usage_path",
    "write_state",
]

MMAP_BYTES = 2147418112
"""SQLite's default SQLITE_MAX_MMAP_SIZE (0x7fff0000): larger files are read through the page cache past it."""
STATUS_FILES = {"writer": "replicate.json", "reader": "follow.json"}
STALE_STATE_SECONDS = 5.0
"""A state file not rewritten for this long: its supervisor is not running."""


def node_dir() -> Path:
    """Node-local files (supervisor state, Litestream configuration, staging restores, a reader's key usage)."""
    return config.data_dir() / "node"


def usage_path() -> Path | None:
    """Where a read replica counts its keys' requests (a node-local file; `chartgw keys usage` reads it there);
    None off a replica (the key store holds them)."""
    return node_dir() / "usage.sqlite" if config.get(config.READ_ONLY) else None


@dataclass(frozen=True)
class Replicated:
    name: str
    """The file's stem: a group's name, or `keys`. Also its place under the replica URL."""
    path: Path


def staging_path(name: str) -> Path:
    """Where `chartgw follow` restores a file before renaming it into place (Litestream's `-o`)."""
    return node_dir() / "staging" / f"{name}.sqlite"


def sidecar(name: str) -> Path:
    """The `-txid` file Litestream's follow rewrites after every applied batch (it keeps its `-o` path's name)."""
    return staging_path(name).with_name(f"{name}.sqlite-txid")


def _scalar(value: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is YAML's)."""
    return json.dumps(value)


def _duration(seconds: float) -> str:
    return f"{max(int(seconds * 1000), 1)}ms"


def litestream_config(files: list[Replicated], url: str | None = None) -> str:
    """Litestream's YAML for `files`, each replicated to `<url>/<name>`. Credentials are never written: the file
    names the CHARTGW_REPLICA_S3_* variables and Litestream reads them from its environment."""
    url = url if url is not None else config.get(config.REPLICA_URL)
    if not url:
        raise ValueError(f"set {config.REPLICA_URL.variable} (s3://BUCKET/PREFIX or file:///PATH)")
    parts = urlsplit(url)
    sync = _duration(config.get(config.REPLICA_SYNC_SECONDS))
    lines = ["# Written by chartgw from the CHARTGW_REPLICA_* settings; rewritten on every start.", "dbs:"]
    for file in files:
        # The WAL is looked at four times a second (a stat, locally): a commit leaves at the next sync, not up to
        # a second later (Litestream's default monitor interval is 1 s).
        lines += [f"  - path: {_scalar(str(file.path.resolve()))}", "    monitor-interval: 250ms", "    replica:"]
        if parts.scheme == "file":
            lines += ["      type: file", f"      path: {_scalar(parts.path.rstrip('/') + '/' + file.name)}"]
        else:
            lines += ["      type: s3", f"      bucket: {_scalar(parts.netloc)}",
                      f"      path: {_scalar((parts.path.strip('/') + '/' + file.name).lstrip('/'))}",
                      f"      region: {_scalar(config.get(config.REPLICA_S3_REGION))}"]
            endpoint = config.get(config.REPLICA_S3_ENDPOINT)
            if endpoint:
                lines += [f"      endpoint: {_scalar(endpoint)}", "      force-path-style: true"]
            for key, setting in (("access-key-id", config.REPLICA_S3_ACCESS_KEY_ID),
                                 ("secret-access-key", config.REPLICA_S3_SECRET_ACCESS_KEY)):
                if config.get(setting):
                    lines.append(f"      {key}: ${{{setting.variable}}}")
        lines.append(f"      sync-interval: {sync}")
    return "\n".join(lines) + "\n"


# --- node state ---------------------------------------------------------------------------------------------


class FileState(msgspec.Struct, kw_only=True):
    """One replicated file as its supervisor last saw it (epoch seconds)."""

    state: str
    """writer: "replicating", "starting", "down"; reader: "waiting" (no replica yet), "restoring", "following",
    "stalled" (its follower stopped applying while the writer moved on: restored afresh, until it follows again),
    "down"."""
    ok_at: float | None = None
    """The last time the file was known current: Litestream running without errors (reader: following)."""
    txid: str | None = None
    applied_at: float | None = None
    """Reader: when Litestream last applied a transaction."""
    restarts: int = 0
    stalls: int = 0
    """Reader: how often its follower stalled (and was restored afresh; each is a restart too)."""
    error: str | None = None
    """Litestream's last error line, while errors go on."""


class NodeState(msgspec.Struct, kw_only=True):
    role: str
    replica: str
    """The replica URL (no credentials are ever part of it)."""
    updated_at: float
    pid: int
    files: dict[str, FileState]


def write_state(state: NodeState) -> None:
    """Replace the role's state file atomically (readers never see half of it)."""
    path = node_dir() / STATUS_FILES[state.role]
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(msgspec.json.encode(state))
    os.replace(temporary, path)


_read_cache: dict[Path, tuple[int, NodeState | None]] = {}


def read_state() -> NodeState | None:
    """This node's replication state (a reader's, else a writer's), or None on a node that does not replicate."""
    for role in ("reader", "writer"):
        path = node_dir() / STATUS_FILES[role]
        try:
            stamp = path.stat().st_mtime_ns
        except FileNotFoundError:
            continue
        cached = _read_cache.get(path)
        if cached is None or cached[0] != stamp:
            try:
                state: NodeState | None = msgspec.json.decode(path.read_bytes(), type=NodeState)
            except (OSError, msgspec.DecodeError):
                state = None
            cached = _read_cache[path] = (stamp, state)
        if cached[1] is not None:
            return cached[1]
    return None


class FileLag(msgspec.Struct):
    file: str
    state: str
    lag_seconds: int | None
    """Seconds since this node last knew the file current with the replica; null before it ever was."""
    txid: str | None
    applied_at: str | None
    restarts: int
    error: str | None
    stalls: int = 0


class ReplicationStatus(msgspec.Struct):
    status: str
    """"ok", "degraded" (a file lags past `degraded_after_seconds`, or its supervisor is not running) or "off"
    (this node does not replicate)."""
    role: str
    """"writer", "reader" or "single"."""
    replica: str | None
    degraded_after_seconds: float
    files: list[FileLag]


def _epoch(now: datetime) -> float:
    return now.timestamp()


def node_status(now: datetime) -> ReplicationStatus:
    """What /replication answers: each replicated file's state and lag at `now`."""
    limit = config.get(config.REPLICA_LAG_DEGRADED_SECONDS)
    state = read_state()
    if state is None:
        return ReplicationStatus("off", "single", None, limit, [])
    at = _epoch(now)
    running = at - state.updated_at <= STALE_STATE_SECONDS
    supervisor = "chartgw follow" if state.role == "reader" else "chartgw replicate"
    files = []
    for name, file in state.files.items():
        lag = None if file.ok_at is None else max(0, int(at - file.ok_at))
        files.append(FileLag(name, file.state if running else f"down ({supervisor} is not running)", lag, file.txid,
                             iso(datetime.fromtimestamp(file.applied_at, UTC)) if file.applied_at else None,
                             file.restarts, file.error, file.stalls))
    degraded = not running or any(f.lag_seconds is None or f.lag_seconds > limit for f in files)
    return ReplicationStatus("degraded" if degraded else "ok", state.role, state.replica, limit, files)


def replication_route(clock: Clock) -> StarletteRoute:
    """`GET /replication` (public, never cached): this node's `node_status`."""

    async def replication(request: Request) -> Response:
        return Response(msgspec.json.encode(node_status(clock())), media_type="application/json",
                        headers={"cache-control": "no-store"})

    return StarletteRoute("/replication", replication, methods=["GET"])


def lagging(name: str, now: datetime) -> bool:
    """Whether replicated file `name` lags past CHARTGW_REPLICA_LAG_DEGRADED_SECONDS on this node (False on a node
    that does not replicate): its group's /health then says degraded."""
    status = node_status(now)
    return status.role != "single" and any(
        f.file == name and (f.lag_seconds is None or f.lag_seconds > status.degraded_after_seconds or f.state.startswith("down"))
        for f in status.files)


# --- the server's reader of a followed file --------------------------------------------------------------------


class FollowedReader(SnapshotReader):
    """A `SnapshotReader` of a file `chartgw follow` keeps current: reads through a memory map, and a version that
    moves with Litestream's `-txid` file and the file's inode as well as with `PRAGMA data_version` (see the
    module's docstring for why each is needed). A file renamed over the open one is reopened; the old connection
    is closed a little later, once reads already running on it are done."""

    CLOSE_AFTER_SECONDS = 5.0
    mmap_bytes = MMAP_BYTES

    def __init__(self, path: Path, name: str, stat: Callable[[Path], os.stat_result] = os.stat) -> None:
        super().__init__(path)
        self.sidecar = sidecar(name)
        self._stat = stat
        self._inode: int | None = None
        self._seen: tuple[Any, ...] | None = None
        self._version = 0
        self._retired: set[aiosqlite.Connection] = set()
        """Connections replaced by `reopen`, closed a little later."""

    async def _open(self) -> aiosqlite.Connection:
        inode = self._identity(self.path)  # before opening: a file renamed over it meanwhile is seen as new
        db = await super()._open()
        self._inode = inode
        return db

    def _identity(self, path: Path) -> int | None:
        try:
            return self._stat(path).st_ino
        except FileNotFoundError:
            return None

    def _sidecar_stamp(self) -> tuple[int, int]:
        try:
            st = self._stat(self.sidecar)
        except FileNotFoundError:
            return (0, 0)
        return (st.st_ino, st.st_mtime_ns)

    async def reopen(self) -> None:
        """The next read opens the file anew (one connection, under the base class's lock); the old connection is
        closed after CLOSE_AFTER_SECONDS, or by `close` if the server stops first (its thread would keep the
        process from exiting)."""
        old, self._db = self._db, None
        if old is not None:
            self._retired.add(old)
            asyncio.get_running_loop().call_later(self.CLOSE_AFTER_SECONDS,
                                                  lambda: asyncio.ensure_future(self._retire(old)))

    async def _retire(self, old: aiosqlite.Connection) -> None:
        if old in self._retired:
            self._retired.discard(old)
            await old.close()

    async def close(self) -> None:
        for old in list(self._retired):
            await self._retire(old)
        await super().close()

    async def data_version(self) -> int | None:
        inode = self._identity(self.path)
        if self._db is not None and inode != self._inode:
            await self.reopen()
        version = await super().data_version()
        if version is None:
            return None
        seen = (self._inode, version, self._sidecar_stamp())
        if seen != self._seen:
            self._seen = seen
            self._version += 1
        return self._version
