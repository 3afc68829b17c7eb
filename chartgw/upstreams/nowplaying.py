"""What a radio stream is playing now, read from the stream's own server: the heart of the /radio monitor.

Four ways, cheapest first where the server offers them:
* Icecast `GET /status-json.xsl` (Icecast >= 2.4): `{"icestats": {..., "source": {...} | [{...}, ...]}}`,
  one `source` per live mount (an object when there is one, a list when more, absent when none),
  each with `listenurl` (http://host:port/mount), `server_name`, `listeners`, `bitrate`, `title` and,
  for Ogg/Vorbis sources, a separate `artist`. Older Icecast emits raw control characters in titles
  and numbers for numeric-looking names, so titles are read leniently (`strict=False`, str()).
* Shoutcast v1 `GET /7.html` (needs a browser-like User-Agent, or the server streams audio instead):
  `<html><body>listeners,status,peak,max,unique,bitrate,songtitle</body></html>`; the title is last
  and may hold commas; HTML entities are escaped; status 0 means no source is connected.
* Shoutcast v2 `GET /currentsong?sid=1` (the title as plain text) and `GET /stats?sid=1&json=1`
  (`songtitle`, `servertitle`, `currentlisteners`, `streamstatus`, `bitrate` as a string ...).
* ICY in-stream metadata, any server: ask with `Icy-MetaData: 1`; the answer's `icy-metaint: N` says
  that after every N audio bytes comes one length byte L and L*16 bytes of metadata
  (`StreamTitle='...';StreamUrl='...';` padded with NULs); L = 0 means unchanged. We discard the
  audio as it is read and keep only counters.

Confidence: no real capture of any of these is in ../shared (NOTES section 8 lists none). The formats
are from the servers' documentation and public client code (Icecast's status-json.xsl output, Shoutcast
DNAS v1/v2 pages, the ICY metadata framing as players implement it); the samples in
`chartgw.demo.samples.radio` speak them byte for byte and the tests read those.

Shoutcast v1 answers a stream request with the status line `ICY 200 OK`, which httpx refuses; the
ICY reader then reads that stream over a bare asyncio socket (`icy_titles_socket`).

Play splitting (`classify_stream_title`) turns an announced title into a track or flags it as raw text.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
import msgspec

from chartgw.core.text import compact, fold
from chartgw.upstreams import UpstreamFormatError
from chartgw.upstreams.fields import clean, decode, snippet

Method = Literal["icecast", "shoutcast1", "shoutcast2", "icy"]
Kind = Literal["track", "raw", "ident", "ad", "empty"]

BROWSER_UA = "Mozilla/5.0 (compatible; chartgw-radio-monitor/0.1)"
"""Shoutcast v1 serves its status pages only to a User-Agent containing "Mozilla"."""
STATUS_BODY_LIMIT = 256 * 1024
"""A status page is a few KB; a bigger answer is a stream served in its place (old Shoutcast does that)."""
MAX_METAINT = 1 << 20
"""No real server puts a megabyte of audio between metadata blocks; a bigger value is not ICY."""


class NowPlayingError(Exception):
    """Now-playing could not be read; `reason` is a short code for the station's state."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        """One of: no-metadata, closed, closed-mid-block, stalled, http-status, unreachable,
        not-status, bad-status, no-source, no-title."""
        self.detail = detail


class SourceDownError(UpstreamFormatError):
    """The status page says the server has no live source (the station is off air)."""


class NowPlaying(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One reading of what a station plays, by whichever method answered."""

    method: Method
    stream_title: str | None
    """The announced text as sent ("Artist - Title"); "" when the server announces an empty title,
    null when it has none at all."""
    artist: str | None = None
    """Only where the server sends the artist separately (Icecast with Ogg/Vorbis comments)."""
    title: str | None = None
    """Only with `artist` (Icecast with Ogg/Vorbis comments)."""
    server_name: str | None = None
    """`server_name` / `servertitle` / `icy-name`: the name the stream gives itself."""
    listeners: int | None = None
    bitrate: int | None = None
    """kbit/s as the server states it."""


