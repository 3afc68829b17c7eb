"""Now-playing: the ICY metadata framing (every split of the bytes, empty and non-UTF-8 titles, quotes
and semicolons inside titles, a stream closed inside a block), the Icecast and Shoutcast status
parsers, status URL derivation, every method read from a local server speaking it byte for byte
(chartgw.demo.samples.radio), and play splitting."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import httpx
import pytest

from chartgw.demo.replay import Reply, replay_key, replaying
from chartgw.demo.samples import radio as samples
from chartgw.demo.samples.radio import Mount, RadioStreamServer, Schedule
from chartgw.upstreams import UpstreamFormatError, nowplaying
from chartgw.upstreams.nowplaying import IcyMetadataParser, NowPlaying, NowPlayingError, PlayText

T = TypeVar("T")
SCHEDULE = Schedule(entries=((0.0, "Daft Punk - One More Time"), (10.0, "Sigur Rós - Hoppípolla"),
                             (20.0, "")), period=30.0)


def _run(make: Callable[[httpx.AsyncClient], Awaitable[T]]) -> T:
    async def main() -> T:
        async with httpx.AsyncClient() as client:
            return await make(client)
    return asyncio.run(main())


class FakeClock:
    """The stream servers' clock, moved by hand."""

    def __init__(self, now: float = 1_790_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def serve(clock: FakeClock) -> Iterator[Callable[..., RadioStreamServer]]:
    started: list[RadioStreamServer] = []

    def start(kind: samples.ServerKind, *mounts: Mount, chunk_size: int = 4096) -> RadioStreamServer:
        server = RadioStreamServer(kind, mounts, clock=clock, bytes_per_second=0, chunk_size=chunk_size).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def _stream(metaint: int, titles: list[bytes | None], audio: bytes = b"\xff\xfb\x90\x64") -> bytes:
    """An ICY body: for each entry, metaint audio bytes then its block (None: a zero length byte)."""
    out = bytearray()
    for title in titles:
        out += (audio * metaint)[:metaint]
        if title is None:
            out += b"\x00"
        else:
            text = b"StreamTitle='" + title + b"';StreamUrl='';"
            length = -(-len(text) // 16)
            out += bytes([length]) + text.ljust(length * 16, b"\x00")
    return bytes(out)


# --- the ICY framing ------------------------------------------------------------------------------------


BODY = _stream(32, [b"A - One", None, b"It's here; ok - Don't Stop", b"", b"Beyonc\xe9 - D\xe9j\xe0 Vu",
                    "Sigur Rós - Hoppípolla".encode(), b"Odd \x81 byte"])
TITLES = ["A - One", "It's here; ok - Don't Stop", "", "Beyoncé - Déjà Vu", "Sigur Rós - Hoppípolla", "Odd \x81 byte"]


def test_icy_parser_reads_every_title() -> None:
    parser = IcyMetadataParser(32)
    assert parser.feed(BODY) == TITLES
    assert (parser.audio_bytes, parser.blocks, parser.mid_block) == (7 * 32, 7, False)
    assert parser.last_fields == {"StreamTitle": "Odd \x81 byte", "StreamUrl": ""}
    parser.close()


def test_icy_parser_any_split_gives_the_same_titles() -> None:
    for cut in range(1, len(BODY)):
        parser = IcyMetadataParser(32)
        assert parser.feed(BODY[:cut]) + parser.feed(BODY[cut:]) == TITLES, cut
    parser = IcyMetadataParser(32)
    assert [t for i in range(len(BODY)) for t in parser.feed(BODY[i:i + 1])] == TITLES


def test_icy_parser_closed_mid_block() -> None:
    parser = IcyMetadataParser(32)
    parser.feed(BODY[:32 + 1 + 5])
    assert parser.mid_block
    with pytest.raises(NowPlayingError, match="after 5 of 48 bytes") as error:
        parser.close()
    assert error.value.reason == "closed-mid-block"
    between = IcyMetadataParser(32)
    between.feed(BODY[:32])
    between.close()  # ended before a length byte: not inside a block


@pytest.mark.parametrize(("block", "fields"), [
    (b"StreamTitle='';\x00\x00", {"StreamTitle": ""}),
    (b"StreamTitle='A - B';StreamUrl='http://x/?a=1;b=2';", {"StreamTitle": "A - B", "StreamUrl": "http://x/?a=1;b=2"}),
    (b"StreamTitle='Guns N' Roses - Sweet Child O' Mine';", {"StreamTitle": "Guns N' Roses - Sweet Child O' Mine"}),
    (b"StreamTitle='a';b - c';", {"StreamTitle": "a';b - c"}),
    (b"StreamTitle='No semicolon - at end'\x00\x00\x00", {"StreamTitle": "No semicolon - at end"}),
    (b"StreamTitle='Motorhead \xe4 - \x80uro';", {"StreamTitle": "Motorhead ä - €uro"}),
    (b"\x00" * 16, {}),
])
def test_metadata_blocks(block: bytes, fields: dict[str, str]) -> None:
    assert nowplaying.parse_metadata_block(block) == fields


def test_decode_title_fallbacks() -> None:
    assert nowplaying.decode_title("Beyoncé".encode()) == "Beyoncé"
    assert nowplaying.decode_title(b"Beyonc\xe9") == "Beyoncé"
    assert nowplaying.decode_title(b"\x93Hi\x94") == "\u201cHi\u201d"
    assert nowplaying.decode_title(b"a\x81b") == "a\x81b"  # undefined in cp1252: latin-1


def test_metaint_and_parser_limits() -> None:
    assert nowplaying.metaint_of({"icy-metaint": "16000"}) == 16000
    for headers in ({}, {"icy-metaint": "abc"}, {"icy-metaint": "0"}, {"icy-metaint": str(1 << 21)}):
        with pytest.raises(NowPlayingError) as error:
            nowplaying.metaint_of(headers)
        assert error.value.reason == "no-metadata"
    with pytest.raises(ValueError):
        IcyMetadataParser(0)


# --- status pages ---------------------------------------------------------------------------------------


def _source(mount: str, title: object, **extra: object) -> dict[str, object]:
    return {"audio_info": "bitrate=128", "bitrate": 128, "genre": "Pop", "listener_peak": 9, "listeners": 4,
            "listenurl": f"http://radio.example:8000{mount}", "server_name": "Radio X", "server_type": "audio/mpeg",
            "title": title, **extra, "dummy": None}


def _icestats(source: object) -> bytes:
    stats: dict[str, object] = {"admin": "icemaster@localhost", "host": "radio.example", "server_id": "Icecast 2.4.4"}
    if source is not None:
        stats["source"] = source
    return json.dumps({"icestats": stats}).encode()


def test_icecast_status_single_and_list() -> None:
    single = nowplaying.parse_icecast_status(_icestats(_source("/live", "A - B")), "http://radio.example:8000/live")
    assert single == NowPlaying(method="icecast", stream_title="A - B", server_name="Radio X", listeners=4, bitrate=128)
    many = _icestats([_source("/low", "X - Low"), _source("/high.mp3", "Y - High", listeners=7)])
    picked = nowplaying.parse_icecast_status(many, "https://radio.example/high.mp3?token=1")
    assert (picked.stream_title, picked.listeners) == ("Y - High", 7)
    alias = nowplaying.parse_icecast_status(_icestats(_source("/live", "A - B")), "http://cdn.example/other")
    assert alias.stream_title == "A - B"  # a lone source is ours even behind another path
    with pytest.raises(UpstreamFormatError, match="no source for mount '/other'"):
        nowplaying.parse_icecast_status(many, "http://radio.example:8000/other")


def test_icecast_status_quirks() -> None:
    ogg = nowplaying.parse_icecast_status(_icestats(_source("/ogg", "Title", artist="Artist")), "http://h/ogg")
    assert (ogg.stream_title, ogg.artist, ogg.title) == ("Artist - Title", "Artist", "Title")
    numeric = _icestats(_source("/a", 1999, server_name=104.6))
    assert nowplaying.parse_icecast_status(numeric, "http://h/a").stream_title == "1999"
    no_title = _icestats({k: v for k, v in _source("/a", None).items() if k != "title"})
    assert nowplaying.parse_icecast_status(no_title, "http://h/a").stream_title is None
    raw_control = _icestats(_source("/a", "A - B")).replace(b"A - B", b"A\\t- B\tx")
    assert nowplaying.parse_icecast_status(raw_control, "http://h/a").stream_title == "A\t- B\tx"
    with pytest.raises(nowplaying.SourceDownError):
        nowplaying.parse_icecast_status(_icestats(None), "http://h/a")
    with pytest.raises(UpstreamFormatError, match="markup"):
        nowplaying.parse_icecast_status(b"<html><body>Icecast2 Status</body></html>", "http://h/a")
    with pytest.raises(UpstreamFormatError, match="no icestats"):
        nowplaying.parse_icecast_status(b'{"status": "ok"}', "http://h/a")


def test_shoutcast_7html() -> None:
    page = samples.render_shoutcast_7html(12, 128, "Earth, Wind & Fire - September")
    assert page == (b'<html><meta http-equiv="Pragma" content="no-cache"></head><body>12,1,12,500,12,128,'
                    b"Earth, Wind &amp; Fire - September</body></html>")
    assert nowplaying.parse_shoutcast_7html(page) == NowPlaying(
        method="shoutcast1", stream_title="Earth, Wind & Fire - September", listeners=12, bitrate=128)
    legacy = samples.render_shoutcast_7html(1, 64, "Beyoncé - Halo", encoding="cp1252")
    assert b"Beyonc\xe9" in legacy
    assert nowplaying.parse_shoutcast_7html(legacy).stream_title == "Beyoncé - Halo"
    empty = b"<HTML><BODY>0,1,0,32,0,128,</BODY></HTML>"
    assert nowplaying.parse_shoutcast_7html(empty).stream_title == ""
    with pytest.raises(nowplaying.SourceDownError):
        nowplaying.parse_shoutcast_7html(b"<html><body>0,0,0,32,0,0,</body></html>")
    for broken in (b"<html><body>SHOUTcast Administrator</body></html>", b"12,1,5", b""):
        with pytest.raises(UpstreamFormatError):
            nowplaying.parse_shoutcast_7html(broken)


def test_shoutcast_v2_pages() -> None:
    assert nowplaying.parse_shoutcast2_currentsong(b"Massive Attack - Teardrop") == NowPlaying(
        method="shoutcast2", stream_title="Massive Attack - Teardrop")
    assert nowplaying.parse_shoutcast2_currentsong(b"").stream_title == ""
    with pytest.raises(UpstreamFormatError):
        nowplaying.parse_shoutcast2_currentsong(b"<html><body>Invalid resource</body></html>")
    stats = _v2_stats("Massive Attack - Teardrop")
    assert nowplaying.parse_shoutcast2_stats(stats) == NowPlaying(
        method="shoutcast2", stream_title="Massive Attack - Teardrop", server_name="Trip Hop FM", listeners=3,
        bitrate=128)
    with pytest.raises(nowplaying.SourceDownError):
        nowplaying.parse_shoutcast2_stats(_v2_stats("", streamstatus=0))
    with pytest.raises(UpstreamFormatError):
        nowplaying.parse_shoutcast2_stats(b'{"version": "2.6"}')


def _v2_stats(title: str, streamstatus: int = 1) -> bytes:
    """`/stats?sid=1&json=1` as DNAS 2.x writes it (documented field set; numbers as it types them)."""
    return json.dumps({
        "currentlisteners": 3, "peaklisteners": 9, "maxlisteners": 100, "uniquelisteners": 3, "averagetime": 420,
        "servergenre": "Trip Hop", "servergenre2": "", "servergenre3": "", "servergenre4": "", "servergenre5": "",
        "serverurl": "http://triphop.example", "servertitle": "Trip Hop FM", "songtitle": title, "streamhits": 77,
        "streamstatus": streamstatus, "backupstatus": 0, "streamlisted": 1, "streamlistederror": 0,
        "streampath": "/stream", "streamuptime": 3600, "bitrate": "128", "samplerate": "44100",
        "content": "audio/mpeg", "version": "2.6.1.777 (posix(linux x64))"}, separators=(",", ":")).encode()


def test_status_urls_and_kinds() -> None:
    assert nowplaying.icecast_status_url("https://ice.example:8443/live.mp3?x=1") == (
        "https://ice.example:8443/status-json.xsl")
    assert nowplaying.shoutcast1_status_url("http://sc.example:8010/;") == "http://sc.example:8010/7.html"
    assert nowplaying.shoutcast2_currentsong_url("http://sc.example:8000/stream/2/") == (
        "http://sc.example:8000/currentsong?sid=2")
    assert nowplaying.shoutcast2_stats_url("http://sc.example:8000/;") == "http://sc.example:8000/stats?sid=1&json=1"
    assert nowplaying.mount_of("http://h:8000") == "/"
    with pytest.raises(ValueError):
        nowplaying.icecast_status_url("rtsp://h/live")
    assert nowplaying.server_kind({"Server": "Icecast 2.4.4"}) == "icecast"
    assert nowplaying.server_kind({"icy-notice2": "SHOUTcast Distributed Network Audio Server/Linux v1.9.8<BR>"}) == (
        "shoutcast1")
    assert nowplaying.server_kind({"Server": "Shoutcast v2.6.1.777"}) == "shoutcast2"
    assert nowplaying.server_kind({"Server": "nginx"}) is None
    assert nowplaying.methods_for("icecast") == ["icecast", "icy"]
    assert nowplaying.methods_for(None) == ["icecast", "shoutcast2", "shoutcast1", "icy"]


# --- each method against a local server -----------------------------------------------------------------


def test_icecast_server(serve: Callable[..., RadioStreamServer], clock: FakeClock) -> None:
    server = serve("icecast", Mount(path="/live.mp3", name="Radio Uno", schedule=SCHEDULE),
                   Mount(path="/other.mp3", name="Radio Due", schedule=Schedule(((0.0, "X - Y"),))))
    url = server.stream_url("/live.mp3")
    first = _run(lambda c: nowplaying.fetch_icecast(c, url))
    assert first == NowPlaying(method="icecast", stream_title="Daft Punk - One More Time", server_name="Radio Uno",
                               listeners=0, bitrate=128)
    clock.now += 12
    assert _run(lambda c: nowplaying.fetch_icecast(c, url)).stream_title == "Sigur Rós - Hoppípolla"
    assert _run(lambda c: nowplaying.fetch_icecast(c, server.stream_url("/other.mp3"))).stream_title == "X - Y"
    assert _run(lambda c: nowplaying.read_icy(c, url, timeout=5)) == NowPlaying(
        method="icy", stream_title="Sigur Rós - Hoppípolla", server_name="Radio Uno", bitrate=128)
    assert _run(lambda c: nowplaying.probe(c, url)).method == "icecast"


def test_shoutcast1_server(serve: Callable[..., RadioStreamServer], clock: FakeClock) -> None:
    server = serve("shoutcast1", Mount(path="/", name="Legacy FM", schedule=SCHEDULE, encoding="cp1252"))
    url = server.stream_url()
    assert url.endswith("/;")
    clock.now += 11
    reading = _run(lambda c: nowplaying.fetch_shoutcast1(c, url))
    assert (reading.method, reading.stream_title, reading.bitrate) == ("shoutcast1", "Sigur Rós - Hoppípolla", 128)
    assert any(path == "/7.html" and "mozilla" in headers["user-agent"].lower() for path, headers in server.requests)
    icy = _run(lambda c: nowplaying.read_icy(c, url, timeout=5))  # "ICY 200 OK": read over a bare socket
    assert icy == NowPlaying(method="icy", stream_title="Sigur Rós - Hoppípolla", server_name="Legacy FM", bitrate=128)
    assert _run(lambda c: nowplaying.probe(c, url)).method == "shoutcast1"


def test_icy_only_server_small_reads(serve: Callable[..., RadioStreamServer], clock: FakeClock) -> None:
    """Metaint 100 in 7-byte writes: length bytes and blocks land across reads."""
    server = serve("icy", Mount(path="/s", name="Relay", schedule=SCHEDULE, metaint=100), chunk_size=7)
    url = server.stream_url()

    async def titles(client: httpx.AsyncClient) -> list[str]:
        seen: list[str] = []
        async for title in nowplaying.icy_titles(client, url, read_timeout=5):
            seen.append(title)
            clock.now += 10  # the next title comes at the next change
            if len(seen) == 4:
                break
        return seen

    assert _run(titles) == ["Daft Punk - One More Time", "Sigur Rós - Hoppípolla", "", "Daft Punk - One More Time"]
    assert _run(lambda c: nowplaying.probe(c, url)).method == "icy"


def test_icy_non_utf8_title(serve: Callable[..., RadioStreamServer], clock: FakeClock) -> None:
    schedule = Schedule(((0.0, "Beyoncé - Déjà Vu"),))
    server = serve("icy", Mount(path="/legacy", name="Old Encoder", schedule=schedule, metaint=64, encoding="cp1252"))
    assert samples.metadata_block("Beyoncé - Déjà Vu", "cp1252")[1:].rstrip(b"\x00") == (
        b"StreamTitle='Beyonc\xe9 - D\xe9j\xe0 Vu';")
    reading = _run(lambda c: nowplaying.read_icy(c, server.stream_url(), timeout=5))
    assert reading.stream_title == "Beyoncé - Déjà Vu"


@pytest.mark.parametrize("kind", ["icy", "shoutcast1"])
@pytest.mark.parametrize(("fault", "reason"), [
    ("close_mid_block", "closed-mid-block"), ("no_metadata", "no-metadata"), ("stall", "stalled")])
def test_faulty_streams(serve: Callable[..., RadioStreamServer], kind: samples.ServerKind, fault: samples.Fault,
                        reason: str) -> None:
    """Over httpx (icy) and over the bare socket (a v1 server's "ICY 200 OK")."""
    server = serve(kind, Mount(path="/", name="Broken", schedule=SCHEDULE, metaint=256, fault=fault))

    async def first(client: httpx.AsyncClient) -> str:
        async for title in nowplaying.icy_titles(client, server.stream_url(), read_timeout=0.3):
            return title
        raise AssertionError("icy_titles ended without an error")

    with pytest.raises(NowPlayingError) as error:
        _run(first)
    assert error.value.reason == reason


def test_read_icy_bounds_the_whole_read(serve: Callable[..., RadioStreamServer]) -> None:
    server = serve("icy", Mount(path="/s", name="Silent", schedule=SCHEDULE, fault="stall"))
    with pytest.raises(NowPlayingError) as error:
        _run(lambda c: nowplaying.read_icy(c, server.stream_url(), timeout=0.3))
    assert error.value.reason in ("stalled", "no-title")


def test_unreachable_and_missing_pages(serve: Callable[..., RadioStreamServer]) -> None:
    dead = f"http://127.0.0.1:{samples.free_port()}/live"
    with pytest.raises(NowPlayingError) as error:
        _run(lambda c: nowplaying.read_icy(c, dead, timeout=2))
    assert error.value.reason == "unreachable"
    server = serve("icy", Mount(path="/s", name="Relay", schedule=SCHEDULE))
    with pytest.raises(NowPlayingError) as missing:
        _run(lambda c: nowplaying.fetch_icecast(c, server.stream_url()))
    assert missing.value.reason == "http-status"


def test_status_page_that_streams_is_refused(serve: Callable[..., RadioStreamServer]) -> None:
    """A server that streams where the status page should be: refused without reading it all."""
    server = serve("icy", Mount(path="/status-json.xsl", name="Odd", schedule=SCHEDULE))
    with pytest.raises(NowPlayingError) as error:
        _run(lambda c: nowplaying.fetch_icecast(c, server.origin + "/live"))
    assert error.value.reason == "not-status"


def test_shoutcast2_over_http() -> None:
    replies = {replay_key("GET", "/stats", [("sid", "1"), ("json", "1")]): Reply(_v2_stats("A - B"),
                                                                               content_type="application/json"),
               replay_key("GET", "/currentsong", [("sid", "2")]): Reply(b"C - D", content_type="text/plain")}
    with replaying(replies) as server:
        assert _run(lambda c: nowplaying.fetch_shoutcast2(c, server.origin + "/;")).stream_title == "A - B"
        assert _run(lambda c: nowplaying.fetch_shoutcast2(c, server.origin + "/stream/2/")).stream_title == "C - D"


# --- play splitting -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "kind", "artist", "title"), [
    ("Daft Punk - One More Time", "track", "Daft Punk", "One More Time"),
    ("  Sigur Rós  –  Hoppípolla ", "track", "Sigur Rós", "Hoppípolla"),
    ("Olivia Rodrigo - Can’t Catch Me Now - from The Hunger Games", "track", "Olivia Rodrigo",
     "Can’t Catch Me Now - from The Hunger Games"),
    ("Jay-Z - 99 Problems", "track", "Jay-Z", "99 Problems"),
    ("A — B", "track", "A", "B"),
    ("Morning show with Anna", "raw", None, None),
    ("Artist-Title", "raw", None, None),
    (" - Title only", "raw", None, None),
    ("Unknown - Unknown", "raw", None, None),
    ("", "empty", None, None),
    ("   ", "empty", None, None),
    ("Advert break", "ad", None, None),
    ("COMMERCIAL - Car dealer", "ad", None, None),
    ("Hit Radio US - Your Number One Hit Music Station", "ident", None, None),
    ("hitradio us", "ident", None, None),
    ("www.hitradio.example.com", "ident", None, None),
    ("Now on air - Hit Radio US", "ident", None, None),
    ("Hit Radio US Morning Show - Anna & Ben", "ident", None, None),
    ("Radio US - Hit Me Baby One More Time", "track", "Radio US", "Hit Me Baby One More Time"),
])
def test_classify_stream_title(text: str, kind: str, artist: str | None, title: str | None) -> None:
    judged = nowplaying.classify_stream_title(text, station_name="Hit Radio US")
    assert judged == PlayText(kind=kind, artist=artist, title=title, stream_title=" ".join(text.split()))  # type: ignore[arg-type]
    expected = (artist, title) if kind == "track" else None
    assert nowplaying.split_stream_title(text, "Hit Radio US") == expected


