"""`chartgw enrich musicbrainz`: MusicBrainz recording ids (and ISRCs) for the index's recordings, on recorded replies.

The replies below are hand-built from the web service's documented JSON shape (`/ws/2/isrc/ISRC?inc=artist-credits`
answers `{"isrc", "recordings": [{"id", "title", "length", "video", "disambiguation", "artist-credit": [{"name",
"joinphrase", "artist": {"id", "name", "sort-name"}}]}]}`; `/ws/2/recording?query=` answers `{"created", "count",
"offset", "recordings": [{"id", "score", "title", ..., "isrcs"}]}`; a 404 is `{"error": "Not Found", "help": ...}`), as
public clients' fixtures show them; the MBIDs are made up. No network: an httpx MockTransport in process, a
server on 127.0.0.1 for the real `chartgw enrich` process."""

from __future__ import annotations

import itertools
import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from chartgw.cli import main
from chartgw.core.clock import fixed
from chartgw.groups import GROUPS
from chartgw.index import artist_history as ah
from chartgw.index import history as index
from chartgw.index.identity import enrich
from chartgw.index.identity.linker import Linker, Row
from chartgw.upstreams import UpstreamFormatError, musicbrainz
from tests.fixtures import FIXED_NOW, KEY_HEADERS, child_env, client, data_dir, environment
from tests.fixtures import settings as run_settings
from tests.test_artist_history import add_snapshot, build_index

REPO_ROOT = Path(__file__).resolve().parent.parent
CONTACT = "enrich-test@example.org"
MB = "https://musicbrainz.example"

SHAPE_MBID = "b1a9c0e9-d987-4042-ae91-78d6a3267d69"
SEVEN_MBID = "0f1d1a5e-2c3b-4d5e-8f90-a1b2c3d4e5f6"
SEVEN_REMIX_MBID = "1e2d3c4b-5a69-4788-9a0b-c1d2e3f4a5b6"
APT_MBID = "2a3b4c5d-6e7f-4091-a2b3-c4d5e6f7a8b9"
ILLIT_MBID = "3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f"
TAIO_MBID = "4d5e6f7a-8b9c-4d0e-9f1a-2b3c4d5e6f7a"
BTS_REMIX_MBID = "5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"
FLOWERS_MBID = "6f7a8b9c-0d1e-4f2a-9b3c-4d5e6f7a8b9c"


def artist(name: str, mbid: str = "a74b1b7f-71a5-4011-9441-d0b5e4122711", join: str = "") -> dict[str, Any]:
    return {"name": name, "joinphrase": join, "artist": {"id": mbid, "name": name, "sort-name": name}}


def recording(mbid: str, title: str, credit: list[dict[str, Any]], score: int | None = None, **more: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"id": mbid, "title": title, "length": 200000, "video": False, "disambiguation": "",
                             "artist-credit": credit, **more}
    if score is not None:
        found["score"] = score
    return found


def search(*recordings: dict[str, Any]) -> dict[str, Any]:
    return {"created": "2026-11-20T05:30:00.000Z", "count": len(recordings), "offset": 0, "recordings": list(recordings)}


RELEASES = [{"id": f"9{n}a8b9c0-1d2e-4f3a-8b4c-5d6e7f8a9b0c", "status-id": "4e304316-386d-3409-af2e-78857eec5cfe",
             "count": 1, "title": f"Seven (Release {n})", "status": "Official", "artist-credit": [artist("Jung Kook")],
             "release-group": {"id": "c1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f", "type-id": "d6038452-8ee0-3f68-affc-2de9a1ede0b9",
                               "primary-type-id": "d6038452-8ee0-3f68-affc-2de9a1ede0b9", "title": "Seven",
                               "primary-type": "Single"}, "date": "2023-07-14", "country": "XW",
             "release-events": [{"date": "2023-07-14", "area": {"id": "525d4e18-3d00-31b9-a58b-a146a916de8f",
                                                                 "name": "[Worldwide]", "sort-name": "[Worldwide]",
                                                                 "iso-3166-1-codes": ["XW"]}}],
             "track-count": 4, "media": [{"position": 1, "format": "Digital Media", "track": [
                 {"id": "d2e3f4a5-b6c7-4d8e-9f0a-1b2c3d4e5f6a", "number": "1", "title": "Seven", "length": 183000}],
                 "track-count": 4, "track-offset": 0}]} for n in range(6)]
