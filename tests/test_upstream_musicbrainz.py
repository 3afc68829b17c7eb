"""MusicBrainz ws/2: request shapes and User-Agent, artist search (best match by score and normalised name,
no match as an explicit result), release-group pages with their totals and paging, the 1 request/s pacing
on a fake clock, rendered samples read back, and refusals (error payloads, markup, broken JSON)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from datetime import UTC, datetime

import pytest

from chartgw.demo.replay import request_key
from chartgw.demo.samples import dj_rankings as samples
from chartgw.upstreams import UpstreamFormatError, musicbrainz
from chartgw.upstreams.musicbrainz import ArtistCandidate, RateLimiter, ReleaseGroup

WHEN = datetime(2026, 11, 20, 5, 30, tzinfo=UTC)
ARMIN = "477b8c0c-c5fc-4ad2-b5b2-191f0bf2a9df"
OTHER = "0b7d5b9e-1c3a-4c1e-9a44-6e1b6f0d2a11"
LOOSE = "6a1f2b3c-4d5e-4f60-8a7b-9c0d1e2f3a4b"


def _artist(mbid: str, name: str, score: int, **extra: object) -> dict[str, object]:
    return {"id": mbid, "type": "Person", "type-id": "b6e035f4-3ce9-331c-97df-83397230b0df", "score": score,
            "name": name, "sort-name": name, "life-span": {"ended": None}, **extra}


def _search(*artists: Mapping[str, object], count: int | None = None) -> bytes:
    return json.dumps({"created": "2026-11-20T05:30:00.000Z", "count": len(artists) if count is None else count,
                       "offset": 0, "artists": list(artists)}).encode()


def _group(mbid: str, title: str, primary: str | None = "Album", secondary: list[str] | None = None,
           date: str = "2005-04-18") -> dict[str, object]:
    return {"id": mbid, "title": title, "primary-type": primary, "primary-type-id": None,
            "secondary-types": secondary or [], "secondary-type-ids": [], "first-release-date": date,
            "disambiguation": ""}


def _page(groups: list[dict[str, object]], count: int, offset: int = 0) -> bytes:
    return json.dumps({"release-group-offset": offset, "release-group-count": count,
                       "release-groups": groups}).encode()


# --- requests ---------------------------------------------------------------------------------------------


def test_search_request() -> None:
    request = musicbrainz.artist_search_request("Dimitri Vegas & Like Mike")
    assert (request.upstream, request.method, request.path) == ("MUSICBRAINZ", "GET", "/ws/2/artist")
    assert request.params == (("query", 'artist:"Dimitri Vegas & Like Mike"'), ("fmt", "json"), ("limit", "5"))
    headers = dict(request.headers)
    assert headers["User-Agent"] == musicbrainz.USER_AGENT
    assert headers["User-Agent"].startswith("chartgw/0.1 ( ") and headers["User-Agent"].endswith(" )")
    assert headers["Accept"] == "application/json"


def test_search_request_escapes_the_phrase() -> None:
    request = musicbrainz.artist_search_request('  DJ  "Quote"\\Back ')
    assert request.params[0] == ("query", 'artist:"DJ \\"Quote\\"\\\\Back"')
    with pytest.raises(ValueError):
        musicbrainz.artist_search_request("  ")


def test_release_group_request_and_contact() -> None:
    request = musicbrainz.release_groups_request(ARMIN, 200, contact="ops@example.net")
    assert request.path == "/ws/2/release-group"
    assert request.params == (("artist", ARMIN), ("fmt", "json"), ("limit", "100"), ("offset", "200"))
    assert dict(request.headers)["User-Agent"] == "chartgw/0.1 ( ops@example.net )"
    for bad in (lambda: musicbrainz.release_groups_request("not-an-mbid"),
                lambda: musicbrainz.release_groups_request(ARMIN, -1)):
        with pytest.raises(ValueError):
            bad()


# --- artist search ----------------------------------------------------------------------------------------


def test_best_match_is_the_equal_name_with_the_best_score() -> None:
    body = _search(
        _artist(LOOSE, "Armin van Buuren & Friends", 100),
        _artist(OTHER, "Armin van Buuren", 90, disambiguation="tribute act"),
        _artist(ARMIN, "Armin van Buuren", 98, country="NL", disambiguation="Dutch DJ",
                aliases=[{"name": "Armin", "sort-name": "Armin"}]),
        count=214)
    match = musicbrainz.parse_artist_search(body, "Armin Van Buuren")
    assert (match.query, match.reason, match.total, len(match.candidates)) == ("Armin Van Buuren", "name", 214, 3)
    assert match.artist == ArtistCandidate(mbid=ARMIN, name="Armin van Buuren", sort_name="Armin van Buuren",
                                           score=98, type="Person", country="NL", disambiguation="Dutch DJ",
                                           aliases=["Armin"])


@pytest.mark.parametrize("query,name", [
    ("Martinez Brothers", "The Martinez Brothers"), ("Chainsmokers", "The Chainsmokers"),
    ("Above and Beyond", "Above & Beyond"), ("Tiesto", "Tiësto"), ("KOLSCH", "Kölsch"), ("W&W", "W & W"),
])
def test_names_equal_once_normalised(query: str, name: str) -> None:
    assert musicbrainz.name_key(query) == musicbrainz.name_key(name)
    assert musicbrainz.parse_artist_search(_search(_artist(ARMIN, name, 100)), query).artist is not None


def test_alias_match_when_no_name_is_equal() -> None:
    body = _search(_artist(ARMIN, "Dimitri Vegas & Like Mike", 95,
                           aliases=[{"name": "DVLM"}, {"name": "Dimitri Vegas and Like Mike"}]))
    match = musicbrainz.parse_artist_search(body, "DVLM")
    assert (match.reason, match.artist and match.artist.mbid) == ("alias", ARMIN)


@pytest.mark.parametrize("body", [
    _search(),
    _search(_artist(LOOSE, "Armin", 100), _artist(OTHER, "Armin van Buuren Tribute", 70)),
    _search(_artist(ARMIN, "Armin van Buuren", 60)),  # equal name, but too weak a score
])
def test_no_match_is_an_explicit_result(body: bytes) -> None:
    match = musicbrainz.parse_artist_search(body, "Armin van Buuren")
    assert match.artist is None
    assert match.reason.startswith(("no artists", "no candidate named 'Armin van Buuren'"))


def test_search_score_as_string_and_missing_fields() -> None:
    item = {"id": ARMIN, "name": "Alok", "score": "100"}
    (candidate,) = musicbrainz.parse_artist_search(_search(item), "Alok").candidates
    assert (candidate.score, candidate.type, candidate.country, candidate.sort_name, candidate.aliases) == (
        100, None, None, None, [])


# --- release groups ---------------------------------------------------------------------------------------


def test_release_group_page_fields_and_paging() -> None:
    groups = [_group("b1f9c1a6-0f6b-4b3e-8f52-0c3f4b3a1c01", "76", "Album"),
              _group("b1f9c1a6-0f6b-4b3e-8f52-0c3f4b3a1c02", "A State of Trance 2010", "Album",
                     ["Compilation", "DJ-mix"], "2010"),
              _group("b1f9c1a6-0f6b-4b3e-8f52-0c3f4b3a1c03", "Blah Blah Blah", "Single", ["Remix"], "2018-06"),
              _group("b1f9c1a6-0f6b-4b3e-8f52-0c3f4b3a1c04", "Untitled", None, None, "")]
    page = musicbrainz.parse_release_groups(_page(groups, 304, 100))
    assert (page.count, page.offset, page.next_offset) == (304, 100, 104)
    assert page.release_groups[1] == ReleaseGroup(
        id="b1f9c1a6-0f6b-4b3e-8f52-0c3f4b3a1c02", title="A State of Trance 2010", primary_type="Album",
        secondary_types=["Compilation", "DJ-mix"], first_release_date="2010", disambiguation=None)
    assert page.release_groups[3].primary_type is None and page.release_groups[3].first_release_date is None
    assert page.release_groups[2].first_release_date == "2018-06"
    last = musicbrainz.parse_release_groups(_page(groups, 304, 300))
    assert last.next_offset is None


def test_an_artist_without_release_groups_is_an_empty_page() -> None:
    page = musicbrainz.parse_release_groups(_page([], 0))
    assert (page.count, page.release_groups, page.next_offset) == (0, [], None)


@pytest.mark.parametrize("body,reason", [
    (b"", "empty"),
    (b"<html><body>503 Service Temporarily Unavailable</body></html>", "markup"),
    (b'{"release-group-count": 3, "release-groups": [', "not JSON"),
    (b'{"error": "Your requests are exceeding the allowable rate limit.", "help": "..."}', "rate limit"),
    (b'{"created": "x", "count": 0, "offset": 0, "artists": []}', "no `release-groups`"),
    (_page([], 250, 100), "empty page at offset 100 of 250"),
    (_page([_group(ARMIN, "X")] * 3, 2), "exceed count"),
    (b'{"release-group-count": 1, "release-groups": {}}', "not a list"),
    (_page([_group("1234", "X")], 1), "not an MBID"),
    (_page([_group(ARMIN, "X", date="18/04/2005")], 1), "not a date"),
    (_page([_group(ARMIN, "  ")], 1), "title"),
    (b'{"release-groups": []}', "release-group-count"),
])
def test_broken_release_group_pages_are_refused(body: bytes, reason: str) -> None:
    with pytest.raises(UpstreamFormatError, match=reason):
        musicbrainz.parse_release_groups(body)


@pytest.mark.parametrize("body,reason", [
    (b"", "empty"), (b"<!DOCTYPE html><html></html>", "markup"), (b"[]", "expected an object"),
    (b'{"error": "Invalid authentication"}', "error"), (b'{"count": 1}', "no `artists`"),
    (_search({"id": "nope", "name": "Alok", "score": 100}), "not an MBID"),
    (_search({"id": ARMIN, "score": 100}), "name"),
    (_search({"id": ARMIN, "name": "Alok", "score": "high"}), "score"),
])
def test_broken_searches_are_refused(body: bytes, reason: str) -> None:
    with pytest.raises(UpstreamFormatError, match=reason):
        musicbrainz.parse_artist_search(body, "Alok")


# --- pacing -----------------------------------------------------------------------------------------------


class FakeClock:
    """A clock that only moves when slept on; records every sleep."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.now += seconds


