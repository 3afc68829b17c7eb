"""`chartgw serve` as it runs with no proxy in front, as a real process on 127.0.0.1: a URL or header block
past the cap is refused (414 / 431) without being read whole, and a request head that trickles in is cut
off with a 408 once its time is up. Every refusal is JSON."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chartgw.server import MAX_HEAD_BYTES, MAX_URL_BYTES
from tests.fixtures import child_env

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = _free_port()
    env = child_env(DATA_DIR=str(tmp_path_factory.mktemp("serve")), REQUEST_HEAD_TIMEOUT_SECONDS="1")
    proc = subprocess.Popen([sys.executable, "-m", "chartgw", "serve", "--port", str(port)], env=env, cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "the server did not start"
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def _exchange(port: int, data: bytes, wait: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # refused before it was all sent
            s.sendall(data)
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def test_a_url_past_the_cap_is_a_414(server: int) -> None:
    answer = _exchange(server, b"GET /" + b"a" * (MAX_URL_BYTES + 10) + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 414") and answer.endswith(b'{"detail":"The request URL is too long"}')


def test_a_header_block_past_the_cap_is_a_431_and_not_read_whole(server: int) -> None:
    head = b"GET /korea-chart/ HTTP/1.1\r\nHost: x\r\nX-Junk: " + b"j" * (4 * MAX_HEAD_BYTES) + b"\r\n\r\n"
    answer = _exchange(server, head)
    assert answer.startswith(b"HTTP/1.1 431") and b"application/json" in answer


def test_a_trickling_request_head_is_cut_off_with_a_408(server: int) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=5) as s:
        s.sendall(b"GET /korea-chart/ HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        answer = s.recv(65536)
        assert answer.startswith(b"HTTP/1.1 408") and time.monotonic() - started < 4
        assert s.recv(65536) == b""  # closed


def test_an_ordinary_request_still_answers(server: int) -> None:
    answer = _exchange(server, b"GET /korea-chart/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200") or answer.startswith(b"HTTP/1.1 404")