"""What a search's recording carries besides what is read (most of its bytes): six releases."""

NOT_FOUND = {"error": "Not Found", "help": "For usage, please see: https://musicbrainz.org/development/mmd"}

ROWS: list[dict[str, Any]] = [
    {"rank": 1, "name": "Shape of You", "artist": "Ed Sheeran", "artists": ["Ed Sheeran"], "isrc": "GBAHS1600463"},
    {"rank": 2, "name": "Seven (feat. Latto) (Explicit Ver.)", "artist": "Jung Kook", "artists": ["Jung Kook"]},
    {"rank": 3, "name": "APT.", "artist": "ROSÉ & Bruno Mars", "artists": ["ROSÉ", "Bruno Mars"], "isrc": "USAT22409172"},
    {"rank": 4, "name": "Magnetic", "artist": "아일릿(ILLIT)", "artists": ["아일릿(ILLIT)"]},
    {"rank": 5, "name": "Dynamite", "artist": "BTS", "artists": ["BTS"]},
    {"rank": 6, "name": "Flowers", "artist": "Miley Cyrus", "artists": ["Miley Cyrus"]},
    {"rank": 7, "name": "A Song Nobody Knows", "artist": "Nobody", "artists": ["Nobody"]},
]

REPLIES: dict[tuple[str, str | None], tuple[int, dict[str, Any]]] = {
    ("/ws/2/isrc/GBAHS1600463", None): (200, {"isrc": "GBAHS1600463", "recordings": [
        recording(SHAPE_MBID, "Shape of You", [artist("Ed Sheeran")])]}),
    ("/ws/2/isrc/USAT22409172", None): (404, NOT_FOUND),
    ("/ws/2/recording", 'recording:"Seven" AND artist:"Jung Kook"'): (200, search(
        recording(SEVEN_REMIX_MBID, "Seven (feat. Latto) (Alesso remix)", [artist("Jung Kook", join=" feat. "),
                                                                            artist("Latto")], 100),
        recording("7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d", "Seven", [artist("Jung Kook", join=" feat. "), artist("Latto")],
                  100, video=True),
        recording(SEVEN_MBID, "Seven", [artist("Jung Kook", join=" feat. "), artist("Latto")], 98,
                  isrcs=["USUM72306722"], releases=RELEASES))),
    ("/ws/2/recording", 'recording:"APT." AND artist:"ROSÉ"'): (200, search(
        recording(APT_MBID, "APT.", [artist("ROSÉ", join=" & "), artist("Bruno Mars")], 100,
                  isrcs=["USAT22409172"]))),
    ("/ws/2/recording", 'recording:"Magnetic" AND artist:"아일릿"'): (200, search(
        recording(ILLIT_MBID, "Magnetic", [artist("ILLIT")], 100, isrcs=["KRA382403620", "KRA382403621"]))),
    ("/ws/2/recording", 'recording:"Dynamite" AND artist:"BTS"'): (200, search(
        recording(TAIO_MBID, "Dynamite", [artist("Taio Cruz")], 100),
        recording(BTS_REMIX_MBID, "Dynamite (Tommy Brown remix)", [artist("BTS")], 95))),
    ("/ws/2/recording", 'recording:"Flowers" AND artist:"Miley Cyrus"'): (200, search(
        recording(FLOWERS_MBID, "Flowers", [artist("Miley Cyrus")], 70))),
    ("/ws/2/recording", 'recording:"A Song Nobody Knows" AND artist:"Nobody"'): (200, search()),
}
"""(path, search query) -> (status, body): every request the rows above make."""

EXPECTED = {"Shape of You": SHAPE_MBID, "Seven (feat. Latto) (Explicit Ver.)": SEVEN_MBID, "APT.": APT_MBID,
            "Magnetic": ILLIT_MBID}
"""The confident matches; Dynamite (another artist's song, BTS's remix), Flowers (score 70) and the unknown song get none."""


def reply(path: str, query: str | None) -> tuple[int, bytes]:
    status, body = REPLIES.get((path, query), (404, NOT_FOUND))
    return status, json.dumps(body, ensure_ascii=False).encode()