class PlayText(msgspec.Struct, kw_only=True, omit_defaults=False):
    """An announced title judged: a track with artist and title, or raw text flagged with why."""

    kind: Kind
    """track; raw (no separator); ident (the station naming itself); ad; empty."""
    artist: str | None
    title: str | None
    stream_title: str


# --- where the status pages are -------------------------------------------------------------------------


def _origin(stream_url: str) -> str:
    parts = urlsplit(stream_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"not an http(s) stream URL: {stream_url!r}")
    return f"{parts.scheme}://{parts.netloc}"


def mount_of(stream_url: str) -> str:
    """The Icecast mount a stream URL names: its path ("/live.mp3"), "/" for none."""
    return urlsplit(stream_url).path or "/"


def icecast_status_url(stream_url: str) -> str:
    """status-json.xsl at the root of the stream's server (it lists every mount; we pick ours)."""
    return _origin(stream_url) + "/status-json.xsl"


def shoutcast1_status_url(stream_url: str) -> str:
    return _origin(stream_url) + "/7.html"


def shoutcast2_sid(stream_url: str) -> int:
    """The stream id of a Shoutcast v2 URL: "/stream/2/" or "?sid=2" name it; else 1 (the default stream)."""
    parts = urlsplit(stream_url)
    match = re.search(r"/stream/(\d+)(?:/|$)", parts.path) or re.search(r"(?:^|&)sid=(\d+)", parts.query)
    return int(match.group(1)) if match else 1


def shoutcast2_currentsong_url(stream_url: str) -> str:
    return f"{_origin(stream_url)}/currentsong?sid={shoutcast2_sid(stream_url)}"


def shoutcast2_stats_url(stream_url: str) -> str:
    return f"{_origin(stream_url)}/stats?sid={shoutcast2_sid(stream_url)}&json=1"


def server_kind(headers: Mapping[str, str]) -> Method | None:
    """The server software a stream's answer headers name (`Server`, `icy-notice2`), as the method its
    status page needs: "icecast", "shoutcast1", "shoutcast2"; None when they do not say."""
    lowered = {key.lower(): value for key, value in headers.items()}
    server = lowered.get("server", "").lower()
    notice = lowered.get("icy-notice2", "").lower()
    if "icecast" in server:
        return "icecast"
    if ("shoutcast" in server and "v2" in server) or "shoutcast server v2" in notice:
        return "shoutcast2"
    if "shoutcast" in notice or "shoutcast" in server:
        return "shoutcast1"
    return None


def methods_for(kind: Method | None) -> list[Method]:
    """The methods to try, cheapest first: the server's own status page when its kind is known,
    else every status page; the in-stream ICY metadata always last."""
    if kind is None or kind == "icy":
        return ["icecast", "shoutcast2", "shoutcast1", "icy"]
    return [kind, "icy"]


# --- status page parsers --------------------------------------------------------------------------------


def _scalar(value: object) -> str | None:
    """A status value as text: old Icecast writes numeric-looking names as JSON numbers."""
    if value is None or isinstance(value, (dict, list, bool)):
        return None
    return str(value).strip()


def _number(value: object) -> int | None:
    text = _scalar(value)
    return int(text) if text is not None and re.fullmatch(r"\d+", text) else None


def parse_icecast_status(body: bytes, stream_url: str) -> NowPlaying:
    """The source of `stream_url`'s mount in an Icecast status-json.xsl body. A lone source is
    taken even when its mount differs (a proxy or alias in front); among several, the mount must match."""
    text = decode(body)
    if text.lstrip().startswith("<"):
        raise UpstreamFormatError(f"icecast status: expected JSON, got markup: {snippet(text)!r}")
    try:
        doc = json.loads(text, strict=False)
    except ValueError as exc:
        raise UpstreamFormatError(f"icecast status: not JSON ({exc}): {snippet(text)!r}") from None
    stats = doc.get("icestats") if isinstance(doc, dict) else None
    if not isinstance(stats, dict):
        raise UpstreamFormatError("icecast status: no icestats object")
    raw = stats.get("source")
    sources = [s for s in (raw if isinstance(raw, list) else [raw]) if isinstance(s, dict)]
    if not sources:
        raise SourceDownError("icecast status: no source is live")
    source = _pick_source(sources, mount_of(stream_url))
    artist, title = _scalar(source.get("artist")), _scalar(source.get("title"))
    if artist and title:
        stream_title: str | None = f"{artist} - {title}"
    else:
        stream_title, artist, title = (title if title is not None else artist), None, None
    bitrate = _number(source.get("bitrate")) or _number(source.get("ice-bitrate"))
    return NowPlaying(method="icecast", stream_title=stream_title, artist=artist, title=title,
                      server_name=_scalar(source.get("server_name")) or None,
                      listeners=_number(source.get("listeners")), bitrate=bitrate)


