"""Settings read from the environment, so one process image serves tests, demo and production."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

# Real upstream origins. `CHARTGW_UPSTREAM_<NAME>` replaces scheme, host and port; the path and
# query of each request stay exactly as the real site's, so a mirror or a replay server can stand in.
UPSTREAM_ORIGINS: dict[str, str] = {
    "MELON": "https://www.melon.com",
    "GENIE": "https://www.genie.co.kr",
    "GENIE_APP": "https://app.genie.co.kr",
    "BUGS": "https://music.bugs.co.kr",
    "FLO": "https://www.music-flo.com",
    "VIBE": "https://apis.naver.com",
}


def data_dir() -> Path:
    return Path(os.environ.get("CHARTGW_DATA_DIR", "data"))


def upstream_origin(name: str) -> str:
    """The scheme://host[:port] to use for upstream `name`, honouring the override variable."""
    override = os.environ.get(f"CHARTGW_UPSTREAM_{name}")
    if not override:
        return UPSTREAM_ORIGINS[name]
    parts = urlsplit(override)
    if not parts.scheme or not parts.netloc:
        raise ValueError(f"CHARTGW_UPSTREAM_{name} must be an origin like http://127.0.0.1:9000, got {override!r}")
    return f"{parts.scheme}://{parts.netloc}"


def env_api_keys() -> list[str]:
    """Plain keys from `CHARTGW_API_KEYS` (comma-separated), for simple deployments."""
    return [k.strip() for k in os.environ.get("CHARTGW_API_KEYS", "").split(",") if k.strip()]
