"""The index's Genius lookups: the tracks `chartgw enrich artist-history-api lyrics` asks for, what it was answered
(kept across rebuilds, re-keyed when the track keys change) and the ids given to the tracks' variants.
"""

from __future__ import annotations

import json
import sqlite3
from typing import NamedTuple

from chartgw.core.text import artist_key, title_key
from chartgw.index import tables as q
from chartgw.store import transaction

__all__ = ["LyricsTrack", "lyrics_candidates", "record_lyrics", "rekey_lookups"]


class LyricsTrack(NamedTuple):
    """An indexed track without Genius ids: what `chartgw enrich` asks for."""

    track_key: str
    title: str
    artist: str
    """The primary (first credited) artist as shown."""
    rows: int


def rekey_lookups(db: sqlite3.Connection) -> None:
    """Genius lookups kept from an index of an earlier layout, keyed by the track keys of now (a lookup whose new
    key one already holds stays under its old one, unused), so a rebuild asks Genius nothing it asked before."""
    for key, title, artist in db.execute(q.LOOKUP_KEYS.sql).fetchall():
        new = f"{title_key(title)}|{artist}"
        if new != key:
            db.execute(q.REKEY_LOOKUP.sql, (new, key))


def lyrics_candidates(db: sqlite3.Connection, asked_before: str, limit: int) -> list[LyricsTrack]:
    """Up to `limit` tracks with a title, none of whose variants has a Genius song id, not resolved yet and
    not missed since `asked_before` (ISO time): the most charted first."""
    found = db.execute(q.LYRICS_CANDIDATES.sql, (asked_before, limit)).fetchall()
    return [LyricsTrack(key, title, json.loads(credits)[0], rows) for key, title, credits, rows in found]


def record_lyrics(db: sqlite3.Connection, track: LyricsTrack, song_id: str | None, artist_id: str | None,
                  asked_at: str) -> int:
    """Keep what Genius answered for `track` (a miss has no ids) and give its variants without Genius ids of
    their own the ids found, in one transaction (a killed run loses at most the track being asked); returns
    the variants changed."""
    with transaction(db):
        db.execute(q.SAVE_LOOKUP.sql, (track.track_key, track.title, artist_key(track.artist), song_id, artist_id, asked_at))
        changed = db.execute(q.LYRICS_TO_VARIANTS.sql,
                             (song_id, artist_id, track.track_key)).rowcount if song_id is not None else 0
        db.execute(q.LYRICS_ARTISTS_OF_TRACK.sql, (track.track_key,))
    return changed