def _pick_source(sources: list[dict[str, Any]], mount: str) -> dict[str, Any]:
    for source in sources:
        if mount_of(_scalar(source.get("listenurl")) or "") == mount:
            return source
    if len(sources) == 1:
        return sources[0]
    mounts = [mount_of(_scalar(s.get("listenurl")) or "") for s in sources]
    raise UpstreamFormatError(f"icecast status: no source for mount {mount!r} (mounts {mounts[:8]})")


_BODY = re.compile(r"<body[^>]*>(.*?)</body>", re.IGNORECASE | re.DOTALL)


def parse_shoutcast_7html(body: bytes) -> NowPlaying:
    """`<body>listeners,status,peak,max,unique,bitrate,songtitle</body>`: six numbers, then the title
    (which may itself hold commas)."""
    text = body.decode("utf-8", errors="strict") if _is_utf8(body) else body.decode("cp1252", errors="replace")
    match = _BODY.search(text)
    if not match:
        raise UpstreamFormatError(f"shoutcast 7.html: no <body> in {snippet(text)!r}")
    fields = match.group(1).strip().split(",", 6)
    if len(fields) < 7 or not all(re.fullmatch(r"\d+", f.strip()) for f in fields[:6]):
        raise UpstreamFormatError(f"shoutcast 7.html: not seven comma fields: {snippet(match.group(1))!r}")
    listeners, status, _peak, _max, _unique, bitrate = (int(f) for f in fields[:6])
    if status != 1:
        raise SourceDownError("shoutcast 7.html: stream status 0 (no source connected)")
    return NowPlaying(method="shoutcast1", stream_title=html.unescape(fields[6]).strip(), listeners=listeners,
                      bitrate=bitrate or None)


def parse_shoutcast2_currentsong(body: bytes) -> NowPlaying:
    """The plain-text title; an empty body is an empty title. Markup means another page answered."""
    text = decode(body) if _is_utf8(body) else body.decode("cp1252", errors="replace")
    if text.lstrip().startswith("<"):
        raise UpstreamFormatError(f"shoutcast currentsong: expected plain text, got markup: {snippet(text)!r}")
    return NowPlaying(method="shoutcast2", stream_title=clean(text))


def parse_shoutcast2_stats(body: bytes) -> NowPlaying:
    """`/stats?sid=N&json=1`; streamstatus 0 is no source."""
    text = decode(body)
    try:
        doc = json.loads(text, strict=False)
    except ValueError:
        raise UpstreamFormatError(f"shoutcast stats: not JSON: {snippet(text)!r}") from None
    if not isinstance(doc, dict) or ("songtitle" not in doc and "streamstatus" not in doc):
        raise UpstreamFormatError(f"shoutcast stats: no songtitle/streamstatus in {snippet(text)!r}")
    if _number(doc.get("streamstatus")) == 0:
        raise SourceDownError("shoutcast stats: streamstatus 0 (no source connected)")
    return NowPlaying(method="shoutcast2", stream_title=_scalar(doc.get("songtitle")),
                      server_name=_scalar(doc.get("servertitle")) or None,
                      listeners=_number(doc.get("currentlisteners")), bitrate=_number(doc.get("bitrate")))


def _is_utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# --- ICY in-stream metadata -----------------------------------------------------------------------------


