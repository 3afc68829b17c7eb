"""The representations of an answer: JSON (the payload), and for a chart or list endpoint also CSV and NDJSON of
its rows.

A route declares where its rows are (`Route.rows`: the name of the response field that holds them); the platform
does the rest for every such route alike (`chartgw.api.endpoints.EndpointApp`): the `format` query parameter or,
without it, the Accept header chooses; each representation is its own cached body with its own ETag. The rows are
those of the JSON answer, read back from the JSON encoding of that field, so the two cannot differ. CSV columns
are the fields of the entry type the response declares for the rows, in its order, then any other keys the rows
hold (in the order first seen); a nested value is its JSON text in one cell, null an empty cell.
"""

from __future__ import annotations

import csv
import functools
import io
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from chartgw.api.params import Param

__all__ = ["FORMATS", "FORMAT_PARAM", "MEDIA_TYPES", "Table", "Variant", "negotiate", "rows_asked"]

FORMATS = ("json", "csv", "ndjson")
MEDIA_TYPES = {"json": b"application/json", "csv": b"text/csv; charset=utf-8", "ndjson": b"application/x-ndjson"}
"""What each representation is sent as (Content-Type)."""
DOCUMENTED = {"csv": "text/csv", "ndjson": "application/x-ndjson"}
"""The media types the OpenAPI documents declare for the two row formats."""

FORMAT_PARAM = Param("format", kind="choice", choices=FORMATS, description=(
    "The answer's representation: json (the default), csv (a header line, then one line per row; a nested value "
    "is its JSON text, null an empty cell) or ndjson (one JSON value per row and line). Without it the Accept "
    "header chooses (text/csv, application/x-ndjson)"))
"""The parameter every chart and list route takes (added to its params when it declares `rows`)."""

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.decode
_UnionType = type(int | None)


@dataclass(frozen=True, slots=True)
class Variant:
    """One representation of one endpoint's answers, with the header fields that say which (built once: a cached
    answer sends them as they are; slots: read on every cached poll)."""

    format: str
    """"json" for the route's own representation (its media type), else "csv" or "ndjson"."""
    media_type: bytes
    negotiated: bool
    """Chosen without a `format` parameter: the Accept header may ask for another (so it is read, and Vary names it
    on a route with several)."""
    content_type: tuple[bytes, bytes]
    vary: tuple[bytes, bytes]

    @classmethod
    def of(cls, fmt: str, media_type: bytes, negotiated: bool, vary: bytes) -> Variant:
        return cls(fmt, media_type, negotiated, (b"content-type", media_type), (b"vary", vary))


def rows_asked(accept: bytes) -> bytes | None:
    """An Accept value (lowercased) when it names CSV or NDJSON, else None: the one check a JSON poll with an Accept
    header pays. The answers for the values seen are kept (a few hundred at most): a dict lookup, where a search
    of the bytes costs several times more on every poll."""
    decided = _DECIDED.get(accept)
    if decided is None:
        lowered = accept.lower()
        decided = lowered if b"csv" in lowered or b"ndjson" in lowered else b""
        if len(_DECIDED) < _DECIDED_MAX and len(accept) <= 256:
            _DECIDED[accept] = decided
    return decided or None


_DECIDED: dict[bytes, bytes] = {}
"""Accept values seen -> `rows_asked`'s answer (b"" for None)."""
_DECIDED_MAX = 512


