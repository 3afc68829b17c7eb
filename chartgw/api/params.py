"""Parameter declarations and their validation, with FastAPI's 422 body byte for byte.

Existing clients of the gateway were written against a FastAPI service, so errors keep its exact
shape: every error of a request at once, path parameters before query parameters, each with
`type`, `loc`, `msg`, `input` (and `ctx` where pydantic gives one). Integers are read the way
pydantic reads a string: surrounding Unicode whitespace is ignored, `_` may separate ASCII digits,
and a fraction of only zeros is allowed ("5.0" is 5, "5." and "5.5" are not integers).

A single-value parameter given twice (`?name=A&name=B`) is a 422 (`multiple_values`): FastAPI would keep the
last silently, and a client sending two meant something the gateway cannot answer. An array parameter
(`Param(array=True)`, FastAPI's `list[...]` query) takes every value, repeated (`?isrc=A&isrc=B`, what generated
clients send) or comma-separated (`?isrc=A,B`), and a bad item is reported at its index (`["query", "isrc", 1]`).
"""

from __future__ import annotations

import math
import re
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Literal, TypedDict, TypeVar, Union, get_args, get_origin, get_type_hints
from urllib.parse import parse_qsl

import msgspec

from chartgw.core.countries import COUNTRIES, GLOBAL, country_param
from chartgw.core.settings import Settings
from chartgw.core.text import compact

__all__ = [
    "SEARCH_RULE",
    "InvalidParams",
    "Limited",
    "Param",
    "QueryParams",
    "Where",
    "accepts",
    "check_params_type",
    "comma_separated",
    "limit_param",
    "literal_error",
    "multiple_values_error",
    "one_of",
    "parse_query",
    "search_param",
    "search_term",
    "validate",
]

Where = Literal["path", "query"]
_INT = re.compile(r"[+-]?[0-9](?:_?[0-9])*(?:\.0+)?", re.ASCII)

MSG_MISSING = "Field required"
MSG_INT = "Input should be a valid integer, unable to parse string as an integer"
MSG_BOOL = "Input should be a valid boolean, unable to interpret input"
Loc = list[str | int]
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})

Check = TypeVar("Check", bound=Callable[[str], Any])
_ACCEPTED: dict[Callable[[str], Any], tuple[str | None, dict[str, Any]]] = {}


def comma_separated(item: str, most: int) -> str:
    """The pattern of 1 to `most` values, comma-separated, each matching the pattern `item`."""
    return f"^(?:{item})(?:,(?:{item})){{0,{most - 1}}}$"


def one_of(values: Sequence[str]) -> str:
    """The pattern of any of `values` (words of letters, digits and "-", which need no escape)."""
    assert all(re.fullmatch(r"[A-Za-z0-9-]+", v) for v in values), values
    return "|".join(values)


def accepts(component: str | None = None, **schema: Any) -> Callable[[Check], Check]:
    """Declares what a `check` takes, as JSON Schema keywords (`pattern`, `enum`), next to the rule itself: every
    parameter it checks says so in the OpenAPI document, so a client can tell a valid value before asking (the
    schemathesis test sends values the document allows and expects none refused). A keyword's value may be a
    function, called with the settings of the app building the document (None outside an app) when a document is
    built, for a list known only then (a discovered catalogue); None from it leaves the keyword out.
    With a `component` name the schema is declared once under that name and referred to (one `Country` enum in
    a generated client, not one per parameter)."""

    def declare(check: Check) -> Check:
        _ACCEPTED[check] = (component, schema)
        return check

    return declare


# The country rule lives below this module (countries is a leaf); what it accepts is declared here.
accepts("Country", enum=[GLOBAL, *COUNTRIES], description="'global' or an ISO 3166-1 alpha-2 code")(country_param)


