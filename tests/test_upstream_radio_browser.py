"""radio-browser.info: request shapes, every real capture (servers, stations, stations-search, stats,
url-click) read row for row, server failover order and fetching across servers, the sample directory
read back, and refusal of bodies that are not the directory's."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from chartgw.crawl.runner import CrawlError, Fetcher, RetryPolicy
from chartgw.demo.replay import Reply, replaying, request_key
from chartgw.demo.samples import radio as samples
from chartgw.upstreams import UpstreamFormatError, radio_browser
from chartgw.upstreams.radio_browser import Server, Station
from tests.fixtures import configure
from tests.fixtures import settings as run_settings

CAPTURES = "radio/radio-browser-json-{}-2022-11.json"


def _capture(shared: Path, name: str) -> bytes:
    return (shared / CAPTURES.format(name)).read_bytes()


# --- requests -------------------------------------------------------------------------------------------


def test_requests_are_the_documented_paths() -> None:
    servers = radio_browser.servers_request()
    assert (servers.upstream, servers.method, servers.path, servers.params) == (
        "RADIO_BROWSER", "GET", "/json/servers", ())
    assert dict(servers.headers)["User-Agent"].startswith("chartgw/")
    by_country = radio_browser.stations_by_country_request("de", 50)
    assert by_country.path == "/json/stations/bycountrycodeexact/DE"
    assert by_country.params == (("order", "clickcount"), ("reverse", "true"), ("hidebroken", "true"), ("limit", "50"))
    assert radio_browser.stations_by_country_request("US", 10, offset=20).params[-1] == ("offset", "20")
    by_tag = radio_browser.stations_by_tag_request(" Hip Hop ", 5)
    assert by_tag.path == "/json/stations/bytagexact/hip%20hop"
    assert by_tag.params[-1] == ("limit", "5")
    assert radio_browser.stats_request().path == "/json/stats"
    assert radio_browser.url_click_request("963ccae5-0601-11e8-ae97-52543be04c81").path == (
        "/json/url/963ccae5-0601-11e8-ae97-52543be04c81")


@pytest.mark.parametrize("call", [
    lambda: radio_browser.stations_by_country_request("DEU", 10),
    lambda: radio_browser.stations_by_country_request("de", 0),
    lambda: radio_browser.stations_by_country_request("de", 10, offset=-1),
    lambda: radio_browser.stations_by_tag_request("  ", 10),
])
def test_bad_request_arguments_are_refused(call: object) -> None:
    with pytest.raises(ValueError):
        call()  # type: ignore[operator]


# --- real captures --------------------------------------------------------------------------------------


def test_stations_capture(shared_upstream: Path) -> None:
    assert radio_browser.parse_stations(_capture(shared_upstream, "stations")) == [Station(
        station_id="941ef6f1-0699-4821-95b1-2b678e3ff62e", name="Best FM", url="http://stream.bestfm.sk/128.mp3",
        url_resolved="http://stream.bestfm.sk/128.mp3", homepage="http://bestfm.sk/", favicon=None, tags=[],
        country="Slovakia", countrycode="SK", state=None, language=None, codec="MP3", bitrate=128, hls=False,
        lastcheckok=True, ssl_error=False, clickcount=47, clicktrend=3, votes=1, geo_lat=None, geo_long=None,
        lastchangetime="2022-11-01T08:42:32Z", lastcheckoktime="2022-11-13T08:52:53Z",
    )]


def test_stations_search_capture(shared_upstream: Path) -> None:
    assert radio_browser.parse_stations(_capture(shared_upstream, "stations-search")) == [Station(
        station_id="30afaa67-5f0d-4edb-9661-074b19098dfe", name="Asian World Radio Latina",
        url="http://stream.zeno.fm/37hmxgfgzs8uv",
        url_resolved="http://stream-54.zeno.fm/37hmxgfgzs8uv?zs=KcdQxTgsTY6Qgig-11YchQ",
        homepage="https://www.facebook.com/As1anWorld", favicon=None,
        tags=["anime", "corea", "deportes", "friki", "japan", "japon", "k-pop", "korea", "kpop", "mexico", "music",
              "musica", "news", "noticias", "otaku", "sports", "vocaloid"],
        country="Mexico", countrycode="MX", state="Ciudad de México",
        language="español internacional,español mexico,spanish", codec="MP3", bitrate=None, hls=False,
        lastcheckok=True, ssl_error=False, clickcount=14, clicktrend=2, votes=31, geo_lat=19.432827116743898,
        geo_long=-99.13315773010255, lastchangetime="2022-05-08T02:06:17Z", lastcheckoktime="2022-11-12T11:21:53Z",
    )]


def test_servers_capture(shared_upstream: Path) -> None:
    servers = radio_browser.parse_servers(_capture(shared_upstream, "servers"))
    assert len(servers) == 6
    assert servers[0] == Server(name="at1.api.radio-browser.info", ip="2a0a:4cc0:0:db9:282b:91ff:fed0:ddea")
    assert servers[3] == Server(name="v22022045963187310.megasrv.de", ip="89.58.16.19")
    assert servers[-1] == Server(name="de1.api.radio-browser.info", ip="91.132.145.114")


def test_stats_capture(shared_upstream: Path) -> None:
    assert radio_browser.parse_stats(_capture(shared_upstream, "stats")) == radio_browser.Stats(
        status="OK", software_version="0.7.24", supported_version=1, stations=33802, stations_broken=456, tags=9015,
        clicks_last_hour=3386, clicks_last_day=119130, languages=334, countries=212)


def test_url_click_capture(shared_upstream: Path) -> None:
    click = radio_browser.parse_url_click(_capture(shared_upstream, "url-click"))
    assert (click.station_id, click.name, click.message) == (
        "963ccae5-0601-11e8-ae97-52543be04c81", "Deutschlandfunk [MP3 128k]", "retrieved station url")
    assert click.url.startswith("http://f111.rndfnk.com/ard/dlf/01/mp3/128/stream.mp3?cid=01FBPWZ12X2XN8SDSMBZ7X0ZTT&")


# --- refusals -------------------------------------------------------------------------------------------


def _station_json(**changes: object) -> bytes:
    row: dict[str, object] = {"stationuuid": "u-1", "name": "X", "url": "http://x/", "url_resolved": "", "tags": "",
                              "hls": 0, "lastcheckok": 1, "clickcount": 1, "votes": 0, "bitrate": 0}
    row.update(changes)
    return json.dumps([row]).encode()


@pytest.mark.parametrize(("body", "message"), [
    (b"", "not JSON"),
    (b"<html><body>502 Bad Gateway</body></html>", "markup"),
    (b"[]", "empty list"),
    (b'{"ok":false,"message":"unknown country"}', "unknown country"),
    (_station_json(hls="yes"), "hls: expected 0 or 1"),
    (_station_json(lastcheckok=2), "lastcheckok: expected 0 or 1"),
    (_station_json(stationuuid=None), "stationuuid"),
    (_station_json(clickcount="many"), "clickcount"),
    (_station_json(geo_lat="north"), "geo_lat"),
    (b'[{"name":"a station","url":"http://x/"}]', "no stationuuid"),
])
def test_stations_refusals(body: bytes, message: str) -> None:
    with pytest.raises(UpstreamFormatError, match=message):
        radio_browser.parse_stations(body)


def test_other_refusals() -> None:
    with pytest.raises(UpstreamFormatError, match="not a host name"):
        radio_browser.parse_servers(b'[{"ip":"1.2.3.4","name":"http://evil/path"}]')
    with pytest.raises(UpstreamFormatError, match="not ok"):
        radio_browser.parse_url_click(b'{"ok":false,"message":"station not found"}')
    with pytest.raises(UpstreamFormatError, match="no station count"):
        radio_browser.parse_stats(b'{"status":"OK"}')


def test_booleans_and_empty_text() -> None:
    (station,) = radio_browser.parse_stations(_station_json(hls=1, lastcheckok=0, tags="pop,,Rock, pop ,pop",
                                                            state="", bitrate=0, countrycode="de"))
    assert (station.hls, station.lastcheckok, station.ssl_error) == (True, False, False)
    assert station.tags == ["pop", "Rock"]
    assert (station.state, station.bitrate, station.url_resolved, station.countrycode) == (None, None, None, "DE")


# --- failover -------------------------------------------------------------------------------------------


def test_server_origins_order(shared_upstream: Path) -> None:
    servers = radio_browser.parse_servers(_capture(shared_upstream, "servers"))
    seeded = ["https://nl1.api.radio-browser.info", "https://at1.api.radio-browser.info",
              "https://de1.api.radio-browser.info", "https://v22022045963187310.megasrv.de",
              "https://all.api.radio-browser.info"]
    assert radio_browser.server_origins(servers, seed=0) == seeded
    assert radio_browser.server_origins(servers, seed=0) == seeded  # the same seed, the same order
    assert radio_browser.server_origins(servers, seed=1)[0] == "https://v22022045963187310.megasrv.de"
    assert radio_browser.server_origins(servers, seed=None) == [
        "https://at1.api.radio-browser.info", "https://de1.api.radio-browser.info",
        "https://nl1.api.radio-browser.info", "https://v22022045963187310.megasrv.de",
        "https://all.api.radio-browser.info"]
    assert radio_browser.server_origins(servers, override="http://127.0.0.1:9000/") == ["http://127.0.0.1:9000"]
    assert radio_browser.server_origins([]) == ["https://all.api.radio-browser.info"]


def test_configured_origins_follow_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    servers = [Server(name="de1.api.radio-browser.info", ip=None), Server(name="nl1.api.radio-browser.info", ip=None)]
    configure("CHARTGW_UPSTREAM_RADIO_BROWSER", None)
    assert radio_browser.configured_origins(servers, seed=None, settings=run_settings()) == [
        "https://de1.api.radio-browser.info", "https://nl1.api.radio-browser.info", "https://all.api.radio-browser.info"]
    configure("CHARTGW_UPSTREAM_RADIO_BROWSER", "http://127.0.0.1:8123")
    assert radio_browser.configured_origins(servers, settings=run_settings()) == ["http://127.0.0.1:8123"]


def test_fetch_fails_over_to_the_next_server() -> None:
    request = radio_browser.stations_by_country_request("DE", 5)
    pool = samples.station_pool(["DE"], per_country=2)
    body = samples.render_stations(pool, {s.station_id: f"http://stream.test/{s.mount}" for s in pool})
    dead = f"http://127.0.0.1:{samples.free_port()}"
    with replaying({request_key(request): Reply(b"<html>oops</html>", 503)}) as broken, \
            replaying({request_key(request): Reply(b"<html>maintenance</html>")}) as wrong, \
            replaying({request_key(request): Reply(body, content_type=samples.JSON_TYPE)}) as good:

        def run(origins: list[str]) -> tuple[str, list[Station]]:
            async def fetch() -> tuple[str, list[Station]]:  # what the directory crawl runs: the runner's Fetcher
                async with httpx.AsyncClient(timeout=5) as client:
                    origin, _, stations = await Fetcher(client, RetryPolicy.of(run_settings()), settings=run_settings()).fetch_any(
                        request, origins, radio_browser.parse_stations)
                    return origin, stations

            return asyncio.run(fetch())

        origin, stations = run([dead, broken.origin, wrong.origin, good.origin])
        assert origin == good.origin
        assert [s.name for s in stations] == ["Hit Radio DE", "Pop Wave DE"]
        assert good.seen[0][1]["user-agent"].startswith("chartgw/")
        with pytest.raises(CrawlError) as error:  # every server failed: the target's crawl fails with why
            run([dead, broken.origin, wrong.origin])
        message = str(error.value)
        assert "ConnectError" in message and "HTTP 503" in message and "markup" in message


# --- the sample directory -------------------------------------------------------------------------------


def test_sample_directory_round_trip() -> None:
    pool = samples.station_pool(["US", "DE"], per_country=4)
    urls = {s.station_id: f"http://127.0.0.1:8000{s.mount}" for s in pool}
    replies = samples.directory_replies(pool, urls, limit=50)
    servers = radio_browser.parse_servers(replies[request_key(radio_browser.servers_request())].body)
    assert [s.name for s in servers][:2] == ["de1.api.radio-browser.info", "nl1.api.radio-browser.info"]
    german = radio_browser.parse_stations(
        replies[request_key(radio_browser.stations_by_country_request("DE", 50))].body)
    assert [s.name for s in german] == ["Hit Radio DE", "Pop Wave DE", "City FM DE", "Classic Gold DE"]
    first = german[0]
    assert (first.station_id, first.countrycode, first.country, first.tags, first.hls, first.lastcheckok) == (
        pool[4].station_id, "DE", "Germany", ["pop", "top 40"], False, True)
    assert first.url == urls[first.station_id]
    assert [s.clickcount for s in german] == sorted((s.clickcount for s in german), reverse=True)
    dance = radio_browser.parse_stations(replies[request_key(radio_browser.stations_by_tag_request("dance", 50))].body)
    assert {s.name for s in dance} == {"Pop Wave US", "Pop Wave DE"}
    assert samples.directory_replies(pool, urls, limit=50) == replies  # deterministic


def test_sample_directory_variant_drops_a_station() -> None:
    pool = samples.station_pool(["US", "DE"], per_country=3)
    urls = {s.station_id: "http://127.0.0.1/" for s in pool}
    key = request_key(radio_browser.stations_by_country_request("US", 10))
    before = radio_browser.parse_stations(samples.directory_replies(pool, urls, limit=10)[key].body)
    after = radio_browser.parse_stations(samples.directory_replies(pool, urls, limit=10, variant=1)[key].body)
    assert [s.name for s in before] == ["Hit Radio US", "Pop Wave US", "City FM US"]
    assert [s.name for s in after] == ["Hit Radio US", "Pop Wave US"]
    assert after[0].clickcount == before[0].clickcount + 3
