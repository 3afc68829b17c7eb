"""Fixtures shared by every test module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chartgw.settings import install
from tests.fixtures import TEST_SETTINGS

install(TEST_SETTINGS)  # before any fixture: session data is seeded with the tests' settings too

SHARED_UPSTREAM = Path(__file__).resolve().parents[1].parent / "shared" / "upstream"


@pytest.fixture
def shared_upstream() -> Path:
    """The real captured upstream payloads in ../shared/upstream; tests using them skip without it."""
    if not SHARED_UPSTREAM.is_dir():
        pytest.skip(f"real upstream captures not present at {SHARED_UPSTREAM} (clone ../shared beside the repo)")
    return SHARED_UPSTREAM


@pytest.fixture(autouse=True)
def _own_settings() -> Iterator[None]:
    """Every test starts from its own settings, never the caller's environment: the defaults, with crawls that
    do not pause between requests or back off for real. A test changes them with `tests.fixtures.configure`."""
    install(TEST_SETTINGS)
    yield
    install(TEST_SETTINGS)


@pytest.fixture(scope="session")
def korea_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder with every /korea-chart chart crawled from the samples. Read-only: copy it to change it."""
    from tests.fixtures import build_group_db

    return build_group_db(tmp_path_factory.mktemp("korea-data"), "korea-chart")


@pytest.fixture(scope="session")
def all_groups_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder with the demo data of every registered group, seeded at FIXED_NOW. Read-only.
    The artist-history index is left unbuilt: its tests build it from this data themselves."""
    from chartgw.groups import GROUPS
    from tests.fixtures import build_group_db

    path = tmp_path_factory.mktemp("all-groups")
    for group in GROUPS:
        if group.name != "artist-history-api":
            build_group_db(path, group)
    return path
