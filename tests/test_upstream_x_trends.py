"""X trends: the request shapes, the location table, the two real v1.1 captures (exact rows; the New York
one stored escaped twice, the Worldwide one with Unicode names), the v2 documented example, trends24 pages in
the public scrapers' markup, rendered samples of all three formats, and the refusals (error payloads, HTML,
empty lists, robot checks, changed layout, another location's page)."""

from __future__ import annotations

import json
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from chartgw.demo.replay import replaying, request_key
from chartgw.demo.samples import social_trends as samples
from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, x_trends
from chartgw.upstreams.x_trends import TrendEntry, XApiError

NEW_YORK = "twitter/api-v1.1-trends-place-woeid.json"
WORLDWIDE = "twitter/api-v1.1-trends-place-worldwide-unicode.json"
WHEN = datetime(2026, 11, 20, 5, 30, tzinfo=UTC)

# The v2 example of the X API documentation (trends of WOEID 26062, Leicester).
V2_DOC_EXAMPLE = {"data": [
    {"trend_name": "Europe", "tweet_count": 232408}, {"trend_name": "Isak", "tweet_count": 2956},
    {"trend_name": "RNLI", "tweet_count": 2484}, {"trend_name": "Toon", "tweet_count": 11447},
    {"trend_name": "St James", "tweet_count": 5565}, {"trend_name": "Manning", "tweet_count": 10077},
    {"trend_name": "Copenhagen", "tweet_count": 35272}, {"trend_name": "Coventry", "tweet_count": 3662},
]}

# A trends24 page as the public scrapers describe the current markup (unquoted attributes, a count in
# data-count or only as text, or none), two hourly snapshots, the newest first.
TRENDS24_PAGE = """<!DOCTYPE html><html lang=en><head><title>United States X Trends | Trends24</title>
<link rel=canonical href="https://trends24.in/united-states/"></head><body><div id=timeline>
<div class=list-container><h3 class=title data-timestamp="1795150800.123">05:00 AM</h3>
<ol class=trend-card__list>
<li><span class=trend-name><a href="https://twitter.com/search?q=%23SuperBowl" class=trend-link>#SuperBowl</a></span>
<span class=tweet-count data-count="1234567">1.2M</span></li>
<li><span class=trend-name><a href="https://twitter.com/search?q=%22Taylor+Swift%22" class=trend-link>Taylor Swift</a>
</span><span class=tweet-count>45.3K</span></li>
<li><span class=trend-name><a href="https://twitter.com/search?q=Beyonc%C3%A9" class=trend-link>Beyoncé</a></span>
<span class=tweet-count></span></li>
</ol></div>
<div class=list-container><h3 class=title data-timestamp="1795147200">04:00 AM</h3>
<ol class=trend-card__list><li><a href="https://twitter.com/search?q=Old" class=trend-link>Old</a></li></ol></div>
</div></body></html>"""


def _capture(shared: Path, name: str) -> bytes:
    return (shared / name).read_bytes()


def _entry(rank: int, name: str, query: str, volume: int | None) -> TrendEntry:
    return TrendEntry(rank=rank, name=name, url=f"http://twitter.com/search?q={query}", query=query,
                      tweet_volume=volume)


# --- requests and locations -------------------------------------------------------------------------------


def test_api_requests_carry_the_bearer_token() -> None:
    v1 = x_trends.v1_request(2459115, "tok")
    assert (v1.upstream, v1.method, v1.path, v1.params) == ("X_API", "GET", "/1.1/trends/place.json",
                                                            (("id", "2459115"),))
    assert ("Authorization", "Bearer tok") in v1.headers
    v2 = x_trends.v2_request(1, "tok")
    assert (v2.path, v2.params) == ("/2/trends/by/woeid/1", ())
    assert ("Authorization", "Bearer tok") in v2.headers
    assert x_trends.v2_request(1, "tok", max_trends=50).params == (("max_trends", "50"),)
    with pytest.raises(ValueError, match="token"):
        x_trends.v1_request(1, "")


