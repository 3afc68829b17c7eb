"""The fast lane: a repeated poll of a cached body, answered by the HTTP server itself.

Partners poll the same URLs over and over, and most polls change nothing. Once a GET has been answered
through the app (routed, validated, built), the response cache remembers its raw path and query and the
endpoint that answered it. The server (`chartgw.server`) asks `FastLane.reply` as soon as a request's head
is parsed; when the request is a repeat whose body is cached for the current data version, the reply is
built from the same parts the app uses (the key check, the rate limiter, `EndpointApp.cached_reply`) and
written without an ASGI task, scope or middleware pass. Anything else (a miss, a stale version, an unknown
key, a public path or a legacy prefix not seen before) is None: the app answers it as always, so the lane
never answers anything the app would answer differently.
"""

from __future__ import annotations

import time
from typing import Any

from chartgw.access import KEY_HEADER, AccessTable, KeyChecker, RateLimiter, rate_headers, too_many
from chartgw.cache import ResponseCache
from chartgw.cors import CorsPolicy
from chartgw.endpoints import EndpointApp
from chartgw.legacy import rewrite
from chartgw.observe import NO_CACHE, ORIGIN_HEADER, REQUEST_ID_HEADER, Observer, request_id

__all__ = ["FastLane", "Reply", "find_lane"]

Reply = tuple[int, list[tuple[bytes, bytes]], bytes]


class FastLane:
    def __init__(self, cache: ResponseCache, table: AccessTable, checker: KeyChecker, limiter: RateLimiter | None,
                 legacy: dict[str, str], observer: Observer | None = None, cors: CorsPolicy | None = None) -> None:
        self.cache = cache
        self.table = table
        self.checker = checker
        self.limiter = limiter
        self.legacy = legacy
        """Legacy first path segments (`korea-chart-api`) to the current ones, as `LegacyPrefixMiddleware`."""
        self.observer = observer
        """Where the lane's answers are counted and logged, as the app's are (`chartgw.observe`)."""
        self.cors = cors
        """The app's CORS policy, when on: the lane's answers carry the same CORS headers as the app's."""

    def reply(self, path: str, query: bytes, headers: list[tuple[bytes, bytes]]) -> Reply | None:
        """The answer to `GET path?query` with `headers` (lowercase names), or None for the app to answer."""
        started = time.perf_counter()
        known = self.cache.canonical((path, query))
        if known is None:
            found = rewrite(self.legacy, path)
            if found is None:
                return None
            path = found[2]
            known = self.cache.canonical((path, query))
            if known is None:
                return None
        endpoint = known.owner
        if not isinstance(endpoint, EndpointApp):
            return None
        version = endpoint.data.settled_version()
        hit = self.cache.get(known.key, version) if version is not None else None
        if hit is None:
            return None
        rate: list[tuple[bytes, bytes]] = []
        key_id: int | None = None
        if not self.table.is_public(path):
            key = next((value for name, value in headers if name == KEY_HEADER), None)
            grant = self.checker.grant(key.decode("latin-1")) if key is not None else None
            if grant is None:
                return None  # the app's 401, with its reason
            key_id = grant.key_id
            if self.limiter is not None:
                allowed, limit, remaining, reset = self.limiter.take(grant)
                if limit:
                    rate = rate_headers(limit, remaining, reset)
                    if not allowed:
                        return self._answered(too_many(limit, reset, rate), endpoint, key_id, headers, started, NO_CACHE)
        status, sent, body = endpoint.cached_reply(hit, headers)
        sent.extend(rate)
        return self._answered((status, sent, body), endpoint, key_id, headers, started, "hit")

    def _answered(self, reply: Reply, endpoint: EndpointApp, key_id: int | None, headers: list[tuple[bytes, bytes]],
                  started: float, cache: str) -> Reply:
        """`reply` with what the app's outer layers add (CORS headers, the request id), counted and logged."""
        sent_id = origin = None
        for name, value in headers:
            if name == REQUEST_ID_HEADER:
                sent_id = value
            elif name == ORIGIN_HEADER:
                origin = value
        rid = request_id(sent_id)
        status, sent, body = reply
        if self.cors is not None:
            sent.extend(self.cors.headers(origin))
        sent.append((REQUEST_ID_HEADER, rid))
        if self.observer is not None:
            self.observer.lane_answered(endpoint, status, len(body), time.perf_counter() - started, key_id, rid, cache)
        return reply


def find_lane(app: Any) -> FastLane | None:
    """The fast lane of the gateway app `app` is (or wraps, as uvicorn's proxy-headers middleware does)."""
    for _ in range(8):
        lane = getattr(getattr(app, "state", None), "fast_lane", None)
        if isinstance(lane, FastLane):
            return lane
        app = getattr(app, "app", None)
        if app is None:
            return None
    return None
