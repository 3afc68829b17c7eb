"""Parameter declarations and their validation, with FastAPI's 422 body byte for byte.

Existing clients of the gateway were written against a FastAPI service, so errors keep its exact
shape: every error of a request at once, path parameters before query parameters, each with
`type`, `loc`, `msg`, `input` (and `ctx` where pydantic gives one). Integers are read the way
pydantic reads a string: surrounding Unicode whitespace is ignored, `_` may separate ASCII digits,
and a fraction of only zeros is allowed ("5.0" is 5, "5." and "5.5" are not integers).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl

import msgspec

Where = Literal["path", "query"]
_INT = re.compile(r"[+-]?[0-9](?:_?[0-9])*(?:\.0+)?", re.ASCII)

MSG_MISSING = "Field required"
MSG_INT = "Input should be a valid integer, unable to parse string as an integer"


@dataclass(frozen=True)
class Param:
    """One declared parameter. `kind` is "str", "int" or "choice" (a Literal of `choices`)."""

    name: str
    where: Where = "query"
    kind: Literal["str", "int", "choice"] = "str"
    required: bool = False
    default: Any = None
    ge: int | None = None
    le: int | None = None
    choices: tuple[str, ...] = ()
    description: str = ""

    def validate(self, raw: str | None) -> tuple[Any, dict[str, Any] | None]:
        """The parsed value, or None and the error item for this parameter."""
        loc = [self.where, self.name]
        if raw is None:
            if self.required:
                return None, {"type": "missing", "loc": loc, "msg": MSG_MISSING, "input": None}
            return self.default, None
        if self.kind == "choice":
            return (raw, None) if raw in self.choices else (None, literal_error(loc, raw, self.choices))
        if self.kind == "int":
            return self._validate_int(raw, loc)
        return raw, None

    def _validate_int(self, raw: str, loc: list[str]) -> tuple[int | None, dict[str, Any] | None]:
        text = raw.strip()
        if not _INT.fullmatch(text):
            return None, {"type": "int_parsing", "loc": loc, "msg": MSG_INT, "input": raw}
        value = int(text.partition(".")[0])
        if self.ge is not None and value < self.ge:
            return None, {"type": "greater_than_equal", "loc": loc,
                          "msg": f"Input should be greater than or equal to {self.ge}", "input": raw,
                          "ctx": {"ge": self.ge}}
        if self.le is not None and value > self.le:
            return None, {"type": "less_than_equal", "loc": loc,
                          "msg": f"Input should be less than or equal to {self.le}", "input": raw,
                          "ctx": {"le": self.le}}
        return value, None

    def json_schema(self) -> dict[str, Any]:
        """This parameter's schema in the OpenAPI document."""
        schema: dict[str, Any]
        if self.kind == "int":
            schema = {"type": "integer"}
            if self.ge is not None:
                schema["minimum"] = self.ge
            if self.le is not None:
                schema["maximum"] = self.le
        elif self.kind == "choice":
            schema = {"type": "string", "enum": list(self.choices)}
        else:
            schema = {"type": "string"}
        if self.default is not None:
            schema["default"] = self.default
        return schema


def literal_error(loc: Sequence[str | int], value: str, choices: Sequence[str]) -> dict[str, Any]:
    """pydantic's error for a value outside a Literal: "Input should be 'a', 'b' or 'c'"."""
    quoted = [f"'{c}'" for c in choices]
    expected = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return {"type": "literal_error", "loc": list(loc), "msg": f"Input should be {expected}", "input": value,
            "ctx": {"expected": expected}}


class InvalidParams(Exception):
    """Raised with FastAPI-shaped error items; answered as 422 with `{"detail": [...]}`."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(errors)
        self.errors = errors

    def body(self) -> bytes:
        return msgspec.json.encode({"detail": self.errors})


def parse_query(query_string: bytes) -> dict[str, str]:
    """Query parameters with blank values kept; the last of repeated names wins, as in FastAPI."""
    return dict(parse_qsl(query_string.decode("latin-1"), keep_blank_values=True, encoding="utf-8"))


def validate(params: Sequence[Param], path: Mapping[str, str], query: Mapping[str, str]) -> dict[str, Any]:
    """All declared parameters parsed, or InvalidParams with every error (path first, then query)."""
    values: dict[str, Any] = {}
    errors: list[dict[str, Any]] = []
    for where in ("path", "query"):
        source = path if where == "path" else query
        for param in params:
            if param.where != where:
                continue
            value, error = param.validate(source.get(param.name))
            if error is not None:
                errors.append(error)
            else:
                values[param.name] = value
    if errors:
        raise InvalidParams(errors)
    return values
