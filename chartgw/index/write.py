"""Writing a batch into the index: each folded row into the row already stored for its chart, day and track, its
variant, track and artists given ids (new ones written with the batch), the artist keys and their sums kept.
A track is a recording of recording identity (`chartgw.index.identity`): a new variant is linked as it is written,
and its rows are kept under its recording's number, so two row forms of one recording on one chart and day are
one row. `Run` is what one indexing run keeps across its groups and batches.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from chartgw.index import tables as q
from chartgw.index.credits import credit_keys
from chartgw.index.identity import links as identity
from chartgw.index.source import (
    ARTISTS,
    CREDIT,
    KEY,
    NOTED,
    OWNER,
    TRACK_ID,
    TRACK_KEY,
    VARIANT_ID,
    Prefetch,
    VariantKey,
    fold,
    slot_of,
)
from chartgw.index.tables import ID_COLUMNS, LYRICS_ARTIST, LYRICS_SONG, VARIANT_ID_COLUMNS
from chartgw.store.connect import Checkpointer

__all__ = ["Run", "create_deferred", "write_batch"]

_SPEC_IDS = len(ID_COLUMNS)
"""A variant's ids that name its artist when it credits one alone (a platform's song id, after them, is identity's)."""


@dataclass
class Run:
    """What one indexing run keeps across its groups and batches (ids of the rows of `charts`, `tracks` and
    `variants` met so far)."""

    bulk: bool
    """The index was empty when the run began: the deferred indexes and the artist sums are built at its
    end, and a chart day this run has not written is not looked up (it cannot exist; see `index_group` for
    another indexer meanwhile)."""
    fresh: bool
    summing: bool = True
    """`artist_tracks` is kept as rows are written (False: it is summed again at the end of the run)."""
    charts: dict[tuple[str, str, str], int] = field(default_factory=dict)
    variants: dict[VariantKey, tuple[int, int]] = field(default_factory=dict)
    """Variant key -> (variant id, track id)."""
    variant_keys: dict[int, tuple[VariantKey, tuple[str, ...]]] = field(default_factory=dict)
    """Variant id -> (its key, the keys its credits are indexed under)."""
    written: set[tuple[int, str]] = field(default_factory=set)
    """(chart id, chart date) written by this run."""
    lyrics: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    """Track key -> (Genius song id, artist id) resolved by `chartgw enrich`, given to new variants."""
    token: object = field(default_factory=object)
    """Marks the variant slots (`chartgw.index.source.slot_of`) whose ids belong to this run."""
    readers: dict[str, Prefetch] = field(default_factory=dict)
    """Reader processes started ahead of their group's turn."""
    checkpoints: Checkpointer | None = None
    """A bulk build's checkpoints, made by a thread of their own until the run's end."""
    artists: dict[str, int] = field(default_factory=dict)
    linking: identity.Linking | None = None
    """Recording identity as it stands after every variant written (loaded when a new variant is first met)."""
    next_variant: int = 1
    next_artist: int = 1
    new_tracks: list[tuple[int, str]] = field(default_factory=list)
    """New recordings (their number, the track key of the row form that made them)."""
    new_artists: list[tuple[int, str]] = field(default_factory=list)
    new_variants: list[tuple[Any, ...]] = field(default_factory=list)
    """Tracks and variants met in the batch being written, written before its rows."""
    variant_artists: list[tuple[int, int]] = field(default_factory=list)
    """(variant id, artist id) of the variants this run met first in the batch being written (`VARIANT_ARTISTS`)."""

    def forget(self, db: sqlite3.Connection) -> None:
        """Drop what a rolled-back batch may have added, and look everything up from now on (with the indexes
        a bulk build defers)."""
        if self.bulk and self.fresh:
            create_deferred(db)
        self.fresh = False
        self.token = object()
        self.charts = {(s, c, m): i for i, s, c, m in db.execute(q.CHARTS.sql)}
        self.variants.clear()
        self.variant_keys.clear()
        self.linking = None  # linked again from the file: what a rolled-back batch linked is gone, another's is in
        self.next_variant = db.execute(q.NEXT_VARIANT.sql).fetchone()[0]
        self.next_artist = db.execute(q.NEXT_ARTIST.sql).fetchone()[0]
        self.artists.clear()
        self.new_artists.clear()
        self.new_tracks.clear()
        self.new_variants.clear()
        self.variant_artists.clear()
        db.execute(q.VARIANT_ARTISTS.sql)
        db.execute(q.FORGET_VARIANT_ARTISTS.sql)


