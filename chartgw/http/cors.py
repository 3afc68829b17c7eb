"""Cross-origin calls from web pages (CORS), for the origins `CHARTGW_CORS_ORIGINS` names.

A page on an allowed origin may call any route with its key: the browser's preflight (`OPTIONS` with
`Access-Control-Request-Method`) is answered 204 before the key check, with the methods and request headers
the API takes (`X-API-Key` among them); every other answer to that origin echoes it and exposes the headers a
client reads (`ETag`, the `X-RateLimit-*` headers, `Retry-After`, `X-Request-Id`). A request from any other
origin is answered as if CORS were off: no CORS header, and its preflight goes on to the key check (a 401).
While CORS is on every answer carries `Vary: Origin`, so a shared cache never hands one origin's answer to
another. No credentials mode: the key is a header, never a cookie.

Starlette's CORSMiddleware does not fit: it answers preflights 200, adds its exposed-headers list to answers
for disallowed origins too, and cannot be asked by the server's fast lane, which answers repeats without the
app (`CorsPolicy.headers` serves both).
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from chartgw.api.access import with_headers

__all__ = ["ALLOWED_HEADERS", "ALLOWED_METHODS", "EXPOSED_HEADERS", "CorsMiddleware", "CorsPolicy"]

Headers = list[tuple[bytes, bytes]]

ALLOWED_METHODS = b"GET, HEAD, POST"
ALLOWED_HEADERS = b"X-API-Key, If-None-Match, Content-Type, X-Request-Id"
EXPOSED_HEADERS = b"ETag, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, X-Request-Id"
MAX_AGE = b"600"
"""Seconds a browser may reuse a preflight's answer."""
VARY = (b"vary", b"Origin")


class CorsPolicy:
    """Which origins may call, and the headers each answer gets."""

    def __init__(self, origins: Iterable[str]) -> None:
        wanted = set(origins)
        self.any = "*" in wanted
        self.origins = frozenset(origin.encode("latin-1") for origin in wanted - {"*"})

    def allows(self, origin: bytes | None) -> bool:
        return origin is not None and (self.any or origin in self.origins)

    def headers(self, origin: bytes | None) -> Headers:
        """What an answer to a request from `origin` (None: no Origin header) carries."""
        if not self.allows(origin):
            return [VARY]
        assert origin is not None
        return [(b"access-control-allow-origin", origin), (b"access-control-expose-headers", EXPOSED_HEADERS), VARY]

    def preflight(self, origin: bytes) -> Headers:
        """The 204 answering an allowed origin's preflight."""
        return [(b"access-control-allow-origin", origin), (b"access-control-allow-methods", ALLOWED_METHODS),
                (b"access-control-allow-headers", ALLOWED_HEADERS), (b"access-control-max-age", MAX_AGE), VARY]


class CorsMiddleware:
    """Plain ASGI, before the key check: answers allowed preflights and adds `CorsPolicy.headers` to the rest."""

    def __init__(self, app: ASGIApp, policy: CorsPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        origin: bytes | None = None
        asks = False
        for name, value in scope["headers"]:
            if name == b"origin":
                origin = value
            elif name == b"access-control-request-method":
                asks = True
        if asks and scope["method"] == "OPTIONS" and self.policy.allows(origin):
            assert origin is not None
            await send({"type": "http.response.start", "status": 204, "headers": self.policy.preflight(origin)})
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, with_headers(send, self.policy.headers(origin)))
