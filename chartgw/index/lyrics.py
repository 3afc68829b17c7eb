"""`chartgw enrich artist-history-api lyrics`: Genius song and artist ids for indexed tracks that have none.

The artist-history index has `lyrics_song_id` and `lyrics_artist_id` columns, but no chart gives them. This
command asks the Genius API's search for each track without them (title and primary artist), the most
charted tracks first, and takes a hit only when its normalised title and primary artist agree with the
track's (`genius.pick`). Each answer is kept in the index (`lyrics_lookups`) in the same transaction that
gives the track's variants the ids, so a track is asked once, a killed run loses at most the track in hand,
and a rebuild keeps what was learnt; a miss is asked again after CHARTGW_GENIUS_MISS_DAYS. One request at a
time, CHARTGW_GENIUS_DELAY_SECONDS apart. The first refusal (a bad token, a rate limit) or failure ends the
run; what it resolved stays.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import httpx

from chartgw.core import config
from chartgw.core.clock import Clock, utc_now
from chartgw.core.settings import Settings
from chartgw.core.text import artist_aliases
from chartgw.crawl.context import Context
from chartgw.crawl.runner import Outcome, crawl_lock, request_url, tls
from chartgw.index import history as index
from chartgw.store import iso
from chartgw.upstreams import UpstreamFormatError, body_limit, genius

TOKEN = config.Setting("GENIUS_TOKEN", "", "Genius API client access token for `chartgw enrich artist-history-api "
                       "lyrics` (secret); without it the command exits 1", config.text, secret=True)
DELAY_SECONDS = config.Setting("GENIUS_DELAY_SECONDS", "1", "pause between two Genius API requests of `chartgw "
                               "enrich artist-history-api lyrics` (politeness)", config.seconds)
MISS_DAYS = config.Setting("GENIUS_MISS_DAYS", "30", "days before a track Genius had no match for is asked again, "
                           "1-3650", config.bounded_int(1, 3650))
SETTINGS = (TOKEN, DELAY_SECONDS, MISS_DAYS)
DEFAULT_LIMIT = 500
"""Tracks one run asks for (about 8 minutes at the default delay)."""
TIMEOUT_SECONDS = 20.0


class EnrichStopped(Exception):
    """Genius refused or failed: the run ends, what it resolved stays."""


def artist_keys(name: str, settings: Settings) -> set[str]:
    """The keys a primary artist agrees on: the name's own (in and out of brackets) and its aliases in the
    shipped table and the configured file."""
    keys = artist_aliases(name)
    for group in index.alias_groups(settings):
        if keys & group:
            keys |= group
    return keys


def ask(client: httpx.Client, track: index.LyricsTrack, token: str, settings: Settings) -> genius.SongHit | None:
    """Genius's search for one track, and the hit that is the track (None: no hit agrees)."""
    request = genius.search_request(track.title, track.artist, token)
    try:
        response = client.request(request.method, request_url(request, settings), params=request.params,
                                  headers=dict(request.headers))
    except httpx.HTTPError as exc:
        raise EnrichStopped(f"Genius could not be reached: {type(exc).__name__}: {exc}") from None
    if response.status_code in (401, 403):
        raise EnrichStopped(f"Genius refused the token (HTTP {response.status_code}); check {TOKEN.variable}")
    if response.status_code == 429:
        raise EnrichStopped("Genius asked to slow down (HTTP 429); the next run goes on from here")
    if response.status_code != 200:
        raise EnrichStopped(f"Genius answered HTTP {response.status_code}")
    if len(response.content) > body_limit(genius.UPSTREAM):
        raise EnrichStopped("Genius answered more than a search answer can be")
    try:
        hits = genius.parse_search(response.content)
    except UpstreamFormatError as exc:
        raise EnrichStopped(str(exc)) from None
    return genius.pick(hits, track.title, artist_keys(track.artist, settings))


def enrich(db: sqlite3.Connection, token: str, *, settings: Settings, limit: int = DEFAULT_LIMIT, delay: float = 1.0,
           miss_days: int = 30, now: Clock = utc_now, transport: httpx.BaseTransport | None = None,
           sleep: Callable[[float], object] = time.sleep) -> tuple[int, int, str | None]:
    """Ask Genius for up to `limit` tracks without ids, `delay` seconds apart: (matched, missed, why it stopped)."""
    started: datetime = now()
    tracks = index.lyrics_candidates(db, iso(started - timedelta(days=miss_days)), limit)
    matched = missed = 0
    with httpx.Client(transport=transport, timeout=TIMEOUT_SECONDS, follow_redirects=False, verify=tls()) as client:
        for n, track in enumerate(tracks):
            if n:
                sleep(delay)
            try:
                hit = ask(client, track, token, settings)
            except EnrichStopped as exc:
                return matched, missed, str(exc)
            if hit is None:
                index.record_lyrics(db, track, None, None, iso(now()))
                missed += 1
            else:
                index.record_lyrics(db, track, str(hit.song_id), str(hit.artist_id), iso(now()))
                matched += 1
    return matched, missed, None


def run_enrich(ctx: Context, values: dict[str, Any], *, transport: httpx.BaseTransport | None = None,
               sleep: Callable[[float], object] = time.sleep) -> list[Outcome]:
    """`chartgw enrich artist-history-api lyrics [--limit N]`: exits 1 with one line when no token is set."""
    settings = ctx.settings
    token = settings.get(TOKEN)
    if not token:
        raise SystemExit(f"chartgw enrich: set {TOKEN.variable} (a Genius API client access token) to resolve lyrics ids")
    clock = time.monotonic()
    with crawl_lock(f"{index.INDEX_NAME}-lyrics", settings):  # one enrichment at a time; the index's own runs go on
        db = index.open_index(index.index_path(settings))
        try:
            matched, missed, stopped = enrich(db, token, limit=values.get("limit") or DEFAULT_LIMIT,
                                              delay=settings.get(DELAY_SECONDS), miss_days=settings.get(MISS_DAYS),
                                              settings=settings,
                                              now=ctx.clock, transport=transport, sleep=sleep)
        finally:
            db.close()
    return [Outcome(f"lyrics: {matched} matched, {missed} missed", "failed" if stopped else "ok", matched + missed,
                    duration_ms=int((time.monotonic() - clock) * 1000), error=stopped)]


def lyrics_only(value: str) -> str:
    """The command's one kind of enrichment."""
    if value != "lyrics":
        raise ValueError(value)
    return value
