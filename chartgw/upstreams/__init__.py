"""One module per upstream: its request specs and its parsers, pure functions from bytes to records."""

from __future__ import annotations

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
