"""Webhooks: registering them (POST/GET/DELETE /hooks), the URL guard, and the worker's deliveries to real receivers on
127.0.0.1 (loopback and plain http allowed by setting here): signatures checked with the standardwebhooks library,
an endpoint that fails three times, one that hangs past the timeout, one down for ten minutes, one that redirects,
giving up after 24 h and disabling after 3 days of failures. The worker runs in this process on an injected clock
(`Deliverer.step`), except where signatures are verified against the receiver's own clock.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from standardwebhooks import Webhook
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route as StarletteRoute
from starlette.testclient import TestClient

from chartgw.api.access import KeyChecker, KeyStore, RateLimiter, env_key_id
from chartgw.api.group import Group
from chartgw.groups import GROUPS
from chartgw.http.app import access_table, build_app, declared_routes
from chartgw.push.deliver import Deliverer, pinned
from chartgw.push.hooks import HookStore, UnsafeURL, check_address, check_url, hooks_db_path
from chartgw.store import FetchLogRow, NewSnapshot, SnapshotWriter, StoredEntry
from tests.fixtures import FIXED_NOW, KEY_HEADERS, TEST_KEY, client, data_dir, environment, serving
from tests.fixtures import settings as run_settings

pytestmark = pytest.mark.waits

ALPHA = Group("alpha", "Alpha", "A test group", ())
BETA = Group("beta", "Beta", "Another test group", ())
LOCAL = {"CHARTGW_HOOKS_HTTP_HOSTS": "127.0.0.1", "CHARTGW_HOOKS_PRIVATE_ADDRESSES": "allow", "CHARTGW_API_KEYS": TEST_KEY}
"""The worker here (`Deliverer`) is given TEST_KEY as the server is: a hook delivers only while its key is in force."""


def chart(target: str, titles: str, day: int = 0) -> NewSnapshot:
    when = FIXED_NOW + timedelta(days=day)
    entries = [StoredEntry(rank, t.lower(), "artist", None, json.dumps({"title": t}).encode())
               for rank, t in enumerate(titles, start=1)]
    return NewSnapshot(target, when.date().isoformat(), None, when, "test", entries)


def commit(data: Path, group: str, *snapshots: NewSnapshot) -> None:
    with SnapshotWriter(data / f"{group}.sqlite", now=lambda: FIXED_NOW) as writer:
        writer.commit(list(snapshots), FetchLogRow(snapshots[0].target, FIXED_NOW, 0, "ok"))


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "data"
    path.mkdir()
    with data_dir(path), environment(LOCAL):
        yield path


@pytest.fixture
def api(data: Path) -> Iterator[TestClient]:
    with client(data, [ALPHA, BETA]) as test_client:
        yield test_client


def register(api: TestClient, url: str, headers: Mapping[str, str] = KEY_HEADERS, **filters: list[str]) -> dict[str, Any]:
    response = api.post("/hooks", json={"url": url, **filters}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


# --- the API ----------------------------------------------------------------------------------------------

def test_a_key_registers_lists_and_removes_its_own_hooks(data: Path) -> None:
    other_id, other_key = KeyStore(data / "keys.sqlite").create("other")  # before the app reads the key file
    with client(data, [ALPHA, BETA]) as api:
        keys_apart(api, other_id, {"X-API-Key": other_key})


def keys_apart(api: TestClient, other_id: int, other: dict[str, str]) -> None:
    assert not access_table(declared_routes(GROUPS)).is_public("/hooks")
    assert api.get("/hooks").status_code == 401 and api.post("/hooks", json={"url": "https://x.test/"}).status_code == 401
    made = register(api, "https://hooks.example.test/chartgw", groups=["alpha"], targets=["top"])
    assert made["secret"].startswith("whsec_") and Webhook(made["secret"])  # a valid Standard Webhooks secret
    assert {k: made[k] for k in ("url", "groups", "targets", "state", "failing_since", "disabled_reason")} == {
        "url": "https://hooks.example.test/chartgw", "groups": ["alpha"], "targets": ["top"], "state": "active",
        "failing_since": None, "disabled_reason": None}
    listed = api.get("/hooks", headers=KEY_HEADERS).json()
    assert listed["count"] == 1 and "secret" not in listed["hooks"][0] and listed["hooks"][0]["id"] == made["id"]
    # Another key sees none of them and cannot remove them.
    assert api.get("/hooks", headers=other).json() == {"count": 0, "hooks": []}
    assert api.delete(f"/hooks/{made['id']}", headers=other).status_code == 404
    assert api.get(f"/hooks/{made['id']}/deliveries", headers=other).status_code == 404
    theirs = register(api, "https://theirs.example.test/", headers=other)
    assert [h.key_id for h in HookStore(hooks_db_path(run_settings())).hooks()] == [env_key_id(TEST_KEY), other_id]
    gone = api.delete(f"/hooks/{made['id']}", headers=KEY_HEADERS)
    assert (gone.status_code, gone.json()) == (200, {"id": made["id"], "deleted": True})
    assert api.get("/hooks", headers=KEY_HEADERS).json()["count"] == 0
    assert api.get("/hooks", headers=other).json()["hooks"][0]["id"] == theirs["id"]


def test_each_key_of_chartgw_api_keys_has_its_own_hooks(data: Path) -> None:
    """Issue 28: every CHARTGW_API_KEYS key had the id 0, so one listed and deleted another's hooks."""
    other = "another-env-key-9876543210"
    with data_dir(data):
        app = build_app([ALPHA, BETA], checker=KeyChecker(data / "keys.sqlite", plain_keys=[TEST_KEY, other]),
                        clock=lambda: FIXED_NOW, limiter=RateLimiter(0), settings=run_settings())
    with TestClient(app) as api:
        keys_apart(api, env_key_id(other), {"X-API-Key": other})
    assert env_key_id(TEST_KEY) < 0 and env_key_id(other) < 0 and env_key_id(TEST_KEY) != env_key_id(other)
    assert env_key_id.__wrapped__(TEST_KEY) == env_key_id(TEST_KEY)  # stable: derived from the key alone


