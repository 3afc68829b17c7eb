"""Figures for `chartgw enrich musicbrainz` (docs/identity.md, "MusicBrainz enrichment"): its work besides the pacing,
its cache's size and what a rebuild of the index pays to keep it.

    .venv/bin/python scripts/bench_enrich.py DATA

DATA: a data folder with an artist-history index (`CHARTGW_DATA_DIR=DATA chartgw demo` makes one), copied to a
temporary folder first (DATA is not changed). MusicBrainz is an httpx MockTransport in this process answering 404 to
every ISRC and each search with one hit of the title and artist asked (made-up MBIDs), with the pacing off. Then
the index is rebuilt three times, timing the enrichment's share."""
from __future__ import annotations

import hashlib
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx

from chartgw.core.clock import fixed
from chartgw.core.settings import Settings
from chartgw.groups import GROUPS
from chartgw.index import artist_history as ah
from chartgw.index import history as index
from chartgw.index.identity import enrich
from chartgw.index.identity import links as identity
from chartgw.index.identity.linker import Recording

NOW = fixed(datetime(2026, 11, 20, 5, 30, tzinfo=UTC))


def answer(request: httpx.Request) -> httpx.Response:
    if request.url.path.startswith("/ws/2/isrc/"):
        return httpx.Response(404, json={"error": "Not Found"})
    query = dict(request.url.params)["query"]
    title, artist = query.removeprefix('recording:"').removesuffix('"').split('" AND artist:"')
    title, artist = title.replace('\\"', '"'), artist.replace('\\"', '"')
    mbid = str(uuid.UUID(hashlib.md5(query.encode()).hexdigest()))
    return httpx.Response(200, json={"count": 1, "offset": 0, "recordings": [{
        "id": mbid, "score": 100, "title": title,
        "artist-credit": [{"name": artist, "joinphrase": "", "artist": {"id": mbid, "name": artist}}]}]})


def main(source: Path) -> None:
    ah.register_sources(GROUPS)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        shutil.copytree(source, data)
        path = data / f"{index.INDEX_NAME}.sqlite"
        settings = Settings({"CHARTGW_DATA_DIR": str(data)})
        db = index.open_index(index.index_path(settings))
        recordings = db.execute("SELECT count(*) FROM identity_recordings").fetchone()[0]
        started = time.perf_counter()
        work = enrich.todo(db, 10**9)
        listed = time.perf_counter() - started
        started = time.perf_counter()
        done, asker = enrich.run(db, contact="bench@example.org", base_url="http://musicbrainz.example",
                                 limit=10**9, now=NOW, transport=httpx.MockTransport(answer), clock=lambda: 0.0,
                                 sleep=lambda seconds: None)
        spent = time.perf_counter() - started
        db.close()
        print(f"{recordings} recordings, {len(work)} to ask, listed in {listed * 1000:.0f} ms")
        print(done.summary(asker))
        print(f"{spent:.2f} s: {spent / max(1, len(work)) * 1000:.1f} ms a recording besides the pacing")
        with sqlite3.connect(path) as check:
            size, count = check.execute("SELECT sum(length(body)), count(*) FROM musicbrainz_replies").fetchone()
        print(f"cache: {count} answers, {size / 1024:.0f} KB")
        apply = identity._apply_enrichment
        share = [0.0]

        def timed(db: sqlite3.Connection, changed: set[Recording]) -> None:
            started = time.perf_counter()
            apply(db, changed)
            share[0] += time.perf_counter() - started

        identity._apply_enrichment = timed
        for _ in range(3):
            share[0] = 0.0
            started = time.perf_counter()
            index.rebuild(now=NOW, settings=settings)
            took = time.perf_counter() - started
            with sqlite3.connect(path) as check:
                ids = check.execute("SELECT count(*) FROM identity_ids WHERE kind = 'musicbrainz_recording'"
                                    ).fetchone()[0]
            print(f"rebuild {took:.2f} s, {share[0] * 1000:.1f} ms of it giving back {ids} MusicBrainz ids")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
