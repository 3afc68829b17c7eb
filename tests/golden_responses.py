"""The recorded responses of every endpoint over the demo data, for the refactoring guard.

`tests/golden/requests.txt` lists the requests; `answer_all` answers them through an app and
returns what is compared: status, content type, cache control and the body, with what differs
from run to run by nature (replay servers' ports, measured durations, commit order) masked.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path

from starlette.testclient import TestClient

GOLDEN = Path(__file__).parent / "golden"
REQUESTS = GOLDEN / "requests.txt"
RESPONSES = GOLDEN / "responses.json"
_MASKS = ((re.compile(rb"127\.0\.0\.1:\d+"), b"127.0.0.1:PORT"),
          (re.compile(rb'"duration_ms":\d+'), b'"duration_ms":0'),
          # Targets crawled concurrently commit in the order their answers arrive, so ids vary by run.
          (re.compile(rb'"(id|snapshot_id)":\d+'), rb'"\1":0'))


def requests() -> list[tuple[str, str]]:
    lines = [line.split(" ", 1) for line in REQUESTS.read_text().splitlines() if line and not line.startswith("#")]
    return [(method, url) for method, url in lines]


INLINE_BYTES = 8192
"""Bodies up to this size are kept whole (a failing comparison shows the difference); larger ones by digest."""


def masked(body: bytes) -> str:
    for pattern, replacement in _MASKS:
        body = pattern.sub(replacement, body)
    if len(body) <= INLINE_BYTES:
        return body.decode("utf-8")
    return f"{len(body)} bytes, sha256 {hashlib.sha256(body).hexdigest()}"


def answer_all(client: TestClient, headers: Mapping[str, str]) -> dict[str, dict[str, object]]:
    answers: dict[str, dict[str, object]] = {}
    for method, url in requests():
        response = client.request(method, url, headers=headers)
        answers[f"{method} {url}"] = {
            "status": response.status_code,
            "content_type": response.headers.get("content-type"),
            "cache_control": response.headers.get("cache-control"),
            "body": masked(response.content),
        }
    return answers


def record(path: Path) -> None:
    """Seed every group at FIXED_NOW into `path` and write what the app answers a day later."""
    import json
    from datetime import timedelta

    from tests.fixtures import FIXED_NOW, KEY_HEADERS, build_group_db, client

    for group in ("korea-chart", "streaming", "video", "digital-sales", "recognition"):
        build_group_db(path, group)
    with client(path, now=FIXED_NOW + timedelta(days=1)) as test_client:
        answers = answer_all(test_client, KEY_HEADERS)
    RESPONSES.write_text(json.dumps(answers, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    import tempfile

    from tests.fixtures import TEST_SETTINGS, use

    use(TEST_SETTINGS)  # the tests' settings, never the caller's environment
    with tempfile.TemporaryDirectory() as tmp:
        record(Path(tmp))
