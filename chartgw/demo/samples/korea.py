"""Sample replies for all five Korean sites, in each upstream's real format, keyed as their requests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from types import ModuleType
from typing import Any

from chartgw.crawl.runner import KST
from chartgw.demo.replay import ReplayKey, Reply, request_key
from chartgw.demo.samples import SampleRow, bugs, flo, genie, melon, sample_rows, vibe
from chartgw.upstreams import bugs as bugs_site
from chartgw.upstreams import flo as flo_site
from chartgw.upstreams import genie as genie_site
from chartgw.upstreams import melon as melon_site
from chartgw.upstreams import vibe as vibe_site

Renderer = Callable[[str, list[SampleRow[Any]], datetime], list[bytes]]

# Site -> (its upstream module, how the sample songs are spelled, renderer, content type). Genie and VIBE
# have no captured 2026 spellings of their own, so they borrow Melon's and FLO's.
FORMATS: dict[str, tuple[ModuleType, str, Renderer, str]] = {
    "portal-a": (melon_site, "melon", melon.render, "text/html; charset=utf-8"),
    "portal-b": (genie_site, "melon", genie.render, "text/html; charset=utf-8"),
    "portal-c": (bugs_site, "bugs", bugs.render, "text/html; charset=utf-8"),
    "portal-d": (flo_site, "flo", flo.render, "application/json;charset=UTF-8"),
    "portal-e": (vibe_site, "flo", vibe.render, "application/json;charset=UTF-8"),
}


def site_replies(site: str, chart_type: str, when: datetime, variant: int = 0,
                 size: int = 100) -> dict[ReplayKey, Reply]:
    """The replies that make `site`'s crawl of `chart_type` see sample chart number `variant`."""
    upstream, spelling, render, content_type = FORMATS[site]
    rows = sample_rows(spelling, f"{site}/{chart_type}", variant, size)
    bodies = render(chart_type, rows, when.astimezone(KST))
    requests = upstream.requests_for(chart_type)
    return {request_key(req): Reply(body, 200, content_type) for req, body in zip(requests, bodies, strict=True)}


def all_replies(when: datetime, variant: int = 0) -> dict[str, dict[ReplayKey, Reply]]:
    """Replies for every chart of every site, grouped by upstream name."""
    by_upstream: dict[str, dict[ReplayKey, Reply]] = {}
    for site, (upstream, *_) in FORMATS.items():
        for chart_type in upstream.CHART_TYPES:
            by_upstream.setdefault(upstream.UPSTREAM, {}).update(site_replies(site, chart_type, when, variant))
    return by_upstream