@dataclass(frozen=True)
class Param:
    """One declared parameter.

    `kind` is "str", "int", "bool", "choice" (a Literal of `choices`) or "date" (a `datetime.date`,
    served on as "YYYY-MM-DD"). `check` turns a string into its value or raises ValueError, which is
    answered as pydantic's `value_error` (an AfterValidator in FastAPI terms).
    """

    name: str
    where: Where = "query"
    kind: Literal["str", "int", "bool", "choice", "date"] = "str"
    required: bool = False
    default: Any = None
    ge: int | None = None
    le: int | None = None
    choices: tuple[str, ...] = ()
    description: str = ""
    min_length: int | None = None
    check: Callable[[str], Any] | None = None
    choices_by: tuple[str, Mapping[str, tuple[str, ...]]] | None = None
    """Choices that depend on another parameter's value: (its name, {its value: the choices then}). Only the
    document reads it: a path parameter's route is documented once per value of the other (a literal segment)
    with that value's enum; in the query, the union is declared and the rule described."""
    pattern: str | None = None
    """A regular expression a string must match (searched, as pydantic does; anchor it): FastAPI's `Query(pattern=)`."""
    array: bool = False
    """A query parameter that is a list of values (FastAPI's `list[...]`), each read as `kind`, `pattern` and
    `check` say, into a tuple: every value given (repeated), each split at commas; empty parts are left out.
    At least one item when given (pydantic's `too_short` otherwise)."""
    max_items: int | None = None
    """The most items an array parameter takes (pydantic's `too_long` past it)."""

    def __post_init__(self) -> None:
        assert not self.array or self.where == "query", "only a query parameter can repeat"

    def validate(self, raw: str | None) -> tuple[Any, dict[str, Any] | None]:
        """The parsed value, or None and the error item for this parameter (a scalar one; see `validate_all`)."""
        loc: Loc = [self.where, self.name]
        if raw is None:
            if self.required:
                return None, {"type": "missing", "loc": loc, "msg": MSG_MISSING, "input": None}
            return self.default, None
        return self._one(raw, loc)

    def validate_all(self, given: Sequence[str]) -> tuple[Any, list[dict[str, Any]]]:
        """The value of every value `given` for this parameter (in order; none = absent) and the error items:
        a scalar parameter reads the last, an array one all of their comma-separated items."""
        if not self.array:
            value, error = self.validate(given[-1] if given else None)
            return value, [] if error is None else [error]
        loc: Loc = [self.where, self.name]
        if not given:
            if self.required:
                return None, [{"type": "missing", "loc": loc, "msg": MSG_MISSING, "input": None}]
            return self.default, []
        items = [part.strip() for raw in given for part in raw.split(",") if part.strip()]
        if self.max_items is not None and len(items) > self.max_items:
            return None, [_length_error(loc, items, "too_long", f"at most {self.max_items}", self.max_items)]
        values, errors = [], []
        for n, item in enumerate(items):
            value, error = self._one(item, [*loc, n])
            values.append(value)
            if error is not None:
                errors.append(error)
        if errors:
            return None, errors
        if not values:
            return None, [_length_error(loc, items, "too_short", "at least 1", 1)]
        return tuple(values), []

    def _one(self, raw: str, loc: Loc) -> tuple[Any, dict[str, Any] | None]:
        """One given value (or one item of an array) read as `kind` says, errors located at `loc`."""
        if self.kind == "choice":
            return (raw, None) if raw in self.choices else (None, literal_error(loc, raw, self.choices))
        if self.kind == "int":
            return self._validate_int(raw, loc)
        if self.kind == "date":
            return _validate_date(raw, loc)
        if self.kind == "bool":
            word = raw.lower()
            if word in _TRUE or word in _FALSE:
                return word in _TRUE, None
            return None, {"type": "bool_parsing", "loc": loc, "msg": MSG_BOOL, "input": raw}
        if self.min_length is not None and len(raw) < self.min_length:
            plural = "" if self.min_length == 1 else "s"
            return None, {"type": "string_too_short", "loc": loc,
                          "msg": f"String should have at least {self.min_length} character{plural}", "input": raw,
                          "ctx": {"min_length": self.min_length}}
        if self.pattern is not None and not re.search(self.pattern, raw):
            return None, {"type": "string_pattern_mismatch", "loc": loc,
                          "msg": f"String should match pattern '{self.pattern}'", "input": raw,
                          "ctx": {"pattern": self.pattern}}
        if self.check is not None:
            try:
                return self.check(raw), None
            except ValueError as exc:
                return None, {"type": "value_error", "loc": loc, "msg": f"Value error, {exc}", "input": raw,
                              "ctx": {"error": {}}}
        return raw, None

    def _validate_int(self, raw: str, loc: Loc) -> tuple[int | None, dict[str, Any] | None]:
        text = raw.strip()
        if not _INT.fullmatch(text):
            return None, {"type": "int_parsing", "loc": loc, "msg": MSG_INT, "input": raw}
        whole = text.partition(".")[0]
        digits = whole.lstrip("+-").lstrip("0_") or "0"  # leading zeros count for nothing, however many
        # Past Python's int() digit limit the value is beyond any bound anyway: compare it as +/- infinity.
        negative = whole.startswith("-")
        value: float = ((-int(digits) if negative else int(digits)) if len(digits) <= 4000
                        else float("-inf") if negative else float("inf"))
        if self.ge is not None and value < self.ge:
            return None, {"type": "greater_than_equal", "loc": loc,
                          "msg": f"Input should be greater than or equal to {self.ge}", "input": raw,
                          "ctx": {"ge": self.ge}}
        if self.le is not None and value > self.le:
            return None, {"type": "less_than_equal", "loc": loc,
                          "msg": f"Input should be less than or equal to {self.le}", "input": raw,
                          "ctx": {"le": self.le}}
        if not isinstance(value, int):
            return None, {"type": "int_parsing", "loc": loc, "msg": MSG_INT, "input": raw}
        return value, None

    def json_schema(self, settings: Settings | None = None) -> dict[str, Any]:
        """This parameter's schema in the OpenAPI document (an array's: its items' schema, at least one), under
        the settings of the app building it."""
        schema = self._value_schema(settings)
        if self.array:
            schema = {"type": "array", "items": schema, "minItems": 1}
            if self.max_items is not None:
                schema["maxItems"] = self.max_items
        if self.default is not None:
            schema["default"] = list(self.default) if self.array else self.default
        return schema

    def _value_schema(self, settings: Settings | None) -> dict[str, Any]:
        """The schema of one value (one item of an array)."""
        schema: dict[str, Any]
        if self.kind == "int":
            schema = {"type": "integer"}
            if self.ge is not None:
                schema["minimum"] = self.ge
            if self.le is not None:
                schema["maximum"] = self.le
        elif self.kind == "choice":
            schema = {"type": "string", "enum": list(self.choices)}
        elif self.kind == "date":
            schema = {"type": "string", "format": "date"}
        elif self.kind == "bool":
            schema = {"type": "boolean"}
        else:
            schema = {"type": "string"}
            if self.min_length is not None:
                schema["minLength"] = self.min_length
            if self.pattern is not None:
                schema["pattern"] = self.pattern
            if self.choices_by is not None:
                schema["enum"] = list(dict.fromkeys(c for choices in self.choices_by[1].values() for c in choices))
            declared = self.component(settings)
            if declared is not None:
                schema = {"$ref": f"#/components/schemas/{declared[0]}"}
            elif self.check is not None and self.check in _ACCEPTED:
                schema.update(_declared(_ACCEPTED[self.check][1], settings))
        return schema

    def component(self, settings: Settings | None = None) -> tuple[str, dict[str, Any]] | None:
        """The named schema this parameter refers to (`accepts(component=...)` of its check), if any."""
        name, keywords = _ACCEPTED.get(self.check, (None, {})) if self.check is not None else (None, {})
        if name is None:
            return None
        return name, {"type": "string", **_declared(keywords, settings)}


