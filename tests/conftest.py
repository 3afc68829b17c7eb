"""Fixtures shared by every test module."""

from __future__ import annotations

import fcntl
import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chartgw.core.config import DEFAULT_DATA_DIR
from tests.fixtures import TEST_SETTINGS, use

# The caller's CHARTGW_* variables are not the tests' settings: a command run in process (`cli.main`, which resolves
# its settings from the environment as a process does at start-up) or a child process would read them. Each test
# sets what it needs (`tests.fixtures.environment`, `configure`, `child_env`).
for _name in [name for name in os.environ if name.startswith("CHARTGW_")]:
    del os.environ[_name]
use(TEST_SETTINGS)  # before any fixture: session data is seeded with the tests' settings too

SHARED_UPSTREAM = Path(__file__).resolve().parents[1].parent / "shared" / "upstream"
USER_DATA = Path(DEFAULT_DATA_DIR).expanduser()
USER_DATA_BEFORE = USER_DATA.exists()
"""Whether the user's own data folder existed before the run: a test that resolves the settings from the (cleared)
environment, `cli.main` without `settings=`, would write there; `pytest_sessionfinish` fails the run if it did."""


LONG_MARKS = ("slow", "install", "heavy")
WAITING_MARK = "waits"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules in the order pytest-xdist (`--dist loadscope --no-loadscope-reorder`) should hand them out.

    The modules of long tests (marked slow, install or heavy) first, so that they start at once instead of finishing
    last on one worker while the others idle. xdist gives each worker a module, then at once another to each worker
    left with two tests or fewer (a worker runs a test only once it knows the next one): that module waits behind
    the first, so it is a short one (the next ordinary module), never another long one. The modules marked
    `waits`, whose tests mostly wait on timeouts and other processes, are spread over the first two thirds of the
    short ones: there their idle time is the other workers' CPU, where together, or last, the box would idle. Busy
    short modules even out the end."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        module = getattr(item, "module", None)  # a test function's (pytest.Function) module
        modules.setdefault(module.__name__ if module is not None else "", []).append(item)

    def marked(module: str, *marks: str) -> bool:
        return any(test.get_closest_marker(mark) for test in modules[module] for mark in marks)

    long = [m for m in modules if marked(m, *LONG_MARKS)]
    short = [m for m in modules if m not in long]
    first = [*long, *short][:int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))]
    short = [m for m in short if m not in first]
    behind = [short.pop(0) for m in first if len(modules[m]) <= 2 and short]
    waiting = [m for m in short if marked(m, WAITING_MARK)]
    busy = [m for m in short if m not in waiting]
    every = max(1, 2 * len(busy) // 3 // max(1, len(waiting)))  # one waiting module before every `every` busy ones
    mixed: list[str] = []
    for i, module in enumerate(busy):
        if i % every == 0 and i // every < len(waiting):
            mixed.append(waiting[i // every])
        mixed.append(module)
    order = [*first, *behind, *(m for m in long if m not in first), *mixed, *(m for m in waiting if m not in mixed)]
    items[:] = [item for m in order for item in modules[m]]


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (the test modules, the app's and the libraries' modules, the test items) lives as
    long as the run: frozen, the cyclic collector no longer walks it in every full collection. And young objects
    are collected every 50,000 allocations, not 700 (the seeders and schemathesis allocate millions). Measured
    over test_artist_history.py, test_api_retail.py and test_schemathesis.py, each run alone: the collector's CPU
    6.9, 2.7 and 5.9 s before, 2.0, 0.8 and 3.6 s after. The memory tests measure server processes, not this one."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not USER_DATA_BEFORE and USER_DATA.exists():
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\nFAILED: a test wrote into the user's own data folder {USER_DATA} (give the command settings=)")


@pytest.fixture
def shared_upstream() -> Path:
    """The real captured upstream payloads in ../shared/upstream; tests using them skip without it."""
    if not SHARED_UPSTREAM.is_dir():
        pytest.skip(f"real upstream captures not present at {SHARED_UPSTREAM} (clone ../shared beside the repo)")
    return SHARED_UPSTREAM


@pytest.fixture(scope="session")
def _default_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data folder of a test that names none: the session's, never the default one (`~/.local/share/chartgw`)."""
    return tmp_path_factory.mktemp("default-data")


@pytest.fixture(autouse=True)
def _own_settings(_default_data: Path) -> Iterator[None]:
    """Every test starts from its own settings, never the caller's environment: the defaults, with crawls that
    do not pause between requests or back off for real, and the session's data folder. A test changes them with
    `tests.fixtures.configure`."""
    settings = TEST_SETTINGS.with_values({"DATA_DIR": str(_default_data)})
    use(settings)
    yield
    use(settings)


def shared_data(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """A read-only data folder built once per test run: by the first pytest-xdist worker that asks, under a lock,
    while the others wait for it (a run without workers simply builds it)."""
    return shared_parts(tmp_path_factory, name, ["whole"], lambda path, _: build(path))


def shared_parts(tmp_path_factory: pytest.TempPathFactory, name: str, parts: list[str],
                 build: Callable[[Path, str], object]) -> Path:
    """A read-only data folder built once per test run in parts, each by the first worker that takes its lock:
    each worker starts at its own share of the parts and goes round, so N workers build it about N times faster."""
    root = tmp_path_factory.getbasetemp()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    start = 0
    if worker:
        root = root.parent  # shared by the run's workers
        start = int(worker.removeprefix("gw")) * len(parts) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    path = root / name
    path.mkdir(exist_ok=True)
    for part in parts[start:] + parts[:start]:
        with (root / f"{name}.{part}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            done = root / f"{name}.{part}.built"
            if not done.exists():
                build(path, part)
                done.touch()
    return path


@pytest.fixture(scope="session")
def korea_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder with every /korea-chart chart crawled from the samples. Read-only: copy it to change it."""
    from tests.fixtures import build_group_db

    return shared_data(tmp_path_factory, "korea-data", lambda path: build_group_db(path, "korea-chart"))


@pytest.fixture(scope="session")
def all_groups_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder with the demo data of every registered group, seeded at FIXED_NOW. Read-only.
    The artist-history index is left unbuilt: its tests build it from this data themselves."""
    from chartgw.groups import GROUPS
    from tests.fixtures import build_group_db

    seeded = [group.name for group in GROUPS if group.name != "artist-history-api"]
    return shared_parts(tmp_path_factory, "all-groups", seeded, build_group_db)


@pytest.fixture(scope="session")
def indexed_demo(all_groups_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`all_groups_data` with the artist-history index (and identity's tables) built over it, once per test run.
    Read-only: copy it (`tests.fixtures.copy_data`) to serve or change it."""
    import shutil

    from chartgw.groups import GROUPS
    from chartgw.index import artist_history as ah
    from tests.test_artist_history import build_index

    def build(path: Path) -> None:
        shutil.copytree(all_groups_data, path, dirs_exist_ok=True)
        ah.register_sources(GROUPS)
        build_index(path)

    return shared_data(tmp_path_factory, "indexed-demo", build)
