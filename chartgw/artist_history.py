"""The artist-history index: every chart appearance of every group, one row each, in a SQLite file of its own.

The index (`<data>/artist-history-api.sqlite`, named after the group that serves it so the platform's reader
opens it) is built from the groups' snapshot files through the `EntryMapping` each group declares; a group
without one is not indexed. A row is one appearance: source group, chart (the snapshot target without its
`@date` suffix), market, chart date, rank, title, the artist as shown, and the ids the entry carries (columns
named as the spec's parameters). Charts published several times a day (`EntryMapping.sub_daily_targets`) are
folded to one row per track, chart and day: the best rank of the day and the hours on chart.

Every credited artist (split on `,`, `&`, ` x `, `feat.`, `ft.`, `featuring`, `with`, and featured credits in
the title) is a key in `appearance_artists`; a credit printed in two scripts ("아이유(IU)") links its two keys
in `artist_links`, and two single-artist entries that share an id (`id_keys`) are taken to be one artist.

Incremental and resumable: `sources` holds each group's last indexed snapshot id; `index_all()` indexes the
snapshots after it, one group's batch per `BEGIN IMMEDIATE ... COMMIT` (WAL, synchronous=FULL), so a killed
indexer leaves the index as it was before that batch. Rows are keyed on (source, chart, market, chart date,
track) and updated in place, so a row keeps its id when a later snapshot of the same chart day is indexed
(what keeps a paging cursor stable). Snapshots are applied in id order, so a rebuild from scratch gives the
same rows (as long as the groups have not pruned snapshots meanwhile).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from chartgw import config
from chartgw.clock import Clock, utc_now
from chartgw.group import AFTER_CRAWL, EntryMapping
from chartgw.store import FETCH_LOG_SCHEMA, group_db_path, iso
from chartgw.text import artist_aliases, artist_key, compact, split_artists, title_key

if TYPE_CHECKING:
    from chartgw.group import Group

__all__ = [
    "ID_COLUMNS",
    "INDEX_NAME",
    "IndexResult",
    "credited_names",
    "index_all",
    "index_path",
    "index_source",
    "rebuild",
    "register_groups",
    "registered_groups",
    "source_groups",
]

INDEX_NAME = "artist-history-api"
ID_COLUMNS: tuple[str, ...] = EntryMapping.ID_KINDS
"""Id columns of a row, named as the spec's parameters (plus `asin`, which the retail groups carry)."""