def test_trends24_requests_use_the_location_pages() -> None:
    paths = {slug: x_trends.trends24_request(x_trends.location(slug)).path
             for slug in ("worldwide", "us", "kr", "new-york", "london", "tokyo")}
    assert paths == {"worldwide": "/", "us": "/united-states/", "kr": "/korea/", "new-york": "/united-states/new-york/",
                     "london": "/united-kingdom/london/", "tokyo": "/japan/tokyo/"}
    assert x_trends.trends24_request(x_trends.location("us")).upstream == "TRENDS24"


def test_location_table() -> None:
    table = x_trends.LOCATIONS
    assert len({loc.slug for loc in table}) == len(table) == len({loc.woeid for loc in table})
    assert x_trends.location("worldwide") == x_trends.Location("worldwide", "Worldwide", 1, "worldwide", None, "/")
    assert x_trends.location_by_woeid(23424977).slug == "us"
    assert x_trends.location("new-york") == x_trends.Location("new-york", "New York", 2459115, "city", "US",
                                                              "/united-states/new-york/")
    for slug in ("us", "gb", "jp", "in", "br", "kr", "de", "fr", "ca", "mx", "es", "it", "au"):
        assert x_trends.location(slug).kind == "country"
    assert {loc.woeid for loc in table} >= {1, 23424977, 23424975, 23424856, 2459115, 44418, 1118370}
    for loc in table:
        assert loc.trends24_path.startswith("/") and loc.trends24_path.endswith("/")
        if loc.kind == "city":
            assert loc.country and loc.trends24_path.count("/") == 3
    with pytest.raises(KeyError, match="atlantis"):
        x_trends.location("atlantis")
    with pytest.raises(KeyError, match="999"):
        x_trends.location_by_woeid(999)


# --- real captures ----------------------------------------------------------------------------------------


def test_new_york_capture_exact_rows(shared_upstream: Path) -> None:
    parsed = x_trends.parse_v1(_capture(shared_upstream, NEW_YORK))
    assert (parsed.source, parsed.as_of, parsed.created_at) == ("x-api-v1.1", "2016-01-16T20:28:23Z",
                                                                "2016-01-16T20:21:25Z")
    assert (parsed.location_name, parsed.woeid, len(parsed.entries)) == ("New York", 2459115, 50)
    assert [e.rank for e in parsed.entries] == list(range(1, 51))
    assert parsed.entries[0] == _entry(1, "#ChangeAConsonantSpoilAMovie", "%23ChangeAConsonantSpoilAMovie", None)
    assert parsed.entries[1] == _entry(2, "Aaliyah", "Aaliyah", 104403)
    assert parsed.entries[6] == _entry(7, "Matt Barnes", "%22Matt+Barnes%22", None)
    assert parsed.entries[10] == _entry(11, "Chelsea", "Chelsea", 312197)
    assert parsed.entries[17] == _entry(18, "Louis C.K.", "%22Louis+C.K.%22", None)
    # Stored escaped twice: "#Pel\\u00EDculas..." and "http:\\/\\/" come out decoded.
    assert parsed.entries[41] == _entry(42, "#PelículasQueHeVistoMilVeces", "%23Pel%C3%ADculasQueHeVistoMilVeces",
                                        44929)
    assert parsed.entries[49] == _entry(50, "#MakeHerMadIn3Words", "%23MakeHerMadIn3Words", None)
    volumes = [e.tweet_volume for e in parsed.entries if e.tweet_volume is not None]
    assert volumes == [104403, 64382, 60820, 312197, 189872, 98183, 16084, 14870, 10919, 44929, 10317, 15572]