_FIELD = re.compile(rb"([A-Za-z][A-Za-z0-9_]*)='(.*?)';(?=[A-Za-z][A-Za-z0-9_]*='|\s*$)", re.DOTALL)
_LAST_FIELD = re.compile(rb"([A-Za-z][A-Za-z0-9_]*)='(.*)'?\s*$", re.DOTALL)


def decode_title(raw: bytes) -> str:
    """UTF-8 when the bytes are valid UTF-8, else Windows-1252 (what most legacy encoders send),
    else Latin-1 (which decodes any byte)."""
    for codec in ("utf-8", "cp1252"):
        try:
            return raw.decode(codec)
        except UnicodeDecodeError:
            continue
    return raw.decode("latin-1")


def parse_metadata_block(block: bytes) -> dict[str, str]:
    """The key='value'; fields of one metadata block (NUL padding dropped). A value may hold quotes
    and semicolons: it ends at the first `';` followed by the next key or the end of the block;
    a last field missing its `;` (some encoders) is taken up to the block's last quote."""
    data = block.rstrip(b"\x00").strip()
    fields: dict[str, str] = {}
    position = 0
    for match in _FIELD.finditer(data):
        fields.setdefault(match.group(1).decode("ascii"), decode_title(match.group(2)))
        position = match.end()
    tail = data[position:]
    last = _LAST_FIELD.match(tail) if tail else None
    if last:
        value = last.group(2)
        fields.setdefault(last.group(1).decode("ascii"), decode_title(value[:-1] if value.endswith(b"'") else value))
    return fields


class IcyMetadataParser:
    """Incremental reader of an ICY stream body: `feed(bytes)` as bytes arrive (any split, even one
    byte at a time) returns the StreamTitles completed by them; audio is skipped, never kept."""

    def __init__(self, metaint: int) -> None:
        if not 0 < metaint <= MAX_METAINT:
            raise ValueError(f"icy-metaint out of range: {metaint}")
        self.metaint = metaint
        self.audio_bytes = 0
        """Audio bytes seen and discarded (for the cost figures)."""
        self.blocks = 0
        """Metadata blocks completed, empty ones (length 0) included."""
        self.last_fields: dict[str, str] = {}
        self._audio_left = metaint
        self._meta_left = 0
        self._meta = bytearray()
        self._in_meta = False

    def feed(self, data: bytes) -> list[str]:
        titles: list[str] = []
        view = memoryview(data)
        position, size = 0, len(view)
        while position < size:
            if self._audio_left:
                step = min(self._audio_left, size - position)
                self._audio_left -= step
                self.audio_bytes += step
                position += step
            elif not self._in_meta:
                length = view[position] * 16
                position += 1
                if length:
                    self._in_meta, self._meta_left = True, length
                else:
                    self.blocks += 1
                    self._audio_left = self.metaint
            else:
                step = min(self._meta_left, size - position)
                self._meta += view[position:position + step]
                self._meta_left -= step
                position += step
                if not self._meta_left:
                    title = self._finish_block()
                    if title is not None:
                        titles.append(title)
        return titles

    def _finish_block(self) -> str | None:
        self.last_fields = parse_metadata_block(bytes(self._meta))
        self._meta.clear()
        self._in_meta = False
        self.blocks += 1
        self._audio_left = self.metaint
        return self.last_fields.get("StreamTitle")

    @property
    def mid_block(self) -> bool:
        """Whether the stream stopped inside a metadata block (after its length byte)."""
        return self._in_meta

    def close(self) -> None:
        """The stream ended: an error naming how much of a metadata block was missing, if one was open."""
        if self._in_meta:
            got = len(self._meta)
            raise NowPlayingError("closed-mid-block", f"stream closed inside a metadata block after {got} of "
                                                      f"{got + self._meta_left} bytes")


ICY_HEADERS = (("Icy-MetaData", "1"), ("User-Agent", BROWSER_UA), ("Accept", "*/*"))


def metaint_of(headers: Mapping[str, str]) -> int:
    """`icy-metaint` of an answer, or NowPlayingError("no-metadata") when absent or not a number."""
    raw = next((value for key, value in headers.items() if key.lower() == "icy-metaint"), None)
    if raw is None or not raw.strip().isdigit() or not 0 < int(raw) <= MAX_METAINT:
        raise NowPlayingError("no-metadata", f"the stream sends no icy-metaint (got {raw!r})")
    return int(raw)


