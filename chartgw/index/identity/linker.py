"""Linking chart rows to recordings and artists, strongest evidence first.

Each row is tried against what earlier rows established, in tiers: `isrc` (an ISRC seen before),
`platform_id` (a platform's own id seen before), `exact` (the same normalised title, version and credited
artists), `high` (the same artists under another spelling or script, a featured credit moved between title
and credit, or a title a small edit away), `low` (equal only once bracketed asides are dropped), else `none`
(a new recording). A version (remix, live, sped up, "Taylor's Version", a year's re-recording) is never linked
to another version. An ISRC on two recordings, or two ISRCs on one, marks the recordings `ambiguous`: they are
kept apart and said to be so, never merged.

Ids come from the evidence, not from the order rows arrive in: a recording's is a digest of its smallest ISRC,
else its smallest platform id, else its smallest exact key; an artist's is a digest of its component's
smallest alias (Latin first).
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from rapidfuzz import fuzz

from chartgw.index.identity.names import Credit, TitleParts, parse_credit, parse_title, script_of

__all__ = ["ID_TYPES", "Artists", "Link", "Linker", "Recording", "Row", "Tier"]

Tier = Literal["isrc", "platform_id", "exact", "high", "low", "none"]

ID_TYPES = ("isrc", "spotify_track", "apple_track", "youtube_video", "shazam_track", "melon_song", "genie_song",
            "bugs_song", "flo_song", "vibe_song", "amazon_asin", "musicbrainz_recording")
"""The id types a recording can carry (`isrc` is matched in its own tier, the rest as `platform_id`)."""

_CONFIDENCE: dict[Tier, float] = {"isrc": 1.0, "platform_id": 0.99, "exact": 0.97, "high": 0.9, "low": 0.7, "none": 0.0}
_HIGH_TITLE = 90.0
"""The least rapidfuzz ratio (0-100) of two compacted titles the `high` tier links, artists being the same."""
_FUZZY_LENGTH = 8
"""Titles shorter than this are compared whole: "03" and "06" are a small edit apart and two songs."""
_DIGITS = re.compile(r"\d+")
"""Titles a small edit apart whose numbers differ are compared whole too: "Symphony No. 5" and "No. 9", "Song 21"
and "Song 57" are two songs (the artist-history index keeps each recording's rows, so such a merge joins them)."""


def _digest(prefix: str, text: str) -> str:
    return prefix + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


@dataclass(frozen=True, slots=True)
class Row:
    """A chart row as identity reads it: the title and credit as printed, and the ids it carries."""

    title: str
    artist: str
    isrc: str | None = None
    ids: tuple[tuple[str, str], ...] = ()
    """(id type, value) pairs: ("spotify_track", "3rUGC1vUpkDG9CZFHMur1t")."""

    def __reduce__(self) -> tuple[type[Row], tuple[str, str, str | None, tuple[tuple[str, str], ...]]]:
        # Pickled by its fields: the kept state holds one per variant, and a slotted dataclass's own
        # __getstate__ (dataclasses.fields() per object) was a third of linking 1M rows.
        return Row, (self.title, self.artist, self.isrc, self.ids)


@dataclass(frozen=True, slots=True)
class Link:
    """Where a row went, and why: its provenance."""

    recording: Recording
    artists: tuple[str, ...]
    """The row's main artists by compacted name (`Linker.artist_ids` gives their ids as they stand)."""
    tier: Tier
    confidence: float
    rule: str

    def __reduce__(self) -> tuple[type[Link], tuple[Recording, tuple[str, ...], Tier, float, str]]:
        return Link, (self.recording, self.artists, self.tier, self.confidence, self.rule)  # as Row's


@dataclass(eq=False)
class Recording:
    """One recording: every title, ISRC and platform id its rows brought."""

    number: int
    title: str
    artist: str
    versions: frozenset[str]
    artists: set[str] = field(default_factory=set)
    """Every artist its rows credit, by compacted name."""
    main_artists: set[str] = field(default_factory=set)
    """The main (not featured) artists its rows credit, by compacted name."""
    credits: set[frozenset[str]] = field(default_factory=set)
    """Every credit's artists (main and featured, wherever printed) its rows brought, by compacted name."""
    names: set[str] = field(default_factory=set)
    bares: set[str] = field(default_factory=set)
    exact_keys: set[str] = field(default_factory=set)
    isrcs: set[str] = field(default_factory=set)
    ids: set[tuple[str, str]] = field(default_factory=set)
    ambiguous: bool = False
    rows: int = 0

    @property
    def id(self) -> str:
        """Derived from the strongest evidence held: the smallest ISRC, else platform id, else exact key."""
        if self.isrcs:
            return _digest("rec_", "isrc:" + min(self.isrcs))
        if self.ids:
            kind, value = min(self.ids)
            return _digest("rec_", f"{kind}:{value}")
        return self.key_id

    @property
    def key_id(self) -> str:
        """The id its smallest exact key gives (what a recording whose ISRC another holds is known by)."""
        return _digest("rec_", "key:" + min(self.exact_keys))


class Artists:
    """Every artist seen, with the names each is printed under (a union-find over compacted names).

    "화사 (HWASA)" makes "화사" and "hwasa" one artist. A join is refused when both sides already hold a
    different name in the same script: "원필 (DAY6)" does not make the member the band once "DAY6 (데이식스)"
    has named the band in Hangul. So that the answer does not depend on which row came first, the joins are
    made again in one order (the pairs sorted) whenever a new pair of names is seen: only those of the names the
    pairs connect to it (a join never reaches beyond them), so a new name costs the same however many are known.
    """

    def __init__(self) -> None:
        self._names: set[str] = set()
        self._pairs: set[tuple[str, str]] = set()
        self._paired: defaultdict[str, set[str]] = defaultdict(set)  # name -> the names a pair joins it to
        self._parent: dict[str, str] = {}
        self._scripts: dict[str, dict[str, str]] = {}  # root -> script -> the name in it
        self._ids: dict[str, str] = {}
        self._members: dict[str, list[str]] = {}  # root -> every name of the artist
        self._stale: set[str] = set()  # names whose joins are to be made again (a new pair reached them)
        self.joins = 0
        """How many times joins were made again (`settled`)."""

    def add(self, credit: Credit) -> None:
        for name in credit.aliases:
            if name not in self._names:  # an artist of its own until a pair joins it
                self._names.add(name)
                self._parent[name] = name
                self._scripts[name] = {script_of(name): name}
                self._members[name] = [name]
        for alias in credit.aliases - {credit.main}:
            pair = (credit.main, alias)
            if pair not in self._pairs:
                self._pairs.add(pair)
                self._paired[credit.main].add(alias)
                self._paired[alias].add(credit.main)
                self._stale.add(credit.main)

    def _rebuild(self) -> None:
        """The joins of every name connected to a stale one, made again in sorted order: the same sets a rebuild
        of every pair gives, since a set never spans two groups of names no pair connects."""
        done: set[str] = set()
        for start in sorted(self._stale):
            if start in done:
                continue
            group, todo = {start}, [start]
            while todo:
                for other in self._paired[todo.pop()]:
                    if other not in group:
                        group.add(other)
                        todo.append(other)
            done |= group
            for name in group:
                self._members.pop(self._find(name), None)
            for name in group:
                self._parent[name] = name
                self._scripts[name] = {script_of(name): name}
                self._ids.pop(name, None)
            for main, alias in sorted((m, a) for m in group for a in self._paired[m] if (m, a) in self._pairs):
                a, b = self._find(main), self._find(alias)
                if a == b:
                    continue
                sa, sb = self._scripts[a], self._scripts[b]
                if any(sb.get(script, name) != name for script, name in sa.items()):
                    continue
                self._parent[b] = a
                sa.update(sb)
                del self._scripts[b]
            for name in sorted(group):
                self._members.setdefault(self._find(name), []).append(name)
        self._stale.clear()
        self.joins += 1

    def _find(self, key: str) -> str:
        root = key
        while (parent := self._parent[root]) != root:
            root = parent
        while key != root:
            self._parent[key], key = root, self._parent[key]
        return root

    def id_of(self, name: str) -> str:
        """The id of the artist printed under this compacted name (one `add`ed before)."""
        if self._stale:
            self._rebuild()
        if (known := self._ids.get(name)) is not None:
            return known
        root = self._find(name)
        canonical = min(self._scripts[root].items(), key=lambda kv: (kv[0] != "latin", kv[1]))[1]
        self._ids[name] = artist_id = _digest("art_", canonical)
        return artist_id

    def settled(self) -> int:
        """Joins due made; how many times joins were made (an id a caller keeps holds while this stands)."""
        if self._stale:
            self._rebuild()
        return self.joins

    def all_names(self) -> list[str]:
        return sorted(self._names)

    def names_of(self, name: str) -> list[str]:
        """Every compacted name of the artist printed under this one."""
        if self._stale:
            self._rebuild()
        return self._members[self._find(name)]


@dataclass(frozen=True, slots=True)
class _Read:
    """A row read once: its title's parts and its credits' artist ids."""

    title: TitleParts
    main: tuple[str, ...]
    everyone: frozenset[str]
    exact_key: str


class Linker:
    """Links rows to recordings as they come; the same rows in the same order give the same links."""

    def __init__(self) -> None:
        self.artists = Artists()
        self.recordings: list[Recording] = []
        self._by_isrc: dict[str, list[Recording]] = defaultdict(list)
        self._by_id: dict[tuple[str, str], Recording] = {}
        self._by_exact: dict[str, Recording] = {}
        self._by_artist: dict[str, list[Recording]] = defaultdict(list)
        self.changed: set[Recording] = set()
        """Recordings a link added to or marked since the caller last cleared this (what to write)."""
        self._id_sets: dict[frozenset[str], frozenset[str]] = {}
        self._ids_at = 0
        self._reads: dict[tuple[str, str], _Read] = {}
        self._seen: dict[Row, Link] = {}
        """Each distinct row's link once it is in (a row that made its recording links to it `exact`): a chart's
        history prints the same rows snapshot after snapshot."""

    def _read(self, row: Row) -> _Read:
        """The row's title and credit read (once per title and credit printed: the groups print one song's under
        other ids, and its credits are added to the artists the first time)."""
        if (known := self._reads.get((row.title, row.artist))) is not None:
            return known
        read = self._reads[row.title, row.artist] = self._read_anew(row)
        return read

    def _read_anew(self, row: Row) -> _Read:
        title = parse_title(row.title)
        main, featured = parse_credit(row.artist)
        in_title = tuple(c for name in title.featured for part in parse_credit(name) for c in part)
        for credit in (*main, *featured, *in_title):
            self.artists.add(credit)
        everyone = frozenset(c.main for c in (*main, *featured, *in_title))
        printed = ",".join(sorted(c.main for c in (*main, *featured))) + "|" + ",".join(sorted(c.main for c in in_title))
        key = f"{title.name}|{','.join(sorted(title.versions))}|{printed}"
        return _Read(title, tuple(c.main for c in main), everyone, key)

    def _ids(self, names: frozenset[str]) -> frozenset[str]:
        """The artist ids of these names as they stand (kept until joins are made again: every candidate's credits
        are compared for every new row)."""
        if (joins := self.artists.settled()) != self._ids_at:
            self._id_sets.clear()
            self._ids_at = joins
        if (found := self._id_sets.get(names)) is None:
            found = self._id_sets[names] = frozenset(map(self.artists.id_of, names))
        return found

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_id_sets": {}, "_ids_at": -1, "_reads": {}}  # the kept state without the caches

    def _text_match(self, row: _Read) -> tuple[Recording, Tier, str] | None:
        """The best recording by title and credit alone (`exact`, `high`, `low`), or None."""
        if (found := self._by_exact.get(row.exact_key)) is not None:
            return found, "exact", "exact: normalised title, version and credited artists equal"
        # The same artists (main and featured, wherever printed, under any of their names) and the same version.
        everyone = self._ids(row.everyone)
        candidates = [r for name in row.main[:1] for alias in self.artists.names_of(name)
                      for r in self._by_artist.get(alias, ())
                      if r.versions == row.title.versions and any(self._ids(c) == everyone for c in r.credits)]
        best: tuple[float, Recording, str] | None = None
        for rec in candidates:
            if row.title.name in rec.names:
                score, rule = 100.0, ("high: featured credit moved between title and artist"
                                      if row.everyone in rec.credits else
                                      "high: the same artists under another spelling or script")
            elif len(row.title.name) >= _FUZZY_LENGTH:
                digits = _DIGITS.findall(row.title.name)
                score = max((fuzz.ratio(row.title.name, name) for name in rec.names
                             if len(name) >= _FUZZY_LENGTH and _DIGITS.findall(name) == digits), default=0.0)
                rule = f"high: title within edit distance (ratio {score:.0f})"
            else:
                continue
            if score >= _HIGH_TITLE and (best is None or score > best[0]):
                best = (score, rec, rule)
        if best is not None:
            return best[1], "high", best[2]
        for rec in candidates:
            if row.title.bare in rec.bares:
                return rec, "low", "low: equal once bracketed asides are dropped"
        return None

    def artist_ids(self, row: Row) -> tuple[str, ...]:
        """The ids of a linked row's main artists, as they stand now."""
        return tuple(self.artists.id_of(c.main) for c in parse_credit(row.artist)[0])

    def link(self, row: Row) -> Link:
        """Link one row, adding what it brings (names, ISRC, ids) to the recording it joins."""
        if (seen := self._seen.get(row)) is not None:
            seen.recording.rows += 1
            return seen
        read = self._read(row)
        isrc = row.isrc.upper() if row.isrc else None
        match: tuple[Recording, Tier, str] | None = None
        ambiguous = False
        if isrc and (holders := self._by_isrc.get(isrc)):
            text = self._text_match(read)
            if text is not None and text[0] not in holders:
                # One ISRC on two recordings: keep them apart, both ambiguous.
                match, ambiguous = (text[0], text[1], text[2] + "; its ISRC is another recording's"), True
                for holder in holders:
                    holder.ambiguous = True
                self.changed.update(holders)
            elif text is None and not self._compatible(read, holders[0]):
                match, ambiguous = None, True
                for holder in holders:
                    holder.ambiguous = True
                self.changed.update(holders)
            else:
                match = (holders[0], "isrc", "isrc: the row's ISRC seen before")
        if match is None and not ambiguous:
            for kind, value in row.ids:
                if (found := self._by_id.get((kind, value))) is not None:
                    match = (found, "platform_id", f"platform_id: {kind} seen before")
                    break
        if match is None and not ambiguous:
            match = self._text_match(read)
        rec, tier, rule = match if match is not None else self._new(row, read)
        if isrc:
            if rec.isrcs and isrc not in rec.isrcs:
                rec.ambiguous = True  # two ISRCs on one recording
            if rec not in self._by_isrc[isrc]:
                self._by_isrc[isrc].append(rec)
            rec.isrcs.add(isrc)
        if ambiguous:
            rec.ambiguous = True
        for pair in row.ids:
            self._by_id.setdefault(pair, rec)
            rec.ids.add(pair)
        rec.names.add(read.title.name)
        rec.bares.add(read.title.bare)
        rec.exact_keys.add(read.exact_key)
        self._by_exact.setdefault(read.exact_key, rec)
        rec.artists |= read.everyone
        rec.main_artists.update(read.main)
        rec.credits.add(read.everyone)
        self.changed.add(rec)
        rec.rows += 1
        link = Link(rec, read.main, tier, _CONFIDENCE[tier], rule)
        self._seen[row] = link if tier != "none" else Link(rec, read.main, "exact", _CONFIDENCE["exact"],
                                                           "exact: the same row seen before")
        return link

    def _new(self, row: Row, read: _Read) -> tuple[Recording, Tier, str]:
        rec = Recording(len(self.recordings), row.title, row.artist, read.title.versions)
        self.recordings.append(rec)
        for artist in read.main[:1]:
            self._by_artist[artist].append(rec)
        return rec, "none", "none: a recording of its own"

    def _compatible(self, row: _Read, rec: Recording) -> bool:
        """Whether a row could be the recording its ISRC names: the same version, an artist in common."""
        theirs = frozenset(map(self.artists.id_of, rec.artists))
        return row.title.versions == rec.versions and bool(self._ids(row.everyone) & theirs)

    def link_all(self, rows: Iterable[Row]) -> list[Link]:
        return [self.link(row) for row in rows]
