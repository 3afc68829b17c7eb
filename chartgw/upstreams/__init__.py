"""One module per upstream: its request specs and its parsers, pure functions from bytes to records.

Shared by them: `fields` (decoding, whitespace, numbers, URLs, HTML nodes), `json_api` (strict
access to the JSON chart APIs' payloads) and, here, the error type, the request type and the
chart-type check.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import NamedTuple

from chartgw.core.config import Setting, upstream_setting
from chartgw.core.settings import Settings

ORIGINS: dict[str, str] = {}
"""Every declared upstream's real origin by name, filled as the upstream modules are imported."""
BODY_LIMITS: dict[str, int] = {}
DEFAULT_BODY_LIMIT = 32 * 1024 * 1024
"""The most a crawl reads of one answer, unless the upstream declares otherwise: a chart page or feed is
far smaller, so more is an upstream gone wrong (or hostile), never a chart."""


def declare_upstream(name: str, origin: str, max_body_bytes: int = DEFAULT_BODY_LIMIT) -> str:
    """Declare upstream `name` (`CHARTGW_UPSTREAM_<name>` replaces its origin) with its real origin; returns `name`.

    Each upstream module declares its own, beside its parsers: `UPSTREAM = declare_upstream("MELON", "https://...")`.
    """
    assert name.isupper() and name.replace("_", "").isalnum(), f"upstream names are UPPER_SNAKE: {name!r}"
    assert origin.count("/") == 2 and "://" in origin, f"an origin is scheme://host[:port]: {origin!r}"
    known = ORIGINS.setdefault(name, origin)
    assert known == origin, f"upstream {name} declared twice with different origins"
    BODY_LIMITS[name] = max_body_bytes
    return name


def body_limit(name: str) -> int:
    return BODY_LIMITS.get(name, DEFAULT_BODY_LIMIT)


class UpstreamFormatError(ValueError):
    """The body is not the page or payload the parser knows; the message says what was missing."""


class UpstreamRequest(NamedTuple):
    """One HTTP request to an upstream, with the path and query the real site uses.

    The origin comes from `chartgw.upstreams.origin(upstream)`, so a replay server can stand in.
    """

    upstream: str
    path: str
    params: tuple[tuple[str, str], ...] = ()
    method: str = "GET"
    headers: tuple[tuple[str, str], ...] = ()
    form: tuple[tuple[str, str], ...] | None = None
    body: bytes | None = None
    """A raw request body (e.g. JSON for a POST API); its content type goes in `headers`."""


def check_chart_type(upstream_label: str, chart_type: str, known: Collection[str]) -> str:
    """`chart_type` itself when `known` lists it; else a ValueError naming the upstream and the known types."""
    if chart_type not in known:
        raise ValueError(f"{upstream_label}: unknown chart type {chart_type!r}; known: {', '.join(known)}")
    return chart_type


def origin_setting(name: str) -> Setting[str]:
    """The `CHARTGW_UPSTREAM_<name>` setting of a declared upstream."""
    return upstream_setting(name, ORIGINS[name])


def origin(name: str, settings: Settings) -> str:
    """The scheme://host[:port] to use for upstream `name`: `CHARTGW_UPSTREAM_<name>` when set, else the real one."""
    return settings.get(origin_setting(name))
