"""What changed between two snapshots of one chart: entries in and out, rank moves, the new number one.

Pure functions over stored entry rows, so the store summarises a snapshot inside its own commit and the diff
endpoint answers the full difference by the same rules. Entries are matched by the store's entry identity: the
item id where the upstream gives one, else the normalised title and artist keys. An identity that appears twice
in one chart (a song listed twice) is matched occurrence by occurrence, in chart order.

A summary is encoded once, when the snapshot is committed, with the records it names spliced in as stored: it
stands alone after retention has pruned the snapshots it compares.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any, NamedTuple, Protocol

import msgspec

__all__ = [
    "LISTED",
    "STATUSES",
    "ChangeSummary",
    "ChangedEntry",
    "Entry",
    "Identity",
    "Line",
    "Row",
    "diff",
    "entered",
    "identity",
    "summarize",
]

LISTED = 10
"""Entries named per list of a summary (in, out, re-entries); the diff endpoint has them all."""
MOVERS = 5
"""Climbers and fallers named in a summary."""
STATUSES = ("new", "up", "down", "same", "out")
"""A line's status: in the new snapshot only, higher, lower, at the same rank, or in the old one only."""


class Entry(Protocol):
    """A stored entry as far as identity and rank go (`chartgw.store.StoredEntry` and rows read back)."""

    @property
    def rank(self) -> int: ...
    @property
    def title_key(self) -> str: ...
    @property
    def artist_key(self) -> str: ...
    @property
    def item_id(self) -> str | None: ...
    @property
    def record(self) -> bytes: ...


class Row(NamedTuple):
    """An entry read back from the store (the columns `Entry` names, in that order)."""

    rank: int
    title_key: str
    artist_key: str
    item_id: str | None
    record: bytes


class Identity(NamedTuple):
    """Who an entry is: its item id, or (when it has none) its title and artist keys."""

    item_id: str | None
    title_key: str
    artist_key: str


def identity(entry: Entry) -> Identity:
    if entry.item_id:
        return Identity(entry.item_id, "", "")
    return Identity(None, entry.title_key, entry.artist_key)


class Line(NamedTuple):
    """One entry of the union of two snapshots."""

    status: str
    """One of STATUSES."""
    rank: int | None
    """In the new snapshot; None for an entry that went out."""
    previous_rank: int | None
    """In the old snapshot; None for a new entry."""
    record: bytes
    """The entry's stored record: the new one, or the old one for an entry that went out."""
    identity: Identity

    @property
    def change(self) -> int | None:
        """Places climbed (negative: fallen); None unless the entry is in both."""
        return None if self.rank is None or self.previous_rank is None else self.previous_rank - self.rank


def _occurrences(entries: Iterable[Entry]) -> dict[tuple[Identity, int], Entry]:
    """Each entry keyed by its identity and how many times that identity came before it."""
    seen: dict[Identity, int] = {}
    keyed: dict[tuple[Identity, int], Entry] = {}
    for entry in entries:
        who = identity(entry)
        n = seen.get(who, 0)
        seen[who] = n + 1
        keyed[(who, n)] = entry
    return keyed


def diff(previous: Sequence[Entry], current: Sequence[Entry]) -> list[Line]:
    """Every entry of `current` in its order, each with its rank in `previous`, then the entries of `previous`
    that are not in `current`, in their old order."""
    old = _occurrences(previous)
    lines = []
    for key, entry in _occurrences(current).items():
        before = old.pop(key, None)
        if before is None:
            status = "new"
        else:
            status = "up" if entry.rank < before.rank else "down" if entry.rank > before.rank else "same"
        lines.append(Line(status, entry.rank, before.rank if before else None, entry.record, key[0]))
    lines.extend(Line("out", None, entry.rank, entry.record, key[0]) for key, entry in old.items())
    return lines


def entered(lines: Iterable[Line]) -> list[Identity]:
    """The identities of the new entries (what the store looks for in the chart's earlier snapshots)."""
    return [line.identity for line in lines if line.status == "new"]


class ChangedEntry(msgspec.Struct):
    """One entry a summary names, with its record as the chart serves it."""

    rank: int | None
    """In the new snapshot; null for an entry that went out."""
    previous_rank: int | None
    """In the previous snapshot; null for a new entry."""
    change: int | None
    """Places climbed (negative: fallen); null unless the entry is in both."""
    entry: dict[str, Any]
    """The entry's record (the group's entry type), as stored."""


class ChangeSummary(msgspec.Struct):
    """What a committed snapshot changed against the previous snapshot of its chart."""

    entries: int
    """Entries in the new snapshot."""
    changed: bool
    """Whether any entry came in, went out or moved (always true for a chart's first snapshot)."""
    entries_in: int
    entries_out: int
    moved: int
    reentries: int
    """New entries that were in an earlier snapshot of the chart than the previous one (within retention)."""
    number_one: ChangedEntry | None
    new_number_one: bool
    """The number one differs from the previous snapshot's (or there was none)."""
    climbers: list[ChangedEntry]
    """The biggest climbs, most places first (at most 5)."""
    fallers: list[ChangedEntry]
    """The biggest falls, most places first (at most 5)."""
    entered: list[ChangedEntry]
    """New entries, best rank first (at most 10)."""
    exited: list[ChangedEntry]
    """Entries that went out, best previous rank first (at most 10)."""
    reentered: list[ChangedEntry]
    """Re-entries, best rank first (at most 10)."""


def _named(line: Line) -> ChangedEntry:
    record: Any = msgspec.Raw(line.record)  # spliced as stored, typed as the object it is
    return ChangedEntry(line.rank, line.previous_rank, line.change, record)


def summarize(lines: Sequence[Line], first: bool, reentered: Collection[Identity] = ()) -> ChangeSummary:
    """The summary of a diff (`first`: the chart had no previous snapshot); `reentered` are the identities of
    new entries found in the chart's earlier snapshots."""
    ins = [line for line in lines if line.status == "new"]
    outs = sorted((line for line in lines if line.status == "out"), key=lambda line: line.previous_rank or 0)
    ups = sorted((line for line in lines if line.status == "up"), key=lambda line: (-(line.change or 0), line.rank))
    downs = sorted((line for line in lines if line.status == "down"), key=lambda line: (line.change or 0, line.rank))
    back = [line for line in ins if line.identity in reentered]
    top = min((line for line in lines if line.rank is not None), key=lambda line: line.rank or 0, default=None)
    old_top = min((line for line in lines if line.previous_rank is not None),
                  key=lambda line: line.previous_rank or 0, default=None)

    def by_rank(chosen: list[Line]) -> list[ChangedEntry]:
        return [_named(line) for line in sorted(chosen, key=lambda line: line.rank or 0)[:LISTED]]

    return ChangeSummary(
        entries=sum(line.rank is not None for line in lines),
        changed=first or any(line.status != "same" for line in lines),
        entries_in=len(ins), entries_out=len(outs), moved=len(ups) + len(downs), reentries=len(back),
        number_one=_named(top) if top is not None else None,
        new_number_one=top is not None and (old_top is None or old_top.identity != top.identity),
        climbers=[_named(line) for line in ups[:MOVERS]], fallers=[_named(line) for line in downs[:MOVERS]],
        entered=by_rank(ins), exited=[_named(line) for line in outs[:LISTED]], reentered=by_rank(back))
