"""Every long-running command and script stops cleanly on SIGTERM within a few seconds, tested on real processes:
`chartgw serve`, `chartgw demo --keep-fresh`, `chartgw monitor radio`, `chartgw demo --radio-monitor` and
`scripts/serve` (with its children)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from chartgw import cli
from chartgw.api.group import Group, GroupCommand
from chartgw.crawl.runner import Outcome
from tests.fixtures import child_env, copy_data, free_port
from tests.fixtures import settings as run_settings

ROOT = Path(__file__).resolve().parents[1]
STOP_SECONDS = 10.0
"""A clean stop takes a second or two alone; the bound leaves room for a loaded test machine."""


def wait_for(ready: Callable[[], bool], process: subprocess.Popen[bytes], seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        assert process.poll() is None, f"exited with {process.returncode} before it was ready"
        assert time.monotonic() < deadline, "not ready in time"
        time.sleep(0.2)


def answers(url: str) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            return httpx.get(url, timeout=2, trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False
    return ready


@contextmanager
def started(args: list[str], data: Path, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """`args` in its own process group, killed (the group) if a test leaves it running."""
    process = subprocess.Popen(args, env={**child_env(DATA_DIR=str(data)), **env}, cwd=data.parent,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        assert process.stderr is not None
        process.stderr.close()


def stop(process: subprocess.Popen[bytes]) -> tuple[int, float]:
    """SIGTERM to the process (only it: a supervisor must pass it on); its exit status and how long it took."""
    begun = time.monotonic()
    process.send_signal(signal.SIGTERM)
    status = process.wait(STOP_SECONDS)
    return status, time.monotonic() - begun


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def chartgw(*args: str) -> list[str]:
    return [sys.executable, "-m", "chartgw", *args]


def test_chartgw_serve_stops_on_sigterm(korea_data: Path, tmp_path: Path) -> None:
    data = copy_data(korea_data, tmp_path / "data")
    port = free_port()
    with started(chartgw("serve", "--port", str(port)), data) as server:
        wait_for(answers(f"http://127.0.0.1:{port}/korea-chart/health"), server)
        status, seconds = stop(server)
        assert server.stderr is not None
        log = server.stderr.read().decode()
    assert status == 0 and seconds < STOP_SECONDS, log
    assert "Shutting down" in log and "Traceback" not in log


def test_demo_keep_fresh_stops_on_sigterm(tmp_path: Path) -> None:
    with started(chartgw("demo", "--keep-fresh", "3600"), tmp_path / "data") as fresh:
        assert fresh.stderr is not None
        assert fresh.stderr.readline().startswith(b"demo: crawling the samples again every 3600 s")
        status, seconds = stop(fresh)
        rest = fresh.stderr.read().decode()
    assert status == 0 and seconds < STOP_SECONDS and "Traceback" not in rest


def test_demo_keep_fresh_stopped_within_a_round_stops_cleanly(all_groups_data: Path, tmp_path: Path) -> None:
    """SIGTERM while a round crawls every group's samples: the round is cancelled, every task of it finishes (no
    "Task exception was never retrieved"), one line says it stopped, 0; every file is whole and the next run works."""
    data = copy_data(all_groups_data, tmp_path / "data")
    held = {path.name: _newest(path) for path in data.glob("*.sqlite")}
    with started(chartgw("demo", "--keep-fresh", "0.2"), data) as fresh:
        assert fresh.stderr is not None
        assert fresh.stderr.readline().startswith(b"demo: crawling the samples again every 0.2 s")
        time.sleep(3)  # a round of every group takes far longer than this (tens of seconds)
        status, seconds = stop(fresh)
        rest = fresh.stderr.read().decode()
    assert "crawled the samples again" not in rest, "the round ended before the stop: not a stop within one"
    assert status == 0 and seconds < STOP_SECONDS, rest
    assert rest.strip().splitlines() == ["demo: stopped within a round (what it committed stays)"], rest
    for path in data.glob("*.sqlite"):
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",), path.name
        # Nothing lost: the newest snapshot held before, or a newer one, is there. (Counts may fall: a round crawls at
        # today's time and prunes by retention what the seed, made at a fixed date, holds.)
        assert _newest(path) >= held.get(path.name, 0), path.name
    assert cli.main(["demo", "--if-empty"], run_settings().with_values({"CHARTGW_DATA_DIR": str(data)})) == 0


def _newest(path: Path) -> int:
    """The newest snapshot's id (0 before the first)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return int(db.execute("SELECT coalesce(max(id), 0) FROM snapshots").fetchone()[0]) if "snapshots" in tables else 0


@pytest.mark.parametrize(("command", "said"), [
    (("monitor", "radio"), "ok     monitor"),  # the real one, here with no station in its (empty) directory
    (("demo", "--radio-monitor"), "demo radio monitor stopped: "),  # on local sample streams, as scripts/serve runs it
])
def test_the_radio_monitor_stops_on_sigterm_with_its_run_recorded(tmp_path: Path, command: tuple[str, ...],
                                                                   said: str) -> None:
    data = tmp_path / "data"
    data.mkdir()

    def running() -> bool:
        try:
            with sqlite3.connect(f"file:{data / 'radio.sqlite'}?mode=ro", uri=True) as db:
                return bool(db.execute("SELECT count(*) FROM monitor_runs WHERE stopped_at IS NULL").fetchone()[0])
        except sqlite3.Error:
            return False

    with started(chartgw(*command), data) as monitor:
        wait_for(running, monitor)
        status, seconds = stop(monitor)
        assert monitor.stderr is not None
        log = monitor.stderr.read().decode()
    assert status == 0 and seconds < STOP_SECONDS, log
    assert log.startswith(said) and "Traceback" not in log
    assert not running()  # the run was closed, not abandoned


