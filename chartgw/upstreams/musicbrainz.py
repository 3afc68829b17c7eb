"""MusicBrainz web service v2 (musicbrainz.org/ws/2), JSON: artist search, then an artist's release groups.

Confidence: no response is captured in ../shared; the shapes are the documented ones, confirmed by typed
clients in public code (TypeScript/Kotlin/Rust/C# models and a commented real response):
- search `GET /ws/2/artist?query=artist:"NAME"&fmt=json&limit=5` answers
  `{"created", "count", "offset", "artists": [{"id", "type", "score" (0-100), "name", "sort-name",
  "country", "disambiguation", "aliases": [{"name", ...}], ...}]}`;
- browse `GET /ws/2/release-group?artist=MBID&fmt=json&limit=100&offset=N` answers
  `{"release-group-count", "release-group-offset", "release-groups": [{"id", "title", "primary-type",
  "secondary-types", "first-release-date", "disambiguation", ...}]}` (100 is the largest page);
- failures answer `{"error": "...", "help": "..."}` (e.g. 503 when over the rate limit).
The service's terms ask for at most one request per second per client and a User-Agent naming the
application and a contact: `USER_AGENT` and `RateLimiter` below.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from chartgw.core import config
from chartgw.core.text import compact, fold
from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, declare_upstream
from chartgw.upstreams.json_api import integer, load_json, obj, opt_integer, opt_text, text

UPSTREAM = declare_upstream("MUSICBRAINZ", "https://musicbrainz.org")
USER_AGENT = "chartgw/0.1 ( chartgw music chart gateway; contact: chartgw-operators@example.org )"
"""Application/version ( contact ): MusicBrainz blocks anonymous clients; the contact is a placeholder
the deployment should replace with a real address (see `user_agent`)."""
SEARCH_LIMIT = 5
PAGE_SIZE = 100
"""The largest `limit` the browse requests accept."""
MIN_INTERVAL_SECONDS = 1.0
MIN_SCORE = 80
"""Candidates scoring below this are never taken as the DJ, even with an equal name."""

_DATE = re.compile(r"\d{4}(?:-\d{2}(?:-\d{2})?)?")
_MBID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_LUCENE_SPECIAL = re.compile(r'([\\"])')

CONTACT_SETTING = config.Setting(
    "MUSICBRAINZ_CONTACT", "",
    "contact (e-mail or URL) put in the User-Agent sent to MusicBrainz, as its terms ask; empty = the "
    "placeholder contact of chartgw's default User-Agent (`chartgw enrich musicbrainz` then wants --contact)",
    config.text)
"""Declared here, by the upstream it speaks to: /dj-rankings (its artist lookups) and `chartgw enrich musicbrainz` read it."""


class ArtistCandidate(msgspec.Struct, kw_only=True, omit_defaults=False):
    mbid: str
    name: str
    sort_name: str | None
    score: int
    """The search's relevance, 0-100."""
    type: str | None
    """"Person", "Group", ... or null."""
    country: str | None
    """ISO alpha-2 as MusicBrainz gives it (upper case), or null."""
    disambiguation: str | None
    aliases: list[str]


class ArtistMatch(msgspec.Struct, kw_only=True, omit_defaults=False):
    """The search's verdict for one name: `artist` is null when no candidate is that artist (an
    explicit answer, not an error), and `reason` says why."""

    query: str
    artist: ArtistCandidate | None
    reason: str
    """"name" (equal normalised name), "alias" (equal to one of its aliases), or why there is none."""
    total: int
    """How many artists the search found in all (`count`)."""
    candidates: list[ArtistCandidate]


class ReleaseGroup(msgspec.Struct, kw_only=True, omit_defaults=False):
    id: str
    title: str
    primary_type: str | None
    """"Album", "Single", "EP", "Broadcast", "Other" or null."""
    secondary_types: list[str]
    """E.g. ["Compilation"], ["Remix"], ["DJ-mix"], ["Live"]; [] when none."""
    first_release_date: str | None
    """"YYYY", "YYYY-MM" or "YYYY-MM-DD" as MusicBrainz knows it; null when unknown."""
    disambiguation: str | None


class ReleaseGroupPage(msgspec.Struct, kw_only=True, omit_defaults=False):
    count: int
    """`release-group-count`: all of the artist's release groups, over every page."""
    offset: int
    """`release-group-offset` of this page."""
    release_groups: list[ReleaseGroup]

    @property
    def next_offset(self) -> int | None:
        """The offset of the page after this one, None when this is the last."""
        following = self.offset + len(self.release_groups)
        return following if self.release_groups and following < self.count else None


# --- requests ---------------------------------------------------------------------------------------------


