"""Fixtures shared by every test module."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_UPSTREAM = Path(__file__).resolve().parents[1].parent / "shared" / "upstream"


@pytest.fixture
def shared_upstream() -> Path:
    """The real captured upstream payloads in ../shared/upstream; tests using them skip without it."""
    if not SHARED_UPSTREAM.is_dir():
        pytest.skip(f"real upstream captures not present at {SHARED_UPSTREAM} (clone ../shared beside the repo)")
    return SHARED_UPSTREAM
