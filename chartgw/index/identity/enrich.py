"""`chartgw enrich musicbrainz`: MusicBrainz recording ids (and ISRCs) for recordings that have none. Optional: the
gateway works fully without it.

It walks the recordings of the artist-history index lacking a `musicbrainz_recording` id, those with an ISRC first
(an ISRC lookup, `/ws/2/isrc/ISRC`), then the rest, and any ISRC lookup that found nothing, by a recording search
on title and artist (`/ws/2/recording?query=...`). A MusicBrainz recording is taken only when it is plainly the
same recording by the identity layer's own reading (`chartgw/index/identity/names.py`): the same version (a remix, live
take or sped-up cut is never taken for the original, nor the reverse), the same name (or one rapidfuzz puts 90+
of 100 from it, as the linker's `high` tier), and the same artists (each side's credited artists, main and
featured, under any of their printed names); a search hit must also score `MIN_SCORE`+ and credit exactly the
row's artists, an ISRC lookup's hit (the ISRC being evidence already) at least one of them.

Politeness and resumption: at most one request per `INTERVAL_SECONDS` (MusicBrainz's published rate, paced on an
injected clock and sleep), a User-Agent naming chartgw and the operator's contact, 503/429 answered by waiting
(its Retry-After, else a doubling backoff) and asking again. Every answer (a 404 "not found" too) is committed to
`musicbrainz_replies` as it arrives, keyed by the request, and each recording's verdict to `identity_enrichment`
with the ids it gives, in one transaction: a re-run, or a run after a kill, asks nothing it asked before. A
failure (the network, an unreadable answer, refusals past the retries) ends the run with what it found kept;
nothing half-written is left.

Provenance and rebuilds: `identity_enrichment` holds, per recording asked for, the MusicBrainz id and ISRC found
(or none), the rule that took it ("musicbrainz: ...") and the query, keyed by the exact key (normalised title,
version and credits) of the row form it was asked for, the stablest evidence a recording has. The index keeps
the table across rebuilds and gives each enrichment back to the recording holding that row form as it links
(`index._apply_enrichment`). An enrichment adds ids to a recording (`identity_ids`); it never changes a link
or a recording id.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from urllib.parse import urlencode

import httpx
from rapidfuzz import fuzz

from chartgw.core import progress
from chartgw.core.clock import Clock, utc_now
from chartgw.crawl.runner import Outcome, tls
from chartgw.index.identity import links as identity
from chartgw.index.identity.names import Credit, parse_credit, parse_title, split_printed
from chartgw.store import Query, iso
from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, body_limit, musicbrainz

__all__ = ["INTERVAL_SECONDS", "MIN_SCORE", "Asker", "Enrichment", "Pacer", "Stopped", "agreement", "enrich",
           "exact_key", "pick"]

INTERVAL_SECONDS = 1.0
"""MusicBrainz's published rate: one request a second."""
MIN_SCORE = 90
"""The least search score (0-100) a hit is taken at."""
RETRIES = 5
"""Refusals (503, 429) of one request waited out before the run ends."""
BACKOFF_SECONDS = 2.0
MAX_WAIT_SECONDS = 120.0
"""The longest one wait after a refusal (a Retry-After beyond it is cut to it)."""
DEFAULT_LIMIT = 500
"""Recordings one run looks at (at most two requests each: 8 to 17 minutes at 1/s)."""
TIMEOUT_SECONDS = 30.0
_FUZZY_LENGTH = 8
_FUZZY_TITLE = 90.0

_CACHED = Query("musicbrainz_cached", "SELECT status, body FROM musicbrainz_replies WHERE request = ?")
_CACHE = Query("musicbrainz_cache", "INSERT OR REPLACE INTO musicbrainz_replies VALUES (?, ?, ?, ?)")
_UNASKED = Query(
    "musicbrainz_unasked",
    "SELECT r.number, r.title, r.artist, (SELECT min(i.value) FROM identity_ids i WHERE i.recording = r.number"
    " AND i.kind = 'isrc') AS isrc FROM identity_recordings r WHERE NOT r.ambiguous AND NOT EXISTS"
    " (SELECT 1 FROM identity_ids m WHERE m.recording = r.number AND m.kind = 'musicbrainz_recording')"
    " ORDER BY isrc IS NULL, r.number")