def user_agent(contact: str | None = None) -> str:
    """The User-Agent MusicBrainz asks for: `USER_AGENT`, or the same with the deployment's own contact."""
    return USER_AGENT if not contact else f"chartgw/0.1 ( {contact} )"


def _headers(contact: str | None) -> tuple[tuple[str, str], ...]:
    return (("User-Agent", user_agent(contact)), ("Accept", "application/json"))


def lucene_phrase(name: str) -> str:
    """`name` as a quoted Lucene phrase: backslashes and quotes escaped, whitespace collapsed."""
    return '"' + _LUCENE_SPECIAL.sub(r"\\\1", " ".join(name.split())) + '"'


def artist_search_request(name: str, contact: str | None = None) -> UpstreamRequest:
    """`GET /ws/2/artist?query=artist:"NAME"&fmt=json&limit=5`: the five best candidates for a name."""
    if not name.strip():
        raise ValueError("musicbrainz: empty artist name")
    params = (("query", f"artist:{lucene_phrase(name)}"), ("fmt", "json"), ("limit", str(SEARCH_LIMIT)))
    return UpstreamRequest(upstream=UPSTREAM, path="/ws/2/artist", params=params, headers=_headers(contact))


def release_groups_request(mbid: str, offset: int = 0, contact: str | None = None) -> UpstreamRequest:
    """`GET /ws/2/release-group?artist=MBID&fmt=json&limit=100&offset=N`: one page of an artist's release groups."""
    if not _MBID.fullmatch(mbid):
        raise ValueError(f"musicbrainz: not an MBID: {mbid!r}")
    if offset < 0:
        raise ValueError(f"musicbrainz: negative offset {offset}")
    params = (("artist", mbid), ("fmt", "json"), ("limit", str(PAGE_SIZE)), ("offset", str(offset)))
    return UpstreamRequest(upstream=UPSTREAM, path="/ws/2/release-group", params=params, headers=_headers(contact))


class RateLimiter:
    """At most one request per `interval` seconds across every task sharing it (MusicBrainz's 1/s rule).

    `await limiter.wait()` before each request. The clock and sleep are injectable so tests run on a fake
    clock; the defaults are `time.monotonic` and `asyncio.sleep`."""

    def __init__(self, interval: float = MIN_INTERVAL_SECONDS, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[object]] = asyncio.sleep) -> None:
        if interval < 0:
            raise ValueError("interval must not be negative")
        self.interval = interval
        self._clock = clock
        self._sleep = sleep
        self._next: float | None = None
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        """Return once a request may go out, and book the slot: callers are served one at a time, in order."""
        async with self._lock:
            now = self._clock()
            if self._next is not None and now < self._next:
                await self._sleep(self._next - now)
                now = max(self._clock(), self._next)
            self._next = now + self.interval


# --- parsers ----------------------------------------------------------------------------------------------


def name_key(name: str) -> str:
    """Names compared for equality: folded, letters and digits only, a leading "The" dropped, "and" = "&"
    ("The Martinez Brothers" = "Martinez Brothers", "Above and Beyond" = "Above & Beyond")."""
    words = re.sub(r"\s+and\s+", " & ", fold(name).strip()).split()
    if len(words) > 1 and words[0] == "the":
        words = words[1:]
    return compact(" ".join(words))


def parse_artist_search(body: bytes, name: str) -> ArtistMatch:
    """The candidates of an artist search and the one that is `name`: the best-scored candidate whose name
    (else one of whose aliases) equals `name` once normalised, at or above `MIN_SCORE`."""
    doc = _payload(body, "musicbrainz artist search")
    if "artists" not in doc:
        raise UpstreamFormatError(f"musicbrainz artist search: no `artists` (keys {sorted(doc)[:8]})")
    items = doc["artists"]
    if not isinstance(items, list):
        raise UpstreamFormatError("musicbrainz artist search: `artists` is not a list")
    total = integer(doc.get("count", len(items)), "musicbrainz artist search.count")
    candidates = [_candidate(item, f"musicbrainz artist search.artists[{i}]") for i, item in enumerate(items)]
    return _best(name, total, candidates)


def _best(name: str, total: int, candidates: list[ArtistCandidate]) -> ArtistMatch:
    wanted = name_key(name)
    if not candidates:
        return ArtistMatch(query=name, artist=None, reason="no artists found", total=total, candidates=[])
    ranked = sorted(candidates, key=lambda c: -c.score)
    tests: tuple[tuple[str, Callable[[ArtistCandidate], bool]], ...] = (
        ("name", lambda c: name_key(c.name) == wanted),
        ("alias", lambda c: any(name_key(a) == wanted for a in c.aliases)))
    for reason, test in tests:
        for candidate in ranked:
            if test(candidate) and candidate.score >= MIN_SCORE:
                return ArtistMatch(query=name, artist=candidate, reason=reason, total=total, candidates=candidates)
    return ArtistMatch(query=name, artist=None, reason=f"no candidate named {name!r} scoring {MIN_SCORE}+",
                       total=total, candidates=candidates)


