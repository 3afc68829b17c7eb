"""Routes declared as data, and the one ASGI app that answers every one of them.

A group module lists `Route`s; `EndpointApp` does what all routes share: parameter validation,
the per-version response cache with ETag/304, JSON encoding (and CSV or NDJSON of a chart or list
route's rows, `chartgw.api.formats`), and JSON errors (401 is the middleware's). A handler only turns
validated parameters into a payload.

A handler declares the parameters it reads as a TypedDict (`Call[LatestParams]`): mypy then checks every
`call.params["name"]` read, its name and its value's type, while the route's `Param` table stays the one validation
(the 422s and the OpenAPI document). The route checks the two agree when declared (`params_type`,
`chartgw.api.params.check_params_type`); at run time the validated dict is passed as it is, so typing costs nothing.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import Any, Generic, get_args, get_type_hints, is_typeddict

import msgspec
from starlette.types import Receive, Scope, Send
from typing_extensions import TypeVar

from chartgw.api.access import KEY_HEADER, KEY_ID_SCOPE, TWO_KEYS
from chartgw.api.cache import CachedBody, ResponseCache, etag_matches, make_body
from chartgw.api.formats import FORMAT_PARAM, FORMATS, MEDIA_TYPES, Table, Variant, negotiate, rows_asked
from chartgw.api.params import InvalidParams, Param, check_params_type, parse_query, validate
from chartgw.core.clock import Clock, utc_now
from chartgw.core.config import SettingError
from chartgw.core.settings import Settings
from chartgw.replica.reader import FollowedReader
from chartgw.store import SnapshotReader, group_db_path

__all__ = [
    "CACHE_SCOPE",
    "JSON",
    "ORIGIN_HEADER",
    "REQUEST_ID_HEADER",
    "ApiError",
    "Call",
    "EndpointApp",
    "GroupData",
    "Handler",
    "Route",
    "Streaming",
    "not_found",
    "params_type",
    "request_fields",
]

log = logging.getLogger("chartgw.api.endpoints")
JSON = b"application/json"
CACHE_SCOPE = "chartgw.api.cache"
"""The ASGI scope entry where a cached route says whether its answer was a cache "hit" or "miss" (for metrics)."""
MAX_BODY_BYTES = 64 * 1024
THREAD_BODY_BYTES = 256 * 1024
"""A response body this large is digested and compressed in a worker thread (a cache miss only)."""
FRESHNESS_SECONDS = 1.0
REPLICA_FRESHNESS_SECONDS = 0.25
"""A read replica re-reads its versions sooner: a commit has already spent a sync and a follow poll on its way."""
_encode = msgspec.json.Encoder().encode


class ApiError(Exception):
    """An answer other than 200, with a JSON `{"detail": ...}` body."""

    def __init__(self, status: int, detail: Any, headers: dict[str, str] | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers or {}
        self.extra = extra or {}
        """Fields of the body beside `detail` (a 409's `candidates`)."""


def not_found(detail: str) -> ApiError:
    return ApiError(404, detail)


class GroupData:
    """A group's snapshot file as the server sees it, with a version that moves when a crawl commits.

    The version is re-read at most once per `FRESHNESS_SECONDS`, so a burst of polls costs one
    `PRAGMA data_version`, not one per request.
    """

    def __init__(self, group: str, clock: Clock = utc_now, read_only: bool = False, *, settings: Settings) -> None:
        self.group = group
        self.settings = settings
        """The settings of the app this data belongs to: what its handlers read (`Call.settings`)."""
        self.clock = clock
        """What "now" is for ages and staleness in responses (injected in tests)."""
        path = group_db_path(group, settings)
        self.reader = FollowedReader(path, group, settings) if read_only else SnapshotReader(path)
        """On a read replica, the file `chartgw follow` keeps current (chartgw.replica.reader)."""
        self.freshness = REPLICA_FRESHNESS_SECONDS if read_only else FRESHNESS_SECONDS
        self.version = 0
        self.refreshed: dict[Hashable, float] = {}
        """When each target was last refreshed through the API (monotonic seconds), for the refresh throttle."""
        self.key_refreshes: dict[int | None, deque[float]] = {}
        """When each key started its refreshes of the last hour (monotonic seconds), for the per-key throttle."""
        self._seen: int | None = None
        self._checked = float("-inf")

    def expire(self) -> None:
        """Re-read the version on the next request (after this process knows a crawl committed)."""
        self._checked = float("-inf")

    def settled_version(self) -> int | None:
        """The version, when it was read within the last `FRESHNESS_SECONDS` (what may be served without
        awaiting a re-read: the server's fast lane), else None."""
        return self.version if time.monotonic() - self._checked < self.freshness else None

    async def current_version(self) -> int:
        now = time.monotonic()
        if now - self._checked >= self.freshness:
            self._checked = now
            seen = await self.reader.data_version()
            if seen != self._seen or seen is None:
                self._seen = seen
                self.version += 1
        return self.version


P = TypeVar("P", bound=Mapping[str, Any], default=Mapping[str, Any], covariant=True)
"""A route's validated parameters: the TypedDict its handler declares (`Call[LatestParams]`), or any mapping for a
handler that reads none by name (a shared route, a wrapper)."""


@dataclass(frozen=True)
class Call(Generic[P]):
    """What a handler gets: the validated parameters, its group's data and the request's time."""

    params: P
    """Every declared parameter by name (its default when absent), `format` taken out."""
    data: GroupData
    now: datetime
    body: bytes = b""
    """The request body of a POST route (at most MAX_BODY_BYTES; a larger one is a 413 before the handler)."""
    key_id: int | None = None
    """The caller's key (its id in the key store) on uncached routes, for per-key throttles; None on public routes."""

    @property
    def settings(self) -> Settings:
        """The settings of the app answering (each app its own, so two can share a process)."""
        return self.data.settings


Handler = Callable[[Call[Any]], Awaitable[Any]]


def params_type(handler: Callable[..., Any]) -> type | None:
    """The TypedDict of parameters `handler` declares (its `call: Call[...]`), or None when it declares none."""
    annotation = getattr(handler, "__annotations__", {}).get("call")
    if annotation is None or (isinstance(annotation, str) and not annotation.startswith("Call[")):
        return None
    # Only the `call` annotation is resolved: the handler's others may name what only a type checker imports.
    probe = SimpleNamespace(__annotations__={"call": annotation})
    args = get_args(get_type_hints(probe, getattr(handler, "__globals__", None))["call"])
    return args[0] if args and is_typeddict(args[0]) else None


class Streaming:
    """What an uncached route's handler returns to answer the request itself (an event stream): an ASGI app,
    called with the request once the parameters passed. An `ApiError` or `InvalidParams` it raises before it
    starts its response is answered as any handler's."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class Route:
    """One endpoint of a group, relative to the group's prefix."""

    path: str
    handler: Handler
    params: tuple[Param, ...] = ()
    method: str = "GET"
    public: bool = False
    cache_ttl: float = 30.0
    """Seconds a built body may be served for one data version; 0 = never cached."""
    max_age: int = 0
    """Cache-Control max-age for clients."""
    summary: str = ""
    response: Any = None
    """A msgspec type describing the 200 body, for the OpenAPI document."""
    errors: tuple[int, ...] = (404,)
    body: Any = None
    """A msgspec type of the JSON request body (a POST's), for the OpenAPI document."""
    media_type: bytes = JSON
    """The 200 body's content type. A JSON route's handler returns a payload to encode; any other route's
    handler returns the body itself (bytes or str), sent as is. Errors are JSON either way."""
    rows: str | tuple[str, ...] | None = None
    """A chart or list route: the response field holding its rows (one name per alternative response type when
    they differ). It then answers CSV and NDJSON of them too (`chartgw.api.formats`) and takes the `format`
    parameter, added to `params`; any other route answers JSON only (a 406 to a request for CSV or NDJSON)."""
    links: Callable[[Any, dict[str, Any]], bytes | None] | None = None
    """A chart-by-date route: the `Link` header value of a payload (its previous and next dates as URLs) for the
    validated parameters (`chartgw.api.catalog.dated`); every representation of the answer carries it."""

    def __post_init__(self) -> None:
        if self.rows is not None and FORMAT_PARAM not in self.params:
            assert self.media_type == JSON and all(p.name != FORMAT_PARAM.name for p in self.params), \
                f"{self.path}: rows of a JSON route that declares no `format` itself"
            object.__setattr__(self, "params", (*self.params, FORMAT_PARAM))
        declared = params_type(self.handler)
        if declared is not None:  # what the handler reads is what the route validates
            check_params_type(declared, [p for p in self.params if p.name != FORMAT_PARAM.name], self.path)


REQUEST_ID_HEADER = b"x-request-id"
ORIGIN_HEADER = b"origin"
"""Read with the fields below for the fast lane's outer layers (`chartgw.http.observe`: request ids, CORS)."""
RequestFields = tuple[bytes | None, bytes | None, bytes | None, bytes | None, bytes | None, bytes | None]


def request_fields(headers: Iterable[tuple[bytes, bytes]]) -> RequestFields:
    """What a cached answer depends on in a request's headers (lowercase names), read in one pass: If-None-Match,
    Accept-Encoding, Accept (repeated fields joined, as a list), and for the fast lane's outer layers
    (`chartgw.http.observe`, `chartgw.api.access`) X-Request-Id, Origin and X-API-Key (`TWO_KEYS` when repeated)."""
    inm = encoding = accept = sent_id = origin = key = None
    for name, value in headers:
        if name == b"if-none-match":
            inm = value
        elif name == b"accept-encoding":
            encoding = value
        elif name == b"accept":
            accept = value if accept is None else accept + b"," + value
        elif name == REQUEST_ID_HEADER:
            sent_id = value
        elif name == KEY_HEADER:
            key = value if key is None else TWO_KEYS  # refused by the gate, as the app's middleware refuses it
        elif name == ORIGIN_HEADER:
            origin = value
    return inm, encoding, accept, sent_id, origin, key


def declared_length(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    """The request's Content-Length, when it sent one that is a number (the parser has refused two that differ)."""
    value = next((v for name, v in headers if name == b"content-length"), None)
    return int(value) if value is not None and value.strip().isdigit() else None


async def read_body(scope: Scope, receive: Receive) -> bytes:
    """The whole request body, refused with a 413 past MAX_BODY_BYTES (read no further). A Content-Length past it
    is refused before the first read: a client that sent `Expect: 100-continue` is never told to send the body
    (the server sends `100 Continue` at the app's first read), and the connection closes."""
    declared = declared_length(scope["headers"])
    if declared is not None and declared > MAX_BODY_BYTES:
        raise ApiError(413, f"The request body is larger than {MAX_BODY_BYTES} bytes", {"Connection": "close"})
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client left (or was cut off) before its body was whole
            raise ApiError(400, "The request body did not arrive whole")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ApiError(413, f"The request body is larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


class EndpointApp:
    """The ASGI app behind one declared route."""

    def __init__(self, route: Route, data: GroupData, cache: ResponseCache, root: bool = False) -> None:
        self.route = route
        self.data = data
        self.cache = cache
        self.path = route.path if root else f"/{data.group}{route.path}"
        """The template it is served at: under its group's prefix, or at the root (`/changes`, `/identity/...`,
        `/charts`, which read a group's data or every group's but belong to none)."""
        self.root = root
        visibility = b"public" if route.public else b"private"
        self.cache_control = (b"cache-control",
                              visibility + (b", max-age=%d" % route.max_age if route.max_age else b", no-cache"))
        self.table = Table(route.rows, route.response) if route.rows is not None else None
        formats = FORMATS if self.table is not None else ("json",)
        self.offered = tuple(MEDIA_TYPES[f] if f != "json" else route.media_type for f in formats)
        """The media types this route answers in, the first (its own) without a `format` or an Accept asking."""
        by_accept = b"accept-encoding, accept" if self.table is not None else b"accept-encoding"
        self.negotiated = {f: Variant.of(f, media, True, by_accept) for f, media in zip(formats, self.offered, strict=True)}
        """Each representation as chosen by the Accept header (or by default), Vary naming Accept where it chooses."""
        self.explicit = {f: Variant.of(f, media, False, b"accept-encoding")
                         for f, media in zip(formats, self.offered, strict=True)}
        """Each representation as chosen by the `format` parameter (the Accept header is not read)."""
        self.variant = self.negotiated["json"]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.route
        try:
            if route.cache_ttl <= 0:
                params = validate(route.params, scope.get("path_params", {}), parse_query(scope["query_string"]))
                variant = self._requested(params, scope)
                sent = await read_body(scope, receive) if route.method == "POST" else b""
                call = Call(params, self.data, self.data.clock(), sent, scope.get(KEY_ID_SCOPE))
                result = await route.handler(call)
                if isinstance(result, Streaming):
                    await result(scope, receive, send)
                    return
                body = self._body(result, variant.format)
                extra = [(b"cache-control", b"no-store")] + ([variant.vary] if self.table is not None else [])
                extra += self._links(result, params)
                await self._send(scope, send, 200, body, extra, variant.media_type)
                return
            # A remembered raw request maps straight to its canonical entry: a poll of the same URL costs
            # two dict lookups. Otherwise the parameters are validated and the entry is keyed on them.
            version = await self.data.current_version()
            raw = (scope["path"], scope["query_string"])
            inm, encoding, accept, _, _, _ = request_fields(scope["headers"])
            known = self.cache.canonical(raw)
            hit = None
            if known is not None:
                key, variant = known.key, known.variant
                if accept is not None and variant.negotiated and (wanted := rows_asked(accept)) is not None:
                    key, variant = self._accepted(key, wanted)
                hit = self.cache.get(key, version)
            outcome = "hit"
            if hit is None:
                params = validate(route.params, scope.get("path_params", {}), parse_query(scope["query_string"]))
                variant = self._requested(params, scope)
                base = (scope["path"], *sorted(params.items()))
                key = base if variant.format == "json" else (base, variant.format)
                self.cache.remember(raw, base if variant.negotiated else key, self,
                                    self.variant if variant.negotiated else variant)
                hit = self.cache.get(key, version)
                if hit is None:
                    outcome = "miss"
                    fmt = variant.format
                    hit = await self.cache.build(key, version, lambda: self._build(params, version, fmt))
            scope[CACHE_SCOPE] = outcome
            status, headers, body = self.reply(hit, inm, encoding, variant)
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
        except InvalidParams as exc:
            await self._send(scope, send, 422, exc.body())
        except ApiError as exc:
            headers = [(k.lower().encode(), v.encode()) for k, v in exc.headers.items()]
            await self._send(scope, send, exc.status, _encode({"detail": exc.detail, **exc.extra}), headers)
        except SettingError as exc:
            await self._send(scope, send, 503, _encode({"detail": f"The gateway is misconfigured: {exc}"}))
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            body = _encode({"detail": "Storage is busy; try again shortly"})
            await self._send(scope, send, 503, body, [(b"retry-after", b"1")])
        except sqlite3.DatabaseError as exc:
            if "malformed" not in str(exc):
                raise
            log.error("%s: %s", scope["path"], exc)  # on a replica: an inconsistency that outlived the retries
            body = _encode({"detail": "Storage answered that its file is malformed; try again shortly"})
            await self._send(scope, send, 503, body, [(b"retry-after", b"5")])

    def _requested(self, params: dict[str, Any], scope: Scope) -> Variant:
        """The representation a request asks for: its `format` parameter (taken out of `params`), else its Accept
        header; a 406 for one this route does not answer in."""
        fmt = params.pop(FORMAT_PARAM.name, None)
        if fmt is None and self.table is None:
            fmt = parse_query(scope["query_string"]).get(FORMAT_PARAM.name)  # not declared here: only json is taken
            if fmt not in FORMATS[1:]:
                fmt = None
        if fmt is not None:
            if fmt not in self.explicit:
                raise ApiError(406, f"format={fmt}: this endpoint is not a chart or list and answers JSON only")
            return self.explicit[fmt]
        accept = request_fields(scope["headers"])[2]
        wanted = rows_asked(accept) if accept is not None else None
        return self.variant if wanted is None else self._accepted(None, wanted)[1]

    def _accepted(self, key: Hashable, accept: bytes) -> tuple[Hashable, Variant]:
        """The representation an Accept header that names CSV or NDJSON prefers (and its cache key, `key` being
        the JSON one); a 406 when it accepts none this route answers in."""
        chosen = self.choose(accept)
        if chosen is None:
            offered = ", ".join(media.decode().partition(";")[0] for media in self.offered)
            raise ApiError(406, f"Not acceptable: this endpoint answers {offered}")
        return (key if chosen.format == "json" else (key, chosen.format)), chosen

    def choose(self, accept: bytes) -> Variant | None:
        """The representation `accept` (an Accept value naming CSV or NDJSON, lowercase) prefers; None for none."""
        index = negotiate(accept, self.offered)
        return None if index is None else self.negotiated[FORMATS[index]]

    async def _build(self, params: dict[str, Any], version: int, fmt: str) -> CachedBody:
        asked = dict(params)  # the handler may take parameters out (include=); the links name the request's
        payload = await self.route.handler(Call(params, self.data, self.data.clock()))
        body = self._body(payload, fmt)
        headers = tuple(self._links(payload, asked))
        if len(body) >= THREAD_BODY_BYTES:  # its digest and gzip copy take milliseconds: not on the event loop
            return await asyncio.to_thread(make_body, body, version, self.route.cache_ttl, headers)
        return make_body(body, version, self.route.cache_ttl, headers)

    def _links(self, payload: Any, params: dict[str, Any]) -> list[tuple[bytes, bytes]]:
        value = self.route.links(payload, params) if self.route.links is not None else None
        return [(b"link", value)] if value else []

    def _body(self, payload: Any, fmt: str = "json") -> bytes:
        """A 200 body: the payload encoded for a JSON route (or its rows as `fmt`), else what the handler returned."""
        if fmt != "json":
            assert self.table is not None
            return self.table.body(payload, fmt)
        if self.route.media_type == JSON:
            return _encode(payload)
        return payload.encode() if isinstance(payload, str) else bytes(payload)

    def reply(self, hit: CachedBody, if_none_match: bytes | None, accept_encoding: bytes | None,
              variant: Variant) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Status, headers and body answering a request for a cached body of `variant`, from the request's fields
        (`request_fields`): 304 when its If-None-Match holds the ETag, gzip when accepted and worth it. The server's
        fast lane sends the same."""
        base = [(b"etag", hit.etag), self.cache_control, variant.vary, *hit.headers]
        if if_none_match is not None and etag_matches(if_none_match, hit.etag):
            return 304, base, b""
        if hit.gzipped is not None and accept_encoding is not None and b"gzip" in accept_encoding:
            return 200, [variant.content_type, (b"content-length", b"%d" % len(hit.gzipped)),
                         *base, (b"content-encoding", b"gzip")], hit.gzipped
        return 200, [variant.content_type, (b"content-length", b"%d" % len(hit.body)), *base], hit.body

    async def _send(self, scope: Scope, send: Send, status: int, body: bytes,
                    extra: list[tuple[bytes, bytes]] | None = None, media_type: bytes = JSON) -> None:
        headers = [(b"content-type", media_type), (b"content-length", str(len(body)).encode()), *(extra or [])]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