_ASKED = Query("musicbrainz_asked", "SELECT key FROM identity_enrichment")
_SAVE = Query("musicbrainz_save", "INSERT OR REPLACE INTO identity_enrichment VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
_STILL = Query("musicbrainz_still", "SELECT 1 FROM identity_recordings WHERE number = ? AND title = ? AND artist = ?")
ENRICH_QUERIES = (_CACHED, _CACHE, _UNASKED, _ASKED, _SAVE, _STILL)
"""Every statement the command runs (compiled against the index's tables in tests)."""

_ASIDES = re.compile(r"\s*[\(\[\{][^\)\]\}]*[\)\]\}]")
_DASH = re.compile(r"\s+-\s+.*$")


class Stopped(Exception):
    """MusicBrainz could not be asked (the network, refusals past the retries, an unreadable answer): the run
    ends, and what it found is kept."""


def exact_key(title: str, artist: str) -> str:
    """A row form's exact key as the linker makes it (`Linker._read`): compacted name, versions, credited artists."""
    parts = parse_title(title)
    main, featured = parse_credit(artist)
    in_title = tuple(c for name in parts.featured for part in parse_credit(name) for c in part)
    printed = ",".join(sorted(c.main for c in (*main, *featured))) + "|" + ",".join(sorted(c.main for c in in_title))
    return f"{parts.name}|{','.join(sorted(parts.versions))}|{printed}"


# --- matching ---------------------------------------------------------------------------------------------


def _credits(title: str, artist: str) -> list[frozenset[str]]:
    """Every artist a title and credit name, each as the set of its names (main and featured, wherever printed)."""
    main, featured = parse_credit(artist)
    in_title = [c for name in parse_title(title).featured for part in parse_credit(name) for c in part]
    found: list[frozenset[str]] = []
    for credit in (*main, *featured, *in_title):
        if all(not (credit.aliases & known) for known in found):
            found.append(_names(credit))
    return found


def _names(credit: Credit) -> frozenset[str]:
    return credit.aliases | {credit.main}


def _same(a: frozenset[str], b: frozenset[str]) -> bool:
    return bool(a & b)


def agreement(title: str, artist: str, hit: musicbrainz.RecordingCandidate, *, every_artist: bool) -> str | None:
    """Why `hit` is the recording printed as `title` by `artist`, or None when it is not plainly so: the same
    version, the same name (or a small edit from it, titles of 8 letters or more), and the same artists
    (`every_artist`: exactly the row's, else at least one of them)."""
    if hit.video:
        return None
    ours, theirs = parse_title(title), parse_title(hit.title)
    versions = theirs.versions | (parse_title(f"x ({hit.disambiguation})").versions if hit.disambiguation else set())
    if ours.versions != versions:
        return None
    if ours.name == theirs.name:
        how = "the same title"
    elif ours.bare == theirs.bare and ours.bare:
        how = "the same title once asides are dropped"
    elif len(ours.name) >= _FUZZY_LENGTH and len(theirs.name) >= _FUZZY_LENGTH \
            and (ratio := fuzz.ratio(ours.name, theirs.name)) >= _FUZZY_TITLE:
        how = f"a title within edit distance (ratio {ratio:.0f})"
    else:
        return None
    row, found = _credits(title, artist), _credits(hit.title, hit.credit)
    if not row or not found:
        return None
    shared = [a for a in row if any(_same(a, b) for b in found)]
    if every_artist:
        if len(shared) != len(row) or any(not any(_same(b, a) for a in row) for b in found):
            return None
        return f"{how}, version and artists"
    return f"{how} and version, {len(shared)} artist(s) in common" if shared else None


def pick(title: str, artist: str, hits: list[musicbrainz.RecordingCandidate], *, searched: bool,
         ) -> tuple[musicbrainz.RecordingCandidate, str] | None:
    """The hit that is the recording, and why: a search's best-scored hit at `MIN_SCORE`+ that agrees on every
    artist; an ISRC lookup's first hit that agrees with an artist in common."""
    ranked = sorted(hits, key=lambda h: -(h.score or 0)) if searched else hits
    for hit in ranked:
        if searched and (hit.score or 0) < MIN_SCORE:
            break
        why = agreement(title, artist, hit, every_artist=searched)
        if why is not None:
            return hit, (f"musicbrainz: search score {hit.score}, {why}" if searched else f"musicbrainz: ISRC lookup, {why}")
    return None


def _names_a_version(aside: str) -> bool:
    return bool(parse_title(f"x ({aside.strip(' -([{}])')})").versions)


def search_terms(title: str, artist: str) -> tuple[str, str]:
    """What a search asks for: the title without the bracketed asides and dash suffixes that name no version
    ("Seven (feat. Latto) - Clean" is "Seven"; "Blank Space (Taylor's Version)" stays whole, so that the version is
    among the hits), and the first main artist as printed without its bracket ("아일릿(ILLIT)" is "아일릿")."""
    kept = _ASIDES.sub(lambda m: m.group(0) if _names_a_version(m.group(0)) else "", title)
    kept = _DASH.sub(lambda m: m.group(0) if _names_a_version(m.group(0)) else "", kept)
    first = (split_printed(artist) or [artist])[0]
    return " ".join(kept.split()) or title.strip(), _ASIDES.sub("", first).strip() or first.strip()


# --- asking -----------------------------------------------------------------------------------------------


class Pacer:
    """At most one request per `interval` seconds, on an injected clock and sleep (tests wait for nothing)."""

    def __init__(self, interval: float = INTERVAL_SECONDS, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] = time.sleep) -> None:
        self.interval, self.clock, self.sleep = interval, clock, sleep
        self._next: float | None = None

    def wait(self) -> None:
        """Return when the next request may go out, and book its slot."""
        now = self.clock()
        if self._next is not None and now < self._next:
            self.sleep(self._next - now)
            now = max(self.clock(), self._next)
        self._next = now + self.interval