@pytest.fixture(autouse=True, scope="module")
def _registered() -> None:
    ah.register_sources(GROUPS)


@pytest.fixture
def indexed(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    add_snapshot(path, "short-video", "global/daily", "2026-11-19", None, ROWS)
    build_index(path)
    return path


class Upstream:
    """The recorded replies, over a MockTransport: what was asked, and at what time on the test's clock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.asked: list[tuple[float, str, str | None]] = []
        self.agents: set[str] = set()
        self.failing: dict[str, list[httpx.Response]] = {}
        self.clock = clock

    def handle(self, request: httpx.Request) -> httpx.Response:
        query = dict(request.url.params).get("query")
        self.asked.append((self.clock(), request.url.path, query))
        self.agents.add(request.headers["user-agent"])
        assert request.url.host == "musicbrainz.example"
        if self.failing.get(request.url.path):
            return self.failing[request.url.path].pop(0)
        status, body = reply(request.url.path, query)
        return httpx.Response(status, content=body, headers={"content-type": "application/json"})

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)


class FakeTime:
    """A clock that only sleeping moves (plus a little per request), and every sleep it was asked for."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def run(path: Path, upstream: Upstream, fake: FakeTime, limit: int = 100) -> enrich.Enrichment:
    with data_dir(path):
        db = index.open_index(index.index_path(run_settings()))
        try:
            done, _ = enrich.run(db, contact=CONTACT, base_url=MB, limit=limit, now=fixed(FIXED_NOW),
                                 transport=upstream.transport, clock=fake.clock, sleep=fake.sleep)
        finally:
            db.close()
    return done


def mbids(path: Path) -> dict[str, str]:
    """Each recording's title -> its MusicBrainz id."""
    with sqlite3.connect(path / f"{index.INDEX_NAME}.sqlite") as db:
        return dict(db.execute("SELECT r.title, i.value FROM identity_ids i JOIN identity_recordings r"
                               " ON r.number = i.recording WHERE i.kind = 'musicbrainz_recording'").fetchall())


def ids_of(path: Path, title: str) -> set[tuple[str, str]]:
    with sqlite3.connect(path / f"{index.INDEX_NAME}.sqlite") as db:
        return set(db.execute("SELECT i.kind, i.value FROM identity_ids i JOIN identity_recordings r"
                              " ON r.number = i.recording WHERE r.title = ?", (title,)).fetchall())


# --- parsing and matching ---------------------------------------------------------------------------------


def test_replies_are_read_with_their_credits_scores_and_isrcs() -> None:
    status, body = reply("/ws/2/recording", 'recording:"Seven" AND artist:"Jung Kook"')
    hits = musicbrainz.parse_recordings(body)
    assert status == 200 and [h.mbid for h in hits] == [SEVEN_REMIX_MBID, hits[1].mbid, SEVEN_MBID]
    assert hits[2].credit == "Jung Kook feat. Latto" and hits[2].score == 98 and hits[2].isrcs == ["USUM72306722"]
    assert hits[1].video and not hits[2].video
    lookup = musicbrainz.parse_recordings(reply("/ws/2/isrc/GBAHS1600463", None)[1])
    assert lookup[0].score is None and lookup[0].credit == "Ed Sheeran" and lookup[0].isrcs == []
    with pytest.raises(UpstreamFormatError, match="answered an error"):
        musicbrainz.parse_recordings(json.dumps(NOT_FOUND).encode())
    with pytest.raises(UpstreamFormatError):
        musicbrainz.parse_recordings(b"<html>busy</html>")
    with pytest.raises(UpstreamFormatError, match="not an MBID"):
        musicbrainz.parse_recordings(b'{"recordings": [{"id": "x", "title": "t"}]}')


def test_the_cache_keeps_what_is_read_and_not_the_releases() -> None:
    body = reply("/ws/2/recording", 'recording:"Seven" AND artist:"Jung Kook"')[1]
    slim = musicbrainz.slim_recordings(body)
    assert musicbrainz.parse_recordings(slim) == musicbrainz.parse_recordings(body)
    assert len(slim) * 3 < len(body) and b"releases" not in slim


def test_requests_escape_lucene_and_carry_the_contact() -> None:
    request = musicbrainz.recording_search_request('Say "Hi"', "A\\B", CONTACT)
    assert dict(request.params)["query"] == 'recording:"Say \\"Hi\\"" AND artist:"A\\\\B"'
    assert dict(request.headers)["User-Agent"] == f"chartgw/0.1 ( {CONTACT} )"
    assert musicbrainz.isrc_request("GBAHS1600463").path == "/ws/2/isrc/GBAHS1600463"
    with pytest.raises(ValueError):
        musicbrainz.isrc_request("GBAHS16004")
    assert enrich.search_terms("Seven (feat. Latto) - Clean", "Jung Kook, Latto") == ("Seven", "Jung Kook")
    assert enrich.search_terms("Magnetic", "아일릿(ILLIT)") == ("Magnetic", "아일릿")
    assert enrich.search_terms("Blank Space (Taylor's Version) [Explicit]", "Taylor Swift")[0] == \
        "Blank Space (Taylor's Version)"
    assert enrich.search_terms("Cold Heart - PNAU Remix", "Elton John")[0] == "Cold Heart - PNAU Remix"


def hit(title: str, credit: str, score: int | None = 100, disambiguation: str | None = None) -> musicbrainz.RecordingCandidate:
    return musicbrainz.RecordingCandidate(mbid=SEVEN_MBID, title=title, score=score, credit=credit, artist_ids=[],
                                          disambiguation=disambiguation, video=False, isrcs=[])


@pytest.mark.parametrize(("title", "credit", "found", "every", "agrees"), [
    ("Seven (feat. Latto) (Explicit Ver.)", "Jung Kook", hit("Seven", "Jung Kook feat. Latto"), True, True),
    ("Seven (feat. Latto)", "Jung Kook", hit("Seven", "Jung Kook"), True, False),  # a featured artist less
    ("Seven", "Jung Kook", hit("Seven (Alesso Remix)", "Jung Kook"), True, False),  # another version
    ("Seven (Sped Up)", "Jung Kook", hit("Seven", "Jung Kook"), True, False),
    ("Seven", "Jung Kook", hit("Seven", "Jung Kook", disambiguation="live"), True, False),
    ("Dynamite", "BTS", hit("Dynamite", "Taio Cruz"), True, False),  # another artist's song
    ("Dynamite", "BTS", hit("Dynamite", "Taio Cruz"), False, False),
    ("Magnetic", "아일릿(ILLIT)", hit("Magnetic", "ILLIT"), True, True),  # the row's other script
    ("Supernatural", "NewJeans", hit("Supernatural", "NewJeans & Someone Else"), True, False),
    ("Supernatural", "NewJeans", hit("Supernatural", "NewJeans & Someone Else"), False, True),  # an ISRC's hit
    ("Dont Look Back in Anger", "Oasis", hit("Don't Look Back in Anger", "Oasis"), True, True),  # a small edit
    ("03", "Someone", hit("06", "Someone"), True, False),  # short titles compared whole
])
def test_a_hit_is_taken_only_when_title_version_and_artists_agree(
        title: str, credit: str, found: musicbrainz.RecordingCandidate, every: bool, agrees: bool) -> None:
    assert (enrich.agreement(title, credit, found, every_artist=every) is not None) is agrees


def test_a_search_hit_needs_the_score_too() -> None:
    assert enrich.pick("Flowers", "Miley Cyrus", [hit("Flowers", "Miley Cyrus", 89)], searched=True) is None
    picked = enrich.pick("Flowers", "Miley Cyrus", [hit("Flowers", "Miley Cyrus", 90)], searched=True)
    assert picked is not None and picked[1].startswith("musicbrainz: search score 90")


def test_the_key_is_the_linkers_exact_key() -> None:
    """Enrichment is kept by the exact key of the row form it was asked for: the same key the linker files it under."""
    linker = Linker()
    for row in [*ROWS, {"name": "Seven (feat. Latto) - Clean", "artist": "Jung Kook, Latto feat. X"}, {"name": "화사 Song (Live)", "artist": "화사 (HWASA) & Y"}]:
        link = linker.link(Row(row["name"], row["artist"]))
        assert enrich.exact_key(row["name"], row["artist"]) in link.recording.exact_keys


# --- runs -------------------------------------------------------------------------------------------------


def test_a_run_adds_ids_paced_and_a_second_run_asks_nothing(indexed: Path) -> None:
    fake = FakeTime()
    upstream = Upstream(fake.clock)
    done = run(indexed, upstream, fake)
    assert done.stopped is None and (done.by_isrc, done.by_search, done.missed) == (1, 3, 3)
    assert mbids(indexed) == EXPECTED
    # ISRC lookups first (the recordings printing one), then searches; APT.'s ISRC is unknown to MusicBrainz: searched.
    paths = [p for _, p, _ in upstream.asked]
    assert paths[:2] == ["/ws/2/isrc/GBAHS1600463", "/ws/2/isrc/USAT22409172"] and paths[2] == "/ws/2/recording"
    assert len(upstream.asked) == 8 == len({(p, q) for _, p, q in upstream.asked})
    times = [t for t, _, _ in upstream.asked]
    assert all(b - a >= enrich.INTERVAL_SECONDS for a, b in itertools.pairwise(times))
    assert upstream.agents == {f"chartgw/0.1 ( {CONTACT} )"}
    # The search gave Seven its one ISRC; Magnetic's two are not taken; APT. had its own.
    assert ("isrc", "USUM72306722") in ids_of(indexed, "Seven (feat. Latto) (Explicit Ver.)")
    assert not {k for k, _ in ids_of(indexed, "Magnetic")} & {"isrc"}
    with sqlite3.connect(indexed / f"{index.INDEX_NAME}.sqlite") as db:
        rules = dict(db.execute("SELECT title, rule FROM identity_enrichment").fetchall())
        queries = dict(db.execute("SELECT title, query FROM identity_enrichment").fetchall())
    assert rules["Shape of You"].startswith("musicbrainz: ISRC lookup")
    assert rules["APT."].startswith("musicbrainz: search score 100")
    assert rules["Dynamite"] == "musicbrainz: no confident match" and rules["A Song Nobody Knows"] == "musicbrainz: not found"
    assert queries["APT."].startswith("/ws/2/isrc/USAT22409172?") and "/ws/2/recording?query=" in queries["APT."]

    again = Upstream()
    second = run(indexed, again, FakeTime())
    assert again.asked == [] and second.asked == 0 and mbids(indexed) == EXPECTED
    # Asked anew (its verdicts forgotten), every answer comes from the cache.
    with sqlite3.connect(indexed / f"{index.INDEX_NAME}.sqlite") as db:
        db.execute("DELETE FROM identity_enrichment")
        db.execute("DELETE FROM identity_ids WHERE kind = 'musicbrainz_recording' OR value = 'USUM72306722'")
    third = run(indexed, again, FakeTime())
    assert again.asked == [] and third.asked == 7 and mbids(indexed) == EXPECTED


def test_lookup_by_the_enriched_ids(indexed: Path) -> None:
    run(indexed, Upstream(), FakeTime())
    with client(indexed) as api:
        found = api.get("/identity/lookup", params={"musicbrainz_recording": SEVEN_MBID}, headers=KEY_HEADERS)
        assert found.status_code == 200, found.text
        body = found.json()
        assert body["title"] == "Seven (feat. Latto) (Explicit Ver.)"
        assert body["ids"]["musicbrainz_recording"] == [SEVEN_MBID] and body["ids"]["isrc"] == ["USUM72306722"]
        by_isrc = api.get("/identity/lookup", params={"isrc": "USUM72306722"}, headers=KEY_HEADERS).json()
        assert by_isrc["id"] == body["id"]
        missing = api.get("/identity/lookup", params={"musicbrainz_recording": TAIO_MBID}, headers=KEY_HEADERS)
        assert missing.status_code == 404


def test_limit_then_resume_asks_nothing_twice(indexed: Path) -> None:
    upstream = Upstream()
    first = run(indexed, upstream, FakeTime(), limit=2)
    assert first.asked == 2 and set(mbids(indexed)) == {"Shape of You", "APT."}  # the two printing an ISRC
    second = run(indexed, upstream, FakeTime())
    assert second.asked == 5 and mbids(indexed) == EXPECTED
    assert len(upstream.asked) == len({(p, q) for _, p, q in upstream.asked}) == 8


def test_refusals_are_waited_out_and_failures_end_the_run_keeping_what_was_found(indexed: Path) -> None:
    fake = FakeTime()
    upstream = Upstream(fake.clock)
    upstream.failing["/ws/2/isrc/GBAHS1600463"] = [
        httpx.Response(503, json={"error": "rate limit"}, headers={"Retry-After": "7"}),
        httpx.Response(429, json={"error": "slow down"})]
    upstream.failing["/ws/2/recording"] = [httpx.Response(500, text="<html>oops</html>")]
    before = mbids(indexed)
    done = run(indexed, upstream, fake)
    assert 7.0 in fake.sleeps and enrich.BACKOFF_SECONDS * 2 in fake.sleeps  # Retry-After, then the doubling backoff
    assert done.stopped is not None and "HTTP 500" in done.stopped and done.by_isrc == 1
    assert before == {} and mbids(indexed) == {"Shape of You": SHAPE_MBID}
    with sqlite3.connect(indexed / f"{index.INDEX_NAME}.sqlite") as db:
        cached = {r for (r,) in db.execute("SELECT request FROM musicbrainz_replies")}
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert not any(r.startswith("/ws/2/recording") for r in cached)  # the failed answer is not kept
    # An unreadable 200 ends the run the same way, and is not kept either.
    upstream.failing["/ws/2/recording"] = [httpx.Response(200, text="<html>maintenance</html>")]
    assert "musicbrainz recording search" in (run(indexed, upstream, fake).stopped or "")
    asked = len(upstream.asked)
    done = run(indexed, upstream, fake)
    assert done.stopped is None and mbids(indexed) == EXPECTED
    # Only the requests that failed were asked again.
    later = upstream.asked[asked:]
    assert not any(p.startswith("/ws/2/isrc/GBAHS") for _, p, _ in later) and len(later) == 6


def test_endless_refusals_stop_the_run(indexed: Path) -> None:
    fake = FakeTime()
    upstream = Upstream(fake.clock)
    upstream.failing["/ws/2/isrc/GBAHS1600463"] = [httpx.Response(503, json={"error": "x"})] * 10
    done = run(indexed, upstream, fake)
    assert done.stopped is not None and "503" in done.stopped and len(upstream.asked) == enrich.RETRIES + 1
    assert mbids(indexed) == {} and max(fake.sleeps) <= enrich.MAX_WAIT_SECONDS


def test_a_rebuild_keeps_the_enrichment_and_asks_nothing(indexed: Path) -> None:
    run(indexed, Upstream(), FakeTime())
    with data_dir(indexed):
        index.rebuild(now=fixed(FIXED_NOW), settings=run_settings())
    assert mbids(indexed) == EXPECTED
    assert ("isrc", "USUM72306722") in ids_of(indexed, "Seven (feat. Latto) (Explicit Ver.)")
    again = Upstream()
    assert run(indexed, again, FakeTime()).asked == 0 and again.asked == []
    # A new row form of an enriched recording keeps it; the enrichment is on the recording, not on one row.
    add_snapshot(indexed, "short-video", "global/daily", "2026-11-20", None,
                 [{"rank": 1, "name": "Seven (feat. Latto) (Clean Ver.)", "artist": "Jung Kook", "artists": ["Jung Kook"]}])
    build_index(indexed)
    assert mbids(indexed) == EXPECTED


def test_the_statements_compile(tmp_path: Path) -> None:
    from chartgw.store.schema import _explain

    db = index.open_index(tmp_path / "index.sqlite")
    try:
        for query in enrich.ENRICH_QUERIES:
            _explain(db, query.sql)
    finally:
        db.close()


def test_the_command_wants_a_contact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with environment({"CHARTGW_DATA_DIR": str(tmp_path), "CHARTGW_MUSICBRAINZ_CONTACT": None}):
        assert main(["enrich", "musicbrainz", "--base-url", "http://127.0.0.1:9"], settings=run_settings()) == 2
        assert "CHARTGW_MUSICBRAINZ_CONTACT" in capsys.readouterr().err
        assert main(["enrich", "musicbrainz", "--contact", CONTACT, "--base-url", "nonsense"], settings=run_settings()) == 2
        assert "--base-url" in capsys.readouterr().err
        assert main(["enrich", "musicbrainz", "--contact", CONTACT, "--limit", "0"], settings=run_settings()) == 2


# --- the real process -------------------------------------------------------------------------------------


class Replies(BaseHTTPRequestHandler):
    asked: list[tuple[float, str, str | None, str]]

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query)).get("query")
        type(self).asked.append((time.monotonic(), url.path, query, self.headers.get("user-agent", "")))
        status, body = reply(url.path, query)
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def replay() -> Iterator[tuple[str, list[tuple[float, str, str | None, str]]]]:
    asked: list[tuple[float, str, str | None, str]] = []
    handler = type("Handler", (Replies,), {"asked": asked})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def command(data: Path, base_url: str) -> subprocess.Popen[bytes]:
    env = {**child_env(DATA_DIR=str(data), MUSICBRAINZ_CONTACT=CONTACT), "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen([sys.executable, "-m", "chartgw", "enrich", "musicbrainz", "--base-url", base_url],
                            env=env, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def replies_kept(data: Path) -> int:
    try:
        with sqlite3.connect(f"file:{data / index.INDEX_NAME}.sqlite?mode=ro", uri=True, timeout=5) as db:
            return int(db.execute("SELECT count(*) FROM musicbrainz_replies").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def test_the_real_command_killed_mid_run_resumes_without_asking_twice(
        indexed: Path, replay: tuple[str, list[tuple[float, str, str | None, str]]]) -> None:
    base_url, asked = replay
    process = command(indexed, base_url)
    try:
        deadline = time.monotonic() + 120
        while replies_kept(indexed) < 3 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert replies_kept(indexed) >= 3, process.communicate(timeout=30)
        process.send_signal(signal.SIGKILL)  # while it waits its second before the next request
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signal.SIGKILL
    killed_after = len(asked)
    assert killed_after < 8 and len(mbids(indexed)) < len(EXPECTED)
    resumed = command(indexed, base_url)
    _, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err.decode()
    assert mbids(indexed) == EXPECTED
    requests = [(p, q) for _, p, q, _ in asked]
    assert len(requests) == len(set(requests)) == 8  # each asked once over the two runs (the kill lost none)
    assert {agent for *_, agent in asked} == {f"chartgw/0.1 ( {CONTACT} )"}
    # Paced at 1/s: the 5 requests span about 4 s as sent. Timed where they are received, one held up by load makes
    # the next look early, so the span is what is asked (an unpaced run sends all 5 within milliseconds).
    resumed_times = [t for t, *_ in asked[killed_after:]]
    assert resumed_times[-1] - resumed_times[0] >= 0.75 * (len(resumed_times) - 1), resumed_times
    assert "; 5 requests sent, " in err.decode()  # the 5 it had not asked: its outcome line says so too


def test_a_new_index_layout_keeps_the_enrichment(indexed: Path) -> None:
    """An index of an earlier layout starts over from the groups' files; what MusicBrainz said is kept."""
    run(indexed, Upstream(), FakeTime())
    with sqlite3.connect(indexed / f"{index.INDEX_NAME}.sqlite") as db:
        db.execute("PRAGMA user_version = 1")
    build_index(indexed)
    with sqlite3.connect(indexed / f"{index.INDEX_NAME}.sqlite") as db:
        assert db.execute("SELECT count(*) FROM identity_enrichment").fetchone() == (7,)
        assert db.execute("SELECT count(*) FROM musicbrainz_replies").fetchone() == (8,)
    assert mbids(indexed) == EXPECTED


def test_the_bench_runs(indexed: Path) -> None:
    """`scripts/bench_enrich.py DATA` (docs/identity.md's figures) on this test's index: every line it prints, and DATA
    left as it was."""
    env = {**child_env(), "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "bench_enrich.py"), str(indexed)], env=env,
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("7 recordings, 7 to ask") and lines[1].startswith("musicbrainz: ")
    assert "ms a recording besides the pacing" in lines[2] and lines[3].startswith("cache: 9 answers")
    assert len([line for line in lines if line.startswith("rebuild ")]) == 3
    assert all(line.endswith("giving back 5 MusicBrainz ids") for line in lines[4:]), lines
    assert mbids(indexed) == {}
