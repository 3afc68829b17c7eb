"""Every endpoint answers byte for byte as recorded before the platform refactoring (issue 8): the demo
data of all five groups seeded at FIXED_NOW, answered a day later (see tests/golden_responses.py).

The recording was made from the code before the change with the same clock; regenerate it only for a
change that means to alter responses: `python -m tests.golden_responses`."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from tests.fixtures import FIXED_NOW, KEY_HEADERS, client
from tests.golden_responses import RESPONSES, answer_all

ANSWERED_AT = FIXED_NOW + timedelta(days=1)


@pytest.fixture(scope="module")
def answers(all_groups_data: Path) -> dict[str, dict[str, object]]:
    with client(all_groups_data, now=ANSWERED_AT) as test_client:
        return answer_all(test_client, KEY_HEADERS)


def test_every_recorded_request_answers_as_recorded(answers: dict[str, dict[str, object]]) -> None:
    recorded = json.loads(Path(RESPONSES).read_text())
    assert list(answers) == list(recorded)
    for request, expected in recorded.items():
        assert answers[request] == expected, request