def request_key(request: UpstreamRequest) -> str:
    """A request as the cache knows it: its path and query, whatever origin (a mirror, a test server) served it."""
    return request.path + "?" + urlencode(request.params)


@dataclass
class Asker:
    """Asks MusicBrainz through the reply cache: a request answered before is read from `musicbrainz_replies`;
    one not is paced, sent, waited out when refused (503, 429) and its answer committed before it is used."""

    db: sqlite3.Connection
    client: httpx.Client
    base_url: str
    pacer: Pacer
    now: Clock = utc_now
    sent: int = 0
    cached: int = 0
    refused: int = 0
    log: list[str] = field(default_factory=list)

    def ask(self, request: UpstreamRequest, who: str) -> list[musicbrainz.RecordingCandidate] | None:
        """The recordings of the answer; None for "not found" (404) or a query MusicBrainz cannot read (400)."""
        key = request_key(request)
        found = self.db.execute(_CACHED.sql, (key,)).fetchone()
        if found is not None:
            self.cached += 1
            status, body = int(found[0]), bytes(found[1])
        else:
            status, body = self._send(request)
        if status != 200:
            recordings = None
        else:
            try:
                recordings = musicbrainz.parse_recordings(body, who)
            except UpstreamFormatError as exc:
                raise Stopped(str(exc)) from None
        if found is None:  # read, then kept (without what is not read): an unreadable answer is never cached
            kept = musicbrainz.slim_recordings(body) if recordings is not None else body
            self.db.execute(_CACHE.sql, (key, status, kept, iso(self.now())))
        return recordings

    def _send(self, request: UpstreamRequest) -> tuple[int, bytes]:
        for attempt in range(RETRIES + 1):
            self.pacer.wait()
            self.sent += 1
            try:
                response = self.client.get(self.base_url + request.path, params=request.params,
                                           headers=dict(request.headers))
            except httpx.HTTPError as exc:
                raise Stopped(f"MusicBrainz could not be reached: {type(exc).__name__}: {exc}") from None
            if response.status_code in (200, 400, 404):
                if len(response.content) > body_limit(musicbrainz.UPSTREAM):
                    raise Stopped("MusicBrainz answered more than a recordings answer can be")
                return response.status_code, response.content
            if response.status_code not in (429, 503) or attempt == RETRIES:
                break
            self.refused += 1
            wait = _retry_after(response.headers.get("retry-after")) or BACKOFF_SECONDS * 2 ** attempt
            self.pacer.sleep(min(wait, MAX_WAIT_SECONDS))
        raise Stopped(f"MusicBrainz answered HTTP {response.status_code} to {request.path}"
                      + (f" after {RETRIES} waits" if response.status_code in (429, 503) else "")
                      + "; the next run goes on from here")


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


# --- the walk ---------------------------------------------------------------------------------------------


@dataclass
class Enrichment:
    """What a run did."""

    by_isrc: int = 0
    by_search: int = 0
    isrcs_added: int = 0
    missed: int = 0
    asked: int = 0
    stopped: str | None = None

    def summary(self, asker: Asker) -> str:
        return (f"musicbrainz: {self.by_isrc + self.by_search} of {self.asked} recordings matched ({self.by_isrc} by"
                f" ISRC, {self.by_search} by search; {self.isrcs_added} ISRCs added), {self.missed} without a"
                f" confident match; {asker.sent} requests sent, {asker.cached} answered from the cache,"
                f" {asker.refused} refused and waited out")


@dataclass(frozen=True)
class _Todo:
    number: int
    title: str
    artist: str
    isrc: str | None
    key: str