def create_deferred(db: sqlite3.Connection) -> None:
    """The indexes a bulk build defers, one statement each (in the transaction in progress, if any)."""
    for statement in q.DEFERRED:
        db.execute(statement.sql)


def _recording(db: sqlite3.Connection, run: Run, variant_id: int, key: VariantKey, ids: list[str], track_key: str,
               credits: str) -> int:
    """The recording a new variant (its ids as written) is linked to: the track its rows are kept under; its credits
    are identity's artists' names (one artist layer: `identity.credited`)."""
    linking = run.linking
    if linking is None:
        linking = run.linking = identity.Linking.load(db)
    link = linking.link(variant_id, identity.row_of(key[1], key[0], dict(zip(VARIANT_ID_COLUMNS, ids, strict=True)),
                                                    ids[-1] or None), credits)
    number = link.recording.number
    if link.tier == "none":  # the variant made it
        run.new_tracks.append((number, track_key))
    return number


def _variant(db: sqlite3.Connection, run: Run, slot: list[Any]) -> None:
    """Give `slot` its variant and track ids in this run's index, a new variant (with the track's Genius ids
    when the entry has none) being linked to its recording and written with the batch."""
    key, track_key, credit = slot[KEY], slot[TRACK_KEY], slot[CREDIT]
    found = run.variants.get(key)
    met = found is None  # first in this run: its artist keys go to `VARIANT_ARTISTS`
    if found is None:
        text = json.dumps(key, ensure_ascii=False, separators=(",", ":"))
        row = None if run.fresh else db.execute(q.VARIANT_BY_KEY.sql, (text,)).fetchone()
        if row is None:
            ids = list(key[3])
            lyrics = run.lyrics.get(track_key)
            if lyrics is not None and not ids[LYRICS_SONG]:
                ids[LYRICS_SONG], ids[LYRICS_ARTIST] = lyrics[0] or "", lyrics[1] or ""
            track_id = _recording(db, run, run.next_variant, key, ids, track_key, credit.names_json)
            row = (run.next_variant, track_id)
            run.next_variant += 1
            run.new_variants.append((row[0], text, track_id, key[1] or "", key[0], credit.names_json, *ids))
        found = run.variants[key] = (int(row[0]), int(row[1]))
        run.variant_keys[found[0]] = (key, credit.keys)
    slot[OWNER], slot[VARIANT_ID], slot[TRACK_ID] = run.token, found[0], found[1]
    slot[ARTISTS] = _artist_ids(db, run, credit.keys)
    if met:
        run.variant_artists += [(found[0], artist) for artist in slot[ARTISTS]]


def _artist_ids(db: sqlite3.Connection, run: Run, keys: Sequence[str]) -> tuple[int, ...]:
    """The ids of artist keys in this run's index, new ones written with the batch."""
    ids = []
    for key in keys:
        artist_id = run.artists.get(key)
        if artist_id is None:
            found = None if run.fresh else db.execute(q.ARTIST_BY_KEY.sql, (key,)).fetchone()
            if found is None:
                found = (run.next_artist,)
                run.next_artist += 1
                run.new_artists.append((found[0], key))
            artist_id = run.artists[key] = int(found[0])
        ids.append(artist_id)
    return tuple(ids)


def _stored_variant(db: sqlite3.Connection, run: Run, variant_id: int) -> tuple[VariantKey, tuple[str, ...]]:
    """(key, credit keys) of a variant written before this run."""
    known = run.variant_keys.get(variant_id)
    if known is None:
        text, credits = db.execute(q.VARIANT_TEXT.sql, (variant_id,)).fetchone()
        artist, title, artists, ids = json.loads(text)
        known = run.variant_keys[variant_id] = ((artist, title, tuple(artists), tuple(ids)), credit_keys(credits))
    return known