def test_rate_limiter_spaces_requests_one_second_apart() -> None:
    clock = FakeClock()
    limiter = RateLimiter(clock=clock, sleep=clock.sleep)

    async def run() -> list[float]:
        moments = []
        for _ in range(3):
            await limiter.wait()
            moments.append(clock.now)
        clock.now += 0.4  # some work between requests counts towards the next wait
        await limiter.wait()
        moments.append(clock.now)
        clock.now += 5  # idle: no wait
        await limiter.wait()
        moments.append(clock.now)
        return moments

    assert asyncio.run(run()) == [1000.0, 1001.0, 1002.0, 1003.0, 1008.0]
    assert clock.sleeps == [1.0, 1.0, 0.6]


def test_rate_limiter_serves_concurrent_tasks_in_turn() -> None:
    clock = FakeClock()
    limiter = RateLimiter(interval=1.0, clock=clock, sleep=clock.sleep)

    async def run() -> list[float]:
        async def one() -> float:
            await limiter.wait()
            return clock.now

        return list(await asyncio.gather(*(one() for _ in range(4))))

    assert sorted(asyncio.run(run())) == [1000.0, 1001.0, 1002.0, 1003.0]


def test_rate_limiter_interval_bounds() -> None:
    clock = FakeClock()
    free = RateLimiter(interval=0, clock=clock, sleep=clock.sleep)

    async def run() -> None:
        for _ in range(3):
            await free.wait()

    asyncio.run(run())
    assert clock.sleeps == []
    with pytest.raises(ValueError):
        RateLimiter(interval=-1)
    assert RateLimiter().interval == musicbrainz.MIN_INTERVAL_SECONDS == 1.0


