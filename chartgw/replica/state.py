"""Each replicating node's state: where its node-local files are, what its supervisor (`chartgw replicate` or
`chartgw follow`, chartgw.replica.litestream) last saw of every file, and the lag /replication, /metrics and the
groups' /health read from it.

One writer (crawls, refreshes, key management) runs `chartgw replicate`: Litestream ships every group file (the
artist-history index is the artist-history-api group's file) and the key store to `CHARTGW_REPLICA_URL`. Each
reader runs `chartgw follow` (`litestream restore -f` of every file) beside `chartgw serve --read-only`. Both
supervisors write their state to a node-local JSON file under `<data>/node/`, never into a replicated file.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from chartgw.core import config
from chartgw.core.settings import Settings
from chartgw.store import iso

__all__ = [
    "STATUS_FILES",
    "FileLag",
    "FileState",
    "NodeState",
    "ReplicationStatus",
    "lagging",
    "node_dir",
    "node_status",
    "read_state",
    "sidecar",
    "staging_path",
    "usage_path",
    "write_state",
]

STATUS_FILES = {"writer": "replicate.json", "reader": "follow.json"}
STALE_STATE_SECONDS = 5.0
"""A state file not rewritten for this long: its supervisor is not running."""


def node_dir(settings: Settings) -> Path:
    """Node-local files (supervisor state, Litestream configuration, staging restores, a reader's key usage)."""
    return settings.get(config.DATA_DIR) / "node"


def usage_path(settings: Settings) -> Path | None:
    """Where a read replica counts its keys' requests (a node-local file; `chartgw keys usage` reads it there);
    None off a replica (the key store holds them)."""
    return node_dir(settings) / "usage.sqlite" if settings.get(config.READ_ONLY) else None


def staging_path(name: str, settings: Settings) -> Path:
    """Where `chartgw follow` restores a file before renaming it into place (Litestream's `-o`)."""
    return node_dir(settings) / "staging" / f"{name}.sqlite"


def sidecar(name: str, settings: Settings) -> Path:
    """The `-txid` file Litestream's follow rewrites after every applied batch (it keeps its `-o` path's name)."""
    return staging_path(name, settings).with_name(f"{name}.sqlite-txid")


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


def write_state(state: NodeState, settings: Settings) -> None:
    """Replace the role's state file atomically (readers never see half of it)."""
    path = node_dir(settings) / STATUS_FILES[state.role]
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(msgspec.json.encode(state))
    os.replace(temporary, path)


_read_cache: dict[Path, tuple[int, NodeState | None]] = {}


def read_state(settings: Settings) -> NodeState | None:
    """This node's replication state (a reader's, else a writer's), or None on a node that does not replicate."""
    for role in ("reader", "writer"):
        path = node_dir(settings) / STATUS_FILES[role]
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


def node_status(now: datetime, settings: Settings) -> ReplicationStatus:
    """What /replication answers: each replicated file's state and lag at `now` (under `settings`: the app's)."""
    limit = settings.get(config.REPLICA_LAG_DEGRADED_SECONDS)
    state = read_state(settings)
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


def lagging(name: str, now: datetime, settings: Settings) -> bool:
    """Whether replicated file `name` lags past CHARTGW_REPLICA_LAG_DEGRADED_SECONDS on this node (False on a node
    that does not replicate): its group's /health then says degraded."""
    status = node_status(now, settings)
    return status.role != "single" and any(
        f.file == name and (f.lag_seconds is None or f.lag_seconds > status.degraded_after_seconds or f.state.startswith("down"))
        for f in status.files)
