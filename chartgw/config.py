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
    "SPOTIFY": "https://charts-spotify-com-service.spotify.com",
    "YOUTUBE": "https://charts.youtube.com",
    "ITUNES": "https://itunes.apple.com",
    "SHAZAM": "https://www.shazam.com",
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


class SettingError(ValueError):
    """A CHARTGW_* setting holds a value the code cannot use; the server answers 503 naming it."""


def setting(name: str, default: str = "") -> str:
    """`CHARTGW_<name>` from the environment, stripped; `default` when unset or blank."""
    return os.environ.get(f"CHARTGW_{name}", "").strip() or default


def country_list(name: str, default: str) -> tuple[str, ...]:
    """A comma-separated country setting (`CHARTGW_<name>`), each "global" or an ISO alpha-2 code, lowercased.

    An unknown code is a SettingError naming the setting, so a typo fails the crawl loudly.
    """
    from chartgw.countries import country_code

    values = [v.strip() for v in setting(name, default).split(",") if v.strip()]
    try:
        return tuple(dict.fromkeys(country_code(v) for v in values))
    except ValueError as exc:
        raise SettingError(f"CHARTGW_{name}: {exc}") from None
