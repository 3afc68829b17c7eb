"""The response cache: per-version entries, ETag matching, one build for concurrent misses."""

from __future__ import annotations

import asyncio

from chartgw.cache import CachedBody, ResponseCache, etag_matches, make_body


def test_concurrent_misses_of_one_key_share_a_single_build() -> None:
    builds = 0

    async def make() -> CachedBody:
        nonlocal builds
        builds += 1
        await asyncio.sleep(0.01)
        return make_body(b'{"x":1}', 1, 30)

    async def scenario() -> list[CachedBody]:
        cache = ResponseCache()
        return list(await asyncio.gather(*(cache.build("k", 1, make) for _ in range(50))))

    results = asyncio.run(scenario())
    assert builds == 1 and len({id(r) for r in results}) == 1


def test_entries_count_only_for_their_version_and_are_bounded() -> None:
    cache = ResponseCache(max_entries=2)
    cache.put("a", make_body(b"a", 1, 30))
    assert cache.get("a", 1) is not None and cache.get("a", 2) is None
    cache.put("b", make_body(b"b", 1, 30))
    cache.put("c", make_body(b"c", 1, 30))
    assert cache.get("a", 1) is None and cache.get("c", 1) is not None


def test_large_bodies_are_precompressed_and_etags_compare_weakly() -> None:
    small, large = make_body(b"{}", 1, 30), make_body(b"[" + b"1," * 2000 + b"1]", 1, 30)
    assert small.gzipped is None and large.gzipped is not None and len(large.gzipped) < len(large.body)
    assert etag_matches(b'W/' + large.etag + b', "other"', large.etag)
    assert etag_matches(b"*", large.etag) and not etag_matches(b'"nope"', large.etag)
