"""The radio monitor's cost per stream: `python -m chartgw.demo.radio_bench STREAMS [--run-for S] [--icy-mode stream]`
watches STREAMS local ICY sample streams, served (paced at 128 kbit/s) by a child process, and prints JSON; `--smoke`
runs it at a size of seconds (tests/test_bench.py). It lives with the demo because the streams are samples
(`chartgw.demo.samples.radio`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from chartgw.core.settings import Settings
from chartgw.groups.radio.monitor import Monitor
from chartgw.groups.radio.storage import Watched

BENCH_SERVER = """
import json, sys
from chartgw.demo.samples.radio import Mount, RadioStreamServer, station_schedule
n = int(sys.argv[1])
mounts = [Mount(f"/s{i}.mp3", f"Bench {i}", station_schedule(f"Bench {i}", str(i), 30.0)) for i in range(n)]
server = RadioStreamServer("icy", mounts).start()
print(json.dumps([server.stream_url(m.path) for m in mounts]), flush=True)
sys.stdin.read()
server.stop()
"""


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


async def bench(streams: int, seconds: float, icy_mode: str, poll_seconds: float) -> dict[str, float]:
    """The monitor's own cost watching `streams` ICY streams served (paced at 128 kbit/s) by another process:
    CPU seconds per second of this process (1.0 = one core), resident memory and its growth per stream."""
    import resource

    server = subprocess.Popen([sys.executable, "-c", BENCH_SERVER, str(streams)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        urls = json.loads(server.stdout.readline())
        with tempfile.TemporaryDirectory() as folder:
            stations = [Watched(f"b{i}", f"Bench {i}", url, "US") for i, url in enumerate(urls)]
            monitor = Monitor(settings=Settings(), stations=stations, path=Path(folder) / "radio.sqlite",
                              poll_seconds=poll_seconds, read_timeout=15.0, icy_mode=icy_mode, heartbeat_seconds=30.0)
            base_rss = _rss_kb()
            task = asyncio.create_task(monitor.run())
            await asyncio.sleep(min(10.0, seconds / 3))  # connected and past the first readings
            cpu0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
            await asyncio.sleep(seconds)
            cpu1, wall1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
            rss = _rss_kb()
            monitor.stop()
            await task
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=30)
    used = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    return {"streams": streams, "core_share": used / (wall1 - wall0), "cpu_ms_per_stream_second": 1000 * used /
            (wall1 - wall0) / streams, "rss_mb": rss / 1024, "rss_kb_per_stream": (rss - base_rss) / streams,
            "readings": monitor.report.readings, "plays": monitor.report.plays, "failures": monitor.report.failures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chartgw.demo.radio_bench")
    parser.add_argument("streams", type=int, nargs="?", help="local ICY streams to watch (served by a child process)")
    parser.add_argument("--run-for", type=float, default=60.0, help="seconds measured (default 60)")
    parser.add_argument("--icy-mode", choices=("poll", "stream"), default="poll")
    parser.add_argument("--poll-seconds", type=float, default=20.0)
    parser.add_argument("--smoke", action="store_true",
                        help="2 streams polled every second for 1 s (tests/test_bench.py: the benchmark still runs)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.streams, args.run_for, args.poll_seconds = 2, 1.0, 1.0
    elif args.streams is None:
        parser.error("STREAMS is required (or --smoke)")
    print(json.dumps(asyncio.run(bench(args.streams, args.run_for, args.icy_mode, args.poll_seconds))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
