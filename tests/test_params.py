"""The shared validation layer answers exactly as FastAPI does.

The expected bodies below were produced by FastAPI 0.12x / pydantic 2 for the same declarations
(`Literal[...]` path parameter, `int` query with `Query(ge=1, le=200)`), so clients written against
the FastAPI service see no difference.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal, TypedDict

import pytest
from starlette.applications import Starlette
from starlette.routing import Route as StarletteRoute
from starlette.testclient import TestClient

from chartgw.api.cache import ResponseCache
from chartgw.api.endpoints import Call, EndpointApp, GroupData, Route
from chartgw.api.params import InvalidParams, Param, literal_error, parse_query, validate
from tests.fixtures import configure
from tests.fixtures import settings as run_settings

LIMIT = Param("limit", kind="int", default=100, ge=1, le=200)
SITE = Param("site", "path", kind="choice", choices=("portal-a", "portal-b", "portal-c"))
NEED = Param("need", required=True)


async def echo(call: Call[dict[str, Any]]) -> dict[str, object]:
    return call.params


IDS = Param("isrc", array=True, pattern="^[A-Za-z0-9]+$", max_items=3)
NUMBERS = Param("n", kind="int", array=True)


@pytest.fixture
def client(tmp_path, monkeypatch) -> TestClient:
    """A tiny app with two declared routes, like FastAPI's `/k/{site}/charts/{chart_type}`, and `/a` with two array
    parameters (`isrc: list[str] = Query(pattern=..., max_length=3)`, `n: list[int]`) and a scalar one."""
    configure("CHARTGW_DATA_DIR", str(tmp_path))
    routes = (Route("/k/{site}/charts/{chart_type}", echo, (SITE, Param("chart_type", "path"), LIMIT, NEED), cache_ttl=0),
              Route("/a", echo, (IDS, NUMBERS, LIMIT), cache_ttl=0))
    app = Starlette(routes=[StarletteRoute(r.path, EndpointApp(r, GroupData("t", settings=run_settings()), ResponseCache())) for r in routes])
    return TestClient(app)


GOLDEN = [
    ("/k/portal-x/charts/r?limit=abc",
     b'{"detail":[{"type":"literal_error","loc":["path","site"],"msg":"Input should be \'portal-a\', \'portal-b\' or '
     b'\'portal-c\'","input":"portal-x","ctx":{"expected":"\'portal-a\', \'portal-b\' or \'portal-c\'"}},{"type":"int_parsing",'
     b'"loc":["query","limit"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"abc"},'
     b'{"type":"missing","loc":["query","need"],"msg":"Field required","input":null}]}'),
    ("/k/portal-a/charts/r?limit=0&need=1",
     b'{"detail":[{"type":"greater_than_equal","loc":["query","limit"],"msg":"Input should be greater than or equal to 1",'
     b'"input":"0","ctx":{"ge":1}}]}'),
    ("/k/portal-a/charts/r?limit=201&need=1",
     b'{"detail":[{"type":"less_than_equal","loc":["query","limit"],"msg":"Input should be less than or equal to 200",'
     b'"input":"201","ctx":{"le":200}}]}'),
    ("/k/portal-a/charts/r?limit=99999999999999999999999&need=1",
     b'{"detail":[{"type":"less_than_equal","loc":["query","limit"],"msg":"Input should be less than or equal to 200",'
     b'"input":"99999999999999999999999","ctx":{"le":200}}]}'),
    ("/k/portal-a/charts/r?limit=%D9%A5&need=1",
     b'{"detail":[{"type":"int_parsing","loc":["query","limit"],"msg":"Input should be a valid integer, unable to parse '
     b'string as an integer","input":"\xd9\xa5"}]}'),
    ("/k/portal-a/charts/r?limit=&need=1",
     b'{"detail":[{"type":"int_parsing","loc":["query","limit"],"msg":"Input should be a valid integer, unable to parse '
     b'string as an integer","input":""}]}'),
]


ARRAY_GOLDEN = [
    # pydantic 2's errors for `list[Annotated[str, Field(pattern=...)]]` (max_length=3) and `list[int]`, as FastAPI
    # sends them: each bad item located at its index, a list too long or empty as a whole.
    ("/a?isrc=A&isrc=b%20c&isrc=C",
     b'{"detail":[{"type":"string_pattern_mismatch","loc":["query","isrc",1],"msg":"String should match pattern '
     b'\'^[A-Za-z0-9]+$\'","input":"b c","ctx":{"pattern":"^[A-Za-z0-9]+$"}}]}'),
    ("/a?isrc=A,B&isrc=C,D",
     b'{"detail":[{"type":"too_long","loc":["query","isrc"],"msg":"List should have at most 3 items after validation, '
     b'not 4","input":["A","B","C","D"],"ctx":{"field_type":"List","max_length":3,"actual_length":4}}]}'),
    ("/a?n=1&n=x,2.5",
     b'{"detail":[{"type":"int_parsing","loc":["query","n",1],"msg":"Input should be a valid integer, unable to parse '
     b'string as an integer","input":"x"},{"type":"int_parsing","loc":["query","n",2],"msg":"Input should be a valid '
     b'integer, unable to parse string as an integer","input":"2.5"}]}'),
    ("/a?n=,",
     b'{"detail":[{"type":"too_short","loc":["query","n"],"msg":"List should have at least 1 item after validation, '
     b'not 0","input":[],"ctx":{"field_type":"List","min_length":1,"actual_length":0}}]}'),
]


@pytest.mark.parametrize("url,body", GOLDEN + ARRAY_GOLDEN)
def test_422_bodies_are_fastapis_byte_for_byte(client: TestClient, url: str, body: bytes) -> None:
    response = client.get(url)
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/json"
    assert response.content == body


@pytest.mark.parametrize("raw,value", [
    ("5.0", 5), (" 5 ", 5), ("+5", 5), ("1_0", 10), ("05", 5), ("5.00", 5), ("\t7\n", 7), ("\u00a07\u00a0", 7),
    ("\u30007", 7), ("1_000_000", 1_000_000), ("1_0.0", 10), ("-0", 0), ("12345678901234567890.0", 12345678901234567890),
])
def test_integers_parse_as_pydantic_does(raw: str, value: int) -> None:
    assert Param("n", kind="int").validate(raw) == (value, None)


@pytest.mark.parametrize("raw", ["5.", "5.5", "1__0", "_1", "1_", "+-5", "0x10", "1e3", "5 5", "-", "+", "", "5.0.0", "٥"])
def test_non_integers_are_int_parsing_errors(raw: str) -> None:
    value, error = Param("n", kind="int").validate(raw)
    assert value is None and error is not None and error["type"] == "int_parsing" and error["input"] == raw


def test_valid_request_gets_defaults(client: TestClient) -> None:
    response = client.get("/k/portal-b/charts/x?limit=7&need=")
    assert response.status_code == 200
    assert response.json() == {"site": "portal-b", "chart_type": "x", "limit": 7, "need": ""}
    assert client.get("/k/portal-b/charts/x?need=a").json()["limit"] == 100


def test_a_single_value_parameter_given_twice_is_a_422(client: TestClient) -> None:
    """`limit=1&limit=7` is no guess at the last: a 422 naming each repeated parameter with every value given."""
    response = client.get("/k/portal-b/charts/x?limit=1&limit=7&need=a&need=b&need=")
    assert response.status_code == 422
    assert response.json() == {"detail": [
        {"type": "multiple_values", "loc": ["query", "limit"],
         "msg": "Input should be a single value; the parameter was given 2 times", "input": ["1", "7"]},
        {"type": "multiple_values", "loc": ["query", "need"],
         "msg": "Input should be a single value; the parameter was given 3 times", "input": ["a", "b", ""]},
    ]}
    # the same value twice is refused too: the rule does not depend on what was sent
    assert client.get("/k/portal-b/charts/x?need=a&need=a").status_code == 422


def test_literal_error_wording_for_one_two_and_many_choices() -> None:
    assert literal_error(["query", "x"], "c", ["a"])["msg"] == "Input should be 'a'"
    assert literal_error(["query", "x"], "c", ["a", "b"])["msg"] == "Input should be 'a' or 'b'"
    assert literal_error(["query", "x"], "c", ["a", "b", "d"])["ctx"] == {"expected": "'a', 'b' or 'd'"}


def test_errors_come_path_first_then_query_in_declaration_order() -> None:
    with pytest.raises(InvalidParams) as caught:
        validate((LIMIT, SITE, NEED), {"site": "nope"}, parse_query(b"limit=x"))
    assert [e["loc"] for e in caught.value.errors] == [["path", "site"], ["query", "limit"], ["query", "need"]]


def test_query_decoding_keeps_utf8_and_blank_values() -> None:
    assert parse_query(b"q=%EC%95%84%EC%9D%B4%EC%9C%A0&empty=") == {"q": "아이유", "empty": ""}


def test_dates_are_read_and_refused_exactly_as_fastapi_reads_a_date_query() -> None:
    """`fastapi_date_errors.json` holds FastAPI's answer (the date, or its first error item) for a
    `chart_date: datetime.date` query, input by input."""
    import json
    from pathlib import Path

    golden = json.loads((Path(__file__).parent / "fastapi_date_errors.json").read_text("utf-8"))
    param = Param("chart_date", kind="date", required=True)
    assert len(golden) > 40
    for raw, expected in golden.items():
        value, error = param.validate(raw)
        assert (value if error is None else error) == expected, raw


def test_string_length_and_checked_values_answer_like_pydantic() -> None:
    def country(value: str) -> str:
        if value.lower() not in ("global", "us"):
            raise ValueError(f"unknown country {value!r}")
        return value.lower()

    q = Param("q", min_length=1)
    assert q.validate("")[1] == {"type": "string_too_short", "loc": ["query", "q"],
                                 "msg": "String should have at least 1 character", "input": "",
                                 "ctx": {"min_length": 1}}
    checked = Param("country", default="global", check=country)
    assert checked.validate("US") == ("us", None)
    assert checked.validate(None) == ("global", None)
    assert checked.validate("xx")[1] == {"type": "value_error", "loc": ["query", "country"],
                                         "msg": "Value error, unknown country 'xx'", "input": "xx",
                                         "ctx": {"error": {}}}


def test_booleans_take_pydantics_words_only() -> None:
    flag = Param("include_raw", kind="bool", default=False)
    for word in ("true", "True", "TRUE", "1", "yes", "on", "t", "y"):
        assert flag.validate(word) == (True, None), word
    for word in ("false", "0", "no", "off", "f", "n", "Off"):
        assert flag.validate(word) == (False, None), word
    for word in ("2", "maybe", "", " true"):
        assert flag.validate(word)[1] == {"type": "bool_parsing", "loc": ["query", "include_raw"],
                                          "msg": "Input should be a valid boolean, unable to interpret input",
                                          "input": word}


def test_a_misconfigured_setting_is_a_503_naming_it_not_a_500(tmp_path, monkeypatch) -> None:
    from chartgw.core import config

    configure("CHARTGW_DATA_DIR", str(tmp_path))
    configure("CHARTGW_SOME_COUNTRIES", "us,zz")

    setting: config.Setting[Any] = config.Setting("SOME_COUNTRIES", "us", "a test setting", config.countries)

    async def countries(call: Call) -> list[str]:
        return list(run_settings().get(setting))

    route = Route("/c", countries, cache_ttl=0)
    app = Starlette(routes=[StarletteRoute(route.path, EndpointApp(route, GroupData("t", settings=run_settings()), ResponseCache()))])
    response = TestClient(app).get("/c")
    assert response.status_code == 503
    assert response.json()["detail"].startswith("The gateway is misconfigured: CHARTGW_SOME_COUNTRIES: unknown country 'zz'")


def test_an_array_takes_the_repeated_and_the_comma_form_alike(client: TestClient) -> None:
    for query in ("isrc=A&isrc=B&n=1&n=2", "isrc=A,B&n=1,2", "isrc=A&isrc=B&n=1, 2", "isrc=%20A%20,,B,&n=1&n=2,"):
        assert client.get(f"/a?{query}").json() == {"isrc": ["A", "B"], "n": [1, 2], "limit": 100}, query
    # A single-value parameter given twice is a 422, beside an array given twice; an absent array its default.
    refused = client.get("/a?isrc=A&isrc=B&limit=1&limit=7")
    assert refused.status_code == 422 and [e["loc"] for e in refused.json()["detail"]] == [["query", "limit"]]
    assert client.get("/a?limit=7").json() == {"isrc": None, "n": None, "limit": 7}


def test_an_array_is_documented_as_an_array_of_its_items() -> None:
    assert IDS.json_schema() == {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z0-9]+$"},
                                 "minItems": 1, "maxItems": 3}
    assert NUMBERS.json_schema() == {"type": "array", "items": {"type": "integer"}, "minItems": 1}
    # A plain mapping (no repeated names) gives an array its one value, split at commas.
    assert validate((NUMBERS,), {}, {"n": "3,4"}) == {"n": (3, 4)}
    assert parse_query(b"n=1&n=2").every("n") == ["1", "2"] and parse_query(b"n=1&n=2") == {"n": "2"}


# --- typed parameters: a handler's TypedDict is checked against its route, and mypy checks every read -------------

class ChartParams(TypedDict):
    site: str
    limit: int
    need: str


async def typed_chart(call: Call[ChartParams]) -> dict[str, object]:
    return {"site": call.params["site"], "limit": call.params["limit"]}


def test_a_handlers_typed_parameters_must_be_what_its_route_validates() -> None:
    Route("/{site}/chart", typed_chart, (SITE, LIMIT, NEED), rows="entries")  # agrees (`format` is not the handler's)

    class Misspelt(TypedDict):
        site: str
        limt: int
        need: str

    class Optional(TypedDict):
        site: str
        limit: int | None  # validation gives the default (100), never None
        need: str

    class Choice(TypedDict):
        site: Literal["portal-a", "portal-b"]  # one choice short
        limit: int
        need: str

    class Partial(TypedDict, total=False):
        site: str
        limit: int
        need: str

    class Missing(TypedDict):
        site: str
        need: str

    for declared, says in ((Misspelt, "names \\['limt', 'need', 'site'\\]"), (Optional, "it is never None"),
                           (Choice, "its choices are"), (Partial, "every declared parameter is there"),
                           (Missing, "names \\['need', 'site'\\]")):

        async def handler(call: Call[Any]) -> None: ...

        handler.__annotations__["call"] = Call[declared]  # type: ignore[valid-type]
        with pytest.raises(AssertionError, match=says):
            Route("/{site}/chart", handler, (SITE, LIMIT, NEED))


MYPY_SNIPPET = '''
from typing import TypedDict

from chartgw.api.endpoints import Call


class LatestParams(TypedDict):
    country: str
    limit: int


async def latest(call: Call[LatestParams]) -> int:
    return call.params["limit"] + len(call.params["country"])


async def misspelt(call: Call[LatestParams]) -> int:
    return call.params["limt"]


async def mistyped(call: Call[LatestParams]) -> str:
    return call.params["limit"]
'''


def test_mypy_catches_a_misspelt_or_mistyped_parameter_read(tmp_path: Path) -> None:
    """The point of `Call[P]`: a read of a parameter the route does not declare, or as the wrong type, fails the
    type check (`mypy --strict`, as scripts/test runs it) instead of answering a 500 at run time."""
    snippet = tmp_path / "handlers.py"
    snippet.write_text(MYPY_SNIPPET)
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--python-version", "3.11", "--no-error-summary",
                           "--cache-dir", str(root / ".mypy_cache"), "--config-file", str(root / "pyproject.toml"),
                           str(snippet)], cwd=root, capture_output=True, text=True, timeout=600)
    found = re.findall(r"handlers\.py:(\d+): error: .*\[([a-z-]+)\]$", done.stdout, re.M)
    assert sorted(found) == [("17", "no-any-return"), ("17", "typeddict-item"), ("21", "return-value")], done.stdout
    assert 'TypedDict "LatestParams" has no key "limt"' in done.stdout and 'Did you mean "limit"?' in done.stdout
