"""Schemathesis over every group's OpenAPI document, against the app in process (issue 9).

For each of the 15 groups, `GET /{group}/openapi.json` is loaded from the app and every GET operation in it
gets up to 20 requests that the document says are valid (positive data, derandomised so a run is
repeatable), sent with the test key. Each answer must:
- not be a 5xx (`not_a_server_error`);
- have a status code, content type, headers and body the document declares for it (the conformance checks;
  formats such as `date` and `date-time` included);
- accept the request: 200, a 304 to an If-None-Match, or the 404 the operation declares for a target or date
  that is not held. Any other
  answer fails, 422 included, with one narrow exception: a rule between parameters that no schema of one
  parameter can state (korea-chart's chart types per site in the query, recognition's chart kind against genre
  and city, artist-history's "at least one identifier", since <= until, and its opaque cursor). Such a 422 passes
  only when every parameter passes its own declared validation and the body is exactly what the group's rule
  function gives for those values.

Not sent: the two POST /refresh operations (korea-chart, social-trends), which start a crawl in a subprocess;
a group's own /openapi.json, which is the document itself (tests/test_docs.py validates it).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from chartgw.api.endpoints import Route
from chartgw.api.params import InvalidParams, parse_query, validate
from chartgw.core.clock import fixed
from chartgw.groups import GROUPS, korea_chart, recognition
from chartgw.http.app import service_routes
from chartgw.index import history as index
from chartgw.index.artist_history.query import read_query
from tests.fixtures import FIXED_NOW, KEY_HEADERS, client, copy_data, data_dir
from tests.fixtures import settings as run_settings

pytestmark = pytest.mark.heavy

EXAMPLES = 20
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance]
ACCEPTED = {200, 404}
"""What a schema-valid request may get (404 only where the operation declares it: status_code_conformance), and
304 when it sent If-None-Match (declared on every cached GET; schemathesis sends `*` among others, which
matches any current body)."""


def _raised(rule: Callable[[dict[str, Any]], Any], values: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        rule(values)
    except InvalidParams as exc:
        return exc.errors
    return []


def _artist_rules(values: dict[str, Any]) -> list[dict[str, Any]]:
    """read_query's rules; past them, a cursor this server did not issue (an opaque token no schema can tell)."""
    errors = _raised(read_query, values)
    if not errors and values.get("cursor") is not None:
        return [{"type": "value_error", "loc": ["query", "cursor"]}]
    return errors


COMBINATION_RULES: dict[tuple[str, str], Callable[[dict[str, Any]], list[dict[str, Any]]]] = {
    ("korea-chart", "/charts"): lambda v: korea_chart.selection_errors(v["site"], v["chart_type"]),
    ("recognition", "/snapshots"): lambda v: _raised(recognition._scope, v),
    ("artist-history-api", "/artist-history"): _artist_rules,
    ("artist-history-api", "/artist-history/plot"): _artist_rules,
    ("artist-history-api", "/artist-history/coverage"): _artist_rules,
}
"""Operation -> the 422 items its rules between parameters give for validated values."""


def _matches(expected: dict[str, Any], item: dict[str, Any]) -> bool:
    return all(item.get(key) == value for key, value in expected.items())


def combination_rejection(group: str, route: Route, url: str, body: Any) -> bool:
    """Whether a 422 is exactly what the operation's rule between parameters gives for the values sent, each of
    which passes its own declared validation."""
    rule = COMBINATION_RULES.get((group, route.path))
    if rule is None or not isinstance(body, dict):
        return False
    split = urlsplit(url)
    segments = split.path.split("/")[2:]
    template = route.path.split("/")[1:]
    path = {name[1:-1]: value for name, value in zip(template, segments) if name.startswith("{")}
    try:
        values = validate(route.params, path, parse_query(split.query.encode()))
    except InvalidParams:
        return False  # a parameter refused on its own: the schema should have said so
    expected = rule(values)
    items = body.get("detail")
    return bool(expected) and isinstance(items, list) and len(items) == len(expected) and all(
        _matches(e, i) for e, i in zip(expected, items))