def write_batch(db: sqlite3.Connection, run: Run, source: str, batch: list[Any],
                 slots: list[list[Any]] | None = None) -> int:
    """Write a batch's rows (`Row`s; or, with `slots`, rows whose last field is a number in `slots`), each folded
    into the row already stored (or written by this batch) for its chart, day and track (`fold`: another row form
    of the same recording is the same row); returns the rows added."""
    days: dict[tuple[int, str], dict[int, tuple[Any, ...]]] = {}
    """Chart day -> track -> its row as stored or written by this batch (an `INSERT` row's fields)."""
    day_rows: dict[int, tuple[Any, ...]] = {}
    links: set[tuple[str, str]] = set()
    id_keys: set[tuple[str, str, str]] = set()
    inserts: list[tuple[Any, ...]] = []
    updates: list[tuple[Any, ...]] = []
    keys_in: list[tuple[Any, ...]] = []
    keys_set: list[tuple[Any, ...]] = []
    keys_out: dict[tuple[Any, ...], None] = {}
    tally: dict[tuple[int, int, int], list[Any]] = {}
    recount: set[tuple[int, int, int]] = set()
    add_row = inserts.append
    charts, fresh, written, token, summing = run.charts, run.fresh, run.written, run.token, run.summing
    first_id = next_id = int(db.execute(q.NEXT_ROW_ID.sql).fetchone()[0])
    last_chart = last_market = None
    chart_id, day = 0, (0, "")
    for chart, market, chart_date, rank, hours, mask, snapshot_id, slot in batch:
        if slots is not None:
            slot = slots[slot]
        if chart != last_chart or market != last_market:  # by value: a prefetched batch's strings are each its own
            last_chart, last_market = chart, market
            chart_id = charts.get((source, chart, market)) or _chart_id(db, run, source, chart, market)
        if slot[OWNER] is not token:
            _variant(db, run, slot)
        if slot[NOTED] is not token:  # what a variant teaches is taken once a run
            slot[NOTED] = token
            credit = slot[CREDIT]
            links.update(credit.links)
            if credit.single is not None:  # a single-artist entry: its ids are that artist's
                id_keys.update((kind, value, credit.single)
                               for kind, value in zip(ID_COLUMNS, slot[KEY][3][:_SPEC_IDS], strict=True) if value)
        track_id = slot[TRACK_ID]
        if day[0] != chart_id or day[1] != chart_date:
            day = (chart_id, chart_date)
            found = days.get(day)
            if found is None:
                found = days[day] = {}
                if not fresh or day in written:
                    for track, *values in db.execute(q.SELECT_DAY.sql, day):
                        found[track] = (chart_id, chart_date, track, *values)
                written.add(day)
            day_rows = found
        held = day_rows.get(track_id)
        if held is None:
            day_rows[track_id] = row = (chart_id, chart_date, track_id, next_id, rank, hours, mask, snapshot_id,
                                        slot[VARIANT_ID])
            add_row(row)
            for key in slot[ARTISTS] if summing else ():
                sums = tally.get((key, chart_id, track_id))
                if sums is None:
                    tally[(key, chart_id, track_id)] = [1, chart_date, chart_date, rank]
                else:  # rows come in date order: only the last date can move
                    sums[0] += 1
                    if chart_date > sums[2]:
                        sums[2] = chart_date
                    elif chart_date < sums[1]:
                        sums[1] = chart_date
                    if rank < sums[3]:
                        sums[3] = rank
            next_id += 1
            continue
        _, _, _, row_id, was, was_hours, was_mask, was_snapshot, variant_id = held
        if snapshot_id == was_snapshot and rank >= was:
            continue  # one snapshot listing the recording twice (two row forms): the better rank's row stands
        if not mask and snapshot_id < was_snapshot:
            continue  # an older snapshot's rank (another row form of the recording met first in this batch)
        before = _stored_variant(db, run, variant_id)
        merged = [was, was_hours or 0, was_mask or 0, 0, slot_of(before[0])]
        if snapshot_id >= was_snapshot:
            fold(merged, rank, mask, snapshot_id, slot)
        else:  # a sub-daily day's earlier hours in another row form of the recording: its hours and best rank
            fold(merged, rank, mask, was_snapshot, merged[4])
        rank, hours, mask, snapshot_id, slot = merged
        if slot[OWNER] is not token:
            _variant(db, run, slot)
        updates.append((rank, hours, mask, snapshot_id, slot[VARIANT_ID], chart_id, chart_date, track_id))
        day_rows[track_id] = (chart_id, chart_date, track_id, row_id, rank, hours, mask, snapshot_id, slot[VARIANT_ID])
        keys, old_keys = slot[ARTISTS], _artist_ids(db, run, before[1])
        if row_id < first_id:  # a row this batch adds has its keys made from its last form (`KEYS_OF_NEW_ROWS`)
            keys_set += [(rank, k, chart_date, row_id) for k in keys if k in old_keys]
            for k in keys:
                if k not in old_keys:
                    keys_in.append((k, chart_date, row_id, chart_id, track_id, rank))
                    keys_out.pop((k, chart_date, row_id), None)  # dropped by an earlier row form in this batch
            keys_out.update(((k, chart_date, row_id), None) for k in old_keys if k not in keys)
        # A better rank or a new key adds to the sums; a worse rank or a key gone recounts them.
        for key in keys if summing else ():
            if key not in old_keys:
                _count(tally, (key, chart_id, track_id), 1, chart_date, rank)
            elif rank <= was:
                _count(tally, (key, chart_id, track_id), 0, chart_date, rank)
            else:
                recount.add((key, chart_id, track_id))
        if summing:
            recount.update((key, chart_id, track_id) for key in old_keys if key not in keys)
    db.executemany(q.INSERT_ARTISTS.sql, run.new_artists)
    run.new_artists.clear()
    db.executemany(q.INSERT_TRACKS.sql, run.new_tracks)
    db.executemany(q.INSERT_VARIANT.sql, run.new_variants)
    run.new_tracks.clear()
    run.new_variants.clear()
    db.executemany(q.VARIANT_ARTIST.sql, run.variant_artists)
    run.variant_artists.clear()
    whole = len(inserts) - len(inserts) % q.ROWS_A_STATEMENT
    if whole:  # each statement's parameters: the next hundred rows' fields, taken in turn from one iterator
        fields = chain.from_iterable(inserts[:whole])
        db.executemany(q.INSERT_ROWS.sql, zip(*[fields] * (q.ROWS_A_STATEMENT * len(inserts[0])), strict=True))
    db.executemany(q.INSERT.sql, inserts[whole:])
    db.execute(q.SET_NEXT_ROW_ID.sql, (str(next_id),))
    db.executemany(q.UPDATE.sql, updates)
    if inserts:
        db.execute(q.KEYS_OF_NEW_ROWS.sql, (json.dumps(list(days)), first_id))
    db.executemany(q.KEYS_IN.sql, keys_in)
    db.executemany(q.KEYS_SET.sql, keys_set)
    db.executemany(q.KEYS_OUT.sql, keys_out)
    db.executemany(q.ADD_ARTIST_TRACKS.sql, [(*k, *v) for k, v in tally.items()])
    for where in sorted(recount):
        db.execute(q.RECOUNT_CLEAR.sql, where)
        db.execute(q.RECOUNT.sql, where)
    db.executemany(q.ADD_LINKS.sql, sorted(links))
    db.executemany(q.ADD_ID_KEYS.sql, sorted(id_keys))
    return len(inserts)


def _count(tally: dict[tuple[int, int, int], list[Any]], where: tuple[int, int, int], rows: int, chart_date: str,
           rank: int) -> None:
    """Add `rows` appearances on `chart_date` at `rank` to a batch's sums of one key, chart and track."""
    held = tally.get(where)
    if held is None:
        tally[where] = [rows, chart_date, chart_date, rank]
        return
    held[0] += rows
    if chart_date < held[1]:
        held[1] = chart_date
    elif chart_date > held[2]:
        held[2] = chart_date
    if rank < held[3]:
        held[3] = rank


def _chart_id(db: sqlite3.Connection, run: Run, source: str, chart: str, market: str) -> int:
    found = db.execute(q.CHART_ID.sql, (source, chart, market)).fetchone()
    chart_id = run.charts[(source, chart, market)] = int(found[0])
    return chart_id


