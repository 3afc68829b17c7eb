"""The replay server (`chartgw.demo.replay`): a client that leaves before its answer is written is no error."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from chartgw.demo.replay import ReplayServer, Reply, answer_key


def test_a_client_gone_before_its_answer_leaves_no_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    """`chartgw demo --keep-fresh` stopped within a round cancels crawls mid-request: their connections close while
    the replay server writes, which socketserver reported as a BrokenPipeError traceback on stderr."""
    big = Reply(b"x" * 8_000_000, 200)
    server = ReplayServer({answer_key("GET", "/big", "", b""): big}).start()
    try:
        host, port = server.origin.removeprefix("http://").split(":")
        for _ in range(5):
            s = socket.create_connection((host, int(port)))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # closed with a reset
            s.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            s.recv(1024)  # the answer has begun
            s.close()
        deadline = time.monotonic() + 10
        while len(server.seen) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # the handlers' writes fail meanwhile
    finally:
        server.stop()
    assert len(server.seen) == 5
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Broken pipe" not in err and "Connection reset" not in err, err
