"""Whole-history exports: each group's file as one consistent SQLite file, downloadable at an immutable URL.

An export is made by SQLite's backup API from a read connection in one step, so it is the file as one read
transaction saw it (WAL: a crawl committing meanwhile is wholly in it or wholly not), then set to rollback mode
(it opens without -wal files) and named by the SHA-256 of its bytes: `<data dir>/exports/<group>/<sha256>.sqlite`,
served at `/{group}/exports/{sha256}.sqlite`. A name is given only once its file is whole (written to a temp file,
synced, then renamed), and a name always holds the same bytes, so the URL is cacheable for ever. The folder is
apart from the group files, so nothing that copies or replicates `<group>.sqlite` files picks exports up.

Builds run one per group at a time (a lock file, across processes) and one per server process at a time, in the
process's one export thread (never on the event loop, nor in the thread pool other work waits on). They are made
by `chartgw export` (cron: `chartgw cron` prints a daily line) and, on request, when `GET /exports` or
`GET /{group}/exports` is asked while the group's data changed since this process last built it and its newest
export is older than `CHARTGW_EXPORTS_INTERVAL_SECONDS`: the answer lists what is there and says a build is under
way. A build that gives an export already held keeps that one (touched, so
it counts as the newest); past `CHARTGW_EXPORTS_KEEP` per group the oldest are deleted. Temp files of a build that
was killed are never listed and are deleted by the next build of the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import os
import re
import secrets
import sqlite3
import weakref
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import msgspec
from starlette.datastructures import Headers
from starlette.responses import FileResponse, MalformedRangeHeader, RangeNotSatisfiable
from starlette.types import Receive, Scope, Send

from chartgw.api.endpoints import ApiError, Call, GroupData, Route, Streaming, not_found
from chartgw.api.params import Param, accepts
from chartgw.core import config
from chartgw.core.clock import Clock, utc_now
from chartgw.core.locks import file_lock
from chartgw.core.settings import Settings
from chartgw.store import Query, iso, read_once
from chartgw.store.connect import connect

__all__ = ["EXPORT_ROUTES", "ExportInfo", "build", "exports_dir", "exports_of", "root_routes"]

log = logging.getLogger("chartgw.http.exports")

MEDIA_TYPE = b"application/vnd.sqlite3"
CACHE_CONTROL = "public, max-age=31536000, immutable"
"""Content-addressed: the bytes at a URL never change. Still keyed: the gateway asks for the key on every request."""
_NAME = re.compile(r"[0-9a-f]{64}\.sqlite")
_TEMP_PREFIX = ".building-"
_CHUNK = 1024 * 1024
ROLLBACK_JOURNAL = Query("export in rollback-journal mode", "PRAGMA journal_mode=DELETE")
"""An export opens without -wal files (its header said WAL, as the group file it was copied from)."""
SPAN = Query("export span", "SELECT min(chart_date), max(chart_date), count(*) FROM snapshots")
_BUILDER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chartgw-export")
"""The server's builds run here, one after another: each reads and writes a whole file."""


class ExportInfo(msgspec.Struct):
    """One export of a group's whole history."""

    group: str
    sha256: str
    """The SHA-256 of the file's bytes, which names it."""
    url: str
    """Where it is downloaded (keyed), for ever the same bytes while it is kept."""
    size: int
    """Bytes."""
    built_at: str
    """When it was built (or last found identical to a new build)."""
    first_chart_date: str | None
    last_chart_date: str | None
    snapshots: int
    """Snapshots it holds (0 for a file that keeps none, e.g. the artist-history index)."""


class GroupExportsResponse(msgspec.Struct):
    group: str
    building: bool
    """A build of this group is under way (its export will be listed when it is whole)."""
    count: int
    exports: list[ExportInfo]
    """Newest first; at most CHARTGW_EXPORTS_KEEP."""


class ExportsResponse(msgspec.Struct):
    building: list[str]
    """The groups whose export is being built."""
    count: int
    exports: list[ExportInfo]
    """Every group's, group by group, newest first."""


def exports_dir(settings: Settings) -> Path:
    return settings.get(config.DATA_DIR) / "exports"


# --- building (synchronous: a thread of the server, or the command) ---------------------------------


