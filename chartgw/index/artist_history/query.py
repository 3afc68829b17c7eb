"""/artist-history query parameters: which artist (names, ids), which charts, markets and dates, read and
checked into one `Query` (FastAPI-identical 422 items).

The spec's array parameters take their values repeated (`?isrc=A&isrc=B`, what generated clients send) or
comma-separated (`?isrc=A,B`) alike. `name` and `artist` (the usage example's alias) may both be given when they
normalise alike.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chartgw.api.params import InvalidParams, Param, accepts, comma_separated, one_of, search_term
from chartgw.core.countries import COUNTRIES, GLOBAL, country_param
from chartgw.index import history as index

NAME = index.INDEX_NAME
STALE_AFTER_SECONDS = 3600
"""A source is stale in /health when a snapshot older than this is still not indexed."""

STRING_ID_PARAMS = ("isrc", "download_store_track_id", "streaming_track_id", "recognition_track_id", "video_id")
INT_LIST_PARAMS = ("analytics_track", "lyrics_song_id")
INT_PARAMS = ("analytics_artist", "lyrics_artist_id")
ID_PARAMS = ("isrc", "download_store_track_id", "streaming_track_id", "analytics_artist", "analytics_track",
             "lyrics_artist_id", "lyrics_song_id", "recognition_track_id", "video_id")
"""The spec's id parameters, in its table's order; each is the index column of the same name."""
MAX_VALUES = 100
"""Values one array parameter may list."""
ID_PATTERN = "^[A-Za-z0-9_.:-]+$"
"""What one string id may be (ISRCs, store and platform ids, video ids)."""
MAX_KEYS = 200
"""Artist keys one query may widen to through aliases."""


# --- parameters -----------------------------------------------------------------------------------

def _values(raw: str) -> tuple[str, ...]:
    """The values of a comma-separated string parameter (`sources`, `markets`), once each."""
    values = tuple(dict.fromkeys(v.strip() for v in raw.split(",") if v.strip()))
    if not values:
        raise ValueError("give at least one value (several are comma-separated)")
    if len(values) > MAX_VALUES:
        raise ValueError(f"at most {MAX_VALUES} comma-separated values")
    return values


@accepts(pattern=lambda settings: comma_separated(f"(?:{one_of([g.name for g in index.source_groups()])})(?::[a-z0-9/_-]*)?",
                                          MAX_VALUES))
def _sources(raw: str) -> tuple[tuple[str, str | None], ...]:
    known = [g.name for g in index.source_groups()]
    chosen: list[tuple[str, str | None]] = []
    for value in _values(raw):
        group, _, chart = value.partition(":")
        if group not in known:
            raise ValueError(f"unknown source {group!r}; sources: {', '.join(known)} (or 'source:chart')")
        chosen.append((group, chart.strip("/") or None))
    return tuple(chosen)


@accepts(pattern=comma_separated(one_of([GLOBAL, *COUNTRIES]), MAX_VALUES))
def _markets(raw: str) -> tuple[str, ...]:
    return tuple(country_param(v) for v in _values(raw))


IDENTIFYING = ("name", "name_local", *ID_PARAMS)


def route_params(paged: bool) -> tuple[Param, ...]:
    params = [
        Param("name", check=search_term, description="Artist name (any script); matched on normalised keys and aliases"),
        Param("name_local", check=search_term, description="Artist name in the local script (e.g. 아이유); a union with name"),
        Param("artist", check=search_term,
              description="Alias of `name` (the published usage example's parameter); both may be given when they "
                          "normalise alike (case, accents, punctuation), else a 422"),
    ]
    for name in ID_PARAMS:
        if name in INT_PARAMS:
            params.append(Param(name, kind="int", description=f"{name} (integer)"))
        elif name in INT_LIST_PARAMS:
            params.append(Param(name, kind="int", array=True, max_items=MAX_VALUES,
                                description=f"{name}: integers, the parameter repeated or comma-separated"))
        else:
            params.append(Param(name, array=True, max_items=MAX_VALUES, pattern=ID_PATTERN,
                                description=f"{name}: ids, the parameter repeated or comma-separated"))
    params += [
        Param("sources", check=_sources,
              description="Comma-separated source groups, or `group:chart` (a chart or chart prefix: korea-chart:portal-a)"),
        Param("markets", check=_markets, description="Comma-separated markets: ISO 3166-1 alpha-2 codes or 'global'"),
        Param("since", kind="date", description="First chart date, YYYY-MM-DD (inclusive)"),
        Param("until", kind="date", description="Last chart date, YYYY-MM-DD (inclusive)"),
    ]
    if paged:
        params += [
            Param("cursor", description="`next_cursor` of the previous page (opaque; valid for the same query only)"),
            Param("limit", kind="int", default=5000, ge=1, le=50000, description="Rows per page, newest first"),
        ]
    return tuple(params)


def value_error_item(name: str, raw: Any, message: str) -> dict[str, Any]:
    return {"type": "value_error", "loc": ["query", name], "msg": f"Value error, {message}", "input": raw,
            "ctx": {"error": {}}}


@dataclass
class Query:
    """A validated artist query."""

    names: dict[str, str]
    """"name" / "name_local" -> the name given."""
    ids: dict[str, tuple[str, ...]]
    sources: tuple[tuple[str, str | None], ...]
    markets: tuple[str, ...]
    since: str | None
    until: str | None
    keys: dict[str, list[str]] = field(default_factory=dict)
    """"name" / "name_local" -> the artist keys it widened to."""

    def fingerprint(self) -> str:
        """What a cursor is bound to: the query without paging."""
        canonical = json.dumps([sorted(self.names.items()), sorted(self.ids.items()), self.sources, self.markets,
                                self.since, self.until], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def read_query(params: Mapping[str, Any]) -> Query:
    """The query of validated parameters, or a 422 for what only the combination makes wrong."""
    errors = []
    name, artist = params.get("name"), params.get("artist")
    if name is not None and artist is not None and index.name_keys(name) != index.name_keys(artist):
        errors.append(value_error_item("artist", artist, "`artist` is an alias of `name`; give one, or the same name"))
    name = name if name is not None else artist
    names = {k: v for k, v in (("name", name), ("name_local", params.get("name_local"))) if v is not None}
    ids: dict[str, tuple[str, ...]] = {}
    for kind in ID_PARAMS:
        value = params.get(kind)
        if value is not None:
            ids[kind] = (str(value),) if kind in INT_PARAMS else tuple(dict.fromkeys(str(v) for v in value))
    if not names and not ids:
        errors.append({"type": "missing", "loc": ["query", "name"],
                       "msg": f"Field required: give at least one of {', '.join(IDENTIFYING)} (or artist)", "input": None})
    since, until = params.get("since"), params.get("until")
    if since is not None and until is not None and since > until:
        errors.append(value_error_item("until", until, f"until ({until}) is before since ({since})"))
    if errors:
        raise InvalidParams(errors)
    return Query(names, ids, params.get("sources") or (), params.get("markets") or (), since, until)