def test_split_without_station_name() -> None:
    assert nowplaying.split_stream_title("Radio Ga Ga - Queen") == ("Radio Ga Ga", "Queen")
    assert nowplaying.split_stream_title(None) is None
    assert nowplaying.split_stream_title("Kiss - Detroit Rock City", "Kiss FM") == ("Kiss", "Detroit Rock City")


# --- samples --------------------------------------------------------------------------------------------


def test_schedule_and_blocks() -> None:
    assert [SCHEDULE.title_at(t) for t in (0, 9.9, 10, 25, 31)] == [
        "Daft Punk - One More Time", "Daft Punk - One More Time", "Sigur Rós - Hoppípolla", "",
        "Daft Punk - One More Time"]
    assert Schedule(((0.0, "a"), (5.0, "b"))).title_at(500) == "b"
    block = samples.metadata_block("A - B")
    assert block == bytes([2]) + b"StreamTitle='A - B';".ljust(32, b"\x00")
    assert samples.metadata_block("")[1:].rstrip(b"\x00") == b"StreamTitle='';"
    assert len(samples.metadata_block("x" * 5000)) == 1 + 255 * 16


def test_icecast_status_render_shapes() -> None:
    one = json.loads(samples.render_icecast_status("http://h:1", [(Mount("/a", "A", SCHEDULE), "t", 2)], 0.0))
    assert one["icestats"]["source"]["listenurl"] == "http://h:1/a"
    assert one["icestats"]["server_start_iso8601"] == "1970-01-01T00:00:00+0000"
    two = json.loads(samples.render_icecast_status("http://h:1", [(Mount("/a", "A", SCHEDULE), "t", 2),
                                                                  (Mount("/b", "B", SCHEDULE), "u", 0)], 0.0))
    assert [s["title"] for s in two["icestats"]["source"]] == ["t", "u"]
    none = json.loads(samples.render_icecast_status("http://h:1", [], 0.0))
    assert "source" not in none["icestats"]


