"""/radio's hourly roll-up: each completed hour's tracks per country committed as a chart snapshot
(`plays/{cc}`), so the artist-history index reads radio plays like any chart.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec

from chartgw.core.text import split_artists
from chartgw.groups.radio import storage
from chartgw.store import FetchLogRow, NewSnapshot, SnapshotWriter, StoredEntry, iso, parse_iso
from chartgw.store.records import stored_entry

# --- hourly roll-up: plays as chart entries ------------------------------------------------------------


class PlayedTrack(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One track of a country's radio hour (snapshot `plays/{cc}`): what the artist-history index reads."""

    rank: int
    artist: str
    artists: list[str]
    title: str
    plays: int
    stations: int
    first_played_at: str
    last_played_at: str


ROLLUP_LOOKBACK = timedelta(days=7)


def _hour_label(hour: datetime) -> str:
    return hour.strftime("%Y-%m-%dT%H")


PLAYS_RETENTION = {"plays/": 400.0}
"""The radio group's own retention of hourly plays snapshots (the group passes the operator's, `retention`)."""


def rollup(now: datetime, path: Path, retention: dict[str, float] | None = None) -> int:
    """Commit a snapshot `plays/{cc}` (chart date and hour) per country for every completed hour since the
    last one rolled up (7 days at most): the hour's tracks, most played first. Returns snapshots committed."""
    end = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    committed = 0
    with SnapshotWriter(path, retention=PLAYS_RETENTION if retention is None else retention,
                         now=lambda: now, tables=storage.TABLES) as store:
        ((last,),) = store.rows(storage.LAST_ROLLED_HOUR)
        if last:
            start = datetime.strptime(last, "%Y-%m-%dT%H").replace(tzinfo=UTC) + timedelta(hours=1)
        else:
            ((first,),) = store.rows(storage.FIRST_PLAY)
            if first is None:
                return 0
            start = parse_iso(first).replace(minute=0, second=0)
        hour = max(start, end - ROLLUP_LOOKBACK)
        while hour < end:
            rows = store.rows(storage.HOUR_TRACKS, (iso(hour), iso(hour + timedelta(hours=1))))
            by_country: dict[str, list[StoredEntry]] = {}
            for cc, artist, title, plays, stations, first_at, last_at in rows:
                entries = by_country.setdefault(cc, [])
                names = split_artists(artist) or [artist]
                record = PlayedTrack(rank=len(entries) + 1, artist=artist, artists=names, title=title, plays=plays,
                                     stations=stations, first_played_at=first_at, last_played_at=last_at)
                entries.append(stored_entry(record, rank=record.rank, title=title, artists=names, item_id=None))
            for cc, entries in by_country.items():
                target = f"plays/{cc}"
                store.commit([NewSnapshot(target, hour.date().isoformat(), hour.hour, now, "radio monitor", entries)],
                             FetchLogRow(target, now, 0, "ok", None, len(entries), "radio monitor", None))
                committed += 1
            hour += timedelta(hours=1)
    return committed