@pytest.mark.parametrize(("body", "loc", "kind"), [
    (None, ["body"], "missing"),
    (b"{not json", ["body"], "json_invalid"),
    (b'{"groups": []}', ["body"], "model_attributes_type"),
    (b'{"url": "ftp://x.test/"}', ["body", "url"], "value_error"),
    (b'{"url": "http://plain.example.test/"}', ["body", "url"], "value_error"),
    (b'{"url": "https://user:pw@x.test/"}', ["body", "url"], "value_error"),
    (b'{"url": "https://x.test/", "groups": ["gamma"]}', ["body", "groups"], "value_error"),
    (b'{"url": "https://x.test/", "targets": [" "]}', ["body", "targets"], "value_error"),
])
def test_a_bad_registration_is_a_422_in_fastapis_shape(api: TestClient, body: bytes | None, loc: list[str],
                                                        kind: str) -> None:
    response = api.post("/hooks", content=body, headers={**KEY_HEADERS, "content-type": "application/json"})
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert (error["loc"], error["type"]) == (loc, kind)
    assert api.get("/hooks", headers=KEY_HEADERS).json()["count"] == 0


def test_a_key_has_a_limited_number_of_hooks(data: Path) -> None:
    with environment({"CHARTGW_HOOKS_PER_KEY": "1"}), client(data, [ALPHA]) as api:
        register(api, "https://one.example.test/")
        refused = api.post("/hooks", json={"url": "https://two.example.test/"}, headers=KEY_HEADERS)
    assert refused.status_code == 403 and "CHARTGW_HOOKS_PER_KEY" in refused.json()["detail"]


def test_every_query_of_the_hooks_file_compiles_against_its_tables() -> None:
    from chartgw.push.hooks import HOOK_QUERIES, HOOK_TABLES
    from chartgw.store.schema import compile_check

    assert len(HOOK_QUERIES) > 20 and compile_check(HOOK_TABLES, HOOK_QUERIES) == {}