def todo(db: sqlite3.Connection, limit: int) -> list[_Todo]:
    """Up to `limit` recordings without a MusicBrainz id not asked for before: those with an ISRC first."""
    asked = {k for (k,) in db.execute(_ASKED.sql)}
    found: list[_Todo] = []
    for number, title, artist, isrc in db.execute(_UNASKED.sql):
        if not title or not artist:
            continue
        key = exact_key(title, artist)
        if key not in asked:
            asked.add(key)  # two recordings of one row form (ambiguous ISRCs kept apart) are asked for once
            found.append(_Todo(int(number), title, artist, isrc, key))
            if len(found) >= limit:
                break
    return found


def enrich(db: sqlite3.Connection, asker: Asker, *, limit: int = DEFAULT_LIMIT, contact: str | None = None,
           now: Clock = utc_now) -> Enrichment:
    """Ask MusicBrainz about up to `limit` recordings; each verdict committed as it comes (see the module)."""
    done = Enrichment()
    work = todo(db, limit)
    progress.expect(len(work), "recordings")
    for item in work:
        try:
            found = _ask(asker, item, contact)
        except Stopped as exc:
            done.stopped = str(exc)
            break
        hit, rule, query = found
        asked_at: datetime = now()
        db.execute("BEGIN IMMEDIATE")
        try:
            isrc = hit.isrcs[0].upper() if hit is not None and item.isrc is None and len(hit.isrcs) == 1 else None
            db.execute(_SAVE.sql, (item.key, item.title, item.artist, hit.mbid if hit else None, isrc, rule, query,
                                   iso(asked_at)))
            if hit is not None and db.execute(_STILL.sql, (item.number, item.title, item.artist)).fetchone():
                done.isrcs_added += identity.add_enrichment(db, item.number, hit.mbid, isrc)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        done.asked += 1
        if hit is None:
            done.missed += 1
        elif rule.startswith("musicbrainz: ISRC"):
            done.by_isrc += 1
        else:
            done.by_search += 1
        progress.advance()
    return done


def _ask(asker: Asker, item: _Todo, contact: str | None,
         ) -> tuple[musicbrainz.RecordingCandidate | None, str, str]:
    """(the hit or None, the rule, the queries asked) for one recording: its ISRC, then a search."""
    queries: list[str] = []
    if item.isrc is not None and musicbrainz.is_isrc(item.isrc):
        request = musicbrainz.isrc_request(item.isrc, contact)
        queries.append(request_key(request))
        hits = asker.ask(request, "musicbrainz ISRC lookup")
        if hits and (picked := pick(item.title, item.artist, hits, searched=False)) is not None:
            return picked[0], picked[1], " ".join(queries)
    title, artist = search_terms(item.title, item.artist)
    request = musicbrainz.recording_search_request(title, artist, contact)
    queries.append(request_key(request))
    hits = asker.ask(request, "musicbrainz recording search")
    if hits and (picked := pick(item.title, item.artist, hits, searched=True)) is not None:
        return picked[0], picked[1], " ".join(queries)
    return None, "musicbrainz: no confident match" if hits else "musicbrainz: not found", " ".join(queries)


def run(db: sqlite3.Connection, *, contact: str, base_url: str, limit: int = DEFAULT_LIMIT, now: Clock = utc_now,
        transport: httpx.BaseTransport | None = None, clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep) -> tuple[Enrichment, Asker]:
    """One run over `db` (the index's writer connection) against `base_url` (scheme://host[:port])."""
    with httpx.Client(transport=transport, timeout=TIMEOUT_SECONDS, follow_redirects=False, verify=tls()) as client:
        asker = Asker(db, client, base_url.rstrip("/"), Pacer(INTERVAL_SECONDS, clock, sleep), now)
        return enrich(db, asker, limit=limit, contact=contact, now=now), asker


def run_command(*, index_path: Path, contact: str, base_url: str, limit: int, now: Clock = utc_now,
                transport: httpx.BaseTransport | None = None, sleep: Callable[[float], object] = time.sleep) -> Outcome:
    """`chartgw enrich musicbrainz`'s work over the index file at `index_path`, as one outcome (failed when the run
    was stopped)."""
    from chartgw.index import history as artist_history

    started = time.monotonic()
    db = artist_history.open_index(index_path)
    try:
        done, asker = run(db, contact=contact, base_url=base_url, limit=limit, now=now, transport=transport, sleep=sleep)
    finally:
        db.close()
    return Outcome(done.summary(asker), "failed" if done.stopped else "ok", done.asked,
                   duration_ms=int((time.monotonic() - started) * 1000), error=done.stopped)
