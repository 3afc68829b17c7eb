"""`chartgw nginx`: the configuration nginx accepts, and what the tier does in front of two real gateways
(tiny apps on 127.0.0.1): each key meets one reader, a dead reader costs no request, the gateway's limits hold,
public answers are cached as the gateway allows, and keyed answers are never cached nor given to a request the
gateway did not admit."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from chartgw.api.access import KeyChecker, RateLimiter
from chartgw.api.endpoints import Call, Route
from chartgw.api.group import Group
from chartgw.cli import main
from chartgw.http import nginx
from chartgw.http.app import access_table, build_app, declared_routes
from tests.fixtures import FIXED_NOW, TEST_KEY, data_dir, serving_rsgi
from tests.fixtures import settings as run_settings
from tests.tiers import UNADMITTED, bypass_requests, get, nginx_binary, raw, running_nginx

pytestmark = pytest.mark.waits

OTHER_KEY = "other-key-9876543210"


def tiny_group(reader: str) -> Group:
    """A group answering which reader it is: a public page nginx may cache for a minute, a keyed one."""

    async def page(call: Call) -> dict[str, Any]:
        return {"reader": reader, "page": "public"}

    async def data(call: Call) -> dict[str, Any]:
        return {"reader": reader, "secret": "only for keys"}

    return Group("tiny", "Tiny", "two routes", (
        Route("/health", page, public=True, max_age=60, errors=(), summary="public", response=dict[str, Any]),
        Route("/data", data, summary="keyed", response=dict[str, Any]),
    ))


@pytest.fixture
def tier(tmp_path: Path) -> Iterator[tuple[int, list[Any]]]:
    """nginx in front of two tiny gateways (reader "a" and "b"): yields nginx's port and the two servers'
    exit stacks (closing one stops that reader)."""
    readers = []
    addresses = []
    with ExitStack() as stack:
        for name in ("a", "b"):
            with data_dir(tmp_path / name):
                app = build_app([tiny_group(name)], checker=KeyChecker(tmp_path / "keys.sqlite", [TEST_KEY, OTHER_KEY]),
                                clock=lambda: FIXED_NOW, limiter=RateLimiter(0), settings=run_settings())
            reader = ExitStack()
            url = reader.enter_context(serving_rsgi(app, head_timeout=5, lifespan=True))
            stack.push(reader)
            readers.append(reader)
            addresses.append(url.removeprefix("http://"))
        public = sorted(access_table(declared_routes([tiny_group("a")])).public_paths)
        port = stack.enter_context(running_nginx(tmp_path / "nginx", nginx.Tier(readers=addresses), public))
        yield port, readers


def test_the_default_configuration_is_one_nginx_accepts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = nginx_binary()
    assert main(["nginx", "--readers", "10.0.0.2:8000,10.0.0.3:8000", "--writer", "10.0.0.1:8000",
                 "--state-dir", str(tmp_path), "--pid", str(tmp_path / "pid"), "--error-log", str(tmp_path / "log")], run_settings()) == 0
    conf = capsys.readouterr().out
    for directive in ("hash $http_x_api_key consistent;", "server 10.0.0.3:8000 max_fails=1 fail_timeout=5s;",
                      "keepalive 64;", "proxy_next_upstream error timeout http_502 http_504;", "gzip off;",
                      "large_client_header_buffers 4 8k;", "client_header_timeout 10s;", "client_max_body_size 64k;",
                      '"/korea-chart/health" 0;', "proxy_no_cache $chartgw_keyed;", "~^1: chartgw_writer;",
                      "~^0:/hooks(/|$) chartgw_writer;", "~^0:(/[^/]+)?/exports(/|$) chartgw_writer;"):
        assert directive in conf
    assert '"/korea-chart/sites"' not in conf  # keyed: not in the public map
    (tmp_path / "nginx.conf").write_text(conf)
    check = subprocess.run([program, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")], capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stderr


def test_a_reader_that_is_not_host_and_port_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nginx", "--readers", "10.0.0.2:8000,evil;host:80"], run_settings()) == 2
    assert "not HOST:PORT" in capsys.readouterr().err


def test_each_key_meets_one_reader_and_a_dead_reader_costs_no_request(tier: tuple[int, list[Any]]) -> None:
    port, readers = tier
    seen = {key: {get(port, "/tiny/data", f"X-API-Key: {key}").body for _ in range(6)} for key in (TEST_KEY, OTHER_KEY)}
    assert all(len(bodies) == 1 for bodies in seen.values()), seen  # hash $http_x_api_key consistent
    readers[0].close()  # reader "a" stops: its keys move to "b", and no request fails
    answers = [get(port, "/tiny/data", f"X-API-Key: {key}") for key in (TEST_KEY, OTHER_KEY) for _ in range(4)]
    assert [a.status for a in answers] == [200] * 8
    assert {a.body for a in answers} == {b'{"reader":"b","secret":"only for keys"}'}
    readers[1].close()  # none left: nginx's own answer, JSON
    down = get(port, "/tiny/data", f"X-API-Key: {TEST_KEY}")
    assert down.status == 503 and down.headers["retry-after"] == "1"
    assert down.body == b'{"detail":"No replica answered; try again shortly"}'


def test_public_pages_are_cached_as_the_gateway_allows(tier: tuple[int, list[Any]]) -> None:
    port, _ = tier
    first, second = get(port, "/tiny/health"), get(port, "/tiny/health", "X-API-Key: whatever")
    assert (first.status, second.status) == (200, 200)
    assert second.headers["x-cache"] == "HIT" and second.body == first.body
    assert first.headers["cache-control"] == "public, max-age=60"


BYPASSES = bypass_requests("/tiny/data", "/tiny/health", TEST_KEY)


@pytest.mark.parametrize("case", BYPASSES, ids=[c[0] for c in BYPASSES])
def test_a_request_the_gateway_did_not_admit_gets_nothing_keyed(tier: tuple[int, list[Any]], case: tuple[str, bytes]) -> None:
    port, _ = tier
    for _ in range(2):  # admitted answers first, twice: were anything cached, the bypass would now be served it
        assert get(port, "/tiny/data", f"X-API-Key: {TEST_KEY}").status == 200
    answer = raw(port, case[1])
    assert b"secret" not in answer.body and answer.status in UNADMITTED, answer
    assert answer.headers.get("x-cache") in (None, "BYPASS")


def test_the_gateway_limits_hold_at_nginx_and_answer_json(tier: tuple[int, list[Any]]) -> None:
    port, _ = tier
    long_url = get(port, "/tiny/health?" + "x" * 9000)
    assert long_url.status == 414 and long_url.body == b'{"detail":"The request URL is too long"}'
    big_head = get(port, "/tiny/health", *(f"X-Pad-{i}: {'y' * 7000}" for i in range(6)))
    assert big_head.status == 400 and big_head.body.startswith(b'{"detail":')
    body = b"z" * (70 * 1024)
    too_big = raw(port, b"POST /tiny/data HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
                  + body)
    assert too_big.status == 413 and too_big.body.startswith(b'{"detail":')