def test_station_pool_servers(clock: FakeClock) -> None:
    pool = samples.station_pool(["GB", "DE"], per_country=3, song_seconds=5)
    kinds = {nowplaying.classify_stream_title(t, pool[0].name).kind for _, t in pool[0].schedule.entries}
    assert kinds == {"track", "ident", "ad"}
    assert [s.kind for s in pool] == ["icecast", "icy", "shoutcast1"] * 2
    assert samples.station_pool(["GB", "DE"], per_country=3, song_seconds=5) == pool
    assert [s.encoding for s in pool if s.countrycode == "DE"] == ["utf-8", "cp1252", "utf-8"]
    titles = [t for _, t in pool[0].schedule.entries]
    assert "Hit Radio GB - Your Number One Hit Music Station" in titles and "Advert break" in titles
    with samples.serving_radio(pool, clock=clock, bytes_per_second=0) as radio:
        urls = radio.stream_urls()
        assert len(radio.servers) == 4  # one Icecast, one ICY relay, two SHOUTcast v1
        readings = _run(lambda c: asyncio.gather(*(nowplaying.probe(c, urls[s.station_id]) for s in pool)))
    assert [r.method for r in readings] == ["icecast", "icy", "shoutcast1"] * 2
    assert all(r.stream_title == s.schedule.title_at(0) for r, s in zip(readings, pool, strict=True))
