"""Encoded responses kept per snapshot version, with ETags and pre-compressed bodies.

The hot path is a partner polling the same URL: once a body is built for the group's current
data version it is served from memory, and an `If-None-Match` that matches is answered 304
without touching SQLite.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, NamedTuple

GZIP_MIN_BYTES = 1024


class CachedBody(NamedTuple):
    version: int
    expires: float
    etag: bytes
    body: bytes
    gzipped: bytes | None
    headers: tuple[tuple[bytes, bytes], ...] = ()
    """Headers of this answer beyond the route's own (a dated chart's `Link`)."""


def make_body(body: bytes, version: int, ttl: float, headers: tuple[tuple[bytes, bytes], ...] = ()) -> CachedBody:
    etag = b'"' + hashlib.blake2b(body, digest_size=12).hexdigest().encode() + b'"'
    gzipped = gzip.compress(body, compresslevel=6, mtime=0) if len(body) >= GZIP_MIN_BYTES else None
    return CachedBody(version, time.monotonic() + ttl, etag, body, gzipped, headers)


class Alias(NamedTuple):
    """What a raw request was last answered under: its canonical key, the endpoint that answers it (so the
    server's fast lane can answer a repeat of the request without routing it) and the representation its URL
    chose (`chartgw.api.formats.Variant`: one its Accept header may still change, or one its `format` fixed)."""

    key: Hashable
    owner: Any
    variant: Any = None


class ResponseCache:
    """Encoded bodies by canonical request (path and validated parameters), bounded by their bytes.

    An entry counts only for the data version it was built from. The raw requests that led to an entry
    are remembered as aliases (bounded in number and length), so a repeated poll of the same URL is one
    dict lookup, while URLs that differ only by parameters the route ignores share one body: no client
    can fill memory by varying a query.
    """

    ALIAS_MAX_QUERY = 512
    """Longer query strings are validated on every request rather than remembered."""

    def __init__(self, max_bytes: int = 256 * 1024 * 1024, max_aliases: int = 8192) -> None:
        self.max_bytes = max_bytes
        self.max_aliases = max_aliases
        self.size = 0
        self._items: OrderedDict[Hashable, CachedBody] = OrderedDict()
        self._aliases: OrderedDict[Hashable, Alias] = OrderedDict()
        self._building: dict[tuple[Hashable, int], asyncio.Future[CachedBody]] = {}

    def canonical(self, raw: tuple[str, bytes]) -> Alias | None:
        """The canonical key (and its endpoint) a raw (path, query) was last answered under, if remembered."""
        return self._aliases.get(raw)

    def remember(self, raw: tuple[str, bytes], key: Hashable, owner: Any = None, variant: Any = None) -> None:
        if len(raw[1]) > self.ALIAS_MAX_QUERY:
            return
        self._aliases[raw] = Alias(key, owner, variant)
        self._aliases.move_to_end(raw)
        while len(self._aliases) > self.max_aliases:
            self._aliases.popitem(last=False)

    def get(self, key: Hashable, version: int) -> CachedBody | None:
        hit = self._items.get(key)
        if hit is None or hit.version != version or hit.expires < time.monotonic():
            return None
        self._items.move_to_end(key)
        return hit

    async def build(self, key: Hashable, version: int,
                    make: Callable[[], Awaitable[CachedBody]]) -> CachedBody:
        """Build and keep the body for `key`; concurrent misses of one key share a single build."""
        flight = (key, version)
        pending = self._building.get(flight)
        if pending is None:
            pending = asyncio.ensure_future(make())
            self._building[flight] = pending
            try:
                return self.put(key, await asyncio.shield(pending))
            finally:
                self._building.pop(flight, None)
        return await asyncio.shield(pending)

    def put(self, key: Hashable, entry: CachedBody) -> CachedBody:
        old = self._items.pop(key, None)
        if old is not None:
            self.size -= entry_bytes(old)
        self._items[key] = entry
        self.size += entry_bytes(entry)
        while self.size > self.max_bytes and len(self._items) > 1:
            _, evicted = self._items.popitem(last=False)
            self.size -= entry_bytes(evicted)
        return entry


def entry_bytes(entry: CachedBody) -> int:
    """What an entry holds in memory, near enough: its bodies plus a fixed overhead."""
    return len(entry.body) + len(entry.gzipped or b"") + 200


def etag_matches(if_none_match: bytes, etag: bytes) -> bool:
    """RFC 9110 weak comparison over a list of tags (or `*`)."""
    if if_none_match == etag:  # the usual poll: the one tag it was sent
        return True
    for tag in if_none_match.split(b","):
        tag = tag.strip()
        if tag == b"*" or tag.removeprefix(b"W/") == etag:
            return True
    return False