def test_the_url_guard() -> None:
    with environment({"CHARTGW_HOOKS_HTTP_HOSTS": "receiver.example.test"}):
        for good in ("https://hooks.example.test/x?y=1", "https://93.184.216.34:8443/", "http://receiver.example.test/",
                     "https://[2606:4700::1111]/"):
            assert check_url(good, run_settings()) == good
        for bad, why in (("http://other.example.test/", "https only"), ("https://10.1.2.3/", "not a public address"),
                         ("https://127.0.0.1/", "not a public address"), ("https://[::1]/", "not a public address"),
                         ("https://169.254.169.254/latest", "not a public address"),
                         ("https://[::ffff:192.168.0.1]/", "not a public address"), ("https://0.0.0.0/", "not a public"),
                         ("https://localhost/", "local name"), ("https://db.internal/", "local name"),
                         ("https://a:b@x.test/", "credentials"), ("https://x.test/#f", "fragment"), ("//x.test/", "absolute"),
                         ("https://x.test:0/", "port 0"), ("https://" + "x" * 2050, "at most")):
            with pytest.raises(UnsafeURL, match=why):
                check_url(bad, run_settings())
    with environment({"CHARTGW_HOOKS_PRIVATE_ADDRESSES": "allow"}):
        assert check_url("https://127.0.0.1:9/", run_settings()) and check_url("https://localhost/", run_settings())


ADDRESSES = [
    # (address, allowed): issue 28's six first, then every kind of IPv4 and IPv6 space, and IPv4 carried in IPv6.
    ("224.0.0.1", False), ("::7f00:1", False), ("64:ff9b::a9fe:a9fe", False), ("64:ff9b::a00:1", False),
    ("2002:a9fe:a9fe::", False), ("fec0::1", False),
    ("8.8.8.8", True), ("1.1.1.1", True), ("93.184.216.34", True), ("203.0.114.1", True), ("100.128.0.1", True),
    ("172.32.0.1", True), ("192.0.1.1", True), ("223.255.255.254", True),
    ("0.0.0.0", False), ("0.1.2.3", False), ("10.0.0.1", False), ("10.255.255.255", False), ("100.64.0.1", False),
    ("100.127.255.254", False), ("127.0.0.1", False), ("127.8.9.10", False), ("169.254.169.254", False),
    ("172.16.0.1", False), ("172.31.255.254", False), ("192.0.0.8", False), ("192.0.2.1", False), ("192.88.99.1", False),
    ("192.168.1.1", False), ("198.18.0.1", False), ("198.19.255.254", False), ("198.51.100.7", False),
    ("203.0.113.9", False), ("224.0.0.251", False), ("239.255.255.250", False), ("240.0.0.1", False),
    ("255.255.255.255", False),
    ("2606:4700::1111", True), ("2001:4860:4860::8888", True), ("2a00:1450:4001:81a::200e", True), ("2400:cb00::1", True),
    ("3ffd:ffff::1", True),
    ("::", False), ("::1", False), ("fe80::1", False), ("fe80::1%eth0", False), ("febf::1", False),
    ("feff::1", False), ("fc00::1", False), ("fec0::abcd", False), ("fd12:3456::1", False), ("ff02::1", False), ("ff0e::101", False),
    ("100::1", False), ("2001:db8::1", False), ("2001:10::1", False), ("2001:20::1", False), ("2001:1ff::1", False),
    ("3fff::1", False), ("3ffe::1", False), ("4000::1", False), ("5f00::1", False), ("e000::1", False),
    ("::ffff:8.8.8.8", True), ("::ffff:127.0.0.1", False), ("::ffff:169.254.169.254", False), ("::ffff:10.1.2.3", False),
    ("::8.8.8.8", True), ("::10.0.0.1", False), ("::a9fe:a9fe", False),
    ("64:ff9b::808:808", True), ("64:ff9b::7f00:1", False), ("64:ff9b::c0a8:101", False), ("64:ff9b::e000:1", False),
    ("64:ff9b:1::a00:1", False), ("64:ff9b:1:808:8:800::", False),
    ("2002:808:808::1", True), ("2002:7f00:1::", False), ("2002:a00:1::1", False), ("2002:e000:1::", False),
    ("2001:0:808:808::f7f7:f7f7", True), ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),
    ("2001:0:a00:1::f7f7:f7f7", False), ("2001:0:808:808::f5ff:fffe", False),
]
"""Addresses a hook may (True) and may not reach, whichever way they come: in the URL, or resolved when sending."""