def test_worldwide_capture_keeps_unicode_names(shared_upstream: Path) -> None:
    parsed = x_trends.parse_v1(_capture(shared_upstream, WORLDWIDE))
    assert (parsed.as_of, parsed.created_at, parsed.location_name, parsed.woeid) == (
        "2016-04-12T02:11:22Z", "2016-04-12T02:06:56Z", "Worldwide", 1)
    assert len(parsed.entries) == 50
    assert parsed.entries[0] == _entry(1, "#LiberdadeLiberdade", "%23LiberdadeLiberdade", 23755)
    assert parsed.entries[5] == _entry(6, "THANK YOU ARDEN", "%22THANK+YOU+ARDEN%22", 53636)
    assert parsed.entries[9] == _entry(10, "Roberto Jefferson", "%22Roberto+Jefferson%22", None)
    assert parsed.entries[18] == _entry(19, "#NãoDêUnfTagueirosSdv", "%23N%C3%A3oD%C3%AAUnfTagueirosSdv", 16014)
    assert parsed.entries[27].name == "#اقوي_عباره_رومانسيه"
    assert (parsed.entries[27].rank, parsed.entries[27].tweet_volume) == (28, 36470)
    assert parsed.entries[31].name == "#تعليق_الدراسه"
    assert parsed.entries[38].name == "#نفسك_تبيع_ايه_للسعوديه" and parsed.entries[38].tweet_volume is None
    assert parsed.entries[43].name == "#تشد_انتباهي_اذا"
    assert parsed.entries[46] == _entry(47, "#ALDUBSummerAdventure", "%23ALDUBSummerAdventure", 348878)
    assert parsed.entries[49] == _entry(50, "#ChatConLaPandillaEdward", "%23ChatConLaPandillaEdward", None)
    assert sum(e.tweet_volume is None for e in parsed.entries) == 19


@pytest.mark.parametrize("name", [NEW_YORK, WORLDWIDE], ids=["new-york", "worldwide"])
def test_every_capture_name_matches_its_query(shared_upstream: Path, name: str) -> None:
    """The query is the name URL-encoded (in quotes when it has spaces): a check that the decoding is right."""
    for entry in x_trends.parse_v1(_capture(shared_upstream, name)).entries:
        query = x_trends.decoded_query(entry)
        assert query is not None
        assert (query[1:-1] if " " in entry.name else query) == entry.name


def test_promoted_trends_are_left_out_and_ranks_close_up(shared_upstream: Path) -> None:
    doc = json.loads(_capture(shared_upstream, WORLDWIDE))
    doc[0]["trends"][1]["promoted_content"] = {"id": "ad"}
    parsed = x_trends.parse_v1(json.dumps(doc).encode())
    assert len(parsed.entries) == 49
    assert [(e.rank, e.name) for e in parsed.entries[:3]] == [(1, "#LiberdadeLiberdade"), (2, "#LHHATL"),
                                                              (3, "#ReapareceCFK")]


# --- v2 ---------------------------------------------------------------------------------------------------


def test_v2_documented_example() -> None:
    parsed = x_trends.parse_v2(json.dumps(V2_DOC_EXAMPLE).encode())
    assert (parsed.source, parsed.as_of, parsed.location_name, parsed.woeid) == ("x-api-v2", None, None, None)
    assert parsed.entries[0] == TrendEntry(rank=1, name="Europe", url=None, query=None, tweet_volume=232408)
    assert parsed.entries[-1] == TrendEntry(rank=8, name="Coventry", url=None, query=None, tweet_volume=3662)
    assert [e.name for e in parsed.entries] == ["Europe", "Isak", "RNLI", "Toon", "St James", "Manning", "Copenhagen",
                                               "Coventry"]


def test_v2_without_a_count_is_null() -> None:
    parsed = x_trends.parse_v2(json.dumps({"data": [{"trend_name": "#月曜日"}, {"trend_name": "B",
                                                                                  "tweet_count": None}]}).encode())
    assert [(e.name, e.tweet_volume) for e in parsed.entries] == [("#月曜日", None), ("B", None)]


