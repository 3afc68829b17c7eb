"""The response cache: per-version entries, ETag matching, one build for concurrent misses."""

from __future__ import annotations

import asyncio
from pathlib import Path

from chartgw.api.cache import CachedBody, ResponseCache, etag_matches, make_body


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


def test_entries_count_only_for_their_version_and_are_bounded_by_bytes() -> None:
    cache = ResponseCache(max_bytes=2 * (100 + 200))
    cache.put("a", make_body(b"a" * 100, 1, 30))
    assert cache.get("a", 1) is not None and cache.get("a", 2) is None
    cache.put("b", make_body(b"b" * 100, 1, 30))
    cache.put("c", make_body(b"c" * 100, 1, 30))
    assert cache.get("a", 1) is None and cache.get("c", 1) is not None and cache.size <= cache.max_bytes


def test_aliases_are_bounded_in_number_and_length() -> None:
    cache = ResponseCache(max_aliases=2)
    for n in range(5):
        cache.remember(("/p", b"junk=%d" % n), ("/p",))
    assert cache.canonical(("/p", b"junk=0")) is None and getattr(cache.canonical(("/p", b"junk=4")), "key", None) == ("/p",)
    cache.remember(("/p", b"x" * 600), ("/p",))
    assert cache.canonical(("/p", b"x" * 600)) is None


def test_large_bodies_are_precompressed_and_etags_compare_weakly() -> None:
    small, large = make_body(b"{}", 1, 30), make_body(b"[" + b"1," * 2000 + b"1]", 1, 30)
    assert small.gzipped is None and large.gzipped is not None and len(large.gzipped) < len(large.body)
    assert etag_matches(large.etag, large.etag) and etag_matches(b'W/' + large.etag + b', "other"', large.etag)
    assert not etag_matches(large.etag[:-2] + b'"', large.etag)
    assert etag_matches(b"*", large.etag) and not etag_matches(b'"nope"', large.etag)


def test_unknown_query_parameters_share_one_entry_and_memory_stays_flat(korea_data: Path) -> None:
    """300 requests that differ only by a parameter no route declares build one body: the cache holds it
    once, keyed on the validated parameters (as FastAPI ignores unknown ones)."""
    from chartgw.groups.korea_chart import GROUP
    from tests.fixtures import KEY_HEADERS, client

    with client(korea_data, [GROUP]) as api:
        first = api.get("/korea-chart/portal-a/charts/realtime?limit=5", headers=KEY_HEADERS)
        grouped = next(r for r in api.app.router.routes  # type: ignore[attr-defined]  # the Starlette app
                        if hasattr(r, "by_group"))
        cache = next(r.app.cache for r in grouped.by_group["korea-chart"])
        before = cache.size
        for n in range(300):
            again = api.get(f"/korea-chart/portal-a/charts/realtime?limit=5&junk={n}", headers=KEY_HEADERS)
            assert again.content == first.content and again.headers["etag"] == first.headers["etag"]
        assert cache.size == before