def _candidate(item: object, where: str) -> ArtistCandidate:
    node = obj(item, where)
    aliases = [opt_text(a.get("name")) for a in node.get("aliases") or [] if isinstance(a, dict)]
    return ArtistCandidate(
        mbid=_mbid(node.get("id"), f"{where}.id"),
        name=text(node.get("name"), f"{where}.name"),
        sort_name=opt_text(node.get("sort-name")),
        score=opt_integer(node.get("score"), f"{where}.score") or 0,
        type=opt_text(node.get("type")),
        country=opt_text(node.get("country")),
        disambiguation=opt_text(node.get("disambiguation")),
        aliases=[a for a in aliases if a],
    )


def parse_release_groups(body: bytes) -> ReleaseGroupPage:
    """One browse page. An artist with no release groups is a valid empty page (count 0); an empty page
    before the count is reached is a truncated answer."""
    doc = _payload(body, "musicbrainz release groups")
    if "release-groups" not in doc:
        raise UpstreamFormatError(f"musicbrainz release groups: no `release-groups` (keys {sorted(doc)[:8]})")
    items = doc["release-groups"]
    if not isinstance(items, list):
        raise UpstreamFormatError("musicbrainz release groups: `release-groups` is not a list")
    count = integer(doc.get("release-group-count"), "musicbrainz release groups.release-group-count")
    offset = integer(doc.get("release-group-offset", 0), "musicbrainz release groups.release-group-offset")
    if not items and offset < count:
        raise UpstreamFormatError(f"musicbrainz release groups: empty page at offset {offset} of {count}")
    if offset + len(items) > count:
        raise UpstreamFormatError(f"musicbrainz release groups: {len(items)} at offset {offset} exceed count {count}")
    groups = [_release_group(item, f"musicbrainz release-groups[{i}]") for i, item in enumerate(items)]
    return ReleaseGroupPage(count=count, offset=offset, release_groups=groups)


def _release_group(item: object, where: str) -> ReleaseGroup:
    node = obj(item, where)
    secondary = node.get("secondary-types") or []
    if not isinstance(secondary, list):
        raise UpstreamFormatError(f"{where}.secondary-types: not a list")
    date = opt_text(node.get("first-release-date"))
    if date is not None and not _DATE.fullmatch(date):
        raise UpstreamFormatError(f"{where}.first-release-date: not a date: {date!r}")
    return ReleaseGroup(
        id=_mbid(node.get("id"), f"{where}.id"),
        title=text(node.get("title"), f"{where}.title"),
        primary_type=opt_text(node.get("primary-type")),
        secondary_types=[t for t in (opt_text(s) for s in secondary) if t],
        first_release_date=date,
        disambiguation=opt_text(node.get("disambiguation")),
    )


def _payload(body: bytes, who: str) -> dict[str, Any]:
    if not body.strip():
        raise UpstreamFormatError(f"{who}: empty body")
    doc = obj(load_json(body, who), who)
    if "error" in doc:
        raise UpstreamFormatError(f"{who}: the service answered an error: {opt_text(doc.get('error'))!r}")
    return doc


def _mbid(value: object, where: str) -> str:
    mbid = text(value, where)
    if not _MBID.fullmatch(mbid):
        raise UpstreamFormatError(f"{where}: not an MBID: {mbid!r}")
    return mbid


# --- recordings (`chartgw enrich musicbrainz`) ------------------------------------------------------------
# ISRC lookup `GET /ws/2/isrc/ISRC?fmt=json&inc=artist-credits` answers `{"isrc", "recordings": [{"id", "title",
# "length", "video", "disambiguation", "artist-credit": [{"name", "joinphrase", "artist": {"id", "name", ...}}]}]}`
# (404 `{"error": "Not Found"}` for an ISRC it does not know); recording search `GET /ws/2/recording?query=...`
# answers `{"created", "count", "offset", "recordings": [{"id", "score", "title", "length", "video",
# "disambiguation", "artist-credit": [...], "isrcs": [...], "releases": [...]}]}`.

RECORDING_SEARCH_LIMIT = 10
_ISRC = re.compile(r"[A-Z]{2}[A-Z0-9]{3}\d{7}")