def _declared(keywords: dict[str, Any], settings: Settings | None) -> dict[str, Any]:
    """`accepts` keywords as of now: a function's value is asked for (under `settings`), and left out when it is
    None (a list not known yet, e.g. before the first discovery)."""
    values = {k: v(settings) if callable(v) else v for k, v in keywords.items()}
    return {k: v for k, v in values.items() if v is not None}


_TIME = re.compile(r"(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(Z|z|[+-]\d{2}:?\d{2})?", re.ASCII)
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
MSG_DATE_INEXACT = "Datetimes provided to dates should have zero time - e.g. be exact dates"
MS_WATERSHED = 20_000_000_000
"""A timestamp whose absolute value is past this is in milliseconds, else in seconds (pydantic's rule)."""
I64 = 2**63
UNIX_0000 = -62_167_219_200  # 0000-01-01: the first second a timestamp may name
UNIX_0001 = -62_135_596_800  # 0001-01-01: the first day a `datetime.date` holds
UNIX_9999 = 253_402_300_799  # 9999-12-31T23:59:59: the last second


def _date_error(loc: Loc, raw: str, error: str) -> tuple[None, dict[str, Any]]:
    return None, {"type": "date_from_datetime_parsing", "loc": loc,
                  "msg": f"Input should be a valid date or datetime, {error}", "input": raw, "ctx": {"error": error}}


