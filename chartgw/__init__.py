"""chartgw: a music chart aggregation gateway."""

import sys

# httpx imports its command-line client whenever click, rich and pygments are installed (uvicorn brings click, rich
# is ours): 60 ms of every chartgw process's start, and the suite starts about two hundred. No chartgw process runs
# httpx's command line, so `httpx._main` is marked absent: httpx then defines the stub `main` it uses when those
# libraries are missing.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None marks a module as not importable