async def icy_titles(client: httpx.AsyncClient, stream_url: str, *, read_timeout: float = 30.0,
                     on_headers: Callable[[Mapping[str, str]], None] | None = None) -> AsyncGenerator[str, None]:
    """Every StreamTitle the stream announces, as it announces it (repeats included: Icecast repeats
    nothing, some servers repeat every block). Runs until the stream ends or fails, always with a
    NowPlayingError: closed (ended cleanly between blocks), closed-mid-block, stalled (no bytes for
    `read_timeout` s), no-metadata, http-status, unreachable. `on_headers` sees the answer's headers
    first (icy-name, icy-br, Server: what the monitor keeps about the stream). A SHOUTcast v1 server
    answers `ICY 200 OK`, which httpx refuses: that stream is read again over a plain socket."""
    timeout = httpx.Timeout(read_timeout, connect=min(read_timeout, 10.0))
    try:
        async with client.stream("GET", stream_url, headers=list(ICY_HEADERS), timeout=timeout) as response:
            if not 200 <= response.status_code < 300:
                raise NowPlayingError("http-status", f"HTTP {response.status_code} from the stream")
            if on_headers is not None:
                on_headers(response.headers)
            parser = IcyMetadataParser(metaint_of(response.headers))
            async for chunk in response.aiter_raw():
                for title in parser.feed(chunk):
                    yield title
            parser.close()
            raise NowPlayingError("closed", "the server ended the stream")
    except httpx.TimeoutException as exc:
        raise NowPlayingError("stalled", f"no data for {read_timeout:g} s ({type(exc).__name__})") from None
    except httpx.RemoteProtocolError as exc:
        if not _icy_status_line(exc):
            raise NowPlayingError("closed", f"{type(exc).__name__}: {exc}") from None
    except httpx.HTTPError as exc:
        raise NowPlayingError("unreachable", f"{type(exc).__name__}: {exc}") from None
    async for title in icy_titles_socket(stream_url, read_timeout=read_timeout, on_headers=on_headers):
        yield title


def _icy_status_line(exc: httpx.RemoteProtocolError) -> bool:
    """httpx's complaint about an `ICY 200 OK` status line (h11: "illegal status line: ...ICY 200 OK")."""
    return "ICY" in str(exc)


async def icy_titles_socket(stream_url: str, *, read_timeout: float = 30.0,
                            on_headers: Callable[[Mapping[str, str]], None] | None = None
                            ) -> AsyncGenerator[str, None]:
    """`icy_titles` over a bare asyncio connection, for servers whose status line is `ICY 200 OK`
    (SHOUTcast v1). HTTP/1.0 request, no redirects (v1 servers do not send them), TLS for https."""
    parts = urlsplit(stream_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) stream URL: {stream_url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(parts.hostname, port, ssl=True if parts.scheme == "https" else None),
            read_timeout)
    except (OSError, TimeoutError) as exc:
        raise NowPlayingError("unreachable", f"{type(exc).__name__}: {exc}") from None
    try:
        request = f"GET {target} HTTP/1.0\r\nHost: {parts.netloc}\r\n"
        request += "".join(f"{name}: {value}\r\n" for name, value in ICY_HEADERS) + "\r\n"
        writer.write(request.encode("latin-1"))
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), read_timeout)
        status, *lines = head.decode("latin-1").split("\r\n")
        words = status.split(" ", 2)
        if len(words) < 2 or words[0] not in ("ICY", "HTTP/1.0", "HTTP/1.1") or words[1] != "200":
            raise NowPlayingError("http-status", f"status line {status!r} from the stream")
        headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)
                   if name.strip()}
        if on_headers is not None:
            on_headers(headers)
        parser = IcyMetadataParser(metaint_of(headers))
        while True:
            chunk = await asyncio.wait_for(reader.read(16384), read_timeout)
            if not chunk:
                parser.close()
                raise NowPlayingError("closed", "the server ended the stream")
            for title in parser.feed(chunk):
                yield title
    except TimeoutError:
        raise NowPlayingError("stalled", f"no data for {read_timeout:g} s") from None
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        raise NowPlayingError("closed", f"the stream's headers were cut off or too long ({type(exc).__name__})") \
            from None
    except OSError as exc:
        raise NowPlayingError("unreachable", f"{type(exc).__name__}: {exc}") from None
    finally:
        writer.close()