BATCH_SNAPSHOTS = 500
"""Snapshots of one group indexed per transaction (a catch-up over a large file commits as it goes)."""

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sources (
    source TEXT PRIMARY KEY,
    last_snapshot_id INTEGER NOT NULL,
    indexed_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS appearances (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    chart TEXT NOT NULL,
    market TEXT NOT NULL,
    chart_date TEXT NOT NULL,
    rank INTEGER NOT NULL,
    title TEXT,
    artist TEXT NOT NULL,
    credits TEXT NOT NULL,
    track_key TEXT NOT NULL,
    hours INTEGER,
    hour_mask INTEGER,
    snapshot_id INTEGER NOT NULL,
    {", ".join(f"{c} TEXT" for c in ID_COLUMNS)},
    UNIQUE (source, chart, market, chart_date, track_key)
);
CREATE INDEX IF NOT EXISTS appearances_by_date ON appearances (chart_date, id);
{"".join(f"CREATE INDEX IF NOT EXISTS appearances_by_{c} ON appearances ({c}, chart_date, id) WHERE {c} IS NOT NULL;"
         for c in ID_COLUMNS)}
CREATE TABLE IF NOT EXISTS appearance_artists (
    key TEXT NOT NULL,
    chart_date TEXT NOT NULL,
    row_id INTEGER NOT NULL,
    PRIMARY KEY (key, chart_date, row_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS artist_links (
    a TEXT NOT NULL,
    b TEXT NOT NULL,
    PRIMARY KEY (a, b)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS id_keys (
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    key TEXT NOT NULL,
    PRIMARY KEY (kind, value, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS id_keys_by_key ON id_keys (key);
""" + FETCH_LOG_SCHEMA
# `fetch_log` has the snapshot store's layout: one row per group an index run read something from (or failed
# on), so the status page and the platform's fetch-log readers show indexing runs like crawls.

ROW_COLUMNS = ("id, source, chart, market, chart_date, rank, title, artist, credits, hours, "
               + ", ".join(ID_COLUMNS))
"""What a reader selects for a history row (in `history_row` order)."""

_UPSERT = (
    "INSERT INTO appearances (source, chart, market, chart_date, rank, title, artist, credits, track_key, hours,"
    f" hour_mask, snapshot_id, {', '.join(ID_COLUMNS)}) VALUES ({', '.join('?' * (12 + len(ID_COLUMNS)))})"
    " ON CONFLICT (source, chart, market, chart_date, track_key) DO UPDATE SET"
    # A sub-daily chart keeps the day's best rank and counts each hour once; any other chart takes the rank
    # of its newest snapshot of that day (a re-crawl of the day's chart replaces the earlier one).
    " rank = CASE WHEN excluded.hour_mask IS NULL THEN excluded.rank ELSE min(rank, excluded.rank) END,"
    " hours = CASE WHEN excluded.hour_mask IS NULL THEN NULL"
    " ELSE coalesce(hours, 0) + ((coalesce(hour_mask, 0) & excluded.hour_mask) = 0) END,"
    " hour_mask = CASE WHEN excluded.hour_mask IS NULL THEN NULL ELSE coalesce(hour_mask, 0) | excluded.hour_mask END,"
    " title = excluded.title, artist = excluded.artist, credits = excluded.credits, snapshot_id = excluded.snapshot_id, "
    + ", ".join(f"{c} = coalesce(excluded.{c}, {c})" for c in ID_COLUMNS)
    + " RETURNING id"
)

# --- credits --------------------------------------------------------------------------------------

_FEATURED = re.compile(r"[\(\[]\s*(?:feat\.?|ft\.?|featuring|with)\s+([^\)\]]*)[\)\]]", re.IGNORECASE)
_JOINERS = re.compile(r"\s+(?:feat\.?|ft\.?|featuring|with|x|vs\.?)\s+|\s*/\s*", re.IGNORECASE)
_OF_GROUP = re.compile(r"\s+of\s+.+$", re.IGNORECASE)


def _split_credit(text: str) -> list[str]:
    featured = [f for inner in _FEATURED.findall(text) for f in _split_credit(_OF_GROUP.sub("", inner))]
    rest = _FEATURED.sub(" ", text)
    names = [name for part in _JOINERS.split(rest) for name in split_artists(part)]
    return names + featured


def credited_names(artist: str, artists: Sequence[str], title: str | None = None) -> list[str]:
    """Every artist one entry credits, once each: the credited list split on `,`, `&`, ` x `, `feat.`,
    `ft.`, `featuring`, `with` and `/`, plus artists featured in the title ("Song (feat. B)")."""
    names: list[str] = []
    for credit in list(artists) or [artist]:
        names += _split_credit(credit)
    if title:
        names += [f for inner in _FEATURED.findall(title) for f in _split_credit(_OF_GROUP.sub("", inner))]
    seen: dict[str, str] = {}
    for name in names:
        key = compact(name)
        if key and key not in seen:
            seen[key] = name.strip()
    return list(seen.values())


def name_keys(name: str) -> set[str]:
    """The keys a name given by a client (or printed by a chart) is known by: each credited artist's
    name outside brackets and each name inside them."""
    return {key for part in credited_names(name, [name]) for key in artist_aliases(part)}


# --- indexing -------------------------------------------------------------------------------------

def index_path() -> Path:
    return group_db_path(INDEX_NAME)


_REGISTRY: list[tuple[Group, ...]] = [()]


def register_groups(groups: Iterable[Group]) -> None:
    """Tell the index which groups exist, and index each one after its crawls commit. The registry
    (`chartgw.groups`) calls this once with GROUPS: the index may not import the registry (it is below it
    in the import layers)."""
    _REGISTRY[0] = tuple(groups)
    if index_source not in AFTER_CRAWL:
        AFTER_CRAWL.append(index_source)


def registered_groups() -> tuple[Group, ...]:
    """Every registered group but the index's own (those without an entry mapping included)."""
    return tuple(g for g in _REGISTRY[0] if g.name != INDEX_NAME)


def source_groups(groups: Iterable[Group] | None = None) -> list[Group]:
    """The groups the index reads: every registered group (or every one of `groups`) with an entry mapping."""
    return [g for g in (registered_groups() if groups is None else groups) if g.entries is not None and g.name != INDEX_NAME]


@dataclass(frozen=True)
class IndexResult:
    source: str
    snapshots: int
    """Snapshots indexed by this run."""
    rows: int
    """Appearance rows written (inserted or updated)."""
    last_snapshot_id: int
    error: str | None = None


def open_index(path: Path | None = None) -> sqlite3.Connection:
    """The writer's connection, schema in place, WAL and synchronous=FULL as the snapshot store."""
    path = path or index_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.executescript(SCHEMA)
    db.execute("INSERT OR IGNORE INTO meta VALUES ('cursor_secret', ?)", (os.urandom(16).hex(),))
    return db


def index_all(groups: Iterable[Group] | None = None, *, now: Clock = utc_now, path: Path | None = None,
              batch: int = BATCH_SNAPSHOTS) -> list[IndexResult]:
    """Catch every source group up from its last indexed snapshot. Idempotent: a second run indexes nothing."""
    db = open_index(path)
    try:
        return [_logged(db, group, now, batch) for group in source_groups(groups)]
    finally:
        db.close()


def _logged(db: sqlite3.Connection, group: Group, now: Clock, batch: int) -> IndexResult:
    """`index_group`, with a fetch-log row when it indexed something or failed; a failing source (a broken
    file) does not stop the others."""
    started, clock = now(), time.monotonic()
    try:
        result = index_group(db, group, now=now, batch=batch)
    except (sqlite3.Error, ValueError, OSError) as exc:
        row = db.execute("SELECT last_snapshot_id FROM sources WHERE source = ?", (group.name,)).fetchone()
        result = IndexResult(group.name, 0, 0, int(row[0]) if row else 0, f"{type(exc).__name__}: {exc}")
    if result.snapshots or result.error:
        db.execute("INSERT INTO fetch_log (target, started_at, duration_ms, status, rows, url, error)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (group.name, iso(started), int((time.monotonic() - clock) * 1000), "failed" if result.error else "ok",
                    result.rows, f"{group.name}.sqlite", result.error))
    return result


def index_source(name: str, *, now: Clock = utc_now) -> IndexResult | None:
    """Index one group's snapshots committed since the last run: the crawl runner's hook after a commit.
    None for a group the index does not read (no entry mapping)."""
    group = next((g for g in source_groups() if g.name == name), None)
    if group is None:
        return None
    db = open_index()
    try:
        return _logged(db, group, now, BATCH_SNAPSHOTS)
    finally:
        db.close()


def rebuild(groups: Iterable[Group] | None = None, *, now: Clock = utc_now, path: Path | None = None) -> list[IndexResult]:
    """Drop the index and build it again from the groups' files."""
    path = path or index_path()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return index_all(groups, now=now, path=path)


def index_group(db: sqlite3.Connection, group: Group, *, now: Clock = utc_now, batch: int = BATCH_SNAPSHOTS) -> IndexResult:
    """Index `group`'s snapshots after its last indexed one, `batch` snapshots per transaction."""
    assert group.entries is not None
    row = db.execute("SELECT last_snapshot_id FROM sources WHERE source = ?", (group.name,)).fetchone()
    last = int(row[0]) if row else 0
    source_path = group_db_path(group.name)
    if not source_path.exists():
        return IndexResult(group.name, 0, 0, last)
    src = sqlite3.connect(f"file:{source_path}?mode=ro", uri=True, timeout=30.0)
    snapshots = rows = 0
    try:
        while True:
            try:
                pending = src.execute(
                    "SELECT id, target, chart_date, chart_hour, fetched_at FROM snapshots WHERE id > ? ORDER BY id LIMIT ?",
                    (last, batch)).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    break
                raise
            if not pending:
                break
            db.execute("BEGIN IMMEDIATE")
            try:
                # Another indexer (cron beside a crawl's hook) may have committed meanwhile: never apply a
                # snapshot twice, nor move the mark back.
                row = db.execute("SELECT last_snapshot_id FROM sources WHERE source = ?", (group.name,)).fetchone()
                done = int(row[0]) if row else 0
                for snapshot in pending:
                    if snapshot[0] > done:
                        rows += _index_snapshot(db, src, group.name, group.entries, snapshot)
                        snapshots += 1
                last = max(int(pending[-1][0]), done)
                db.execute("INSERT INTO sources VALUES (?, ?, ?) ON CONFLICT (source) DO UPDATE SET"
                           " last_snapshot_id = excluded.last_snapshot_id, indexed_at = excluded.indexed_at",
                           (group.name, last, iso(now())))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
    finally:
        src.close()
    if snapshots:
        db.execute("PRAGMA wal_checkpoint(PASSIVE)")
    return IndexResult(group.name, snapshots, rows, last)


def _index_snapshot(db: sqlite3.Connection, src: sqlite3.Connection, source: str, mapping: EntryMapping,
                    snapshot: tuple[Any, ...]) -> int:
    snapshot_id, target, chart_date, chart_hour, fetched_at = snapshot
    chart = str(target).partition("@")[0]
    hour_mask: int | None = None
    if mapping.is_sub_daily(target):
        hour = chart_hour if chart_hour is not None else int(str(fetched_at)[11:13])
        hour_mask = 1 << int(hour)
    # One row per track of the snapshot (its best rank when a chart lists a track twice).
    best: dict[tuple[str, str], tuple[int, Any]] = {}
    for rank, record in src.execute("SELECT rank, record FROM entries WHERE snapshot_id = ? ORDER BY position",
                                    (snapshot_id,)):
        try:
            data = json.loads(record)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        entry = mapping.read(target, data)
        if entry is None:
            continue
        market = entry.market or "global"
        key = (market, _track_key(entry.title, entry.artist))
        if key not in best or rank < best[key][0]:
            best[key] = (int(rank), entry)
    keys: list[tuple[str, str, int]] = []
    links: set[tuple[str, str]] = set()
    id_keys: list[tuple[str, str, str]] = []
    for (market, track), (rank, entry) in best.items():
        credit = _credit(entry.artist, tuple(entry.artists), entry.title)
        ids = [entry.ids.get(kind) for kind in ID_COLUMNS]
        row_id = db.execute(_UPSERT, (source, chart, market, chart_date, rank, entry.title, entry.artist, credit.names_json,
                                      track, 1 if hour_mask else None, hour_mask, snapshot_id, *ids)).fetchone()[0]
        links.update(credit.links)
        keys += [(k, chart_date, row_id) for k in credit.keys]
        if credit.single is not None:  # a single-artist entry: its ids are that artist's
            id_keys += [(kind, value, credit.single) for kind, value in entry.ids.items()]
    db.executemany("INSERT OR IGNORE INTO appearance_artists VALUES (?, ?, ?)", keys)
    db.executemany("INSERT OR IGNORE INTO artist_links VALUES (?, ?)", sorted(links))
    db.executemany("INSERT OR IGNORE INTO id_keys VALUES (?, ?, ?)", id_keys)
    return len(best)


class _Credit(NamedTuple):
    names_json: str
    keys: tuple[str, ...]
    """Every alias key of every credited artist."""
    links: tuple[tuple[str, str], ...]
    """Alias pairs of one artist printed in two scripts ("아이유(IU)")."""
    single: str | None
    """The artist key when the entry credits one artist only."""


@lru_cache(maxsize=100_000)
def _credit(artist: str, artists: tuple[str, ...], title: str | None) -> _Credit:
    """An entry's credit as indexed (cached: the same credits recur in every snapshot)."""
    names = credited_names(artist, artists, title)
    keys: set[str] = set()
    links: list[tuple[str, str]] = []
    for name in names:
        aliases = artist_aliases(name)
        keys |= aliases
        links += [(a, b) for a in sorted(aliases) for b in sorted(aliases) if a != b]
    return _Credit(json.dumps(names, ensure_ascii=False), tuple(sorted(keys)), tuple(links),
                   artist_key(names[0]) if len(names) == 1 else None)


@lru_cache(maxsize=100_000)
def _track_key(title: str | None, artist: str) -> str:
    return f"{title_key(title) if title else ''}|{artist_key(artist)}"


# --- aliases --------------------------------------------------------------------------------------

SHIPPED_ALIASES: tuple[tuple[str, ...], ...] = (
    ("아이유", "IU"),
    ("방탄소년단", "BTS"),
    ("블랙핑크", "BLACKPINK"),
    ("르세라핌", "LE SSERAFIM"),
    ("뉴진스", "NewJeans"),
    ("에스파", "aespa"),
    ("세븐틴", "SEVENTEEN"),
    ("트와이스", "TWICE"),
    ("아이브", "IVE"),
    ("로제", "ROSÉ"),
    ("제니", "JENNIE"),
    ("지민", "Jimin"),
    ("정국", "Jung Kook"),
    ("스트레이 키즈", "Stray Kids"),
    ("임영웅", "Lim Young Woong"),
    ("데이식스", "DAY6"),
    ("(여자)아이들", "(G)I-DLE", "i-dle"),
    ("키스오브라이프", "KISS OF LIFE"),
    ("보이넥스트도어", "BOYNEXTDOOR"),
    ("투모로우바이투게더", "TOMORROW X TOGETHER", "TXT"),
)
"""Names of one artist in several scripts that no chart prints together (extend with a file:
`CHARTGW_ARTIST_HISTORY_ALIASES_FILE`, one artist per line, names separated by `|`)."""


def _alias_file(value: str) -> Path | None:
    return Path(value) if value else None


ALIASES_FILE_SETTING = config.Setting(
    "ARTIST_HISTORY_ALIASES_FILE", "",
    "a UTF-8 file of extra artist aliases for /artist-history-api: one artist per line, names separated by '|'",
    _alias_file)


def alias_groups() -> list[set[str]]:
    """The shipped alias table plus the configured file's lines, each a set of keys."""
    groups = [{compact(n) for n in names} - {""} for names in SHIPPED_ALIASES]
    path = config.get(ALIASES_FILE_SETTING)
    if path is not None:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise config.SettingError(f"{ALIASES_FILE_SETTING.variable}: cannot read {path}: {exc.strerror}") from None
        groups += [{compact(n) for n in line.split("|")} - {""} for line in lines if line.strip()
                   and not line.lstrip().startswith("#")]
    return [g for g in groups if len(g) > 1]