def test_the_address_guard_over_a_table_of_addresses() -> None:
    """Issue 28: the guard trusted `is_global` alone, which let multicast, site-local and IPv4 carried in IPv6
    (compatible, NAT64, 6to4) through. Each address is asked at registration (a URL literal) and at delivery."""
    assert len(ADDRESSES) >= 60 and len({a for a, _ in ADDRESSES}) == len(ADDRESSES)
    wrong = []
    with environment({"CHARTGW_HOOKS_PRIVATE_ADDRESSES": "deny"}):
        for address, allowed in ADDRESSES:
            url = f"https://[{address.replace('%', '%25')}]/in" if ":" in address else f"https://{address}/in"
            for where, check, value in (("registration", check_url, url), ("delivery", check_address, address)):
                try:
                    check(value, run_settings())
                    refused = False
                except UnsafeURL:
                    refused = True
                if refused == allowed:
                    wrong.append((address, where, "refused" if refused else "allowed"))
    assert wrong == []
    with pytest.raises(UnsafeURL, match="carries 169.254.169.254"):
        asyncio.run(pinned("https://[64:ff9b::a9fe:a9fe]/", run_settings()))
    with environment({"CHARTGW_HOOKS_PRIVATE_ADDRESSES": "allow"}):  # the operator's choice, for tests and labs
        assert check_url("https://[64:ff9b::a00:1]/", run_settings()) and check_url("https://224.0.0.1/", run_settings())


@pytest.mark.parametrize("host", ["0x7f.1", "2130706433", "017700000001", "127.1", "0xa9.0xfe.0xa9.0xfe", "0251.0376.0251.0376"])
def test_a_host_in_the_resolvers_old_ipv4_forms_is_judged_as_the_address(host: str) -> None:
    """`https://0x7f.1/` is no name: the resolver reads it as 127.0.0.1, so registration refuses it already."""
    with pytest.raises(UnsafeURL, match="not a public address"):
        check_url(f"https://{host}/", run_settings())
    assert check_url("https://0x8.8.8.8/", run_settings()) and check_url("https://cafe.example.test/", run_settings())


def test_a_delivery_goes_to_the_checked_address_with_the_hosts_name() -> None:
    with environment(LOCAL):
        assert asyncio.run(pinned("https://127.0.0.1:8443/in?a=1", run_settings())) == (
            "https://127.0.0.1:8443/in?a=1", "127.0.0.1:8443", {"sni_hostname": "127.0.0.1"})
        assert asyncio.run(pinned("http://[::1]/", run_settings())) == ("http://[::1]/", "[::1]", {})
    with pytest.raises(UnsafeURL, match="not a public address"):
        asyncio.run(pinned("http://127.0.0.1:9/", run_settings()))  # the addresses a host resolves to are checked when sending


# --- receivers ----------------------------------------------------------------------------------------------

class Receiver:
    """Webhook endpoints on 127.0.0.1 that record what they get: /verify checks every signature with the
    standardwebhooks library, /flaky fails three times, /hang hangs past the timeout once, /redirect redirects."""

    def __init__(self) -> None:
        self.secret = ""
        self.got: list[tuple[str, dict[str, str], bytes]] = []
        self.verified: list[dict[str, Any]] = []
        self.flaky = 0
        self.hung = False
        self.lock = threading.Lock()

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        path = request.url.path
        with self.lock:
            self.got.append((path, dict(request.headers), body))
        if path == "/verify":
            self.verified.append(Webhook(self.secret).verify(body, dict(request.headers)))
            return Response(status_code=204)
        if path == "/flaky":
            self.flaky += 1
            return Response(status_code=500 if self.flaky <= 3 else 200)
        if path == "/hang" and not self.hung:
            self.hung = True
            await asyncio.sleep(3)
        if path == "/redirect":
            return Response(status_code=302, headers={"location": "/verify"})
        return Response(b"ok")

    def app(self) -> Starlette:
        return Starlette(routes=[StarletteRoute("/{path:path}", self.handle, methods=["POST"])])


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    found = Receiver()
    with serving(found.app()) as base:
        yield found, base


def run_steps(deliverer: Deliverer, clock: list[datetime] | None = None, times: list[timedelta] | None = None) -> None:
    """One step per offset in `times` (the clock set to FIXED_NOW plus it), each waiting for its sends."""

    async def go() -> None:
        async with deliverer:
            for offset in times or [timedelta(0)]:
                if clock is not None:
                    clock[0] = FIXED_NOW + offset
                await deliverer.step()
                await deliverer.settle()

    asyncio.run(go())


def attempts(api: TestClient, hook_id: int) -> list[tuple[str, int | None, str | None]]:
    """(attempted_at, status, error) oldest first, as GET /hooks/{id}/deliveries answers."""
    body = api.get(f"/hooks/{hook_id}/deliveries", headers=KEY_HEADERS).json()
    return [(a["attempted_at"], a["status"], a["error"]) for a in reversed(body["attempts"])]