def build(group: str, settings: Settings, now: Clock = utc_now) -> ExportInfo | None:
    """An export of `group`'s file as it is now: a new one, or the one held already when the bytes are the same;
    None when the group has no file. Waits for another build of the group (another process's) to finish. Its
    time (`built_at`, and the file's mtime that orders the exports) is `now`'s, not the filesystem's clock."""
    source = settings.get(config.DATA_DIR) / f"{group}.sqlite"
    if not source.exists():
        return None
    folder = exports_dir(settings) / group
    folder.mkdir(parents=True, exist_ok=True)
    with _group_lock(folder):
        for stale in folder.glob(_TEMP_PREFIX + "*"):  # a killed build's (the lock says none is running)
            stale.unlink(missing_ok=True)
        temp = folder / f"{_TEMP_PREFIX}{secrets.token_hex(8)}.sqlite"
        try:
            _copy(source, temp)
            digest = _sha256(temp)
            final = folder / f"{digest}.sqlite"
            # Newest by its time, and after every other export even if the clock stood still or went back.
            others = [path.stat().st_mtime for path in _files(folder) if path != final]
            stamp = max([now().timestamp(), *(mtime + 0.001 for mtime in others)])
            if final.exists():
                temp.unlink()
            else:
                os.replace(temp, final)
            os.utime(final, (stamp, stamp))  # built now (again, for the same bytes: the newest, pruning keeps it)
            _sync_folder(folder)
        finally:
            temp.unlink(missing_ok=True)
        _prune(folder, settings.get(config.EXPORTS_KEEP))
    return _info(group, final)


def _copy(source: Path, target: Path) -> None:
    """`source` copied to `target` by the backup API in one step (one read transaction), in rollback mode, synced."""
    with contextlib.closing(connect(source, readonly=True)) as src, \
            contextlib.closing(connect(target, wal=False)) as dst:
        src.backup(dst)
        dst.execute(ROLLBACK_JOURNAL.sql)
    with target.open("rb+") as file:
        os.fsync(file.fileno())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _sync_folder(folder: Path) -> None:
    """The rename made durable: a power cut never leaves a name without its bytes."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _group_lock(folder: Path) -> Iterator[None]:
    with file_lock(folder / ".lock", wait_seconds=None):
        yield


def _prune(folder: Path, keep: int) -> None:
    for old in _files(folder)[keep:]:
        old.unlink(missing_ok=True)


def _files(folder: Path) -> list[Path]:
    """The whole exports in `folder`, newest first."""
    found = []
    for path in folder.glob("*.sqlite") if folder.is_dir() else ():
        if _NAME.fullmatch(path.name):
            with contextlib.suppress(FileNotFoundError):  # pruned meanwhile
                found.append((path.stat().st_mtime, path.name, path))
    return [path for _, _, path in sorted(found, reverse=True)]


def exports_of(group: str, settings: Settings) -> list[ExportInfo]:
    """`group`'s exports, newest first (reads the folder: call it off the event loop)."""
    infos = []
    for path in _files(exports_dir(settings) / group):
        with contextlib.suppress(FileNotFoundError, sqlite3.Error):
            infos.append(_info(group, path))
    return infos


def _info(group: str, path: Path) -> ExportInfo:
    stat = path.stat()
    first, last, count = _span(path)
    built = iso(datetime.fromtimestamp(stat.st_mtime, UTC))
    return ExportInfo(group, path.stem, f"/{group}/exports/{path.name}", stat.st_size, built, first, last, count)


@functools.lru_cache(maxsize=4096)
def _span(path: Path) -> tuple[str | None, str | None, int]:
    """First and last chart date and the number of snapshots of an export (whose bytes never change: kept); none
    for a file that keeps no snapshots (the artist-history index)."""
    rows = read_once(path, SPAN)
    if not rows:
        return None, None, 0
    first, last, count = rows[0]
    return first, last, int(count)


# --- builds on request (the server) ------------------------------------------------------------------


class _Exporting:
    """What one server process knows of a group's exports: the data version it last built, the build under way."""

    def __init__(self) -> None:
        self.built_version: int | None = None
        self.task: asyncio.Task[ExportInfo | None] | None = None


_STATE: weakref.WeakKeyDictionary[GroupData, _Exporting] = weakref.WeakKeyDictionary()