# --- rendered samples -------------------------------------------------------------------------------------


def test_rendered_search_finds_the_dj_or_says_none() -> None:
    djs = {row.dj for year in samples.sample_years() for row in samples.year_ranking(year)}
    matched = 0
    for dj in djs:
        match = musicbrainz.parse_artist_search(samples.render_artist_search(dj, WHEN), dj.name)
        if samples.has_musicbrainz_match(dj):
            assert match.artist is not None and match.artist.mbid == samples.sample_mbid(dj.slug)
            assert (match.artist.name, match.artist.score, match.reason) == (dj.name, 100, "name")
            matched += 1
        else:
            assert match.artist is None
    assert 0 < matched < len(djs)


def test_rendered_release_groups_page_through() -> None:
    dj = next(d for d in samples.dj_pool() if samples.release_group_count(d) > 100 and samples.has_musicbrainz_match(d))
    replies = samples.musicbrainz_replies(WHEN)
    search = replies[request_key(musicbrainz.artist_search_request(dj.name))]
    match = musicbrainz.parse_artist_search(search.body, dj.name)
    assert match.artist is not None
    collected: list[ReleaseGroup] = []
    offset: int | None = 0
    while offset is not None:
        page = musicbrainz.parse_release_groups(
            replies[request_key(musicbrainz.release_groups_request(match.artist.mbid, offset))].body)
        collected += page.release_groups
        offset = page.next_offset
    assert len(collected) == samples.release_group_count(dj) == page.count
    assert len({g.id for g in collected}) == len(collected)
    assert {g.primary_type for g in collected} <= {"Album", "Single", "EP"}
    assert any(g.secondary_types for g in collected)