# --- refusals ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("payload,kind,code", [
    ({"errors": [{"code": 88, "message": "Rate limit exceeded"}]}, "rate_limit", 88),
    ({"errors": [{"code": 89, "message": "Invalid or expired token."}]}, "unauthorized", 89),
    ({"errors": [{"code": 215, "message": "Bad Authentication data."}]}, "unauthorized", 215),
    ({"errors": [{"code": 34, "message": "Sorry, that page does not exist."}]}, "not_found", 34),
    ({"errors": [{"code": 131, "message": "Internal error"}]}, "other", 131),
    ({"title": "Unauthorized", "type": "about:blank", "status": 401, "detail": "Unauthorized"}, "unauthorized", 401),
    ({"title": "Too Many Requests", "detail": "Too Many Requests", "type": "about:blank", "status": 429},
     "rate_limit", 429),
])
@pytest.mark.parametrize("parser", [x_trends.parse_v1, x_trends.parse_v2], ids=["v1.1", "v2"])
def test_error_payloads_are_refused_with_their_kind(payload: dict[str, Any], kind: str, code: int,
                                                    parser: Any) -> None:
    with pytest.raises(XApiError) as raised:
        parser(json.dumps(payload).encode())
    assert (raised.value.kind, raised.value.code) == (kind, code)
    assert isinstance(raised.value, UpstreamFormatError)


def test_sample_error_bodies_are_refused() -> None:
    for body, kind in ((samples.rate_limit_body(), "rate_limit"), (samples.unauthorized_body(), "unauthorized"),
                       (samples.v2_problem_body(429), "rate_limit"), (samples.v2_problem_body(401), "unauthorized")):
        with pytest.raises(XApiError) as raised:
            x_trends.parse_v1(body)
        assert raised.value.kind == kind


@pytest.mark.parametrize("body,reason", [
    (b"[]", "empty list"),
    (b'[{"trends": [], "locations": [{"name": "Worldwide", "woeid": 1}]}]', "no trends"),
    (b'[{"trends": [{"name": "Ad", "promoted_content": {"id": 1}}]}]', "only promoted"),
    (b"<html><body>Something went wrong</body></html>", "markup"),
    (b"", "not JSON"),
    (b'{"trends": []}', "one-element list"),
    (b'[{"trends": [{"name": "A", "tweet_volume": "lots"}]}]', "tweet_volume"),
    (b'[{"trends": [{"url": "http://twitter.com/search?q=A"}]}]', "no name"),
])
def test_v1_refusals(body: bytes, reason: str) -> None:
    with pytest.raises(UpstreamFormatError, match=reason):
        x_trends.parse_v1(body)


@pytest.mark.parametrize("body,reason", [
    (b'{"data": []}', "no `data`"), (b"{}", "no `data`"), (b"<!DOCTYPE html><html></html>", "markup"),
    (b'{"data": [{"tweet_count": 5}]}', "no trend_name"),
])
def test_v2_refusals(body: bytes, reason: str) -> None:
    with pytest.raises(UpstreamFormatError, match=reason):
        x_trends.parse_v2(body)


# --- trends24 ---------------------------------------------------------------------------------------------


def test_trends24_page_latest_snapshot() -> None:
    parsed = x_trends.parse_trends24(TRENDS24_PAGE.encode(), "/united-states/")
    assert (parsed.source, parsed.as_of, parsed.location_name, parsed.woeid) == (
        "trends24", "2026-11-20T05:00:00Z", None, None)
    assert parsed.entries == [
        TrendEntry(rank=1, name="#SuperBowl", url="https://twitter.com/search?q=%23SuperBowl", query="%23SuperBowl",
                   tweet_volume=1234567),
        TrendEntry(rank=2, name="Taylor Swift", url="https://twitter.com/search?q=%22Taylor+Swift%22",
                   query="%22Taylor+Swift%22", tweet_volume=45300),
        TrendEntry(rank=3, name="Beyoncé", url="https://twitter.com/search?q=Beyonc%C3%A9", query="Beyonc%C3%A9",
                   tweet_volume=None),
    ]


