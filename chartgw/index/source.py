"""Reading a group's snapshot file for the index: its entries, through the group's `EntryMapping`, folded into one
row per chart, day and track (`read_batch`, `fold`), in this process or in a second one ahead of the writer
(`Prefetch`). Each distinct variant met has one slot (`slot_of`), shared by every run and every index file.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import os
import pickle
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import msgspec
from msgspec.structs import astuple

from chartgw.api.group import EntryMapping, MappedEntry
from chartgw.index.credits import Credit, entry_credit, track_key
from chartgw.index.tables import VARIANT_ID_COLUMNS
from chartgw.store import connect
from chartgw.store import tables as store_tables

__all__ = ["ARTISTS", "CREDIT", "KEY", "NOTED", "OWNER", "TRACK_ID", "TRACK_KEY", "VARIANT_ID", "Folded", "Prefetch", "Row",
           "VariantKey", "fold", "prefetch_main", "read_batch", "read_next", "slot_of", "unfolded"]

VariantKey = tuple[str, str | None, tuple[str, ...], tuple[str, ...]]
"""(artist as shown, title, credited list, ids: one per VARIANT_ID_COLUMNS, "" for none): what a variant is."""

FIRST_BATCH_SNAPSHOTS = 100
"""The readers' first batch, each next one twice the last until full ones: the writer starts soon and the readers
get ahead of it."""
READER_NICENESS = 5
"""Readers yield the CPU to the writer, whose time is the build's: with more readers than spare cores, a writer at
the same priority waited for a core (the 10M-row benchmark's writer took 16 s for 9.5 CPU s on one group). The
readers of the group being written come before those started ahead (`AHEAD_NICENESS`)."""
AHEAD_NICENESS = 19
"""Readers started before their group's turn yield the CPU to the readers of the group being written, too (at 19
against 5, three of them leave those readers nine tenths of a core; at 19 against 10, or 15 against 5, the
benchmark's writer waited 11 to 14 s for /streaming's reader, against 3 to 5 s)."""
READ_AHEAD_BYTES = 64 << 20
"""Encoded batches a reader keeps waiting for the writer, in bytes (one batch at least): readers started at the run's
start read their groups whole, in the CPU time the readers of the group being written leave over, so the writer
never waits for them when it comes to them (the 10M-row benchmark's Korean readers kept it waiting 10 s and more
when they could be one batch ahead; its whole /digital-sales is 35 MB encoded, its /korea-chart 17.5). Bounded, so
that a run's readers hold at most this much each, whatever the backlog."""
PREFETCH_BATCHES = 4
"""A run with at least this many batches of one group pending reads them in other processes while it writes
(the reading, mostly JSON decoding and name normalisation, is half the work of a bulk build)."""
SUB_DAILY_READERS = 2
"""Reader processes of a group with sub-daily charts, taking its batches in turn: it reads many entries per row
written (the 10M-row benchmark's Korean group, 24 hourly snapshots a day, kept its writer waiting 10 of 18 s with
one). Other groups have one: a second reader normalises every variant's names again, for no time won where the
writer is the slower."""


def _pending(src: sqlite3.Connection, after: int, batch: int) -> list[tuple[Any, ...]]:
    return src.execute(store_tables.SNAPSHOTS_AFTER.sql, (after, batch)).fetchall()


def read_next(src: sqlite3.Connection, mapping: EntryMapping, after: int,
              batch: int) -> tuple[list[tuple[Any, ...]], list[Any], list[list[Any]] | None]:
    """The next batch of snapshots after `after`, and their rows (`write_batch`'s arguments)."""
    pending = _pending(src, after, batch)
    return pending, unfolded(read_batch(src, mapping, pending)) if pending else [], None


