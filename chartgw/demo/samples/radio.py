"""Sample radio: local stream servers that speak the real protocols, and radio-browser directory bodies.

`RadioStreamServer` is one server on 127.0.0.1 of one of three kinds, written byte for byte as the
real software answers (see `chartgw.upstreams.nowplaying` for the formats):
* "icecast": Icecast 2.4.4, its mounts (`HTTP/1.0 200 OK`, `Server: Icecast 2.4.4`, `icy-*` headers,
  ICY metadata on request) and `/status-json.xsl` (one `source` object, or a list for several mounts);
* "shoutcast1": SHOUTcast DNAS v1.9.8, one stream per server (`ICY 200 OK` status line, `icy-notice*`
  headers) and `/7.html` to a "Mozilla" User-Agent (any other agent gets the stream, as the real one does);
* "icy": a server that has no status page, only ICY metadata in the stream (a relay or CDN).
The title of each mount follows a `Schedule` (offsets from the server's start on an injectable
clock). A mount's `fault` makes it misbehave: "close_mid_block" (hangs up inside its first metadata
block), "no_metadata" (ignores `Icy-MetaData: 1`), "stall" (sends the headers, then nothing).

`station_pool` is a deterministic set of stations for a few countries, titles drawn from the shared
global song pool with station idents and ad breaks in between; `RadioSamples` starts the servers the
pool needs; `directory_replies` renders the radio-browser answers (server list, stations by country
and by tag) with stream URLs pointing at those servers, as a replay table.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import urlsplit

from chartgw.demo.replay import ReplayKey, Reply, request_key, stop_serving
from chartgw.demo.samples import global_songs
from chartgw.demo.samples.bodies import json_body, stable_hex, stable_number
from chartgw.upstreams.radio_browser import (
    servers_request,
    stations_by_country_request,
    stations_by_tag_request,
)

ServerKind = Literal["icecast", "shoutcast1", "icy"]
Fault = Literal["close_mid_block", "no_metadata", "stall"]
JSON_TYPE = "application/json; charset=utf-8"
MP3_FRAME = bytes([0xFF, 0xFB, 0x90, 0x64]) + bytes(413)
"""One silent-looking 128 kbit/s 44.1 kHz MPEG-1 Layer III frame (417 bytes): the 'audio' we send."""


# --- schedules and metadata -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """Titles by time: `entries` are (seconds since the server started, title), sorted; with
    `period` the schedule repeats every `period` seconds, else the last title stays."""

    entries: tuple[tuple[float, str], ...]
    period: float | None = None

    def title_at(self, elapsed: float) -> str:
        if self.period:
            elapsed %= self.period
        current = self.entries[0][1] if self.entries else ""
        for start, title in self.entries:
            if start > elapsed:
                break
            current = title
        return current


def metadata_block(title: str, encoding: str = "utf-8", stream_url: str | None = None) -> bytes:
    """The length byte and the NUL-padded `StreamTitle='...';[StreamUrl='...';]` block. A title the
    encoding cannot write goes out as UTF-8 (what mixed encoders do); over-long blocks are cut at 4080."""
    try:
        raw = title.encode(encoding)
    except UnicodeEncodeError:
        raw = title.encode("utf-8")
    text = b"StreamTitle='" + raw + b"';"
    if stream_url is not None:
        text += b"StreamUrl='" + stream_url.encode("utf-8") + b"';"
    text = text[:255 * 16]
    length = -(-len(text) // 16)
    return bytes([length]) + text.ljust(length * 16, b"\x00")


# --- pages ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mount:
    """One stream of a server: its path, how it names itself, and what it plays when."""

    path: str
    name: str
    schedule: Schedule
    genre: str = "Pop"
    bitrate: int = 128
    metaint: int = 8192
    encoding: str = "utf-8"
    """How titles are written: "utf-8", or "cp1252" like legacy encoders."""
    homepage: str = "http://example.com/"
    fault: Fault | None = None


def render_icecast_status(origin: str, mounts: Sequence[tuple[Mount, str, int]], server_start: float) -> bytes:
    """Icecast 2.4.4's status-json.xsl for (mount, current title, listeners) triples, keys in its order."""
    start = formatdate(server_start, localtime=False, usegmt=False).replace("-0000", "+0000")
    start_iso = time.strftime("%Y-%m-%dT%H:%M:%S+0000", time.gmtime(server_start))
    sources = []
    for mount, title, listeners in mounts:
        sources.append({
            "audio_info": f"bitrate={mount.bitrate}", "bitrate": mount.bitrate, "genre": mount.genre,
            "listener_peak": max(listeners, 1), "listeners": listeners, "listenurl": origin + mount.path,
            "server_description": f"{mount.name} live", "server_name": mount.name, "server_type": "audio/mpeg",
            "server_url": mount.homepage, "stream_start": start, "stream_start_iso8601": start_iso,
            "title": title, "dummy": None,
        })
    host = urlsplit(origin).hostname or "localhost"
    icestats: dict[str, Any] = {
        "admin": "icemaster@localhost", "host": host, "location": "Earth", "server_id": "Icecast 2.4.4",
        "server_start": start, "server_start_iso8601": start_iso,
    }
    if sources:
        icestats["source"] = sources[0] if len(sources) == 1 else sources
    return json.dumps({"icestats": icestats}, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def render_shoutcast_7html(listeners: int, bitrate: int, title: str, up: bool = True, peak: int = 12,
                           max_listeners: int = 500, encoding: str = "utf-8") -> bytes:
    """SHOUTcast v1's 7.html: its odd markup, seven comma fields, the title HTML-escaped (v1 escapes &, <, >)
    and in the bytes the source's encoder sent (`encoding`, UTF-8 where it cannot write the title)."""
    escaped = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    fields = f"{listeners},{1 if up else 0},{max(peak, listeners)},{max_listeners},{listeners},{bitrate},{escaped}"
    page = f'<html><meta http-equiv="Pragma" content="no-cache"></head><body>{fields}</body></html>'
    try:
        return page.encode(encoding)
    except UnicodeEncodeError:
        return page.encode("utf-8")


# --- the server -----------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    request_queue_size = 256
    """Many listeners connect at once (a monitor polling every station): the default backlog of 5 drops
    connections, which then wait a second for the SYN to be sent again."""


class RadioStreamServer:
    """One local stream server of `kind` with `mounts` (a shoutcast1 server has exactly one, served
    at "/" and "/;"). Titles follow each mount's schedule on `clock` (seconds; time.time by default);
    audio is paced at `bytes_per_second` (default: the bitrate) in writes of `chunk_size` bytes;
    `bytes_per_second=0` sends as fast as the client reads."""

    def __init__(self, kind: ServerKind, mounts: Sequence[Mount], *, clock: Callable[[], float] = time.time,
                 bytes_per_second: int | None = None, chunk_size: int = 4096) -> None:
        if kind == "shoutcast1" and len(mounts) != 1:
            raise ValueError("a SHOUTcast v1 server carries exactly one stream")
        self.kind = kind
        self.mounts = {("/" if kind == "shoutcast1" else m.path): m for m in mounts}
        self.clock = clock
        self.bytes_per_second = bytes_per_second
        self.chunk_size = chunk_size
        self.listeners: dict[str, int] = {path: 0 for path in self.mounts}
        self.requests: list[tuple[str, dict[str, str]]] = []
        """(path, lowercased headers) of every request, for tests."""
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._started_at = clock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_GET(self) -> None:
                owner._answer(self)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def stream_url(self, path: str | None = None) -> str:
        """The URL listeners use: the mount's path (a v1 server's stream is at "/;", as directories list it)."""
        if self.kind == "shoutcast1":
            return self.origin + "/;"
        return self.origin + (path or next(iter(self.mounts)))

    def title_now(self, path: str) -> str:
        return self.mounts[path].schedule.title_at(self.clock() - self._started_at)

    def start(self) -> RadioStreamServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        stop_serving(self._httpd)

    # -- answering --

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        path = urlsplit(handler.path).path
        headers = {k.lower(): v for k, v in handler.headers.items()}
        with self._lock:
            self.requests.append((handler.path, headers))
        agent = headers.get("user-agent", "")
        try:
            if self.kind == "icecast" and path == "/status-json.xsl":
                self._page(handler, self._icecast_status(), "application/json; charset=utf-8")
            elif self.kind == "shoutcast1" and path in ("/", "/;", "/7.html", "/index.html"):
                if path == "/7.html" and "mozilla" in agent.lower():
                    self._page(handler, self._seven_html(), "text/html", shoutcast=True)
                else:
                    self._stream(handler, "/", headers)
            elif self.kind != "shoutcast1" and path in self.mounts:
                self._stream(handler, path, headers)
            else:
                self._not_found(handler)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            pass

    def _icecast_status(self) -> bytes:
        with self._lock:
            listeners = dict(self.listeners)
        rows = [(mount, self.title_now(path), listeners[path]) for path, mount in self.mounts.items()]
        return render_icecast_status(self.origin, rows, self._started_at)

    def _seven_html(self) -> bytes:
        mount = self.mounts["/"]
        with self._lock:
            listeners = self.listeners["/"]
        return render_shoutcast_7html(listeners, mount.bitrate, self.title_now("/"), encoding=mount.encoding)

    def _page(self, handler: BaseHTTPRequestHandler, body: bytes, content_type: str, shoutcast: bool = False) -> None:
        if shoutcast:  # v1 writes its pages with lower-case headers and no length
            head = f"HTTP/1.0 200 OK\r\ncontent-type:{content_type}\r\n\r\n"
        else:
            head = (f"HTTP/1.0 200 OK\r\nServer: Icecast 2.4.4\r\nDate: {formatdate(self.clock(), usegmt=True)}\r\n"
                    f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                    "Cache-Control: no-cache\r\nExpires: Mon, 26 Jul 1997 05:00:00 GMT\r\nPragma: no-cache\r\n"
                    "Access-Control-Allow-Origin: *\r\n\r\n")
        handler.wfile.write(head.encode("latin-1") + body)

    def _not_found(self, handler: BaseHTTPRequestHandler) -> None:
        body = b"<html><head><title>Error 404</title></head><body><b>404 - The file you requested could not be " \
               b"found</b></body></html>\r\n"
        server = "Icecast 2.4.4" if self.kind == "icecast" else "nginx"
        head = (f"HTTP/1.0 404 Not Found\r\nServer: {server}\r\nContent-Type: text/html; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\n\r\n")
        handler.wfile.write(head.encode("latin-1") + body)

    def _stream_head(self, mount: Mount, metadata: bool) -> bytes:
        if self.kind == "shoutcast1":
            lines = ["ICY 200 OK",
                     'icy-notice1:<BR>This stream requires <a href="http://www.winamp.com/">Winamp</a><BR>',
                     "icy-notice2:SHOUTcast Distributed Network Audio Server/Linux v1.9.8<BR>",
                     f"icy-name:{mount.name}", f"icy-genre:{mount.genre}", f"icy-url:{mount.homepage}",
                     "content-type:audio/mpeg", "icy-pub:1"]
            lines += [f"icy-metaint:{mount.metaint}"] if metadata else []
            lines += [f"icy-br:{mount.bitrate}"]
        else:
            server = "Icecast 2.4.4" if self.kind == "icecast" else "nginx"
            lines = ["HTTP/1.0 200 OK", f"Server: {server}", f"Date: {formatdate(self.clock(), usegmt=True)}",
                     "Content-Type: audio/mpeg", "Cache-Control: no-cache, no-store",
                     "Expires: Mon, 26 Jul 1997 05:00:00 GMT", "Pragma: no-cache", f"icy-br:{mount.bitrate}",
                     f"icy-description:{mount.name} live", f"icy-genre:{mount.genre}", f"icy-name:{mount.name}",
                     "icy-pub:1", f"icy-url:{mount.homepage}"]
            lines += [f"icy-metaint:{mount.metaint}"] if metadata else []
        return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")

    def _stream(self, handler: BaseHTTPRequestHandler, path: str, headers: Mapping[str, str]) -> None:
        mount = self.mounts[path]
        metadata = headers.get("icy-metadata", "").strip() == "1" and mount.fault != "no_metadata"
        handler.wfile.write(self._stream_head(mount, metadata))
        handler.wfile.flush()
        with self._lock:
            self.listeners[path] += 1
        try:
            if mount.fault == "stall":
                self._stopping.wait()
                return
            self._pump(handler, path, mount, metadata)
        finally:
            with self._lock:
                self.listeners[path] -= 1

    def _pump(self, handler: BaseHTTPRequestHandler, path: str, mount: Mount, metadata: bool) -> None:
        """Audio in `chunk_size` writes with a metadata block after every metaint bytes: the title when
        it changed (always in the first block), else a zero length byte."""
        rate = self.bytes_per_second if self.bytes_per_second is not None else mount.bitrate * 125
        frame_pos, sent_title = 0, None
        with_url = self.kind == "shoutcast1"
        while not self._stopping.is_set():
            out = bytearray()
            audio_left = mount.metaint if metadata else self.chunk_size
            while audio_left:
                take = min(audio_left, len(MP3_FRAME) - frame_pos)
                out += MP3_FRAME[frame_pos:frame_pos + take]
                frame_pos = (frame_pos + take) % len(MP3_FRAME)
                audio_left -= take
            if metadata:
                title = self.title_now(path)
                block = metadata_block(title, mount.encoding, "" if with_url else None) if title != sent_title \
                    else b"\x00"
                sent_title = title
                if mount.fault == "close_mid_block":
                    self._write_paced(handler, bytes(out) + block[:1 + (len(block) - 1) // 2], rate)
                    return
                out += block
            if not self._write_paced(handler, bytes(out), rate):
                return

    def _write_paced(self, handler: BaseHTTPRequestHandler, data: bytes, rate: int) -> bool:
        """Write in chunk_size pieces (flushed one by one, so readers see split boundaries), sleeping
        to hold `rate` bytes a second; False once the server is stopping."""
        for start in range(0, len(data), self.chunk_size):
            if self._stopping.is_set():
                return False
            piece = data[start:start + self.chunk_size]
            handler.wfile.write(piece)
            handler.wfile.flush()
            if rate:
                self._stopping.wait(len(piece) / rate)
        return True


# --- the sample station pool ----------------------------------------------------------------------------


COUNTRIES: dict[str, tuple[str, str, str]] = {
    "US": ("The United States Of America", "California", "english"),
    "GB": ("The United Kingdom Of Great Britain And Northern Ireland", "London", "english"),
    "DE": ("Germany", "Berlin", "german"),
    "KR": ("Republic Of Korea", "Seoul", "korean"),
}
"""Country code -> (the directory's country name, a state, a language)."""
STATION_NAMES = ("Hit Radio", "Pop Wave", "City FM", "Classic Gold", "Chart Express", "Nova Beats")
GENRES = (("pop", "top 40"), ("pop", "dance"), ("hits", "pop"), ("oldies", "pop"), ("charts", "pop"),
          ("dance", "electronic"))
KINDS: tuple[ServerKind, ...] = ("icecast", "icy", "shoutcast1", "icecast", "icy", "icecast")
"""The kind of server each station position streams from: all three methods appear in every country."""


@dataclass(frozen=True)
class SampleStation:
    station_id: str
    name: str
    countrycode: str
    kind: ServerKind
    mount: str
    """The stream's path on its server ("/" for a v1 server: the URL is origin + "/;")."""
    tags: tuple[str, ...]
    schedule: Schedule
    encoding: str = "utf-8"
    bitrate: int = 128
    clickcount: int = 0
    votes: int = 0
    homepage: str = ""


def _uuid(*parts: str) -> str:
    """A stable uuid-shaped id like the directory's stationuuid."""
    digits = "".join(stable_hex(*parts, str(i)) for i in range(4))
    return f"{digits[:8]}-{digits[8:12]}-4{digits[13:16]}-a{digits[17:20]}-{digits[20:32]}"


def station_schedule(name: str, seed: str, song_seconds: float, length: int = 12) -> Schedule:
    """`length` songs of the global pool ("Artist, Artist - Title"), each `song_seconds` long, with the
    station's ident after the 4th and an ad break after the 8th; repeats."""
    songs = global_songs()
    start = stable_number(seed) % len(songs)
    titles: list[str] = []
    for i in range(length):
        song = songs[(start + i * 7) % len(songs)]
        titles.append(f"{', '.join(song.artists)} - {song.title}")
        if i == 3:
            titles.append(f"{name} - Your Number One Hit Music Station")
        if i == 7:
            titles.append("Advert break")
    entries = tuple((i * song_seconds, title) for i, title in enumerate(titles))
    return Schedule(entries=entries, period=len(entries) * song_seconds)


def station_pool(countries: Sequence[str] = tuple(COUNTRIES), per_country: int = 5,
                 song_seconds: float = 30.0) -> list[SampleStation]:
    """`per_country` stations per country (at most 6), most clicked first; the same arguments give the
    same pool. The second German station (an icy one) writes its titles in cp1252 (a legacy encoder)."""
    pool = []
    for cc in countries:
        for i in range(min(per_country, len(STATION_NAMES))):
            name = f"{STATION_NAMES[i]} {cc}"
            kind = KINDS[i]
            slug = name.lower().replace(" ", "")
            pool.append(SampleStation(
                station_id=_uuid("station", cc, str(i)), name=name, countrycode=cc, kind=kind,
                mount="/" if kind == "shoutcast1" else f"/{slug}.mp3", tags=GENRES[i],
                schedule=station_schedule(name, f"{cc}/{i}", song_seconds),
                encoding="cp1252" if (cc, i) == ("DE", 1) else "utf-8",
                clickcount=900 - 120 * i + stable_number(cc, str(i)) % 50, votes=40 + stable_number(cc, "v", str(i)) % 300,
                homepage=f"https://{slug}.example.com/",
            ))
    return pool


class RadioSamples:
    """Every server the pool needs on 127.0.0.1: one Icecast with all icecast mounts, one status-less
    ICY server with all icy mounts, one SHOUTcast v1 server per shoutcast1 station."""

    def __init__(self, pool: Sequence[SampleStation], *, clock: Callable[[], float] = time.time,
                 bytes_per_second: int | None = None, chunk_size: int = 4096) -> None:
        self.pool = list(pool)

        def mount(station: SampleStation) -> Mount:
            return Mount(path=station.mount, name=station.name, schedule=station.schedule, genre=station.tags[0],
                         bitrate=station.bitrate, encoding=station.encoding, homepage=station.homepage)

        options: dict[str, Any] = {"clock": clock, "bytes_per_second": bytes_per_second, "chunk_size": chunk_size}
        self.servers: dict[str, RadioStreamServer] = {}
        for kind in ("icecast", "icy"):
            mounts = [mount(s) for s in self.pool if s.kind == kind]
            if mounts:
                self.servers[kind] = RadioStreamServer(kind, mounts, **options)
        for station in self.pool:
            if station.kind == "shoutcast1":
                self.servers[station.station_id] = RadioStreamServer("shoutcast1", [mount(station)], **options)

    def server_of(self, station: SampleStation) -> RadioStreamServer:
        return self.servers[station.station_id if station.kind == "shoutcast1" else station.kind]

    def stream_urls(self) -> dict[str, str]:
        """station_id -> the stream URL the directory lists."""
        return {s.station_id: self.server_of(s).stream_url(s.mount) for s in self.pool}

    def start(self) -> RadioSamples:
        for server in self.servers.values():
            server.start()
        return self

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()


@contextmanager
def serving_radio(pool: Sequence[SampleStation], **options: Any) -> Iterator[RadioSamples]:
    samples = RadioSamples(pool, **options).start()
    try:
        yield samples
    finally:
        samples.stop()


# --- radio-browser bodies -------------------------------------------------------------------------------


SERVER_ROWS = (("2a03:4000:37:42:c4fe:4cff:fea7:8941", "de1.api.radio-browser.info"),
               ("95.179.139.106", "nl1.api.radio-browser.info"),
               ("2a0a:4cc0:0:db9:282b:91ff:fed0:ddea", "at1.api.radio-browser.info"),
               ("91.132.145.114", "de1.api.radio-browser.info"))


def render_servers() -> bytes:
    return json_body([{"ip": ip, "name": name} for ip, name in SERVER_ROWS])


def _stamp(seconds: int) -> tuple[str, str]:
    moment = time.gmtime(1_763_000_000 + seconds)  # fixed base: Nov 2025, never the wall clock
    return time.strftime("%Y-%m-%d %H:%M:%S", moment), time.strftime("%Y-%m-%dT%H:%M:%SZ", moment)


def station_row(station: SampleStation, stream_url: str, variant: int = 0) -> dict[str, Any]:
    """One station as the directory's JSON writes it (field order, 0/1 booleans, "" for unset text)."""
    country, state, language = COUNTRIES.get(station.countrycode, (station.countrycode, "", ""))
    changed, changed_iso = _stamp(stable_number(station.station_id) % 5_000_000)
    checked, checked_iso = _stamp(6_000_000 + variant * 86_400)
    return {
        "changeuuid": _uuid("change", station.station_id), "stationuuid": station.station_id, "serveruuid": None,
        "name": station.name, "url": stream_url, "url_resolved": stream_url, "homepage": station.homepage,
        "favicon": station.homepage + "favicon.ico", "tags": ",".join(station.tags), "country": country,
        "countrycode": station.countrycode, "iso_3166_2": None, "state": state, "language": language,
        "languagecodes": language[:2], "votes": station.votes,
        "lastchangetime": changed, "lastchangetime_iso8601": changed_iso, "codec": "MP3", "bitrate": station.bitrate,
        "hls": 0, "lastcheckok": 1, "lastchecktime": checked, "lastchecktime_iso8601": checked_iso,
        "lastcheckoktime": checked, "lastcheckoktime_iso8601": checked_iso, "lastlocalchecktime": "",
        "lastlocalchecktime_iso8601": None, "clicktimestamp": checked, "clicktimestamp_iso8601": checked_iso,
        "clickcount": station.clickcount + variant * 3, "clicktrend": variant % 5, "ssl_error": 0,
        "geo_lat": None, "geo_long": None, "has_extended_info": False,
    }


def listed(pool: Sequence[SampleStation], variant: int = 0) -> list[SampleStation]:
    """The stations the directory lists at `variant`: all at 0; from 1 on, the last station of the
    pool's first country is gone (for the "marked inactive, never deleted" path)."""
    if variant == 0 or not pool:
        return list(pool)
    first = pool[0].countrycode
    gone = [s for s in pool if s.countrycode == first][-1]
    return [s for s in pool if s is not gone]


def render_stations(stations: Sequence[SampleStation], stream_urls: Mapping[str, str], variant: int = 0) -> bytes:
    """A station list body, most clicked first (order=clickcount&reverse=true)."""
    rows = sorted(stations, key=lambda s: -s.clickcount)
    return json_body([station_row(s, stream_urls[s.station_id], variant) for s in rows])


def directory_replies(pool: Sequence[SampleStation], stream_urls: Mapping[str, str], *, limit: int,
                      variant: int = 0) -> dict[ReplayKey, Reply]:
    """The replay table of the directory: the server list, stations by each country of the pool and by
    each of its tags, asked with `limit` (the crawl's own)."""
    stations = listed(pool, variant)
    replies = {request_key(servers_request()): Reply(render_servers(), content_type=JSON_TYPE)}
    for cc in dict.fromkeys(s.countrycode for s in pool):
        rows = sorted((s for s in stations if s.countrycode == cc), key=lambda s: -s.clickcount)[:limit]
        replies[request_key(stations_by_country_request(cc, limit))] = Reply(
            render_stations(rows, stream_urls, variant), content_type=JSON_TYPE)
    for tag in dict.fromkeys(t for s in pool for t in s.tags):
        rows = sorted((s for s in stations if tag in s.tags), key=lambda s: -s.clickcount)[:limit]
        replies[request_key(stations_by_tag_request(tag, limit))] = Reply(
            render_stations(rows, stream_urls, variant), content_type=JSON_TYPE)
    return replies


def free_port() -> int:
    """An unused local port (for a server that is down: nothing listens there)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