def _year_zero(loc: Loc, raw: str) -> tuple[None, dict[str, Any]]:
    return None, {"type": "date_parsing", "loc": loc,
                  "msg": "Input should be a valid date in the format YYYY-MM-DD, year 0 is out of range",
                  "input": raw, "ctx": {"error": "year 0 is out of range"}}


def _timestamp(raw: str) -> tuple[int, int] | None:
    """A Unix timestamp read as pydantic (speedate) reads one: (seconds, microseconds), or None when `raw` is not
    one. Integers are 64-bit (a longer number is no timestamp, whatever its digits); a decimal (with a ".") is a
    double; past `MS_WATERSHED` either is milliseconds. Never an exception: no int() of thousands of digits,
    no float overflow."""
    if _INTEGER.fullmatch(raw):
        digits = raw.lstrip("+-").lstrip("0") or "0"  # leading zeros count for nothing, however many
        if len(digits) > 19:
            return None
        value = -int(digits) if raw[0] == "-" else int(digits)
        if not -I64 <= value < I64:
            return None
        if value == -I64:  # its absolute value is no 64-bit integer: pydantic calls it too small
            return UNIX_0000 - 1, 0
        if abs(value) <= MS_WATERSHED:
            return value, 0
        seconds, millis = divmod(value, 1000)
        return seconds, millis * 1000
    if not _DECIMAL.fullmatch(raw):
        return None
    number = float(raw)  # a huge exponent is inf, never an error
    if abs(number) > MS_WATERSHED:
        number /= 1000
    if math.isinf(number):  # what Rust's saturating casts make of it
        return (I64 - 1, 0) if number > 0 else (-I64, 0)
    seconds = max(-I64, min(I64 - 1, math.floor(number)))
    micro = math.floor((number - seconds) * 1_000_000 + 0.5)  # rounded half away from zero, as Rust rounds
    return seconds + micro // 1_000_000, micro % 1_000_000