async def read_icy(client: httpx.AsyncClient, stream_url: str, *, timeout: float = 30.0) -> NowPlaying:
    """The first StreamTitle the stream sends, then hang up: costs one metaint of audio when the
    server announces the title in its first block (Icecast and Shoutcast do). `timeout` bounds the
    whole read (a stream that only ever sends empty blocks ends as "no-title")."""
    seen: dict[str, str] = {}
    try:
        async with asyncio.timeout(timeout):
            async with aclosing(icy_titles(client, stream_url, read_timeout=timeout, on_headers=seen.update)) as titles:
                async for title in titles:
                    return NowPlaying(method="icy", stream_title=title, server_name=clean(seen.get("icy-name")) or None,
                                      bitrate=_number(seen.get("icy-br", "").split(",")[0]))
    except TimeoutError:
        raise NowPlayingError("no-title", f"no StreamTitle within {timeout:g} s") from None
    raise NowPlayingError("closed", "stream ended without a title")  # pragma: no cover - icy_titles always raises


# --- status page fetchers -------------------------------------------------------------------------------


async def _small_get(client: httpx.AsyncClient, url: str, timeout: float) -> bytes:
    """A status page's body, refusing an audio answer or anything over STATUS_BODY_LIMIT (read no further)."""
    try:
        async with asyncio.timeout(timeout):
            async with client.stream("GET", url, headers=[("User-Agent", BROWSER_UA)],
                                     timeout=httpx.Timeout(timeout)) as response:
                if response.status_code != 200:
                    raise NowPlayingError("http-status", f"HTTP {response.status_code} from {url}")
                kind = response.headers.get("content-type", "").lower()
                if kind.startswith(("audio/", "application/ogg", "video/")) or "icy-metaint" in response.headers:
                    raise NowPlayingError("not-status", f"{url} answered a stream ({kind or 'icy'})")
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > STATUS_BODY_LIMIT:
                        raise NowPlayingError("not-status", f"{url} answered more than {STATUS_BODY_LIMIT} bytes")
                return bytes(body)
    except TimeoutError:
        raise NowPlayingError("stalled", f"{url} took over {timeout:g} s") from None
    except httpx.RemoteProtocolError as exc:
        raise NowPlayingError("not-status" if _icy_status_line(exc) else "unreachable", f"{url}: {exc}") from None
    except httpx.HTTPError as exc:
        raise NowPlayingError("unreachable", f"{url}: {type(exc).__name__}: {exc}") from None


def _refused(error: UpstreamFormatError) -> NowPlayingError:
    """A status page the parser refused, as the station's state: off air (no-source) or bad-status."""
    return NowPlayingError("no-source" if isinstance(error, SourceDownError) else "bad-status", str(error))


async def fetch_icecast(client: httpx.AsyncClient, stream_url: str, *, timeout: float = 10.0) -> NowPlaying:
    body = await _small_get(client, icecast_status_url(stream_url), timeout)
    try:
        return parse_icecast_status(body, stream_url)
    except UpstreamFormatError as exc:
        raise _refused(exc) from None


async def fetch_shoutcast1(client: httpx.AsyncClient, stream_url: str, *, timeout: float = 10.0) -> NowPlaying:
    body = await _small_get(client, shoutcast1_status_url(stream_url), timeout)
    try:
        return parse_shoutcast_7html(body)
    except UpstreamFormatError as exc:
        raise _refused(exc) from None