@pytest.fixture(scope="module")
def app(all_groups_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The whole gateway over every group's demo data and the artist-history index built from it, answering as
    at FIXED_NOW (schemathesis runs it in process)."""
    path = copy_data(all_groups_data, tmp_path_factory.mktemp("schemathesis") / "data")
    with data_dir(path):
        index.index_all(now=fixed(FIXED_NOW), settings=run_settings())
    return client(path).app


def _route(group: str, path: str, method: str) -> Route:
    routes = [r for r in service_routes(next(g for g in GROUPS if g.name == group)) if r.method == method]
    return next((r for r in routes if r.path == path), None) or next(r for r in routes if _expanded(r.path, path))


def _expanded(template: str, path: str) -> bool:
    """Whether `path` is `template` with some parameters written as literal segments (korea-chart's sites)."""
    a, b = template.split("/"), path.split("/")
    return len(a) == len(b) and all(x == y or x.startswith("{") for x, y in zip(a, b))


def run_operation(group: str, operation: Any) -> str | None:
    """Up to EXAMPLES schema-valid requests to one operation; the first failure, described, or None."""
    route = _route(group, operation.path, operation.method.upper())

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
    def fuzz(case: Any) -> None:
        response = case.call(headers=dict(KEY_HEADERS))  # a copy: schemathesis adds its defaults to the one given
        case.validate_response(response, checks=CHECKS, headers=dict(KEY_HEADERS))
        status = response.status_code
        if status in ACCEPTED or (status == 304 and "If-None-Match" in response.request.headers):
            return
        url = response.request.url
        if status == 422 and combination_rejection(group, route, url, response.json()):
            return
        raise AssertionError(f"schema-valid request rejected: {status} for GET {url}: {response.text[:500]}")

    try:
        fuzz()
    except BaseException as exc:  # a FailureGroup is a BaseExceptionGroup
        if isinstance(exc, KeyboardInterrupt):
            raise
        return f"{group} {operation.method.upper()} {operation.path}: {str(exc)[:1500]}"
    return None


@pytest.mark.parametrize("group", [g.name for g in GROUPS])
def test_every_schema_valid_request_is_answered_as_documented(app: Any, group: str) -> None:
    schema = schemathesis.openapi.from_asgi(f"/{group}/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]  # Err raises
    gets = [op for op in operations if op.method.upper() == "GET"]
    documented = {(op.method.upper(), op.path) for op in operations}
    routes = service_routes(next(g for g in GROUPS if g.name == group))
    # Every route of the group is an operation schemathesis reads (its own document excepted).
    for route in routes:
        if route.path != "/openapi.json":
            assert any(m == route.method and (p == route.path or _expanded(route.path, p)) for m, p in documented), route.path
    failures = [failure for op in gets if (failure := run_operation(group, op)) is not None]
    assert not failures, "\n\n".join(failures)


def test_every_character_the_search_pattern_admits_makes_a_valid_term() -> None:
    """The declared pattern of search terms admits no value the search rule refuses: each code point it matches
    (read as Python reads it, the widest reading) is alone a valid term, so is any value containing one."""
    import re
    import sys

    from chartgw.api.params import LETTER_OR_DIGIT, search_term
    from chartgw.core.text import compact

    pattern = re.compile(LETTER_OR_DIGIT)
    refused = [hex(c) for c in range(sys.maxunicode + 1)
               if not 0xD800 <= c <= 0xDFFF and pattern.search(chr(c)) and not compact(chr(c))]
    assert refused == []
    assert search_term("아이유") == "아이유" and pattern.search("아이유") and not pattern.search("?!_")


def test_the_change_feed_and_webhooks_answer_every_schema_valid_request_as_documented(app: Any) -> None:
    """The gateway's own root operations from its joined document, as the groups' operations above: GET /changes with
    `wait` sent as 0 (a long poll holds a request for its whole wait when nothing is committed), GET /hooks and GET
    /hooks/{id}/deliveries (a 404 for a hook the key does not have). A 422 passes only for a `since` of the documented
    form that is not a cursor this feed gave (opaque, like artist-history's cursor). Not sent: GET /changes/stream,
    which never ends (tests/test_feed.py reads it from a real server), and the hooks' POST and DELETE
    (tests/test_hooks.py)."""
    from chartgw.push.changes import decode_cursor

    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]  # Err raises
    root = {(op.method.upper(), op.path) for op in operations if op.path.startswith(("/changes", "/hooks"))}
    assert root == {("GET", "/changes"), ("GET", "/changes/stream"), ("POST", "/hooks"), ("GET", "/hooks"),
                    ("DELETE", "/hooks/{id}"), ("GET", "/hooks/{id}/deliveries")}

    def foreign(since: str) -> bool:
        try:
            decode_cursor(since)
        except ValueError:
            return True
        return False

    def fuzz_one(operation: Any) -> None:
        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
        def fuzz(case: Any) -> None:
            if operation.path == "/changes":
                case.query = {**(case.query or {}), "wait": 0}
            response = case.call(headers=dict(KEY_HEADERS))
            case.validate_response(response, checks=CHECKS, headers=dict(KEY_HEADERS))
            if response.status_code in ACCEPTED:
                return
            since = str((case.query or {}).get("since", ""))
            detail = response.json().get("detail") if response.status_code == 422 else None
            assert isinstance(detail, list) and [e["loc"] for e in detail] == [["query", "since"]] and foreign(since), (
                f"schema-valid request rejected: {response.status_code} for {response.request.url}: {response.text[:500]}")

        fuzz()

    for operation in operations:
        if operation.method.upper() == "GET" and operation.path in ("/changes", "/hooks", "/hooks/{id}/deliveries"):
            fuzz_one(operation)
