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
from typing import NamedTuple

GZIP_MIN_BYTES = 1024


class CachedBody(NamedTuple):
    version: int
    expires: float
    etag: bytes
    body: bytes
    gzipped: bytes | None


def make_body(body: bytes, version: int, ttl: float) -> CachedBody:
    etag = b'"' + hashlib.blake2b(body, digest_size=12).hexdigest().encode() + b'"'
    gzipped = gzip.compress(body, compresslevel=6, mtime=0) if len(body) >= GZIP_MIN_BYTES else None
    return CachedBody(version, time.monotonic() + ttl, etag, body, gzipped)


class ResponseCache:
    """A bounded LRU of encoded bodies; an entry counts only for the version it was built from."""

    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self._items: OrderedDict[Hashable, CachedBody] = OrderedDict()
        self._building: dict[tuple[Hashable, int], asyncio.Future[CachedBody]] = {}

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
        self._items[key] = entry
        self._items.move_to_end(key)
        while len(self._items) > self.max_entries:
            self._items.popitem(last=False)
        return entry


def etag_matches(if_none_match: bytes, etag: bytes) -> bool:
    """RFC 9110 weak comparison over a list of tags (or `*`)."""
    for tag in if_none_match.split(b","):
        tag = tag.strip()
        if tag == b"*" or tag.removeprefix(b"W/") == etag:
            return True
    return False