async def _listed(data: GroupData) -> GroupExportsResponse:
    """The group's exports, after starting a build when one is due (see the module's docstring)."""
    state = _STATE.setdefault(data, _Exporting())
    exports = await asyncio.to_thread(exports_of, data.group, data.settings)
    building = state.task is not None and not state.task.done()
    if not building and await _due(data, state, exports):
        state.built_version = data.version
        state.task = asyncio.create_task(_build_in_thread(data, state))
        building = True
    return GroupExportsResponse(data.group, building, len(exports), exports)


async def _due(data: GroupData, state: _Exporting, exports: Sequence[ExportInfo]) -> bool:
    interval = data.settings.get(config.EXPORTS_INTERVAL_SECONDS)
    if interval is None or await data.current_version() == state.built_version or not data.reader.path.exists():
        return False
    if not exports or not interval:
        return True
    age = (data.clock() - datetime.strptime(exports[0].built_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC))
    return age.total_seconds() >= interval


async def _build_in_thread(data: GroupData, state: _Exporting) -> ExportInfo | None:
    try:
        return await asyncio.get_running_loop().run_in_executor(_BUILDER, build, data.group, data.settings, data.clock)
    except Exception:  # logged; the next request after the data changes tries again
        log.exception("export of %s failed", data.group)
        state.built_version = None
        return None


async def group_exports(call: Call) -> GroupExportsResponse:
    return await _listed(call.data)


@accepts(pattern=r"^[0-9a-f]{64}\.sqlite$")
def export_name(value: str) -> str:
    if not _NAME.fullmatch(value):
        raise ValueError("an export's file name: its SHA-256 (64 lowercase hex digits) and .sqlite")
    return value


class Download(Streaming):
    """An export's file, streamed from disk (with Range), as immutable, its SHA-256 its ETag."""

    def __init__(self, path: Path, group: str) -> None:
        self.path = path
        self.group = group
        self.etag = f'"{path.stem}"'

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        fixed = {"etag": self.etag, "cache-control": CACHE_CONTROL}
        if self.etag in [tag.strip().removeprefix("W/") for tag in headers.get("if-none-match", "").split(",")]:
            await send({"type": "http.response.start", "status": 304,
                        "headers": [(k.encode(), v.encode()) for k, v in fixed.items()]})
            await send({"type": "http.response.body", "body": b""})
            return
        try:
            stat = await asyncio.to_thread(os.stat, self.path)
        except FileNotFoundError:
            raise not_found("No such export (it may have been pruned: GET the exports listing)") from None
        wanted = headers.get("range")
        if wanted is not None:
            try:
                FileResponse._parse_range_header(wanted, stat.st_size)  # Starlette answers these in plain text
            except MalformedRangeHeader:
                scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k != b"range"]}  # ignored
            except RangeNotSatisfiable:
                raise ApiError(416, "Range Not Satisfiable", {"Content-Range": f"bytes */{stat.st_size}"}) from None
        response = FileResponse(self.path, headers=fixed, media_type=MEDIA_TYPE.decode(), stat_result=stat,
                                filename=f"{self.group}-{self.path.stem[:12]}.sqlite")
        await response(scope, receive, send)


async def download(call: Call) -> Download:
    return Download(exports_dir(call.settings) / call.data.group / call.params["name"], call.data.group)


EXPORT_ROUTES = (
    Route("/exports", group_exports, cache_ttl=0, errors=(), rows="exports", response=GroupExportsResponse,
          summary="This group's whole-history SQLite exports (size, snapshot span, URL), newest first; starts a "
                  "build when the data changed (docs/exports.md)"),
    Route("/exports/{name}", download, (
        Param("name", where="path", check=export_name, description="The export's SHA-256 and .sqlite, as listed"),
    ), cache_ttl=0, media_type=MEDIA_TYPE,
        summary="One export: a consistent SQLite file of the group's whole history, immutable (Range supported)"),
)
"""Every group's export routes (the platform gives them, like /fetch-logs)."""


def root_routes(datas: dict[str, GroupData]) -> list[Route]:
    """`GET /exports`: every group's exports (served at the gateway's root)."""

    async def every_group(call: Call) -> ExportsResponse:
        listed = [await _listed(data) for data in datas.values()]
        exports = [info for one in listed for info in one.exports]
        return ExportsResponse([one.group for one in listed if one.building], len(exports), exports)

    return [Route("/exports", every_group, cache_ttl=0, errors=(), rows="exports", response=ExportsResponse,
                  summary="Every group's whole-history SQLite exports, newest first per group (docs/exports.md)")]