def test_trends24_older_markup_with_titles_and_relative_links() -> None:
    page = ('<html><body><div class="list-container"><h3 class="title" data-timestamp="1452975600"></h3>'
            '<ol class="trend-card__list"><li title="#Old"></li><li><a href="/search?q=Two">Two</a></li></ol>'
            "</div></body></html>")
    parsed = x_trends.parse_trends24(page.encode())
    assert parsed.as_of == "2016-01-16T20:20:00Z"
    assert [(e.rank, e.name, e.url, e.query) for e in parsed.entries] == [
        (1, "#Old", None, None), (2, "Two", "https://twitter.com/search?q=Two", "Two")]


@pytest.mark.parametrize("page,reason", [
    ("", "empty body"),
    ("<html><head><title>Just a moment...</title></head><body>cf-chl</body></html>", "robot check"),
    ("<html><body><div class=list-container><h3 class=title></h3></div></body></html>", "layout changed"),
    ("<html><body><ol class=trend-card__list></ol></body></html>", "no trends"),
    (('<html><head><link rel=canonical href="https://trends24.in/"></head><body><ol class=trend-card__list>'
     '<li><a class=trend-link href="https://twitter.com/search?q=A">A</a></li></ol></body></html>'), "asked for"),
])
def test_trends24_refusals(page: str, reason: str) -> None:
    with pytest.raises(UpstreamFormatError, match=reason):
        x_trends.parse_trends24(page.encode(), "/united-states/")


@pytest.mark.parametrize("text,count", [("12K", 12000), ("1.2M", 1200000), ("845", 845), ("12,345", 12345),
                                        ("45.3K", 45300), ("", None), ("—", None)])
def test_shown_counts(text: str, count: int | None) -> None:
    assert x_trends.count_text(text) == count


# --- rendered samples -------------------------------------------------------------------------------------


@pytest.mark.parametrize("slug", ["worldwide", "us", "jp", "kr", "new-york", "tokyo"])
def test_samples_round_trip_in_all_three_formats(slug: str) -> None:
    where = x_trends.location(slug)
    rows = samples.trend_rows(slug, variant=2)
    replies = samples.location_replies(where, WHEN, variant=2)
    api, site = replies[x_trends.X_API], replies[x_trends.TRENDS24]
    v1 = x_trends.parse_v1(api[request_key(x_trends.v1_request(where.woeid, "any"))].body)
    assert (v1.location_name, v1.woeid, v1.as_of, v1.created_at) == (where.name, where.woeid, "2026-11-20T05:30:00Z",
                                                                     "2026-11-20T05:23:00Z")
    expected = [(rank, row.name, row.tweet_volume) for rank, row in enumerate(rows, start=1)]
    assert [(e.rank, e.name, e.tweet_volume) for e in v1.entries] == expected
    assert samples.PROMOTED_NAME not in {e.name for e in v1.entries}
    assert all(e.query == row.query and e.url == row.url for e, row in zip(v1.entries, rows, strict=True))
    v2 = x_trends.parse_v2(api[request_key(x_trends.v2_request(where.woeid, "any"))].body)
    assert [(e.rank, e.name, e.tweet_volume) for e in v2.entries] == expected
    page = x_trends.parse_trends24(site[request_key(x_trends.trends24_request(where))].body, where.trends24_path)
    assert page.as_of == "2026-11-20T05:00:00Z"
    assert [(e.rank, e.name, e.tweet_volume) for e in page.entries] == expected
    assert all(e.query == row.query for e, row in zip(page.entries, rows, strict=True))


def test_sample_v1_is_in_the_wire_format() -> None:
    body = samples.render_v1(x_trends.location("jp"), samples.with_promoted(samples.trend_rows("jp")), WHEN)
    assert body.isascii() and b"http:\\/\\/twitter.com\\/search?q=" in body
    assert body.startswith(b'[{"trends":[{"name":')
    doc = json.loads(body)
    assert doc[0]["trends"][samples.PROMOTED_POSITION - 1]["name"] == samples.PROMOTED_NAME
    assert doc[0]["trends"][samples.PROMOTED_POSITION - 1]["promoted_content"] is not None
    assert sum(t["promoted_content"] is None for t in doc[0]["trends"]) == 50


