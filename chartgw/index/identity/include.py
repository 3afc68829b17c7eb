"""`include=identity` and `include=facts` on every chart list whose entries carry a rank (`include=identity,facts`
gives both): each entry gains one object per word, `"identity": {"recording_id", "artist_ids", "match"}` and
`"facts": {"previous_rank", "debut_date", "peak_rank", "peak_date", "periods_on_chart", "re_entry"}`, and nothing
else changes but, with facts, a `facts_disagreements` list beside the entries (without `include`, every body is as
before, byte for byte). Identity is looked up in the artist-history index by each entry's title and artist as
printed (`chartgw.index.identity.links`); facts come from the chart's stored history in the group's file
(`chartgw.index.identity.facts`)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from typing import Any

import msgspec

from chartgw.api.endpoints import Call, GroupData, Route
from chartgw.api.group import PLATFORM_ID, EntryMapping
from chartgw.api.params import Param
from chartgw.index.credits import credit_keys, entry_credit
from chartgw.index.identity.facts import FACT_NAMES, chart_facts, source_facts
from chartgw.store import Query

__all__ = ["INCLUDE", "INCLUDE_QUERIES", "ranked", "with_includes"]

INCLUDE = Param("include", kind="choice", choices=("identity", "facts"), array=True,
                description="`identity` adds to each entry its recording id, artist ids and how it was matched;"
                            " `facts` its previous rank, debut, peak, periods on chart and re-entry (docs/identity.md)")

_LINKS = Query(
    "identity_entry_links",
    "SELECT l.artist, l.title, r.id, l.tier, l.variant_id, v.isrc, v.streaming_track_id, v.download_store_track_id,"
    " v.recognition_track_id, v.video_id, v.asin, v.platform_id, v.credits FROM json_each(?) p JOIN identity_links l"
    " ON l.artist = p.value ->> 0 AND l.title = p.value ->> 1 JOIN identity_recordings r ON r.number = l.recording"
    " JOIN variants v ON v.id = l.variant_id ORDER BY l.variant_id")
_NAMES = Query("identity_entry_artists",
               "SELECT name, artist_id FROM identity_artist_names WHERE name IN (SELECT value FROM json_each(?))")
INCLUDE_QUERIES = (_LINKS, _NAMES)
_ID_COLUMNS = ("isrc", "streaming_track_id", "download_store_track_id", "recognition_track_id", "video_id", "asin",
               PLATFORM_ID)
_encode, _decode = msgspec.json.Encoder().encode, msgspec.json.decode


def ranked(route: Route) -> bool:
    """Whether a route lists entries that carry a rank (a chart list)."""
    if route.rows is None or route.response is None:
        return False
    for kind in route.response if isinstance(route.response, tuple) else (route.response,):
        for field in (route.rows,) if isinstance(route.rows, str) else route.rows:
            item = _item_type(kind, field)
            if item is not None and "rank" in {f.name for f in getattr(item, "fields", ())}:
                return True
    return False


def _item_type(kind: Any, field: str) -> Any:
    info = msgspec.inspect.type_info(kind)
    for f in getattr(info, "fields", ()):
        if f.name == field:
            listed = f.type
            if isinstance(listed, msgspec.inspect.UnionType):
                listed = next((t for t in listed.types if isinstance(t, msgspec.inspect.ListType)), None)
            return getattr(listed, "item_type", None)
    return None


def with_includes(route: Route, mapping: EntryMapping, index: GroupData) -> Route:
    """`route` taking `include`: its handler's entries given their identity and facts when it asks for them."""
    fields = (route.rows,) if isinstance(route.rows, str) else tuple(route.rows or ())

    async def handler(call: Call[dict[str, Any]]) -> Any:  # takes `include` out of the validated dict
        include = call.params.pop(INCLUDE.name, None)
        payload = await route.handler(call)
        if not include:
            return payload
        field = next((f for f in fields if _rows(payload, f) is not None), None)
        if field is None:
            return payload
        entries = [e for e in _decode(_encode(_rows(payload, field))) if isinstance(e, dict)]
        extra: dict[str, Any] = {field: entries}
        if "identity" in include:
            snapshot = _rows(payload, "snapshot")
            target = _rows(snapshot, "target") if snapshot is not None else None
            identities = await _identities(index, mapping, entries, target if isinstance(target, str) else None)
            for entry, identity in zip(entries, identities, strict=True):
                entry["identity"] = identity
        if "facts" in include:
            extra["facts_disagreements"] = await _facts(call, mapping, payload, entries)
        if isinstance(payload, dict):
            return {**payload, **extra}
        return {**_decode(_encode(payload)), **extra}

    return replace(route, handler=handler, params=(*route.params, INCLUDE))


