"""/artist-history-api demo data: the index over the other groups' demo data, and lyrics ids of the most charted
tracks resolved against sample Genius answers."""

from __future__ import annotations

from datetime import datetime

from chartgw.core.clock import fixed
from chartgw.core.settings import Settings
from chartgw.crawl.runner import Outcome
from chartgw.demo.replay import replay_upstreams
from chartgw.demo.samples import genius as genius_samples
from chartgw.index import history as index
from chartgw.index import lyrics
from chartgw.index.artist_history import index_outcomes
from chartgw.store import iso
from chartgw.upstreams import genius

DEMO_LYRICS_TRACKS = 200
"""Tracks the demo asks the sample Genius answers for (the most charted)."""


async def seed(now: datetime, settings: Settings) -> list[Outcome]:
    """Index the other groups' demo data (seeded before this group: it is registered last), then resolve the
    lyrics ids of the most charted tracks with `chartgw enrich`'s code against sample Genius answers."""
    outcomes = index_outcomes(index.index_all(settings=settings, now=fixed(now)))
    db = index.open_index(index.index_path(settings))
    try:
        tracks = index.lyrics_candidates(db, iso(now), DEMO_LYRICS_TRACKS)
        with replay_upstreams({genius.UPSTREAM: genius_samples.search_replies([(t.title, t.artist) for t in tracks],
                                                                              "demo")}) as servers:
            served = servers.over(settings)
            matched, missed, stopped = lyrics.enrich(db, "demo", settings=served, limit=DEMO_LYRICS_TRACKS, delay=0,
                                                       now=fixed(now))
    finally:
        db.close()
    return [*outcomes, Outcome(f"lyrics: {matched} matched, {missed} missed", "failed" if stopped else "ok",
                               matched + missed, error=stopped)]