async def fetch_shoutcast2(client: httpx.AsyncClient, stream_url: str, *, timeout: float = 10.0) -> NowPlaying:
    """The stats JSON (title, name, listeners); `currentsong` when the stats page is refused."""
    try:
        return parse_shoutcast2_stats(await _small_get(client, shoutcast2_stats_url(stream_url), timeout))
    except SourceDownError as exc:
        raise _refused(exc) from None
    except (UpstreamFormatError, NowPlayingError):
        pass
    body = await _small_get(client, shoutcast2_currentsong_url(stream_url), timeout)
    try:
        return parse_shoutcast2_currentsong(body)
    except UpstreamFormatError as exc:
        raise _refused(exc) from None


async def read_now_playing(client: httpx.AsyncClient, stream_url: str, method: Method, *,
                           timeout: float = 10.0) -> NowPlaying:
    """One reading by one method (the monitor keeps the method that answered and polls it)."""
    if method == "icecast":
        return await fetch_icecast(client, stream_url, timeout=timeout)
    if method == "shoutcast1":
        return await fetch_shoutcast1(client, stream_url, timeout=timeout)
    if method == "shoutcast2":
        return await fetch_shoutcast2(client, stream_url, timeout=timeout)
    return await read_icy(client, stream_url, timeout=timeout)


async def probe(client: httpx.AsyncClient, stream_url: str, methods: list[Method] | None = None, *,
                timeout: float = 10.0) -> NowPlaying:
    """The first method of `methods` (default: every one, cheapest first) that reads a title; the
    last error when none does. A server with no live source stops the search (others would agree)."""
    error = NowPlayingError("no-metadata", "no method to try")
    for method in methods or methods_for(None):
        try:
            return await read_now_playing(client, stream_url, method, timeout=timeout)
        except NowPlayingError as exc:
            if exc.reason == "no-source":
                raise
            error = exc
    raise error


# --- play splitting -------------------------------------------------------------------------------------


_SEPARATORS = (" - ", " – ", " — ")
_AD_WORDS = re.compile(r"\b(?:advert\w*|commercials?|ad ?breaks?|werbung|publicidad|publicite|reklame)\b")
_WEBSITE = re.compile(r"(?:https?://|www\.)\S+|\S+\.(?:com|net|org|fm|de|fr|uk|es|it|nl|ru|info|radio|online)/?")
_UNKNOWN = {"unknown", "unknown artist", "n/a", "na", "-", "?", "none", "null"}


def classify_stream_title(stream_title: str | None, station_name: str | None = None) -> PlayText:
    """A track ("Artist - Title" at the first " - ", " – " or " — ") or raw text flagged as empty,
    ad (advert/commercial/ad break ...), ident (the station naming itself: its name in the artist part,
    or as the whole title, or anywhere in a text with no separator; a bare website) or raw (no
    separator, or "unknown" for artist or title). `stream_title` is the text with whitespace runs
    collapsed. Ambiguous by nature: a station named exactly like an artist flags that artist's plays."""
    text = clean(stream_title)
    if not compact(text):
        return _raw("empty", text)
    if _AD_WORDS.search(fold(text)):
        return _raw("ad", text)
    station = compact(station_name or "")
    own = len(station) >= 4
    if _WEBSITE.fullmatch(text.lower()):
        return _raw("ident", text)
    cut = min(((text.find(sep), sep) for sep in _SEPARATORS if sep in text), default=None)
    if cut is None:
        return _raw("ident" if own and station in compact(text) else "raw", text)
    index, sep = cut
    artist, title = text[:index].strip(), text[index + len(sep):].strip()
    if own and (station in compact(artist) or compact(title) == station):
        return _raw("ident", text)
    if not compact(artist) or not compact(title) or fold(artist) in _UNKNOWN or fold(title) in _UNKNOWN:
        return _raw("raw", text)
    return PlayText(kind="track", artist=artist, title=title, stream_title=text)


def _raw(kind: Kind, text: str) -> PlayText:
    return PlayText(kind=kind, artist=None, title=None, stream_title=text)


def split_stream_title(stream_title: str | None, station_name: str | None = None) -> tuple[str, str] | None:
    """(artist, title) when the announced text is a track, None when it is raw text (see classify)."""
    judged = classify_stream_title(stream_title, station_name)
    return (judged.artist, judged.title) if judged.artist and judged.title else None
