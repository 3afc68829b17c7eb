"""`chartgw enrich artist-history-api lyrics`: Genius ids for indexed tracks, over an httpx MockTransport (no
network) and a small index built from two snapshots (no demo data: the module runs in about 2 s)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from chartgw.cli import main
from chartgw.core.clock import fixed
from chartgw.crawl.context import Context
from chartgw.groups import GROUPS
from chartgw.index import artist_history as ah
from chartgw.index import history as index
from chartgw.index import lyrics
from chartgw.store import FetchLogRow, NewSnapshot, SnapshotWriter, StoredEntry
from chartgw.upstreams import genius
from tests.fixtures import FIXED_NOW, KEY_HEADERS, client, data_dir, environment
from tests.fixtures import settings as run_settings

TOKEN = "test-genius-token"
CAPTURE = "genius/genius-api-search-response-2019.json"


@pytest.fixture(autouse=True, scope="module")
def _registered() -> None:
    ah.register_sources(GROUPS)


def _snapshot(path: Path, group: str, target: str, chart_date: str, records: list[dict[str, Any]]) -> None:
    entries = [StoredEntry(r["rank"], "t", "a", None, json.dumps(r, ensure_ascii=False).encode()) for r in records]
    with SnapshotWriter(path / f"{group}.sqlite") as writer:
        writer.commit([NewSnapshot(target, chart_date, None, FIXED_NOW, "test", entries)],
                      FetchLogRow(target, FIXED_NOW, 1, "ok", 200, len(entries)))


SONGS: list[dict[str, Any]] = [
    {"rank": 1, "title": "Cut to the Feeling", "artist": "Carly Rae Jepsen"},
    {"rank": 2, "title": "Best & Worst Songs of 2017", "artist": "Mike N"},  # Genius has it by "Mike M"
    {"rank": 3, "title": "밤양갱", "artist": "비비 (BIBI)"},
]


@pytest.fixture
def indexed(tmp_path: Path) -> Iterator[Path]:
    _snapshot(tmp_path, "uk-charts", "singles", "2026-11-13", SONGS)
    _snapshot(tmp_path, "uk-charts", "singles", "2026-11-20", [{**s, "rank": s["rank"] + 1} for s in SONGS])
    with data_dir(tmp_path):
        index.index_all(now=fixed(FIXED_NOW), settings=run_settings())
        yield tmp_path


def _answers(shared: Path | None) -> dict[str, bytes]:
    """Search answers by query: Genius's captured 2019 answer for two queries (when ../shared is present, else
    its first two hits), and an answer with the Korean song's title and artist in two scripts."""
    capture = (shared / CAPTURE).read_bytes() if shared is not None else json.dumps({"response": {"hits": [
        {"index": "song", "type": "song", "result": {"id": 2955349, "title": "Cut to the Feeling",
                                                    "primary_artist": {"id": 21150, "name": "Carly Rae Jepsen"}}},
        {"index": "song", "type": "song", "result": {"id": 3405190, "title": "Best & Worst Songs of 2017",
                                                    "primary_artist": {"id": 596495, "name": "Mike M"}}}]}}).encode()
    bibi = json.dumps({"meta": {"status": 200}, "response": {"hits": [
        {"index": "song", "type": "song", "result": {"id": 77, "title": "밤양갱 (Bam Yang Gang)",
                                                    "primary_artist": {"id": 88, "name": "BIBI (비비)"}}}]}})
    return {"Cut to the Feeling Carly Rae Jepsen": capture, "Best & Worst Songs of 2017 Mike N": capture,
            "밤양갱 비비 (BIBI)": bibi.encode()}


