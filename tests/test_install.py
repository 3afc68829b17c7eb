"""Installs anywhere: the wheel, built from the checkout, installed into a fresh virtualenv in a temporary folder,
run from another working folder with no CHARTGW_* setting: `chartgw demo --if-empty` (as `scripts/serve` runs it),
`chartgw serve` (a real process) and a few GETs, `chartgw cron` and one of its lines run as cron would (a crawl,
against a local replay server), `chartgw storage`. The data lands in the documented default folder, never in the
package or the working folder; the wheel holds every file of the package.

The default folder starts with the session's demo data of every group but three (`all_groups_data`, seeded from
the checkout by the same seeders): the wheel's demo seeds /korea-chart and /streaming, whose samples are the
package's two JSON files, and builds the /artist-history-api index over every group. Seeding the other twelve
again from the wheel would run the same code on the same samples (40 s of CPU); that the wheel holds them is
`test_the_wheel_holds_every_file_of_the_package`.

Packages come from pip's configured index at the versions of requirements.lock (no other network); the upstream is
replayed on 127.0.0.1. `-m "not install"` leaves it out of a quick local run; CI runs it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from chartgw.demo.samples.korea import all_replies
from chartgw.groups import GROUPS
from tests.fixtures import FIXED_NOW, free_port, replay_upstreams

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parents[1]
WHEEL_SEEDS = ("streaming", "korea-chart", "artist-history-api")
"""The groups the wheel's demo seeds, in the demo's order (the rest are copied from `all_groups_data`)."""


def run(args: list[str], **options: object) -> subprocess.CompletedProcess[str]:
    done: subprocess.CompletedProcess[str] = subprocess.run(args, capture_output=True, text=True, timeout=600,
                                                            **options)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh virtualenv with the wheel built from this checkout installed: its bin folder."""
    root = tmp_path_factory.mktemp("install")
    source = root / "source"  # a copy: building in the checkout would leave build/ and egg-info behind
    shutil.copytree(ROOT / "chartgw", source / "chartgw", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", source)
    quiet = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(root / "dist"), str(source)],
        env=quiet)
    (wheel,) = (root / "dist").glob("chartgw-*.whl")
    # A bare virtualenv, filled by this pip (`--python`): the same install as its own pip would make, without
    # seeding pip into it first (ensurepip, 4 s of CPU); nothing in it comes from the checkout but the wheel.
    run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")])
    # --no-compile: each process compiles what it imports, as it would if pip had not (pip's compiling of every
    # installed module, pygments and rich included, is half of this install's CPU).
    run([sys.executable, "-m", "pip", "--python", str(root / "venv" / "bin" / "python"), "install", "--quiet",
         "--no-compile", "--constraint", str(ROOT / "requirements.lock"), str(wheel)], env=quiet, cwd=root)
    yield root / "venv" / "bin"


def test_the_wheel_holds_every_file_of_the_package(installed: Path) -> None:
    (wheel,) = (installed.parents[1] / "dist").glob("chartgw-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        held = set(archive.namelist())
    package = {p.relative_to(ROOT).as_posix() for p in (ROOT / "chartgw").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert sorted(package - held) == []


def test_the_installed_wheel_runs_the_demo_server_crawl_and_cron_from_anywhere(installed: Path, tmp_path: Path,
                                                                              all_groups_data: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHARTGW_", "XDG_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(HOME=str(home), PATH=f"{installed}:/usr/bin:/bin", CHARTGW_CRAWL_DELAY_SECONDS="0")
    chartgw = str(installed / "chartgw")
    default = home / ".local" / "share" / "chartgw"
    default.mkdir(parents=True)
    for group in GROUPS:
        if group.name not in WHEEL_SEEDS:
            shutil.copy2(all_groups_data / f"{group.name}.sqlite", default)

    demo = run([chartgw, "demo", "--if-empty"], env=env, cwd=work)
    key = demo.stdout.strip()
    assert key.startswith("cgw_")
    assert f"demo data for {', '.join(WHEEL_SEEDS)}:" in demo.stderr
    assert (default / "korea-chart.sqlite").is_file() and (default / "artist-history-api.sqlite").is_file()
    assert list(work.iterdir()) == []  # nothing in the working folder
    site_packages = next((installed.parent / "lib").glob("python3.*/site-packages"))
    assert not (site_packages / "data").exists() and not list(site_packages.rglob("*.sqlite"))

    tab = run([chartgw, "cron"], env=env, cwd=work).stdout
    line = next(line for line in tab.splitlines() if " crawl korea-chart --site portal-a " in line)
    assert f" CHARTGW_DATA_DIR={default} {chartgw} crawl korea-chart --site portal-a --wait 240 >> {default}/crawl.log" in line
    command = shlex.join(shlex.split(line)[5:-3])  # what cron runs, without its schedule and log redirection
    with replay_upstreams({"MELON": all_replies(FIXED_NOW)["MELON"]}) as servers:
        upstream = {"CHARTGW_UPSTREAM_MELON": servers["MELON"].origin}
        crawled = run(["sh", "-c", f"{command} --json --at {FIXED_NOW:%Y-%m-%dT%H:%M:%S}"], env={**env, **upstream},
                      cwd=work)
    outcomes = json.loads(crawled.stdout)
    assert outcomes and all(o["status"] == "ok" and o["rows"] > 0 for o in outcomes)

    storage = json.loads(run([chartgw, "storage", "--json"], env=env, cwd=work).stdout)
    assert {r["file"] for r in storage} >= {"korea-chart.sqlite", "artist-history-api.sqlite", "keys.sqlite"}

    port = free_port()
    server = subprocess.Popen([chartgw, "serve", "--port", str(port)], env=env, cwd=work, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                front = httpx.get(base + "/", headers={"Accept": "application/json"}, timeout=5, trust_env=False)
                break
            except httpx.HTTPError:
                assert server.poll() is None and time.monotonic() < deadline, "chartgw serve did not start"
                time.sleep(0.2)
        assert front.status_code == 200 and len(front.json()["groups"]) > 10
        keyed = {"X-API-Key": key}
        for path in ("/korea-chart/portal-a/charts/realtime?limit=3", "/streaming/latest?limit=1",
                     "/artist-history-api/artist-history/coverage?name=Taylor%20Swift"):
            assert httpx.get(base + path, headers=keyed, timeout=30, trust_env=False).status_code == 200, path
        assert httpx.get(base + "/korea-chart/sites", timeout=5, trust_env=False).status_code == 401
        assert httpx.get(base + "/openapi.json", timeout=30, trust_env=False).json()["paths"]
        server.send_signal(signal.SIGTERM)
        assert server.wait(10) == 0
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
