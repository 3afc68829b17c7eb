"""One module per upstream: its request specs and its parsers, pure functions from bytes to records.

Shared by them: `fields` (decoding, whitespace, numbers, URLs, HTML nodes), `json_api` (strict
access to the JSON chart APIs' payloads) and, here, the error type, the request type and the
chart-type check.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import NamedTuple


class UpstreamFormatError(ValueError):
    """The body is not the page or payload the parser knows; the message says what was missing."""


class UpstreamRequest(NamedTuple):
    """One HTTP request to an upstream, with the path and query the real site uses.

    The origin comes from `chartgw.config.upstream_origin(upstream)`, so a replay server can stand in.
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