class RecordingCandidate(msgspec.Struct, kw_only=True, omit_defaults=False):
    mbid: str
    title: str
    score: int | None
    """The search's relevance, 0-100; None in an ISRC lookup's answer (which has none)."""
    credit: str
    """The artist credit as MusicBrainz prints it: each name and its join phrase ("Jung Kook feat. Latto")."""
    artist_ids: list[str]
    disambiguation: str | None
    video: bool
    isrcs: list[str]
    """The recording's ISRCs as a search gives them ([] from an ISRC lookup, or when it has none)."""


def is_isrc(value: str) -> bool:
    return bool(_ISRC.fullmatch(value))


def isrc_request(isrc: str, contact: str | None = None) -> UpstreamRequest:
    """`GET /ws/2/isrc/ISRC?fmt=json&inc=artist-credits`: the recordings carrying an ISRC, with their credits."""
    if not is_isrc(isrc):
        raise ValueError(f"musicbrainz: not an ISRC: {isrc!r}")
    params = (("fmt", "json"), ("inc", "artist-credits"))
    return UpstreamRequest(upstream=UPSTREAM, path=f"/ws/2/isrc/{isrc}", params=params, headers=_headers(contact))


def recording_search_request(title: str, artist: str, contact: str | None = None) -> UpstreamRequest:
    """`GET /ws/2/recording?query=recording:"TITLE" AND artist:"ARTIST"&fmt=json&limit=10` (Lucene phrases)."""
    if not title.strip() or not artist.strip():
        raise ValueError("musicbrainz: a recording search needs a title and an artist")
    query = f"recording:{lucene_phrase(title)} AND artist:{lucene_phrase(artist)}"
    params = (("query", query), ("fmt", "json"), ("limit", str(RECORDING_SEARCH_LIMIT)))
    return UpstreamRequest(upstream=UPSTREAM, path="/ws/2/recording", params=params, headers=_headers(contact))


def parse_recordings(body: bytes, who: str = "musicbrainz recordings") -> list[RecordingCandidate]:
    """The recordings of an ISRC lookup's or a recording search's answer, in the order given."""
    doc = _payload(body, who)
    if "recordings" not in doc:
        raise UpstreamFormatError(f"{who}: no `recordings` (keys {sorted(doc)[:8]})")
    items = doc["recordings"]
    if not isinstance(items, list):
        raise UpstreamFormatError(f"{who}: `recordings` is not a list")
    return [_recording(item, f"{who}.recordings[{i}]") for i, item in enumerate(items)]


_KEPT_FIELDS = ("id", "score", "title", "video", "disambiguation", "artist-credit", "isrcs")


def slim_recordings(body: bytes) -> bytes:
    """An answer `parse_recordings` has read, with only what it reads: a search's recordings carry their releases
    (most of the bytes), which a cache of answers need not keep. Read again, it gives the same recordings."""
    doc = json.loads(body)
    kept = [{k: r[k] for k in _KEPT_FIELDS if k in r} for r in doc.get("recordings") or [] if isinstance(r, dict)]
    return json.dumps({"recordings": kept}, ensure_ascii=False, separators=(",", ":")).encode()


def _recording(item: object, where: str) -> RecordingCandidate:
    node = obj(item, where)
    credits = node.get("artist-credit") or []
    if not isinstance(credits, list):
        raise UpstreamFormatError(f"{where}.artist-credit: not a list")
    printed: list[str] = []
    artist_ids: list[str] = []
    for i, part in enumerate(credits):
        credit = obj(part, f"{where}.artist-credit[{i}]")
        artist = credit.get("artist")
        name = opt_text(credit.get("name")) or (opt_text(artist.get("name")) if isinstance(artist, dict) else None)
        if not name:
            raise UpstreamFormatError(f"{where}.artist-credit[{i}]: no name")
        join = credit.get("joinphrase")  # " feat. ", " & ": its spaces matter
        printed.append(name + (join if isinstance(join, str) else ""))
        if isinstance(artist, dict) and artist.get("id") is not None:
            artist_ids.append(_mbid(artist.get("id"), f"{where}.artist-credit[{i}].artist.id"))
    isrcs = node.get("isrcs") or []
    if not isinstance(isrcs, list):
        raise UpstreamFormatError(f"{where}.isrcs: not a list")
    return RecordingCandidate(
        mbid=_mbid(node.get("id"), f"{where}.id"),
        title=text(node.get("title"), f"{where}.title"),
        score=opt_integer(node.get("score"), f"{where}.score"),
        credit="".join(printed).strip(),
        artist_ids=artist_ids,
        disambiguation=opt_text(node.get("disambiguation")),
        video=node.get("video") is True,
        isrcs=[i for i in (opt_text(v) for v in isrcs) if i and is_isrc(i.upper())],
    )
