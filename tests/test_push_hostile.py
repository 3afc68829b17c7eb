"""Issue 28's attacks on the push surface's access rules, against a real `chartgw serve` over /digital-sales' demo
data: a request with two X-API-Key headers is refused alike by the app and by the fast lane (it was a 200 from
the app, which took the first, and a 401 from the lane, which took the last), and 60 parallel `POST /hooks` of one
key make exactly CHARTGW_HOOKS_PER_KEY hooks (they made 31 of a limit of 20).
"""

from __future__ import annotations

import http.client
import json
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from chartgw.api.access import env_key_id
from chartgw.push.hooks import HookStore
from tests.fixtures import TEST_KEY, group_data
from tests.test_server import PROBE, _port, chartgw_serve

pytestmark = pytest.mark.waits


@pytest.fixture
def data(tmp_path: Path, all_groups_data: Path) -> Path:
    return group_data(all_groups_data, tmp_path / "data", "digital-sales")


def _get(port: int, path: str, keys: list[str]) -> tuple[int, bytes]:
    """GET `path` on a keep-alive HTTP/1.1 connection with one X-API-Key header per key, as sent (raw)."""
    head = [f"GET {path} HTTP/1.1", "Host: x", *(f"X-API-Key: {key}" for key in keys), "", ""]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall("\r\n".join(head).encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += s.recv(65536)
        top, _, body = answer.partition(b"\r\n\r\n")
        length = int(next(line for line in top.split(b"\r\n") if line.lower().startswith(b"content-length:"))
                     .split(b":")[1])
        while len(body) < length:
            body += s.recv(65536)
    return int(top.split(b" ")[1]), body


def test_two_x_api_key_headers_are_a_400_from_the_app_and_from_the_lane(data: Path, tmp_path: Path) -> None:
    output = tmp_path / "serve.log"
    with chartgw_serve(data, "--access-log", output=output) as proc:
        port = _port(proc)
        assert _get(port, PROBE, [TEST_KEY])[0] == 200  # the app builds it: repeats are the lane's
        assert _get(port, PROBE, [TEST_KEY])[0] == 200
        answers = []
        for n, keys in enumerate(([TEST_KEY, "wrong"], ["wrong", TEST_KEY], [TEST_KEY, TEST_KEY])):
            answers.append(_get(port, PROBE, keys))  # cached: the lane's
            answers.append(_get(port, f"{PROBE}&n={n}", keys))  # a query never seen: the app's
        assert _get(port, PROBE, [TEST_KEY])[0] == 200
    assert {status for status, _ in answers} == {400}
    assert {json.loads(body)["detail"] for _, body in answers} == {"More than one X-API-Key header: send exactly one"}
    lines = [json.loads(line) for line in output.read_text().splitlines() if line.startswith("{")]
    refused = [(line["answered_by"], line["status"], line["key_id"]) for line in lines if line["status"] != 200]
    assert refused == [("lane", 400, None), ("app", 400, None)] * 3


def test_sixty_parallel_registrations_make_exactly_the_limit(data: Path) -> None:
    with chartgw_serve(data, HOOKS_PER_KEY="20") as proc:
        port = _port(proc)

        def register(n: int) -> int:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            try:
                conn.request("POST", "/hooks", body=json.dumps({"url": f"https://hook{n}.example.test/in"}),
                             headers={"X-API-Key": TEST_KEY, "content-type": "application/json"})
                answer = conn.getresponse()
                answer.read()
                return answer.status
            finally:
                conn.close()

        with ThreadPoolExecutor(60) as pool:
            statuses = list(pool.map(register, range(60)))
    assert sorted(statuses) == [200] * 20 + [403] * 40, statuses
    hooks = HookStore(data / "hooks.sqlite").hooks()
    assert len(hooks) == 20 and {h.key_id for h in hooks} == {env_key_id(TEST_KEY)}
