"""chartgw.core.locks: the one file lock (crawls, the webhook worker, export writers), held by a real second process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from chartgw.core.locks import file_lock

HOLDER = """
import sys
from pathlib import Path
from chartgw.core.locks import file_lock
with file_lock(Path(sys.argv[1])) as held:
    print(held, flush=True)
    sys.stdin.read()
"""


def test_a_lock_another_process_holds_is_refused_then_taken_once_it_ends(tmp_path: Path) -> None:
    path = tmp_path / "folder" / "group.lock"  # the folder is made
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "True"
        with file_lock(path) as held:
            assert held is False
        with file_lock(path, wait_seconds=0.5) as held:  # waited, still held
            assert held is False
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
    with file_lock(path, wait_seconds=None) as held, file_lock(path) as again:
        assert held is True
        assert again is False  # one holder even within a process: each open file description locks on its own