class Genius:
    """A MockTransport standing in for api.genius.com, counting what it is asked."""

    def __init__(self, answers: dict[str, bytes], status: int = 200) -> None:
        self.answers, self.status = answers, status
        self.asked: list[str] = []
        self.transport = httpx.MockTransport(self.answer)

    def answer(self, request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == f"Bearer {TOKEN}"
        assert urlsplit(str(request.url)).path == "/search"
        query = parse_qs(urlsplit(str(request.url)).query)["q"][0]
        self.asked.append(query)
        if self.status != 200:
            return httpx.Response(self.status, json={"meta": {"status": self.status, "message": "no"}})
        return httpx.Response(200, content=self.answers.get(query, b'{"meta":{"status":200},"response":{"hits":[]}}'))


def _run(genius_api: Genius, sleeps: list[float] | None = None, now: Any = FIXED_NOW,
         settings: dict[str, str | None] | None = None) -> Any:
    with environment({"CHARTGW_GENIUS_TOKEN": TOKEN, **(settings or {})}):
        return lyrics.run_enrich(Context(clock=fixed(now), settings=run_settings()), {"what": "lyrics", "limit": 100}, transport=genius_api.transport,
                                 sleep=(sleeps.append if sleeps is not None else lambda s: None))


def _lookups(path: Path) -> dict[str, tuple[Any, ...]]:
    db = sqlite3.connect(path / "artist-history-api.sqlite")
    try:
        return {r[1]: r[3:5] for r in db.execute("SELECT * FROM lyrics_lookups")}
    finally:
        db.close()


def test_a_match_is_taken_a_near_miss_is_not(indexed: Path, request: pytest.FixtureRequest) -> None:
    try:
        shared: Path | None = request.getfixturevalue("shared_upstream")
    except pytest.skip.Exception:
        shared = None  # the capture's first two hits stand in
    api = Genius(_answers(shared))
    (outcome,) = _run(api)
    assert outcome.status == "ok" and outcome.target == "lyrics: 2 matched, 1 missed"
    assert sorted(api.asked) == sorted(_answers(None))
    found = _lookups(indexed)
    assert found["Cut to the Feeling"] == ("2955349", "21150")
    assert found["Best & Worst Songs of 2017"] == (None, None)  # the hit's primary artist is Mike M
    assert found["밤양갱"] == ("77", "88")  # the title in two scripts, the artist in two scripts
    with client(indexed, [ah.GROUP]) as live:
        song_id, artist_id = found["Cut to the Feeling"]
        by_song = live.get("/artist-history-api/artist-history", params={"lyrics_song_id": song_id},
                           headers=KEY_HEADERS).json()
        assert by_song["count"] == 2 and {r["lyrics_artist_id"] for r in by_song["rows"]} == {artist_id}
        by_artist = live.get("/artist-history-api/artist-history", params={"lyrics_artist_id": "88"},
                             headers=KEY_HEADERS).json()
        assert {r["title"] for r in by_artist["rows"]} == {"밤양갱"}
        coverage = live.get("/artist-history-api/artist-history/coverage",
                            params={"name": "BIBI", "lyrics_artist_id": "88"}, headers=KEY_HEADERS).json()
        uk = next(s for s in coverage["sources"] if s["source"] == "uk-charts")
        assert uk["rows"] == 2 and uk["matched_by"] == ["name", "lyrics_artist_id"]


def test_answers_are_kept_and_a_miss_is_asked_again_later(indexed: Path) -> None:
    first = Genius(_answers(None))
    _run(first)
    assert len(first.asked) == 3
    again = Genius(_answers(None))
    (outcome,) = _run(again, now=FIXED_NOW + timedelta(days=29))
    assert again.asked == [] and outcome.target == "lyrics: 0 matched, 0 missed"
    later = Genius(_answers(None))
    _run(later, now=FIXED_NOW + timedelta(days=31), settings={"CHARTGW_GENIUS_MISS_DAYS": "30"})
    assert later.asked == ["Best & Worst Songs of 2017 Mike N"]  # only the miss, once it is old
    assert _lookups(indexed)["Best & Worst Songs of 2017"] == (None, None)
    rows_before = _lookups(indexed)
    index.rebuild(now=fixed(FIXED_NOW), settings=run_settings())  # what Genius answered survives a rebuild, and is given to the rows again
    assert _lookups(indexed) == rows_before
    db = sqlite3.connect(indexed / "artist-history-api.sqlite")
    assert db.execute("SELECT count(*) FROM variants WHERE lyrics_song_id IS NOT NULL").fetchone()[0] == 2
    db.close()


def test_requests_are_paced(indexed: Path) -> None:
    sleeps: list[float] = []
    _run(Genius(_answers(None)), sleeps, settings={"CHARTGW_GENIUS_DELAY_SECONDS": "2.5"})
    assert sleeps == [2.5, 2.5]  # between the three requests, not before the first


def test_a_refusal_stops_the_run_and_keeps_nothing_for_the_refused_track(indexed: Path) -> None:
    refused = Genius(_answers(None), status=401)
    (outcome,) = _run(refused)
    assert outcome.status == "failed" and "CHARTGW_GENIUS_TOKEN" in (outcome.error or "") and len(refused.asked) == 1
    assert _lookups(indexed) == {}
    slowed = Genius(_answers(None), status=429)
    (outcome,) = _run(slowed)
    assert outcome.status == "failed" and "429" in (outcome.error or "")


def test_a_killed_run_keeps_what_it_committed(indexed: Path) -> None:
    def killed(seconds: float) -> None:
        raise KeyboardInterrupt  # as a kill while waiting before the second request

    api = Genius(_answers(None))
    with environment({"CHARTGW_GENIUS_TOKEN": TOKEN}), pytest.raises(KeyboardInterrupt):
        lyrics.run_enrich(Context(clock=fixed(FIXED_NOW), settings=run_settings()), {"what": "lyrics", "limit": 100}, transport=api.transport, sleep=killed)
    assert len(_lookups(indexed)) == 1 and len(api.asked) == 1


def test_without_a_token_it_exits_1_with_one_line(indexed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with environment({"CHARTGW_GENIUS_TOKEN": None}), pytest.raises(SystemExit) as exited:
        main(["enrich", "artist-history-api", "lyrics"], run_settings())
    assert exited.value.code != 0
    message = str(exited.value.code)
    assert "CHARTGW_GENIUS_TOKEN" in message and "\n" not in message  # Python prints it as one line, exit status 1
    with pytest.raises(SystemExit) as wrong:
        main(["enrich", "artist-history-api", "lyric"], run_settings())
    assert wrong.value.code == 2 and "invalid" in capsys.readouterr().err


def test_search_answers_parse_as_captured(shared_upstream: Path) -> None:
    hits = genius.parse_search((shared_upstream / CAPTURE).read_bytes())
    assert [h.song_id for h in hits] == [2955349, 3405190, 3101501, 3349931]
    assert genius.pick(hits, "Cut To The Feeling!", {"carlyraejepsen"}) == hits[0]
    assert genius.pick(hits, "Cut to the Feeling", {"carly"}) is None
    assert genius.titles_agree("밤양갱", "밤양갱 (Bam Yang Gang)") and not genius.titles_agree("Song", "Song (Remix)")
    with pytest.raises(genius.UpstreamFormatError):  # type: ignore[attr-defined]  # re-exported by its import
        genius.parse_search(b'{"meta":{"status":401,"message":"invalid token"}}')


def test_an_index_of_an_earlier_layout_is_built_again_keeping_the_genius_answers(tmp_path: Path) -> None:
    old = sqlite3.connect(tmp_path / "artist-history-api.sqlite")
    old.executescript(  # the first layout's tables (text columns in every row), plus answers Genius gave
        "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE sources (source TEXT PRIMARY KEY, last_snapshot_id INTEGER NOT NULL, indexed_at TEXT NOT NULL);"
        "CREATE TABLE appearances (id INTEGER PRIMARY KEY, source TEXT, chart TEXT, track_key TEXT);"
        "CREATE TABLE appearance_artists (key TEXT, chart_date TEXT, row_id INTEGER);"
        "INSERT INTO sources VALUES ('uk-charts', 99, '2026-01-01T00:00:00Z');"
        "CREATE TABLE lyrics_lookups (track_key TEXT PRIMARY KEY, title TEXT NOT NULL, artist_key TEXT NOT NULL,"
        " song_id TEXT, artist_id TEXT, asked_at TEXT NOT NULL) WITHOUT ROWID;"
        # asked under a version's title, keyed as tracks were before version marks were folded: keyed again
        "INSERT INTO lyrics_lookups VALUES ('cuttothefeelingradioedit|carlyraejepsen', 'Cut to the Feeling - Radio Edit',"
        " 'carlyraejepsen', '2955349', '21150', '2026-11-01T00:00:00Z');")
    old.close()
    _snapshot(tmp_path, "uk-charts", "singles", "2026-11-13", SONGS)
    with client(tmp_path, [ah.GROUP]) as live:
        refused = live.get("/artist-history-api/artist-history", params={"name": "Mike N"}, headers=KEY_HEADERS)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "60"
    with data_dir(tmp_path):
        (uk,) = [r for r in index.index_all(now=fixed(FIXED_NOW), settings=run_settings()) if r.source == "uk-charts"]
    assert uk.snapshots == 1 and uk.error is None  # the old mark (99) went with the old layout
    db = sqlite3.connect(tmp_path / "artist-history-api.sqlite")
    assert db.execute("PRAGMA user_version").fetchone()[0] == index.SCHEMA_VERSION
    assert db.execute("SELECT lyrics_song_id FROM variants WHERE title = 'Cut to the Feeling'").fetchone() == ("2955349",)
    assert db.execute("SELECT key FROM id_keys WHERE kind = 'lyrics_artist_id' AND value = '21150'").fetchone() == (
        "carlyraejepsen",)
    db.close()
