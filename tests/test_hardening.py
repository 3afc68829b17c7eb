"""Requests a hostile client sends, answered with JSON and never a 500: odd request targets, a 5,000-digit
integer, an invalid value echoed at length, and the trailing-slash redirect (relative, not from Host)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from chartgw.groups.korea_chart import GROUP
from tests.fixtures import KEY_HEADERS, TEST_KEY, client
from tests.fixtures import settings as run_settings


def _raw(app: Any, method: str, path: str, query: bytes = b"") -> tuple[int, dict[bytes, bytes], bytes]:
    """One request straight into the ASGI app, with the path exactly as a server would pass it."""
    return asyncio.run(_ask(app, method, path, query))


async def _ask(app: Any, method: str, path: str, query: bytes = b"") -> tuple[int, dict[bytes, bytes], bytes]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode("utf-8", "surrogatepass"), "query_string": query, "root_path": "",
             "headers": [(b"host", b"evil.example"), (b"x-api-key", TEST_KEY.encode())],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8000)}
    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), body


@pytest.mark.parametrize(("method", "path"), [("OPTIONS", "*"), ("GET", "*"), ("GET", "//"), ("GET", "///x"),
                                              ("GET", ""), ("GET", "/korea-chart//sites")])
def test_odd_request_targets_are_a_json_404_not_a_500(korea_data: Path, method: str, path: str) -> None:
    with client(korea_data, [GROUP]) as api:
        status, headers, body = _raw(api.app, method, path)
    assert status == 404 and headers[b"content-type"] == b"application/json" and body.startswith(b'{"detail"')


def test_the_trailing_slash_redirect_is_relative_and_keeps_the_query(korea_data: Path) -> None:
    with client(korea_data, [GROUP]) as api:
        status, headers, _ = _raw(api.app, "GET", "/korea-chart/portal-a/charts/realtime/", b"limit=3")
        assert status == 307 and headers[b"location"] == b"/korea-chart/portal-a/charts/realtime?limit=3"
        assert b"evil" not in headers[b"location"] and headers[b"content-type"] == b"application/json"
        status, headers, _ = _raw(api.app, "GET", "/korea-chart")
        assert status == 307 and headers[b"location"] == b"/korea-chart/"


def test_an_integer_of_5000_digits_is_a_422_with_a_bounded_echo(korea_data: Path) -> None:
    with client(korea_data, [GROUP]) as api:
        huge = api.get("/korea-chart/portal-a/charts/realtime?limit=" + "9" * 5000, headers=KEY_HEADERS)
        negative = api.get("/korea-chart/portal-a/charts/realtime?limit=-" + "9" * 5000, headers=KEY_HEADERS)
        junk = api.get("/korea-chart/portal-a/charts/realtime?limit=" + "x" * 60_000, headers=KEY_HEADERS)
    assert huge.status_code == 422 and huge.json()["detail"][0]["type"] == "less_than_equal"
    assert negative.status_code == 422 and negative.json()["detail"][0]["type"] == "greater_than_equal"
    assert junk.status_code == 422 and junk.json()["detail"][0]["type"] == "int_parsing"
    for response in (huge, junk):
        assert len(response.content) < 1000 and response.json()["detail"][0]["input"].endswith("...")


def test_one_search_rule_everywhere(all_groups_data: Path) -> None:
    """Every search parameter of every group refuses a term with no letter or digit, with the same 422."""
    from chartgw.api.params import SEARCH_RULE, search_term
    from chartgw.groups import GROUPS
    from chartgw.http.app import service_routes

    checked = 0
    with client(all_groups_data) as api:
        for group in GROUPS:
            for route in service_routes(group):
                searched = [p for p in route.params if p.check is search_term]
                if route.method != "GET" or "{" in route.path or not searched:
                    continue
                for param in searched:
                    response = api.get(f"/{group.name}{route.path}?{param.name}=%F0%9F%98%80%20!", headers=KEY_HEADERS)
                    assert response.status_code == 422, (group.name, route.path, response.text)
                    error = next(e for e in response.json()["detail"] if e["loc"] == ["query", param.name])
                    assert error["msg"] == f"Value error, {SEARCH_RULE}"
                    checked += 1
    assert checked >= 5


HOSTILE_VALUES = (
    "9" * 5000, "-" + "9" * 5000, "0" * 5000 + "1", "259200000000000", "86400000000000000000000", "-9223372036854775809",
    "-1", "1.0e400", "NaN", "2024-01-05T00:00:00." + "0" * 5000, "٣٠٠", "😀", "\u0000", "x" * 20_000,
)
"""Huge, negative, overflowing, non-ASCII and control values, each sent as every GET parameter of every group."""


def _example(param: Any) -> str:
    """A value of `param` a route accepts (or at least routes on), for the path parameters not being fuzzed."""
    if param.choices:
        return str(param.choices[0])
    if param.choices_by is not None:
        return next(iter(param.choices_by[1].values()))[0]
    if param.default is not None:
        return str(param.default).lower() if isinstance(param.default, bool) else str(param.default)
    return {"int": "1", "date": "2026-11-20", "bool": "true"}.get(param.kind, "x")


def _fuzzed_requests() -> list[tuple[str, str]]:
    """(path, query) of every GET operation of every group with one parameter given one hostile value."""
    from urllib.parse import quote

    from chartgw.groups import GROUPS
    from chartgw.http.app import service_routes

    requests = []
    for group in GROUPS:
        for route in service_routes(group):
            if route.method != "GET":
                continue
            for fuzzed in route.params:
                for value in HOSTILE_VALUES:
                    path = route.path
                    for param in route.params:
                        if param.where == "path":
                            path = path.replace("{" + param.name + "}", value if param is fuzzed else _example(param))
                    query = f"{fuzzed.name}={quote(value, safe='')}" if fuzzed.where == "query" else ""
                    requests.append((f"/{group.name}{path}", query))
    return requests


def test_no_value_of_any_get_parameter_is_a_5xx(all_groups_data: Path) -> None:
    """Every GET operation of every group, each of its parameters (path and query) given each hostile value,
    the others left valid: never a 5xx, and a date out of range is FastAPI's 422. Straight into the ASGI app
    (what uvicorn would pass it) in the test client's event loop, so the ~3,000 requests take seconds."""
    requests = _fuzzed_requests()
    with client(all_groups_data, raise_server_exceptions=False) as api:
        app = api.app

        async def ask_all() -> list[tuple[str, int, bytes]]:
            answers = []
            for path, query in requests:
                status, _, body = await _ask(app, "GET", path, query.encode())
                answers.append((f"{path}?{query}"[:120], status, body[:200]))
            return answers

        answers = api.portal.call(ask_all)  # type: ignore[union-attr]  # the client's own loop, as its requests
        out_of_range = api.get("/uk-charts/singles/259200000000000", headers=KEY_HEADERS)
    assert len(answers) > 2000
    assert [answer for answer in answers if answer[1] >= 500] == []
    assert out_of_range.status_code == 422
    assert out_of_range.json()["detail"][0] == {
        "type": "date_from_datetime_parsing", "loc": ["path", "week_start"],
        "msg": "Input should be a valid date or datetime, dates after 9999 are not supported as unix timestamps",
        "input": "259200000000000", "ctx": {"error": "dates after 9999 are not supported as unix timestamps"}}


def test_key_commands_make_the_key_files_owner_only_whatever_their_mode(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A key file that already exists readable by anyone (copied, restored) is 0600 after any `keys` command."""
    import os
    import stat

    from chartgw.cli import main
    from tests.fixtures import data_dir

    (tmp_path / "server-secret").write_bytes(os.urandom(32))
    (tmp_path / "keys.sqlite").write_bytes(b"")
    for name in ("server-secret", "keys.sqlite"):
        (tmp_path / name).chmod(0o644)
    with data_dir(tmp_path):
        assert main(["keys", "list"], run_settings()) == 0
        assert main(["keys", "create", "--name", "partner"], run_settings()) == 0
    assert capsys.readouterr().out.count("cgw_") == 1
    files = ["server-secret", "keys.sqlite", "keys.sqlite-wal", "keys.sqlite-shm"]
    assert {name: oct(stat.S_IMODE((tmp_path / name).stat().st_mode)) for name in files if (tmp_path / name).exists()} \
        == {name: "0o600" for name in files if (tmp_path / name).exists()}