def negotiate(accept: bytes, offered: Sequence[bytes]) -> int | None:
    """Which of the `offered` media types (their index) `accept` prefers (RFC 9110: each gets the weight of the most
    specific range that matches it; the highest weight wins, then an exact match over a wildcard, then the range
    listed first, then the order offered); None when it accepts none of them."""
    ranges = []
    for position, item in enumerate(accept.split(b",")):
        kind, *parameters = item.split(b";")
        weight = 1.0
        for parameter in parameters:
            name, _, value = parameter.partition(b"=")
            if name.strip() == b"q":
                try:
                    weight = float(value.strip())
                except ValueError:
                    weight = 0.0
        ranges.append((kind.strip(), weight, position))
    best: tuple[float, int, int, int] | None = None
    chosen = None
    for index, media_type in enumerate(offered):
        full = media_type.split(b";")[0].strip()
        major = full.split(b"/")[0]
        match = None  # (specificity, weight, position) of the most specific range matching
        for kind, weight, position in ranges:
            specificity = 2 if kind == full else 1 if kind == major + b"/*" else 0 if kind == b"*/*" else -1
            if specificity >= 0 and (match is None or specificity > match[0]):
                match = (specificity, weight, position)
        if match is None or match[1] <= 0:
            continue
        rank = (match[1], match[0], -match[2], -index)
        if best is None or rank > best:
            best, chosen = rank, index
    return chosen


class Table:
    """Where a route's rows are: the name of the response field holding them (one name per alternative response
    type, when the route has several), and how they are written as CSV and NDJSON."""

    def __init__(self, fields: str | tuple[str, ...], response: Any) -> None:
        self.fields = (fields,) if isinstance(fields, str) else fields
        self.kinds = response if isinstance(response, tuple) else (response,)
        for kind in self.kinds:
            found = [f for f in self.fields if _list_field(kind, f) is not None]
            assert len(found) == 1, f"{getattr(kind, '__name__', kind)} has no list field of {self.fields} for its rows"

    def body(self, payload: Any, fmt: str) -> bytes:
        """The payload's rows as `fmt` ("csv" or "ndjson"). A payload given as a dict (a response with what
        `include` added) is read as the response type holding its rows field."""
        if isinstance(payload, dict):
            field = next(f for f in self.fields if f in payload)
            kind: Any = next(k for k in self.kinds if _list_field(k, field) is not None)
            listed = payload[field]
        else:
            kind = type(payload)
            field = next(f for f in self.fields if _list_field(kind, f) is not None)
            listed = getattr(payload, field)
        rows = _decode(_encode(listed))  # what the JSON answer holds (stored records included)
        if rows is None:
            rows = []
        if fmt == "ndjson":
            return b"".join(_encode(row) + b"\n" for row in rows)
        item = _list_field(kind, field)
        columns = _columns(item)
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        if columns is None:  # rows of plain values: one column, named after the field
            writer.writerow([field])
            writer.writerows([_cell(row)] for row in rows)
        else:
            seen = dict.fromkeys(columns)
            for row in rows:
                if isinstance(row, dict):
                    seen.update(dict.fromkeys(row))
            header = list(seen)
            writer.writerow(header)
            writer.writerows([_cell(row.get(c)) for c in header] if isinstance(row, dict) else [_cell(row)]
                             for row in rows)
        return out.getvalue().encode()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return _encode(value).decode()


@functools.cache
def _list_field(kind: Any, field: str) -> Any:
    """The item type of `kind`'s list field `field` (Any when untyped), or None when it has no such list field."""
    if not (isinstance(kind, type) and issubclass(kind, msgspec.Struct)):
        return None
    hint = typing.get_type_hints(kind).get(field)
    for option in typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, _UnionType) else (hint,):
        if typing.get_origin(option) is list:
            return (typing.get_args(option) or (Any,))[0]
    return None



@functools.cache
def _columns(item: Any) -> tuple[str, ...] | None:
    """The columns an item type declares (a struct's fields as encoded, in order); () for objects of no declared
    fields (a dict: its keys make the columns); None for plain values (one value a row)."""
    if isinstance(item, type) and issubclass(item, msgspec.Struct):
        return tuple(f.encode_name for f in msgspec.structs.fields(item))
    if item is Any or typing.get_origin(item) is dict or item is dict:
        return ()
    if typing.get_origin(item) in (typing.Union, _UnionType):  # alternatives: every one's fields, in order
        found = [_columns(option) for option in typing.get_args(item) if option is not type(None)]
        if all(columns is not None for columns in found):
            return tuple(dict.fromkeys(c for columns in found for c in columns or ()))
    return None