async def _facts(call: Call, mapping: EntryMapping, payload: Any, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each entry's facts (null where the answer is no one chart edition: a search, a bundle of charts), the source's
    own where it printed them; the disagreements between the two."""
    snapshot = _rows(payload, "snapshot")
    snapshot_id, target, chart_date = (_rows(snapshot, name) if snapshot is not None else None
                                       for name in ("id", "target", "chart_date"))
    if not (isinstance(snapshot_id, int) and isinstance(target, str) and isinstance(chart_date, str)):
        for entry in entries:
            entry["facts"] = None
        return []
    computed = await chart_facts(call.data.reader, snapshot_id, target, chart_date)
    disagreements: list[dict[str, Any]] = []
    for entry in entries:
        facts = computed.by_rank.get(entry.get("rank"))  # type: ignore[arg-type]
        if facts is None:
            entry["facts"] = None
            continue
        printed = source_facts(entry, mapping.facts)
        for fact, value in printed.items():
            if value != facts[fact]:
                disagreements.append({"rank": entry["rank"], "fact": fact, "source": value, "computed": facts[fact]})
        entry["facts"] = {name: printed.get(name, facts[name]) for name in FACT_NAMES}
    return disagreements


def _rows(payload: Any, field: str) -> Any:
    return payload.get(field) if isinstance(payload, dict) else getattr(payload, field, None)


async def _fetch(index: GroupData, query: Query, args: list[Any]) -> list[Any]:
    try:
        return list(await index.reader.fetchall(query, args))
    except sqlite3.OperationalError as exc:  # no index yet, or one built before identity
        if "no such table" not in str(exc) and "no such column" not in str(exc):
            raise
        return []


async def _identities(index: GroupData, mapping: EntryMapping, entries: list[dict[str, Any]],
                      target: str | None) -> list[dict[str, Any]]:
    """Each entry's identity: the link of its row form (the one whose ids agree, when several: two sites' rows of
    one text differ by their song ids, the snapshot's `target` telling which site's an entry is), the ids of the
    artists its row form is indexed under (`appearance_artists`' keys: one artist layer; an entry not indexed yet,
    the keys its credit would have); a recording id of null and `none` for an entry not indexed yet."""
    read = [mapping.identity_fields(e, target) for e in entries]
    pairs = sorted({(artist, title) for r in read if r is not None for title, artist, _ in [r]})
    links: dict[tuple[str, str], list[Any]] = {}
    for row in await _fetch(index, _LINKS, [json.dumps(pairs, ensure_ascii=False)]):
        links.setdefault((row[0], row[1]), []).append(row)
    chosen: list[tuple[list[Any] | None, tuple[str, ...]]] = []
    for fields in read:
        if fields is None:
            chosen.append((None, ()))
            continue
        title, artist, ids = fields
        options = links.get((artist, title), [])
        best = next((o for o in options if _agrees(o, ids)), options[0] if options else None)
        chosen.append((best, credit_keys(best[12]) if best else entry_credit(artist, (), title or None).keys))
    names = sorted({n for _, keys in chosen for n in keys})
    artist_ids = dict(await _fetch(index, _NAMES, [json.dumps(names, ensure_ascii=False)]))
    out: list[dict[str, Any]] = []
    for fields, (best, keys) in zip(read, chosen, strict=True):
        if fields is None:
            out.append({"recording_id": None, "artist_ids": [], "match": "none"})
            continue
        ids_of = list(dict.fromkeys(artist_ids[n] for n in keys if n in artist_ids))
        out.append({"recording_id": best[2] if best else None, "artist_ids": ids_of,
                    "match": best[3] if best else "none"})
    return out


def _agrees(link: list[Any], ids: dict[str, str]) -> bool:
    """Whether a linked row form carries the entry's ids (every id both have is the same)."""
    held = dict(zip(_ID_COLUMNS, link[5:12], strict=True))
    return all(held.get(kind) in (None, value) for kind, value in ids.items() if kind in held)