def test_a_crawl_stopped_by_sigterm_exits_143_without_a_traceback(tmp_path: Path) -> None:
    """A one-shot command that did not finish says so by its status (128 + SIGTERM), quietly."""
    with started(chartgw("demo"), tmp_path / "data") as seeding:
        assert seeding.stderr is not None
        assert seeding.stderr.readline().startswith(b"demo streaming: ")  # seeding the next group now
        status, seconds = stop(seeding)
        log = seeding.stderr.read().decode()
    assert status == 128 + signal.SIGTERM and seconds < STOP_SECONDS and "Traceback" not in log


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "chartgw").exists(), reason="scripts/serve needs the checkout's .venv "
                    "(scripts/test makes it)")
def test_scripts_serve_stops_with_all_its_processes_on_sigterm(all_groups_data: Path, tmp_path: Path) -> None:
    """`kill -TERM` of scripts/serve alone stops it and its three processes (server, keep-fresh, monitor)."""
    data = copy_data(all_groups_data, tmp_path / "data")
    port = free_port()
    with started(["bash", str(ROOT / "scripts" / "serve"), "--port", str(port)], data,
                 CHARTGW_DEMO_REFRESH_SECONDS="3600") as script:
        wait_for(answers(f"http://127.0.0.1:{port}/korea-chart/health"), script)
        children = subprocess.run(["pgrep", "-g", str(script.pid)], capture_output=True, text=True).stdout.split()
        assert len(children) >= 4  # bash, keep-fresh, the monitor, the server
        status, seconds = stop(script)
        deadline = time.monotonic() + STOP_SECONDS
        while not group_gone(script.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert script.stderr is not None
        log = script.stderr.read().decode()
    assert status == 128 + signal.SIGTERM and seconds < STOP_SECONDS, log
    assert group_gone(script.pid), "a process of scripts/serve outlived it"
    assert "Traceback" not in log


LOST_IN_A_CALLBACK = """
import os, signal, time, weakref
from chartgw import cli

class Thing:
    pass

started = time.monotonic()
try:
    with cli._stopped_by_sigterm():
        thing = Thing()
        ref = weakref.ref(thing, lambda r: os.kill(os.getpid(), signal.SIGTERM))
        del thing  # the callback runs now: the handler's Stopped lands in it, where Python ignores it
        print("running after the lost one", flush=True)
        while time.monotonic() - started < 20:
            time.sleep(0.01)
except cli.Stopped:
    print("stopped", flush=True)
"""


def test_a_stop_lost_in_a_garbage_collector_callback_is_raised_again() -> None:
    """The exception of a signal handler that lands in a weakref callback or finaliser is lost (what happened to
    `chartgw demo` when SIGTERM came during a collection): it is raised again until it stops the command, and
    the lost one prints nothing."""
    done = subprocess.run([sys.executable, "-c", LOST_IN_A_CALLBACK], capture_output=True, text=True, timeout=60,
                          env=child_env())
    assert done.stdout.splitlines() == ["running after the lost one", "stopped"] and done.stderr == ""


@pytest.mark.parametrize(("raised", "status"), [
    (cli.Stopped(), 143),
    (KeyboardInterrupt(), 130),
    (BaseExceptionGroup("in a task group", [cli.Stopped()]), 143),
    (BaseExceptionGroup("in a task group", [BaseExceptionGroup("nested", [KeyboardInterrupt()])]), 130),
])
def test_an_interrupted_command_exits_quietly_even_from_a_task_group(
        raised: BaseException, status: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A stop raised in a task of a task group (anyio's, under httpx) arrives wrapped in an exception group."""
    def interrupted(ctx: object, values: object) -> list[Outcome]:
        raise raised

    tiny = Group(name="tiny", title="t", description="d", routes=(),
                 commands=(GroupCommand("backfill", "b", (), interrupted),))
    monkeypatch.setattr(cli, "GROUPS", (tiny,))
    assert cli.main(["backfill", "tiny"], run_settings()) == status
    assert "Traceback" not in capsys.readouterr().err


def test_a_failure_beside_a_stop_in_a_task_group_is_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    def both(ctx: object, values: object) -> list[Outcome]:
        raise BaseExceptionGroup("in a task group", [cli.Stopped(), RuntimeError("a bug")])

    tiny = Group(name="tiny", title="t", description="d", routes=(), commands=(GroupCommand("backfill", "b", (), both),))
    monkeypatch.setattr(cli, "GROUPS", (tiny,))
    with pytest.raises(BaseExceptionGroup):
        cli.main(["backfill", "tiny"], run_settings())


def test_what_an_object_cut_short_by_sigterm_says_when_freed_is_not_printed(tmp_path: Path) -> None:
    """asyncio.run stopped inside the event loop's constructor leaves a loop whose finaliser raises, freed only
    after `main` returned (with the exception's traceback): the quiet hook stays on once the command stops."""
    script = tmp_path / "cut_short.py"
    script.write_text(
        "import os, signal, sys\n"
        "from chartgw import cli\n"
        "class HalfBuilt:\n"
        "    def __del__(self):\n"
        "        raise AttributeError('half built')\n"
        "def command(args):\n"
        "    held = HalfBuilt()\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    signal.pause()\n"
        "cli.build_parser = lambda argv: type('P', (), {'parse_args': lambda self, argv: "
        "type('A', (), {'command': 'cut-short', 'func': staticmethod(command)})()})()\n"
        "sys.exit(cli.main([]))\n")
    done = subprocess.run([sys.executable, str(script)], env=child_env(), capture_output=True, timeout=60)
    said = done.stderr.decode()
    assert done.returncode == 128 + signal.SIGTERM and "half built" not in said and "Traceback" not in said, said