def test_samples_have_unicode_names_null_volumes_and_move() -> None:
    for slug in ("worldwide", "us", "jp", "kr"):
        rows = samples.trend_rows(slug)
        assert len(rows) == 50 and len({r.name for r in rows}) == 50
        assert any(not r.name.isascii() for r in rows)
        assert 0 < sum(r.tweet_volume is None for r in rows) < 50
    before, after = samples.trend_rows("us", 0), samples.trend_rows("us", 1)
    assert before != after and len({r.name for r in after} - {r.name for r in before}) == 3
    assert samples.trend_rows("us", 1) == after
    assert samples.render_v1(x_trends.location("us"), after, WHEN) == samples.render_v1(
        x_trends.location("us"), samples.trend_rows("us", 1), WHEN)


def test_sample_trends24_page_has_hourly_snapshots_newest_first() -> None:
    where = x_trends.location("london")
    body = samples.render_trends24(where, samples.trends24_snapshots(where, WHEN, 3, 50))
    assert body.count(b"<div class=list-container>") == samples.SNAPSHOTS
    assert body.index(b'data-timestamp="1795150800"') < body.index(b'data-timestamp="1795147200"')
    assert x_trends.parse_trends24(body, where.trends24_path).entries[0].name == samples.trend_rows("london", 3)[0].name
    with pytest.raises(UpstreamFormatError, match="asked for"):
        x_trends.parse_trends24(body, "/united-kingdom/")


def test_replay_table_answers_every_location() -> None:
    replies = samples.all_replies(WHEN, variant=1)
    assert set(replies) == {"X_API", "TRENDS24"}
    assert (len(replies["X_API"]), len(replies["TRENDS24"])) == (2 * len(x_trends.LOCATIONS), len(x_trends.LOCATIONS))
    for where in x_trends.LOCATIONS:
        assert request_key(x_trends.v1_request(where.woeid, samples.SAMPLE_TOKEN)) in replies["X_API"]
        assert request_key(x_trends.v2_request(where.woeid, samples.SAMPLE_TOKEN)) in replies["X_API"]
        assert request_key(x_trends.trends24_request(where)) in replies["TRENDS24"]


@pytest.mark.parametrize("volume,shown", [(845, "845"), (1234, "1.2K"), (12345, "12K"), (1_200_000, "1.2M"),
                                          (3_000_000, "3M")])
def test_sample_counts_read_back(volume: int, shown: str) -> None:
    assert samples.shown_count(volume) == shown
    assert x_trends.count_text(shown) == round(float(shown.rstrip("KM")) * {"K": 1000, "M": 10**6}.get(shown[-1], 1))


def _fetch(origin: str, request: UpstreamRequest) -> bytes:
    url = origin + request.path + ("?" + urlencode(request.params) if request.params else "")
    with urllib.request.urlopen(urllib.request.Request(url, headers=dict(request.headers)), timeout=5) as answer:
        body: bytes = answer.read()  # only ever the 127.0.0.1 replay servers
        return body


def test_replay_servers_answer_the_real_requests() -> None:
    where = x_trends.location("sao-paulo")
    tables = samples.location_replies(where, WHEN, variant=1)
    with replaying(tables["X_API"]) as api, replaying(tables["TRENDS24"]) as site:
        v1 = x_trends.parse_v1(_fetch(api.origin, x_trends.v1_request(where.woeid, "secret")))
        v2 = x_trends.parse_v2(_fetch(api.origin, x_trends.v2_request(where.woeid, "secret")))
        page = x_trends.parse_trends24(_fetch(site.origin, x_trends.trends24_request(where)), where.trends24_path)
        headers = [seen for _, seen in api.seen]
    assert (v1.location_name, v1.woeid) == ("São Paulo", 455827)
    assert [e.name for e in v1.entries] == [e.name for e in v2.entries] == [e.name for e in page.entries]
    assert {h.get("authorization") for h in headers} == {"Bearer secret"}