def _timestamp_date(raw: str, loc: Loc, seconds: int, micro: int) -> tuple[str | None, dict[str, Any] | None]:
    if seconds < UNIX_0000:
        return _date_error(loc, raw, "dates before 0000 are not supported as unix timestamps")
    if seconds > UNIX_9999:
        return _date_error(loc, raw, "dates after 9999 are not supported as unix timestamps")
    if seconds % 86400 or micro:
        return None, {"type": "date_from_datetime_inexact", "loc": loc, "msg": MSG_DATE_INEXACT, "input": raw}
    if seconds < UNIX_0001:
        return _year_zero(loc, raw)
    return (date(1970, 1, 1) + timedelta(days=seconds // 86400)).isoformat(), None


def _validate_date(raw: str, loc: Loc) -> tuple[str | None, dict[str, Any] | None]:
    """A `datetime.date` query value read as pydantic reads one: "YYYY-MM-DD", or a date-time or Unix
    timestamp whose time is exactly midnight; anything else gets pydantic's error text for it (a date out of
    range included: never an exception, whatever the value)."""
    inexact = {"type": "date_from_datetime_inexact", "loc": loc, "msg": MSG_DATE_INEXACT, "input": raw}
    stamp = _timestamp(raw)
    if stamp is not None:
        return _timestamp_date(raw, loc, *stamp)
    if len(raw) < 10:
        return _date_error(loc, raw, "input is too short")
    for part, span in (("year", raw[0:4]), ("month", raw[5:7]), ("day", raw[8:10])):
        if not span.isascii() or not span.isdigit():
            return _date_error(loc, raw, f"invalid character in {part}")
        if part != "day" and raw[4 if part == "year" else 7] != "-":
            return _date_error(loc, raw, "invalid date separator, expected `-`")
    year, month, day = int(raw[0:4]), int(raw[5:7]), int(raw[8:10])
    if year == 0:
        return _year_zero(loc, raw)
    if not 1 <= month <= 12:
        return _date_error(loc, raw, "month value is outside expected range of 1-12")
    try:
        value = date(year, month, day)
    except ValueError:
        return _date_error(loc, raw, "day value is outside expected range")
    if len(raw) == 10:
        return value.isoformat(), None
    if raw[10] not in "Tt_ ":
        return _date_error(loc, raw, "invalid datetime separator, expected `T`, `t`, `_` or space")
    time = _TIME.fullmatch(raw[11:])
    if time is None:
        return _date_error(loc, raw, "input is too short" if len(raw) < 16 else "invalid character in time")
    hour, minute, second, fraction, _ = time.groups()
    if int(hour) > 23:
        return _date_error(loc, raw, "hour value is outside expected range of 0-23")
    # Only microseconds count (pydantic ignores digits past the sixth): no int() of a fraction of any length.
    if int(hour) or int(minute) or int(second or 0) or int(fraction[:6] if fraction else 0):
        return None, inexact
    return value.isoformat(), None


def literal_error(loc: Sequence[str | int], value: str, choices: Sequence[str]) -> dict[str, Any]:
    """pydantic's error for a value outside a Literal: "Input should be 'a', 'b' or 'c'"."""
    quoted = [f"'{c}'" for c in choices]
    expected = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return {"type": "literal_error", "loc": list(loc), "msg": f"Input should be {expected}", "input": value,
            "ctx": {"expected": expected}}


def _length_error(loc: Loc, items: list[str], kind: str, bound: str, size: int) -> dict[str, Any]:
    """pydantic's error for a list of too few or too many items ("List should have at most 100 items after
    validation, not 101")."""
    key = "max_length" if kind == "too_long" else "min_length"
    plural = "" if size == 1 else "s"
    return {"type": kind, "loc": loc, "msg": f"List should have {bound} item{plural} after validation, not {len(items)}",
            "input": items, "ctx": {"field_type": "List", key: size, "actual_length": len(items)}}


class InvalidParams(Exception):
    """Raised with FastAPI-shaped error items; answered as 422 with `{"detail": [...]}`."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(errors)
        self.errors = errors

    ECHO_MAX = 256
    """A rejected value is echoed up to this many characters (then "..."), so a 422 stays small."""

    def body(self) -> bytes:
        return msgspec.json.encode({"detail": [self._bounded(error) for error in self.errors]})

    @classmethod
    def _bounded(cls, error: dict[str, Any]) -> dict[str, Any]:
        echoed = error.get("input")
        if isinstance(echoed, str) and len(echoed) > cls.ECHO_MAX:
            return {**error, "input": echoed[: cls.ECHO_MAX] + "..."}
        return error


class QueryParams(dict[str, str]):
    """A request's query parameters: each name's last value (how FastAPI reads a scalar parameter), and every
    value of a name in order (`every`), which array parameters read."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        super().__init__(pairs)
        self.pairs = pairs

    def every(self, name: str) -> list[str]:
        return [value for key, value in self.pairs if key == name]


def parse_query(query_string: bytes) -> QueryParams:
    """Query parameters with blank values kept; every value of a repeated name stays there (`every`): an
    array parameter reads them all, a single-value one refuses more than one (`validate`)."""
    return QueryParams(parse_qsl(query_string.decode("latin-1"), keep_blank_values=True, encoding="utf-8"))


def validate(params: Sequence[Param], path: Mapping[str, str], query: Mapping[str, str]) -> dict[str, Any]:
    """All declared parameters parsed, or InvalidParams with every error (path first, then query). An array
    parameter reads every value of its name when `query` is a `QueryParams` (else the one value there)."""
    values: dict[str, Any] = {}
    errors: list[dict[str, Any]] = []
    for where in ("path", "query"):
        source = path if where == "path" else query
        for param in params:
            if param.where != where:
                continue
            if param.array:
                given = query.every(param.name) if isinstance(query, QueryParams) else (
                    [query[param.name]] if param.name in query else [])
                value, found = param.validate_all(given)
                errors += found
                if not found:
                    values[param.name] = value
                continue
            repeated = query.every(param.name) if where == "query" and isinstance(query, QueryParams) else []
            if len(repeated) > 1:
                errors.append(multiple_values_error(param.name, repeated))
                continue
            value, error = param.validate(source.get(param.name))
            if error is not None:
                errors.append(error)
            else:
                values[param.name] = value
    if errors:
        raise InvalidParams(errors)
    return values


def multiple_values_error(name: str, given: Sequence[str]) -> dict[str, Any]:
    """The error item of a single-value query parameter given more than once (in FastAPI's shape)."""
    return {"type": "multiple_values", "loc": ["query", name],
            "msg": f"Input should be a single value; the parameter was given {len(given)} times", "input": list(given)}


class Limited(TypedDict):
    """What a helper reading only a route's `limit` takes (`Call[Limited]`): any route's parameters with one."""

    limit: int


def limit_param(description: str, most: int, default: int | None) -> Param:
    """The one declaration of a `limit` on a list: 1 to `most`; `default` when absent, or None for all of the list
    (one whose size no default should cut)."""
    return Param("limit", kind="int", default=default, ge=1, le=most,
                 description=description + ("; all when absent" if default is None else ""))


SEARCH_RULE = "must contain at least one letter or digit (case, accents and punctuation are ignored)"
LETTER_OR_DIGIT = r"[^\W_\u037a\ufc5e-\ufc63\ufe70\ufe72\ufe74\ufe76\ufe78\ufe7a\ufe7c\ufe7e\uff9e\uff9f]"
r"""The pattern of a search term: a letter or digit of any script (Python's Unicode `\w` less `_`; an ECMA reader
takes ASCII ones only), less the 17 that fold to no letter (isolated Arabic vowel marks, halfwidth sound marks).
Every value it admits is a valid term (tests/test_schemathesis.py checks each code point); `\p{L}` would say it
more plainly but is no regex to openapi-spec-validator."""


@accepts(pattern=LETTER_OR_DIGIT)
def search_term(value: str) -> str:
    """A search term as every group reads it: kept as given, matched folded (case, accents and punctuation
    removed, `chartgw.core.text.compact`); a term with no letter or digit left is a 422 saying so."""
    if not compact(value):
        raise ValueError(SEARCH_RULE)
    return value


def search_param(name: str = "q", *, required: bool = True, description: str = "") -> Param:
    """The one declaration of a search parameter: a non-empty term under the search rule."""
    return Param(name, required=required, min_length=1 if required else None, check=search_term,
                 description=(description or "Text to find") + "; case, accents and punctuation are ignored")


_KIND_TYPES: dict[str, type] = {"int": int, "bool": bool, "date": str, "choice": str, "str": str}
"""The type of a validated value of each kind (a date is served on as "YYYY-MM-DD")."""


def check_params_type(declared: type, params: Sequence[Param], where: str, exact: bool = True) -> None:
    """Asserts that TypedDict `declared` (what a handler reads) names exactly the `params` a route validates (some of
    them when not `exact`: a helper of its handler), each with the type validation gives it: the kind's (a `choice`
    may be a Literal of its choices, a `check`'s value its return type), a tuple of it for an array, `| None` for an
    optional query parameter without a default."""
    hints = get_type_hints(declared)
    by_name = {p.name: p for p in params}
    assert set(hints) == set(by_name) if exact else set(hints) <= set(by_name), \
        f"{where}: {declared.__name__} names {sorted(hints)}; the route declares {sorted(by_name)}"
    assert set(getattr(declared, "__required_keys__", ())) == set(hints), \
        f"{where}: {declared.__name__}: every declared parameter is there (its default when absent)"
    for name, hint in hints.items():
        problem = _mismatch(hint, by_name[name])
        assert problem is None, f"{where}: {declared.__name__}[{name!r}] is {hint}: {problem}"


def _mismatch(hint: Any, param: Param) -> str | None:
    """Why `hint` is not the type of `param`'s validated value, or None when it is."""
    members = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
    optional = param.where == "query" and not param.required and param.default is None
    if (type(None) in members) != optional:
        return "an optional parameter without a default is `| None`" if optional else "it is never None"
    rest = [m for m in members if m is not type(None)]
    if len(rest) != 1:
        return "one type (and None)"
    value = rest[0]
    if param.array:
        args = get_args(value)
        if get_origin(value) is not tuple or len(args) != 2 or args[1] is not Ellipsis:
            return "an array parameter is a `tuple[item, ...]`"
        value = args[0]
    if param.check is not None:
        returned = get_type_hints(param.check).get("return", Any)
        return None if returned is Any or value == returned else f"its check returns {returned}"
    if param.kind == "choice" and get_origin(value) is Literal:
        return None if set(get_args(value)) == set(param.choices) else f"its choices are {param.choices}"
    expected = _KIND_TYPES[param.kind]
    return None if value is expected else f"a {param.kind} parameter is {expected.__name__}"