Pending = list[tuple[int, str, str, int | None, str]]
"""Snapshots of a batch: id, target, chart date, chart hour, fetched at."""
NewVariant = tuple[int, VariantKey, str, str, list[str], list[tuple[str, str]], str | None]
"""A variant the reader met first in a batch: its number, key, track key and credit (names, keys, links, single)."""
Packed = tuple[Pending, list[NewVariant], list[tuple[str, str, str, int, int, int, int, int]], str | None]
"""A prefetched batch: its snapshots, the variants met first in it, its rows (the variant as its number), and an
error (the reader's message; the batch is empty)."""
_encode_packed = msgspec.msgpack.Encoder().encode
_decode_packed = msgspec.msgpack.Decoder(Packed).decode


class Prefetch:
    """Reads a group's batches in other Python processes (batch n in reader n % readers), ahead of the
    writer (each pipe's buffer holds its reader back): each batch's rows are sent as (chart, market, chart date, rank,
    hours, hour mask, snapshot id, variant number) with the batch's variant keys (MessagePack frames), and get their
    variant slots back on this side."""

    def __init__(self, processes: list[subprocess.Popen[bytes]]) -> None:
        self.processes = processes
        self.slots: list[list[list[Any]]] = [[] for _ in processes]
        """Variant slots by each reader's numbers."""
        self.turn = 0

    @classmethod
    def start(cls, src: sqlite3.Connection, path: Path, mapping: EntryMapping, after: int, batch: int, *,
              ahead: bool = False) -> Prefetch | None:
        """Reader processes for a run with PREFETCH_BATCHES batches or more pending (None: read in this one)."""
        try:
            pending = src.execute(store_tables.PENDING_AFTER.sql, (after,)).fetchone()[1]
            niceness = AHEAD_NICENESS if ahead else READER_NICENESS
            readers = SUB_DAILY_READERS if mapping.sub_daily_targets else 1
            jobs = [pickle.dumps((str(path), mapping, after, batch, n, readers, niceness)) for n in range(readers)]
        except (sqlite3.OperationalError, pickle.PicklingError, AttributeError, TypeError):
            return None  # no snapshots table yet, or a mapping that cannot cross to another process
        if pending < PREFETCH_BATCHES * batch:
            return None
        processes = []
        for job in jobs:
            process = subprocess.Popen([sys.executable, "-c", "from chartgw.index.source import prefetch_main;"
                                        " prefetch_main()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            assert process.stdin is not None
            process.stdin.write(job)
            process.stdin.close()
            processes.append(process)
        return cls(processes)

    def next(self) -> tuple[list[tuple[Any, ...]], list[Any], list[list[Any]] | None]:
        reader, slots = self.processes[self.turn], self.slots[self.turn]
        self.turn = (self.turn + 1) % len(self.processes)
        assert reader.stdout is not None
        head = reader.stdout.read(4)
        body = reader.stdout.read(int.from_bytes(head, "big")) if len(head) == 4 else b""
        if not body:
            raise OSError(f"the index's reader process ended (exit status {reader.wait()})")
        pending, variants, packed, error = _decode_packed(body)
        if error is not None:
            raise sqlite3.OperationalError(error)
        for number, key, key_of_track, names, keys, links, single in variants:
            slot = _VARIANTS.get(key)
            if slot is None:  # the reader normalised its names: take its credit
                slot = _new_slot(key, key_of_track, Credit(names, tuple(keys), tuple((a, b) for a, b in links), single))
            if number == len(slots):
                slots.append(slot)
            else:
                slots[number] = slot
        return list(pending), packed, slots

    def stop(self) -> None:
        for process in self.processes:
            process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()


def prefetch_main() -> None:
    """A reader process (`Prefetch`): its job pickled on stdin, every `readers`th batch after the job's mark from its
    `turn`th on stdout as a length-prefixed MessagePack frame, then an empty batch."""
    gc.disable()
    path, mapping, after, full, turn, readers, niceness = pickle.load(sys.stdin.buffer)
    os.nice(niceness)
    out = sys.stdout.buffer
    outbox = _Outbox(READ_AHEAD_BYTES)

    def write() -> None:
        try:
            while (frame := outbox.get()) is not None:
                out.write(frame)
                out.flush()
        except OSError:  # the writer stopped reading
            outbox.close()

    def send(message: Packed) -> None:
        body = _encode_packed(message)
        outbox.put(len(body).to_bytes(4, "big") + body)

    writing = threading.Thread(target=write, daemon=True)
    writing.start()
    src = connect(Path(path), readonly=True)
    sent, numbers, counted = object(), 0, 0
    try:
        while True:
            batch = min(full, FIRST_BATCH_SNAPSHOTS << min(counted, 30))
            pending = _pending(src, after, batch)
            if not pending:
                send(([], [], [], None))
                return
            counted += 1
            if (counted - 1) % readers != turn:  # another reader's
                after = pending[-1][0]
                continue
            variants: list[NewVariant] = []
            packed: list[tuple[Any, ...]] = []
            add = packed.append
            for chart, market, chart_date, (rank, hours, mask, snapshot_id, slot) in read_batch(src, mapping, pending):
                if slot[OWNER] is not sent:  # numbered and sent once (again if the slot cache was cleared)
                    slot[OWNER], slot[VARIANT_ID] = sent, numbers
                    credit = slot[CREDIT]
                    variants.append((numbers, slot[KEY], slot[TRACK_KEY], credit.names_json, list(credit.keys),
                                     list(credit.links), credit.single))
                    numbers += 1
                add((chart, market, chart_date, rank, hours, mask, snapshot_id, slot[VARIANT_ID]))
            send((pending, variants, packed, None))
            after = pending[-1][0]
    except BrokenPipeError:
        pass  # the writer stopped reading
    except (sqlite3.Error, ValueError, OSError) as exc:
        send(([], [], [], f"{type(exc).__name__}: {exc}"))
    finally:
        src.close()
        with contextlib.suppress(BrokenPipeError):
            outbox.put(None)
            writing.join()


class _Outbox:
    """A reader's encoded frames waiting for its pipe, in order, up to a number of bytes (a frame is always taken
    when none waits); None ends them."""

    def __init__(self, budget: int) -> None:
        self.budget, self.size, self.closed = budget, 0, False
        self.frames: collections.deque[bytes | None] = collections.deque()
        self.changed = threading.Condition()

    def full(self, size: int) -> bool:
        """Whether a frame of `size` bytes must wait for the writer to take one."""
        return bool(self.frames) and self.size + size > self.budget

    def put(self, frame: bytes | None) -> None:
        """Wait for room; BrokenPipeError once the writer stopped reading."""
        size = len(frame or b"")
        with self.changed:
            while self.full(size) and not self.closed:
                self.changed.wait()
            if self.closed:
                raise BrokenPipeError
            self.frames.append(frame)
            self.size += size
            self.changed.notify_all()

    def get(self) -> bytes | None:
        with self.changed:
            while not self.frames:
                self.changed.wait()
            frame = self.frames.popleft()
            self.size -= len(frame or b"")
            self.changed.notify_all()
            return frame

    def close(self) -> None:
        with self.changed:
            self.closed = True
            self.changed.notify_all()


_NO_IDS = ("",) * len(VARIANT_ID_COLUMNS)
_UNSEEN = object()
_VARIANTS: dict[VariantKey, list[Any]] = {}
"""Variant key -> its slot: the same variants recur in every snapshot (any index file). A slot is a list:
[key, track key, credit, the run its ids below belong to, variant id, track id, links and id keys taken, the
ids of its credit's artist keys]."""
_VARIANTS_MAX = 500_000
Made = tuple[list[Any], str] | None
"""What an entry was made into: its variant's slot and its market; None for no entry."""
_MADE: dict[tuple[int, Hashable], tuple[EntryMapping, dict[tuple[Any, ...], Made]]] = {}
"""(id(mapping), what of a target its reading depends on: `EntryMapping.reading`) -> (the mapping, held so that its
id stays its own; a record's fields as decoded -> what its entry was made into): a track recurs in every snapshot of
a chart, and making its variant key (`MappedEntry`, the ids, the key's tuples) and looking its slot up took 2.8 us
of a /streaming entry's 4.5 in the reader, the fields' tuple looked up 1. Emptied in place (a batch's plan holds the
dicts) past `_MADE_MAX` records, and with the slots (`_forget`). Fields compare as Python compares them: an id of 1
and one of 1.0 in one field make the first met's key."""
_MADE_MAX = 500_000
_made_size = [0]
"""Records held in `_MADE`'s dicts."""
KEY, TRACK_KEY, CREDIT, OWNER, VARIANT_ID, TRACK_ID, NOTED, ARTISTS = range(8)

Folded = list[tuple[str, str, str, list[Any]]]
"""A batch's entries folded into rows, one per chart, market, day and row form (its variant slot), in the order the rows
were first met: (chart, market, chart date, [rank, hours (0 for none), hour mask (0 unless sub-daily), newest
snapshot id, variant slot]). Row forms are folded into their recording's row as the batch is written
(`chartgw.index.write`), where identity links them."""
_R, _H, _M, _S, _V = range(5)

Row = tuple[str, str, str, int, int, int, int, list[Any]]
"""A folded row as written: chart, market, chart date, rank, hours, hour mask, newest snapshot id, variant slot."""


def unfolded(rows: Folded) -> list[Row]:
    return [(chart, market, chart_date, *values) for chart, market, chart_date, values in rows]


def _ids_maker(mapping: EntryMapping) -> Any:
    """A function of an entry's ids (kind -> value) to one value per VARIANT_ID_COLUMNS ("" for none); fast for
    the usual one kind per group."""
    if len(mapping.ids) == 1 and not mapping.platform_ids:
        (kind,) = mapping.ids
        at = VARIANT_ID_COLUMNS.index(kind)
        before, after = _NO_IDS[:at], _NO_IDS[at + 1:]
        return lambda found: (*before, found[kind], *after) if len(found) == 1 else \
            tuple(found.get(k, "") for k in VARIANT_ID_COLUMNS)
    return lambda found: tuple(found.get(k, "") for k in VARIANT_ID_COLUMNS)


def _made(mapping: EntryMapping, alike: Hashable) -> dict[tuple[Any, ...], Made]:
    """What the entries of `mapping`'s targets `alike` were made into, by their records' fields (`_MADE`)."""
    held = _MADE.get((id(mapping), alike))
    if held is None:
        held = _MADE[(id(mapping), alike)] = (mapping, {})
    return held[1]


def _make(entry: MappedEntry | None, ids_of: Callable[[dict[str, str]], tuple[str, ...]]) -> Made:
    if entry is None:
        return None
    key = (entry.artist, entry.title, tuple(entry.artists), ids_of(entry.ids) if entry.ids else _NO_IDS)
    return slot_of(key), entry.market or "global"


def _forget_made() -> None:
    """What entries were made into (each dict emptied in place: a batch's plan may hold it). Safe at any time: an entry
    is made again into the slot `_VARIANTS` holds for it."""
    for _, made in _MADE.values():
        made.clear()
    _made_size[0] = 0


def _forget() -> None:
    """Every slot, and so what entries were made into: one slot per variant, whichever way it is found."""
    _VARIANTS.clear()
    _forget_made()


def slot_of(key: VariantKey) -> list[Any]:
    slot = _VARIANTS.get(key)
    if slot is None:
        artist, title, artists, _ = key
        slot = _new_slot(key, track_key(title, artist), entry_credit(artist, artists, title))
    return slot


def _new_slot(key: VariantKey, key_of_track: str, credit: Credit) -> list[Any]:
    """A variant's slot (`_VARIANTS`; every one forgotten first when they are `_VARIANTS_MAX`)."""
    if len(_VARIANTS) >= _VARIANTS_MAX:
        _forget()
    slot = _VARIANTS[key] = [key, key_of_track, credit, None, 0, 0, None, ()]
    return slot


def read_batch(src: sqlite3.Connection, mapping: EntryMapping, snapshots: list[tuple[Any, ...]]) -> Folded:
    """The entries of `snapshots` (consecutive ids of one group) folded into rows, by the rules of `fold`."""
    plan: dict[int, tuple[Any, ...]] = {}
    for snapshot_id, target, chart_date, chart_hour, fetched_at in snapshots:
        reading = mapping.reading(target)
        if reading is None:
            continue  # no chart entries: its entries are skipped
        hour_mask = 0
        if mapping.is_sub_daily(target):
            hour = chart_hour if chart_hour is not None else int(str(fetched_at)[11:13])
            hour_mask = 1 << int(hour)
        reader, alike, market = reading
        plan[snapshot_id] = (str(target).partition("@")[0], hour_mask, reader, chart_date, _made(mapping, alike),
                             None if market is None else market or "global")
    decode, ids_of, unseen = mapping.decode, _ids_maker(mapping), _UNSEEN
    rows: Folded = []
    days: dict[tuple[str, str, str], dict[int, list[Any]]] = {}
    """(chart, market, chart date) -> the day's rows by the id of their slot: a small dict per day, keyed by an int,
    is a third cheaper per entry than one dict keyed by all four."""
    current, step, day, where = None, None, {}, ("", "", "")
    for snapshot_id, rank, record in src.execute(store_tables.ENTRIES_BETWEEN.sql, (snapshots[0][0], snapshots[-1][0])):
        if snapshot_id != current:
            current, step, where = snapshot_id, plan.get(snapshot_id), ("", "", "")
        if step is None:
            continue
        try:
            fields = decode(record)
        except (msgspec.DecodeError, UnicodeDecodeError):  # not a JSON object (a ValidationError is a DecodeError)
            continue
        values = astuple(fields)
        try:
            made = step[4].get(values, unseen)
        except TypeError:  # a field holding a JSON object, or an array in an array: not kept
            made = _make(step[2](fields), ids_of)
        else:
            if made is unseen:
                made = step[4][values] = _make(step[2](fields), ids_of)
                _made_size[0] += 1
                if _made_size[0] >= _MADE_MAX:
                    _forget_made()
        if made is None:
            continue
        slot, market = made
        market = step[5] or market
        if market != where[1]:
            where = (step[0], market, step[3])
            day = days.setdefault(where, {})
        row = day.get(id(slot))
        mask = step[1]
        if row is None:
            day[id(slot)] = row = [rank, 1 if mask else 0, mask, snapshot_id, slot]
            rows.append((*where, row))
        elif row[_S] != snapshot_id or rank < row[_R]:  # a chart listing a track twice counts its best rank
            fold(row, rank, mask, snapshot_id, slot)
    return rows


def fold(row: list[Any], rank: int, mask: int, snapshot_id: int, slot: list[Any]) -> None:
    """Fold what later snapshots say of a row (rank, hours, hour mask, newest snapshot, variant) into `row`:
    a sub-daily chart keeps the day's best rank and counts each hour once; any other chart takes the rank of
    its newest snapshot of that day (a re-crawl replaces the earlier one); the title, artist and credits are
    the newest; an id is the newest given, else the one held."""
    if mask:
        held = row[_M]
        row[_R] = min(row[_R], rank)
        row[_H] += (mask & ~held).bit_count()
        row[_M] = held | mask
    else:
        row[_R], row[_H], row[_M] = rank, 0, 0
    row[_S] = snapshot_id
    old = row[_V]
    if old is not slot:
        ids, held_ids = slot[KEY][3], old[KEY][3]
        merged = tuple(new if new != "" else was for new, was in zip(ids, held_ids, strict=True))
        row[_V] = slot if merged == ids else slot_of((*slot[KEY][:3], merged))