def at(seconds: float) -> str:
    return (FIXED_NOW + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_every_delivery_is_signed_per_standard_webhooks(api: TestClient, data: Path,
                                                        receiver: tuple[Receiver, str]) -> None:
    """The receiver verifies every signature with the standardwebhooks library (against its own clock: the worker
    signs with the real time here); each body is the change as GET /changes gives it."""
    found, base = receiver
    commit(data, "alpha", chart("top", "AB"))  # before the hook: never sent to it
    hook = register(api, f"{base}/verify")
    found.secret = hook["secret"]
    commit(data, "alpha", chart("top", "BA", 1), chart("other", "C"))
    commit(data, "beta", chart("top", "X"))
    run_steps(Deliverer(["alpha", "beta"], settings=run_settings()))
    assert [(v["type"], v["data"]["group"], v["data"]["id"], v["data"]["target"]) for v in found.verified] == [
        ("chart.changed", "alpha", 2, "top"), ("chart.changed", "alpha", 3, "other"), ("chart.changed", "beta", 1, "top")]
    feed = api.get("/changes?since=c1.YWxwaGE6MQ", headers=KEY_HEADERS).json()["changes"]
    assert [v["data"] for v in found.verified] == feed
    headers = found.got[0][1]
    assert headers["webhook-id"] == f"msg_{hook['id']}_alpha_2" and headers["content-type"] == "application/json"
    assert headers["user-agent"].startswith("chartgw-webhooks")
    log = api.get(f"/hooks/{hook['id']}/deliveries", headers=KEY_HEADERS).json()
    assert [(a["msg_id"], a["status"], a["error"], a["delivery_state"]) for a in reversed(log["attempts"])] == [
        (f"msg_{hook['id']}_alpha_2", 204, None, "delivered"), (f"msg_{hook['id']}_alpha_3", 204, None, "delivered"),
        (f"msg_{hook['id']}_beta_1", 204, None, "delivered")]
    run_steps(Deliverer(["alpha", "beta"], settings=run_settings()))  # nothing is sent twice once delivered
    assert len(found.got) == 3


def test_filters_choose_the_changes_a_hook_gets(api: TestClient, data: Path, receiver: tuple[Receiver, str]) -> None:
    found, base = receiver
    register(api, f"{base}/top", groups=["alpha"], targets=["top"])
    commit(data, "alpha", chart("top", "AB"), chart("other", "C"))
    commit(data, "beta", chart("top", "X"))
    run_steps(Deliverer(["alpha", "beta"], settings=run_settings()))
    assert [json.loads(body)["data"]["target"] for _, _, body in found.got] == ["top"]


def test_an_endpoint_failing_three_times_gets_it_on_the_fourth_with_backoff(
        api: TestClient, data: Path, receiver: tuple[Receiver, str]) -> None:
    found, base = receiver
    clock = [FIXED_NOW]
    hook = register(api, f"{base}/flaky")
    commit(data, "alpha", chart("top", "AB"))
    run_steps(Deliverer(["alpha"], clock=lambda: clock[0], settings=run_settings()), clock,
              [timedelta(seconds=s) for s in (0, 1, 5, 14, 15, 34, 35, 40)])
    assert attempts(api, hook["id"]) == [(at(0), 500, "HTTP 500"), (at(5), 500, "HTTP 500"), (at(15), 500, "HTTP 500"),
                                         (at(35), 200, None)]
    assert len({h["webhook-id"] for _, h, _ in found.got}) == 1  # one delivery, four attempts, one id
    assert api.get("/hooks", headers=KEY_HEADERS).json()["hooks"][0]["failing_since"] is None


def test_a_new_delivery_to_a_failing_hook_waits_out_its_backoff(
        api: TestClient, data: Path, receiver: tuple[Receiver, str]) -> None:
    """Issue 28: a change queued while a hook was backing off was sent at once. It waits for the hook's next try
    (the endpoint fails three times: tries at 0, 5, 15 and 35 s), and goes then, after the one before it."""
    found, base = receiver
    clock = [FIXED_NOW]
    hook = register(api, f"{base}/flaky")
    deliverer = Deliverer(["alpha"], clock=lambda: clock[0], settings=run_settings())
    commit(data, "alpha", chart("top", "AB"))
    run_steps(deliverer, clock, [timedelta(seconds=0)])
    commit(data, "alpha", chart("top", "BA", 1))
    run_steps(deliverer, clock, [timedelta(seconds=s) for s in (1, 3, 5, 6, 14, 15, 16, 34, 35)])
    tried = [(when, json.loads(body)["data"]["id"]) for when, body in zip(
        [a[0] for a in attempts(api, hook["id"])], [b for _, _, b in found.got], strict=True)]
    assert tried == [(at(0), 1), (at(5), 1), (at(15), 1), (at(35), 1), (at(35), 2)]


def test_an_endpoint_that_hangs_past_the_timeout_is_retried(data: Path, receiver: tuple[Receiver, str]) -> None:
    _, base = receiver
    clock = [FIXED_NOW]
    with environment({"CHARTGW_HOOKS_TIMEOUT_SECONDS": "1"}), client(data, [ALPHA]) as api:
        hook = register(api, f"{base}/hang")
        commit(data, "alpha", chart("top", "AB"))
        began = time.monotonic()
        run_steps(Deliverer(["alpha"], clock=lambda: clock[0], settings=run_settings()), clock, [timedelta(0), timedelta(seconds=5)])
        assert time.monotonic() - began < 20  # the worker gave up on the hanging answer (1 s), not waited it out
        assert attempts(api, hook["id"]) == [(at(0), None, "no answer within 1 s"), (at(5), 200, None)]


def test_an_endpoint_down_for_ten_minutes_gets_it_when_back(api: TestClient, data: Path) -> None:
    """Connection refused for ten minutes (of the injected clock): tried at 0, 5, 15, 35, 75, 155, 315 s, then at
    635 s, when the receiver is listening again."""
    reserved = socket.socket()
    reserved.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    reserved.bind(("127.0.0.1", 0))
    port = reserved.getsockname()[1]
    reserved.close()  # nothing listens on the port: connections are refused
    clock = [FIXED_NOW]
    hook = register(api, f"http://127.0.0.1:{port}/back")
    commit(data, "alpha", chart("top", "AB"))
    deliverer = Deliverer(["alpha"], clock=lambda: clock[0], settings=run_settings())
    offsets = [0, 5, 15, 35, 75, 155, 315, 600]
    run_steps(deliverer, clock, [timedelta(seconds=s) for s in offsets])
    found = Receiver()
    listening = socket.socket()
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind(("127.0.0.1", port))
    server = uvicorn.Server(uvicorn.Config(found.app(), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.02)
        run_steps(deliverer, clock, [timedelta(seconds=634), timedelta(seconds=635)])
    finally:
        server.should_exit = True
        thread.join(10)
        listening.close()
    log = attempts(api, hook["id"])
    assert [when for when, _, _ in log] == [at(s) for s in (0, 5, 15, 35, 75, 155, 315, 635)]
    assert all(status is None and error and "ConnectError" in error for _, status, error in log[:-1])
    assert log[-1][1:] == (200, None) and len(found.got) == 1


def test_redirects_are_not_followed(api: TestClient, data: Path, receiver: tuple[Receiver, str]) -> None:
    found, base = receiver
    hook = register(api, f"{base}/redirect")
    commit(data, "alpha", chart("top", "AB"))
    run_steps(Deliverer(["alpha"], settings=run_settings()))
    assert [p for p, _, _ in found.got] == ["/redirect"]
    assert attempts(api, hook["id"])[0][1:] == (302, "HTTP 302: redirects are not followed")


def test_the_guard_runs_again_when_sending(api: TestClient, data: Path, receiver: tuple[Receiver, str]) -> None:
    """A hook registered while loopback was allowed is not sent to once the operator denies it."""
    found, base = receiver
    hook = register(api, f"{base}/verify")
    commit(data, "alpha", chart("top", "AB"))
    with environment({"CHARTGW_HOOKS_PRIVATE_ADDRESSES": "deny"}):
        run_steps(Deliverer(["alpha"], settings=run_settings()))
    assert found.got == []
    (_, status, error), = attempts(api, hook["id"])
    assert status is None and error == "refused: 127.0.0.1 is not a public address (CHARTGW_HOOKS_PRIVATE_ADDRESSES=allow permits it)"


def test_deliveries_give_up_after_a_day_and_a_hook_failing_for_three_days_is_disabled(
        api: TestClient, data: Path, receiver: tuple[Receiver, str]) -> None:
    found, base = receiver
    found.flaky = -10**9  # /flaky fails for good
    clock = [FIXED_NOW]
    hook = register(api, f"{base}/flaky")
    deliverer = Deliverer(["alpha"], clock=lambda: clock[0], settings=run_settings())
    commit(data, "alpha", chart("top", "AB"))
    # Step every 30 minutes for 3 days and a bit, a new change every 12 hours.
    offsets = [timedelta(minutes=30 * i) for i in range(3 * 48 + 2)]

    async def go() -> None:
        async with deliverer:
            for i, offset in enumerate(offsets):
                clock[0] = FIXED_NOW + offset
                if i and i % 24 == 0:
                    await asyncio.to_thread(commit, data, "alpha", chart("top", "AB" if i % 48 else "BA", i))
                await deliverer.step()
                await deliverer.settle()

    asyncio.run(go())
    with HookStore(hooks_db_path(run_settings())).connect() as db:
        states = db.execute("SELECT change_id, state, attempts, created_at, finished_at FROM deliveries ORDER BY id").fetchall()
    first = states[0]
    assert first[1] == "failed" and first[4] <= (FIXED_NOW + timedelta(hours=24)).strftime("%Y-%m-%dT%H:%M:%SZ")
    listed = api.get("/hooks", headers=KEY_HEADERS).json()["hooks"][0]
    assert listed["state"] == "disabled" and listed["failing_since"] == at(0)
    assert listed["disabled_reason"].startswith(f"every delivery attempt failed since {at(0)} (the last: HTTP 500)")
    sent = len(found.got)
    commit(data, "alpha", chart("top", "CD", 99))  # a disabled hook gets nothing new
    run_steps(deliverer, clock, [offsets[-1] + timedelta(hours=1)])
    assert len(found.got) == sent
    assert HookStore(hooks_db_path(run_settings())).enable(hook["id"]) and api.get("/hooks", headers=KEY_HEADERS).json()["hooks"][0]["state"] == "active"


def test_a_revoked_or_expired_keys_hooks_stop_and_a_rotated_keys_hooks_follow_it(
        data: Path, receiver: tuple[Receiver, str], capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 28: revoking a key left its hooks delivering, and `keys rotate` left the new key without them."""
    from chartgw.cli import main

    found, base = receiver
    store = KeyStore(data / "keys.sqlite")
    (gone_id, gone), (ending_id, ending), (kept_id, kept) = (store.create(n) for n in ("gone", "ending", "kept"))
    clock = [FIXED_NOW]
    with client(data, [ALPHA]) as api:
        made = {name: register(api, f"{base}/{name}", headers={"X-API-Key": key})["id"]
                for name, key in (("gone", gone), ("ending", ending), ("kept", kept))}
        deliverer = Deliverer(["alpha"], clock=lambda: clock[0], settings=run_settings())
        commit(data, "alpha", chart("top", "AB"))
        run_steps(deliverer, clock, [timedelta(0)])
        assert sorted(p for p, _, _ in found.got) == ["/ending", "/gone", "/kept"]
        assert main(["keys", "revoke", str(gone_id)], run_settings()) == 0
        assert main(["keys", "rotate", "kept"], run_settings()) == 0
        new_kept = capsys.readouterr().out.strip()
        with sqlite3.connect(data / "keys.sqlite") as db:  # "ending" expires a minute from the clock's now
            db.execute("UPDATE api_keys SET expires_at = ? WHERE id = ?", (at(60), ending_id))
        commit(data, "alpha", chart("top", "BA", 1))
        run_steps(deliverer, clock, [timedelta(seconds=1)])
        assert sorted(p for p, _, _ in found.got[3:]) == ["/ending", "/kept"]
        commit(data, "alpha", chart("top", "AB", 2))
        run_steps(deliverer, clock, [timedelta(seconds=61)])
        assert [p for p, _, _ in found.got[5:]] == ["/kept"]
    with client(data, [ALPHA]) as api:  # a new server: the key file as it is now
        listed = api.get("/hooks", headers={"X-API-Key": new_kept}).json()
        assert [h["id"] for h in listed["hooks"]] == [made["kept"]] and listed["hooks"][0]["state"] == "active"
    by_id = {h.id: h for h in HookStore(hooks_db_path(run_settings())).hooks()}
    assert by_id[made["kept"]].key_id not in (kept_id, None)
    for name, key_id in (("gone", gone_id), ("ending", ending_id)):
        assert by_id[made[name]].disabled_reason is not None and f"its key ({key_id})" in (by_id[made[name]].disabled_reason or "")


def test_a_hook_moved_to_a_new_key_after_the_worker_read_the_keys_is_not_disabled(
        data: Path, receiver: tuple[Receiver, str]) -> None:
    """`keys rotate` commits the new key, then moves the hooks: a worker that read the key file just before and the
    hooks just after sees a hook of a key it does not know. It reads the keys again before disabling anything."""
    from chartgw.api.access import KeyRoster

    found, base = receiver
    store = KeyStore(data / "keys.sqlite")
    old_id, old_key = store.create("partner")
    with client(data, [ALPHA]) as api:
        register(api, f"{base}/in", headers={"X-API-Key": old_key})
    before = KeyRoster(data / "keys.sqlite", [TEST_KEY]).in_force()  # what the worker read a moment ago

    class JustBefore(KeyRoster):
        def in_force(self, fresh: bool = False) -> frozenset[int]:
            return super().in_force(fresh) if fresh else before

    new_id, _, _ = store.rotate("partner", timedelta(days=1))
    assert HookStore(hooks_db_path(run_settings())).move(old_id, new_id) == 1 and new_id not in before
    commit(data, "alpha", chart("top", "AB"))
    run_steps(Deliverer(["alpha"], keys=JustBefore(data / "keys.sqlite", [TEST_KEY]), settings=run_settings()))
    assert [h.disabled_at for h in HookStore(hooks_db_path(run_settings())).hooks()] == [None] and [p for p, _, _ in found.got] == ["/in"]


def test_operators_manage_every_keys_hooks_from_the_cli(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from chartgw.cli import main

    settings = run_settings()
    assert main(["hooks", "add", "--key", "3", "--url", "https://ops.example.test/in", "--groups", "korea-chart"],
                settings) == 0
    secret = capsys.readouterr().out.strip()
    assert secret.startswith("whsec_")
    assert main(["hooks", "list"], settings) == 0
    listing = capsys.readouterr().out
    assert "https://ops.example.test/in; korea-chart; every target" in listing and secret not in listing
    assert main(["hooks", "add", "--key", "3", "--url", "http://nope.example.test/"], settings) == 2
    assert main(["hooks", "enable", "7"], settings) == 1 and main(["hooks", "deliveries", "1"], settings) == 0
    assert main(["hooks", "remove", "1"], settings) == 0 and HookStore(hooks_db_path(run_settings())).hooks() == []
    assert main(["hooks", "remove", "1"], settings) == 1


def test_the_crontab_starts_the_worker_at_boot() -> None:
    from chartgw.cli import crontab

    assert "@reboot CHARTGW_DATA_DIR=/srv/data /opt/chartgw/bin/chartgw deliver >> /srv/data/deliver.log 2>&1" in crontab(
        ("/opt/chartgw/bin/chartgw",), Path("/srv/data"))



def test_the_documented_ten_line_receiver_verifies_a_delivery(api: TestClient, data: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The README's receiver, run as written but for its secret, address and port."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    code = text.split("## Push, not poll", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert len([line for line in code.splitlines() if line.strip()]) == 10
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    hook = register(api, f"http://127.0.0.1:{port}/")
    ready = code.replace('"whsec_..."', repr(hook["secret"])).replace(
        'HTTPServer(("", 8080), Receiver).serve_forever()', f'server = HTTPServer(("127.0.0.1", {port}), Receiver)')
    scope: dict[str, Any] = {}
    exec(compile(ready, "README.md", "exec"), scope)
    thread = threading.Thread(target=scope["server"].serve_forever, daemon=True)
    thread.start()
    try:
        commit(data, "alpha", chart("top", "AB"))
        run_steps(Deliverer(["alpha"], settings=run_settings()))
    finally:
        scope["server"].shutdown()
        scope["server"].server_close()
    assert attempts(api, hook["id"])[0][1:] == (204, None)
    assert f"msg_{hook['id']}_alpha_1 alpha top 2 in\n" in capsys.readouterr().out
