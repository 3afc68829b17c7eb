"""What the data folder holds on disk (`chartgw storage`): every file, each group's snapshot file with its
snapshots, span, growth and retention, the artist-history index with its rows, and the rest (keys, logs, locks).

A file is read by what it holds, not by whose it is: a `snapshots` table is a group's snapshot store, a
`sources` table an index over them. A file that cannot be read is reported with its error, never a crash.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from chartgw.api.group import retention
from chartgw.core import config
from chartgw.core.settings import Settings
from chartgw.groups import GROUPS
from chartgw.index import tables as index_tables
from chartgw.store import connect, parse_iso
from chartgw.store import tables as store_tables

__all__ = ["FileReport", "storage_report"]

COMPANIONS = ("-wal", "-shm")
"""SQLite's files beside a database, counted with it."""


@dataclass
class FileReport:
    file: str
    group: str | None
    """The group the file belongs to (its name starts with the group's and a "." or "-": `radio-monitor.log`);
    None for the platform's files (keys, the crawl log, the demo key)."""
    kind: str
    """"snapshots" (a group's store), "index" (the artist-history index), "keys", "other" or "missing"."""
    bytes: int = 0
    """With its -wal and -shm files."""
    snapshots: int | None = None
    rows: int | None = None
    """Rows an index holds (appearances); None for a snapshot store."""
    first: str | None = None
    """The oldest snapshot's fetch time (an index: its first indexing run)."""
    last: str | None = None
    bytes_per_year: int | None = None
    """The file's size a year at the rate its snapshots span (None under a day of data)."""
    retention_days: dict[str, float] = field(default_factory=dict)
    """Days kept per target prefix ("" = every target); empty = kept for ever."""
    unbounded_targets: int = 0
    """Stored targets no retention covers (they grow for ever)."""
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def storage_report(settings: Settings, folder: Path | None = None) -> list[FileReport]:
    """One report per group (its file, or `missing`), then one per other file of the data folder (that of
    `settings` unless given)."""
    folder = folder or settings.get(config.DATA_DIR)
    reports = []
    for group in GROUPS:
        path = folder / f"{group.name}.sqlite"
        report = FileReport(path.name, group.name, "missing", retention_days=retention(group, settings))
        if path.exists():
            _read_database(path, report)
        reports.append(report)
    known = {r.file for r in reports}
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        companion_of = next((path.name[:-len(c)] for c in COMPANIONS if path.name.endswith(c)), None)
        if path.name in known or not path.is_file() or (companion_of and (folder / companion_of).is_file()):
            continue  # a group's file, or a -wal / -shm counted with its database
        owner = next((g.name for g in sorted(GROUPS, key=lambda g: -len(g.name)) if path.name.startswith((f"{g.name}.",
                                                                                                         f"{g.name}-"))), None)
        reports.append(FileReport(path.name, owner, "keys" if path.name == "keys.sqlite" else "other", _size(path)))
    return reports


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, *(path.with_name(path.name + c) for c in COMPANIONS)) if p.exists())


def _read_database(path: Path, report: FileReport) -> None:
    report.bytes = _size(path)
    try:
        db = connect(path, readonly=True, timeout=5.0)
        try:
            tables = {name for (name,) in db.execute(store_tables.TABLE_NAMES.sql)}
            if "snapshots" in tables:
                report.kind = "snapshots"
                _read_snapshots(db, report)
            elif "sources" in tables:
                report.kind = "index"
                (report.rows,) = db.execute(index_tables.INDEX_ROWS.sql).fetchone()
                if "fetch_log" in tables:
                    report.first, report.last = db.execute(store_tables.FETCH_LOG_SPAN.sql).fetchone()
            else:
                report.kind = "other"
        finally:
            db.close()
    except sqlite3.Error as exc:
        report.error = f"{type(exc).__name__}: {exc}"


def _read_snapshots(db: sqlite3.Connection, report: FileReport) -> None:
    report.snapshots, report.first, report.last = db.execute(store_tables.SPAN.sql).fetchone()
    targets = [t for (t,) in db.execute(store_tables.TARGETS.sql)]
    days = (parse_iso(report.last) - parse_iso(report.first)).total_seconds() / 86400 if report.first and report.last else 0
    report.bytes_per_year = round(report.bytes * 365 / days) if days >= 1 else None
    kept = report.retention_days
    report.unbounded_targets = sum(not any(t.startswith(prefix) for prefix in kept) for t in targets)
