"""The fast lane: a repeated poll of a cached body, answered by the HTTP server itself.

Partners poll the same URLs over and over, and most polls change nothing. Once a GET has been answered
through the app (routed, validated, built), the response cache remembers its raw path and query and the
endpoint that answered it. The server (`chartgw.http.rsgi`) asks `FastLane.reply` as soon as granian hands it a
request's head; when the request is a repeat whose body is cached for the current data version, the reply is
built from the same parts the app uses (the key middleware's `Gate`, `EndpointApp.reply`) and
written without an ASGI task, scope or middleware pass; a refusal of the gate (401, 429, and 400 for two
X-API-Key headers) is sent as the app sends it. Anything else (a miss, a stale version, a public path or a legacy
prefix not seen before) is None: the app answers it as always, so the lane never answers anything the app would
answer differently.

The representation is the app's choice too: a URL with `format=` names its own cached body; without it, a
request whose Accept header names CSV or NDJSON gets the body the endpoint chooses for it (`EndpointApp.choose`)
when that is cached, and the app otherwise (which answers a 406 where the endpoint answers neither). A JSON
poll reads its Accept header in the same pass over its headers as If-None-Match and Accept-Encoding.
"""

from __future__ import annotations

from time import perf_counter

from chartgw.api.access import Gate, Reply
from chartgw.api.cache import ResponseCache
from chartgw.api.endpoints import REQUEST_ID_HEADER, EndpointApp, request_fields
from chartgw.api.formats import rows_asked
from chartgw.api.legacy import rewrite
from chartgw.http.cors import CorsPolicy
from chartgw.http.observe import NO_CACHE, Observer, request_id

__all__ = ["FastLane", "Reply"]


class FastLane:
    def __init__(self, cache: ResponseCache, gate: Gate, legacy: dict[str, str], observer: Observer | None = None,
                 cors: CorsPolicy | None = None) -> None:
        self.cache = cache
        self.gate = gate
        """The key middleware's gate: the lane admits (and refuses, and counts) exactly as the app does."""
        self.legacy = legacy
        """Legacy first path segments (`korea-chart-api`) to the current ones, as `LegacyPrefixMiddleware`."""
        self.observer = observer
        """Where the lane's answers are counted and logged, as the app's are (`chartgw.http.observe`)."""
        self.cors = cors
        """The app's CORS policy, when on: the lane's answers carry the same CORS headers as the app's."""

    def reply(self, path: str, query: bytes, headers: list[tuple[bytes, bytes]]) -> Reply | None:
        """The answer to `GET path?query` with `headers` (lowercase names), or None for the app to answer."""
        started = perf_counter()
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
        if version is None:
            return None
        inm, encoding, accept, sent_id, origin, api_key = request_fields(headers)  # one pass for all the lane reads
        key, variant = known.key, known.variant
        if accept is not None and variant.negotiated and (wanted := rows_asked(accept)) is not None:
            chosen = endpoint.choose(wanted)
            if chosen is None:
                return None  # the app's 406
            if chosen is not variant:
                key, variant = (key, chosen.format), chosen
        hit = self.cache.get(key, version)
        if hit is None:
            return None
        refusal, key_id, rate = self.gate.admit(path, api_key)
        if refusal is None:
            answer = endpoint.reply(hit, inm, encoding, variant)
            answer[1].extend(rate)
            cache = "hit"
        else:
            answer, cache = refusal, NO_CACHE  # the app's 400, 401 or 429
        # What the app's outer layers add (CORS headers, the request id), counted and logged as theirs are.
        rid = request_id(sent_id)
        sent = answer[1]
        if self.cors is not None:
            sent.extend(self.cors.headers(origin))
        sent.append((REQUEST_ID_HEADER, rid))
        if self.observer is not None:
            self.observer.lane_answered(endpoint, answer[0], len(answer[2]), perf_counter() - started, key_id, rid,
                                        cache)
        return answer
